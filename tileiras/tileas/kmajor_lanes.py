"""How a warp's lanes walk a K-major copy (lowering/kmajor_copy.py): each lane moves v x v blocks,
the warp's 32 blocks some along X (M or N) and the rest along K; the shape is chosen by counting the
shared-memory wavefronts of the copy's loads and stores on the buffers' layouts
(target/shared_banks.py).
"""

from __future__ import annotations

from functools import lru_cache

from ..ir.record import replace
from ..layout.shared_matrix import SharedMatrix, offset_of


def warp_shape(src: SharedMatrix, dst: SharedMatrix, stored_k_rows: bool, v: int, blocks_x: int, blocks_k: int,
               k_first: int = 0) -> tuple[int, bool]:
    """(how many of a warp's 32 v x v blocks lie along X, the rest along K; whether consecutive lanes
    go along X): the shape whose loads and stores take the fewest shared-memory wavefronts
    (target/shared_banks.py, on the buffers' layouts), the copy's first mapping (`blocks_x`, lanes
    along X) where that ties. Lanes along X alone keep an N-major B's loads conflict-free, but its
    K-major stores, rows v apart at one K column, hit few banks: 16-way on the int8 128x128x64 B,
    whose matmul ran at 2.2x NVIDIA's time on an H200 (8 blocks along X: loads 2-way, stores 4-way);
    an f32 stage rounded to tf32 where it lies reads and writes whole 128-byte rows with its lanes
    along K."""
    default = 32 if blocks_x % 32 == 0 else blocks_x if 32 % blocks_x == 0 else 0
    if not default or blocks_x * blocks_k < 32:
        return blocks_x, True
    best = _best_warp_shape(_layout(src), _layout(dst), stored_k_rows, v, blocks_x, blocks_k, k_first, default)
    return (blocks_x, True) if best == (default, True) else best


def _layout(m: SharedMatrix) -> SharedMatrix:
    return replace(m, stage="")      # stages are whole swizzle periods: the banks do not see them


@lru_cache(maxsize=256)
def _best_warp_shape(src: SharedMatrix, dst: SharedMatrix, stored_k_rows: bool, v: int, blocks_x: int,
                     blocks_k: int, k_first: int, default: int) -> tuple[int, bool]:
    from ..target.shared_banks import wavefronts

    lanes = list(range(32))
    nbytes = v * src.elem_bytes

    def cost(shape: tuple[int, bool]) -> int:
        xw, along_x = shape
        kw = 32 // xw
        blocks = [(lane % xw, lane // xw) if along_x else (lane // kw, lane % kw) for lane in lanes]
        total = 0
        for j in range(v):
            loads = [offset_of(src, k_first + kb * v + j, xb * v) if stored_k_rows else
                     offset_of(src, xb * v + j, k_first + kb * v) for xb, kb in blocks]
            stores = [offset_of(dst, xb * v + j, kb * v) for xb, kb in blocks]
            total += wavefronts(loads, lanes, nbytes)[1] + wavefronts(stores, lanes, nbytes)[1]
        return total

    shapes = [(xw, along_x) for xw in (32, 16, 8, 4, 2, 1) for along_x in (True, False)
              if xw <= default and blocks_x % xw == 0 and blocks_k % (32 // xw) == 0]
    return min(shapes, key=lambda shape: (cost(shape), shape != (default, True), -shape[0], not shape[1]))
