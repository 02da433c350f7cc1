"""Loads of tiles that only tensor cores read: global memory -> a shared buffer with cp.async.

The tile never passes through registers: every thread issues 16-byte (or 8/4-byte)
`cp.async` copies of its share of the tile's chunks into a padded
`layout/shared_matrix.SharedMatrix`, with the copy's source size 0 for chunks outside the tensor
(the hardware fills them with zeros, which is what a zero-padded view reads).
The reader (ops_mma) waits for the copies and for the CTA before it reads.
A tile too large to stage whole, read by one mma.sync, may instead be left to
that mma (tileas/deferred_loads.py decides): it copies the tile a K slice at a time,
two slices in flight (ops_mma._SliceRing), so the slices' bytes are all it needs.

The chunk of a copy, and whether any is legal, is decided from the view's facts
(tileaa/access_width.chunk_elements); where none is, the load stays a register load.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Operation
from ..ir.record import replace
from ..ir.types import TileType, storage_bytes
from .kernel import KernelLowering
from .smem import element_offset, pointer
from ..layout.shared_matrix import SharedMatrix, matrix_dims, matrix_shape, steps_evenly
from ..tileaa.access_width import chunk_elements, staged_copy
from .values import PartitionViewVal, SharedTileVal
from ..tileas.deferred_loads import DeferredLoad, slice_tile


def tile_coords(shape: tuple[int, ...], b: str, r: str, c: str) -> list[str]:
    """The tile coordinates of matrix element (b, r, c) (leading unit dimensions at 0)."""
    return [r, c] if len(shape) == 2 else ["0"] * (len(shape) - 3) + [b, r, c]


def new_matrix(k: KernelLowering, tile: TileType, role: str, stages: int = 1, swizzled: bool = False,
               elem_bytes: int = 0, dense: bool = False, subject: object = None) -> SharedMatrix:
    """The buffer the plan placed for `tile` (`stages` copies of it, back to back, for a pipeline); `role`,
    `subject`: as `KernelLowering.alloc_buffer`; `swizzled`: in wgmma's 128-byte swizzled layout; `elem_bytes`: when the
    elements are stored converted (0: as they are); `dense`: rows never padded (as an unswizzled TMA box
    writes them)."""
    matrix = matrix_shape(tile, k.pad_buffers, swizzled, elem_bytes, dense)
    return replace(matrix, offset=k.alloc_buffer(matrix.nbytes * stages, role, subject))


def load_to_shared(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileType) -> Optional[SharedTileVal]:
    """Issue the copies of a tile into a new buffer (cp.async, or element by element through
    registers: tileaa/access_width.staged_copy); None where neither may copy it. Where the
    kernel does not fit otherwise (`Assumptions.defer`, the last resort), a tile that does not fit
    whole beside the buffers alive with it, read by one mma.sync, is left to that mma, as
    plan-shared-memory decided (`SharedPlan.deferred`: tileas/deferred_loads.defers): it copies the
    tile a K slice at a time."""
    swizzled = k.assignment is not None and k.assignment.is_swizzled(op.results[0])
    if not staged_copy(op, view, tile, matrix_shape(tile, k.pad_buffers, swizzled), k.threads):
        return None
    plan = k.planned.plan
    if plan is not None and op in plan.deferred:
        return SharedTileVal(tile, None, pending=True, deferred=DeferredLoad(op, view))
    matrix = new_matrix(k, tile, "staging", swizzled=swizzled)   # alive from the copy to the tile's last reader
    k.barrier()  # readers of the buffer's previous contents (an earlier iteration, an earlier owner) are done
    issue_copies(k, op, view, tile, matrix)
    commit(k)
    return SharedTileVal(tile, matrix, pending=True)


def slice_matrix(k: KernelLowering, value: SharedTileVal, kaxis: int, width: int, stages: int,
                 operand: str) -> SharedMatrix:
    """A buffer of `stages` K slices of the deferred tile `value` (K along its stored rows, kaxis 0,
    or columns, 1; `width` of them a slice), alive while the current op (the mma) runs; `operand`: "a"
    or "b"."""
    return new_matrix(k, slice_tile(value.deferred.op.results[0].type, kaxis, width), "k-slice", stages,
                      subject=operand)


def issue_slice(k: KernelLowering, value: SharedTileVal, matrix: SharedMatrix, kaxis: int, first: int) -> None:
    """This thread's copies of the deferred tile's stored rows (kaxis 0) or columns (1) `first` ..
    into `matrix` (as wide as the slice), one cp.async group."""
    load = value.deferred
    tile = load.op.results[0].type
    origin = (first, 0) if kaxis == 0 else (0, first)
    issue_copies(k, load.op, load.view, tile, matrix, origin=origin)
    commit(k)


# Element by element (no copy legal), a thread's copies of a tile are unrolled up to ELEMENTS_UNROLLED; beyond, a
# loop copies ELEMENTS_A_TURN a turn: an e4m3 B of 128 x 256 without facts stored at once into its tcgen05 stage,
# 256 elements a thread unrolled, spilled 874 instructions on sm_100 (ptxas hoisted the loads above the stores for
# their latency); in the loop, none. A role that only fills a ring (a producer, the tcgen05 form's epilogue warps:
# warp_specialize.fill) loops beyond ROLE_ELEMENTS_UNROLLED: their copies' coordinates, hoisted out of its loop,
# spilled an int8 GEMM's 64 elements a thread of A and of B (sm_100 epilogue warps under a persistent loop: 52
# instructions; an sm_90 producer: 86); in the mma loop itself a nested loop would leave the mmas outside the
# innermost one.
ELEMENTS_UNROLLED = 64
ROLE_ELEMENTS_UNROLLED = 32
ELEMENTS_A_TURN = 16


def issue_copies(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileType, matrix: SharedMatrix,
                 active: Optional[str] = None, origin: Optional[tuple[int, int]] = None,
                 unrolled: int = ELEMENTS_UNROLLED, gather: bool = False) -> None:
    """This thread's cp.async copies of the tile `op` loads into `matrix` (none legal: its elements, one by
    one, or a stored row's 16 bytes at once: `gather`); where `active` (i1) is
    false, the copies only zero-fill (a pipeline's loads past the end of its loop). `origin`: the
    stored (row, column) of the tile that `matrix` (one matrix, then) starts at: a slice of it.
    `unrolled`: the most element copies a thread unrolls (`ELEMENTS_UNROLLED`); `gather`: a role that only
    fills a ring (warp_specialize.fill) stores a stored row's 16 bytes at once (`_issue_gathered`; in the
    mma's own loop the run's registers sit beside the accumulator: an attention without facts, d = 256 on
    sm_90, spilled 171 instructions so, 57 element by element)."""
    from .ops_memory import element_address, view_index

    legal = chunk_elements(op, view, tile)
    width = gather_width(matrix, tile) if gather and not legal else 0
    if width > 1:
        _issue_gathered(k, op, view, tile, matrix, view_index(k, op, view), width, active, origin, unrolled)
        return
    vec = legal or 1     # none legal (a pipeline's block scale, `staged_through_registers`): element by element
    shape = tile.shape
    batch, rows, cols = matrix.batch, matrix.rows, matrix.cols
    index = view_index(k, op, view)
    size = vec * matrix.elem_bytes
    chunks_per_row = cols // vec
    total = batch * rows * chunks_per_row
    if steps_evenly(matrix, k.threads, vec):
        _issue_stepped(k, op, view, tile, matrix, index, vec, active, origin, not legal)
        return
    # a chunk's coordinates are the kernel's (computed once, in its preamble) where a thread copies a few
    # chunks; element by element (no copy legal) they are computed where copied: a producer's 128 elements a
    # stage kept 256 coordinates live and spilled (an f16 decode without facts, d256: 199 spill instructions)
    at = k.b.op if not legal else k.b.pre
    if not legal and total > unrolled * k.threads and total % (ELEMENTS_A_TURN * k.threads) == 0:
        _issue_looped(k, op, view, tile, matrix, index, active, origin)
        return
    for first in range(0, total, k.threads):
        chunk = k.tid if first == 0 else at(f"add i32 {k.tid}, {first}", "ch")
        b, r, c = _chunk_at(at, chunk, chunks_per_row, vec, matrix)
        local = _tile_local(k, shape, b, r, c, origin)[0]

        def issue(local: list[str] = local, b: str = b, r: str = r, c: str = c) -> None:
            src, ok = element_address(k, op, view, index, local)
            _copy(k, size, pointer(k, element_offset(k, matrix, b, r, c)), 0, src, ok, active, view, not legal)

        if first + k.threads > total:
            k.guarded(at(f"icmp ult i32 {chunk}, {total}", "ch"), lambda: issue() or None)
        else:
            issue()


def _issue_looped(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileType, matrix: SharedMatrix,
                  index: tuple[list[str], object], active: Optional[str], origin: Optional[tuple[int, int]]) -> None:
    """This thread's element copies of the tile, ELEMENTS_A_TURN a turn of a loop (every turn whole)."""
    from .ops_memory import element_address
    from .ops_reduce import counted_loop

    turn = ELEMENTS_A_TURN * k.threads

    def body(g: str, _: list[str]) -> list[str]:
        base = k.b.op(f"add i32 {k.tid}, {k.b.op(f'mul i32 {g}, {turn}', 'ch')}", "ch")
        for u in range(ELEMENTS_A_TURN):
            chunk = k.b.op(f"add i32 {base}, {u * k.threads}", "ch") if u else base
            b, r, c = _chunk_at(k.b.op, chunk, matrix.cols, 1, matrix)
            src, ok = element_address(k, op, view, index, _tile_local(k, tile.shape, b, r, c, origin)[0])
            _copy(k, matrix.elem_bytes, pointer(k, element_offset(k, matrix, b, r, c)), 0, src, ok, active, view, True)
        return []
    counted_loop(k, "0", str(matrix.batch * matrix.rows * matrix.cols // turn), 1, [], body)


def gather_width(matrix: SharedMatrix, tile: TileType) -> int:
    """Elements a thread loads one by one (no copy legal) and stores to `matrix` as one vector: the run of a
    stored row's 16 bytes (a swizzle atom, or a padded row's) that the row's length divides, as NVIDIA's
    producers store such tiles (LDG.U16 ... STS.128); 1 where the elements are not whole bytes."""
    if storage_bytes(tile.element) != matrix.elem_bytes or not 1 <= matrix.elem_bytes <= 8:
        return 1
    width = 16 // matrix.elem_bytes
    while width > 1 and matrix.cols % width:
        width //= 2
    return width


def _issue_gathered(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileType, matrix: SharedMatrix,
                    index: tuple[list[str], object], width: int, active: Optional[str],
                    origin: Optional[tuple[int, int]], unrolled: int) -> None:
    """This thread's element copies of the tile, `width` consecutive elements of a stored row at a time: each
    loaded on its own (zero outside the tensor), the run stored as one vector. Coordinates are computed where
    copied; beyond `unrolled` elements a thread, a loop copies ELEMENTS_A_TURN a turn."""
    chunks_per_row = matrix.cols // width
    total = matrix.batch * matrix.rows * chunks_per_row
    per_turn = max(1, ELEMENTS_A_TURN // width) * k.threads

    def copy(chunk: str) -> None:
        b, r, c = _chunk_at(k.b.op, chunk, chunks_per_row, width, matrix)
        _gather(k, op, view, tile, matrix, index, width, b, r, c, active, origin)

    if total * width > unrolled * k.threads and total % per_turn == 0:
        from .ops_reduce import counted_loop

        def body(g: str, _: list[str]) -> list[str]:
            base = k.b.op(f"add i32 {k.tid}, {k.b.op(f'mul i32 {g}, {per_turn}', 'ch')}", "ch")
            for u in range(0, per_turn, k.threads):
                copy(k.b.op(f"add i32 {base}, {u}", "ch") if u else base)
            return []
        counted_loop(k, "0", str(total // per_turn), 1, [], body)
        return
    for first in range(0, total, k.threads):
        chunk = k.tid if first == 0 else k.b.op(f"add i32 {k.tid}, {first}", "ch")
        if first + k.threads > total:
            k.guarded(k.b.op(f"icmp ult i32 {chunk}, {total}", "ch"), lambda chunk=chunk: copy(chunk) or None)
        else:
            copy(chunk)


def _gather(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileType, matrix: SharedMatrix,
            index: tuple[list[str], object], width: int, b: str, r: str, c: str, active: Optional[str],
            origin: Optional[tuple[int, int]]) -> None:
    """Elements (b, r, c .. c + width - 1) of `matrix`, loaded one by one and stored as one vector. Their
    addresses step from the first's along the tile's last dimension, where each was computed on its own
    (ops_memory.stepped_addresses: an e4m3 attention's producer loading 64 x 64 K and V without facts, two
    runs of 16 a tile a thread, kept 64 addresses live and spilled 20 instructions at its 88 registers)."""
    from .ops_memory import stepped_addresses

    ty = f"i{8 * matrix.elem_bytes}"
    values = []
    local = _tile_local(k, tile.shape, b, r, c, origin)[0]
    for src, ok in stepped_addresses(k, op, view, index, local, len(local) - 1, 1, width, elements=True):
        if active is not None:
            ok = active if ok is None else k.b.op(f"and i1 {ok}, {active}", "cs")

        def load(src: str = src) -> str:
            g = k.b.op(f"addrspacecast ptr {src} to ptr addrspace(1)", "cg")
            return k.b.op(f"load {ty}, ptr addrspace(1) {g}", "cv")
        values.append(k.guarded(ok, load, default="0", ty=ty))
    # narrow elements packed into 32-bit words by hand: a vector of i16 or i8 built lane by lane, LLVM
    # pairs each half with an undefined one it then overwrites, which the emulator reads as undefined
    per_word = min(width, max(1, 4 // matrix.elem_bytes))
    if per_word > 1:
        wty = f"i{8 * matrix.elem_bytes * per_word}"
        words = []
        for w in range(0, width, per_word):
            word = ""
            for u, v in enumerate(values[w:w + per_word]):
                part = k.b.op(f"zext {ty} {v} to {wty}", "cv")
                if u:
                    part = k.b.op(f"shl {wty} {part}, {8 * matrix.elem_bytes * u}", "cv")
                word = k.b.op(f"or {wty} {word}, {part}", "cv") if word else part
            words.append(word)
        ty, values = wty, words
    vty = f"<{len(values)} x {ty}>"
    packed = "undef"
    for u, v in enumerate(values):
        packed = k.b.op(f"insertelement {vty} {packed}, {ty} {v}, i32 {u}", "cv")
    dst = pointer(k, element_offset(k, matrix, b, r, c))
    k.b.emit(f"store {vty} {packed}, ptr addrspace(3) {dst}, align {width * matrix.elem_bytes}")


def _chunk_at(at: Callable[[str, str], str], chunk: str, chunks_per_row: int, vec: int,
              matrix: SharedMatrix) -> tuple[str, str, str]:
    """The (batch, row, column) of copy chunk `chunk` (`vec` elements) in `matrix`, computed with `at`."""
    c = at(f"mul i32 {at(f'urem i32 {chunk}, {chunks_per_row}', 'ch')}, {vec}", "cc")
    r_all = at(f"udiv i32 {chunk}, {chunks_per_row}", "cr")
    if matrix.batch == 1:
        return "0", r_all, c
    r = at(f"urem i32 {r_all}, {matrix.rows}", "cr")
    return at(f"udiv i32 {r_all}, {matrix.rows}", "cb"), r, c


def _issue_stepped(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileType, matrix: SharedMatrix,
                   index: tuple[list[str], object], vec: int, active: Optional[str],
                   origin: Optional[tuple[int, int]] = None, through_registers: bool = False) -> None:
    """The copies where every thread's chunks sit in one column, `threads / chunks_per_row` rows
    apart: one source address and one destination register per thread, the others a step or an
    immediate offset away (ops_memory.stepped_addresses), so a loop keeps no register per chunk."""
    from .ops_memory import stepped_addresses

    chunks_per_row = matrix.cols // vec
    step = k.threads // chunks_per_row
    count = matrix.rows * chunks_per_row // k.threads
    c = k.b.pre(f"mul i32 {k.b.pre(f'urem i32 {k.tid}, {chunks_per_row}', 'ch')}, {vec}", "cc")
    r = k.b.pre(f"udiv i32 {k.tid}, {chunks_per_row}", "cr")
    local, row_dim = _tile_local(k, tile.shape, "0", r, c, origin)
    dst = pointer(k, element_offset(k, matrix, "0", r, c))
    for i, (src, ok) in enumerate(stepped_addresses(k, op, view, index, local, row_dim, step, count,
                                                    elements=through_registers)):
        _copy(k, vec * matrix.elem_bytes, dst, i * step * matrix.pitch, src, ok, active, view, through_registers)


def _tile_local(k: KernelLowering, shape: tuple[int, ...], b: str, r: str, c: str,
                origin: Optional[tuple[int, int]]) -> tuple[list[str], int]:
    """(tile coordinates, the tile dimension its stored rows run along) of element (b, r, c) of the
    tile's matrix (`origin` None) or of a slice of it (batch 1) that starts at stored (row, column)
    `origin` (deferred_loads.slice_tile: a tile of one row per batch entry has its stored rows
    along the batch dimension)."""
    if origin is None:
        return tile_coords(shape, b, r, c), len(shape) - 2
    row0, col0 = origin
    r = k.b.pre(f"add i32 {r}, {row0}", "cr") if row0 else r
    c = k.b.pre(f"add i32 {c}, {col0}", "cc") if col0 else c
    batch, rows, _ = matrix_dims(shape)  # type: ignore[misc]
    if rows == 1 and batch > 1:
        return tile_coords(shape, r, "0", c), len(shape) - 3
    return tile_coords(shape, "0", r, c), len(shape) - 2


def _copy(k: KernelLowering, size: int, dst: str, dst_offset: int, src: str, ok: Optional[str], active: Optional[str],
          view: PartitionViewVal, through_registers: bool = False) -> None:
    """One cp.async of `size` bytes to `dst` + `dst_offset` (an immediate of the instruction: LLVM
    folds no offset into an intrinsic's address, and hoists each distinct one out of a loop);
    `through_registers`: a load of one element and a shared store of it instead (zero outside the
    tensor), for a tile no cp.async may copy."""
    if active is not None:
        ok = active if ok is None else k.b.op(f"and i1 {ok}, {active}", "cs")
    if through_registers:
        ty = f"i{8 * size}"
        value = k.guarded(ok, lambda: k.b.op(f"load {ty}, ptr addrspace(1) "
                                             f"{k.b.op(f'addrspacecast ptr {src} to ptr addrspace(1)', 'cg')}",
                                             "cv"), default="0", ty=ty)
        at = k.b.op(f"getelementptr i8, ptr addrspace(3) {dst}, i32 {dst_offset}", "cd") if dst_offset else dst
        k.b.emit(f"store {ty} {value}, ptr addrspace(3) {at}")
        return
    src_size = str(size) if ok is None else k.b.op(f"select i1 {ok}, i32 {size}, i32 0", "cs")
    if ok is not None:  # never form an address outside the tensor, even for a zero-size copy
        src = k.b.op(f"select i1 {ok}, ptr {src}, ptr {view.tensor.base}", "cs")
    g = k.b.op(f"addrspacecast ptr {src} to ptr addrspace(1)", "cg")
    cache = "cg" if size == 16 else "ca"
    k.b.emit(f'call void asm sideeffect "cp.async.{cache}.shared.global [$0+{dst_offset}], [$1], {size}, $2;", '
             f'"l,l,r,~{{memory}}"(ptr addrspace(3) {dst}, ptr addrspace(1) {g}, i32 {src_size})')


def commit(k: KernelLowering) -> None:
    """Close this thread's current group of cp.async copies."""
    k.b.declare("declare void @llvm.nvvm.cp.async.commit.group()")
    k.b.emit("call void @llvm.nvvm.cp.async.commit.group()")


def wait_groups(k: KernelLowering, pending: int) -> None:
    """Wait until at most `pending` of this thread's newest copy groups are in flight."""
    k.b.declare("declare void @llvm.nvvm.cp.async.wait.group(i32)")
    k.b.emit(f"call void @llvm.nvvm.cp.async.wait.group(i32 {pending})")


def wait_all(k: KernelLowering) -> None:
    """Wait until none of this thread's copies is in flight."""
    k.b.declare("declare void @llvm.nvvm.cp.async.wait.all()")
    k.b.emit("call void @llvm.nvvm.cp.async.wait.all()")


def wait_for(k: KernelLowering, tiles: list[object]) -> None:
    """Before reading shared tiles: this thread's copies into them have landed (a one-shot TMA
    load's: its mbarrier's phase, tma_copy.wait_once)."""
    from .tma_copy import wait_once

    pending = [t for t in tiles if isinstance(t, SharedTileVal) and t.pending]
    if any(t.arrival is None for t in pending):
        wait_all(k)
    wait_once(k, list({id(t.arrival): t.arrival for t in pending if t.arrival is not None}.values()))


def is_ready(tiles: list[object]) -> bool:
    """Shared tiles whose copies were waited for at a barrier already (a pipeline's stage, or tiles
    copied before a pipelined loop): a reader needs neither a wait nor a barrier."""
    return all(isinstance(t, SharedTileVal) and not t.pending for t in tiles)


def fence_async_proxy(k: KernelLowering) -> None:
    """This thread's shared-memory writes (cp.async, st.shared) become visible to the async proxy
    (wgmma reads through it): between the writes' completion and the barrier before the reader."""
    k.b.emit('call void asm sideeffect "fence.proxy.async.shared::cta;", "~{memory}"()')
