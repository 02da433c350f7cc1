"""Vector clocks for the asynchronous pipelines (part of the race checker, one CTA, or one cluster's
CTAs together, at a time).

The interval checker in `races.py` treats every completed barrier or mbarrier phase as ordering
everything before it with everything after it, which is right for bar.sync but too generous for
the point-to-point handshakes of a pipeline: a consumer that reads a stage after releasing it, or
that releases it while its wgmma may still be reading it, is ordered with the producer's next TMA
load only by the schedule this emulator happened to pick. So mbarriers and CTA barriers also carry
vector clocks (thread t's clock of thread u: `vc[t, u]`):

* an arrive (mbarrier.arrive) releases the thread's clock into the barrier's current phase, then
  ticks the thread's own clock; a cp.async.mbarrier.arrive releases the thread's clock as of the
  instruction into the phase its arrive-on fires in, once the thread's earlier copies landed
  (`ops/async_ops.CpArrival`); a tcgen05.commit releases the clock of the thread's tcgen05
  operations (below);
* a wait that sees a phase complete acquires the clocks released into that phase;
* bar.sync/bar.arrive join the clocks of the arriving threads into the waiting ones.

Every shared byte remembers its last reader and the reader's clock at the read (generic reads and
async-proxy reads apart, so that one does not hide the other). Reads through the async proxy are
*pending* until the instruction that completes them (wgmma.wait_group for wgmma,
the issuing thread's next tcgen05.commit for tcgen05.mma). A TMA load that overwrites a byte, or a
generic store over a pending read, must be ordered after that read (`vc[writer, reader] >= clock`),
otherwise it is reported; a generic store too.

Every shared byte also remembers its last generic writer and the writer's clock, so a read (ld, or
an async-proxy read by wgmma/tcgen05/TMA store) or a write of it by another thread must be ordered
after that write (`vc[reader, writer] >= clock`). Without it the interval checker's generous rule
let a consumer that waited on one mbarrier read data published through another one it never waited
for (the tf32 rounding's `ready` barrier): the unwaited barrier's completion counted as a barrier.
Bytes a TMA load (or a cp.async completing on an mbarrier) wrote have no generic writer: their
readers must have seen the completing phase (`RaceChecker._visible`), or, for a cp.async its thread
waited for (wait_group/wait_all), be ordered after that thread's wait. Any access of a byte that a
cp.async still in flight writes is a race (`RaceChecker._in_flight`).

Tensor memory (`TensorCells`) is tracked per 32-bit cell (lane, column) the same way, writes as
well as reads: tcgen05.mma and tcgen05.cp access it asynchronously until the issuing thread's next
tcgen05.commit, tcgen05.ld/st until the warp's tcgen05.wait::ld/st. Accesses by one thread's
mma/cp are ordered among themselves only as the PTX ISA's pipelined pairs (mma -> mma with the same
accumulator and shape, cp -> mma; cp -> cp, as NVIDIA's block-scaled matmul uses it): an mma into
another accumulator over cells an earlier mma reads must wait for that one's commit
(`TensorCells.pipelined`). Completed ld/st of one warp are ordered too (warp-collective).

An mbarrier's initialization is an event of its initializing thread; a thread of another CTA of the
cluster that arrives on it (or whose TMA load or tcgen05.commit completes on it) must know that event
(`ops/async_ops.published`): fence.mbarrier_init.release.cluster marks the thread's initializations,
which its next barrier.cluster.arrive publishes even when relaxed (`release_inits`).

tcgen05 fences order tcgen05 operations with CTA barriers (bar.sync, barrier.sync), as NVIDIA's own
PTX uses them: a warp's completed tcgen05.ld/st are published by its next
tcgen05.fence::before_thread_sync (or mbarrier arrival: the mbarrier handoffs of NVIDIA's pipelines
carry no fence), and what a barrier orders a thread after reaches its later tcgen05 operations only
through a tcgen05.fence::after_thread_sync (`tcv`; mbarrier waits reach them directly).

A thread's tcgen05 operations (mma, cp, and their shared-memory reads) run on a clock of their own
(`n + t` beside the n threads'): they know what thread t knew when it issued them, and what they
did is published only by their tcgen05.commit's mbarrier, so that even thread t, or a thread
ordered with t by bar.sync, must wait on that mbarrier before touching their cells.
"""

