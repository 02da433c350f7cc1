"""The emulator runs the CTAs of a thread-block cluster together: distributed shared memory (mapa,
ld/st/atom.shared::cluster), barrier.cluster, remote mbarrier arrivals, and the race checker
across the cluster's CTAs."""

from __future__ import annotations

import numpy as np
import pytest

from tileiras.emulator import EmulatorError
from tileiras.emulator.host import emulate

# Each CTA (128 threads) fills a 512-byte buffer of its right-hand neighbour in the cluster (rank + 1 mod
# n) with its rank * 1000 + tid, through mapa + st.shared::cluster; after barrier.cluster each reads
# its own buffer back and writes it out, plus an atom.shared::cluster count of the peers into CTA 0.
_EXCHANGE = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry exchange(.param .u64 out, .param .u64 cnt)
.reqnctapercluster {n}, 1, 1
{{
    .shared .align 16 .b8 buf[512];
    .shared .align 4 .b32 count;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .reg .pred %p<3>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SKIP;
    st.shared.u32 [count], 0;
SKIP:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    add.u32 %r4, %r2, 1;
    rem.u32 %r4, %r4, %r3;
    mov.u32 %r5, buf;
    mapa.shared::cluster.u32 %r6, %r5, %r4;
    getctarank.shared::cluster.u32 %r12, %r6;
    setp.ne.u32 %p2, %r12, %r4;
    @%p2 trap;
    mad.lo.u32 %r7, %r2, 1000, %r1;
    shl.b32 %r8, %r1, 2;
    add.u32 %r9, %r6, %r8;
    st.shared::cluster.u32 [%r9], %r7;
    mov.u32 %r10, count;
    mapa.shared::cluster.u32 %r11, %r10, 0;
    @%p1 bra SKIP2;
    atom.shared::cluster.add.u32 %r12, [%r11], 1;
SKIP2:
    barrier.cluster.arrive.release.aligned;
    {early}
    add.u32 %r13, %r5, %r8;
    ld.shared.u32 %r14, [%r13];
    {late}
    mov.u32 %r15, %ctaid.x;
    mad.lo.u32 %r15, %r15, 128, %r1;
    cvt.u64.u32 %rd1, %r15;
    shl.b64 %rd1, %rd1, 2;
    ld.param.u64 %rd2, [out];
    add.u64 %rd3, %rd2, %rd1;
    st.global.u32 [%rd3], %r14;
    or.b32 %r4, %r1, %r2;
    setp.ne.u32 %p1, %r4, 0;
    @%p1 bra DONE;
    ld.shared.u32 %r14, [count];
    mov.u32 %r15, %clusterid.x;
    mul.wide.u32 %rd1, %r15, 4;
    ld.param.u64 %rd2, [cnt];
    add.u64 %rd3, %rd2, %rd1;
    st.global.u32 [%rd3], %r14;
DONE:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}}
"""


def _exchange(n: int, clusters: int, wait: bool = True, check_races: bool = True) -> tuple:
    w = "barrier.cluster.wait.acquire.aligned;"
    ptx = _EXCHANGE.format(n=n, early=w if wait else "", late="" if wait else w)
    out = np.zeros(n * clusters * 128, dtype=np.uint32)
    cnt = np.zeros(clusters, dtype=np.uint32)
    return emulate(ptx, "exchange", (n * clusters, 1, 1), (128, 1, 1), [out, cnt], check_races=check_races)


@pytest.mark.parametrize("n", [2, 4])
def test_ctas_of_a_cluster_exchange_data_through_distributed_shared_memory(n: int) -> None:
    (out, cnt), stats = _exchange(n, clusters=2)
    ctas = np.arange(2 * n)
    rank = ctas % n
    left = (rank - 1) % n                      # each CTA's buffer was filled by its left-hand neighbour
    expect = (left * 1000)[:, None] + np.arange(128)[None, :]
    assert np.array_equal(out.reshape(2 * n, 128), expect)
    assert cnt.tolist() == [n, n]              # every CTA's thread 0 counted itself into CTA 0
    assert stats.ctas == 2 * n


def test_reading_before_the_barrier_cluster_wait_is_a_race() -> None:
    with pytest.raises(EmulatorError, match=r"data race \(read-after-write\): thread 128 stored to shared address "
                       r"0x0 at line \d+ 'st.shared::cluster.u32"):
        _exchange(2, clusters=1, wait=False)
    (out, _), _ = _exchange(2, clusters=1, wait=False, check_races=False)   # lockstep: right anyway
    assert out[0] == 1000


# CTA 1 (64 threads) stores into CTA 0's buffer and arrives on CTA 0's mbarrier remotely (its address by
# CUTLASS's peer-bit mask: shared addresses carry the CTA rank from bit 24 up, as on the GPU); CTA 0 waits
# on it (or, {skip}, does not) and writes what it got out.
_HANDOFF = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry handoff(.param .u64 out)
.reqnctapercluster 2, 1, 1
{{
    .shared .align 8 .b64 bar;
    .shared .align 16 .b8 buf[256];
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    or.b32 %r3, %r1, %r2;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra INITED;
    mbarrier.init.shared::cta.b64 [bar], 64;
    fence.mbarrier_init.release.cluster;
INITED:
    barrier.cluster.arrive.relaxed.aligned;
    barrier.cluster.wait.aligned;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 bra CONSUMER;
    mov.u32 %r4, buf;
    mapa.shared::cluster.u32 %r5, %r4, 0;
    shl.b32 %r6, %r1, 2;
    add.u32 %r5, %r5, %r6;
    mul.lo.u32 %r7, %r1, 3;
    st.shared::cluster.u32 [%r5], %r7;
    mov.u32 %r8, bar;
    and.b32 %r9, %r8, 0xFEFFFFFF;   // CTA 1's address of bar has the rank in bit 24: clear it for CTA 0's
    fence.acq_rel.cluster;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r9];
    bra.uni END;
CONSUMER:
    {skip}
WAIT:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p3, [bar], 0;
    @!%p3 bra WAIT;
READ:
    mov.u32 %r4, buf;
    shl.b32 %r6, %r1, 2;
    add.u32 %r4, %r4, %r6;
    ld.shared.u32 %r10, [%r4];
    mul.wide.u32 %rd1, %r1, 4;
    ld.param.u64 %rd2, [out];
    add.u64 %rd2, %rd2, %rd1;
    st.global.u32 [%rd2], %r10;
END:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}}
"""


