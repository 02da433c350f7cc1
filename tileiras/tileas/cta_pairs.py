"""Whether a CTA pair runs a pipelined loop's mma (sm_100 / sm_103 `tcgen05.mma.cta_group::2`),
decided at nv_tileas: where the mma is the whole work of a TMA-fed K loop (`plan`), and what each
CTA's stage then holds (`staged_type`: its A rows, half of B). lowering/cta_pair.py emits the pair
(its copies, the leader's MMAs, the shared barriers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation
from ..ir.record import record
from ..ir.types import TileType
from ..layout.shared_matrix import matrix_shape
from ..tileaa.mma_operands import passes, resident_loop, scale_loads, source
from . import tma_boxes
from .tcgen05_select import is_pair

if TYPE_CHECKING:
    from .shared_stages import StagingFacts


@record
class CtaPair:
    mma: Operation
    a_load: Operation
    b_load: Operation         # each CTA copies half of its N
    b_dim: int                # the dimension of B's tile along N: its last where stored (K, N), else the one
                              # before it (a batched B's (1, N, K) tile)


def plan(k: "StagingFacts", loop: Operation, loads: tuple) -> Optional[CtaPair]:
    """The pair running the mma of `loop`, or None where its CTAs run their halves alone: the loop
    must be the pair mma's K loop (warp-specialized in the tcgen05 form, or not at all) and every
    load must go by TMA (checked on the stages the pair copies: B's half)."""
    split = k.warp_split
    specialized = split is not None and split.loop is loop
    if specialized and (split.form != "tcgen05" or len(split.mmas) != 1):
        return None
    layouts = getattr(k.assignment, "tcgen05_layouts", None) or {}
    if not layouts:
        return None      # no tcgen05 mma, no pair
    mmas = [op for op in layouts if is_pair(op) and (resident_loop(op) or (None,))[0] is loop]
    if len(mmas) != 1:
        return None
    mma = mmas[0]
    scaled = mma.name == "cuda_tile.mmaf_scaled"   # each CTA restages its own scales
    (a, _), (b, b_transposed) = (source(mma.operand(n), passes) for n in ("lhs", "rhs"))
    # A and B staged by the loop, and nothing else but the block scales (which each CTA restages itself)
    if a is b or not {a, b} <= set(loads) or not set(loads) - {a, b} <= set(scale_loads(mma) if scaled else ()):
        return None
    pair = CtaPair(mma, a, b, len(b.results[0].type.shape) - (2 if b_transposed else 1))  # type: ignore
    rows = tma_boxes.box_rows(k.caps)
    for load in (a, b):
        tile = staged_type(pair, load)
        matrix = matrix_shape(tile, k.pad_buffers, swizzled=True)
        if tma_boxes.plan(load, matrix, rows, tile=tile)[0] is None:
            return None
    return pair


def staged_type(pair: Optional[CtaPair], load: Operation) -> TileType:
    """The tile a CTA's stage holds of `load`: B's half (its columns split over the pair), else the tile."""
    tile = load.results[0].type
    assert isinstance(tile, TileType)
    if pair is None or load is not pair.b_load:
        return tile
    shape = list(tile.shape)
    shape[pair.b_dim] //= 2
    return TileType(tuple(shape), tile.element)
