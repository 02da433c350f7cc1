"""Mutation score of the PTX emulator: how many of the bugs a compiler could put into its PTX it reports.

Every operator of the catalogue (mutation_ops.py: fences, waits, arrivals, expect_tx counts,
descriptor fields, swizzles, coordinates, initializations, shapes, targets, modifiers) is applied
to the PTX our compiler emits for realistic kernels (tests/realistic) on sm_80, sm_90, sm_100 and
sm_120; each mutant runs on the emulator (race checker on) with the launch and the random inputs
of tests/test_realistic_emulator.py (and, for the kernels of IN_PLACE and OVERLAPPING, launches
whose output shares memory with an input or with itself, which reach the guards our compiler
emits for aliasing views) and counts as reported when the emulator refuses it (an
error, a race, a deadlock, undefined state) or its results differ from the interpreter's. The
mutants that run clean and match survive and are listed. Mutants that do not change what the
kernel does on a GPU (EQUIVALENT below, each with the reason) are listed apart and not counted.

Run: `python benchmarks/mutations.py` (a sample: one mutant per operator on the default kernels,
a few minutes), `--all` (every mutant of every configuration: 28360 mutants of 259 kernel-target
pairs, about 0.4-0.8 s each on one core), `--configs mm_f16_128x128x64`, `--targets sm_90,sm_100`,
`--per-operator 3`. A sweep too long for one sitting runs in shards, each writing its verdicts as
they come (`--all --shard 2/6 --json s2.jsonl`; run again, it resumes where it stopped), and
`--report s1.jsonl s2.jsonl ...` scores them together.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import random
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from mutation_ops import CATALOGUE, Operator  # noqa: E402
from ptx_values import Values, int_literal, statements  # noqa: E402

TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
DEFAULT_CONFIGS = ("mm_f16_128x128x64",)
LIMIT = 20_000_000          # warp-instructions per CTA: a mutant that spins longer counts as a hang

# Mutants that change nothing on a GPU: (operator, regex on the mutation's description, a test of the
# unmutated PTX and the mutated line, why). They are listed, not counted.
EQUIVALENT: tuple[tuple[str, str, Any, str], ...] = (
    ("delete cp.async.wait", "", lambda ptx, line: not re.search(r"cp\.async\.c[ag]\b", ptx),
     "no cp.async copies in the kernel: the wait has nothing to wait for"),
    ("delete cp.async.wait", "wait_all", lambda ptx, line: "cp.async.wait_all" in _next_instruction(ptx, line),
     "the next instruction is the same cp.async.wait_all"),
    ("delete cp.async.wait", "", lambda ptx, line: _no_copy_in_flight(ptx, line),
     "every cp.async copy of the function is followed by a cp.async.wait_all on every path before it can reach "
     "this wait: no copy is in flight here, and the wait has nothing to wait for"),
    ("delete a commit", "cp.async.commit_group", lambda ptx, line: _waited_all_nearby(ptx, line, commit=True),
     "a cp.async.wait_all follows it on a straight stretch with no copy, label or branch between: the ISA's "
     "wait_all commits the pending copies itself before waiting for all of them"),
    ("delete a commit", "cp.async.commit_group", lambda ptx, line: _next_copy_wait_is_wait_all(ptx, line),
     "on every path from it the thread's next cp.async wait is a cp.async.wait_all (no cp.async.wait_group, exit "
     "or return before it): a commit_group completes nothing, it only closes a group for wait_group N to count, "
     "and the ISA's wait_all (commit_group; wait_group 0) commits the copies left uncommitted and waits for them "
     "at the same place as for the committed ones, while cp.async.mbarrier.arrive tracks all prior copies "
     "whatever their group: every copy completes at the same point either way"),
    ("delete cp.async.wait", "wait_all", lambda ptx, line: _waited_all_nearby(ptx, line),
     "another cp.async.wait_all comes before it, or after it before any memory access or barrier, with no label, "
     "branch or cp.async copy between the two (a straight stretch): the other wait completes every copy this one "
     "would, before anything could read their bytes"),
    ("delete cp.async.wait", "", lambda ptx, line: _nothing_before(ptx, line),
     "no instruction before it accesses memory, so no cp.async copy is in flight, and none runs again after it "
     "(no label before it): the wait has nothing to wait for"),
    ("descriptor LBO", "", lambda ptx, line: _lbo_unused(ptx, line),
     "the descriptor is swizzled and read only as a K-major operand (wgmma imm-trans 0, tcgen05 idesc transpose "
     "bit 0), or as an MN-major one whose M (N) extent fits in one swizzle atom: the PTX ISA's matrix-descriptor "
     "strides (wgmma and tcgen05 'Leading dimension byte offset') say the leading dimension byte offset of "
     "swizzled K-major layouts is not used (assumed 1), and for MN-major ones it is the step from one swizzle "
     "atom to the next along M (N), of which there is only one"),
    ("descriptor SBO", "", lambda ptx, line: _sbo_unused(ptx, line),
     "the descriptor is swizzled and read only as an MN-major operand of instructions whose K is 8 (tcgen05.mma "
     "kind::tf32: 32 bytes of K, 4-byte elements): the PTX ISA's canonical MN-major swizzled layouts "
     "((T,W,m),(8,k)) : ((1,T,LBO),(WT,SBO)) make the stride byte offset the step from one group of 8 K rows to "
     "the next, and one instruction reads only the first group (the same holds for a K-major operand of at most "
     "8 M (N) rows, where the SBO steps between groups of 8 rows)"),
    ("delete bar.sync", "", lambda ptx, line: _nothing_before(ptx, line),
     "no instruction before it accesses memory (parameters aside) and none runs again after it (no label "
     "before it): a barrier orders the participating threads' memory accesses, and there are none to order"),
    ("delete bar.sync", "", lambda ptx, line: _only_loads_before(ptx, line),
     "no barrier lies on a path from the entry to it, every memory access on those paths is a load of global, "
     "constant or parameter memory, it runs once, and every thread that reaches a barrier with its id passed "
     "it: a barrier orders the threads' accesses before it with their accesses after it, loads of arrays this "
     "launch does not write (its inputs; the outputs are other arrays) conflict with none of them, and the "
     "later barriers pair as before"),
    ("delete bar.sync", "", lambda ptx, line: _repeated_barrier(ptx, line),
     "the same barrier (same id and count) completes just before, with nothing between the two but "
     "instructions that touch no memory, proxy fences (which order the executing thread's own accesses), "
     "waits with nothing in flight and mbarrier.inval of mbarriers no later instruction uses: it orders "
     "nothing the first does not"),
    ("delete bar.sync", "", lambda ptx, line: _barrier_orders_nothing(ptx, line),
     "it orders no pair of accesses that conflict: the threads that take it (each thread's path from the entry "
     "followed by its %tid.x and by comparisons that block-id arithmetic decides for every block id, as it does "
     "not wrap: ptx_values.bounds) are as many as its count and no other thread uses its id; the memory "
     "each of them can access between the previous barrier that all of them meet (this one's id or the whole "
     "CTA's) and it, and between it and the next such barrier, evaluated per thread (shared byte ranges; a TMA "
     "load's bounded by the expect_tx of its mbarrier in its block; tensor memory and global reads as wholes; "
     "the copies a cp.async wait before it completes added), shares no byte one of two different threads writes; "
     "anything not evaluated, a global write, a descriptor-addressed MMA or a wait that could complete "
     "asynchronous writes before it keeps the mutant counted. Every participant skips it alike, so the later "
     "barriers pair as before"),
    ("delete cp.async.wait", "", lambda ptx, line: _copies_waited_later(ptx, line),
     "the cp.async copies in flight at it (those that reach it without passing a cp.async.wait_all) are "
     "completed on every path from it by a later cp.async.wait_all, or a wait_group N after at least N + 1 "
     "commits (the ISA's wait_group completes all but the N most recent groups, and a copy not yet committed "
     "joins the next one), followed by a barrier of the whole CTA, with no barrier of part of the CTA, exit or "
     "return of the copies' own issue between; every access any thread can make on the way (evaluated per "
     "thread, as above) misses the copies' bytes, so no thread can touch them before they are complete and "
     "published"),
    ("delete bar.sync", "", lambda ptx, line: _next_barrier_covers(ptx, line),
     "on every path from it each thread reaches a barrier of the whole CTA (no thread count, or the .reqntid "
     "count) before any memory access other than mbarrier.init (and fence.mbarrier_init), exit or return: every "
     "access it ordered is ordered by that barrier too, the mbarriers initialized between are used only after "
     "it, and every thread skips the deleted barrier alike, so the later barriers pair as before"),
    ("skip an mbarrier wait", "", lambda ptx, line: _implied_by_prepared_wait(ptx, line),
     "the thread's next instruction after the skipped wait's loop waits on the 'stage prepared' mbarrier of the "
     "same stage and phase (same parity register), and every arrival on a non-TMA mbarrier of the kernel is made "
     "by threads after their own 'stage full' wait (they round the stage's tf32 operands in place, then arrive): "
     "that phase's completion implies the skipped one's, and happens-before being transitive it orders the TMA's "
     "bytes before this thread's tcgen05.mma as well"),
    ("skip an mbarrier wait", "", lambda ptx, line: _commit_wait_redundant(ptx, line),
     "it waits for an mbarrier that only its own thread's tcgen05.commit arrives on and no other thread waits "
     "on (one thread reaches it and those commits; every mbarrier operand evaluated, stage-indexed ones over all "
     "stages); on every path from it the thread issues only tcgen05.mma (fences and instructions that touch no "
     "memory aside) before its next tcgen05.commit, which tracks all the thread's earlier asynchronous tcgen05 "
     "operations (PTX ISA, tcgen05.commit) and so hands over what the waited commits did to whoever waits on it; "
     "and those tcgen05.mma write accumulators whose tensor-memory columns (the same base register plus "
     "constants, N columns from the instruction descriptor) miss every other tcgen05.mma's, tcgen05.cp's, "
     "shift's and st's, or are the same accumulator and shape, which the ISA's pipelined tcgen05.mma pairs "
     "order: running them before the waited operations complete conflicts with none of those (their other "
     "operands are shared-memory reads)"),
    ("skip an mbarrier wait", "", lambda ptx, line: _first_pass_only(ptx, line),
     "every wait on the mbarriers it waits on asks, in every iteration of its loop (the loop counters' constant "
     "bounds evaluated), for parity 1, once per mbarrier: the phase before the mbarrier's first, which the PTX ISA "
     "counts complete from mbarrier.init on; no wait asks for a phase that arrivals complete, so each stage of "
     "the ring is filled once (no more loads than stages) and the wait returns at once, ordering nothing"),
    ("delete an mbarrier arrive", "", lambda ptx, line: _first_pass_only(ptx, line),
     "every wait on the mbarrier it arrives on asks, in every iteration of its loop (the loop counters' constant "
     "bounds evaluated), for parity 1, once per mbarrier: the phase before the mbarrier's first, complete from "
     "mbarrier.init on; the phase the arrival helps complete is waited for by no one (the ring's stages are each "
     "filled once: no refill waits for their release), so the arrival releases nothing anyone acquires"),
    ("skip an mbarrier wait", "", lambda ptx, line: _guards_no_refill(ptx, line),
     "a stage-release wait in a loop of constant bounds (its mbarrier completes only by plain arrivals of that "
     "loop, which makes no generic shared-memory write): in no iteration from the first that reaches it on (the "
     "loop counter deciding the branches it decides) does the loop body write shared memory, and after the loop "
     "every path meets a barrier before any write: the refill it guards is issued only in iterations that skip "
     "it (a ring as deep as the loop's loads), so it orders the other threads' reads of the stage before no "
     "write, and the arrivals hand over no data"),
    ("delete mbarrier.init", "", lambda ptx, line: _mbarrier_unused(ptx, line),
     "no other instruction of the kernel uses the mbarrier it initializes (every mbarrier operand evaluated, a "
     "stage-indexed one over all its stages): no thread arrives on it, waits on it, expects or completes "
     "transactions on it or invalidates it; the PTX ISA makes any non-mbarrier operation on an initialized "
     "mbarrier object undefined, so no other access of a correct kernel can depend on the bytes the init writes"),
    ("delete fence.mbarrier_init", "", lambda ptx, line: _no_async_mbarrier(ptx),
     "a kernel without clusters in which no async-proxy instruction completes on an mbarrier (no TMA or bulk "
     "copy, no tcgen05.commit; cp.async.mbarrier.arrive is the generic proxy's): fence.mbarrier_init makes "
     "initializations visible to other CTAs of the cluster and to the async proxy, neither of which uses them, "
     "and the CTA's own threads see them through the barrier after the inits"),
    ("delete fence.mbarrier_init", "", lambda ptx, line: _init_fenced_later(ptx, line),
     "a kernel without clusters, in which a later fence.mbarrier_init of the function is followed on every path "
     "by a barrier of the whole CTA before any mbarrier use or async-proxy instruction, no instance of that "
     "barrier lies on a path from the entry to that fence, and every async-proxy instruction that completes on an mbarrier "
     "(tcgen05.commit, a TMA or bulk load) runs only after that barrier: the ISA's fence.mbarrier_init orders "
     "all the thread's earlier mbarrier.init, so the later fence makes these visible to the async proxy too "
     "before any async-proxy use (the emulator checks that ordering by happens-before, races.fenced)"),
    ("delete tcgen05.fence::after_thread_sync", "", lambda ptx, line: _after_sync_fenced_again(ptx, line),
     "on every path from it, the thread executes another tcgen05.fence::after_thread_sync before any asynchronous "
     "tcgen05 instruction (mma, cp, shift, ld, st) or tensor-memory (de)allocation: the PTX ISA's tcgen05 memory "
     "consistency model makes the fence order the thread's later asynchronous tcgen05 operations after all of "
     "its earlier thread synchronization, so the later fence orders them after this one's barrier as well, and "
     "the synchronous tcgen05 instructions between (commit, wait, relinquish) are ordered by program order"),
    ("delete tcgen05.fence::after_thread_sync", "", lambda ptx, line: _after_sync_fenced_before(ptx, line),
     "on every path into it the thread already executed another tcgen05.fence::after_thread_sync after its last "
     "thread synchronization (barrier or mbarrier wait): that fence orders all the thread's later tcgen05 "
     "operations after every synchronization before it, so this one orders nothing more"),
    ("delete tcgen05.wait", "", lambda ptx, line: _tcgen05_nothing_in_flight(ptx, line),
     "no tcgen05.ld (st) of the function reaches it without passing another tcgen05.wait::ld (st): the thread "
     "has none in flight here, and the wait has nothing to wait for"),
    ("delete tcgen05.wait", "", lambda ptx, line: _waited_again(ptx, line),
     "on every path from it the thread waits again (the same tcgen05.wait::ld or ::st) before any other tcgen05 "
     "instruction, barrier, mbarrier arrival or exit: the ISA's wait blocks until every earlier tcgen05.ld (st) of "
     "the thread is complete, so the next wait completes these as well before their tensor memory can be "
     "written or handed over; the loaded registers need no wait (NVIDIA's own sm_100 PTX reads them long before "
     "its one tcgen05.wait::ld: the register dependency is tracked below PTX)"),
    ("delete fence.mbarrier_init", "", lambda ptx, line: _init_fenced_again(ptx, line),
     "on every path from it the thread fences again (fence.mbarrier_init, or fence.proxy.async in a kernel without "
     "clusters) before any use of an mbarrier, any async-proxy instruction, barrier or exit: the ISA's "
     "fence.mbarrier_init orders all the thread's earlier mbarrier.init, so the later fence orders these too, "
     "and the emulator's model (async_ops.published) takes a CTA-scope fence.proxy.async as making the "
     "thread's initializations visible to the async proxy of its own CTA"),
    ("lower the target", "-> sm_80", lambda ptx, line: _all_forms_allowed(ptx, (80, "")),
     "every instruction of the kernel exists on sm_80 (the PTX ISA's target notes for each instruction form, as "
     "tabled in tileiras/emulator/isa_forms.py): a .target only states the features the module uses, and PTX "
     "for a lower target assembles for a newer GPU unchanged"),
    ("delete fence.proxy.async", "", lambda ptx, line: _fenced_before(ptx, line),
     "no path into it holds a generic write of the thread since its previous fence.proxy.async (or the start; an "
     "mbarrier.inval counts where a TMA or bulk load follows that could reuse its bytes): there is no generic "
     "access left for it to order before a later async-proxy one (the async-proxy accesses before it are "
     "ordered by the completion mechanisms, as below)"),
    ("delete fence.proxy.async", "", lambda ptx, line: _fenced_again(ptx, line),
     "on every path another fence.proxy.async of the same thread comes before its next async-proxy instruction "
     "and before it hands anything over (barrier, arrival, commit, exit), so it orders no generic access before "
     "an async one; async-proxy accesses before it are ordered before later "
     "generic ones by the implicit generic-async proxy fence that follows the completion of every wgmma and "
     "cp.async.bulk (PTX ISA, 'Async proxy' of both), which the kernel waits for"),
)

# Equivalences that need the compiled kernel's launch facts besides its PTX (the tensor maps' boxes, from the
# compile metadata the runtime builds the maps from): (operator, regex on the description, a test of the case and
# the mutated line, why).
EQUIVALENT_FOR_LAUNCH: tuple[tuple[str, str, Any, str], ...] = (
    ("delete fence.proxy.async", "",
     lambda case, line: _fence_orders_published_only(case.ptx, line, _tma_boxes(case)),
     "the generic writes of the thread since its previous fence.proxy.async (or the start) on every path into it "
     "are tcgen05.alloc's stores of the tensor-memory address, each published by a barrier or arrival before it, "
     "and mbarrier.init, each of which its thread orders by a fence.mbarrier_init before reaching it: a proxy "
     "fence matters only for bytes the async proxy accesses too; none of the kernel's TMA loads or bulk copies "
     "writes these (ranges evaluated, each within its tensor map's box, from the compile metadata the launch "
     "builds the maps from, and its expect_tx), and an async-proxy read of them would be reported in the clean "
     "unmutated run as well (the race checker takes a store as fenced only by a fence between it and the release "
     "that publishes it, which this one is not)"),
    ("skip an mbarrier wait", "",
     lambda case, line: _one_shot_load_handed_by_commit(case.ptx, line, _tma_boxes(case)),
     "it waits (parity 0) for a one-shot TMA load (its mbarrier: initialized, one expect_tx, the load issued once, "
     "waits for parity 0, an inval; no other arrival), the threads that reach it access none of the load's bytes "
     "after it (every access evaluated per thread, a TMA store's bounded by its tensor map's box; the load's by its "
     "expect_tx), and every path into each "
     "invalidation of that mbarrier first meets a wait (parity 0) on an mbarrier whose only arrival is one "
     "tcgen05.commit, run once, every path into which meets another wait on the load's mbarrier: the commit "
     "tracks the operations its thread issued after that wait (PTX ISA, tcgen05.commit; its arrival performs the "
     "implicit tcgen05.fence::before_thread_sync), so the load is complete before the inval; the wait orders "
     "nothing the skipping threads do"),
    ("skip an mbarrier wait", "", lambda case, line: _orders_nothing_new(case, line),
     "in the unmutated run of the launch (race checker on) every thread that passes it already happens after the "
     "phase it waits for: its vector clock, and its view of tensor memory, cover every clock released into that "
     "phase (a chain of other waits, arrivals and tcgen05.commits brought them: a commit tracks all its thread's "
     "earlier asynchronous tcgen05 operations, PTX ISA), and no transaction (TMA, bulk copy, cp.async arrival, "
     "complete_tx) completes on that mbarrier, whose bytes only the phase itself would order "
     "(tileiras/emulator/redundancy.py); each thread's path depends only on the launch and the kernel has no "
     "data-dependent branch, so on a GPU the phase is complete before the thread gets there: the wait returns at "
     "once and orders nothing new"),
    ("delete bar.sync", "", lambda case, line: _orders_nothing_new(case, line),
     "in the unmutated run of the launch (race checker on) each execution of it gave none of its threads an event "
     "it did not know already: each one's vector clock covered every access, wait, arrival, init and fence stamp "
     "of every clock the barrier joins (other waits, arrivals and tcgen05.commits brought them; a thread's own "
     "epoch since its last release counts only where it did something in it), and every instance of its barrier "
     "id in the CTA is a bar.sync at one line taken by the same threads (tileiras/emulator/redundancy.py); each "
     "thread's path depends only on the launch and the kernel has no data-dependent branch, so on a GPU the same "
     "synchronizations order the same accesses without it, and its threads skip it alike (the later barriers pair "
     "as before)"),
    ("delete wgmma.fence", "", lambda case, line: _one_wgmma_form(case.ptx) and _orders_nothing_new(case, line),
     "in the unmutated run of the launch every warpgroup that executes it has executed a wgmma.fence before, and "
     "no instruction but a wgmma.mma_async has accessed a register a wgmma.mma_async writes since "
     "(tileiras/emulator/redundancy.py): the accumulators are accessed only by wgmma.mma_async instructions of one "
     "shape in between (the kernel's wgmmas have one shape), which the PTX ISA orders without a fence, and every "
     "wgmma reads A from shared memory (no A fragments in registers to order); each thread's path depends only on "
     "the launch and the kernel has no data-dependent branch, so on a GPU too the fence orders nothing"),
    ("delete cp.async.wait", "", lambda case, line: _orders_nothing_new(case, line),
     "in the unmutated run of the launch (race checker on) every thread that reaches it has no cp.async copy in "
     "flight: each copy it issued since its previous cp.async wait is tracked by a cp.async.mbarrier.arrive of "
     "the thread whose phase the thread has seen complete (tileiras/emulator/redundancy.py); the PTX ISA triggers "
     "that arrive-on only once all the thread's earlier cp.async copies are complete, and the phase cannot complete "
     "without it: the copies are complete and the wait has nothing to wait for (a stage-full wait of the next "
     "iteration consumes every copy a ring's loop issues)"),
)

_REDUNDANT: dict[int, Any] = {}     # id(case) -> (case, its unmutated run's redundancy.Recorder)


def _orders_nothing_new(case: Any, line: int) -> bool:
    """Whether the wait or barrier at PTX line `line` (1-based) of the case's unmutated PTX ran in its launch (race
    checker on) and no execution of it ordered anything new (tileiras/emulator/redundancy.py), in a kernel whose branches
    depend on no loaded value but parameters (each thread's path is the launch's on every run)."""
    if _data_dependent_branches(case.ptx):
        return False
    got = _REDUNDANT.get(id(case))
    if got is None or got[0] is not case:
        from tileiras.emulator import redundancy

        with redundancy.recording() as rec:
            clean = outcome(case, case.ptx) is None
        got = _REDUNDANT[id(case)] = (case, rec if clean else None)
    return got[1] is not None and got[1].redundant(line)


def _one_wgmma_form(ptx: str) -> bool:
    """Whether every wgmma.mma_async of the kernel has one shape (whose accumulator accesses the PTX ISA orders
    among themselves) and reads A by descriptor (the operand after D's braces is a 64-bit register, not a brace
    list of A fragments, whose writes the emulator's fence model does not stamp)."""
    shapes = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx))
    return len(shapes) == 1 and not re.search(r"wgmma\.mma_async[^;]*\}\s*,\s*\{", ptx)


