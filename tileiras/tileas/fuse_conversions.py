"""Pass `fuse-conversions`: one `convert_layout` per value, layout and block.

Each op that reads an operand in another layout got its own conversion; where several ops of
one block convert the same value to the same layout, the first conversion dominates the others
(same block, earlier), so their users read it and the later ones go. Each conversion is a
shared-memory round trip with two CTA barriers, so this saves both.
"""

from __future__ import annotations

from ..ir.core import Block, Operation
from .ops import CONVERT_LAYOUT


def fuse_conversions(entry: Operation) -> int:
    """Remove repeated conversions in every block of `entry`; the number removed."""
    removed = 0
    for op in list(entry.walk()):
        for region in op.regions:
            for block in region.blocks:
                removed += _fuse_block(block)
    return removed


def _fuse_block(block: Block) -> int:
    first: dict[tuple[int, object], Operation] = {}
    removed = 0
    for op in list(block.operations):
        if op.name != CONVERT_LAYOUT:
            continue
        key = (id(op.operands[0]), op.results[0].layout)
        kept = first.setdefault(key, op)
        if kept is op:
            continue
        op.results[0].replace_all_uses_with(kept.results[0])
        op.operands[0].uses.remove(op)
        block.operations.remove(op)
        removed += 1
    return removed
