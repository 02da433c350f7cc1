"""The staged loads, pipeline rings and their mbarriers of `plan-shared-memory`, and each pipeline's depth.

A pipelined loop's depth (`pipelined_loop.fit`: its stages fitted beside the shared memory taken
before it) is decided here, in program order, from the buffers the plan placed before the loop;
the lowering reads it (`pipelined_loop.planned_fit`). What a loop's stages hold
(`stage_rings.ring_of`) and whether a load is staged whole (`async_copy.load_to_shared`) or
copied once by TMA (`pipelined_loop.load_invariant`) are decided by the lowering's own functions,
given the kernel as the nv_tileas level knows it (`StagingFacts`: the views' facts, no LLVM).

Predicted, per kernel, where exact: the roles "staging", "invariant", "ring", "mbarriers",
"kmajor", "reduction", "row-load", "row-store", "restage" and "tma-store", with the tcgen05 buffers
the walk asks `shared_tcgen05.py` for at each loop (after its stages: a warp-specialized loop's MMA
warp's and epilogue's) and at each mma and store ("tmem-stages", "p-buffer", "tmem-epilogue",
"scales"), together, or none of them (the row kernels' TMA buffers and their group's
mbarriers by `shared_rows.py`, from the decisions the lowering follows, `row_copies.group` and
`row_copies.store_copy`, each beside the bytes the plan placed before its op; "reduction" left out of
a kernel where another op than a reduce, a scan or an mma asks for one the plan does not size,
`reductions_predicted`; "restage" and "tma-store", the buffer an mma accumulator's store goes
through, decided in the op walk by shared_epilogue.py); with them, in the walk, what each op asks for its operands
(shared_operands.py: an mma's "mma-stage", "mma-slice", "k-slice", a 4-bit mma's "fp4-pack", an
FMA mma's, a pack's and a gather's "reduction", a transposed operand's "operand-conversion",
decided beside the buffers the plan placed before it). "reduction": the scratch a reduce or scan
whose rows are not in warps folds through (`move_forms.reduce_scratch`, which decides for both: a
reduce's scratch goes in slices where the whole would not fit beside the buffers alive at it, so
it is decided beside the buffers the plan placed before it; where the lowering placed others, an
unplanned role's, the sizes may differ and the check says so). "kmajor": the K-major copy buffers
a loop asks for before its stages (sm_90's wgmma operands copied K-major, `kmajor_copies.loop_copies`,
decided here and recorded for the lowering, `SharedPlan.kmajor`, in every kernel: a copy of B may be
made in halves where whole copies leave no room for two stages, so they are decided beside the bytes
the plan placed before the loop). The
K-major copies an op makes for itself ("kmajor-copy": outside loops, register tiles, tcgen05's
tf32 restaging, which its outermost loop asks for before its stages) are predicted by
shared_operands.py.
In the last-resort lowering (`Assumptions.defer`) a load too large to stage whole beside the
buffers alive with it is left to its mma (deferred_loads.defers decides, beside the buffers the plan
placed before the load): no "staging", its mma's K slices instead ("k-slice", shared_operands.py).
Every view a load or store reads is one `tileaa/views.view_of` knows: the verifier lets no view cross
control flow, and infer-facts gives every tensor view its facts.

The warp split's form is the one the lowering settles on once the split loop's copies are known
(settled_split.settled: an attention whose loads TMA cannot all copy has no MMA warp,
hence no handshake). A loop's depth is the plan's in every kernel (the lowering fits none), and so
is every buffer: its offset, size, alignment, swizzle and lifetime (shared_plan.PlanReader.buffer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..ir.core import Operation, Value
from ..ir.record import record
from ..target import Caps, caps
from ..tileaa.access_width import staged_copy
from ..tileaa.allocas import alloca_bytes
from ..tileaa.views import view_of
from . import shared_rows
from .buffers import lifetimes
from .plan import plan_of
from .warp_roles import occupancy_share, ring_loop
from .shared_epilogue import ROLES as EPILOGUE, STORES, requests as epilogue
from .shared_plan import Assumptions, Request, place
from .shared_tcgen05 import ROLES as TCGEN05

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment
    from .kmajor_copies import LoopCopy

ROLES = ("staging", "invariant", "ring", "mbarriers", "kmajor", "reduction") + shared_rows.ROLES + EPILOGUE + TCGEN05
LOAD = "cuda_tile.load_view_tko"
REDUCE_LIKE = ("cuda_tile.reduce", "cuda_tile.scan")


@record(frozen=False)
class StagingFacts:
    """The attributes of `lowering.kernel.KernelLowering` that the staging decisions read, as the
    nv_tileas level knows them: a view is its facts (`tileaa/views.view_of`), nothing is lowered yet."""
    entry: Operation
    sm: int
    threads: int
    assignment: "LayoutAssignment"
    pipelines: dict
    warp_split: Any
    pad_buffers: bool
    wgmma_buffers: dict
    kmajor_slots: dict
    matrices: Any = None     # id of a load staged for the tensor cores -> (its matrix, the loop whose ring holds it)
    restaged: Any = None     # tf32 tcgen05 mmas given their K-major copy buffers (shared_operands.loop_copies)
    in_share: bool = True    # rings may take one stage to stay in the occupancy hint's share (Assumptions.in_share)

    @property
    def caps(self) -> "Caps":
        """What the target has (tileiras/target/table.py)."""
        return caps(self.sm)

    def layout_of(self, value: Value) -> Any:
        return value.layout if value.layout is not None else self.assignment.blocked

    def get(self, value: Value) -> Any:
        return view_of(value)


def staging_facts(entry: Operation, assignment: "LayoutAssignment", split: Any, padded: bool) -> StagingFacts:
    """The kernel as the staging decisions see it under warp split `split`, its tiles `padded` or not, before any
    buffer is placed."""
    return StagingFacts(entry, assignment.sm, assignment.threads, assignment, plan_of(assignment).pipelines, split,
                        padded, {}, {}, {}, set())


@record(frozen=False)
class Predicted:
    """What `predict` sizes and decides."""
    requests: list          # of `ROLES`
    fits: dict              # pipelined loop -> (the shared memory taken before its stages, its fit)
    pairs_run: bool         # every CTA pair layout's mma runs as the pair (shared_tcgen05.pairs_run)
    rings: dict             # loop with a pipeline plan -> its stage_rings.StageRing or None, as the walk
                            # meets it (the K-major copies given so far deciding its `retiring`)
    kmajor: dict            # every loop -> the K-major copies it gives its wgmmas (`_loop_copies`)
    epilogues: dict         # store -> its epilogue (shared_epilogue.requests)
    tma_stages: dict        # store of tensor memory's fragments -> its TMA copy and buffer (shared_tcgen05)
    slices: dict            # reduce, scan or mma -> the slices its scratch or its staged operands go in
                            # (`_reduction`, shared_operands.requests)
    deferred: set           # the loads left to their mma in the last resort (shared_operands.deferred)
    packed: set             # the fp4 mma.syncs that pack their operands (shared_operands.requests)
    row_groups: dict        # the body's first row TMA load -> its group (shared_rows.RowGroup)
    row_stores: dict        # a candidate row store -> its TMA copy, buffer, why not (row_copies.store_copy)
    share: int = 0          # the occupancy hint's share of an SM (warp_roles.occupancy_share)


def predict(entry: Operation, assignment: "LayoutAssignment", others: list[Request],
            assumes: Assumptions) -> "Predicted":
    """The requests of `ROLES` and what the plan decided with them, as the walk meets each op. `others`:
    the requests of the other roles."""
    from ..layout.shared_matrix import matrix_shape
    from ..schedule.buffers import MBARRIER_BYTES
    from . import shared_tcgen05 as tcgen05
    from . import shared_operands
    from .shared_operands import PACKED, asks, deferred, loop_copies as tf32_copies, requests as operand_requests

    kplan = plan_of(assignment)
    split = kplan.warp_split
    facts = staging_facts(entry, assignment, split, assumes.padded)
    facts.in_share = assumes.in_share
    live = lifetimes(entry)
    found = Predicted(requests=[], fits={}, pairs_run=True, rings={}, kmajor={}, epilogues={}, tma_stages={},
                      slices={}, deferred=set(), packed=set(), row_groups={}, row_stores={},
                      share=occupancy_share(facts))
    rows = shared_rows.Rows(facts, found.row_groups, found.row_stores)
    out, fits, rings, kmajor = found.requests, found.fits, found.rings, found.kmajor
    epilogues, tma_stages, sliced = found.epilogues, found.tma_stages, found.slices
    ringed: set[int] = set()
    lowered_ahead: set[int] = set()   # stores a loop's epilogue lowers (tmem_epilogue.lower)
    left: dict = {}        # id of a load left to its mma (the last resort) -> its view's facts
    allocas = 0
    scratch = reductions_predicted(entry, assignment)
    roles = (("reduction",) if scratch else ()) + shared_operands.ROLES + (PACKED,)
    for op in entry.walk():
        out += rows.requests(op, others + out, assumes.reserve)
        if op.name == "cuda_tile.alloca":
            allocas += alloca_bytes(op)
        elif op.name in REDUCE_LIKE and not assignment.mma_rows(op) and not assignment.in_warps(op):
            before = [r for r in others + out if live.position(r.op) < live.position(op)]
            request, sliced[op] = _reduction(op, place(before, entry), live.op_range(op),
                                             caps(assignment.sm).smem_per_block - allocas)
            if scratch:
                out.append(request)
        elif op.name == "cuda_tile.for":
            pipeline = kplan.pipelines.get(op)
            before = [r for r in others + out if live.position(r.op) < live.position(op)]
            taken = place(before, entry).total + allocas + assumes.reserve
            given = kmajor[op] = _loop_copies(facts, op, taken)
            copies = [_kmajor_request(op, copy) for copy in given] + tf32_copies(facts, op, live)
            out += copies
            if pipeline is None:
                continue
            from .stage_rings import fit_beside, ring_of, uses_mbarriers
            from .warp_roles import frees_barriers

            ring = rings[op] = ring_of(facts, op)
            if ring is None or not ring.plan.pipelined:
                continue
            # and what the loop asks for before its stages (tcgen05's before_loop: tensor memory's control block)
            asked = [r for r in others if r.op is op and not r.late]
            spans = live.op_range(ring_loop(split, op))    # the persistent loop's, where its producer runs it
            used, fitted = fit_beside(facts, ring, place(before + asked + copies, entry),  # type: ignore[arg-type]
                                      spans, allocas + assumes.reserve, _inner_peak(others, op, live))
            fits[op] = (used, fitted)
            if not fitted.stages:
                continue
            ringed |= {id(load) for load in ring.plan.loads}
            for load in ring.plan.loads:
                matrix = ring.matrix(facts, load)  # type: ignore[arg-type]
                facts.matrices[id(load)] = (matrix, op)
                out.append(Request(op, "ring", "ring", matrix.nbytes * fitted.stages, 1024 if matrix.swizzled else 128,
                                   matrix.span if matrix.swizzled else 0, spans, subject=load))
            if uses_mbarriers(facts):  # type: ignore[arg-type]
                out.append(Request(op, "mbarriers", "buffer", fitted.barriers.mbarriers * MBARRIER_BYTES,
                                   MBARRIER_BYTES,
                                   lifetime=spans if frees_barriers(split, op, entry, assumes.free_barriers) else None))
            # a warp-specialized loop's attention handshake, MMA warp's and epilogue's buffers
            out += tcgen05.at_loop(facts, op, ring, fitted, others + out, live, allocas + assumes.reserve,
                                  tma_stages)
            chunked = tcgen05.chunked_store(facts, op, ring)
            if chunked is not None:     # stored by the MMA warp's epilogue, chunk by chunk: no epilogue of its own
                lowered_ahead.add(id(chunked))
                epilogues[chunked] = None
        elif op.name in tcgen05.ASKERS and op.name not in STORES:     # a tcgen05 mma's buffers
            out += tcgen05.at_op(facts, op, fits, others + out, live, allocas + assumes.reserve, tma_stages)
        elif op.name == LOAD and id(op) not in ringed and _staged(op, assignment):
            view = view_of(op.operand("view"))  # type: ignore[arg-type]
            assert view is not None, "a view is made in the kernel (the verifier: no view crosses control flow)"
            tile = op.results[0].type
            once = _copied_once(facts, op)
            swizzled = once or assignment.is_swizzled(op.results[0])
            matrix = matrix_shape(tile, facts.pad_buffers, swizzled=swizzled)  # type: ignore[arg-type]
            # staged; else a register load, which may still ask for its operands (below)
            if once or staged_copy(op, view, tile, matrix, facts.threads):  # type: ignore[arg-type]
                if assumes.defer and not once and deferred(facts, op, view, swizzled, place(
                        [r for r in others + out if live.position(r.op) < live.position(op)], entry), allocas, live):
                    left[id(op)] = view
                    found.deferred.add(op)
                    continue       # its mma copies it in K slices (shared_operands.py)
                facts.matrices[id(op)] = (matrix, None)
                out.append(Request(op, "invariant" if once else "staging", "staging", matrix.nbytes,
                                   1024 if swizzled else 128, matrix.span if swizzled else 0,
                                   live.value_range(op.results[0], op)))
                if once:
                    out.append(Request(op, "mbarriers", "buffer", MBARRIER_BYTES, MBARRIER_BYTES))
        elif op.name in STORES and id(op) not in lowered_ahead:
            # attention's O stored by TMA from its fragments (tcgen05), else an mma accumulator's epilogue
            stored = tcgen05.at_op(facts, op, fits, others + out, live, allocas + assumes.reserve, tma_stages)
            out += stored or epilogue(facts, op, others + out, epilogues)
        if asks(op, assignment):   # what it asks for its operands, after the rest (shared_operands.py)
            before = [r for r in others + out if live.position(r.op) < live.position(op)]
            shared = dict.fromkeys(ringed | {id(r.op) for r in out if r.role in ("staging", "invariant")}) | left
            out += [r for r in operand_requests(facts, op, before, allocas, live, shared, found) if r.role in roles]
    found.pairs_run = tcgen05.pairs_run(facts)
    return found


def reductions_predicted(entry: Operation, assignment: "LayoutAssignment") -> bool:
    """Whether every "reduction" scratch of the kernel is one the plan sizes: a reduce's or a scan's
    (`_reduction`), or one an op asks for its operands (shared_operands.py: an mma's on the FMA
    path, a pack's / unpack's, a gather / scatter view's row indices), not where
    `shared_operands.scratch_predicted` says an op asks for one it does not size."""
    from .shared_operands import scratch_predicted

    return all(scratch_predicted(op, assignment) for op in entry.walk())


def _inner_peak(others: list[Request], loop: Operation, live: Any) -> int:
    """The most bytes the buffers of the other roles that ops in `loop`'s body ask for (layout conversions'
    scratch) take at once: beside the loop's ring while it runs."""
    from ..transforms.rewrite import inside_op

    spans = [(r.lifetime or live.op_range(r.op), r.nbytes) for r in others
             if r.op is not None and r.op is not loop and inside_op(r.op, loop)]
    return max((sum(n for (s, e), n in spans if s <= at <= e) for (at, _), _ in spans), default=0)