def test_a_remote_mbarrier_arrival_publishes_the_peers_stores() -> None:
    (out,), _ = emulate(_HANDOFF.format(skip=""), "handoff", (2, 1, 1), (64, 1, 1), [np.zeros(64, np.uint32)],
                        check_races=True)
    assert np.array_equal(out, 3 * np.arange(64))
    with pytest.raises(EmulatorError, match=r"data race \(read-after-write\): thread 64 stored"):
        emulate(_HANDOFF.format(skip="bra.uni READ;"), "handoff", (2, 1, 1), (64, 1, 1),
                [np.zeros(64, np.uint32)], check_races=True)


def test_mapa_to_a_rank_outside_the_cluster_faults() -> None:
    ptx = _HANDOFF.format(skip="").replace("mapa.shared::cluster.u32 %r5, %r4, 0;", "mapa.shared::cluster.u32 %r5, %r4, 2;")
    with pytest.raises(EmulatorError, match="mapa to CTA rank 2: the cluster has 2 CTA"):
        emulate(ptx, "handoff", (2, 1, 1), (64, 1, 1), [np.zeros(64, np.uint32)])


# TMA into a cluster (n CTAs of 128 threads, 2D f32 tensor of 8n x 32). Multicast: CTA r loads rows 8r..8r+7
# into buf + 1024 r of every CTA of the mask; each CTA's mbarrier expects all n boxes, then the CTA copies
# its buf out. Pair (.cta_group::2, n = 2): each CTA loads its rows into its own buf and signals the
# leader's mbarrier; the leader waits and copies both CTAs' buffers out (the peer's through DSMEM).
_TMA = """
.version 8.6
.target sm_100a
.address_size 64

.visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128])
.reqnctapercluster {n}, 1, 1
{{
    .reg .pred %p<4>;
    .reg .b16 %rs<2>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 1024 .b8 buf[{nbytes}];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    mov.u32 %r20, %cluster_ctarank;
    setp.eq.u32 %p1, %r0, 0;
    @%p1 mbarrier.init.shared.b64 [bar], 1;
    @%p1 fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.relaxed.aligned;
    barrier.cluster.wait.aligned;
    mov.u32 %r10, 0;
    shl.b32 %r11, %r20, 3;
    mov.u32 %r5, buf;
    mov.u32 %r6, bar;
    {issue}
    mov.u32 %r1, %r0;
    shl.b32 %r1, %r1, 2;
    mov.u32 %r21, %ctaid.x;
    mul.lo.u32 %r21, %r21, {nbytes};
COPY:
    setp.ge.u32 %p3, %r1, {nbytes};
    @%p3 bra DONE;
    add.u32 %r2, %r5, %r1;
    ld.shared::cluster.u32 %r4, [%r2];
    add.u32 %r3, %r1, %r21;
    cvt.u64.u32 %rd2, %r3;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    add.u32 %r1, %r1, 512;
    bra COPY;
DONE:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}}
"""

