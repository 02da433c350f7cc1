"""Vector clocks for the asynchronous pipelines (part of the race checker, one CTA at a time).

The interval checker in `races.py` treats every completed barrier or mbarrier phase as ordering
everything before it with everything after it, which is right for bar.sync but too generous for
the point-to-point handshakes of a pipeline: a consumer that reads a stage after releasing it, or
that releases it while its wgmma may still be reading it, is ordered with the producer's next TMA
load only by the schedule this emulator happened to pick. So mbarriers and CTA barriers also carry
vector clocks (thread t's clock of thread u: `vc[t, u]`):

* an arrive (mbarrier.arrive, tcgen05.commit, a TMA's complete_tx) releases the thread's clock
  into the barrier's current phase, then ticks the thread's own clock;
* a wait that sees a phase complete acquires the clocks released into that phase;
* bar.sync/bar.arrive join the clocks of the arriving threads into the waiting ones.

Every shared byte remembers its last reader and the reader's clock at the read. Reads through the
async proxy are *pending* until the instruction that completes them (wgmma.wait_group for wgmma,
the issuing thread's next tcgen05.commit for tcgen05.mma). A TMA load that overwrites a byte, or a
generic store over a pending read, must be ordered after that read (`vc[writer, reader] >= clock`),
otherwise it is reported.
"""

from __future__ import annotations

from typing import Any

from .errors import DeviceFault

PENDING = 1 << 62


class Clocks:
    def __init__(self, np: Any, nthreads: int, smem_bytes: int, texts: dict) -> None:
        self.np = np
        self.vc = np.eye(nthreads, dtype=np.int64)
        self.texts = texts
        self.accum: dict[int, Any] = {}         # mbarrier -> clocks released into its current phase
        self.done: dict[int, Any] = {}          # mbarrier -> clocks of its last completed phase
        self.reader = np.full(smem_bytes, -1, dtype=np.int64)
        self.rclock = np.zeros(smem_bytes, dtype=np.int64)
        self.rline = np.zeros(smem_bytes, dtype=np.int32)
        self.pending: list[tuple[Any, Any, int]] = []     # (owner key, byte indices, reader thread)

    # -- synchronization -----------------------------------------------------------
    def release(self, key: int, lanes: Any) -> None:
        np = self.np
        lanes = np.asarray(lanes).ravel()
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

    def barrier(self, arrived: Any, waiting: Any) -> None:
        np = self.np
        a = np.flatnonzero(arrived)
        joined = self.vc[a].max(axis=0)
        w = np.flatnonzero(waiting)
        self.vc[w] = np.maximum(self.vc[w], joined)
        self.vc[a, a] += 1

    # -- shared-memory accesses ----------------------------------------------------
    def read(self, idx: Any, tids: Any, line: int) -> None:
        self.reader[idx] = tids
        self.rclock[idx] = self.vc[tids, tids]
        self.rline[idx] = line

    def read_pending(self, idx: Any, tid: int, line: int, owner: Any) -> None:
        self.reader[idx] = tid
        self.rclock[idx] = PENDING
        self.rline[idx] = line
        self.pending.append((owner, idx, tid))

    def finish(self, done: Any) -> None:
        """The async reads of every owner for which `done(owner)` holds are complete now, at their
        reader's current clock."""
        rest = []
        for key, idx, tid in self.pending:
            if not done(key):
                rest.append((key, idx, tid))
                continue
            still = (self.reader[idx] == tid) & (self.rclock[idx] == PENDING)
            self.rclock[idx[still]] = self.vc[tid, tid]
        self.pending = rest

    def check_write(self, idx: Any, writers: Any, line: int, what: str, pending_only: bool) -> None:
        """Writes of shared bytes `idx` by threads `writers` (one per byte; `what` names the instruction)
        must follow the bytes' last reads."""
        np = self.np
        r = self.reader[idx]
        clk = self.rclock[idx]
        other = (r >= 0) & (r != writers)
        if pending_only:
            bad = other & (clk == PENDING)
        else:
            bad = other & ((clk == PENDING) | (self.vc[writers, np.maximum(r, 0)] < clk))
        if not bad.any():
            return
        i = int(np.argmax(bad))
        b, u = int(idx[i]), int(r[i])
        writer = int(np.broadcast_to(writers, idx.shape)[i])
        rl = int(self.rline[b])
        if clk[i] == PENDING:
            how = (f"the asynchronous read of it by the instruction at line {rl} '{self.texts.get(rl, '?')}', "
                   f"issued by thread {u}, may still be in flight (not yet completed by its wait_group/commit)")
        else:
            how = (f"thread {u} read it at line {rl} '{self.texts.get(rl, '?')}' and no mbarrier or barrier "
                   "orders that read before this write")
        raise DeviceFault(f"data race (write-after-read): {what} at line {line} overwrites shared address "
                          f"0x{b:x}, but {how}", writer)
