"""The vector width of a kernel's blocked tiles: how many consecutive elements a thread holds in one
run, so that its global accesses are 16 bytes wide (`BlockedLayout.vec`, assign_layouts)."""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import ScalarType, TileType
from ..tileaa.facts import axes


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