_MULTICAST = """
    shl.b32 %r7, %r20, 10;
    add.u32 %r8, %r5, %r7;
    mov.u16 %rs1, {mask};
    @%p1 mbarrier.arrive.expect_tx.shared.b64 _, [bar], {nbytes};
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
        [%r8], [tmap, {{%r10, %r11}}], [bar], %rs1;
    {wait}
"""

_PAIR = """
    and.b32 %r9, %r6, 0xFEFFFFFF;
    setp.eq.u32 %p2, %r20, 0;
    and.pred %p2, %p2, %p1;
    @%p2 mbarrier.arrive.expect_tx.shared.b64 _, [bar], 2048;
    @%p1 cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.tile.mbarrier::complete_tx::bytes
        [buf], [tmap, {%r10, %r11}], [%r9];
    setp.ne.u32 %p2, %r20, 0;
    @%p2 bra DONE;
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
    @!%p2 bra WAIT;
    mov.u32 %r1, %r0;
    shl.b32 %r1, %r1, 2;
PEER:                                   // the peer's box follows the leader's in out
    setp.ge.u32 %p3, %r1, 1024;
    @%p3 bra LEADER;
    mapa.shared::cluster.u32 %r2, %r5, 1;
    add.u32 %r2, %r2, %r1;
    ld.shared::cluster.u32 %r4, [%r2];
    add.u32 %r3, %r1, 1024;
    cvt.u64.u32 %rd2, %r3;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    add.u32 %r1, %r1, 512;
    bra PEER;
LEADER:
"""

_WAIT = """WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
    @!%p2 bra WAIT;"""


def _tma(n: int, issue: str, nbytes: int, check_races: bool = True, template: str = _TMA) -> np.ndarray:
    from tileiras.emulator import Memory, run_ptx
    from tileiras.codegen.tensormap import for_array

    src = np.arange(8 * n * 32, dtype=np.float32).reshape(8 * n, 32)
    mem = Memory()
    a = mem.alloc(src.nbytes)
    mem.write(a, src.tobytes())
    out = mem.alloc(n * nbytes)
    ptx = template.format(n=n, nbytes=nbytes, issue=issue)
    run_ptx(ptx, "k", (n, 1, 1), (128, 1, 1), [out, for_array(a, src.shape, src.strides, "f32", (8, 32))], mem,
            check_races=check_races)
    return src, np.frombuffer(mem.read(out, n * nbytes), np.float32).reshape(n, -1)


