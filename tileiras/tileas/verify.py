"""The nv_tileas verifier: what the LLVM lowering may rely on after `materialize-layouts`.

* every tile value has a layout that can hold it;
* every op reads each operand in the layout it was assigned to read it in (so the lowering
  never converts on its own: a conversion is an op);
* a `convert_layout` keeps its type, states its result's layout, and changes the layout (or
  rebuilds a splat);
* the values cuda_tile's rules give one type or one shape have one layout (a tile's type carries its layout).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dialects.registry import find
from ..dialects.verify_rules import SHAPES_MATCH, TYPES_MATCH, named_types
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
        broken = _types_error(op)
        if broken:
            _fail(op, broken)
        wanted = assignment.operand_layouts(op)
        for index, layout in enumerate(wanted or ()):
            operand = op.operands[index]
            if layout is not None and _distributed(operand) and operand.layout != layout:
                _fail(op, f"reads operand {index} in {layout.describe()} but it is in {operand.layout.describe()} "
                          "(a conversion is missing)")


def verify_types(entry: Operation, internal: bool = True) -> None:
    """The rules the types state alone, without the layout assignment (what nv_tileas text read back is held
    to, tileas/text.py: `internal` False, the text's author broke them, not the compiler): each conversion
    changes only the layout, and the values that must share a layout do."""
    for op in entry.walk():
        broken = _types_error(op)
        if broken:
            _fail(op, broken, internal)


def _types_error(op: Operation) -> str:
    return (_convert_error(op) if op.name == CONVERT_LAYOUT else "") or _layout_error(op)


def _convert_error(op: Operation) -> str:
    source, result = op.operands[0], op.results[0]
    if not isinstance(source.type, TileType) or not isinstance(result.type, TileType) or \
            source.type.with_encoding(None) != result.type.with_encoding(None):   # only the layout changes
        return f"changes the type {source.type} to {result.type}"
    if source.layout == result.layout and not op.attributes.get("rematerialize"):
        return f"converts {_described(result.layout)} to itself"
    return ""


def _layout_error(op: Operation) -> str:
    """The values cuda_tile's rules give one type or one shape have one layout too (a tile's type carries its
    layout at this level): an elementwise op's operands and result, a conversion of element type's source and
    result, an mma's accumulator and result, and each value a loop or an `if` carries (initial value, block
    argument, result, what the body yields)."""
    for types in _one_layout(op):
        tiles = [t for t in types if isinstance(t, TileType) and t.num_elements > 1]
        if any(t.encoding != tiles[0].encoding for t in tiles):
            return "has values that must share a layout in different ones: " + ", ".join(
                f"{t} in {_described(t.encoding)}" for t in tiles)
    return ""


def _described(layout: object) -> str:
    return layout.describe() if layout is not None else "no layout"  # type: ignore[attr-defined]


def _one_layout(op: Operation) -> list[list[object]]:
    """The types of `op`'s values that must share a layout, in groups: those cuda_tile gives one type
    (TYPES_MATCH) or one shape (SHAPES_MATCH), and the carried values."""
    named = _NAMED.get(op.name)
    if named is None:
        shaped = [SHAPES_MATCH[op.name]] if op.name in SHAPES_MATCH else []
        named = _NAMED[op.name] = (*TYPES_MATCH.get(op.name, ()), *shaped)
    defn = find(op.name) if named else None
    groups = [[t for n in group for t in named_types(op, defn, n)] for group in named] if defn is not None else []
    if op.name not in _CARRIES or not op.results:
        return groups
    inits = op.operand_group("initValues") if op.name != "cuda_tile.if" else []
    carried = [[r.type] for r in op.results]
    for i, init in enumerate(inits):
        carried[i].append(init.type)
    for region in op.regions:
        for block in region.blocks:
            args = block.arguments[1:] if op.name == "cuda_tile.for" else block.arguments
            last = block.operations[-1] if block.operations else None
            ends = list(last.operands) if last is not None and last.name in _ENDS else []
            for i, group in enumerate(carried):
                group += [v.type for v in (args[i:i + 1] if op.name != "cuda_tile.if" else []) + ends[i:i + 1]]
    return groups + carried


_NAMED: dict[str, tuple[tuple[str, ...], ...]] = {}   # op name -> its groups of TYPES_MATCH and SHAPES_MATCH
_CARRIES = ("cuda_tile.for", "cuda_tile.loop", "cuda_tile.if")
_ENDS = ("cuda_tile.yield", "cuda_tile.continue")


def _distributed(value: Value) -> bool:
    return isinstance(value.type, TileType) and value.type.num_elements > 1


def _where(value: Value) -> Operation:
    owner = value.owner
    return owner if isinstance(owner, Operation) else owner.parent.parent


def _fail(op: Operation, message: str, internal: bool = True) -> None:
    from ..ir.diagnostic_location import location_prefix

    loc = location_prefix(getattr(op, "location", None))
    raise CompileError(f"{loc}error: {'internal: ' if internal else ''}nv_tileas verifier: '{op.name}' {message}")
