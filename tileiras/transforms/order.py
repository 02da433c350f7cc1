"""Pass `canonical-order`: one order of each block's ops, whatever order the kernel wrote them in.

Ops with an effect (memory ops, ops with regions, terminators) keep their order: they are the block's
anchors. Every effect-free op is placed as early as its operands allow, right after the last op it
reads, but not above a loop or an `if` that comes before the anchor first needing it; ops ready at the same point go in the order the anchors first need them (a post-order walk
from each anchor in turn through the operands of it and of the ops nested in its regions, itself
independent of how the kernel was written). Two kernels that differ only in the order of independent
effect-free ops therefore print the same, and each consumer sits beside what it reads: a staged load's
buffer lives from the load to its readers, not to where a later anchor first needs their result.

Why early, and why not above a loop: measured on the corpora (unit, realistic, TileGym; four
targets), placing consumers just before their first user stretched staged loads' lifetimes past the
next load (more shared memory: MLA prefill on sm_120) and changed 12 pairs' schedules; hoisted above
loops, conversions read only after a loop were carried across it in registers. As placed here, the
decisions of 924 of 936 kernel-target pairs are unchanged; in the other 12, four loops get deeper
rings and three shallower ones (two sm_80 causal attentions from three cp.async stages to two, one TMA
ring from five to four), four schedules are one tick longer and one a tick shorter, and two sm_120
loops left unpipelined either way sit beside 2 KB more (the session note of issue 32 lists them).
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Block, Operation
from .rewrite import blocks_of, defining_op, is_movable, unused


def canonical_order(entry: Operation) -> bool:
    """Reorder every block of `entry` (see the module docstring); True if any op moved."""
    changed = False
    for block in list(blocks_of(entry)):
        changed |= _order(block)
    return changed


def _order(block: Block) -> bool:
    ops = block.operations
    floating = {id(op) for op in ops if is_movable(op) and not unused(op)}
    placed: set[int] = set()
    order: list[Operation] = []

    def place(op: Operation) -> None:
        # iterative post-order: a long chain of element-wise ops must not exhaust Python's stack
        stack: list[tuple[Operation, bool]] = [(op, False)]
        while stack:
            current, expanded = stack.pop()
            if expanded:
                order.append(current)
                continue
            if id(current) in placed:
                continue
            placed.add(id(current))
            stack.append((current, True))
            producers = [d for v in _reads(current) if (d := defining_op(v)) is not None
                         and d.parent is block and id(d) in floating and id(d) not in placed]
            stack.extend((d, False) for d in reversed(producers))

    for op in ops:
        if id(op) not in floating:
            place(op)
    if len(order) != len(ops):
        return False
    order = _early(block, order, floating)
    if all(a is b for a, b in zip(order, ops)):
        return False
    block.operations[:] = order
    return True


def _early(block: Block, late: list[Operation], floating: set[int]) -> list[Operation]:
    """Each effect-free op as early as its operands allow: right after the last op it reads, ties in
    `late`'s order (itself canonical), so a consumer stays beside what it reads; but not above a loop
    or an `if` before the anchor that first needs it (a value read only after a loop is not carried
    across it)."""
    import heapq

    rank = {id(op): i for i, op in enumerate(late)}
    waiting: dict[int, int] = {}
    users: dict[int, list[Operation]] = {}
    gate: Optional[Operation] = None    # the last op with regions before the anchor that first needs `op`
    for op in late:
        if id(op) not in floating:
            gate = op if op.regions else gate
        else:
            producers = {id(d) for v in op.operands if (d := defining_op(v)) is not None and d.parent is block}
            if gate is not None:
                producers.add(id(gate))
            waiting[id(op)] = len(producers)
            for p in producers:
                users.setdefault(p, []).append(op)
    ready = [(rank[id(op)], op) for op in late if id(op) in floating and not waiting[id(op)]]
    heapq.heapify(ready)
    out: list[Operation] = []

    def emit(op: Operation) -> None:
        out.append(op)
        for user in users.get(id(op), ()):
            waiting[id(user)] -= 1
            if not waiting[id(user)]:
                heapq.heappush(ready, (rank[id(user)], user))

    for op in late:
        if id(op) in floating:
            continue
        while ready:
            emit(heapq.heappop(ready)[1])
        emit(op)
    while ready:
        emit(heapq.heappop(ready)[1])
    return out


def _reads(op: Operation) -> list:
    """The values `op` reads, its nested ops' included, in order."""
    if not op.regions:
        return list(op.operands)
    return [v for inner in op.walk() for v in inner.operands]
