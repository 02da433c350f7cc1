"""Pass `licm`: loop-invariant code motion of cheap effect-free ops out of `for` and `loop`.

An op of a loop body's own block moves before the loop when every operand is defined outside the loop
and what it yields costs at most a register a thread (views, tokens, scalars, assumes, index and shape
arithmetic, splat constants). Tiles of many elements stay where the kernel computes them: whether to
keep one live across a loop is a register-pressure decision of the levels below. Inner loops go first,
so an invariant climbs out of a whole nest.
"""

from __future__ import annotations

from ..ir.core import Operation
from .rewrite import inside, is_movable, is_small, move_before

_LOOPS = frozenset({"cuda_tile.for", "cuda_tile.loop"})


def licm(entry: Operation) -> bool:
    """Hoist the invariants of every loop of `entry`; True if anything moved."""
    changed = False
    for loop in reversed([op for op in entry.walk() if op.name in _LOOPS]):   # inner loops first
        changed |= _hoist(loop)
    return changed


def _hoist(loop: Operation) -> bool:
    moved = False
    for op in list(loop.regions[0].block.operations):
        if _cheap(op) and not any(inside(v, loop) for v in op.operands):
            move_before(op, loop)
            moved = True
    return moved


def _cheap(op: Operation) -> bool:
    if not is_movable(op):
        return False
    if op.name == "cuda_tile.constant":
        return op.attributes["value"].is_splat
    return all(is_small(r) for r in op.results)
