"""How wide one access to global memory may be: the elements one load or store of a view, or of a
tile of pointers, moves, and the chunk of a cp.async copy.

A thread's layout holds runs of consecutive elements (`run` of each layout). One access may cover
`vec` of them (up to 16 bytes) when the facts of the tensor view (facts.py, views.py) prove that
every such access is aligned to its size and lies wholly inside or wholly outside the tensor: unit
innermost stride, aligned base and outer strides, tile starts and innermost extent divisible by
`vec`. The same rule decides the size of cp.async copies (`chunk_elements`); where none is legal a
load stays a register load.

Gathers and scatters through a tile of pointers (`load_ptr_tko`, `store_ptr_tko`) are widened the
same way where the pointers' per-dimension facts prove contiguous, aligned runs (and a mask
constant over each run): TileGym's row kernels build such tiles as a base plus iota offsets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..ir.core import Operation, Value
from ..ir.types import ScalarType, TileType, storage_bytes
from ..layout.shared_matrix import SharedMatrix, matrix_dims
from .facts import UNBOUNDED, axes, divisor
from .views import View

if TYPE_CHECKING:
    from ..layout.encodings import Layout

PADDINGS = (None, "zero")   # what a copy's zero fill reads as


def vector_elements(op: Operation, view: View, tile_shape: tuple[int, ...], nbytes: int,
                    limit: int, sizes: tuple[int, ...] = (16, 8, 4)) -> int:
    """The most elements (a run of at most `limit`, of a size in `sizes` bytes) one access to the
    view may move; 1 when no vector access is legal."""
    if not tile_shape or not view.dim_map:
        return 1
    inner_start = _gathered_inner_start(op, view, len(tile_shape))
    if inner_start == 0:
        return 1
    tensor = view.tensor
    if not tensor.stride_div or not tensor.shape_div:
        return 1
    inner = view.dim_map[-1]
    if tensor.type.strides[inner] != 1:
        return 1
    inbounds = tuple(op.attributes.get("inbounds", ()) or ())
    for size in sizes:
        vec = size // nbytes
        if vec < 2 or size % nbytes or limit % vec or tile_shape[-1] % vec or tensor.base_align % size:
            continue
        if view.traversal_strides and view.traversal_strides[-1] % vec or inner_start % vec:
            continue
        if any(tensor.stride_div[d] % vec for d in range(len(tensor.stride_div)) if d != inner):
            continue
        if tensor.shape_div[inner] % vec and not (inner < len(inbounds) and inbounds[inner]):
            continue
        return vec
    return 1


def _gathered_inner_start(op: Operation, view: View, rank: int) -> int:
    """What divides the innermost tile dimension's start, in elements: a partition view's starts at whole
    tiles (`vector_elements` checks the tile's extent); a gather / scatter view's at the element offset its
    index gives (the facts' divisor of it), each gathered row apart (its start a multiple of the sparse
    dimension's stride); 0 where the innermost dimension is the gathered one (no two elements adjacent)."""
    if view.sparse_dim is None:
        return UNBOUNDED
    if view.sparse_dim == rank - 1:
        return 0
    index = op.operand_group("index") if op.operands else []
    return divisor(index[rank - 1]) if len(index) == rank else 1


def pointer_vector_elements(pointers: Value, mask: Optional[Value], tile_shape: tuple[int, ...], nbytes: int,
                            limit: int, sizes: tuple[int, ...] = (16, 8, 4)) -> int:
    """The most elements (a run of at most `limit`, of a size in `sizes` bytes) one access through
    the tile of pointers `pointers` may move, under `mask` when given; 1 when no vector access is legal.

    Legal where the facts (tileaa/facts.py) prove that along the innermost dimension the pointers
    step by one element over aligned groups of `vec`, each group's first aligned to the access size,
    and the mask is constant over each group (so one predicate guards the whole access)."""
    if not tile_shape:
        return 1
    contiguity, run_divisor, _ = axes(pointers)
    constancy = axes(mask)[2] if mask is not None else tile_shape
    for size in sizes:
        vec = size // nbytes
        if vec < 2 or size % nbytes or limit % vec or tile_shape[-1] % vec:
            continue
        if contiguity[-1] % vec or run_divisor[-1] % size or constancy[-1] % vec:
            continue
        return vec
    return 1


def chunk_elements(op: Operation, view: View, tile: TileType) -> int:
    """Elements per copy (16, 8 or 4 bytes' worth), or 0 when no cp.async form is legal."""
    elem = tile.element
    if not isinstance(elem, ScalarType) or elem.bitwidth < 8 or view.padding not in PADDINGS \
            or matrix_dims(tile.shape) is None:
        return 0
    nbytes = storage_bytes(elem)
    for size in (16, 8, 4):
        vec = size // nbytes
        if vec >= 1 and size % nbytes == 0 and tile.shape[-1] % vec == 0:
            if vec == 1:
                return 1 if nbytes == 4 else 0   # one element per copy: aligned by its type
            if vector_elements(op, view, tile.shape, nbytes, vec, (size,)) == vec:
                return vec
    return 0


def staged_through_registers(op: Operation, view: View, tile: TileType) -> bool:
    """Whether a pipeline may stage this tile element by element through registers where no cp.async
    form is legal (`chunk_elements` 0): elements of whole bytes stored as a matrix, zero padding."""
    elem = tile.element
    return isinstance(elem, ScalarType) and elem.bitwidth >= 8 and view.padding in PADDINGS \
        and matrix_dims(tile.shape) is not None and not chunk_elements(op, view, tile)


# Registers a thread of a tile that its mma would restage from registers where they are crowded (`_crowded`):
# above it, the tile is staged element by element instead. A decode's 128 x 128 bf16 V without facts (64
# registers a thread of 128) beside the scores' mma and softmax spilled 550 instructions on sm_80 and 577 on
# sm_120 (NVIDIA's 4 and 183), an MXFP8 256 x 64 GEMM's A (64) beside its 128-register accumulator 598 on
# sm_120; staged at once, 16, none and none. Where there is room, the tile is restaged in vectors in fewer
# instructions (a 16 x 128 x 128 GEMM's B beside a 16-register accumulator: 1221 hot-loop instructions so,
# 2037 element by element).
REGISTER_TILE = 32
REGISTER_BUDGET = 128


def staged_copy(op: Operation, view: View, tile: TileType, matrix: SharedMatrix, threads: int) -> str:
    """How a load staged in shared memory (`matrix`) for the tensor cores is copied there by `threads`
    threads: "cp.async" chunks where a form is legal (`chunk_elements`); else "registers", element by
    element, each loaded and stored at once (whole bytes, zero padding: `staged_through_registers`), for an
    operand its mma reads transposed (else its register tile goes through conversion scratch to be
    transposed, then is restaged) or one over `REGISTER_TILE` registers a thread where registers are
    crowded, where a register load would move one element at a time too (no vector access legal; else its
    vectors, restaged in vectors, take fewer instructions), into a padded matrix (read by ldmatrix; a
    swizzled one is read by wgmma or tcgen05 through the async proxy); "" otherwise: a register load,
    restaged by its mma. A decode's
    32 x 256 K tile without facts, held whole in registers and transposed through scratch before its mma
    restaged it, made 1352 spill instructions on sm_90; staged at once, with its other changes, 320."""
    from .mma_operands import mma_reads, passes_shared

    if chunk_elements(op, view, tile):
        return "cp.async"
    nbytes = storage_bytes(tile.element)
    one_by_one = vector_elements(op, view, tile.shape, nbytes, max(1, 16 // nbytes)) == 1
    transposed = any(read.transposed for read in mma_reads(op.results[0], passes_shared) or ())
    registers = tile.num_elements * nbytes // (4 * threads)
    held = registers > REGISTER_TILE and _crowded(op, registers, threads)
    # a swizzled stage is read by wgmma / tcgen05 through the async proxy: not staged so (the emulator
    # reported a missing proxy fence for an e4m3 B staged this way on sm_90)
    return "registers" if staged_through_registers(op, view, tile) and one_by_one and not matrix.swizzled \
        and (transposed or held) else ""


def _crowded(op: Operation, tile_registers: int, threads: int) -> bool:
    """Whether load `op`'s tile, held in registers (`tile_registers` a thread), is crowded there: its block (a
    loop body) runs another tensor-core mma than those reading it (an attention's two, whose operands and
    results are live around each other), or the values its loop carries (the accumulators) and the tile take
    over `REGISTER_BUDGET` registers a thread."""
    from .mma_operands import MMAS, mma_reads, passes_shared

    block = op.parent
    if block is None:
        return False
    readers = {id(read.mma) for read in mma_reads(op.results[0], passes_shared) or ()}
    if any(w.name in MMAS and id(w) not in readers for o in block.operations for w in o.walk()):
        return True
    region = getattr(block, "parent", None)
    loop = getattr(region, "parent", None)
    carried = sum(v.type.num_elements * storage_bytes(v.type.element) for v in getattr(loop, "results", ())
                  if isinstance(v.type, TileType) and isinstance(v.type.element, ScalarType))
    return tile_registers + carried // (4 * threads) > REGISTER_BUDGET


def view_access(op: Operation, view: View, tile: TileType, layout: "Layout", ordering: str) -> tuple[int, str]:
    """Elements per access of a weak view access in `layout`, and when that is 1 (one element at
    a time) why: the reason a remark gives."""
    return _widen(tile, layout, ordering, lambda nbytes, run: vector_elements(op, view, tile.shape, nbytes, run),
                  "the view's facts do not prove 4-, 8- or 16-byte accesses aligned and wholly inside or outside "
                  "the tensor (base alignment, unit innermost stride, divisible strides and extents)")


def pointer_access(pointers: Value, mask: Optional[Value], tile: TileType, layout: "Layout",
                   ordering: str) -> tuple[int, str]:
    """Elements per access of a weak gather or scatter through a tile of pointers, and why 1."""
    return _widen(tile, layout, ordering,
                  lambda nbytes, run: pointer_vector_elements(pointers, mask, tile.shape, nbytes, run),
                  "the pointers' facts do not prove runs of consecutive elements aligned to 4, 8 or 16 bytes "
                  "(under a mask constant over each run)")


def _widen(tile: TileType, layout: "Layout", ordering: str, elements: Callable[[int, int], int],
           missed: str) -> tuple[int, str]:
    """`elements(bytes per element, run)` of a weak access of whole-byte elements with runs in `layout`."""
    elem = tile.element
    if ordering != "weak":
        return 1, f"the access is ordered ({ordering}): only weak accesses are widened"
    if not isinstance(elem, ScalarType) or elem.bitwidth < 8:
        return 1, f"{elem} elements are not stored as whole bytes"
    run = layout.run(tile.num_elements)
    if run < 2:
        return 1, "the tile's layout gives each thread no two consecutive elements"
    vec = elements(elem.bitwidth // 8, run)
    return vec, "" if vec > 1 else missed
