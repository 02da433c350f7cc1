"""Passes `plan-pipelines` and `plan-warp-roles`: a kernel's schedule, decided at the nv_tileas level
(`plan-shared-memory`, shared_plan.py, sizes its shared-memory buffers after them).

Before any LLVM is emitted the level decides, per kernel, from its IR and layouts alone:

* which `for` loops are software-pipelined, which of their loads become staged asynchronous
  copies (those no copy can stage are left to the loop's body: uncopied_loads.py), and the loop's
  modulo schedule (`schedule/pipeline.py`: dependence graph, resource model, modulo scheduler); the
  depth in stages is the buffer plan's (`plan-shared-memory`, shared_stages.py), fitted beside the
  buffers placed before the loop;
* whether the kernel's first top-level pipelined loop (or a persistent loop's) is warp-specialized, in which form (sm_90
  and sm_120 consumer warpgroups, sm_100's MMA warp, sm_100 attention), with which mmas issued by
  whom, its named barriers and its occupancy, or why not (`warp_roles.decide`).

`plan-shared-memory` then adds how each pipelined loop's stages are filled (TMA boxes or cp.async,
cluster multicast, a CTA pair's halves: `pipeline_copies.decide_all`, `KernelPlan.ring_copies`),
which loop-invariant operands are copied once by TMA before their loop (`KernelPlan.once_copies`), and
whether each such loop's mbarriers are freed after it (`KernelPlan.barriers_freed`).

The decisions live in the kernel's `KernelPlan` (`assignment.plan`, beside its layouts), which the
LLVM lowering reads: `lowering/pipelined_loop.py` lowers the planned loops, `warp_specialize.begin`
the planned roles. A loop whose stages do not fit stays unpipelined, which is the buffer plan's to
say: where that loop is the specialized one, `plan-shared-memory` drops the roles and plans the
kernel again without them (the lowering takes nothing back: a split it did not emit is an internal
error, warp_specialize.end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from ..ir.core import Operation, Value
from ..ir.record import record
from ..target import Caps, caps

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment
    from ..layout.encodings import Layout


@record(frozen=False)
class KernelPlan:
    """The schedule decisions of one kernel (the passes below fill it)."""
    pipelines: dict          # `for` op -> schedule.pipeline.PipelinePlan
    declined: Any = None     # `for` op -> why it is not pipelined though its loads could be staged
    uncopied: Any = None     # load -> why no copy stages it: left to the body of its pipelined loop (uncopied_loads.py)
    warp_split: Any = None   # warp_roles.WarpSplit of the specialized loop, or None
    warp_split_refused: str = ""     # why no loop is warp-specialized
    shared: Any = None       # shared_plan.SharedPlan: the shared-memory buffers sized before emission
    ring_copies: Any = None  # pipelined loop -> pipeline_copies.RingCopies: TMA or cp.async, boxes, multicast
                             # (plan-shared-memory decides them; None until it ran)
    once_copies: Any = None  # load -> pipeline_copies.OnceCopy: a loop-invariant operand copied once by TMA, or why not
    # loop of `ring_copies` -> whether its mbarriers live as its ring does, freed after it
    # (warp_roles.frees_barriers), not to the kernel's end
    barriers_freed: Optional[dict[Operation, bool]] = None


@record
class KernelFacts:
    """The kernel as the schedule decisions see it: the attributes of `lowering.kernel.KernelLowering`
    they read, without any LLVM."""
    entry: Operation
    sm: int
    threads: int
    assignment: "LayoutAssignment"
    pipelines: dict

    @property
    def caps(self) -> "Caps":
        """What the target has (tileiras/target/table.py)."""
        return caps(self.sm)

    def layout_of(self, value: Value) -> "Layout":
        return value.layout if value.layout is not None else self.assignment.blocked


def plan_of(assignment: "LayoutAssignment") -> KernelPlan:
    """The kernel's plan (empty until the passes ran)."""
    return assignment.plan


def plan_pipelines(entry: Operation, assignment: "LayoutAssignment") -> None:
    """Pass `plan-pipelines`: the loops to pipeline, their loads and modulo schedules."""
    if not any(op.name == "cuda_tile.for" for op in entry.walk()):
        plan_of(assignment).pipelines = {}    # no loop to pipeline (the scheduler is not loaded)
        return
    from ..schedule.pipeline import plan_pipelines as plan_loops
    from ..tileaa.hints import occupancy
    from .uncopied_loads import prune

    plan = plan_of(assignment)
    plan.declined, plan.uncopied = {}, {}
    plan.pipelines = plan_loops(entry, assignment, plan.declined)
    hint = occupancy(entry, assignment.sm)
    for loop, pipeline in plan.pipelines.items():
        plan.pipelines[loop], left = prune(pipeline, assignment, hint)
        plan.uncopied.update(left)


def plan_warp_roles(entry: Operation, assignment: "LayoutAssignment") -> None:
    """Pass `plan-warp-roles`: the warp-specialized loop and its roles, or why there is none."""
    from .warp_roles import decide

    plan = plan_of(assignment)
    facts = KernelFacts(entry, assignment.sm, assignment.threads, assignment, plan.pipelines)
    plan.warp_split, plan.warp_split_refused = decide(facts)


def plan_lines(entry: Operation, assignment: "LayoutAssignment", name_of: Callable[[Value], str]) -> list[str]:
    """Comment lines for --print-ir-after-all: each pipelined loop's loads and schedule, the warp roles."""
    plan = plan_of(assignment)
    lines: list[str] = []
    for loop, pipeline in plan.pipelines.items():
        loads = ", ".join(name_of(load.results[0]) for load in pipeline.loads)
        lines.append(f"//   loop at {loop.location}: stages the loads {loads}")
        lines += [f"//     {line}" for line in pipeline.describe()]
    for load, why in (plan.uncopied or {}).items():
        lines.append(f"//   {name_of(load.results[0])} loaded in its loop's body, not staged: {why}")
    for loop, why in (plan.declined or {}).items():
        lines.append(f"//   loop at {loop.location}: not pipelined: {why}")
    split: Optional[Any] = plan.warp_split
    if split is None:
        lines.append(f"//   warp roles: none ({plan.warp_split_refused or 'no pipelined loop'})")
    else:
        mmas = ", ".join(name_of(op.results[0]) for op in split.mmas)
        issuers = f"an MMA warp issues {mmas}" if mmas else "the consumers issue the mmas"
        tiles = f" (run once a tile by the persistent loop at {split.outer.location})" if split.outer else ""
        producer = f"a producer of {split.producers} threads" if split.producers else "the consumers copy"
        lines.append(f"//   warp roles: the {split.form} form at the loop at {split.loop.location}{tiles}: {producer}, "
                     f"{issuers}; named barriers "
                     f"{'; '.join(b.describe() for b in split.barriers)}")
    return lines
