"""Pass `plan-shared-memory`'s last step: the warp split as its loop's copies settle it (`settled`),
written into the kernel's plan, which the lowering emits as it is.

Once a split loop's copy mechanism is known (its stage ring's TMA copies, `pipeline_copies.decide`):
* the attention form's MMA warp shares the producer's warpgroup, so it needs every load copied by TMA
  (cp.async copies take the whole warpgroup); else the consumers issue the mmas (`split_mmas`);
* a TMA-fed tcgen05-form producer needs one thread: its role is one warp, not a warpgroup (the form
  gives no role setmaxnreg, which would need the whole warpgroup), so the CTA launches 96 threads
  fewer (NVIDIA's sm_100 matmuls: one TMA warp) and the MMA warp follows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.record import replace
from .pipeline_copies import decide

if TYPE_CHECKING:
    from .shared_stages import StagingFacts


def settled(k: "StagingFacts") -> object:
    """The kernel's warp split once the split loop's copies are known (module docstring); the split as
    decided where the loop is left unpipelined. Settling is idempotent."""
    split = k.warp_split
    if split is None:
        return split
    copies = decide(k, split.loop)      # (a split kernel's: no multicast, the copies as TMA's boxes make them)
    if copies is None:
        return split
    tma, loads = copies.tma, copies.loads
    if split.mmas and not split_mmas(k, tma, loads):
        return replace(split, mmas=(), attention=False,
                       note="the MMA warp shares the producer's warpgroup, whose copies are cp.async here")
    if tma and split.form == "tcgen05" and split.producers != 32:
        fewer = split.producers - 32     # everyone meets at `publish`: the producer's role is one warp
        return replace(split, producers=32, barriers=tuple(
            replace(b, threads=b.threads - fewer) if b.name == "publish" else b for b in split.barriers))
    return split


def split_mmas(k: "StagingFacts", tma: Optional[dict], loads: tuple) -> tuple:
    """The mmas the split's MMA warp issues once the loop's copies are known (`tma`: the loads TMA
    copies): the attention form's MMA warp shares the producer's warpgroup, so it needs every load
    copied by TMA (cp.async copies take the whole warpgroup); else () and the consumers issue them
    (`settled`)."""
    split = k.warp_split
    if split.form == "attention" and (not tma or len(tma) < len(loads)):
        return ()
    return split.mmas
