"""Float formats and correctly rounded conversion into them.

Every cuda_tile float type is a small IEEE-like format. `quantize` rounds an
exact value, given as an unevaluated f64 sum `hi + lo` (|lo| at most half an
f64 ulp of `hi`), into a format under any rounding mode, with IEEE overflow or
PTX `.satfinite` saturation. Casting through numpy/ml_dtypes would round
twice (f64 -> f32 -> bf16 is wrong for some inputs), so the rounding is done
here on the exact value, once.

Arithmetic helpers give the exact result of f64 operations as such pairs
(error-free transformations: TwoSum, Dekker's TwoProduct), so every float op
of the interpreter is rounded exactly once, in the mode the op asks for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    name: str
    dtype: Any             # numpy storage dtype
    mbits: int             # explicit mantissa bits
    emin: int              # exponent of the smallest normal number
    max: float             # largest finite value
    has_inf: bool
    has_nan: bool
    satfinite: bool        # conversions into it saturate (PTX cvt .satfinite)
    exponent_only: bool = False   # f8E8M0FNU: 2**k values, no sign, no zero
    unsigned: bool = False        # no sign bit: the sign of the input is discarded (PTX cvt .ue5m3x2)
    codec: bool = False           # no numpy dtype: values are held in float32, bits via `encode_bits`


@lru_cache(maxsize=None)
def float_format(name: str) -> FloatFormat:
    import ml_dtypes as md

    table = {
        "f16": (np.float16, 10, -14, 65504.0, True, True, False),
        "bf16": (md.bfloat16, 7, -126, (2 - 2.0**-7) * 2.0**127, True, True, False),
        "f32": (np.float32, 23, -126, float(np.finfo(np.float32).max), True, True, False),
        "tf32": (np.float32, 10, -126, (2 - 2.0**-10) * 2.0**127, True, True, False),
        "f64": (np.float64, 52, -1022, float(np.finfo(np.float64).max), True, True, False),
        "f8E4M3FN": (md.float8_e4m3fn, 3, -6, 448.0, False, True, True),
        "f8E5M2": (md.float8_e5m2, 2, -14, 57344.0, True, True, True),
        "f4E2M1FN": (md.float4_e2m1fn, 1, 0, 6.0, False, False, True),
        "f8E8M0FNU": (md.float8_e8m0fnu, 0, -127, 2.0**127, False, True, True),
        "fnv8E5M3FNU": (np.float32, 3, -14, 1.75 * 2.0**16, False, True, True),
    }
    if name not in table:
        from .errors import InterpError

        raise InterpError(f"element type '{name}' is not supported by the interpreter")
    dtype, mbits, emin, fmax, inf, nan, sat = table[name]
    return FloatFormat(name, np.dtype(dtype), mbits, emin, fmax, inf, nan, sat,
                       exponent_only=(name == "f8E8M0FNU"), unsigned=name.endswith("FNU"),
                       codec=(name == "fnv8E5M3FNU"))


# Rounding modes as magnitude rules, per sign of the value.
_NEAREST = ("nearest_even", "approx", "full", "nearest_int_to_zero")


def _magnitude_rule(mode: str, negative: np.ndarray) -> np.ndarray:
    """Per element: 0 nearest-even, 1 toward zero, 2 away from zero, 3 nearest-away."""
    if mode in _NEAREST:
        return np.zeros(negative.shape, np.int8)
    if mode == "nearest_away":
        return np.full(negative.shape, 3, np.int8)
    if mode == "zero":
        return np.ones(negative.shape, np.int8)
    if mode == "positive_inf":
        return np.where(negative, 1, 2).astype(np.int8)
    if mode == "negative_inf":
        return np.where(negative, 2, 1).astype(np.int8)
    from .errors import InterpError

    raise InterpError(f"unknown rounding mode '{mode}'")


def quantize(hi: Any, lo: Any, fmt: FloatFormat, mode: str = "nearest_even",
             saturate: Optional[bool] = None) -> np.ndarray:
    """Round the exact value `hi + lo` (f64 arrays) into `fmt` under `mode`."""
    hi = np.asarray(hi, np.float64)
    lo = np.zeros_like(hi) if lo is None else np.broadcast_to(np.asarray(lo, np.float64), hi.shape)
    if fmt.name == "f64":
        return _round_f64(hi, lo, mode)
    sat = fmt.satfinite if saturate is None else saturate
    if fmt.exponent_only:
        return _quantize_e8m0(hi, lo, fmt, mode)
    if fmt.unsigned:                          # -x converts as x (NaN stays NaN)
        lo = np.where(np.signbit(hi), -lo, lo)
        hi = np.abs(hi)
    neg = np.signbit(hi)
    a = np.abs(hi)
    la = np.where(neg, -lo, lo)               # > 0: the exact magnitude is above `a`
    finite = np.isfinite(a)
    live = finite & (a > 0)
    a1 = np.where(live, a, 1.0)
    _, ex = np.frexp(a1)
    e = np.maximum(ex - 1, fmt.emin)
    q = np.ldexp(1.0, e - fmt.mbits)          # spacing of the format around `a`
    s = a1 / q                                # exact: scaling by a power of two
    n = np.floor(s)
    frac = s - n
    rule = _magnitude_rule(mode, neg)
    odd = np.fmod(n, 2) == 1
    up_nearest = (frac > 0.5) | ((frac == 0.5) & ((la > 0) | ((la == 0) & odd)))
    up_away_tie = (frac > 0.5) | ((frac == 0.5) & (la >= 0))
    up_away = (frac > 0) | ((frac == 0) & (la > 0))
    down_trunc = (frac == 0) & (la < 0)       # exactly on a grid point but a hair below it
    up = np.where(rule == 0, up_nearest, np.where(rule == 3, up_away_tie, np.where(rule == 2, up_away, False)))
    r = (n + up) * q
    # Truncating just below a grid point: one step down (half a step at a binade start).
    binade_start = (n == 2.0**fmt.mbits) & (e > fmt.emin)
    r = np.where((rule == 1) & down_trunc, np.where(binade_start, a1 - q / 2, (n - 1) * q), r)
    over = r > fmt.max
    if over.any():
        to_max = (rule == 1) | sat
        big = np.inf if fmt.has_inf else np.nan
        r = np.where(over, np.where(to_max, fmt.max, big), r)
    r = np.where(live, r, a)                  # zeros, infinities and NaN pass through
    inf_in = np.isinf(a)
    if inf_in.any() and (sat or not fmt.has_inf):
        r = np.where(inf_in, fmt.max if sat else np.nan, r)
    r = np.where(neg, -r, r)
    with np.errstate(invalid="ignore", over="ignore"):
        return r.astype(fmt.dtype)


def encode_bits(values: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Bit patterns (uint64) of values of a `codec` format (fnv8E5M3FNU: 5-bit exponent, bias 15, 3-bit mantissa)."""
    v = np.asarray(values, np.float64)
    nan = np.isnan(v)
    a = np.where(nan | (v <= 0), 0.0, v)
    m, ex = np.frexp(np.where(a > 0, a, 1.0))
    e = ex - 1
    normal = (a >= 2.0**fmt.emin)
    field = np.where(normal, e - fmt.emin + 1, 0)
    mant = np.where(normal, (a / np.ldexp(1.0, e) - 1) * 2**fmt.mbits, a / 2.0**(fmt.emin - fmt.mbits))
    bits = (field.astype(np.uint64) << np.uint64(fmt.mbits)) | mant.astype(np.uint64)
    return np.where(nan, np.uint64(0xFF), np.where(a > 0, bits, np.uint64(0)))


