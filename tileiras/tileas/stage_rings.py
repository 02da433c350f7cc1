"""The stages of a pipelined loop, decided at nv_tileas before their depth: what each stage holds
(`ring_of`: the loop's loads, each one's staged tile, swizzle, padding and bytes; a CTA pair's half
of B; the wgmma whose group stays in flight), whether every load can be staged at all
(`stageable`), and how deep the ring goes beside the shared memory taken (`fit`, `fit_beside`:
schedule/pipeline.fit_stages on the modulo schedule's wanted stages).

The pass `plan-shared-memory` (shared_stages.py) sizes the rings with these answers and records each
loop's ring and depth in its plan (`SharedPlan.rings`, `SharedPlan.fits`, in its dump); the lowering
(lowering/pipelined_loop.py) reads them (`planned_ring`, `planned_fit`), places and fills the stages.
`k` is the kernel as the pass sees it (`StagingFacts`): its target, layouts, pipelines, warp split and
the K-major copies given so far (`wgmma_buffers`, `kmajor_slots`); the lowering asks only
`uses_mbarriers` and `reads_shared`, of its own `KernelLowering`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..ir.core import Operation, Value
from ..ir.record import record, replace
from ..layout.shared_matrix import SharedMatrix, matrix_shape
from ..schedule.buffers import MIN_STAGES
from ..schedule.pipeline import fit_stages
from ..tileaa.access_width import chunk_elements, staged_through_registers
from ..tileaa.mma_forms import kind_of
from ..tileaa.mma_operands import passes_shared
from ..tileaa.views import view_of
from ..transforms.rewrite import inside_op
from . import cta_pairs, tma_boxes
from .cta_pairs import CtaPair
from .tcgen05_roles import staged_load
from .tcgen05_select import PACKED, RESTAGED
from .uncopied_loads import crowds, producer_warpgroup_loads
from .warp_roles import enclosing_loop, occupancy_hint, occupancy_share, ring_loop

if TYPE_CHECKING:
    from ..schedule.buffers import BufferAssignment
    from ..schedule.pipeline import PipelinePlan
    from .buffers import SharedBuffers
    from .shared_stages import StagingFacts


def reads_shared(k: "StagingFacts", load: Operation) -> bool:
    """Whether the readers of a pipelined load read its stage in shared memory (tensor-core
    operands); else the threads read the tile into registers (a row loop, schedule/pipeline.py)."""
    return k.assignment is not None and k.assignment.is_shared_operand(load.results[0])


def uses_mbarriers(k: "StagingFacts") -> bool:
    """Whether the pipelines of this target hand stages over with mbarriers (else cp.async groups)."""
    return k.caps.has("mbarrier_tx")


@record
class StageRing:
    """What a pipelined loop's stages hold, decided before their depth: the loop's plan (its
    mechanism), each load's staged tile, swizzle, padding and bytes a stage."""
    plan: "PipelinePlan"
    tiles: dict                         # load op -> the tile a stage holds (a CTA pair's half of B)
    swizzled: dict                      # load op -> whether its stages are swizzled
    dense: frozenset                    # loads whose stages are never padded
    sizes: dict                         # load op -> bytes of one stage
    pair: Optional[CtaPair]             # sm_100: a CTA pair runs the loop's mma
    retiring: Optional[Operation]       # the mma left in flight (sm_90's wgmma group, sm_100's committed tcgen05.mma)
    through_registers: tuple            # loads no copy can stage: block scales (`stageable`), a producer's (`producer_stages`)
    beside: frozenset = frozenset()     # loads that may keep cp.async beside the others' TMA boxes
    refilled: frozenset = frozenset()   # loads read into registers, which put back their view's padding
    produced: frozenset = frozenset()   # of `through_registers`, those the producer warps load (`producer_stages`)

    def matrix(self, k: "StagingFacts", load: Operation) -> SharedMatrix:
        """The (unplaced) stage-0 matrix of `load`."""
        return matrix_shape(self.tiles[load], k.pad_buffers, self.swizzled[load], dense=load in self.dense)

    def describe(self, name_of: Callable[[Value], str]) -> list[str]:
        """Dump lines: what a stage holds, the CTA pair, the mma left in flight."""
        def held(load: Operation) -> str:
            form = " swizzled" if self.swizzled[load] else " unpadded" if load in self.dense else ""
            return f"{name_of(load.results[0])} {self.sizes[load]} B{form}"
        lines = [f"a stage holds {', '.join(held(load) for load in self.plan.loads)}"]
        lines += [f"{name_of(load.results[0])} staged element by element through registers"
                  for load in self.through_registers]
        if self.pair is not None:
            lines.append(f"a CTA pair runs {name_of(self.pair.mma.results[0])}, each CTA staging half of "
                         f"{name_of(self.pair.b_load.results[0])}")
        if self.retiring is not None:
            lines.append(f"mma {name_of(self.retiring.results[0])} left in flight, reading its stage an "
                         f"iteration longer")
        return lines


