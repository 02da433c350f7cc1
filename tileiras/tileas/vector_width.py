"""The vector width of a kernel's blocked tiles: how many consecutive elements a thread holds in one
run, so that its global accesses are 16 bytes wide (`BlockedLayout.vec`, assign_layouts)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation
from ..ir.types import ScalarType, TileType
from ..tileaa.access_width import pointer_vector_elements
from ..tileaa.facts import axes

if TYPE_CHECKING:
    from ..layout.encodings import BlockedLayout


def vector_width(entry: object) -> int:
    """Elements per thread run of a kernel's blocked tiles: 16 bytes of the narrowest element its
    views (or tiles of contiguous pointers) load or store (1 when it accesses none: nothing to widen)."""
    narrowest = 0
    for op in entry.walk():  # type: ignore[attr-defined]
        if op.name == "cuda_tile.load_view_tko":
            t = op.results[0].type
        elif op.name == "cuda_tile.store_view_tko":
            t = op.operand("tile").type
        elif op.name in ("cuda_tile.load_ptr_tko", "cuda_tile.store_ptr_tko") and _contiguous_pointers(op):
            t = op.operands[1].type if op.name == "cuda_tile.store_ptr_tko" else op.results[0].type
        else:
            continue
        if isinstance(t, TileType) and isinstance(t.element, ScalarType) and t.element.bitwidth >= 8:
            nbytes = t.element.bitwidth // 8
            narrowest = nbytes if not narrowest else min(narrowest, nbytes)
    return 16 // narrowest if narrowest else 1


def _contiguous_pointers(op: Operation) -> bool:
    """A gather or scatter whose tile of pointers the facts show in runs of consecutive elements
    along the innermost dimension (so a layout with runs per thread can widen it)."""
    contiguity = axes(op.operands[0])[0]
    return bool(contiguity) and contiguity[-1] > 1


def restaged_scatter(op: Operation, threads: int) -> Optional[BlockedLayout]:
    """The blocked layout of 16-byte runs a weak scatter (`store_ptr_tko`) of mma fragments stores
    from, once restaged through the freed shared buffers as view epilogues are (lowering/epilogue.py), where
    the pointer facts prove wider accesses than a fragment's pair of elements; None otherwise. The
    pointers and mask are then computed in that layout, as NVIDIA's epilogue scatters are."""
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
