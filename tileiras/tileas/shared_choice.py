"""How the kernel stages what it stages, chosen by `plan-shared-memory` from its plans.

Four choices shape every shared-memory buffer of a kernel (`Assumptions`): whether staged tiles
are padded against bank conflicts, how many bytes pipelines leave free for what their loop body
asks later, whether a pipelined loop's mbarriers give their bytes back after it (then a CTA barrier
follows their invalidation), and whether a load too large to stage whole is left to its mma in K
slices. The pass plans the kernel under each assumption it needs, in this order, and keeps the
first that holds:

1. padded, the default: kept unless it overflows the target's shared memory or refuses a
   pipeline (a loop left unpipelined for lack of room);
2. where padded refuses a pipeline: unpadded, kept if it neither overflows nor refuses one
   (a pipeline is worth more than the padding);
3. where padded overflows: unpadded, then pipelines reserving the bytes it overflowed by, up to
   three times (their stages give way to what the loop body asks);
4. where all of that overflows: the same again with the loops' mbarriers freed after them (a
   sub-tiled epilogue's exchange after the loop takes their bytes);
5. where that overflows too: the same again with oversized loads deferred to their mma; if that
   overflows as well, the last plan is kept and the lowering reports the overflow.

Under an occupancy hint, a ring whose two stages pass the hint's share takes one stage in it
(stage_rings.fit); where the plan kept passes the share all the same, a ring narrowed on the way
bought nothing, and the kernel is planned again, in the same order, without narrowing rings.

The lowering then lowers the kernel once, under the plan kept (lowering/pipeline.lower_entry).
A plan that does not predict every buffer (`SharedPlan.complete`: a role some op of the kernel
asks for is placed as the lowering asks) chooses from the buffers it predicts; the schedule's
dump says which roles it left out.
"""

from __future__ import annotations

from typing import Callable, Protocol, TypeVar

from .shared_plan import Assumptions

RESERVE_ROUNDS = 3      # plans of pipelines reserving room for their loop body before the last


class Planned(Protocol):
    @property
    def excess(self) -> int: ...       # > 0: bytes beyond the target's shared memory

    @property
    def refused(self) -> bool: ...     # a pipeline left under two stages for lack of room

    @property
    def narrowed(self) -> bool: ...    # a ring took one stage to stay in the occupancy hint's share

    @property
    def beyond_share(self) -> bool: ...    # the kernel passes the occupancy hint's share


P = TypeVar("P", bound=Planned)


def choose(plan: Callable[[Assumptions], P]) -> P:
    """The plan kept, planning under each assumption in the module's order (`plan`)."""
    tried: list[P] = []

    def planned(assumes: Assumptions) -> P:
        tried.append(plan(assumes))
        return tried[-1]

    kept = _cascade(planned, in_share=True)
    if kept.beyond_share and any(p.narrowed for p in tried):   # one stage bought nothing
        kept = _cascade(plan, in_share=False)
    return kept


def _cascade(plan: Callable[[Assumptions], P], in_share: bool) -> P:
    kept = _padded_or_not(plan, defer=False, free=False, in_share=in_share)
    if kept.excess:    # the loops' mbarriers give their bytes back (one more CTA barrier each)
        kept = _padded_or_not(plan, defer=False, free=True, in_share=in_share)
    if kept.excess:    # the last resort: a load too large to stage whole goes to its mma in K slices
        kept = _padded_or_not(plan, defer=True, free=True, in_share=in_share)
    return kept


def _padded_or_not(plan: Callable[[Assumptions], P], defer: bool, free: bool, in_share: bool) -> P:
    padded = plan(Assumptions(True, 0, defer, free, in_share))
    if padded.excess:
        return _reserving(plan, defer, free, in_share)
    if not padded.refused:
        return padded
    unpadded = plan(Assumptions(False, 0, defer, free, in_share))   # its stages may fit without the padding
    return padded if unpadded.excess or unpadded.refused else unpadded


def _reserving(plan: Callable[[Assumptions], P], defer: bool, free: bool, in_share: bool) -> P:
    """Unpadded; where that overflows, pipelines leave the excess free for their loop body."""
    reserve = 0
    for _ in range(RESERVE_ROUNDS):
        planned = plan(Assumptions(False, reserve, defer, free, in_share))
        if not planned.excess:
            return planned
        reserve += planned.excess
    return plan(Assumptions(False, reserve, defer, free, in_share))