def stageable(k: "StagingFacts", plan: PipelinePlan) -> tuple[Optional[PipelinePlan], list, list]:
    """(`plan`, the loads staged through registers, the loads only TMA can copy) when the pipeline can
    copy each of its loads (cp.async or TMA); (None, [], []) otherwise and the loop is not pipelined. A
    block scale of a tcgen05 mma (sm_100 / sm_103) that neither can copy (rows of 2 bytes; or no fact
    proving even a 4-byte chunk aligned: TileGym's A scales at K = 768, rows 24 bytes apart, no
    divisibility fact on the stride) is staged through registers by the threads that copy
    (lowering/pipelined_loop.through_registers), as NVIDIA's loads it byte by byte. Any other load
    cp.async cannot copy (no fact proves its chunks wholly inside or outside the tensor: a ragged K,
    whose last tile ends mid-chunk for all the facts know) may still go by TMA, which fills what lies
    outside element by element: on a target whose rings TMA fills, `ring_of` keeps the ring only
    where TMA then copies each of those loads (`ring_or_why`)."""
    bad = [load for load in plan.loads if not ((view := view_of(load.operand("view"))) is not None
                                               and chunk_elements(load, view, load.results[0].type))]
    if not bad:
        return plan, [], []
    scales = scale_loads(k, plan.loads) if k.caps.has("tma") else set()
    through = [load for load in bad if load in scales
               and staged_through_registers(load, view_of(load.operand("view")), load.results[0].type)]  # type: ignore[arg-type]
    by_tma = [load for load in bad if load not in through]
    if by_tma and not (k.caps.has("tma") and uses_mbarriers(k)) or len(through) == len(plan.loads):
        return None, [], []
    return plan, through, by_tma


def producer_stages(k: "StagingFacts", loop: Operation, load: Operation) -> bool:
    """Whether warp-specialized `loop`'s producer may stage `load`, which neither cp.async nor TMA can
    copy (no fact proves a chunk aligned, nor a TMA box's strides), element by element through its
    registers: whole-byte elements, arriving on the stage's full mbarrier once stored (after a proxy
    fence where wgmma or tcgen05.mma reads the stage: lowering/pipelined_loop.copies_arrive). The
    producer runs ahead by the ring's depth, so the loads' latency is hidden as a copy's is; NVIDIA's
    producer warps load such tiles element by element too (LDG.U16 / STS). (The attention form's MMA
    warp shares the producer's warpgroup: there the consumers issue the mmas, settled_split.settle.) In
    the tcgen05 form the epilogue warps, idle while the MMA warp runs the loop, are the producer
    (settled_split.settle: as NVIDIA's sm_100 kernels without facts, loads and epilogue in one
    warpgroup); a producer warpgroup of its own would make the CTA 288 threads, which ptxas launches as
    384 with 168 registers (an f16 bmm and an int8 GEMM without facts spilled 96 and 176 instructions).
    In the sm_90 form, only beside one consumer warpgroup and one CTA an SM (the tcgen05 form's epilogue
    warps have the registers the MMA warp leaves: two warpgroups, 288 threads at 168 registers, an e4m3
    bmm's 256 x 128 x 128 without facts fills its stages spill-free; an occupancy hint of 2, 160 threads
    at 204): the CTA then launches with 255 registers a
    thread and no role gives any back (`WarpSplit.loads_in_registers`); two warpgroups launch with 168,
    which the consumers of an MLA decode without facts spilled (307 instructions; unspecialized, none),
    an occupancy hint of 2 with 128, unless those loads would crowd the consumers unspecialized
    (uncopied_loads.crowds: the roles then share the CTA's half, warp_roles.SHARED_LOADS_REGISTERS).
    In sm_100's attention form a producer warpgroup stages them beside one or two consumer warpgroups, whatever
    the occupancy hint: S and O live in tensor memory, so the consumers hold neither, and unspecialized every
    thread loads K and V element by element each iteration with nothing running ahead, at more registers than
    the hint's share anyway (seed 44, no facts, hint 2: an f16 d = 64 128 x 128 window attention 213 registers on
    256 threads, unpipelined, 1646 instructions a K step -> 110 on 384, 1177; an e4m3 d = 64 64 x 128 one 254 on
    128 -> 128 on 256 at setmaxnreg 88 / 168, the hint's two CTAs an SM; NVIDIA's: producer warps and setmaxnreg)."""
    split = k.warp_split
    if split is None or split.loop is not loop or not uses_mbarriers(k) or split.form not in ("tcgen05", "attention") \
            and not producer_warpgroup_loads(k.caps, k.threads, occupancy_hint(k),
                                             crowds(loop, k.pipelines[loop].loads, k.assignment)):
        return False    # (uncopied_loads.prune left such loads to the consumers)
    if split.form == "tcgen05" and any(op.name == "cuda_tile.mmaf_scaled"
                                       for op in loop.regions[0].block.operations):
        return False    # (its scales are restaged beside a producer warpgroup of its own: settled_split.settle)
    view = view_of(load.operand("view"))
    return view is not None and staged_through_registers(load, view, load.results[0].type)