def _data_dependent_branches(ptx: str) -> bool:
    """Whether a branch (or any guarded instruction) of the kernel may depend on a value loaded from memory other
    than a parameter (an ld of global or shared memory, an atomic's result, a tcgen05.ld, ldmatrix, a shuffle or
    vote): each guard's register followed back through every definition of every register it is computed from
    (an mbarrier wait's result aside: it decides only its retry loop)."""
    defs: dict[str, list[str]] = {}
    preds: list[str] = []
    for code in _codes(ptx):
        for part in statements(code):
            guard = re.match(r"^@!?(%\w+)\s", part)
            if guard:
                preds.append(guard.group(1))
            body = re.sub(r"^@!?%?\w+\s+", "", part)
            m = re.match(r"^([a-z][\w.:]*)\s+(\{[^}]*\}|%\w+)\s*,?\s*(.*)$", body)
            if m is None:
                continue
            for reg in re.findall(r"%\w+", m.group(2)):
                defs.setdefault(reg, []).append(body)
    loaded = re.compile(r"^(?:ld\.(?!param)|ldu\.|atom\.|tcgen05\.ld|ldmatrix|shfl|vote|match|redux)")
    seen: set[str] = set()
    todo = list(preds)
    while todo:
        reg = todo.pop()
        if reg in seen:
            continue
        seen.add(reg)
        for body in defs.get(reg, []):
            if body.startswith("mbarrier.") or "mbarrier.try_wait" in body or "mbarrier.test_wait" in body:
                continue        # a wait's result: decides only its retry loop
            if loaded.match(body):
                return True
            todo.extend(r for r in re.findall(r"%\w+", body.split(None, 1)[1] if " " in body else "")
                        if r != reg)
    return False


# memory accesses of PTX instructions (parameter loads aside), for the equivalences above
_MEMORY = re.compile(r"^(?:@!?%?\w+\s+)?(?:ld\.(?!param)|st\.|atom\.|red\.|cp\.async\.c[ag]|"
                     r"cp\.async\.bulk\.(?!wait|commit)|cp\.reduce|ldmatrix|stmatrix|mbarrier\.|wgmma\.mma|"
                     r"tcgen05\.(?:mma|cp|ld|st|alloc|dealloc|commit|shift)|multimem|ldu\.|tensormap|"
                     r"cp\.async\.mbarrier)")
_ASYNC_PROXY = re.compile(r"(cp\.async\.bulk\.(?!wait|commit)|cp\.reduce\.async\.bulk|wgmma\.mma_async|"
                          r"tcgen05\.(mma|cp))")


def _touches_memory(code: str) -> bool:
    """Whether a line's code (one or more ';'-separated statements) accesses memory."""
    return any(_MEMORY.match(part.strip()) for part in code.split(";"))


def _codes(ptx: str) -> list[str]:
    """Each PTX line's instruction text (comments dropped; inline-asm braces and .reg lines stripped)."""
    out = []
    for text in ptx.split("\n"):
        code = text.split("//")[0].strip()
        code = re.sub(r"^\{\s*\.reg\s+\.pred\s+\w+;\s*setp[^;]*;\s*", "", code).rstrip("} ").strip()
        out.append(code)
    return out


def _lbo_unused(ptx: str, line: int) -> bool:
    """Whether the descriptor the mutated line (1-based) builds is swizzled and read by wgmma/tcgen05.mma only as
    an operand whose LBO is not used: K-major, or MN-major with its M (N) extent within one swizzle atom (its
    register used nowhere else)."""
    return _stride_unused(ptx, line, lambda k_major, atom, extent, k, size: k_major or extent * size <= atom)


def _sbo_unused(ptx: str, line: int) -> bool:
    """Whether the descriptor the mutated line (1-based) builds is swizzled and read by wgmma/tcgen05.mma only as
    an MN-major operand whose K per instruction is one group of 8 (tf32's 8: the SBO steps from one group of 8 K
    rows to the next), or a K-major one whose M (N) extent is one group of 8 rows (its register used nowhere
    else)."""
    return _stride_unused(ptx, line, lambda k_major, atom, extent, k, size: (extent if k_major else k) <= 8)


def _stride_unused(ptx: str, line: int, unread: Callable[[bool, int, int, int, int], bool]) -> bool:
    """Whether the descriptor the mutated line (1-based) builds is swizzled and each of its uses is an operand of a
    wgmma.mma_async or tcgen05.mma for which `unread(k_major, swizzle atom bytes, M or N extent, K, element
    bytes)` holds (its register used nowhere else)."""
    codes = _codes(ptx)
    m = re.match(r"(?:mov|or|add)\.[bsu]64\s+(%\w+)\s*,.*\b(\d{13,20})\b", codes[line - 1])
    if not m:
        return False
    reg, value = m.group(1), int(m.group(2))
    umma = (value >> 46) & 7 == 1
    if (value >> 61) & 7 == 0 if umma else (value >> 62) & 3 == 0:
        return False                # not swizzled: LBO and SBO both step between core matrices
    atom = ({1: 128, 2: 128, 4: 64, 6: 32}.get((value >> 61) & 7, 0) if umma
            else {1: 128, 2: 64, 3: 32}[(value >> 62) & 3])     # the swizzle atom's width in bytes
    uses = 0
    for i, code in enumerate(codes):
        if i == line - 1 or not re.search(re.escape(reg) + r"\b", code):
            continue
        ops = _operands(code)
        shape = _mma_shape(codes, code, ops)
        if shape is None or reg not in ops[1:3]:
            return False            # used otherwise: not provably an operand whose field is unused
        trans, extent, k, size = shape
        for j in (1, 2):
            if ops[j] == reg:
                if not unread(not trans[j - 1], atom, extent[j - 1], k, size):
                    return False
                uses += 1
    return uses > 0


_ELEMENT = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "f8f6f4": 1, "i8": 1, "s8": 1, "u8": 1}


def _mma_shape(codes: list[str], code: str, ops: list[str]) -> Optional[tuple[list[int], list[int], int, int]]:
    """For a wgmma.mma_async or tcgen05.mma (`code`, its operands `ops`): whether A and B are MN-major
    (transposed), their M and N extents, the K of one instruction and the operands' element size in bytes; None
    for anything else (a sparse tcgen05.mma too)."""
    if "wgmma.mma_async" in code and len(ops) >= 4:
        shape = re.search(r"\.m(\d+)n(\d+)k(\d+)\.\w+\.(\w+)\.", code)
        if shape is None or shape.group(4) not in _ELEMENT:
            return None
        trans = [0, 0]
        if re.search(r"\.(?:b?f16)\.(?:b?f16)\b", code):
            imms = ops[4:]
            trans = [0, int(imms[2])] if ops[1].startswith("{") else [int(imms[2]), int(imms[3])]
        return trans, [int(shape.group(1)), int(shape.group(2))], int(shape.group(3)), _ELEMENT[shape.group(4)]
    if "tcgen05.mma" in code and ".sp" not in code and len(ops) >= 4:
        idesc = _constant(codes, ops[3])
        kind = re.search(r"\.kind::(\w+)", code)
        if idesc is None or kind is None or kind.group(1) not in _ELEMENT:
            return None
        extent = [((idesc >> 24) & 0x1F) << 4, ((idesc >> 17) & 0x3F) << 3]
        size = _ELEMENT[kind.group(1)]
        return [(idesc >> 15) & 1, (idesc >> 16) & 1], extent, 32 // size, size     # a dense K step: 32 bytes
    return None


def _all_forms_allowed(ptx: str, target: tuple[int, str]) -> bool:
    """Whether every instruction of the PTX module is allowed on `target` by the emulator's table of minimum
    targets (a module it cannot parse: no)."""
    from tileiras.emulator.errors import EmulatorError
    from tileiras.emulator.isa_forms import check_target
    from tileiras.emulator.parser import Instr, parse_module

    def instructions(items: Any) -> Any:       # the body's statements, nested blocks included
        for item in items:
            if isinstance(item, Instr):
                yield item
            elif isinstance(item, (list, tuple)):
                yield from instructions(item)

    try:
        module = parse_module(ptx)
        for fn in module.functions.values():
            for ins in instructions(fn.body or []):
                check_target(ins, target)
    except EmulatorError:
        return False
    return True


def _operands(code: str) -> list[str]:
    """The operands of an instruction (top-level commas; vectors kept whole)."""
    body = code.split(None, 1)[1].rstrip(";").strip() if " " in code or "\t" in code else ""
    out, depth, cur = [], 0, ""
    for ch in body:
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _constant(codes: list[str], op: str) -> Optional[int]:
    """The value of an immediate operand, or of a register whose one definition is a mov of an immediate."""
    if op.isdigit():
        return int(op)
    defs = [c for c in codes if re.match(r"\S+\s+" + re.escape(op) + r"\s*,", c) and not c.startswith(("st.", "@"))]
    if len(defs) == 1:
        m = re.fullmatch(r"mov\.[bu]32\s+" + re.escape(op) + r"\s*,\s*(\d+)\s*;", defs[0])
        if m:
            return int(m.group(1))
    return None


def _body_start(codes: list[str], line: int) -> int:
    """The index of the first line of the function body containing PTX line `line` (1-based)."""
    for i in range(line - 1, -1, -1):
        if codes[i] == "{" or codes[i].endswith("{") and not codes[i].startswith("{"):
            return i + 1
    return 0


def _nothing_before(ptx: str, line: int) -> bool:
    """Whether no instruction of the function before PTX line `line` accesses memory and none is a label."""
    codes = _codes(ptx)
    for code in codes[_body_start(codes, line):line - 1]:
        # (a cp.async wait there has nothing to wait for: a copy before it would be a memory access)
        if code.endswith(":") or _touches_memory(code) and not code.startswith("cp.async.wait"):
            return False
    return True


_GLOBAL_LOAD = re.compile(r"^(?:@!?%?\w+\s+)?(?:ld|ldu)(?:\.(?!shared)\w+)*?\.(?:global|const)\b")


