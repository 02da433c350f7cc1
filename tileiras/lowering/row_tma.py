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

Both need the view's tensor map to be made at launch (tileas/tma_boxes.plan: base 16-byte aligned, outer
strides multiples of 16 bytes, unit innermost stride) and a box of whole 16-byte rows, 128-byte
multiples (tma_boxes._dense): a tile's columns in boxes of up to 256, a row per box when the
columns need several. Loads must precede every write of the kernel: the async proxy's reads are
then never ordered after the threads' own writes.

Which loads form the group (`group_start`, `group`) and whether a store is copied (`store_copy`),
with their buffers, are decided by the same functions for the lowering and for the shared-memory
plan (tileas/shared_rows.py, given a `StagingFacts`): their budgets read the bytes placed before
the op, the lowering's buffers here, the plan's own placement there.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Operation, Value
from ..ir.record import record, replace
from ..ir.types import ScalarType, TileType
from ..transforms.rewrite import inside_op
from ..tileas.buffers import Liveness
from .kernel import KernelLowering, from_storage, storage_type
from ..ir.types import storage_bytes
from ..layout.encodings import Layout, MmaLayout
from .smem import element_offset, pointer
from ..layout.shared_matrix import SharedMatrix
from ..tileaa.views import View
from ..tileas.tma_boxes import TmaCopy, describe, plan
from .values import PartitionViewVal, TileRegs
from ..schedule.buffers import MBARRIER_BYTES

TYPE_CHECKING = False
if TYPE_CHECKING:  # the copies' types; tma_copy is loaded where a kernel copies rows (shared_rows asks every kernel)
    from . import tma_copy

MAX_BOXES = 64          # boxes per tile (NVIDIA's 16k-column rows: 64 boxes of 256)
MARGIN = 4096           # shared bytes a group leaves for the body's scratch (reductions, conversions)
LOAD = "cuda_tile.load_view_tko"
STORE = "cuda_tile.store_view_tko"
# ops with no effect that a load of a group may need lowered before its place
PURE = ("cuda_tile.constant", "cuda_tile.make_partition_view", "cuda_tile.make_tensor_view",
        "cuda_tile.assume", "cuda_tile.join_tokens", "cuda_tile.make_token")


@record(frozen=False)
class RowLoad:
    """A load of a group: its tile's buffer and the one-shot copy that fills it."""
    matrix: SharedMatrix
    shot: tma_copy.OneShot


def _writes(op: Operation) -> bool:
    """Whether `op` (its regions included) may write memory."""
    return any(("store" in o.name or "atomic" in o.name or o.name in ("cuda_tile.print", "cuda_tile.call"))
               for o in op.walk())


def _reads(op: Operation) -> bool:
    return any("load" in o.name or "atomic" in o.name for o in op.walk())


def _rereads(entry: Operation) -> bool:
    """Whether the kernel reduces (reduce, scan) or reads a loaded tile more than once (twice in
    the IR, or broadcast: rope's cos/sin tables over the heads): a row kernel, whose tiles TMA
    brings in while it computes. A purely elementwise kernel passes each tile through registers
    once, and its 16-byte global accesses are as good (NVIDIA's compiler keeps them too)."""
    return any(o.name in ("cuda_tile.reduce", "cuda_tile.scan")
               or (o.name == LOAD and (len(o.results[0].uses) > 1 or _broadcast(o.results[0])))
               for o in entry.walk())


def _broadcast(value: Value) -> bool:
    """Whether `value`, through ops of it alone (conversions, reshapes), is broadcast."""
    for use in value.uses:
        if use.name == "cuda_tile.broadcast":
            return True
        if len(use.operands) == 1 and len(use.results) == 1 and _broadcast(use.results[0]):
            return True
    return False


def _body(k: KernelLowering) -> list[Operation]:
    return list(k.entry.regions[0].block.operations)


