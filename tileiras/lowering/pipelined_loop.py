"""A `for` loop whose tensor-core operands are prefetched `stages - 1` iterations ahead.

schedule/pipeline.py picks the loop and its loads; this module emits them.
Each load gets `stages` shared buffers. Before the loop, iterations 0 ..
stages - 2 are copied in (one cp.async group each, zero-filling past the
loop's end); at its first load, iteration i waits until only `stages - 2`
groups are in flight (its own has landed), meets the CTA at a barrier (every
thread's copies are visible, and everyone is done with the stage iteration
i - 1 read), and then copies iteration i + stages - 1 into that freed stage.
The loads themselves only name the stage `i mod stages`. After the loop every
copy is drained (async_copy.wait_all). A ring of one stage (tileas/stage_rings.SINGLE)
meets the CTA first (everyone is done with the stage), copies iteration i, waits for
it (wait_group 0) and meets the CTA again.

On sm_90 and later the handshake is mbarriers instead (mbarrier.py), one `full`
and one `empty` barrier per stage. A thread's copies into a stage end with
`cp.async.mbarrier.arrive.noinc` on the stage's full barrier, which completes
its phase once every thread's copies have landed; iteration i waits for that
phase (parity (i / stages) & 1) before it reads the stage. Before refilling the
stage iteration i - 1 read, each thread arrives on that stage's empty barrier
and waits for its phase: no CTA-wide barrier inside the loop, and copies past the
loop's end are not issued at all (every fill is waited for, so no asynchronous
arrival is left when the barriers are invalidated after the loop).

On sm_90 and sm_100 / sm_103, where every load of the loop can be copied by TMA (as plan-shared-memory
decided it, tileas/pipeline_copies.py, with the boxes of tileas/tma_boxes.py:
views made of kernel parameters, aligned, into swizzled stages: the layout wgmma and tcgen05.mma
read), one thread fills a stage instead: it announces the stage's bytes with
`mbarrier.arrive.expect_tx` (the full barrier's only arrival) and issues the boxes, whose
completion the hardware counts on the same barrier; the consumers' side does not change (but
for the proxy fence the cp.async form needs: TMA writes through the async proxy already). A
block-scaled mma's scale tile TMA cannot copy (4-byte rows) is the one exception to one mechanism
per pipeline: it keeps cp.async beside the other loads' boxes (`copied`), and the full barrier
counts the TMA thread's arrival and the copying threads' `.noinc` ones. Where the
loop's wgmma keeps one group in flight (tileas/stage_rings.group_in_flight), the release
of the stage iteration i - 1 read (and, unspecialized, its refill) moves after
iteration i's `wgmma.wait_group 1`, the first point where that stage is no
longer read (mma_retired). An unsplit sm_100 loop's tcgen05.mma is left in flight too
(stage_rings.mma_in_flight): its thread commits it to the stage's empty mbarrier (`committed`),
and after iteration i's MMA is issued every thread waits for the commit of iteration i - 1's
before refilling its stage; the last MMAs are waited for after the loop.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional

from ..errors import CompileError
from ..ir.core import Operation
from ..ir.record import record, replace
from ..layout.shared_matrix import SharedMatrix
from ..tileaa.access_width import chunk_elements
from ..tileas import tma_boxes
from ..tileas.pipeline_copies import RingCopies
from ..tileas.plan import plan_of
from ..tileas.multicast_groups import ClusterLoads
from ..tileas.cta_pairs import CtaPair
from ..tileas.stage_rings import StageRing, uses_mbarriers
from ..transforms.rewrite import inside_op
from .async_copy import ELEMENTS_UNROLLED, commit, fence_async_proxy, issue_copies, new_matrix, wait_all, wait_groups
from . import cta_pair, mbarrier, multicast, ops_wgmma, tma_copy, warp_specialize
from .kernel import KernelLowering
from .mbarrier import BarrierArray
from .values import SharedTileVal

if TYPE_CHECKING:
    from ..schedule.buffers import BufferAssignment


@record(frozen=False)
class ActivePipeline:
    loop: Operation
    loads: tuple[Operation, ...]
    matrices: dict                      # load op -> SharedMatrix of stage 0
    stages: int
    stage_bytes: dict                   # load op -> bytes from one stage to the next
    counter: str = ""                   # i32 iteration number (a phi of the loop header)
    iv: str = ""
    lb: str = ""
    step: str = ""
    ub: str = ""
    ity: str = "i32"
    unsigned: bool = False
    read: Optional[dict] = None         # load op -> SharedTileVal of this iteration, once issued
    full: Optional[BarrierArray] = None   # sm_90+: a stage's copies have landed (one per stage)
    empty: Optional[BarrierArray] = None  # sm_90+: every thread is done reading a stage
    specialized: bool = False           # warp_specialize.py: a producer warpgroup does every copy
    retiring: Optional[Operation] = None  # the mma left in flight (tileas/stage_rings.group_in_flight, mma_in_flight):
                                          # a stage is released after the next iteration's wgmma.wait_group 1, or
    committed: bool = False               # ...(sm_100, unsplit) by the tcgen05.commit of the MMA that read it
    mma_warp: bool = False              # ...and an MMA warp every tcgen05.mma (the consumers skip the loop)
    mma_reads: bool = False             # an MMA warp waits for each stage and releases it (both sm_100 forms):
                                        # the consumers neither wait for a stage nor release it
    tma: Optional[dict] = None          # load op -> tma_boxes.TmaCopy: one thread copies each stage by TMA
    once: tuple = ()                    # tma_copy.OneShot loads before the loop, waited for by its prologue
    cluster: Optional[ClusterLoads] = None   # sm_90 cluster split: loads shared with the other CTAs,
                                        # multicast in slices; stages released in every receiving CTA
    pair: Optional[CtaPair] = None   # sm_100: a CTA pair runs the loop's mma (tileas/cta_pairs.py)
    persistent: bool = False            # run once a tile by a persistent loop (`begin_persistent`): the ring is
                                        # set up once before it, its count carried over the tiles
    base: str = "0"                     # the ring's count when this run of the loop starts (i32)
    ring_out: str = ""                  # ...and when it ends (the loop's counter at its exit)
    epilogue_fills: bool = False        # the tcgen05 form's epilogue warps fill the stages (WarpSplit.copiers)
    barriers_freed: bool = False        # full / empty's bytes serve other buffers after the loop
                                        # (KernelPlan.barriers_freed): a CTA barrier follows their invalidation
    index_ops: tuple = ()               # the body's ops computing the loads' indices (PipelinePlan.index_ops)


# Targets with the feature "tma" copy their pipelines' loads by TMA where tma_boxes.plan allows (kernels
# whose consumers issue mma.sync, `warp_roles.mma_sync_roles`, only where their stages may be swizzled: ldmatrix
# reads a swizzled stage as it reads a padded one, the swizzle moving whole 16-byte rows). plan-shared-memory
# decides it (tileas/pipeline_copies.py: `KernelPlan.ring_copies`); `prepare` reads it (`planned_copies`).


def prepare(k: KernelLowering, op: Operation) -> Optional[ActivePipeline]:
    """The pipeline of loop `op`, its buffers allocated, or None when it is not pipelined. What its
    stages hold and its depth are the shared-memory plan's (`planned_ring`, `planned_fit`)."""
    ring = planned_ring(k, op)
    if ring is None:
        return None
    plan, pair, tiles, swizzled, dense, sizes = ring.plan, ring.pair, ring.tiles, ring.swizzled, ring.dense, ring.sizes
    where = f"loop at {op.location}" if getattr(op, "location", None) else "a loop"
    for load, why in (plan_of(k.assignment).uncopied or {}).items() if k.assignment is not None else ():
        if inside_op(load, op):     # (plan-pipelines left it to the body: tileas/uncopied_loads.py)
            k.remark("missed", "memory", "RemarkPipelineLoadMissed", "Load not staged by the pipeline", load,
                     Reason=f"{why}: loaded in the loop's body each iteration")
    k.schedule_notes += [f"//   {where}: {load.results[0].type} staged through registers (no fact proves a copy "
                         f"of it aligned)" for load in ring.through_registers]
    head, *rows = plan.describe()
    k.schedule_notes += [f"//   {where}: {head}", *(f"//     {row}" for row in rows)]
    if pair is not None:    # before tensor memory is allocated: with .cta_group::2
        assert k.tmem is None, "tensor memory allocated before the CTA pair was planned"
        k.cta_pair = pair
        k.schedule_notes.append(f"//   {where}: a CTA pair runs its mma (tcgen05.mma.cta_group::2): each CTA copies "
                                f"its A rows and half of B, the leader issues the MMAs for both")
    schedule = plan.schedule
    ii = f"{schedule.ii * plan.graph.tick} cycles"
    if not plan.pipelined:
        k.remark("missed", "memory", "RemarkPipelineMissed", "Loop not software-pipelined", op,
                 Reason=f"serial schedule: {schedule.reason}")
        k.schedule_notes.append(f"//   {where}: not pipelined: {schedule.reason}")
        return None
    retiring = ring.retiring
    fitted = planned_fit(k, op)
    stages = fitted.stages
    if not stages:
        k.remark("missed", "memory", "RemarkPipelineMissed", "Loop not software-pipelined", op,
                 Reason=f"{fitted.reason} of shared memory", II=ii, WantedStages=str(fitted.wanted))
        k.schedule_notes.append(f"//   {where}: not pipelined: {fitted.reason}")
        return None
    # the rings live while the loop runs, a persistent loop's where it runs the roles (filled after the
    # prologue's barrier, drained by `finish`)
    matrices = {load: new_matrix(k, tiles[load], "ring", stages, swizzled[load], dense=load in dense, subject=load)
                for load in plan.loads}
    handshake = "cp.async groups and CTA barriers"
    full = empty = cluster = None
    freed = False
    specialized = False
    tma = None
    if uses_mbarriers(k):
        copies = planned_copies(k, op, plan.loads)
        bars = fitted.barriers   # the assignment's mbarrier slots: full 0..S-1, empty S..2S-1
        assert bars is not None and bars.mbarriers == 2 * stages
        freed = planned_barriers_freed(k, op)   # alive as the ring is, or to the kernel's end
        full, empty = mbarrier.split(mbarrier.allocate(k, bars.mbarriers), bars.slots)
        handshake = f"full/empty mbarrier pairs ({bars.mbarriers} mbarriers)"
        specialized = k.warp_split is not None and k.warp_split.loop is op
        tma, cluster = _numbered(k, copies.tma), copies.cluster
        assert pair is None or tma is not None and {pair.a_load, pair.b_load} <= set(tma), "cta_pairs.plan checked TMA"
        why_not = "" if specialized else (k.warp_split_refused or "another loop of the kernel has the producer")
        roles = _roles(k, stages, copies) if specialized else f"not warp-specialized: {why_not}"
        k.remark("passed" if specialized else "missed", "memory", "RemarkWarpSpecialization",
                 "Warp roles of a pipelined loop", op, Roles=roles)
        handshake += f"; {roles}"
        if cluster is not None:
            handshake += (f"; shared tiles multicast in slices, each stage released in the "
                          f"{cluster.releasing_ctas} CTAs receiving this CTA's slices, cluster barriers after "
                          f"the init and before the invalidation")
    k.remark("passed", "memory", "RemarkPipelineDepth", "Loop software-pipelined", op, Stages=str(stages),
             Loads=str(len(plan.loads)), StageBytes=str(sum(sizes.values())), II=ii,
             WantedStages=str(fitted.wanted),
             Reason=f"{schedule.reason} (in ticks of {plan.graph.tick} cycles); {fitted.reason}", Handshake=handshake)
    ahead = stages if specialized else stages - 1   # a producer warpgroup fills every stage ahead
    engine = copies.engine if uses_mbarriers(k) else "cp.async"
    k.schedule_notes.append(f"//   {where}: {stages}-stage {engine} pipeline of {len(plan.loads)} tile loads, "
                            f"{sum(sizes.values())} bytes a stage, copies {ahead} iterations ahead "
                            f"({fitted.reason}; {fitted.barriers.describe() if fitted.barriers else ''}), "
                            f"handshake: {handshake}")
    committed = retiring is not None and k.caps.has("tcgen05")
    assert not committed or not specialized and cluster is None, "stage_rings.mma_in_flight: unsplit, no multicast"
    if committed:
        k.schedule_notes.append(f"//   {where}: one tcgen05.mma in flight: its commit to the stage's empty mbarrier "
                                f"releases the stage, refilled once the next iteration's MMA is issued")
    elif retiring is not None:
        k.schedule_notes.append(f"//   {where}: one wgmma group in flight (wait_group 1); a stage is released "
                                f"once the next iteration's wait retires the group that read it")
    if tma:
        k.schedule_notes += [f"//     TMA {load.results[0].type}: {tma_boxes.describe(t)}" for load, t in tma.items()]
    return ActivePipeline(op, plan.loads, matrices, stages, sizes, full=full, empty=empty, specialized=specialized,
                          retiring=retiring, committed=committed,
                          mma_warp=specialized and k.warp_split.form == "tcgen05", tma=tma,
                          epilogue_fills=specialized and k.warp_split.form == "tcgen05" and not k.warp_split.producers,
                          mma_reads=specialized and bool(k.warp_split.mmas), cluster=cluster, pair=pair,
                          persistent=specialized and k.warp_split.outer is not None,
                          barriers_freed=freed, index_ops=plan.index_ops)