def _only_loads_before(ptx: str, line: int) -> bool:
    """Whether the barrier at PTX line `line` (1-based) orders nothing and pairs with nothing: no path from the
    function's entry to it holds a barrier instruction or a memory access other than a load of global or
    constant memory (parameter loads are not accesses here), no path leads from it back to it, and every path
    from the entry to another barrier instruction with its barrier id passes through it."""
    codes = _codes(ptx)
    site = line - 1
    graph = _body_graph(ptx, codes, line)
    if graph is None:
        return False
    start, end, succ = graph
    before = _reachable(succ, [start], site)        # from the entry, without passing the site
    if site not in before or site in _reachable(succ, succ[site], -1):
        return False
    preds = _predecessors(succ)
    for i in (before & _reachable(preds, preds.get(site, []), site)) - {site}:     # on a path to the site
        for part in (p.strip() for p in codes[i].split(";")):
            if re.match(r"(?:@!?%?\w+\s+)?(?:bar|barrier)\.", part):
                return False
            if _touches_memory(part) and not _GLOBAL_LOAD.match(part):
                return False
    ident = re.match(r"(?:bar|barrier)\.sync(?:\.aligned)?\s+(\w+)", codes[site])
    if ident is None:
        return False
    for i in before - {site}:   # another barrier with this id reached without passing the site
        other = re.match(r"(?:@!?%?\w+\s+)?(?:bar|barrier)\.\w+(?:\.aligned)?\s+(\w+)", codes[i])
        if other is not None and other.group(1) == ident.group(1):
            return False
    return True


def _body_graph(ptx: str, codes: list[str], line: int) -> Optional[tuple[int, int, dict[int, list[int]]]]:
    """(first statement, end, control-flow successors) of the function body around PTX line `line`
    (1-based); None where the control flow is not known."""
    start, end = _body_start(codes, line), _body_end(ptx, codes, line)
    succ = _successors(codes, start, end)
    return None if succ is None else (start, end, succ)


def _successors(codes: list[str], start: int, end: int) -> Optional[dict[int, list[int]]]:
    """The control-flow successors of each statement index of a function body (None: a jump it cannot follow)."""
    labels = {c[:-1]: i for i, c in enumerate(codes[start:end], start) if c.endswith(":")}
    succ: dict[int, list[int]] = {}
    for i in range(start, end):
        parts = [p.strip() for p in codes[i].split(";") if p.strip()]
        branch = next((m for p in parts if (m := _BRANCH.match(p))), None)
        nxt = [i + 1] if i + 1 < end else []
        if branch is not None:
            if branch.group(2) not in labels:
                return None
            succ[i] = [labels[branch.group(2)]] + (nxt if branch.group(1) else [])
        elif any(re.match(r"(ret|exit)\b", p) for p in parts):
            succ[i] = []
        else:
            succ[i] = nxt
    return succ


def _reachable(succ: dict[int, list[int]], roots: list[int], avoid: int) -> set[int]:
    """The statements reachable from `roots` (included) along `succ` without going through statement `avoid`
    (which is included when reached)."""
    seen: set[int] = set()
    todo = [r for r in roots if r != avoid]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        todo.extend(j for j in succ.get(i, []) if j != avoid and j not in seen)
    if avoid in roots or any(avoid in succ.get(i, []) for i in seen):
        seen.add(avoid)         # reached (not passed)
    return seen


def _repeated_barrier(ptx: str, line: int) -> bool:
    """Whether the barrier at PTX line `line` repeats an identical one with nothing that needs ordering between
    them (see EQUIVALENT), forward branches between them staying inside that stretch."""
    codes = _codes(ptx)
    deleted = codes[line - 1]
    start = next((i for i in range(line - 2, -1, -1) if codes[i] == deleted), None)
    if start is None:
        return False
    window = codes[start + 1:line - 1]
    labels = {c[:-1] for c in window if c.endswith(":")}
    copies = re.search(r"cp\.async\.c[ag]\b", ptx) is not None
    for code in window:
        if not code or code.endswith(":") or code.startswith(("fence.proxy.async", ".reg")):
            continue
        target = re.search(r"\bbra(?:\.uni)?\s+(\$?\w+)", code)
        if target:
            if target.group(1) not in labels:
                return False
            continue
        if code.startswith("cp.async.wait") and not copies:
            continue
        if code.startswith("mbarrier.inval"):
            continue
        if _touches_memory(code) or re.match(r"(?:@!?%?\w+\s+)?(bar|barrier)\.|exit|ret|trap", code):
            return False
    others = [c for i, c in enumerate(codes) if c.endswith(":") and c[:-1] in labels and not start < i < line - 1]
    jumps_in = [c for i, c in enumerate(codes) if not start < i < line - 1
                and any(re.search(r"\bbra(?:\.uni)?\s+" + re.escape(lab) + r"\b", c) for lab in labels)]
    return not others and not jumps_in and _invalidated_unused_later(ptx, codes, start + 1, line - 1)


def _invalidated_unused_later(ptx: str, codes: list[str], first: int, stop: int) -> bool:
    """Whether the mbarriers that statements `first`..`stop - 1` invalidate are used by no statement that control
    flow reaches from statement `stop`: their addresses (ptx_values) differ from those of every such mbarrier
    operand; any address not evaluated counts as a use, and an invalidated address not evaluated meets every
    mbarrier operand."""
    values = _values(ptx, codes, stop + 1)
    succ = _successors(codes, values.start, values.end)
    if succ is None:
        return False
    invalidated: Optional[set[int]] = set()
    for i in range(first, stop):
        for part in statements(codes[i]):
            if part.startswith("mbarrier.inval"):
                addresses = _addresses(values, _mbarrier_operands(part))
                invalidated = None if addresses is None or invalidated is None else invalidated | addresses
    if invalidated == set():
        return True
    for i in sorted(_reachable(succ, succ.get(stop, []), -1)):
        for part in statements(codes[i]):
            operands = _mbarrier_operands(part)
            if operands is None:
                continue
            addresses = _addresses(values, operands)
            if invalidated is None or addresses is None or addresses & invalidated:
                return False
    return True


def _values(ptx: str, codes: list[str], line: int) -> Values:
    """The register values (ptx_values) of the function body containing PTX line `line` (1-based)."""
    return Values(codes, _body_start(codes, line), _body_end(ptx, codes, line))


# the mbarrier operand of an instruction that uses one: an mbarrier instruction's first address, a TMA or bulk
# copy's last (its completion mechanism), tcgen05.commit's and cp.async.mbarrier.arrive's only one
_MBARRIER_OPERAND = (
    (re.compile(r"^(?:@!?%?\w+\s+)?(?:mbarrier\.|cp\.async\.mbarrier\.|tcgen05\.commit)"), 0),
    (re.compile(r"^(?:@!?%?\w+\s+)?cp\.(?:async|reduce)\S*mbarrier::"), -1),
)


def _mbarrier_operands(part: str) -> Optional[tuple[str, Optional[str]]]:
    """(The address operand, the phase or state operand of a wait, else None) of a statement that uses an
    mbarrier; None for any other statement."""
    for rx, which in _MBARRIER_OPERAND:
        if rx.match(part):
            brackets = re.findall(r"\[([^\]]+)\]", part)
            if not brackets:
                return None
            phase = None
            if re.search(r"mbarrier\.(?:try|test)_wait", part):
                ops = _operands(part)
                phase = ops[2] if len(ops) > 2 else None
            return brackets[which].strip(), phase
    return None


def _addresses(values: Values, operands: Optional[tuple[str, Optional[str]]]) -> Optional[set[int]]:
    """Every address the operand takes over its loop counters' values (None: not evaluated)."""
    pairs = _address_phases(values, operands)
    return None if pairs is None else {a for a, _, _ in pairs}


def _address_phases(values: Values, operands: Optional[tuple[str, Optional[str]]]
                    ) -> Optional[list[tuple[int, Optional[int], tuple[int, ...]]]]:
    """(address, phase or parity operand, loop counters' values) per combination of the loop counters the
    operands depend on (None: not evaluated; an address plus an offset `[%r1+8]` is evaluated too)."""
    if operands is None:
        return None
    address, phase = operands
    m = re.fullmatch(r"(%?[\w$]+)\s*(?:\+\s*(-?\w+))?", address)
    if m is None:
        return None
    regs = [r for r in (m.group(1), phase) if r is not None and r.startswith("%")]
    envs = values.envs(regs)
    if envs is None:
        return None
    out = []
    for env in envs:
        base = values.value(m.group(1), env)
        offset = values.value(m.group(2), env) if m.group(2) else 0
        got = values.value(phase, env) if phase is not None else None
        if base is None or offset is None or phase is not None and got is None:
            return None
        out.append((base + offset, got, tuple(sorted(env.items()))))
    return out



def _mbarrier_sites(values: Values) -> Optional[list[tuple[int, str, list[tuple[int, Optional[int], tuple]]]]]:
    """(statement index, statement, `_address_phases`) of every statement of the body that uses an mbarrier (None:
    one of them not evaluated)."""
    out = []
    for i in range(values.start, values.end):
        for part in statements(values.codes[i]):
            operands = _mbarrier_operands(part)
            if operands is None:
                continue
            pairs = _address_phases(values, operands)
            if pairs is None:
                return None
            out.append((i, part, pairs))
    return out


def _loops(values: Values) -> list[tuple[int, int]]:
    """(label index, branch index) of every backward branch of the body that closes a loop (the label reaches the
    branch again; a jump back to a `ret` does not)."""
    labels = {c[:-1]: i for i, c in enumerate(values.codes[values.start:values.end], values.start) if c.endswith(":")}
    succ = _successors(values.codes, values.start, values.end) or {}
    out = []
    for i in range(values.start, values.end):
        for part in statements(values.codes[i]):
            m = _BRANCH.match(part)
            if m and labels.get(m.group(2), i + 1) <= i and i in _reachable(succ, [labels[m.group(2)]], -1):
                out.append((labels[m.group(2)], i))
    return out


def _once_per_counter(values: Values, site: int, pairs: list[tuple[int, Optional[int], tuple]]) -> bool:
    """Whether the statement at index `site` runs once per value of the loop counters it depends on: each loop
    around it is its own retry loop (a wait's spin: a branch back over the wait and its test only) or the loop of
    one of those counters (its increment inside)."""
    names = {n for _, _, env in pairs for n, _ in env}
    for head, back in _loops(values):
        if not head <= site <= back or _spin(values.codes, head, back, site):
            continue
        if not any(head <= values.counters[n][1] <= back for n in names):
            return False
    return True


def _spin(codes: list[str], head: int, back: int, site: int) -> bool:
    """Whether the loop `head`..`back` only retries the wait at index `site`: nothing else in it but its test
    (setp, selp) and the branch."""
    rest = [p for i in range(head, back + 1) if i != site for p in statements(codes[i]) if not p.endswith(":")]
    return all(re.match(r"(?:setp|selp)\.|(?:@!?%?\w+\s+)?bra\b", p) for p in rest)


def _first_pass_only(ptx: str, line: int) -> bool:
    """Whether every wait of the function on the mbarriers that PTX line `line` (1-based: a wait, or an arrival)
    uses asks for parity 1 in every iteration of its loops (the loop counters' constant ranges evaluated,
    ptx_values), each wait reaching each of those mbarriers in one iteration at most, and running once per
    iteration: the ring's first pass, each stage filled once."""
    codes = _codes(ptx)
    values = _values(ptx, codes, line)
    sites = _mbarrier_sites(values)
    mine = [s for s in sites or [] if s[0] == line - 1 and re.match(r"(?:@!?%?\w+\s+)?mbarrier\.(?:try_wait|arrive)",
                                                                        s[1])]
    if sites is None or len(mine) != 1:
        return False
    targets = {a for a, _, _ in mine[0][2]}
    for i, part, pairs in sites:
        if not re.search(r"mbarrier\.(?:try|test)_wait", part):
            continue
        hits = [(a, p) for a, p, _ in pairs if a in targets]
        if not hits:
            continue
        if ".parity" not in part or any(p != 1 for _, p in hits) or len(hits) != len({a for a, _ in hits}):
            return False
        if not _once_per_counter(values, i, pairs):
            return False
    return True


# statements that write shared memory (a generic store may write it too): what a stage-empty wait orders other
# threads' reads before
_SHARED_WRITE = re.compile(r"^(?:@!?%?\w+\s+)?(?:st\.(?!global|local|param)|atom\.(?!global)|red\.(?!global)|"
                           r"stmatrix|cp\.async\.c[ag]|cp\.async\.bulk\S*\.shared::\w+\.global|tcgen05\.cp|"
                           r"mbarrier\.init)")


# the generic proxy's shared-memory writes (an asynchronous copy's bytes are ordered by its own completion)
_GENERIC_SHARED_WRITE = re.compile(r"^(?:@!?%?\w+\s+)?(?:st\.(?!global|local|param|async)|atom\.(?!global)|"
                                   r"red\.(?!global|async)|stmatrix|cp\.async\.c[ag]|mbarrier\.init)")


def _released_in(values: Values, addresses: set[int], head: int, back: int) -> bool:
    """Whether the mbarriers at `addresses` are release barriers of the loop `head`..`back`: every statement that
    completes anything on them is a plain mbarrier.arrive inside that loop (no expect_tx, no asynchronous copy,
    commit or cp.async arrival: no data is handed over through them)."""
    sites = _mbarrier_sites(values)
    if sites is None:
        return False
    for i, part, pairs in sites:
        if not {a for a, _, _ in pairs} & addresses or re.search(r"mbarrier\.(?:try|test)_wait|mbarrier\.inval|"
                                                                 r"mbarrier\.init", part):
            continue
        if not (re.match(r"(?:@!?%?\w+\s+)?mbarrier\.arrive\.(?!expect_tx)", part) and head <= i <= back):
            return False
    return True


def _guards_no_refill(ptx: str, line: int) -> bool:
    """Whether the wait at PTX line `line` (1-based) orders no write after it: it lies in the loop of one loop
    counter, its mbarrier is that loop's release barrier (`_released_in`), and in no iteration from the first
    that reaches it on (the counter's value deciding the branches it decides, ptx_values) does a path through the
    loop body reach a statement that writes shared memory, nor in an earlier one a generic write (what the
    arrivals could hand over); after the loop, every path meets a barrier before a write."""
    codes = _codes(ptx)
    values = _values(ptx, codes, line)
    site = line - 1
    operands = next((o for p in statements(codes[site]) if (o := _mbarrier_operands(p)) is not None), None)
    if operands is None or operands[1] is None:
        return False            # not a wait
    pairs = _address_phases(values, operands)
    names = {n for _, _, env in pairs or [] for n, _ in env}
    if pairs is None or len(names) != 1:
        return False
    counter = names.pop()
    trips, increment = values.counters[counter]
    loop = [(h, b) for h, b in _loops(values) if h <= site <= b and h <= increment <= b]
    if len(loop) != 1:
        return False
    head, back = loop[0]
    if not _released_in(values, {a for a, _, _ in pairs}, head, back):
        return False
    writes = lambda i, rx: any(rx.match(p) for p in statements(codes[i]))  # noqa: E731
    waiting = False
    try:
        for v in trips:
            reached = set(values.paths(head, {counter: v}, back))
            if not reached <= set(range(head, back + 1)):
                return False        # the body leaves the loop elsewhere than at its back edge
            waiting = waiting or site in reached
            if any(writes(i, _SHARED_WRITE if waiting else _GENERIC_SHARED_WRITE) for i in reached):
                return False
    except LookupError:
        return False
    return waiting and _every_path_meets(ptx, back + 1, lambda p: bool(re.match(r"(?:bar|barrier)\.sync\b", p)),
                                         lambda p: bool(_SHARED_WRITE.match(p)))

# what hands the thread's shared-memory writes over to another thread (whose async-proxy reads a proxy fence must
# precede): barriers, arrivals, commits, exits
_HANDOVER = re.compile(r"^(?:@!?%?\w+\s+)?(?:bar\.|barrier\.|mbarrier\.(?:arrive|expect_tx|complete_tx)|"
                       r"cp\.async\.mbarrier|tcgen05\.commit|st\.async|red\.async|ret\b|exit\b)")


def _fenced_again(ptx: str, line: int) -> bool:
    """Whether every control-flow path from PTX line `line` meets another fence.proxy.async before any
    async-proxy instruction of the thread, and before anything that hands its writes over to another thread."""
    return _every_path_meets(ptx, line, lambda p: p.startswith("fence.proxy.async"),
                             lambda p: bool(_ASYNC_PROXY.search(p) or _HANDOVER.match(p)))


# (mbarrier.init left out: fence.mbarrier_init is what makes it visible to the async proxy, its own mutant)
_GENERIC_WRITE = re.compile(r"^(?:@!?%?\w+\s+)?(?:st\.(?!async)|atom\.|red\.(?!async)|stmatrix|mbarrier\.inval|"
                            r"cp\.async\.c[ag]|tcgen05\.alloc)")


def _fenced_before(ptx: str, line: int) -> bool:
    """Whether no control-flow path into PTX line `line` (a fence.proxy.async) holds a generic write of the thread
    after the thread's previous fence.proxy.async or the function's entry (an mbarrier.inval only where a TMA or
    bulk load follows)."""
    codes = _codes(ptx)
    # an mbarrier.inval counts only where a later async-proxy instruction writes shared memory (a TMA or bulk load
    # that could reuse the invalidated bytes); later async reads of them would be a bug with the fence too
    loads = any(re.search(r"cp\.async\.bulk\S*\.shared::\w+\.global", c)
                for c in codes[line:_body_end(ptx, codes, line)])
    return _every_path_into_meets(ptx, line, lambda p: p.startswith("fence.proxy.async"),
                                  lambda p: bool(_GENERIC_WRITE.match(p)) and (loads or "mbarrier.inval" not in p),
                                  entry_meets=True, parts=lambda c: [p.strip() for p in c.split(";") if p.strip()])