from __future__ import annotations

from typing import Any

from .errors import DeviceFault

PENDING = 1 << 62
UNFENCED = PENDING - 1     # a completed tcgen05.ld/st no tcgen05.fence::before_thread_sync has published yet


class Clocks:
    def __init__(self, np: Any, nthreads: int, smem_bytes: int, texts: dict) -> None:
        self.np = np
        self.n = nthreads
        # thread t's tcgen05 operations run on their own (the tensor core's) clock n + t: they know what
        # t knew when it issued them, and what they did becomes known only through the mbarrier their
        # tcgen05.commit arrives on, not to t itself nor to threads t synchronizes with otherwise
        self.vc = np.eye(2 * nthreads, dtype=np.int64)
        self.own = self.vc.diagonal()       # each clock's own component (a view: vc is only updated in place)
        # what each thread's (and each tcgen05 pipeline's) tensor-memory accesses are ordered after: what
        # its mbarrier waits acquired, and what bar.sync/barrier.sync joined into its clock as of its last
        # tcgen05.fence::after_thread_sync; tensor-memory checks read this view (TensorCells._check)
        self.tcv = np.eye(2 * nthreads, dtype=np.int64)
        # (a tcgen05 pipeline knows its own completed operations only through the mbarriers of their commits:
        # its first commit's clock, 1, must not count as known from the start)
        self.tcv[np.arange(nthreads, 2 * nthreads), np.arange(nthreads, 2 * nthreads)] = 0
        self.texts = texts
        self.accum: dict[int, Any] = {}         # mbarrier -> clocks released into its current phase
        self.done: dict[int, Any] = {}          # mbarrier -> clocks of its last completed phase
        # the last reader of each shared byte per slot: 0 generic (ld), 1 async proxy (wgmma, tcgen05,
        # bulk/TMA stores), so that a generic read after an async one does not hide the async one
        self.reader = np.full((2, smem_bytes), -1, dtype=np.int64)
        self.rclock = np.zeros((2, smem_bytes), dtype=np.int64)
        self.rline = np.zeros((2, smem_bytes), dtype=np.int32)
        self.pending: list[tuple[Any, Any, int]] = []     # (owner key, byte indices, reader thread)
        self.writer = np.full(smem_bytes, -1, dtype=np.int64)    # last generic writer of each shared byte
        self.wclock = np.zeros(smem_bytes, dtype=np.int64)
        self.wline = np.zeros(smem_bytes, dtype=np.int32)
        self.tmem: "TensorCells | None" = None
        # mbarrier initializations (thread -> its clock at the latest): not yet fenced, and fenced by
        # fence.mbarrier_init.release.cluster, which a relaxed barrier.cluster.arrive then publishes
        self.inits: dict[int, int] = {}
        self.fenced_inits: dict[int, int] = {}
        # with a redundancy.Recorder active, each clock's latest stamped event (an access, a wait or arrival, an
        # init or a fence's stamp): a barrier's join is judged by the events it orders, not by bare epochs
        from . import redundancy

        self.events: Any = np.zeros(2 * nthreads, dtype=np.int64) if redundancy.ACTIVE is not None else None
        # (and, apart, each thread's latest wait on each mbarrier: only its mbarrier.inval needs them ordered)
        self.wait_events: dict[int, Any] = {}

    def mark(self, tids: Any) -> None:
        """Clocks `tids` (indices) stamp an event now (tracked only while redundancy records)."""
        if self.events is not None:
            tids = self.np.asarray(tids, dtype=self.np.int64).ravel()
            self.events[tids] = self.own[tids]

    def mark_wait(self, t: int, key: int) -> None:
        """Thread t waits on (or tests) the mbarrier at `key` now (tracked as `mark`)."""
        if self.events is not None:
            self.wait_events.setdefault(key, self.np.zeros(2 * self.n, dtype=self.np.int64))[t] = self.own[t]

    def news(self, arrived: Any) -> tuple[bool, set[int]]:
        """What joining the clocks of the threads `arrived` (a mask: a barrier's) orders one of them after that
        it does not know yet: whether an event (`mark`), and the mbarriers with a wait (`mark_wait`). Of each
        clock x, the join brings the events up to its x; where x's latest event is earlier, those up to that
        one (the epochs after it hold none)."""
        np = self.np
        a = np.flatnonzero(arrived)
        vc = self.vc[a]
        joined = vc.max(axis=0)
        if self.events is None:
            return not bool((vc >= joined).all()), set()
        new = not bool((vc >= np.minimum(joined, self.events)).all())
        return new, {key for key, waits in self.wait_events.items()
                     if not (vc >= np.minimum(joined, waits)).all()}

    # -- synchronization -----------------------------------------------------------
    def release(self, key: int, lanes: Any) -> None:
        np = self.np
        lanes = np.asarray(lanes).ravel()
        if self.tmem is not None:       # an mbarrier arrival publishes the threads' completed tcgen05.ld/st
            self.tmem.fence(lanes)
        acc = self.accum.get(key)
        joined = self.vc[lanes].max(axis=0)
        self.accum[key] = joined if acc is None else np.maximum(acc, joined)
        self.vc[lanes, lanes] += 1

    def complete(self, key: int) -> None:
        acc = self.accum.pop(key, None)
        if acc is not None:
            self.done[key] = acc

    def acquire(self, key: int, lanes: Any) -> None:
        done = self.done.get(key)
        if done is not None:
            lanes = self.np.asarray(lanes).ravel()
            self.vc[lanes] = self.np.maximum(self.vc[lanes], done)
            self.tcv[lanes] = self.np.maximum(self.tcv[lanes], done)   # mbarrier handoffs need no tcgen05 fence

    def init(self, t: int) -> int:
        """Thread t initializes an mbarrier: a new epoch of t's (what others learned of t before does not
        make it visible to them); its clock then."""
        self.vc[t, t] += 1
        self.inits[t] = int(self.vc[t, t])
        self.mark(t)
        return self.inits[t]

    def fence_inits(self, lanes: Any) -> None:
        """fence.mbarrier_init.release.cluster: the threads' initializations so far are released by their
        next (even relaxed) barrier.cluster.arrive."""
        for t in self.np.asarray(lanes).ravel().tolist():
            if t in self.inits:
                self.fenced_inits[t] = self.inits.pop(t)

    def release_inits(self, key: int, lanes: Any) -> None:
        """A relaxed arrive on `key`: it publishes the fenced initializations of the threads (thread t's
        clock at its last one, nothing else of t's)."""
        acc = self.accum.get(key)
        for t in self.np.asarray(lanes).ravel().tolist():
            clock = self.fenced_inits.pop(t, None)
            if clock is not None:
                known = self.np.zeros(2 * self.n, dtype=self.np.int64)
                known[t] = clock
                acc = known if acc is None else self.np.maximum(acc, known)
        if acc is not None:
            self.accum[key] = acc

    def barrier(self, arrived: Any, waiting: Any) -> None:
        np = self.np
        a = np.flatnonzero(arrived)
        joined = self.vc[a].max(axis=0)
        w = np.flatnonzero(waiting)
        self.vc[w] = np.maximum(self.vc[w], joined)
        self.vc[a, a] += 1

    # -- tcgen05 operations ----------------------------------------------------------
    def unit(self, owner: Any, tids: Any) -> Any:
        """The clock ids that accesses of `owner` (issued by threads `tids`) are recorded under: a
        tcgen05 operation's, which learns what its issuing thread knows now."""
        if owner is None or owner[0] != "tcgen05":
            return tids
        t = int(owner[1])
        self.vc[self.n + t] = self.np.maximum(self.vc[self.n + t], self.vc[t])
        self.tcv[self.n + t] = self.np.maximum(self.tcv[self.n + t], self.tcv[t])
        return self.np.asarray(tids) - t + self.n + t

    def tcgen05_after_sync(self, lanes: Any) -> None:
        """tcgen05.fence::after_thread_sync: the threads' later tcgen05 operations are ordered after what
        their waits and barriers ordered them after so far."""
        lanes = self.np.asarray(lanes).ravel()
        self.tcv[lanes] = self.vc[lanes]

    def tcgen05_before_sync(self, lanes: Any) -> None:
        """tcgen05.fence::before_thread_sync: the threads' completed tcgen05.ld/st become part of what their
        next arrivals and barriers publish."""
        if self.tmem is not None:
            self.tmem.fence(self.np.asarray(lanes).ravel())

    def commit(self, t: int, key: int) -> None:
        """Thread t's tcgen05.commit: its tcgen05 operations complete, then arrive on mbarrier `key`."""
        u = self.n + t
        self.vc[u] = self.np.maximum(self.vc[u], self.vc[t])
        self.tcv[u] = self.np.maximum(self.tcv[u], self.tcv[t])
        self.finish(lambda o: o == ("tcgen05", t))
        self.release(key, [u])

    def who(self, u: int) -> str:
        return f"thread {u}" if u < self.n else f"the tcgen05 operations of thread {u - self.n}"

    # -- shared-memory accesses ----------------------------------------------------
    def read(self, idx: Any, tids: Any, line: int) -> None:
        self.mark(tids)
        self.reader[0, idx] = tids
        self.rclock[0, idx] = self.own[tids]
        self.rline[0, idx] = line

    def read_pending(self, idx: Any, tid: int, line: int, owner: Any) -> None:
        tid = int(self.unit(owner, tid))
        self.reader[1, idx] = tid
        self.rclock[1, idx] = PENDING
        self.rline[1, idx] = line
        self.pending.append((owner, idx, tid))

    def finish(self, done: Any) -> None:
        """The async reads of every owner for which `done(owner)` holds are complete now, at their
        reader's current clock."""
        rest = []
        for key, idx, tid in self.pending:
            if not done(key):
                rest.append((key, idx, tid))
                continue
            still = (self.reader[1, idx] == tid) & (self.rclock[1, idx] == PENDING)
            self.rclock[1, idx[still]] = self.vc[tid, tid]
            self.mark(tid)
        self.pending = rest
        if self.tmem is not None:
            self.tmem.finish(done)

    def tensor(self, lanes: int) -> "TensorCells":
        """The cells of the tensor memories of `lanes` lanes (128 per CTA of a cluster)."""
        if self.tmem is None:
            from .ops.tcgen05 import COLUMNS

            self.tmem = TensorCells(self, lanes, COLUMNS)
        return self.tmem

    # -- generic writes of shared bytes ----------------------------------------------
    def write(self, idx: Any, tids: Any, line: int) -> None:
        self.mark(tids)
        self.writer[idx] = tids
        self.wclock[idx] = self.own[tids]
        self.wline[idx] = line

    def forget_writes(self, idx: Any) -> None:
        """Bytes written by the async proxy (TMA): ordered by their mbarrier phase, not a thread's clock."""
        self.writer[idx] = -1

    def check_after_write(self, idx: Any, tids: Any, line: int, kind: str, ix: Any = None) -> None:
        """Accesses (`kind`: read- or write-after-write) of shared bytes `idx` (indexed as `ix`: the same,
        or a slice) by threads `tids` at `line` must follow the bytes' last generic writes."""
        np = self.np
        ix = idx if ix is None else ix
        w = self.writer[ix]
        tids = _per_byte(np, tids, idx)
        bad = (w >= 0) & (w != tids)
        if not np.count_nonzero(bad):
            return
        bad &= self.vc[tids, np.maximum(w, 0)] < self.wclock[ix]
        if not np.count_nonzero(bad):
            return
        i = int(np.argmax(bad))
        b, u, wl = int(idx[i]), int(tids[i]), int(self.wline[int(idx[i])])
        raise DeviceFault(f"data race ({kind}): thread {int(w[i])} stored to shared address 0x{b:x} at line {wl} "
                          f"'{self.texts.get(wl, '?')}' and no mbarrier wait or barrier orders that store before "
                          f"this access by thread {u}", u)

    def check_write(self, idx: Any, writers: Any, line: int, what: str, ix: Any = None, generic: bool = True) -> None:
        """Writes of shared bytes `idx` (indexed as `ix`) by threads `writers` (one per byte; `what` names the
        instruction) must follow the bytes' last reads, async and (unless `generic` is False: the race checker
        knows them ordered) generic."""
        np = self.np
        ix = idx if ix is None else ix
        writers = _per_byte(np, writers, idx)
        for slot in ((1, 0) if generic else (1,)):
            r = self.reader[slot, ix]
            bad = (r >= 0) & (r != writers)
            if not np.count_nonzero(bad):
                continue
            clk = self.rclock[slot, ix]
            bad &= (clk == PENDING) | (self.vc[writers, np.maximum(r, 0)] < clk)
            if not np.count_nonzero(bad):
                continue
            i = int(np.argmax(bad))
            b, u = int(idx[i]), int(r[i])
            rl = int(self.rline[slot, b])
            if clk[i] == PENDING:
                how = (f"the asynchronous read of it by the instruction at line {rl} '{self.texts.get(rl, '?')}', "
                       f"issued by thread {u % self.n}, may still be in flight (not yet completed by its "
                       "wait_group/commit)")
            else:
                how = (f"{self.who(u)} read it at line {rl} '{self.texts.get(rl, '?')}' and no mbarrier or "
                       "barrier orders that read before this write")
            raise DeviceFault(f"data race (write-after-read): {what} at line {line} overwrites shared address "
                              f"0x{b:x}, but {how}", int(writers[i]))


