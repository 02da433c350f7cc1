"""Which of a row kernel's register tiles TMA moves (sm_90+), decided before any lowering: the
loads of the body's first group and the stores (lowering/row_tma.py issues them, and explains the
form); the shared-memory plan (shared_rows.py) sizes their buffers from the same answers.

Only kernels that reduce or read a loaded tile more than once (`_rereads`) take it: an elementwise
kernel keeps its 16-byte global accesses, as NVIDIA's does. A load joins the group its body's first
candidate load starts (`group_start`, `group`) up to the first op that may write memory, while its
buffer fits beside the bytes placed before it less `MARGIN`; a store is copied where its buffer
fits (`store_copy`). Both need the view's tensor map to be made at launch and boxes of whole
16-byte rows (tma_boxes.plan, dense), at most `MAX_BOXES` a tile.

`k` is the kernel as the plan (`StagingFacts`) or the lowering sees it: its target, body,
pipelines, warp split and layouts.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Optional

from ..ir.core import Operation, Value
from ..ir.types import ScalarType, TileType, storage_bytes
from ..layout.encodings import MmaLayout
from ..layout.shared_matrix import SharedMatrix
from ..tileaa.views import view_of
from .buffers import LOOPS, Liveness
from .tma_boxes import TmaCopy, plan

if TYPE_CHECKING:
    from .shared_stages import StagingFacts

MAX_BOXES = 64          # boxes per tile (NVIDIA's 16k-column rows: 64 boxes of 256)
MARGIN = 4096           # shared bytes a group leaves for the body's scratch (reductions, conversions)
LOAD = "cuda_tile.load_view_tko"
REDUCING = ("cuda_tile.reduce", "cuda_tile.scan", "cuda_tile.atomic_rmw_tko", "cuda_tile.atomic_red_view_tko")
STORE = "cuda_tile.store_view_tko"
# ops with no effect that a load of a group may need lowered before its place
PURE = ("cuda_tile.constant", "cuda_tile.make_partition_view", "cuda_tile.make_tensor_view",
        "cuda_tile.assume", "cuda_tile.join_tokens", "cuda_tile.make_token")


def _writes(op: Operation) -> bool:
    """Whether `op` (its regions included) may write memory."""
    return any(("store" in o.name or "atomic" in o.name or o.name in ("cuda_tile.print", "cuda_tile.call"))
               for o in op.walk())


def _rereads(entry: Operation) -> bool:
    """Whether the kernel reduces (reduce, scan, or atomics into memory: an index_add) or loops and
    reads a loaded tile more than once (twice in the IR, or broadcast): its tiles TMA brings in
    while it computes. A kernel that maps its tiles once through (elementwise, rope, gathers and
    scatters: no loop, no reduction) keeps its 16-byte global accesses, as NVIDIA's does, rereading
    a tile (rope's halves) or broadcasting one (rope's tables, a bias row) or not: nothing would
    overlap the copies."""
    ops = list(entry.walk())
    if any(o.name in REDUCING for o in ops):
        return True
    return any(o.name in LOOPS for o in ops) and \
        any(o.name == LOAD and (len(o.results[0].uses) > 1 or _broadcast(o.results[0])) for o in ops)


def _broadcast(value: Value) -> bool:
    """Whether `value`, through ops of it alone (conversions, reshapes), is broadcast."""
    for use in value.uses:
        if use.name == "cuda_tile.broadcast":
            return True
        if len(use.operands) == 1 and len(use.results) == 1 and _broadcast(use.results[0]):
            return True
    return False


def _body(k: "StagingFacts") -> list[Operation]:
    return list(k.entry.regions[0].block.operations)


def _tile_copy(op: Operation, tile: TileType) -> tuple[Optional[TmaCopy], SharedMatrix, str]:
    """The copy of `op`'s tile through an unpadded buffer (unplaced), or (None, _, why not)."""
    shape = tile.shape
    rows = shape[-2] if len(shape) >= 2 else 1
    matrix = SharedMatrix(0, math.prod(shape[:-2]), rows, shape[-1], storage_bytes(tile.element), padded=False)
    if not isinstance(tile.element, ScalarType) or tile.element.bitwidth < 8:
        return None, matrix, f"{tile.element} elements are not whole bytes"
    t, why = plan(op, matrix, dense=True)
    if t is None:
        return None, matrix, why
    if t.atoms * t.bands > MAX_BOXES:
        return None, matrix, f"{t.atoms * t.bands} boxes, over {MAX_BOXES}"
    return t, matrix, ""


def may_copy(k: "StagingFacts", store: bool = False) -> bool:
    """Whether any of the kernel's accesses (`store`: its stores) may be copied by TMA here (each then
    `candidate`). A warp-specialized kernel's loads are its producer's; its consumers may store."""
    return k.caps.has("row_tma") and (store or k.warp_split is None) and _rereads(k.entry)


def candidate(k: "StagingFacts", op: Operation) -> bool:
    """A weak view access of a register tile on a TMA target: a load in the kernel's body, a store
    anywhere: in a pipelined loop its threads meet at the store's CTA barriers each iteration (the
    ring's own waits are mbarriers' or cp.async groups', which bulk groups do not count), in the
    warp-specialized loop (or the persistent loop around it) the consumers store, their barriers named
    (NVIDIA's norms and softmaxes store their rows by TMA in their last loop, pipelined or not)."""
    if not may_copy(k, op.name == STORE):
        return False
    if op.name == LOAD and op.parent is not k.entry.regions[0].block:
        return False
    if str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak":
        return False
    value = op.results[0] if op.name == LOAD else op.operand("tile")
    if k.assignment is not None and k.assignment.is_shared_operand(value):
        return False
    return not isinstance(k.layout_of(value), MmaLayout)


def group_start(k: "StagingFacts") -> Optional[Operation]:
    """The load whose lowering issues the body's group: the body's first candidate, where no write
    precedes it (the async proxy would read around it); None: no group. (`k` a KernelLowering or,
    for the shared-memory plan, a `StagingFacts`.)"""
    body = _body(k)
    first = next((op for op in body if op.name == LOAD and candidate(k, op)), None)
    if first is None or any(_writes(o) for o in body[:body.index(first)]):
        return None
    return first


def group(k: "StagingFacts", first: Operation, used: int, ahead: Callable[[Operation], bool]
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
        t, matrix, why = _tile_copy(op, tile)
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


def store_copy(k: "StagingFacts", op: Operation, used: int) -> tuple[Optional[TmaCopy], Optional[SharedMatrix], str]:
    """(the copy of store `op`'s tile, its unplaced buffer, "") where TMA stores it (a candidate whose
    buffer fits beside the `used` shared bytes: the buffers placed before it, and the pipelines'
    reserve); else (None, _, why not: "" where nothing is remarked). Decided for the lowering and
    the shared-memory plan alike (`k` a KernelLowering or a `StagingFacts`)."""
    if not candidate(k, op) or view_of(op.operand("view")) is None:
        return None, None, ""
    tile = op.operand("tile").type
    assert isinstance(tile, TileType)
    t, matrix, why = _tile_copy(op, tile)
    if t is None:
        return None, matrix, why
    if matrix.nbytes > k.caps.smem_per_block - used:
        return None, matrix, ""
    return t, matrix, ""