def tma_swizzles(k: "StagingFacts", load: Operation) -> bool:
    """A load whose stage would be padded (its wgmma reads a K-major copy of it: an N-major B of
    a type without a transposed form, an f32 tile read as tf32; or only mma.sync ops read it, by
    ldmatrix: sm_120's, sm_100's and sm_90's under their wgmma M) but which TMA could copy into the
    swizzled layout: the stage takes that layout, as the copy (or ldmatrix) reads either."""
    tile, assignment, value = load.results[0].type, k.assignment, load.results[0]
    if assignment is None or assignment.is_swizzled(value):
        return False
    return (assignment.only_wgmma_reads(value) or assignment.only_ldmatrix_reads(value)) \
        and tma_boxes.plan(load, matrix_shape(tile, k.pad_buffers, swizzled=True), built=True)[0] is not None


def mma_in_flight(k: "StagingFacts", loop: Operation, loads: "tuple[Operation, ...]", matrices: dict
                  ) -> "Operation | None":
    """The tcgen05.mma of a pipelined K loop that no warp role splits, left in flight into the next
    iteration: its thread commits it to the stage's empty mbarrier, which releases the stage when the
    MMA has read it, and the stage iteration i - 1 read is refilled after iteration i's MMA is issued
    (the tensor cores always have one queued; waiting for each MMA idled them while the loop turned).
    As `group_in_flight`: the loop's only mma, at the top of its body, its accumulator carried and
    read by nothing else (then it stays in tensor memory: tileaa/mma_operands.resident_loop); both
    operands read in their stages (swizzled, one matrix; no K-major copy, no tf32 rounding, no fp4
    packing, no block scales). Only a loop no other loop encloses: the stage it holds deepens the ring
    (`fit`), which in a persistent kernel's tile loop takes the room its epilogue has beside the ring
    (cp_matmul_persistent_f16_128x256x64: 896 -> 1479 instructions, 144 -> 184 registers)."""
    split = k.warp_split
    if k.assignment is None or split is not None and split.loop is loop or enclosing_loop(loop) is not None \
            or k.caps.has("multicast"):     # (a multicast stage is released in every CTA it lands in)
        return None
    layouts = getattr(k.assignment, "tcgen05_layouts", None) or {}
    mmas = [op for op in layouts if inside_op(op, loop)]
    if len(mmas) != 1 or mmas[0].name != "cuda_tile.mmaf" and mmas[0].name != "cuda_tile.mmai":
        return None
    op = mmas[0]
    kind = kind_of(op)
    if kind is None or kind.name in RESTAGED or kind.name in PACKED:
        return None
    for name in ("lhs", "rhs"):
        source = staged_load(op.operand(name))
        matrix = matrices.get(source)
        if matrix is None or not matrix.swizzled or matrix.batch != 1:
            return None
    return op if _accumulates_alone(loop, op) else None


