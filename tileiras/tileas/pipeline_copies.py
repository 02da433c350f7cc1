"""Which engine copies a pipelined loop's loads into its stages, decided by `plan-shared-memory`
(`decide_all`, recorded in the kernel's plan as `KernelPlan.ring_copies`; the lowering,
lowering/pipelined_loop.prepare, reads the decision and emits it): TMA boxes (one thread issues a
stage's copies, completion counted in bytes on the stage's full mbarrier) or cp.async (every thread
copies its chunks), with a remark on each load TMA refuses; in a cluster-split kernel, which
shared tiles are multicast (multicast_groups.py); a CTA pair's copies each hold its A rows and half
of B (cta_pairs.py). The boxes themselves: tma_boxes.pipeline_copies.

So is how a loop-invariant tensor-core operand loaded before its loop (attention's queries) is
copied (`once`, `KernelPlan.once_copies`): once by TMA on its own mbarrier (lowering/tma_copy.load_once),
or staged as any other load.

The decision is made on the ring as `stage_rings.ring_of` gives it (its stages' geometry, not their
depth nor their offsets) for every pipelined loop of a target whose rings hand stages over with
mbarriers; the tensor maps' slots among the kernel's hidden parameters are the lowering's to number.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..ir.core import Operation, Value
from ..ir.record import record
from ..transforms.rewrite import inside_op
from . import multicast_groups, tma_boxes
from .multicast_groups import ClusterLoads


@record
class CopyRemark:
    """An optimization remark the decision makes (category "memory"), reported by the lowering where it
    lowers the loop, in the order made (KernelLowering.remark)."""
    kind: str
    name: str
    message: str
    op: Operation
    args: tuple = ()        # (key, value) pairs


@record
class RingCopies:
    """How a pipelined loop's loads reach its stages: `tma` (load -> tma_boxes.TmaCopy, its `slot` unset:
    the lowering numbers the tensor maps) or None where every load is copied by cp.async; the loads of
    the loop TMA does not copy keep cp.async beside its boxes, but for `through`, which neither can copy:
    loaded and stored element by element (StageRing.through_registers). `cluster`: the multicast plan of a
    cluster-split kernel's shared tiles, or None."""
    loop: Operation
    loads: tuple
    tma: Optional[dict] = None
    cluster: Optional[ClusterLoads] = None
    remarks: tuple = ()     # CopyRemark
    through: tuple = ()     # loads staged through registers

    def engine_of(self, load: Operation) -> str:
        return "TMA" if self.tma and load in self.tma else "registers" if load in self.through else "cp.async"

    @property
    def engine(self) -> str:
        return " and ".join(dict.fromkeys(self.engine_of(load) for load in self.loads))

    def describe(self, name_of: Callable[[Value], str]) -> list[str]:
        """Dump lines: the engine, each load's boxes, the multicast plan."""
        at = f" at {self.loop.location}" if self.loop.location else ""
        lines = [f"the loop{at}: copies by {self.engine}"]
        for load in self.loads:
            t = self.tma.get(load) if self.tma else None
            if t is None:
                how = "element by element through registers" if load in self.through else "cp.async"
                lines.append(f"  {name_of(load.results[0])}: {how}")
                continue
            n = t.atoms * t.bands
            cast = f", one slice of {t.slices} multicast to the CTAs sharing it" if t.slices > 1 else ""
            pair = (f", each CTA of the pair {t.pair_part[1]} elements of box dimension {t.pair_part[0]}"
                    if t.pair_part != (0, 0) else "")
            lines.append(f"  {name_of(load.results[0])}: TMA, {n} box{'es' if n > 1 else ''} of "
                         f"{'x'.join(map(str, t.box))} swizzle {t.spec.swizzle}{cast}{pair}, {t.nbytes} bytes a stage")
        if self.cluster is not None:
            lines.append(f"  multicast over {self.cluster.ctas} CTAs, each stage released in "
                         f"{self.cluster.releasing_ctas} CTAs")
        return lines