def load_invariant(k: KernelLowering, op: Operation) -> Optional[SharedTileVal]:
    """A tensor-core operand loaded in the kernel's body before a pipelined loop that reads it in
    every iteration (attention's queries), copied once by TMA (tma_copy.load_once) where plan-shared-memory
    decided so (tileas/pipeline_copies.once, `KernelPlan.once_copies`), into the swizzled buffer wgmma /
    tcgen05.mma read, alive to its last reader; the loop's prologue waits for it. None (nothing
    emitted): the caller stages it with cp.async."""
    tile = op.results[0].type
    shots = plan_of(k.assignment).once_copies if k.assignment is not None else None
    if shots is None:
        raise CompileError("error: internal: the kernel's plan decides no loop-invariant copies "
                           "(plan-shared-memory's once_copies)")
    decided = shots.get(op)
    if decided is None:
        return None
    if decided.tma is None:
        k.remark("missed", "memory", "RemarkTmaLoadMissed", "Loop-invariant load copied with cp.async, not TMA",
                 op, Reason=decided.why)
        return None
    matrix = new_matrix(k, tile, "invariant", swizzled=True)     # alive to the tile's last reader
    shot = tma_copy.load_once(k, op, matrix, decided.tma)
    k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op,
             Instruction="TMA load (cp.async.bulk.tensor to shared memory)", Boxes=tma_boxes.describe(shot.copy),
             Pipeline="loaded once before the loop that reads it, on its own mbarrier")
    return SharedTileVal(tile, matrix, pending=True, arrival=shot)


