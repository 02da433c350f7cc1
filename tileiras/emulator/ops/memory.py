"""ld / ldu / st / atom / red / prefetch and the cache-hint instructions.

Atomics act on the active lanes one after another in increasing thread
order (the hardware order is unspecified, any order is a valid outcome);
lanes with distinct addresses are done at once.
"""

from __future__ import annotations

from typing import Any, Callable

from ..fpmath import ftz32
from ..memory import LOCAL_WINDOW, SHARED_WINDOW
from ..parser import Addr, Instr, Reg, Sym, Vec
from ..program import CACHE_QUALIFIERS, K_OP, Decoder, Mods, bad
from ..ptxtypes import np_dtype, ptx_type, uint_dtype
from ..races import STRONG, Site
from .. import spaces
from .common import lanes_of

SPACES = ("global", "shared", "shared::cta", "shared::cluster", "local", "param", "param::entry", "param::func",
          "const")


def _np() -> Any:
    import numpy as np

    return np


def address(dec: Decoder, op: Any, space: str, ins: Instr) -> tuple[str, Callable[[Any], Any]]:
    """(resolved space, st -> uint64 address(es)) of a memory operand `[base+offset]`."""
    np = _np()
    if not isinstance(op, Addr):
        raise bad(ins, "expected a [address] operand")
    off = op.offset
    base = op.base
    if base is None:
        c = np.uint64(off & (2 ** 64 - 1))
        return ("kparam" if space == "param" else space), (lambda st: c)
    reg = dec.reg_of(base, ins) if isinstance(base, (Reg, Sym)) else None
    if reg is not None or isinstance(base, Reg):
        r = dec.reader(base, "u64", ins)
        o = np.uint64(off & (2 ** 64 - 1))
        if space == "param":
            space = "kparam"
        if off == 0:
            return space, r
        return space, (lambda st: r(st) + o)
    assert isinstance(base, Sym)
    info = dec.lookup_sym(base.name)
    if info is None:
        raise bad(ins, f"unknown symbol '{base.name}'")
    total = off + base.offset
    kind = info.space
    if kind == "kparam":
        if space not in ("param", "kparam"):
            raise bad(ins, f"'{base.name}' is a kernel parameter, not in .{space}")
        c = np.uint64(info.value + total)
        return "kparam", (lambda st: c)
    if kind == "cparam":
        if space not in ("param", "cparam"):
            raise bad(ins, f"'{base.name}' is a .param variable, not in .{space}")
        c = np.uint64(info.value + total)
        return "cparam", (lambda st: c)
    if kind in ("shared", "local"):
        if space not in (kind, "generic"):
            raise bad(ins, f"'{base.name}' is in .{kind}, not in .{space}")
        window = 0 if space == kind else (SHARED_WINDOW if kind == "shared" else LOCAL_WINDOW)
        if kind == "shared" and info.value is None:      # plus its rank's bits in a cluster
            return space, (lambda st: np.uint64(st.dyn_smem_base + total + window) if st.rank_bits is None
                           else st.rank_bits + np.uint64(st.dyn_smem_base + total + window))
        c = np.uint64(info.value + total + window)
        if kind == "shared":
            return space, (lambda st: c if st.rank_bits is None else st.rank_bits + c)
        return space, (lambda st: c)
    if kind == "global":
        if space not in ("global", "generic"):
            raise bad(ins, f"'{base.name}' is in .global/.const, not in .{space}")
        slot = info.value
        return "global", (lambda st: np.uint64(st.symv[slot] + total))
    raise bad(ins, f"'{base.name}' cannot be used as an address")


def _space(mods: Mods) -> str:
    s = mods.one(SPACES)
    if s is None:
        return "generic"
    return spaces.SPACE_ALIASES[s]


def _vector(mods: Mods) -> int:
    v = mods.one(("v2", "v4", "v8"))
    return int(v[1:]) if v else 1


def _raw_dtype(ty: str) -> Any:
    t = ptx_type(ty)
    if t.kind == "s":
        return np_dtype(ty)
    return uint_dtype(t.bits)


def _lane_addrs(a: Any, lanes: Any, m: Any) -> Any:
    np = _np()
    if getattr(a, "ndim", 0) == 0:
        return np.full(lanes.size, a, dtype=np.uint64)
    a = a if m is None else a[lanes]
    return a.astype(np.uint64, copy=False)


