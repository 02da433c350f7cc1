"""Vector accesses to views: how many consecutive elements one load or store may move.

A thread's layout holds runs of consecutive elements (`run` of each layout).
One access may cover `vec` of them (up to 16 bytes) when the facts of the
tensor view (facts.py) prove that every such access is aligned to its size
and lies wholly inside or wholly outside the tensor: unit innermost stride,
aligned base and outer strides, tile starts and innermost extent divisible by
`vec`. The same rule decides the size of cp.async copies (async_copy.py).

Gathers and scatters through a tile of pointers (`load_ptr_tko`, `store_ptr_tko`) are widened the
same way where the pointers' per-dimension facts prove contiguous, aligned runs (and a mask
constant over each run): TileGym's row kernels build such tiles as a base plus iota offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation, Value
from ..tileaa.facts import axes
from .values import PartitionViewVal

if TYPE_CHECKING:
    from ..layout.encodings import BlockedLayout


def vector_elements(op: Operation, view: PartitionViewVal, tile_shape: tuple[int, ...], nbytes: int,
                    limit: int, sizes: tuple[int, ...] = (16, 8, 4)) -> int:
    """The most elements (a run of at most `limit`, of a size in `sizes` bytes) one access to the
    view may move; 1 when no vector access is legal."""
    if view.sparse_dim is not None or not tile_shape or not view.dim_map:
        return 1
    tensor = view.tensor
    if not tensor.stride_div or not tensor.shape_div:
        return 1
    inner = view.dim_map[-1]
    if tensor.type.strides[inner] != 1:
        return 1
    inbounds = tuple(op.attributes.get("inbounds", ()) or ())
    for size in sizes:
        vec = size // nbytes
        if vec < 2 or size % nbytes or limit % vec or tile_shape[-1] % vec or tensor.base_align % size:
            continue
        if view.traversal_strides and view.traversal_strides[-1] % vec:
            continue
        if any(tensor.stride_div[d] % vec for d in range(len(tensor.stride_div)) if d != inner):
            continue
        if tensor.shape_div[inner] % vec and not (inner < len(inbounds) and inbounds[inner]):
            continue
        return vec
    return 1


def pointer_vector_elements(pointers: Value, mask: Optional[Value], tile_shape: tuple[int, ...], nbytes: int,
                            limit: int, sizes: tuple[int, ...] = (16, 8, 4)) -> int:
    """The most elements (a run of at most `limit`, of a size in `sizes` bytes) one access through
    the tile of pointers `pointers` may move, under `mask` when given; 1 when no vector access is legal.

    Legal where the facts (tileaa/facts.py) prove that along the innermost dimension the pointers
    step by one element over aligned groups of `vec`, each group's first aligned to the access size,
    and the mask is constant over each group (so one predicate guards the whole access)."""
    if not tile_shape:
        return 1
    contiguity, run_divisor, _ = axes(pointers)
    constancy = axes(mask)[2] if mask is not None else tile_shape
    for size in sizes:
        vec = size // nbytes
        if vec < 2 or size % nbytes or limit % vec or tile_shape[-1] % vec:
            continue
        if contiguity[-1] % vec or run_divisor[-1] % size or constancy[-1] % vec:
            continue
        return vec
    return 1


def restaged_scatter(op: Operation, threads: int) -> Optional[BlockedLayout]:
    """The blocked layout of 16-byte runs a weak scatter (`store_ptr_tko`) of mma fragments stores
    from, once restaged through the freed shared buffers as view epilogues are (epilogue.py), where
    the pointer facts prove wider accesses than a fragment's pair of elements; None otherwise. The
    pointers and mask are then computed in that layout, as NVIDIA's epilogue scatters are."""
    from ..ir.types import ScalarType, TileType
    from ..layout.encodings import BlockedLayout

    if op.name != "cuda_tile.store_ptr_tko" or str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak":
        return None
    value = op.operand("value")
    t = value.type if value is not None else None
    if not isinstance(t, TileType) or not isinstance(t.element, ScalarType) or t.element.bitwidth < 8:
        return None
    nbytes = t.element.bitwidth // 8
    layout = BlockedLayout(threads, 16 // nbytes)
    run = layout.run(t.num_elements)
    if run <= 2 or not layout.owns_all(t.num_elements) or t.shape[-1] % run:
        return None
    vec = pointer_vector_elements(op.operands[0], op.operand("mask"), tuple(t.shape), nbytes, run)
    return layout if vec > 2 else None
