"""Integer arithmetic, bitwise and comparison ops (elementwise).

Operands are read as signed (int64) or unsigned (uint64) per the op's
semantics, computed exactly, and wrapped to the result width: wrap-around is
what the hardware does, so it is what the interpreter does. Overflow flags
(`no_signed_wrap` ...) are promises of the producer, not checks. Division
by zero is undefined in TileIR; like PTX, x/0 gives all ones and x%0 gives x,
so padded lanes of a ragged tile (which are never stored) do not fail the run.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir.core import Operation
from .elements import from_int, int_bits, to_signed, to_unsigned

_U64 = np.uint64


def _bits(op: Operation) -> int:
    return int_bits(op.operands[0].type)


def _signed(op: Operation, attr: str = "signedness") -> bool:
    return op.attributes.get(attr, "signed") == "signed"


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], signed: bool = True):
    def run(m: Any, op: Operation, args: list) -> list:
        bits = _bits(op)
        view = to_signed if signed else to_unsigned
        return [from_int(fn(view(args[0], bits), view(args[1], bits)), bits)]
    return run


def _bitwise(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]):
    def run(m: Any, op: Operation, args: list) -> list:
        return [fn(np.asarray(args[0]), np.asarray(args[1]))]
    return run


def _by_signedness(signed_fn, unsigned_fn):
    def run(m: Any, op: Operation, args: list) -> list:
        bits = _bits(op)
        if _signed(op):
            return [from_int(signed_fn(to_signed(args[0], bits), to_signed(args[1], bits), bits), bits)]
        return [from_int(unsigned_fn(to_unsigned(args[0], bits), to_unsigned(args[1], bits), bits), bits)]
    return run


# -- division ---------------------------------------------------------------------
def _sdiv(a: np.ndarray, b: np.ndarray, bits: int, rounding: str = "zero") -> np.ndarray:
    zero = b == 0
    bb = np.where(zero, 1, b)
    lo = -(1 << (bits - 1))
    overflow = (a == lo) & (bb == -1)             # MIN / -1 wraps to MIN
    bb = np.where(overflow, 1, bb)
    q = np.floor_divide(a, bb)                    # floor
    r = a - q * bb
    inexact = r != 0
    if rounding == "zero":
        q = q + (inexact & ((a < 0) != (bb < 0)))
    elif rounding == "positive_inf":
        q = q + inexact
    q = np.where(overflow, a, q)
    return np.where(zero, -1, q)


def _udiv(a: np.ndarray, b: np.ndarray, bits: int, rounding: str = "zero") -> np.ndarray:
    zero = b == 0
    bb = np.where(zero, _U64(1), b)
    q = a // bb
    if rounding == "positive_inf":
        q = q + ((a % bb) != 0).astype(np.uint64)
    return np.where(zero, _U64(2**64 - 1), q)


def _divi(m: Any, op: Operation, args: list) -> list:
    bits = _bits(op)
    rounding = op.attributes.get("rounding", "zero")
    if _signed(op):
        q = _sdiv(to_signed(args[0], bits), to_signed(args[1], bits), bits, rounding)
    else:
        q = _udiv(to_unsigned(args[0], bits), to_unsigned(args[1], bits), bits, rounding)
    return [from_int(q, bits)]


def _srem(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    zero = b == 0
    bb = np.where(zero | (b == -1), 1, b)          # x % -1 == 0, and MIN % -1 must not trap
    r = np.fmod(a, bb)
    r = np.where(b == -1, 0, r)
    return np.where(zero, a, r)


def _urem(a: np.ndarray, b: np.ndarray, bits: int) -> np.ndarray:
    zero = b == 0
    return np.where(zero, a, a % np.where(zero, _U64(1), b))


# -- shifts and high multiply ------------------------------------------------------------
def _shli(m: Any, op: Operation, args: list) -> list:
    bits = _bits(op)
    x, sh = to_unsigned(args[0], bits), to_unsigned(args[1], bits)
    big = sh >= _U64(bits)
    r = np.left_shift(x, np.where(big, _U64(0), sh))
    return [from_int(np.where(big, _U64(0), r), bits)]


def _shri(m: Any, op: Operation, args: list) -> list:
    bits = _bits(op)
    sh = to_unsigned(args[1], bits)
    big = sh >= _U64(bits)
    if _signed(op):
        x = to_signed(args[0], bits)
        amount = np.where(big, bits - 1, sh.astype(np.int64) % 64)
        return [from_int(np.right_shift(x, amount), bits)]
    x = to_unsigned(args[0], bits)
    r = np.right_shift(x, np.where(big, _U64(0), sh))
    return [from_int(np.where(big, _U64(0), r), bits)]


def mulhi_u64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit product of uint64 arrays."""
    mask = _U64(0xFFFFFFFF)
    s = _U64(32)
    a_lo, a_hi = a & mask, a >> s
    b_lo, b_hi = b & mask, b >> s
    ll = a_lo * b_lo
    lh = a_lo * b_hi
    hl = a_hi * b_lo
    hh = a_hi * b_hi
    mid = (ll >> s) + (lh & mask) + (hl & mask)
    return hh + (lh >> s) + (hl >> s) + (mid >> s)


def _mulhii(m: Any, op: Operation, args: list) -> list:
    bits = _bits(op)
    a, b = to_unsigned(args[0], bits), to_unsigned(args[1], bits)
    if bits == 64:
        return [from_int(mulhi_u64(a, b), 64)]
    return [from_int((a * b) >> _U64(bits), bits)]


# -- unary ---------------------------------------------------------------------------
def _absi(m: Any, op: Operation, args: list) -> list:
    bits = _bits(op)
    return [from_int(np.abs(to_signed(args[0], bits)), bits)]


def _negi(m: Any, op: Operation, args: list) -> list:
    bits = _bits(op)
    return [from_int(np.negative(to_signed(args[0], bits)), bits)]


# -- comparison ----------------------------------------------------------------------
COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "equal": np.equal, "not_equal": np.not_equal,
    "less_than": np.less, "less_than_or_equal": np.less_equal,
    "greater_than": np.greater, "greater_than_or_equal": np.greater_equal,
}


def _cmpi(m: Any, op: Operation, args: list) -> list:
    bits = _bits(op)
    view = to_signed if _signed(op) else to_unsigned
    pred = COMPARE[op.attributes["comparison_predicate"]]
    return [np.asarray(pred(view(args[0], bits), view(args[1], bits)), np.bool_)]


HANDLERS = {
    "cuda_tile.addi": _binary(np.add),
    "cuda_tile.subi": _binary(np.subtract),
    "cuda_tile.muli": _binary(np.multiply, signed=False),
    "cuda_tile.andi": _bitwise(np.bitwise_and),
    "cuda_tile.ori": _bitwise(np.bitwise_or),
    "cuda_tile.xori": _bitwise(np.bitwise_xor),
    "cuda_tile.maxi": _by_signedness(lambda a, b, n: np.maximum(a, b), lambda a, b, n: np.maximum(a, b)),
    "cuda_tile.mini": _by_signedness(lambda a, b, n: np.minimum(a, b), lambda a, b, n: np.minimum(a, b)),
    "cuda_tile.remi": _by_signedness(_srem, _urem),
    "cuda_tile.divi": _divi,
    "cuda_tile.shli": _shli,
    "cuda_tile.shri": _shri,
    "cuda_tile.mulhii": _mulhii,
    "cuda_tile.absi": _absi,
    "cuda_tile.negi": _negi,
    "cuda_tile.cmpi": _cmpi,
}