def group_in_flight(k: "StagingFacts", loop: Operation, loads: "tuple[Operation, ...]") -> "Operation | None":
    """The wgmma of a pipelined K loop that may leave its group in flight into the next iteration
    (waited down to one group there, and to none after the loop): the loop's only wgmma, at the top
    of its body, both operands read from stages of `loads` (by descriptor, or through a K-major copy
    its loop gave in two slots: kmajor_copies.loop_copies), and its
    accumulator carried from one iteration to the next and read by nothing else (wgmmas chained on
    one accumulator need no wait between them; any other reader would)."""
    if k.assignment is None:
        return None
    mmas = [op for op in k.assignment.wgmma_shapes if inside_op(op, loop)]
    body = loop.regions[0].block
    if len(mmas) != 1 or mmas[0] not in body.operations:
        return None
    op = mmas[0]
    for role, name in (("a", "lhs"), ("b", "rhs")):
        value = op.operand(name)
        while isinstance(value.owner, Operation) and passes_shared(value.owner):  # type: ignore[union-attr]
            value = value.owner.operands[0]  # type: ignore[union-attr]
        if value.owner not in loads or ((op, role) in k.wgmma_buffers and (op, role) not in k.kmajor_slots):
            return None
    return op if _accumulates_alone(loop, op) else None


def _accumulates_alone(loop: Operation, op: Operation) -> bool:
    """Whether mma `op`, in `loop`'s body, has its accumulator carried from one iteration to the next
    and read by nothing else, in a body no iteration leaves early (it would skip the release after
    the wait)."""
    body = loop.regions[0].block
    if op not in body.operations:
        return False
    acc, term = op.operand("acc"), body.terminator
    if acc not in body.arguments[1:] or acc.uses != [op] or term is None or term.name != "cuda_tile.continue":
        return False
    exits = ("cuda_tile.continue", "cuda_tile.break")
    if any(inner.name in exits for top in body.operations if top is not term for inner in top.walk()):
        return False
    position = body.arguments.index(acc) - 1
    result = op.results[0]
    return result.uses == [term] and term.operands[position] is result and term.operands.count(result) == 1


def scale_loads(k: "StagingFacts", loads: tuple) -> "set[Operation]":
    """The loads among a pipeline's `loads` that are the scale tiles of a tcgen05 block-scaled mma.
    Their stages are unpadded (the restaging reads them byte by byte, whatever the layout) so that
    TMA can fill them (tma_boxes.plan, dense); a scale tile TMA cannot copy (an (M, K / 32) tile of
    4-byte rows: a box's rows are whole 16-byte units) keeps cp.async beside the TMA boxes, as
    NVIDIA's A scales do (pipelined_loop: one full mbarrier counts both)."""
    layouts = getattr(k.assignment, "tcgen05_layouts", None) or {}
    if not layouts:
        return set()
    found = {staged_load(op.operand(n)) for op in layouts if op.name == "cuda_tile.mmaf_scaled"
             for n in ("lhs_scale", "rhs_scale")}
    return {load for load in loads if load in found}


def ring_of(k: "StagingFacts", op: Operation) -> Optional[StageRing]:
    """The stages of loop `op`'s pipeline, or None where it has no plan or a load no copy can stage.
    The pass `plan-shared-memory` sizes the rings with it and records them, which the lowering reads
    (pipelined_loop.planned_ring)."""
    return ring_or_why(k, op)[0]


