"""The row kernels' TMA buffers in `plan-shared-memory`: "row-load", "row-store" and the group's mbarriers.

A row kernel's tiles moved by TMA (lowering/row_tma.py) ask for shared memory where the lowering
meets them, and the functions that decide for the lowering (row_copies.py) decide here too, given the kernel as the nv_tileas
level knows it (`shared_stages.StagingFacts`: a view is its facts, no LLVM):

* the body's group of loads (`row_copies.group_start`, `row_copies.group`): at the load that starts it,
  a "row-load" buffer per load of the group (unpadded, 128-byte aligned, alive from the group's
  issue to the load's read, `row_copies.load_lifetime`), then one "mbarriers" array, a barrier per
  load (8-byte aligned, alive to the kernel's end). The group takes what is left of the opt-in
  limit beside the bytes placed before its first load, which the plan reads from its own
  placement of the requests before that op (`place`), as the lowering reads them from its own;
  a later load of the group whose operands are not lowered yet needs pure ops only
  (`row_copies.pure_ahead`: here, what is defined before the group's first load is ready);
* each store TMA writes (`row_copies.store_copy`, beside the bytes placed before it likewise): a
  "row-store" buffer alive while the store runs.

Both decisions read a view from the IR (`tileaa/views.view_of`), here and in the lowering alike: a view
that is not a partition of a tensor view made in the kernel is copied by neither.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..ir.core import Operation, Value
from ..ir.record import record
from . import row_copies
from .buffers import lifetimes
from .shared_plan import Request, place

if TYPE_CHECKING:
    from .shared_stages import StagingFacts

ROLES = ("row-load", "row-store")


@record
class RowGroup:
    """The body's group of row TMA loads, as the plan decided it (`row_copies.group`), for the lowering
    (lowering/row_tma.py): its loads with their copies and unplaced buffers, the loads left out and why,
    and the later loads whose operands the lowering lowers ahead at the group's first (in that order)."""
    loads: tuple
    missed: tuple
    ahead: tuple


class Rows:
    """The row TMA requests of one kernel, asked op by op in the plan's walk (`requests`); the decisions
    recorded in `groups` (the group's first load -> its `RowGroup`) and `stores` (a candidate store ->
    `row_copies.store_copy`'s (copy, buffer, why not)), which the lowering reads (`SharedPlan.row_groups`,
    `row_stores`)."""

    def __init__(self, facts: "StagingFacts", groups: dict, stores: dict) -> None:
        self.facts = facts
        self.groups, self.stores = groups, stores
        self.copies = row_copies.may_copy(facts, store=True)
        self.first = row_copies.group_start(facts) if row_copies.may_copy(facts) else None

    def requests(self, op: Operation, planned: list[Request], reserve: int) -> list[Request]:
        """What `op` asks for (none where it is no row TMA access); `planned`: the requests so far,
        of every role (those before `op` are placed to read the bytes they take); `reserve`: the
        bytes the pipelines leave free (`Assumptions.reserve`)."""
        from ..schedule.buffers import MBARRIER_BYTES

        if not self.copies or op.name not in (row_copies.LOAD, row_copies.STORE):
            return []
        facts = self.facts
        live = lifetimes(facts.entry)
        if op.name == row_copies.LOAD:
            if op is not self.first:
                return []
            used = self._used(op, planned, reserve)
            readied: list[Operation] = []
            chosen, missed = row_copies.group(facts, op, used, self._ahead(op, readied))
            self.groups[op] = RowGroup(tuple(chosen), tuple(missed), tuple(readied))
            if not chosen:
                return []
            return [Request(op, "row-load", "staging", matrix.nbytes, 128, 0, row_copies.load_lifetime(live, op, load),
                            subject=load)
                    for load, _t, matrix in chosen] + [Request(op, "mbarriers", "buffer", len(chosen) * MBARRIER_BYTES,
                                                               MBARRIER_BYTES)]
        if not row_copies.candidate(facts, op):
            return []
        t, matrix, why = self.stores[op] = row_copies.store_copy(facts, op, self._used(op, planned, reserve))
        if t is None:
            return []
        assert matrix is not None
        return [Request(op, "row-store", "staging", matrix.nbytes, 128, 0, live.op_range(op))]

    def _used(self, op: Operation, planned: list[Request], reserve: int) -> int:
        """The bytes taken when `op` asks: the requests before it placed, and the reserve."""
        live = lifetimes(self.facts.entry)
        before = [r for r in planned if live.position(r.op) < live.position(op)]
        return place(before, self.facts.entry).total + reserve

    def _ahead(self, first: Operation, readied: list[Operation]) -> Callable[[Operation], bool]:
        """`row_copies.group`'s `ahead` at the plan level: a load's operands are available at `first`
        where they are defined before it (by the body's ops or the kernel's arguments) or by pure
        ops lowered ahead for it or an earlier load of the group (the loads so readied appended to
        `readied`)."""
        body = list(self.facts.entry.regions[0].block.operations)
        ready: set[Value] = set(self.facts.entry.regions[0].block.arguments)
        for op in body[:body.index(first)]:
            ready.update(op.results)

        def ahead(load: Operation) -> bool:
            order: Optional[list[Operation]] = row_copies.pure_ahead(load, lambda value: value in ready)
            if order is None:
                return False
            for pure in order:
                ready.update(pure.results)
            readied.append(load)
            return True
        return ahead
