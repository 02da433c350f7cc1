"""How the store of an mma accumulator goes through shared memory, decided once, by the pass
`plan-shared-memory` (shared_epilogue.py) for the lowering (lowering/epilogue.py), from the tile's
type and layout and the buffers placed before the store (`epilogue`):

* on a target with TMA (sm_90's wgmma fragments, sm_120's mma.sync ones, sm_100's where tensor
  memory's epilogue does not store them: lowering/tmem_epilogue.py), where the view's descriptor can be
  made from the kernel's parameters, written in the 128-byte swizzled layout and stored by one thread
  with TMA, through the freed buffers, in column chunks through two buffers where the whole tile
  does not fit (`_tma_staging`, `_chunks`), or, in a persistent kernel's loop, whole through bytes
  nothing alive in the loop uses (`_loop_span`, as a restaging's);
* else restaged in 16-byte runs where the view's stores are then wider (`_restaging`): through the
  freed buffers, a chunk of rows at a time where the tile does not fit, or, in a persistent
  kernel's loop, through bytes nothing alive in the loop uses (`_staging`);
* a store through pointers restaged where the pointers are in the layout it would be read back in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..ir.core import Operation
from ..ir.record import record
from ..ir.types import ScalarType, TileType
from ..layout.encodings import BlockedLayout, Layout, MmaLayout
from ..layout.shared_matrix import SharedMatrix
from ..tileaa.access_width import view_access
from ..tileaa.views import view_of
from .buffers import LOOPS, _parent_op, buffers_free_after
from .shared_plan import Request
from .tma_boxes import MAX_STORE_ROWS, plan

if TYPE_CHECKING:
    from .shared_stages import StagingFacts

MAX_CHUNKS = 8      # restaging rounds of an accumulator larger than the freed buffers
LOOP_MARGIN = 4096  # shared bytes a restaging in a loop leaves for what the kernel asks for later
LOOP_STORES = 128   # fragment stores (chunks x pairs a thread) of a restaging in a loop
TMA_STORE_ALIGN = 1024   # a TMA store's swizzled buffer: whole 128-byte swizzle patterns


@record
class Epilogue:
    """How a store of an mma accumulator goes through shared memory (`epilogue` decides it, for the
    lowering and for the plan: shared_epilogue.py), and the buffer it asks for."""
    role: str                  # "tma-store" (one thread's TMA boxes) or "restage" (16-byte stores)
    matrix: SharedMatrix       # one buffer: a chunk of columns (tma-store) or of rows (restage), unplaced
    buffers: int = 1           # tma-store: the column chunks go through this many buffers in turn
    span: Optional[tuple[int, int]] = None   # in a loop: the loop's lifetime; None: the store's,
                                             # once the buffers are released
    layout: Optional[BlockedLayout] = None   # restage: the layout of 16-byte runs it is read back in
    copy: Any = None           # tma-store: its TmaCopy (no hidden parameter yet)
    stores: str = "pairs"      # how the fragments are written to the buffer (`fragment_stores`)

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes * self.buffers

    @property
    def align(self) -> int:
        return TMA_STORE_ALIGN if self.role == "tma-store" else 128

    def request(self, op: Operation, lifetime: tuple[int, int]) -> Request:
        """What store `op` asks for (`lifetime`: the store's, where it releases the buffers first)."""
        return Request(op, self.role, "epilogue", self.nbytes, self.align, 0, self.span or lifetime,
                       releases=self.span is None)


def epilogue(k: "StagingFacts", op: Operation, ttype: TileType, layout: Layout) -> Optional[Epilogue]:
    """How store `op` of `ttype` in `layout` (an mma accumulator's fragments) goes through shared
    memory: a weak view store by TMA on a target with TMA (`_tma_staging`) where it can, else restaged in 16-byte
    runs where the stores are then wider (`restage`); a store through pointers restaged where the
    pointers are in the layout it would be read back in; None: from the fragments as they are.
    `k`: the facts plan-shared-memory has before any LLVM (shared_epilogue.EpilogueFacts): it reads
    `k.buffers`, the buffers placed before the store."""
    if op.name == "cuda_tile.store_ptr_tko":
        target = k.layout_of(op.operand("destination"))  # type: ignore[arg-type]
        staged = _restaging(k, op, ttype, layout) if layout != target else None
        return staged if staged is not None and staged.layout == target else None
    if op.name != "cuda_tile.store_view_tko" or str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak":
        return None
    view = view_of(op.operand("view"))
    if view is None:
        return None
    if k.caps.has("tma"):
        stored = _tma_staging(k, op, ttype, layout)
        if stored is not None:
            return stored
    staged = _restaging(k, op, ttype, layout)
    if staged is None:
        return None
    wider = view_access(op, view, ttype, staged.layout, "weak")[0] > view_access(op, view, ttype, layout, "weak")[0]
    return staged if wider else None


def _restaging(k: "StagingFacts", op: Operation, ttype: TileType, layout: Layout) -> Optional[Epilogue]:
    """The restaging of `ttype` in `layout` for `op` in `_blocked`'s layout, where `_staging` finds
    room for a chunk of rows."""
    blocked = _blocked(k, ttype, layout)
    if blocked is None:
        return None
    span, rows = _staging(k, op, ttype, layout, blocked)
    if not rows:
        return None
    b, _, n = layout.shape  # type: ignore[attr-defined]
    eb = ttype.element.bitwidth // 8  # type: ignore[attr-defined]
    return Epilogue("restage", SharedMatrix(0, b, rows, n, eb), span=span, layout=blocked,
                    stores=fragment_stores(k.caps, ttype, layout))


def _staging(k: "StagingFacts", op: Operation, ttype: TileType, layout: Layout, blocked: BlockedLayout
             ) -> tuple[Optional[tuple[int, int]], int]:
    """Where `ttype` in `layout` is restaged for `op`: (None, rows a chunk) through the freed buffers, the
    store being the last use of them (only where it reuses bytes the kernel has anyway: once
    released, every buffer is free); (lifetime, rows a chunk) inside a loop (a persistent
    kernel's tiles), through bytes that nothing alive anywhere in the outermost loop around it
    uses (`lifetime` is that loop's), where the target's shared memory has them; rows 0: nowhere. In a
    warp-specialized kernel only in the persistent loop of its roles (warp_roles.persistent: the ring,
    which the producer fills meanwhile, lives over that loop, so no such bytes are the ring's; the CTA
    barriers are the consumers' own)."""
    if _freed(k, op):
        return None, _chunk_rows(ttype, layout, blocked, lambda nbytes: nbytes <= k.buffers.total)
    span = _loop_span(k, op)
    if span is None:
        return None, 0
    rows = _chunk_rows(ttype, layout, blocked, lambda nbytes: _room(k, span, nbytes, 128))
    # the fragments' stores repeat once per chunk (under warp conditions): in a loop's code, at most
    # LOOP_STORES of them (a 128 x 256 tile over 256 threads in 4 chunks: 256, LLVM 3 x slower)
    chunks = layout.shape[1] // rows if rows else 0  # type: ignore[attr-defined]
    return span, rows if rows and layout.slots(ttype.num_elements) // 2 * chunks <= LOOP_STORES else 0


def _loop_span(k: "StagingFacts", op: Operation) -> Optional[tuple[int, int]]:
    """The lifetime of the outermost loop around store `op` (a persistent kernel's tile loop), over
    which a staging buffer lives beside what the loop keeps alive; None outside a loop, or in a
    warp-specialized kernel other than in the persistent loop of its roles (`_staging`)."""
    loop = outermost_loop(op)
    split = getattr(k, "warp_split", None)
    if loop is None or split is not None and split.outer is not loop:
        return None
    return k.lifetimes().op_range(loop)


def _room(k: "StagingFacts", span: tuple[int, int], nbytes: int, align: int) -> bool:
    """Whether `nbytes` fit over `span` beside the buffers alive then, leaving LOOP_MARGIN."""
    return k.buffers.first_fit(nbytes, align, *span) + nbytes <= k.caps.smem_per_block - LOOP_MARGIN


def _freed(k: "StagingFacts", op: Operation) -> bool:
    """Whether the buffers are free once store `op` runs (buffers.buffers_free_after)."""
    return buffers_free_after(k.entry, op, k.assignment.is_shared_operand if k.assignment is not None else None)


def outermost_loop(op: Operation) -> Optional[Operation]:
    loop, parent = None, _parent_op(op)
    while parent is not None:
        loop = parent if parent.name in LOOPS else loop
        parent = _parent_op(parent)
    return loop


def _chunk_rows(ttype: TileType, layout: Layout, blocked: BlockedLayout, fits: Callable[[int], bool]) -> int:
    """Rows of the accumulator restaged at a time: all of them where `fits` the bytes of the
    tile, else the most that fit, whole 16-row fragment blocks (which rows a fragment can hold
    is then known per block), each chunk a whole number of the blocked layout's slot groups (a
    group of the read back is then in one chunk); 0 where none fits (or it would take more than
    MAX_CHUNKS rounds)."""
    b, m, n = layout.shape  # type: ignore[attr-defined]
    eb = ttype.element.bitwidth // 8  # type: ignore[attr-defined]
    if fits(SharedMatrix(0, b, m, n, eb).nbytes):
        return m
    group = blocked.threads * blocked.run(ttype.num_elements)
    for chunks in range(2, MAX_CHUNKS + 1):
        rows = m // chunks
        if b == 1 and m % chunks == 0 and rows % 16 == 0 and (rows * n) % group == 0 \
                and fits(SharedMatrix(0, 1, rows, n, eb).nbytes):
            return rows
    return 0


def _blocked(k: "StagingFacts", ttype: TileType, layout: Layout) -> Optional[BlockedLayout]:
    """The blocked layout of 16-byte runs an mma accumulator (`ttype` in `layout`) would be read back
    in, where it gives wider runs than the fragments' and owns every element once."""
    elem = ttype.element
    if not isinstance(layout, MmaLayout) or not isinstance(elem, ScalarType) or elem.bitwidth < 8:
        return None
    blocked = BlockedLayout(k.threads, 16 // (elem.bitwidth // 8))
    n = ttype.num_elements
    if blocked.run(n) <= layout.run(n) or not blocked.owns_all(n) or layout.shape[2] % blocked.run(n):
        return None
    return blocked


def _tma_staging(k: "StagingFacts", op: Operation, ttype: TileType, layout: Layout) -> Optional[Epilogue]:
    """The TMA store of the accumulator through the freed buffers (lowering/epilogue.tma_store): where they
    may be reused for it (an mma accumulator stored last, nothing else alive in them), a chunk of
    columns fits (`_chunks`) and the view's descriptor can be made (tma_boxes.plan)."""
    if _blocked(k, ttype, layout) is None:
        return None
    assert isinstance(layout, MmaLayout)
    b, m, n = layout.shape
    eb = ttype.element.bitwidth // 8  # type: ignore[attr-defined]
    span = None
    if _freed(k, op):
        width, buffers = _chunks(k, layout, eb)
    else:
        # in a persistent kernel's loop: the whole tile through bytes nothing alive in the loop uses,
        # as `_staging` finds them for a restaging (its fragment stores at most LOOP_STORES)
        span = _loop_span(k, op)
        whole = SharedMatrix(0, b, m, n, eb, swizzled=True).nbytes
        fits = span is not None and layout.slots(ttype.num_elements) // 2 <= LOOP_STORES \
            and _room(k, span, whole, TMA_STORE_ALIGN)
        width, buffers = (n, 1) if fits else (0, 0)
    if not width:
        return None
    matrix = SharedMatrix(0, b, m, width, eb, swizzled=True)
    t, _ = plan(op, matrix, rows=MAX_STORE_ROWS, built=True)
    return Epilogue("tma-store", matrix, buffers, span=span, copy=t, stores=fragment_stores(k.caps, ttype, layout)) \
        if t is not None else None


def fragment_stores(caps: Any, ttype: TileType, layout: Layout) -> str:
    """How mma fragments are written to an epilogue's buffer: "stmatrix" (16-bit elements on targets
    with the feature, as NVIDIA's epilogues: a warp's pairs of 16 x 8 blocks four 8x8 matrices a
    store; only where each warp holds blocks of its own, not a repeat of the grid, and the blocks
    pair up along the columns) or "pairs" (two adjacent elements a store)."""
    if not (caps.has("stmatrix") and isinstance(layout, MmaLayout) and getattr(ttype.element, "bitwidth", 0) == 16):
        return "pairs"
    wb, wm, wn = layout.warps
    whole_warps = wb * wm * wn * 32 == layout.threads
    return "stmatrix" if whole_warps and layout.repeats[2] % 2 == 0 else "pairs"


def _chunks(k: "StagingFacts", layout: MmaLayout, eb: int) -> tuple[int, int]:
    """(columns a chunk, buffers) of the accumulator's swizzled staging: the whole tile in one
    buffer where the freed buffers hold it, else the widest column chunk, whole 128-byte swizzle
    atoms, of which two fit (each thread's columns of a chunk are known when its warps span every
    column: one warp column); (0, 0) where none does."""
    b, m, n = layout.shape
    if SharedMatrix(0, b, m, n, eb, swizzled=True).nbytes <= k.buffers.total:
        return n, 1
    if b != 1 or layout.warps[2] != 1:
        return 0, 0
    for width in range(n - 8, 0, -8):
        if n % width == 0 and (width * eb) % 128 == 0 \
                and 2 * SharedMatrix(0, b, m, width, eb, swizzled=True).nbytes <= k.buffers.total:
            return width, 2
    return 0, 0
