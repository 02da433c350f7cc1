"""Lowering of the nv_tileas layout ops: `convert_layout` moves a tile into its result's layout."""

from __future__ import annotations

from ..ir.core import Operation
from ..tileas.ops import CONVERT_LAYOUT
from .kernel import KernelLowering


def conversion_form(op: Operation, src_layout: object, layout: object) -> str:
    """How `op` converts: "splat" (rebuilt from its one value), "in-place" (fragments already in
    place: an mma.sync and a tcgen05 accumulator layout that place the warps alike), else
    "exchange": through shared memory, the one form with a buffer (tileas/shared_sizes.py)."""
    from ..layout.encodings import same_fragments

    if op.attributes.get("rematerialize"):
        return "splat"
    return "in-place" if same_fragments(src_layout, layout) else "exchange"


def _convert_layout(k: KernelLowering, op: Operation) -> None:
    from .values import TileRegs

    tile = k.tile(op.operands[0])
    layout = k.layout_of(op.results[0])
    form = conversion_form(op, tile.layout, layout)
    if form == "splat":
        k.set(op.results[0], k.splat(tile.type, tile.slots[0], layout))
    elif form == "in-place":
        k.set(op.results[0], TileRegs(tile.type, list(tile.slots), layout))
    else:
        k.set(op.results[0], k.convert(tile, layout))


LOWERINGS = {CONVERT_LAYOUT: _convert_layout}
