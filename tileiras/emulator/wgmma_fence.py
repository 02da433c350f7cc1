"""wgmma.fence: the register accesses a wgmma.mma_async must be fenced from (PTX ISA, wgmma.fence).

A warpgroup must execute wgmma.fence before its first wgmma.mma_async, and between any access of a
register by another instruction (an accumulator zeroed or read, an A fragment loaded) and a
wgmma.mma_async that accesses the same register; accumulator accesses by wgmma.mma_async
instructions themselves need no fence. Every non-wgmma instruction naming an asynchronously
written register is wrapped already (`async_regs.guard_async_registers`): it stamps the registers
it names for its warpgroups (`touch`); wgmma.fence clears the stamps (`fence`); wgmma.mma_async
checks them (`check`). Always on: cheap, and an ISA rule rather than a race.

Register moves (`mov`, a copy or an immediate) do not count as accesses: NVIDIA's own PTX zeroes the
accumulators with movs after its wgmma.fence (ptxas folds such copies into register allocation).
"""

from __future__ import annotations

from typing import Any

from .errors import DeviceFault


def _state(st: Any) -> dict:
    """warpgroup -> {"fenced": bool, "touched": {register: line}}"""
    if st.wgmma_fences is None:
        st.wgmma_fences = {}
    return st.wgmma_fences


def _groups(st: Any, m: Any) -> list[int]:
    np = st.np
    if st.n % 128:
        return []
    if m is None:
        return list(range(st.n // 128))
    return np.flatnonzero(m.reshape(-1, 128).any(axis=1)).tolist()


def touch(st: Any, m: Any, regs: frozenset, line: int) -> None:
    """Threads `m` ran an instruction (not a wgmma) at `line` naming `regs`."""
    state = _state(st)
    for g in _groups(st, m):
        touched = state.setdefault(g, {"fenced": False, "touched": {}})["touched"]
        for r in regs:
            touched.setdefault(r, line)


def fence(st: Any, groups: list[int]) -> None:
    state = _state(st)
    for g in groups:
        state[g] = {"fenced": True, "touched": {}}


def orders_something(st: Any, groups: list[int]) -> bool:
    """Whether a wgmma.fence of warpgroups `groups` now orders anything: one of them has not fenced yet, or an
    instruction other than a wgmma.mma_async has accessed one of its wgmma registers since its last fence."""
    state = _state(st)
    return any(g not in state or not state[g]["fenced"] or state[g]["touched"] for g in groups)


def check(st: Any, g: int, regs: frozenset, names: list, line: int) -> None:
    """Warpgroup `g` issues the wgmma.mma_async at `line`, which accesses `regs`."""
    entry = _state(st).get(g)
    t = 128 * g
    if entry is None or not entry["fenced"]:
        raise DeviceFault(f"wgmma.mma_async without wgmma.fence: warpgroup {g} issues its first wgmma.mma_async "
                          "with no wgmma.fence before it", t)
    hit = [r for r in regs if r in entry["touched"]]
    if hit:
        r = min(hit, key=lambda x: entry["touched"][x])
        raise DeviceFault(f"wgmma.mma_async without wgmma.fence: register {names[r]} is accessed by the instruction "
                          f"at line {entry['touched'][r]} and then by this wgmma.mma_async with no wgmma.fence "
                          "between", t)