def planned_ring(k: KernelLowering, op: Operation) -> Optional[StageRing]:
    """What loop `op`'s stages hold (None: it has no ring), as plan-shared-memory decided it
    (`SharedPlan.rings`: stage_rings.ring_of as the pass's walk met the loop, the K-major copies given
    before it deciding `retiring`; no ring in a kernel whose staging it does not predict). A plan
    without the loop's ring is an internal error: the lowering does not decide."""
    if not k.pipelines or op not in k.pipelines:
        return None     # no pipeline plan, no ring
    return k.planned.decided("rings", op, "stage ring for the loop")


def planned_fit(k: KernelLowering, op: Operation) -> "BufferAssignment":
    """The depth plan-shared-memory gave loop `op` (`SharedPlan.fits`: stage_rings.fit_beside, beside the
    buffers it placed before the loop). A plan without it is an internal error."""
    return k.planned.decided("fits", op, "depth for the pipelined loop")[1]


def through_registers(k: KernelLowering, p: ActivePipeline) -> bool:
    """Whether a copied load of the pipeline is staged through registers (no cp.async form legal)."""
    return any(not chunk_elements(load, k.get(load.operand("view")), load.results[0].type) for load in copied(p))


def planned_copies(k: KernelLowering, loop: Operation, loads: tuple) -> RingCopies:
    """How `loop`'s stages are filled, as plan-shared-memory decided it (tileas/pipeline_copies.py,
    `KernelPlan.ring_copies`); the decision's remarks are reported here, where the loop is lowered. A
    plan without it is an internal error: the lowering does not decide."""
    decided = plan_of(k.assignment).ring_copies if k.assignment is not None else None
    copies = decided.get(loop) if decided is not None else None
    if copies is None:
        raise CompileError(f"error: internal: the kernel's plan decides no copies for the pipelined loop at "
                           f"{loop.location} (plan-shared-memory's ring_copies)")
    assert copies.loads == loads, "plan-shared-memory decided the copies of another ring"
    for r in copies.remarks:
        k.remark(r.kind, "memory", r.name, r.message, r.op, **dict(r.args))
    return copies


