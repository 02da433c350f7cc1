"""mbarrier.inval ordered after every other use of the mbarrier (part of the race checker).

Invalidating an mbarrier ends its life: the PTX ISA leaves undefined any operation on it that is still
to come or in flight (an arrival, a wait, a transaction's completion), and its memory may be reused at
once. The emulator runs a CTA's warps in one order, in which another warp's last arrival or wait may
well have happened before the inval even when nothing in the PTX makes it so (a deleted `bar.sync`
before the inval). So each mbarrier remembers, per thread, that thread's last wait and last arrival
(with its vector clock then, `happens_before.Clocks`), and the inval checks that each one is ordered
before it:

* a wait (test_wait/try_wait, successful or not) by another thread: only a release of that thread after
  it that the invalidating thread acquired (a barrier, an mbarrier phase) orders it;
* an arrival (arrive, expect_tx, complete_tx, cp.async.mbarrier.arrive, a tcgen05.commit's arrival on
  its pipeline's clock): ordered like a wait, or by the completion of the phase it arrived in, when the
  invalidating thread knows that completion (it, or a thread whose last wait is ordered before the inval,
  saw the phase complete): an arrival is an update of the mbarrier itself, done once its phase completes;
* a transaction's completion by the async proxy (a TMA load, cp.async.bulk, st.async): by its phase's
  completion alone, for no thread's clock covers the copy's landing.

This is what NVIDIA's pipelines rely on: their tcgen05.commit and TMA completions arrive on mbarriers
that the invalidating thread (or a thread it synchronizes with) waits for first.
"""

from __future__ import annotations

from typing import Any

from .errors import DeviceFault

ASYNC = -1      # the `arrivals` key of transactions completed by the async proxy (no thread's clock)


def note_wait(st: Any, b: Any, t: int, ins: Any) -> None:
    """Thread t tested or waited on mbarrier `b` with instruction `ins` (before its wait's acquire, if any)."""
    b.waits[t] = (int(st.races.hb.own[t]), ins)
    st.races.hb.mark_wait(t, b.key)


def note_arrival(st: Any, b: Any, u: int, ins: Any) -> None:
    """Clock `u` (a thread, or a thread's tcgen05 pipeline) arrives on `b` in its current phase with `ins`,
    before its release (which ticks the clock)."""
    b.arrivals[u] = (int(st.races.hb.own[u]), ins, b.phase)
    st.races.hb.mark(u)


def note_async(b: Any, ins: Any) -> None:
    """A transaction of instruction `ins` completes on `b` through the async proxy."""
    b.arrivals[ASYNC] = (0, ins, b.phase)


def check_inval(st: Any, b: Any, t: int, ins: Any) -> None:
    """Thread t invalidates `b` with `ins`: every other thread's last wait and arrival must be ordered before."""
    hb = st.races.hb
    vc = hb.vc[t]
    known = _completions_known(st, b, t)
    for u, (clock, at) in b.waits.items():
        if u != t and vc[u] < clock:
            _report(b, t, f"thread {u}'s wait on it at line {at.line} '{at.text}' is not ordered before the "
                    "inval (no barrier or mbarrier phase that thread released after it reached this thread)")
    for u, (clock, at, phase) in b.arrivals.items():
        if u == t or phase < known or u != ASYNC and vc[u] >= clock:
            continue
        who = "a transaction" if u == ASYNC else f"{hb.who(u)}'s arrival"
        _report(b, t, f"{who} on it at line {at.line} '{at.text}' is not ordered before the inval (its "
                "phase's completion was not seen by this thread, nor by a thread whose wait is ordered before "
                "the inval)")


def _completions_known(st: Any, b: Any, t: int) -> int:
    """How many of `b`'s phases thread t knows complete: those it, or a thread whose last wait on `b` it is
    ordered after, saw complete."""
    seen = st.races.seen.get(b.key)
    if seen is None:
        return 0
    vc = st.races.hb.vc[t]
    known = int(seen[t])
    for u, (clock, _) in b.waits.items():
        if u < seen.size and vc[u] >= clock:
            known = max(known, int(seen[u]))
    return known


def _report(b: Any, t: int, why: str) -> None:
    """The inval's race (the executor adds its line and text)."""
    raise DeviceFault(f"data race on an mbarrier: mbarrier.inval by thread {t} invalidates the mbarrier at shared "
                      f"address 0x{b.key:x}, but {why}", t)
