"""Operand groups of an op, by name, as slices of its flat operand list."""

from __future__ import annotations

from typing import Any

from ..ir.core import Operation

_SLICES: dict[Operation, dict[str, slice]] = {}


def group_slices(op: Operation) -> dict[str, slice]:
    found = _SLICES.get(op)
    if found is None:
        defn = op.definition
        sizes = op.segment_sizes or tuple(1 for _ in defn.operands)
        found, start = {}, 0
        for g, size in zip(defn.operands, sizes):
            found[g.name] = slice(start, start + size)
            start += size
        _SLICES[op] = found
    return found


def group(op: Operation, args: list, name: str) -> list[Any]:
    """The run-time values of operand group `name` (empty for an absent optional)."""
    return args[group_slices(op)[name]]
