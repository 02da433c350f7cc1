"""Pass `canonical-order`: one order of each block's ops, whatever order the kernel wrote them in.

Ops with an effect (memory ops, ops with regions, terminators) keep their order: they are the block's
anchors. An effect-free op that reads an anchor's result (through other effect-free ops or not) is
placed as early as its operands allow, but not above a loop or an `if` that comes before the anchor
first needing it; every other effect-free op (constants, index arithmetic, a mask from the loop's
index) just before its first user. Ties go in the order the anchors first need the ops (a post-order
walk from each anchor in turn through the operands of it and of the ops nested in its regions), so
the result depends on the dependences and the anchors' order only: two kernels that differ only in the
order of independent effect-free ops print the same.

Why this placement (measured on the corpora, unit + realistic + TileGym on four targets, schedule
decisions of the 936 kernel-target pairs against the order cuTile wrote): consumers placed just
before their first user stretch staged loads' lifetimes past the next load (MLA prefill on sm_120) and
cost modulo schedules a tick; everything placed early keeps a big tile such as attention's causal mask
live in registers over the loads and the mma (more spills in an fp8 attention); placed as here, 928 of
936 pairs get the same decisions (the other 8: session note of issue 32).
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
    order = _placed(block, order, floating)
    if all(a is b for a, b in zip(order, ops)):
        return False
    block.operations[:] = order
    return True


def _placed(block: Block, late: list[Operation], floating: set[int]) -> list[Operation]:
    """The block's final order: the effect-free ops that read (through others) an op with an effect in
    the block as early as they can go (`_early`), each of the others just before its first user there:
    an index computation, a mask from the loop's index or a constant stays where it is used instead of
    living in registers from the top of the block."""
    rank = {id(op): i for i, op in enumerate(late)}
    tied: set[int] = set()      # floating ops reading an anchor, through other floating ops or not
    for op in late:
        if id(op) in floating and any(
                (d := defining_op(v)) is not None and d.parent is block and (id(d) not in floating or id(d) in tied)
                for v in op.operands):
            tied.add(id(op))
    free = floating - tied
    order = _early(block, [op for op in late if id(op) not in free], tied, free)
    at = {id(op): i for i, op in enumerate(order)}
    root: dict[int, Operation] = {}
    for op in reversed(late):        # users before their operands
        if id(op) not in free:
            continue
        users = [_in_block(u, block) for r in op.results for u in r.uses]
        users = [root[id(u)] if id(u) in free else u for u in users if u is not None]
        root[id(op)] = min(users, key=lambda u: at[id(u)])
    before: dict[int, list[Operation]] = {}
    for op in late:
        if id(op) in free:
            before.setdefault(id(root[id(op)]), []).append(op)
    out: list[Operation] = []
    for op in order:
        out += sorted(before.get(id(op), ()), key=lambda o: rank[id(o)])
        out.append(op)
    return out


def _in_block(op: Operation, block: Block) -> Optional[Operation]:
    """`op` or the op of `block` it is nested in."""
    while op is not None and op.parent is not block:
        region = op.parent.parent if op.parent is not None else None
        op = region.parent if region is not None else None
    return op


def _early(block: Block, late: list[Operation], floating: set[int], free: set[int]) -> list[Operation]:
    """The anchors and the `floating` ops in order, each floating op as early as its operands allow
    (right after the last op it reads; `free` ops, placed later, count as read), ties in `late`'s order
    (itself canonical); but not above a loop or an `if` before the anchor that first needs it (a value
    read only after a loop is not carried across it)."""
    import heapq

    rank = {id(op): i for i, op in enumerate(late)}
    waiting: dict[int, int] = {}
    users: dict[int, list[Operation]] = {}
    gate: Optional[Operation] = None    # the last op with regions before the anchor that first needs `op`
    for op in late:
        if id(op) not in floating:
            gate = op if op.regions else gate
        else:
            producers = {id(d) for v in op.operands if (d := defining_op(v)) is not None and d.parent is block
                         and id(d) not in free}
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
