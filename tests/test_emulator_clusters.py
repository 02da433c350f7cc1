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
    .reg .pred %p<2>;
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
