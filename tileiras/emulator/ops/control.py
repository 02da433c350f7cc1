"""Branches, calls, returns, exit, CTA barriers, fences and other control instructions.

The decoders only describe what to do; the scheduler in `executor.py`
splits and merges thread groups, parks threads at barriers and keeps the
per-thread call stacks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..errors import DeviceFault
from ..parser import Instr, Paren, Reg, Sym
from ..program import (CallRef, K_BAR, K_BRA, K_BRX, K_CALL, K_EXIT, K_OP, K_RET, K_WAIT, Decoder, LabelRef, Mods,
                       ParamSlot, bad)
from .common import lanes_of


def _np() -> Any:
    import numpy as np

    return np


def _target(ins: Instr, op: Any) -> str:
    if not isinstance(op, Sym):
        raise bad(ins, "expected a label")
    return op.name


def _bra(dec: Decoder, ins: Instr) -> Any:
    mods = Mods(ins)
    mods.flag("uni")
    mods.done()
    if len(ins.operands) != 1:
        raise bad(ins, "expected one target")
    if isinstance(ins.operands[0], Reg) or dec.reg_of(ins.operands[0], ins) is not None:
        raise bad(ins, "indirect branches through a register are not supported")
    return (K_BRA, None, LabelRef(_target(ins, ins.operands[0])))


def _brx(dec: Decoder, ins: Instr) -> Any:
    mods = Mods(ins)
    mods.need(("idx",), ".idx")
    mods.flag("uni")
    mods.done()
    if len(ins.operands) != 2:
        raise bad(ins, "expected an index and a target list")
    table = _target(ins, ins.operands[1])
    names = dec.branch_targets.get(table)
    if names is None:
        raise bad(ins, f"unknown .branchtargets list '{table}'")
    r = dec.reader(ins.operands[0], "u32", ins)
    count = len(names)

    def index(st: Any, m: Any) -> Any:
        np = _np()
        v = np.asarray(r(st))
        if v.ndim == 0:
            v = np.full(st.n, v)
        lanes = lanes_of(st, m)
        bad_ = v[lanes] >= count
        if bad_.any():
            i = int(np.argmax(bad_))
            raise DeviceFault(f"brx.idx index {int(v[lanes][i])} is outside its {count}-entry target list",
                              int(lanes[i]))
        return v

    return (K_BRX, index, [LabelRef(n) for n in names])


def _exit(dec: Decoder, ins: Instr) -> Any:
    mods = Mods(ins)
    mods.done()
    return (K_EXIT, None, None)


def _ret(dec: Decoder, ins: Instr) -> Any:
    mods = Mods(ins)
    mods.flag("uni")
    mods.done()
    if dec.current is not None and dec.current.kind == "entry":
        return (K_EXIT, None, None)
    return (K_RET, None, None)


def _trap(dec: Decoder, ins: Instr) -> Any:
    Mods(ins).done()

    def fn(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size:
            raise DeviceFault("trap executed (the kernel aborted)", int(lanes[0]))

    return (K_OP, fn, None)


def _brkpt(dec: Decoder, ins: Instr) -> Any:
    Mods(ins).done()

    def fn(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size:
            raise DeviceFault("brkpt executed", int(lanes[0]))

    return (K_OP, fn, None)


def _copies(dec: Decoder, ins: Instr, srcs: list, dsts: list[ParamSlot]) -> list:
    """(source slot offset or reader, destination slot) pairs for passing call parameters."""
    if len(srcs) != len(dsts):
        raise bad(ins, f"expected {len(dsts)} parameters, got {len(srcs)}")
    out = []
    for src, dst in zip(srcs, dsts):
        if isinstance(src, Sym):
            info = dec.lookup_sym(src.name)
            if info is not None and info.space == "cparam":
                out.append((info.value + src.offset, dst))
                continue
        ty = dst.type if dst.type not in ("b8",) or not dst.is_array else "b8"
        out.append((dec.reader(src, ty, ins), dst))
    return out


def _call(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mods.flag("uni")
    mods.done()
    ops = list(ins.operands)
    rets: list = []
    if ops and isinstance(ops[0], Paren):
        rets = list(ops.pop(0).items)
    if not ops or not isinstance(ops[0], Sym):
        raise bad(ins, "indirect calls are not supported")
    callee = ops.pop(0).name
    fn_decl = dec.module.functions.get(callee)
    if fn_decl is None or fn_decl.kind != "func":
        raise bad(ins, f"call to unknown function '{callee}'")
    args = list(ops.pop(0).items) if ops and isinstance(ops[0], Paren) else []
    if ops:
        raise bad(ins, "call through a prototype/target list is not supported")
    if fn_decl.body is None:
        from ..builtins import BUILTINS

        if callee not in BUILTINS:
            raise bad(ins, f"'{callee}' is an external function with no body in this PTX")
        return _builtin_call(dec, ins, callee, args, rets)
    dec.call_graph.setdefault(dec.current.name, set()).add(callee)
    formals, results = dec.signature(callee)
    arg_copies = _copies(dec, ins, args, formals)
    if len(rets) != len(results):
        raise bad(ins, f"'{callee}' returns {len(results)} values, the call expects {len(rets)}")
    ret_copies = []
    for r, slot in zip(rets, results):
        info = dec.lookup_sym(r.name) if isinstance(r, Sym) else None
        if info is None or info.space != "cparam":
            raise bad(ins, "call results must be .param variables")
        ret_copies.append((slot.offset, info.value, slot.size))

    def pass_args(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        cp = st.cparam2d
        for src, dst in arg_copies:
            if isinstance(src, int):
                cp[lanes, dst.offset:dst.offset + dst.size] = cp[lanes, src:src + dst.size]
            else:
                from ..ptxtypes import np_dtype

                v = np.asarray(src(st))
                v = np.full(st.n, v) if v.ndim == 0 else v
                raw = np.ascontiguousarray(v[lanes].astype(np_dtype(dst.type))).view(np.uint8)
                cp[lanes, dst.offset:dst.offset + raw.size // max(lanes.size, 1)] = raw.reshape(lanes.size, -1)

    def take_results(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        cp = st.cparam2d
        for src, dst, size in ret_copies:
            cp[lanes, dst:dst + size] = cp[lanes, src:src + size]

    return [(K_CALL, pass_args, CallRef(callee)), (K_OP, take_results, None)]


def _builtin_call(dec: Decoder, ins: Instr, callee: str, args: list, rets: list) -> list:
    """A call of a system function (vprintf, __assertfail) run by the emulator itself."""
    from ..builtins import BUILTINS
    from ..ptxtypes import np_dtype

    np = _np()
    impl, arg_types, ret_type = BUILTINS[callee]
    if len(args) != len(arg_types):
        raise bad(ins, f"'{callee}' takes {len(arg_types)} parameters")
    if rets and (ret_type is None or len(rets) != 1):
        raise bad(ins, f"'{callee}' returns {'nothing' if ret_type is None else 'one value'}")
    readers = []
    for a, ty in zip(args, arg_types):
        info = dec.lookup_sym(a.name) if isinstance(a, Sym) else None
        if info is not None and info.space == "cparam":
            readers.append((info.value + a.offset, np_dtype(ty)))
        else:
            readers.append((dec.reader(a, ty, ins), np_dtype(ty)))
    ret_off = None
    if rets:
        info = dec.lookup_sym(rets[0].name) if isinstance(rets[0], Sym) else None
        if info is None or info.space != "cparam":
            raise bad(ins, "call results must be .param variables")
        ret_off = info.value

    def run(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        cp = st.cparam2d
        values = []
        for src, dt in readers:
            if isinstance(src, int):
                values.append(np.ascontiguousarray(cp[lanes, src:src + dt.itemsize]).view(dt).reshape(-1))
            else:
                v = np.asarray(src(st))
                values.append(np.full(lanes.size, v) if v.ndim == 0 else v[lanes])
        result = impl(st, lanes, values)
        if ret_off is not None and result is not None:
            raw = np.ascontiguousarray(np.asarray(result).astype(np.int32)).view(np.uint8).reshape(lanes.size, 4)
            cp[lanes, ret_off:ret_off + 4] = raw

    return [(K_OP, run, None), (K_OP, lambda st, m: None, None)]


# --- barriers -------------------------------------------------------------------

@dataclass
class BarrierSpec:
    op: str                                   # 'sync', 'arrive' or 'red'
    ident: Callable[[Any], Any]
    count: Optional[Callable[[Any], Any]]
    aligned: bool
    red_op: str = ""
    red_value: Optional[Callable[[Any], Any]] = None
    red_writer: Any = None


def _bar(family: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        mods = Mods(ins)
        if family == "barrier" and mods.flag("cluster"):
            from .cluster import barrier_cluster

            return barrier_cluster(dec, ins, mods)
        mods.flag("cta")
        if mods.flag("warp"):
            from .warp import bar_warp_sync

            return bar_warp_sync(dec, ins, mods)
        aligned = mods.flag("aligned") or family == "bar"
        op = mods.need(("sync", "arrive", "red"), ".sync, .arrive or .red")
        ops = list(ins.operands)
        if op == "red":
            red_op = mods.need(("popc", "and", "or"), "reduction")
            ty = mods.type1()
            mods.done()
            if len(ops) not in (3, 4):
                raise bad(ins, "expected d, a{, b}, {!}c")
            dst, ident_op = ops[0], ops[1]
            count_op = ops[2] if len(ops) == 4 else None
            value_op = ops[-1]
            return (K_BAR, None, BarrierSpec(
                "red", dec.reader(ident_op, "u32", ins),
                dec.reader(count_op, "u32", ins) if count_op is not None else None, aligned,
                red_op, dec.reader(value_op, "pred", ins), dec.writer_t(dst, ty, ins)))
        mods.done()
        if not 1 <= len(ops) <= 2:
            raise bad(ins, "expected a barrier number and an optional thread count")
        if op == "arrive" and len(ops) != 2:
            raise bad(ins, "bar.arrive needs a thread count")
        return (K_BAR, None, BarrierSpec(op, dec.reader(ops[0], "u32", ins),
                                         dec.reader(ops[1], "u32", ins) if len(ops) == 2 else None, aligned))

    return handler


def _nop(allowed: tuple[str, ...]) -> Callable[[Decoder, Instr], Any]:
    """Instructions with no effect in a sequentially consistent, single-CTA-at-a-time machine."""
    def handler(dec: Decoder, ins: Instr) -> Any:
        mods = Mods(ins)
        mods.ignore(allowed)
        mods.done()
        return (K_OP, lambda st, m: None, None)

    return handler


def _fence(dec: Decoder, ins: Instr) -> Any:
    """Fences order nothing in this machine, but fence.proxy.async is what makes generic-proxy stores
    visible to the async proxy (TMA, wgmma, tcgen05): the race checker records it."""
    mods = Mods(ins)
    mods.ignore(FENCE_MODS)
    mods.done()
    if "tensormap::generic" in ins.mods:     # maps written by the generic proxy, for TMA to read
        from .tma import tensormap_fence

        return tensormap_fence(dec, ins)
    if "mbarrier_init" in ins.mods:     # the race checker's: remote uses must see the initializations
        def fence_inits(st: Any, m: Any) -> None:
            if st.races is not None:
                from .common import lanes_of

                st.races.hb.fence_inits(lanes_of(st, m))
                st.races.init_fence(lanes_of(st, m))

        return (K_OP, fence_inits, None)
    if not ("proxy" in ins.mods and "async" in ins.mods):
        return (K_OP, lambda st, m: None, None)

    def fence(st: Any, m: Any) -> None:
        if st.races is not None:
            st.races.proxy_fence(st.all_lanes if m is None else m)

    return (K_OP, fence, None)


REGISTER_FILE = 65536     # 32-bit registers of an SM, what the warpgroups' budgets share


def _setmaxnreg(dec: Decoder, ins: Instr) -> Any:
    """setmaxnreg.{inc,dec}.sync.aligned.u32 N: register reallocation between warpgroups. The operand is an
    immediate multiple of 8 in 24..256 (as ptxas wants). Every warp of a warpgroup must ask for the same
    counts in the same order (the k-th setmaxnreg of each; NVIDIA's PTX runs them at different places
    per warp role; checked where the CTA is made of whole warpgroups); after a warp's first one (its
    budget before is ptxas's choice), .dec may only lower its budget and .inc only raise it; and after an .inc the
    budgets of the CTA's warps (those that never ran setmaxnreg at the launch's even share) must fit
    the register file: until other warps' .dec make room the .inc waits (K_WAIT), and if none ever does
    the scheduler reports the deadlock, as a GPU would hang."""
    from ..parser import Imm

    mods = Mods(ins)
    op = mods.need(("inc", "dec"), ".inc or .dec")
    mods.need(("sync",), ".sync")
    mods.need(("aligned",), ".aligned")
    mods.need(("u32",), ".u32")
    mods.done()
    ops = ins.operands
    if len(ops) != 1 or not isinstance(ops[0], Imm) or not (24 <= ops[0].value <= 256 and ops[0].value % 8 == 0):
        raise bad(ins, "the register count must be an immediate multiple of 8 in 24..256")
    count = ops[0].value

    def setmaxnreg(st: Any, m: Any) -> Any:
        np = st.np
        active = np.ones(st.n, dtype=bool) if m is None else m
        done = active.copy()
        warps = np.flatnonzero(np.logical_or.reduceat(active, st.warp_starts)).tolist()
        if st.reg_budgets is None:
            share = min(256, REGISTER_FILE // max(st.cta_threads, 1) // 8 * 8)
            st.reg_budgets = {"now": [share] * st.nwarps, "asked": [[] for _ in range(st.nwarps)]}
        now, asked = st.reg_budgets["now"], st.reg_budgets["asked"]
        for w in warps:
            t = 32 * w
            first = not asked[w]        # the budget before it is ptxas's choice, unknown here
            if not first and ((op == "inc" and count < now[w]) or (op == "dec" and count > now[w])):
                raise DeviceFault(f"setmaxnreg.{op} to {count} registers: warp {w} has {now[w]}, which .{op} "
                                  f"cannot {'raise' if op == 'inc' else 'lower'} to that", t)
            lo = t // st.cta_threads * st.cta_threads // 32
            mine = now[lo:lo + (st.cta_threads + 31) // 32]
            if op == "inc" and 32 * (sum(mine) - now[w] + count) > REGISTER_FILE:
                done[t:t + 32] = False      # waits until other warps give registers back (a deadlock if never)
                continue
            k = len(asked[w])
            group = range(4 * (w // 4), 4 * (w // 4) + 4) if st.cta_threads % 128 == 0 else ()   # whole ones
            for v in group:
                if v != w and len(asked[v]) > k and asked[v][k] != count:
                    raise DeviceFault(f"setmaxnreg: warp {w} asks for {count} registers where warp {v} of its "
                                      f"warpgroup asked for {asked[v][k]}: a warpgroup's warps must agree", t)
            asked[w].append(count)
            now[w] = count
        if op == "dec":
            st.mbar_epoch += 1      # wakes .inc waits (as an mbarrier phase would)
        return done

    return (K_WAIT, setmaxnreg, None)


FENCE_MODS = ("sc", "acq_rel", "acquire", "release", "cta", "gpu", "sys", "cluster", "gl", "proxy", "async",
              "alias", "tensormap", "tensormap::generic", "generic", "global", "shared::cta", "shared::cluster",
              "mbarrier_init",
              "async::generic", "release::cta", "acquire::cta", "sync_restrict::shared::cta",
              "sync_restrict::shared::cluster", "to_proxy::from_proxy", "op_restrict")

HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "bra": _bra, "brx": _brx, "call": _call, "ret": _ret, "exit": _exit, "trap": _trap, "brkpt": _brkpt,
    "bar": _bar("bar"), "barrier": _bar("barrier"),
    "membar": _nop(("cta", "gl", "sys", "proxy", "alias")),
    "fence": lambda dec, ins: _fence(dec, ins),
    "nanosleep": _nop(("u32",)),
    "pmevent": _nop(("mask",)),
    "griddepcontrol": _nop(("launch_dependents", "wait")),
    "setmaxnreg": lambda dec, ins: _setmaxnreg(dec, ins),
}