def ring_or_why(k: "StagingFacts", op: Operation) -> tuple[Optional[StageRing], str]:
    """`ring_of`, with why there is no ring ("" where there is one)."""
    plan = k.pipelines.get(op) if k.pipelines else None
    if plan is None:
        return None, "the loop has no pipeline plan"
    plan, through, by_tma = stageable(k, plan)
    if plan is None:
        return None, ("a load neither cp.async nor TMA can copy ahead (no fact proves its chunks aligned and "
                      "wholly inside or outside the tensor)")
    swizzled = {load: k.assignment is not None and k.assignment.is_swizzled(load.results[0]) for load in plan.loads}
    if k.caps.has("tma") and uses_mbarriers(k):
        to_swizzle = {load for load in plan.loads if tma_swizzles(k, load)}
        # stages ldmatrix reads: only where TMA then copies each of them, every other load by TMA too, by
        # cp.async beside its boxes or staged by the producer warps (else cp.async fills the stages, and a
        # swizzled one only costs its readers address registers)
        ldmatrix = any(k.assignment.only_ldmatrix_reads(load.results[0]) for load in to_swizzle)  # type: ignore[union-attr]
        if not ldmatrix or all(swizzled[load] or load in to_swizzle or load not in by_tma
                               or producer_stages(k, op, load) for load in plan.loads):
            swizzled.update({load: True for load in to_swizzle})
    # block scales of a tcgen05 mma: unpadded stages, which TMA fills as one unswizzled box
    dense = scale_loads(k, plan.loads) if k.caps.has("tma") else set()
    # a row loop's tiles, read into registers: unpadded stages, as TMA's unswizzled boxes write them
    dense |= {load for load in plan.loads if not reads_shared(k, load)}
    # tiles the FMA path reads along their rows: unpadded, which TMA fills
    if k.caps.has("tma"):
        dense |= {load for load in plan.loads if k.assignment.fma_rows(load.results[0])}  # type: ignore[union-attr]
    pair = cta_pairs.plan(k, op, plan.loads) if k.caps.has("tma") and uses_mbarriers(k) else None
    tiles = {load: cta_pairs.staged_type(pair, load) for load in plan.loads}
    matrices = {load: matrix_shape(tiles[load], k.pad_buffers, swizzled[load], dense=load in dense) for load in plan.loads}
    # loads that may keep cp.async beside the others' TMA boxes (on the stage's one full mbarrier): every
    # load cp.async can copy, and the unpadded stages' (a block scale staged through registers)
    beside = frozenset(dense) | {load for load in plan.loads if load not in by_tma and load not in through}
    # a row loop's tiles: copied with zeros outside the tensor, their readers put back another padding
    refilled = frozenset(load for load in plan.loads if not reads_shared(k, load))
    produced: list = []
    if by_tma:      # loads only TMA can copy: they must be among its copies
        copies, why = tma_boxes.pipeline_copies(k.caps, plan.loads, matrices, dense, tiles, beside, refilled)
        missed = [load for load in by_tma if copies is None or load not in copies]
        produced = [load for load in missed if producer_stages(k, op, load)]
        if produced:    # the producer warps load them element by element and store them into the stage
            through += produced
            by_tma = [load for load in by_tma if load not in produced]
            missed = [load for load in missed if load not in produced]
            beside = beside | frozenset(produced)
        if missed:
            reason = why.get(missed[0], "")
            return None, ("a load cp.async cannot copy ahead (no fact proves its chunks aligned and wholly inside "
                          f"or outside the tensor), nor TMA{': ' + reason if reason else ''}")
    sizes = {load: matrix.nbytes for load, matrix in matrices.items()}
    if uses_mbarriers(k):   # the rings' barriers are mbarrier pairs: their bytes count
        plan = replace(plan, mechanism="mbarrier")
    # sm_90: a wgmma that leaves its group in flight reads its stage one iteration longer; sm_100: so does
    # an unsplit loop's tcgen05.mma, whose commit releases the stage
    retiring = None
    if plan.pipelined and uses_mbarriers(k):
        if k.caps.has("wgmma"):
            retiring = group_in_flight(k, op, plan.loads)
        elif k.caps.has("tcgen05") and pair is None:
            retiring = mma_in_flight(k, op, plan.loads, matrices)
    return StageRing(plan, tiles, swizzled, frozenset(dense), sizes, pair, retiring, tuple(through), beside,
                     refilled, frozenset(produced)), ""


def fit(k: "StagingFacts", ring: StageRing, used: int, bound: "Optional[tuple[int, str]]" = None
        ) -> "BufferAssignment":
    """The depth of `ring` beside `used` bytes of other shared memory (schedule/pipeline.fit_stages),
    within the kernel's share of an SM where its occupancy hint asks for several CTAs an SM
    (`occupancy_share`: down to one stage there, unless `StagingFacts.in_share` is off), else (or where not
    even that fits in the share) the target's limit, where without a hint a copy engine's ring may take one
    stage too (`SINGLE`); `bound`: at most that many stages, and why."""
    restarts = ring_loop(k.warp_split, ring.plan.loop) is ring.plan.loop   # not a persistent kernel's ring
    held = int(ring.retiring is not None)
    most = (PRODUCED_STAGES, "as a producer loading element by element fills them") if ring.produced else None
    if bound is not None and (most is None or bound[0] < most[0]):
        most = bound
    produced = k.warp_split is not None and k.warp_split.loop is ring.plan.loop
    share = occupancy_share(k)
    if share < k.caps.smem_per_block:
        fitted = fit_stages(ring.plan, ring.sizes, used, share, held=held, restarts=restarts, most=most,
                            produced=produced, least=SINGLE + held if k.in_share else MIN_STAGES)
        if fitted.stages:
            return fitted
    engine = share == k.caps.smem_per_block and ring.plan.mechanism == "mbarrier" and not ring.produced
    return fit_stages(ring.plan, ring.sizes, used, k.caps.smem_per_block, held=held, restarts=restarts, most=most,
                      produced=produced, least=SINGLE + held if engine else MIN_STAGES)


