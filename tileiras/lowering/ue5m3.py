"""Conversions to and from fnv8E5M3FNU (PTX `ue5m3`), as inline PTX.

fnv8E5M3FNU is an unsigned byte float: 5 exponent bits (bias 15), 3 mantissa
bits, no infinity, 0xFF the only NaN, largest finite 0xFE = 1.75 * 2**16.
LLVM 22 has no intrinsic for it, so the PTX `cvt` forms NVIDIA's tileiras
emits are written as inline asm (PTX ISA 9.4, sm_107a/sm_107f only):

* to:   `cvt.rn.satfinite.ue5m3x2.f32 d, hi, lo` -- the sign of the input is
  discarded, NaN -> 0xFF, +-inf and overflow -> 0xFE, round to nearest even;
* from: `cvt.rn.bf16x2.ue5m3x2 d, a` -- exact (bf16 holds every ue5m3 value).
"""

from __future__ import annotations

from .llvm_text import FunctionBuilder

TO_F32 = "cvt.rn.satfinite.ue5m3x2.f32"
TO_BF16 = "cvt.rn.bf16x2.ue5m3x2"


def from_f32(b: FunctionBuilder, v: str) -> str:
    """An f32 value -> its fnv8E5M3FNU byte (the low half of the packed pair)."""
    pair = b.op(f'call i16 asm "{TO_F32} $0, $1, $2;", "=h,f,f"(float 0.0, float {v})', "ue")
    return b.op(f"trunc i16 {pair} to i8", "ue")


def to_bf16(b: FunctionBuilder, byte: str) -> str:
    """An fnv8E5M3FNU byte -> its exact bfloat value."""
    wide = b.op(f"zext i8 {byte} to i16", "ue")
    pair = b.op(f'call i32 asm "{TO_BF16} $0, $1;", "=r,h"(i16 {wide})', "ue")
    low = b.op(f"trunc i32 {pair} to i16", "ue")
    return b.op(f"bitcast i16 {low} to bfloat", "ue")
