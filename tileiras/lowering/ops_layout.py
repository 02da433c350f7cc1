"""Lowering of the nv_tileas layout ops: `convert_layout` moves a tile into its result's layout."""

from __future__ import annotations

from ..ir.core import Operation
from ..tileas.move_forms import conversion_form
from ..tileas.ops import CONVERT_LAYOUT
from .kernel import KernelLowering


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
