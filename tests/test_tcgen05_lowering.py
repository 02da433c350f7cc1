"""Blackwell tcgen05 matmuls (lowering/ops_tcgen05.py, lowering/tmem.py): the selection on sm_100 /
sm_103, the instruction and shared-memory descriptors, PTX that ptxas assembles into the UTC*MMA
family without spills, and the emulator running our sm_100 code against numpy under the race
checker (tensor memory, the commit mbarrier, the 16x256b fragment loads)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import sass  # noqa: E402
from tileiras.target import with_feature  # noqa: E402
from test_tile_layer import _entry, _inputs, _matmul, _module, _ptx, _ptxas_report  # noqa: E402

REALISTIC = ROOT / "tests" / "realistic" / "bytecode"


def test_descriptors_follow_the_sm100_formats() -> None:
    from tileiras.emulator.ops.tcgen05 import decode_idesc
    from tileiras.lowering.ops_tcgen05 import instruction
    from tileiras.tileaa.mma_forms import KINDS

    f = decode_idesc(instruction(KINDS[("bf16", "bf16", "f32")], 128, 256), "f16")
    assert (f["a"][0], f["b"][0], f["d"], f["m"], f["n"], f["trans_a"], f["trans_b"]) == \
        ("bf16", "bf16", "f32", 128, 256, 0, 1)
    f = decode_idesc(instruction(KINDS[("i8", "i8", "i32")], 64, 64), "i8")
    assert (f["a"][0], f["d"], f["m"], f["n"]) == ("s8", "s32", 64, 64)
    # what NVIDIA's tileiras encodes for its f16 128x128 tile (captured from its PTX)
    assert instruction(KINDS[("f16", "f16", "f32")], 128, 128) == 0x8210010


@pytest.mark.parametrize("gpu", [row.name for row in with_feature("tcgen05")])   # sm_100, sm_103, sm_110
def test_matmul_runs_on_tcgen05_with_its_accumulator_in_tensor_memory(gpu: str, tmp_path: Path) -> None:
    ptx = _ptx(_matmul("float16", "float32", 128, 128, 64), gpu, tmp_path)
    assert f".target {gpu}a" in ptx
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == 4            # K = 64 in steps of 16
    for piece in ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32", "tcgen05.relinquish_alloc_permit",
                  "tcgen05.dealloc.cta_group::1", "tcgen05.commit.cta_group::1.mbarrier::arrive::one",
                  "mbarrier.try_wait.parity", "tcgen05.ld.sync.aligned.16x256b.x4.b32",
                  "tcgen05.wait::ld", "tcgen05.fence::before_thread_sync",
                  # the stages are filled by TMA (one thread; the bytes announced on the full barrier)
                  "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes",
                  "mbarrier.arrive.expect_tx"):
        assert piece in ptx, piece
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    # the accumulator stays in tensor memory through the K loop: never stored from registers (the first
    # MMA of the first iteration ignores the old contents), read once after the loop: 4 column chunks
    # of 32 columns (tmem_epilogue.py), each a load per 16-row block of the warp's 32 rows
    assert "tcgen05.st" not in ptx and ptx.count("tcgen05.ld.sync") == 8
    report = _ptxas_report(ptx, f"{gpu}a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report, report


def _realistic_sass(name: str, gpu: str, tmp_path: Path) -> dict:
    cubin = tmp_path / f"{name}.cubin"
    done = subprocess.run([sys.executable, "-m", "tileiras", "--gpu-name", gpu, str(REALISTIC / f"{name}.tileirbc"),
                           "-o", str(cubin)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return sass.functions(cubin)


@pytest.mark.skipif(sass.CUOBJDUMP is None, reason="cuobjdump is not installed")
@pytest.mark.parametrize("name", ["mm_f16_128x256x64", "mm_bf16_256x128x64"])
def test_realistic_matmuls_show_the_utcmma_family(name: str, tmp_path: Path) -> None:
    code = _realistic_sass(name, "sm_100", tmp_path)
    opcodes = [op for ops in code.values() for op in ops]
    assert any(op.startswith("UTCHMMA") for op in opcodes)
    assert not any(op.startswith(("HMMA", "LDL", "STL")) for op in opcodes)


SM100_MATMULS = [   # (inputs, TM, TN, TK): every swizzle span, both M = 128 halves, M = 64's lane layout
    ("float16", 128, 128, 64), ("bfloat16", 128, 256, 64), ("float16", 256, 128, 64), ("bfloat16", 128, 128, 32),
    ("float16", 64, 64, 32), ("float8_e4m3fn", 128, 128, 64), ("float8_e4m3fn", 64, 64, 32), ("int8", 128, 128, 64),
]


@pytest.mark.parametrize("config", SM100_MATMULS, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}x{c[3]}")
def test_sm100_matmul_matches_numpy_under_the_race_checker(config, tmp_path: Path) -> None:
    from tileiras.runtime import run_arrays

    dtype, tm, tn, tk = config
    data = _matmul(dtype, "int32" if dtype == "int8" else "float32", tm, tn, tk)
    assert "tcgen05.mma" in _ptx(data, "sm_100", tmp_path)
    module = _module(data)
    m, n, k = tm, tn, 3 * tk        # a K loop of 3 iterations: the accumulator goes round tensor memory
    a, b, c = _inputs(dtype, m, n, k)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c], backend="emulator", gpu_name="sm_100",
                     check_races=True)[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "int8":
        assert np.array_equal(out, ref.astype(np.int32))
    else:
        assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def test_tiles_tcgen05_cannot_take_stay_on_mma_sync(tmp_path: Path) -> None:
    data = _matmul("float16", "float32", 32, 64, 32)
    short = _ptx(data, "sm_100", tmp_path)   # M = 32: no cta_group::1 shape
    # sm_100a: the warp roles' setmaxnreg (mma.sync consumers beside a TMA producer warp, as sm_120's)
    assert "tcgen05" not in short and "mma.sync" in short and ".target sm_100a\n" in short
    assert "setmaxnreg" in short
    src = tmp_path / "short.tileirbc"
    src.write_bytes(data)
    done = subprocess.run([sys.executable, "-m", "tileiras", "--gpu-name", "sm_100", str(src), "--emit=ptx", "-o",
                           str(tmp_path / "short.ptx"), "--remarks=tensorcore"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "not tcgen05.mma: no cta_group::1 instruction computes a 32 x 64 tile" in done.stdout + done.stderr, \
        done.stdout + done.stderr


def test_the_reason_an_mma_stays_off_tcgen05_is_layout_assignments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Layout assignment records why each mma of a tcgen05 target stays on mma.sync, beside the chosen
    layouts (`LayoutAssignment.tcgen05_refused`); the lowering's remark only reads it, deciding nothing again."""
    from tileiras import remarks
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module
    from tileiras.tileas import tcgen05_select

    choose_all = tcgen05_select.choose_all

    def recorded(*args: object, **kw: object) -> tuple:
        chosen, refused = choose_all(*args, **kw)   # type: ignore[arg-type]
        assert set(refused) and "32 x 64 tile" in next(iter(refused.values())), refused
        return chosen, {op: "the reason recorded beside the layouts" for op in refused}

    monkeypatch.setattr(tcgen05_select, "choose_all", recorded)
    with remarks.collecting() as said:
        lower_module(load_module(_matmul("float16", "float32", 32, 64, 32), "short.tileirbc"), "sm_100")
    reasons = [dict(r.args).get("Reason") for r in said if r.name == "RemarkTensorCoreMMA"]
    assert reasons == ["not tcgen05.mma: the reason recorded beside the layouts"], reasons


