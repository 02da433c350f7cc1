"""Comparing an accumulation with numpy: random full-precision inputs, and the tolerance their sum of K
products allows (shared by the emulator's tensor-core tests)."""

from __future__ import annotations

import numpy as np

# unit roundoff of the accumulator (or output) format
UNIT = {"f64": 2.0 ** -53, "f32": 2.0 ** -24, "s32": 0.0, "f16": 2.0 ** -11, "bf16": 2.0 ** -8, "e4m3": 2.0 ** -4}
INPUT_ROUNDING = {"tf32": 2.0 ** -9}   # both inputs truncated to 10 mantissa bits
# fp8 products into an f32 accumulator by wgmma (sm_90): each addend truncated below the largest one's 14-bit
# significand (the PTX ISA: "higher than half precision but lower than single precision"; the emulator's model,
# tileiras/emulator/ops/wgmma.fp8_accumulate): 2^-13 of the largest per addend
UNIT["f32<fp8"] = 2.0 ** -13


def accumulator(dty: str, aty: str = "", gpu: str = "") -> str:
    """The unit name of an accumulation into `dty` of `aty` products on `gpu`: fp8 into f32 on sm_90 goes through
    wgmma, whose fp8 accumulation is narrower than f32; every other (mma.sync, tcgen05) is at least `dty`."""
    return "f32<fp8" if dty == "f32" and aty in ("e4m3", "e5m2") and gpu.startswith("sm_90") else dty


def full_precision(rng: np.random.Generator, shape: tuple, raw: object) -> np.ndarray:
    """Standard normal values rounded to the input type `raw` (the values the kernel multiplies)."""
    return rng.standard_normal(shape).astype(raw).astype(np.float64)


def limit(want: np.ndarray, magnitude: np.ndarray, k: int, dty: str, aty: str = "", out: str = "",
          roundings: int = 1) -> np.ndarray:
    """How far a K-term sum computed in `dty` in any order may be from `want`: (K u + input rounding) times
    `magnitude` (the sum of the terms' magnitudes, |a| @ |b|.T for a product), plus `roundings` roundings of
    the output (to `out`, else `dty`)."""
    return (k * UNIT[dty] + INPUT_ROUNDING.get(aty, 0.0)) * magnitude + roundings * UNIT[out or dty] * np.abs(want)


def apart(want: np.ndarray, magnitude: np.ndarray, k: int, dty: str, out: str = "") -> np.ndarray:
    """How far apart two computations of the same K-term sum of the same (already rounded) products may be, each
    in `dty` in any order and rounded once to `out` (else `dty`): the emulator's against the interpreter's, where
    both round the inputs alike. Each is within `limit` of the exact sum, so twice that."""
    return 2 * limit(want, magnitude, k, dty, out=out)


def assert_accumulated(got: np.ndarray, want: np.ndarray, a: np.ndarray, b: np.ndarray, dty: str,
                       aty: str = "", out: str = "") -> None:
    """`got` = a @ b.T (+ C) computed in `dty` in any order: |got - want| <= (K u + input rounding) |a| @ |b|.T
    (the classic bound of a K-term floating-point sum), plus one rounding of the output (to `out`, else `dty`)."""
    k = a.shape[1]
    bound = limit(want, np.abs(a) @ np.abs(b).T, k, dty, aty, out)
    err = np.abs(got - want)
    assert (err <= bound).all(), (f"{int((err > bound).sum())} elements beyond the K={k} accumulation bound; "
                                  f"worst {float((err - bound).max()):.3g} over")