def planned_barriers_freed(k: KernelLowering, loop: Operation) -> bool:
    """Whether `loop`'s mbarriers live as its ring does, freed after it (else to the kernel's end), as
    plan-shared-memory decided it (tileas/warp_roles.frees_barriers, `KernelPlan.barriers_freed`). A plan
    without the decision is an internal error: the lowering does not decide."""
    decided = plan_of(k.assignment).barriers_freed if k.assignment is not None else None
    if decided is None or loop not in decided:
        raise CompileError(f"error: internal: the kernel's plan decides no mbarrier lifetime for the pipelined loop "
                           f"at {loop.location} (plan-shared-memory's barriers_freed)")
    return decided[loop]


def _numbered(k: KernelLowering, tma: Optional[dict]) -> Optional[dict]:
    """The planned TMA copies, each given its tensor map's slot among the kernel's hidden parameters."""
    if tma is None:
        return None
    return {load: replace(t, slot=tma_copy.hidden_param(k, t.spec, load)) for load, t in tma.items()}


def copied(p: ActivePipeline) -> tuple:
    """The loads of the pipeline copied by cp.async (every load without TMA; else those TMA could not)."""
    return tuple(load for load in p.loads if not p.tma or load not in p.tma)


def _roles(k: KernelLowering, stages: int, ring_copies: RingCopies) -> str:
    """The warp roles of the specialized loop, as the remark and the schedule dump say them (`mixed`:
    the producer's threads also copy the loads TMA cannot, `copied`)."""
    tma = ring_copies.tma is not None
    mixed = tma and len(ring_copies.tma) < len(ring_copies.loads)  # type: ignore[arg-type]
    first, last = k.threads // 32, k.threads // 32 + k.warp_split.producers // 32 - 1
    mma_threads, dec, inc = k.warp_split.registers(k.threads, tma and not mixed)
    named = f"; named barriers {', '.join(b.describe() for b in k.warp_split.barriers)}"
    if k.warp_split.form == "tcgen05":
        regs = (f"; the role warpgroup setmaxnreg.dec {dec}" + (f", the epilogue setmaxnreg.inc {inc}" if inc else "")
                if dec else "")
        idle = f"; warps {last + 2}-{last + mma_threads // 32} idle" if mma_threads > 32 else ""
        beside = ", its lanes cp.async the rest, arriving on it when their copies land" if mixed else ""
        copies = (f"one thread issues TMA copies into {stages} stages, announcing their bytes on the stage's "
                  f"full mbarrier{beside}" if tma else f"cp.async into {stages} stages, completion on the stage's full mbarrier")
        producer = f"warp {first} produces" if first == last else f"warps {first}-{last} produce"
        epilogue = "run the epilogue"
        if not k.warp_split.producers:      # the epilogue warps copy first
            fill = ("load each element of the stages and store it (no copy is legal), arriving on the stage's "
                    "full mbarrier" if ring_copies.through else
                    f"fill {stages} stages (the first thread's TMA boxes announced on the stage's full mbarrier, "
                    f"every thread's cp.async of the rest arriving on it when they land)" if mixed else copies)
            producer, epilogue = "", f"{fill}, then run the epilogue"
        return (f"warp-specialized (tcgen05): {producer and producer + f' ({copies}), '}warp {last + 1} issues the MMAs "
                f"(one thread: waits full, tcgen05.mma, tcgen05.commit to the stage's empty mbarrier, then to "
                f"accumulator-ready{idle}), warps 0-{first - 1} {epilogue} (wait accumulator-ready, "
                f"tcgen05.ld){regs}{named}")
    copies = "one thread issues TMA copies" if tma else "cp.async only"
    if ring_copies.through:
        rest = [engine for engine in ("TMA", "cp.async") if engine in ring_copies.engine.split(" and ")]
        copies = "element-by-element loads and shared stores" + "".join(f", {engine}" for engine in rest)
    if k.warp_split.form == "attention":
        return (f"warp-specialized (attention): warp {first} produces ({copies} of K and V), warp {first + 1} "
                f"issues the MMAs (one thread: S = Q K^T, then O += P V once the softmax stored P), warps "
                f"{first + 2}-{last} idle (setmaxnreg.dec {dec}), warps 0-{first - 1} run the softmax and rescale "
                f"O in tensor memory{f' (setmaxnreg.inc {inc})' if inc else ''}{named}")
    if k.warp_split.note:
        copies += f"; the consumers issue the tcgen05 mmas: {k.warp_split.note}"
    tiles = "; persistent: both roles run the tile loop, the ring's phases carried over tiles" \
        if k.warp_split.outer is not None else ""
    budget = f"setmaxnreg.dec {dec}" if dec else "no setmaxnreg: the producer keeps its registers for its loads"
    return (f"warp-specialized: warps {first}-{last} produce ({copies}, {budget}), "
            f"warps 0-{first - 1} consume{f' (setmaxnreg.inc {inc})' if inc else ''}{tiles}{named}")


