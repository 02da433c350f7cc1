"""f32 operands read as tf32 are rounded (ties to even) by one `cvt.rn.tf32.f32` on sm_100 and sm_120, by
wgmma itself on sm_90, and by an integer sequence on sm_80.

A tf32 wgmma whose B is row-major rounds every operand element in shared memory each K step; the
integer sequence (seven instructions an element) made the hot loop of a 64x64x32 tf32 matmul 293
SASS instructions per 4 HGMMA against NVIDIA's 81, and the kernel 3.2x slower on an H200. One
cvt.rn.tf32.f32 is one F2FP.TF32 instruction: 133. sm_80 has no such cvt and keeps the sequence.
On sm_90 nothing is rounded: wgmma reads f32 bits in shared memory as tf32 rounded to nearest even
(measured on an H200, tileaa/mma_forms.WGMMA_TF32_ROUNDING): 87, against NVIDIA's 81; 114 once B's
K-major copy took two slots and the wgmma group stays in flight (tileas/kmajor_copies.loop_copies), the kernel then
at 1.38x NVIDIA's time (from 1.86x).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tileiras.driver.tileiras_main import main as tileiras
from tileiras.emulator.host import emulate

ROOT = Path(__file__).resolve().parent
MATMUL = ROOT / "realistic" / "bytecode" / "mm_tf32_64x64x32.tileirbc"


def ptx(tmp_path: Path, gpu: str) -> str:
    out = tmp_path / f"k.{gpu}.ptx"
    assert tileiras(["--emit=ptx", "--no-cache", "--gpu-name", gpu, str(MATMUL), "-o", str(out)]) == 0
    return out.read_text()


@pytest.mark.parametrize("gpu, rounding", [("sm_90", ""), ("sm_100", "cvt"), ("sm_120", "cvt"), ("sm_80", "sequence")])
def test_the_rounding_is_one_cvt_where_the_target_has_it(tmp_path: Path, gpu: str, rounding: str) -> None:
    """sm_90's wgmma rounds its shared operands to nearest even itself: none at all there."""
    text = ptx(tmp_path, gpu)
    assert ("cvt.rn.tf32.f32" in text) == (rounding == "cvt")
    assert ("2139095040" in text) == (rounding == "sequence")       # the sequence's infinity/NaN test


def rne(x: np.ndarray) -> np.ndarray:
    """f32 bits rounded to tf32, ties to even, infinities and NaN kept (the integer sequence)."""
    b = x.view(np.uint32).astype(np.uint64)
    rounded = ((b + 0xFFF + ((b >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    return np.where((b & 0x7F800000) == 0x7F800000, x.view(np.uint32), rounded)


def test_cvt_rn_tf32_rounds_as_the_sequence_did() -> None:
    body = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<4>; .reg .f32 %f<2>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r0, %tid.x;
  mul.wide.u32 %rd2, %r0, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.f32 %f1, [%rd3];
  cvt.rn.tf32.f32 %r1, %f1;
  st.global.b32 [%rd3], %r1;
  ret;
}
"""
    ulp = 2.0 ** -10
    edges = [1.0, 1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 2 + 2 ** -20, -1.5 - ulp / 2, 2 - 2 ** -14, 3.4e38,
             -3.4e38, 1e-40, -1e-40, 0.0, -0.0, np.inf, -np.inf, 65504.1, 1e-38]
    rng = np.random.default_rng(0)
    values = np.concatenate([np.array(edges, np.float32),
                             rng.standard_normal(128 - len(edges)).astype(np.float32) * 100]).astype(np.float32)
    (out,), _ = emulate(body, "k", 1, 128, [values.copy()])
    np.testing.assert_array_equal(out.view(np.uint32), rne(values))
