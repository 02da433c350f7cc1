"""How a tile's elements are spread over the threads of a CTA: the layouts of nv_tileas' tile types.

Every tile value gets one layout, chosen by `tileas/assign_layouts.py` before code
emission and printed with the IR (`describe`). A layout maps (thread, slot) to the
tile's row-major element index, so reshape (row-major order preserved) is free in
every layout. A tile with fewer elements than the layout covers is replicated;
`valid` marks the first copy of each element so that stores and atomics happen once.
This module holds what a layout is (its geometry: runs, slots, warps, fragments);
the index arithmetic the lowering emits for it is `layout/index_math.py`.

* `BlockedLayout`: runs of `vec` consecutive elements go round the T threads:
  element `e` lives in thread `(e div vec) mod T`, slot
  `(e div (vec T)) vec + e mod vec` (vec 1 where it does not divide the tile).
  Any tile; ops that move elements between threads go through shared memory.
  A kernel's vec makes its global accesses 16 bytes wide.
* `RowWarpLayout`: the tile is seen as rows of `cols` elements (the innermost
  axis, or 1 for a reduced tile); row r lives in warp `r mod W`, slot group
  `r div W`, and its elements are spread over the 32 lanes of that warp (or
  element `l mod cols` when a row is narrower than a warp): in runs of `chunk`
  elements dealt round the row's lanes, so that a warp's 16-byte accesses
  cover 512 contiguous bytes (coalesced, as NVIDIA's row kernels access), or,
  for scans and order-sensitive reduces (`chunk` 0), lane l holds the
  `cols / 32` consecutive elements from `l * cols / 32`. A reduce or scan
  along the row then combines with warp shuffles, with no shared memory.
  A tile with `cols == 1` holds a row's single element in every lane, which
  is what a row reduction produces and what a row broadcast reads.
* `MmaLayout`: the accumulator fragments of `mma.sync` m16n8 (PTX ISA, "Matrix
  Fragments for mma.m16n8k*"): the (batch, rows, cols) tile is cut into 16x8
  blocks, a grid of warps (`warps` = (batch, row, col) warp counts) owns
  contiguous groups of blocks, and in each block lane l = 4g + t holds
  (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1) in four consecutive slots. An
  `mma` keeps its accumulator in these registers across a K loop.
  `TmemAccLayout` / `PairAccLayout` are the same fragments with the warps
  placed on tensor memory's lane quarters (tcgen05).
* `BroadcastSourceLayout`: the source of a broadcast seen through the result's
  layout: slot s holds the source element that result slot s takes. The
  broadcast is then a register copy in any result layout (an mma fragment
  included). Elements repeat across slots, so it suits only tiles that are
  cheap to compute at any index (iota, splats and arithmetic on them: a causal
  mask's row and column indices), never loaded data.
"""

from __future__ import annotations

import functools
import math
from typing import Optional, Union

from ..ir.record import record

WARP = 32


def fragment_multiple(shape: tuple[int, ...]) -> bool:
    """An accumulator of (batch?, rows, cols) that m16n8 fragments tile."""
    return len(shape) in (2, 3) and shape[-2] % 16 == 0 and shape[-1] % 8 == 0