# what publishes a thread's generic stores in the race checker's model (races.RaceChecker.release): a barrier, an
# mbarrier arrival (cp.async's and a tcgen05.commit's too)
_RELEASE = re.compile(r"^(?:@!?%?\w+\s+)?(?:bar\.|barrier\.|mbarrier\.arrive|cp\.async\.mbarrier\.arrive|"
                      r"tcgen05\.commit)")
# the async proxy's writes of shared memory: TMA loads and bulk copies into it (st.async and red.async too, which
# _accesses_of does not bound: a kernel with them is not listed)
_ASYNC_SHARED_WRITE = re.compile(r"^(?:@!?%?\w+\s+)?(?:cp\.async\.bulk\.(?:tensor\.\dd\.)?shared|st\.async|red\.async)")


_ELEMENT_BYTES = {"f16": 2, "bf16": 2, "f32": 4, "tf32": 4, "f64": 8, "i8": 1, "u8": 1, "s8": 1, "e4m3": 1, "e5m2": 1,
                  "i16": 2, "u16": 2, "i32": 4, "u32": 4, "s32": 4, "i64": 8, "u64": 8}


def _tma_boxes(case: Any) -> dict[str, int]:
    """The bytes of one box of each tensor-map parameter of the case's kernel (its name in the PTX -> bytes): the
    hidden .b8[128] parameters in their order, which is the order of the compile metadata's tensor maps."""
    names = re.findall(r"\.param\s+\.align\s+64\s+\.b8\s+(\w+)\[128\]", case.ptx)
    kernels = getattr(case.meta, "kernels", ())
    maps = kernels[0].tma if len(kernels) == 1 else ()
    if len(maps) != len(names):
        return {}
    out = {}
    for name, tm in zip(names, maps):
        size = _ELEMENT_BYTES.get(tm.dtype)
        if size is not None:
            out[name] = size * math.prod(tm.box)
    return out


def _tensor_map_of(values: Values, operand: str) -> Optional[str]:
    """The parameter a TMA instruction's tensor-map operand (`[%rdX, {...}]`'s register) names: followed back
    through cvta.param and mov of the parameter's symbol."""
    reg = operand.split(",")[0].strip()
    for _ in range(3):
        if re.fullmatch(r"[A-Za-z_$][\w$]*", reg):
            return reg
        defs = values.defs.get(reg, [])
        if len(defs) != 1 or not defs[0][1].startswith(("cvta.param", "mov.")):
            return None
        reg = defs[0][2][0]
    return None


def _fence_orders_published_only(ptx: str, line: int, boxes: Optional[dict[str, int]] = None) -> bool:
    """Whether the generic writes the fence.proxy.async at PTX line `line` (1-based) could order are tcgen05.alloc
    writes of the tensor-memory address that a release publishes before the fence (and mbarrier.init that a
    fence.mbarrier_init follows before it), whose bytes no TMA load or bulk copy of the function writes (see
    EQUIVALENT)."""
    codes = _codes(ptx)
    graph = _body_graph(ptx, codes, line)
    if graph is None:
        return False
    start, _, succ = graph
    preds = _predecessors(succ)
    values = _values(ptx, codes, line)
    slots: list[tuple[int, int]] = []
    inits: set[int] = set()
    # walking back from the fence: (statement, whether a release lies between it and the fence)
    todo, seen = [(i, False) for i in preds.get(line - 1, [])], set()
    while todo:
        i, released = todo.pop()
        if (i, released) in seen:
            continue
        seen.add((i, released))
        parts = statements(codes[i])
        if any(p.startswith("fence.proxy.async") for p in parts):
            continue
        for p in reversed(parts):
            if re.match(r"^(?:@!?%?\w+\s+)?mbarrier\.init\b", p):
                inits.add(i)
            elif _GENERIC_WRITE.match(p):
                got = _accesses_of(values, p, {}) if released and re.sub(r"^@!?%?\w+\s+", "", p).startswith(
                    "tcgen05.alloc") else None
                if not got:
                    return False        # another write, or one no release publishes before the fence
                slots.extend((lo, hi) for space, lo, hi, _ in got if space == "shared")
            if _RELEASE.match(p):
                released = True
        todo.extend((j, released) for j in preds.get(i, []))
    if not slots:
        return False                    # nothing generic to order: _fenced_before's case
    n = _cta_threads(ptx)
    reach = _reached_per_thread(values, n) if n else None
    if reach is None:
        return False
    raw = [text.split("//")[0] for text in ptx.split("\n")]     # (inline-asm guards kept)
    for i in inits:     # each thread that may initialize there fences its inits before it reaches this fence
        for t in range(n):
            if i in reach[t] and _guard(values, raw[i], "mbarrier.init", {"%tid.x": t}) is not False and \
                    not _thread_meets_first(values, succ, t, i, line - 1, lambda p: p.startswith(
                        ("fence.mbarrier_init", "fence.proxy.async"))):
                return False
    for i in range(values.start, values.end):
        for part in statements(codes[i]):
            if not _ASYNC_SHARED_WRITE.match(part):
                continue
            brackets = re.findall(r"\[([^\]]+)\]", part)       # (the shared address and the mbarrier's: no coordinates)
            envs = values.envs(_REGISTER.findall(" ".join(brackets[:1] + brackets[2:])), residues=True)
            box = (boxes or {}).get(_tensor_map_of(values, brackets[1]) or "") if len(brackets) > 1 else None
            for env in envs or [None]:
                got = _accesses_of(values, part, env, i) if env is not None else None
                if got is None:
                    return False
                first = [(lo, hi) for space, lo, hi, _ in got if space == "shared"][:1]     # the data's bytes
                if box is not None and first:
                    first = [(first[0][0], min(first[0][1], first[0][0] + box))]
                if any(lo < b and a < hi for lo, hi in first for a, b in slots):
                    return False
    return True


def _guard(values: Values, code: str, opcode: str, env: dict[str, int]) -> Optional[bool]:
    """Whether the statement of line `code` (its text, inline-asm setp kept) that starts with `opcode` runs given
    `env`: True unguarded, its guard's truth where evaluated (a predicate register, or an inline-asm one its line
    sets by comparing a register with 0), None where not."""
    parts = statements(code)
    for p in parts:
        g = re.match(r"^@(!?)(%?\w+)\s+" + re.escape(opcode), p)
        if p.startswith(opcode):
            return True
        if g is None:
            continue
        local = next((m for q in parts if (m := re.match(r"^setp\.(eq|ne)\.\w+\s+" + re.escape(g.group(2)) +
                                                       r"\s*,\s*(%\w+)\s*,\s*0$", q))), None)
        if local is not None:
            v = values.value(local.group(2), env)
            holds = None if v is None else (v != 0) == (local.group(1) == "ne")
        else:
            holds = values.truth(g.group(2), env)
        return None if holds is None else holds != bool(g.group(1))
    return None


def _thread_meets_first(values: Values, succ: dict[int, list[int]], t: int, first: int, site: int,
                        meets: Callable[[str], bool]) -> bool:
    """Whether every path of thread `t` (%tid.x; the branches it decides followed one way) from after statement
    index `first` reaches a statement one of whose parts `meets` holds for before statement index `site`."""
    env = {"%tid.x": t}
    todo, seen = list(succ.get(first, [])), set()
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        if i == site:
            return False
        parts = statements(values.codes[i])
        if any(meets(p) for p in parts):
            continue
        nxt = succ.get(i, [])
        branch = next((m for p in parts if (m := re.match(r"^@(!?)(%\w+)\s+bra", p))), None)
        if branch is not None and len(nxt) == 2:
            taken = values.truth(branch.group(2), env)
            if taken is not None:
                taken = taken != bool(branch.group(1))
                target = [j for j in nxt if j != i + 1]
                nxt = target if taken else [i + 1]
        todo.extend(nxt)
    return True


# tcgen05 instructions a tcgen05.fence::after_thread_sync orders after the thread's synchronization: the ISA's
# asynchronous ones, and (conservatively) tensor-memory allocation and deallocation
_NEEDS_AFTER_SYNC = re.compile(r"^(?:@!?%?\w+\s+)?tcgen05\.(?:mma|cp|shift|ld|st|alloc|dealloc)\b")
_BRANCH = re.compile(r"^(@!?%?\w+\s+)?bra(?:\.uni)?\s+(\$?\w+)")


def _after_sync_fenced_again(ptx: str, line: int) -> bool:
    """Whether every control-flow path from PTX line `line` (a tcgen05.fence::after_thread_sync) reaches another
    such fence before any tcgen05 instruction it orders (`_NEEDS_AFTER_SYNC`), or the function's end."""
    return _every_path_meets(ptx, line, lambda p: p.startswith("tcgen05.fence::after_thread_sync"),
                             lambda p: bool(_NEEDS_AFTER_SYNC.match(p)))


# what a tcgen05.fence::after_thread_sync orders the thread's later tcgen05 operations after: its waits and barriers
_THREAD_SYNC = re.compile(r"^(?:@!?%?\w+\s+)?(?:bar\.|barrier\.|mbarrier\.(?:try|test)_wait)")


def _after_sync_fenced_before(ptx: str, line: int) -> bool:
    """Whether every control-flow path into PTX line `line` (a tcgen05.fence::after_thread_sync) passes another such
    fence after the thread's last synchronization (barrier or mbarrier wait), and none comes from the entry
    without one."""
    return _every_path_into_meets(ptx, line, lambda p: p.startswith("tcgen05.fence::after_thread_sync"),
                                  lambda p: bool(_THREAD_SYNC.match(p)), entry_meets=False)


# what a deleted tcgen05.wait::ld (::st) must not reach before the thread's next wait of the same kind: any other
# tcgen05 instruction (a tensor-memory write, a fence or commit that hands tensor memory over, a deallocation),
# a barrier, an mbarrier arrival, or the thread's exit; further tcgen05.ld (st) of the same kind may come between
_HANDOFF = re.compile(r"^(?:@!?%?\w+\s+)?(?:tcgen05\.|bar\.|barrier\.|mbarrier\.arrive|cp\.async\.mbarrier|"
                      r"ret\b|exit\b|trap\b)")


def _tcgen05_nothing_in_flight(ptx: str, line: int) -> bool:
    """Whether no path from a tcgen05.ld (st) reaches PTX line `line` (1-based, a tcgen05.wait::ld (st)) without
    passing another wait of the same kind."""
    codes = _codes(ptx)
    kind = re.search(r"tcgen05\.wait::(ld|st)", codes[line - 1])
    graph = _body_graph(ptx, codes, line)
    if kind is None or graph is None:
        return False
    start, end, succ = graph
    waits = {i for i in range(start, end) if f"tcgen05.wait::{kind.group(1)}" in codes[i]} - {line - 1}
    cut = {i: ([] if i in waits else js) for i, js in succ.items()}
    ops = [i for i in range(start, end) if re.search(rf"(?:^|;\s*|@!?%?\w+\s+)tcgen05\.{kind.group(1)}\.", codes[i])]
    return all(line - 1 not in _reachable(cut, cut[i], -1) for i in ops)


def _waited_again(ptx: str, line: int) -> bool:
    """Whether every control-flow path from PTX line `line` (a tcgen05.wait::ld or ::st) reaches another wait of
    the same kind before anything but more tcgen05.ld (st) that touches tensor memory or synchronizes."""
    kind = re.search(r"tcgen05\.wait::(ld|st)", _codes(ptx)[line - 1])
    if kind is None:
        return False
    wait, same = f"tcgen05.wait::{kind.group(1)}", re.compile(rf"^(?:@!?%?\w+\s+)?tcgen05\.{kind.group(1)}\.")
    return _every_path_meets(ptx, line, lambda p: p.startswith(wait),
                             lambda p: bool(_HANDOFF.match(p)) and not same.match(p))


_MBARRIER_USE = re.compile(r"^(?:@!?%?\w+\s+)?(?:mbarrier\.(?!init)|cp\.async\.bulk|cp\.reduce|cp\.async\.mbarrier|"
                           r"tcgen05\.(?:mma|cp|commit)|wgmma\.mma|bar\.|barrier\.|ret\b|exit\b|st\.async|red\.async)")


def _init_fenced_again(ptx: str, line: int) -> bool:
    """Whether every path from PTX line `line` (a fence.mbarrier_init) reaches another such fence (or, in a
    kernel without clusters, a fence.proxy.async) before any mbarrier use, async-proxy instruction, barrier or
    exit."""
    clusters = "barrier.cluster" in ptx or "shared::cluster" in ptx and "mapa" in ptx
    fences = ("fence.mbarrier_init",) if clusters else ("fence.mbarrier_init", "fence.proxy.async")
    return _every_path_meets(ptx, line, lambda p: p.startswith(fences), lambda p: bool(_MBARRIER_USE.match(p)))


_WHOLE_BARRIER = re.compile(r"^(?:bar|barrier)(?:\.cta)?\.sync(?:\.aligned)?\s+(\w+)\s*(?:,\s*(\d+))?\s*$")
_INIT = re.compile(r"^(?:@!?%?\w+\s+)?(?:mbarrier\.init|fence\.mbarrier_init)\b")
# async-proxy instructions that complete on an mbarrier (cp.async.mbarrier.arrive is the generic proxy's)
_ASYNC_COMPLETION = re.compile(r"^(?:@!?%?\w+\s+)?(?:tcgen05\.commit|cp\.async\.bulk\.(?!wait|commit)\S*mbarrier)")


def _whole_cta_barrier(ptx: str) -> Callable[[str], Optional[str]]:
    """A test of one statement: the barrier id when it is a bar.sync / barrier.sync of the whole CTA (no thread
    count, or the count of the kernel's .reqntid), else None."""
    req = re.search(r"\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", ptx)
    total = 0
    if req:
        total = 1
        for g in req.groups():
            total *= int(g or 1)

    def whole(code: str) -> Optional[str]:
        m = _WHOLE_BARRIER.match(code.rstrip(";").strip())
        if m is None or m.group(2) is not None and int(m.group(2)) != total:
            return None
        return m.group(1)

    return whole


def _next_barrier_covers(ptx: str, line: int) -> bool:
    """Whether every path from the barrier at PTX line `line` (1-based) reaches a barrier of the whole CTA before
    any memory access other than mbarrier.init / fence.mbarrier_init, an exit or a return (see EQUIVALENT)."""
    whole = _whole_cta_barrier(ptx)

    def stops(p: str) -> bool:
        return bool(_touches_memory(p) and not _INIT.match(p) or re.match(r"^(?:@!?%?\w+\s+)?(ret|exit|trap)\b", p))

    return _every_path_meets(ptx, line, lambda p: whole(p) is not None, stops)


def _implied_by_prepared_wait(ptx: str, line: int) -> bool:
    """Whether the skipped 'stage full' wait at PTX line `line` (1-based) is followed, right after its spin loop,
    by a 'stage prepared' wait with the same parity, and every plain mbarrier.arrive of the kernel comes after a
    'stage full' wait on a straight stretch (see EQUIVALENT)."""
    lines = ptx.split("\n")
    full = re.compile(r"mbarrier\.try_wait\.parity\S*\s+\w+,\s*\[[^\]]+\],\s*(%\w+)")
    m = full.search(lines[line - 1])
    if m is None or "wait: stage full" not in lines[line - 1]:
        return False
    codes = _codes(ptx)
    i = line
    while i < len(codes) and not codes[i].startswith("{") and "try_wait" not in codes[i]:
        if _touches_memory(codes[i]) or re.match(r"^(?:@!?%?\w+\s+)?(bar|barrier)\.", codes[i]):
            return False
        i += 1      # the spin loop's setp and branch back, the next address computation, a label
    nxt = full.search(lines[i]) if i < len(lines) else None
    if nxt is None or "wait: stage prepared" not in lines[i] or nxt.group(1) != m.group(1):
        return False
    for j, code in enumerate(codes):
        if re.match(r"^(?:@!?%?\w+\s+)?mbarrier\.arrive(?!\.expect_tx)", code):
            before = "\n".join(lines[:j])
            if "wait: stage full" not in before[before.rfind("mbarrier.arrive") + 1:]:
                return False        # (from the previous arrival, or the start: rfind's -1 + 1)
    return True


def _no_async_mbarrier(ptx: str) -> bool:
    """Whether the kernel uses no clusters and no async-proxy instruction of it completes on an mbarrier."""
    clusters = "barrier.cluster" in ptx or "shared::cluster" in ptx and "mapa" in ptx
    return not clusters and not any(_ASYNC_COMPLETION.match(c) for c in _codes(ptx))


