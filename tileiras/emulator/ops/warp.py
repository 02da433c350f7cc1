"""Warp-collective instructions: shfl.sync, vote.sync, match.sync, redux.sync, elect.sync,
activemask and bar.warp.sync.

They are scheduled as collectives (kind K_COLL): the scheduler runs one only
once every non-exited thread named by `membermask` in each warp has reached
it, so the values other lanes contribute are the ones they hold there.
"""

from __future__ import annotations

from typing import Any, Callable

from ..parser import Instr, Pipe, Sink
from ..program import K_COLL, K_OP, Decoder, Mods, bad
from ..ptxtypes import np_dtype
from .common import full


def _np() -> Any:
    import numpy as np

    return np


def participating(st: Any, m: Any, mm: Any) -> Any:
    """Bool vector: executing threads whose lane bit is set in the (per-lane) membermask."""
    np = _np()
    active = np.ones(st.n, dtype=bool) if m is None else m
    if mm is None:
        return active
    mm = np.asarray(mm).astype(np.uint32)
    return active & (((mm >> st.lane) & np.uint32(1)) != 0)


def per_warp(st: Any, ufunc: Any, values: Any) -> Any:
    """Reduce `values` over each warp with `ufunc`, broadcast back to every thread."""
    return ufunc.reduceat(values, st.warp_starts)[st.warp_of]


def _membermask(dec: Decoder, ins: Instr, op: Any) -> Callable[[Any], Any]:
    return dec.reader(op, "b32", ins)


