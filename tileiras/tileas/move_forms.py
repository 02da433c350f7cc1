"""How ops that move a tile's elements between threads move them, decided from the layouts the
tile level assigned: in registers, or through a shared-memory scratch, whose bytes the pass
`plan-shared-memory` sizes (shared_sizes.py) before the lowering emits the form chosen here.

* a broadcast (`broadcast_form`): one element splatted, mma rows to their fragments, computed in
  place, rows already in their warps, else exchanged through shared memory;
* a layout conversion (`conversion_form`): rebuilt from its one value, fragments already in place,
  else exchanged;
* a reduction across the warps of a row (`across_warps_scratch`): each row's warp partials;
* a reduce or scan whose rows are not in warps (`reduce_scratch`): its operands through scratch,
  a reduce's in slices of its dimension where they do not fit whole (`slices`, `fitting_slices`);
* an mma on the FMA path (`mma_scratch`): both operands, in K slices where they do not fit whole;
* a permute (`permute_scratch`): through conversion scratch, unless it is a staged mma operand;
* an extract (`extract_form`): an mma fragment's whole columns in place, else exchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..ir.core import Operation
from ..ir.types import TileType, storage_bytes
from ..layout.encodings import (MmaLayout, MmaRowLayout, PairAccLayout, RowWarpLayout, rows_replicated,
                                same_fragments)
from .assign_layouts import broadcast_source, column_extract, extracted_columns, row_broadcast
from .operands import SharedTile

if TYPE_CHECKING:
    from .operands import Staging


def broadcast_form(src: TileType, result: TileType, src_layout: object, layout: object, vec: int) -> str:
    """How a broadcast moves its elements: "splat" (one element), "fragment-rows" (mma rows to their
    fragments), "in-place" (the source computed where each result slot takes it), "row-warps" (rows
    already in their warps), else "exchange": through shared memory, the one form with a buffer
    (tileas/shared_sizes.py sizes it)."""
    if src.num_elements == 1:
        return "splat"
    if isinstance(src_layout, MmaRowLayout) and isinstance(layout, MmaLayout) \
            and (src_layout.parent.warps == layout.warps or rows_replicated(src_layout.parent, layout)):
        return "fragment-rows"
    if src_layout == broadcast_source(src, result, layout):
        return "in-place"
    if row_broadcast(src, result, src_layout, vec) == layout:
        return "row-warps"
    return "exchange"


def extract_form(op: Operation, src_layout: object, layout: object) -> str:
    """How an extract moves its elements: "in-place" (an mma fragment's columns, each thread keeping its
    slots of them: the window's layout assign_layouts.extracted_columns chose); "window" (columns of an
    mma fragment tile whose warps split the columns, the window made of whole warps' columns: only
    those warps write their elements, at their place in the window, through a scratch of the window's
    size); else "exchange" (the whole source through scratch)."""
    if layout == extracted_columns(op, src_layout) is not None:
        return "in-place"
    window = column_extract(op)
    if window is not None and isinstance(src_layout, MmaLayout) and not isinstance(src_layout, PairAccLayout):
        per_warp = src_layout.repeats[2] * 8      # a warp's columns: contiguous, `per_warp` of them
        if window[0] % per_warp == 0 and window[1] % per_warp == 0:
            return "window"
    return "exchange"


def conversion_form(op: Operation, src_layout: object, layout: object) -> str:
    """How `op` converts: "splat" (rebuilt from its one value), "in-place" (fragments already in
    place: an mma.sync and a tcgen05 accumulator layout that place the warps alike), else
    "exchange": through shared memory, the one form with a buffer (tileas/shared_sizes.py)."""
    if op.attributes.get("rematerialize"):
        return "splat"
    return "in-place" if same_fragments(src_layout, layout) else "exchange"


def across_warps_scratch(layout: RowWarpLayout, types: list[TileType]) -> tuple[list[int], int]:
    """(each source's byte offset, bytes in all) of the scratch `_across_warps` folds the partials
    of a reduce in (lowering/warp_reduce.py): per source, every row group's `wpr` partials of each slot group, 8-byte aligned
    (tileas/shared_sizes.py sizes it before emission)."""
    groups = layout.slots(types[0].num_elements) // layout.per_lane
    per_src = layout.groups * groups * layout.wpr
    bases, offset = [], 0
    for t in types:
        offset = -(-offset // 8) * 8
        bases.append(offset)
        offset += per_src * storage_bytes(t.element)
    return bases, offset


def scratch_offsets(types: list[TileType], chunks: int = 1) -> tuple[list[int], int]:
    """(each tile's byte offset, bytes in all) of the scratch lowering/ops_reduce's `to_scratch` (`chunks` 1) and
    `_slice_to_scratch` fill: each tile's elements (a `chunks`-th of them), 8-byte aligned, end to end."""
    bases, offset = [], 0
    for t in types:
        offset = -(-offset // 8) * 8
        bases.append(offset)
        offset += t.num_elements // chunks * storage_bytes(t.element)
    return bases, offset


def slices(types: list[TileType], n: int, first_fit: Callable[[int], int], limit: int) -> int:
    """The fewest slices (a power of two dividing `n`, the sliced dimension) whose scratch of `types`
    (`scratch_offsets`), placed at `first_fit(its bytes)` beside the buffers alive at the op (16-byte
    aligned, over the op's lifetime), ends below `limit`. Decided by the pass `plan-shared-memory`
    (shared_stages.py, shared_operands.py: beside its planned buffers) for the lowering (`SharedPlan.slices`)."""
    chunks = 1
    while True:
        nbytes = scratch_offsets(types, chunks)[1]
        if first_fit(nbytes) + nbytes <= limit or n % (2 * chunks):
            return chunks
        chunks *= 2


def reduce_scratch(op: Operation, sliced: Callable[[int], int]) -> tuple[int, int]:
    """(slices of the reduced dimension, bytes) of the scratch ("reduction") a reduce or scan whose
    rows are not in warps folds through: a scan's operands whole, a reduce's in `sliced(n)` slices
    of its dimension of `n` (`slices`, given the buffers alive at the op), decided by the pass
    `plan-shared-memory` (shared_stages.py) for ops_reduce._reduce_like."""
    types = [v.type for v in op.operands]
    assert all(isinstance(t, TileType) for t in types)
    chunks = 1 if op.name == "cuda_tile.scan" else sliced(types[0].shape[int(op.attributes["dim"])])  # type: ignore[union-attr]
    return chunks, scratch_offsets(types, chunks)[1]  # type: ignore[arg-type]


def fitting_slices(k: "Staging", types: list[TileType], n: int, limit: "int | None" = None) -> int:
    """`slices` of the scratch of `types` that fit below `limit` (the target's shared memory) beside
    the buffers alive at the op `k` is at."""
    start, end = k.op_lifetime()
    return slices(types, n, lambda nbytes: k.buffers.first_fit(nbytes, 16, start, end),
                  k.caps.smem_per_block - k.static_smem_bytes if limit is None else limit)


def mma_scratch(k: "Staging", op: Operation, held: tuple[str, ...] = ("lhs", "rhs")) -> tuple[int, int]:
    """(K slices, bytes) of the scratch ("reduction") an mma on the FMA path reads the operands it
    holds in registers from (`held`: "lhs", "rhs"; a staged load's tile is read where it lies): those
    in K slices where they would not fit whole beside the buffers alive at the op (each slice
    accumulates into the running sums: the same order of FMAs), a block-scaled one's A, B and scales
    whole. (0 bytes: nothing goes through scratch.)"""
    scaled = op.name == "cuda_tile.mmaf_scaled"
    names = held + ("lhs_scale", "rhs_scale") if scaled else held
    types = [op.operand(n).type for n in names]
    kdim = op.operand("lhs").type.shape[-1]  # type: ignore[union-attr]
    chunks = 1 if scaled or not held else fitting_slices(k, types[:len(held)], kdim)  # type: ignore[arg-type]
    return chunks, scratch_offsets(types, chunks)[1]  # type: ignore[arg-type]


def permute_scratch(op: Operation, assignment: object, src: object) -> "str | None":
    """The role of the conversion scratch a permute moves its operand through (`src`: how it is held,
    operands.py): none where it is a staged mma operand (read the other way round);
    "operand-conversion" where it is an mma operand whose load was not staged after all (its copies
    not legal: a fallback of the lowering); else "conversion"."""
    if isinstance(src, SharedTile):
        return None
    shared = assignment is not None and assignment.is_shared_operand(op.operands[0])  # type: ignore[attr-defined]
    return "operand-conversion" if shared else "conversion"
