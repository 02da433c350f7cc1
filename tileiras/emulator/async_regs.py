"""Registers written asynchronously: wgmma accumulators and register A operands.

The emulator computes these instructions when they issue, so a kernel that touches the
registers too early would still see the right values; on hardware it reads garbage
(undefined behaviour in the PTX ISA). Instead, each issue leaves a `Pending` record (threads,
registers, what releases them) in `st.pending_regs`, and every other instruction that names
one of those registers checks the records first: touching a pending register is a fault
naming the register, the instruction that owns it and the wait that would release it.

Only instructions that name a register some asynchronous instruction writes are wrapped
(`guard_async_registers`, after decoding), so other code runs at full speed.

A plain register copy (`mov.b32 %d, %s`) of a pending register is not an access: NVIDIA's
compiler emits such copies of wgmma accumulators between a wgmma and its wait (loop-carried
values, which ptxas allocates to the same registers), so the copy makes %d pending too, released
with %s (and %d is checked from then on like %s).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from .errors import DeviceFault


@dataclass
class Pending:
    lanes: Any                  # bool mask over the CTA's threads that issued it
    regs: frozenset
    line: int
    what: str                   # e.g. "wgmma.mma_async"
    release: str                # e.g. "wgmma.wait_group"
    unit: int = -1              # warpgroup (wgmma) or warp (tcgen05.ld) the record belongs to
    group: Optional[int] = None  # wgmma-group number once committed


def check(st: Any, m: Any, regs: frozenset, prog: Any, ins: Any) -> None:
    np = st.np
    for p in st.pending_regs:
        hit = regs & p.regs
        if not hit:
            continue
        lanes = p.lanes if m is None else (p.lanes & m)
        if lanes.any():
            name = prog.reg_names[min(hit)]
            raise DeviceFault(f"register {name} is written by the {p.what} at line {p.line} and is accessed before "
                              f"the {p.release} that waits for it", int(np.argmax(lanes)))


def _copies(prog: Any, regs_used: list) -> dict:
    """pc -> (source, destination) register of every plain register-to-register mov whose source is
    (transitively) an asynchronously written register; the destinations join `prog.async_regs`."""
    from .parser import Reg

    found: dict = {}
    changed = True
    while changed:
        changed = False
        for pc, ins in enumerate(prog.info):
            if pc in found or ins.opcode != "mov" or len(ins.operands) != 2 or \
                    not all(isinstance(o, Reg) for o in ins.operands):
                continue
            by_name = {prog.reg_names[r]: r for r in regs_used[pc]}
            dst, src = (by_name.get(o.name) for o in ins.operands)
            if dst is None or src is None or dst == src or src not in prog.async_regs:
                continue
            found[pc] = (src, dst)
            prog.async_regs.add(dst)
            changed = True
    return found


def guard_async_registers(prog: Any, regs_used: list) -> None:
    """Wrap every step that names an asynchronously written register with the pending check."""
    from .program import K_COLL, K_OP, K_WAIT

    copies = _copies(prog, regs_used)
    for pc, (kind, fn, gid, gneg, aux) in enumerate(prog.code):
        ins = prog.info[pc]
        regs = regs_used[pc] & prog.async_regs
        if not regs or id(ins) in prog.async_exempt or kind not in (K_OP, K_COLL, K_WAIT) or fn is None:
            continue
        if pc in copies and kind == K_OP:
            prog.code[pc] = (kind, _copying(fn, *copies[pc], prog, ins), gid, gneg, aux)
            continue
        prog.code[pc] = (kind, _guarded(fn, frozenset(regs), prog, ins), gid, gneg, aux)


def _copying(fn: Any, src: int, dst: int, prog: Any, ins: Any) -> Any:
    """A copy of a possibly pending register: the destination inherits the source's pending records."""
    def run(st: Any, m: Any) -> Any:
        if st.pending_regs:
            check(st, m, frozenset((dst,)), prog, ins)
            for i, p in enumerate(st.pending_regs):
                if src in p.regs and (p.lanes if m is None else p.lanes & m).any():
                    st.pending_regs[i] = replace(p, regs=p.regs | {dst})
        return fn(st, m)

    return run


def _guarded(fn: Any, regs: frozenset, prog: Any, ins: Any) -> Any:
    from .wgmma_fence import touch

    stamps = ins.opcode != "mov"        # wgmma_fence.py: movs are not fenced accesses

    def run(st: Any, m: Any) -> Any:
        if st.pending_regs:
            check(st, m, regs, prog, ins)
        if stamps:
            touch(st, m, regs, ins.line)
        return fn(st, m)

    return run
