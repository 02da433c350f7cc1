"""nv_tileas IR read from text: the dumps `--print-ir-after-all` and `tileir opt` print, whose tile types
carry their layouts (`tile<128x128xf32, #mma>`), parsed back with each value's layout and the level's ops
(`nv_tileas.convert_layout`)."""

from __future__ import annotations

from ..ir.core import Operation
from ..layout.encoding_text import read_layout
from ..text.parser import parse_module
from .ops import declare


def parse_tileas(text: str, filename: str = "<text>") -> Operation:
    """The module `text` prints, each tile value in the layout its type names (ParseError on bad input)."""
    declare()
    return parse_module(text, filename, layouts=read_layout)


def verify_tileas(module: Operation) -> None:
    """cuda_tile's rules on the types without their layouts (dialects/verifier.py), then the level's rules
    on the layouts the types state (a conversion changes only the layout, the values that must share a layout
    do: tileas/verify.verify_types); CompileError naming the first broken."""
    from ..dialects.verifier import verify_module
    from .verify import verify_types

    verify_module(module)
    for op in module.regions[0].blocks[0].operations if module.regions and module.regions[0].blocks else []:
        if op.name == "cuda_tile.entry":
            verify_types(op, internal=False)
