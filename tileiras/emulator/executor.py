"""Run a decoded kernel: CTA state, the thread-group scheduler, and `run_ptx`.

Execution model
---------------
All threads of a CTA execute together as numpy vectors. Threads that share a
program counter form a *group*; the scheduler always runs the runnable group
with the lowest pc ("min-pc" scheduling), so after a divergent branch the
side that is behind catches up and the groups merge again when their pcs
meet - for the structured code LLVM emits that is the immediate
post-dominator. A group runs until its pc passes another group's, it
diverges, or it blocks:

* at `bar.sync`/`barrier.sync`/`bar.red` until the barrier completes
  (`.aligned` forms count whole warps, exited threads count as arrived for
  the default thread count);
* at a warp collective (shfl/vote/match/redux/elect/ldmatrix/mma...) until
  every non-exited thread named by the member mask in its warp is there;
* at an mbarrier wait that does not succeed yet, until some mbarrier
  completes a phase (or nothing else can run: then it retries, and a wait
  that can never succeed is reported as a deadlock).

Grid blocks (clusters) start in x, then y, then z order, IN_FLIGHT of them at once: the
scheduler gives each unit in flight QUANTUM instructions (or up to its next block) in turn,
so blocks that communicate through global memory without ordering see each other's
accesses interleaved, and the race checker (`grid_races.py`) reports them. Each CTA starts
with fresh registers, shared and local memory. Atomics of one instruction apply in
increasing thread order.

The CTAs of a thread-block cluster run together as one state (`CTAState` over
all their threads, CTA after CTA in rank order): the scheduler interleaves them
like the warps of one CTA, bar.sync stays per CTA, and barrier.cluster,
distributed shared memory and remote mbarriers (`cluster.py`) work across them.
A thread's shared addresses carry its CTA's rank from bit `CTA_RANK_SHIFT` up,
as on the GPU (they are its shared::cluster addresses); the CTAs' shared
memories lie `smem_stride` bytes apart in one buffer (`spaces.shared_index`),
so the race checker sees the cluster's threads and bytes as one.

Because of this lockstep, a missing barrier never gives a wrong result; the
race checker (`races.py`, on unless turned off) reports the conflicting accesses instead.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Optional, Sequence

from . import redundancy
from .errors import DeviceFault, EmulatorError
from .memory import CTA_RANK_SHIFT, Memory
from .program import (K_BAR, K_BRA, K_BRX, K_CALL, K_COLL, K_EXIT, K_OP, K_RET, K_WAIT, WARPGROUP, Program,
                      decode)
from .ptxtypes import ptx_type, uint_dtype

RUN, BAR, COLL, WAIT = range(4)
NO_LIMIT = 1 << 62
SPIN_LIMIT = 64            # backward branches a group may take while others wait before it yields
DEFAULT_MAX_WARP_INSTRUCTIONS = 2_000_000_000
MAX_IDLE_RETRIES = 64
# the default of run_ptx's check_races: on, unless TILEIRAS_EMULATOR_CHECK_RACES=0 (read once, for speed)
CHECK_RACES = os.environ.get("TILEIRAS_EMULATOR_CHECK_RACES", "1") not in ("", "0")
# what registers (but predicates), shared, local and tensor memory hold before anything writes them: all
# ones is a NaN in every float format, so an undefined value read into a computation spoils its result
POISON_BYTE = 0xFF
IN_FLIGHT = 2              # grid units (CTAs or clusters) run at once, so that races between them show
QUANTUM = 48               # instructions a unit issues before the next unit in flight gets its turn


@dataclass
class EmulationStats:
    """What a launch executed. `warp_instructions` counts, for every instruction issued, each
    warp with at least one thread in the issuing group (predicated-off threads included)."""

    warp_instructions: int = 0
    instructions: int = 0          # issues of one instruction by one thread group
    ctas: int = 0
    threads_per_cta: int = 0
    seconds: float = 0.0

    @property
    def warp_instructions_per_second(self) -> float:
        return self.warp_instructions / self.seconds if self.seconds > 0 else 0.0


class Group:
    """Threads at the same pc. `mask` None means every thread of the CTA."""

    __slots__ = ("pc", "mask", "nw", "state", "key", "retries", "yielded")

    def __init__(self, pc: int, mask: Any, nw: int, state: int = RUN, key: Any = None) -> None:
        self.pc = pc
        self.mask = mask
        self.nw = nw
        self.state = state
        self.key = key
        self.retries = 0
        self.yielded = False


@dataclass
class Launch:
    """Per-launch constants shared by all CTAs."""

    prog: Program
    mem: Memory
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    kparam: Any
    symv: list
    smem_size: int
    dyn_smem_base: int
    dynamic_smem: int
    base_regs: list = field(default_factory=list)
    stdout: Any = None
    races: Any = None               # a races.RaceChecker in race-checking mode
    cluster: tuple[int, int, int] = (1, 1, 1)   # CTAs per cluster; `grid` counts CTAs
    check: bool = False             # checking mode: races and definedness (`definedness.py`)
    per_cta_memory: bool = False    # the driver gives each CTA the memory `.minperctamemory` asks (newer drivers)
    units: int = 1                  # grid units (CTAs or clusters): the SMs they run on (%nsmid)


class CTAState:
    """Registers and memories of one CTA (or of all the CTAs of a cluster, `ctaids` in rank order),
    plus the bookkeeping the scheduler and ops share."""

    def __init__(self, launch: Launch, ctaids: Sequence[tuple[int, int, int]], races: Any = None, smid: int = 0) -> None:
        import numpy as np

        prog = launch.prog
        bx, by, bz = launch.block
        nb = bx * by * bz
        k = len(ctaids)
        n = nb * k
        self.n = n
        self.cta_threads = nb           # threads of one CTA; CTA r owns threads r*nb .. r*nb+nb-1
        self.smid = smid                # the SM it runs on (%smid): each unit of the grid its own
        self.tensormap_releases = 0     # fence.proxy.tensormap::generic releases so far (ops/tma.py)
        self.acquired_maps: dict = {}   # global map address -> (its 64 bytes an acquire saw, releases then)
        self.per_cta = launch.mem.alloc(k * prog.min_per_cta_memory, 128) \
            if launch.per_cta_memory and prog.min_per_cta_memory else 0   # %perctamemoryoffset of CTA 0
        self.ncta = k
        self.np = np
        self.launch = launch
        self.mem = launch.mem
        self.symv = launch.symv
        self.kparam = launch.kparam
        self.kparam_views: dict = {}
        self.smem_size = launch.smem_size
        self.dyn_smem_base = launch.dyn_smem_base
        self.smem_stride = _round16(launch.smem_size)     # of each CTA's shared memory in `shared`
        self.shared = np.full(k * self.smem_stride, POISON_BYTE, dtype=np.uint8)
        self.shared_views: dict = {}
        self.lsize = prog.local_size
        self.local = np.full(max(n * self.lsize, 16), POISON_BYTE, dtype=np.uint8)
        self.local_views: dict = {}
        self.csize = prog.cparam_size
        self.cparam = np.zeros(max(n * self.csize, 16), dtype=np.uint8)
        self.cparam2d = self.cparam[:n * self.csize].reshape(n, self.csize) if self.csize else None
        self.cparam_views: dict = {}
        self.all_lanes = np.arange(n, dtype=np.int64)
        self.tid_linear = self.all_lanes
        self.lane = (self.all_lanes % 32).astype(np.uint32)
        self.lane_bit = (np.uint32(1) << self.lane).astype(np.uint32)
        self.warp_of = self.all_lanes // 32
        self.nwarps = (n + 31) // 32
        self.warp_starts = np.arange(0, n, 32, dtype=np.int64)
        self.warp_sizes = np.minimum(32, n - self.warp_starts)
        # each thread's CTA rank, and that rank as the bits of its shared addresses (None outside clusters)
        self.rank_of = None if k == 1 else self.all_lanes // nb
        self.rank_bits = None if k == 1 else (self.rank_of << CTA_RANK_SHIFT).astype(np.uint64)
        self.exited = np.zeros(n, dtype=bool)
        self.any_exited = False
        self.CC = np.zeros(n, dtype=np.uint8)
        self.R = list(launch.base_regs)
        self.defined: Any = None            # definedness of each register (definedness.py), when checking
        self.undef_origin: dict = {}        # register -> the never-written register its value came from
        self.cur_def: Any = True            # definedness of what the running instruction writes
        self.partial: dict = {}             # register -> byte mask of its defined bytes (a partly defined pack)
        self.cur_origin = ""
        if launch.check:
            from .definedness import initial

            self.defined = initial(prog)
        one = _OneCTA(np, nb) if k > 1 else self
        for name, idx in prog.specials.items():
            values = [_special_value(name, one, launch, c) for c in ctaids]
            if values[0] is not None:
                self.R[idx] = values[0] if k == 1 else np.concatenate(values)
        self.stack = np.zeros((max(prog.max_call_depth, 1), n), dtype=np.int64)
        self.sp = np.zeros(n, dtype=np.int64)
        self.bars: dict[int, dict] = {}
        self.cluster_bar: Any = None        # barrier.cluster's state (cluster.py)
        self.ctaids = list(ctaids)
        self.block_id = "(" + ",".join(str(c) for c in ctaids[0]) + ")"
        if k > 1:
            self.block_id = f"{self.block_id} (the cluster of {k} CTAs it leads)"
        self.stdout = launch.stdout
        self.issued = 0
        # asynchronous copies and mbarriers (ops/async_ops.py)
        self.cp_pending: list = []
        self.cp_committed = np.zeros(n, dtype=np.int64)
        self.cp_issued = np.zeros(n, dtype=np.int64)          # cp.async copies each thread issued (their seq)
        self.cp_arrivals: list = []     # cp.async.mbarrier.arrive arrive-ons waiting for their copies (CpArrival)
        self.bulk_committed = np.zeros(n, dtype=np.int64)     # cp.async.bulk groups each thread committed
        self.mbar: dict[int, Any] = {}
        self.mbar_epoch = 0
        self.idle_epoch = 0
        self.idle_retries = 0
        # asynchronously written registers (async_regs.py), wgmma groups per warpgroup, tensor memory
        self.pending_regs: list = []
        self.wgmma_committed: dict[int, int] = {}
        self.wgmma_fences: Any = None       # wgmma.fence state per warpgroup (wgmma_fence.py)
        self.reg_budgets: Any = None        # setmaxnreg budget of each warpgroup (ops/control.py)
        self.tmem: Any = None
        self.races = races if races is not None else launch.races
        if self.races is not None:
            self.races.new_cta(n, self.shared.size)     # nothing a CTA does races with the CTAs before it

    def cta_range(self, rank: int) -> tuple[int, int]:
        """The threads [lo, hi) of the cluster's CTA `rank`."""
        return rank * self.cta_threads, (rank + 1) * self.cta_threads

    def clock_value(self) -> int:
        return self.issued * 4 + 1000

    def warps_in(self, mask: Any) -> int:
        if mask is None:
            return self.nwarps
        return int(self.np.count_nonzero(self.np.logical_or.reduceat(mask, self.warp_starts)))