def _shfl(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    if not mods.flag("sync"):
        raise bad(ins, "shfl without .sync is not supported (sm_70 and later need shfl.sync)")
    mods.flag("aligned")
    mode = mods.need(("up", "down", "bfly", "idx"), "shuffle mode")
    if mods.type1() != "b32":
        raise bad(ins, "shfl moves .b32 values")
    mods.done()
    ops = ins.operands
    if len(ops) != 5:
        raise bad(ins, "expected d[|p], a, b, c, membermask")
    dst = ops[0]
    d_op, p_op = (dst.first, dst.second) if isinstance(dst, Pipe) else (dst, None)
    ra = dec.reader(ops[1], "b32", ins)
    rb = dec.reader(ops[2], "u32", ins)
    rc = dec.reader(ops[3], "u32", ins)
    mm = _membermask(dec, ins, ops[4])
    wd = dec.writer_t(d_op, "b32", ins)
    wp = dec.writer_t(p_op, "pred", ins) if p_op is not None and not isinstance(p_op, Sink) else None

    def fn(st: Any, m: Any) -> None:
        lane = st.lane.astype(np.int64)
        a = full(st, ra(st))
        b = np.asarray(rb(st)).astype(np.int64) & 31
        c = np.asarray(rc(st)).astype(np.int64)
        clamp = c & 31
        seg = (c >> 8) & 31
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j = lane - b
            ok = j >= max_lane
        elif mode == "down":
            j = lane + b
            ok = j <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            ok = j <= max_lane
        else:
            j = min_lane | (b & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src = st.tid_linear - lane + j
        src = np.where(src < st.n, src, st.tid_linear)
        wd.put(st, m, a[src])
        if wp is not None:
            wp.put(st, m, np.broadcast_to(ok, (st.n,)))

    return (K_COLL, fn, mm)


def _vote(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    if not mods.flag("sync"):
        raise bad(ins, "vote without .sync is not supported (sm_70 and later need vote.sync)")
    mode = mods.need(("all", "any", "uni", "ballot"), "vote mode")
    ty = mods.type1()
    mods.done()
    ops = ins.operands
    if len(ops) != 3:
        raise bad(ins, "expected d, {!}a, membermask")
    ra = dec.reader(ops[1], "pred", ins)
    mm = _membermask(dec, ins, ops[2])
    w = dec.writer_t(ops[0], ty, ins)

    def fn(st: Any, m: Any) -> None:
        part = participating(st, m, full(st, mm(st)))
        a = full(st, ra(st))
        if mode == "ballot":
            bits = np.where(part & a, st.lane_bit, np.uint32(0))
            w.put(st, m, per_warp(st, np.bitwise_or, bits))
            return
        t = per_warp(st, np.add, (part & a).astype(np.int32))
        n = per_warp(st, np.add, part.astype(np.int32))
        if mode == "all":
            r = t == n
        elif mode == "any":
            r = t > 0
        else:
            r = (t == 0) | (t == n)
        w.put(st, m, r)

    return (K_COLL, fn, mm)


def _match(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mods.need(("sync",), ".sync")
    mode = mods.need(("any", "all"), ".any or .all")
    ty = mods.type1()
    mods.done()
    ops = ins.operands
    dst = ops[0]
    d_op, p_op = (dst.first, dst.second) if isinstance(dst, Pipe) else (dst, None)
    ra = dec.reader(ops[1], ty, ins)
    mm = _membermask(dec, ins, ops[2])
    wd = dec.writer_t(d_op, "b32", ins)
    wp = dec.writer_t(p_op, "pred", ins) if p_op is not None and not isinstance(p_op, Sink) else None

    def fn(st: Any, m: Any) -> None:
        part = participating(st, m, full(st, mm(st)))
        a = full(st, ra(st))
        nw = st.nwarps
        pad = np.zeros(nw * 32, dtype=a.dtype)
        pad[:st.n] = a
        ppad = np.zeros(nw * 32, dtype=bool)
        ppad[:st.n] = part
        vals = pad.reshape(nw, 32)
        parts = ppad.reshape(nw, 32)
        same = (vals[:, :, None] == vals[:, None, :]) & parts[:, None, :]
        bits = (same * (np.uint32(1) << np.arange(32, dtype=np.uint32))).sum(axis=2).astype(np.uint32)
        mine = bits.reshape(-1)[:st.n]
        if mode == "any":
            wd.put(st, m, mine)
            return
        allmask = np.bitwise_or.reduceat(np.where(part, st.lane_bit, np.uint32(0)), st.warp_starts)[st.warp_of]
        eq = mine == allmask
        wd.put(st, m, np.where(eq, allmask, np.uint32(0)))
        if wp is not None:
            wp.put(st, m, eq)

    return (K_COLL, fn, mm)


def _redux(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mods.need(("sync",), ".sync")
    op = mods.need(("add", "min", "max", "and", "or", "xor"), "reduction")
    if mods.flag("abs") or mods.flag("NaN"):
        raise bad(ins, "float redux is not supported")
    ty = mods.type1()
    mods.done()
    ops = ins.operands
    ra = dec.reader(ops[1], ty, ins)
    mm = _membermask(dec, ins, ops[2])
    w = dec.writer_t(ops[0], ty, ins)
    dt = np_dtype(ty)
    ident = {"add": 0, "and": np.iinfo(dt).max if dt.kind == "u" else -1, "or": 0, "xor": 0,
             "min": np.iinfo(dt).max, "max": np.iinfo(dt).min}[op]
    uf = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and, "or": np.bitwise_or,
          "xor": np.bitwise_xor}[op]

    def fn(st: Any, m: Any) -> None:
        part = participating(st, m, full(st, mm(st)))
        a = full(st, ra(st))
        v = np.where(part, a, dt.type(ident)).astype(dt)
        w.put(st, m, per_warp(st, uf, v).astype(dt))

    return (K_COLL, fn, mm)


def _activemask(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mods.type1()
    mods.done()
    w = dec.writer_t(ins.operands[0], "b32", ins)

    def fn(st: Any, m: Any) -> None:
        part = participating(st, m, None)
        bits = np.where(part, st.lane_bit, np.uint32(0))
        w.put(st, m, per_warp(st, np.bitwise_or, bits))

    return (K_OP, fn, None)


def _elect(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mods.need(("sync",), ".sync")
    mods.done()
    ops = ins.operands
    dst = ops[0]
    d_op, p_op = (dst.first, dst.second) if isinstance(dst, Pipe) else (dst, None)
    mm = _membermask(dec, ins, ops[1])
    wd = dec.writer_t(d_op, "b32", ins) if not isinstance(d_op, Sink) else None
    wp = dec.writer_t(p_op, "pred", ins) if p_op is not None and not isinstance(p_op, Sink) else None

    def fn(st: Any, m: Any) -> None:
        part = participating(st, m, full(st, mm(st)))
        lane = np.where(part, st.lane, np.uint32(32))
        leader = per_warp(st, np.minimum, lane)
        if wd is not None:
            wd.put(st, m, leader)
        if wp is not None:
            wp.put(st, m, leader == st.lane)

    return (K_COLL, fn, mm)


def bar_warp_sync(dec: Decoder, ins: Instr, mods: Mods) -> Any:
    mods.need(("sync",), ".sync")
    mods.done()
    mm = _membermask(dec, ins, ins.operands[0])
    return (K_COLL, lambda st, m: None, mm)


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "shfl": _shfl, "vote": _vote, "match": _match, "redux": _redux, "activemask": _activemask,
    "elect": _elect,
}