def _tile_copy(k: KernelLowering, op: Operation, view: object, tile: TileType
               ) -> tuple[Optional[TmaCopy], SharedMatrix, str]:
    """The copy of `op`'s tile through an unpadded buffer (unplaced), or (None, _, why not)."""
    import math

    shape = tile.shape
    rows = shape[-2] if len(shape) >= 2 else 1
    matrix = SharedMatrix(0, math.prod(shape[:-2]), rows, shape[-1], storage_bytes(tile.element), padded=False)
    if not isinstance(tile.element, ScalarType) or tile.element.bitwidth < 8 \
            or storage_type(tile.element) != _llvm(tile.element):
        return None, matrix, f"{tile.element} elements are not whole bytes"
    t, why = plan(op, matrix, dense=True)
    if t is None:
        return None, matrix, why
    if t.atoms * t.bands > MAX_BOXES:
        return None, matrix, f"{t.atoms * t.bands} boxes, over {MAX_BOXES}"
    return t, matrix, ""


def _llvm(elem: ScalarType) -> str:
    from .llvm_text import llvm_type

    return llvm_type(elem)


def may_copy(k: KernelLowering) -> bool:
    """Whether any of the kernel's accesses may be copied by TMA here (each then `candidate`)."""
    return k.caps.has("row_tma") and k.warp_split is None and _rereads(k.entry)


def candidate(k: KernelLowering, op: Operation) -> bool:
    """A weak view access of a register tile on a TMA target: a load in the kernel's body, a store
    anywhere but in a pipelined loop (whose warps the pipeline may have split)."""
    if not may_copy(k):
        return False
    if op.name == LOAD and op.parent is not k.entry.regions[0].block:
        return False
    if op.name == STORE and any(inside_op(op, loop) for loop, plan in k.pipelines.items() if plan.pipelined):
        return False
    if str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak":
        return False
    value = op.results[0] if op.name == LOAD else op.operand("tile")
    if k.assignment is not None and k.assignment.is_shared_operand(value):
        return False
    return not isinstance(k.layout_of(value), MmaLayout)


# -- loads ------------------------------------------------------------------------------------
def load(k: KernelLowering, op: Operation, view: PartitionViewVal) -> Optional[TileRegs]:
    """`op`'s tile in registers, read from its buffer once its TMA copy landed (issuing the group
    it starts first); None (nothing emitted) where the load is not copied by TMA."""
    held = k.row_loads.get(op)
    if held is None:
        if k.row_groups_closed or op is not group_start(k):
            return None
        k.row_groups_closed = True     # one group: it runs up to the first write, after which none starts
        _issue_group(k, op)
        held = k.row_loads.get(op)
        if held is None:
            return None
    return _read(k, op, held)


def group_start(k: KernelLowering) -> Optional[Operation]:
    """The load whose lowering issues the body's group: the body's first candidate, where no write
    precedes it (the async proxy would read around it); None: no group. (`k` a KernelLowering or,
    for the shared-memory plan, a `StagingFacts`.)"""
    body = _body(k)
    first = next((op for op in body if op.name == LOAD and candidate(k, op)), None)
    if first is None or any(_writes(o) for o in body[:body.index(first)]):
        return None
    return first


def group(k: KernelLowering, first: Operation, used: int, ahead: Callable[[Operation], bool]
          ) -> tuple[list[tuple[Operation, TmaCopy, SharedMatrix]], list[tuple[Operation, str]]]:
    """The group `first` starts: (its loads, each with its copy and unplaced buffer, in order; the
    loads left out and why). Decided for the lowering and the shared-memory plan alike (`k` a
    KernelLowering or a `StagingFacts`): the group takes what is left of the opt-in limit beside
    the `used` shared bytes (the buffers placed before `first`, and the pipelines' reserve) less
    `MARGIN`; `ahead(load)`: makes the operands of a later load available at `first` (the
    lowering lowers the pure ops they need, `pure_ahead`), False where it cannot."""
    budget = k.caps.smem_per_block - used - MARGIN
    body = _body(k)
    chosen: list[tuple[Operation, TmaCopy, SharedMatrix]] = []
    missed: list[tuple[Operation, str]] = []
    for op in body[body.index(first):]:
        if _writes(op):
            break
        if op.name != LOAD or not candidate(k, op):
            continue
        if op is not first and not ahead(op):
            continue
        tile = op.results[0].type
        assert isinstance(tile, TileType)
        t, matrix, why = _tile_copy(k, op, k.get(op.operand("view")), tile)
        if t is None:
            missed.append((op, why))
            continue
        if matrix.nbytes > budget:
            missed.append((op, f"its {matrix.nbytes} bytes do not fit beside the group's in shared memory"))
            continue
        budget -= matrix.nbytes
        chosen.append((op, t, matrix))
    return chosen, missed


