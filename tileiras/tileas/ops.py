"""The ops the nv_tileas level adds to cuda_tile (declared like cuda_tile's, never in bytecode)."""

from __future__ import annotations

from ..dialects.registry import AttrDef, OpDef, OperandDef, find, register

CONVERT_LAYOUT = "nv_tileas.convert_layout"

# Opcodes above bytecode's range: these ops exist only between layout assignment and LLVM.
_OPCODE_BASE = 0x10000


def declare() -> None:
    """Register the level's ops (idempotent)."""
    if find(CONVERT_LAYOUT) is None:
        register(OpDef(
            CONVERT_LAYOUT, _OPCODE_BASE, "13.1",
            operands=(OperandDef("source", constraint="tile"),),
            results=(OperandDef("result", constraint="tile"),),
            # the layouts are the source's and the result's (printed on their types); `rematerialize`: the
            # source is the same value in every element (a splat), so the result is rebuilt from it, not moved
            attributes=(AttrDef("rematerialize", "unit", optional=True),),
            traits=frozenset({"Pure"}),
            format="$source attr-dict `:` custom<CudaTileType>(type($source)) `->` custom<CudaTileType>(type($result))"))