# Where two stages do not fit, a ring of one (the readers that keep a slot an iteration longer: two): each
# iteration's copies wait until the last one's readers are done. Nothing overlaps within the CTA, but under an
# occupancy hint the CTAs sharing the SM overlap each other, and a copy engine still moves the tiles (TMA and the
# producer warp's register budgets stay). NVIDIA's keeps such kernels in the hint's share the same way: a bf16
# bmm 128 x 64 x 128 at occupancy 2 takes 41 KB on sm_120, where two stages fitted to the whole SM took 97 KB
# and one CTA an SM; and on sm_120 an attention of d = 128 whose two stages do not fit beside Q copies K and V
# by TMA from a producer warp (97 KB), where ours loaded them with neither. A ring of cp.async groups without a
# hint, or one producer warps fill element by element, stays unpipelined instead: one stage would only hold its
# tiles longer (the loop's K and V at once, where unpipelined loads reuse one buffer).
SINGLE = 1


# The depth of a ring whose producer warps load tiles element by element (`producer_stages`): it fills a stage
# far slower than a copy engine, so a second stage overlaps it with the consumers' mmas and more only wait filled.
# The scheduler's depth (copy latency over II) gave bmm / GEMM rings without facts 3-5x NVIDIA's shared memory
# (an f16 bmm's 128 x 64 x 64: 124 KB on sm_90, NVIDIA's 67), which uses 2-3 stages for them.
PRODUCED_STAGES = 2


def fit_beside(k: "StagingFacts", ring: StageRing, buffers: "SharedBuffers", lifetime: tuple[int, int],
               fixed: int, inner: int = 0) -> tuple[int, "BufferAssignment"]:
    """(bytes beside, depth) of `ring`, whose slots live over `lifetime`: beside the data buffers alive
    then and every control buffer (`SharedBuffers.top_bytes`), not those whose bytes are free again by the
    loop (an earlier loop's rings), so a later loop's depth does not depend on where dead buffers sat. Where
    the loop's mbarriers, placed above every buffer so far, would then pass the limit: beside all of them. `fixed`: bytes outside the
    buffers (static shared memory, the reserve); `inner`: the most the loop body's own buffers take at once
    (beside the ring, or left free below the buffers alive then, where the ring goes there: `_fit_below`)."""
    # the control state stays above every data buffer (shared_plan.place), so a ring goes beside the data alive
    # then and below all of it: an earlier loop's mbarriers do not keep its dead ring's bytes from the count
    used, peak = buffers.data_top(*lifetime) + buffers.top_bytes + fixed, buffers.total + fixed
    fitted = fit(k, ring, used + inner)     # (the body's own buffers beside its slots while it runs)
    bars = fitted.barriers.nbytes if fitted.stages and fitted.barriers is not None else 0
    if used < peak and peak + bars > k.caps.smem_per_block:
        used, fitted = peak, fit(k, ring, peak)
    below = _fit_below(k, ring, max(0, buffers.free_below(*lifetime) - inner), fixed)
    # below the buffers alive then where that keeps the kernel in the occupancy hint's share (which `fitted` left
    # for the target's limit) or holds more stages
    if below is not None and (below.limit < fitted.limit or below.stages > fitted.stages):
        return fixed, below
    return used, fitted


def _fit_below(k: "StagingFacts", ring: StageRing, gap: int, fixed: int) -> "Optional[BufferAssignment]":
    """The depth of `ring` in the `gap` bytes under the lowest buffer alive over its lifetime (an earlier loop's
    ring, free again under its mbarriers, which stay to the kernel's end), or None where not two stages fit: a
    chunked layernorm's second and third loops went above the first's mbarriers, past the share of the 2 CTAs
    an SM its occupancy hint asks for (229 KB on sm_90), where the first's ring left 96 KB free below them."""
    align = max(1024 if ring.swizzled[load] else 128 for load in ring.plan.loads)
    bound = None
    while gap:      # one stage fewer until the stages (each load's slice aligned) fit the gap
        fitted = fit(k, ring, fixed, bound)
        slices = fitted.nbytes - (fitted.barriers.nbytes if fitted.barriers is not None else 0)
        if fitted.stages and slices + align * (len(ring.plan.loads) - 1) <= gap:
            return fitted
        if fitted.stages <= 2:
            return None
        bound = (fitted.stages - 1, "in the bytes an earlier loop's ring left free")
    return None