def decode_bits(bits: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    b = np.asarray(bits, np.uint64) & np.uint64(0xFF)
    field = (b >> np.uint64(fmt.mbits)).astype(np.int64)
    mant = (b & np.uint64((1 << fmt.mbits) - 1)).astype(np.float64)
    normal = np.ldexp(1 + mant / 2**fmt.mbits, field - 1 + fmt.emin)
    sub = mant * 2.0**(fmt.emin - fmt.mbits)
    v = np.where(field == 0, sub, normal)
    return np.where(b == 0xFF, np.nan, v).astype(fmt.dtype)


def _quantize_e8m0(hi: np.ndarray, lo: np.ndarray, fmt: FloatFormat, mode: str) -> np.ndarray:
    """f8E8M0FNU holds 2**k, k in [-127, 127]; conversions saturate (satfinite)."""
    a = np.where(hi > 0, hi, 2.0**-127)       # zero and negatives saturate to the smallest value
    a = np.where(np.isnan(hi), 1.0, a)
    m, ex = np.frexp(np.where(np.isinf(a), 1.0, a))
    k = (ex - 1).astype(np.float64)           # a = (2m) * 2**k with 2m in [1, 2)
    on_pow = m == 0.5
    rule = _magnitude_rule(mode, np.zeros(a.shape, bool))
    trunc = np.where(on_pow & (lo < 0), k - 1, k)
    ceil = np.where(on_pow & (lo <= 0), k, k + 1)
    nearest = np.where((2 * m > 1.5) | ((2 * m == 1.5) & (lo >= 0)), k + 1, k)
    k = np.where(rule == 1, trunc, np.where(rule == 2, ceil, nearest))
    k = np.clip(k, -127, 127)
    k = np.where(np.isinf(a), 127, k)
    r = np.ldexp(1.0, k.astype(np.int64))
    r = np.where(np.isnan(hi), np.nan, r)
    with np.errstate(invalid="ignore", over="ignore"):
        return r.astype(fmt.dtype)


def _round_f64(hi: np.ndarray, lo: np.ndarray, mode: str) -> np.ndarray:
    p = np.where(lo == 0, hi, hi + lo)        # -0 + 0 would turn an exact -0 (sqrt(-0)) into +0
    if mode in _NEAREST:
        return p
    rem = (hi - p) + lo                       # sign of (exact - p)
    with np.errstate(invalid="ignore"):
        if mode == "zero":
            step = (rem * np.sign(p) < 0) | (np.isinf(p) & np.isfinite(hi))
            return np.where(step, np.nextafter(p, 0.0), p)
        if mode == "positive_inf":
            step = (rem > 0) | (np.isneginf(p) & np.isfinite(hi))
            return np.where(step, np.nextafter(p, np.inf), p)
        if mode == "negative_inf":
            step = (rem < 0) | (np.isposinf(p) & np.isfinite(hi))
            return np.where(step, np.nextafter(p, -np.inf), p)
        if mode == "nearest_away":
            return p
    from .errors import InterpError

    raise InterpError(f"unknown rounding mode '{mode}'")


# -- error-free transformations in f64 ------------------------------------------
def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), err, 0.0)


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = 134217729.0 * a                       # 2**27 + 1 (Veltkamp)
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, np.where(np.isfinite(p) & np.isfinite(err), err, 0.0)


