"""Which synchronizations of a run ordered nothing new (for the mutation benchmark's equivalences).

With the race checker on and a `Recorder` active (`recording()`), the run notes, per PTX line, whether any
execution of a wait there gave a thread anything it did not have already:

* an mbarrier wait (test_wait/try_wait) that sees a phase complete orders the thread after everything
  released into that phase (`happens_before.Clocks.acquire`). It orders nothing new when the thread's
  clock, and its tensor-memory view (`tcv`), already cover that phase's clocks (a chain of other waits,
  arrivals and commits brought them), and no transaction completes on the mbarrier (a TMA or bulk load,
  cp.async.mbarrier.arrive: the bytes they land are ordered by the phase, `RaceChecker._visible`, not by
  a clock; the cp.async arrival is noted when its arrive-on fires, once the thread's copies landed);
* cp.async.wait_all / wait_group complete the thread's cp.async copies. They have nothing to complete
  when the thread has no copy in flight (none issued since they landed) and each of its
  cp.async.mbarrier.arrive since its previous such wait arrived in a phase the thread has seen complete:
  by the PTX ISA that arrive-on is triggered only once all the thread's earlier copies are complete, and
  its phase cannot complete without it.

A wait that orders nothing new in the run of a launch on which every thread's path depends only on the
launch (its parameters, the thread's and block's indices; the waits' phases fixed by the protocol) orders
nothing on a GPU either: the phase it waits for already happened before the thread reaches it (or the
copies are complete), so it returns at once and the thread knows nothing more after it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional


class Recorder:
    def __init__(self) -> None:
        self.needed: dict[int, bool] = {}       # PTX line -> whether some execution ordered something new
        self.transactions: set[tuple[int, int]] = set()     # (CTA state, mbarrier key) a transaction completed on
        self.cp_arrivals: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (state, thread) -> (key, phases)

    def note(self, line: int, needed: bool) -> None:
        self.needed[line] = self.needed.get(line, False) or needed

    def redundant(self, line: int) -> bool:
        """Whether the wait at `line` ran and none of its executions ordered anything new."""
        return line in self.needed and not self.needed[line]


ACTIVE: Optional[Recorder] = None


@contextlib.contextmanager
def recording() -> Iterator[Recorder]:
    global ACTIVE
    before, ACTIVE = ACTIVE, Recorder()
    try:
        yield ACTIVE
    finally:
        ACTIVE = before


def transaction(st: Any, key: int) -> None:
    """A transaction (the async proxy's, or a cp.async arrival's landed bytes) completes on mbarrier `key`."""
    if ACTIVE is not None:
        ACTIVE.transactions.add((id(st), key))


def cp_arrival(st: Any, t: int, key: int, completed: int) -> None:
    """Thread t's cp.async.mbarrier.arrive on `key`: its phase is the `completed`-th to complete."""
    if ACTIVE is not None:
        ACTIVE.transactions.add((id(st), key))
        ACTIVE.cp_arrivals.setdefault((id(st), t), []).append((key, completed))


def mbarrier_wait(st: Any, key: int, t: int, line: int) -> None:
    """Thread t's wait at `line` sees mbarrier `key`'s phase complete (before it acquires it)."""
    if ACTIVE is None or st.races is None:
        return
    hb = st.races.hb
    done = hb.done.get(key)
    known = done is None or bool((hb.vc[t] >= done).all() and (hb.tcv[t] >= done).all())
    ACTIVE.note(line, not known or (id(st), key) in ACTIVE.transactions)


def copy_wait(st: Any, lanes: Any, line: int) -> None:
    """Threads `lanes` wait for their cp.async copies at `line` (wait_all, or wait_group)."""
    if ACTIVE is None or st.races is None:
        return
    lanes = [int(t) for t in lanes]
    mine = set(lanes)
    in_flight = any(mine.intersection(pc.lanes.tolist()) for pc in st.cp_pending)
    seen = st.races.seen
    for t in lanes:
        for key, completed in ACTIVE.cp_arrivals.pop((id(st), t), []):
            phases = seen.get(key)
            in_flight = in_flight or phases is None or int(phases[t]) < completed
    ACTIVE.note(line, in_flight)