def _per_byte(np: Any, tids: Any, idx: Any) -> Any:
    """`tids` (one thread, or one per byte) as one thread per byte of `idx`."""
    tids = np.asarray(tids)
    return tids if tids.shape == idx.shape else np.broadcast_to(tids, idx.shape)


class TensorCells:
    """Access history of tensor memory's 32-bit cells (lane * columns + column) for `Clocks`.

    Per cell: the last writer and the last reader, each with the thread, its clock at the access
    (PENDING while in flight), the key of the asynchronous operation still in flight (-1 once
    complete), whether the access was a warp-collective tcgen05.ld/st, and its PTX line."""

    def __init__(self, hb: Clocks, lanes: int, columns: int) -> None:
        np = hb.np
        self.hb, self.np, self.columns = hb, np, columns
        size = lanes * columns
        self.who = {a: np.full(size, -1, dtype=np.int64) for a in "wr"}
        self.clock = {a: np.zeros(size, dtype=np.int64) for a in "wr"}
        self.key = {a: np.full(size, -1, dtype=np.int64) for a in "wr"}
        self.coll = {a: np.zeros(size, dtype=bool) for a in "wr"}
        self.line = {a: np.zeros(size, dtype=np.int32) for a in "wr"}
        self.keys: dict = {}                    # owner key -> its code
        # the pipeline class of the tcgen05 operation behind each cell's last access (a code of `pipes`, -1: none
        # known): one thread's asynchronous tcgen05 operations run in issue order only in the PTX ISA's pipelined
        # pairs (`pipelined`), others need a tcgen05.commit and a wait on its mbarrier between them
        self.pipe = {a: np.full(size, -1, dtype=np.int64) for a in "wr"}
        self.pipes: dict = {}                   # class -> its code
        self.classes: list = []                 # code -> class
        self.pending: list[tuple[Any, str, Any, Any]] = []    # (owner key, "w"|"r", cells, threads)
        self.unfenced: dict[int, list] = {}     # warp -> [("w"|"r", cells, threads)] left at UNFENCED
        self.fresh = np.zeros(size, dtype=bool)     # last written by tcgen05.alloc: undefined (definedness)

    def cells(self, lanes: Any, cols: Any) -> Any:
        np = self.np
        lanes, cols = np.broadcast_arrays(np.asarray(lanes, dtype=np.int64), np.asarray(cols, dtype=np.int64))
        return (lanes * self.columns + cols).ravel()

    def forget(self, col0: int, ncols: int, lane0: int, nlanes: int) -> None:
        """Freshly allocated columns (of lanes lane0.. of one CTA's tensor memory) carry no history."""
        np = self.np
        cols = np.arange(col0, col0 + ncols)
        idx = (np.arange(lane0, lane0 + nlanes)[:, None] * self.columns + cols).ravel()
        for a in "wr":
            self.who[a][idx] = -1

    def access(self, idx: Any, tids: Any, write: bool, line: int, what: str, owner: Any = None,
               collective: bool = False, pipe: Any = None) -> None:
        """Threads `tids` (one per cell of `idx`) read or write cells `idx` with `what` at `line`; with an
        `owner`, the access stays in flight until `finish` completes that owner's accesses; `pipe`: the
        pipeline class of the tcgen05 operation (`pipelined`)."""
        np = self.np
        idx = np.asarray(idx, dtype=np.int64).ravel()
        tids = np.broadcast_to(np.asarray(tids, dtype=np.int64), idx.shape).ravel()
        code = -1 if owner is None else self.keys.setdefault(owner, len(self.keys))
        pcode = -1
        if pipe is not None:
            pcode = self.pipes.setdefault(pipe, len(self.pipes))
            if pcode == len(self.classes):
                self.classes.append(pipe)
        tids = self.hb.unit(owner, tids)
        if write:
            self._check(idx, tids, "r", code, collective, line, what, "write-after-read", pcode)
        self._check(idx, tids, "w", code, collective, line, what, "write-after-write" if write else
                    "read-after-write", pcode)
        a = "w" if write else "r"
        if write:
            self.fresh[idx] = False
        keep = np.ones(idx.size, dtype=bool)
        if not write:       # a read still in flight is kept: a later write must wait for it
            prior = self.who["r"][idx]
            keep = ~((self.clock["r"][idx] == PENDING) & (prior >= 0) & (self.key["r"][idx] != code))
        sel, t = idx[keep], tids[keep]
        self.who[a][sel] = t
        self.clock[a][sel] = PENDING if owner is not None else self.hb.vc[t, t]
        if owner is None:
            self.hb.mark(t)
        self.key[a][sel] = code
        self.pipe[a][sel] = pcode
        self.coll[a][sel] = collective
        self.line[a][sel] = line
        if owner is not None and sel.size:
            self.pending.append((owner, a, sel, t))

    def pipelined(self, first: int, then: int) -> bool:
        """Whether tcgen05 operations of pipeline classes `first` and `then` (codes), issued in that order by one
        thread, execute in that order (PTX ISA, 'Pipelined tcgen05 instructions'): mma -> mma with the same
        cta_group, accumulator and shape, and cp -> mma with the same cta_group; cp -> cp too, which NVIDIA's
        block-scaled matmul relies on (it refills a scale-factor buffer with tcgen05.cp after the mma that read
        the previous ones, no wait between). An unknown class (-1) keeps the pair ordered."""
        if first < 0 or then < 0:
            return True
        a, b = self.classes[first], self.classes[then]
        if a[0] == "mma" and b[0] == "mma":
            return a == b
        return a[0] == "cp" and b[0] in ("mma", "cp") and a[1] == b[1]

    def _check(self, idx: Any, tids: Any, a: str, code: int, collective: bool, line: int, what: str,
               kind: str, pcode: int = -1) -> None:
        np = self.np
        who = self.who[a][idx]
        # narrowed step by step to the cells not yet known ordered (most are: the same thread's)
        cand = np.flatnonzero(who >= 0)
        if cand.size == 0:
            return
        clk = self.clock[a][idx[cand]]
        pending = clk == PENDING
        w, t = who[cand], tids[cand]
        ok = np.where(pending, (self.key[a][idx[cand]] == code) & (code >= 0), w == t)
        unpiped = np.zeros(cand.size, dtype=bool)
        if pcode >= 0 and ok.any():     # one thread's tcgen05 operations: in issue order only when pipelined
            prev = self.pipe[a][idx[cand]]
            for p in np.unique(prev[ok & (prev >= 0)]).tolist():
                if not self.pipelined(p, pcode):
                    unpiped |= ok & (prev == p)
            ok &= ~unpiped
        if collective:
            ok |= ~pending & self.coll[a][idx[cand]] & (w // 32 == t // 32)
        keep = ~ok
        if not keep.any():
            return
        cand, clk, pending, w, t = cand[keep], clk[keep], pending[keep], w[keep], t[keep]
        ok = ~pending & (self.hb.tcv[t, w] >= clk)
        if ok.all():
            return
        k = int(np.argmin(ok))
        i = int(cand[k])
        c, u, w = int(idx[i]), int(tids[i]) % self.hb.n, int(who[i])
        pl = int(self.line[a][c])
        did = "wrote" if a == "w" else "read"
        if unpiped[keep][k]:
            was = self.classes[int(self.pipe[a][c])]
            how = (f"the {was[0]} of thread {w % self.hb.n} at line {pl} '{self.hb.texts.get(pl, '?')}' "
                   f"{'wrote' if a == 'w' else 'read'} it, and one thread's tcgen05 operations execute in issue "
                   "order only as the PTX ISA's pipelined pairs (mma -> mma with the same accumulator and shape, "
                   "cp -> mma, and cp -> cp): no wait on its tcgen05.commit's mbarrier orders it before this one"
                   + (" (it may still be in flight)" if pending[k] else ""))
        elif clk[k] == UNFENCED:
            how = (f"thread {w}'s {'write' if a == 'w' else 'read'} of it by the instruction at line {pl} "
                   f"'{self.hb.texts.get(pl, '?')}' completed, but no tcgen05.fence::before_thread_sync by that "
                   "thread published it before it synchronized")
        elif pending[k]:
            how = (f"thread {w % self.hb.n}'s {'write' if a == 'w' else 'read'} of it by the instruction at line {pl} "
                   f"'{self.hb.texts.get(pl, '?')}' may still be in flight (no tcgen05.commit/wait::ld/"
                   "wait::st completed it)")
        else:
            how = (f"{self.hb.who(w)} {did} it at line {pl} '{self.hb.texts.get(pl, '?')}' and no mbarrier wait or "
                   "barrier orders that access before this one")
            if self.hb.vc[t[k], w] >= clk[k]:
                how = (f"{self.hb.who(w)} {did} it at line {pl} '{self.hb.texts.get(pl, '?')}', and although a wait or "
                       "barrier orders that access before this one, no tcgen05.fence::after_thread_sync came after "
                       "it (before this tcgen05 operation)")
        raise DeviceFault(f"data race on tensor memory ({kind}): {what} by thread {u} accesses lane "
                          f"{c // self.columns} column {c % self.columns}, but {how}", u)

    def finish(self, done: Any) -> None:
        """The accesses of every owner for which `done(owner)` holds complete now, at their threads'
        current clocks."""
        rest = []
        for owner, a, idx, tids in self.pending:
            if not done(owner):
                rest.append((owner, a, idx, tids))
                continue
            still = (self.who[a][idx] == tids) & (self.clock[a][idx] == PENDING)
            if owner[0] in ("ld", "st"):    # a warp's own ld/st: published by its before_thread_sync fence
                self.clock[a][idx[still]] = UNFENCED
                self.unfenced.setdefault(int(owner[1]), []).append((a, idx[still], tids[still]))
            else:
                self.clock[a][idx[still]] = self.hb.vc[tids[still], tids[still]]
                self.hb.mark(tids[still])
            self.key[a][idx[still]] = -1
        self.pending = rest

    def fence(self, lanes: Any) -> None:
        """The completed ld/st of threads `lanes` get their threads' current clocks (before_thread_sync)."""
        np = self.np
        if not self.unfenced:
            return
        lanes = np.asarray(lanes).ravel()
        for w in np.unique(lanes // 32).tolist():
            entries = self.unfenced.pop(w, None)
            if not entries:
                continue
            fenced = np.zeros(32, dtype=bool)       # which of the warp's lanes fence
            fenced[lanes[lanes // 32 == w] % 32] = True
            rest: dict[str, list] = {}
            for a, idx, tids in entries:
                # an entry whose cell a later access took over is done with: that access has its own entry
                live = (self.who[a][idx] == tids) & (self.clock[a][idx] == UNFENCED)
                mine = fenced[tids % 32]
                now = live & mine
                if now.any():
                    self.clock[a][idx[now]] = self.hb.vc[tids[now], tids[now]]
                    self.hb.mark(tids[now])
                keep = live & ~mine
                if keep.any():
                    rest.setdefault(a, []).append((idx[keep], tids[keep]))
            # what stays is kept as one entry per kind, each cell once (its one current accessor), so that lanes
            # that never fence (a warp whose elected lane alone arrives) do not make every later fence slower
            merged = []
            for a, parts in rest.items():
                idx, first = np.unique(np.concatenate([p[0] for p in parts]), return_index=True)
                merged.append((a, idx, np.concatenate([p[1] for p in parts])[first]))
            if merged:
                self.unfenced[w] = merged
