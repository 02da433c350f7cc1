"""Pass `materialize-layouts`: write a kernel's layout assignment into its IR.

Every tile value's type gets its layout (`TileType.encoding`, set through `Value.layout`); every (op, operand, layout) conversion that
`tileas.assign_layouts` recorded becomes an `nv_tileas.convert_layout` op just before the op,
whose result the op then reads. A splat source is marked `rematerialize` (rebuilt from its one
value in the new layout instead of moved through shared memory). Running the pass twice changes
nothing: an op whose operand was already replaced has no conversion left to make.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.core import Operation, Value
from ..ir.types import TileType
from .ops import CONVERT_LAYOUT, declare

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment


def materialize_layouts(entry: Operation, assignment: "LayoutAssignment") -> int:
    """Annotate `entry`'s tile values and insert its conversions; the number inserted."""
    declare()
    for value in _tile_values(entry):
        if value.layout is None:
            value.layout = assignment.layout(value)
    inserted = 0
    for op, value, layout in assignment.conversions:
        for index, operand in enumerate(op.operands):
            if operand is not value:
                continue
            # the layout it converts to is its result's, on the result's type in the printed IR
            attributes: dict[str, object] = {"rematerialize": True} if assignment.is_splat(value) else {}
            convert = op.insert_before(Operation(CONVERT_LAYOUT, [value], [value.type], attributes,
                                                 location=op.location))
            convert.results[0].layout = layout
            convert.results[0].facts = value.facts   # the same values
            op.set_operand(index, convert.results[0])
            inserted += 1
    return inserted


def _tile_values(entry: Operation):
    for op in entry.walk():
        for region in op.regions:
            for block in region.blocks:
                yield from (a for a in block.arguments if isinstance(a.type, TileType))
        yield from (r for r in op.results if isinstance(r.type, TileType))


def tile_values(entry: Operation) -> list[Value]:
    """Every tile value defined in `entry` (block arguments and op results), in program order."""
    return list(_tile_values(entry))
