"""The loops one group of `tile_loops.py` becomes: one per phase of its reductions.

A reduction over a looped tile is computed chunk by chunk into an accumulator the loop carries
(the reduce of the chunk, combined with the accumulator by the reduce's own body). What reads its
result (a softmax's max, broadcast back over the row) can only run once that loop is done, so the
group's ops fall into phases: phase 0 is what depends on no reduction of the group, phase p + 1
what depends on one of phase p. Each phase is one loop over the chunks, which recomputes what it
needs from the earlier phases (loads read again: only the last phase may store, so every phase
reads what the first read). A loop goes where its reductions' results are first read (the last
phase: where the group's last op was), after everything its ops read from outside the group.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Block, Operation, Value

_STORES = ("cuda_tile.store_view_tko",)


class Phase:
    """One loop: the group's ops it computes (in block order), its reductions, and the op it goes
    before."""

    def __init__(self, ops: list[Operation], reduces: list[Operation], before: Operation,
                 window: Optional[dict[int, tuple[int, int]]] = None,
                 where: Optional[dict[Value, dict[int, int]]] = None) -> None:
        self.ops, self.reduces, self.before = ops, reduces, before
        # the loop of one window of a group's cats (cat_windows.py): space axis -> (first chunk, chunks),
        # and where each of its tiles lies there (one of its placements, `Group.offsets`)
        self.window, self.where = window, where


def phases(block: Block, ops: list[Operation], carried: set[Operation], inside: bool = False) -> Optional[list[Phase]]:
    """The loops that compute `ops` (a group of `block`, in block order) whose reductions `carried`
    end phases (the others are computed chunk by chunk), or None where they cannot be placed (a store
    before the last phase; an input of a phase defined after where it goes). `inside`: every phase
    goes in the body of one outer loop, where the last op was (nested_loops.py), each reading the
    results of the earlier ones there."""
    members = set(ops)
    position = {op: i for i, op in enumerate(block.operations)}
    waits: dict[Value, int] = {}    # value -> the phases it needs done (0: none)
    phase: dict[Operation, int] = {}
    for op in block.operations:
        p = max([waits.get(v, 0) for v in op.operands] + [0])
        if op in members:
            phase[op] = p
        for r in op.results:
            waits[r] = p + 1 if op in carried else p
    last = max(phase.values())
    if any(op.name in _STORES and phase[op] != last for op in ops):
        return None
    out: list[Phase] = []
    for p in range(last + 1):
        reduces = [op for op in ops if op in carried and phase[op] == p]
        sinks = reduces + ([op for op in ops if op.name in _STORES or not _read(op)] if p == last else [])
        needed = ancestors(sinks, members, carried - set(reduces))   # an earlier phase's results: read
        readers = [user for r in (r for op in reduces for r in op.results) for user in r.uses if user not in members]
        places = [op for op in readers if op.parent is block] + ([ops[-1]] if p == last or inside else [])
        if not places or not needed:
            return None
        before = min(places, key=lambda op: position[op])
        outside = [v for op in needed for v in op.operands if getattr(v, "owner", None) not in members]
        if any(isinstance(getattr(v, "owner", None), Operation) and v.owner.parent is block  # type: ignore[attr-defined]
               and position[v.owner] >= position[before] for v in outside):  # type: ignore[attr-defined]
            return None
        if out and position[before] <= position[out[-1].before] and not inside:
            return None
        out.append(Phase([op for op in ops if op in needed], reduces, before))
    return out


def _read(op: Operation) -> bool:
    """Whether anything reads what `op` defines."""
    return any(r.uses for r in op.results)


def ancestors(sinks: list[Operation], members: set[Operation], done: set[Operation]) -> set[Operation]:
    """`sinks` and the members they read, directly or not, short of those `done` (what they define is
    read, not computed again)."""
    seen: set[Operation] = set()
    pending = list(sinks)
    while pending:
        op = pending.pop()
        if op in seen:
            continue
        seen.add(op)
        pending += [v.owner for v in op.operands  # type: ignore[attr-defined]
                    if getattr(v, "owner", None) in members and v.owner not in seen  # type: ignore[attr-defined]
                    and v.owner not in done]  # type: ignore[attr-defined]
    return seen