def _init_fenced_later(ptx: str, line: int) -> bool:
    """Whether, in a kernel without clusters, a later fence.mbarrier_init than the one at PTX line `line` is
    followed on every path by a whole-CTA barrier (none of whose instances comes before that fence) before any
    mbarrier use, none lies on a path from the entry to that fence, and every async-proxy completion on an
    mbarrier comes after that barrier (see EQUIVALENT)."""
    if "barrier.cluster" in ptx or "shared::cluster" in ptx and "mapa" in ptx:
        return False
    codes = _codes(ptx)
    graph = _body_graph(ptx, codes, line)
    if graph is None:
        return False
    start, end, succ = graph
    whole = _whole_cta_barrier(ptx)
    for f in range(line, end):
        if not codes[f].startswith("fence.mbarrier_init"):
            continue
        ids = {whole(codes[i]) for i in _reachable(succ, succ[f], -1)} - {None}
        for bid in ids:
            at = {i for i in range(start, end) if whole(codes[i]) == bid}
            meets = lambda p, bid=bid: whole(p) == bid  # noqa: E731
            stops = lambda p: bool(_MBARRIER_USE.match(p)) and not re.match(r"^(bar|barrier)\.", p)  # noqa: E731
            if not _every_path_meets(ptx, f + 1, meets, stops):
                continue
            entry = _reachable(succ, [start], -1)
            if any(x in entry and f in _reachable(succ, succ[x], -1) for x in at):
                continue        # an instance of the barrier on a path to the fence: it might pair with the wrong one
            uses = [i for i in range(start, end) if _ASYNC_COMPLETION.match(codes[i])]
            cut = {i: ([] if i in at else js) for i, js in succ.items()}
            if uses and all(i not in _reachable(cut, [start], -1) for i in uses):
                return True
    return False


def _predecessors(succ: dict[int, list[int]]) -> dict[int, list[int]]:
    """The control-flow graph `succ` (instruction -> its successors) turned around."""
    preds: dict[int, list[int]] = {}
    for i, js in succ.items():
        for j in js:
            preds.setdefault(j, []).append(i)
    return preds


def _every_path_into_meets(ptx: str, line: int, meets: Callable[[str], bool], stops: Callable[[str], bool],
                           entry_meets: bool, parts: Callable[[str], list[str]] = statements) -> bool:
    """Whether every control-flow path into PTX line `line` (1-based), walked back, reaches a statement for which
    `meets` holds before one for which `stops` holds; a path back to the function's entry counts as meeting
    where `entry_meets` (`parts`: how a line splits into statements)."""
    codes = _codes(ptx)
    graph = _body_graph(ptx, codes, line)
    if graph is None:
        return False
    start, end, succ = graph
    preds = _predecessors(succ)
    todo, seen = list(preds.get(line - 1, [])), set()
    if not todo and not entry_meets:
        return False
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        found = parts(codes[i])
        if any(meets(p) for p in found):
            continue
        if any(stops(p) for p in found) or (i == start and not entry_meets):
            return False
        todo.extend(preds.get(i, []))
    return True


def _every_path_meets(ptx: str, line: int, meets: Callable[[str], bool], stops: Callable[[str], bool]) -> bool:
    """Whether every control-flow path from after PTX line `line` (1-based) reaches a statement for which `meets`
    holds before one for which `stops` holds (or ends at the function's end, a ret or an exit that `stops`
    allows)."""
    codes = _codes(ptx)
    start, end = _body_start(codes, line), _body_end(ptx, codes, line)
    labels = {c[:-1]: i for i, c in enumerate(codes[start:end], start) if c.endswith(":")}
    todo, seen = [line], set()          # 0-based indices of the instructions to visit next
    while todo:
        i = todo.pop()
        while start <= i < end and i not in seen:
            seen.add(i)
            parts = [p.strip() for p in codes[i].split(";") if p.strip()]
            if any(meets(p) for p in parts):
                break
            if any(stops(p) for p in parts):
                return False
            branch = next((m for p in parts if (m := _BRANCH.match(p))), None)
            if branch is not None:
                if branch.group(2) not in labels:
                    return False        # a jump this check cannot follow
                todo.append(labels[branch.group(2)])
                if branch.group(1) is None:
                    break               # unconditional: no fall-through
            if any(re.match(r"^(ret|exit)\b", p) for p in parts):
                break
            i += 1
    return True


def _body_end(ptx: str, codes: list[str], line: int) -> int:
    """The index of the closing brace of the function body containing PTX line `line` (1-based)."""
    raw = [text.split("//")[0] for text in ptx.split("\n")]      # braces of inline-asm blocks kept, balanced
    depth = 1
    for i in range(_body_start(codes, line), len(codes)):
        depth += raw[i].count("{") - raw[i].count("}")
        if depth <= 0:
            return i
    return len(codes)


def _no_copy_in_flight(ptx: str, line: int) -> bool:
    """Whether no path from a cp.async copy of the function reaches PTX line `line` (1-based) without passing a
    cp.async.wait_all."""
    codes = _codes(ptx)
    graph = _body_graph(ptx, codes, line)
    if graph is None:
        return False
    start, end, succ = graph
    waits = {i for i in range(start, end) if codes[i].startswith("cp.async.wait_all")} - {line - 1}
    cut = {i: ([] if i in waits else js) for i, js in succ.items()}
    copies = [i for i in range(start, end) if re.search(r"cp\.async\.c[ag]\b", codes[i])]
    return all(line - 1 not in _reachable(cut, cut[i], -1) for i in copies)


def _waited_all_nearby(ptx: str, line: int, commit: bool = False) -> bool:
    """Whether a cp.async.wait_all precedes PTX line `line` (1-based), or follows it before any memory access or
    barrier, on a straight stretch: no label, branch, exit or cp.async copy between. (`commit`: a
    cp.async.commit_group, for which only a following wait_all counts.)"""
    codes = _codes(ptx)

    def stretch(indices: range, stop_at_memory: bool) -> bool:
        for i in indices:
            code = codes[i]
            if code.startswith("cp.async.wait_all"):
                return True
            if (code.endswith(":") or _BRANCH.match(code) or re.match(r"(ret|exit)\b", code)
                    or re.search(r"cp\.async\.c[ag]\b", code)
                    or stop_at_memory and (_touches_memory(code) or re.match(r"(bar|barrier)\.", code))):
                return False
        return False

    if commit:
        return stretch(range(line, len(codes)), True)
    return stretch(range(line - 2, -1, -1), False) or stretch(range(line, len(codes)), True)


def _next_copy_wait_is_wait_all(ptx: str, line: int) -> bool:
    """Whether every control-flow path from PTX line `line` (1-based) reaches an unpredicated cp.async.wait_all
    before any cp.async.wait_group, exit, return or trap (the function's last statement a ret)."""
    codes = _codes(ptx)
    body = [c for c in codes[_body_start(codes, line):_body_end(ptx, codes, line)] if c]
    if not body or not re.match(r"ret\b", body[-1]):
        return False
    stop = re.compile(r"^(?:@!?%?\w+\s+)?(?:cp\.async\.wait_group|ret|exit|trap)\b")
    return _every_path_meets(ptx, line, lambda p: p.startswith("cp.async.wait_all"), lambda p: bool(stop.match(p)))


def _next_instruction(ptx: str, line: int) -> str:
    """The instruction after PTX line `line` (1-based), skipping comments and blank lines."""
    for text in ptx.split("\n")[line:]:
        code = text.split("//")[0].strip()
        if code:
            return code
    return ""


# ---- what the threads of a CTA access, for the equivalences that compare byte ranges (ptx_values, %tid.x given)

_TMEM_WRITE = re.compile(r"^tcgen05\.(?:st|dealloc)\b")
_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2, "b32": 4, "u32": 4,
          "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8, "f16x2": 4, "bf16x2": 4}
_ALL = 1 << 64
Access = tuple[str, int, int, bool]     # (space: shared, global or tmem; first byte; end; whether it writes)


def _cta_threads(ptx: str) -> int:
    """The kernel's thread count when its .reqntid is one-dimensional (0 otherwise: %tid.y/z not evaluated)."""
    req = re.search(r"\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", ptx)
    if req is None or int(req.group(2) or 1) * int(req.group(3) or 1) != 1:
        return 0
    return int(req.group(1))


def _shared_range(values: Values, operand: str, size: int, env: dict[str, int]) -> Optional[tuple[int, int]]:
    """The bytes [first, end) an address operand `[reg+offset]` of `size` bytes covers given `env`."""
    m = re.fullmatch(r"\[?\s*(%?[\w$]+)\s*(?:\+\s*(-?\w+))?\s*\]?", operand.strip())
    if m is None:
        return None
    base = values.value(m.group(1), env)
    offset = values.value(m.group(2), env) if m.group(2) else 0
    return None if base is None or offset is None else (base + offset, base + offset + size)


def _expected_bytes(values: Values, index: int, mbarrier: str, env: dict[str, int]) -> Optional[int]:
    """The bytes announced on the mbarrier at operand `mbarrier` by the constant mbarrier.arrive.expect_tx counts
    on the same register before statement `index` in its basic block (no label between), summed: an upper bound
    of what a TMA load at `index` completing on it writes (more bytes than the phase expects would complete it
    early, which a kernel that runs clean does not do); None where there is none."""
    total = 0
    for i in range(index - 1, values.start - 1, -1):
        if values.codes[i].endswith(":"):
            break
        for part in statements(values.codes[i]):
            m = re.match(r"^mbarrier\.arrive\.expect_tx\S*\s+_\s*,\s*\[\s*([^\]]+?)\s*\]\s*,\s*(\S+)$", part)
            if m is not None and m.group(1) == mbarrier.strip():
                count = values.value(m.group(2), env)
                if count is None:
                    return None
                total += count
    return total or None


def _accesses_of(values: Values, part: str, env: dict[str, int], index: int = -1) -> Optional[list[Access]]:
    """The memory one statement accesses given `env` (a thread's %tid.x and loop counters): [] for none, None for
    what this model cannot bound (a global write, a descriptor-addressed MMA, an address not evaluated). Its
    predicate is ignored (an access it may make counts)."""
    p = re.sub(r"^@!?%?\w+\s+", "", part)
    if not _touches_memory(p) or p.startswith(("tcgen05.relinquish", "tcgen05.wait", "tcgen05.fence")):
        return []
    brackets = re.findall(r"\[([^\]]+)\]", p)
    if p.startswith("mbarrier."):
        r = _shared_range(values, brackets[0], 8, env) if brackets else None
        writes = not re.match(r"mbarrier\.(?:try|test)_wait", p)
        return None if r is None else [("shared", r[0], r[1], writes)]
    if _GLOBAL_LOAD.match(p):
        return [("global", 0, _ALL, False)]
    m = re.match(r"(ld|st)(?:\.volatile|\.relaxed\.\w+|\.weak)?\.shared(?:::cta)?(?:\.v(\d))?\.(\w+)\s", p)
    if m and m.group(3) in _SIZES and brackets:
        r = _shared_range(values, brackets[0], _SIZES[m.group(3)] * int(m.group(2) or 1), env)
        return None if r is None else [("shared", r[0], r[1], m.group(1) == "st")]
    m = re.match(r"cp\.async\.c[ag]\.shared(?:::cta)?\.global\S*\s+\[([^\]]+)\]\s*,\s*\[[^\]]+\]\s*,\s*(\d+)", p)
    if m:
        r = _shared_range(values, m.group(1), int(m.group(2)), env)
        return None if r is None else [("shared", r[0], r[1], True), ("global", 0, _ALL, False)]
    if re.match(r"(?:ldmatrix|stmatrix)\.sync\.aligned\.m8n8\.x[124](?:\.trans)?\.shared(?:::cta)?\.b16\s", p):
        r = _shared_range(values, brackets[0], 16, env)     # one 16-byte row per thread's address
        return None if r is None else [("shared", r[0], r[1], p.startswith("stmatrix"))]
    m = re.match(r"cp\.async\.bulk\.tensor\.\dd\.shared::cta\.global\.tile\.mbarrier::complete_tx::bytes\s", p)
    if m and len(brackets) == 3:
        size = _expected_bytes(values, index, brackets[2], env)
        r = None if size is None else _shared_range(values, brackets[0], size, env)
        b = _shared_range(values, brackets[2], 8, env)
        return None if r is None or b is None else [("shared", r[0], r[1], True), ("shared", b[0], b[1], True),
                                                    ("global", 0, _ALL, False)]
    if p.startswith("tcgen05.ld"):
        return [("tmem", 0, _ALL, False)]
    if _TMEM_WRITE.match(p):
        return [("tmem", 0, _ALL, True)]
    if p.startswith(("tcgen05.alloc", "tcgen05.commit")) and brackets:
        r = _shared_range(values, brackets[0], 8 if p.startswith("tcgen05.commit") else 4, env)
        return None if r is None else [("shared", r[0], r[1], True)] + (
            [("tmem", 0, _ALL, True)] if p.startswith("tcgen05.alloc") else [])
    return None


def _thread_accesses(values: Values, indices: set[int], threads: dict[int, set[int]]
                     ) -> Optional[list[tuple[int, Access]]]:
    """(thread, access) of every statement at `indices` for each thread in `threads` (thread -> the statements it
    can reach) that reaches it, over the loop counters' values its address registers depend on (None: one not
    bounded)."""
    out = []
    for i in sorted(indices):
        for part in statements(values.codes[i]):
            if not _touches_memory(re.sub(r"^@!?%?\w+\s+", "", part)):
                continue
            # (no counters' values: an address that needs them is not evaluated, a tensor-memory one not needed)
            envs = values.envs(_REGISTER.findall(" ".join(re.findall(r"\[([^\]]+)\]", part)))) or [{}]
            for t, reached in threads.items():
                if i not in reached:
                    continue
                for env in envs:
                    got = _accesses_of(values, part, {**env, "%tid.x": t}, i)
                    if got is None:
                        return None
                    out.extend((t, a) for a in got)
    return out


_REGISTER = re.compile(r"%\w+")


def _conflict(first: list[tuple[int, Access]], second: list[tuple[int, Access]], same_thread: bool = False) -> bool:
    """Whether an access of `first` and one of `second` by different threads (`same_thread`: by any) touch a
    common byte of the same space, one of them writing."""
    by_space: dict[str, list[tuple[int, int, int, bool]]] = {}
    for t, (space, lo, hi, w) in second:
        by_space.setdefault(space, []).append((lo, hi, t, w))
    for rows in by_space.values():
        rows.sort()
    import bisect
    for t, (space, lo, hi, w) in first:
        rows = by_space.get(space, [])
        for lo2, hi2, u, w2 in rows[:bisect.bisect_left(rows, (hi, -1, -1, False))]:
            if hi2 > lo and (w or w2) and (same_thread or u != t):
                return True
    return False


def _reached_per_thread(values: Values, n: int) -> Optional[dict[int, set[int]]]:
    """The statements each thread of the CTA can reach from the entry (branches its %tid.x decides followed one
    way, others both); None where a jump cannot be followed."""
    try:
        return {t: set(values.paths(values.start, {"%tid.x": t}, -1)) for t in range(n)}
    except LookupError:
        return None


def _zone(codes: list[str], graph: dict[int, list[int]], roots: list[int], stop: Callable[[str], bool]) -> set[int]:
    """The statements reachable from `roots` along `graph` without passing a statement one of whose parts `stop`
    holds for (those left out)."""
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        i = todo.pop()
        if i in seen or any(stop(p) for p in statements(codes[i])):
            continue
        seen.add(i)
        todo.extend(graph.get(i, []))
    return seen


_BARRIER_ID = re.compile(r"^(?:@!?%?\w+\s+)?(?:bar|barrier)(?:\.cta)?\.(?:sync|arrive|red\S*)(?:\.aligned)?\s+(\w+)")
_COPY_WAIT = re.compile(r"^cp\.async\.wait_(?:all|group\s+(\d+))")


def _per_thread_walk(ptx: str, codes: list[str], line: int
                     ) -> "Optional[tuple[int, Values, dict[int, list[int]], dict[int, set[int]]]]":
    """(threads of the CTA, the values evaluated around PTX line `line`, the control-flow successors of
    their statements that some thread reaches, the statements each thread reaches); None where any of them is
    unknown."""
    n = _cta_threads(ptx)
    if not n:
        return None
    values = _values(ptx, codes, line)
    succ = _successors(codes, values.start, values.end)
    reach = _reached_per_thread(values, n)
    if succ is None or reach is None:
        return None
    live = set().union(*reach.values())     # no thread reaches the rest: the graph drops it
    return n, values, {i: [j for j in js if j in live] for i, js in succ.items() if i in live}, reach


