"""The nv_tileas verifier: what the LLVM lowering may rely on after `materialize-layouts`.

* every tile value has a layout that can hold it;
* every op reads each operand in the layout it was assigned to read it in (so the lowering
  never converts on its own: a conversion is an op);
* a `convert_layout` keeps its type, states its result's layout, and changes the layout (or
  rebuilds a splat).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CompileError
from ..ir.core import Operation, Value
from ..ir.types import TileType
from .materialize import tile_values
from .ops import CONVERT_LAYOUT

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment


def verify(entry: Operation, assignment: "LayoutAssignment") -> None:
    """Raise CompileError naming the first broken invariant."""
    for value in tile_values(entry):
        if value.layout is None:
            _fail(_where(value), f"a {value.type} value has no layout")
        value.layout.slots(value.type.num_elements)   # a layout that cannot hold the tile raises here
    for op in entry.walk():
        if op.name == CONVERT_LAYOUT:
            _check_convert(op)
        wanted = assignment.operand_layouts(op)
        for index, layout in enumerate(wanted or ()):
            operand = op.operands[index]
            if layout is not None and _distributed(operand) and operand.layout != layout:
                _fail(op, f"reads operand {index} in {layout.describe()} but it is in {operand.layout.describe()} "
                          "(a conversion is missing)")


def _check_convert(op: Operation) -> None:
    source, result = op.operands[0], op.results[0]
    if source.type != result.type:
        _fail(op, f"changes the type {source.type} to {result.type}")
    if source.layout == result.layout and not op.attributes.get("rematerialize"):
        _fail(op, f"converts {result.layout.describe()} to itself")


def _distributed(value: Value) -> bool:
    return isinstance(value.type, TileType) and value.type.num_elements > 1


def _where(value: Value) -> Operation:
    owner = value.owner
    return owner if isinstance(owner, Operation) else owner.parent.parent


def _fail(op: Operation, message: str) -> None:
    from ..ir.diagnostic_location import location_prefix

    loc = location_prefix(getattr(op, "location", None))
    raise CompileError(f"{loc}error: internal: nv_tileas verifier: '{op.name}' {message}")
