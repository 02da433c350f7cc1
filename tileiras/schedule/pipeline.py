"""Software pipelines of tile loops: which `for` loops prefetch their tensor-core operands, how deep.

A `for` loop whose body loads tiles that only tensor cores read (assign_layouts'
shared operands) can load iteration i + S - 1 while it computes iteration i: the
loads get S shared-memory stages and become asynchronous copies issued S - 1
iterations ahead (lowering/ops_control.py and async_copy.py do it). That is
legal when the copies of a later iteration cannot observe anything the loop
does before it: the view and every index of each load are the induction
variable or defined outside the loop, the loads are weak, and nothing in the
loop writes memory. The stage count is the deepest (up to `MAX_STAGES`) whose
buffers fit the target's shared memory beside what the kernel already uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ..ir.core import Operation, Value
from ..ir.record import record

if TYPE_CHECKING:
    from ..lowering.assign_layouts import LayoutAssignment

MAX_STAGES = 4
MIN_STAGES = 2
_WRITES = ("cuda_tile.store_view_tko", "cuda_tile.store_ptr_tko", "cuda_tile.atomic_rmw_tko",
           "cuda_tile.atomic_cas_tko", "cuda_tile.atomic_red_view_tko")


@record
class PipelinePlan:
    loop: Operation
    loads: tuple[Operation, ...]   # the loads that become staged asynchronous copies, in body order


def _walk(ops: list[Operation]) -> Iterator[Operation]:
    return (inner for op in ops for inner in op.walk())


def _defined_in(ops: list[Operation]) -> set[Value]:
    out: set[Value] = set()
    for op in _walk(ops):
        out.update(op.results)
        for region in op.regions:
            for block in region.blocks:
                out.update(block.arguments)
    return out


def plan_pipelines(entry: Operation, assignment: "LayoutAssignment") -> dict[Operation, PipelinePlan]:
    """The loops that can be pipelined, with their loads (the depth is chosen at lowering, where the
    tiles' buffer sizes and the kernel's other shared memory are known)."""
    plans: dict[Operation, PipelinePlan] = {}
    for loop in entry.walk():
        if loop.name != "cuda_tile.for":
            continue
        body = loop.regions[0].block
        if any(op.name in _WRITES for op in _walk(body.operations)):
            continue
        inside = _defined_in(body.operations)
        iv = body.arguments[0]
        loads = []
        for op in body.operations:
            if op.name != "cuda_tile.load_view_tko" or not assignment.is_shared_operand(op.results[0]):
                continue
            if str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak":
                continue
            view = op.operand("view")
            if view in inside or any(v in inside and v is not iv for v in op.operand_group("index")):
                continue
            loads.append(op)
        if loads:
            plans[loop] = PipelinePlan(loop, tuple(loads))
    return plans


def stage_count(per_stage: int, used: int, limit: int) -> int:
    """The deepest pipeline whose stages (`per_stage` bytes each) fit beside `used` bytes; 0: none."""
    for stages in range(MAX_STAGES, MIN_STAGES - 1, -1):
        if used + stages * per_stage <= limit:
            return stages
    return 0
