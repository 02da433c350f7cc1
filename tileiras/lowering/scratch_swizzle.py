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
from typing import TYPE_CHECKING, Callable, Optional

from ..ir.record import record
from ..layout.encodings import Layout, row_major_strides
from .layout_index import element

if TYPE_CHECKING:
    import numpy as np

CHUNK = 16      # bytes: the widest shared access, which the swizzle keeps whole
SPAN = 8        # chunks of a 128-byte block: every bank once
Pre = Callable[[str, str], str]


@record
class ScratchSwizzle:
    shift: int          # the chunk-number bits XORed into the chunk index start here (>= 3)
    elem_bytes: int
    write_run: int      # elements a store moves at once: consecutive slots of one chunk
    read_run: int       # the same for the loads (1 where the permute moves the innermost axis)

    def index(self, pre: Pre, e: str) -> str:
        """The swizzled element index of row-major index `e` (an i32), emitted through `pre`
        (the lowering's builder, or layout_eval's Evaluator when counting)."""
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
    """Consecutive slots holding consecutive elements of one chunk, from an aligned start."""
    run = layout.run(n)
    return min(run, per_chunk) if run & (run - 1) == 0 else 1


def _cost(shape: tuple[int, ...], perm: tuple[int, ...], src: Layout, dst: Layout, elem_bytes: int,
          swizzle: Optional[ScratchSwizzle], write_run: int, read_run: int) -> int:
    """Wavefronts of the first warp's stores (from `src`) and loads (into `dst`) of the scratch."""
    from ..target.shared_banks import wavefronts

    total = 0
    for lanes, elems, run in (_stores(shape, src, write_run), _loads(shape, perm, dst, read_run)):
        total += wavefronts(_placed(elems, swizzle) * elem_bytes, lanes, run * elem_bytes)[1]
    return total


def _placed(elems: "np.ndarray", swizzle: Optional[ScratchSwizzle]) -> "np.ndarray":
    from .layout_eval import Evaluator

    if swizzle is None:
        return elems
    ev = Evaluator(elems, "%e")
    return ev.value(swizzle.index(ev.pre, "%e"))


@lru_cache(maxsize=64)
def _stores(shape: tuple[int, ...], layout: Layout, run: int) -> tuple["np.ndarray", "np.ndarray", int]:
    """The first warp's stores, a run of slots each: (lane numbered as if each store ran in a warp of
    its own, the row-major element it stores first, run) of every lane that stores (first copies)."""
    import numpy as np

    n = prod(shape)
    lanes, elems = [], []
    for i, slot in enumerate(range(0, layout.slots(n), run)):
        e, valid = _warp_elements(layout, n, slot)
        lanes.append(np.arange(32)[valid] + 32 * i)
        elems.append(e[valid])
    return np.concatenate(lanes), np.concatenate(elems), run


@lru_cache(maxsize=64)
def _loads(shape: tuple[int, ...], perm: tuple[int, ...], layout: Layout, run: int) -> tuple["np.ndarray", "np.ndarray", int]:
    """The first warp's loads, as `_stores`: each lane's source element (the result's `perm`uted)."""
    import numpy as np

    rshape = tuple(shape[p] for p in perm)
    n = prod(shape)
    elems = []
    for slot in range(0, layout.slots(n), run):
        e = _warp_elements(layout, n, slot)[0]
        src = np.zeros_like(e)
        for d, (size, stride) in enumerate(zip(rshape, row_major_strides(rshape))):
            src += (e // stride % size) * row_major_strides(shape)[perm[d]]
        elems.append(src)
    return np.arange(32 * len(elems)), np.concatenate(elems), run


def _warp_elements(layout: Layout, n: int, slot: int) -> tuple["np.ndarray", "np.ndarray"]:
    """(element index, first copy) of `slot` in each lane of the first warp."""
    import numpy as np

    from .layout_eval import Evaluator

    ev = Evaluator(np.arange(32))
    e, valid = element(layout, ev.pre, "%tid", n, slot)
    first = np.ones(32, bool) if valid is None else np.broadcast_to(ev.value(valid), (32,)).astype(bool)
    return np.broadcast_to(ev.value(e), (32,)).astype(np.int64), first
