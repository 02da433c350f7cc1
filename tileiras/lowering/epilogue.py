"""The epilogue store of an mma accumulator: 16-byte global stores through the freed buffers.

An `MmaLayout` fragment gives a thread two adjacent elements per row (4 or 8
bytes), so a view store straight from it is 4 or 8 bytes wide. Once the
kernel's last tensor-core op has run, the shared buffers that staged its
operands are free (`SharedBuffers.release` ends every lifetime there): the tile
is written in an `epilogue` buffer the planner places over them (a padded
row-major matrix, two elements per shared store) and read back in a
blocked layout whose runs are 16 bytes, which the view store then writes with
16-byte accesses, as NVIDIA's epilogues do. Done only where it reuses memory
the kernel has anyway (a tile larger than the buffers, i32 or f32 128x256 on
sm_80, goes through them a chunk of rows at a time) and where nothing after the
store reads a buffer (tensor memory's mbarrier and address slot stay: `KEPT`).
Asynchronous writers into the buffers must be done first: cp.async copies are
waited for here (a TMA-fed pipeline leaves no copy in flight after its loop: every stage
it fills is waited for), and a one-shot TMA load's mbarrier still valid is invalidated.

On sm_90, where the view's descriptor can be made from the kernel's parameters (tma_copy.py),
the tile is written in wgmma's swizzled layout instead and one thread stores it with TMA
(`tma_store`), box by box, as NVIDIA's epilogues do; a tile larger than the freed buffers (i8
and f32 128x256: 128 KB) in column chunks through two smaller buffers.

Which of these a store takes, and the buffer it asks for, is decided once (`epilogue`, from the
tile's type and layout and the buffers placed before it): the lowering calls it, and so does the
pass `plan-shared-memory` before any LLVM, beside the buffers it planned (tileas/shared_epilogue.py).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..ir.core import Operation
from ..ir.record import record, replace
from ..ir.types import ScalarType, TileType
from ..tileas.buffers import buffers_free_after
from ..tileas.shared_plan import Request
from .kernel import KernelLowering, storage_type
from ..layout.encodings import BlockedLayout, Layout, MmaLayout
from .layout_index import coords, has_coords
from .smem import element_offset, pointer
from ..layout.shared_matrix import SharedMatrix
from .values import TileRegs

MAX_CHUNKS = 8      # restaging rounds of an accumulator larger than the freed buffers
LOOP_MARGIN = 4096  # shared bytes a restaging in a loop leaves for what the kernel asks for later
LOOP_STORES = 128   # fragment stores (chunks x pairs a thread) of a restaging in a loop


@record
class Epilogue:
    """How a store of an mma accumulator goes through shared memory (`epilogue` decides it, for the
    lowering and for the plan: tileas/shared_epilogue.py), and the buffer it asks for."""
    role: str                  # "tma-store" (sm_90: one thread's TMA boxes) or "restage" (16-byte stores)
    matrix: SharedMatrix       # one buffer: a chunk of columns (tma-store) or of rows (restage), unplaced
    buffers: int = 1           # tma-store: the column chunks go through this many buffers in turn
    span: Optional[tuple[int, int]] = None   # restage in a loop: the loop's lifetime; None: the store's,
                                             # once the buffers are released
    layout: Optional[BlockedLayout] = None   # restage: the layout of 16-byte runs it is read back in
    copy: Any = None           # tma-store: its TmaCopy (no hidden parameter yet)

    @property
    def nbytes(self) -> int:
        return self.matrix.nbytes * self.buffers

    @property
    def align(self) -> int:
        return 1024 if self.role == "tma-store" else 128

    def request(self, op: Operation, lifetime: tuple[int, int]) -> Request:
        """What store `op` asks for (`lifetime`: the store's, where it releases the buffers first)."""
        return Request(op, self.role, "epilogue", self.nbytes, self.align, 0, self.span or lifetime,
                       releases=self.span is None)


def epilogue(k: "KernelLowering", op: Operation, ttype: TileType, layout: Layout) -> Optional[Epilogue]:
    """How store `op` of `ttype` in `layout` (an mma accumulator's fragments) goes through shared
    memory: a weak view store by TMA on sm_90 (`tma_store`) where it can, else restaged in 16-byte
    runs where the stores are then wider (`restage`); a store through pointers restaged where the
    pointers are in the layout it would be read back in; None: from the fragments as they are.
    `k`: the lowering, or the facts the plan has before any LLVM (tileas/shared_epilogue.py): it
    reads `k.buffers`, the buffers placed before the store."""
    if op.name == "cuda_tile.store_ptr_tko":
        target = k.layout_of(op.operand("destination"))  # type: ignore[arg-type]
        staged = _restaging(k, op, ttype, layout) if layout != target else None
        return staged if staged is not None and staged.layout == target else None
    from .ops_memory import _ordering, _vector

    if op.name != "cuda_tile.store_view_tko" or _ordering(op)[0] != "weak":
        return None
    view = k.get(op.operand("view"))  # type: ignore[arg-type]
    if k.caps.has("wgmma"):
        stored = _tma_staging(k, op, ttype, layout, view)
        if stored is not None:
            return stored
    staged = _restaging(k, op, ttype, layout)
    if staged is None:
        return None
    wider = _vector(k, op, view, ttype, staged.layout, "weak")[0] > \
        _vector(k, op, view, ttype, layout, "weak")[0]  # type: ignore[arg-type]
    return staged if wider else None


def decided(k: KernelLowering, op: Operation, tile: TileRegs) -> Optional[Epilogue]:
    """`epilogue`, as the lowering decides it beside the buffers it placed (`PlanCheck.decide`: where
    those are not the plan's and it decided otherwise, the plan's decision no longer holds)."""
    staged = epilogue(k, op, tile.type, tile.layout)
    k.plan_check.decide(op, k.buffers.total, staged.request(op, k.op_lifetime()) if staged is not None else None)
    return staged


def _restaging(k: "KernelLowering", op: Operation, ttype: TileType, layout: Layout) -> Optional[Epilogue]:
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
    return Epilogue("restage", SharedMatrix(0, b, rows, n, eb), span=span, layout=blocked)


def _staging(k: "KernelLowering", op: Operation, ttype: TileType, layout: Layout, blocked: BlockedLayout
             ) -> tuple[Optional[tuple[int, int]], int]:
    """Where `ttype` in `layout` is restaged for `op`: (None, rows a chunk) through the freed buffers, the
    store being the last use of them (only where it reuses bytes the kernel has anyway: once
    released, every buffer is free); (lifetime, rows a chunk) inside a loop (a persistent
    kernel's tiles), through bytes that nothing alive anywhere in the outermost loop around it
    uses (`lifetime` is that loop's), where the target's shared memory has them; rows 0: nowhere. In a
    warp-specialized kernel only in the persistent loop of its roles (warp_roles.persistent: the ring,
    which the producer fills meanwhile, lives over that loop, so no such bytes are the ring's; the CTA
    barriers are the consumers' own)."""
    if _buffers_free_after(k, op):
        return None, _chunk_rows(ttype, layout, blocked, lambda nbytes: nbytes <= k.buffers.total)
    loop = _outermost_loop(op)
    split = getattr(k, "warp_split", None)
    if loop is None or split is not None and split.outer is not loop:
        return None, 0

    span = k.lifetimes().op_range(loop)
    limit = k.caps.smem_per_block - LOOP_MARGIN
    rows = _chunk_rows(ttype, layout, blocked,
                       lambda nbytes: k.buffers.first_fit(nbytes, 128, *span) + nbytes <= limit)
    # the fragments' stores repeat once per chunk (under warp conditions): in a loop's code, at most
    # LOOP_STORES of them (a 128 x 256 tile over 256 threads in 4 chunks: 256, LLVM 3 x slower)
    chunks = layout.shape[1] // rows if rows else 0  # type: ignore[attr-defined]
    return span, rows if rows and layout.slots(ttype.num_elements) // 2 * chunks <= LOOP_STORES else 0


def _outermost_loop(op: Operation) -> Optional[Operation]:
    from ..tileas.buffers import LOOPS, _parent_op

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


def _blocked(k: "KernelLowering", ttype: TileType, layout: Layout) -> Optional[BlockedLayout]:
    """The blocked layout of 16-byte runs an mma accumulator (`ttype` in `layout`) would be read back
    in, where it gives wider runs than the fragments' and owns every element once."""
    elem = ttype.element
    if not isinstance(layout, MmaLayout) or not isinstance(elem, ScalarType) or elem.bitwidth < 8 \
            or storage_type(elem) != _llvm(elem):
        return None
    blocked = BlockedLayout(k.threads, 16 // (elem.bitwidth // 8))
    n = ttype.num_elements
    if blocked.run(n) <= layout.run(n) or not blocked.owns_all(n) or layout.shape[2] % blocked.run(n):
        return None
    return blocked


def _tma_staging(k: "KernelLowering", op: Operation, ttype: TileType, layout: Layout, view: object
                 ) -> Optional[Epilogue]:
    """sm_90's TMA store of the accumulator through the freed buffers (`tma_store`): where they
    may be reused for it (an mma accumulator stored last, nothing else alive in them), a chunk of
    columns fits (`_chunks`) and the view's descriptor can be made (tileas/tma_boxes.plan)."""
    if _blocked(k, ttype, layout) is None or not _buffers_free_after(k, op):
        return None
    from ..tileas.tma_boxes import MAX_STORE_ROWS, plan

    assert isinstance(layout, MmaLayout)
    b, m, _ = layout.shape
    eb = ttype.element.bitwidth // 8  # type: ignore[attr-defined]
    width, buffers = _chunks(k, layout, eb)
    if not width:
        return None
    matrix = SharedMatrix(0, b, m, width, eb, swizzled=True)
    t, _ = plan(op, matrix, rows=MAX_STORE_ROWS)
    return Epilogue("tma-store", matrix, buffers, copy=t) if t is not None else None


def tma_store(k: KernelLowering, op: Operation, tile: TileRegs, view: object) -> bool:
    """Store `tile` (mma fragments) to the view of `op` through a swizzled buffer and TMA; False
    (nothing emitted) where the buffers cannot stage it or the view's descriptor cannot be made.
    A tile larger than the freed buffers goes in column chunks through two buffers in turn (as
    NVIDIA's i8 128x256 epilogues do, through smaller boxes): every thread writes chunk i while the
    TMA unit still reads chunk i - 1, whose reads thread 0 waits for before the barrier that
    publishes chunk i (the buffer chunk i + 1 then reuses is free)."""
    if k.caps.has("tcgen05"):     # attention's O (the matmuls' epilogue is tmem_epilogue.lower's)
        from .tmem_epilogue import store_fragments

        return store_fragments(k, op, tile)
    if not k.caps.has("wgmma"):
        return False
    stored = decided(k, op, tile)
    if stored is None or stored.role != "tma-store":
        return False
    from .async_copy import fence_async_proxy
    from .tma_copy import hidden_param, store, stores_read

    n = tile.layout.shape[2]  # type: ignore[union-attr]
    matrix, buffers, width = stored.matrix, stored.buffers, stored.matrix.cols
    t = replace(stored.copy, slot=hidden_param(k, stored.copy.spec))
    _release_buffers(k)
    base = k.alloc_buffer(stored.nbytes, stored.align, "epilogue", k.op_lifetime(), role="tma-store")
    first = k.b.op(f"icmp eq i32 {k.tid}, 0", "ep")
    for i, col in enumerate(range(0, n, width)):
        chunk = replace(matrix, offset=base + i % buffers * matrix.nbytes)
        _write_fragments(k, tile, chunk, cols=(col, width))
        fence_async_proxy(k)   # the TMA unit reads the tile through the async proxy
        if i:                  # chunk i - 1's boxes have left the buffer chunk i + 1 writes
            k.guarded(first, lambda: stores_read(k))
        k.barrier()
        last = col + width == n
        k.guarded(first, lambda: store(k, op, t, chunk, col, wait=last))
    return True


def _chunks(k: KernelLowering, layout: MmaLayout, eb: int) -> tuple[int, int]:
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


def _write_fragments(k: KernelLowering, tile: TileRegs, matrix: SharedMatrix, here: bool = False,
                     cols: tuple[int, int] = (0, 0), rows: tuple[int, int] = (0, 0)) -> None:
    """Each thread's mma fragments into `matrix`, two adjacent elements a store (`here`: their
    coordinates computed where they are written, not hoisted to the kernel's entry; `cols`
    (first, count): only the fragments of those columns, `matrix` holding just them, from
    column 0; the layout then has one warp column, so a fragment's 8-column block is its slot's;
    `rows` (first, count), whole 16-row blocks: likewise only the fragments of those rows, a
    fragment whose warp decides whether it lies there written under that condition)."""
    src = tile.layout
    assert has_coords(src)   # an mma fragment layout (or one column chunk of one, tmem_epilogue)
    lty = storage_type(tile.type.element)
    pair = f"<2 x {lty}>"
    first, count = cols
    top, height = rows
    emit = k.b.op if here else k.b.pre
    # the stores of fragments whose 16-row block only some warps have in the chunk, by that block (its
    # repeat mi): one condition, one branch for a run of them, each store's address and value made
    # inside it (made before, they would all be live at once: mm_i8_256x128x64 sm_120 spilled)
    run: list = []     # [mi, condition, stores]

    def flush() -> None:
        if run:
            _, ok, stores = run
            k.guarded(ok, lambda: [store() for store in stores])
            run.clear()

    for slot in range(0, len(tile.slots), 2):   # slots j, j + 1 of a block: columns 2t, 2t + 1
        if count and not first <= _column_block(src, slot) < first + count:
            continue
        inside = _in_rows(src, slot, top, height) if height else "all"
        if inside == "none":
            continue
        b, r, c, valid = coords(src, emit, k.tid, slot)
        if first:
            c = emit(f"sub i32 {c}, {first}", "ec")
        if top:
            r = emit(f"sub i32 {r}, {top}", "er")

        def store(b: str = b, r: str = r, c: str = c, slot: int = slot) -> None:
            p = pointer(k, element_offset(k, matrix, b, r, c))
            v = k.b.op(f"insertelement {pair} undef, {lty} {tile.slots[slot]}, i32 0", "ep")
            v = k.b.op(f"insertelement {pair} {v}, {lty} {tile.slots[slot + 1]}, i32 1", "ep")
            k.b.emit(f"store {pair} {v}, ptr addrspace(3) {p}")

        if inside == "some" and valid is None:
            # r - top < height, unsigned: the rows of this chunk (the same for the block's rows)
            mi = _row_repeat(src, slot)
            if run and run[0] != mi:
                flush()
            if not run:
                run.extend([mi, emit(f"icmp ult i32 {r}, {height}", "eok"), []])
            run[2].append(store)
            continue
        flush()
        if inside == "some":
            valid = emit(f"and i1 {valid}, {emit(f'icmp ult i32 {r}, {height}', 'eok')}", "eok")
        k.guarded(valid, store)
    flush()


def _row_repeat(layout: MmaLayout, slot: int) -> int:
    """The row repeat (mi) of `slot`: with the warp, what decides its 16-row block."""
    _, rm, rn = layout.repeats
    return slot // 4 % (rm * rn) // rn


def _in_rows(layout: MmaLayout, slot: int, top: int, height: int) -> str:
    """Whether the fragment rows of `slot` lie in rows [top, top + height) (16-row aligned) for
    every warp ("all"), none ("none") or only some ("some"): its 16-row block is
    (mi * wm + w) (interleaved) or (w * rm + mi) for the warp's row coordinate w."""
    rm, wm = layout.repeats[1], layout.warps[1]
    mi = _row_repeat(layout, slot)
    blocks = {mi * wm + w if layout.interleaved else w * rm + mi for w in range(wm)}
    inside = {blk for blk in blocks if top <= blk * 16 < top + height}
    return "all" if inside == blocks else "none" if not inside else "some"


def _column_block(layout: MmaLayout, slot: int) -> int:
    """The first column of the 8-column block `slot` lies in (a layout of one warp column), as
    MmaLayout.coords places it."""
    _, rm, rn = layout.repeats
    return (slot // 4 % (rm * rn)) % rn * 8


def restage(k: KernelLowering, tile: TileRegs, staged: Epilogue) -> TileRegs:
    """`tile` (mma fragments) in `staged.layout`, through the freed buffers (or, in a loop, bytes
    beside what the loop keeps alive), a chunk of rows at a time where the tile is larger
    (`staged`: `epilogue`'s decision)."""
    lty = storage_type(tile.type.element)
    layout, span, rows = staged.layout, staged.span, staged.matrix.rows
    assert layout is not None
    if span is None:
        _release_buffers(k)
    else:
        k.barrier()                        # the previous tile's readers of these bytes are done
    b, m, cols = tile.layout.shape  # type: ignore[union-attr]
    matrix = replace(staged.matrix, offset=k.alloc_buffer(staged.nbytes, staged.align, "epilogue",
                                                          span or k.op_lifetime(), role="restage"))
    n = tile.type.num_elements
    run = layout.run(n)
    group = layout.threads * run           # elements of one slot group: in one chunk (_chunk_rows)
    vty = f"<{run} x {lty}>"
    slots: list[str] = []
    for top in range(0, m, rows):          # a chunk of rows at a time where the tile is larger
        if top:
            k.barrier()                    # every thread has read the previous chunk
        _write_fragments(k, tile, matrix, rows=(top, rows) if rows < m else (0, 0))
        k.barrier()
        for first in range(0, layout.slots(n), run):
            if not top * cols <= first // run * group < (top + rows) * cols:
                continue
            bi, r, c = k.multi_index((b, m, cols), first, layout)
            if top:
                r = k.b.op(f"sub i32 {r}, {top}", "er")
            p = pointer(k, element_offset(k, matrix, bi, r, c))
            v = k.b.op(f"load {vty}, ptr addrspace(3) {p}, align 16", "ep")
            slots += [k.b.op(f"extractelement {vty} {v}, i32 {i}", "ep") for i in range(run)]
    return TileRegs(tile.type, slots, layout)


def _buffers_free_after(k: KernelLowering, op: Operation) -> bool:
    return buffers_free_after(k.entry, op, k.assignment.is_shared_operand if k.assignment is not None else None)


def _release_buffers(k: KernelLowering) -> None:
    """Every earlier use of the buffers is over: this thread's copies into them have landed (a
    pipeline's zero-filling copies past the end of its loop included), a wgmma's reads through the
    async proxy are ordered before the generic writes, and every thread is past its last read."""
    from .async_copy import fence_async_proxy, wait_all
    from .tma_copy import invalidate, one_shots

    wait_all(k)
    if k.assignment is not None and k.assignment.wgmma_ops:
        fence_async_proxy(k)
    k.barrier()
    invalidate(k, one_shots(k))   # a one-shot TMA load's mbarrier no loop's end invalidated: its bytes are reused
    k.buffers.release(k.lifetimes().position(k.current_op))


def _llvm(elem: ScalarType) -> str:
    from .llvm_text import llvm_type

    return llvm_type(elem)
