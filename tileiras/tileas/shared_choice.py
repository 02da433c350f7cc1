"""How the kernel stages what it stages, chosen by `plan-shared-memory` from its plans.

Three choices shape every shared-memory buffer of a kernel (`Assumptions`): whether staged tiles
are padded against bank conflicts, how many bytes pipelines leave free for what their loop body
asks later, and whether a load too large to stage whole is left to its mma in K slices. The pass
plans the kernel under each assumption it needs, in this order, and keeps the first that holds:

1. padded, the default: kept unless it overflows the target's shared memory or refuses a
   pipeline (a loop left unpipelined for lack of room);
2. where padded refuses a pipeline: unpadded, kept if it neither overflows nor refuses one
   (a pipeline is worth more than the padding);
3. where padded overflows: unpadded, then pipelines reserving the bytes it overflowed by, up to
   three times (their stages give way to what the loop body asks);
4. where all of that overflows: the same again with oversized loads deferred to their mma.

A choice needs plans that predict every buffer of the kernel (`SharedPlan.complete`); where one
does not, `choose` says so (None) and the lowering still tries the assumptions in this order
itself (lowering/pipeline.lower_entry). The order is one table for both: `attempts`.
"""

from __future__ import annotations

from typing import Callable, Generic, Optional, TypeVar

from .shared_plan import Assumptions

T = TypeVar("T")

RESERVE_ROUNDS = 3      # attempts of pipelines reserving room for their loop body before the last


class Outcome(Generic[T]):
    """What one attempt under some assumptions gave: its result, or the bytes it overflowed by."""

    def __init__(self, result: Optional[T], excess: int = 0, refused: bool = False,
                 error: Optional[Exception] = None) -> None:
        self.result = result
        self.excess = excess          # > 0: it does not fit the target's shared memory
        self.refused = refused        # a pipeline was refused for lack of room
        self.error = error            # where it does not fit: the diagnostic saying so


def attempts(attempt: Callable[[Assumptions], Outcome[T]]) -> Outcome[T]:
    """The outcome kept, trying `attempt` under each assumption in the module's order. Where every
    attempt overflows, the last one's outcome (its result None, its `excess` the overflow)."""
    outcome = _padded_or_not(attempt, defer=False)
    if outcome.excess:    # the last resort: a load too large to stage whole goes to its mma in K slices
        outcome = _padded_or_not(attempt, defer=True)
    return outcome


def _padded_or_not(attempt: Callable[[Assumptions], Outcome[T]], defer: bool) -> Outcome[T]:
    padded = attempt(Assumptions(True, 0, defer))
    if padded.excess:
        return _reserving(attempt, defer)
    if not padded.refused:
        return padded
    unpadded = attempt(Assumptions(False, 0, defer))   # its stages may fit without the padding
    return padded if unpadded.excess or unpadded.refused else unpadded


def _reserving(attempt: Callable[[Assumptions], Outcome[T]], defer: bool) -> Outcome[T]:
    """Unpadded; where that overflows, pipelines leave the excess free for their loop body."""
    reserve = 0
    for _ in range(RESERVE_ROUNDS):
        outcome = attempt(Assumptions(False, reserve, defer))
        if not outcome.excess:
            return outcome
        reserve += outcome.excess
    return attempt(Assumptions(False, reserve, defer))
