"""Which engine copies a pipelined loop's loads into its stages: TMA boxes (one thread issues a
stage's copies, completion counted in bytes on the stage's full mbarrier) or cp.async (every thread
copies its chunks), with a remark on each load TMA refuses; in a cluster-split kernel, which
shared tiles are multicast (multicast_groups.py); a CTA pair's copies each hold its A rows and half
of B (cta_pairs.py). The boxes themselves: tma_boxes.pipeline_copies.
"""

from __future__ import annotations

from typing import Any, Optional

from ..ir.core import Operation
from . import multicast_groups, tma_boxes
from .multicast_groups import ClusterLoads


def choose(k: Any, loop: Operation, loads: tuple, matrices: dict, dense: set, tiles: dict,
           paired: bool, beside: "set | frozenset", refilled: "set | frozenset" = frozenset()
           ) -> tuple[Optional[dict], Optional[ClusterLoads]]:
    """The loads' TMA copies (load -> tma_boxes.TmaCopy, targets with the "tma" feature) and the
    cluster's multicast plan; (None, None) where a load cannot use TMA: the loop then keeps cp.async
    (the full barrier counts the copying threads' arrivals) and a remark on each load says why. The
    loads of `beside` (StageRing.beside: those cp.async can copy, block scales in unpadded stages) may
    keep cp.async beside the others' TMA boxes: the full barrier then counts the TMA thread's arrival
    with the copying threads' (NVIDIA's A scales).
    In a kernel split over a cluster, the tiles several CTAs load are multicast in slices where
    `multicast_groups.plan` allows; a CTA pair's (`paired`) copy each its own A rows and half of B
    (`tiles`: what each stage holds). `k`: the kernel being lowered (its target's capabilities, its
    remarks)."""
    if not k.caps.has("tma"):
        multicast_groups.refuse(k, loop, loads, "")
        return None, None
    copies, why = tma_boxes.pipeline_copies(k.caps, loads, matrices, dense, tiles, beside, refilled)
    if copies is None:
        for load in loads:
            reason = why.get(load) or "another load of the loop cannot use TMA: " + "; ".join(why.values())
            k.remark("missed", "memory", "RemarkTmaLoadMissed", "Pipelined load copied with cp.async, not TMA",
                     load, Reason=reason)
        multicast_groups.refuse(k, loop, loads, "the loads are copied with cp.async, not TMA")
        return None, None
    for load, reason in why.items():
        k.remark("missed", "memory", "RemarkTmaLoadMissed", "Pipelined load copied with cp.async, not TMA",
                 load, Reason=f"{reason} (cp.async beside the other loads' TMA boxes, on the same full mbarrier)")
    cluster = None
    if paired:
        k.remark("passed", "memory", "RemarkTmaCtaPair", "Operands copied by the CTA pair", loop,
                 Reason="each CTA copies its A rows and half of B's columns; the copies complete on the pair "
                        "leader's mbarrier (.cta_group::2)")
    elif not why:
        cluster, copies = multicast_groups.plan(k, loop, copies)
    else:
        multicast_groups.refuse(k, loop, loads, "a load of the loop is copied with cp.async")
    return copies, cluster