@pytest.mark.parametrize("n", [2, 4])
def test_a_multicast_tma_load_lands_in_every_cta_of_the_mask(n: int) -> None:
    issue = _MULTICAST.format(mask=(1 << n) - 1, nbytes=1024 * n, wait=_WAIT)
    src, out = _tma(n, issue, 1024 * n)
    for r in range(n):          # every CTA holds every CTA's rows, in rank order
        assert np.array_equal(out[r], src.ravel()), r


def test_reading_a_multicast_box_before_the_mbarrier_wait_is_reported() -> None:
    issue = _MULTICAST.format(mask=3, nbytes=2048, wait="")
    with pytest.raises(EmulatorError, match="read before the mbarrier wait"):
        _tma(2, issue, 2048)


def test_multicast_mask_outside_the_cluster_faults() -> None:
    issue = _MULTICAST.format(mask=5, nbytes=2048, wait=_WAIT)
    with pytest.raises(EmulatorError, match="multicast mask 0x5 names CTAs outside this cluster of 2 CTAs"):
        _tma(2, issue, 2048)


def test_cta_group_2_tma_loads_complete_on_the_leaders_mbarrier() -> None:
    src, out = _tma(2, _PAIR, 1024)
    assert np.array_equal(out.ravel(), src.ravel())     # the leader's rows, then the peer's


def test_a_remote_use_of_an_mbarrier_whose_init_was_not_fenced_is_reported() -> None:
    """The PTX ISA's protocol: mbarrier.init, fence.mbarrier_init.release.cluster, then a cluster barrier
    (a relaxed arrive suffices) before another CTA's copy completes on it. Without the fence the relaxed
    arrive publishes nothing: the peer's cta_group::2 load may land on an mbarrier not yet initialized."""
    tma = _TMA.replace("    @%p1 fence.mbarrier_init.release.cluster;\n", "")
    assert tma != _TMA
    with pytest.raises(EmulatorError, match=r"whose initialization by thread 0 (is not visible|no fence.mbarrier_init)"):
        _tma(2, _PAIR, 1024, template=tma)


_CROSS_BAR = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 out)
.reqnctapercluster 2, 1, 1
{{
    .shared .align 16 .b8 buf[256];
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    setp.eq.u32 %p1, %r2, 1;
    mov.u32 %r4, buf;
    shl.b32 %r6, %r1, 2;
    add.u32 %r4, %r4, %r6;
    mapa.shared::cluster.u32 %r5, %r4, 0;
    @%p1 st.shared::cluster.u32 [%r5], %r1;     // CTA 1 writes into CTA 0's buffer
    {sync}
    @!%p1 ld.shared.u32 %r10, [%r4];
    cvt.u64.u32 %rd2, %r6;
    add.s64 %rd3, %rd1, %rd2;
    @!%p1 st.global.u32 [%rd3], %r10;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}}
"""


def test_a_cta_barrier_orders_the_threads_of_its_own_cta_only() -> None:
    """bar.sync is per CTA: CTA 0's threads passing their barrier 0 learn nothing of CTA 1's stores into
    their shared memory, even where the emulator runs both CTAs' threads as one group (no branch: they
    reach the barrier together); a cluster barrier does order them."""
    (out,), _ = emulate(_CROSS_BAR.format(sync="barrier.cluster.arrive.aligned;\n    barrier.cluster.wait.aligned;"),
                        "k", (2, 1, 1), (64, 1, 1), [np.zeros(64, np.uint32)], check_races=True)
    assert np.array_equal(out, np.arange(64))
    with pytest.raises(EmulatorError, match=r"data race \(read-after-write\)"):
        emulate(_CROSS_BAR.format(sync="bar.sync 0;"), "k", (2, 1, 1), (64, 1, 1), [np.zeros(64, np.uint32)],
                check_races=True)
