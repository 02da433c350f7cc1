"""The chunk swizzle of a permute's exchange scratch, chosen by counting bank conflicts.

A permute stores its operand at row-major indices and reads the result's elements back
(`KernelLowering.exchange`). A transpose's rows, written along one axis, are then read along the
other: a warp's reads step by whole rows and land in a few banks (sm_90 transpose_f32_64x64:
16-way). The swizzle keeps the scratch's size and its 16-byte chunks whole, so the stores stay
vector stores: within every 128-byte block (one word in each of the 32 banks) the chunk's index
is XORed with three higher bits of the chunk number, from bit `shift` on. Which bits, or none,
is what the two layouts' stores and loads take the fewest wavefronts with (target/shared_banks.py),
counted on the first warp; one function (`permute_swizzle`) decides it for every target and
element width. The size the plan predicts (tileas/shared_sizes.py) is the tile's bytes either way.
"""

from __future__ import annotations

from functools import lru_cache
from math import prod
from typing import Optional

from ..ir.record import record
from ..layout.encodings import Layout, row_major_strides
from ..layout.index_math import Pre, element

WARP = 32
CHUNK = 16      # bytes: the widest shared access, which the swizzle keeps whole
SPAN = 8        # chunks of a 128-byte block: every bank once


@record
class ScratchSwizzle:
    """Where a permute's scratch holds each element, and the runs its stores and loads move."""

    shift: int          # the chunk-number bits XORed into the chunk index start here (>= 3)
    elem_bytes: int
    write_run: int      # elements a store moves at once: consecutive slots of one chunk
    read_run: int       # the same for the loads (1 where the permute moves the innermost axis)

    def index(self, pre: Pre, e: str) -> str:
        """The swizzled element index of row-major index `e` (an i32), emitted through `pre`
        (the lowering's builder, or layout/index_eval's Program when counting)."""
        low = (CHUNK // self.elem_bytes).bit_length() - 1     # element bits within a chunk
        bits = pre(f"and i32 {pre(f'lshr i32 {e}, {low + self.shift}', 'sz')}, {SPAN - 1}", "sz")
        return pre(f"xor i32 {e}, {pre(f'shl i32 {bits}, {low}', 'sz')}", "sz")


@lru_cache(maxsize=256)
def permute_swizzle(shape: tuple[int, ...], perm: tuple[int, ...], elem_bytes: int, src: Layout,
                    dst: Layout) -> Optional[ScratchSwizzle]:
    """The swizzle of the scratch a permute of a `shape` tile moves through, from `src`'s layout to
    `dst`'s; None where no swizzle costs fewer wavefronts than the row-major scratch."""
    n = prod(shape)
    if elem_bytes > CHUNK or CHUNK % elem_bytes or (n * elem_bytes) % (CHUNK * SPAN):
        return None      # a partial 128-byte block would swizzle chunks past the end
    per_chunk = CHUNK // elem_bytes
    write_run = _run(src, n, per_chunk)
    read_run = _run(dst, n, per_chunk) if perm[-1] == len(perm) - 1 else 1
    chunks = n * elem_bytes // CHUNK
    options = [None] + [ScratchSwizzle(shift, elem_bytes, write_run, read_run)
                        for shift in range(3, chunks.bit_length() - 1)]
    return min(options, key=lambda s: _cost(shape, perm, src, dst, elem_bytes, s, write_run, read_run))


def _run(layout: Layout, n: int, per_chunk: int) -> int:
    """The elements one access moves: consecutive slots that hold consecutive elements of one chunk
    from a start aligned to their count (the layout's runs, checked on the first warp), else 1."""
    run = min(layout.run(n), per_chunk)
    if run < 2 or run & (run - 1):
        return 1
    elems = _warp(layout, n)[0]
    if len(elems) % run:
        return 1
    for first in range(0, len(elems), run):
        starts = elems[first]
        if any(e % run for e in starts) or any(elems[first + w][lane] != e + w for w in range(1, run)
                                                for lane, e in enumerate(starts)):
            return 1
    return run


def _cost(shape: tuple[int, ...], perm: tuple[int, ...], src: Layout, dst: Layout, elem_bytes: int,
          swizzle: Optional[ScratchSwizzle], write_run: int, read_run: int) -> int:
    """Wavefronts of the first warp's stores (from `src`) and loads (into `dst`) of the scratch."""
    from ..target.shared_banks import wavefronts

    total = 0
    for lanes, elems, run in (_stores(shape, src, write_run), _loads(shape, perm, dst, read_run)):
        total += wavefronts([e * elem_bytes for e in _placed(elems, swizzle)], lanes, run * elem_bytes)[1]
    return total


def _placed(elems: tuple[int, ...], swizzle: Optional[ScratchSwizzle]) -> list[int]:
    """Where the row-major elements `elems` lie in the scratch (the same emitted arithmetic)."""
    from ..layout.index_eval import Program

    if swizzle is None:
        return list(elems)
    index = Program(lambda pre: swizzle.index(pre, "%e"), "%e")
    return [index(e)[0] for e in elems]  # type: ignore[misc]


@lru_cache(maxsize=64)
def _stores(shape: tuple[int, ...], layout: Layout, run: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The first warp's stores, a run of slots each: (lane numbered as if each store ran in a warp of
    its own, the row-major element it stores first, run) of every lane that stores (first copies)."""
    elems, valid = _warp(layout, prod(shape))
    lanes, stored = [], []
    for i, slot in enumerate(range(0, len(elems), run)):
        for lane in range(WARP):
            if valid[slot][lane]:
                lanes.append(lane + WARP * i)
                stored.append(elems[slot][lane])
    return tuple(lanes), tuple(stored), run


@lru_cache(maxsize=64)
def _loads(shape: tuple[int, ...], perm: tuple[int, ...], layout: Layout,
           run: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """The first warp's loads, as `_stores`: each lane's source element (the result's `perm`uted)."""
    rshape = tuple(shape[p] for p in perm)
    rstrides, strides = row_major_strides(rshape), row_major_strides(shape)
    elems = _warp(layout, prod(shape))[0]
    src = []
    for slot in range(0, len(elems), run):
        for e in elems[slot]:
            src.append(sum((e // stride % size) * strides[perm[d]]
                           for d, (size, stride) in enumerate(zip(rshape, rstrides))))
    return tuple(range(len(src))), tuple(src), run


@lru_cache(maxsize=64)
def _warp(layout: Layout, n: int) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[bool, ...], ...]]:
    """(element index, first copy) of every slot (rows) in each lane (columns) of the first warp."""
    from ..layout.index_eval import Program

    elems, valid = [], []
    for slot in range(layout.slots(n)):
        index = Program(lambda pre, slot=slot: element(layout, pre, "%tid", n, slot))
        row, ok = [], []
        for lane in range(WARP):
            e, first = index(lane)
            row.append(e)
            ok.append(True if first is None else bool(first))
        elems.append(tuple(row))
        valid.append(tuple(ok))
    return tuple(elems), tuple(valid)