def _barrier_orders_nothing(ptx: str, line: int) -> bool:
    """Whether the bar.sync at PTX line `line` (1-based) orders no conflicting pair of accesses (see EQUIVALENT)."""
    codes = _codes(ptx)
    site = line - 1
    m = _WHOLE_BARRIER.match(codes[site].rstrip(";").strip())
    walk = _per_thread_walk(ptx, codes, line) if m is not None else None
    if walk is None:
        return False
    n, values, succ, reach = walk
    ident, count = m.group(1), int(m.group(2)) if m.group(2) else n
    takers = {t for t in range(n) if site in reach[t]}
    if len(takers) != count:
        return False
    for i in range(values.start, values.end):      # no other thread uses the barrier's id
        ids = [b.group(1) for p in statements(codes[i]) if (b := _BARRIER_ID.match(p))]
        if ident in ids and any(i in reach[t] for t in range(n) if t not in takers):
            return False
    whole = _whole_cta_barrier(ptx)

    def covers(p: str) -> bool:     # a barrier every participant meets with the others: the whole CTA's, or this one
        b = _WHOLE_BARRIER.match(p.rstrip(";").strip())
        return whole(p) is not None or b is not None and b.group(1) == ident
    after = _zone(codes, succ, succ[site], covers)
    before = _zone(codes, _predecessors(succ), _predecessors(succ).get(site, []), covers)
    waits = [i for i in before if any(re.match(r"^(?:@!?%?\w+\s+)?(?:mbarrier\.(?:try|test)_wait|"
                                               r"cp\.async\.bulk\.wait)", p) for p in statements(codes[i]))]
    if waits:
        return False        # a wait there could complete asynchronous writes the barrier publishes
    for i in [i for i in before if _COPY_WAIT.match(codes[i])]:     # copies a cp.async wait there completes
        cut = {j: ([] if codes[j].startswith("cp.async.wait_all") else js) for j, js in _predecessors(succ).items()}
        before |= {j for j in _reachable(cut, cut.get(i, []), -1) if re.search(r"cp\.async\.c[ag]\b", codes[j])}
    parts = {t: reach[t] for t in takers}
    first, second = _thread_accesses(values, before, parts), _thread_accesses(values, after, parts)
    return first is not None and second is not None and not _conflict(first, second)


def _copies_waited_later(ptx: str, line: int) -> bool:
    """Whether the cp.async copies in flight at the wait at PTX line `line` (1-based) are completed on every path
    by a later wait, followed by a barrier of the whole CTA, before any thread touches their bytes (see
    EQUIVALENT)."""
    codes = _codes(ptx)
    site = line - 1
    walk = _per_thread_walk(ptx, codes, line) if _COPY_WAIT.match(codes[site]) else None
    if walk is None:
        return False
    n, values, succ, reach = walk
    preds = _predecessors(succ)
    cut = {j: ([] if codes[j].startswith("cp.async.wait_all") and j != site else js) for j, js in preds.items()}
    copies = {j for j in _reachable(cut, cut.get(site, []), -1) if re.search(r"cp\.async\.c[ag]\b", codes[j])}
    if not copies:
        return False
    whole = _whole_cta_barrier(ptx)
    zone: set[int] = set()
    todo, seen = [(j, 0, False) for j in succ[site]], set()
    while todo:             # (statement, commits since the site (at most 8 counted), whether completed yet)
        i, commits, done = todo.pop()
        if (i, commits, done) in seen:
            continue
        seen.add((i, commits, done))
        parts = statements(codes[i])
        if done and any(whole(p) is not None for p in parts):
            continue
        if i == site or i in copies or any(re.match(r"^(?:@!?%?\w+\s+)?(?:ret|exit|trap)\b", p) for p in parts):
            return False        # back at the copies, or out, before a covering wait and barrier
        if any(_BARRIER_ID.match(p) and whole(p) is None for p in parts):
            return False        # a barrier of part of the CTA: the threads it lets on are not all bounded here
        zone.add(i)
        for p in parts:
            commits = min(commits + 1, 8) if p.startswith("cp.async.commit_group") else commits
            w = _COPY_WAIT.match(p)
            done = done or bool(w) and (w.group(1) is None or commits >= int(w.group(1)) + 1)
        todo.extend((j, commits, done) for j in succ.get(i, []))
    everyone = {t: reach[t] for t in range(n)}
    mine, others = _thread_accesses(values, copies, everyone), _thread_accesses(values, zone, everyone)
    if mine is None or others is None:
        return False
    written = [(t, a) for t, a in mine if a[0] == "shared"]
    return not _conflict(written, others, same_thread=True)
def _mbarrier_addresses(values: Values, part: str) -> Optional[set[int]]:
    """Every address of the mbarrier statement `part` uses (its _mbarrier_operands address) over the values of the
    loop counters and residues (x mod d) it depends on; None where one is not evaluated."""
    operands = _mbarrier_operands(part)
    m = re.fullmatch(r"(%?[\w$]+)\s*(?:\+\s*(-?\w+))?", operands[0]) if operands else None
    if m is None:
        return None
    envs = values.envs([r for r in (m.group(1), m.group(2)) if r and r.startswith("%")], residues=True)
    out = set()
    for env in envs or []:
        base, offset = values.value(m.group(1), env), values.value(m.group(2), env) if m.group(2) else 0
        if base is None or offset is None:
            return None
        out.add(base + offset)
    return out if envs else None


def _mbarrier_unused(ptx: str, line: int) -> bool:
    """Whether no statement of the function but the mbarrier.init at PTX line `line` (1-based) uses the mbarrier
    it initializes: every other statement's mbarrier operand evaluated (stage-indexed ones over their x mod d
    values, ptx_values) to another address, in a kernel without st.async / red.async (whose mbarrier this does
    not read)."""
    if re.search(r"\b(?:st|red)\.async\b", ptx):
        return False
    codes = _codes(ptx)
    values = _values(ptx, codes, line)
    inits = [p for p in statements(codes[line - 1]) if re.match(r"^(?:@!?%?\w+\s+)?mbarrier\.init\b", p)]
    mine = _mbarrier_addresses(values, inits[0]) if len(inits) == 1 else None
    if not mine:
        return False
    for i in range(values.start, values.end):
        for part in statements(codes[i]):
            if i == line - 1 or _mbarrier_operands(part) is None:
                continue
            used = _mbarrier_addresses(values, part)
            if used is None or used & mine:
                return False
    return True


_TCGEN05_MMA = re.compile(r"^(?:@!?%?\w+\s+)?tcgen05\.mma\.cta_group::1\.kind::\w+\s+\[(%r\d+)\]\s*,\s*(%rd\d+)\s*,"
                          r"\s*%rd\d+\s*,\s*(\S+?)\s*,")


def _accumulator(values: Values, codes: list[str], part: str) -> Optional[tuple[str, int, int, int]]:
    """(base register, first column, columns, instruction descriptor) of the tensor-memory accumulator of a dense
    tcgen05.mma.cta_group::1 whose A operand is a shared-memory descriptor (None for any other form): its address
    register followed back through `add X, constant` definitions, its N columns from the instruction descriptor."""
    m = _TCGEN05_MMA.match(part)
    idesc = _constant(codes, m.group(3)) if m else None
    if m is None or idesc is None or re.search(r"\.(?:sp|ws)\b|\.kind::\w+\.block_scale", part):
        return None
    reg, offset = m.group(1), 0
    while len(defs := values.defs.get(reg, [])) == 1 and defs[0][1] in ("add.s32", "add.u32") and \
            int_literal(defs[0][2][1]) is not None:
        offset += int_literal(defs[0][2][1])        # type: ignore[operator]
        reg = defs[0][2][0]
    return reg, offset, ((idesc >> 17) & 0x3F) << 3, idesc


def _commit_wait_redundant(ptx: str, line: int) -> bool:
    """Whether the skipped wait at PTX line `line` (1-based) waits for the thread's own tcgen05.commit and orders
    nothing a later commit of the thread does not (see EQUIVALENT)."""
    codes = _codes(ptx)
    n = _cta_threads(ptx)
    site = line - 1
    waits = [p for p in statements(codes[site]) if re.match(r"^mbarrier\.(?:try|test)_wait", p)]
    values = _values(ptx, codes, line)
    mine = _mbarrier_addresses(values, waits[0]) if len(waits) == 1 and n else None
    reach = _reached_per_thread(values, n) if mine else None
    succ = _successors(codes, values.start, values.end)
    if not mine or reach is None or succ is None:
        return False
    waiters = {t for t in range(n) if site in reach[t]}
    commits = 0
    for i in range(values.start, values.end):
        for part in statements(codes[i]):
            if i == site or _mbarrier_operands(part) is None:
                continue
            used = _mbarrier_addresses(values, part)
            if used is None:
                return False
            if not used & mine or re.match(r"^mbarrier\.(?:init|inval)\b", part):
                continue
            if not part.startswith("tcgen05.commit") or {t for t in range(n) if i in reach[t]} != waiters:
                return False        # another completion mechanism, another waiter, or another thread's commit
            commits += 1
    if len(waiters) != 1 or not commits:
        return False
    # from the wait to the thread's next tcgen05.commit: only its spin, fences, instructions that touch no memory
    # and tcgen05.mma (the next commit tracks them with everything before)
    zone = _zone(codes, succ, succ[site], lambda p: p.startswith("tcgen05.commit"))
    issued = []
    for i in zone:
        for part in statements(codes[i]):
            if re.match(r"^(?:@!?%?\w+\s+)?(?:ret|exit|trap)\b", part):
                return False
            if _TCGEN05_MMA.match(part):
                issued.append(_accumulator(values, codes, part))
            elif (_touches_memory(re.sub(r"^@!?%?\w+\s+", "", part)) or re.match(r"^(?:bar|barrier)\.", part)) \
                    and i != site:
                return False
    if not issued or any(a is None for a in issued):
        return False
    # what the waited commits track can still run: the thread's other asynchronous tcgen05 operations; one writing
    # another accumulator must not overlap these columns, one writing the same one (same shape) is ordered by the ISA
    (waiter,) = waiters
    others = []
    for i in reach[waiter]:     # (the ones issued after it too: an earlier iteration's may still run)
        for part in statements(codes[i]):
            if re.match(r"^(?:@!?%?\w+\s+)?tcgen05\.(?:mma|cp|shift)\b", part):
                others.append(_accumulator(values, codes, part))
    for a in issued:
        for b in others:
            if b is None or a[0] != b[0]:
                return False
            same = a[1] == b[1] and a[3] == b[3]
            if not same and a[1] < b[1] + b[2] and b[1] < a[1] + a[2]:
                return False
    return True


_TMA_LOAD = re.compile(r"^(?:@!?%?\w+\s+)?cp\.async\.bulk\.tensor\.\dd\.shared::cta\.global\.tile\."
                       r"mbarrier::complete_tx")


def _users(values: Values, codes: list[str], address: int) -> Optional[list[tuple[int, str]]]:
    """(statement index, statement) of every use of the mbarrier at `address` (every mbarrier operand of the
    function evaluated, stage-indexed ones over all their stages); None where one is not evaluated."""
    out = []
    for i in range(values.start, values.end):
        for part in statements(codes[i]):
            if _mbarrier_operands(part) is None:
                continue
            used = _mbarrier_addresses(values, part)
            if used is None:
                return None
            if address in used:
                out.append((i, re.sub(r"^@!?%?\w+\s+", "", part)))
    return out


def _parity_zero(values: Values, part: str) -> bool:
    """Whether the wait `part` asks for parity 0 in every evaluation of its phase operand."""
    phase = (_mbarrier_operands(part) or ("", None))[1]
    if phase is None or ".parity" not in part:
        return False
    envs = values.envs(_REGISTER.findall(phase), residues=True)
    return bool(envs) and all(values.value(phase, env) == 0 for env in envs)


_TMA_STORE = re.compile(r"^(?:@!?%?\w+\s+)?cp\.(?:reduce\.)?async\.bulk\.tensor\.\dd\.global\.shared::cta\S*\s")


def _one_shot_load_handed_by_commit(ptx: str, line: int, boxes: Optional[dict[str, int]] = None) -> bool:
    """Whether the skipped wait at PTX line `line` (1-based) waits for a one-shot TMA load whose bytes the threads
    that reach it never access after it, and whose mbarrier's every invalidation follows a wait on a tcgen05.commit
    of a thread that waited for that load first (see EQUIVALENT)."""
    codes = _codes(ptx)
    site = line - 1
    walk = _per_thread_walk(ptx, codes, line)
    waits = [p for p in statements(codes[site]) if _MBARRIER_WAIT.match(p)]
    if walk is None or len(waits) != 1:
        return False
    n, values, succ, reach = walk
    mine = _mbarrier_addresses(values, waits[0])
    users = _users(values, codes, next(iter(mine))) if mine and len(mine) == 1 else None
    if users is None or not _parity_zero(values, waits[0]):
        return False
    loads, invals = [], []
    for i, part in users:
        if _TMA_LOAD.match(part):
            if i in _reachable(succ, succ.get(i, []), -1):
                return False        # issued again: not one-shot
            loads.append((i, part))
        elif part.startswith("mbarrier.inval"):
            invals.append(i)
        elif _MBARRIER_WAIT.match(part):
            if not _parity_zero(values, part):
                return False
        elif not part.startswith(("mbarrier.init", "mbarrier.arrive.expect_tx")):
            return False            # another completion mechanism or arrival
    if not loads:
        return False
    written = []
    for i, part in loads:           # the load's bytes (its expect_tx in its block, and its box, bound them)
        got = _accesses_of(values, part, {}, i)
        if got is None:
            return False
        brackets = re.findall(r"\[([^\]]+)\]", part)
        box = (boxes or {}).get(_tensor_map_of(values, brackets[1]) or "")
        written.append((0, ("shared", got[0][1], min(got[0][2], got[0][1] + box) if box else got[0][2], True)))
    takers = {t: reach[t] & _reachable(succ, succ.get(site, []), -1) for t in range(n) if site in reach[t]}
    after = set().union(*takers.values()) if takers else set()
    stores = {i for i in after if any(_TMA_STORE.match(p) for p in statements(codes[i]))}
    accesses = _thread_accesses(values, after - stores, takers)
    for i in stores:                # a TMA store reads one box of its tensor map from its shared operand
        for part in statements(codes[i]):
            brackets = re.findall(r"\[([^\]]+)\]", part)
            box = (boxes or {}).get(_tensor_map_of(values, brackets[0]) or "") if len(brackets) == 2 else None
            for t in (t for t, r in takers.items() if i in r):
                got = _shared_range(values, brackets[-1], box, {"%tid.x": t}) if box and accesses is not None \
                    else None
                if got is None:
                    return False
                accesses.append((t, ("shared", got[0], got[1], False)))
    if accesses is None or _conflict(accesses, written, same_thread=True):
        return False
    for i in invals:                # each invalidation: after a wait on the commit of a thread that waited
        firsts = _first_waits_before(codes, succ, i)
        if not firsts or not all(_commit_after_wait(ptx, values, codes, succ, w, next(iter(mine)), site)
                                 for w in firsts):
            return False
    return True


def _first_waits_before(codes: list[str], succ: dict[int, list[int]], i: int) -> Optional[set[int]]:
    """The mbarrier waits that every path into statement index `i`, walked back, meets first (None: one reaches
    the entry without)."""
    preds = _predecessors(succ)
    found: set[int] = set()
    todo, seen = list(preds.get(i, [])), set()
    while todo:
        j = todo.pop()
        if j in seen:
            continue
        seen.add(j)
        if any(_MBARRIER_WAIT.match(p) for p in statements(codes[j])):
            found.add(j)
            continue
        if not preds.get(j):
            return None
        todo.extend(preds[j])
    return found


def _commit_after_wait(ptx: str, values: Values, codes: list[str], succ: dict[int, list[int]], w: int,
                       load_barrier: int, skipped: int) -> bool:
    """Whether the wait at statement index `w` waits, for parity 0, on an mbarrier whose only arrival is one
    tcgen05.commit that runs once and that every path into meets a wait on the mbarrier at `load_barrier` first
    (another than the one at statement index `skipped`)."""
    part = next(p for p in statements(codes[w]) if _MBARRIER_WAIT.match(p))
    addresses = _mbarrier_addresses(values, part)
    users = _users(values, codes, next(iter(addresses))) if addresses and len(addresses) == 1 else None
    if users is None or not _parity_zero(values, part):
        return False
    commits = [i for i, p in users if p.startswith("tcgen05.commit")]
    others = [p for i, p in users if not p.startswith(("tcgen05.commit", "mbarrier.init", "mbarrier.inval"))
              and not _MBARRIER_WAIT.match(p)]
    if len(commits) != 1 or others or commits[0] in _reachable(succ, succ.get(commits[0], []), -1):
        return False
    waits = {i for i in range(values.start, values.end) if i != skipped and any(
        _MBARRIER_WAIT.match(p) and _mbarrier_addresses(values, p) == {load_barrier} for p in statements(codes[i]))}
    preds = _predecessors(succ)
    todo, seen = list(preds.get(commits[0], [])), set()
    while todo:                     # every path into the commit, walked back, meets one of those waits
        j = todo.pop()
        if j in seen or j in waits:
            continue
        seen.add(j)
        if not preds.get(j):
            return False
        todo.extend(preds[j])
    return bool(preds.get(commits[0]))


# tcgen05 instructions that may touch any lane of tensor memory (tcgen05.ld/st reach only the executing warp's
# quarter of the lanes, warp w's lanes 32 (w % 4) .. 32 (w % 4) + 31: PTX ISA, tcgen05 data-movement shapes)
_ANY_LANE = re.compile(r"^(?:@!?%?\w+\s+)?tcgen05\.(?:mma|cp|shift|alloc|dealloc)\b")
_MBARRIER_WAIT = re.compile(r"^(?:@!?%?\w+\s+)?mbarrier\.(?:try|test)_wait")