def _ld(dec: Decoder, ins: Instr) -> Any:
    mods = Mods(ins)
    space = _space(mods)
    site = Site(ins.line, write=False, strong=not STRONG.isdisjoint(ins.mods))
    mods.ignore(CACHE_QUALIFIERS)
    nelem = _vector(mods)
    ty = mods.type1()
    mods.done()
    if ty == "b128":
        ty, nelem = "b64", nelem * 2
        if nelem != 2:
            raise bad(ins, "vectors of .b128 are not supported")
        raise bad(ins, ".b128 loads need 128-bit registers, which are not supported")
    ops = ins.operands
    if len(ops) not in (2, 3):
        raise bad(ins, "expected a destination and an address")
    dst = ops[0]
    items = list(dst.items) if isinstance(dst, Vec) else [dst]
    if len(items) != nelem:
        raise bad(ins, f"expected {nelem} destination registers")
    raw = _raw_dtype(ty)
    writers = [dec.writer(x, raw, ins) for x in items]
    space, addr = address(dec, ops[1], space, ins)
    nbytes = raw.itemsize * nelem
    if space == "kparam" and not isinstance(ops[1].base, Reg) and dec.reg_of(ops[1].base, ins) is None:
        # a kernel parameter: one value for every thread
        def ld_param(st: Any, m: Any) -> None:
            off = int(addr(st))
            if off + nbytes > st.kparam.size:
                raise spaces.DeviceFault(f"out-of-bounds param access of {nbytes} bytes at offset {off}")
            vals = st.kparam[off:off + nbytes].view(raw)
            for j, w in enumerate(writers):
                w.put(st, m, vals[j])

        return (K_OP, ld_param, None)

    def ld(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        a = _lane_addrs(addr(st), lanes, m)
        vals = spaces.load(st, space, a, lanes, raw, nelem, site)
        sel = None if m is None else lanes
        for j, w in enumerate(writers):
            w.put_lanes(st, sel, vals[:, j])

    return (K_OP, ld, None)


def _st(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    if "async" in ins.mods:
        from .cluster import st_async

        return st_async(dec, ins)
    mods = Mods(ins)
    space = _space(mods)
    site = Site(ins.line, write=True, strong=not STRONG.isdisjoint(ins.mods))
    mods.ignore(CACHE_QUALIFIERS)
    nelem = _vector(mods)
    ty = mods.type1()
    mods.done()
    if ty == "b128":
        raise bad(ins, ".b128 stores need 128-bit registers, which are not supported")
    ops = ins.operands
    if len(ops) not in (2, 3):
        raise bad(ins, "expected an address and a source")
    src = ops[1]
    items = list(src.items) if isinstance(src, Vec) else [src]
    if len(items) != nelem:
        raise bad(ins, f"expected {nelem} source values")
    bits = ptx_type(ty).bits
    raw = uint_dtype(bits)
    readers = [dec.reader(x, f"b{bits}", ins) for x in items]
    space, addr = address(dec, ops[0], space, ins)
    if space == "kparam":
        raise bad(ins, "kernel parameters are read-only")

    def st_(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        a = _lane_addrs(addr(st), lanes, m)
        cols = []
        for r in readers:
            v = r(st)
            if getattr(v, "ndim", 0) == 0:
                cols.append(np.full(lanes.size, v, dtype=raw))
            else:
                cols.append(v if m is None else v[lanes])
        vals = np.stack(cols, axis=1) if nelem > 1 else cols[0][:, None]
        spaces.store(st, space, a, lanes, raw, vals, site)

    return (K_OP, st_, None)


# --- atomics -------------------------------------------------------------------

ATOM_OPS = ("and", "or", "xor", "exch", "add", "inc", "dec", "min", "max", "cas")
ATOM_SEM = ("relaxed", "acquire", "release", "acq_rel", "sc", "cta", "gpu", "sys", "cluster", "L2::cache_hint")


def atomic_apply(op: str, ty: str, old: Any, b: Any, c: Any) -> Any:
    """New memory values for one round of non-conflicting lanes."""
    np = _np()
    dt = old.dtype
    if op == "add":
        if ty in ("f16", "bf16", "f16x2", "bf16x2"):
            return (old.astype(np.float64) + b.astype(np.float64)).astype(dt)
        r = old + b
        return ftz32(r) if ty == "f32" else r
    if op == "and":
        return old & b
    if op == "or":
        return old | b
    if op == "xor":
        return old ^ b
    if op == "exch":
        return np.asarray(b, dtype=dt)
    if op in ("min", "max"):
        if dt.kind == "f" or ty in ("bf16", "bf16x2"):
            f = np.fmin if op == "min" else np.fmax
            return f(old.astype(np.float64), b.astype(np.float64)).astype(dt)
        return np.minimum(old, b) if op == "min" else np.maximum(old, b)
    if op == "inc":
        return np.where(old >= b, dt.type(0), old + dt.type(1)).astype(dt)
    if op == "dec":
        return np.where((old == 0) | (old > b), b, old - dt.type(1)).astype(dt)
    if op == "cas":
        return np.where(old == b, c, old).astype(dt)
    raise AssertionError(op)


def _atom(has_dst: bool) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        space = _space(mods)
        mods.ignore(ATOM_SEM)
        mods.flag("noftz")
        if mods.one(("v2", "v4", "v8")):
            raise bad(ins, "vector atomics are not supported")
        op = mods.need(ATOM_OPS, "atomic operation")
        ty = mods.type1()
        mods.done()
        if ty == "b128":
            raise bad(ins, ".b128 atomics are not supported")
        ops = list(ins.operands)
        if has_dst:
            dst, ops = ops[0], ops[1:]
        need = 3 if op == "cas" else 2
        if len(ops) not in (need, need + 1):
            raise bad(ins, "wrong number of operands")
        packed = ty in ("f16x2", "bf16x2")
        if packed:
            elem_ty = "f16" if ty == "f16x2" else "bf16"
            vdt = np_dtype(elem_ty)
            compute_ty = "b32"
        else:
            vdt = np_dtype(ty) if ptx_type(ty).kind != "b" else uint_dtype(ptx_type(ty).bits)
            compute_ty = ty
        space, addr = address(dec, ops[0], space, ins)
        rb = dec.reader(ops[1], compute_ty, ins)
        rc = dec.reader(ops[2], compute_ty, ins) if op == "cas" else None
        w = dec.writer(dst, np.dtype(np.uint32) if packed else vdt, ins) if has_dst else None
        nbytes = ptx_type(ty).bits // 8
        mem_dt = np.dtype(np.uint32) if packed else vdt
        site = Site(ins.line, write=True, strong=True)

        def to_elems(v: Any) -> Any:
            return np.ascontiguousarray(v).view(vdt).reshape(-1, 2) if packed else v

        def from_elems(v: Any) -> Any:
            return np.ascontiguousarray(v.astype(vdt)).view(np.uint32).reshape(-1) if packed else v

        def fn(st: Any, m: Any) -> None:
            lanes = lanes_of(st, m)
            if lanes.size == 0:
                return
            a = _lane_addrs(addr(st), lanes, m)
            b = _lane_vals(rb(st), lanes, m, mem_dt)
            c = _lane_vals(rc(st), lanes, m, mem_dt) if rc is not None else None
            parts = spaces.resolve(st, space, a, lanes, nbytes, nbytes)
            if st.races is not None:
                st.races.check(st, site, parts, lanes, nbytes)
            olds = np.zeros(lanes.size, dtype=mem_dt)
            for sel, buf, views, offs in parts:
                typed = views.get(mem_dt)
                if typed is None:
                    typed = views[mem_dt] = buf.view(mem_dt)
                idx = offs // nbytes
                bs = b if sel is None else b[sel]
                cs = c if (c is None or sel is None) else c[sel]
                olds_part = _run_atomic(typed, idx, bs, cs, op, ty, to_elems, from_elems)
                if sel is None:
                    olds = olds_part
                else:
                    olds[sel] = olds_part
            if w is not None:
                w.put_lanes(st, None if m is None else lanes, olds)

        return (K_OP, fn, None)

    return handler


def _lane_vals(v: Any, lanes: Any, m: Any, dt: Any) -> Any:
    np = _np()
    if getattr(v, "ndim", 0) == 0:
        return np.full(lanes.size, v, dtype=dt)
    return (v if m is None else v[lanes]).astype(dt, copy=False)


def _run_atomic(typed: Any, idx: Any, b: Any, c: Any, op: str, ty: str, to_e: Callable, from_e: Callable) -> Any:
    """Apply the atomic in thread order; returns the old values."""
    np = _np()
    uniq, inverse, counts = np.unique(idx, return_inverse=True, return_counts=True)
    if uniq.size == idx.size:
        old = typed[idx].copy()
        new = atomic_apply(op, ty, to_e(old), to_e(b), None if c is None else to_e(c))
        typed[idx] = from_e(new)
        return old
    olds = np.empty(idx.size, dtype=typed.dtype)
    if uniq.size <= 8 or uniq.size * 4 <= idx.size:
        # few addresses: run each address's lanes as one sequence
        for g, at in enumerate(uniq.tolist()):
            sel = np.flatnonzero(inverse == g)
            seq_old, final = _sequence(op, ty, typed[at], b[sel], None if c is None else c[sel], to_e, from_e)
            olds[sel] = seq_old
            typed[at] = final
        return olds
    # many addresses: rounds, each taking the next pending lane of every address
    order = np.argsort(idx, kind="stable")
    starts = np.searchsorted(idx[order], uniq)
    rank = np.empty(idx.size, dtype=np.int64)
    rank[order] = np.arange(idx.size) - np.repeat(starts, counts)
    for r in range(int(counts.max())):
        sel = np.flatnonzero(rank == r)
        at = idx[sel]
        old = typed[at].copy()
        new = atomic_apply(op, ty, to_e(old), to_e(b[sel]), None if c is None else to_e(c[sel]))
        typed[at] = from_e(new)
        olds[sel] = old
    return olds


_ACCUMULATE = {"add": "add", "min": "minimum", "max": "maximum", "and": "bitwise_and", "or": "bitwise_or",
               "xor": "bitwise_xor"}


def _sequence(op: str, ty: str, start: Any, b: Any, c: Any, to_e: Callable, from_e: Callable) -> tuple[Any, Any]:
    """Old values seen by a sequence of atomics on one address, and the final value."""
    np = _np()
    dt = b.dtype
    packed = ty in ("f16x2", "bf16x2")
    if op == "exch":
        return np.concatenate([[start], b[:-1]]).astype(dt), b[-1]
    if op in _ACCUMULATE and not packed and not (op in ("min", "max") and dt.kind == "f") \
            and ty not in ("f16", "bf16"):
        # ufunc.accumulate runs strictly in order, rounding to the dtype at every step
        acc = getattr(np, _ACCUMULATE[op]).accumulate(np.concatenate([np.array([start], dtype=dt), b]))
        tiny = np.float32(1.1754944e-38)
        if not (ty == "f32" and (((np.abs(acc) < tiny) & (acc != 0)).any() or ((np.abs(b) < tiny) & (b != 0)).any())):
            return acc[:-1].astype(dt), acc[-1]
        # f32 atomic adds flush subnormals: take the exact sequence below
    olds = np.empty(b.size, dtype=dt)
    cur = np.array([start], dtype=dt)
    for i in range(b.size):
        olds[i] = cur[0]
        cur = from_e(atomic_apply(op, ty, to_e(cur), to_e(b[i:i + 1]), None if c is None else to_e(c[i:i + 1])))
        cur = np.asarray(cur, dtype=dt).reshape(1)
    return olds, cur[0]


def _noop(allowed: tuple[str, ...], min_ops: int = 0) -> Callable[[Decoder, Instr], Any]:
    """Hints with no architectural effect (prefetch, applypriority, discard)."""
    def handler(dec: Decoder, ins: Instr) -> Any:
        mods = Mods(ins)
        mods.ignore(allowed)
        mods.ignore(SPACES)
        mods.done()

        def fn(st: Any, m: Any) -> None:
            return None

        return (K_OP, fn, None)

    return handler


def _discard(dec: Decoder, ins: Instr) -> Any:
    """discard.global.L2 [a], 128: the line's contents become undefined; we keep them."""
    mods = Mods(ins)
    mods.ignore(("global", "L2"))
    mods.done()
    return (K_OP, lambda st, m: None, None)


def _createpolicy(dec: Decoder, ins: Instr) -> Any:
    """createpolicy: a cache-eviction policy value; only ever passed back to cache hints."""
    np = _np()
    mods = Mods(ins)
    mods.ignore(("fractional", "range", "cvt", "L2::evict_last", "L2::evict_normal", "L2::evict_first",
                 "L2::evict_unchanged", "b64", "L2"))
    mods.done()
    w = dec.writer_t(ins.operands[0], "b64", ins)

    def fn(st: Any, m: Any) -> None:
        w.put(st, m, np.uint64(0))

    return (K_OP, fn, None)


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "ld": _ld, "ldu": _ld, "st": _st,
    "atom": _atom(True), "red": _atom(False),
    "prefetch": _noop(("L1", "L2", "L2::evict_last", "L2::evict_normal", "tensormap")),
    "prefetchu": _noop(("L1",)),
    "applypriority": _noop(("global", "L2::evict_normal")),
    "discard": _discard,
    "createpolicy": _createpolicy,
}