def load_lifetime(live: Liveness, first: Operation, op: Operation) -> tuple[int, int]:
    """The lifetime of load `op`'s buffer in the group `first` starts: from the group's issue to
    `op`'s read."""
    return live.position(first), live.op_range(op)[1]


def _issue_group(k: KernelLowering, first: Operation) -> None:
    """Plan, place and issue the copies of the group `first` starts; sets `k.row_loads`."""
    from . import mbarrier, tma_copy

    chosen, missed = group(k, first, k.buffers.total + k.smem_reserve, lambda op: _lower_operands_ahead(k, op))
    for op, why in missed:
        _missed(k, op, why)
    if not chosen:
        return
    fresh = not k.buffers.buffers    # no earlier use of shared memory to wait for
    placed = []
    for op, t, matrix in chosen:
        lifetime = load_lifetime(k.lifetimes(), first, op)
        matrix = replace(matrix, offset=k.alloc_buffer(matrix.nbytes, 128, "staging", lifetime, role="row-load"))
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


def pure_ahead(op: Operation, ready: Callable[[Value], bool]) -> Optional[list[Operation]]:
    """The pure ops of `op`'s block that its operands still need (not `ready`), in the order to
    lower them; None where one is not pure."""
    order: list[Operation] = []

    def need(value: Value) -> bool:
        if ready(value):
            return True
        owner = getattr(value, "owner", None)
        if not isinstance(owner, Operation) or owner.name not in PURE or owner.parent is not op.parent:
            return False
        if owner in order:
            return True
        if not all(need(v) for v in owner.operands):
            return False
        order.append(owner)
        return True

    return order if all(need(v) for v in op.operands) else None


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
def store(k: KernelLowering, op: Operation, tile: TileRegs, view: object) -> bool:
    """Store `tile` to the view of `op` by TMA through a buffer; False (nothing emitted) where it
    cannot (the reason remarked where the view is the obstacle)."""
    t, matrix, why = store_copy(k, op, view, k.buffers.total + k.smem_reserve)
    if t is None:
        if why:
            k.remark("missed", "memory", "RemarkTmaStoreMissed", "Row store not copied by TMA", op, Reason=why)
        return False
    from . import tma_copy
    from .async_copy import fence_async_proxy

    assert matrix is not None
    body = _body(k)
    # a read after the store (in the body, or a loop's next iteration) token-ordered after it is
    # made to wait for the CTA (token_waits.py): the issuing thread must have seen the boxes written
    written = op.parent is not k.entry.regions[0].block or any(_reads(o) for o in body[body.index(op) + 1:])
    t = replace(t, slot=tma_copy.hidden_param(k, t.spec))
    matrix = replace(matrix, offset=k.alloc_buffer(matrix.nbytes, 128, "staging", k.op_lifetime(), role="row-store"))
    k.barrier()    # earlier readers of the buffer's bytes are done
    write_tile(k, matrix, tile)
    fence_async_proxy(k)   # the TMA unit reads the tile through the async proxy
    k.barrier()
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "rt"), lambda: tma_copy.store(k, op, t, matrix, written=written))
    k.remark("passed", "memory", "RemarkMemoryStoreInstructionSelected", "Store instruction selected", op,
             Instruction="TMA store (cp.async.bulk.tensor from shared memory)", Boxes=describe(t))
    return True


def store_copy(k: KernelLowering, op: Operation, view: object, used: int
               ) -> tuple[Optional[TmaCopy], Optional[SharedMatrix], str]:
    """(the copy of store `op`'s tile, its unplaced buffer, "") where TMA stores it (a candidate whose
    buffer fits beside the `used` shared bytes: the buffers placed before it, and the pipelines'
    reserve); else (None, _, why not: "" where nothing is remarked). Decided for the lowering and
    the shared-memory plan alike (`k` a KernelLowering or a `StagingFacts`)."""
    if not candidate(k, op) or not isinstance(view, View):
        return None, None, ""
    tile = op.operand("tile").type
    assert isinstance(tile, TileType)
    t, matrix, why = _tile_copy(k, op, view, tile)
    if t is None:
        return None, matrix, why
    if matrix.nbytes > k.caps.smem_per_block - used:
        return None, matrix, ""
    return t, matrix, ""


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
