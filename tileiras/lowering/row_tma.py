"""TMA copies of register tiles in a kernel's body (sm_90+): the row kernels' loads and stores.

Where a tile read or written by threads (a norm's row, its weights, a softmax's output) is moved
between global and shared memory by the TMA unit, as NVIDIA's compiler does on these targets, in
kernels that reduce or read a loaded tile more than once (`_rereads`; elementwise kernels keep
their global accesses, as NVIDIA's do):

* **Loads.** At the body's first eligible load, one thread issues the copies of every eligible
  load of the body up to the first op that may write memory (a *group*): each tile into its own
  unpadded buffer (rows back to back, as an unswizzled box writes them), on its own mbarrier.
  Operands a later load of the group needs that are not lowered yet (its partition view, its
  constant index) are pure and lowered ahead. A CTA barrier publishes the barriers'
  initialization; then every load, at its own place, waits for its barrier and reads its tile
  into registers with 16-byte shared loads. Issuing the group at once lets the later tiles (a
  norm's weights) arrive while the first is reduced. A load padded with anything but zeros
  (TMA fills zeros) stays a global load, as in NVIDIA's softmax.
* **Stores.** A register tile stored to a view (not in a pipelined loop): written into an unpadded
  buffer, fenced for the async proxy, published by a CTA barrier, stored box by box by one thread
  (TMA clips what lies outside the tensor), which waits until its boxes have been read before it
  passes another CTA barrier (every later use of the bytes starts with one); where a read of
  memory may follow (later in the body, or in a loop's next iteration), until they have been
  written: a read token-ordered after the store waits for the CTA (token_waits.py) and so sees them.

Which loads form the group and whether a store is copied, with their buffers, is decided at
nv_tileas by the shared-memory plan (tileas/shared_rows.py, with tileas/row_copies.py's functions,
beside the buffers it placed before the op): `SharedPlan.row_groups` and `row_stores`, read here.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record, replace
from ..ir.types import TileType, storage_bytes
from ..layout.encodings import Layout
from ..layout.shared_matrix import SharedMatrix
from ..schedule.buffers import MBARRIER_BYTES
from ..errors import CompileError
from ..tileas.row_copies import pure_ahead
from ..tileas.tma_boxes import describe
from .kernel import KernelLowering, from_storage, storage_type
from .smem import element_offset, pointer
from .values import TileRegs

TYPE_CHECKING = False
if TYPE_CHECKING:  # the copies' types; tma_copy is loaded where a kernel copies rows (shared_rows asks every kernel)
    from . import tma_copy


@record(frozen=False)
class RowLoad:
    """A load of a group: its tile's buffer and the one-shot copy that fills it."""
    matrix: SharedMatrix
    shot: tma_copy.OneShot


def _reads(op: Operation) -> bool:
    return any("load" in o.name or "atomic" in o.name for o in op.walk())


# -- loads ------------------------------------------------------------------------------------
def load(k: KernelLowering, op: Operation) -> Optional[TileRegs]:
    """`op`'s tile in registers, read from its buffer once its TMA copy landed (issuing the group
    it starts first); None (nothing emitted) where the load is not copied by TMA."""
    held = k.row_loads.get(op)
    if held is None:
        if k.planned.get("row_groups", op) is None:    # (the plan's group starts at one load)
            return None
        _issue_group(k, op)
        held = k.row_loads.get(op)
        if held is None:
            return None
    return _read(k, op, held)


def _issue_group(k: KernelLowering, first: Operation) -> None:
    """Place and issue the copies of the group `first` starts, as plan-shared-memory decided it
    (`SharedPlan.row_groups`: row_copies.group beside the buffers it placed); sets `k.row_loads`."""
    from . import mbarrier, tma_copy

    decided = k.planned.decided("row_groups", first, "row TMA group for the load")
    for op in decided.ahead:    # the later loads' operands, lowered here (pure ops: row_copies.pure_ahead)
        if not _lower_operands_ahead(k, op):
            raise CompileError(f"error: internal: the operands of the load at {op.location} are not pure, "
                               f"though plan-shared-memory lowers them ahead for its row TMA group")
    chosen, missed = decided.loads, decided.missed
    for op, why in missed:
        _missed(k, op, why)
    if not chosen:
        return
    fresh = not k.buffers.buffers    # no earlier use of shared memory to wait for
    placed = []
    for op, t, matrix in chosen:
        matrix = replace(matrix, offset=k.alloc_buffer(matrix.nbytes, "row-load", op))
        placed.append((op, replace(t, slot=tma_copy.hidden_param(k, t.spec)), matrix))
    bars = mbarrier.allocate(k, len(placed))
    if not fresh:
        k.barrier()    # earlier readers of the buffers' bytes are done
    mbarrier.init(k, [(bars, [1] * len(placed))])

    def copies() -> None:
        for i, (op, t, matrix) in enumerate(placed):
            full = mbarrier.address(k, bars, str(i))
            mbarrier.arrive_expect_tx(k, full, t.nbytes)
            tma_copy.load_boxes(k, op, t, matrix.offset, full)
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "rt"), copies)
    k.barrier()    # publishes the barriers' initialization to their waiters
    for i, (op, t, matrix) in enumerate(placed):
        single = mbarrier.BarrierArray(bars.offset + i * MBARRIER_BYTES, 1)
        k.row_loads[op] = RowLoad(matrix, tma_copy.OneShot(t, single))
        k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op,
                 Instruction="TMA load (cp.async.bulk.tensor to shared memory)", Boxes=describe(t),
                 Pipeline=f"issued with {len(placed) - 1} other load(s) at the body's first, on its own mbarrier")
    k.schedule_notes.append(f"row TMA group: {len(placed)} load(s) issued together, "
                            f"{sum(m.nbytes for _, _, m in placed)} shared bytes")


