"""Block-scaled fp4 (f4E2M1FN) matmuls: cutile-python's BlockScaledMatMul sample with MXFP4 (ue8m0 scales
per 32) and NVFP4 (e4m3 scales per 16) operands. On sm_120 they run on the block_scale mma.sync of
m16n8k64 (`kind::mxf4` scale_vec::2X, `kind::mxf4nvf4` scale_vec::4X), as NVIDIA's compiler issues
there (SASS OMMA.SF.16864); on sm_100 tcgen05.mma kind::mxf4nvf4 (block32 / block16), the operands
packed two to a byte by the mma (fp4_pack.py), the scales in tensor memory (ops_blockscale.py)."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from emulator_runs import emulate  # noqa: E402
from test_tile_layer import _module, _ptx, _ptxas_report  # noqa: E402
from tilegym_modules import tilegym  # noqa: E402

E2, E8, E4 = "float4_e2m1fn", "float8_e8m0fnu", "float8_e4m3fn"
# format -> (scale dtype, elements per scale, the instruction)
FORMATS = {
    "mxfp4": (E8, 32, "mma.sync.aligned.kind::mxf4.block_scale.scale_vec::2X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue8m0"),
    "nvfp4": (E4, 16, "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1"
                      ".f32.ue4m3"),
}


@lru_cache(maxsize=None)
def _kernel(fmt: str, tm: int, tn: int, tk: int, k_tiles: int) -> bytes:
    """The sample at these tiles over one output tile and `k_tiles` K tiles, 2-D scales."""
    scale, sbs, _ = FORMATS[fmt]
    with tilegym() as (configs, generate):
        A = configs.A
        m, n, k = tm, tn, k_tiles * tk
        config = configs.Config("block_scaled_matmul", "cp_BlockScaledMatMul", "block_scaled_matmul_kernel",
                                (A(E2, m, k), A(scale, m, k // sbs), A(E2, k, n), A(scale, k // sbs, n),
                                 A("float32", m, n), tm, tn, tk, sbs))
        return generate.export(config)


def _inputs(fmt: str, m: int, n: int, k: int, seed: int = 1):
    import ml_dtypes

    scale, sbs, _ = FORMATS[fmt]
    rng = np.random.default_rng(seed)
    # every e2m1 value, both signs
    a = rng.choice(np.arange(16, dtype=np.uint8), (m, k)).view(ml_dtypes.float4_e2m1fn)
    b = rng.choice(np.arange(16, dtype=np.uint8), (k, n)).view(ml_dtypes.float4_e2m1fn)
    if scale == E8:     # exponents around 2^0 (127) both ways, so that a wrong scale shows
        sa = rng.integers(120, 135, (m, k // sbs)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
        sb = rng.integers(120, 135, (k // sbs, n)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    else:               # positive e4m3 (NVFP4's ue4m3), 1/8 .. 16
        sa = rng.uniform(0.125, 16, (m, k // sbs)).astype(ml_dtypes.float8_e4m3fn)
        sb = rng.uniform(0.125, 16, (k // sbs, n)).astype(ml_dtypes.float8_e4m3fn)
    return a, sa, b, sb


def _reference(fmt: str, a, sa, b, sb) -> np.ndarray:
    sbs = FORMATS[fmt][1]
    A = a.astype(np.float64) * np.repeat(sa.astype(np.float64), sbs, axis=1)
    B = b.astype(np.float64) * np.repeat(sb.astype(np.float64), sbs, axis=0)
    return A @ B


@pytest.mark.parametrize("fmt", ["mxfp4", pytest.param("nvfp4", marks=pytest.mark.sweep)])
def test_sm120_fp4_matmul_matches_numpy_under_the_race_checker(fmt: str, tmp_path: Path) -> None:
    """128 x 128 x 128 tiles, a K loop of 2: the block-scaled m16n8k64 mma.sync on fragments read by
    ldmatrix, no FMA fallback, no spills (256 threads); the emulator's result (race checker on) is
    numpy's."""
    ptx = _ptx(_kernel(fmt, 128, 128, 128, 2), "sm_120", tmp_path)
    assert FORMATS[fmt][2] in ptx and "fma.rn.f32" not in ptx
    # A and B packed two to a byte, K-major (fp4_pack.py): their fragments by ldmatrix, as NVIDIA's LDSM
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    report = _ptxas_report(ptx, "sm_120a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes stack frame" in report, report
    a, sa, b, sb = _inputs(fmt, 128, 128, 256)
    out = emulate(_module(_kernel(fmt, 128, 128, 128, 2)), [a, sa, b, sb, np.zeros((128, 128), np.float32)],
                  "sm_120")[4]
    ref = _reference(fmt, a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("fmt", [pytest.param("nvfp4", marks=pytest.mark.sweep), "mxfp4"])
def test_sm120_fp4_k_tiles_beyond_shared_memory_go_in_k_slices(fmt: str) -> None:
    """128 x 256 x 256 fp4 tiles, staged one element a byte (96 KB), exceed sm_120's 99 KB beside the
    scales: the mma stages A and B a K slice at a time (NVIDIA's compiles this tile too); the
    emulator (race checker on) = numpy."""
    a, sa, b, sb = _inputs(fmt, 128, 256, 256, seed=2)
    out = emulate(_module(_kernel(fmt, 128, 256, 256, 1)), [a, sa, b, sb, np.zeros((128, 256), np.float32)],
                  "sm_120")[4]
    ref = _reference(fmt, a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.sweep
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_sm120_fp4_128x256_compiles_to_the_block_scaled_mma(fmt: str, tmp_path: Path) -> None:
    ptx = _ptx(_kernel(fmt, 128, 256, 128, 2), "sm_120", tmp_path)
    assert FORMATS[fmt][2] in ptx
    _ptxas_report(ptx, "sm_120a", tmp_path)


# format -> the tcgen05 instruction of sm_100 (NVIDIA's: the same kind and block size)
SM100_MMA = {"mxfp4": "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block32",
             "nvfp4": "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16"}


@pytest.mark.parametrize("fmt,tn,tk", [("mxfp4", 128, 128), ("nvfp4", 128, 128),
                                       pytest.param("nvfp4", 256, 128, marks=pytest.mark.sweep),
                                       pytest.param("mxfp4", 256, 128, marks=pytest.mark.sweep),
                                       # K tiles of 256: 8 (MXFP4) or 16 (NVFP4) scale blocks, 2 or 4 cells a row
                                       pytest.param("mxfp4", 128, 256, marks=pytest.mark.sweep),
                                       pytest.param("nvfp4", 128, 256, marks=pytest.mark.sweep)])
def test_sm100_fp4_matmul_runs_on_tcgen05(fmt: str, tn: int, tk: int, tmp_path: Path) -> None:
    """sm_100: tcgen05.mma kind::mxf4nvf4 with the block scales in tensor memory (tcgen05.cp), A and B
    packed two e2m1 to a byte, K-major, by the mma (fp4_pack.py); no mma.sync, no FMA scaling, no
    spills, C stored by TMA (as NVIDIA's). The emulator's result (race checker on) is numpy's."""
    ptx = _ptx(_kernel(fmt, 128, tn, tk, 256 // tk), "sm_100", tmp_path)
    assert SM100_MMA[fmt] in ptx and "tcgen05.cp.cta_group::1.32x128b.warpx4" in ptx
    assert "mma.sync" not in ptx and "fma.rn.f32" not in ptx
    # the epilogue writes C swizzled into the freed buffers (tensor memory's mbarrier kept), one thread stores
    # it by TMA (epilogue_forms._tma_staging): no st.global; where no column chunk of the 128 x 256 f32
    # accumulator fits twice in them (mxfp4), it restages C through them: 16-byte stores
    if "cp.async.bulk.tensor.2d.global.shared::cta" in ptx:
        assert "st.global" not in ptx
    else:
        assert (fmt, tn) == ("mxfp4", 256) and ("st.global.v2.b64" in ptx or "st.global.v4.b32" in ptx)
    report = _ptxas_report(ptx, "sm_100a", tmp_path)
    assert "0 bytes spill stores" in report, report
    a, sa, b, sb = _inputs(fmt, 128, tn, 256, seed=5)
    out = emulate(_module(_kernel(fmt, 128, tn, tk, 256 // tk)), [a, sa, b, sb, np.zeros((128, tn), np.float32)],
                  "sm_100")[4]
    ref = _reference(fmt, a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


def _quantize(n: int, aligned: bool) -> str:
    """f32 -> e2m1 over tiles of `n`: with `aligned` the view's facts (16-byte bases, shapes divisible
    by 16, unit strides) prove each thread's run of elements whole bytes; without, one nibble at a time."""
    stride = "1" if aligned else "?"
    view, xview = (f"tensor_view<?x{t}, strides=[{stride}]>" for t in ("f4E2M1FN", "f32"))
    part, xpart = (f"partition_view<tile=({n}), {v}>" for v in (view, xview))
    facts = """  %o = assume div_by<16>, %o0 : tile<ptr<f4E2M1FN>>
  %x = assume div_by<16>, %x0 : tile<ptr<f32>>
  %on = assume div_by<16>, %on0 : tile<i32>
  %xn = assume div_by<16>, %xn0 : tile<i32>""" if aligned else """  %o = assume div_by<1>, %o0 : tile<ptr<f4E2M1FN>>
  %x = assume div_by<1>, %x0 : tile<ptr<f32>>
  %on = assume div_by<1>, %on0 : tile<i32>
  %xn = assume div_by<1>, %xn0 : tile<i32>"""
    return f"""cuda_tile.module @k {{
entry @q(%x0: tile<ptr<f32>>, %xn0: tile<i32>, %xs: tile<i32>, %o0: tile<ptr<f4E2M1FN>>, %on0: tile<i32>, %os: tile<i32>) {{
  %tok = make_token : token
{facts}
  %xv = make_tensor_view %x, shape = [%xn], strides = [{'1' if aligned else '%xs'}] : tile<i32> -> {xview}
  %ov = make_tensor_view %o, shape = [%on], strides = [{'1' if aligned else '%os'}] : tile<i32> -> {view}
  %xp = make_partition_view %xv : {xpart}
  %op = make_partition_view %ov : {part}
  %b, %b1, %b2 = get_tile_block_id : tile<i32>
  %t, %t1 = load_view_tko weak %xp[%b] token = %tok : {xpart}, tile<i32> -> tile<{n}xf32>, token
  %w = ftof %t : tile<{n}xf32> -> tile<{n}xf4E2M1FN>
  %t2 = store_view_tko weak %w, %op[%b] token = %tok : tile<{n}xf4E2M1FN>, {part}, tile<i32> -> token
  return
}}
}}"""


@pytest.mark.parametrize("aligned,total,stores", [(True, 3072, "st.global.v2.b8"), (False, 2000, "atom.or.b32")],
                         ids=["whole-bytes", "nibbles-masked-tail"])
def test_fp4_stores_pack_two_elements_a_byte(aligned: bool, total: int, stores: str, tmp_path: Path) -> None:
    """A 4-bit tile stored to memory writes packed bytes, low nibble first (numpy's e2m1 bytes): whole
    bytes where the facts prove each run aligned, else each thread clears and sets its own nibble with
    atomics (the other nibble of the byte may be another thread's); emulator (race checker on) and
    interpreter equal numpy, a masked tail leaves the bytes past the tensor alone."""
    import ml_dtypes

    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    text = _quantize(1024, aligned)
    module = load_module(text.encode(), "q.mlir")
    assert stores in _ptx(text.encode(), "sm_100", tmp_path)
    x = np.random.default_rng(0).uniform(-7, 7, total).astype(np.float32)
    ref = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    grid = (-(-total // 1024), 1, 1)
    for backend, extra in (("interpreter", {}), ("emulator", {"gpu_name": "sm_100", "check_races": True})):
        out = run_arrays(module, "q", grid, [x, np.zeros(total, ml_dtypes.float4_e2m1fn)], backend=backend, **extra)[1]
        assert np.array_equal(out.view(np.uint8), ref), backend