def exact_binary(kind: str, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`a kind b` (f64 arrays) as an unevaluated pair hi + lo."""
    if kind == "add":
        return two_sum(a, b)
    if kind == "sub":
        return two_sum(a, -b)
    if kind == "mul":
        return two_prod(a, b)
    if kind == "div":
        q = a / b
        p, e = two_prod(q, b)
        r = (a - p) - e
        lo = np.where(np.isfinite(q) & (b != 0), r / np.where(b == 0, 1.0, b), 0.0)
        return q, lo
    raise ValueError(kind)


def exact_fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ph, pl = two_prod(a, b)
    s, e = two_sum(ph, c)
    tail = e + pl
    hi, lo = two_sum(s, tail)
    return np.where(tail == 0, s, hi), lo     # keep the sign of an exact zero: fma(0, -1, -0) = -0


def exact_zero_sum(hi: np.ndarray, lo: np.ndarray, x: np.ndarray, y: np.ndarray, mode: str) -> np.ndarray:
    """`hi` with IEEE's sign for an exact zero sum x + y: that of round-to-nearest (numpy's),
    except that rounding toward -inf makes it -0 unless both addends are +0."""
    if mode != "negative_inf":
        return hi
    return np.where((hi == 0) & (lo == 0), -((-x) + (-y)), hi)


def exact_sqrt(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r = np.sqrt(a)
    p, e = two_prod(r, r)
    res = (a - p) - e
    lo = np.where(np.isfinite(r) & (r > 0), res / np.where(r > 0, 2 * r, 1.0), 0.0)
    return r, lo


def flush_subnormals(x: np.ndarray) -> np.ndarray:
    """Sign-preserving flush of f32 subnormals to zero (`flush_to_zero`)."""
    tiny = np.abs(x) < np.float32(2.0**-126)
    return np.where(tiny & (x != 0), np.copysign(np.zeros_like(x), x), x)


def to_f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)
