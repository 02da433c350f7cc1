"""Conversions: bitcast, integer width changes, float<->float, float<->int,
pointer casts, and pack/unpack of rank-1 tiles to and from bytes.

ftof/itof round once with the op's rounding mode; conversions into the f8/f4
formats saturate to the largest finite value (PTX `cvt ... .satfinite`, the
only form PTX has for them). ftoi truncates toward zero and saturates to the
integer range with NaN -> 0, which is what PTX `cvt.rzi` does (TileIR leaves
out-of-range inputs undefined, the `saturating` flag of 13.4 makes it so).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.core import Operation
from .elements import (decode, element, encode, from_bits, from_int, int_bits, int_range, to_bits,
                       to_signed, to_unsigned)
from .errors import InterpError
from .floats import float_format, quantize, two_sum

_F64 = np.float64


def _bitcast(m: Any, op: Operation, args: list) -> list:
    return [from_bits(to_bits(args[0], op.operands[0].type), op.results[0].type)]


def _exti(m: Any, op: Operation, args: list) -> list:
    src, dst = int_bits(op.operands[0].type), int_bits(op.results[0].type)
    view = to_signed if op.attributes.get("signedness", "signed") == "signed" else to_unsigned
    return [from_int(view(args[0], src), dst)]


def _trunci(m: Any, op: Operation, args: list) -> list:
    src, dst = int_bits(op.operands[0].type), int_bits(op.results[0].type)
    return [from_int(to_unsigned(args[0], src), dst)]


def _ftof(m: Any, op: Operation, args: list) -> list:
    fmt = float_format(element(op.results[0].type).name)  # type: ignore[union-attr]
    mode = op.attributes.get("rounding_mode", "nearest_even")
    return [quantize(np.asarray(args[0], _F64), None, fmt, mode)]


def int_as_pair(x: np.ndarray, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """An int64/uint64 array as an exact f64 pair hi + lo."""
    if signed:
        high = np.right_shift(x, 32).astype(_F64)          # arithmetic shift
        low = (x & np.int64(0xFFFFFFFF)).astype(_F64)
    else:
        high = np.right_shift(x, np.uint64(32)).astype(_F64)
        low = (x & np.uint64(0xFFFFFFFF)).astype(_F64)
    return two_sum(high * 4294967296.0, low)


def _itof(m: Any, op: Operation, args: list) -> list:
    bits = int_bits(op.operands[0].type)
    signed = op.attributes.get("signedness", "signed") == "signed"
    x = to_signed(args[0], bits) if signed else to_unsigned(args[0], bits)
    fmt = float_format(element(op.results[0].type).name)  # type: ignore[union-attr]
    hi, lo = int_as_pair(x, signed)
    return [quantize(hi, lo, fmt, op.attributes.get("rounding_mode", "nearest_even"))]


def _ftoi(m: Any, op: Operation, args: list) -> list:
    bits = int_bits(op.results[0].type)
    signed = op.attributes.get("signedness", "signed") == "signed"
    lo, hi = int_range(bits, signed)
    x = np.trunc(np.asarray(args[0], _F64))
    nan = np.isnan(x)
    x = np.where(nan, 0.0, x)
    below, above = x < float(lo), x >= float(hi) + 1.0      # float(hi) may round up to 2**bits
    safe = np.clip(np.where(below | above, 0.0, x), float(lo), float(hi))
    if signed:
        v = safe.astype(np.int64)
        v = np.where(below, np.int64(lo), np.where(above, np.int64(hi), v))
    else:
        v = safe.astype(np.uint64)
        v = np.where(below, np.uint64(lo), np.where(above, np.uint64(hi), v))
    return [from_int(v, bits)]


def _ptr_to_int(m: Any, op: Operation, args: list) -> list:
    return [np.asarray(args[0], np.uint64).view(np.int64)]


def _int_to_ptr(m: Any, op: Operation, args: list) -> list:
    return [np.asarray(args[0], np.int64).view(np.uint64)]


def _ptr_to_ptr(m: Any, op: Operation, args: list) -> list:
    return [args[0]]


def _pack(m: Any, op: Operation, args: list) -> list:
    src_type = op.operands[0].type
    raw = np.frombuffer(encode(args[0], src_type), np.uint8)
    n = op.results[0].type.shape[0]  # type: ignore[attr-defined]
    if raw.size != n:
        raise InterpError(f"pack of {np.asarray(args[0]).size} elements gives {raw.size} bytes, "
                          f"the result holds {n}")
    return [raw.view(np.int8).copy()]


def _unpack(m: Any, op: Operation, args: list) -> list:
    dst = op.results[0].type
    n = dst.shape[0]  # type: ignore[attr-defined]
    raw = np.asarray(args[0]).view(np.uint8)
    out = decode(raw, dst, n)
    if out.size != n:
        raise InterpError(f"unpack of {raw.size} bytes cannot fill {n} elements")
    return [out]


HANDLERS = {
    "cuda_tile.bitcast": _bitcast,
    "cuda_tile.exti": _exti,
    "cuda_tile.trunci": _trunci,
    "cuda_tile.ftof": _ftof,
    "cuda_tile.itof": _itof,
    "cuda_tile.ftoi": _ftoi,
    "cuda_tile.ptr_to_int": _ptr_to_int,
    "cuda_tile.int_to_ptr": _int_to_ptr,
    "cuda_tile.ptr_to_ptr": _ptr_to_ptr,
    "cuda_tile.pack": _pack,
    "cuda_tile.unpack": _unpack,
}
