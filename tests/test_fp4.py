"""Block-scaled fp4 (f4E2M1FN) matmuls: cutile-python's BlockScaledMatMul sample with MXFP4 (ue8m0 scales
per 32) and NVFP4 (e4m3 scales per 16) operands. On sm_120 they run on the block_scale mma.sync of
m16n8k64 (`kind::mxf4` scale_vec::2X, `kind::mxf4nvf4` scale_vec::4X), as NVIDIA's compiler issues
there (SASS OMMA.SF.16864); elsewhere the scalar path, whose remark says why (ops_blockscale.py)."""

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
    """128 x 128 x 128 tiles, a K loop of 2: the block-scaled m16n8k64 mma.sync, no FMA fallback, no
    spills (256 threads); the emulator's result (race checker on) is numpy's."""
    ptx = _ptx(_kernel(fmt, 128, 128, 128, 2), "sm_120", tmp_path)
    assert FORMATS[fmt][2] in ptx and "fma.rn.f32" not in ptx
    report = _ptxas_report(ptx, "sm_120a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes stack frame" in report, report
    a, sa, b, sb = _inputs(fmt, 128, 128, 256)
    out = emulate(_module(_kernel(fmt, 128, 128, 128, 2)), [a, sa, b, sb, np.zeros((128, 128), np.float32)],
                  "sm_120")[4]
    ref = _reference(fmt, a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.sweep
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_sm120_fp4_128x256_compiles_to_the_block_scaled_mma(fmt: str, tmp_path: Path) -> None:
    ptx = _ptx(_kernel(fmt, 128, 256, 128, 2), "sm_120", tmp_path)
    assert FORMATS[fmt][2] in ptx
    _ptxas_report(ptx, "sm_120a", tmp_path)


@pytest.mark.sweep
@pytest.mark.parametrize("fmt", ["mxfp4", "nvfp4"])
def test_sm100_fp4_keeps_the_scalar_path_and_says_why(fmt: str, tmp_path: Path) -> None:
    ptx = _ptx(_kernel(fmt, 128, 128, 128, 2), "sm_100", tmp_path)
    assert "mma.sync" not in ptx and "tcgen05.mma" not in ptx
