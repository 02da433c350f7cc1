"""Loads left to their mma: in the last-resort lowering, a load staged for one mma.sync that does not
fit whole beside the buffers alive with it is not copied where it stands; its mma copies it a K slice
at a time, through a ring of two slices (the next slice's cp.async in flight while this one is read).

`defers` decides, in plan-shared-memory beside the buffers it placed (`SharedPlan.deferred`, which
lowering/async_copy.load_to_shared reads); `slice_tile`, `ring_stages` and `ring_axis` size the ring
both place.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record, replace
from ..ir.types import TileType
from ..layout.shared_matrix import matrix_dims, matrix_shape
from ..tileaa.views import View
from .operands import SharedTile, Staging


@record
class DeferredLoad:
    """A load whose copies its one mma.sync issues, K slice by K slice."""
    op: Operation
    view: View


def defers(k: Staging, op: Operation, view: View, tile: TileType, swizzled: bool,
           lifetime: tuple[int, int]) -> bool:
    """Whether load `op` is left to its one mma.sync (`sliced_reader`), which copies it a K slice at a
    time: only in the last-resort lowering (`k.defer_loads`), where the tile staged whole would not
    fit beside the buffers alive with it (`lifetime`)."""
    return k.defer_loads and not swizzled and _overflows(k, tile, lifetime) and sliced_reader(k, op, view) is not None


def _overflows(k: Staging, tile: TileType, lifetime: tuple[int, int]) -> bool:
    """Whether `tile`, staged whole (unpadded), would not fit below the target's limit beside the
    buffers alive during `lifetime`."""
    nbytes = replace(matrix_shape(tile, k.pad_buffers), padded=False).nbytes
    return k.buffers.first_fit(nbytes, 128, *lifetime) + nbytes > k.caps.smem_per_block - k.static_smem_bytes


def sliced_reader(k: Staging, op: Operation, view: View) -> Optional[Operation]:
    """The one mma.sync (an A or B operand; block-scaled too, whose scales stay whole) that reads the
    tile `op` loads, through unit reshapes, a transpose or a tf32 rounding, in the same block with
    nothing between them writing memory: it may issue the load's copies itself, later and in slices.
    None where any of that fails (or the stored tile is not one matrix: a batch of several rows each)."""
    from ..schedule.pipeline import _WRITES
    from ..tileaa.mma_operands import passes_shared

    dims = matrix_dims(op.results[0].type.shape)  # type: ignore[attr-defined]
    if k.assignment is None or view.sparse_dim is not None or dims is None or min(dims[:2]) != 1:
        return None
    value = op.results[0]
    while len(value.uses) == 1 and passes_shared(value.uses[0]):
        value = value.uses[0].results[0]
    if len(value.uses) != 1:
        return None
    mma = value.uses[0]
    if mma.name not in ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled") \
            or value not in (mma.operand("lhs"), mma.operand("rhs")) \
            or mma not in k.assignment.mma_shapes or k.assignment.is_wgmma(mma) or k.assignment.is_tcgen05(mma):
        return None
    block = getattr(op, "parent", None)
    if getattr(mma, "parent", None) is not block or block is None:
        return None
    ops = block.operations
    between = ops[ops.index(op) + 1:ops.index(mma)]
    if any(inner.name in _WRITES for x in between for inner in x.walk()):
        return None
    return mma


def is_deferred(value: object) -> bool:
    """Whether operand `value` is a load left to its mma (not copied yet)."""
    return isinstance(value, SharedTile) and value.deferred is not None


def slice_tile(tile: TileType, kaxis: int, width: int) -> TileType:
    """The shape of one K slice (`width` stored rows, kaxis 0, or columns, 1) of a deferred `tile` as
    stored."""
    batch, rows, cols = matrix_dims(tile.shape)  # type: ignore[misc]
    rows *= batch     # each batch entry is one row (`sliced_reader`)
    return TileType((width, cols) if kaxis == 0 else (rows, width), tile.element)


def ring_stages(chunks: int) -> int:
    """The slots of a deferred load's ring of K slices: two (slice c + 1 lands while c is read)."""
    return min(2, chunks)


def ring_axis(value: SharedTile, operand: str) -> int:
    """K's axis in the stored tile of deferred operand `value` (A: "a", B: "b"): 0 (stored rows)
    where it is read transposed from its storage (A stored (K, M), B stored (K, N)), else 1 (columns)."""
    return 0 if (operand == "a") == value.transposed else 1