def test_the_reason_an_mma_stays_off_tcgen05_is_in_the_layouts_dump(capsys: pytest.CaptureFixture) -> None:
    """--print-ir-after-all: the layouts of a tcgen05 target's kernel say why each mma left on mma.sync
    stays off tcgen05 (`LayoutAssignment.tcgen05_refused`), as its remark does; a target without
    tcgen05 records no reason."""
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    data = _matmul("float16", "float32", 32, 64, 32)
    lower_module(load_module(data, "short.tileirbc"), "sm_100", print_ir_after_all=True)
    layouts = capsys.readouterr().err.split("// layouts of @", 1)[1].split("IR Dump After", 1)[0]
    assert re.search(r"//   %\w+ not on tcgen05\.mma: no cta_group::1 instruction computes a 32 x 64 tile", layouts), \
        layouts
    lower_module(load_module(data, "short.tileirbc"), "sm_90", print_ir_after_all=True)
    assert "not on tcgen05" not in capsys.readouterr().err


@pytest.mark.parametrize("name,tile", [("bmm_f16_64x64x32", 64), ("bmm_bf16_128x128x32", 128)])
def test_batched_matmul_reads_its_reshaped_loads_by_descriptor(name: str, tile: int, tmp_path: Path) -> None:
    """The realistic batched matmul: (1, rows, cols) loads reshaped to 2-D go to the swizzled buffers
    all the same; each CTA of the grid's z axis is one batch."""
    import ml_dtypes

    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    data = (REALISTIC / f"{name}.tileirbc").read_bytes()
    assert "tcgen05.mma" in _ptx(data, "sm_100", tmp_path)
    module = load_module(data, f"{name}.tileirbc")
    np_type = np.float16 if "f16" in name.split("_")[1] and "bf16" not in name else ml_dtypes.bfloat16
    rng = np.random.default_rng(3)
    batch, k = 2, 96
    a = rng.standard_normal((batch, tile, k)).astype(np_type)
    b = rng.standard_normal((batch, k, tile)).astype(np_type)
    c = np.zeros((batch, tile, tile), np_type)
    out = run_arrays(module, _entry(module), (1, 1, batch), [a, b, c], backend="emulator", gpu_name="sm_100",
                     check_races=True)[2]
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    assert np.abs(out.astype(np.float64) - ref).max() <= 1e-2 * max(1.0, np.abs(ref).max())