def _reduction(op: Operation, placed: Any, lifetime: tuple[int, int], limit: int) -> tuple[Request, int]:
    """The scratch a reduce or scan whose rows are not in warps folds through, alive while it runs, and
    the slices it goes in (move_forms.reduce_scratch: a reduce's in slices where the whole would not fit
    below `limit` beside the buffers `placed` before it)."""
    from .move_forms import reduce_scratch, slices

    types = [v.type for v in op.operands]
    chunks, nbytes = reduce_scratch(op, lambda n: slices(types, n, lambda size: placed.first_fit(size, 16, *lifetime),  # type: ignore[arg-type]
                                                         limit))
    return Request(op, "reduction", "reduction", nbytes, 16, 0, lifetime), chunks


def _loop_copies(facts: StagingFacts, loop: Operation, used: int) -> "tuple[LoopCopy, ...]":
    """The K-major copy buffers `loop` gives its wgmmas before its stages, beside `used` bytes taken
    before them (kmajor_copies.loop_copies decides); noted in `facts.wgmma_buffers`, as the lowering
    notes them."""
    if facts.assignment is None or not facts.assignment.wgmma_ops:
        return ()      # no wgmma to copy operands for (kmajor_copies.loop_copies)
    from .kmajor_copies import loop_copies

    given = tuple(loop_copies(facts, loop, used))  # type: ignore[arg-type]
    for copy in given:
        facts.wgmma_buffers[copy.key] = copy.matrix
        if copy.slots > 1:
            facts.kmajor_slots[copy.key] = copy.slots
    return given


def _kmajor_request(loop: Operation, copy: "LoopCopy") -> Request:
    """The buffer of K-major copy `copy`, asked by `loop` before its stages, alive to the kernel's end."""
    from ..layout.shared_matrix import KMAJOR_ALIGN, kmajor_bytes

    return Request(loop, "kmajor", "buffer", kmajor_bytes(copy.matrix, copy.slots), KMAJOR_ALIGN, subject=copy.key)


def _staged(op: Operation, assignment: "LayoutAssignment") -> bool:
    """A weak load of a tensor-core operand (ops_memory._load_view stages it in shared memory)."""
    return str(op.attributes.get("memory_ordering_semantics", "weak")) == "weak" \
        and assignment.is_shared_operand(op.results[0])


def _copied_once(facts: StagingFacts, op: Operation) -> bool:
    """Whether the load is copied once by TMA (pipeline_copies.once; pipelined_loop.load_invariant emits
    it): where TMA cannot ("why not" given), it is staged as any other."""
    from .pipeline_copies import once

    shot = once(facts, op)
    return shot is not None and shot.tma is not None


