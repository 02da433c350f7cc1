"""Which synchronizations of a run ordered nothing new (for the mutation benchmark's equivalences).

With the race checker on and a `Recorder` active (`recording()`), the run notes, per PTX line, whether any
execution of a wait or barrier there gave a thread anything it did not have already:

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
  its phase cannot complete without it;
* a wgmma.fence orders its warpgroup's earlier register accesses before its later wgmma.mma_async. It orders
  nothing new when the warpgroup has run a wgmma.fence before and no instruction but a wgmma.mma_async has
  accessed a register a wgmma.mma_async writes since (`wgmma_fence.py`'s stamps are empty): accumulator accesses
  by wgmma.mma_async instructions of one shape are ordered without a fence (PTX ISA, wgmma.fence). Registers
  that only A fragments occupy are not stamped, so the mutation benchmark takes this only where every wgmma
  reads A from shared memory;
* a barrier (bar.sync, barrier.sync) joins its threads' clocks. It orders nothing new when each of them
  knows already every event the join would bring (`happens_before.Clocks.news`: of each clock, an access,
  arrival, init or fence stamp up to the joined one, or a wait on an mbarrier that is invalidated in the
  run, which only the inval needs ordered; the epoch a thread opened at its last release holds none where
  it did nothing since). Its line counts only where deleting it leaves the pairing of the others alone:
  every instance of its barrier id in the CTA is taken by the same threads, all at one bar.sync line (no
  bar.arrive or bar.red joins it), so each of them skips one alike.

A synchronization that orders nothing new in the run of a launch on which every thread's path depends only
on the launch (its parameters, the thread's and block's indices; the waits' phases fixed by the protocol) orders
nothing on a GPU either: the phase it waits for already happened before the thread reaches it (or the
copies are complete), so it returns at once and the thread knows nothing more after it; a barrier's
threads know after it only what they knew before it, so the accesses it orders are ordered without it.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional


class Recorder:
    def __init__(self) -> None:
        self.needed: dict[int, bool] = {}       # PTX line -> whether some execution ordered something new
        self.transactions: set[tuple[int, int]] = set()     # (CTA state, mbarrier key) a transaction completed on
        self.cp_arrivals: dict[tuple[int, int], list[tuple[int, int]]] = {}  # (state, thread) -> (key, phases)
        self.barriers: dict[int, bool] = {}     # PTX line of a barrier -> as `needed`
        self.members: dict[tuple[int, int], bytes] = {}     # (CTA state, barrier id) -> its first instance's threads
        self.bar_lines: dict[tuple[int, int], set[int]] = {}    # (state, id) -> the lines of its instances
        self.mixed: set[tuple[int, int]] = set()    # (state, id) whose instances differ: deleting one re-pairs
        # a barrier's line -> the (state, mbarrier) whose waits it ordered: needed if that mbarrier is invalidated
        self.bar_waits: dict[int, set[tuple[int, int]]] = {}
        self.invalidated: set[tuple[int, int]] = set()     # (state, mbarrier key)

    def note(self, line: int, needed: bool, table: Optional[dict[int, bool]] = None) -> None:
        table = self.needed if table is None else table
        table[line] = table.get(line, False) or needed

    def redundant(self, line: int) -> bool:
        """Whether the wait or barrier at `line` ran and none of its executions ordered anything new."""
        if line in self.needed:
            return not self.needed[line]
        return line in self.barriers and not self.barriers[line] \
            and not self.bar_waits.get(line, set()) & self.invalidated


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


def wgmma_fence(st: Any, groups: list[int], line: int) -> None:
    """Warpgroups `groups` execute the wgmma.fence at `line` (before it clears their stamps)."""
    if ACTIVE is None:
        return
    from .wgmma_fence import orders_something

    ACTIVE.note(line, orders_something(st, groups))


def barrier(st: Any, bar_id: int, b: dict) -> None:
    """Barrier `bar_id` of the CTA completes (the executor's record `b`: the arriving threads, each one's pc, the
    barrier operations that arrived), before its clocks join."""
    if ACTIVE is None or st.races is None:
        return
    np = st.np
    arrived = b["threads"]
    lines = {st.launch.prog.info[int(pc)].line for pc in np.unique(b["pc"][arrived]).tolist()}
    key = (id(st), bar_id)
    if ACTIVE.members.setdefault(key, np.flatnonzero(arrived).tobytes()) != np.flatnonzero(arrived).tobytes() \
            or len(lines) > 1 or b["ops"] != {"sync"}:
        ACTIVE.mixed.add(key)
    ACTIVE.bar_lines.setdefault(key, set()).update(lines)
    if key in ACTIVE.mixed:
        lines = ACTIVE.bar_lines[key]
    new, waited = st.races.hb.news(arrived)
    for line in lines:
        ACTIVE.note(line, key in ACTIVE.mixed or new, ACTIVE.barriers)
        ACTIVE.bar_waits.setdefault(line, set()).update((id(st), k) for k in waited)


def invalidated(st: Any, key: int) -> None:
    """The mbarrier at `key` is invalidated: a barrier that ordered a wait on it was needed (the inval's)."""
    if ACTIVE is not None:
        ACTIVE.invalidated.add((id(st), key))
