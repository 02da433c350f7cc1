"""How a tile's elements are spread over the threads of a CTA.

Every tile value gets one layout, chosen by `assign_layouts.py` before code
emission. A layout maps (thread, slot) to the tile's row-major element index,
so reshape (row-major order preserved) is free in every layout. A tile with
fewer elements than the layout covers is replicated; `valid` marks the first
copy of each element so that stores and atomics happen once.

* `BlockedLayout`: element `e` lives in thread `e mod T`, slot `e div T`
  (T threads). Any tile; ops that move elements between threads go through
  shared memory (`KernelLowering.exchange`).
* `RowWarpLayout`: the tile is seen as rows of `cols` elements (the innermost
  axis, or 1 for a reduced tile); row r lives in warp `r mod W`, slot group
  `r div W`, and its elements are spread over the 32 lanes of that warp (lane
  l holds the `cols / 32` consecutive elements from `l * cols / 32`, or
  element `l mod cols` when a row is narrower than a warp). A reduce or scan
  along the row then combines with warp shuffles, with no shared memory.
  A tile with `cols == 1` holds a row's single element in every lane, which
  is what a row reduction produces and what a row broadcast reads.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

from ..ir.record import record

WARP = 32

# Emits one prologue instruction (it depends only on the thread id) and returns its name.
Pre = Callable[[str, str], str]


@record
class BlockedLayout:
    threads: int

    def slots(self, num_elements: int) -> int:
        return max(1, -(-num_elements // self.threads))

    def owns_all(self, num_elements: int) -> bool:
        """True when every (thread, slot) pair names a distinct, in-range element."""
        return num_elements % self.threads == 0 and num_elements >= self.threads

    def element(self, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
        """(i32 element index, i1 'first copy' or None when always) of this thread's `slot`."""
        raw = tid if slot == 0 else pre(f"add i32 {tid}, {slot * self.threads}", "e")
        if self.owns_all(num_elements):
            return raw, None
        e = "0" if num_elements == 1 else pre(f"urem i32 {raw}, {num_elements}", "e")
        return e, pre(f"icmp ult i32 {raw}, {num_elements}", "ok")

    def describe(self) -> str:
        return f"#blocked<threads={self.threads}>"


@record
class RowWarpLayout:
    threads: int
    cols: int

    @staticmethod
    def fits(cols: int) -> bool:
        """A row fits one warp's lanes x slots: a power of two up to 32, or a multiple of 32."""
        return cols >= 1 and (cols % WARP == 0 or (cols <= WARP and cols & (cols - 1) == 0))

    @property
    def warps(self) -> int:
        return self.threads // WARP

    @property
    def per_lane(self) -> int:
        """Consecutive elements of a row held by one lane."""
        return max(1, self.cols // WARP)

    @property
    def lanes(self) -> int:
        """Lanes that hold distinct elements of one row (a power of two)."""
        return min(WARP, self.cols)

    def owns_all(self, num_elements: int) -> bool:
        """True when every (thread, slot) pair names a distinct, in-range element."""
        return (num_elements // self.cols) % self.warps == 0 and self.cols >= WARP

    def row_groups(self, num_elements: int) -> int:
        return max(1, -(-(num_elements // self.cols) // self.warps))

    def slots(self, num_elements: int) -> int:
        return self.row_groups(num_elements) * self.per_lane

    def element(self, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
        rows, W, cs = num_elements // self.cols, self.warps, self.per_lane
        group, within = divmod(slot, cs)
        warp = pre(f"lshr i32 {tid}, 5", "w")
        lane = pre(f"and i32 {tid}, 31", "ln")
        raw = warp if group == 0 else pre(f"add i32 {warp}, {group * W}", "r")
        checks = []
        row = raw
        if rows % W:
            row = pre(f"urem i32 {raw}, {rows}", "r")
            checks.append(pre(f"icmp ult i32 {raw}, {rows}", "ok"))
        if self.cols >= WARP:
            col = lane if cs == 1 else pre(f"mul i32 {lane}, {cs}", "c")
            col = col if within == 0 else pre(f"add i32 {col}, {within}", "c")
        elif self.cols == 1:
            col = "0"
        else:
            col = pre(f"and i32 {lane}, {self.cols - 1}", "c")
        if self.cols < WARP:
            checks.append(pre(f"icmp ult i32 {lane}, {self.cols}", "ok"))
        base = row if self.cols == 1 else pre(f"mul i32 {row}, {self.cols}", "e")
        e = base if col == "0" else (col if base == "0" else pre(f"add i32 {base}, {col}", "e"))
        valid = checks[0] if checks else None
        if len(checks) == 2:
            valid = pre(f"and i1 {checks[0]}, {checks[1]}", "ok")
        return e, valid

    def describe(self) -> str:
        return f"#row_warp<cols={self.cols}, warps={self.warps}>"


Layout = Union[BlockedLayout, RowWarpLayout]


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
