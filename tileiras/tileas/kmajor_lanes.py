"""How a warp's lanes walk a K-major copy (lowering/kmajor_copy.py): each lane moves v x v blocks,
the warp's 32 blocks some along X (M or N) and the rest along K, the slower coordinate skewed by the
faster one; the shape is chosen by counting the shared-memory wavefronts of the copy's loads and
stores on the buffers' layouts (target/shared_banks.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ..ir.record import replace
from ..layout.shared_matrix import SharedMatrix, offset_of, row_flip


class WarpShape(NamedTuple):
    """A warp's 32 v x v blocks: `xw` along X, 32 / `xw` along K; consecutive lanes go along X
    (`along_x`) or K; the lane at (fast, slow) in that grid moves the block whose slow coordinate is
    (slow + skew * fast) mod the slow side (a diagonal walk: the rows one store or load touches then
    fall in other swizzle chunks). Where a block's row is one 32-bit word (8-bit 4 x 4, 16-bit 2 x 2
    blocks moved across the transpose), a lane may also take its rows in turn: its step s loads row
    s ^ (lane // load_turn mod v) and stores row s ^ (lane // store_turn mod v) (0: no turn), so one
    instruction's lanes reach rows of both halves of the banks; the copy swaps the words' elements
    back and selects the row to store (lowering/kmajor_copy.py), the rows' offsets xor-ed from the
    first's (layout.shared_matrix.row_flip)."""
    xw: int
    along_x: bool
    skew: int = 0
    load_turn: int = 0
    store_turn: int = 0

    def block(self, lane: int) -> tuple[int, int]:
        """(x, k) of the block `lane` moves, in blocks within the warp's tile."""
        fast_side = self.xw if self.along_x else 32 // self.xw
        fast, slow = lane % fast_side, lane // fast_side
        slow = (slow + self.skew * fast) % (32 // fast_side)
        return (fast, slow) if self.along_x else (slow, fast)

    def rows(self, lane: int, step: int, v: int) -> tuple[int, int]:
        """(the row `lane` loads, the row it stores) at `step` of its v x v block."""
        def turn(d: int) -> int:
            return step ^ (lane // d) % v if d else step
        return turn(self.load_turn), turn(self.store_turn)


def warp_shape(src: SharedMatrix, dst: SharedMatrix, stored_k_rows: bool, v: int, blocks_x: int, blocks_k: int,
               k_first: int = 0, turns: bool = True) -> WarpShape:
    """The shape whose loads and stores take the fewest shared-memory wavefronts
    (target/shared_banks.py, on the buffers' layouts), the copy's first mapping (`blocks_x`, lanes
    along X) where that ties. Lanes along X alone keep an N-major B's loads conflict-free, but its
    K-major stores, rows v apart at one K column, hit few banks: 16-way on the int8 128x128x64 B,
    whose matmul ran at 2.2x NVIDIA's time on an H200 (8 blocks along X: loads 2-way, stores 4-way);
    an f32 stage rounded to tf32 where it lies reads and writes whole 128-byte rows with its lanes
    along K. The tf32 128x128x32 B (4 x 4 blocks of 32-bit words, 128-byte swizzle both sides) takes
    2-way stores in every unskewed shape and none with 8 blocks along X, lanes along K, skewed by 2;
    the int8 one takes none only with turned rows (loads by lane // 2, stores by lane // 16). `turns`:
    whether the caller has the registers for those; only where a row is one word moved across the
    transpose, and the rows' offsets flip (layout.shared_matrix.row_flip)."""
    default = 32 if blocks_x % 32 == 0 else blocks_x if 32 % blocks_x == 0 else 0
    if not default or blocks_x * blocks_k < 32:
        return WarpShape(blocks_x, True)
    turns = turns and stored_k_rows and v * src.elem_bytes == 4 and k_first % v == 0 \
        and row_flip(src) is not None and row_flip(dst) is not None
    best = _best_warp_shape(_layout(src), _layout(dst), stored_k_rows, v, blocks_x, blocks_k, k_first, default, turns)
    return WarpShape(blocks_x, True) if best == WarpShape(default, True) else best


def _layout(m: SharedMatrix) -> SharedMatrix:
    return replace(m, stage="")      # stages are whole swizzle periods: the banks do not see them


def copy_wavefronts(src: SharedMatrix, dst: SharedMatrix, stored_k_rows: bool, v: int, shape: WarpShape,
                    k_first: int = 0) -> tuple[int, int]:
    """(wavefronts, conflict-free wavefronts) of one warp's loads and stores of its blocks in `shape`,
    at the origin of the copy."""
    from ..target.shared_banks import wavefronts

    lanes = list(range(32))
    nbytes = v * src.elem_bytes
    blocks = [shape.block(lane) for lane in lanes]
    total = ideal = 0
    for step in range(v):
        rows = [shape.rows(lane, step, v) for lane in lanes]
        loads = [offset_of(src, k_first + kb * v + j, xb * v) if stored_k_rows else
                 offset_of(src, xb * v + j, k_first + kb * v) for (xb, kb), (j, _) in zip(blocks, rows)]
        stores = [offset_of(dst, xb * v + j, kb * v) for (xb, kb), (_, j) in zip(blocks, rows)]
        for access in (loads, stores):
            _, waves, best = wavefronts(access, lanes, nbytes)
            total, ideal = total + waves, ideal + best
    return total, ideal


@lru_cache(maxsize=256)
def _best_warp_shape(src: SharedMatrix, dst: SharedMatrix, stored_k_rows: bool, v: int, blocks_x: int,
                     blocks_k: int, k_first: int, default: int, turns: bool) -> WarpShape:
    def cost(shape: WarpShape) -> tuple[int, int]:
        return copy_wavefronts(src, dst, stored_k_rows, v, shape, k_first)

    grids = [(xw, along_x) for xw in (32, 16, 8, 4, 2, 1) for along_x in (True, False)
             if xw <= default and blocks_x % xw == 0 and blocks_k % (32 // xw) == 0]

    def best(shapes: "list[WarpShape]") -> WarpShape:
        return min(shapes, key=lambda shape: (cost(shape)[0], shape != WarpShape(default, True),
                                              shape.skew, -shape.xw, not shape.along_x))

    found = best([WarpShape(xw, along_x, skew) for xw, along_x in grids
                  for skew in range(min(8, 32 // (xw if along_x else 32 // xw)))])
    waves, ideal = cost(found)
    if waves == ideal or not turns:
        return found
    # Turns only where a row is one word moved across the transpose: the load's turn is undone by a
    # byte permute, the store's by one select (so it takes two values: lane // 16 for 4 x 4 blocks).
    # A store's rows are v apart: a 64-byte K-major row keeps them in one half of the banks unturned.
    store_turns = [d for d in (1, 2, 4, 8, 16) if 32 // d <= 2 or v == 2]
    turned = best([WarpShape(xw, along_x, 0, lt, st) for xw, along_x in grids
                   for lt in (0, 1, 2, 4, 8, 16) for st in (0, *store_turns) if lt or st])
    return turned if cost(turned)[0] < waves else found
