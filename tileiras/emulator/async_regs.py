"""Registers written asynchronously: wgmma accumulators and register A operands.

The emulator computes these instructions when they issue, so a kernel that touches the
registers too early would still see the right values; on hardware it reads garbage
(undefined behaviour in the PTX ISA). Instead, each issue leaves a `Pending` record (threads,
registers, what releases them) in `st.pending_regs`, and every other instruction that names
one of those registers checks the records first: touching a pending register is a fault
naming the register, the instruction that owns it and the wait that would release it.

Only instructions that name a register some asynchronous instruction writes are wrapped
(`guard_async_registers`, after decoding), so other code runs at full speed.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def guard_async_registers(prog: Any, regs_used: list) -> None:
    """Wrap every step that names an asynchronously written register with the pending check."""
    from .program import K_COLL, K_OP, K_WAIT

    for pc, (kind, fn, gid, gneg, aux) in enumerate(prog.code):
        ins = prog.info[pc]
        regs = regs_used[pc] & prog.async_regs
        if not regs or id(ins) in prog.async_exempt or kind not in (K_OP, K_COLL, K_WAIT) or fn is None:
            continue
        prog.code[pc] = (kind, _guarded(fn, frozenset(regs), prog, ins), gid, gneg, aux)


def _guarded(fn: Any, regs: frozenset, prog: Any, ins: Any) -> Any:
    def run(st: Any, m: Any) -> Any:
        if st.pending_regs:
            check(st, m, regs, prog, ins)
        return fn(st, m)

    return run
