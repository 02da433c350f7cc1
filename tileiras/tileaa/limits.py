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

What costs is not the same for every op: chains of elementwise ops on one
tile stay cheap (16 values of 2^18 elements: 18 s), while every load and
store is code of its own, and LLVM and ptxas slow down faster than
linearly with it (sixteen 2^16-element load/store pairs: 133 s; one 2^18
pair: 15 s). So the elements loaded and stored have their own, tighter
budget (realistic kernels, flash attention included, use an eighth of it).

Tiles the middle level computes in loops over register-sized chunks (tileaa/tile_loops.py, its
RULES: view and pointer loads and stores, element-wise chains, splats, broadcasts of one value or
of rows, iotas, permutes, reshapes (unit axes, axes split or merged), reductions of one tile or
several along one axis or several (nested loops where result and reduced axis both exceed a chunk, a
pass over the tile per axis where one tile is so reduced along two, or the one along the other axis
recomputed in each chunk where one reads the other), forward and reverse scans,
loops that carry such tiles and store them, `cat`: a loop per window of its operands, stores
ordered after a gather of the elements they write) cost the code of one chunk whatever their size,
so they count against none of these limits; the check runs again on what remains in registers once
the loops are made (tileas/passes.py), so a kernel the canonical form made unloopable (a store
ordered after a gather of other elements) is still refused in seconds.

The limits are one table (README "Limits" lists them); raise a row when
the lowering makes that size cheaper.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir import types as T
from ..ir.core import Operation, Value
from .allocas import alloca_size

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Iterator

# name -> (limit, why). Measured on 2 busy cores, a load/addf/store kernel on sm_90, to a cubin
# (ours / NVIDIA's): 2^15 elements 8 s / 16 s, 2^16 1.7 s / 40-120 s, 2^17 4.5 s, 2^18 15 s (0.5 GB),
# 2^19 61 s (1.6 GB), 2^20 295 s (6 GB) / > 300 s (9.5 GB).
LIMITS: dict[str, tuple[int, str]] = {
    "elements per tile value": (1 << 18, "compiles in about 15 s; NVIDIA's tileiras needs minutes from 2^16"),
    "bytes per tile value": (1 << 20, "2^18 elements of 32 bits"),
    "tile elements loaded or stored per kernel": (1 << 19, "one 2^18-element load and store: about 15 s"),
    "tile elements computed per kernel": (1 << 22, "every tile value of the kernel"),
    "bytes of alloca memory per kernel": (227 << 10, "the most shared memory one CTA can have (sm_90, sm_100)"),
}

# Ops whose tiles (operands and results of rank >= 1) count as loaded or stored.
MEMORY_OPS: frozenset[str] = frozenset("cuda_tile." + name for name in (
    "load_view_tko", "store_view_tko", "load_ptr_tko", "store_ptr_tko", "atomic_cas_tko", "atomic_rmw_tko",
    "atomic_red_view_tko", "multimem_load_reduce_view_tko", "multimem_reduce_view_tko", "multimem_store_view_tko",
    "print_tko"))


def limit(name: str) -> int:
    return LIMITS[name][0]


def _value_bytes(t: T.TileType) -> int:
    element = t.element
    bits = element.bitwidth if isinstance(element, T.ScalarType) else 64  # pointers are 64-bit
    return (t.num_elements * bits + 7) // 8


def _tile_values(op: Operation) -> Iterator[tuple[Value, T.TileType, str]]:
    """Every tile-typed value `op` defines: its results and its regions' block arguments."""
    for result in op.results:
        if isinstance(result.type, T.TileType):
            yield result, result.type, "result"
    for region in op.regions:
        for block in region.blocks:
            for arg in block.arguments:
                if isinstance(arg.type, T.TileType):
                    yield arg, arg.type, "region argument"


def _over(op: Operation, what: str, name: str) -> CompileError:
    from ..dialects.verifier import diagnostic

    cap, why = LIMITS[name]
    return CompileError(diagnostic(op, f"{what}, over the compile limit of {cap} {name} ({why}); use smaller tiles"))


def _moved(op: Operation, streamed: set) -> int:
    """The elements memory op `op` loads or stores: its largest tile not streamed. A gather's or a scatter's
    tile of pointers, a masked access's mask, an atomic's values and the old values it returns are the same
    elements again, one each (an index_add of 64 x 2048 f32 counted five times, 655424, was refused: it
    compiles in 2 s; NVIDIA's in 39)."""
    values = [v.type for v in (*op.operands, *op.results) if v not in streamed]
    return max((t.num_elements for t in values if isinstance(t, T.TileType) and t.shape), default=0)


def _streamed(entry: Operation) -> set:
    """The tile values the middle level computes in loops over chunks (not held in registers whole)."""
    from .tile_loops import streamable  # the pass that makes the loops decides what it takes

    return streamable(entry)


def check_kernel(entry: Operation, looped: bool = True) -> None:
    """Raise CompileError when `entry` (a cuda_tile.entry) is over one of LIMITS; with `looped`, tile
    values the middle level will compute in loops over chunks are not counted."""
    computed = moved = alloca = 0
    per_value, per_bytes = limit("elements per tile value"), limit("bytes per tile value")
    streamed = _streamed(entry) if looped else set()
    for op in entry.walk():
        for value, tile, role in _tile_values(op):
            if value in streamed:
                continue
            n = tile.num_elements
            if n > per_value:
                raise _over(op, f"{role} '{tile}' has {n} elements", "elements per tile value")
            size = _value_bytes(tile)
            if size > per_bytes:
                raise _over(op, f"{role} '{tile}' takes {size} bytes", "bytes per tile value")
            computed += n
        if op.name in MEMORY_OPS:
            moved += _moved(op, streamed)
        elif op.name == "cuda_tile.alloca":
            alloca += alloca_size(op)[0]
    name = entry.attributes.get("sym_name", "?")
    if moved > limit("tile elements loaded or stored per kernel"):
        raise _over(entry, f"kernel '{name}' loads and stores {moved} tile elements",
                    "tile elements loaded or stored per kernel")
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
