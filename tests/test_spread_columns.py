"""A one-warp mma grid's idle warps take columns (decode attention, MLA decode: 16 query rows).

The scores of a decode attention (16 x BK) keep each row in one warp for their row max and sum, and
16 rows make that one warp: the other warps compute copies. The output accumulator (16 x D, D up to
512) is not reduced along its rows, so it spreads its columns over all the warps
(`MmaLayout.for_shape(spread_columns=True)`), each warp still holding every row: the scores' row
statistics broadcast into it in registers ("fragment-rows") and the probabilities are its A
fragments as they are (`rows_replicated`). TileGym-style MLA decode (16 x 512 f32 output, 128
threads) spilled 998 instructions on sm_90 (NVIDIA's: 124), now none.
"""

from __future__ import annotations

import pytest

from tileiras.ir.types import ScalarType, TileType
from tileiras.layout.encodings import MmaLayout, MmaRowLayout, rows_replicated
from tileiras.layout.index_eval import placements
from tileiras.tileaa.mma_forms import SHAPES
from tileiras.tileas.mma_sync_staging import a_in_registers
from tileiras.tileas.move_forms import broadcast_form
from tileiras.tileas.operands import RegisterTile


@pytest.mark.parametrize("shape,rows_only,spread,warps", [
    ((16, 256), True, True, (1, 1, 4)),      # the decode output: every warp takes 8 of the 32 column blocks
    ((16, 16), True, True, (1, 1, 2)),       # as many warps as there are column blocks
    ((16, 32), True, False, (1, 1, 1)),      # the scores, reduced along their rows: one warp
    ((64, 64), True, True, (1, 4, 1)),       # rows fill the warps already
    ((32, 256), True, True, (1, 2, 1)),      # two row warps: a copy's rows would not match, no spread
])
def test_the_warp_grid(shape: tuple, rows_only: bool, spread: bool, warps: tuple) -> None:
    assert MmaLayout.for_shape(128, shape, rows_only, spread_columns=spread).warps == warps


def test_every_warp_of_the_spread_grid_holds_the_rows_the_copies_give_it() -> None:
    """What "fragment-rows" reads: result slot s of a thread takes its row-statistic slot
    (s // 4 // rn) * 2 + (s % 4) // 2 of the one-warp grid; on every thread that is the row s lies in."""
    n = 256
    parent = MmaLayout.for_shape(128, (16, 32), True)
    spread = MmaLayout.for_shape(128, (16, n), True, spread_columns=True)
    assert rows_replicated(parent, spread) and not rows_replicated(spread, parent)
    rows = placements(MmaRowLayout(parent), 128, 16)
    rn = spread.repeats[2]
    for (tid, s), (e, _) in placements(spread, 128, 16 * n).items():
        assert rows[tid, (s // 4 // rn) * 2 + (s % 4) // 2][0] == e // n, (tid, s)


def test_a_row_broadcast_between_grids_that_place_rows_differently_is_an_exchange() -> None:
    src, dst = TileType((64, 1), ScalarType("f32")), TileType((64, 64), ScalarType("f32"))
    rows = MmaRowLayout(MmaLayout(128, (1, 64, 64), (1, 4, 1)))
    assert broadcast_form(src, dst, rows, MmaLayout(128, (1, 64, 64), (1, 4, 1)), 8) == "fragment-rows"
    assert broadcast_form(src, dst, rows, MmaLayout(128, (1, 64, 64), (1, 2, 2)), 8) == "exchange"
    one = MmaRowLayout(MmaLayout(128, (1, 16, 32), (1, 1, 1)))
    small = TileType((16, 1), ScalarType("f32")), TileType((16, 256), ScalarType("f32"))
    assert broadcast_form(*small, one, MmaLayout(128, (1, 16, 256), (1, 1, 4)), 8) == "fragment-rows"


class _Registers(RegisterTile):
    def __init__(self, type: TileType, layout: object) -> None:
        self.type, self.layout = type, layout


def test_probabilities_of_a_one_warp_grid_are_the_spread_outputs_a_fragments() -> None:
    shape = SHAPES["f16", "f16", "f32"]
    p = _Registers(TileType((16, 32), ScalarType("f16")), MmaLayout(128, (1, 16, 32), (1, 1, 1)))
    assert a_in_registers(p, MmaLayout(128, (1, 16, 256), (1, 1, 4)), shape)
    rows2 = _Registers(TileType((32, 32), ScalarType("f16")), MmaLayout(128, (1, 32, 32), (1, 2, 1)))
    assert not a_in_registers(rows2, MmaLayout(128, (1, 32, 256), (1, 2, 2)), shape)
