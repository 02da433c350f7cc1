"""Data-race checking, on by default: `run_ptx(..., check_races=False)` or TILEIRAS_EMULATOR_CHECK_RACES=0
turn it off (for speed). Races between the CTAs of a grid on global memory: `grid_races.py`.

All threads of a CTA execute an instruction together, so a missing barrier never shows up
as a wrong result here; this mode reports it instead. The CTAs of a thread-block cluster run as
one state (executor.py): their threads and shared memories are checked as one, so a peer's
distributed-shared-memory store is ordered only by barrier.cluster or a cluster-scope mbarrier. Two accesses to a byte of global or
shared memory by different threads of one CTA race when no barrier completes between them
and at least one writes, unless both are atomic or strong (.relaxed/.acquire/.release/
.volatile...): the PTX memory model does not count those as data races. Local and
parameter memory are private or read-only and are not tracked.

Every byte has a shadow: the thread that last wrote it and the thread that read it (MANY
when several did), each with an epoch and the PTX line of the access; the ATOMIC bit marks
atomic and strong accesses. The epoch is one counter for the launch, bumped when a CTA
starts and whenever a barrier (bar.sync/barrier.sync/bar.red, or an mbarrier phase)
completes, so entries of earlier intervals and earlier CTAs go stale without being
cleared. Barriers with a thread count bump it too, which can hide races between threads
they do not synchronize. One reader per byte is enough: a write races with the
interval's reads unless its thread was the only reader.

The intervals count every completed mbarrier phase as a barrier for every thread. Shared
memory and tensor memory are therefore also checked with vector clocks (`happens_before.py`):
there an access must follow the last write (and a write the last reads) of its byte or cell
through waits on the mbarriers and barriers that actually publish them.

The asynchronous proxy (TMA, wgmma, tcgen05) adds two checks on shared memory:

* visibility: bytes a TMA load writes are tagged with the mbarrier its transaction
  completes on and the phase that completion ends; a thread that reads them (with ld,
  or by issuing a wgmma/tcgen05.mma/TMA store that reads them) must have seen that
  phase complete in an mbarrier wait, else the read is reported;
* proxy fences: bytes stored through the generic proxy (st, stmatrix, ...) and then
  read through the async proxy need a fence.proxy.async by the storing thread after the
  store; otherwise the read is reported.

mbarriers' lives (with ops/async_ops.py and mbarrier_order.py): a use must be ordered after
the mbarrier.init; a completion by the async proxy (a TMA load, a tcgen05.commit) after a
fence.mbarrier_init or fence.proxy.async of the initializing thread that a barrier or an
mbarrier phase orders before the issuing thread (`fenced`); an mbarrier.inval after every
other thread's last wait and arrival. An init over a still valid mbarrier, or an inval of
none, is reported with or without the checker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import DeviceFault
from .memory import GLOBAL_BASE

ATOMIC = 1 << 30           # on a shadow thread id: the access was atomic or strong
MANY = ATOMIC - 1          # a thread id no thread has: several threads
THREAD = MANY              # mask of the thread id without the ATOMIC bit

# ld/st qualifiers that make an access strong (.volatile is .relaxed.sys)
STRONG = frozenset({"volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "mmio"})


@dataclass(frozen=True)
class Site:
    """A memory instruction as the checker sees it: its PTX line, and what it does."""

    line: int
    write: bool
    strong: bool

    def does(self) -> str:
        if self.write:
            return "writes it (atomic or strong)" if self.strong else "stores to it"
        return "loads it (strong)" if self.strong else "loads it"


class Shadow:
    """Access history of every byte of one memory space. Epoch 0 is never current (a CTA's first interval is
    1): all-zero arrays, which the OS hands out lazily, so a large global heap's shadow costs nothing until
    its bytes are accessed."""

    def __init__(self, np: Any, size: int) -> None:
        self.writer = np.zeros(size, dtype=np.int32)
        self.wepoch = np.zeros(size, dtype=np.int32)
        self.wline = np.zeros(size, dtype=np.int32)
        self.reader = np.zeros(size, dtype=np.int32)
        self.repoch = np.zeros(size, dtype=np.int32)
        self.rline = np.zeros(size, dtype=np.int32)

    def grown(self, np: Any, size: int) -> "Shadow":
        out = Shadow(np, size)
        for name, old in vars(self).items():
            getattr(out, name)[:old.size] = old
        return out


class RaceChecker:
    """The shadows of one launch and the current barrier interval (`epoch`)."""

    def __init__(self, np: Any, info: list) -> None:
        self.np = np
        self.epoch = 0              # the current interval; 1 and up once a CTA starts (`new_cta`)
        # the first interval after the last barrier that every thread arrived at and waited on (`full_barrier`):
        # shared accesses of earlier intervals are ordered before every thread's later ones, so the vector-clock
        # checks (happens_before.py) of bytes last accessed before it have nothing to find
        self.full_epoch = 0
        self.shadows: dict[str, Shadow] = {}
        self.texts = {ins.line: ins.text for ins in info}
        self.seq = 0
        self.grid: Any = None       # a grid_races.GridRaces when other units of the grid run beside this one
        self.unit = 0               # this checker's unit (CTA or cluster) in `grid`

    def new_cta(self, nthreads: int, smem_bytes: int) -> None:
        """A CTA starts with fresh shared memory: forget the async-proxy state of the one before."""
        np = self.np
        self.new_interval()
        size = max(smem_bytes, 16)
        self.async_key = np.full(size, -1, dtype=np.int64)     # mbarrier a TMA write completes on
        self.any_async = False                                 # whether any byte has an async_key (a shortcut)
        self.async_need = np.zeros(size, dtype=np.int64)       # the phase count a reader must have seen
        self.async_line = np.zeros(size, dtype=np.int32)
        # bytes a cp.async tracked by a cp.async.mbarrier.arrive landed when its thread waited for it: that thread
        # (and what it synchronizes with after, its clock then) sees them as well as the phase's waiters
        self.async_owner = np.full(size, -1, dtype=np.int64)
        self.async_oclock = np.zeros(size, dtype=np.int64)
        # how many cp.async copies still in flight write each byte: any access of it meanwhile is a race
        self.cp_inflight = np.zeros(size, dtype=np.int32)
        self.any_inflight = 0
        # when the generic proxy last stored it; -1 also once the storing thread fenced that store (below)
        self.gen_seq = np.full(size, -1, dtype=np.int64)
        self.gen_tid = np.zeros(size, dtype=np.int64)
        self.gen_line = np.zeros(size, dtype=np.int32)
        self.written = np.zeros(size, dtype=bool)              # bytes some instruction wrote (definedness)
        self.nthreads = nthreads
        # the stamp of each thread's latest fence.proxy.async, barrier or mbarrier arrival, fence.mbarrier_init
        self.last_fence = np.full(nthreads, -1, dtype=np.int64)
        self.last_release = np.full(nthreads, -1, dtype=np.int64)
        self.last_init_fence = np.full(nthreads, -1, dtype=np.int64)
        # thread -> the mbarriers it initialized that none of its fences has made visible to the async proxy yet
        self.unfenced: dict[int, list] = {}
        self.seen: dict[int, Any] = {}                         # mbarrier -> phases each thread has seen
        from .happens_before import Clocks

        self.hb = Clocks(np, nthreads, size, self.texts)

    # -- the async proxy ------------------------------------------------------------
    def observe(self, key: int, lanes: Any, completed: int) -> None:
        """Threads `lanes` saw the mbarrier at shared offset `key` with `completed` phases done."""
        np = self.np
        seen = self.seen.get(key)
        if seen is None:
            seen = self.seen[key] = np.zeros(self.nthreads, dtype=np.int64)
        seen[lanes] = np.maximum(seen[lanes], completed)
        self.hb.acquire(key, lanes)

    def proxy_fence(self, lanes: Any) -> None:
        """fence.proxy.async by threads `lanes`: each one's generic stores not yet published (made after its
        latest barrier or mbarrier arrival) are fenced, so async-proxy reads of them need nothing more. A store
        published before a fence never becomes fenced (`async_read` reports it), so fencing is decided here,
        once, instead of at every read."""
        np = self.np
        self._stamp(self.last_fence, lanes)
        self._fence_inits(lanes)
        live = np.flatnonzero(self.gen_seq >= 0)
        if not live.size:
            return
        fencing = np.zeros(self.nthreads, dtype=bool)
        fencing[lanes] = True
        t = self.gen_tid[live]
        done = fencing[t] & (self.gen_seq[live] > self.last_release[t])
        self.gen_seq[live[done]] = -1

    def init_fence(self, lanes: Any) -> None:
        """fence.mbarrier_init by threads `lanes`."""
        self._stamp(self.last_init_fence, lanes)
        self._fence_inits(lanes)

    def initialized(self, tid: int, b: Any) -> None:
        """Thread `tid` initialized mbarrier `b`: the async proxy sees it only after one of tid's fences."""
        self.unfenced.setdefault(tid, []).append(b)

    def _fence_inits(self, lanes: Any) -> None:
        """A fence.mbarrier_init or fence.proxy.async by threads `lanes` (a mask or indices): each one's unfenced
        initializations are fenced at its clock now, which an async-proxy use must be ordered after (`fenced`)."""
        if not self.unfenced:
            return
        np = self.np
        lanes = np.asarray(lanes)
        tids = np.flatnonzero(lanes) if lanes.dtype == bool else lanes.ravel()
        for t in set(tids.tolist()) & self.unfenced.keys():
            for b in self.unfenced.pop(t):
                b.fence_clock = int(self.hb.own[t])
            self.hb.mark(t)

    def fenced(self, b: Any, thread: int) -> bool:
        """Whether mbarrier `b`'s initialization was fenced by its initializing thread (fence.mbarrier_init or
        fence.proxy.async) before `thread`'s use of it by the async proxy: the fence is `thread`'s own, or a
        barrier or mbarrier phase orders it before (a fence that merely ran earlier in the emulator's order of
        the warps does not count)."""
        if b.fence_clock < 0:
            return False
        return thread == b.init_by or int(self.hb.vc[thread, b.init_by]) >= b.fence_clock

    def stamp_init(self) -> int:
        """An mbarrier.init happens now: its place in the sequence of stamps."""
        self.seq += 1
        return self.seq

    def release(self, lanes: Any, key: Any = None, commit: bool = False) -> None:
        """Threads `lanes` arrive on a barrier, or on the mbarrier at shared offset `key` (`commit`: by a
        tcgen05.commit, for their tcgen05 operations): what they stored before is published."""
        self._stamp(self.last_release, lanes)
        if commit:
            self.hb.commit(int(lanes[0]), key)
        elif key is not None:
            self.hb.release(key, lanes)

    def _stamp(self, table: Any, lanes: Any) -> None:
        """Threads `lanes` (a mask or indices) do what `table` records now."""
        self.seq += 1
        table[self.np.asarray(lanes)] = self.seq

    def async_write(self, st: Any, line: int, idx: Any, tid: Any, key: Any, need: Any, owner: Any = -1,
                    oclock: Any = 0, what: str = "the TMA load") -> None:
        """A TMA load by thread `tid` writes shared bytes `idx`; readers must see phase `need` of `key` (each
        an int, or one per byte of `idx`), or (with an `owner`, per byte or one) be ordered after the owner's
        clock `oclock`."""
        tids = self.np.broadcast_to(self.np.asarray(tid), idx.shape)
        self.hb.check_write(idx, tids, line, what)
        self.check_bytes(st, Site(line, write=True, strong=False), "shared", st.shared.size, idx, tids)
        self.hb.forget_writes(idx)
        self.any_async = True
        self.async_key[idx] = key
        self.async_need[idx] = need
        self.async_line[idx] = line
        self.async_owner[idx] = owner
        self.async_oclock[idx] = oclock
        self.gen_seq[idx] = -1

    def inflight(self, st: Any, idx: Any, delta: int) -> None:
        """A cp.async that writes shared bytes `idx` is issued (`delta` 1) or lands (-1)."""
        self.np.add.at(self.cp_inflight, idx, delta)
        self.any_inflight += delta

    def _source_in_flight(self, st: Any, site: Site, idx: Any, tids: Any) -> None:
        """A store to global bytes a cp.async still in flight reads races with it (the copy reads them at some
        time before it completes)."""
        np = self.np
        if not len(idx):
            return
        first, last = int(idx.min()), int(idx.max())
        for cp in st.cp_pending:
            lo, hi = cp.src, cp.src + cp.src_size
            live = (cp.src_size > 0) & (lo <= last) & (hi > first)
            if not live.any():
                continue
            lo, hi = lo[live], hi[live]
            hit = ((idx[:, None] >= lo[None, :]) & (idx[:, None] < hi[None, :])).any(axis=1)
            if hit.any():
                i = int(np.argmax(hit))
                u = int(np.broadcast_to(tids, idx.shape)[i])
                raise DeviceFault(f"data race (write-after-read): the cp.async at line {cp.line} "
                                  f"'{self.texts.get(cp.line, '?')}' reads {_address('global', int(idx[i]))} and "
                                  f"thread {u} {site.does()} before the copy is complete (no cp.async.wait_group or "
                                  "mbarrier wait for it between)", u)

    def _in_flight(self, st: Any, site: Site, idx: Any, tids: Any, ix: Any) -> None:
        """An access of bytes a cp.async still in flight writes races with it: no wait the emulator has not
        yet run can order it after the copy (the copy lands, here, once a wait needs it), and it is later
        than the issue."""
        np = self.np
        busy = self.cp_inflight[ix] > 0
        if not np.count_nonzero(busy):
            return
        i = int(np.argmax(busy))
        b, u = int(idx[i]), int(np.broadcast_to(tids, idx.shape)[i])
        line0, kind = -1, "read-after-write" if not site.write else "write-after-write"
        for cp in st.cp_pending:
            if np.isin(b, (cp.dst[:, None] + np.arange(cp.size)).ravel()):
                line0 = cp.line
                break
        raise DeviceFault(f"data race ({kind}): the cp.async at line {line0} '{self.texts.get(line0, '?')}' "
                          f"writes {_address('shared', b)} and thread {u} {site.does()} before the copy is "
                          "complete (no cp.async.wait_group or mbarrier wait for it between)", u)

    def async_read(self, st: Any, line: int, idx: Any, tids: Any, what: str, owner: Any = None,
                   copy: bool = False) -> None:
        """Shared bytes `idx` read through the async proxy by an instruction the threads `tids` issued;
        with an `owner`, the read stays in flight until `hb.finish` completes that owner's reads."""
        np = self.np
        idx = np.asarray(idx, dtype=np.int64).ravel()
        issuers = np.unique(np.asarray(tids))
        tid = int(issuers[0])
        keys = self.async_key[idx]
        for key in np.unique(keys[keys >= 0]).tolist():     # the issuer that has seen the fewest phases
            seen = self.seen.get(key)
            worst = int(issuers[int(np.argmin(seen[issuers]))]) if seen is not None else tid
            sel = idx[keys == key]
            self._visible(st, line, sel, np.full(sel.size, worst), f"issues {what}, which reads it,")
        unfenced = self.gen_seq[idx] >= 0      # generic stores their threads did not fence before publishing
        if unfenced.any():
            b = int(idx[int(np.argmax(unfenced))])
            line0 = int(self.gen_line[b])
            raise DeviceFault(f"missing fence.proxy.async: thread {int(self.gen_tid[b])} stored to "
                              f"{_address('shared', b)} at line {line0} '{self.texts.get(line0, '?')}' through "
                              f"the generic proxy and {what} reads it through the async proxy with no "
                              "fence.proxy.async by that thread before it published the store", tid)
        self.check_bytes(st, Site(line, write=False, strong=False), "shared", st.shared.size, idx,
                         np.full(idx.size, tid), record=owner is None, copy=copy)
        if owner is not None:
            self.hb.read_pending(idx, tid, line, owner)

    def mark_written(self, idx: Any) -> None:
        """Shared bytes `idx` were written by an instruction the checks above do not see (mbarrier.init)."""
        self.written[idx] = True

    def _defined(self, st: Any, idx: Any, tids: Any, site: Site, ix: Any = None) -> None:
        """Shared memory starts undefined: reading a byte no instruction wrote is reported (as a race when a
        cp.async still in flight is to write it)."""
        np = self.np
        ok = self.written[idx if ix is None else ix]
        if np.count_nonzero(ok) == ok.size:
            return
        i = int(np.argmax(~ok))
        for cp in st.cp_pending:
            if np.isin(idx[i], cp.dst).any():
                raise DeviceFault(f"data race (read-after-write): the cp.async at line {cp.line} "
                                  f"'{self.texts.get(cp.line, '?')}' writes {_address('shared', idx[i])} and thread "
                                  f"{int(tids[i])} {site.does()} before the copy is complete (no cp.async.wait_group "
                                  "or mbarrier wait for it between)", int(tids[i]))
        raise DeviceFault(f"read of undefined shared memory: thread {int(tids[i])} {site.does()} at "
                          f"{_address('shared', idx[i])}, which no instruction wrote", int(tids[i]))

    def _visible(self, st: Any, line: int, idx: Any, tids: Any, what: str, ix: Any = None) -> None:
        np = self.np
        if not self.any_async:
            return
        keys = self.async_key[idx if ix is None else ix]
        pending = keys >= 0
        if not np.count_nonzero(pending):
            return
        for key in np.unique(keys[pending]).tolist():
            sel = np.flatnonzero(keys == key)
            seen = self.seen.get(key)
            have = seen[tids[sel]] if seen is not None else np.zeros(sel.size, dtype=np.int64)
            bad = have < self.async_need[idx[sel]]
            if bad.any():
                owner = self.async_owner[idx[sel]]
                mine = bad & (owner >= 0)
                if mine.any():      # the owner waited for its copies: what it is ordered before sees them
                    bad &= ~(mine & (self.hb.vc[tids[sel], np.maximum(owner, 0)] >= self.async_oclock[idx[sel]]))
            if bad.any():
                i = int(sel[int(np.argmax(bad))])
                b = int(idx[i])
                line0 = int(self.async_line[b])
                raise DeviceFault(f"read before the mbarrier wait: {_address('shared', b)} is written by the TMA "
                                  f"load at line {line0} '{self.texts.get(line0, '?')}', which completes phase "
                                  f"{int(self.async_need[b]) - 1} of the mbarrier at shared address 0x{key:x}, and "
                                  f"thread {int(tids[i])} {what} without having waited for that phase",
                                  int(tids[i]))

    def new_interval(self) -> None:
        """A barrier completed or a CTA starts: earlier accesses cannot race with later ones."""
        self.epoch += 1

    def full_barrier(self) -> None:
        """A barrier that every thread arrived at and waited on completes now (before `new_interval`): each
        thread's clock now covers every thread's accesses so far (`Clocks.barrier`)."""
        self.full_epoch = self.epoch + 1

    def check(self, st: Any, site: Site, parts: list, lanes: Any, nbytes: int) -> None:
        """Check and record an access of `nbytes` at each lane's resolved address (`spaces.resolve` parts)."""
        np = self.np
        cols = _COLS.get(nbytes)
        if cols is None:
            cols = _COLS[nbytes] = np.arange(nbytes)
        for sel, buf, _, offs in parts:
            space = "shared" if buf is st.shared else "global" if buf is st.mem.buf else None
            if space is None:
                continue
            tids = lanes if sel is None else lanes[sel]
            tids = tids.astype(np.int32, copy=False)
            if nbytes == 1:
                self.check_bytes(st, site, space, buf.size, offs, tids)
            else:
                self.check_bytes(st, site, space, buf.size, (offs[:, None] + cols).ravel(), np.repeat(tids, nbytes))

    # The checks below run for every memory instruction: each numpy call costs microseconds whatever its size,
    # so they test for "nothing to check" (np.count_nonzero, the cheapest test) before gathering more.
    def check_bytes(self, st: Any, site: Site, space: str, size: int, idx: Any, tids: Any,
                    record: bool = True, copy: bool = False) -> None:
        """Check and record accesses of single bytes `idx` of `space` (`size` bytes) by threads `tids`
        (`record`: a shared read's clock; an async read in flight is recorded by `async_read`; `copy`: the
        read copies the bytes on (tcgen05.cp), undefined ones included)."""
        ix = span(self.np, idx)     # how the shadows are indexed: a slice where the bytes are consecutive
        if space == "global" and self.grid is not None and len(idx):
            self.grid.access(self.unit, site.write, site.strong, site.line, idx, int(tids.flat[0]), size,
                             site.does(), ix)
        sh = self.shadows.get(space)
        if sh is None or sh.writer.size < size:
            sh = self.shadows[space] = Shadow(self.np, size) if sh is None else sh.grown(self.np, size)
        tids = tids.astype(self.np.int32, copy=False)
        self.hb.mark(tids)     # (global accesses too: a barrier orders them, though no clock checks them)
        if self.any_inflight:
            if space == "shared":
                self._in_flight(st, site, idx, tids, ix)
            elif site.write and st.cp_pending:
                self._source_in_flight(st, site, idx, tids)
        we = sh.wepoch[ix]      # each byte's last write's interval (read once: the checks below share it)
        if site.write:
            # (`we` may be a view of the shadow, which the write updates: look at it first)
            recent = space == "shared" and not site.strong and self._recent(we)
            self._write(st, site, space, sh, idx, tids, ix, we)
            if space == "shared":       # the generic proxy's store (async_write overrides it for TMA)
                self.written[ix] = True
                if not site.strong:     # atomics and strong stores do not race with each other
                    self.hb.check_write(idx, tids, site.line, "the store", ix, self._recent(sh.repoch[ix]))
                    if recent:
                        self.hb.check_after_write(idx, tids, site.line, "write-after-write", ix)
                    self.hb.write(ix, tids, site.line)
                self.seq += 1
                self.gen_seq[ix] = self.seq
                self.gen_tid[ix] = tids
                self.gen_line[ix] = site.line
                self.async_key[ix] = -1
        else:
            if space == "shared":
                if not copy:
                    self._defined(st, idx, tids, site, ix)
                self._visible(st, site.line, idx, tids, site.does(), ix)
            self._read(st, site, space, sh, idx, tids, ix, we)
            if space == "shared" and not site.strong:   # what the intervals let through: ordered by waits?
                if self._recent(we):
                    self.hb.check_after_write(idx, tids, site.line, "read-after-write", ix)
                if record:
                    self.hb.read(ix, tids, site.line)

    def _recent(self, epochs: Any) -> bool:
        """Whether some of the bytes whose last accesses' intervals are `epochs` (a shadow's wepoch or repoch
        values) were accessed since the last full barrier. A byte's last generic write (read) in the vector
        clocks is never later than its last write (read) here: where all are earlier, the clocks order them
        before any thread's access now."""
        return self.full_epoch == 0 or bool(self.np.count_nonzero(epochs >= self.full_epoch))

    def _read(self, st: Any, site: Site, space: str, sh: Shadow, idx: Any, tids: Any, ix: Any, we: Any) -> None:
        np = self.np
        epoch = self.epoch
        wcur = we == epoch
        if np.count_nonzero(wcur):
            w = sh.writer[ix]
            raw = wcur & ((w & THREAD) != tids)
            if site.strong:
                raw &= (w & ATOMIC) == 0
            self._report(st, site, space, raw, idx, tids, w, sh.wline, "wrote", "read-after-write")
        code = tids | ATOMIC if site.strong else tids
        rcur = sh.repoch[ix] == epoch
        if np.count_nonzero(rcur):
            cur = np.where(rcur, sh.reader[ix], code)
            # the same thread keeps its id (plain if either read was); another thread makes it MANY
            merged = np.where((cur & THREAD) == tids, cur & code, MANY | (cur & code & ATOMIC))
        else:
            merged = code
        sh.reader[ix] = merged
        if ix is idx:       # (a slice names each byte once)
            final = sh.reader[idx]
            clash = final != merged          # different threads of this instruction read the byte
            if np.count_nonzero(clash):
                sh.reader[idx[clash]] = MANY | (final[clash] & merged[clash] & ATOMIC)
        sh.repoch[ix] = epoch
        sh.rline[ix] = site.line

    def _write(self, st: Any, site: Site, space: str, sh: Shadow, idx: Any, tids: Any, ix: Any, we: Any) -> None:
        np = self.np
        epoch = self.epoch
        written = we == epoch
        any_written = np.count_nonzero(written)
        if any_written:
            w = sh.writer[ix]
            waw = written & ((w & THREAD) != tids)
            if site.strong:
                waw &= (w & ATOMIC) == 0
            self._report(st, site, space, waw, idx, tids, w, sh.wline, "wrote", "write-after-write")
        rcur = sh.repoch[ix] == epoch
        if np.count_nonzero(rcur):
            r = sh.reader[ix]
            war = rcur & ((r & THREAD) != tids)
            if site.strong:
                war &= (r & ATOMIC) == 0
            self._report(st, site, space, war, idx, tids, r, sh.rline, "read", "write-after-read")
        if site.strong and any_written:
            # the thread's own plain store stays recorded: other threads' atomics race with it
            new = np.where(written & (w == tids), tids,
                           np.where(written & ((w & THREAD) != tids), MANY | ATOMIC, tids | ATOMIC))
        elif site.strong:
            new = tids | ATOMIC
        else:
            new = tids
        sh.writer[ix] = new
        if ix is idx:       # (a slice names each byte once)
            final = sh.writer[idx]
            clash = final != new             # different threads of this instruction wrote the byte
            if np.count_nonzero(clash):
                if not site.strong:
                    i = int(np.argmax(clash))
                    raise DeviceFault(f"data race (write-after-write): threads {int(final[i])} and {int(tids[i])} "
                                      f"both store to {_address(space, idx[i])} in one instruction", int(tids[i]))
                sh.writer[idx[clash]] = MANY | ATOMIC
        sh.wepoch[ix] = epoch
        sh.wline[ix] = site.line

    def _report(self, st: Any, site: Site, space: str, bad: Any, idx: Any, tids: Any, others: Any,
                lines: Any, did: str, kind: str) -> None:
        if not self.np.count_nonzero(bad):
            return
        i = int(self.np.argmax(bad))
        other = int(others[i]) & THREAD
        line = int(lines[idx[i]])
        at = f"line {line} '{self.texts.get(line, '?')}'"
        who, at = ("several threads", f"(the last at {at})") if other == MANY else (f"thread {other}", f"at {at}")
        raise DeviceFault(f"data race ({kind}): {who} {did} {_address(space, idx[i])} {at} and, with no barrier "
                          f"between, thread {int(tids[i])} {site.does()}", int(tids[i]))


_COLS: dict[int, Any] = {}      # np.arange(n) of the byte columns of an n-byte access
SPAN_MIN = 256                  # accesses of fewer bytes are indexed as they are


def span(np: Any, idx: Any) -> Any:
    """slice(lo, lo + k) when the k byte indices `idx` are lo, lo + 1, ... (a large access: a warp's vector
    loads, a TMA box's rows), else `idx`: a slice reads shadows without gathering and names each byte once."""
    k = idx.size
    if k < SPAN_MIN:
        return idx
    lo = int(idx[0])
    if int(idx[-1]) - lo != k - 1 or np.count_nonzero(np.diff(idx) != 1):
        return idx
    return slice(lo, lo + k)


def _address(space: str, byte: Any) -> str:
    return f"{space} address 0x{int(byte) + (GLOBAL_BASE if space == 'global' else 0):x}"
