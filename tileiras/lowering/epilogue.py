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

On a target with TMA (sm_90, sm_120, and sm_100 where tensor memory's own epilogue does not store
the tile), where the view's descriptor can be made from the kernel's parameters (tileas/tma_boxes.py),
the tile is written in the 128-byte swizzled layout instead and one thread stores it with TMA
(`tma_store`), box by box, as NVIDIA's epilogues do; a tile larger than the freed buffers (i8
and f32 128x256: 128 KB) in column chunks through two smaller buffers; a persistent kernel's tile,
stored in its loop, through a buffer of its own beside what the loop keeps alive, which every thread
writes again once thread 0 has waited for the previous tile's boxes to read it.

Which of these a store takes, and the buffer it asks for, is decided once at nv_tileas, by the pass
`plan-shared-memory` before any LLVM (tileas/shared_epilogue.py, calling epilogue_forms.epilogue
with the tile's type and layout and the buffers it planned before the store): the lowering reads
the decision (`decided`).
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Operation
from ..ir.record import replace
from ..layout.encodings import MmaLayout
from ..layout.shared_matrix import SharedMatrix
from ..tileas.epilogue_forms import Epilogue
from .kernel import KernelLowering, storage_type
from ..layout.index_math import coords, has_coords
from .smem import element_offset, pointer
from .values import TileRegs



def decided(k: KernelLowering, op: Operation, tile: TileRegs) -> Optional[Epilogue]:
    """How store `op` of `tile` goes through shared memory (None: it does not), as plan-shared-memory
    decided it (`SharedPlan.epilogues`: shared_epilogue.requests). A plan without it is an internal error:
    the lowering does not decide."""
    return k.planned.decided("epilogues", op, "epilogue for the store")


def tma_store(k: KernelLowering, op: Operation, tile: TileRegs, view: object) -> bool:
    """Store `tile` (mma fragments) to the view of `op` through a swizzled buffer and TMA, as
    `epilogue_forms.epilogue` decided ("tma-store"; on sm_100 unless tensor memory's epilogue stored
    it: `tmem_epilogue.store_fragments`); False (nothing emitted) where it decided otherwise.
    A tile larger than the freed buffers goes in column chunks through two buffers in turn (as
    NVIDIA's i8 128x256 epilogues do, through smaller boxes): every thread writes chunk i while the
    TMA unit still reads chunk i - 1, whose reads thread 0 waits for before the barrier that
    publishes chunk i (the buffer chunk i + 1 then reuses is free)."""
    if k.caps.has("tcgen05"):     # attention's O (the matmuls' epilogue is tmem_epilogue.lower's)
        from .tmem_epilogue import store_fragments

        if store_fragments(k, op, tile):
            return True
    stored = decided(k, op, tile)
    if stored is None or stored.role != "tma-store":
        return False
    from .async_copy import fence_async_proxy
    from .tma_copy import hidden_param, store, stores_read

    n = tile.layout.shape[2]  # type: ignore[union-attr]
    matrix, buffers, width = stored.matrix, stored.buffers, stored.matrix.cols
    t = replace(stored.copy, slot=hidden_param(k, stored.copy.spec, op))
    if stored.span is None:
        _release_buffers(k)
    else:       # in a loop: thread 0 waited for the previous tile's boxes to read the bytes (store, wait)
        k.barrier()
    base = k.alloc_buffer(stored.nbytes, "tma-store")
    first = k.b.op(f"icmp eq i32 {k.tid}, 0", "ep")
    for i, col in enumerate(range(0, n, width)):
        chunk = replace(matrix, offset=base + i % buffers * matrix.nbytes)
        write_fragments(k, tile, chunk, stored.stores, cols=(col, width))
        fence_async_proxy(k)   # the TMA unit reads the tile through the async proxy
        if i:                  # chunk i - 1's boxes have left the buffer chunk i + 1 writes
            k.guarded(first, lambda: stores_read(k))
        k.barrier()
        last = col + width == n
        k.guarded(first, lambda: store(k, op, t, chunk, col, wait=last))
    return True


def write_fragments(k: KernelLowering, tile: TileRegs, matrix: SharedMatrix, stores: str, here: bool = False,
                    cols: tuple[int, int] = (0, 0), rows: tuple[int, int] = (0, 0)) -> None:
    """Each thread's mma fragments into `matrix`, two adjacent elements a store, or whole blocks four
    8x8 matrices a store where `stores` says "stmatrix" (epilogue_forms.fragment_stores) (`here`: their
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

    done = _store_matrices(k, tile, matrix, emit, cols, rows) if stores == "stmatrix" else set()
    for slot in range(0, len(tile.slots), 2):   # slots j, j + 1 of a block: columns 2t, 2t + 1
        if slot in done or count and not first <= _column_block(src, slot) < first + count:
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


def _store_matrices(k: KernelLowering, tile: TileRegs, matrix: SharedMatrix, emit: Callable[[str, str], str],
                    cols: tuple[int, int], rows: tuple[int, int]) -> set[int]:
    """The slots `write_fragments` stores four 8x8 matrices at a time with stmatrix (16-bit elements
    of whole warps' blocks, paired along the columns: epilogue_forms.fragment_stores): two blocks of 16
    rows x 8 columns side by side, each thread's four registers the two blocks' top and bottom halves,
    lane l giving the address of row l % 8 of matrix l / 8 (a row's 8 elements are 16 contiguous bytes,
    whole under the swizzle). Only blocks inside the chunk (no row condition); the rest are stored a
    pair at a time."""
    src = tile.layout
    assert isinstance(src, MmaLayout)
    rb, rm, rn = src.repeats
    first, count = cols
    top, height = rows
    lty = storage_type(tile.type.element)
    lane = emit(f"and i32 {k.tid}, 31", "sm")
    # the thread whose fragment row is this lane's matrix row (lane l % 8, column pair 0), in this warp
    warp = emit(f"and i32 {k.tid}, -32", "sm")
    row_lane = emit(f"shl i32 {emit(f'and i32 {lane}, 7', 'sm')}, 2", "sm")
    row_tid = emit(f"or i32 {warp}, {row_lane}", "sm")
    down = emit(f"and i32 {lane}, 8", "sm")                          # matrices 1 and 3: the bottom 8 rows
    right = emit(f"lshr i32 {emit(f'and i32 {lane}, 16', 'sm')}, 1", "sm")   # matrices 2 and 3: the next block
    done: set[int] = set()
    for blk in range(0, rb * rm * rn, 2):
        slot = 4 * blk
        if count and not all(first <= _column_block(src, s) < first + count for s in (slot, slot + 4)):
            continue
        if height and _in_rows(src, slot, top, height) != "all":
            continue
        b, r, c, _ = coords(src, emit, row_tid, slot)
        r = emit(f"add i32 {r}, {down}", "sm")
        c = emit(f"add i32 {c}, {right}", "sm")
        if first:
            c = emit(f"sub i32 {c}, {first}", "ec")
        if top:
            r = emit(f"sub i32 {r}, {top}", "er")
        regs = []
        for s in (slot, slot + 2, slot + 4, slot + 6):
            v = k.b.op(f"insertelement <2 x {lty}> undef, {lty} {tile.slots[s]}, i32 0", "ep")
            v = k.b.op(f"insertelement <2 x {lty}> {v}, {lty} {tile.slots[s + 1]}, i32 1", "ep")
            regs.append(k.b.op(f"bitcast <2 x {lty}> {v} to i32", "ep"))
        p = pointer(k, element_offset(k, matrix, b, r, c))
        k.b.emit(f'call void asm sideeffect "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0], {{$1, $2, $3, $4}};", '
                 f'"l,r,r,r,r,~{{memory}}"(ptr addrspace(3) {p}, ' + ", ".join(f"i32 {v}" for v in regs) + ")")
        done |= set(range(slot, slot + 8))
    return done


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
    matrix = replace(staged.matrix, offset=k.alloc_buffer(staged.nbytes, "restage"))
    n = tile.type.num_elements
    run = layout.run(n)
    group = layout.threads * run           # elements of one slot group: in one chunk (_chunk_rows)
    vty = f"<{run} x {lty}>"
    slots: list[str] = []
    for top in range(0, m, rows):          # a chunk of rows at a time where the tile is larger
        if top:
            k.barrier()                    # every thread has read the previous chunk
        write_fragments(k, tile, matrix, staged.stores, rows=(top, rows) if rows < m else (0, 0))
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
    # their lifetimes end here, as the plan's do (Request.releases): what the buffer verifier checks
    k.buffers.release(k.lifetimes().position(k.current_op))