def test_operands_loaded_into_registers_are_staged_swizzled(tmp_path: Path) -> None:
    """Views with no alignment promise forbid cp.async: the loads go to registers and the mma stores
    them into its swizzled buffers itself (then the proxy fence) before the MMAs read them."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint, ConstantConstraint

    import corpus_kernels
    from test_tile_layer import _export
    from tileiras.runtime import run_arrays

    def loose(dtype):
        return ArrayConstraint(dtype=dtype, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=1,
                               stride_divisible_by=(1, 1), base_addr_divisible_by=2)

    data = _export(corpus_kernels.load("matmul").matmul, [loose(ct.float16), loose(ct.float16), loose(ct.float32),
                                                          ConstantConstraint(128), ConstantConstraint(128),
                                                          ConstantConstraint(64)])
    ptx = _ptx(data, "sm_100", tmp_path)
    assert "tcgen05.mma" in ptx and "cp.async.cg" not in ptx and "st.shared" in ptx
    module = _module(data)
    a, b, c = _inputs("float16", 128, 128, 128)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c], backend="emulator", gpu_name="sm_100",
                     check_races=True)[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def test_a_nonzero_accumulator_and_an_mma_outside_a_loop(tmp_path: Path) -> None:
    """The loop's first iteration stores C into tensor memory; the mma after the loop stores the
    loop's result, runs and loads it back: both tcgen05 mmas with their own columns."""
    import cuda.tile as ct
    from cuda.tile.compilation import ConstantConstraint

    from test_tile_layer import _array, _export
    from tileiras.runtime import run_arrays

    from tcgen05_kernels import mm_twice

    data = _export(mm_twice, [_array(ct.float16, 2), _array(ct.float16, 2), _array(ct.float32, 2),
                                 _array(ct.float32, 2), ConstantConstraint(128), ConstantConstraint(128),
                                 ConstantConstraint(64)])
    ptx = _ptx(data, "sm_100", tmp_path)
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") == 8 and "tcgen05.alloc.cta_group::1.sync.aligned" \
        ".shared::cta.b32 [%r" in ptx and "tcgen05.st.sync.aligned.16x256b" in ptx
    assert "0 bytes spill stores" in _ptxas_report(ptx, "sm_100a", tmp_path)
    module = _module(data)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((128, 128)).astype(np.float16)
    c = rng.standard_normal((128, 128)).astype(np.float32)
    d = np.zeros((128, 128), np.float32)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c, d], backend="emulator", gpu_name="sm_100",
                     check_races=True)[3]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = c + a64 @ b64 + a64[:, :64] @ b64[:64]
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def test_an_operand_two_mmas_read_is_one_swizzled_buffer(tmp_path: Path) -> None:
    """A loaded once and read by the tcgen05 mmas of two loops: its one cp.async buffer is swizzled
    and both read it by descriptor."""
    import cuda.tile as ct
    from cuda.tile.compilation import ConstantConstraint

    from test_tile_layer import _array, _export
    from tileiras.runtime import run_arrays

    from tcgen05_kernels import shared_a

    data = _export(shared_a, [_array(ct.float16, 2), _array(ct.float16, 2), _array(ct.float32, 2),
                              ConstantConstraint(128), ConstantConstraint(64), ConstantConstraint(64)])
    ptx = _ptx(data, "sm_100", tmp_path)
    assert ptx.count("tcgen05.mma.cta_group::1.kind::f16") >= 8 and "mma.sync" not in ptx   # 4 K steps per mma
    module = _module(data)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 256)).astype(np.float16)
    c = np.zeros((128, 64), np.float32)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c], backend="emulator", gpu_name="sm_100",
                     check_races=True)[2]
    ref = a.astype(np.float64) @ b.astype(np.float64).reshape(64, 4, 64).sum(1)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def test_an_fp8_a_computed_in_registers_is_staged_for_tcgen05(tmp_path: Path) -> None:
    import cuda.tile as ct
    import ml_dtypes
    from cuda.tile.compilation import ConstantConstraint

    from test_tile_layer import _array, _export
    from tileiras.runtime import run_arrays

    from tcgen05_kernels import computed_a

    data = _export(computed_a, [_array(ct.float16, 2), _array(ct.float8_e4m3fn, 2), _array(ct.float32, 2),
                                ConstantConstraint(128), ConstantConstraint(64), ConstantConstraint(64)])
    ptx = _ptx(data, "sm_100", tmp_path)
    assert "tcgen05.mma.cta_group::1.kind::f8f6f4" in ptx and "mma.sync" not in ptx
    module = _module(data)
    rng = np.random.default_rng(4)
    from accumulation import assert_accumulated, full_precision

    a = full_precision(rng, (128, 128), np.float16).astype(np.float16)     # random full-precision values
    b = full_precision(rng, (128, 64), ml_dtypes.float8_e4m3fn)
    c = np.zeros((128, 64), np.float32)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b.astype(ml_dtypes.float8_e4m3fn), c],
                     backend="emulator", gpu_name="sm_100", check_races=True)[2]
    # the kernel's A operand: 2 a rounded to e4m3 (products exact in f32), summed over K = 128
    a2 = (2 * a.astype(np.float32)).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    assert_accumulated(np.asarray(out).astype(np.float64), a2 @ b, a2, b.T, "f32")