@record
class BlockedLayout:
    threads: int
    vec: int = 1    # consecutive elements per thread and slot group (for vector accesses)

    def run(self, num_elements: int) -> int:
        """Consecutive elements held in consecutive slots: the largest power of two up to `vec` that
        keeps every thread busy with distinct elements (tiles of a multiple of T elements), else
        the largest that divides the tile."""
        v = self.vec
        whole = num_elements % self.threads == 0
        while v > 1 and num_elements % (v * self.threads if whole else v):
            v //= 2
        return v

    def slots(self, num_elements: int) -> int:
        v = self.run(num_elements)
        return v * max(1, -(-num_elements // (self.threads * v)))

    def owns_all(self, num_elements: int) -> bool:
        """True when every (thread, slot) pair names a distinct, in-range element."""
        v = self.run(num_elements)
        return num_elements % (self.threads * v) == 0

    def slot_shift(self, shape: tuple[int, ...], slot: int) -> Optional[tuple[int, ...]]:
        """Per dimension of a tile of `shape`, how far `slot`'s element lies from slot 0's where that
        is the same in every thread: adding the slot's distance to any thread's first element
        carries into no dimension (else None). The lowering then steps each slot's address from
        slot 0's instead of computing it whole."""
        n = 1
        for d in shape:
            n *= d
        if not shape or not self.owns_all(n):
            return None
        v = self.run(n)
        group, within = divmod(slot, v)
        digits = _digits(group * self.threads * v + within, shape)
        highest = _highest_digits(self.threads, v, shape)
        if any(top + d >= extent for top, d, extent in zip(highest[1:], digits[1:], shape[1:])):
            return None
        return digits

    def describe(self) -> str:
        return f"#blocked<threads={self.threads}{f', vec={self.vec}' if self.vec > 1 else ''}>"


@record
class RowWarpLayout:
    threads: int
    cols: int
    wpr: int = 1    # warps per row: a tile of fewer rows than warps spreads each row over wpr warps
    chunk: int = 0  # elements per run dealt round the lanes (0: each lane's elements contiguous)
    rpw: int = 1    # rows per warp: a row narrower than 32 vectors spans 32 / rpw lanes (wpr 1)

    @staticmethod
    def fits(cols: int) -> bool:
        """A row fits one warp's lanes x slots: a power of two up to 32, or a multiple of 32."""
        return cols >= 1 and (cols % WARP == 0 or (cols <= WARP and cols & (cols - 1) == 0))

    @property
    def warps(self) -> int:
        return self.threads // WARP

    @property
    def groups(self) -> int:
        """Rows held at once: one per group of `wpr` warps, `rpw` per warp."""
        return self.warps // self.wpr * self.rpw

    @property
    def span(self) -> int:
        """Threads that hold one row."""
        return WARP * self.wpr // self.rpw

    @property
    def per_lane(self) -> int:
        """Consecutive elements of a row held by one lane."""
        return max(1, self.cols // self.span)

    @property
    def lanes(self) -> int:
        """Lanes of one warp that hold distinct elements of one row (a power of two)."""
        return min(WARP // self.rpw, self.cols)

    def row_values(self) -> "RowWarpLayout":
        """The layout of one value per row (a row reduction's result, a row broadcast's source):
        the rows where this layout has them, each in every lane of its row."""
        return RowWarpLayout(self.threads, 1, self.wpr, rpw=self.rpw)

    def owns_all(self, num_elements: int) -> bool:
        """True when every (thread, slot) pair names a distinct, in-range element."""
        return (num_elements // self.cols) % self.groups == 0 and self.cols >= self.span

    def run(self, num_elements: int) -> int:
        return self.chunk or self.per_lane

    def row_groups(self, num_elements: int) -> int:
        return max(1, -(-(num_elements // self.cols) // self.groups))

    def slots(self, num_elements: int) -> int:
        return self.row_groups(num_elements) * self.per_lane

    def slot_shift(self, shape: tuple[int, ...], slot: int) -> Optional[tuple[int, ...]]:
        """Per dimension of a tile of `shape`, how far `slot`'s element lies from slot 0's, the same in
        every thread (BlockedLayout.slot_shift): a slot group is `groups` rows further, a slot within it
        further along the row (runs dealt round the lanes: a whole round of them further per run). None
        where the tile has rows in more than one dimension or this layout does not own every element."""
        n = 1
        for d in shape:
            n *= d
        if not shape or not self.owns_all(n) or any(d != 1 for d in shape[:-2]):
            return None
        group, within = divmod(slot, self.per_lane)
        if self.chunk:
            i, within = divmod(within, self.chunk)
            within += i * self.span * self.chunk
        col = within if self.cols > 1 else 0
        return (*(0 for _ in shape[:-2]), group * self.groups, col) if len(shape) > 1 else (col,)

    def describe(self) -> str:
        wpr = f", warps_per_row={self.wpr}" if self.wpr > 1 else ""
        chunk = f", runs={self.chunk}" if self.chunk else ""
        rpw = f", rows_per_warp={self.rpw}" if self.rpw > 1 else ""
        return f"#row_warp<cols={self.cols}, warps={self.warps}{wpr}{chunk}{rpw}>"


# Most elements of one row a lane holds while warps are left to share the row: a row operand
# broadcast to every row (a norm's weight) is held whole by each group of `wpr` warps, so long rows
# held by few warps each pay it again per group (RMSNorm's 4 x 8192 tile on 8 warps, 2 per row:
# 128 weights a lane beside 128 inputs, spills; 8 per row: 32).
ROW_LANE_ELEMENTS = 32


def row_layout(threads: int, shape: tuple[int, ...], scan: bool = False, vec: int = 1,
               ordered: bool = False) -> RowWarpLayout:
    """Rows of `shape` in warps; where there are fewer rows than warps, or where a lane would hold
    more than `ROW_LANE_ELEMENTS` of a row, each row spread over several warps (not for scans, which
    run along one warp's lanes); where a row is narrower than 32 vectors of `vec` elements (the
    kernel's 16-byte vector) and there are rows enough, several rows per warp, a vector per lane.
    Runs of `vec` elements are dealt round the lanes, unless each lane must hold consecutive
    elements (scans and `ordered` reduces, whose combiner may not commute)."""
    cols = shape[-1] if shape else 1
    rows = 1
    for d in shape[:-1]:
        rows *= d
    warps = threads // WARP
    wpr = 1
    while not scan and wpr * 2 <= warps and cols % (WARP * wpr * 2) == 0 and (
            rows * wpr * 2 <= warps or cols // (WARP * wpr) > ROW_LANE_ELEMENTS):
        wpr *= 2
    layout = RowWarpLayout(threads, cols, wpr)
    per_lane = layout.per_lane
    if not scan and wpr == 1 and vec > 1 and (cols % WARP == 0 or 1 < cols < WARP) and per_lane < vec:
        # rows narrower than a warp's 16-byte vectors: each lane one vector, several rows per warp
        # (as many as keep every warp busy), so that accesses are 16 bytes wide; a row narrower than a
        # warp otherwise leaves lanes idle and each thread every row
        rpw = 1
        while cols * rpw * 2 <= WARP * vec and rows >= warps * rpw * 2 and rpw * 2 <= WARP:
            rpw *= 2
        return RowWarpLayout(threads, cols, rpw=rpw)
    if scan or ordered or vec <= 1 or cols < WARP * wpr or per_lane <= vec or per_lane % vec:
        return layout
    return RowWarpLayout(threads, cols, wpr, vec)


@record
class MmaLayout:
    threads: int
    shape: tuple[int, ...]        # (batch, rows, cols): the tile's shape, batch 1 for 2-D tiles
    warps: tuple[int, int, int]   # warps along batch, rows and cols (their product <= threads / 32)
    interleaved: bool = False     # row block mi of warp w is mi * warps + w (wgmma's warpgroup rows)

    @property
    def repeats(self) -> tuple[int, int, int]:
        """Blocks (batches, 16-row blocks, 8-column blocks) each warp holds."""
        b, m, n = self.shape
        wb, wm, wn = self.warps
        return b // wb, m // 16 // wm, n // 8 // wn

    @staticmethod
    def fits(shape: tuple[int, ...]) -> bool:
        return fragment_multiple(shape)

    @staticmethod
    def for_shape(threads: int, shape: tuple[int, ...], row_warps_only: bool = False,
                  spread_columns: bool = False) -> "MmaLayout":
        """The warp grid for a (batch?, rows, cols) accumulator: all warps busy where the blocks allow,
        then per-warp sub-tiles as square as possible (fewest fragment loads per mma). With
        `row_warps_only` each row stays in one warp (a row reduction then needs no shared memory);
        with `spread_columns` too, where the rows all sit in one warp, the idle warps take columns
        (a decode attention's 16 x 256 output on 4 warps: 32 registers a thread, not 128 in one
        warp while three compute copies); each warp still holds every row, as the copies of a
        one-warp grid do, so row statistics and the A fragments of such a grid serve it as they are."""
        full = (1, *shape) if len(shape) == 2 else tuple(shape)
        b, m, n = full
        warps = threads // WARP
        best: Optional[tuple[tuple[int, int], tuple[int, int, int]]] = None
        for wb in _divisors(b):
            for wm in _divisors(m // 16):
                for wn in ([1] if row_warps_only else _divisors(n // 8)):
                    used = wb * wm * wn
                    if used > warps:
                        continue
                    rows, cols = m // wm, n // wn
                    score = (-used, abs(rows - cols))
                    if best is None or score < best[0]:
                        best = (score, (wb, wm, wn))
        assert best is not None
        if row_warps_only and spread_columns and best[1] == (1, 1, 1):
            return MmaLayout(threads, full, (1, 1, max(d for d in _divisors(n // 8) if d <= warps)))
        return MmaLayout(threads, full, best[1])

    def run(self, num_elements: int) -> int:
        return 2   # (g, 2t) and (g, 2t + 1)

    def owns_all(self, num_elements: int) -> bool:
        wb, wm, wn = self.warps
        return wb * wm * wn * WARP == self.threads

    def slots(self, num_elements: int) -> int:
        rb, rm, rn = self.repeats
        return rb * rm * rn * 4

    def slot_shift(self, shape: tuple[int, ...], slot: int) -> Optional[tuple[int, ...]]:
        """Per dimension of a tile of `shape`, how far `slot`'s element lies from slot 0's in every
        thread (a constant: `coords` adds the slot's block and fragment position to the thread's
        own), or None where the tile is not this layout's (batch?, rows, cols), leading 1s aside."""
        lead = 0
        while len(shape) - lead > 2 and shape[lead] == 1:
            lead += 1
        inner = tuple(shape[lead:])
        if len(inner) > 3 or (1,) * (3 - len(inner)) + inner != tuple(self.shape):
            return None
        _, rm, rn = self.repeats
        blk, j = divmod(slot, 4)
        bi, rest = divmod(blk, rm * rn)
        mi, ni = divmod(rest, rn)
        row = (mi * self.warps[1] if self.interleaved else mi) * 16 + (8 if j >= 2 else 0)
        return (0,) * lead + (bi, row, ni * 8 + j % 2)[3 - len(inner):]

    def describe(self) -> str:
        """Exact (layout/encoding_text.py reads it back): the tile's shape is warps x blocks x 16x8; the
        threads are said where warps idle beside the grid."""
        order = ", warpgroup rows" if self.interleaved else ""
        wb, wm, wn = self.warps
        idle = f", threads={self.threads}" if wb * wm * wn * WARP != self.threads else ""
        return f"#mma<warps={'x'.join(map(str, self.warps))}, per_warp={'x'.join(map(str, self.repeats))} " \
               f"blocks{order}{idle}>"


@record
class TmemAccLayout(MmaLayout):
    """An `MmaLayout` whose warps are placed for tensor memory: warp w is at row-warp w % wm and
    column-warp w / wm (rows fastest), so that its rows lie in TMEM lane quarter w % 4 (M = 128
    with 8 warps: two warps per quarter, 16 rows each)."""

    def describe(self) -> str:
        return "#tmem_acc" + MmaLayout.describe(self)[4:]


@record
class PairAccLayout(TmemAccLayout):
    """One CTA's 64 rows of a CTA pair's M = 128 accumulator (`tcgen05.mma.cta_group::2`, the PTX
    ISA's layout B): row r, column c at lane r + 64 (c // (N/2)), column c % (N/2), the column halves
    folded onto the two 64-lane halves. Warp w reads lane quarter q = w % 4, so it holds rows
    32 (q % 2) .. + 31 of column half q // 2 (split further by w / 4 where there are 8 warps)."""

    def describe(self) -> str:
        return "#tmem_pair_acc" + MmaLayout.describe(self)[4:]


def column_window(layout: object, start: int, width: int) -> Optional["MmaLayout"]:
    """The layout of columns `start` .. `start + width - 1` (every row and batch) of a tile in mma
    fragment layout `layout`, held where they are: the same warps over the narrower tile, each thread
    keeping its slots of those columns (`window_slot`). None where a thread's slots of them are not
    whole 8-column blocks of every warp (warps along the columns; a CTA pair's folded columns)."""
    if not isinstance(layout, MmaLayout) or isinstance(layout, PairAccLayout) or layout.warps[2] != 1 \
            or start % 8 or width % 8 or width <= 0 or start + width > layout.shape[2]:
        return None
    b, m, _ = layout.shape
    return type(layout)(layout.threads, (b, m, width), layout.warps, layout.interleaved)


def window_slot(parent: "MmaLayout", first: int, blocks: int, slot: int) -> int:
    """The slot of `parent` that slot `slot` of its 8-column blocks `first` .. `first + blocks - 1`
    (of each warp's, in the parent's order) is."""
    _, rm, rn = parent.repeats
    blk, j = divmod(slot, 4)
    bi, rest = divmod(blk, rm * blocks)
    mi, ni = divmod(rest, blocks)
    return ((bi * rm + mi) * rn + first + ni) * 4 + j


def rows_replicated(parent: "MmaLayout", layout: "MmaLayout") -> bool:
    """Whether every thread of `layout` holds, in a one-warp grid `parent` (its copies in every warp),
    the fragment rows (and A fragments) of its own row blocks: `layout` keeps all rows in each warp
    (`for_shape`'s spread columns) over the same (batch, rows) tile."""
    return parent.warps == (1, 1, 1) and layout.warps[:2] == (1, 1) and parent.shape[:2] == layout.shape[:2] \
        and parent.threads == layout.threads


def same_fragments(a: object, b: object) -> bool:
    """Two mma accumulator layouts (mma.sync's, tcgen05's) that give every thread the same elements
    in the same slots: equal geometry, and warps placed alike (rows only: warp w at row-warp
    w % wm either way, except tcgen05's two-warps-per-quarter placement)."""
    if not (isinstance(a, MmaLayout) and isinstance(b, MmaLayout)) or type(a) is type(b):
        return False
    _, wm, wn = a.warps
    return (a.threads, a.shape, a.warps, a.interleaved) == (b.threads, b.shape, b.warps, b.interleaved) \
        and wn == 1 and not a.interleaved and wm * WARP == a.threads and not (wm == 8 and a.shape[1] == 128)


@record
class MmaRowLayout:
    """The rows of an `MmaLayout` whose rows each sit in one warp (one warp column): a (batch,
    rows, 1) tile, each thread holding its fragment rows g and g + 8 of every row block; the
    four lanes of a quad hold copies (lane t = 0 is the first). What a row reduction of an mma
    result gives, and what broadcasts back along its rows for free."""
    parent: MmaLayout

    @property
    def threads(self) -> int:
        return self.parent.threads

    def run(self, num_elements: int) -> int:
        return 1

    def owns_all(self, num_elements: int) -> bool:
        return False

    def slots(self, num_elements: int) -> int:
        rb, rm, _ = self.parent.repeats
        return rb * rm * 2

    def describe(self) -> str:
        return f"#mma_rows<{self.parent.describe()}>"


@record
class BroadcastSourceLayout:
    """A broadcast's source (`src` shape, same rank as `dst`, extent 1 or dst's on each axis) held
    where the broadcast result in `parent` takes it: slot s holds the source element of result
    slot s. The first copy of an element is the parent's first copy at index 0 on the broadcast
    axes."""
    parent: "Layout"
    dst: tuple[int, ...]
    src: tuple[int, ...]

    @property
    def threads(self) -> int:
        return self.parent.threads

    def _dst_elements(self) -> int:
        n = 1
        for d in self.dst:
            n *= d
        return n

    def run(self, num_elements: int) -> int:
        """The parent's runs where they lie along the source's last axis (not broadcast, and each
        run within one row): consecutive slots then hold consecutive source elements too."""
        if not isinstance(self.parent, BlockedLayout) or self.src[-1] != self.dst[-1]:
            return 1
        v = self.parent.run(self._dst_elements())
        return v if self.dst[-1] % v == 0 else 1

    def owns_all(self, num_elements: int) -> bool:
        return False

    def slot_shift(self, shape: tuple[int, ...], slot: int) -> Optional[tuple[int, ...]]:
        """The parent's slot distances (`BlockedLayout.slot_shift`) on the axes the source keeps, for
        a tile of `shape` (the source reshaped by adding or dropping axes of extent 1), else None."""
        shift = getattr(self.parent, "slot_shift", None)
        digits = shift(self.dst, slot) if shift is not None else None
        if digits is None or [d for d in shape if d > 1] != [d for d in self.src if d > 1]:
            return None
        kept = iter(d for d, a, b in zip(digits, self.dst, self.src) if b > 1 and a == b)
        return tuple(next(kept) if d > 1 else 0 for d in shape)

    def distinct(self) -> bool:
        """Whether no thread holds a source element twice (a blocked parent whose slots of one
        thread differ on some axis the source keeps): a load in this layout then reads each
        element a thread needs once, and the broadcast costs nothing."""
        if not isinstance(self.parent, BlockedLayout):
            return False
        return _distinct_sources(self.parent.threads, self.parent.run(self._dst_elements()),
                                 self.dst, self.src)

    def slots(self, num_elements: int) -> int:
        return self.parent.slots(self._dst_elements())

    def describe(self) -> str:
        src, dst = ("x".join(map(str, shape)) for shape in (self.src, self.dst))
        return f"#broadcast_source<{src} to {dst} of {self.parent.describe()}>"


def _digits(index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The row-major multi-index of flat `index` in a tile of `shape`."""
    out = []
    for extent in reversed(shape):
        index, digit = divmod(index, extent)
        out.append(digit)
    return tuple(reversed(out))


@functools.lru_cache(maxsize=256)
def _highest_digits(threads: int, run: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Per dimension, the largest index any thread's first element (thread t: element t * run) has."""
    highest = [0] * len(shape)
    for t in range(threads):
        for i, digit in enumerate(_digits(t * run, shape)):
            highest[i] = max(highest[i], digit)
    return tuple(highest)


@functools.lru_cache(maxsize=256)
def _distinct_sources(threads: int, run: int, dst: tuple[int, ...], src: tuple[int, ...]) -> bool:
    """Whether each thread's slots of a blocked tile of `dst` (runs of `run`) name distinct
    elements of `src` (`dst` with broadcast axes of extent 1)."""
    n = math.prod(dst)
    if n % (threads * run) or run > 1 and src[-1] != dst[-1]:
        return False
    groups = n // (threads * run)
    kept = [i for i, (a, b) in enumerate(zip(dst, src)) if a == b]
    for t in range(threads):
        seen = set()
        for g in range(groups):
            digits = _digits(g * threads * run + t * run, dst)
            key = tuple(digits[i] for i in kept)
            if key in seen:
                return False
            seen.add(key)
    return True


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


Layout = Union[BlockedLayout, RowWarpLayout, MmaLayout, MmaRowLayout, BroadcastSourceLayout]


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))
