"""Asynchronous copies (cp.async + commit/wait groups) and mbarriers.

cp.async checks its addresses when issued but moves the data only when the
issuing thread waits for its group (cp.async.wait_group/wait_all) or exits, or
when an mbarrier's phase cannot complete without a cp.async.mbarrier.arrive
that tracks it, so a kernel that reads the destination without waiting sees
stale data here too (and the race checker reports any access of a byte a copy
in flight writes).

cp.async.mbarrier.arrive arrives on the mbarrier only once all the thread's
earlier copies are complete (PTX ISA): the arrive-on is recorded as a
`CpArrival` and fires when those copies land, as late as the emulator can make
it (`force_cp_arrivals`: only when no thread can run otherwise), in the phase
current then. Without .noinc the pending count is incremented at once, so the
phase it was issued in waits for it (net zero change). Its copies' bytes are
ordered by that phase (readers must have seen it), or, where the thread itself
waited for them, also by the thread's clock after its wait; the arrive-on
publishes the thread's clock as of the instruction, not what it did after.

An mbarrier's state (expected count, pending arrivals, transaction bytes,
phase) is kept beside the 8-byte object in shared memory, keyed by its
address. Waits (try_wait, test_wait) block until the awaited phase completes;
the scheduler runs other threads meanwhile (see `executor.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import DeviceFault
from ..mbarrier_order import check_inval, note_arrival, note_async, note_wait
from ..parser import Imm, Instr
from ..program import K_OP, K_WAIT, Decoder, Mods, bad
from ..races import Site
from .. import redundancy, spaces
from .common import lanes_of
from .memory import _space, address


def _np() -> Any:
    import numpy as np

    return np


# --- cp.async -------------------------------------------------------------------

@dataclass
class PendingCopy:
    lanes: Any        # threads that issued it
    group: Any        # their open group number at issue
    dst: Any          # shared byte offsets
    src: Any          # global byte offsets (into the heap buffer)
    size: int
    src_size: Any     # bytes actually read per lane (the rest is zero-filled)
    line: int         # of the cp.async, for the race checker
    vc: Any = None    # the issuing threads' vector clocks at issue (race checker): the bytes are written
                      # at some time between issue and landing, so the landing checks the issue-time clocks
    seq: Any = None   # each lane's copy number (CTAState.cp_issued after it): what a CpArrival tracks


def _cp_async(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    if ins.mods[:1] == ("bulk",):
        return _cp_async_bulk(dec, Instr(ins.opcode, ins.mods[1:], ins.operands, ins.guard, ins.line, ins.text))
    if ins.mods and ins.mods[0] in ("commit_group", "wait_group", "wait_all", "mbarrier"):
        return _cp_async_control(dec, ins)
    mods = Mods(ins)
    level = mods.need(("ca", "cg"), ".ca or .cg")
    del level
    dst_space = mods.one(("shared", "shared::cta"))
    src_space = mods.one(("global",))
    mods.ignore(("L2::cache_hint", "L2::64B", "L2::128B", "L2::256B"))
    mods.done()
    if dst_space is None or src_space is None:
        raise bad(ins, "cp.async copies .shared <- .global")
    ops = list(ins.operands)
    if len(ops) < 3 or not isinstance(ops[2], Imm) or ops[2].value not in (4, 8, 16):
        raise bad(ins, "expected [dst], [src], cp-size (4, 8 or 16)")
    size = ops[2].value
    _, dst = address(dec, ops[0], "shared", ins)
    _, src = address(dec, ops[1], "global", ins)
    src_size = None
    ignore = None
    if len(ops) >= 4:
        extra = ops[3]
        idx = dec.reg_of(extra, ins)
        if idx is not None and dec.prog.reg_bits[idx] == 1:
            ignore = dec.reader(extra, "pred", ins)
        else:
            src_size = dec.reader(extra, "u32", ins)

    def fn(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        d = np.asarray(dst(st)).astype(np.uint64)
        s = np.asarray(src(st)).astype(np.uint64)
        d = np.full(lanes.size, d) if d.ndim == 0 else d[lanes]
        s = np.full(lanes.size, s) if s.ndim == 0 else s[lanes]
        n_src = np.full(lanes.size, size, dtype=np.int64)
        if src_size is not None:
            v = np.asarray(src_size(st)).astype(np.int64)
            n_src = np.minimum(np.full(lanes.size, v) if v.ndim == 0 else v[lanes], size)
        if ignore is not None:
            v = np.asarray(ignore(st))
            n_src = np.where(np.full(lanes.size, v) if v.ndim == 0 else v[lanes], 0, n_src)
        (_, _, _, doffs), = spaces.resolve(st, "shared", d, lanes, size, size)
        reading = n_src > 0
        soffs = np.zeros(lanes.size, dtype=np.int64)
        if reading.any():
            sel = np.flatnonzero(reading)
            (_, _, _, so), = spaces.resolve(st, "global", s[sel], lanes[sel], int(n_src[sel].max()),
                                            min(size, 16) if (n_src[sel] == size).all() else 1)
            soffs[sel] = so
        vc = None
        if st.races is not None:
            vc = st.races.hb.vc[lanes].copy()
            st.races.inflight(st, (doffs[:, None] + np.arange(size)).ravel(), 1)
        st.cp_issued[lanes] += 1
        st.cp_pending.append(PendingCopy(lanes, st.cp_committed[lanes].copy(), doffs, soffs, size, n_src, ins.line,
                                         vc, st.cp_issued[lanes].copy()))

    return (K_OP, fn, None)


def _cp_async_bulk(dec: Decoder, ins: Instr) -> Any:
    """Bulk copies (not the tensor/TMA forms): done when issued; an mbarrier operand then gets
    complete_tx(size); bulk groups (commit_group/wait_group) are therefore always complete."""
    np = _np()
    if ins.mods and ins.mods[0] == "tensor":
        from .tma import bulk_tensor

        return bulk_tensor(dec, ins, Mods(ins))
    mods = Mods(ins)
    if ins.mods[:2] == ("prefetch", "tensor"):     # an L2 prefetch: no architectural effect
        mods.ignore(("prefetch", "tensor", "1d", "2d", "3d", "4d", "5d", "L2", "global", "tile", "im2col",
                     "L2::cache_hint"))
        mods.done()
        return (K_OP, lambda st, m: None, None)
    if mods.flag("commit_group"):
        mods.done()

        def commit(st: Any, m: Any) -> None:
            st.bulk_committed[lanes_of(st, m)] += 1

        return (K_OP, commit, None)
    if mods.flag("wait_group"):
        mods.flag("read")
        mods.done()
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise bad(ins, "expected an immediate group count")
        keep = ins.operands[0].value

        def wait(st: Any, m: Any) -> None:
            if st.races is not None:    # the retired bulk groups' shared-memory reads are complete
                for lane in lanes_of(st, m).tolist():
                    done = int(st.bulk_committed[lane]) - keep
                    st.races.hb.finish(lambda o, lane=lane, done=done: o[0] == "bulk" and o[1] == lane and
                                       o[2] < done)

        return (K_OP, wait, None)
    if mods.flag("prefetch"):
        mods.ignore(("L2", "global", "L2::cache_hint"))
        mods.done()
        return (K_OP, lambda st, m: None, None)
    spaces_ = [m for m in ins.mods if m in ("shared::cluster", "shared::cta", "global")]
    if len(spaces_) != 2:
        raise bad(ins, "expected a destination and a source state space")
    for s in spaces_:
        mods.flag(s)
    with_mbar = mods.flag("mbarrier::complete_tx::bytes")
    mods.flag("bulk_group")
    mods.ignore(("L2::cache_hint",))
    if mods.flag("multicast::cluster"):
        raise bad(ins, "multicast bulk (non-tensor) copies are not supported by the emulator")
    mods.done()
    dst_space, src_space = (spaces.SPACE_ALIASES[s] for s in spaces_)
    ops = list(ins.operands)
    _, dst = address(dec, ops[0], dst_space, ins)
    _, src = address(dec, ops[1], src_space, ins)
    size = dec.reader(ops[2], "u32", ins)
    mbar = address(dec, ops[3], "shared", ins)[1] if with_mbar else None
    reads, writes = Site(ins.line, write=False, strong=False), Site(ins.line, write=True, strong=False)

    def fn(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        for lane in lanes.tolist():
            one = np.array([lane], dtype=np.int64)

            def at(reader: Any) -> int:
                v = np.asarray(reader(st))
                return int(v if v.ndim == 0 else v[lane])

            n = at(size)
            if n % 16:
                raise DeviceFault(f"cp.async.bulk size {n} is not a multiple of 16", lane)
            d, s = at(dst), at(src)
            if n:
                src_parts = spaces.resolve(st, src_space, np.array([s], np.uint64), one, n, 16)
                dst_parts = spaces.resolve(st, dst_space, np.array([d], np.uint64), one, n, 16)
                (_, sbuf, _, so), = src_parts
                (_, dbuf, _, do), = dst_parts
                if st.races is not None:
                    if sbuf is st.shared:       # read by the async proxy, until the bulk group retires
                        st.races.async_read(st, ins.line, int(so[0]) + np.arange(n), one,
                                            f"the bulk copy at line {ins.line}",
                                            ("bulk", lane, int(st.bulk_committed[lane])))
                    else:
                        st.races.check(st, reads, src_parts, one, n)
                    if dbuf is st.shared and mbar is not None:
                        key = int(_mbar_keys(st, mbar, one, None, "shared")[0])
                        st.races.async_write(st, ins.line, int(do[0]) + np.arange(n), lane, key,
                                             _get(st, key, lane).phase + 1)
                    else:
                        st.races.check(st, writes, dst_parts, one, n)
                data = sbuf[int(so[0]):int(so[0]) + n].copy()
                dbuf[int(do[0]):int(do[0]) + n] = data
            if mbar is not None:
                key = int(_mbar_keys(st, mbar, one, None, "shared")[0])
                tx_done(st, _get(st, key, lane), n, ins)

    return (K_OP, fn, None)


def complete_copies(st: Any, lanes_mask: Any, keep_newest: int, upto: Any = None) -> list:
    """Finish the copies of the threads in `lanes_mask` except their `keep_newest` newest committed groups
    (-1: finish everything, including the open group), and (`upto`, per thread) only those numbered up to
    upto[thread]; the finished ones as (copy, lane positions). See `land_copies` for the arrive-ons."""
    np = _np()
    remaining = []
    landed = []
    for pc in st.cp_pending:
        mine = lanes_mask[pc.lanes]
        if keep_newest >= 0:
            mine &= pc.group < st.cp_committed[pc.lanes] - keep_newest
        if upto is not None:
            mine &= pc.seq <= upto[pc.lanes]
        if mine.any():
            sel = np.flatnonzero(mine)
            _copy(st, pc, sel)
            landed.append((pc, sel))
            if not mine.all():
                rest = np.flatnonzero(~mine)
                remaining.append(PendingCopy(pc.lanes[rest], pc.group[rest], pc.dst[rest], pc.src[rest], pc.size,
                                             pc.src_size[rest], pc.line, None if pc.vc is None else pc.vc[rest],
                                             pc.seq[rest]))
        else:
            remaining.append(pc)
    st.cp_pending = remaining
    return landed


UNSEEN = 1 << 62    # the phase a tracked copy's bytes need until its arrive-on fires: none yet


@dataclass
class CpArrival:
    """The arrive-ons of one execution of cp.async.mbarrier.arrive, one per lane, each waiting for the copies its
    thread issued up to then (numbered up to `upto`)."""
    lanes: Any
    keys: Any         # each lane's mbarrier
    upto: Any
    vc: Any           # the threads' clocks at the instruction (race checker): what the arrive-on publishes
    ins: Instr
    fired: Any
    chunks: list = field(default_factory=list)    # (shared bytes its copies landed, lane position per byte)


def land_copies(st: Any, lanes_mask: Any, keep_newest: int, upto: Any = None, owned: bool = True) -> list:
    """`complete_copies`, then the arrive-ons of cp.async.mbarrier.arrive whose copies are all complete fire.
    The bytes of copies such an arrive-on tracks are ordered by its phase; `owned`: the issuing threads wait
    for them here (wait_group, wait_all, exit), so what is ordered after them now sees them too."""
    landed = complete_copies(st, lanes_mask, keep_newest, upto)
    if st.cp_arrivals:
        if landed:
            _track(st, landed, owned)
        _fire_ready(st)
    return landed


def _track(st: Any, landed: list, owned: bool) -> None:
    np = _np()
    claimed = [np.zeros(sel.size, dtype=bool) for _, sel in landed]
    for r in st.cp_arrivals:
        pos = np.full(st.n, -1, dtype=np.int64)
        open_ = np.flatnonzero(~r.fired)
        pos[r.lanes[open_]] = open_
        for (pc, sel), done in zip(landed, claimed):
            p = pos[pc.lanes[sel]]
            tr = (p >= 0) & ~done & (pc.seq[sel] <= r.upto[np.maximum(p, 0)])
            if not tr.any():
                continue
            done |= tr
            if st.races is None:
                continue
            rows = sel[tr]
            idx = (pc.dst[rows][:, None] + np.arange(pc.size)).ravel()
            tids = np.repeat(pc.lanes[rows], pc.size)
            pp = np.repeat(p[tr], pc.size)
            hb = st.races.hb
            owner: Any = -1
            oclock: Any = 0
            if owned:       # (a new clock value: what learned of the thread before its wait does not cover it)
                who = np.unique(pc.lanes[rows])
                hb.vc[who, who] += 1
                owner, oclock = tids, hb.own[tids]
            st.races.async_write(st, pc.line, idx, tids, r.keys[pp], UNSEEN, owner, oclock, what="the cp.async")
            r.chunks.append((idx, pp))


def _fire_ready(st: Any) -> None:
    """Fire the arrive-ons whose threads have no tracked copy in flight any more."""
    np = _np()
    oldest = np.full(st.n, np.iinfo(np.int64).max, dtype=np.int64)
    for pc in st.cp_pending:
        np.minimum.at(oldest, pc.lanes, pc.seq)
    for r in list(st.cp_arrivals):
        ready = ~r.fired & (oldest[r.lanes] > r.upto)
        for i in np.flatnonzero(ready).tolist():
            r.fired[i] = True
            _fire(st, r, i)
    st.cp_arrivals = [r for r in st.cp_arrivals if not r.fired.all()]


def _fire(st: Any, r: CpArrival, i: int) -> None:
    np = _np()
    t, key = int(r.lanes[i]), int(r.keys[i])
    if st.races is None:
        phase = _arrive(st, key, 1, t, release=False, ins=r.ins)
    else:   # it publishes what the thread did before the instruction, in the phase it arrives in
        races = st.races
        races._stamp(races.last_release, [t])
        acc = races.hb.accum.get(key)
        races.hb.accum[key] = r.vc[i].copy() if acc is None else np.maximum(acc, r.vc[i])
        now = races.hb.vc[t].copy()
        races.hb.vc[t] = r.vc[i]      # (the arrival is the instruction's, for mbarrier.inval's check)
        try:
            phase = _arrive(st, key, 1, t, release=False, ins=r.ins)
        finally:
            races.hb.vc[t] = now
    redundancy.cp_arrival(st, t, key, phase + 1)
    if st.races is not None:
        for idx, pp in r.chunks:
            b = idx[pp == i]
            b = b[(st.races.async_key[b] == key) & (st.races.async_need[b] == UNSEEN)]
            st.races.async_need[b] = phase + 1


def force_cp_arrivals(st: Any) -> None:
    """No thread can run: the copies the pending cp.async.mbarrier.arrive arrive-ons track complete now (the
    latest they can), and the arrive-ons fire."""
    np = _np()
    upto = np.full(st.n, -1, dtype=np.int64)
    for r in st.cp_arrivals:
        open_ = ~r.fired
        np.maximum.at(upto, r.lanes[open_], r.upto[open_])
    land_copies(st, upto >= 0, -1, upto, owned=False)


def _copy(st: Any, pc: PendingCopy, sel: Any) -> None:
    np = _np()
    cols = np.arange(pc.size)
    n_src = pc.src_size[sel][:, None]
    data = np.zeros((sel.size, pc.size), dtype=np.uint8)
    take = cols[None, :] < n_src
    if st.races is not None:    # the issuing threads move the data now
        st.races.inflight(st, (pc.dst[sel][:, None] + cols).ravel(), -1)
        lanes = np.broadcast_to(pc.lanes[sel][:, None], take.shape)
        st.races.check_bytes(st, Site(pc.line, write=False, strong=False), "global", st.mem.buf.size,
                             (pc.src[sel][:, None] + cols)[take], lanes[take])
        dst = (pc.dst[sel][:, None] + cols).ravel()
        hb, issuers = st.races.hb, pc.lanes[sel]
        now = hb.vc[issuers].copy()
        full = st.races.full_epoch
        if pc.vc is not None:   # a read not ordered before the issue may have seen the bytes half-written
            hb.vc[issuers] = pc.vc[sel]
            st.races.full_epoch = 0     # (issue-time clocks need not cover the last full barrier)
        try:
            st.races.check_bytes(st, Site(pc.line, write=True, strong=False), "shared", st.shared.size, dst,
                                 np.repeat(issuers, pc.size))
        finally:
            hb.vc[issuers] = now
            st.races.full_epoch = full
        hb.write(dst, np.repeat(issuers, pc.size), pc.line)   # published at the landing's clock
        # NVIDIA's compiler hands cp.async data to tcgen05.cp with no proxy fence: not a generic-proxy store
        st.races.gen_seq[dst] = -1
    src_idx = pc.src[sel][:, None] + np.minimum(cols[None, :], np.maximum(n_src - 1, 0))
    data = np.where(take, st.mem.buf[src_idx], 0).astype(np.uint8)
    st.shared[pc.dst[sel][:, None] + cols[None, :]] = data


def _cp_async_control(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    op = mods.need(("commit_group", "wait_group", "wait_all", "mbarrier"), "operation")
    if op == "commit_group":
        mods.done()

        def commit(st: Any, m: Any) -> None:
            lanes = lanes_of(st, m)
            st.cp_committed[lanes] += 1

        return (K_OP, commit, None)
    if op == "wait_group":
        mods.done()
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            raise bad(ins, "expected an immediate group count")
        keep = ins.operands[0].value

        def wait(st: Any, m: Any) -> None:
            if redundancy.ACTIVE is not None:
                redundancy.copy_wait(st, lanes_of(st, m), ins.line)
            if st.cp_pending:
                land_copies(st, np.ones(st.n, dtype=bool) if m is None else m, keep)

        return (K_OP, wait, None)
    if op == "wait_all":
        mods.done()

        def wait_all(st: Any, m: Any) -> None:
            lanes = lanes_of(st, m)
            redundancy.copy_wait(st, lanes, ins.line)
            st.cp_committed[lanes] += 1
            if st.cp_pending:
                land_copies(st, np.ones(st.n, dtype=bool) if m is None else m, -1)

        return (K_OP, wait_all, None)
    # cp.async.mbarrier.arrive{.noinc}{.shared{::cta}}.b64 [mbar]
    mods.need(("arrive",), ".arrive")
    noinc = mods.flag("noinc")
    space = _space(mods)
    mods.flag("b64")
    mods.done()
    _, addr = address(dec, ins.operands[0], space if space != "generic" else "generic", ins)

    def arrive(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        keys = _mbar_keys(st, addr, lanes, m, space).astype(np.int64)
        for k, t in zip(keys.tolist(), lanes.tolist()):
            b = _get(st, int(k), t)
            published(st, b, t, "an arrival")
            if not noinc:       # the phase now waits for the arrive-on (a net change of zero)
                b.pending += 1
        vc = None
        if st.races is not None:
            hb = st.races.hb
            vc = hb.vc[lanes].copy()
            hb.vc[lanes, lanes] += 1    # (what the thread does after it is not published)
        st.cp_arrivals.append(CpArrival(lanes.copy(), keys, st.cp_issued[lanes].copy(), vc, ins,
                                        np.zeros(lanes.size, dtype=bool)))
        _fire_ready(st)     # (the threads with no copy in flight arrive at once)

    return (K_OP, arrive, None)


# --- mbarrier ---------------------------------------------------------------------

@dataclass
class MBarrier:
    expected: int
    pending: int
    tx: int = 0
    phase: int = 0
    key: int = -1          # its shared offset
    init_by: int = -1      # the thread that initialized it, and its clock then (race checker: `published`)
    init_clock: int = 0
    init_seq: int = -1     # when it was initialized (race checker's sequence), for fence.mbarrier_init
    init_ins: Any = None   # its mbarrier.init, named when another init lands on it while it is still valid
    fence_clock: int = -1  # the initializing thread's clock at its first fence after the init (race checker)
    # race checker: each thread's last wait and arrival, which its mbarrier.inval must follow (mbarrier_order.py)
    waits: dict = field(default_factory=dict)
    arrivals: dict = field(default_factory=dict)


def published(st: Any, b: MBarrier, thread: int, what: str, async_proxy: bool = False) -> None:
    """A thread that uses `b` (arrives, waits, or whose TMA load or tcgen05.commit completes on it) must know its
    initialization (race checker only): the PTX ISA leaves an operation on an mbarrier not yet initialized
    undefined, so another thread of the CTA needs a barrier (or an mbarrier phase) after the initializing
    thread's mbarrier.init, and a thread of another CTA of the cluster fence.mbarrier_init.release.cluster then
    a cluster-scope barrier (or release / acquire). The async proxy (a TMA load's or a tcgen05.commit's
    completion) sees the initialization only after the initializing thread's fence.mbarrier_init or
    fence.proxy.async."""
    if st.races is None or b.init_by < 0:
        return
    if async_proxy and b.init_seq >= 0 and b.fence_clock < 0:
        raise DeviceFault(f"{what} on the mbarrier at shared address 0x{b.key:x}, whose initialization by thread "
                          f"{b.init_by} no fence.mbarrier_init (or fence.proxy.async) by that thread made visible to "
                          "the async proxy", thread)
    if thread != b.init_by and st.races.hb.vc[thread, b.init_by] < b.init_clock:
        if st.rank_of is None or b.key // st.smem_stride == st.rank_of[thread]:
            raise DeviceFault(f"{what} on the mbarrier at shared address 0x{b.key:x}, whose initialization by "
                              f"thread {b.init_by} is not ordered before this use (no barrier or mbarrier phase after "
                              "the mbarrier.init reached this thread)", thread)
        raise DeviceFault(f"{what} on the mbarrier at shared address 0x{b.key:x} of CTA rank "
                          f"{b.key // st.smem_stride}, whose initialization by thread {b.init_by} is not visible to "
                          f"this thread (fence.mbarrier_init.release.cluster and a cluster barrier before any remote "
                          f"use)", thread)
    if async_proxy and b.init_seq >= 0 and not st.races.fenced(b, thread):
        raise DeviceFault(f"{what} on the mbarrier at shared address 0x{b.key:x}, whose initialization thread "
                          f"{b.init_by} fenced (fence.mbarrier_init or fence.proxy.async), but no barrier or mbarrier "
                          "phase orders that fence before this use: the async proxy may not see the "
                          "initialization yet", thread)


def _mbar_keys(st: Any, addr: Any, lanes: Any, m: Any, space: str) -> Any:
    """Shared-memory offsets of the mbarrier each lane names (generic addresses are mapped; in a cluster,
    offsets in the state's buffer of all the CTAs' shared memories)."""
    np = _np()
    from ..memory import SHARED_WINDOW, WINDOW_SIZE
    from ..spaces import shared_index, shared_outside

    a = np.asarray(addr(st)).astype(np.uint64)
    a = np.full(lanes.size, a) if a.ndim == 0 else a[lanes]
    if space == "generic":
        inside = (a >= np.uint64(SHARED_WINDOW)) & (a < np.uint64(SHARED_WINDOW + WINDOW_SIZE))
        if not inside.all():
            i = int(np.argmin(inside))
            raise DeviceFault(f"mbarrier operand 0x{int(a[i]):x} is not a shared-memory address", int(lanes[i]))
        a = a - np.uint64(SHARED_WINDOW)
    bad_ = (a & np.uint64(7)) != 0
    if bad_.any():
        i = int(np.argmax(bad_))
        raise DeviceFault(f"misaligned mbarrier at shared address 0x{int(a[i]):x}", int(lanes[i]))
    over = shared_outside(st, a, 8)
    if over.any():
        i = int(np.argmax(over))
        raise DeviceFault(f"mbarrier at shared address 0x{int(a[i]):x} is out of bounds", int(lanes[i]))
    return shared_index(st, a)


def _own(st: Any, keys: Any, lanes: Any, what: str) -> None:
    """Threads may only wait on (and initialize) the mbarriers of their own CTA; arrivals may be remote."""
    if st.rank_of is None:
        return
    np = _np()
    other = keys // st.smem_stride != st.rank_of[lanes]
    if other.any():
        i = int(np.argmax(other))
        raise DeviceFault(f"{what} on the mbarrier of CTA rank {int(keys[i]) // st.smem_stride} of the cluster: only "
                          "the executing CTA's own mbarriers can be waited on or initialized", int(lanes[i]))


def _get(st: Any, key: int, thread: int, how: str = "used") -> MBarrier:
    """The valid mbarrier at `key` (initialized, not invalidated since), else a fault."""
    b = st.mbar.get(key)
    if b is None:
        raise DeviceFault(f"mbarrier at shared address 0x{key:x} is {how} before mbarrier.init (never initialized, "
                          "or invalidated already)", thread)
    return b


def _live_init(b: MBarrier, thread: int) -> None:
    """An mbarrier.init on the still valid mbarrier `b`: the PTX ISA leaves an init of a location holding a valid
    mbarrier undefined (mbarrier.inval must end its life first, whatever its state), and on hardware it loses
    the arrivals, transactions and phase that the old one's users still count on. Reported with or without the
    race checker, like an inval of no mbarrier (the executor adds the line and text)."""
    state = []
    if b.pending != b.expected:
        state.append(f"{b.expected - b.pending} of {b.expected} arrivals of its current phase made")
    if b.tx:
        state.append(f"{b.tx} transaction bytes outstanding")
    state.append(f"{b.phase} phase{'' if b.phase == 1 else 's'} completed")
    first = f" at line {b.init_ins.line} '{b.init_ins.text}'" if b.init_ins is not None else ""
    raise DeviceFault(f"mbarrier.init by thread {thread} on the mbarrier at shared address 0x{b.key:x}, which is "
                      f"still valid (initialized by thread {b.init_by}{first}, {', '.join(state)}) with no "
                      "mbarrier.inval between: the PTX ISA leaves initializing a valid mbarrier undefined "
                      "(invalidate it first)", thread)


def _arrive(st: Any, key: int, count: int, thread: int, tx: int = 0, commit: bool = False,
            release: bool = True, *, ins: Instr) -> int:
    """One thread's arrive-on (`commit`: its tcgen05.commit's, when its tcgen05 operations completed);
    returns the phase it arrived in. `release` False (`mbarrier.arrive.relaxed`): the arrival counts
    but publishes none of the thread's earlier accesses to the phase's waiters."""
    b = _get(st, key, thread)
    published(st, b, thread, "tcgen05.commit's arrival" if commit else "an arrival", async_proxy=commit)
    if st.races is not None:
        # a tcgen05.commit arrives on its pipeline's clock (happens_before.Clocks.commit)
        note_arrival(st, b, thread + st.races.hb.n if commit else thread, ins)
        if release:
            st.races.release([thread], key, commit)
    phase = b.phase
    b.tx += tx
    b.pending -= count
    if b.pending < 0:
        raise DeviceFault(f"mbarrier at shared address 0x{key:x} received more arrivals than expected", thread)
    _maybe_complete(st, b)
    return phase


def tx_done(st: Any, b: MBarrier, nbytes: int, ins: Instr) -> None:
    """A transaction of `nbytes` of instruction `ins` completes on `b` through the async proxy."""
    if st.races is not None:
        note_async(b, ins)
        redundancy.transaction(st, b.key)
    b.tx -= nbytes
    _maybe_complete(st, b)


def _maybe_complete(st: Any, b: MBarrier) -> None:
    if b.pending == 0 and b.tx == 0:
        b.phase += 1
        b.pending = b.expected
        st.mbar_epoch += 1
        if st.races is not None:    # a completed phase orders its arrivals before its waiters' accesses
            st.races.new_interval()
            st.races.hb.complete(b.key)


def _mbarrier(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    expect_tx = False
    if "arrive" in ins.mods or "arrive_drop" in ins.mods:
        expect_tx = mods.flag("expect_tx")     # arrive.expect_tx: the expect_tx is a modifier
    op = mods.need(("init", "inval", "arrive", "arrive_drop", "expect_tx", "complete_tx", "test_wait", "try_wait",
                    "pending_count"), "operation")
    parity = mods.flag("parity")
    noComplete = mods.flag("noComplete")
    relaxed = "relaxed" in ins.mods     # an arrive without release semantics (PTX 8.6+); the default releases
    mods.ignore(("release", "acquire", "relaxed", "cta", "cluster"))
    space = _space(mods)
    mods.flag("b64")
    mods.done()
    ops = list(ins.operands)
    if op == "pending_count":
        w = dec.writer_t(ops[0], "u32", ins)
        r = dec.reader(ops[1], "b64", ins)

        def pending_count(st: Any, m: Any) -> None:
            w.put(st, m, (np.asarray(r(st)) >> np.uint64(32)).astype(np.uint32))

        return (K_OP, pending_count, None)
    if op in ("init", "inval", "expect_tx", "complete_tx"):
        _, addr = address(dec, ops[0], space, ins)
        value = dec.reader(ops[1], "u32", ins) if len(ops) > 1 else None

        def simple(st: Any, m: Any) -> None:
            lanes = lanes_of(st, m)
            if lanes.size == 0:
                return
            keys = _mbar_keys(st, addr, lanes, m, space)
            if op in ("init", "inval"):
                _own(st, keys, lanes, f"mbarrier.{op}")
            vals = np.asarray(value(st)).astype(np.int64) if value is not None else np.int64(0)
            vals = np.full(lanes.size, vals) if vals.ndim == 0 else vals[lanes]
            for key, v, t in zip(keys.tolist(), vals.tolist(), lanes.tolist()):
                if op == "init":
                    # count 0: NVIDIA's cluster kernels initialize the mbarriers a CTA never uses that way;
                    # any arrival on one is reported as one too many
                    if not 0 <= v < (1 << 20):
                        raise DeviceFault(f"mbarrier.init count {v} is outside 0..2^20-1", t)
                    if key in st.mbar:
                        _live_init(st.mbar[key], t)
                    clock = st.races.hb.init(t) if st.races is not None else 0
                    seq = st.races.stamp_init() if st.races is not None else -1
                    st.mbar[key] = MBarrier(v, v, key=key, init_by=t, init_clock=clock, init_seq=seq, init_ins=ins)
                    if st.races is not None:
                        st.races.initialized(t, st.mbar[key])
                    st.shared[key:key + 8] = 0
                    if st.races is not None:
                        st.races.mark_written(np.arange(key, key + 8))
                elif op == "inval":
                    # an mbarrier operation other than init on a location holding no valid mbarrier is undefined
                    # (PTX ISA, mbarrier): deleting an init whose mbarrier is only invalidated must not pass
                    b = _get(st, key, t, "invalidated")
                    for r in st.cp_arrivals:
                        hit = (r.keys == key) & ~r.fired
                        if hit.any():
                            raise DeviceFault(
                                f"mbarrier.inval of the mbarrier at shared address 0x{key:x} while the arrive-on "
                                f"of thread {int(r.lanes[int(np.argmax(hit))])}'s cp.async.mbarrier.arrive at line "
                                f"{r.ins.line} '{r.ins.text}' still waits for its copies (no wait for its phase "
                                "orders it before)", t)
                    del st.mbar[key]
                    if st.races is not None:
                        check_inval(st, b, t, ins)
                        redundancy.invalidated(st, key)
                        # its bytes may serve other data only after it (PTX ISA, mbarrier.inval): a write of
                        # them here, so another thread's store unordered after it is reported as a race
                        st.races.check_bytes(st, Site(ins.line, write=True, strong=False), "shared", st.shared.size,
                                             np.arange(key, key + 8), np.full(8, t, dtype=np.int32))
                else:
                    b = _get(st, key, t)
                    if st.races is not None:
                        published(st, b, t, f"mbarrier.{op}")
                        note_arrival(st, b, t, ins)
                    if op == "complete_tx":     # (bytes it stands for need the phase, not this clock)
                        redundancy.transaction(st, key)
                    b.tx += v if op == "expect_tx" else -v
                    _maybe_complete(st, b)

        return (K_OP, simple, None)
    if op in ("arrive", "arrive_drop"):
        # [state,] [addr] {, count | , txCount}
        state_op = None
        if len(ops) >= 2 and not hasattr(ops[0], "base"):
            state_op, ops = ops[0], ops[1:]
        _, addr = address(dec, ops[0], space, ins)
        arg = dec.reader(ops[1], "u32", ins) if len(ops) > 1 else None
        w = dec.writer_t(state_op, "b64", ins) if state_op is not None else None

        def arrive(st: Any, m: Any) -> None:
            lanes = lanes_of(st, m)
            if lanes.size == 0:
                return
            keys = _mbar_keys(st, addr, lanes, m, space)
            vals = np.asarray(arg(st)).astype(np.int64) if arg is not None else np.int64(1 if not expect_tx else 0)
            vals = np.full(lanes.size, vals) if vals.ndim == 0 else vals[lanes]
            phases = np.zeros(lanes.size, dtype=np.uint64)
            for i, (key, v, t) in enumerate(zip(keys.tolist(), vals.tolist(), lanes.tolist())):
                if op == "arrive_drop":
                    b = _get(st, key, t)
                    b.expected -= 1 if not expect_tx else 1
                if expect_tx:
                    phases[i] = _arrive(st, key, 1, t, tx=v, release=not relaxed, ins=ins)
                else:
                    phases[i] = _arrive(st, key, v if arg is not None else 1, t, release=not relaxed, ins=ins)
            if w is not None:
                w.put_lanes(st, None if m is None else lanes, phases)

        return (K_OP, arrive, None)
    # test_wait / try_wait: waitComplete, [addr], state | phaseParity {, suspend hint}
    del noComplete
    wdone = dec.writer_t(ops[0], "pred", ins)
    _, addr = address(dec, ops[1], space, ins)
    token = dec.reader(ops[2], "u32" if parity else "b64", ins)

    def wait(st: Any, m: Any) -> Any:
        lanes = lanes_of(st, m)
        done = np.zeros(st.n, dtype=bool)
        if lanes.size == 0:
            return done
        keys = _mbar_keys(st, addr, lanes, m, space)
        _own(st, keys, lanes, f"mbarrier.{op}")
        tok = np.asarray(token(st)).astype(np.int64)
        tok = np.full(lanes.size, tok) if tok.ndim == 0 else tok[lanes]
        for key, v, t in zip(keys.tolist(), tok.tolist(), lanes.tolist()):
            b = _get(st, key, t)
            done[t] = ((b.phase & 1) != (v & 1)) if parity else (b.phase != v)
            if st.races is not None:
                published(st, b, t, f"mbarrier.{op}")
                note_wait(st, b, t, ins)
                if done[t]:
                    redundancy.mbarrier_wait(st, key, t, ins.line)
                    st.races.observe(key, t, b.phase)
        wdone.put(st, done, np.ones(st.n, dtype=bool))
        return done

    return (K_WAIT, wait, None)


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "cp": lambda dec, ins: _cp_dispatch(dec, ins),
    "mbarrier": _mbarrier,
}


def _cp_dispatch(dec: Decoder, ins: Instr) -> Any:
    if ins.mods[:4] == ("reduce", "async", "bulk", "tensor"):
        from .tma import reduce_tensor

        return reduce_tensor(dec, ins)
    if not ins.mods or ins.mods[0] != "async":
        raise bad(ins, "unsupported cp instruction")
    sub = Instr(ins.opcode, ins.mods[1:], ins.operands, ins.guard, ins.line, ins.text)
    return _cp_async(dec, sub)
