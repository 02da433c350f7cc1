"""Multicast TMA loads of a tile program split over a thread-block cluster (sm_90).

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
issues each stage, every thread waits for it and releases it): for each load the CTAs needing the
same tile (the ranks agreeing on the coordinates of the tile's split dimensions: rank % fM along
M, rank / fM along N) form its group; the TMA box is cut along its rows into one slice per member
(tma_boxes.sliced; each slice whole 8-row swizzle atoms), and the CTA's slice index and the group's
mask are read from per-rank tables. The stage's empty barrier expects the releases of every CTA
that receives anything this CTA issues (`receivers`: the union of its groups); a thread releases
a stage by arriving on that barrier in each of its receivers (their sets are symmetric: it reads
what they issue), before its thread 0 refills the stage. As our pipelines initialize their
barriers at each run of the loop (an outer persistent loop runs it once per tile), the cluster
meets after the initialization (no peer's slice or release reaches a barrier before it is
initialized, nor a buffer its CTA still uses: the epilogue may reuse the rings) and again before
the barriers are invalidated (no release is still in flight towards them, and no CTA exits while
peers may write into it).

Kept without multicast, with a remark: a warp-specialized kernel, a cp.async pipeline, a target
other than sm_90 (sm_100's CTA pairs are another form), a box that does not cut into whole 8-row
atoms.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record
from ..target import with_feature
from ..tileaa.clusters import CLUSTER_ATTR, DIMS_ATTR
from .kernel import KernelLowering

TABLE_BITS = 8      # bits of one rank's entry in a per-rank table (clusters of up to 8 CTAs)


@record
class Group:
    """The CTAs of a cluster that read the same tile of one load."""

    size: int                   # CTAs that need the tile: it is cut in `size` slices
    masks: tuple[int, ...]      # by rank: its group's CTA mask (itself included)
    part: tuple[int, ...]       # by rank: the slice it issues


@record
class ClusterLoads:
    """A pipeline's multicast plan: the loads shared between CTAs, and whose releases a stage awaits."""

    ctas: int
    groups: dict                # load op -> Group (loads read by one CTA only are absent)
    receivers: tuple[int, ...]  # by rank: the CTAs that receive what it issues (itself included)

    @property
    def releasing_ctas(self) -> int:
        """CTAs whose threads release each stage of a CTA (the same for every rank: groups are symmetric)."""
        return bin(self.receivers[0]).count("1")


def group(entry: Operation, load: Operation) -> Optional[Group]:
    """The CTAs that load the same tile as `load` in a cluster-split `entry`; None where each CTA
    loads its own (or the split left no labels on the load)."""
    shape = entry.attributes.get(CLUSTER_ATTR)
    dims = load.attributes.get(DIMS_ATTR)
    if shape is None or dims is None:
        return None
    c, fm, fn = shape
    split = {lbl for lbl, f in (("M", fm), ("N", fn)) if f > 1 and lbl in dims}

    def coords(r: int) -> tuple:
        return tuple(r % fm if lbl == "M" else r // fm for lbl in sorted(split))
    members = [[q for q in range(c) if coords(q) == coords(r)] for r in range(c)]
    if len(members[0]) == 1:
        return None
    return Group(len(members[0]), tuple(sum(1 << q for q in m) for m in members),
                 tuple(m.index(r) for r, m in enumerate(members)))


def plan(k: KernelLowering, loop: Operation, copies: dict) -> tuple[Optional[ClusterLoads], dict]:
    """The multicast plan of a TMA pipeline (`copies`: load op -> TmaCopy, every load of the loop)
    and the copies to issue (shared loads cut in slices); (None, `copies`) where the cluster's CTAs
    keep loading their own tiles, with a remark saying why when some tile is shared."""
    from ..tileas import tma_boxes

    shape = k.entry.attributes.get(CLUSTER_ATTR)
    groups = {load: g for load in copies if (g := group(k.entry, load)) is not None}
    if shape is None or not groups:
        return None, copies
    why = _unsupported(k)
    sliced: dict = {}
    for load, g in groups.items():
        if why:
            break
        sliced[load], why = tma_boxes.sliced(copies[load], g.size)
    if why:
        refuse(k, loop, tuple(copies), why)
        return None, copies
    c = shape[0]
    receivers = tuple(1 << r | _union(g.masks[r] for g in groups.values()) for r in range(c))
    for load, g in groups.items():
        k.remark("passed", "memory", "RemarkTmaMulticast", "Operand multicast to the CTAs of the cluster", load,
                 CTAs=str(g.size), Slices=f"{g.size} slices of {'x'.join(map(str, sliced[load].box))} a box",
                 Masks=", ".join(f"0x{m:x}" for m in g.masks))
    return ClusterLoads(c, groups, receivers), {**copies, **sliced}


def _unsupported(k: KernelLowering) -> str:
    if not k.caps.has("multicast"):
        return f"multicast loads are made for {', '.join(row.name for row in with_feature('multicast'))} only (not sm_{k.sm})"
    if k.warp_split is not None:   # its producer neither releases stages across the cluster nor meets the
        return "the kernel is warp-specialized"   # others at the cluster barriers
    return ""


def refuse(k: KernelLowering, loop: Operation, loads: tuple, why: str) -> None:
    """The remark for a pipeline whose loads stay each CTA's own though some are shared (`why` not,
    or the target's own reason first)."""
    if any(group(k.entry, load) is not None for load in loads):
        k.remark("missed", "memory", "RemarkTmaMulticastMissed", "Shared operand loaded by each CTA of the cluster",
                 loop, Reason=_unsupported(k) or why)


def _union(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


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
