"""Pass `plan-shared-memory`'s last step: the warp split as its loop's copies settle it (`settle`, on
the copies recorded in the plan, `KernelPlan.ring_copies`), written into the kernel's plan, which the
lowering emits as it is (it neither settles the split again nor checks it: the split and the copies it
reads are one decision's).

Once a split loop's copy mechanism is known (its stage ring's TMA copies, `pipeline_copies.decide`):
* the attention form's MMA warp shares the producer's warpgroup, so it needs every load copied by TMA
  (cp.async copies take the whole warpgroup); else the consumers issue the mmas;
* a producer that stages loads through its registers (stage_rings.producer_stages) keeps its launch
  budget (`WarpSplit.loads_in_registers`);
* in the tcgen05 form a producer that is not one TMA thread (element copies, or cp.async: a tf32 tile
  without the 16-byte facts, all of the loads or some beside TMA boxes) is the epilogue warps themselves
  (`WarpSplit.producers` 0, but beside a block-scaled mma): the CTA is theirs and the MMA warp's, 160
  threads launched with 255 registers (or 288 with 168), where a producer warpgroup of its own made it 288
  (or 416, with 128) and spilled, and one TMA warp's lanes copying the rest spilled 1168 instructions (a
  tf32 A of 128 x 64 in 4-byte copies: 256 a lane);
* a TMA-fed tcgen05-form producer needs one thread: its role is one warp, not a warpgroup (the form
  gives no role setmaxnreg, which would need the whole warpgroup), so the CTA launches 96 threads
  fewer (NVIDIA's sm_100 matmuls: one TMA warp) and the MMA warp follows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.record import replace
from .pipeline_copies import decide

if TYPE_CHECKING:
    from .pipeline_copies import RingCopies
    from .shared_stages import StagingFacts
    from .stage_rings import StageRing
    from .warp_roles import WarpSplit


def settled(k: "StagingFacts") -> object:
    """The kernel's warp split once the split loop's copies are known, deciding them here: what
    plan-shared-memory's walk needs before it records them (shared_tcgen05.py). Settling is idempotent."""
    split = k.warp_split
    return split if split is None else settle(split, decide(k, split.loop))


def settle(split: "WarpSplit", copies: "Optional[RingCopies]", ring: "Optional[StageRing]" = None) -> "WarpSplit":
    """`split` settled by its loop's `copies` and, once recorded, its stage `ring` (module docstring): the split
    as decided where the loop has none (it is left unpipelined)."""
    if copies is None:
        return split
    if ring is not None and ring.produced:
        split = replace(split, loads_in_registers=True)
    if split.form == "tcgen05" and split.producers and (ring is not None and ring.produced
                                                        or len(copies.tma or ()) < len(copies.loads)) \
            and not any(op.name == "cuda_tile.mmaf_scaled" for op in split.mmas):
        split = _fewer_producers(split, 0)     # the epilogue warps copy: no producer role of its own
    tma, loads = copies.tma, copies.loads
    if split.mmas and split.form == "attention" and (not tma or len(tma) < len(loads)):
        return replace(split, mmas=(), attention=False,
                       note="the MMA warp shares the producer's warpgroup, whose copies are cp.async here")
    if tma and split.form == "tcgen05" and split.producers > 32:
        return _fewer_producers(split, 32)      # the producer's role is one warp
    return split


def _fewer_producers(split: "WarpSplit", producers: int) -> "WarpSplit":
    """`split` with a producer role of `producers` threads (everyone meets at `publish`)."""
    fewer = split.producers - producers
    return replace(split, producers=producers, barriers=tuple(
        replace(b, threads=b.threads - fewer) if b.name == "publish" else b for b in split.barriers))