@pytest.mark.parametrize("name,tile,kdim", [("mm_tf32_64x64x32", 64, 96), ("mm_tf32_128x128x64", 128, 128)])
def test_tf32_operands_are_rounded_into_k_major_buffers(name: str, tile: int, kdim: int, tmp_path: Path) -> None:
    """kind::tf32: the mma rounds the f32 operands as their ftof says while it copies them into
    K-major swizzled buffers (B transposed): the emulator agrees with the interpreter bit for bit
    on the products (the same rounding), up to the order of the f32 additions."""
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    data = (REALISTIC / f"{name}.tileirbc").read_bytes()
    ptx = _ptx(data, "sm_100", tmp_path)
    assert "tcgen05.mma.cta_group::1.kind::tf32" in ptx and "mma.sync" not in ptx
    assert "0 bytes spill stores" in _ptxas_report(ptx, "sm_100a", tmp_path)
    module = load_module(data, f"{name}.tileirbc")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((tile, kdim)).astype(np.float32)
    b = rng.standard_normal((kdim, tile)).astype(np.float32)
    c = np.zeros((tile, tile), np.float32)
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c], backend="emulator", gpu_name="sm_100",
                     check_races=True)[2]
    ref = run_arrays(module, _entry(module), (1, 1, 1), [a, b, c.copy()], backend="interpreter")[2]
    assert np.abs(out - ref).max() <= 1e-4


def _sm100_matmuls() -> list[str]:
    sys.path.insert(0, str(ROOT / "tests" / "realistic"))
    import compilers

    return [c["name"] for c in compilers.manifest()["configs"]
            if c["family"] in ("matmul", "bmm", "splitk") and "sm_100" in c["targets"]]


@pytest.mark.sweep
@pytest.mark.parametrize("name", _sm100_matmuls())
def test_every_realistic_matmul_uses_the_family_nvidias_does(name: str) -> None:
    """Where NVIDIA's compiler issues tcgen05 (UTC*MMA) on sm_100 ours does too, as many per K tile,
    and without spills where NVIDIA's has none."""
    from test_realistic_compile import stats

    mine, theirs = stats(name, "sm_100", "ours"), stats(name, "sm_100", "nvidia")
    assert dict(mine.tensor_core) == dict(theirs.tensor_core), (dict(mine.tensor_core), dict(theirs.tensor_core))
    assert theirs.spills or not mine.spills, f"{name}: {mine.local_loads} LDL + {mine.local_stores} STL"


