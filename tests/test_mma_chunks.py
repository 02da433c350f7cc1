"""An mma whose operands are staged whole would not fit in shared memory: K in slices.

The operands go through shared memory a K slice at a time (each slice's buffer reuses the
previous slice's bytes after a CTA barrier), accumulating into the same registers in the same
order: mma.sync (`tileas/mma_sync_staging.k_slices`) and the exact FMA path
(`tileas/move_forms.fitting_slices`). The TileGym kernel that needed it compiles (ptxas), and a
scaled kernel with the slicing forced (a budget of a quarter of the operands) runs on the
emulator, race checker on, and matches the interpreter.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cuda.tile as ct

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate, interpret  # noqa: E402
TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"
PTXAS = Path(sys.prefix) / "lib" / "python3.11" / "site-packages" / "nvidia" / "cu13" / "bin" / "ptxas"


@pytest.mark.sweep   # about 30 s each (a large exact-f32 FMA kernel); the forced slicing below runs by default
@pytest.mark.parametrize("gpu", ["sm_80", "sm_120"])
def test_tilegym_bmm_f32_fits_with_k_slices(gpu: str, tmp_path: Path) -> None:
    """cp_bmm f32 128x256x128: A 128x128 + B 128x256 f32 (192 KB) staged for one FMA mma; in two
    K slices (96 KB) it fits sm_80 and sm_120, and ptxas takes the PTX."""
    ptx = tmp_path / "bmm.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras", str(TILEGYM / "cp_bmm_f32_128x256x128.tileirbc"),
                           "--gpu-name", gpu, "--emit=ptx", "-o", str(ptx), "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert ".extern .shared" in text    # 96 KB: dynamic shared memory
    done = subprocess.run([str(PTXAS), "-arch", gpu, str(ptx), "-o", str(tmp_path / "bmm.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@ct.kernel
def _doubled_mm(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """One mma of operands computed in registers (so the mma stages them itself)."""
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0), shape=(TM, TK))
    y = ct.load(b, index=(0, 0), shape=(TK, TN))
    acc = ct.mma(x + x, y + y, ct.zeros((TM, TN), dtype=ct.float32))
    ct.store(c, index=(i, 0), tile=acc)


@ct.kernel
def _doubled_mm_tf32(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0), shape=(TM, TK))
    y = ct.load(b, index=(0, 0), shape=(TK, TN))
    acc = ct.mma(ct.astype(x + x, ct.tfloat32), ct.astype(y + y, ct.tfloat32), ct.zeros((TM, TN), dtype=ct.float32))
    ct.store(c, index=(i, 0), tile=acc)


def _export(kernel, dtype, tm: int, tn: int, tk: int) -> bytes:
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       export_kernel)

    def array(d):
        return ArrayConstraint(dtype=d, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=16,
                               stride_divisible_by=(8, 1), base_addr_divisible_by=16)
    buf = io.BytesIO()
    params = [array(dtype), array(dtype), array(ct.float32), ConstantConstraint(tm), ConstantConstraint(tn),
              ConstantConstraint(tk)]
    export_kernel(kernel, [KernelSignature(parameters=params, calling_convention=CallingConvention.cutile_python_v1())],
                  buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code="sm_80")
    return buf.getvalue()


# (kernel, operand dtype, which chooser the forced budget goes through, K slices it must pick)
CASES = {
    "f16": (_doubled_mm, np.float16, "mma", 4),         # mma.sync m16n8k16: slices of 16
    "tf32": (_doubled_mm_tf32, np.float32, "mma", 4),   # mma.sync m16n8k8: slices of 16
    "f32": (_doubled_mm, np.float32, "fma", 4),         # the exact FMA path: slices of 16
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_forced_k_slices_match_the_interpreter(case: str, monkeypatch, tmp_path: Path) -> None:
    from tileiras.frontend import load_module
    from tileiras.tileas import mma_sync_staging, move_forms

    kernel, dtype, path, want = CASES[case]
    tm, tn, tk = (32, 64, 64) if path == "fma" else (64, 64, 64)
    module = load_module(_export(kernel, {np.float16: ct.float16, np.float32: ct.float32}[dtype], tm, tn, tk),
                         "mm.tileirbc")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((tm, tk)).astype(dtype)
    b = rng.standard_normal((tk, tn)).astype(dtype)
    args = [a, b, np.zeros((tm, tn), np.float32)]
    ref = interpret(module, args)[2]
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    chosen: list[int] = []
    operand_bytes = (tm * tk + tk * tn) * np.dtype(dtype).itemsize
    if path == "mma":
        def sliced(k, staged, kdim, kstep):   # the real choice, against a quarter of the operands
            chosen.append(mma_sync_staging.k_slices(k, staged, kdim, kstep, operand_bytes // want))
            return chosen[-1]
        monkeypatch.setattr(mma_sync_staging, "k_chunks", sliced)
    else:
        real = move_forms.fitting_slices

        def fitted(k, types, n):
            chosen.append(real(k, types, n, operand_bytes // want))
            return chosen[-1]
        monkeypatch.setattr(move_forms, "fitting_slices", fitted)
    got = emulate(module, args, "sm_80")[2]
    assert chosen and max(chosen) == want, chosen
    assert np.abs(ref).max() > 1.0
    # the same products summed in the same order: equal up to the accumulation's rounding
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max())


# -- loads the mma copies itself, a K slice at a time -------------------------------------------
def _mla_decode(b: int, h: int, s: int, d: int, kpe: int, tile_h: int, tile_n: int) -> bytes:
    """TileGym's MLA decoding kernel (Q@K^T over the 512-wide latent, P@V with V transposed)."""
    import math

    from tilegym_modules import tilegym

    def params(configs) -> tuple:
        a = configs.A
        return (a("float16", b, h, d), a("float16", b, h, kpe), a("float16", b, s, d), a("float16", b, s, d),
                a("float16", b, s, kpe), a("float16", b, h, d), a("float32", b, h), configs.f32(1 / math.sqrt(d + kpe)),
                d, tile_h, tile_n, kpe, s, True)

    with tilegym() as (configs, generate):
        return generate.export(configs.Config("mla_decode", "tg_mla_decoding", "_naive_absorb_mla_transpose_kernel",
                                              params(configs), {}))


