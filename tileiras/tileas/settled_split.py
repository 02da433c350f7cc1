"""Pass `plan-shared-memory`'s last step: the warp split as its loop's copies settle it (`settle`, on
the copies recorded in the plan, `KernelPlan.ring_copies`), written into the kernel's plan, which the
lowering emits as it is (it neither settles the split again nor checks it: the split and the copies it
reads are one decision's).

Once a split loop's copy mechanism is known (its stage ring's TMA copies, `pipeline_copies.decide`):
* the attention form's MMA warp shares the producer's warpgroup, so it needs every load copied by TMA
  (cp.async copies take the whole warpgroup); else the consumers issue the mmas;
* a producer that stages loads through its registers (stage_rings.producer_stages) keeps its launch
  budget (`WarpSplit.loads_in_registers`); one that copies by cp.async from rows that are not contiguous
  counts its copies a stage (`WarpSplit.copies`), each an address of its own, for its budget;
* in the tcgen05 form a producer that is not one TMA thread (element copies, or cp.async: a tf32 tile
  without the 16-byte facts, all of the loads or some beside TMA boxes) is the epilogue warps themselves
  (`WarpSplit.producers` 0, but beside a block-scaled mma): the CTA is theirs and the MMA warp's, where a
  producer warpgroup of its own beside the MMA warp made it 288 (or
  416, launched with 128 registers) and spilled, and one TMA warp's lanes copying the rest spilled 1168
  instructions (a tf32 A of 128 x 64 in 4-byte copies: 256 a lane);
* a TMA-fed tcgen05-form producer needs one thread: its role is one warp (NVIDIA's sm_100 matmuls: one TMA
  warp, one MMA warp);
* where the SM holds no more CTAs of the kernel anyway (`ctas_alone`), idle warps after the MMA warp make the
  roles one warpgroup that gives its registers back to the epilogue's (warp_roles.ROLE_WARPGROUP); else the
  roles are the one or two warps alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.record import replace
from .pipeline_copies import decide
from .warp_roles import RESERVED

if TYPE_CHECKING:
    from ..target import Caps
    from .pipeline_copies import RingCopies
    from .shared_stages import StagingFacts
    from .stage_rings import StageRing
    from .warp_roles import WarpSplit


def settled(k: "StagingFacts") -> object:
    """The kernel's warp split once the split loop's copies are known, deciding them here: what
    plan-shared-memory's walk needs before it records them (shared_tcgen05.py). Settling is idempotent."""
    split = k.warp_split
    return split if split is None else settle(split, decide(k, split.loop))


def settle(split: "WarpSplit", copies: "Optional[RingCopies]", ring: "Optional[StageRing]" = None,
           alone: int = 0) -> "WarpSplit":
    """`split` settled by its loop's `copies` and, once recorded, its stage `ring` (module docstring): the split
    as decided where the loop has none (it is left unpipelined). `alone`: the CTAs an SM holds of the kernel
    where that is no more than it asks for (`ctas_alone`; 0 otherwise): the tcgen05 form's roles then make one
    whole warpgroup."""
    if copies is None:
        return split
    if ring is not None and ring.produced:
        split = replace(split, loads_in_registers=True)
    if ring is not None and split.producers and split.form != "tcgen05":
        split = replace(split, copies=_strided_copies(copies, ring, split.producers))
    if split.form == "tcgen05" and split.producers and (ring is not None and ring.produced
                                                        or len(copies.tma or ()) < len(copies.loads)) \
            and not any(op.name == "cuda_tile.mmaf_scaled" for op in split.mmas):
        # the epilogue warps copy: no producer role of its own; copying, they keep the launch budget of one CTA an
        # SM (at an occupancy hint's 2, 128 registers: a tf32 bmm's 64 x 256 epilogue copying and rounding its
        # stages spilled)
        split = _fewer_producers(split, 0, alone if alone == 1 else 0)
    tma, loads = copies.tma, copies.loads
    if split.mmas and split.form == "attention" and (not tma or len(tma) < len(loads)):
        return replace(split, mmas=(), attention=False,
                       note="the MMA warp shares the producer's warpgroup, whose copies are cp.async here")
    if tma and split.form == "tcgen05" and split.producers > 32:
        return _fewer_producers(split, 32, alone)      # the producer's role is one warp
    return split


def _strided_copies(copies: "RingCopies", ring: "StageRing", producers: int) -> int:
    """The cp.async copies each of `producers` threads issues to fill a stage of `ring` from rows that are not
    contiguous (the innermost stride not known to be 1): each one an address of its own. (Along a contiguous row
    a thread's copies are offsets from a few bases: a tf32 B of 64 x 128 in 4-byte copies, 64 a thread, filled
    spill-free at 72 registers.)"""
    from ..tileaa.access_width import chunk_elements
    from ..tileaa.views import view_of

    n = 0
    for load in copies.loads:
        view, tile = view_of(load.operand("view")), ring.tiles[load]
        if view is None or copies.engine_of(load) != "cp.async" or not view.dim_map \
                or view.tensor.type.strides[view.dim_map[-1]] == 1:
            continue
        chunk = chunk_elements(load, view, tile)
        n += -(-tile.num_elements // chunk // producers) if chunk else 0
    return n


def _fewer_producers(split: "WarpSplit", producers: int, alone: int) -> "WarpSplit":
    """`split` (the tcgen05 form) with a producer role of `producers` threads, 32 or 0; where the SM holds `alone`
    CTAs of the kernel (> 0), idle warps beside the MMA warp make the roles one whole warpgroup (`WarpSplit.idle`,
    warp_roles.ROLE_WARPGROUP), launched for that many CTAs an SM. Everyone meets at `publish`."""
    idle = 96 - producers if alone else 0
    fewer = split.producers + split.idle - producers - idle
    return replace(split, producers=producers, idle=idle, min_ctas=alone or split.min_ctas, barriers=tuple(
        replace(b, threads=b.threads - fewer) if b.name == "publish" else b for b in split.barriers))


def ctas_alone(caps: "Caps", shared_bytes: int, hint: int, consumers: int) -> int:
    """The CTAs an SM holds of a kernel taking `shared_bytes` of shared memory, where that is no more than its
    occupancy `hint` asks for (one where there is none), else 0. setmaxnreg needs a whole warpgroup, and ptxas
    launches a kernel with it at the register share of `.minnctapersm` CTAs: the tcgen05 form's roles take a
    warpgroup of their own only where the SM holds no more CTAs anyway. Else they are one or two warps (192
    threads at under 100 registers), and shared memory alone bounds how many CTAs an SM holds (an int8 GEMM
    of 64 x 64 tiles: 6, where 256 threads at 255 registers held one). A hint of more than one CTA holds only
    with one epilogue warpgroup (two would launch with 80 registers)."""
    held = caps.smem_per_sm // (shared_bytes + RESERVED)
    if held > max(1, hint) or hint > 1 and consumers > 128:
        return 0
    return max(1, held)
