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
    dt, st_ = ptx_type(dty), ptx_type(sty)
    d_float, s_float = dty in FLOAT_NAMES, sty in FLOAT_NAMES

    if dt.kind == "x2" or st_.kind == "x2":
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


def _packed(dec: Decoder, ins: Instr, dty: str, sty: str, frnd: str | None, satfinite: bool, relu: bool) -> tuple:
    """x2 conversions: two f32 sources into a packed pair (the first source in the high half), or
    a packed pair into another packed pair."""
    np = _np()
    ops = ins.operands
    half = {"f16x2": "f16", "bf16x2": "bf16", "e4m3x2": "e4m3", "e5m2x2": "e5m2"}
    if dty in half and sty == "f32":
        if len(ops) != 3:
            raise bad(ins, "expected d, a, b")
        if frnd is None:
            raise bad(ins, "missing rounding mode")
        elem = half[dty]
        edt = np_dtype(elem)
        ra = dec.reader(ops[1], "f32", ins)
        rb = dec.reader(ops[2], "f32", ins)
        out_bits = ptx_type(dty).bits
        w = dec.writer_t(ops[0], f"b{out_bits}", ins)
        part = uint_dtype(out_bits // 2)

        def fn(st: Any, m: Any) -> None:
            hi = float_to_float(full(st, ra(st)), "f32", elem, frnd, False, satfinite, relu).astype(edt)
            lo = float_to_float(full(st, rb(st)), "f32", elem, frnd, False, satfinite, relu).astype(edt)
            pair = np.stack([lo.view(part), hi.view(part)], axis=1)
            w.put(st, m, np.ascontiguousarray(pair).view(uint_dtype(out_bits)).reshape(-1))

        return (K_OP, fn, None)
    if dty in half and sty in half:
        if len(ops) != 2:
            raise bad(ins, "expected d, a")
        de, se = half[dty], half[sty]
        in_bits, out_bits = ptx_type(sty).bits, ptx_type(dty).bits
        ra = dec.reader(ops[1], f"b{in_bits}", ins)
        w = dec.writer_t(ops[0], f"b{out_bits}", ins)
        sdt, ddt = np_dtype(se), np_dtype(de)
        narrowing = _float_rank(de) < _float_rank(se)
        if narrowing and frnd is None:
            raise bad(ins, "missing rounding mode")

        def fn2(st: Any, m: Any) -> None:
            src = np.ascontiguousarray(full(st, ra(st))).view(sdt)
            out = float_to_float(src, se, de, frnd if narrowing else None, False, satfinite, relu).astype(ddt)
            w.put(st, m, np.ascontiguousarray(out).view(uint_dtype(out_bits)))

        return (K_OP, fn2, None)
    raise bad(ins, f"unsupported packed conversion .{dty}.{sty}")


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {"cvt": _cvt}