def _staged(p: ActivePipeline, load: Operation, offset: str) -> SharedMatrix:
    return replace(p.matrices[load], stage=offset)


def _stage_offset(k: KernelLowering, p: ActivePipeline, load: Operation, stage: str) -> str:
    if stage == "0":
        return ""
    return k.b.op(f"mul i32 {stage}, {p.stage_bytes[load]}", "so")


def _issue(k: KernelLowering, p: ActivePipeline, iv: str, stage: str, active: str) -> None:
    """Copies of every load of the iteration whose induction variable is `iv` into `stage` (where
    `active` is false: zero-fills with cp.async groups; nothing at all with mbarriers)."""
    if p.tma:   # one thread copies the stage (and every thread the loads TMA cannot: `copied`)
        first = k.b.op(f"icmp eq i32 {k.tid}, 0", "pf")
        k.guarded(k.b.op(f"and i1 {active}, {first}", "pf"), lambda: tma_iteration(k, p, iv, stage))
        if not copied(p):
            return
    if p.full is not None:
        full = mbarrier.address(k, p.full, stage)
        k.guarded(active, lambda: copy_iteration(k, p, iv, stage, None) or copies_arrive(k, p, full))
        return
    copy_iteration(k, p, iv, stage, active)
    commit(k)


def copies_arrive(k: KernelLowering, p: ActivePipeline, full: str) -> None:
    """This thread's arrival on the stage's full barrier once its copies have landed: with cp.async's
    `.noinc` arrival; where it stored a tile through registers, once its copies are done (the
    arrival's release orders its shared stores before the waiters' reads)."""
    if not through_registers(k, p):
        mbarrier.copies_arrive(k, full)
        return
    if any(chunk_elements(load, k.get(load.operand("view")), load.results[0].type) for load in copied(p)):
        wait_all(k)
    if any(p.matrices[load].swizzled for load in copied(p)):
        fence_async_proxy(k)    # wgmma / tcgen05.mma read the stage through the async proxy: this thread's stores first
    mbarrier.arrive(k, full)


@contextmanager
def at_iteration(k: KernelLowering, p: ActivePipeline, iv: str) -> Iterator[None]:
    """Within: the loop's induction variable is `iv` (i32 or i64, a later iteration's), and the loads'
    indices that its body computes from it (`ActivePipeline.index_ops`) are computed again from `iv`;
    after: every value as it was."""
    from .registry import LOWERINGS

    iv_arg = p.loop.regions[0].block.arguments[0]
    saved = k.values.get(iv_arg)
    results = [r for op in p.index_ops for r in op.results]
    shadowed = {r: k.values[r] for r in results if r in k.values}
    k.values[iv_arg] = k.splat(iv_arg.type, iv)  # type: ignore[arg-type]
    outer = k.current_op
    try:
        for op in p.index_ops:
            k.current_op = op
            LOWERINGS[op.name](k, op)
        k.current_op = outer
        yield
    finally:
        k.current_op = outer
        for r in results:
            k.values.pop(r, None)
        k.values.update(shadowed)
        if saved is not None:
            k.values[iv_arg] = saved