@record
class OnceCopy:
    """How a tensor-core operand loaded in the kernel's body before a pipelined loop that reads it every
    iteration (attention's queries) is copied: once by TMA (`tma`, its `slot` unset) into a swizzled
    buffer, waited for by the loop's prologue; or, where TMA cannot (`why`), staged as any other load."""
    load: Operation
    tma: Optional[Any] = None   # tma_boxes.TmaCopy
    why: str = ""

    def describe(self, name_of: Callable[[Value], str]) -> str:
        at = f" at {self.load.location}" if self.load.location else ""
        if self.tma is None:
            return f"{name_of(self.load.results[0])}{at}: loaded once before its loop, not by TMA: {self.why}"
        t = self.tma
        n = t.atoms * t.bands
        return (f"{name_of(self.load.results[0])}{at}: copied once by TMA before its loop, {n} box{'es' if n > 1 else ''}"
                f" of {'x'.join(map(str, t.box))} swizzle {t.spec.swizzle}, {t.nbytes} bytes")


def decide_all(k: Any) -> tuple[dict, dict]:
    """(pipelined loop -> its RingCopies, for every loop of the kernel with a ring: `decide`; load ->
    its OnceCopy, for every load of the kernel's body a pipelined loop reads every iteration: `once`).
    `k`: the kernel as the middle level sees it (shared_stages.StagingFacts), its warp split settled.
    A kernel without a pipelined loop has neither (and loads no scheduler to say so)."""
    if not any(plan.pipelined for plan in (k.pipelines or {}).values()):
        return {}, {}
    rings = {}
    for loop in k.pipelines or {}:
        copies = decide(k, loop)
        if copies is not None:
            rings[loop] = copies
    shots = {}
    for op in k.entry.regions[0].block.operations:
        if op.name == "cuda_tile.load_view_tko" and (shot := once(k, op)) is not None:
            shots[op] = shot
    return rings, shots


def decide(k: Any, loop: Operation) -> Optional[RingCopies]:
    """The copies of `loop`'s ring, or None where the loop has no pipelined ring or the target hands
    stages over with cp.async groups (no TMA, no choice)."""
    from .stage_rings import ring_of, uses_mbarriers

    ring = ring_of(k, loop)
    if ring is None or not ring.plan.pipelined or not uses_mbarriers(k):
        return None
    loads = ring.plan.loads
    matrices = {load: ring.matrix(k, load) for load in loads}
    remarks: list[CopyRemark] = []

    def note(kind: str, name: str, message: str, op: Operation, **args: object) -> None:
        remarks.append(CopyRemark(kind, name, message, op, tuple(args.items())))

    tma, cluster = choose(k, loop, loads, matrices, ring.dense, ring.tiles, ring.pair is not None, ring.beside,
                          ring.refilled, note, ring.through_registers)
    return RingCopies(loop, loads, tma, cluster, tuple(remarks), ring.through_registers)


