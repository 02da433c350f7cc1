"""Lowering of the nv_tileas layout ops: `convert_layout` moves a tile into its result's layout."""

from __future__ import annotations

from ..ir.core import Operation
from ..tileas.ops import CONVERT_LAYOUT
from .kernel import KernelLowering


def _convert_layout(k: KernelLowering, op: Operation) -> None:
    tile = k.tile(op.operands[0])
    layout = k.layout_of(op.results[0])
    # a splat is rebuilt from its one value; anything else moves through shared memory
    k.set(op.results[0], k.splat(tile.type, tile.slots[0], layout) if op.attributes.get("rematerialize")
          else k.convert(tile, layout))


LOWERINGS = {CONVERT_LAYOUT: _convert_layout}