def copy_iteration(k: KernelLowering, p: ActivePipeline, iv: str, stage: str, active: Optional[str],
                   unrolled: int = ELEMENTS_UNROLLED, gather: bool = False) -> None:
    """This thread's copies of every load of the iteration whose induction variable is `iv` into `stage`
    (`unrolled`, `gather`: async_copy.issue_copies')."""
    with at_iteration(k, p, iv):
        for load in copied(p):
            view = k.get(load.operand("view"))
            issue_copies(k, load, view, load.results[0].type, _staged(p, load, _stage_offset(k, p, load, stage)),
                         active, unrolled=unrolled, gather=gather)


def tma_iteration(k: KernelLowering, p: ActivePipeline, iv: str, stage: str) -> None:
    """The one thread's TMA copies of the iteration whose induction variable is `iv` into `stage`,
    with the stage's bytes announced on its full barrier."""
    assert p.tma and p.full is not None
    offsets = {load: _stage_offset(k, p, load, stage) for load in p.loads}
    with at_iteration(k, p, iv):
        tma_copy.issue(k, p.tma, p.matrices, offsets, mbarrier.address(k, p.full, stage),
                       multicast.casts(k, p.cluster) if p.cluster else None, p.pair)


def begin_persistent(k: KernelLowering, outer: Operation) -> Optional[ActivePipeline]:
    """Before the persistent loop `outer` whose body runs the warp-specialized loop once a tile: that
    loop's pipeline, set up once for every tile (what its own prologue does before the loop: the ring,
    its mbarriers, `publish`, the producer's program, which runs the tile loop too), lowered as
    the loop itself, which then finds it (`hoisted`). None where it is not pipelined after all."""
    loop = k.warp_split.loop
    outer_op, k.current_op = k.current_op, loop    # its buffers are the loop's (the plan's requests)
    try:
        if getattr(k.assignment, "tcgen05_layouts", None):
            from .ops_tcgen05 import before_loop

            before_loop(k, loop)
        ops_wgmma.before_loop(k, loop)
        p = prepare(k, loop)
        if p is not None:
            assert p.persistent and p.cluster is None and p.pair is None, "warp_roles.persistent: one CTA's own"
            _set_up(k, p)
    finally:
        k.current_op = outer_op
    k.hoisted[loop] = p
    return p


def end_persistent(k: KernelLowering, p: ActivePipeline) -> None:
    """After the persistent loop: every stage the producer filled was waited for, so no copy nor
    arrival of it is in flight; the barriers are invalidated once every consumer is done with them."""
    wait_all(k)
    k.barrier()
    _invalidate(k, p)


def _invalidate(k: KernelLowering, p: ActivePipeline) -> None:
    """Invalidate the loop's barriers (after a CTA barrier: nobody uses them any more); where their
    bytes serve later buffers, a CTA barrier then keeps every thread's next writes after thread 0's
    invalidation."""
    mbarrier.inval(k, [p.full, p.empty])
    tma_copy.invalidate(k, list(p.once))
    if p.barriers_freed:
        k.barrier()


def prologue(k: KernelLowering, p: ActivePipeline, lb: str, step: str, ub: str, ity: str, unsigned: bool) -> None:
    """Before the loop: iterations 0 .. stages - 2 in flight (a persistent loop's run: set up before it)."""
    p.lb, p.step, p.ub, p.ity, p.unsigned = lb, step, ub, ity, unsigned
    if not p.persistent:
        _set_up(k, p)


def _set_up(k: KernelLowering, p: ActivePipeline) -> None:
    """The prologue but for the loop's bounds: the barriers, the roles, the first stages."""
    # Tiles copied before the loop (attention's queries) land here, once: waiting for them inside
    # the loop would also wait for the prefetches. The barrier makes them visible to every thread
    # (and ends whatever read these buffers before, e.g. an enclosing loop's last iteration).
    # Tiles copied once by TMA (tma_copy.load_once) are waited for on their own barriers, by the
    # threads that read them, once this loop's first copies are under way.
    wait_all(k)
    p.once = tuple(tma_copy.one_shots(k, pending_only=True))
    if p.full is not None and p.empty is not None:
        # full: the TMA thread's arrival and one .noinc copy arrival per copying thread; empty: one
        # release per reading thread
        copiers = (1 if p.tma else 0) + \
            ((k.warp_split.copiers(k.threads)[1] if p.specialized else k.threads) if copied(p) else 0)
        releasers = 1 if p.mma_reads or p.committed else k.threads  # the MMA thread's tcgen05.commit, or every reader
        if p.cluster is not None:   # ...of every CTA that receives this CTA's slices
            releasers *= p.cluster.releasing_ctas
        mbarrier.init(k, [(p.full, [copiers] * p.stages), (p.empty, [releasers] * p.stages)])
    if p.specialized:
        warp_specialize.publish(k)      # the consumers' copies and the mbarriers, for everyone
    elif p.pair is not None:
        cta_pair.meet(k, tensor_memory=True)
    elif p.cluster is not None:
        multicast.sync(k, relaxed=True)   # every CTA's barriers initialized, its buffers free, before any slice lands
    else:
        k.barrier()
    for value in k.values.values():
        if isinstance(value, SharedTileVal) and value.pending:
            value.pending = False
    if p.specialized:
        if p.mma_warp:      # (the MMA warp reads them too: everyone waits, before the roles part)
            tma_copy.wait_once(k, list(p.once))
        warp_specialize.emit_producer(k, p)
        if not p.mma_warp:  # the consumers, while the producer fills the stages
            tma_copy.wait_once(k, list(p.once))
        return
    if p.tma:
        k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "pf"), lambda: tma_copy.prefetch(k, p.tma))
    lb, step, ity = p.lb, p.step, p.ity
    for s in range(p.stages - 1):
        iv = lb if s == 0 else k.b.op(f"add {ity} {lb}, {k.b.op(f'mul {ity} {step}, {s}', 'pf')}", "pf")
        _issue(k, p, iv, str(s), _in_range(k, p, iv))
    tma_copy.wait_once(k, list(p.once))


