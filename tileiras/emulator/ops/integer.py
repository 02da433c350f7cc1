"""Integer, bit-manipulation, select, compare and move instructions.

Integers wrap modulo 2**bits like the hardware; shift amounts clamp at the
width; division by zero gives an all-ones quotient and the dividend as the
remainder (PTX leaves it unspecified; this is what NVIDIA GPUs return).
"""

from __future__ import annotations

from typing import Any, Callable

from ..parser import Imm, Instr, Pipe, Vec
from ..program import K_OP, Decoder, Mods, bad
from ..ptxtypes import np_dtype, ptx_type, uint_dtype
from .common import full

INT_KINDS = ("b", "u", "s")


def _np() -> Any:
    import numpy as np

    return np


def _binary(dec: Decoder, ins: Instr, ty: str, compute: Callable[[Any, Any], Any], nsrc: int = 2,
            out_ty: str | None = None, src_types: tuple[str, ...] | None = None) -> tuple:
    ops = ins.operands
    if len(ops) != nsrc + 1:
        raise bad(ins, f"expected {nsrc + 1} operands")
    types = src_types or (ty,) * nsrc
    readers = [dec.reader(op, t, ins) for op, t in zip(ops[1:], types)]
    w = dec.writer_t(ops[0], out_ty or ty, ins)
    if nsrc == 1:
        (ra,) = readers

        def fn1(st: Any, m: Any) -> None:
            w.put(st, m, compute(ra(st)))

        return (K_OP, fn1, None)
    if nsrc == 2:
        ra, rb = readers

        def fn2(st: Any, m: Any) -> None:
            w.put(st, m, compute(ra(st), rb(st)))

        return (K_OP, fn2, None)

    def fnn(st: Any, m: Any) -> None:
        w.put(st, m, compute(*[r(st) for r in readers]))

    return (K_OP, fnn, None)


def _wide(ty: str) -> str:
    t = ptx_type(ty)
    return f"{'s' if t.kind == 's' else 'u'}{t.bits * 2}"


def _sat_clip(ty: str) -> Callable[[Any], Any]:
    np = _np()
    info = np.iinfo(np_dtype(ty))
    dt = np_dtype(ty)
    return lambda v: np.clip(v, info.min, info.max).astype(dt)


