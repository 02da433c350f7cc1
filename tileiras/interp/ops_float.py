"""Floating-point arithmetic, comparison, min/max and math functions.

Every result is the exact value rounded once into the result type with the
op's rounding mode (`floats.quantize`). IEEE ops in the default mode take a
fast path: f16/bf16/f32 operands computed in f32 are correctly rounded for
+ - * / sqrt (f32 has more than 2p+2 bits for p <= 11, so the second
rounding is innocuous). `approx` and `full` modes and the transcendental
functions are computed in f64 and rounded to nearest: the interpreter is the
ideal the hardware approximates within its documented ulp bounds.
`flush_to_zero` flushes f32 subnormal inputs and results to signed zero.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir.core import Operation
from .elements import element, int_bits, to_signed
from .floats import (FloatFormat, exact_binary, exact_fma, exact_sqrt, exact_zero_sum, float_format, flush_subnormals,
                     quantize)
from .ops_int import COMPARE

_F64 = np.float64
_FAST = ("nearest_even", "approx", "full")


def fmt_of(op: Operation) -> FloatFormat:
    return float_format(element(op.results[0].type).name)  # type: ignore[union-attr]


def _ftz(op: Operation, fmt: FloatFormat, xs: list) -> list:
    if op.attributes.get("flush_to_zero", False) and fmt.name == "f32":
        return [flush_subnormals(np.asarray(x)) for x in xs]
    return xs


def _out(op: Operation, fmt: FloatFormat, r: np.ndarray) -> np.ndarray:
    if op.attributes.get("flush_to_zero", False) and fmt.name == "f32":
        return flush_subnormals(r)
    return r


_NATIVE = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def _arith(kind: str):
    def run(m: Any, op: Operation, args: list) -> list:
        fmt = fmt_of(op)
        mode = op.attributes.get("rounding_mode", "nearest_even")
        a, b = _ftz(op, fmt, args)
        if mode in _FAST and fmt.name in ("f16", "bf16", "f32", "f64"):
            wide = _F64 if fmt.name == "f64" else np.float32
            r = _NATIVE[kind](np.asarray(a, wide), np.asarray(b, wide)).astype(fmt.dtype)
        else:
            x, y = np.asarray(a, _F64), np.asarray(b, _F64)
            hi, lo = exact_binary(kind, x, y)
            if kind in ("add", "sub"):
                hi = exact_zero_sum(hi, lo, x, y if kind == "add" else -y, mode)
            r = quantize(hi, lo, fmt, mode)
        return [_out(op, fmt, r)]
    return run


def _fma(m: Any, op: Operation, args: list) -> list:
    fmt = fmt_of(op)
    mode = op.attributes.get("rounding_mode", "nearest_even")
    a, b, c = (np.asarray(x, _F64) for x in _ftz(op, fmt, args))
    hi, lo = exact_fma(a, b, c)
    return [_out(op, fmt, quantize(exact_zero_sum(hi, lo, a * b, c, mode), lo, fmt, mode))]


def _sqrt(m: Any, op: Operation, args: list) -> list:
    fmt = fmt_of(op)
    mode = op.attributes.get("rounding_mode", "nearest_even")
    (a,) = _ftz(op, fmt, args)
    return [_out(op, fmt, quantize(*exact_sqrt(np.asarray(a, _F64)), fmt, mode))]


def _math(fn: Callable[..., np.ndarray]):
    """A function computed in f64 and rounded to nearest into the result type."""
    def run(m: Any, op: Operation, args: list) -> list:
        fmt = fmt_of(op)
        xs = [np.asarray(x, _F64) for x in _ftz(op, fmt, args)]
        return [_out(op, fmt, quantize(fn(*xs), None, fmt))]
    return run


def _exact(fn: Callable[[np.ndarray], np.ndarray]):
    """Ops whose result is representable (neg, abs, floor, ceil): no rounding."""
    def run(m: Any, op: Operation, args: list) -> list:
        fmt = fmt_of(op)
        return [fn(np.asarray(args[0], _F64)).astype(fmt.dtype)]
    return run


def _fpowi(m: Any, op: Operation, args: list) -> list:
    fmt = fmt_of(op)
    n = to_signed(args[1], int_bits(op.operands[1].type)).astype(_F64)
    return [quantize(np.power(np.asarray(args[0], _F64), n), None, fmt)]


def _minmax(is_max: bool):
    def run(m: Any, op: Operation, args: list) -> list:
        fmt = fmt_of(op)
        a, b = (np.asarray(x, _F64) for x in _ftz(op, fmt, args))
        if is_max:
            pick_a = (a > b) | ((a == b) & ~np.signbit(a))      # +0 > -0
        else:
            pick_a = (a < b) | ((a == b) & np.signbit(a))
        r = np.where(pick_a, a, b)
        na, nb = np.isnan(a), np.isnan(b)
        if op.attributes.get("propagate_nan", False):
            r = np.where(na | nb, np.nan, r)
        else:
            r = np.where(na & ~nb, b, np.where(nb & ~na, a, r))
            r = np.where(na & nb, np.nan, r)
        return [_out(op, fmt, r.astype(fmt.dtype))]
    return run


def _cmpf(m: Any, op: Operation, args: list) -> list:
    a, b = np.asarray(args[0], _F64), np.asarray(args[1], _F64)
    pred = COMPARE[op.attributes["comparison_predicate"]]
    nan = np.isnan(a) | np.isnan(b)
    with np.errstate(invalid="ignore"):
        r = pred(a, b)
    if op.attributes.get("comparison_ordering", "ordered") == "ordered":
        r = r & ~nan
    else:
        r = r | nan
    return [np.asarray(r, np.bool_)]


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def _safe(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def wrapped(*xs: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return fn(*xs)
    return wrapped


HANDLERS = {
    "cuda_tile.addf": _arith("add"),
    "cuda_tile.subf": _arith("sub"),
    "cuda_tile.mulf": _arith("mul"),
    "cuda_tile.divf": _arith("div"),
    "cuda_tile.fma": _fma,
    "cuda_tile.sqrt": _sqrt,
    "cuda_tile.rsqrt": _math(_rsqrt),
    "cuda_tile.negf": _exact(np.negative),
    "cuda_tile.absf": _exact(np.abs),
    "cuda_tile.floor": _exact(np.floor),
    "cuda_tile.ceil": _exact(np.ceil),
    "cuda_tile.remf": _math(_safe(np.fmod)),
    "cuda_tile.exp": _math(_safe(np.exp)),
    "cuda_tile.exp2": _math(_safe(np.exp2)),
    "cuda_tile.log": _math(_safe(np.log)),
    "cuda_tile.log2": _math(_safe(np.log2)),
    "cuda_tile.sin": _math(_safe(np.sin)),
    "cuda_tile.cos": _math(_safe(np.cos)),
    "cuda_tile.tan": _math(_safe(np.tan)),
    "cuda_tile.sinh": _math(_safe(np.sinh)),
    "cuda_tile.cosh": _math(_safe(np.cosh)),
    "cuda_tile.tanh": _math(_safe(np.tanh)),
    "cuda_tile.fpowf": _math(_safe(np.power)),
    "cuda_tile.pow": _math(_safe(np.power)),
    "cuda_tile.atan2": _math(_safe(np.arctan2)),
    "cuda_tile.fpowi": _fpowi,
    "cuda_tile.maxf": _minmax(True),
    "cuda_tile.minf": _minmax(False),
    "cuda_tile.cmpf": _cmpf,
}