def _in_range(k: KernelLowering, p: ActivePipeline, iv: str) -> str:
    return k.b.op(f"icmp {'ult' if p.unsigned else 'slt'} {p.ity} {iv}, {p.ub}", "pf")


def start_iteration(p: ActivePipeline, iv: str, counter: str) -> None:
    p.iv, p.counter, p.read = iv, counter, None


def load(k: KernelLowering, p: ActivePipeline, op: Operation) -> SharedTileVal:
    """The tile a pipelined load reads this iteration (issuing the next iteration's copies first)."""
    if p.read is None and p.specialized:
        _consume(k, p, wait=not p.mma_reads)
    if p.read is None and p.full is not None:
        _handshake(k, p)
    if p.read is None and p.stages == 1:   # one stage: refilled once every thread has read it, then waited for
        k.barrier()
        _issue(k, p, p.iv, "0", _in_range(k, p, p.iv))
        wait_groups(k, 0)
        if any(m.swizzled for m in p.matrices.values()):
            fence_async_proxy(k)
        k.barrier()
        p.read = _stage_tiles(k, p, "0")
    if p.read is None:
        wait_groups(k, p.stages - 2)
        if any(m.swizzled for m in p.matrices.values()):
            fence_async_proxy(k)   # wgmma reads these stages through the async proxy
        k.barrier()
        ahead = k.b.op(f"add {p.ity} {p.iv}, {k.b.op(f'mul {p.ity} {p.step}, {p.stages - 1}', 'pf')}", "pf")
        write = k.b.op(f"urem i32 {k.b.op(f'add i32 {p.counter}, {p.stages - 1}', 'pf')}, {p.stages}", "pf")
        _issue(k, p, ahead, write, _in_range(k, p, ahead))
        read = k.b.op(f"urem i32 {p.counter}, {p.stages}", "pf")
        p.read = _stage_tiles(k, p, read)
    return p.read[op]




def _stage_tiles(k: KernelLowering, p: ActivePipeline, slot: str) -> dict:
    """Each pipelined load's tile in stage `slot` (an i32 value or literal) of its ring."""
    return {ld: SharedTileVal(ld.results[0].type, _staged(p, ld, _stage_offset(k, p, ld, slot))) for ld in p.loads}


def _handshake(k: KernelLowering, p: ActivePipeline) -> None:
    """The mbarrier form of one iteration's start: release the stage iteration i - 1 read, wait until
    every thread has, refill it with iteration i + stages - 1, then wait for iteration i's stage.
    With a wgmma group left in flight, the release and refill come after this iteration's wgmma
    instead (mma_retired), once its wait_group 1 has retired iteration i - 1's group."""
    if p.retiring is None:
        _refill(k, p)
    _consume(k, p)


def _refill(k: KernelLowering, p: ActivePipeline) -> None:
    """Every thread releases the stage iteration i - 1 read (where its MMA's commit does not) and
    waits until all have; then the stage is refilled with iteration i + stages - 1."""
    assert p.empty is not None
    empty = p.empty
    ahead = k.b.op(f"add {p.ity} {p.iv}, {k.b.op(f'mul {p.ity} {p.step}, {p.stages - 1}', 'pf')}", "pf")
    write = k.b.op(f"urem i32 {k.b.op(f'add i32 {p.counter}, {p.stages - 1}', 'pf')}, {p.stages}", "pf")

    def release() -> None:
        bar = mbarrier.address(k, empty, write)
        if p.committed:             # released by the commit of the MMA that read it: only waited for
            pass
        elif p.cluster is not None:   # released in every CTA the stage's slices came from
            multicast.release(k, p.cluster, bar)
        else:
            mbarrier.arrive(k, bar)
        mbarrier.wait(k, bar, mbarrier.phase_parity(k, k.b.op(f"sub i32 {p.counter}, 1", "pf"), p.stages),
                      "stage empty")
    k.guarded(k.b.op(f"icmp ugt i32 {p.counter}, 0", "pf"), release)
    _issue(k, p, ahead, write, _in_range(k, p, ahead))


