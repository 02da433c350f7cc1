"""A CTA pair running one mma (sm_100 / sm_103 `tcgen05.mma.cta_group::2`), NVIDIA's form for
kernels whose hints ask for clusters of 2 or 4 CTAs.

tileaa/clusters.py splits such a kernel's tile over the cluster with M halved between CTAs 2i and
2i+1 (`PAIR_ATTR`); each CTA's program then computes its M/2 rows from its own A rows and the
pair's whole B. Where the mma is the whole work of a TMA-fed K loop (tileas/cta_pairs.plan), the two CTAs run it
as one pair, as the PTX ISA specifies and NVIDIA's kernels do:

* each CTA's TMA copies its A rows and *half* of B's columns (the pair's rank within the pair
  picks the half, `TmaCopy.pair_columns`) into the same offsets of its own stage buffers, with the
  `.cta_group::2` form whose completion lands on the *leader's* (even CTA's) `full` mbarrier
  (`mapa` to the leader); only the leader announces the stage's bytes, both CTAs' (`expect_tx`);
* the leader's MMA thread (warp-specialized: the MMA warp's; else thread 0, whose commit every
  thread of both CTAs waits for) alone waits for `full` and issues `tcgen05.mma.cta_group::2` with M the
  pair's rows (128 or 256): the tensor cores read A's halves and B's halves from both CTAs at the
  same descriptor addresses and write each CTA's rows into its own tensor memory (M = 128: the
  ISA's layout B, encodings.PairAccLayout; M = 256: layout A, as cta_group::1 M = 128). Its
  commits arrive on the `empty` and accumulator-ready mbarriers of both CTAs (`.multicast::cluster`
  with the pair's mask); the peer's MMA warp has nothing to do;
* block-scaled (fp8, M = 256): each CTA restages its own scale tiles (completing on its own `full`);
  the leader's `tcgen05.cp.cta_group::2` copies each CTA's into that CTA's tensor memory once both
  are done (`scales_restaged`; with an MMA warp, the peer's epilogue warps arrive on the leader's
  `ready` mbarrier, `arrive_at_leader`);
* tensor memory is allocated, relinquished and freed with `.cta_group::2` (the same columns in
  both CTAs); the CTAs meet at a cluster barrier once their mbarriers are initialized, before any
  copy can complete on the leader's (`meet`; unspecialized, as in a persistent kernel whose tiles
  reuse the accumulator's columns, with release / acquire between tcgen05 fences: the peer's reads
  of the last tile's accumulator are done before the leader's MMAs overwrite it); a specialized
  producer waits, after its loop, for the releases of its last stages (`drain`, as CUTLASS's
  producer tail), so that no commit arrives on the barriers of a CTA that has exited.

Elsewhere (a load TMA cannot copy, another loop form) each CTA runs its M/2 rows alone with
`cta_group::1` (ops_tcgen05: the accumulator goes through the pair layout by a conversion).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.core import Operation

if TYPE_CHECKING:
    from .kernel import KernelLowering
    from .pipelined_loop import ActivePipeline


def runs(k: "KernelLowering", op: Operation) -> bool:
    """Whether the kernel's CTA pair runs mma `op` (its instructions cta_group::2, the pair's M)."""
    return k.cta_pair is not None and k.cta_pair.mma is op


def issuer(k: "KernelLowering", cond: str, op: Operation) -> str:
    """i1 `cond` (the thread that issues `op`'s MMAs), in the pair's leader only where a pair runs it."""
    return k.b.op(f"and i1 {cond}, {is_leader(k)}", "pi") if runs(k, op) else cond


def pair_rank(k: "KernelLowering") -> str:
    """i32 this CTA's place in its pair (0: the leader, 1: its peer), read in the entry block."""
    from .multicast import ctarank

    return k.b.pre(f"and i32 {ctarank(k)}, 1", "pr")


def is_leader(k: "KernelLowering") -> str:
    """i1: this CTA leads its pair (issues the MMAs, announces the stage's bytes)."""
    return k.b.pre(f"icmp eq i32 {pair_rank(k)}, 0", "pl")


def _leader_rank(k: "KernelLowering") -> str:
    """i32 the cluster rank of this CTA's pair leader (the even one)."""
    from .multicast import ctarank

    return k.b.pre(f"and i32 {ctarank(k)}, -2", "pr")


def leader_barrier(k: "KernelLowering", bar: str) -> str:
    """The shared::cluster address of the mbarrier at `bar`'s offset in the pair's leader."""
    return k.b.op(f'call i32 asm "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r"(i32 {bar}, '
                  f'i32 {_leader_rank(k)})', "pb")


def mask(k: "KernelLowering") -> str:
    """i16 the pair's CTAs (the multicast mask of the leader's commits)."""
    return k.b.pre(f"trunc i32 {k.b.pre(f'shl i32 3, {_leader_rank(k)}', 'pm')} to i16", "pm")


def reads_own_stages(p: "ActivePipeline") -> bool:
    """Whether the CTA's own threads read stages of the pair's pipeline (block scales they restage),
    so that each CTA waits for its own `full` (the leader's also counts the peer's A and B)."""
    assert p.pair is not None
    return set(p.loads) != {p.pair.a_load, p.pair.b_load}


def arrive_at_leader(k: "KernelLowering", bar: str) -> None:
    """This thread's arrival on the mbarrier at `bar`'s offset in the pair's leader (release at cluster
    scope: what the thread wrote before, the stage's restaged scales, is the leader's MMAs' to read)."""
    k.b.emit(f'call void asm sideeffect "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [$0];", '
             f'"r,~{{memory}}"(i32 {leader_barrier(k, bar)})')


def commit(k: "KernelLowering", bar: str) -> None:
    """The leader's tcgen05 operations so far arrive once, when done, on the mbarrier at `bar`'s offset
    in both CTAs of the pair."""
    k.b.emit('call void asm sideeffect "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster'
             f'.multicast::cluster.b64 [$0], $1;", "r,h,~{{memory}}"(i32 {bar}, i16 {mask(k)})')


def meet(k: "KernelLowering", tensor_memory: bool = False) -> None:
    """Every thread of the cluster meets once the mbarriers are initialized (`fence.mbarrier_init`
    published them at cluster scope): the peer's copies complete on the leader's barriers.
    `tensor_memory`: also every thread's reads of its accumulator so far (the last tile's epilogue of
    a persistent kernel) are done before the leader's next MMAs write it (release / acquire, between
    the tcgen05 fences)."""
    from .multicast import sync

    if tensor_memory:
        k.b.emit('call void asm sideeffect "tcgen05.fence::before_thread_sync;", "~{memory}"()')
    sync(k, relaxed=not tensor_memory)
    if tensor_memory:
        k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')


def scales_restaged(k: "KernelLowering") -> None:
    """Unspecialized block-scaled pair: both CTAs' threads have restaged this iteration's scales
    (release / acquire at cluster scope) before the leader's tcgen05.cp reads them in both."""
    from .multicast import sync

    sync(k)


def drain(k: "KernelLowering", p: "ActivePipeline", it: object) -> None:
    """After the producer's loop (`it`: its RoleLoop, whose counter is now the iteration count): wait
    for the releases of the last `stages` stages, the leader's commits that arrive on this CTA's
    `empty` barriers, before the CTA may exit."""
    from ..ir.record import replace

    for s in range(p.stages):
        j = k.b.op(f"add i32 {it.j}, {s}", "pd") if s else it.j  # type: ignore[attr-defined]
        tail = replace(it, j=j, stage=k.b.op(f"urem i32 {j}, {p.stages}", "pd"))
        tail.wait(k, p.empty, "stage released", free=True)
