"""IR edits the canonical-form passes share: what an op may be moved, merged or erased as, and the edits.

An op is *movable* when it has no memory effect and no region: the dialect declares it `Pure`, or it is
an `assume` (a fact about a value, no effect). Movable ops may be merged with an equal op (CSE), erased
when unused (DCE) and moved out of a loop (LICM); token-ordered memory ops never are.
"""

from __future__ import annotations

from typing import Iterator, Optional, Sequence

from ..ir.core import Block, OpResult, Operation, Value
from ..ir.dense import num_elements
from ..ir.types import TileType

_EFFECT_FREE = frozenset({"cuda_tile.assume"})   # not declared Pure, but without effects


def is_movable(op: Operation) -> bool:
    """No memory effect, no region, not a terminator (see the module docstring)."""
    if op.regions:
        return False
    if op.name in _EFFECT_FREE:
        return True
    defn = op.definition
    return defn.has_trait("Pure") and not defn.has_trait("Terminator")


def is_small(value: Value) -> bool:
    """A value that costs no more than a register a thread to keep live: not a tile of several elements."""
    return not isinstance(value.type, TileType) or num_elements(value.type) == 1


def erase(op: Operation) -> None:
    """Remove `op` (its results unused) from its block and from its operands' uses."""
    for v in op.operands:
        v.uses.remove(op)
    op.operands = []
    if op.parent is not None:
        op.parent.operations.remove(op)
        op.parent = None


def erase_tree(op: Operation) -> None:
    """Remove `op` and every op nested in it from their operands' uses, then `op` from its block."""
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.operations):
                erase_tree(inner)
    erase(op)


def replace(op: Operation, values: Sequence[Value]) -> None:
    """Every use of `op`'s results uses `values` instead; `op` is erased."""
    for result, value in zip(op.results, values):
        if result is not value:
            result.replace_all_uses_with(value)
    erase(op)


def move_before(op: Operation, anchor: Operation) -> None:
    """Move `op` (a value-preserving move: dominance is the caller's) just before `anchor`."""
    assert op.parent is not None
    op.parent.operations.remove(op)
    anchor.insert_before(op)


def unused(op: Operation) -> bool:
    return all(not r.uses for r in op.results)


def defining_op(value: Value) -> Optional[Operation]:
    return value.owner if isinstance(value, OpResult) else None


def blocks_of(op: Operation) -> Iterator[Block]:
    """Every block nested in `op`, outer ones first."""
    for region in op.regions:
        for block in region.blocks:
            yield block
            for inner in block.operations:
                yield from blocks_of(inner)


def inside_op(inner: Operation, op: Operation) -> bool:
    """Whether `inner` is nested in `op`'s regions."""
    block = inner.parent
    while block is not None and block.parent is not None:
        parent_op = block.parent.parent
        if parent_op is op:
            return True
        block = parent_op.parent if parent_op is not None else None
    return False


def inside(value: Value, op: Operation) -> bool:
    """Whether `value` is defined within `op`'s regions (an op result or block argument there)."""
    if isinstance(value, OpResult):
        return inside_op(value.owner, op)
    region = value.owner.parent if isinstance(value.owner, Block) else None
    owner = region.parent if region is not None else None
    return owner is not None and (owner is op or inside_op(owner, op))