def _after_sync_handed_by_mbarrier(ptx: str, line: int) -> bool:
    """Whether every path into the tcgen05.fence::after_thread_sync at PTX line `line` (1-based) meets an mbarrier
    wait before any tcgen05 instruction it orders (_NEEDS_AFTER_SYNC) or the entry, the barriers it passes on the
    way handing over no tensor-memory work: each one's participants lie in distinct lane quarters (warps w % 4
    distinct), or those of one quarter in distinct lanes (`_warps_apart`), and on no path into any barrier of its id (or the whole CTA's) since the previous barrier or
    mbarrier wait does one of them issue a tcgen05 instruction that can touch another warp's lanes (_ANY_LANE)."""
    codes = _codes(ptx)
    n = _cta_threads(ptx)
    values = _values(ptx, codes, line)
    succ = _successors(codes, values.start, values.end)
    if not n or succ is None or not _every_path_into_meets(
            ptx, line, lambda p: bool(_MBARRIER_WAIT.match(p)), lambda p: bool(_NEEDS_AFTER_SYNC.match(p)),
            entry_meets=False):
        return False
    preds = _predecessors(succ)
    passed = _zone(codes, preds, preds.get(line - 1, []), lambda p: bool(_MBARRIER_WAIT.match(p)))
    barriers = {b.group(1) for i in passed for p in statements(codes[i]) if (b := _BARRIER_ID.match(p))}
    if not barriers:
        return True
    reach = _reached_per_thread(values, n)
    if reach is None:
        return False
    for ident in barriers:      # (barriers pair by id: every instance of it counts)
        sites = [i for i in range(values.start, values.end) for p in statements(codes[i])
                 if (b := _BARRIER_ID.match(p)) and b.group(1) == ident]
        takers = {t for t in range(n) if any(i in reach[t] for i in sites)}
        if len({t // 32 % 4 for t in takers}) != len({t // 32 for t in takers}) and not _warps_apart(
                codes, values, reach, {t // 32 for t in takers}):
            return False        # two warps of one lane quarter meet there, and their lanes may overlap
        for i in sites:
            zone = _zone(codes, preds, preds.get(i, []),
                         lambda p: bool(_MBARRIER_WAIT.match(p) or _BARRIER_ID.match(p)))
            if any(_ANY_LANE.match(p) for j in zone for p in statements(codes[j])):
                return False
    return True


# tcgen05.ld / st shapes: (lanes a warp accesses, 32-bit columns per repetition .xN)
_TMEM_SHAPES = {"32x32b": (32, 1), "16x64b": (16, 2), "16x128b": (16, 4), "16x256b": (16, 8)}
_TMEM_LD_ST = re.compile(r"^(?:@!?%?\w+\s+)?tcgen05\.(?:ld|st)\.sync\.aligned\.(\w+)\.x(\d+)\S*\s+(.*)$")


def _warps_apart(codes: list[str], values: Values, reach: dict[int, set[int]], warps: set[int]) -> bool:
    """Whether every two of `warps` that share a lane quarter access disjoint tensor-memory lanes in every
    tcgen05.ld and tcgen05.st of the function each can reach: addresses evaluated for the warp's first thread
    (they are warp-uniform), the tensor-memory address its tcgen05.alloc wrote to shared memory and a thread loaded
    back taken as lane 0 (an allocation starts at lane 0: only its column varies), the lanes of each shape from
    the PTX ISA's tcgen05 data-movement shapes (32x32b: 32 lanes, 16x64b / 16x128b / 16x256b: 16)."""
    slots, base = set(), {}
    for i in range(values.start, values.end):
        for part in statements(codes[i]):
            m = re.search(r"tcgen05\.alloc\S*\s+\[([^\]]+)\]", part)
            r = _shared_range(values, m.group(1), 4, {}) if m else None
            if m and r is None:
                return False
            if r is not None:
                slots.add(r[0])
    for i in range(values.start, values.end):
        for part in statements(codes[i]):
            m = re.match(r"^ld(?:\.volatile)?\.shared(?:::cta)?\.[bu]32\s+(%\w+)\s*,\s*\[([^\]]+)\]$", part)
            r = _shared_range(values, m.group(2), 4, {}) if m else None
            if r is not None and r[0] in slots:
                base[m.group(1)] = 0
    if not slots or not base:
        return False
    lanes: dict[int, list[tuple[int, int]]] = {w: [] for w in warps}
    for i in range(values.start, values.end):
        for part in statements(codes[i]):
            m = _TMEM_LD_ST.match(part)
            if m is None:
                continue
            shape = _TMEM_SHAPES.get(m.group(1))
            address = re.findall(r"\[([^\]]+)\]", m.group(3))
            if shape is None or len(address) != 1:
                return False
            envs = _stage_envs(values, _REGISTER.findall(address[0]), set(base))
            if envs is None:
                return False
            for w in warps:
                if i not in reach[32 * w]:
                    continue
                for env in envs:
                    r = _shared_range(values, address[0], 0, {**env, **base, "%tid.x": 32 * w})
                    if r is None:
                        return False
                    lanes[w].append((r[0] >> 16, (r[0] >> 16) + shape[0]))
    for a in warps:
        for b in warps:
            if a < b and a % 4 == b % 4 and any(lo < hi2 and lo2 < hi for lo, hi in lanes[a] for lo2, hi2 in lanes[b]):
                return False
    return True


def _stage_envs(values: Values, regs: list[str], given: set[str]) -> Optional[list[dict[str, int]]]:
    """Every combination of the loop counters' and residues' (x mod d: a stage index) values that `regs` depend on,
    the registers `given` (and %tid.x) taken as known; None where a register on the way is defined twice, or there
    are too many combinations."""
    names, todo, seen = [], list(regs), set(given)
    while todo:
        reg = todo.pop()
        if reg in seen or not reg.startswith("%r") and not reg.startswith("%rd"):
            continue
        seen.add(reg)
        if reg in values.counters or reg in values.residues:
            names.append(reg)
            continue
        defs = values.defs.get(reg, [])
        if len(defs) != 1:
            return None
        todo.extend(r for a in defs[0][2] for r in _REGISTER.findall(a))
    ranges = [values.counters[n][0] if n in values.counters else range(values.residues[n]) for n in names]
    if math.prod(len(r) for r in ranges) > 256:
        return None
    return [dict(zip(names, combo)) for combo in itertools.product(*ranges)]


# Mutants the emulator's model treats as equivalent where the ISA leaves room: deleting a
# tcgen05.fence::after_thread_sync that follows an mbarrier wait. NVIDIA's own PTX hands tensor memory
# over through mbarriers (tcgen05.commit -> wait -> tcgen05.ld, tcgen05.ld -> arrive -> wait ->
# tcgen05.mma) with no tcgen05 fence, and runs clean here only because the emulator orders such
# handoffs without one (happens_before.py); listed apart, not counted.
# (operator, the synchronization next to the site, whether it is the last before the site (else the first after),
# why)
MODELLED = (
    ("delete tcgen05.fence::after_thread_sync", "mbarrier.try_wait", True,
     "after an mbarrier wait: NVIDIA's PTX orders tensor memory through mbarriers without tcgen05 fences"),
    ("delete tcgen05.fence::before_thread_sync", "mbarrier.arrive", False,
     "before an mbarrier arrival: NVIDIA's PTX hands tensor memory over through mbarrier arrivals without tcgen05 "
     "fences (its sm_100 flash attention: tcgen05.st; tcgen05.wait::st; mbarrier.arrive, the emulator's "
     "happens_before publishing a warp's completed tcgen05.ld/st at its arrival)"),
)
MODELLED_PAST_BARRIERS = (
    "after an mbarrier wait, with only barriers between that hand over no tensor-memory work (each one's "
    "participants in distinct lane quarters, or, two warps of one quarter, in lanes their tcgen05.ld and st "
    "addresses keep apart (evaluated per warp, _warps_apart); none issuing an mma, cp, shift, alloc or dealloc "
    "before it since its previous synchronization, _after_sync_handed_by_mbarrier): what the fence orders is the "
    "mbarrier's handoff, which NVIDIA's PTX makes without tcgen05 fences")
# tcgen05.ld's registers are usable at once in the emulator too (NVIDIA's PTX computes on them before its
# tcgen05.wait::ld): deleting a wait::ld is reported where the tensor memory it reads can be written or handed
# over before the thread's next wait (the race checker's cells stay in flight until then), equivalent otherwise.


@dataclass
class Case:
    """One configuration compiled for one target, with what its runs are compared against."""

    name: str
    gpu: str
    small: Any
    req: Any
    ptx: str
    meta: Any
    ref: tuple
    aliased: list = field(default_factory=list)     # its AliasedLaunch runs (IN_PLACE, OVERLAPPING)
    reshaped: list = field(default_factory=list)    # its Reshaped runs (RESHAPED)


STEPS = 8      # K steps per CTA of the matmuls' mutation launches: more than their pipelines have stages


def launch(name: str, steps: int = STEPS) -> Any:
    """The launch of configuration `name`: tests/realistic's small one, except that a matmul (batched or
    split-K too) runs `steps` K steps per CTA (more than its pipeline has stages, so that stages are refilled
    and their releases matter) on 2 x 2 output tiles (4 CTAs in flight, times the splits of a split-K): M and N
    tile coordinates both differ from 0 somewhere, so that swapping a TMA copy's coordinates shows (with one M
    tile an A load's {k, m} = {0, 0} of the first K step swaps to itself), a row
    reduction `steps` column chunks on each of 2 row blocks, and an attention `steps` key blocks."""
    import test_realistic_emulator as tre

    config = tre.CONFIGS[name]
    small = tre._launch(name, "small")
    consts = {c.name for c in config.params if isinstance(c, tre.configs.Const)}
    if config.kernel in ("row_sum", "row_max"):     # `steps` column chunks a row block, 2 row blocks
        tm, tn = (tre.configs._const(config, k) for k in ("TM", "TN"))
        return tre.configs._with_shapes(config, {"x": (2 * tm, steps * tn), "y": (2 * tm,)}, (2, 1, 1))
    if config.kernel == "attention_fwd":     # `steps` key blocks: the last query block runs through all of them
        bq, bk, d = (tre.configs._const(config, k) for k in ("BQ", "BK", "D"))
        seq = max(bq, steps * bk)
        shape = (16, seq, d)        # 16 heads (the head stride is assumed 16-divisible), the first one's blocks run
        return tre.configs._with_shapes(config, {"q": shape, "k": shape, "v": shape, "o": shape}, (seq // bq, 1, 1))
    if not {"TM", "TN", "TK"} <= consts:
        return small
    tm, tn, tk = (tre.configs._const(config, k) for k in ("TM", "TN", "TK"))
    k = steps * tk
    if config.kernel == "matmul":
        return tre.configs._with_shapes(config, {"a": (2 * tm, k), "b": (k, 2 * tn), "c": (2 * tm, 2 * tn)},
                                        (4, 1, 1))
    if config.kernel == "bmm":
        z = 16      # the batch stride is assumed 16-divisible: 16 batches, the first one's 4 tiles run
        return tre.configs._with_shapes(config, {"a": (z, 2 * tm, k), "b": (z, k, 2 * tn),
                                                 "c": (z, 2 * tm, 2 * tn)}, (2, 2, 1))
    if config.kernel == "splitk_matmul":
        split = tre.configs._const(config, "SPLIT")
        return tre.configs._with_shapes(config, {"a": (2 * tm, split * k), "b": (split * k, 2 * tn),
                                                 "partial": (split, 2 * tm, 2 * tn)}, (2, 2, split))
    return small


# Inputs offset per kernel: a normalization's rows centred on 0, all alike, hide a wrong chunk (zeros, or another
# row's) in the mean and variance, which move by less than an f16 output's tolerance; rows centred on 2, row r
# spread r + 1 times as wide, make both count.
OFFSET_INPUTS = {"layernorm": ("x", 2.0), "layernorm_chunked": ("x", 2.0)}


def arguments(config: Any) -> list:
    """The mutation launch's inputs: tests/test_realistic_emulator.py's random ones, offset per OFFSET_INPUTS."""
    import numpy as np
    import test_realistic_emulator as tre

    args = tre._arguments(config)
    name, offset = OFFSET_INPUTS.get(tre.CONFIGS[config.name].kernel, ("", 0.0))
    arrays = [p for p in config.params if isinstance(p, (tre.configs.Arr, tre.configs.Scalar))]
    spread = lambda a: a * (1 + np.arange(a.shape[0], dtype=a.dtype))[:, None] if a.ndim == 2 else a  # noqa: E731
    return [spread(a) + a.dtype.type(offset) if p.name == name else a for p, a in zip(arrays, args)]


def prepare(name: str, gpu: str) -> Optional[Case]:
    import test_realistic_emulator as tre

    from tileiras.runtime import run_arrays
    from tileiras.runtime.backends import RunRequest, compile_module

    if gpu not in tre.CONFIGS[name].targets:
        return None
    module, source = tre._module(name)
    steps = STEPS
    for _ in range(2):      # (the PTX does not depend on the launch: the second compile is a cache hit)
        small = launch(name, steps)
        req = RunRequest(module, source, f"{name}.tileirbc", name, tuple((list(small.grid) + [1, 1])[:3]), None,
                         gpu, io.StringIO(), check_races=True)
        ptx, meta = compile_module(req, "ptx", gpu)
        ring = ptx.decode().count("mbarrier.init") // 2     # at most this many stages: a full and an empty each
        if ring < steps:
            break
        steps = ring + 2        # a deeper ring than STEPS: refill every stage of it
    ref = tuple(run_arrays(module, name, small.grid, arguments(small), backend="interpreter"))
    reshaped = [r for r in _reshaped_launches(module, name) if _tensor_maps_valid(req, meta, r.small)]
    return Case(name, gpu, small, req, ptx.decode(), meta, ref, _aliased_launches(module, name, small, ref),
                reshaped)


@dataclass
class AliasedLaunch:
    """A launch of the small one's arguments where the output's memory is shared: with input `alias` (its memory,
    in place), or by its own elements (`strides`: a view of the output whose tiles overlap). `expected`: that
    memory after the run."""
    label: str
    out: int                    # the output's position among the passed arguments
    alias: Optional[int]        # the input whose memory it is passed as
    strides: Optional[tuple]    # the output view's strides (elements) instead of its array's
    expected: Any


# In-place launches: kernel -> (output, input) of the same shape and dtype that a program reads only in the tiles
# it writes, and before it writes them, so that passing one array as both computes what the out-of-place run does
# (from the input's original values). Our compiler orders a store after the loads of a view that may share its
# memory where it cannot prove otherwise (transforms/alias.py, DISJOINT_IF_SEPARATE).
IN_PLACE: dict[str, tuple[str, str]] = {"rope": ("y", "x"), "swiglu": ("out", "gate"), "vector_add": ("c", "a")}
# Overlapping output views: kernel -> (output, dimension, divisor, chunks): the output's stride of `dimension`
# divided by `divisor`, so that the tiles a program stores one after the other along the last dimension (in
# `chunks` equal parts, in that order) overlap, though each tile's elements stay distinct; programs' tiles stay
# apart. Our compiler orders two stores of one partition's tiles only where the runtime strides say the view is
# not injective (transforms/alias.py, DISJOINT_IF_INJECTIVE): no launch of a contiguous array reaches that guard.
# Rope stores the two halves of D: with the heads' stride halved, head h's second half lands on head h + 1's
# first, which program order says it overwrites.
OVERLAPPING: dict[str, tuple[str, int, int, int]] = {"rope": ("y", 1, 2, 2)}


def _written(module: Any, name: str, small: Any, ref: tuple, out: int) -> Any:
    """Which elements of output `out` the (small) launch writes (a capped grid leaves some tiles unwritten): where
    a second reference run, the output initialized to the first one's bytes inverted, agrees with the first."""
    import numpy as np

    from tileiras.runtime import run_arrays

    args = arguments(small)
    first = np.asarray(args[out])
    args[out] = (~first.view(np.uint8)).view(first.dtype).reshape(first.shape)
    again = np.asarray(run_arrays(module, name, small.grid, args, backend="interpreter")[out])
    done = np.asarray(ref[out])
    width = done.dtype.itemsize
    return (done.view(np.uint8).reshape(-1, width) == again.view(np.uint8).reshape(-1, width)).all(axis=1) \
        .reshape(done.shape)


def _aliased_launches(module: Any, name: str, small: Any, ref: tuple) -> list[AliasedLaunch]:
    import numpy as np
    import test_realistic_emulator as tre

    kernel = tre.CONFIGS[name].kernel
    passed = [p for p in small.params if not isinstance(p, tre.configs.Const)]
    pos = {p.name: i for i, p in enumerate(passed)}
    launches = []
    written = None
    if kernel in IN_PLACE:
        out, src = (pos[n] for n in IN_PLACE[kernel])
        assert passed[out].shape == passed[src].shape and passed[out].dtype == passed[src].dtype
        written = _written(module, name, small, ref, out)
        expected = np.where(written, np.asarray(ref[out]), np.asarray(arguments(small)[src]))
        launches.append(AliasedLaunch("in place", out, src, None, expected))
    if kernel in OVERLAPPING:
        oname, dim, divisor, chunks = OVERLAPPING[kernel]
        out = pos[oname]
        if written is None or launches[0].out != out:
            written = _written(module, name, small, ref, out)
        shape = passed[out].shape
        strides = list(passed[out].strides)
        assert strides[dim] % divisor == 0
        strides[dim] //= divisor
        done = np.asarray(ref[out])
        image = np.asarray(arguments(small)[out]).ravel().copy()
        at = sum(np.arange(n).reshape([-1 if d == k else 1 for d in range(len(shape))]) * st
                 for k, (n, st) in enumerate(zip(shape, strides)))
        part = np.arange(shape[-1]) // (shape[-1] // chunks)
        for c in range(chunks):     # the tiles in program order: later ones overwrite
            sel = written & (part == c)
            image[at[sel]] = done[sel]
        launches.append(AliasedLaunch("overlapping output view", out, None, tuple(strides),
                                      image.reshape(shape)))
    return launches


@dataclass
class Reshaped:
    """A launch of the kernel with other shapes than the small one's (`small`), and the interpreter's results."""
    label: str
    small: Any
    ref: tuple


def _no_keys(config: Any) -> Any:
    """Attention over an empty key sequence: the key loop runs no iteration (a decode step's empty cache), so
    whatever the loop's first wait or barrier orders (Q's copy before its staging is reused by O) must be ordered
    after the loop too."""
    import test_realistic_emulator as tre

    bq, d = (tre.configs._const(config, k) for k in ("BQ", "D"))
    q, kv = (16, 2 * bq, d), (16, 0, d)
    return tre.configs._with_shapes(config, {"q": q, "k": kv, "v": kv, "o": q}, (2, 1, 1))


# Reshaped launches: kernel -> (label, the launch's config from the realistic one): shapes that take a path no
# launch of the small shapes takes, such as a loop that runs no iteration.
RESHAPED: dict[str, tuple[str, Callable[[Any], Any]]] = {"attention_fwd": ("no keys", _no_keys)}


def _reshaped_launches(module: Any, name: str) -> list[Reshaped]:
    import test_realistic_emulator as tre

    from tileiras.runtime import run_arrays

    config = tre.CONFIGS[name]
    if config.kernel not in RESHAPED:
        return []
    label, shaped = RESHAPED[config.kernel]
    small = shaped(config)
    return [Reshaped(label, small, tuple(run_arrays(module, name, small.grid, arguments(small),
                                                     backend="interpreter")))]


def _bind(req: Any, small: Any) -> Any:
    """Launch `small`'s arguments bound to the parameters of the kernel `req` compiles."""
    from tileiras.ir.types import FunctionType
    from tileiras.runtime.marshal import bind

    entry = next(op for op in req.module.regions[0].block.operations
                 if op.name == "cuda_tile.entry" and op.attributes.get("sym_name") == req.kernel)
    ftype = entry.attributes["function_type"]
    assert isinstance(ftype, FunctionType)
    return bind(req.kernel, list(ftype.inputs), arguments(small))


def _tensor_maps_valid(req: Any, meta: Any, small: Any) -> bool:
    """Whether launch `small`'s arguments make the tensor maps of the compile `meta` (on hardware, encoding a map
    of an empty dimension fails before any launch: a kernel that loads K by TMA cannot run without keys)."""
    from tileiras.emulator import Memory
    from tileiras.errors import TileirasError
    from tileiras.runtime.backends import kernel_info, tma_hidden_params

    try:
        tma_hidden_params(kernel_info(meta, req.kernel), _bind(req, small).upload(Memory()))
    except TileirasError:
        return False
    return True


def _compare(small: Any, got: list, ref: tuple, bounds: dict) -> Optional[str]:
    """The first output of launch `small` that differs from the interpreter's, as `tre._mismatch` reports it
    (`bounds`: the launch's `tre.accumulations`)."""
    import numpy as np
    import test_realistic_emulator as tre

    passed = [p for p in small.params if not isinstance(p, tre.configs.Const)]
    for p, g, r in zip(passed, got, ref):
        if isinstance(p, tre.configs.Arr):
            report = tre._mismatch(p.name, p.dtype, p.output, np.asarray(g), np.asarray(r), bounds.get(p.name))
            if report:
                return "mismatch: " + report.splitlines()[0]
    return None


def _run_aliased(req: Any, ptx: str, meta: Any, launch: AliasedLaunch) -> Any:
    """`run_compiled` with the output's memory shared as `launch` says: that memory after the run."""
    from tileiras.emulator import Memory, run_ptx
    from tileiras.runtime.backends import kernel_info, tma_hidden_params

    info = kernel_info(meta, req.kernel)
    memory = Memory()
    params = req.binding.upload(memory)
    arrays = {a.position: a for a in req.binding.array_args}
    out = arrays[launch.out]
    if launch.alias is not None:
        params[out.first_param] = arrays[launch.alias].address
    if launch.strides is not None:
        ndim = len(launch.strides)
        params[out.first_param + 1 + ndim:out.first_param + 1 + 2 * ndim] = list(launch.strides)
    params = [*params, *tma_hidden_params(info, params)]
    run_ptx(ptx, req.kernel, req.grid, tuple(info.block), params, memory, dynamic_smem=int(info.dynamic_smem),
            stdout=req.stdout, check_races=req.check_races, max_warp_instructions=LIMIT)
    return req.binding.download(memory)[launch.out if launch.alias is None else launch.alias]


def outcome(case: Case, ptx: str, extra: bool = True) -> Optional[str]:
    """None when the PTX runs clean and matches the interpreter, else what reported it; `extra`: the launches
    beyond the small one too, where its kernel has them (IN_PLACE, OVERLAPPING, RESHAPED)."""
    import numpy as np
    import test_realistic_emulator as tre

    from tileiras.errors import TileirasError
    from tileiras.runtime.backends import run_compiled

    bounds: dict[int, dict] = {}

    def bounds_of(small: Any) -> dict:      # once per launch: an attention's are a numpy pass over every head
        if id(small) not in bounds:
            bounds[id(small)] = tre.accumulations(small, arguments(small), case.gpu)
        return bounds[id(small)]

    def small_run() -> Any:
        return run_compiled(replace(case.req, binding=_bind(case.req, case.small)), ptx, case.meta, LIMIT)

    def reshaped_run(r: Reshaped) -> Any:
        grid = tuple((list(r.small.grid) + [1, 1])[:3])
        return run_compiled(replace(case.req, binding=_bind(case.req, r.small), grid=grid), ptx, case.meta, LIMIT)

    def aliased_check(a: AliasedLaunch, got: Any) -> Optional[str]:
        p = [p for p in case.small.params if not isinstance(p, tre.configs.Const)][a.out]
        report = tre._mismatch(p.name, p.dtype, True, np.asarray(got), a.expected, bounds_of(case.small).get(p.name))
        return report and "mismatch: " + report.splitlines()[0]

    # (label, run, check of its results)
    runs: list[tuple[str, Callable[[], Any], Callable[[Any], Optional[str]]]] = [
        ("", small_run, lambda got: _compare(case.small, got, case.ref, bounds_of(case.small)))]
    if extra:
        runs += [(f"{r.label}: ", lambda r=r: reshaped_run(r),
                  lambda got, r=r: _compare(r.small, got, r.ref, bounds_of(r.small))) for r in case.reshaped]
        runs += [(f"{a.label}: ", lambda a=a: _run_aliased(replace(case.req, binding=_bind(case.req, case.small)),
                                                           ptx, case.meta, a),
                  lambda got, a=a: aliased_check(a, got)) for a in case.aliased]
    for label, run, check in runs:
        try:
            got = run()
        except TileirasError as err:
            return label + err.message.splitlines()[0]
        except Exception as err:    # noqa: BLE001 - a crash of the emulator is a finding too, not a survivor
            return f"{label}emulator crash: {type(err).__name__}: {err}"
        report = check(got)
        if report:
            return label + report
    return None


def equivalent(op: Operator, what: str, case: Case, line: int = 0) -> Optional[str]:
    for name, rx, holds, why in EQUIVALENT:
        if name == op.name and re.search(rx, what) and holds(case.ptx, line):
            return why
    for name, rx, holds, why in EQUIVALENT_FOR_LAUNCH:
        if name == op.name and re.search(rx, what) and holds(case, line):
            return why
    lines = case.ptx.split("\n")
    before, after = "\n".join(lines[max(0, line - 12):line - 1]), "\n".join(lines[line:line + 12])
    if op.name == "delete tcgen05.fence::after_thread_sync" and _after_sync_handed_by_mbarrier(case.ptx, line):
        return MODELLED_PAST_BARRIERS
    for name, sync, last, why in MODELLED:     # the nearest synchronization on that side of the site is `sync`
        if name == op.name:
            arrive = "" if last else r"|mbarrier\.arrive"      # (an arrival releases: it acquires nothing)
            syncs = re.findall(rf"(mbarrier\.try_wait{arrive}|bar\.sync|barrier\.sync)", before if last else after)
            if syncs and syncs[-1 if last else 0] == sync:
                return why
    return None


@dataclass
class Result:
    case: str
    operator: Operator
    line: int
    what: str
    verdict: str        # "reported", "survived", "equivalent"
    why: str


def score(cases: list[Case], per_operator: int, seed: int, log: Any = None,
          unclean: Optional[list[str]] = None, sink: Optional[Callable[[dict], None]] = None,
          known: Optional[dict] = None) -> list[Result]:
    """The verdict on each mutant of `cases`. A case whose unmutated PTX does not run clean is not scored: with
    `unclean`, it is listed there; without, it stops the run. `sink` gets each verdict (and each unclean case)
    as a JSON-able record as soon as it is known (`record`); `known` (`_key` -> Result) holds verdicts of an
    earlier run, returned as they are and not run again (a shard resumed)."""
    results: list[Result] = []
    if sink is not None:
        results = _Sunk(sink)
    known = known or {}
    for case in cases:
        rng = random.Random(f"{seed}:{case.name}:{case.gpu}")    # a case's sample, whatever runs before it (shards)
        base = outcome(case, case.ptx)
        if base is not None:
            why = f"{case.name} on {case.gpu}: the unmutated PTX does not run clean: {base}"
            if unclean is None:
                raise SystemExit(why)
            unclean.append(why)
            if sink is not None:
                sink({"unclean": why})
            continue
        for op in CATALOGUE:
            mutants = op.mutants(case.ptx)
            if per_operator and len(mutants) > per_operator:
                mutants = rng.sample(mutants, per_operator)
            for line, what, ptx in mutants:
                label = f"{case.name}-{case.gpu}"
                if (label, op.name, line, what) in known:
                    list.append(results, known[label, op.name, line, what])   # (already in the sink's file)
                    continue
                why = equivalent(op, what, case, line)
                if why is not None:
                    results.append(Result(label, op, line, what, "equivalent", why))
                    if log is not None:
                        print(f"  {label} line {line} [{op.name}] equivalent: {what[:90]}", file=log, flush=True)
                    continue
                reported = outcome(case, ptx)
                results.append(Result(label, op, line, what, "survived" if reported is None else "reported",
                                      reported or ""))
                if log is not None:
                    print(f"  {label} line {line} [{op.name}] {results[-1].verdict}: {what[:90]}"
                          + (f" -- {reported[:150]}" if reported else ""), file=log, flush=True)
    return results


class _Sunk(list):
    """The results list of `score`, passing each verdict on to a sink as it is appended."""

    def __init__(self, sink: Callable[[dict], None]) -> None:
        super().__init__()
        self.sink = sink

    def append(self, r: Result) -> None:  # type: ignore[override]
        super().append(r)
        self.sink(record(r))


def record(r: Result) -> dict:
    return {"case": r.case, "operator": r.operator.name, "line": r.line, "what": r.what, "verdict": r.verdict,
            "why": r.why}


def from_record(d: dict) -> Result:
    op = next((o for o in CATALOGUE if o.name == d["operator"]), None)
    if op is None:
        raise SystemExit(f"--report: no operator '{d['operator']}' in the catalogue (a record of another version?)")
    return Result(d["case"], op, d["line"], d["what"], d["verdict"], d["why"])


def summary(results: list[Result]) -> str:
    families: dict[str, list[Result]] = {}
    for r in results:
        families.setdefault(r.operator.family, []).append(r)
    rows = [f"{'family':16} {'mutants':>8} {'reported':>9} {'survived':>9} {'equivalent':>11}"]
    for fam, rs in families.items():
        count = {v: sum(r.verdict == v for r in rs) for v in ("reported", "survived", "equivalent")}
        rows.append(f"{fam:16} {len(rs):8} {count['reported']:9} {count['survived']:9} {count['equivalent']:11}")
    counted = [r for r in results if r.verdict != "equivalent"]
    reported = sum(r.verdict == "reported" for r in counted)
    share = reported / len(counted) if counted else 1.0
    rows.append(f"mutation score: {reported}/{len(counted)} reported ({share:.1%}); "
                f"{len(results) - len(counted)} equivalent, not counted")
    for r in results:
        if r.verdict == "survived":
            rows.append(f"  survivor: {r.case} line {r.line} [{r.operator.name}] {r.what}")
    for r in results:
        if r.verdict == "equivalent":
            rows.append(f"  equivalent: {r.case} line {r.line} [{r.operator.name}] {r.what}: {r.why}")
    return "\n".join(rows)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--all", action="store_true", help="every mutant of every realistic configuration")
    p.add_argument("--configs", help="comma-separated configuration names (tests/realistic)")
    p.add_argument("--targets", default=",".join(TARGETS))
    p.add_argument("--per-operator", type=int, default=1, help="mutants per operator and case (0: all)")
    p.add_argument("--seed", type=int, default=36)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--shard", help="I/N: only the I-th of N shares of the kernel-target pairs (1-based)")
    p.add_argument("--json", help="append every verdict to this file as a JSON line, as it is known")
    p.add_argument("--report", nargs="+", metavar="JSONL", help="score the verdicts of earlier --json runs")
    opts = p.parse_args(argv)
    if opts.report:
        return _report(opts.report)
    import test_realistic_emulator as tre

    names = list(tre.CONFIGS) if opts.all else (opts.configs.split(",") if opts.configs else list(DEFAULT_CONFIGS))
    per = 0 if opts.all else opts.per_operator
    pairs = [(n, g) for n in names for g in opts.targets.split(",")]
    if opts.shard:
        match = re.fullmatch(r"(\d+)/(\d+)", opts.shard)
        if match is None or not 1 <= int(match[1]) <= int(match[2]):
            p.error(f"--shard {opts.shard}: expected I/N with 1 <= I <= N")
        i, n_shards = int(match[1]), int(match[2])
        pairs = pairs[i - 1::n_shards]
    sink: Optional[Callable[[dict], None]] = None
    known: dict = {}
    if opts.json:
        if Path(opts.json).exists():    # resumed: the verdicts written so far are not run again
            known = _read([opts.json])[0]
        out = open(opts.json, "a", encoding="utf-8")

        def write(d: dict) -> None:
            out.write(json.dumps(d) + "\n")
            out.flush()
        sink = write
    start = time.perf_counter()
    cases = []
    for n, g in pairs:
        try:
            case = prepare(n, g)
        except Exception as err:    # noqa: BLE001 - one configuration that cannot run does not stop the rest
            print(f"{n} on {g}: not run: {type(err).__name__}: {str(err).splitlines()[0]}", file=sys.stderr)
            continue
        if case is not None:
            cases.append(case)
    unclean: list[str] = []
    results = score(cases, per, opts.seed, None if opts.quiet else sys.stderr, unclean, sink, known)
    print(summary(results))
    for why in unclean:
        print(f"  not scored: {why}")
    print(f"({len(cases)} kernels, {time.perf_counter() - start:.0f} s)")
    return 0


def _read(paths: list[str]) -> tuple[dict[tuple, Result], list[str]]:
    """The verdicts in `paths` (JSON lines of --json runs) by mutant (a mutant seen twice counts once), and the
    cases not scored."""
    seen: dict[tuple, Result] = {}
    unclean: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if not line.strip():
                    continue
                d = json.loads(line)
                if "unclean" in d:
                    unclean.append(d["unclean"])
                    continue
                seen[(d["case"], d["operator"], d["line"], d["what"])] = from_record(d)
    return seen, unclean


def _report(paths: list[str]) -> int:
    """The summary of the verdicts in `paths` (JSON lines of --json runs)."""
    seen, unclean = _read(paths)
    results = list(seen.values())
    print(summary(results))
    for why in dict.fromkeys(unclean):
        print(f"  not scored: {why}")
    print(f"({len({r.case for r in results})} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
