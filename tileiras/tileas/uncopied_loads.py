"""Which loads of a pipelined loop no copy engine can stage, left to the threads that run its body.

A pipeline stages a load by cp.async (`access_width.chunk_elements`: its facts prove every 4-, 8- or
16-byte chunk aligned and wholly inside or outside the tensor) or, on a target with TMA, by a TMA box
(`tma_boxes.view_refused`: a 16-byte aligned base, outer strides multiples of 16 bytes). Where some of a
loop's loads can be copied so and others cannot (a ragged operand without a stride fact beside one
with it), the copyable ones stay in the ring and the others are loaded where the IR has them, each
iteration, by the threads that run the loop's body (the consumers, where warps are specialized): as
NVIDIA's compiler does, whose producer warp then only issues the copies and gives its registers back
(setmaxnreg). Without this the whole loop went unpipelined. Where a producer's registers can stage such
tiles instead (`prune`), or none of the loop's loads can be copied, the loop keeps its plan
(`stage_rings.producer_stages`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.core import Operation
from ..ir.types import ScalarType, TileType, storage_bytes
from ..tileaa.access_width import chunk_elements
from ..tileaa.views import view_of
from ..transforms.rewrite import inside_op
from . import tma_boxes

if TYPE_CHECKING:
    from ..schedule.pipeline import PipelinePlan
    from ..target import Caps
    from .assign_layouts import LayoutAssignment


NO_CHUNK = "no fact proves its cp.async chunks aligned and wholly inside or outside the tensor"


def why_uncopied(load: Operation, assignment: "LayoutAssignment") -> str:
    """Why no copy engine can stage `load` ("" where cp.async or TMA can, or where this is not decided
    here: a sub-byte element, a tile read from registers)."""
    tile = load.results[0].type
    view = view_of(load.operand("view"))
    if view is None or not isinstance(tile, TileType) or not isinstance(tile.element, ScalarType) \
            or tile.element.bitwidth < 8 or not assignment.is_shared_operand(load.results[0]):
        return ""
    if chunk_elements(load, view, tile):
        return ""
    if not assignment.caps.has("tma") or not assignment.caps.has("mbarrier_tx"):
        return NO_CHUNK
    why = tma_boxes.view_refused(load, storage_bytes(tile.element))
    return f"{NO_CHUNK}, nor TMA: {why}" if why else ""


def producer_warpgroup_loads(caps: "Caps", threads: int, occupancy_hint: int, crowded: bool = False) -> bool:
    """Whether a producer warpgroup of its own may stage a pipeline's tiles that no copy can, element by
    element through its registers: on a target with warp roles, beside one consumer warpgroup
    (`threads`) and one CTA an SM, or two where those tiles would crowd the consumers (`crowds`; stage_rings.
    producer_stages says why not otherwise)."""
    return caps.has("tma") and threads <= 128 and (occupancy_hint <= 1 or occupancy_hint == 2 and crowded)


def crowds(loop: Operation, loads: "tuple[Operation, ...]", assignment: "LayoutAssignment") -> bool:
    """Whether the tiles of `loads` no copy can stage, loaded by the threads of the loop's body one element a
    register, take more than a thread's 255 registers beside the accumulators of the loop's mmas: then a
    producer warpgroup loading them is worth the consumers' share of two CTAs an SM (184 registers beside it:
    warp_roles.SHARED_LOADS_REGISTERS). An e4m3 attention at d = 128 without facts (K and V 128 x 128, 128
    elements a thread each, beside S and O): 745 spill instructions unspecialized on sm_90, 10 so; an MLA
    decode's bf16 latent cache without facts: none unspecialized, 84 so."""
    threads = assignment.threads
    held = sum(-(-load.results[0].type.num_elements // threads) for load in loads if why_uncopied(load, assignment))
    accumulators = sum(-(-op.results[0].type.num_elements * max(1, storage_bytes(op.results[0].type.element) // 4)
                         // threads) for op in loop.walk() if op in assignment.mma_shapes)
    return held + accumulators > 255


def prune(plan: "PipelinePlan", assignment: "LayoutAssignment", occupancy_hint: int
          ) -> "tuple[PipelinePlan, dict[Operation, str]]":
    """`plan` with only the loads a copy can stage, rescheduled, and the loads left to the body with why.
    `plan` itself where every load or none can be copied, or where the loads no copy can stage can still
    go through a producer's registers (stage_rings.producer_stages): a producer warpgroup of its own may
    (`producer_warpgroup_loads`), or the loop's mma is a tcgen05.mma, which one thread of an MMA warp
    issues while the epilogue warps, idle meanwhile, stage them (a block scale: stage_rings.stageable)."""
    if producer_warpgroup_loads(assignment.caps, assignment.threads, occupancy_hint,
                                crowds(plan.loop, plan.loads, assignment)) or \
            any(inside_op(op, plan.loop) for op in assignment.tcgen05_layouts):
        return plan, {}
    left = {load: why for load in plan.loads if (why := why_uncopied(load, assignment))}
    if not left or len(left) == len(plan.loads):
        return plan, {}
    from ..schedule.pipeline import schedule_loads

    kept = tuple(load for load in plan.loads if load not in left)
    return schedule_loads(plan.loop, kept, assignment), left
