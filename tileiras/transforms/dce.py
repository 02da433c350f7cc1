"""Pass `dce`: effect-free ops whose results nobody uses are erased (innermost and last first)."""

from __future__ import annotations

from ..ir.core import Operation
from .rewrite import blocks_of, erase, is_movable, unused


def dce(entry: Operation) -> bool:
    """Erase unused effect-free ops of `entry`; True if anything changed."""
    changed = False
    for block in reversed(list(blocks_of(entry))):
        for op in reversed(list(block.operations)):
            if is_movable(op) and unused(op):
                erase(op)
                changed = True
    return changed