def choose(k: Any, loop: Operation, loads: tuple, matrices: dict, dense: "set | frozenset", tiles: dict,
           paired: bool, beside: "set | frozenset", refilled: "set | frozenset", note: Callable[..., None],
           through: tuple = ()) -> tuple[Optional[dict], Optional[ClusterLoads]]:
    """The loads' TMA copies (load -> tma_boxes.TmaCopy, targets with the "tma" feature) and the
    cluster's multicast plan; (None, None) where a load cannot use TMA: the loop then keeps cp.async
    (the full barrier counts the copying threads' arrivals) and a remark on each load says why. The
    loads of `beside` (StageRing.beside: those cp.async can copy, block scales in unpadded stages) may
    keep cp.async beside the others' TMA boxes: the full barrier then counts the TMA thread's arrival
    with the copying threads' (NVIDIA's A scales); so may those of `through`, which the threads that copy stage
    element by element (StageRing.through_registers).
    In a kernel split over a cluster, the tiles several CTAs load are multicast in slices where
    `multicast_groups.plan` allows; a CTA pair's (`paired`) copy each its own A rows and half of B
    (`tiles`: what each stage holds). `k`: the kernel (its target's capabilities, its warp split);
    `note`: takes the remarks (CopyRemark's fields)."""
    if not k.caps.has("tma"):
        multicast_groups.refuse(k, loop, loads, "", note)
        return None, None
    copies, why = tma_boxes.pipeline_copies(k.caps, loads, matrices, dense, tiles, beside, refilled)
    if copies is None:
        for load in loads:
            reason = why.get(load) or "another load of the loop cannot use TMA: " + "; ".join(why.values())
            note("missed", "RemarkTmaLoadMissed", "Pipelined load copied with cp.async, not TMA", load, Reason=reason)
        multicast_groups.refuse(k, loop, loads, "the loads are copied with cp.async, not TMA", note)
        return None, None
    for load, reason in why.items():
        if load in through:
            note("missed", "RemarkTmaLoadMissed", "Pipelined load staged element by element, not by TMA", load,
                 Reason=f"{reason} (the producer warps load and store it beside the other loads' TMA boxes, "
                        "on the same full mbarrier)")
        else:
            note("missed", "RemarkTmaLoadMissed", "Pipelined load copied with cp.async, not TMA", load,
                 Reason=f"{reason} (cp.async beside the other loads' TMA boxes, on the same full mbarrier)")
    for load, t in copies.items():
        if t.spec.built:
            note("passed", "RemarkTmaKernelMap", "Pipelined load copied by TMA through a tensor map the kernel makes",
                 load, Reason="the view's base, extents or strides are computed in the kernel: the thread that issues "
                              "the copies writes the map to global memory before the loop (lowering/kernel_maps.py)")
    cluster = None
    if paired:
        note("passed", "RemarkTmaCtaPair", "Operands copied by the CTA pair", loop,
             Reason="each CTA copies its A rows and half of B's columns; the copies complete on the pair "
                    "leader's mbarrier (.cta_group::2)")
    elif not why:
        cluster, copies = multicast_groups.plan(k, loop, copies, note)
    else:
        multicast_groups.refuse(k, loop, loads, "a load of the loop is copied with cp.async", note)
    return copies, cluster


def once(k: Any, op: Operation) -> Optional[OnceCopy]:
    """How load `op` is copied where it is a weak load of a tensor-core operand in the kernel's body (so
    it runs once: its barrier is never initialized twice), read by a pipelined loop every iteration, its
    buffer swizzled, on a target whose rings TMA fills; None where that does not apply (it is staged as
    any other load)."""
    from ..layout.shared_matrix import matrix_shape
    from .stage_rings import uses_mbarriers

    if not k.caps.has("tma") or not uses_mbarriers(k) or k.assignment is None \
            or str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak" \
            or not k.assignment.is_shared_operand(op.results[0]) \
            or op.parent is not k.entry.regions[0].block or not k.assignment.is_swizzled(op.results[0]) \
            or _reading_loop(k, op) is None:
        return None
    t, why = tma_boxes.plan(op, matrix_shape(op.results[0].type, k.pad_buffers, swizzled=True), tma_boxes.box_rows(k.caps))
    return OnceCopy(op, t, why)


def _reading_loop(k: Any, op: Operation) -> Optional[Operation]:
    """The pipelined loop (one `op` is not inside) that reads the tile `op` loads, through the ops
    between (reshapes, transposes), if any."""
    loops = [loop for loop, plan in k.pipelines.items() if plan.pipelined] if k.pipelines else []
    todo, seen = list(op.results[:1]), set()
    while todo:
        for use in getattr(todo.pop(), "uses", []):
            loop = next((loop for loop in loops if use is loop or inside_op(use, loop)), None)
            if loop is not None:
                return None if inside_op(op, loop) else loop
            if id(use) not in seen:
                seen.add(id(use))
                todo += use.results
    return None
