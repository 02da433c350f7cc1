"""How a tile's elements are spread over the threads of a CTA.

One layout for every tile, chosen for correctness and simplicity: the tile's
row-major element `e` lives in thread `e mod T`, slot `e div T`, where T is
the CTA's thread count. A tile smaller than the CTA is replicated: thread t
holds element `t mod N`. So every thread holds `ceil(N / T)` slots, a 0-d
tile is uniform across the CTA, and reshape (row-major order preserved) is
free. Ops that move elements between threads go through shared memory
(`exchange.py`).
"""

from __future__ import annotations

from ..ir.record import record


@record
class BlockedLayout:
    threads: int

    def slots(self, num_elements: int) -> int:
        return max(1, -(-num_elements // self.threads))

    def owns_all(self, num_elements: int) -> bool:
        """True when every (thread, slot) pair names a distinct, in-range element."""
        return num_elements % self.threads == 0


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def choose_threads(max_tile_elements: int) -> int:
    """Threads per CTA: NVIDIA uses 4 warps by default (num-warps = 4)."""
    return 128
