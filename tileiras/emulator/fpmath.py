"""Exact rounding of float64 values to PTX float formats, under every rounding mode.

`round_to(v, fmt, mode, err)` rounds `v + err` (err: a tiny residual known
only by its sign, from error-free transformations) to the nearest value of
`fmt` in the direction `mode`, working on the scaled significand so the
result is exact for f32, f16, bf16, tf32 and the fp8 formats, subnormals
included. `two_sum`/`two_prod` give exact residuals for f64 arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

MODES = ("rn", "rz", "rm", "rp", "rna")


@dataclass(frozen=True)
class Format:
    name: str
    ebits: int
    mbits: int
    has_inf: bool = True
    max_finite: float = 0.0   # filled by _fmt for IEEE-like formats

    @property
    def emin(self) -> int:
        return 2 - (1 << (self.ebits - 1))


@lru_cache(maxsize=None)
def fmt(name: str) -> Format:
    table = {"f64": (11, 52, True), "f32": (8, 23, True), "f16": (5, 10, True), "bf16": (8, 7, True),
             "tf32": (8, 10, True), "e5m2": (5, 2, True), "e4m3": (4, 3, False),
             "e3m2": (3, 2, False), "e2m3": (2, 3, False), "e2m1": (2, 1, False), "ue5m3": (5, 3, False)}
    ebits, mbits, has_inf = table[name]
    bias = (1 << (ebits - 1)) - 1
    if has_inf:
        emax = bias
        max_finite = (2.0 - 2.0 ** -mbits) * 2.0 ** emax
    elif name in ("e4m3", "ue5m3"):
        # the top exponent field is normal except the all-ones NaN pattern
        max_finite = (2.0 - 2.0 ** (1 - mbits)) * 2.0 ** ((1 << ebits) - 1 - bias)
    else:
        emax = (1 << ebits) - 1 - bias  # MX formats: no inf, no NaN
        max_finite = (2.0 - 2.0 ** -mbits) * 2.0 ** emax
    return Format(name, ebits, mbits, has_inf, max_finite)


def round_to(v: Any, fmt_name: str, mode: str, err: Optional[Any] = None, sat: bool = False) -> Any:
    """Round float64 array `v` (+ residual `err`) to `fmt_name`; returns float64 values of that format.

    Overflow follows IEEE for the mode (inf, or the largest finite value when
    rounding toward zero); `sat` (satfinite) clamps to the largest finite
    value instead. Formats without an infinity give NaN on overflow unless
    saturating.
    """
    import numpy as np

    f = fmt(fmt_name)
    v = np.asarray(v, dtype=np.float64)
    a = np.abs(v)
    neg = np.signbit(v)
    _, e = np.frexp(a)
    e = e.astype(np.int64) - 1
    et = np.maximum(e, f.emin)
    shift = et - f.mbits
    s = np.ldexp(a, -shift)            # exact: scale by a power of two
    fl = np.floor(s)
    frac = s - fl
    if err is None:
        errm = None
    else:
        errm = np.where(neg, -np.asarray(err, dtype=np.float64), np.asarray(err, dtype=np.float64))
    inexact = frac > 0
    if mode == "rn":
        up = (frac > 0.5) | ((frac == 0.5) & (np.fmod(fl, 2) == 1))
        if errm is not None:
            up = np.where(frac == 0.5, (errm > 0) | ((errm == 0) & (np.fmod(fl, 2) == 1)), up)
        down = None
    elif mode == "rna":
        up = frac >= 0.5
        if errm is not None:
            up = np.where(frac == 0.5, errm >= 0, up)
        down = None
    elif mode in ("rz", "rm", "rp"):
        if mode == "rz":
            up_mag = np.zeros(a.shape, dtype=bool)
        elif mode == "rp":
            up_mag = ~neg
        else:
            up_mag = neg.copy()
        up = up_mag & inexact
        down = None
        if errm is not None:
            exact_here = ~inexact
            up = up | (up_mag & exact_here & (errm > 0))
            down = ~up_mag & exact_here & (errm < 0) & (a > 0)
    else:
        raise ValueError(mode)
    r = np.ldexp(fl + up, shift)
    if down is not None and down.any():
        # just below a representable value: step one quantum down (half a quantum at a binade start)
        q = np.ldexp(np.ones_like(a), shift)
        at_binade_start = (fl == 2.0 ** f.mbits) & (e > f.emin)
        r = np.where(down, a - np.where(at_binade_start, q / 2, q), r)
    # overflow: inf for round-to-nearest and rounding away from zero, else the largest finite value
    big = r > f.max_finite
    if big.any():
        inf_value = np.inf if f.has_inf else np.nan
        if sat:
            over = np.full(r.shape, f.max_finite)
        elif mode in ("rn", "rna"):
            over = np.full(r.shape, inf_value)
        else:
            away = (~neg if mode == "rp" else neg) if mode != "rz" else np.zeros(r.shape, dtype=bool)
            over = np.where(away, inf_value, f.max_finite)
        r = np.where(big, over, r)
    inf_in = np.isinf(a)
    if inf_in.any():
        r = np.where(inf_in, f.max_finite if (sat or not f.has_inf) else np.inf, r)
        if not f.has_inf and not sat:
            r = np.where(inf_in, np.nan, r)
    r = np.where(neg, -r, r)
    nan_in = np.isnan(v)
    if nan_in.any():
        r = np.where(nan_in, np.nan, r)
    return r


def two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    """s + e == a + b exactly, s = fl(a + b)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _split(a: Any) -> tuple[Any, Any]:
    c = 134217729.0 * a          # 2**27 + 1
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a: Any, b: Any) -> tuple[Any, Any]:
    """p + e == a * b exactly (barring overflow/underflow), p = fl(a * b)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def fma64(a: Any, b: Any, c: Any) -> tuple[Any, Any]:
    """fl(a*b + c) for float64 arrays with a residual: correct except in double-rounding corner cases."""
    import numpy as np

    p, e1 = two_prod(a, b)
    s, e2 = two_sum(p, c)
    tail = e1 + e2
    r, e3 = two_sum(s, tail)
    bad = ~np.isfinite(r)
    if bad.any():
        r = np.where(bad, a * b + c, r)
        e3 = np.where(bad, 0.0, e3)
    return r, e3


def step_f64(r: Any, err: Any, mode: str) -> Any:
    """Directed rounding of an f64 result `r` (already round-to-nearest) given the sign of its residual."""
    import numpy as np

    if mode == "rn":
        return r
    if mode == "rz":
        fix = ((r > 0) & (err < 0)) | ((r < 0) & (err > 0))
        return np.where(fix, np.nextafter(r, 0.0), r)
    if mode == "rm":
        return np.where(err < 0, np.nextafter(r, -np.inf), r)
    if mode == "rp":
        return np.where(err > 0, np.nextafter(r, np.inf), r)
    raise ValueError(mode)


def ftz32(x: Any) -> Any:
    """Flush f32 subnormals to sign-preserving zero."""
    import numpy as np

    x = np.asarray(x, dtype=np.float32)
    tiny = (np.abs(x) < np.float32(1.1754944e-38)) & (x != 0)
    if tiny.any():
        return np.where(tiny, np.copysign(np.float32(0), x), x).astype(np.float32)
    return x
