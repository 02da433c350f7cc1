"""The tile layer at the tile sizes real kernels use: tensor-core accumulators in registers,
ldmatrix fragments, cp.async pipelines, 128-bit accesses, rows spread over warps.

Kernels are the corpus's cuTile sources exported the way cuTile's launcher specializes real
tensors (contiguous, 16-byte aligned, shapes divisible by 16), at realistic tile sizes. Each
runs on the PTX emulator with the race checker against numpy, and its PTX is checked for the
instructions the tile layer promises (and ptxas's report for spills).
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import corpus_kernels  # noqa: E402


def _array(dtype, ndim: int):
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(dtype=dtype, ndim=ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False,
                           stride_constant=tuple([None] * (ndim - 1) + [1]), shape_divisible_by=16,
                           stride_divisible_by=tuple([8] * (ndim - 1) + [1]), base_addr_divisible_by=16)


def _export(function, params: list) -> bytes:
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    buf = io.BytesIO()
    export_kernel(function, [KernelSignature(parameters=params, calling_convention=CallingConvention.cutile_python_v1())],
                  buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code="sm_90")
    return buf.getvalue()


@lru_cache(maxsize=None)
def _matmul(dtype: str, acc: str, tm: int, tn: int, tk: int) -> bytes:
    import cuda.tile as ct
    from cuda.tile.compilation import ConstantConstraint

    d, a = getattr(ct, dtype), getattr(ct, acc)
    return _export(corpus_kernels.load("matmul").matmul, [_array(d, 2), _array(d, 2), _array(a, 2), ConstantConstraint(tm),
                                               ConstantConstraint(tn), ConstantConstraint(tk)])


@lru_cache(maxsize=None)
def _attention(seq: int, head: int, bq: int, bk: int) -> bytes:
    import cuda.tile as ct
    from cuda.tile.compilation import ConstantConstraint, ScalarConstraint

    return _export(corpus_kernels.load("matmul").attention, [_array(ct.float16, 3)] * 4 + [
        ScalarConstraint(ct.float32), ConstantConstraint(seq), ConstantConstraint(head), ConstantConstraint(bq),
        ConstantConstraint(bk)])


def _module(data: bytes):
    from tileiras.frontend import load_module

    return load_module(data, "kernel.tileirbc")


def _entry(module) -> str:
    return next(str(op.attributes["sym_name"]) for op in module.regions[0].block.operations
                if op.name == "cuda_tile.entry")


def _ptx(data: bytes, gpu: str, tmp_path: Path, dump: list[str] | None = None) -> str:
    """The PTX; `dump` gets the --print-ir-after-all lines where given."""
    src = tmp_path / "k.tileirbc"
    src.write_bytes(data)
    out = tmp_path / f"k_{gpu}.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", gpu,
                           *(["--print-ir-after-all"] if dump is not None else []), str(src), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    if dump is not None:
        dump += done.stderr.splitlines()
    return out.read_text()


def _scratch_buffers(dump: list[str]) -> list[str]:
    """The shared buffers of a layout conversion or a reduction in a kernel's plan (tileas/buffers.py)."""
    return [line for line in dump if line.lstrip("/ ").startswith(("conversion ", "reduction "))]


