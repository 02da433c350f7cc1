"""Pass `unroll-windows`: a loop of a few constant iterations whose body takes windows of a tile made
before it at the loop's index (a sub-tiled epilogue's `for j in range(2): store(extract(acc, (0, j)))`)
is unrolled, so that each window's position is a constant.

With a constant position the layout assignment keeps an mma fragment's window in registers
(tileas/assign_layouts.extracted_columns); at a loop index every window would go through shared memory,
the whole tile written there (128 KB for a 128 x 256 f32 accumulator: more than sm_120 has, more than
sm_90 and sm_100 have beside the K loop's stages). Only flat bodies are unrolled (no nested region, no
early exit), of at most `MAX_TRIPS` iterations.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation, Value
from .constants import make_splat, splat_int
from .rewrite import erase_tree

MAX_TRIPS = 8
WINDOWS = ("cuda_tile.extract",)


def unroll_windows(entry: Operation) -> bool:
    """Unroll every such loop of `entry`; whether any was."""
    changed = False
    for op in [o for o in entry.walk() if o.name == "cuda_tile.for"]:
        trips = _trips(op)
        if trips is not None and _flat(op) and _windows_at_index(op):
            _unroll(op, trips)
            changed = True
    return changed


def _trips(op: Operation) -> Optional[int]:
    """The loop's constant number of iterations, where it has one of 1 .. MAX_TRIPS."""
    lb, ub, step = (splat_int(op.operand(n)) for n in ("lowerBound", "upperBound", "step"))  # type: ignore[arg-type]
    if lb is None or ub is None or not step or step < 0 or op.attributes.get("unsignedCmp", False):
        return None
    trips = max(0, -(-(ub - lb) // step))
    return trips if 1 <= trips <= MAX_TRIPS else None


def _flat(op: Operation) -> bool:
    """A body of region-free ops ended by its `continue`."""
    ops = op.regions[0].blocks[0].operations
    return bool(ops) and ops[-1].name == "cuda_tile.continue" and not any(inner.regions for inner in ops[:-1])


def _windows_at_index(op: Operation) -> bool:
    """Whether the body takes a window of a tile made before the loop at a position computed from the
    loop's index."""
    body = op.regions[0].blocks[0]
    indexed: set[Value] = {body.arguments[0]}
    for inner in body.operations:
        if any(v in indexed for v in inner.operands):
            if inner.name in WINDOWS and inner.operands[0] not in indexed and inner.operands[0].owner not in body.operations:
                return True
            indexed.update(inner.results)
    return False


def _unroll(op: Operation, trips: int) -> None:
    """The loop's body, `trips` times before it, each with its index a constant and its carried values
    the previous copy's; the loop's results become the last copy's."""
    body = op.regions[0].blocks[0]
    index, *carried = body.arguments
    start, step = splat_int(op.operand("lowerBound")), splat_int(op.operand("step"))  # type: ignore[arg-type]
    values = list(op.operand_group("initValues"))
    for t in range(trips):
        mapping: dict[Value, Value] = {index: make_splat(index.type, start + t * step, op), **dict(zip(carried, values))}  # type: ignore[arg-type, operator]
        for inner in body.operations[:-1]:
            op.insert_before(inner.clone(mapping))
        values = [mapping.get(v, v) for v in body.operations[-1].operands]
    for result, value in zip(op.results, values):
        result.replace_all_uses_with(value)
    erase_tree(op)
