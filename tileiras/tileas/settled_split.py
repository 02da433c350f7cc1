"""The warp split of an sm_100 kernel once its loop's copies are known: the attention form's MMA
warp shares the producer's warpgroup, so it needs every load copied by TMA; else the consumers
issue the mmas (`split_mmas`). The lowering settles its split so (lowering/warp_specialize.settle);
the shared-memory plan asks `settled` for the split the lowering will have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.record import replace
from .stage_rings import ring_of
from . import tma_boxes

if TYPE_CHECKING:
    from .shared_stages import StagingFacts


def settled(k: "StagingFacts") -> object:
    """The kernel's warp split as the lowering (warp_specialize.settle) leaves it once the split loop's
    copies are known (`split_mmas`): an attention whose loads TMA cannot all copy has no MMA warp. (A
    loop left unpipelined is not settled.) For plan-shared-memory (shared_tcgen05.py) and
    tcgen05_buffers.first_asker."""
    split = k.warp_split
    if split is None or not split.mmas:
        return split
    ring = ring_of(k, split.loop)
    if ring is None or not ring.plan.pipelined:
        return split
    loads = ring.plan.loads
    tma = tma_boxes.pipeline_copies(k.caps, loads, {load: ring.matrix(k, load) for load in loads},  # type: ignore[arg-type]
                                    ring.dense, ring.tiles, ring.beside)[0] if k.caps.has("tma") else None
    return split if split_mmas(k, tma, loads) else replace(split, mmas=(), attention=False)  # type: ignore[arg-type]


def split_mmas(k: "StagingFacts", tma: Optional[dict], loads: tuple) -> tuple:
    """The mmas the split's MMA warp issues once the loop's copies are known (`tma`: the loads TMA
    copies): the attention form's MMA warp shares the producer's warpgroup, so it needs every load
    copied by TMA (cp.async copies take the whole warpgroup); else () and the consumers issue them
    (lowering/warp_specialize.settle)."""
    split = k.warp_split
    if split.form == "attention" and (not tma or len(tma) < len(loads)):
        return ()
    return split.mmas