def _lower_operands_ahead(k: KernelLowering, op: Operation) -> bool:
    """Lower the pure ops `op`'s operands still need (marked lowered ahead); False where one is
    not pure (nothing lowered then)."""
    from .registry import LOWERINGS

    order = pure_ahead(op, lambda value: value in k.values)
    if order is None:
        return False
    for pure in order:
        outer, k.current_op = k.current_op, pure
        LOWERINGS[pure.name](k, pure)
        k.current_op = outer
        k.lowered_ahead.add(pure)
    return True


def _missed(k: KernelLowering, op: Operation, why: str) -> None:
    k.remark("missed", "memory", "RemarkTmaLoadMissed", "Row load not copied by TMA", op, Reason=why)


def _read(k: KernelLowering, op: Operation, held: RowLoad) -> TileRegs:
    """Wait for the tile's copy, then read it into its layout: a 16-byte (or narrower) shared load
    per run of consecutive elements."""
    from . import tma_copy

    tma_copy.wait_once(k, [held.shot])
    tile = op.results[0].type
    assert isinstance(tile, TileType)
    return TileRegs(tile, read_tile(k, held.matrix, tile, k.layout_of(op.results[0])), k.layout_of(op.results[0]))


def _vec(layout: Layout, tile: TileType, eb: int) -> int:
    run, vec = layout.run(tile.num_elements), max(1, 16 // eb)
    while vec > 1 and (run % vec or tile.shape[-1] % vec):
        vec //= 2
    return vec


def read_tile(k: KernelLowering, matrix: SharedMatrix, tile: TileType, layout: Layout) -> list[str]:
    """This thread's slots of `tile` (stored unpadded, row-major, in `matrix`), read in `layout`."""
    elem = tile.element
    lty = storage_type(elem)
    vec = _vec(layout, tile, storage_bytes(elem))
    vty = f"<{vec} x {lty}>"
    dims = (matrix.batch, matrix.rows, matrix.cols)
    slots: list[str] = []
    for first in range(0, layout.slots(tile.num_elements), vec):
        p = pointer(k, element_offset(k, matrix, *k.multi_index(dims, first, layout)))
        v = k.b.op(f"load {vty}, ptr addrspace(3) {p}, align {vec * storage_bytes(elem)}", "rt")
        slots += [from_storage(k, k.b.op(f"extractelement {vty} {v}, i32 {i}", "rt"), elem) for i in range(vec)]
    return slots


# -- stores -----------------------------------------------------------------------------------
def store(k: KernelLowering, op: Operation, tile: TileRegs) -> bool:
    """Store `tile` to the view of `op` by TMA through a buffer; False (nothing emitted) where it
    cannot (the reason remarked where the view is the obstacle)."""
    t, matrix, why = k.planned.get("row_stores", op, (None, None, ""))
    if t is None:
        if why:
            k.remark("missed", "memory", "RemarkTmaStoreMissed", "Row store not copied by TMA", op, Reason=why)
        return False
    from . import tma_copy
    from .async_copy import fence_async_proxy

    assert matrix is not None
    body = list(k.entry.regions[0].block.operations)
    # a read after the store (in the body, or a loop's next iteration) token-ordered after it is
    # made to wait for the CTA (token_waits.py): the issuing thread must have seen the boxes written
    written = op.parent is not k.entry.regions[0].block or any(_reads(o) for o in body[body.index(op) + 1:])
    t = replace(t, slot=tma_copy.hidden_param(k, t.spec))
    matrix = replace(matrix, offset=k.alloc_buffer(matrix.nbytes, "row-store"))
    k.barrier()    # earlier readers of the buffer's bytes are done
    write_tile(k, matrix, tile)
    fence_async_proxy(k)   # the TMA unit reads the tile through the async proxy
    k.barrier()
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "rt"), lambda: tma_copy.store(k, op, t, matrix, written=written))
    k.remark("passed", "memory", "RemarkMemoryStoreInstructionSelected", "Store instruction selected", op,
             Instruction="TMA store (cp.async.bulk.tensor from shared memory)", Boxes=describe(t))
    return True


def write_tile(k: KernelLowering, matrix: SharedMatrix, tile: TileRegs) -> None:
    """This thread's slots of `tile` into `matrix` (unpadded, row-major), a vector per run; a
    replicated element is written by its first copy only."""
    from .kernel import to_storage

    elem = tile.type.element
    lty = storage_type(elem)
    layout = tile.layout
    vec = _vec(layout, tile.type, storage_bytes(elem))
    vty = f"<{vec} x {lty}>"
    dims = (matrix.batch, matrix.rows, matrix.cols)
    n = tile.type.num_elements
    for first in range(0, layout.slots(n), vec):
        p = pointer(k, element_offset(k, matrix, *k.multi_index(dims, first, layout)))
        packed = "undef"
        for i in range(vec):
            value = to_storage(k, tile.slots[first + i], elem)
            packed = k.b.op(f"insertelement {vty} {packed}, {lty} {value}, i32 {i}", "rt")
        text = f"store {vty} {packed}, ptr addrspace(3) {p}, align {vec * storage_bytes(elem)}"
        k.guarded(k.slot_valid(n, first, layout), lambda text=text: k.b.emit(text))
