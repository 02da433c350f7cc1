"""The shared memory a `cuda_tile.alloca` takes: tile-block-local memory, one static shared-memory
buffer per alloca (the lowering's ops_memory), counted by the limits (limits.py) and by the
shared-memory plan (tileas/shared_plan.py) beside the dynamic buffers."""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import PointerType, ScalarType, TileType

MIN_ALIGN = 16


def alloca_size(op: Operation) -> tuple[int, int]:
    """(bytes, alignment) of an alloca's buffer: `num_elem` elements of its pointee (8 bytes for a
    pointee that is not a scalar), aligned to its `alignment` and at least 16 bytes."""
    count = max(0, int(op.attributes.get("num_elem", 0) or 0))
    rtype = op.results[0].type if op.results else None
    pointee = rtype.element.pointee if isinstance(rtype, TileType) and isinstance(rtype.element, PointerType) else None
    align = max(int(op.attributes.get("alignment", MIN_ALIGN) or MIN_ALIGN), MIN_ALIGN)
    return count * (max(1, pointee.bitwidth // 8) if isinstance(pointee, ScalarType) else 8), align


def alloca_bytes(op: Operation) -> int:
    """The static shared memory an alloca takes: its bytes (at least one) rounded up to its alignment."""
    size, align = alloca_size(op)
    return -(-max(size, 1) // align) * align
