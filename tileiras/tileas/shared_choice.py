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

Under an occupancy hint the kernel is first planned within the hint's share of an SM (1 and 2,
and 3 against the share; a ring whose two stages pass it takes one stage: stage_rings.fit); where
that does not fit, or leaves more loops unpipelined than the target's limit would, it is planned in
the order above within the target's limit, as without a hint.

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
    def excess(self) -> int: ...       # > 0: bytes beyond the share (Assumptions.in_share) or the target's limit

    @property
    def refused(self) -> bool: ...     # a pipeline left under two stages for lack of room

    @property
    def unstaged(self) -> int: ...     # pipelined loops given no stages

    @property
    def share(self) -> int: ...        # the occupancy hint's share of an SM (the limit without a hint)

    @property
    def limit(self) -> int: ...        # the target's shared memory per block


P = TypeVar("P", bound=Planned)


def choose(plan: Callable[[Assumptions], P]) -> P:
    """The plan kept, planning under each assumption in the module's order (`plan`): first within the
    occupancy hint's share of an SM (padded, unpadded, reserving); where the kernel does not fit it, or
    fits it only with more loops left unpipelined than within the target's limit, every assumption again
    within that limit."""
    kept = _padded_or_not(plan, defer=False, free=False, in_share=True)
    if kept.share == kept.limit:    # no occupancy hint: the share is the limit, planned already
        return _cascade(plan, in_share=True, kept=kept) if kept.excess else kept
    if not kept.excess and not kept.unstaged:
        return kept
    wide = _cascade(plan, in_share=False)
    return wide if kept.excess or wide.unstaged < kept.unstaged else kept


def _cascade(plan: Callable[[Assumptions], P], in_share: bool, kept: "P | None" = None) -> P:
    kept = kept if kept is not None else _padded_or_not(plan, defer=False, free=False, in_share=in_share)
    if kept.excess:    # the loops' mbarriers give their bytes back (one more CTA barrier each)
        kept = _padded_or_not(plan, defer=False, free=True, in_share=in_share)
    if kept.excess:    # the last resort: a load too large to stage whole goes to its mma in K slices
        kept = _padded_or_not(plan, defer=True, free=True, in_share=in_share)
    return kept


def _padded_or_not(plan: Callable[[Assumptions], P], defer: bool, free: bool, in_share: bool = True) -> P:
    padded = plan(Assumptions(True, 0, defer, free, in_share))
    if padded.excess:
        return _reserving(plan, defer, free, in_share)
    if not padded.refused:
        return padded
    unpadded = plan(Assumptions(False, 0, defer, free, in_share))   # its stages may fit without the padding
    return padded if unpadded.excess or unpadded.refused else unpadded


def _reserving(plan: Callable[[Assumptions], P], defer: bool, free: bool, in_share: bool = True) -> P:
    """Unpadded; where that overflows, pipelines leave the excess free for their loop body."""
    reserve = 0
    for _ in range(RESERVE_ROUNDS):
        planned = plan(Assumptions(False, reserve, defer, free, in_share))
        if not planned.excess:
            return planned
        reserve += planned.excess
    return plan(Assumptions(False, reserve, defer, free, in_share))
