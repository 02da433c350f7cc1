"""The sizing functions of `plan-shared-memory`: per buffer role, the requests the lowering will make.

Each function reads the IR, the layouts and the `KernelPlan` only (no LLVM), and decides as the
lowering does by calling the same predicates (`move_forms.broadcast_form`,
`move_forms.conversion_form`, ...), so that one place says which form an op takes.

`ROLES` lists every role the lowering asks buffers for (the `role` of `alloc_buffer` at its call
sites); `SIZERS` the ones predicted in every kernel of the corpus. The staged loads, the rings,
their mbarriers and the loops' K-major copies are predicted only where exact (`shared_stages.py`
says which kernels are not), so they are not SIZERS; nor are the roles decided beside the buffers
placed before them, predicted with the staging roles, which the plan reads from its own placement
of the requests before the op: a row group's TMA budget, a row store's ("row-load", "row-store",
shared_rows.py), a reduce's scratch sliced to fit beside them ("reduction"), an epilogue's
restaging or TMA store ("restage", "tma-store", shared_epilogue.py), the tcgen05 buffers
(shared_tcgen05.py: sized by a loop's depth, or fitted beside the buffers placed before them), an
mma's operands restaged, sliced, packed or copied K-major ("mma-stage", "mma-slice", "k-slice",
"fp4-pack", "kmajor-copy", shared_operands.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.core import Operation, Value
from ..ir.types import TileType
from .buffers import lifetimes
from .shared_plan import Request, Sizer

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment

# every role of `KernelLowering.alloc_buffer`'s call sites, by kind
ROLES = (
    "conversion", "store-conversion", "operand-conversion",   # conversion scratch (kernel.py)
    "pair-conversion",                                  # a CTA pair's accumulator, its CTA alone (ops_tcgen05)
    "reduction", "warp-reduction",                      # reduce / scan / pack scratch (ops_reduce, warp_reduce)
    "staging", "k-slice", "invariant", "row-load", "row-store",   # staged loads and stores
    "ring",                                             # a pipeline's stages
    "mbarriers",                                        # mbarrier arrays
    "mma-stage", "mma-slice", "p-buffer", "fp4-pack",   # restaged mma operands
    "kmajor", "kmajor-copy",                            # K-major copies: a loop's, an op's own
    "restage", "tma-store", "tmem-epilogue",            # epilogue restaging
    "scales", "tmem-stages", "tmem-control",            # tcgen05 block scales, stages, tensor memory
)


def _layout_of(value: Value, assignment: "LayoutAssignment") -> object:
    return value.layout if value.layout is not None else assignment.blocked


def _exchanged(op: Operation, assignment: "LayoutAssignment") -> list[Value]:
    """The tiles `op` moves between threads through conversion scratch (KernelLowering.exchange /
    convert), as its lowering decides; [] where it moves none."""
    from .move_forms import broadcast_form, conversion_form, extract_form
    from .ops import CONVERT_LAYOUT

    result = op.results[0] if op.results else None
    if op.name == CONVERT_LAYOUT:
        form = conversion_form(op, _layout_of(op.operands[0], assignment), _layout_of(result, assignment))
        return [op.operands[0]] if form == "exchange" else []
    if op.name == "cuda_tile.broadcast":
        form = broadcast_form(op.operands[0].type, result.type, _layout_of(op.operands[0], assignment),  # type: ignore[arg-type]
                              _layout_of(result, assignment), assignment.blocked.vec)  # type: ignore[union-attr]
        return [op.operands[0]] if form == "exchange" else []
    if op.name == "cuda_tile.permute":   # a staged mma operand is read the other way round instead
        return [] if assignment.is_shared_operand(op.operands[0]) else [op.operands[0]]
    if op.name == "cuda_tile.extract":
        source = op.operand("source")
        form = extract_form(op, _layout_of(source, assignment), _layout_of(result, assignment))  # type: ignore[arg-type]
        return {"exchange": [source], "window": [result], "in-place": []}[form]  # type: ignore[list-item]
    if op.name == "cuda_tile.cat":
        return list(op.operands[:2])
    if op.name == "cuda_tile.insert":
        return [op.operands[1], op.operands[0]]
    return []


def _tile_bytes(values: list[Value]) -> int:
    from ..ir.types import storage_bytes

    total = 0
    for value in values:
        t = value.type
        assert isinstance(t, TileType)
        total += t.num_elements * storage_bytes(t.element)
    return total


def conversion(entry: Operation, assignment: "LayoutAssignment") -> list[Request]:
    """Conversion scratch: every element of the moved tiles at its row-major index, alive while the
    op runs, 16-byte aligned (KernelLowering.scratch: one buffer per op). A permute's swizzle
    (scratch_swizzle.py) moves chunks within 128-byte blocks only: the same bytes."""
    live = lifetimes(entry)
    out: list[Request] = []
    for op in entry.walk():
        moved = _exchanged(op, assignment)
        if moved:
            out.append(Request(op, "conversion", "conversion", _tile_bytes(moved), 16, 0, live.op_range(op)))
    return out


def warp_reduction(entry: Operation, assignment: "LayoutAssignment") -> list[Request]:
    """The partials of a reduce whose rows span several warps (warp_reduce._across_warps), alive
    while it runs."""
    from ..layout.encodings import RowWarpLayout
    from .move_forms import across_warps_scratch

    live = lifetimes(entry)
    out: list[Request] = []
    for op in entry.walk():
        if op.name != "cuda_tile.reduce" or assignment.mma_rows(op) or not assignment.in_warps(op):
            continue
        layout = _layout_of(op.operands[0], assignment)
        if isinstance(layout, RowWarpLayout) and layout.wpr > 1:
            nbytes = across_warps_scratch(layout, [v.type for v in op.operands])[1]  # type: ignore[misc]
            out.append(Request(op, "warp-reduction", "reduction", nbytes, 16, 0, live.op_range(op)))
    return out


def tmem_control(entry: Operation, assignment: "LayoutAssignment") -> list[Request]:
    """Tensor memory's mbarrier and address slot, once per kernel whose mmas run on tcgen05, asked
    by the op that first needs tensor memory (tcgen05_buffers.first_asker), alive from there to the kernel's
    end (tmem.tensor_memory)."""
    if not getattr(assignment, "tcgen05_layouts", None):
        return []      # no mma on tcgen05 (first_asker: None)
    from .tcgen05_buffers import CONTROL_BYTES, first_asker
    from .plan import plan_of
    from .shared_tcgen05 import CONTROL_AT_LOOP

    asker = first_asker(entry, assignment)
    if asker is None:
        return []
    split = plan_of(assignment).warp_split     # its MMA warp asks after the loop's stages and its own buffers
    late = CONTROL_AT_LOOP if split is not None and asker is split.loop else 0
    return [Request(asker, "tmem-control", "tmem", CONTROL_BYTES, 128, late=late)]


SIZERS: tuple[tuple[str, Sizer], ...] = (
    ("conversion", conversion),
    ("warp-reduction", warp_reduction),
    ("tmem-control", tmem_control),
)
