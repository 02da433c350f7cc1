"""The tcgen05 (sm_100 / sm_103) buffers of `plan-shared-memory`, predicted with the staging roles.

Called from `shared_stages.predict`'s walk (so only in the kernels it predicts), each decided by
the lowering's own function, given the kernel as the nv_tileas level knows it (`StagingFacts`):

* "tmem-stages": the per-stage restaged scales of the block-scaled mma a warp-specialized loop's
  MMA warp issues (tcgen05_buffers.scale_stage), asked by the MMA warp, times the depth;
* "p-buffer": attention's P where it does not go to tensor memory (M = 64,
  tcgen05_buffers.p_matrix), asked by the attention's MMA warp, alive through the loop;
* "tmem-epilogue": the swizzled buffer the epilogue warps write the accumulator's column chunks
  into for one TMA store (tcgen05_roles.chunked, asked from the split loop), or attention's O
  (tcgen05_roles.fragments_staged, asked by its store); whether it is used at all is decided
  beside the buffers placed before it (tcgen05_buffers.tma_stage: the first fit over the store
  must stay under the target's limit), so it is decided here beside the plan's placement;
* "scales": the restaged scales of a block-scaled tcgen05 mma the threads issue
  (ops_blockscale.Tcgen05Scales);
* "fp4-pack": the packed operands of a 4-bit mma (mma_sync_staging.packed_matrix), tcgen05's or sm_120's
  mma.sync's, asked with the operands' staging, so predicted with them (shared_operands.py) and
  covered with the roles here;
* and the specialized attention's handshake "mbarriers" (tcgen05_buffers.HANDSHAKE), asked
  with the stages' mbarriers.

Which mmas the split loop's MMA warp issues is known only once its copies are (a specialized
attention whose loads TMA cannot all copy is issued by its consumers:
settled_split.settle), so the split is settled here as plan-shared-memory then settles it
(settled_split.settled); so are the mmas that MMA warp issues, which ask for nothing
at the op (`issued_by_mma_warp`).

The order of an op's requests (`Request.late`): a warp-specialized loop asks for its stages and
mbarriers (0), then its MMA warp for its own buffers (`MMA_WARP`), tensor memory's control block
(`CONTROL_AT_LOOP`), then its epilogue warps (`EPILOGUE`); a tcgen05 mma the threads issue for
tensor memory's control block (its region's address, first: shared_sizes.tmem_control) and its
operands' buffers (0: shared_operands.py, A's staging and packing, then B's), its scale tiles
staged (`SCALE_TILES`: ops_blockscale._Scales, "mma-stage", shared_operands.py) and their
restaging (`SCALES`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir.core import Operation
from ..target import caps
from .shared_plan import Request, place

if TYPE_CHECKING:
    from ..schedule.buffers import BufferAssignment
    from .buffers import Liveness
    from .shared_stages import StagingFacts

ROLES = ("tmem-stages", "p-buffer", "tmem-epilogue", "scales", "fp4-pack")
MMA_WARP, CONTROL_AT_LOOP, EPILOGUE = 1, 2, 3      # `Request.late` at a warp-specialized loop
SCALE_TILES, SCALES = 1, 2                          # ...at a tcgen05 mma the threads issue
_STORE = "cuda_tile.store_view_tko"
ASKERS = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled", _STORE)   # the ops `at_op` sizes


def at_loop(facts: "StagingFacts", loop: Operation, ring: Any, fitted: "BufferAssignment", asked: list[Request],
            live: "Liveness", taken: int, stages: dict) -> list[Request]:
    """What the pipelined `loop` (`ring`, `fitted.stages` deep) asks for after its stages and their
    mbarriers where it is warp-specialized with an MMA warp (as the split is `settled`): the
    attention's handshake mbarriers (tcgen05_buffers.HANDSHAKE, with the stages'), its MMA
    warp's buffers, then its epilogue's. `asked`: the requests planned so far (those placed before
    these: the ops' before the loop and the loop's own); `taken`: the bytes besides the buffers
    (allocas, the room reserved); `stages`: store -> its TMA copy and buffer (`_tma_stage`), filled."""
    unsettled = facts.warp_split      # settling keeps its loop and may only drop its mmas
    if unsettled is None or unsettled.loop is not loop or not unsettled.mmas:
        return []
    from ..schedule.buffers import MBARRIER_BYTES
    from .settled_split import settled
    from .tcgen05_roles import scaled_mma
    from .tcgen05_buffers import HANDSHAKE, P_ALIGN, SCALES_ALIGN, STAGE_ALIGN, p_matrix, scale_stage

    split: Any = settled(facts)
    if split is None or split.loop is not loop or not split.mmas:
        return []
    if split.form == "attention":     # the handshake (published with the stages), then P's buffer
        out = [Request(loop, "mbarriers", "buffer", len(HANDSHAKE) * MBARRIER_BYTES, MBARRIER_BYTES,
                       subject="handshake")]
        matrix = p_matrix(facts, split.mmas[-1])  # type: ignore[arg-type]
        if matrix is not None:
            out.append(Request(loop, "p-buffer", "restaging", matrix.nbytes, P_ALIGN, matrix.span,  # type: ignore
                               live.op_range(loop), late=MMA_WARP))
        return out
    out = []
    scaled = scaled_mma(facts)
    if scaled is not None:
        out.append(Request(loop, "tmem-stages", "buffer", fitted.stages * scale_stage(facts, scaled)[0],  # type: ignore
                           SCALES_ALIGN, late=MMA_WARP))
    store = chunked_store(facts, loop, ring)
    if store is None:
        return out
    layout = facts.assignment.tcgen05_layouts[split.mmas[0]]
    at = live.position(loop)
    before = [r for r in asked if live.position(r.op) <= at] + out     # (the loop's body: the other roles')
    staged = _tma_stage(facts, store, layout, before, live, taken, stages)
    if staged is not None:
        out.append(Request(loop, "tmem-epilogue", "epilogue", staged[1].nbytes, STAGE_ALIGN, 0,
                           live.op_range(store), late=EPILOGUE))
    return out


def chunked_store(facts: "StagingFacts", loop: Operation, ring: Any) -> Optional[Operation]:
    """The store after `loop` that its MMA warp's epilogue lowers itself, column chunk by chunk
    (tmem_epilogue.lower: no epilogue of its own, shared_epilogue.py), or None."""
    unsettled = facts.warp_split      # settling keeps its loop and may only drop its mmas
    if unsettled is None or unsettled.loop is not loop or not unsettled.mmas:
        return None
    from .settled_split import settled
    from .tcgen05_roles import chunked

    split: Any = settled(facts)
    if split is None or split.loop is not loop or split.form == "attention" or len(split.mmas) != 1:
        return None
    found = chunked(loop, facts.assignment.tcgen05_layouts[split.mmas[0]], ring.pair is not None)
    return found[2] if found is not None else None


def issued_by_mma_warp(facts: "StagingFacts", op: Operation, fits: dict) -> bool:
    """Whether tcgen05 mma `op` is issued by its split loop's MMA warp (as the split is `settled`,
    the loop pipelined: `fits`, as `at_op`), which asks for nothing at the op."""
    from .settled_split import settled

    split: Any = settled(facts)
    return split is not None and op in split.mmas and split.loop in fits and bool(fits[split.loop][1].stages)


def at_op(facts: "StagingFacts", op: Operation, fits: dict, asked: list[Request], live: "Liveness",
          taken: int, stages: dict) -> list[Request]:
    """What `op` of `ASKERS` asks for: a tcgen05 mma the threads issue, its restaged scales (its
    operands' buffers: shared_operands.py); attention's O stored by TMA, its buffer (`fits`: the
    depths planned so far, pipelined loop -> (bytes before it, its BufferAssignment); `asked`,
    `taken`, `stages`: as `at_loop`)."""
    out: list[Request] = []
    layouts = getattr(facts.assignment, "tcgen05_layouts", None) or {}
    if op not in layouts and not facts.caps.has("tcgen05"):
        return out     # neither a tcgen05 mma nor a store of its fragments (tcgen05_roles.fragments_staged)
    from .settled_split import settled
    from ..tileaa.mma_forms import sf_cells, tcgen05_sf_bytes
    from .tcgen05_buffers import SCALES_ALIGN, STAGE_ALIGN
    from .tcgen05_roles import fragments_staged

    if op in layouts:
        if issued_by_mma_warp(facts, op, fits):
            return out
        _, m, n = layouts[op].shape
        if op.name == "cuda_tile.mmaf_scaled":
            out.append(Request(op, "scales", "buffer", tcgen05_sf_bytes(m, n, sf_cells(op)), SCALES_ALIGN,
                               late=SCALES))
        return out
    if op.name != _STORE or str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak" or facts.get(op.operand("view")) is None:  # type: ignore
        return out
    layout = facts.layout_of(op.operand("tile"))  # type: ignore[arg-type]
    if not fragments_staged(facts, op, layout, settled(facts)):  # type: ignore[arg-type]
        return out
    at = live.position(op)
    staged = _tma_stage(facts, op, layout, [r for r in asked if live.position(r.op) < at], live, taken, stages)
    if staged is not None:
        out.append(Request(op, "tmem-epilogue", "epilogue", staged[1].nbytes, STAGE_ALIGN, 0, live.op_range(op)))
    return out


def pairs_run(facts: "StagingFacts") -> bool:
    """Whether every mma whose accumulator is in a CTA pair's layout (layout/encodings.PairAccLayout) runs
    as the pair (its K loop's ring has the pair: cta_pairs.plan): then no accumulator goes through the
    pair layout by a conversion ("pair-conversion", ops_tcgen05._transfer_alone) and the plan
    predicts none; where one runs alone, the role is left to the lowering."""
    layouts = getattr(facts.assignment, "tcgen05_layouts", None) or {}
    if not layouts:
        return True
    from ..layout.encodings import PairAccLayout
    from ..tileaa.mma_operands import resident_loop
    from .stage_rings import ring_of

    for op, layout in layouts.items():
        if not isinstance(layout, PairAccLayout):
            continue
        found = resident_loop(op)
        ring = ring_of(facts, found[0]) if found is not None else None
        if ring is None or ring.pair is None or ring.pair.mma is not op:
            return False
    return True


def _tma_stage(facts: "StagingFacts", store: Operation, layout: Any, before: list[Request],
               live: "Liveness", taken: int, stages: dict) -> Optional[Any]:
    """tcgen05_buffers.tma_stage's copy and (unplaced) buffer for `store`, beside the requests `before`
    placed and `taken` other bytes; recorded in `stages` (`SharedPlan.tma_stages`, which the lowering
    reads: lowering/tmem_epilogue.py)."""
    from .tcgen05_buffers import tma_stage

    placed = place(before, facts.entry)
    lifetime = live.op_range(store)
    found = tma_stage(facts, store, layout, lambda nbytes, align: placed.first_fit(nbytes, align, *lifetime),  # type: ignore
                      caps(facts.sm).smem_per_block - taken)
    stages[store] = found
    return found
