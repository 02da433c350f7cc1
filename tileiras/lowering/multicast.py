"""Multicast TMA loads of a tile program split over a thread-block cluster (sm_90): the emitted protocol.

After `split-over-cluster` (tileaa/clusters.py) the CTAs of a cluster each compute a part of the
tile block's output; an operand tile whose dimensions are not all split is the same tile in several
CTAs (the persistent matmul at 128x512 split 1x4: every CTA reads the same 128x64 A tile, its own
quarter of B). Facts from NVIDIA's tileiras 13.5 on that kernel (sm_90, split 2x2): an operand
tile that g CTAs need is loaded once per cluster, in g slices, each CTA issuing one slice with
`cp.async.bulk.tensor...multicast::cluster` and a CTA mask of the g CTAs (16-bit masks from a table
indexed by `%cluster_ctarank`; A's rows sliced, B's K rows), every slice landing in all g CTAs at
the same shared offset and completing on the same-offset mbarrier of each; each CTA's full barrier
expects the whole tile's bytes (`mbarrier.arrive.expect_tx`, one arrival). A stage is free again
only when every CTA that received a slice has read it: the consumers arrive on the empty barrier of
each CTA of the mask (`mapa.shared::cluster` + `mbarrier.arrive.shared::cluster`, the barrier
initialized to consumers x popc(mask) arrivals). The mbarrier initialization is published with
`fence.mbarrier_init.release.cluster` and `barrier.cluster.arrive.relaxed` / `barrier.cluster.wait`
before any copy, once per kernel; there is no cluster barrier at the end: the producer waits for the
last phase of every stage's empty barrier (every peer's release) before it exits. Each operand has
its own ring (B: 5 stages of 32 KB, A: 4 of 8 KB). Warps 0-3 consume (wgmma m64n256k16), warp 4
issues the copies, warp 5 stores C by TMA, 6-7 idle, all but the consumers `setmaxnreg.dec 32`.
SASS: 5 UTMALDG.2D.MULTICAST, 26 SYNCS.ARRIVE.TRANS64.RED.A1T0 (the remote arrivals), one
UCGABAR_ARV / UCGABAR_WAIT pair.

Ours follows the same protocol in the unspecialized TMA pipeline (pipelined_loop.py: one thread
issues each stage, every thread waits for it and releases it), for the groups and slices
tileas/multicast_groups.py decides: the CTA's slice index and its group's mask are read from
per-rank tables (`casts`); a thread releases a stage by arriving on its empty barrier in each of its
receivers (their sets are symmetric: it reads what they issue), before its thread 0 refills the
stage (`release`). As our pipelines initialize their barriers at each run of the loop (an outer
persistent loop runs it once per tile), the cluster meets after the initialization (no peer's slice
or release reaches a barrier before it is initialized, nor a buffer its CTA still uses: the
epilogue may reuse the rings) and again before the barriers are invalidated (no release is still
in flight towards them, and no CTA exits while peers may write into it) (`sync`).
"""

from __future__ import annotations

from ..tileas.multicast_groups import ClusterLoads
from .kernel import KernelLowering

TABLE_BITS = 8      # bits of one rank's entry in a per-rank table (clusters of up to 8 CTAs)


def ctarank(k: KernelLowering) -> str:
    """i32 %cluster_ctarank, read in the entry block."""
    name = "llvm.nvvm.read.ptx.sreg.cluster.ctarank"
    k.b.declare(f"declare i32 @{name}()")
    return k.b.pre(f"call i32 @{name}()", "ctarank")


def by_rank(k: KernelLowering, table: tuple[int, ...], ty: str = "i32") -> str:
    """The entry of `table` (one small value per rank) for this CTA, in the entry block: a shift of a
    64-bit constant (as NVIDIA's reads its masks)."""
    if len(set(table)) == 1:
        return str(table[0])
    packed = sum(v << (TABLE_BITS * r) for r, v in enumerate(table))
    shift = k.b.pre(f"mul i32 {ctarank(k)}, {TABLE_BITS}", "mc")
    wide = k.b.pre(f"lshr i64 {packed}, {k.b.pre(f'zext i32 {shift} to i64', 'mc')}", "mc")
    return k.b.pre(f"and {ty} {k.b.pre(f'trunc i64 {wide} to {ty}', 'mc')}, {(1 << TABLE_BITS) - 1}", "mc")


def casts(k: KernelLowering, cl: ClusterLoads) -> dict:
    """load op -> (i32 slice index, i16 CTA mask) of this CTA, for tma_copy.issue."""
    return {load: (by_rank(k, g.part), by_rank(k, g.masks, "i16")) for load, g in cl.groups.items()}


def sync(k: KernelLowering, relaxed: bool = False) -> None:
    """Every thread of the cluster meets: what each did before is visible to every thread of the
    cluster after (release / acquire at cluster scope). `relaxed`: only mbarrier initializations
    need publishing, which `fence.mbarrier_init.release.cluster` did (NVIDIA's form: no memory
    barrier, which would wait for the previous tile's C stores); the CTA's earlier reads of its
    rings (the last tile's wgmmas, an epilogue's) have all been consumed before it arrives. Both
    barriers are `.aligned`: llvm_text.convergent marks them so that LLVM never duplicates them into
    the branches of a preceding `if` (thread 0's barrier initialization)."""
    sem = "relaxed" if relaxed else "release"
    k.b.emit(f'call void asm sideeffect "barrier.cluster.arrive.{sem}.aligned;", "~{{memory}}"()')
    k.b.emit('call void asm sideeffect "barrier.cluster.wait.acquire.aligned;", "~{memory}"()')


def release(k: KernelLowering, cl: ClusterLoads, bar: str) -> None:
    """This thread is done reading the stage whose empty barrier is at `bar` (its shared::cta
    address): one arrival on that barrier in every CTA receiving what this CTA issues (NVIDIA's and
    CUTLASS's remote arrival: `mapa` + `mbarrier.arrive.shared::cluster`, release at CTA scope: the
    stage's reads, by wgmma, have completed before)."""
    for q in range(cl.ctas):
        having = [r for r in range(cl.ctas) if cl.receivers[r] >> q & 1]
        if not having:
            continue

        def arrive(q: int = q) -> None:
            k.b.emit(f'call void asm sideeffect "{{ .reg .b32 ra; mapa.shared::cluster.u32 ra, $0, {q}; '
                     f'mbarrier.arrive.shared::cluster.b64 _, [ra]; }}", "r,~{{memory}}"(i32 {bar})')
        if len(having) == cl.ctas:
            arrive()
        else:
            bit = by_rank(k, tuple(int(r in having) for r in range(cl.ctas)))
            k.guarded(k.b.op(f"icmp ne i32 {bit}, 0", "mc"), arrive)
