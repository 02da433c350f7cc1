"""A `for` loop whose tensor-core operands are prefetched `stages - 1` iterations ahead.

schedule/pipeline.py picks the loop and its loads; this module emits them.
Each load gets `stages` shared buffers. Before the loop, iterations 0 ..
stages - 2 are copied in (one cp.async group each, zero-filling past the
loop's end); at its first load, iteration i waits until only `stages - 2`
groups are in flight (its own has landed), meets the CTA at a barrier (every
thread's copies are visible, and everyone is done with the stage iteration
i - 1 read), and then copies iteration i + stages - 1 into that freed stage.
The loads themselves only name the stage `i mod stages`. After the loop every
copy is drained (async_copy.wait_all).
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record, replace
from .async_copy import (chunk_elements, commit, fence_async_proxy, issue_copies, matrix_shape, new_matrix,
                         wait_all, wait_groups)
from .kernel import KernelLowering
from .smem import SharedMatrix, opt_in_limit
from .values import PartitionViewVal, SharedTileVal


@record(frozen=False)
class ActivePipeline:
    loop: Operation
    loads: tuple[Operation, ...]
    matrices: dict                      # load op -> SharedMatrix of stage 0
    stages: int
    stage_bytes: dict                   # load op -> bytes from one stage to the next
    counter: str = ""                   # i32 iteration number (a phi of the loop header)
    iv: str = ""
    step: str = ""
    ub: str = ""
    ity: str = "i32"
    unsigned: bool = False
    read: Optional[dict] = None         # load op -> SharedTileVal of this iteration, once issued


def prepare(k: KernelLowering, op: Operation) -> Optional[ActivePipeline]:
    """The pipeline of loop `op`, its buffers allocated, or None when it is not pipelined."""
    from ..schedule.pipeline import fit_stages

    plan = k.pipelines.get(op) if k.pipelines else None
    if plan is None:
        return None
    views = [k.get(load.operand("view")) for load in plan.loads]
    if not all(isinstance(v, PartitionViewVal) and chunk_elements(load, v, load.results[0].type)
               for load, v in zip(plan.loads, views)):
        return None
    swizzled = {load: k.assignment is not None and k.assignment.is_swizzled(load.results[0]) for load in plan.loads}
    sizes = {load: matrix_shape(k, load.results[0].type, swizzled[load]).nbytes for load in plan.loads}
    used = k.buffer_bytes + k.smem_bytes + k.static_smem_bytes
    where = f"loop at {op.location}" if getattr(op, "location", None) else "a loop"
    head, *rows = plan.describe()
    k.schedule_notes += [f"//   {where}: {head}", *(f"//     {row}" for row in rows)]
    schedule = plan.schedule
    ii = f"{schedule.ii * plan.graph.tick} cycles"
    if not plan.pipelined:
        k.remark("missed", "memory", "RemarkPipelineMissed", "Loop not software-pipelined", op,
                 Reason=f"serial schedule: {schedule.reason}")
        k.schedule_notes.append(f"//   {where}: not pipelined: {schedule.reason}")
        return None
    fit = fit_stages(plan, sizes, used, opt_in_limit(k.sm))
    stages = fit.stages
    if not stages:
        k.remark("missed", "memory", "RemarkPipelineMissed", "Loop not software-pipelined", op,
                 Reason=f"{fit.reason} of shared memory", II=ii, WantedStages=str(fit.wanted))
        k.pipelines_refused = True   # lower_entry may try again without padding
        k.schedule_notes.append(f"//   {where}: not pipelined: {fit.reason}")
        return None
    matrices = {load: new_matrix(k, load.results[0].type, stages, swizzled[load]) for load in plan.loads}
    k.remark("passed", "memory", "RemarkPipelineDepth", "Loop software-pipelined", op, Stages=str(stages),
             Loads=str(len(plan.loads)), StageBytes=str(sum(sizes.values())), II=ii,
             WantedStages=str(fit.wanted),
             Reason=f"{schedule.reason} (in ticks of {plan.graph.tick} cycles); {fit.reason}")
    k.schedule_notes.append(f"//   {where}: {stages}-stage cp.async pipeline of {len(plan.loads)} tile loads, "
                            f"{sum(sizes.values())} bytes a stage, copies {stages - 1} iterations ahead "
                            f"({fit.reason}; {fit.barriers.describe() if fit.barriers else ''})")
    return ActivePipeline(op, plan.loads, matrices, stages, sizes)


def _staged(p: ActivePipeline, load: Operation, offset: str) -> SharedMatrix:
    return replace(p.matrices[load], stage=offset)


def _stage_offset(k: KernelLowering, p: ActivePipeline, load: Operation, stage: str) -> str:
    if stage == "0":
        return ""
    return k.b.op(f"mul i32 {stage}, {p.stage_bytes[load]}", "so")


def _issue(k: KernelLowering, p: ActivePipeline, iv: str, stage: str, active: str) -> None:
    """Copies of every load of the iteration whose induction variable is `iv` into `stage`."""
    iv_arg = p.loop.regions[0].block.arguments[0]
    saved = k.values.get(iv_arg)
    k.values[iv_arg] = k.splat(iv_arg.type, iv)  # type: ignore[arg-type]
    for load in p.loads:
        view = k.get(load.operand("view"))
        issue_copies(k, load, view, load.results[0].type, _staged(p, load, _stage_offset(k, p, load, stage)), active)
    if saved is not None:
        k.values[iv_arg] = saved
    commit(k)


def prologue(k: KernelLowering, p: ActivePipeline, lb: str, step: str, ub: str, ity: str, unsigned: bool) -> None:
    """Before the loop: iterations 0 .. stages - 2 in flight."""
    p.step, p.ub, p.ity, p.unsigned = step, ub, ity, unsigned
    # Tiles copied before the loop (attention's queries) land here, once: waiting for them inside
    # the loop would also wait for the prefetches. The barrier makes them visible to every thread
    # (and ends whatever read these buffers before, e.g. an enclosing loop's last iteration).
    wait_all(k)
    k.barrier()
    for value in k.values.values():
        if isinstance(value, SharedTileVal) and value.pending:
            value.pending = False
    for s in range(p.stages - 1):
        iv = lb if s == 0 else k.b.op(f"add {ity} {lb}, {k.b.op(f'mul {ity} {step}, {s}', 'pf')}", "pf")
        _issue(k, p, iv, str(s), _in_range(k, p, iv))


def _in_range(k: KernelLowering, p: ActivePipeline, iv: str) -> str:
    return k.b.op(f"icmp {'ult' if p.unsigned else 'slt'} {p.ity} {iv}, {p.ub}", "pf")


def start_iteration(p: ActivePipeline, iv: str, counter: str) -> None:
    p.iv, p.counter, p.read = iv, counter, None


def load(k: KernelLowering, p: ActivePipeline, op: Operation) -> SharedTileVal:
    """The tile a pipelined load reads this iteration (issuing the next iteration's copies first)."""
    if p.read is None:
        wait_groups(k, p.stages - 2)
        if any(m.swizzled for m in p.matrices.values()):
            fence_async_proxy(k)   # wgmma reads these stages through the async proxy
        k.barrier()
        ahead = k.b.op(f"add {p.ity} {p.iv}, {k.b.op(f'mul {p.ity} {p.step}, {p.stages - 1}', 'pf')}", "pf")
        write = k.b.op(f"urem i32 {k.b.op(f'add i32 {p.counter}, {p.stages - 1}', 'pf')}, {p.stages}", "pf")
        _issue(k, p, ahead, write, _in_range(k, p, ahead))
        read = k.b.op(f"urem i32 {p.counter}, {p.stages}", "pf")
        p.read = {ld: SharedTileVal(ld.results[0].type, _staged(p, ld, _stage_offset(k, p, ld, read)))
                  for ld in p.loads}
    return p.read[op]


