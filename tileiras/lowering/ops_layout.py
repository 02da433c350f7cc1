"""Lowering of the nv_tileas layout ops: `convert_layout` moves a tile into its result's layout."""

from __future__ import annotations

from ..ir.core import Operation
from ..tileas.ops import CONVERT_LAYOUT
from .kernel import KernelLowering


def _convert_layout(k: KernelLowering, op: Operation) -> None:
    tile = k.tile(op.operands[0])
    layout = k.layout_of(op.results[0])
    # a splat is rebuilt from its one value; fragments already in place are kept (an mma.sync and
    # a tcgen05 accumulator layout that place the warps alike); anything else moves through shared memory
    from .ops_tcgen05 import same_fragments
    from .values import TileRegs

    if op.attributes.get("rematerialize"):
        k.set(op.results[0], k.splat(tile.type, tile.slots[0], layout))
    elif same_fragments(tile.layout, layout):
        k.set(op.results[0], TileRegs(tile.type, list(tile.slots), layout))
    else:
        k.set(op.results[0], k.convert(tile, layout))


LOWERINGS = {CONVERT_LAYOUT: _convert_layout}