def _deferred_notes(data: bytes, gpu: str) -> tuple[list[str], int]:
    """(the schedule notes of mmas that copy their loads in slices, the shared buffers' bytes)."""
    import contextlib

    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        lower_module(load_module(data, "mla.tileirbc"), gpu, print_ir_after_all=True)
    lines = err.getvalue().splitlines()
    total = next(int(line.split("shared buffers: ")[1].split(" ")[0]) for line in lines if "shared buffers: " in line)
    return [line for line in lines if "deferred load" in line], total


def test_tilegym_mla_decode_fits_sm120_with_deferred_slices() -> None:
    """The 128x512 f16 K and V tiles (128 KB each, cp.async-staged whole on sm_80) do not fit
    sm_120's 99 KB: each mma copies its load in 4 K slices, two in flight (NVIDIA's: 99 KB)."""
    data = (ROOT / "tests" / "tilegym" / "bytecode" / "tg_mla_decode_f16_16x128.tileirbc").read_bytes()
    notes, total = _deferred_notes(data, "sm_120")
    assert len(notes) == 2 and all("in 4 K slices" in n and "2 in flight" in n for n in notes), notes
    assert total <= 101376


def test_deferred_k_slices_match_the_interpreter(monkeypatch, tmp_path: Path) -> None:
    """MLA decoding at head dim 128, 64-row K/V tiles, two loop iterations, on a target cut to 20 KB
    of shared memory: K (stored (N, K), A as stored) is copied in column slices and V (A read
    transposed) in row slices; the emulator, race checker on, matches the interpreter."""
    from tileiras.frontend import load_module
    from tileiras.ir.record import replace
    from tileiras.lowering import async_copy
    from tileiras.target import caps, table

    b, h, s, d, kpe, tile_h, tile_n = 1, 16, 128, 128, 32, 16, 64
    data = _mla_decode(b, h, s, d, kpe, tile_h, tile_n)
    monkeypatch.setitem(table.BY_SM, 120, replace(caps(120), smem_per_block=20 * 1024))
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    rings: list[tuple[int, int, int]] = []
    real = async_copy.slice_matrix

    def spied(k, value, kaxis, width, stages, operand):
        rings.append((kaxis, width, stages))
        return real(k, value, kaxis, width, stages, operand)
    monkeypatch.setattr(async_copy, "slice_matrix", spied)
    module = load_module(data, "mla.tileirbc")
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(shape).astype(np.float16) for shape in ((b, h, d), (b, h, kpe), (b, s, d), (b, s, d),
                                                                       (b, s, kpe))]
    args += [np.zeros((b, h, d), np.float16), np.zeros((b, h), np.float32), np.array(0.08, np.float32)]
    ref = interpret(module, args, (h // tile_h, b, 1))
    got = emulate(module, args, "sm_120", (h // tile_h, b, 1))
    assert set(rings) == {(1, 32, 2), (0, 16, 2)}, rings   # K: 4 column slices of 32; V: 4 row slices of 16
    out_ref, out = ref[5].astype(np.float64), got[5].astype(np.float64)
    assert np.abs(out_ref).max() > 0.1
    assert np.abs(out - out_ref).max() < 2e-3          # f16 outputs, f32 sums in another order
    np.testing.assert_allclose(got[6], ref[6], rtol=1e-5, atol=1e-5)   # log-sum-exp rows


@pytest.mark.parametrize("gpu", ["sm_90", pytest.param("sm_100", marks=pytest.mark.sweep),
                                 pytest.param("sm_80", marks=pytest.mark.sweep)])
def test_mla_decode_values_through_a_unit_dim_map_match_the_interpreter(gpu: str, tmp_path: Path, monkeypatch) -> None:
    """MLA decoding reads V as a (tile_n, 1, d) tile through dim_map [1, 0, 2] (only the unit
    dimension moves): order-views loads it in tensor order, so it is staged as one (tile_n, d)
    matrix (a batch of one) that P @ V^T reads directly, not tile_n batches of one row. The
    emulator, race checker on, matches the interpreter."""
    from tileiras.frontend import load_module
    from tileiras.tileaa.passes import to_tileaa

    b, h, s, d, kpe, tile_h, tile_n = 1, 16, 128, 128, 32, 16, 64
    data = _mla_decode(b, h, s, d, kpe, tile_h, tile_n)
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    module = load_module(data, "mla.tileirbc")
    entry = module.clone().regions[0].block.operations[-1]
    to_tileaa(entry)
    loads = [op for op in entry.walk() if op.name == "cuda_tile.load_view_tko"]
    assert all(tuple(op.operand("view").type.dim_map) == tuple(range(len(op.operand("view").type.dim_map)))
               for op in loads if any(n == 1 for n in op.operand("view").type.tile_shape)
               and op.results[0].type.shape[0] == tile_n), [op.operand("view").type for op in loads]
    rng = np.random.default_rng(11)
    args = [rng.standard_normal(shape).astype(np.float16) for shape in ((b, h, d), (b, h, kpe), (b, s, d), (b, s, d),
                                                                       (b, s, kpe))]
    args += [np.zeros((b, h, d), np.float16), np.zeros((b, h), np.float32), np.array(0.08, np.float32)]
    ref = interpret(module, args, (h // tile_h, b, 1))
    got = emulate(module, args, gpu, (h // tile_h, b, 1))
    out_ref, out = ref[5].astype(np.float64), got[5].astype(np.float64)
    assert np.abs(out_ref).max() > 0.1
    assert np.abs(out - out_ref).max() < 2e-3          # f16 outputs, f32 sums in another order
    np.testing.assert_allclose(got[6], ref[6], rtol=1e-5, atol=1e-5)


def test_mla_decode_with_256_row_tiles_compiles_on_sm100(tmp_path: Path) -> None:
    """At 256-row K/V tiles each 512-wide K tile is 256 KB, more than sm_100's shared memory: its mmas
    stay on mma.sync, which copies the loads in K slices (NVIDIA's compiles it; tcgen05 would stage
    them whole and overflow)."""
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    data = _mla_decode(1, 16, 1024, 512, 64, 16, 256)
    ptx = llvm_to_ptx(lower_module(load_module(data, "mla.tileirbc"), "sm_100")[0], "sm_100")
    assert "mma.sync.aligned.m16n8k16" in ptx