def _consume(k: KernelLowering, p: ActivePipeline, wait: bool = True) -> None:
    """A consumer's iteration start (every thread's, unspecialized): wait until the stage is full
    (not where only the MMA warp reads it)."""
    assert p.full is not None
    read = k.b.op(f"urem i32 {p.counter}, {p.stages}", "pf")
    if not wait:
        p.read = _stage_tiles(k, p, read)
        return
    full = mbarrier.address(k, p.full, read)
    parity = mbarrier.phase_parity(k, p.counter, p.stages)
    if p.pair is not None and not cta_pair.reads_own_stages(p):   # both CTAs' A and B land on the leader's
        k.guarded(cta_pair.is_leader(k), lambda: mbarrier.wait(k, full, parity, "stage full") or None)
    else:
        mbarrier.wait(k, full, parity, "stage full")
    if not p.tma and any(m.swizzled for m in p.matrices.values()):
        fence_async_proxy(k)   # wgmma reads these stages through the async proxy (TMA writes through it)
    p.read = _stage_tiles(k, p, read)


def end_iteration(k: KernelLowering, p: ActivePipeline) -> None:
    """A consumer is done with this iteration's stage (its mmas have waited for their reads): the
    producer may refill it. (With a wgmma group in flight, mma_retired releases it a step later.)"""
    if p.specialized and p.empty is not None and p.retiring is None and not p.mma_reads:
        read = k.b.op(f"urem i32 {p.counter}, {p.stages}", "pf")
        mbarrier.arrive(k, mbarrier.address(k, p.empty, read))


def retiring_pipeline(k: KernelLowering, mma: Operation) -> Optional[ActivePipeline]:
    """The active pipeline whose stage releases wait for `mma`'s group to retire, if any."""
    return next((p for p in k.active_pipelines.values() if p.retiring is mma), None)


def mma_retired(k: KernelLowering, p: ActivePipeline) -> None:
    """After iteration i's wgmma.wait_group 1: iteration i - 1's group has read its stage, which is
    released now (the producer's to refill; unspecialized, every thread's release is waited for
    and the stage refilled with iteration i + stages - 1, as _refill does at an iteration's start
    otherwise). Never before that wait: the wgmma of i - 1 may still be reading the stage."""
    if not p.specialized:
        _refill(k, p)
        return
    assert p.empty is not None
    empty = p.empty

    def release() -> None:
        previous = k.b.op(f"urem i32 {k.b.op(f'add i32 {p.counter}, {p.stages - 1}', 'pf')}, {p.stages}", "pf")
        mbarrier.arrive(k, mbarrier.address(k, empty, previous))
    k.guarded(k.b.op(f"icmp ugt i32 {p.counter}, {p.base}", "pf"), release)   # not this run's first


def epilogue(k: KernelLowering, p: ActivePipeline, loop: Operation) -> bool:
    """Where the loop runs wholly in its producer and MMA warps, the consumers' (epilogue warps')
    part of it instead of its body (True); else False. The loop is a top-level one that runs once,
    so its barriers are not invalidated (the last stages' `empty` arrivals nobody waits for)."""
    if not p.mma_warp:
        return False
    from .warp_specialize_tcgen05 import epilogue as read_accumulators

    read_accumulators(k, p, loop)
    return True


def finish(k: KernelLowering, p: ActivePipeline, results: list) -> list:
    """After the loop: no copy is left in flight, and the barriers are invalidated once nobody uses
    them (a loop that runs again initializes them afresh). A wgmma group left in flight is waited
    for first; the loop's results (`results`, returned) then hold its accumulator as the wait gives it."""
    if p.retiring is not None and not p.committed:
        body = p.loop.regions[0].block
        at = body.arguments.index(p.retiring.operand("acc")) - 1
        results = [ops_wgmma.wait_group(k, 0, r) if i == at else r for i, r in enumerate(results)]
    if p.mma_reads:    # the MMA warp's last commits: then no arrival on the barriers is pending
        from .warp_specialize_tcgen05 import mma_warp_done

        mma_warp_done(k)
    if p.committed:    # the last MMAs complete (the accumulator, the stages' last releases)
        from .ops_tcgen05 import mmas_done

        mmas_done(k)
    if p.persistent:    # the next tile's run goes on with the ring (`end_persistent`)
        if p.retiring is not None:    # the last iteration's stage, read by the group just retired
            assert p.empty is not None
            empty = p.empty
            last = k.b.op(f"urem i32 {k.b.op(f'add i32 {p.ring_out}, {p.stages - 1}', 'pf')}, {p.stages}", "pf")
            k.guarded(k.b.op(f"icmp ugt i32 {p.ring_out}, {p.base}", "pf"),
                      lambda: mbarrier.arrive(k, mbarrier.address(k, empty, last)))
        return results
    wait_all(k)
    if p.full is not None and p.empty is not None:
        if p.cluster is not None:
            multicast.sync(k)   # no peer's release still on its way to these barriers; none exits while
        else:                   # slices may still land in it
            k.barrier()
        _invalidate(k, p)
    return results
