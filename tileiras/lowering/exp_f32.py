"""Full-accuracy f32 exp in a dozen instructions, so that a kernel whose only math function is
`exp` (SiLU, GELU, sigmoid) need not parse and link libdevice (0.05-0.07 s of its compile).

exp(x) = 2^t with t = x log2(e), split as t = k + r, k an integer and |r| <= 1/2:

* k = rint(x * L1), L1 = log2(e) rounded to f32, clamped to [-126, 126] so that 2^k is a
  normal f32 built from its exponent bits: adding 1.5 * 2^23 in the fma that forms the product
  rounds it to an integer held in the sum's low bits (no cvt instructions). Where the clamp binds, r grows instead: a result
  below 2^-126 comes out of one rounding of 2^r * 2^-126 (subnormals, then 0), one above
  2^127 overflows to infinity in 2^r or in the product. NaN keeps k finite (minnum/maxnum
  return the other operand) and propagates through r.
* r = x L1 - k + x L2 (L2 = log2(e) - L1 rounded to f32) by two fmas: the product is exact in
  each, so r is off by at most two roundings of numbers below 1 (2^-25), which moves 2^r by
  at most ln 2 * 2^-25 relative, about a third of an ulp.
* 2^r by ex2.approx.ftz (PTX's approximation; its input lies in [-24, 2] and is normal or
  negligible, so flushing cannot matter), then one multiplication by 2^k (flushing a
  subnormal result where the op asks for flush_to_zero).

The error is the ex2 approximation's plus about 0.85 ulp (tests/test_exp_f32.py measures it
against numpy on the emulator, whose ex2 rounds the exact power).
"""

from __future__ import annotations

from .llvm_text import FunctionBuilder

LOG2E_HI = "0x3FF7154760000000"    # f32(log2 e) = 1.44269502162933349609375
LOG2E_LO = "0x3E54AE0C00000000"    # f32(log2 e - LOG2E_HI) = 1.925963033500011e-08
K_MAX = 126                        # 2^k stays a normal number for |k| <= 126
ROUNDER = 1.5 * 2 ** 23            # f32 sums near it are integers: its low bits hold k
ROUNDER_BITS = 0x4B400000


def _float(v: float) -> str:
    return f"{v:.1f}"


def exp_f32(b: FunctionBuilder, x: str, ftz: bool) -> str:
    """The instructions computing exp of the f32 value `x`; returns the result's name."""
    # fl(x L1 + ROUNDER) = ROUNDER + rint(x L1): the fma rounds the exact product once to an integer
    t = b.call("float", "llvm.fma.f32", [("float", x), ("float", LOG2E_HI), ("float", _float(ROUNDER))], hint="ex")
    t = b.call("float", "llvm.maxnum.f32", [("float", t), ("float", _float(ROUNDER - K_MAX))], hint="ex")
    t = b.call("float", "llvm.minnum.f32", [("float", t), ("float", _float(ROUNDER + K_MAX))], hint="ex")
    minus_k = b.op(f"fsub float {_float(ROUNDER)}, {t}", "ex")   # exact
    r = b.call("float", "llvm.fma.f32", [("float", x), ("float", LOG2E_HI), ("float", minus_k)], hint="ex")
    r = b.call("float", "llvm.fma.f32", [("float", x), ("float", LOG2E_LO), ("float", r)], hint="ex")
    power = b.call("float", "llvm.nvvm.ex2.approx.ftz.f", [("float", r)], hint="ex")
    # 2^k's bits: (k + 127) << 23, k being t's bits less ROUNDER's
    biased = b.op(f"add i32 {b.op(f'bitcast float {t} to i32', 'ex')}, {127 - ROUNDER_BITS}", "ex")
    scale = b.op(f"bitcast i32 {b.op(f'shl i32 {biased}, 23', 'ex')} to float", "ex")
    if ftz:
        return b.call("float", "llvm.nvvm.mul.rn.ftz.f", [("float", power), ("float", scale)], hint="ex")
    return b.op(f"fmul float {power}, {scale}", "ex")