def mulhi(a: Any, b: Any, ty: str) -> Any:
    """High half of the full product of two `ty` integers."""
    np = _np()
    t = ptx_type(ty)
    dt = np_dtype(ty)
    if t.bits <= 32:
        wide = np.int64 if t.kind == "s" else np.uint64
        return ((np.asarray(a).astype(wide) * np.asarray(b).astype(wide)) >> t.bits).astype(dt)
    ua = np.asarray(a).view(np.uint64) if t.kind == "s" else np.asarray(a, dtype=np.uint64)
    ub = np.asarray(b).view(np.uint64) if t.kind == "s" else np.asarray(b, dtype=np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    al, ah, bl, bh = ua & m32, ua >> s32, ub & m32, ub >> s32
    p0, p1, p2, p3 = al * bl, al * bh, ah * bl, ah * bh
    mid = (p0 >> s32) + (p1 & m32) + (p2 & m32)
    hi = p3 + (p1 >> s32) + (p2 >> s32) + (mid >> s32)
    if t.kind == "s":
        hi = hi - np.where(np.asarray(a) < 0, ub, np.uint64(0)) - np.where(np.asarray(b) < 0, ua, np.uint64(0))
        return hi.view(np.int64) if hi.ndim else np.array(hi).view(np.int64)[()]
    return hi


def _add_sub(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        from . import floats

        mods = Mods(ins)
        ty = _first_type(ins)
        if ptx_type(ty).kind not in INT_KINDS:
            return floats.FLOAT_HANDLERS[op](dec, ins)
        np = _np()
        sat = mods.flag("sat")
        cc = mods.flag("cc")
        mods.types()
        mods.done()
        if cc:
            return _carry_op(dec, ins, op, ty, carry_in=False, carry_out=True)
        if sat:
            if ty != "s32":
                raise bad(ins, ".sat needs .s32")
            clip = _sat_clip(ty)
            f = (lambda a, b: clip(a.astype(np.int64) + b)) if op == "add" else \
                (lambda a, b: clip(np.asarray(a).astype(np.int64) - b))
            return _binary(dec, ins, ty, f)
        return _binary(dec, ins, ty, np.add if op == "add" else np.subtract)

    return handler


def _carry_handler(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        mods = Mods(ins)
        cc = mods.flag("cc")
        part = mods.one(("lo", "hi")) if op == "madc" else None
        ty = mods.type1()
        mods.done()
        if op == "madc" and part is None:
            raise bad(ins, "madc needs .lo or .hi")
        return _carry_op(dec, ins, op, ty, carry_in=True, carry_out=cc, mul=part)

    return handler


def _carry_op(dec: Decoder, ins: Instr, op: str, ty: str, carry_in: bool, carry_out: bool,
              mul: str | None = None) -> tuple:
    """add.cc / addc / sub.cc / subc / mad.cc / madc: the carry (or borrow) flag lives in `st.CC`."""
    np = _np()
    bits = ptx_type(ty).bits
    if bits not in (32, 64):
        raise bad(ins, "extended-precision arithmetic needs 32- or 64-bit operands")
    ut = {32: "u32", 64: "u64"}[bits]
    dt = np_dtype(ut)
    srcs = ins.operands[1:]
    if len(srcs) != (3 if mul else 2):
        raise bad(ins, "wrong number of operands")
    readers = [dec.reader(op_, ty if mul else ut, ins) for op_ in srcs]
    w = dec.writer_t(ins.operands[0], ut, ins)

    def fn(st: Any, m: Any) -> None:
        vals = [full(st, r(st)) for r in readers]
        if mul:
            a_, b_, c_ = vals
            prod = mulhi(a_, b_, ty) if mul == "hi" else a_ * b_
            a, b = np.asarray(prod).view(dt), np.asarray(c_).view(dt)
        else:
            a, b = vals
        c = st.CC.astype(dt) if carry_in else dt.type(0)
        if op in ("add", "addc", "mad", "madc"):
            t = a + b
            d = t + c
            out = (t < a) | (d < t)
        else:
            t = a - b
            d = t - c
            out = (a < b) | (t < c)
        w.put(st, m, d)
        if carry_out:
            st.CC = out.astype(np.uint8) if m is None else np.where(m, out, st.CC).astype(np.uint8)

    return (K_OP, fn, None)


def _first_type(ins: Instr) -> str:
    from ..ptxtypes import TYPE_NAMES

    for m in ins.mods:
        if m in TYPE_NAMES:
            return m
    raise bad(ins, "missing type")


def _mul(dec: Decoder, ins: Instr) -> Any:
    from . import floats

    ty = _first_type(ins)
    if ptx_type(ty).kind not in INT_KINDS:
        return floats.FLOAT_HANDLERS["mul"](dec, ins)
    np = _np()
    mods = Mods(ins)
    mode = mods.one(("lo", "hi", "wide"), "lo")
    mods.types()
    mods.done()
    if mode == "lo":
        return _binary(dec, ins, ty, np.multiply)
    if mode == "hi":
        return _binary(dec, ins, ty, lambda a, b: mulhi(a, b, ty))
    wide = _wide(ty)
    wdt = np_dtype(wide)
    return _binary(dec, ins, ty, lambda a, b: np.asarray(a).astype(wdt) * np.asarray(b).astype(wdt), out_ty=wide)


def _mad(dec: Decoder, ins: Instr) -> Any:
    from . import floats

    ty = _first_type(ins)
    if ptx_type(ty).kind not in INT_KINDS:
        return floats.FLOAT_HANDLERS["mad"](dec, ins)
    np = _np()
    mods = Mods(ins)
    mode = mods.one(("lo", "hi", "wide"), "lo")
    sat = mods.flag("sat")
    if mods.flag("cc"):
        mods.types()
        mods.done()
        if mode == "wide":
            raise bad(ins, "mad.wide has no .cc form")
        return _carry_op(dec, ins, "mad", ty, carry_in=False, carry_out=True, mul=mode)
    mods.types()
    mods.done()
    if mode == "lo":
        return _binary(dec, ins, ty, lambda a, b, c: a * b + c, nsrc=3)
    if mode == "hi":
        if sat:
            if ty != "s32":
                raise bad(ins, ".sat needs .s32")
            clip = _sat_clip(ty)
            return _binary(dec, ins, ty, lambda a, b, c: clip(mulhi(a, b, ty).astype(np.int64) + c), nsrc=3)
        return _binary(dec, ins, ty, lambda a, b, c: mulhi(a, b, ty) + c, nsrc=3)
    wide = _wide(ty)
    wdt = np_dtype(wide)
    return _binary(dec, ins, ty, lambda a, b, c: np.asarray(a).astype(wdt) * np.asarray(b).astype(wdt) + c,
                   nsrc=3, out_ty=wide, src_types=(ty, ty, wide))


def _mul24(mad: bool) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        mode = mods.one(("lo", "hi"), "lo")
        ty = mods.type1()
        mods.done()
        dt = np_dtype(ty)

        def prod(a: Any, b: Any) -> Any:
            if ty == "s32":
                a = (np.asarray(a).astype(np.int64) << 40) >> 40
                b = (np.asarray(b).astype(np.int64) << 40) >> 40
                p = a * b
            else:
                p = (np.asarray(a).astype(np.uint64) & np.uint64(0xFFFFFF)) * \
                    (np.asarray(b).astype(np.uint64) & np.uint64(0xFFFFFF))
            if mode == "hi":
                p = p >> 16
            return p.astype(np.int64 if ty == "s32" else np.uint64).astype(uint_dtype(64)).astype(np.uint32).view(dt)

        if mad:
            return _binary(dec, ins, ty, lambda a, b, c: prod(a, b) + c, nsrc=3)
        return _binary(dec, ins, ty, prod)

    return handler


def _div_rem(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        from . import floats

        ty = _first_type(ins)
        if ptx_type(ty).kind not in INT_KINDS:
            return floats.FLOAT_HANDLERS[op](dec, ins)
        np = _np()
        mods = Mods(ins)
        mods.types()
        mods.done()
        dt = np_dtype(ty)
        ones = np.array(-1).astype(dt)[()] if dt.kind == "i" else np.iinfo(dt).max

        def compute(a: Any, b: Any) -> Any:
            a, b = np.asarray(a), np.asarray(b)
            zero = b == 0
            bq = np.where(zero, dt.type(1), b)
            if dt.kind == "i":
                r = np.fmod(a, bq)
                q = (a - r) // bq
            else:
                q = a // bq
                r = a - q * bq
            if op == "div":
                return np.where(zero, ones, q).astype(dt)
            return np.where(zero, a, r).astype(dt)

        return _binary(dec, ins, ty, compute)

    return handler


def _minmax(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        from . import floats

        ty = _first_type(ins)
        if ptx_type(ty).kind not in INT_KINDS:
            return floats.FLOAT_HANDLERS[op](dec, ins)
        np = _np()
        mods = Mods(ins)
        relu = mods.flag("relu")
        mods.types()
        mods.done()
        f = np.minimum if op == "min" else np.maximum
        if relu:
            zero = np_dtype(ty).type(0)
            return _binary(dec, ins, ty, lambda a, b: np.maximum(f(a, b), zero))
        return _binary(dec, ins, ty, f)

    return handler


def _unary_int(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        from . import floats

        ty = _first_type(ins)
        if op in ("neg", "abs") and ptx_type(ty).kind not in INT_KINDS:
            return floats.FLOAT_HANDLERS[op](dec, ins)
        np = _np()
        mods = Mods(ins)
        mods.types()
        mods.done()
        dt = np_dtype(ty)
        if op == "neg":
            return _binary(dec, ins, ty, lambda a: (dt.type(0) - a).astype(dt), nsrc=1)
        if op == "abs":
            return _binary(dec, ins, ty, lambda a: np.where(a < 0, dt.type(0) - a, a).astype(dt), nsrc=1)
        if op == "not":
            if ty == "pred":
                return _binary(dec, ins, ty, np.logical_not, nsrc=1)
            return _binary(dec, ins, ty, np.invert, nsrc=1)
        if op == "cnot":
            return _binary(dec, ins, ty, lambda a: (np.asarray(a) == 0).astype(dt), nsrc=1)
        raise AssertionError(op)

    return handler


def _logic(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        ty = mods.type1()
        mods.done()
        f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        if ty == "pred":
            f = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op]
        return _binary(dec, ins, ty, f)

    return handler


def _shift(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        ty = mods.type1()
        mods.done()
        t = ptx_type(ty)
        bits = t.bits
        dt = np_dtype(ty)
        top = np.uint32(bits - 1)

        def compute(a: Any, s: Any) -> Any:
            a = np.asarray(a)
            s = np.asarray(s)
            big = s > top
            sc = np.minimum(s, top).astype(dt)
            if op == "shl":
                return np.where(big, dt.type(0), a << sc).astype(dt)
            if t.kind == "s":
                return (a >> sc).astype(dt)   # arithmetic shift saturates at the sign fill
            return np.where(big, dt.type(0), a >> sc).astype(dt)

        return _binary(dec, ins, ty, compute, src_types=(ty, "u32"))

    return handler


def _bit_length32(x: Any) -> Any:
    """Number of significant bits of uint32 values (0 for 0)."""
    np = _np()
    _, e = np.frexp(np.asarray(x).astype(np.float64))
    return e.astype(np.uint32)


def bit_length(x: Any, bits: int) -> Any:
    np = _np()
    x = np.asarray(x).astype(uint_dtype(bits)) if bits <= 32 else np.asarray(x).astype(np.uint64)
    if bits <= 32:
        return _bit_length32(x)
    hi = (x >> np.uint64(32)).astype(np.uint32)
    lo = (x & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    return np.where(hi != 0, _bit_length32(hi) + np.uint32(32), _bit_length32(lo)).astype(np.uint32)


def _bitcount(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        shiftamt = mods.flag("shiftamt") if op == "bfind" else False
        ty = mods.type1()
        mods.done()
        t = ptx_type(ty)
        bits = t.bits
        ut = uint_dtype(bits)
        if op == "popc":
            return _binary(dec, ins, ty, lambda a: np.bitwise_count(np.asarray(a).view(ut)).astype(np.uint32),
                           nsrc=1, out_ty="u32")
        if op == "clz":
            return _binary(dec, ins, ty, lambda a: (np.uint32(bits) - bit_length(np.asarray(a).view(ut), bits)),
                           nsrc=1, out_ty="u32")
        if op == "brev":
            return _binary(dec, ins, ty, lambda a: brev(np.asarray(a).view(ut), bits).view(np_dtype(ty)), nsrc=1)

        def find(a: Any) -> Any:
            a = np.asarray(a)
            if t.kind == "s":
                a = np.where(a < 0, ~a, a)
            n = bit_length(a.view(ut) if a.dtype != ut else a, bits).astype(np.int64)
            pos = n - 1
            if shiftamt:
                pos = np.where(n == 0, -1, bits - 1 - pos)
            return np.where(n == 0, -1, pos).astype(np.int64).astype(np.uint32)

        return _binary(dec, ins, ty, find, nsrc=1, out_ty="u32")

    return handler


def _byte_rev_table() -> Any:
    np = _np()
    t = np.arange(256, dtype=np.uint16)
    r = np.zeros(256, dtype=np.uint16)
    for i in range(8):
        r |= ((t >> i) & 1) << (7 - i)
    return r.astype(np.uint8)


_BREV = None


def brev(x: Any, bits: int) -> Any:
    global _BREV
    np = _np()
    if _BREV is None:
        _BREV = _byte_rev_table()
    x = np.ascontiguousarray(np.atleast_1d(x).astype(uint_dtype(bits)))
    b = x.view(np.uint8).reshape(-1, bits // 8)
    return np.ascontiguousarray(_BREV[b][:, ::-1]).view(uint_dtype(bits)).reshape(x.shape)


def _bfe(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    mods.done()
    t = ptx_type(ty)
    bits = t.bits
    ut = uint_dtype(bits)
    dt = np_dtype(ty)
    wide = np.uint64

    def compute(a: Any, b: Any, c: Any) -> Any:
        a = np.asarray(a).view(ut).astype(wide)
        pos = np.asarray(b).astype(np.int64) & 0xFF
        ln = np.asarray(c).astype(np.int64) & 0xFF
        eff = np.clip(np.minimum(ln, bits - pos), 0, bits)
        shifted = a >> np.minimum(pos, bits - 1).astype(wide)
        mask = np.where(eff >= 64, ~np.uint64(0), (np.uint64(1) << eff.astype(wide)) - np.uint64(1))
        v = np.where((eff > 0) & (pos < bits), shifted & mask, np.uint64(0))
        if t.kind == "s":
            sbit_pos = np.minimum(pos + ln - 1, bits - 1)
            sbit = ((a >> np.maximum(sbit_pos, 0).astype(wide)) & np.uint64(1)).astype(bool) & (ln > 0)
            fill = ~mask & np.uint64((1 << bits) - 1)
            v = np.where(sbit, v | fill, v)
        return v.astype(ut).view(dt)

    return _binary(dec, ins, ty, compute, nsrc=3, src_types=(ty, "u32", "u32"))


def _bfi(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    mods.done()
    bits = ptx_type(ty).bits
    ut = uint_dtype(bits)

    def compute(a: Any, b: Any, c: Any, d: Any) -> Any:
        a = np.asarray(a).astype(np.uint64)
        b = np.asarray(b).astype(np.uint64)
        pos = np.asarray(c).astype(np.int64) & 0xFF
        ln = np.asarray(d).astype(np.int64) & 0xFF
        eff = np.clip(np.minimum(ln, bits - pos), 0, bits)
        mask = np.where(eff >= 64, ~np.uint64(0), (np.uint64(1) << eff.astype(np.uint64)) - np.uint64(1))
        sh = np.minimum(pos, 63).astype(np.uint64)
        ins_mask = (mask << sh)
        r = (b & ~ins_mask) | ((a << sh) & ins_mask)
        r = np.where((eff > 0) & (pos < bits), r, b)
        return r.astype(ut)

    return _binary(dec, ins, ty, compute, nsrc=4, src_types=(ty, ty, "u32", "u32"))


# byte selectors of the special prmt modes: [mode][c & 3][result byte]
_PRMT_TABLES_SPEC = {
    "f4e": [[(s + i) % 8 for i in range(4)] for s in range(4)],
    "b4e": [[(s - i) % 8 for i in range(4)] for s in range(4)],
    "rc8": [[s] * 4 for s in range(4)],
    "ecl": [[max(i, s) for i in range(4)] for s in range(4)],
    "ecr": [[min(i, s) for i in range(4)] for s in range(4)],
    "rc16": [[2 * (s & 1), 2 * (s & 1) + 1] * 2 for s in range(4)],
}


class _Tables(dict):
    def __missing__(self, key: str) -> Any:
        np = _np()
        value = self[key] = np.array(_PRMT_TABLES_SPEC[key], dtype=np.int64)
        return value


_PRMT_TABLES = _Tables()


def _prmt(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mode = mods.one(("f4e", "b4e", "rc8", "ecl", "ecr", "rc16"))
    mods.type1()
    mods.done()
    if len(ins.operands) == 4 and isinstance(ins.operands[3], Imm):
        return _prmt_constant(dec, ins, mode, ins.operands[3].value)

    def compute(a: Any, b: Any, c: Any) -> Any:
        a, b, c = np.atleast_1d(a), np.atleast_1d(b), np.atleast_1d(c)
        n = max(a.size, b.size, c.size)
        a, b, c = np.broadcast_to(a, (n,)), np.broadcast_to(b, (n,)), np.broadcast_to(c, (n,))
        src = np.stack([a, b], axis=1).astype(np.uint32).view(np.uint8).reshape(n, 8)
        if mode is None:
            sel = np.stack([(c >> np.uint32(4 * i)) & np.uint32(0xF) for i in range(4)], axis=1)
            byte = src[np.arange(n)[:, None], (sel & 7).astype(np.int64)]
            sign = np.where(byte & 0x80, np.uint8(0xFF), np.uint8(0))
            out = np.where(sel & 8, sign, byte)
        else:
            sel = _PRMT_TABLES[mode][(c & np.uint32(3)).astype(np.int64)]
            out = src[np.arange(n)[:, None], sel]
        return np.ascontiguousarray(out.astype(np.uint8)).view(np.uint32).reshape(n)

    return _binary(dec, ins, "b32", compute, nsrc=3)


def _prmt_constant(dec: Decoder, ins: Instr, mode: str | None, sel: int) -> tuple:
    """prmt with an immediate selector: one byte shuffle for every thread."""
    np = _np()
    if mode is None:
        nibbles = [(sel >> (4 * i)) & 0xF for i in range(4)]
    else:
        nibbles = [int(x) for x in _PRMT_TABLES_SPEC[mode][sel & 3]]
    idx = [n & 7 for n in nibbles]
    signs = [i for i, n in enumerate(nibbles) if n & 8]
    ra = dec.reader(ins.operands[1], "b32", ins)
    rb = dec.reader(ins.operands[2], "b32", ins)
    w = dec.writer_t(ins.operands[0], "b32", ins)

    def fn(st: Any, m: Any) -> None:
        src = np.empty((st.n, 2), dtype=np.uint32)
        src[:, 0] = ra(st)
        src[:, 1] = rb(st)
        out = src.view(np.uint8)[:, idx]
        for i in signs:
            out[:, i] = np.where(out[:, i] & 0x80, np.uint8(0xFF), np.uint8(0))
        w.put(st, m, np.ascontiguousarray(out).view(np.uint32).reshape(st.n))

    return (K_OP, fn, None)


def _lop3(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    mods.done()
    ops = ins.operands
    if len(ops) != 5 or not isinstance(ops[4], Imm):
        raise bad(ins, "lop3 needs an immediate lookup table")
    lut = ops[4].value & 0xFF
    ut = np_dtype(ty)

    def compute(a: Any, b: Any, c: Any) -> Any:
        out = np.zeros(np.broadcast(a, b, c).shape, dtype=ut)
        na, nb, nc = ~a, ~b, ~c
        for i in range(8):
            if lut >> i & 1:
                out |= (a if i & 4 else na) & (b if i & 2 else nb) & (c if i & 1 else nc)
        return out

    ins2 = Instr(ins.opcode, ins.mods, ops[:4], ins.guard, ins.line, ins.text)
    return _binary(dec, ins2, ty, compute, nsrc=3)


def _shf(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    direction = mods.need(("l", "r"), ".l or .r")
    mode = mods.need(("wrap", "clamp"), ".wrap or .clamp")
    mods.type1()
    mods.done()

    def compute(a: Any, b: Any, c: Any) -> Any:
        n = np.asarray(c).astype(np.uint64)
        n = n & np.uint64(31) if mode == "wrap" else np.minimum(n, np.uint64(32))
        both = (np.asarray(b).astype(np.uint64) << np.uint64(32)) | np.asarray(a).astype(np.uint64)
        if direction == "l":
            return ((both << n) >> np.uint64(32)).astype(np.uint32)
        return (both >> n).astype(np.uint32)

    return _binary(dec, ins, "b32", compute, nsrc=3, src_types=("b32", "b32", "u32"))


def _sad(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    mods.done()
    dt = np_dtype(ty)
    return _binary(dec, ins, ty, lambda a, b, c: (c + np.where(a > b, a - b, b - a)).astype(dt), nsrc=3)


def _dp(width: int) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        half = mods.one(("lo", "hi")) if width == 2 else None
        types = mods.types()
        mods.done()
        if len(types) != 2:
            raise bad(ins, "expected two source types")
        ta, tb = types
        out = "s32" if "s32" in types else "u32"

        def lanes(x: Any, t: str, n: int, bits: int) -> Any:
            x = np.atleast_1d(np.asarray(x)).astype(np.uint32)
            parts = [(x >> np.uint32(bits * i)) & np.uint32((1 << bits) - 1) for i in range(n)]
            v = np.stack(parts, axis=1).astype(np.int64)
            if t == "s32":
                v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
            return v

        def compute(a: Any, b: Any, c: Any) -> Any:
            if width == 4:
                va, vb = lanes(a, ta, 4, 8), lanes(b, tb, 4, 8)
            else:
                va = lanes(a, ta, 2, 16)
                vb = lanes(b, tb, 4, 8)[:, (2, 3) if half == "hi" else (0, 1)]
            total = (va * vb).sum(axis=1) + np.asarray(c).astype(np.int64)
            return total.astype(np.int64).astype(np.uint64).astype(np.uint32).view(np_dtype(out))

        return _binary(dec, ins, out, compute, nsrc=3, src_types=("u32", "u32", out))

    return handler


# --- select / compare --------------------------------------------------------

def _selp(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    mods.done()
    return _binary(dec, ins, ty, lambda a, b, c: np.where(c, a, b), nsrc=3, src_types=(ty, ty, "pred"))


def _slct(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ftz = mods.flag("ftz")
    types = mods.types()
    mods.done()
    if len(types) != 2:
        raise bad(ins, "expected two types")
    ty, ct = types
    del ftz
    return _binary(dec, ins, ty, lambda a, b, c: np.where(np.asarray(c) >= 0, a, b), nsrc=3,
                   src_types=(ty, ty, ct))


INT_CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
           "lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}
FLOAT_CMP = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
BOOL_OPS = ("and", "or", "xor")


def compare(op: str, a: Any, b: Any, is_float: bool) -> Any:
    np = _np()
    if not is_float:
        op = INT_CMP[op]
        return {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
                "ge": np.greater_equal}[op](a, b)
    if op == "num":
        return ~(np.isnan(a) | np.isnan(b))
    if op == "nan":
        return np.isnan(a) | np.isnan(b)
    base = op[:2]
    r = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
         "ge": np.greater_equal}[base](a, b)
    unordered = np.isnan(a) | np.isnan(b)
    if op.endswith("u"):
        return r | unordered
    if base == "ne":
        return r & ~unordered
    return r


def _cmp_operands(ty: str, ftz: bool) -> Callable[[Any], Any]:
    """Values as compared: f16/bf16 through f32, with optional flush-to-zero."""
    np = _np()
    if ty in ("f16", "bf16"):
        return lambda v: np.asarray(v).astype(np.float32)
    if ftz and ty == "f32":
        from ..fpmath import ftz32

        return ftz32
    return lambda v: v


def _setp(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ftz = mods.flag("ftz")
    bop = mods.one(BOOL_OPS)
    ty = mods.type1()
    t = ptx_type(ty)
    is_float = t.kind in ("f", "x2")
    cmp = mods.need(FLOAT_CMP if is_float else tuple(INT_CMP), "comparison")
    mods.done()
    ops = ins.operands
    dst = ops[0]
    p_op, q_op = (dst.first, dst.second) if isinstance(dst, Pipe) else (dst, None)
    if t.kind == "x2":
        if q_op is None:
            raise bad(ins, "packed comparisons write two predicates p|q")
        half = "f16" if ty == "f16x2" else "bf16"
        ra = dec.reader(ops[1], "b32", ins)
        rb = dec.reader(ops[2], "b32", ins)
        wp = dec.writer_t(p_op, "pred", ins)
        wq = dec.writer_t(q_op, "pred", ins)
        hdt = np_dtype(half)

        def fn2(st: Any, m: Any) -> None:
            a = full(st, ra(st)).view(hdt).reshape(-1, 2).astype(np.float32)
            b = full(st, rb(st)).view(hdt).reshape(-1, 2).astype(np.float32)
            r = compare(cmp, a, b, True)
            wp.put(st, m, r[:, 0])
            wq.put(st, m, r[:, 1])

        return (K_OP, fn2, None)
    conv = _cmp_operands(ty, ftz)
    ra = dec.reader(ops[1], ty, ins)
    rb = dec.reader(ops[2], ty, ins)
    rc = dec.reader(ops[3], "pred", ins) if len(ops) > 3 else None
    if (rc is None) != (bop is None):
        raise bad(ins, "a boolean operation needs a third predicate operand and vice versa")
    wp = dec.writer_t(p_op, "pred", ins)
    wq = dec.writer_t(q_op, "pred", ins) if q_op is not None else None
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(bop or "")

    def fn(st: Any, m: Any) -> None:
        r = compare(cmp, conv(ra(st)), conv(rb(st)), is_float)
        if rc is not None:
            c = rc(st)
            p = comb(r, c)
            if wq is not None:
                wq.put(st, m, comb(~r, c))
        else:
            p = r
            if wq is not None:
                wq.put(st, m, ~r)
        wp.put(st, m, p)

    return (K_OP, fn, None)


def _set(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ftz = mods.flag("ftz")
    bop = mods.one(BOOL_OPS)
    types = mods.types()
    if len(types) != 2:
        raise bad(ins, "expected destination and source types")
    dty, sty = types
    is_float = ptx_type(sty).kind == "f"
    cmp = mods.need(FLOAT_CMP if is_float else tuple(INT_CMP), "comparison")
    mods.done()
    conv = _cmp_operands(sty, ftz)
    ops = ins.operands
    ra = dec.reader(ops[1], sty, ins)
    rb = dec.reader(ops[2], sty, ins)
    rc = dec.reader(ops[3], "pred", ins) if len(ops) > 3 else None
    w = dec.writer_t(ops[0], dty, ins)
    comb = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}.get(bop or "")
    dt = np_dtype(dty)
    true = dt.type(1.0) if dty == "f32" else np.array(-1).astype(dt)[()] if dt.kind == "i" else np.iinfo(dt).max

    def fn(st: Any, m: Any) -> None:
        r = compare(cmp, conv(ra(st)), conv(rb(st)), is_float)
        if rc is not None:
            r = comb(r, rc(st))
        w.put(st, m, np.where(r, true, dt.type(0)))

    return (K_OP, fn, None)


# --- mov ---------------------------------------------------------------------

def _mov(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    mods.done()
    ops = ins.operands
    if len(ops) != 2:
        raise bad(ins, "expected two operands")
    dst, src = ops
    bits = ptx_type(ty).bits
    if isinstance(src, Vec):
        # pack: the first element goes to the least significant bits
        n = len(src.items)
        part = bits // n
        pt = f"b{part}"
        readers = [dec.reader(x, pt, ins) for x in src.items]
        w = dec.writer_t(dst, f"b{bits}", ins)
        wide = uint_dtype(bits)

        def pack(st: Any, m: Any) -> None:
            vals = [np.atleast_1d(full(st, r(st))) for r in readers]
            out = np.stack(vals, axis=1).astype(uint_dtype(part))
            w.put(st, m, np.ascontiguousarray(out).view(wide).reshape(-1))

        return (K_OP, pack, None)
    if isinstance(dst, Vec):
        n = len(dst.items)
        part = bits // n
        rs = dec.reader(src, f"b{bits}", ins)
        ws = [dec.writer_t(x, f"b{part}", ins) for x in dst.items]
        pdt = uint_dtype(part)

        def unpack(st: Any, m: Any) -> None:
            v = np.ascontiguousarray(np.atleast_1d(full(st, rs(st)))).view(pdt).reshape(-1, n)
            for i, w in enumerate(ws):
                w.put(st, m, v[:, i])

        return (K_OP, unpack, None)
    r = dec.reader(src, ty, ins)
    w = dec.writer_t(dst, ty, ins)

    def mov(st: Any, m: Any) -> None:
        w.put(st, m, r(st))

    return (K_OP, mov, None)


def _cvta(dec: Decoder, ins: Instr) -> Any:
    from ..memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW

    np = _np()
    mods = Mods(ins)
    to = mods.flag("to")
    space = mods.need(("global", "shared", "local", "const", "param", "shared::cta", "shared::cluster"),
                      "state space")
    ty = mods.type1()
    mods.done()
    window = {"shared": SHARED_WINDOW, "shared::cta": SHARED_WINDOW, "shared::cluster": SHARED_WINDOW,
              "local": LOCAL_WINDOW, "param": PARAM_WINDOW}.get(space, 0)
    dt = np_dtype(ty)
    r = dec.reader(ins.operands[1], ty, ins)
    w = dec.writer_t(ins.operands[0], ty, ins)
    base = np.uint64(window)

    def fn(st: Any, m: Any) -> None:
        v = np.asarray(r(st)).astype(np.uint64)
        v = v - base if to else v + base
        w.put(st, m, v.astype(dt))

    return (K_OP, fn, None)


def _isspacep(dec: Decoder, ins: Instr) -> Any:
    from ..memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE

    np = _np()
    mods = Mods(ins)
    space = mods.need(("global", "shared", "local", "const", "param", "shared::cta", "shared::cluster"),
                      "state space")
    mods.done()
    r = dec.reader(ins.operands[1], "u64", ins)
    w = dec.writer_t(ins.operands[0], "pred", ins)
    windows = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW}
    key = "shared" if space.startswith("shared") else space

    def inside(v: Any, base: int) -> Any:
        return (v >= np.uint64(base)) & (v < np.uint64(base + WINDOW_SIZE))

    def fn(st: Any, m: Any) -> None:
        v = np.asarray(r(st))
        if key in windows:
            res = inside(v, windows[key])
        else:
            res = ~(inside(v, SHARED_WINDOW) | inside(v, LOCAL_WINDOW) | inside(v, PARAM_WINDOW))
        w.put(st, m, res)

    return (K_OP, fn, None)


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "add": _add_sub("add"), "sub": _add_sub("sub"),
    "addc": _carry_handler("addc"), "subc": _carry_handler("subc"), "madc": _carry_handler("madc"),
    "mul": _mul, "mad": _mad, "mul24": _mul24(False), "mad24": _mul24(True),
    "div": _div_rem("div"), "rem": _div_rem("rem"),
    "min": _minmax("min"), "max": _minmax("max"),
    "neg": _unary_int("neg"), "abs": _unary_int("abs"), "not": _unary_int("not"), "cnot": _unary_int("cnot"),
    "and": _logic("and"), "or": _logic("or"), "xor": _logic("xor"),
    "shl": _shift("shl"), "shr": _shift("shr"),
    "popc": _bitcount("popc"), "clz": _bitcount("clz"), "brev": _bitcount("brev"), "bfind": _bitcount("bfind"),
    "bfe": _bfe, "bfi": _bfi, "prmt": _prmt, "lop3": _lop3, "shf": _shf, "sad": _sad,
    "dp4a": _dp(4), "dp2a": _dp(2),
    "selp": _selp, "slct": _slct, "setp": _setp, "set": _set,
    "mov": _mov, "cvta": _cvta, "isspacep": _isspacep,
}
