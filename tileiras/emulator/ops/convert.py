"""`cvt`: every conversion between PTX's integer and float types, with all rounding modes.

Integer rounding of floats (.rni/.rzi/.rmi/.rpi) saturates to the destination
range and maps NaN to 0, as the hardware does; float rounding (.rn/.rz/.rm/
.rp/.rna) is exact through `fpmath.round_to`; `.sat` clamps floats to [0, 1]
and integers to the destination range; `.satfinite` clamps to the largest
finite value; `.relu` clamps negatives to +0.
"""

from __future__ import annotations

from typing import Any, Callable

from ..fpmath import ftz32, round_to, two_sum
from ..parser import Instr
from ..program import K_OP, Decoder, Mods, bad
from ..ptxtypes import np_dtype, ptx_type, uint_dtype
from .common import full

IRND = ("rni", "rzi", "rmi", "rpi")
FRND = ("rn", "rz", "rm", "rp", "rna")
FLOAT_NAMES = ("f16", "bf16", "f32", "f64", "tf32", "e4m3", "e5m2")


def _np() -> Any:
    import numpy as np

    return np


def _round_integral(x: Any, irnd: str) -> Any:
    np = _np()
    return {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[irnd](x)


def float_to_int(x64: Any, irnd: str, dty: str) -> Any:
    """Round float64 values to integers of `dty`, saturating; NaN gives 0."""
    np = _np()
    dt = np_dtype(dty)
    info = np.iinfo(dt)
    r = _round_integral(x64, irnd)
    nan = np.isnan(r)
    r = np.where(nan, 0.0, r)
    hi_f = float(info.max) + 1.0            # 2**bits(-1): exact in float64
    lo_f = float(info.min)
    over = r >= hi_f
    under = r < lo_f
    safe = np.clip(r, lo_f, np.nextafter(hi_f, 0.0))
    out = safe.astype(dt)
    out = np.where(over, dt.type(info.max), out)
    out = np.where(under, dt.type(info.min), out)
    return out.astype(dt)


def int_to_float(v: Any, sty: str, dty: str, mode: str) -> Any:
    """Integers to float type `dty` (as that dtype), correctly rounded."""
    np = _np()
    dt = np_dtype(dty)
    bits = ptx_type(sty).bits
    v = np.asarray(v)
    if mode == "rn" and dty in ("f32", "f64") and (bits <= 32 or dty == "f32"):
        return v.astype(dt)
    if bits <= 32:
        s, e = v.astype(np.float64), None
    else:
        if v.dtype.kind == "i":
            hi = (v >> 32).astype(np.float64) * 4294967296.0
        else:
            hi = (v >> np.uint64(32)).astype(np.float64) * 4294967296.0
        lo = (v.view(np.uint64) & np.uint64(0xFFFFFFFF)).astype(np.float64)
        s, e = two_sum(hi, lo)
    if dty == "f64":
        from ..fpmath import step_f64

        return s if e is None or mode == "rn" else step_f64(s, e, mode)
    return round_to(s, "tf32" if dty == "tf32" else dty, mode, e).astype(dt)


def float_to_float(x: Any, sty: str, dty: str, mode: str | None, sat: bool, satfinite: bool, relu: bool) -> Any:
    """Float conversion; `mode` None means an exact (widening or same-type) conversion."""
    np = _np()
    dt = np_dtype(dty)
    x64 = np.asarray(x).astype(np.float64)
    if mode is None:
        out = np.asarray(x).astype(dt)
    elif dty == "f64":
        out = x64
    elif mode == "rn" and not satfinite and dty in ("f32", "f16"):
        out = x64.astype(dt)
    elif mode == "rn" and not satfinite and dty == "bf16" and sty == "f32":
        out = np.asarray(x).astype(dt)
    else:
        out = round_to(x64, dty, mode, None, sat=satfinite).astype(dt)
    if relu:
        o64 = np.asarray(out).astype(np.float64)
        out = np.where(np.isnan(o64), np.nan, np.where(o64 < 0, 0.0, o64)).astype(dt)
    if sat:
        o64 = np.asarray(out).astype(np.float64)
        out = np.where(np.isnan(o64), 0.0, np.clip(o64, 0.0, 1.0)).astype(dt)
    return out


def _cvt(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    irnd = mods.one(IRND)
    frnd = mods.one(FRND)
    ftz = mods.flag("ftz")
    sat = mods.flag("sat")
    satfinite = mods.flag("satfinite")
    relu = mods.flag("relu")
    types = mods.types()
    mods.done()
    if len(types) != 2:
        raise bad(ins, "expected destination and source types")
    dty, sty = types
    ops = ins.operands
    d_float, s_float = dty in FLOAT_NAMES, sty in FLOAT_NAMES

    if dty in PACKED or sty in PACKED:
        return _packed(dec, ins, dty, sty, frnd, satfinite, relu)
    if len(ops) != 2:
        raise bad(ins, "expected two operands")

    def flush_in(v: Any) -> Any:
        return ftz32(v) if ftz and sty == "f32" else v

    def flush_out(v: Any) -> Any:
        return ftz32(v) if ftz and dty == "f32" else v

    if not d_float and not s_float:
        if irnd or frnd:
            raise bad(ins, "integer conversions take no rounding mode")
        ddt = np_dtype(dty)

        def int_int(a: Any) -> Any:
            a = np.asarray(a)
            if not sat:
                return a.astype(ddt)
            info, src = np.iinfo(ddt), np.iinfo(a.dtype)
            hi = min(info.max, src.max)
            if a.dtype.kind == "u":
                return np.minimum(a, a.dtype.type(hi)).astype(ddt)
            return np.clip(a, max(info.min, src.min), hi).astype(ddt)

        compute: Callable[[Any], Any] = int_int
    elif d_float and not s_float:
        if frnd is None:
            raise bad(ins, "int-to-float conversion needs a rounding mode")
        mode = frnd

        def int_float(a: Any) -> Any:
            return flush_out(float_to_float(int_to_float(a, sty, dty, mode), dty, dty, None, sat, False, relu))

        compute = int_float
    elif s_float and not d_float:
        if irnd is None:
            raise bad(ins, "float-to-int conversion needs .rni, .rzi, .rmi or .rpi")

        def float_int(a: Any) -> Any:
            return float_to_int(np.asarray(flush_in(a)).astype(np.float64), irnd, dty)

        compute = float_int
    else:
        widening = _float_rank(dty) > _float_rank(sty)
        if dty == sty:
            if frnd:
                raise bad(ins, "a same-type float conversion takes .rni/.rzi/.rmi/.rpi, not a float rounding")
        elif not widening and frnd is None:
            raise bad(ins, "a narrowing float conversion needs a rounding mode")
        mode = None if widening or dty == sty else frnd
        ddt = np_dtype(dty)

        def float_float(a: Any) -> Any:
            a = flush_in(a)
            if irnd is not None:
                r = _round_integral(np.asarray(a).astype(np.float64), irnd).astype(ddt)
                return flush_out(float_to_float(r, dty, dty, None, sat, False, relu))
            return flush_out(float_to_float(a, sty, dty, mode, sat, satfinite, relu))

        compute = float_float
    ra = dec.reader(ops[1], sty, ins)
    w = dec.writer_t(ops[0], dty, ins)

    def fn(st: Any, m: Any) -> None:
        w.put(st, m, compute(ra(st)))

    return (K_OP, fn, None)


def _float_rank(t: str) -> int:
    return {"e4m3": 0, "e5m2": 0, "f16": 1, "bf16": 1, "tf32": 2, "f32": 3, "f64": 4}[t]


# packed types: element format, bits per element slot, slots per container
PACKED = {
    "f16x2": ("f16", 16), "bf16x2": ("bf16", 16), "e4m3x2": ("e4m3", 8), "e5m2x2": ("e5m2", 8),
    "e2m3x2": ("e2m3", 8), "e3m2x2": ("e3m2", 8), "e2m1x2": ("e2m1", 4), "ue8m0x2": ("ue8m0", 8),
    "ue5m3x2": ("ue5m3", 8),
}
_ML_NAMES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m3": "float6_e2m3fn", "e3m2": "float6_e3m2fn",
             "e2m1": "float4_e2m1fn", "f16": None, "bf16": "bfloat16"}


def encode(values: Any, elem: str, mode: str | None, satfinite: bool, relu: bool) -> Any:
    """float64 values -> the bit codes (uint64) of one packed element format."""
    np = _np()
    v = np.asarray(values, dtype=np.float64)
    if relu:
        v = np.where(np.isnan(v), np.nan, np.maximum(v, 0.0))
    if elem == "ue8m0":
        return _encode_ue8m0(v, mode or "rz", satfinite)
    if elem == "ue5m3":
        return _encode_ue5m3(v, mode or "rn", satfinite)
    if mode is None:
        r = v
    else:
        r = round_to(v, elem, mode, None, sat=satfinite)
    dt = np_dtype(elem) if elem in ("f16", "bf16", "e4m3", "e5m2") else _ml(elem)
    bits = dt.itemsize * 8
    return np.asarray(r).astype(dt).view(uint_dtype(bits)).astype(np.uint64)


def decode(codes: Any, elem: str) -> Any:
    """Bit codes -> float64 values."""
    np = _np()
    codes = np.asarray(codes, dtype=np.uint64)
    if elem == "ue8m0":
        e = (codes & np.uint64(0xFF)).astype(np.int64)
        return np.where(e == 0xFF, np.nan, np.ldexp(1.0, e - 127))
    if elem == "ue5m3":
        return _decode_ue5m3(codes)
    dt = np_dtype(elem) if elem in ("f16", "bf16", "e4m3", "e5m2") else _ml(elem)
    bits = dt.itemsize * 8
    return codes.astype(uint_dtype(bits)).view(dt).astype(np.float64)


def _ml(elem: str) -> Any:
    import ml_dtypes

    return _np().dtype(getattr(ml_dtypes, _ML_NAMES[elem]))


def _encode_ue8m0(v: Any, mode: str, satfinite: bool) -> Any:
    """2**k codes (k + 127), k in [-127, 127]: zero and negatives become 2**-127; 0xFF is NaN."""
    np = _np()
    a = np.where(v > 0, v, 2.0 ** -127)
    m, ex = np.frexp(np.where(np.isfinite(a), a, 1.0))
    k = ex.astype(np.int64) - 1
    exact = m == 0.5
    if mode == "rp":
        k = np.where(exact, k, k + 1)
    elif mode == "rn":
        k = np.where(2 * m >= 1.5, k + 1, k)
    k = np.clip(k, -127, 128)
    codes = (k + 127).astype(np.uint64)
    over = (k > 127) | np.isinf(a)
    codes = np.where(over, np.uint64(0xFE) if satfinite else np.uint64(0xFF), codes)
    return np.where(np.isnan(v), np.uint64(0xFF), codes)


def _encode_ue5m3(v: Any, mode: str, satfinite: bool) -> Any:
    """Unsigned e5m3 codes: the sign is discarded first; 0xFF is NaN, and also the overflow of a
    non-saturating conversion (there is no infinity)."""
    np = _np()
    r = round_to(np.abs(v), "ue5m3", mode, None, sat=satfinite)
    nan = np.isnan(r)
    a = np.where(nan, 0.0, r)
    _, ex = np.frexp(np.where(a > 0, a, 1.0))
    e = np.maximum(ex.astype(np.int64) - 1, -14)          # subnormals share the exponent of 2**-14
    significand = np.ldexp(a, 3 - e).astype(np.int64)       # exact: 0..15, implicit bit included
    field = np.where(significand >= 8, e + 15, 0)
    codes = (field << 3) | (significand & 7)
    return np.where(nan, np.uint64(0xFF), codes.astype(np.uint64))


def _decode_ue5m3(codes: Any) -> Any:
    np = _np()
    c = (codes & np.uint64(0xFF)).astype(np.int64)
    field, man = c >> 3, c & 7
    value = np.where(field == 0, np.ldexp(man.astype(np.float64), -17),
                     np.ldexp((man + 8).astype(np.float64), field - 18))
    return np.where(c == 0xFF, np.nan, value)


def _packed(dec: Decoder, ins: Instr, dty: str, sty: str, frnd: str | None, satfinite: bool, relu: bool) -> tuple:
    """x2 conversions: two f32 sources into a packed pair (the first source in the high half), or one
    packed pair into another (element 0 in the low bits)."""
    np = _np()
    ops = ins.operands
    if dty in PACKED and sty in ("f32", "f16", "bf16"):
        if len(ops) != 3:
            raise bad(ins, "expected d, a, b")
        if frnd is None:
            raise bad(ins, "missing rounding mode")
        elem, slot = PACKED[dty]
        ra = dec.reader(ops[1], sty, ins)
        rb = dec.reader(ops[2], sty, ins)
        out_bits = max(8, 2 * slot)
        w = dec.writer_t(ops[0], f"b{out_bits}", ins)

        def fn(st: Any, m: Any) -> None:
            hi = encode(np.asarray(full(st, ra(st))).astype(np.float64), elem, frnd, satfinite, relu)
            lo = encode(np.asarray(full(st, rb(st))).astype(np.float64), elem, frnd, satfinite, relu)
            mask = np.uint64((1 << slot) - 1)
            w.put(st, m, ((hi & mask) << np.uint64(slot) | (lo & mask)).astype(uint_dtype(out_bits)))

        return (K_OP, fn, None)
    if dty in PACKED and sty in PACKED:
        if len(ops) != 2:
            raise bad(ins, "expected d, a")
        de, dslot = PACKED[dty]
        se, sslot = PACKED[sty]
        in_bits, out_bits = max(8, 2 * sslot), max(8, 2 * dslot)
        ra = dec.reader(ops[1], f"b{in_bits}", ins)
        w = dec.writer_t(ops[0], f"b{out_bits}", ins)
        narrowing = _rank(de) < _rank(se)
        if narrowing and frnd is None:
            raise bad(ins, "missing rounding mode")
        mode = frnd if narrowing or de == "ue8m0" else None

        def fn2(st: Any, m: Any) -> None:
            src = np.asarray(full(st, ra(st))).astype(np.uint64)
            smask = np.uint64((1 << sslot) - 1)
            parts = [decode((src >> np.uint64(sslot * i)) & smask, se) for i in range(2)]
            dmask = np.uint64((1 << dslot) - 1)
            codes = [encode(x, de, mode, satfinite, relu) & dmask for x in parts]
            w.put(st, m, (codes[0] | (codes[1] << np.uint64(dslot))).astype(uint_dtype(out_bits)))

        return (K_OP, fn2, None)
    raise bad(ins, f"unsupported packed conversion .{dty}.{sty}")


def _rank(elem: str) -> int:
    return {"e2m1": 0, "e2m3": 0, "e3m2": 0, "e4m3": 0, "e5m2": 0, "ue8m0": 0, "ue5m3": 0, "f16": 1, "bf16": 1}[elem]


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {"cvt": _cvt}
