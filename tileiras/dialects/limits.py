"""What one kernel may cost to compile: checked on the verified module, before lowering.

The verifier accepts tiles of up to 2^24 elements (the dialect's rule), but
the code for a tile grows with its size: a tile of 2^20 elements makes
neither our compiler nor NVIDIA's finish in reasonable time or memory
(measured: NVIDIA's tileiras 13.5 runs past 300 s at 9.5 GB on one addf of
2^20 f32 elements, and past 23 GB at 2^24). So `tileiras` refuses, within
the time it takes to read the module, any kernel over one of these limits,
with a message naming the value and the limit, and compiles everything
under them in bounded time and memory. `tileirdisasm` and `tileir asm` are
not limited: they cost time linear in the input.

The limits are one table (README "Limits" lists them); raise a row when
the lowering makes that size cheaper.
"""

from __future__ import annotations

from ..driver.errors import CompileError
from ..ir import types as T
from ..ir.core import Operation

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Iterator

# name -> (limit, why). Measured on 2 cores, one f32 addf kernel on sm_90 (ours / NVIDIA's):
# 2^14 elements 2.5 s / 0.6 s, 2^15 7 s / 16 s, 2^16 22 s / 40-120 s, 2^20 refused / > 300 s.
LIMITS: dict[str, tuple[int, str]] = {
    "elements per tile value": (1 << 16, "the largest tile NVIDIA's tileiras compiles in minutes"),
    "bytes per tile value": (256 << 10, "the register file of one SM (64K 32-bit registers)"),
    "tile elements computed per kernel": (1 << 20, "the straight-line code one kernel may unfold to"),
    "bytes of alloca memory per kernel": (227 << 10, "the most shared memory one CTA can have (sm_90, sm_100)"),
}


def limit(name: str) -> int:
    return LIMITS[name][0]


def _value_bytes(t: T.TileType) -> int:
    element = t.element
    bits = element.bitwidth if isinstance(element, T.ScalarType) else 64  # pointers are 64-bit
    return (t.num_elements * bits + 7) // 8


def _alloca_bytes(op: Operation) -> int:
    count = max(0, int(op.attributes.get("num_elem", 0) or 0))
    rtype = op.results[0].type if op.results else None
    pointee = rtype.element.pointee if isinstance(rtype, T.TileType) and isinstance(  # type: ignore[attr-defined]
        rtype.element, T.PointerType) else None
    size = max(1, pointee.bitwidth // 8) if isinstance(pointee, T.ScalarType) else 8
    return count * size


def _tile_values(op: Operation) -> Iterator[tuple[T.TileType, str]]:
    """Every tile-typed value `op` defines: its results and its regions' block arguments."""
    for result in op.results:
        if isinstance(result.type, T.TileType):
            yield result.type, "result"
    for region in op.regions:
        for block in region.blocks:
            for arg in block.arguments:
                if isinstance(arg.type, T.TileType):
                    yield arg.type, "region argument"


def _over(op: Operation, what: str, name: str) -> CompileError:
    from .verifier import diagnostic

    cap, why = LIMITS[name]
    return CompileError(diagnostic(op, f"{what}, over the compile limit of {cap} {name} ({why}); use smaller tiles"))


def check_kernel(entry: Operation) -> None:
    """Raise CompileError when `entry` (a cuda_tile.entry) is over one of LIMITS."""
    computed = 0
    alloca = 0
    per_value, per_bytes = limit("elements per tile value"), limit("bytes per tile value")
    for op in entry.walk():
        for tile, role in _tile_values(op):
            n = tile.num_elements
            if n > per_value:
                raise _over(op, f"{role} '{tile}' has {n} elements", "elements per tile value")
            size = _value_bytes(tile)
            if size > per_bytes:
                raise _over(op, f"{role} '{tile}' takes {size} bytes", "bytes per tile value")
            computed += n
        if op.name == "cuda_tile.alloca":
            alloca += _alloca_bytes(op)
    name = entry.attributes.get("sym_name", "?")
    if computed > limit("tile elements computed per kernel"):
        raise _over(entry, f"kernel '{name}' computes {computed} tile elements", "tile elements computed per kernel")
    if alloca > limit("bytes of alloca memory per kernel"):
        raise _over(entry, f"kernel '{name}' allocates {alloca} bytes", "bytes of alloca memory per kernel")


def check_module(module: Operation) -> None:
    """Raise CompileError when any kernel of the verified `module` is over one of LIMITS."""
    body = module.regions[0].blocks[0].operations if module.regions and module.regions[0].blocks else []
    for op in body:
        if op.name == "cuda_tile.entry":
            check_kernel(op)
