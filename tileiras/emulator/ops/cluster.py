"""Thread-block clusters: `mapa`, `getctarank` and `barrier.cluster`.

The CTAs of a cluster run as one state (executor.py). The shared addresses CTA r's threads see
carry r from bit CTA_RANK_SHIFT up, as on the GPU, and are their shared::cluster addresses too, so
ld/st/atom/mbarrier on a shared::cluster address need nothing more than `spaces.shared_index`;
`mapa` moves an address to another CTA's memory. st.async stores into a (peer's) shared memory
and completes its bytes on an mbarrier of that CTA, like a TMA load.

barrier.cluster: each thread's arrive (`.release` unless `.relaxed`) counts once per phase; the
phase completes when every thread of the cluster has arrived or exited, and a thread's wait
(`.acquire`) completes once the phase it arrived in has. For the race checker the arrivals
release into, and the waits acquire from, the clocks of the key `CLUSTER_BARRIER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import DeviceFault
from ..memory import CTA_OFFSET_MASK, CTA_RANK_SHIFT, SHARED_WINDOW, WINDOW_SIZE
from .. import spaces
from ..spaces import shared_outside
from ..parser import Instr
from ..program import K_OP, K_WAIT, Decoder, Mods, bad
from .common import lanes_of

CLUSTER_BARRIER = -2      # the happens-before key of barrier.cluster (mbarrier keys are shared offsets)


def _np() -> Any:
    import numpy as np

    return np


def _shared_addresses(st: Any, a: Any, lanes: Any, generic: bool, what: str) -> Any:
    """Shared::cluster addresses `a` (uint64, one per lane of `lanes`; generic ones mapped), checked."""
    np = _np()
    if generic:
        inside = (a >= np.uint64(SHARED_WINDOW)) & (a < np.uint64(SHARED_WINDOW + WINDOW_SIZE))
        if not inside.all():
            i = int(np.argmin(inside))
            raise DeviceFault(f"{what}: 0x{int(a[i]):x} is not a shared-memory address", int(lanes[i]))
        a = a - np.uint64(SHARED_WINDOW)
    over = shared_outside(st, a, 0)
    if over.any():
        i = int(np.argmax(over))
        raise DeviceFault(f"{what}: shared address 0x{int(a[i]):x} is outside the cluster's shared memory",
                          int(lanes[i]))
    return a


def _mapa(dec: Decoder, ins: Instr) -> Any:
    """mapa{.shared::cluster}.u32/u64 d, a, rank: a's location in CTA `rank`'s shared memory."""
    np = _np()
    mods = Mods(ins)
    generic = mods.one(("shared::cluster",)) is None
    ty = mods.need(("u32", "u64"), ".u32 or .u64")
    mods.done()
    if len(ins.operands) != 3:
        raise bad(ins, "expected d, a, b")
    w = dec.writer_t(ins.operands[0], ty, ins)
    ra = dec.reader(ins.operands[1], "u64", ins)
    rb = dec.reader(ins.operands[2], "u32", ins)
    dt = np.dtype(np.uint32 if ty == "u32" else np.uint64)

    def mapa(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        a = np.asarray(ra(st)).astype(np.uint64)
        a = np.full(lanes.size, a) if a.ndim == 0 else a[lanes]
        r = np.asarray(rb(st)).astype(np.int64)
        r = np.full(lanes.size, r) if r.ndim == 0 else r[lanes]
        bad_ = (r < 0) | (r >= st.ncta)
        if bad_.any():
            i = int(np.argmax(bad_))
            raise DeviceFault(f"mapa to CTA rank {int(r[i])}: the cluster has {st.ncta} CTA(s)", int(lanes[i]))
        off = _shared_addresses(st, a, lanes, generic, "mapa") & np.uint64(CTA_OFFSET_MASK)
        out = off | (r.astype(np.uint64) << np.uint64(CTA_RANK_SHIFT))
        if generic:
            out = out + np.uint64(SHARED_WINDOW)
        full = np.zeros(st.n, dtype=dt)
        full[lanes] = out.astype(dt)
        w.put(st, m, full)

    return (K_OP, mapa, None)


def _getctarank(dec: Decoder, ins: Instr) -> Any:
    """getctarank{.shared::cluster}.u32 d, a: the rank of the CTA whose shared memory holds a."""
    np = _np()
    mods = Mods(ins)
    generic = mods.one(("shared::cluster",)) is None
    mods.need(("u32",), ".u32")
    mods.done()
    if len(ins.operands) != 2:
        raise bad(ins, "expected d, a")
    w = dec.writer_t(ins.operands[0], "u32", ins)
    ra = dec.reader(ins.operands[1], "u64", ins)

    def getctarank(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        a = np.asarray(ra(st)).astype(np.uint64)
        a = np.full(lanes.size, a) if a.ndim == 0 else a[lanes]
        off = _shared_addresses(st, a, lanes, generic, "getctarank")
        full = np.zeros(st.n, dtype=np.uint32)
        full[lanes] = (off >> np.uint64(CTA_RANK_SHIFT)).astype(np.uint32)
        w.put(st, m, full)

    return (K_OP, getctarank, None)


@dataclass
class ClusterBarrier:
    arrived: Any            # threads that arrived in the current phase
    phase_of: Any           # the phase each thread's pending arrival belongs to (-1: none pending)
    phase: int = 0          # phases completed


def _state(st: Any) -> ClusterBarrier:
    np = _np()
    if st.cluster_bar is None:
        st.cluster_bar = ClusterBarrier(np.zeros(st.n, dtype=bool), np.full(st.n, -1, dtype=np.int64))
    return st.cluster_bar


def complete_cluster_barrier(st: Any) -> None:
    """End the current phase if every thread of the cluster has arrived or exited."""
    b = st.cluster_bar
    if not b.arrived.any() or not (b.arrived | st.exited).all():
        return
    b.phase += 1
    b.arrived[:] = False
    st.mbar_epoch += 1          # wakes the waiting threads
    if st.races is not None:
        st.races.new_interval()
        st.races.hb.complete(CLUSTER_BARRIER)


def barrier_cluster(dec: Decoder, ins: Instr, mods: Mods) -> Any:
    """barrier.cluster.arrive{.release|.relaxed}{.aligned} / barrier.cluster.wait{.acquire}{.aligned}."""
    np = _np()
    op = mods.need(("arrive", "wait"), ".arrive or .wait")
    relaxed = False
    if op == "arrive":
        relaxed = mods.one(("release", "relaxed")) == "relaxed"
    else:
        mods.flag("acquire")
    mods.flag("aligned")
    mods.done()
    if ins.operands:
        raise bad(ins, f"barrier.cluster.{op} takes no operands")

    if op == "arrive":
        def arrive(st: Any, m: Any) -> None:
            b = _state(st)
            act = np.ones(st.n, dtype=bool) if m is None else m
            twice = act & (b.phase_of >= 0)
            if twice.any():
                raise DeviceFault("barrier.cluster.arrive again before the barrier.cluster.wait of the last "
                                  "arrival", int(np.argmax(twice)))
            if st.races is not None and not relaxed:
                st.races.release(np.flatnonzero(act), CLUSTER_BARRIER)
            elif st.races is not None:     # (publishes what fence.mbarrier_init released)
                st.races.hb.release_inits(CLUSTER_BARRIER, np.flatnonzero(act))
            b.arrived |= act
            b.phase_of[act] = b.phase
            complete_cluster_barrier(st)

        return (K_OP, arrive, None)

    def wait(st: Any, m: Any) -> Any:
        b = _state(st)
        act = np.ones(st.n, dtype=bool) if m is None else m
        missing = act & (b.phase_of < 0)
        if missing.any():
            raise DeviceFault("barrier.cluster.wait without a barrier.cluster.arrive before it",
                              int(np.argmax(missing)))
        done = act & (b.phase_of < b.phase)
        if done.any():
            b.phase_of[done] = -1
            if st.races is not None:
                st.races.hb.acquire(CLUSTER_BARRIER, np.flatnonzero(done))
        return done

    return (K_WAIT, wait, None)


def st_async(dec: Decoder, ins: Instr) -> Any:
    """st.async{.weak|.release}{.cluster}.shared::cluster.mbarrier::complete_tx::bytes{.v2|.v4}.type [a], b, [mbar]:
    the store lands in the shared memory of a's CTA and completes its bytes on the mbarrier mbar of that
    CTA; for the race checker its bytes are published by that mbarrier's phase, as a TMA load's."""
    from ..parser import Vec
    from ..ptxtypes import ptx_type, uint_dtype
    from .async_ops import _get, _mbar_keys, tx_done
    from .memory import address

    np = _np()
    mods = Mods(ins)
    mods.need(("async",), ".async")
    mods.one(("weak", "release"))
    mods.flag("cluster")
    mods.need(("shared::cluster",), ".shared::cluster")
    mods.need(("mbarrier::complete_tx::bytes",), ".mbarrier::complete_tx::bytes")
    v = mods.one(("v2", "v4"))
    nelem = int(v[1:]) if v else 1
    ty = mods.type1()
    mods.done()
    ops = ins.operands
    if len(ops) != 3:
        raise bad(ins, "expected [a], b, [mbar]")
    items = list(ops[1].items) if isinstance(ops[1], Vec) else [ops[1]]
    if len(items) != nelem:
        raise bad(ins, f"expected {nelem} source values")
    bits = ptx_type(ty).bits
    raw = uint_dtype(bits)
    nbytes = nelem * bits // 8
    readers = [dec.reader(x, f"b{bits}", ins) for x in items]
    _, addr = address(dec, ops[0], "shared", ins)
    _, mbar = address(dec, ops[2], "shared", ins)

    def store(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        a = np.asarray(addr(st)).astype(np.uint64)
        a = np.full(lanes.size, a) if a.ndim == 0 else a[lanes]
        (_, _, _, offs), = spaces.resolve(st, "shared", a, lanes, nbytes, nbytes)
        keys = _mbar_keys(st, mbar, lanes, m, "shared")
        if st.smem_stride and ((keys // st.smem_stride) != (offs // st.smem_stride)).any():
            i = int(np.argmax((keys // st.smem_stride) != (offs // st.smem_stride)))
            raise DeviceFault("st.async: the mbarrier must be in the CTA the store writes to", int(lanes[i]))
        vals = np.stack([np.broadcast_to(np.asarray(r(st)), (st.n,))[lanes].astype(raw) for r in readers], axis=1)
        data = np.ascontiguousarray(vals).view(np.uint8).reshape(lanes.size, nbytes)
        cols = np.arange(nbytes)
        for i, (t, key) in enumerate(zip(lanes.tolist(), keys.tolist())):
            b = _get(st, key, t)
            idx = offs[i] + cols
            if st.races is not None:
                st.races.async_write(st, ins.line, idx, t, key, b.phase + 1)
            st.shared[idx] = data[i]
            tx_done(st, b, nbytes, ins)

    return (K_OP, store, None)


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "mapa": _mapa,
    "getctarank": _getctarank,
}