# (configuration, tcgen05.mma per iteration, P through tensor memory): M = 128 puts P in tensor memory
# (4 and 8 warps, the latter two per lane quarter), M = 64 in a swizzled shared buffer
ATTENTION = [("fa_f16_q128k64d64", 8, True), ("fa_bf16_q128k64d128", 12, True), ("fa_f16_q64k64d64", 8, False),
             ("fa_f16_q128k128d64_causal", 12, True)]


@pytest.mark.parametrize("config", ATTENTION, ids=lambda c: c[0])
def test_attention_runs_both_mmas_on_tcgen05(config, tmp_path: Path) -> None:
    """S = Q K^T with K read K-major by descriptor (no transpose bit), S and O in tensor memory,
    P stored there as P @ V's A operand (16x128b, [a-tmem]) where M = 128; the emulator agrees with
    numpy under the race checker, and ptxas reports no spills."""
    import re

    import ml_dtypes

    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    name, per_iteration, p_in_tmem = config
    data = (REALISTIC / f"{name}.tileirbc").read_bytes()
    ptx = _ptx(data, "sm_100", tmp_path)
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], (\[?)", ptx)
    assert len(mmas) >= per_iteration, len(mmas)
    assert ("[" in mmas) == p_in_tmem and ("tcgen05.st.sync.aligned.16x128b" in ptx) == p_in_tmem
    report = _ptxas_report(ptx, "sm_100a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report, report
    q_tile, kv_tile, d = (int(v) for v in re.findall(r"q(\d+)k(\d+)d(\d+)", name)[0])
    seq = max(q_tile, 2 * kv_tile)       # two KV iterations at least
    np_type = ml_dtypes.bfloat16 if name.startswith("fa_bf16") else np.float16
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, seq, d)).astype(np_type) for _ in range(3))
    scale = np.float32(1 / np.sqrt(d))
    module = load_module(data, f"{name}.tileirbc")
    out = run_arrays(module, name, (seq // q_tile, 1, 1), [q, k, v, np.zeros_like(q), np.array(scale)],
                     backend="emulator", gpu_name="sm_100", check_races=True)[3]
    s = q[0].astype(np.float64) @ k[0].astype(np.float64).T * scale
    if name.endswith("_causal"):
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v[0].astype(np.float64)
    assert np.abs(out[0].astype(np.float64) - ref).max() < (2e-2 if np_type is not np.float16 else 2e-3)


# TileGym's attention at 256 x 128 tiles (M = 256: two 128-row MMAs side by side), causal: an
# unmasked and a masked loop. (kernel, ptxas spill-store bytes allowed: NVIDIA's own 8 for f16)
WIDE_ATTENTION = [("tg_fmha_e5m2_d128_causal_256x128", 0),
                  pytest.param("tg_fmha_f16_d128_causal_256x128", 8, marks=pytest.mark.sweep)]


@pytest.mark.parametrize("name,spill_bytes", WIDE_ATTENTION)
def test_wide_attention_keeps_o_and_p_in_tensor_memory(name: str, spill_bytes: int, tmp_path: Path) -> None:
    """O stays in tensor memory through each loop and the softmax's correction rescales it there
    (16x256b.x8 reads and writes), P goes to tensor memory as P @ V's A operand (the MMAs' [a-tmem]
    form; fp8: four to a column) over the columns of the scores it came from, and the two loops
    share their columns: all four mmas on tcgen05 in 512 columns, no P through shared memory, and
    (issue 14) no spills beyond NVIDIA's. The emulator agrees with the interpreter under the race
    checker on a ragged sequence (255: one query tile, one key tile per loop)."""
    import re

    import ml_dtypes

    from test_spills import _module
    from tileiras.runtime import run_arrays

    module, data = _module(name)
    ptx = _ptx(data, "sm_100", tmp_path)
    loops = ptx[:ptx.rindex("tcgen05.ld.sync")]     # before O's last read (the epilogue restages O after it)
    assert "mma.sync" not in ptx and "st.shared.b8" not in loops and "st.shared.b16" not in loops
    assert re.search(r"tcgen05\.alloc\S* \[%r\d+\], 512;", ptx)
    mmas = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::\w+ \[%r\d+\], (\[?)", ptx)
    assert mmas.count("[") == mmas.count("") > 0       # P @ V reads A in tensor memory, Q K^T by descriptor
    assert ptx.count("tcgen05.ld.sync.aligned.16x256b.x8.b32") == ptx.count("tcgen05.st.sync.aligned.16x256b.x8") > 0
    found = re.search(r"(\d+) bytes spill stores", _ptxas_report(ptx, "sm_100a", tmp_path))
    assert found and int(found[1]) <= spill_bytes, found
    dtype = ml_dtypes.float8_e5m2 if "e5m2" in name else np.float16
    seq, shape = 255, (1, 32, 255, 128)      # [batch, heads, sequence, head dim]; 32 heads: the kernel's

    def arguments() -> list:
        rng = np.random.default_rng(16)
        return [rng.standard_normal(shape).astype(dtype) for _ in range(3)] + \
            [np.zeros(shape, dtype), np.array(1 / np.sqrt(128), np.float32), np.array(0, np.int32)]

    grid = (-(-seq // 256), 1, 1)
    want = run_arrays(module, name, grid, arguments(), backend="interpreter")[3]
    got = run_arrays(module, name, grid, arguments(), backend="emulator", gpu_name="sm_100", source=data,
                     filename=f"{name}.tileirbc", check_races=True)[3]
    out, ref = (np.asarray(t).astype(np.float64)[:, 0] for t in (got, want))
    assert np.abs(ref).max() > 1
    np.testing.assert_allclose(out, ref, rtol=2.0 ** -10, atol=2.0 ** -9 * np.abs(ref).max())


@pytest.mark.sweep
def test_fp8_attention_with_two_warps_per_lane_quarter_matches_the_interpreter() -> None:
    """cutile-python's fp8 attention (M = 128 on 8 warps: 16 rows a warp): P packed four to a
    tensor-memory column across each quad of lanes, causal (two loops sharing their columns)."""
    import ml_dtypes

    from test_spills import _module
    from tileiras.runtime import run_arrays

    name = "cp_fmha_e4m3_d64_causal_128x128"
    module, data = _module(name)
    shape = (1, 8, 256, 64)     # [batch, heads, sequence, head dim]

    def arguments() -> list:
        rng = np.random.default_rng(16)
        return [rng.standard_normal(shape).astype(ml_dtypes.float8_e4m3fn) for _ in range(3)] + \
            [np.zeros(shape, np.float16), np.array(0.125, np.float32), np.array(0, np.int32)]

    want = run_arrays(module, name, (2, 1, 1), arguments(), backend="interpreter")[3]
    got = run_arrays(module, name, (2, 1, 1), arguments(), backend="emulator", gpu_name="sm_100", source=data,
                     filename=f"{name}.tileirbc", check_races=True)[3]
    out, ref = (np.asarray(t).astype(np.float64)[:, 0] for t in (got, want))
    np.testing.assert_allclose(out, ref, rtol=2.0 ** -10, atol=2.0 ** -9 * np.abs(ref).max())


@pytest.mark.sweep
def test_mla_prefill_shares_columns_between_its_chained_mmas() -> None:
    """TileGym's MLA prefill (M = 64): Q K^T then Q_pe K_pe^T into the same scores (a nonzero
    accumulator stored over the first's columns, which it just read back) and O rescaled in tensor
    memory; one head against the interpreter, race checker on."""
    import ml_dtypes

    from test_spills import _module
    from tileiras.runtime import run_arrays

    name = "tg_mla_prefill_bf16_g1_64x64_occ1"
    module, data = _module(name)
    b, h, s, d, kpe = 1, 16, 128, 128, 64

    def arguments() -> list:
        rng = np.random.default_rng(5)
        r = lambda *shape: rng.standard_normal(shape).astype(ml_dtypes.bfloat16)  # noqa: E731
        return [r(b, h, s, d), r(b, h, s, kpe), r(b, h, s, d), r(b, 1, s, kpe), r(b, h, s, d),
                np.zeros((b, h, s, d), ml_dtypes.bfloat16), np.array(1 / np.sqrt(d + kpe), np.float32),
                np.array(h, np.int32)]

    want = run_arrays(module, name, (s // 64, 1, 1), arguments(), backend="interpreter")[5]
    got = run_arrays(module, name, (s // 64, 1, 1), arguments(), backend="emulator", gpu_name="sm_100",
                     source=data, filename=f"{name}.tileirbc", check_races=True)[5]
    out, ref = (np.asarray(t).astype(np.float64)[:, 0] for t in (got, want))
    assert np.abs(ref).max() > 1
    np.testing.assert_allclose(out, ref, rtol=2.0 ** -7, atol=2.0 ** -7 * np.abs(ref).max())