def _ptxas_report(ptx: str, gpu: str, tmp_path: Path) -> str:
    from tileiras.codegen.ptxas import find_ptxas

    target = re.search(r"^\.target (sm_\w+)", ptx, re.M)
    if target and target.group(1) == gpu + "a":   # the compiler chose the arch-specific variant (setmaxnreg, ...)
        gpu = target.group(1)
    path = tmp_path / "r.ptx"
    path.write_text(ptx)
    done = subprocess.run([find_ptxas(), "-v", "-arch", gpu, str(path), "-o", str(tmp_path / "r.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


MATMULS = [  # (inputs, accumulator, TM, TN, TK): the default tiles of real cuTile matmuls
    ("float16", "float32", 128, 128, 64),
    ("bfloat16", "float32", 128, 128, 32),
    ("float16", "float32", 128, 256, 64),
    ("int8", "int32", 128, 128, 64),
    ("float16", "float32", 64, 64, 32),
]


def _inputs(dtype: str, m: int, n: int, k: int):
    import ml_dtypes

    rng = np.random.default_rng(7)
    if dtype == "int8":
        a, b = rng.integers(-8, 8, (m, k)).astype(np.int8), rng.integers(-8, 8, (k, n)).astype(np.int8)
        return a, b, np.zeros((m, n), np.int32)
    np_type = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn}[dtype]
    a, b = rng.standard_normal((m, k)).astype(np_type), rng.standard_normal((k, n)).astype(np_type)
    return a, b, np.zeros((m, n), np.float32)


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
@pytest.mark.parametrize("config", MATMULS, ids=lambda c: f"{c[0]}-{c[2]}x{c[3]}x{c[4]}")
def test_matmul_matches_numpy_under_the_race_checker(config, gpu) -> None:
    from tileiras.runtime import run_arrays

    dtype, acc, tm, tn, tk = config
    module = _module(_matmul(dtype, acc, tm, tn, tk))
    m, n, k = tm, 2 * tn, 4 * tk   # a K loop of 4 iterations: the pipeline fills, runs and drains
    a, b, c = _inputs(dtype, m, n, k)
    out = run_arrays(module, _entry(module), (m // tm, n // tn, 1), [a, b, c], backend="emulator", gpu_name=gpu,
                     check_races=True)[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "int8":
        assert np.array_equal(out, ref.astype(np.int32))
    else:
        assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


@lru_cache(maxsize=None)
def _matmul_tf32() -> bytes:
    import cuda.tile as ct

    return _export(corpus_kernels.load("matmul").matmul_tf32, [_array(ct.float32, 2)] * 3)


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_tf32_operands_are_copied_asynchronously_and_rounded_in_their_fragments(gpu, tmp_path: Path) -> None:
    from tileiras.runtime import run_arrays

    data = _matmul_tf32()
    ptx = _ptx(data, gpu, tmp_path)
    assert "cp.async" in ptx and "mma.sync.aligned.m16n8k8" in ptx and "tf32" in ptx
    module = _module(data)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)
    c = np.zeros((64, 64), np.float32)
    out = run_arrays(module, _entry(module), (2, 2, 1), [a, b, c], backend="emulator", gpu_name=gpu,
                     check_races=True)[2]
    ref = run_arrays(module, _entry(module), (2, 2, 1), [a, b, c.copy()], backend="interpreter")[2]
    assert np.abs(out - ref).max() <= 1e-4   # the same tf32 rounding as the interpreter's ftof


@pytest.mark.parametrize("gpu", ["sm_90", "sm_120"])
def test_fp8_matmul_runs_on_tensor_cores(gpu, tmp_path: Path) -> None:
    """The e4m3 products are exact in f32: sm_120's mma.sync (at least single precision) sums them exactly here;
    sm_90's wgmma accumulates fp8 below single precision (the PTX ISA; the emulator's fp8_accumulate), so its
    result is compared within the bound of that accumulation (tests/accumulation.py)."""
    from tileiras.runtime import run_arrays

    data = _matmul("float8_e4m3fn", "float32", 128, 128, 64)
    ptx = _ptx(data, gpu, tmp_path)
    if gpu == "sm_90":   # QGMMA: wgmma k32 reads the e4m3 bytes by descriptor
        assert "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in ptx
    else:
        # the e4m3 instruction itself, the operands copied to shared memory as bytes (never a whole
        # tile converted in registers: that spilled), no spills
        assert "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" in ptx
        assert re.search(r"cp\.async\.c[ag]\.shared\.global", ptx) and "cvt.rn.f16" not in ptx
        assert "0 bytes spill stores" in _ptxas_report(ptx, gpu, tmp_path)
    module = _module(data)
    a, b, c = _inputs("float8_e4m3fn", 128, 128, 128)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c], backend="emulator", gpu_name=gpu,
                     check_races=True)[2]
    want = (a.astype(np.float64) @ b.astype(np.float64))
    if gpu == "sm_120":
        assert np.array_equal(out, want.astype(np.float32))
    else:
        from accumulation import accumulator, assert_accumulated

        assert_accumulated(np.asarray(out, np.float64), want, a.astype(np.float64), b.astype(np.float64).T,
                           accumulator("f32", "e4m3", gpu))


@pytest.mark.parametrize("gpu", ["sm_80", "sm_86", "sm_89", "sm_90", "sm_120"])   # sm_100: test_tcgen05_lowering
def test_matmul_128x128x64_keeps_its_accumulator_in_registers(gpu, tmp_path: Path) -> None:
    ptx = _ptx(_matmul("float16", "float32", 128, 128, 64), gpu, tmp_path)
    if gpu == "sm_90":   # one warpgroup, two m64n128k16 per K step of 16, operands read by descriptor
        assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16") == 8
        assert ".target sm_90a" in ptx and "fence.proxy.async" in ptx and "ldmatrix" not in ptx
    else:
        assert ptx.count("mma.sync.aligned.m16n8k16") == 128           # 4 warps x 64x64 each x 4 K steps
        assert ptx.count("ldmatrix.sync.aligned") == 32                 # A: 4 x4 loads, B: 4 x4.trans per K step
    # operands never pass through registers: cp.async, or on sm_90 / sm_120 TMA (test_tma_pipeline.py)
    tma = gpu in ("sm_90", "sm_120")
    assert ("cp.async.bulk.tensor.2d.shared::cta.global" if tma else "cp.async.cg.shared.global") in ptx
    # the modulo scheduler's depth (tensor-bound II, copies landing 1-3 IIs later; schedule/), cut to
    # 2 stages where 99 KB of shared memory do not hold the 3 that sm_86/89 want
    stages = {"sm_80": 3, "sm_86": 2, "sm_89": 2, "sm_90": 4, "sm_100": 3, "sm_120": 2}[gpu]
    if gpu in ("sm_90", "sm_100", "sm_120"):   # full/empty mbarriers per stage (test_mbarrier_pipeline.py)
        arrival = "mbarrier.arrive.expect_tx" if tma else "cp.async.mbarrier.arrive.noinc"
        assert ptx.count("mbarrier.try_wait.parity") >= 1 and arrival in ptx
    else:
        assert re.search(rf"cp\.async\.wait_group\s+{stages - 2};", ptx)
    # sm_90 / sm_120: a producer warp(group) beside the consumer warpgroup (warp_specialize.py), which
    # gives registers back as NVIDIA's does on both (setmaxnreg: the arch-specific target)
    assert f".reqntid {256 if tma else 128}, 1, 1" in ptx
    assert ("setmaxnreg.dec" in ptx and f".target {gpu}a" in ptx) == tma
    report = _ptxas_report(ptx, "sm_90a" if gpu == "sm_90" else gpu, tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report, report


def test_sm90_matmuls_use_warpgroup_mma_where_the_tiles_allow(tmp_path: Path) -> None:
    wide = _ptx(_matmul("float16", "float32", 128, 256, 64), "sm_90", tmp_path)
    assert wide.count("wgmma.mma_async.sync.aligned.m64n256k16") == 4      # 2 warpgroups, 4 K steps
    assert ".reqntid 384, 1, 1" in wide          # and the pipeline's producer warpgroup (warp_specialize.py)
    narrow_k = _ptx(_matmul("bfloat16", "float32", 128, 128, 32), "sm_90", tmp_path)
    assert narrow_k.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 4   # K = 32: 64B swizzle
    assert "mma.sync" not in narrow_k


@lru_cache(maxsize=None)
def _matmul_without_facts() -> bytes:
    """128x128x64 f16 with arrays of unknown alignment: no cp.async, the tiles reach wgmma's
    swizzled buffers through registers and st.shared (the generic proxy; the producer warps' stages,
    stage_rings.producer_stages)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, ConstantConstraint

    def loose(dtype):
        return ArrayConstraint(dtype=dtype, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False)
    return _export(corpus_kernels.load("matmul").matmul, [loose(ct.float16), loose(ct.float16), loose(ct.float32),
                                               ConstantConstraint(128), ConstantConstraint(128), ConstantConstraint(64)])


def test_wgmma_from_registers_matches_numpy_and_needs_its_proxy_fence(monkeypatch, tmp_path: Path) -> None:
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault
    from tileiras.lowering import async_copy, ops_wgmma, pipelined_loop
    from tileiras.runtime import run_arrays

    module = _module(_matmul_without_facts())
    a, b, c = _inputs("float16", 128, 128, 128)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c.copy()], backend="emulator", gpu_name="sm_90",
                     check_races=True)[2]
    assert np.abs(out - a.astype(np.float64) @ b.astype(np.float64)).max() < 1e-3
    # mutation: without fence.proxy.async the st.shared writes are not visible to wgmma's async proxy
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    for where in (async_copy, ops_wgmma, pipelined_loop):   # pipelined_loop: the producer's element stores
        monkeypatch.setattr(where, "fence_async_proxy", lambda k: None)
    with pytest.raises((DeviceFault, TileirasError), match="fence"):
        run_arrays(module, _entry(module), (1, 1, 1), [a, b, c], backend="emulator", gpu_name="sm_90",
                   check_races=True)


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_flash_attention_matches_numpy(gpu) -> None:
    from tileiras.runtime import run_arrays

    seq, head, bq, bk = 256, 64, 128, 64
    module = _module(_attention(seq, head, bq, bk))
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, seq, head)).astype(np.float16) for _ in range(3))
    o = np.zeros_like(q)
    scale = np.float32(1 / np.sqrt(head))
    out = run_arrays(module, _entry(module), (seq // bq, 1, 1), [q, k, v, o, np.array(scale)], backend="emulator",
                     gpu_name=gpu, check_races=True)[3]
    s = q[0].astype(np.float64) @ k[0].astype(np.float64).T * scale
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v[0].astype(np.float64)
    assert np.abs(out[0] - ref).max() < 2e-3


@pytest.mark.parametrize("config", [(4096, 64, 128, 64), (4096, 128, 128, 128)], ids=lambda c: f"d{c[1]}-{c[2]}x{c[3]}")
@pytest.mark.parametrize("gpu", ["sm_80", "sm_86", "sm_90", "sm_120"])
def test_flash_attention_scores_stay_in_registers(config, gpu, tmp_path: Path) -> None:
    dump: list[str] = []
    ptx = _ptx(_attention(*config), gpu, tmp_path, dump)
    # the row max and sum of the scores are quad shuffles, P feeds the second mma from registers:
    # nothing goes through the scratch, and the barriers are those of the K/V copies (and the two of
    # the epilogue, which stages the output in the freed buffers for 16-byte stores)
    assert "shfl.sync.bfly" in ptx
    assert any("shared buffers:" in line for line in dump)
    assert not _scratch_buffers(dump)
    assert ptx.count("bar.sync") <= 7, ptx.count("bar.sync")
    # sm_90: the warp-specialized pipeline's setmaxnreg makes it sm_90a code (test_mbarrier_pipeline.py)
    report = _ptxas_report(ptx, "sm_90a" if ".target sm_90a" in ptx else gpu, tmp_path)
    assert "0 bytes spill stores" in report, report


def test_a_pipeline_without_its_wait_is_reported_as_a_race(monkeypatch, tmp_path: Path) -> None:
    """Mutation: waiting for one copy group too few lets the mma read a stage still being filled."""
    from tileiras.emulator.errors import DeviceFault
    from tileiras.errors import TileirasError
    from tileiras.lowering import pipelined_loop
    from tileiras.runtime import run_arrays

    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))   # never cache the broken code
    real = pipelined_loop.wait_groups
    monkeypatch.setattr(pipelined_loop, "wait_groups", lambda k, pending: real(k, pending + 1))
    module = _module(_matmul("float16", "float32", 64, 64, 32))
    a, b, c = _inputs("float16", 64, 64, 256)
    with pytest.raises((DeviceFault, TileirasError), match="race|before"):
        run_arrays(module, _entry(module), (1, 1, 1), [a, b, c], backend="emulator", gpu_name="sm_80",
                   check_races=True)


REALISTIC = ROOT / "tests" / "realistic" / "bytecode"


def _realistic_ptx(name: str, gpu: str, tmp_path: Path, dump: list[str] | None = None) -> tuple[str, dict]:
    """PTX and launch metadata of one realistic configuration (tests/realistic); `dump` gets the
    --print-ir-after-all lines where given."""
    import json

    out = tmp_path / f"{name}_{gpu}.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--emit-metadata",
                           *(["--print-ir-after-all"] if dump is not None else []),
                           "--gpu-name", gpu, str(REALISTIC / f"{name}.tileirbc"), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    if dump is not None:
        dump += done.stderr.splitlines()
    return out.read_text(), json.loads(Path(f"{out}.json").read_text())["kernels"][0]


@pytest.mark.parametrize("name", ["fa_f16_q128k64d128_causal", "fa_f16_q128k128d128_causal"])
def test_causal_head128_attention_fits_99kb_with_its_mask_in_fragments(name, tmp_path: Path) -> None:
    """The causal mask (row and column iotas, broadcast and compared) is built in the mma fragment
    layout of the scores: no scratch converts it, so Q, K and V (96 KB) fit sm_86's 99 KB."""
    dump: list[str] = []
    ptx, meta = _realistic_ptx(name, "sm_86", tmp_path, dump)
    assert any("shared buffers:" in line for line in dump)
    assert not _scratch_buffers(dump)
    assert meta["dynamic_smem"] <= 101376, meta["dynamic_smem"]
    assert "0 bytes spill stores" in _ptxas_report(ptx, "sm_86", tmp_path)


@pytest.mark.parametrize("config", [("fa_f16_q128k64d128_causal", "sm_86"), ("fa_f16_q64k64d64_causal", "sm_90")])
def test_causal_attention_matches_numpy(config) -> None:
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    name, gpu = config
    bq, head = (128, 128) if "q128" in name else (64, 64)
    module = load_module(str(REALISTIC / f"{name}.tileirbc"))
    seq = 2 * bq
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, seq, head)).astype(np.float16) for _ in range(3))
    scale = np.float32(1 / np.sqrt(head))
    out = run_arrays(module, _entry(module), (seq // bq, 1, 1), [q, k, v, np.zeros_like(q), np.array(scale)],
                     backend="emulator", gpu_name=gpu, check_races=True)[3]
    s = q[0].astype(np.float64) @ k[0].astype(np.float64).T * scale
    s = np.where(np.arange(seq)[:, None] >= np.arange(seq)[None, :], s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v[0].astype(np.float64)
    assert np.abs(out[0] - ref).max() < 2e-3


@pytest.mark.parametrize("name", ["mm_tf32_128x128x64", "mm_tf32_256x128x64", "mm_e4m3_128x128x64"])
def test_wide_operand_matmuls_do_not_spill_on_sm120(name, tmp_path: Path) -> None:
    """tf32 and e4m3 operands come from shared memory without a register per copied chunk or per
    fragment address, and fp8 tiles are never held whole in registers: no spills (NVIDIA's has none)."""
    ptx, _ = _realistic_ptx(name, "sm_120", tmp_path)
    report = _ptxas_report(ptx, "sm_120", tmp_path)
    assert "0 bytes spill stores" in report, report


# (sm_120 stores the tf32 128x128 accumulator by TMA now, as NVIDIA's: epilogue_forms._tma_staging)
@pytest.mark.parametrize("config", [("mm_f16_128x128x64", "sm_80", 16), ("mm_tf32_128x128x64", "sm_80", 32),
                                    ("fa_f16_q128k64d128_causal", "sm_86", 8),
                                    ("mm_i8_128x128x32", "sm_80", 32), ("mm_tf32_128x256x64", "sm_120", 32)])
def test_mma_epilogue_stores_16_bytes(config, tmp_path: Path) -> None:
    """The accumulator's store is restaged through the freed buffers into 16-byte runs: only 16-byte
    global stores, as many as 16-byte pieces of the output per thread. An accumulator larger than
    the freed buffers (i32 128x128: 64 KB over 32 KB of stages; f32 128x256) is restaged a chunk
    of rows at a time (the emulator runs mm_i8_128x256x64 so in test_realistic_emulator)."""
    name, gpu, stores = config
    ptx, _ = _realistic_ptx(name, gpu, tmp_path)
    widths = [int(v or "1") * int(bits) for v, bits in re.findall(r"st\.global(?:\.v(\d))?\.b(\d+)", ptx)]
    assert widths and set(widths) == {128}, set(widths)
    assert len(widths) == stores


@pytest.mark.parametrize("name", ["softmax_f16_n4096_r1", "layernorm_f16_n4096", "rmsnorm_bf16_n4096"])
def test_row_kernels_access_coalesced_runs(name, tmp_path: Path) -> None:
    """Rows in warps deal their 16-byte runs round the lanes: a thread's successive accesses of a
    4096-column row are a whole CTA's worth (128 threads x 16 bytes) apart, so each warp access
    covers 512 contiguous bytes (contiguous per lane they were 16 bytes apart, a warp's access
    spanning 32 separate segments)."""
    ptx, _ = _realistic_ptx(name, "sm_80", tmp_path)
    for kind in ("ld", "st"):
        offsets = [int(off or 0) for off in re.findall(rf"{kind}\.global\.v4\.b32\s+[^\[]*\[%rd\d+(?:\+(\d+))?\]", ptx)]
        assert offsets and set(offsets) <= {0, 2048, 4096, 6144}, (kind, offsets)