class _OneCTA:
    """What `_special_value` reads of a state, for one CTA of a cluster."""

    def __init__(self, np: Any, n: int) -> None:
        self.n = n
        self.all_lanes = np.arange(n, dtype=np.int64)
        self.lane = (self.all_lanes % 32).astype(np.uint32)
        self.warp_of = self.all_lanes // 32
        self.nwarps = (n + 31) // 32


def _round16(n: int) -> int:
    return max((n + 15) // 16 * 16, 16)


def _special_value(name: str, st: CTAState, launch: Launch, ctaid: tuple[int, int, int]) -> Any:
    import numpy as np

    n = st.n
    bx, by, bz = launch.block
    t = st.all_lanes
    axis = {"x": 0, "y": 1, "z": 2}
    base = name[1:]
    if "." in base:
        base, ax = base.split(".")
        i = axis[ax]
    else:
        i = 0
    lane = st.lane.astype(np.uint64)
    value: Any
    if base == "tid":
        value = [t % bx, (t // bx) % by, t // (bx * by)][i]
    elif base == "ntid":
        value = launch.block[i]
    elif base == "ctaid":
        value = ctaid[i]
    elif base == "nctaid":
        value = launch.grid[i]
    elif base == "clusterid":
        value = ctaid[i] // launch.cluster[i]
    elif base == "nclusterid":
        value = launch.grid[i] // launch.cluster[i]
    elif base == "cluster_ctaid":
        value = ctaid[i] % launch.cluster[i]
    elif base == "cluster_nctaid":
        value = launch.cluster[i]
    elif base == "cluster_ctarank":
        cx, cy, _ = launch.cluster
        value = ctaid[0] % cx + cx * (ctaid[1] % cy + cy * (ctaid[2] % launch.cluster[2]))
    elif base == "laneid":
        value = st.lane
    elif base == "warpid":
        value = st.warp_of
    elif base == "nwarpid":
        value = st.nwarps
    elif base == "smid":     # each unit of the grid on its own SM (so no two share a %smid, %warpid slot)
        value = st.smid
    elif base == "nsmid":
        value = launch.units
    elif base == "perctamemoryoffset":   # the CTA's own global memory (.minperctamemory), where given
        value = 0 if not st.per_cta else np.uint64(st.per_cta) + (t // st.cta_threads).astype(np.uint64) * \
            np.uint64(launch.prog.min_per_cta_memory)
    elif base == "perctamemorysize":
        value = launch.prog.min_per_cta_memory if st.per_cta else 0
    elif base == "lanemask_eq":
        value = (np.uint64(1) << lane)
    elif base == "lanemask_lt":
        value = (np.uint64(1) << lane) - np.uint64(1)
    elif base == "lanemask_le":
        value = (np.uint64(2) << lane) - np.uint64(1)
    elif base == "lanemask_gt":
        value = ~((np.uint64(2) << lane) - np.uint64(1))
    elif base == "lanemask_ge":
        value = ~((np.uint64(1) << lane) - np.uint64(1))
    elif base == "dynamic_smem_size":
        value = launch.dynamic_smem
    elif base in ("total_smem_size", "aggr_smem_size"):
        value = launch.smem_size
    elif base == "cluster_nctarank":
        value = launch.cluster[0] * launch.cluster[1] * launch.cluster[2]
    elif base == "is_explicit_cluster":
        return np.full(n, launch.prog.reqnctapercluster is not None or launch.cluster != (1, 1, 1))
    elif base in ("clock", "clock_hi", "clock64", "globaltimer", "globaltimer_lo", "globaltimer_hi"):
        return None
    else:   # gridid, envregN, pmN, reserved_smem_*: zero
        value = 0
    bits = 64 if name in ("%gridid", "%clock64", "%globaltimer", "%perctamemoryoffset") or name.startswith("%pm") and name.endswith("_64") \
        else 32
    dt = uint_dtype(bits)
    arr = np.asarray(value)
    if arr.ndim == 0:
        return np.full(n, int(arr) & ((1 << bits) - 1), dtype=dt)
    return (arr.astype(np.uint64) & np.uint64((1 << bits) - 1)).astype(dt)


# --- the scheduler -----------------------------------------------------------------

def _merge(a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    return a | b


def run_cta(st: CTAState, limit_warp_instructions: int) -> int:
    """Run one CTA to completion; returns the warp-instructions it issued."""
    try:
        next(cta_bursts(st, limit_warp_instructions, 0))
    except StopIteration as done:
        return int(done.value)
    raise AssertionError("a CTA run without a quantum yielded")


def cta_bursts(st: CTAState, limit_warp_instructions: int, quantum: int) -> Any:
    """Run one CTA (a generator): with a `quantum`, yield after every burst of at most that many
    instructions, so that the caller can interleave CTAs; returns the warp-instructions issued."""
    np = st.np
    prog = st.launch.prog
    code = prog.code
    if st.defined is not None:
        from .definedness import check_branch, checked_code

        code = checked_code(prog)
    groups: list[Group] = [Group(prog.entry_pc, None, st.nwarps)]
    issued = 0
    issues = 0
    while True:
        # pick the runnable group with the lowest pc
        g: Optional[Group] = None
        for h in groups:
            if h.state == WAIT and h.key != st.mbar_epoch:
                h.state = RUN
            if h.state == RUN and not h.yielded and (g is None or h.pc < g.pc):
                g = h
        if g is None:
            if st.cp_arrivals and any(h.state == WAIT for h in groups):
                _force_cp_arrivals(st)      # (spinning threads may be waiting for the waiting ones)
                continue                    # (which may run now)
            for h in groups:        # only yielded groups are left: they may run again
                h.yielded = False
                if h.state == RUN and (g is None or h.pc < g.pc):
                    g = h
        if g is None:
            if not groups:
                break
            g = _idle_retry(st, groups)
        # merge every runnable (or collective-waiting) group at the same pc into it
        merged = False
        for h in groups:
            if h is not g and h.pc == g.pc and h.state in (RUN, COLL):
                g.mask = _merge(g.mask, h.mask)
                h.state = -1
                merged = True
        if merged:
            groups = [h for h in groups if h.state != -1]
            if g.mask is not None and g.mask.all():
                g.mask = None
            g.nw = st.warps_in(g.mask)
        limit = NO_LIMIT
        spins = 0
        stops: set = set()
        others = False      # whether a spin should let others go: runnable ones, or waiting ones that may
        for h in groups:    # need the copies of a cp.async.mbarrier.arrive (they land when the rest only spins)
            if h is g:
                continue
            if h.state == RUN and h.pc < limit and not h.yielded:
                limit = h.pc
            elif h.state == COLL:
                stops.add(h.pc)
            elif h.state == WAIT and st.cp_arrivals:
                others = True
        others = others or limit != NO_LIMIT
        pc = g.pc
        mask = g.mask
        nw = g.nw
        R = st.R
        qend = issues + quantum if quantum else NO_LIMIT
        try:
            while True:
                if pc >= limit or issues >= qend or (stops and pc in stops):
                    break
                kind, fn, gid, gneg, aux = code[pc]
                issued += nw
                issues += 1
                st.issued = issued
                if gid >= 0:
                    p = R[gid]
                    if gneg:
                        p = ~p
                    m = p if mask is None else (mask & p)
                else:
                    m = mask
                if kind == K_OP:
                    fn(st, m)
                    pc += 1
                    continue
                if kind == K_BRA:
                    if aux <= pc:
                        if issued > limit_warp_instructions:
                            break
                        if others:
                            # a backward branch while other threads wait: after many, let them run
                            # (a spinning thread must not starve the one holding its lock)
                            spins += 1
                            if spins > SPIN_LIMIT and (gid < 0 or (m.all() if mask is None else
                                                                   np.array_equal(m, mask))):
                                g.yielded = True
                                pc = aux
                                break
                    if gid < 0:
                        pc = aux
                        continue
                    if st.defined is not None and st.defined[gid] is not True:
                        check_branch(st, mask, gid, prog.reg_names)
                    taken = int(np.count_nonzero(m))
                    if taken == 0:
                        pc += 1
                        continue
                    total = st.n if mask is None else int(np.count_nonzero(mask))
                    if taken == total:
                        pc = aux
                        continue
                    base = np.ones(st.n, dtype=bool) if mask is None else mask
                    stay = base & ~m
                    g.pc, g.mask, g.nw = pc + 1, stay, st.warps_in(stay)
                    _add_group(st, groups, aux, m)
                    g = None
                    break
                # everything else may change the group structure: hand over to the slow path
                g.pc, g.mask, g.nw = pc, mask, nw
                _control(st, groups, g, kind, fn, gid, m, aux)
                g = None
                break
        except DeviceFault as fault:
            raise _located(st, pc, fault) from None
        except EmulatorError:
            raise
        except (IndexError, ValueError, TypeError, OverflowError, ZeroDivisionError) as exc:
            raise _located(st, pc, DeviceFault(f"internal emulator failure: {type(exc).__name__}: {exc}")) from exc
        if g is not None:
            g.pc, g.mask, g.nw = pc, mask, nw
        groups = [h for h in groups if h.state != -1 and (h.mask is None or h.mask.any())]
        if issued > limit_warp_instructions:
            raise EmulatorError(f"block {st.block_id} issued more than {limit_warp_instructions} "
                                "warp-instructions (an endless loop?); stopped")
        st.issues = issues
        if quantum:
            yield None
    st.issues = issues
    from .exit_checks import check_exit

    check_exit(st)
    return issued


def _add_group(st: CTAState, groups: list, pc: int, mask: Any, state: int = RUN, key: Any = None) -> Group:
    """Add threads at `pc`, folding them into a group already waiting there in the same state."""
    if mask is not None and mask.all():
        mask = None
    for h in groups:
        if h.pc == pc and h.state == state == RUN:
            h.mask = _merge(h.mask, mask)
            if h.mask is not None and h.mask.all():
                h.mask = None
            h.nw = st.warps_in(h.mask)
            return h
    g = Group(pc, mask, st.warps_in(mask), state, key)
    groups.append(g)
    return g


def _force_cp_arrivals(st: CTAState) -> None:
    """The copies that cp.async.mbarrier.arrive tracks complete as late as they can: only once no thread can go on
    without their arrive-ons (or only spinning ones can, beside waiting ones); their threads' own waits or exits
    land them earlier."""
    from .ops.async_ops import force_cp_arrivals
    line = st.cp_arrivals[0].ins.line
    try:
        force_cp_arrivals(st)
    except DeviceFault as fault:    # (named at the cp.async.mbarrier.arrive whose arrive-on fires)
        pc = next((i for i, ins in enumerate(st.launch.prog.info) if ins.line == line), -1)
        raise _located(st, pc, fault) from None


def _idle_retry(st: CTAState, groups: list) -> Group:
    """Nothing can run: retry a waiting group, or report the deadlock.

    Retries without any mbarrier completing a phase in between are counted; past
    MAX_IDLE_RETRIES the wait can never succeed."""
    if st.cp_arrivals:
        _force_cp_arrivals(st)
    waits = [h for h in groups if h.state == WAIT]
    if st.mbar_epoch != st.idle_epoch:
        st.idle_epoch = st.mbar_epoch
        st.idle_retries = 0
    st.idle_retries += 1
    if waits and st.idle_retries <= MAX_IDLE_RETRIES:
        h = min(waits, key=lambda x: x.pc)
        h.state = RUN
        return h
    raise _deadlock(st, groups)


def _deadlock(st: CTAState, groups: list) -> EmulatorError:
    split = _split_collective(st, groups)
    if split is not None:
        return split
    prog = st.launch.prog
    parts = []
    for h in groups:
        what = {BAR: f"barrier {h.key}", COLL: "a warp-collective instruction", WAIT: "an mbarrier wait",
                RUN: "running"}.get(h.state, "?")
        ins = prog.info[min(h.pc, len(prog.info) - 1)]
        if h.state == WAIT and ins.opcode == "setmaxnreg":
            what = "a setmaxnreg.inc waiting for registers"
        count = st.n if h.mask is None else int(st.np.count_nonzero(h.mask))
        where = ""
        if st.rank_of is not None:      # which CTAs of the cluster they belong to
            ranks = st.np.unique(st.rank_of if h.mask is None else st.rank_of[h.mask]).tolist()
            where = f" of CTA rank{'s' if len(ranks) > 1 else ''} {','.join(map(str, ranks))}"
        parts.append(f"{count} thread(s){where} at {what}: line {ins.line} '{ins.text}'")
    return EmulatorError(f"deadlock in block {st.block_id}: " + "; ".join(parts))


ALIGNED_RULE = ("the threads of a warp must execute the same .aligned instruction together (PTX ISA: in "
                "conditionally executed code only where all of them evaluate the condition identically)")


def _is_aligned(st: CTAState, pc: int) -> bool:
    """Whether the instruction at `pc` is an `.aligned` one other than a barrier (barriers are checked as their
    warps arrive, _check_aligned_arrival)."""
    ins = st.launch.prog.info[pc]
    return "aligned" in ins.mods and ins.opcode not in ("bar", "barrier")


def _check_whole_warps(st: CTAState, groups: list, present: Any, act: Any, pc: int) -> None:
    """Each warp that executes the `.aligned` instruction at `pc` (threads `act`) must do so with all of its
    `present` threads (a guard false for some of them, or threads elsewhere, break the rule)."""
    np = st.np
    partial = np.logical_or.reduceat(act, st.warp_starts) & np.logical_or.reduceat(present & ~act, st.warp_starts)
    if not partial.any():
        return
    w = int(np.argmax(partial))
    lanes = slice(32 * w, 32 * w + 32)
    left = np.flatnonzero((present & ~act)[lanes]) + 32 * w
    prog = st.launch.prog
    where = next((f"at line {prog.info[min(h.pc, len(prog.info) - 1)].line}" for h in groups
                  if h.state != -1 and (h.mask is None or h.mask[left[0]])), "")
    others = f"its thread {int(left[0]) % 32} is {where}" if where else \
        f"its thread {int(left[0]) % 32} skips it (the guard differs among the warp's threads)"
    raise DeviceFault(f"warp {w} executes an .aligned instruction with only some of its threads ({others}): "
                      + ALIGNED_RULE, int(np.flatnonzero(act[lanes])[0]) + 32 * w)


def _split_collective(st: CTAState, groups: list) -> Optional[EmulatorError]:
    """The deadlock of a warp (warpgroup, for wgmma) whose threads wait at two copies of a collective `.aligned`
    instruction, each for the others: reported as the broken rule, with both lines."""
    np = st.np
    prog = st.launch.prog
    colls = [h for h in groups if h.state == COLL and _is_aligned(st, h.pc)]
    for i, h in enumerate(colls):
        for k in colls[i + 1:]:
            if k.pc == h.pc:
                continue
            size = 128 if prog.code[h.pc][4] is WARPGROUP and prog.code[k.pc][4] is WARPGROUP else 32
            units = [np.unique(np.flatnonzero(np.ones(st.n, dtype=bool) if g.mask is None else g.mask) // size)
                     for g in (h, k)]
            common = np.intersect1d(*units)
            if common.size:
                unit = "warpgroup" if size == 128 else "warp"
                u = int(common[0])
                a, b = sorted((h.pc, k.pc))
                return _located(st, b, DeviceFault(
                    f"{unit} {u} executes an .aligned instruction at two instructions (line {prog.info[a].line} "
                    f"and line {prog.info[b].line}), each copy waiting for the threads at the other: "
                    + ALIGNED_RULE.replace("of a warp", f"of a {unit}"), u * size))
    return None


def _located(st: CTAState, pc: int, fault: DeviceFault) -> EmulatorError:
    prog = st.launch.prog
    ins = prog.info[pc] if 0 <= pc < len(prog.info) else None
    where = f"line {ins.line} '{ins.text}'" if ins is not None else f"pc {pc}"
    thread = ""
    block = st.block_id
    if fault.thread is not None:
        bx, by, _ = st.launch.block
        t = fault.thread
        if st.rank_of is not None:      # a thread of the cluster's CTA `rank`
            rank, t = divmod(t, st.cta_threads)
            block = "(" + ",".join(str(c) for c in st.ctaids[rank]) + f") (rank {rank} of its cluster)"
        thread = f" in thread ({t % bx},{(t // bx) % by},{t // (bx * by)})"
    return EmulatorError(f"{fault.message} at {where}{thread} of block {block}")


def _control(st: CTAState, groups: list, g: Group, kind: int, fn: Any, gid: int, m: Any, aux: Any) -> None:
    """Instructions that change which threads run where."""
    np = st.np
    pc = g.pc
    mask = g.mask
    full = np.ones(st.n, dtype=bool) if mask is None else mask
    act = full if m is None else m          # threads the instruction applies to
    skip = full & ~act                      # guarded off: carry on past it

    def keep_rest(next_pc: int) -> None:
        if skip.any():
            _add_group(st, groups, next_pc, skip)

    g.state = -1   # the group is rebuilt below
    if not act.any():
        _add_group(st, groups, pc + (2 if kind == K_CALL else 1), full)
        return
    if kind == K_EXIT:
        if st.cp_pending:      # an exiting thread's copies still land (and are checked as they do)
            from .ops.async_ops import land_copies
            land_copies(st, act, -1)
        st.exited |= act
        st.any_exited = True
        keep_rest(pc + 1)
        for h in groups:
            if h.state == COLL:
                h.state = RUN      # re-check: the threads it waited for may have exited
        _check_barriers(st, groups)
        if st.cluster_bar is not None:     # exited threads count as arrived at barrier.cluster
            from .ops.cluster import complete_cluster_barrier
            complete_cluster_barrier(st)
        return
    if kind == K_BRX:
        idx = np.asarray(fn(st, act))
        keep_rest(pc + 1)
        for k in np.unique(idx[act]):
            _add_group(st, groups, aux[int(k)], act & (idx == k))
        return
    if kind == K_CALL:
        lanes = np.flatnonzero(act)
        fn(st, act)
        depth = st.sp[lanes]
        if int(depth.max()) >= st.stack.shape[0]:
            raise DeviceFault("call stack overflow")
        st.stack[depth, lanes] = pc + 1
        st.sp[lanes] = depth + 1
        keep_rest(pc + 2)
        _add_group(st, groups, aux, act)
        return
    if kind == K_RET:
        lanes = np.flatnonzero(act)
        depth = st.sp[lanes] - 1
        targets = st.stack[depth, lanes]
        st.sp[lanes] = depth
        keep_rest(pc + 1)
        for t in np.unique(targets):
            sel = np.zeros(st.n, dtype=bool)
            sel[lanes[targets == t]] = True
            _add_group(st, groups, int(t), sel)
        return
    if kind == K_COLL:
        ready = _collective_ready(st, full, aux)
        if ready is not None:
            waiting = full & ~ready
            if waiting.any():
                groups.append(Group(pc, waiting, st.warps_in(waiting), COLL))
            full = ready
            act = act & ready
            skip = full & ~act
        if _is_aligned(st, pc):
            _check_whole_warps(st, groups, full, act, pc)
        fn(st, None if (act.all()) else act)
        _add_group(st, groups, pc + 1, full)
        return
    if kind == K_WAIT:
        if _is_aligned(st, pc):
            _check_whole_warps(st, groups, ~st.exited, act, pc)
        done = fn(st, act)
        pending = act & ~done
        proceed = (full & ~act) | (act & done)
        if proceed.any():
            _add_group(st, groups, pc + 1, proceed)
        if pending.any():
            groups.append(Group(pc, pending, st.warps_in(pending), WAIT, st.mbar_epoch))
        return
    if kind == K_BAR:
        _barrier(st, groups, aux, act, pc)
        keep_rest(pc + 1)
        return
    raise DeviceFault(f"unknown instruction kind {kind}")


def _collective_ready(st: CTAState, present: Any, mm_reader: Any) -> Any:
    """None if every warp's member threads are all present, else the mask of threads that may go."""
    np = st.np
    alive = ~st.exited
    if mm_reader is WARPGROUP and st.n % 128 == 0:
        missing = (alive & ~present).reshape(-1, 128).any(axis=1)
        if not (missing & present.reshape(-1, 128).any(axis=1)).any():
            return None
        return present & ~np.repeat(missing, 128)
    if mm_reader is None or mm_reader is WARPGROUP:
        need = alive
    else:
        mm = np.asarray(mm_reader(st))
        if mm.ndim == 0:
            mm = np.full(st.n, mm)
        # the member mask each warp's present threads name (lanes that do not exist are ignored)
        warp_mm = np.bitwise_or.reduceat(np.where(present, mm.astype(np.uint32), np.uint32(0)), st.warp_starts)
        need = alive & (((warp_mm[st.warp_of] >> st.lane) & np.uint32(1)) != 0)
    missing = need & ~present
    if not missing.any():
        return None
    bad_warp = np.logical_or.reduceat(missing, st.warp_starts)
    return present & ~bad_warp[st.warp_of]


def _barrier(st: CTAState, groups: list, spec: Any, act: Any, pc: int) -> None:
    np = st.np
    lanes = np.flatnonzero(act)
    first = int(lanes[0])
    ident = np.asarray(spec.ident(st))
    bar_id = int(ident if ident.ndim == 0 else ident[first])
    count = None
    if spec.count is not None:
        c = np.asarray(spec.count(st))
        count = int(c if c.ndim == 0 else c[first])
    if not 0 <= bar_id < 16:
        raise DeviceFault(f"barrier number {bar_id} is outside 0..15", first)
    if st.rank_of is not None:      # each CTA of a cluster has its own barriers 0..15
        ranks = np.unique(st.rank_of[lanes])
        if ranks.size > 1:          # threads of several CTAs (one group): each arrives at its CTA's barrier
            for r in ranks.tolist():
                _arrive_at_barrier(st, groups, spec, act & (st.rank_of == r), pc, bar_id + 16 * r, count)
            return
        bar_id += 16 * (first // st.cta_threads)
    _arrive_at_barrier(st, groups, spec, act, pc, bar_id, count)


def _arrive_at_barrier(st: CTAState, groups: list, spec: Any, act: Any, pc: int, bar_id: int,
                       count: Optional[int]) -> None:
    """The threads `act` (of one CTA) arrive at barrier `bar_id` (16 r + id in CTA r of a cluster)."""
    np = st.np
    if st.races is not None:
        st.races.release(act)
    b = st.bars.get(bar_id)
    if b is None:
        b = st.bars[bar_id] = {"threads": np.zeros(st.n, dtype=bool), "pc": np.full(st.n, -1),
                               "count": None, "aligned": spec.aligned, "waiting": [], "red": [], "ops": set()}
    if spec.aligned:
        _check_aligned_arrival(st, b, act, pc, bar_id)
    b["pc"][act] = pc
    b["ops"].add(spec.op)
    if count is not None:
        b["count"] = count
    b["aligned"] = spec.aligned
    b["threads"] |= act
    if spec.op == "red":
        v = np.asarray(spec.red_value(st))
        if v.ndim == 0:
            v = np.full(st.n, bool(v))
        b["red"].append((spec.red_op, act & v))
    if spec.op in ("sync", "red"):
        grp = Group(pc + 1, act, st.warps_in(act), BAR, bar_id)
        groups.append(grp)
        if spec.op == "red":
            b["waiting"].append((grp, spec.red_writer))
    else:       # bar.arrive: the threads go on
        _add_group(st, groups, pc + 1, act)
    _check_barriers(st, groups)


def _check_aligned_arrival(st: CTAState, b: dict, act: Any, pc: int, bar_id: int) -> None:
    """An `.aligned` barrier (bar.sync, bar.arrive, bar.red) must be executed by a warp's threads at
    one instruction: the hardware counts a warp once per barrier instruction it executes, so a
    warp split over two copies of the barrier (LLVM duplicates a non-convergent inline-asm
    barrier into the arms of a branch on the thread index) arrives twice and the barrier's
    count goes wrong, which hangs the kernel on the GPU."""
    np = st.np
    warps = np.unique(st.warp_of[act])
    earlier = b["threads"] & (b["pc"] != pc)
    clash = warps[np.isin(warps, np.unique(st.warp_of[earlier]))] if earlier.any() else warps[:0]
    if clash.size:
        w = int(clash[0])
        other = int(b["pc"][np.flatnonzero(earlier & (st.warp_of == w))[0]])
        info = st.launch.prog.info
        raise DeviceFault(
            f"warp {w} executes aligned barrier {bar_id % 16} at two instructions (line {info[other].line} "
            f"and line {info[pc].line}): the threads of a warp must execute the same .aligned barrier "
            "instruction together; the GPU counts each copy as the whole warp's arrival and hangs",
            int(np.flatnonzero(act & (st.warp_of == w))[0]))


def _check_barriers(st: CTAState, groups: list) -> None:
    """Release the threads of every barrier that completed.

    Arrival is tracked per thread. Without a thread count a barrier completes once every
    non-exited thread has arrived. With a count b, `.aligned` forms (bar.sync/bar.arrive)
    count 32 for each warp whose non-exited threads have all arrived, as the hardware counts
    warps; the other forms count threads."""
    np = st.np
    alive = ~st.exited
    for bar_id, b in list(st.bars.items()):
        arrived_or_gone = b["threads"] | ~alive
        threads = b["threads"]
        starts = st.warp_starts
        if st.rank_of is not None:      # barrier 16*r + id is CTA r's barrier id
            lo, hi = st.cta_range(bar_id // 16)
            arrived_or_gone, threads, starts = arrived_or_gone[lo:hi], threads[lo:hi], starts[:(hi - lo + 31) // 32]
        if b["count"] is None:
            complete = bool(arrived_or_gone.all())
        elif b["aligned"]:
            whole = np.logical_and.reduceat(arrived_or_gone, starts) & np.logical_or.reduceat(threads, starts)
            complete = int(np.count_nonzero(whole)) * 32 >= b["count"]
        else:
            complete = int(np.count_nonzero(threads)) >= b["count"]
        if not complete:
            continue
        if b["red"]:
            contributions = np.zeros(st.n, dtype=bool)
            op = b["red"][0][0]
            for _, v in b["red"]:
                contributions |= v
            if op == "popc":
                result: Any = np.uint32(np.count_nonzero(contributions))
            elif op == "and":
                result = np.bool_(bool((contributions | ~b["threads"]).all()))
            else:
                result = np.bool_(bool(contributions.any()))
            for grp, writer in b["waiting"]:
                writer.put(st, grp.mask, result)
        if st.races is not None:
            waiting = np.zeros(st.n, dtype=bool)
            for h in groups:
                if h.state == BAR and h.key == bar_id:
                    waiting |= np.ones(st.n, dtype=bool) if h.mask is None else h.mask
            if redundancy.ACTIVE is not None:
                redundancy.barrier(st, bar_id, b)
            st.races.hb.barrier(b["threads"], waiting)
            if b["threads"].all() and waiting.all():
                st.races.full_barrier()
        for h in groups:
            if h.state == BAR and h.key == bar_id:
                h.state = RUN
        del st.bars[bar_id]
        if st.races is not None:
            st.races.new_interval()


# --- launch ------------------------------------------------------------------------

@lru_cache(maxsize=64)
def _parsed(digest: str, text: str) -> Any:
    from .parser import parse_module

    return parse_module(text)


@lru_cache(maxsize=128)
def _decoded(digest: str, text: str, kernel: str) -> Program:
    return decode(_parsed(digest, text), kernel)


def load_program(ptx: str, kernel: str) -> Program:
    """Parse and decode `kernel` of a PTX module (cached on the text)."""
    digest = hashlib.sha256(ptx.encode("utf-8", "replace")).hexdigest()
    return _decoded(digest, ptx, kernel)


def _pack_params(prog: Program, params: Sequence[Any]) -> Any:
    import numpy as np

    if len(params) != len(prog.params):
        names = ", ".join(f"{p.name}: .{p.type}" for p in prog.params)
        raise EmulatorError(f"kernel '{prog.kernel.name}' takes {len(prog.params)} parameters ({names}), "
                            f"got {len(params)}")
    buf = np.zeros(max(prog.kparam_size, 16), dtype=np.uint8)
    for slot, value in zip(prog.params, params):
        t = ptx_type(slot.type)
        if isinstance(value, (bytes, bytearray, memoryview)):
            raw = bytes(value)
            if len(raw) != slot.size:
                raise EmulatorError(f"parameter '{slot.name}' needs {slot.size} bytes, got {len(raw)}")
        elif slot.is_array:
            if not isinstance(value, int):
                raise EmulatorError(f"parameter '{slot.name}' is a {slot.size}-byte array: pass bytes or an int")
            raw = (value & ((1 << (8 * slot.size)) - 1)).to_bytes(slot.size, "little")
        elif t.kind == "f":
            from .ptxtypes import np_dtype

            raw = np.array(float(value), dtype=np.float64).astype(np_dtype(slot.type)).tobytes()
        elif isinstance(value, float):
            raise EmulatorError(f"parameter '{slot.name}' is .{slot.type}, got the float {value!r}")
        else:
            raw = (int(value) & ((1 << t.bits) - 1)).to_bytes(t.nbytes, "little")
        buf[slot.offset:slot.offset + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
    return buf


def _allocate_globals(prog: Program, mem: Memory) -> list:
    import numpy as np

    symv: list = [0] * len(prog.globals)
    pending = []
    for slot, decl in prog.globals:
        if decl.linkage == "extern" and decl.count is None:
            raise EmulatorError(f"external variable '{decl.name}' has no definition in this PTX")
        size = max(decl.nbytes, 1)
        addr = mem.alloc(size, max(decl.align or 16, 16))
        symv[slot] = addr
        pending.append((addr, decl))
    names = {decl.name: symv[slot] for slot, decl in prog.globals}
    for addr, decl in pending:
        if not decl.init:
            continue
        t = ptx_type(decl.type)
        out = bytearray()
        for v in decl.init:
            if hasattr(v, "name"):      # an address initializer
                if v.name not in names:
                    raise EmulatorError(f"initializer of '{decl.name}' names unknown symbol '{v.name}'")
                out += ((names[v.name] + v.offset) & ((1 << t.bits) - 1)).to_bytes(t.nbytes, "little")
            elif hasattr(v, "value"):   # a float literal
                from .ptxtypes import np_dtype

                if v.bits is not None and v.width == t.bits:
                    out += int(v.bits).to_bytes(t.nbytes, "little")
                else:
                    dt = np_dtype(decl.type) if t.kind == "f" else {4: np.float32, 8: np.float64}[t.nbytes]
                    out += np.array(v.value).astype(dt).tobytes()
            else:
                out += (int(v) & ((1 << t.bits) - 1)).to_bytes(t.nbytes, "little")
        mem.write(addr, bytes(out[:decl.nbytes]))
    return symv


def run_ptx(ptx: str, kernel: str, grid: tuple[int, int, int], block: tuple[int, int, int],
            params: list, memory: Memory, dynamic_smem: int = 0,
            max_warp_instructions: int = DEFAULT_MAX_WARP_INSTRUCTIONS, stdout: Any = None,
            check_races: Optional[bool] = None, per_cta_memory: bool = False) -> EmulationStats:
    """Execute `kernel` of the PTX module `ptx` over `grid` x `block` threads.

    `params` are the raw values of the entry's .param list in order (device
    addresses for pointers, ints, Python floats for .f32/.f64 params, bytes
    for .b8 arrays). Raises `EmulatorError` for unsupported PTX, bad launch
    configurations and device faults (out-of-bounds or misaligned accesses,
    deadlocks, trap, a failed device assert). `vprintf` output goes to `stdout`
    (default: sys.stdout). `check_races` also reports data races between the
    threads of a CTA (see `races.py`); None takes TILEIRAS_EMULATOR_CHECK_RACES. `per_cta_memory`:
    each CTA gets the global memory its `.minperctamemory` asks (`%perctamemoryoffset`), as newer
    drivers give it; else that register reads 0, as under older ones.
    """
    import numpy as np

    start = time.perf_counter()
    grid = _dims(grid, "grid")
    block = _dims(block, "block")
    prog = load_program(ptx, kernel)
    nthreads = block[0] * block[1] * block[2]
    if nthreads > 1024:
        raise EmulatorError(f"block {block} has {nthreads} threads; at most 1024 are allowed")
    if prog.reqntid is not None and tuple(prog.reqntid) != tuple(block):
        raise EmulatorError(f"kernel '{kernel}' requires a block of {prog.reqntid} threads (.reqntid), "
                            f"launched with {block}")
    if prog.maxntid is not None:
        mx = prog.maxntid[0] * prog.maxntid[1] * prog.maxntid[2]
        if nthreads > mx:
            raise EmulatorError(f"kernel '{kernel}' allows at most {mx} threads per block (.maxntid), "
                                f"launched with {nthreads}")
    if dynamic_smem < 0:
        raise EmulatorError("dynamic shared memory size cannot be negative")
    grid, cluster = _cluster_grid(prog, kernel, grid)
    kparam = _pack_params(prog, params)
    symv = _allocate_globals(prog, memory)
    align = prog.dyn_smem_align
    dyn_base = (prog.static_smem + align - 1) // align * align
    smem_size = dyn_base + dynamic_smem if (dynamic_smem or prog.uses_dynamic_smem) else prog.static_smem
    if smem_size > 228 * 1024:
        raise EmulatorError(f"the kernel needs {smem_size} bytes of shared memory; at most 232448 exist")
    ncta = cluster[0] * cluster[1] * cluster[2]
    if ncta > 1 and nthreads % 32:
        raise EmulatorError(f"the CTAs of a cluster run together here, which needs whole warps: the block {block} "
                            f"has {nthreads} threads")
    base_regs = []
    zeros: dict[int, Any] = {}
    for bits in prog.reg_bits:
        if bits not in zeros:
            zeros[bits] = np.zeros(nthreads * ncta, dtype=np.bool_) if bits == 1 else \
                np.full(nthreads * ncta, (1 << bits) - 1, dtype=uint_dtype(bits))
        base_regs.append(zeros[bits])
    units = list(_ctas_by_cluster(grid, cluster))
    launch = Launch(prog, memory, grid, block, kparam, symv, smem_size, dyn_base, dynamic_smem, base_regs,
                    stdout if stdout is not None else sys.stdout, cluster=cluster, per_cta_memory=per_cta_memory,
                    units=len(units))
    checking = CHECK_RACES if check_races is None else check_races
    launch.check = checking
    checkers: list = [None] * min(IN_FLIGHT, len(units))
    if checking:
        from .races import RaceChecker

        checkers = [RaceChecker(np, prog.info) for _ in checkers]
        if len(units) > 1:
            from .grid_races import GridRaces

            grid_check = GridRaces(np, ["(" + ",".join(map(str, u[0])) + ")" for u in units], checkers[0].texts)
            for c in checkers:
                c.grid = grid_check
    stats = EmulationStats(threads_per_cta=nthreads)
    with np.errstate(all="ignore"):
        if len(units) == 1:
            st = CTAState(launch, units[0], checkers[0])
            stats.warp_instructions += run_cta(st, max_warp_instructions)
            stats.instructions += st.issues
            stats.ctas += ncta
        else:
            _run_interleaved(launch, units, checkers, max_warp_instructions, stats)
    stats.seconds = time.perf_counter() - start
    return stats


def _run_interleaved(launch: Launch, units: list, checkers: list, limit: int, stats: EmulationStats) -> None:
    """Run the grid's units (CTAs or clusters) `len(checkers)` at a time, QUANTUM instructions each in turn;
    a unit that ends makes room for the next one, which gets the ending unit's race checker."""
    ncta = len(units[0])
    todo = iter(enumerate(units))
    slots: list = []

    def start(checker: Any) -> None:
        nxt = next(todo, None)
        if nxt is None:
            return
        unit, ctaids = nxt
        if checker is not None:
            checker.unit = unit
            if checker.grid is not None:
                checker.grid.start(unit)
        st = CTAState(launch, ctaids, checker, unit)
        slots.append((st, cta_bursts(st, limit, QUANTUM), checker, unit))

    for c in checkers:
        start(c)
    while slots:
        for entry in list(slots):
            st, bursts, checker, unit = entry
            try:
                next(bursts)
            except StopIteration as done:
                stats.warp_instructions += int(done.value)
                stats.instructions += st.issues
                stats.ctas += ncta
                slots.remove(entry)
                if checker is not None and checker.grid is not None:
                    checker.grid.finish(unit)
                start(checker)


def _cluster_grid(prog: Program, kernel: str, grid: tuple[int, int, int]) \
        -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(grid of CTAs, CTAs per cluster) of a launch of `grid` blocks. With `.blocksareclusters` each
    launched block is a cluster of `.reqnctapercluster` CTAs; otherwise the grid counts CTAs and must
    be whole clusters."""
    cluster = prog.reqnctapercluster or (1, 1, 1)
    if prog.blocks_are_clusters:
        if prog.reqnctapercluster is None:
            raise EmulatorError(f"kernel '{kernel}' says .blocksareclusters without .reqnctapercluster")
        return (grid[0] * cluster[0], grid[1] * cluster[1], grid[2] * cluster[2]), cluster
    if any(g % c for g, c in zip(grid, cluster)):
        raise EmulatorError(f"kernel '{kernel}' requires clusters of {cluster} CTAs (.reqnctapercluster); "
                            f"the grid {grid} is not made of whole clusters")
    return grid, cluster


def _ctas_by_cluster(grid: tuple[int, int, int], cluster: tuple[int, int, int]):
    """The CTA ids of each cluster in rank order, cluster after cluster."""
    cx, cy, cz = cluster
    for kz in range(grid[2] // cz):
        for ky in range(grid[1] // cy):
            for kx in range(grid[0] // cx):
                yield [(x, y, z) for z in range(kz * cz, kz * cz + cz) for y in range(ky * cy, ky * cy + cy)
                       for x in range(kx * cx, kx * cx + cx)]


def _dims(d: Any, what: str) -> tuple[int, int, int]:
    try:
        dims = tuple(int(x) for x in d)
    except TypeError:
        dims = (int(d),)
    if not 1 <= len(dims) <= 3:
        raise EmulatorError(f"{what} needs one to three dimensions, got {d!r}")
    dims = dims + (1,) * (3 - len(dims))
    if any(x < 1 for x in dims):
        raise EmulatorError(f"{what} dimensions must be positive, got {d!r}")
    return dims  # type: ignore[return-value]
