"""A store ordered after a gather of the same array (tileaa/addresses.py): looped over chunks when
every position's gathered element is the one the store writes there (cuTile's in-place
`store(x, gather(x, arange(T) + i * T) * 2)`), held whole when not (a gather that reverses the tile:
chunk c would write what a later chunk still has to read). One warp a kernel, as in
test_tile_loops_more.py: a tile of 2^13 elements is already looped, in chunks of 512."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_tile_loops_more import _agree, _code_does_not_grow, _kernel, _looped, _view  # noqa: E402


def inplace_gather(n: int, reverse: bool = False, scatter: bool = False) -> str:
    """x[tile bx] = 2 x[tile bx], read through pointers (bx * n + iota; with `reverse`, bx * n + n - 1 -
    iota), bounds checked, written through a view (with `scatter`, through the pointers bx * n +
    iota), the write ordered after the read by its token."""
    v, t, ti, tp, tm = _view((n,)), f"tile<{n}xf32>", f"tile<{n}xi32>", f"tile<{n}xptr<f32>>", f"tile<{n}xi1>"

    def pointers(name: str, index: str) -> list[str]:
        return [f"  %idx{name} = addi {index}, %offs : {ti}",
                f"  %mask{name} = cmpi less_than %idx{name}, %lens, signed : {ti} -> {tm}",
                f"  %ptrs{name} = offset %bases, %idx{name} : {tp}, {ti} -> {tp}"]

    read = [f"  %last = constant <i32: {n - 1}> : {ti}", f"  %rio = subi %last, %io : {ti}", *pointers("r", "%rio")] \
        if reverse else pointers("r", "%io")
    write = [*pointers("w", "%io"),
             f"  %st = store_ptr_tko weak %ptrsw, %y, %maskw token=%lt : {tp}, {t}, {tm} -> token"] if scatter else \
        [f"  %st = store_view_tko weak %y, %p0[%bx] token = %lt : {t}, {v}, tile<i32> -> token"]
    return _kernel("inplace", [1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %io = iota : {ti}",
        f"  %k = constant <i32: {n}> : tile<i32>",
        "  %off = muli %bx, %k : tile<i32>",
        "  %off1 = reshape %off : tile<i32> -> tile<1xi32>",
        f"  %offs = broadcast %off1 : tile<1xi32> -> {ti}",
        "  %len1 = reshape %a1 : tile<i32> -> tile<1xi32>",
        f"  %lens = broadcast %len1 : tile<1xi32> -> {ti}",
        "  %b1 = reshape %a0 : tile<ptr<f32>> -> tile<1xptr<f32>>",
        f"  %bases = broadcast %b1 : tile<1xptr<f32>> -> {tp}",
        *read,
        f"  %zero = constant <f32: 0.000000e+00> : {t}",
        f"  %x, %lt = load_ptr_tko weak %ptrsr, %maskr, %zero token=%tok : {tp}, {tm}, {t} -> {t}, token",
        f"  %two = constant <f32: 2.000000e+00> : {t}",
        f"  %y = mulf %x, %two : {t}",
        *write])


def inplace_scatter(n: int) -> str:
    return inplace_gather(n, scatter=True)


@pytest.mark.parametrize("kernel", [inplace_gather, inplace_scatter])
def test_a_store_after_a_gather_of_its_own_elements_is_looped(kernel) -> None:
    text = _code_does_not_grow(kernel)
    assert text.count(" for %loopIdx") == 1 and "load_ptr_tko" in text.split(" for %loopIdx")[1]


@pytest.mark.parametrize("scatter", [False, True])
def test_a_store_after_a_gather_of_other_elements_is_not_looped(scatter: bool) -> None:
    """Reversed in place: the first chunk's store would overwrite what the last chunk gathers."""
    assert " for %loopIdx" not in _looped(inplace_gather(1 << 13, reverse=True, scatter=scatter))


@pytest.mark.parametrize("scatter", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("log2,ragged", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])
def test_an_inplace_gather_agrees(log2: int, ragged: int, reverse: bool, scatter: bool) -> None:
    """Two blocks, the second `ragged` elements into its tile (masked reads and writes); the reversed
    form (held whole) is the check that the order of the reads and writes matters."""
    n = 1 << log2
    x = np.random.default_rng(log2).standard_normal(n + ragged).astype(np.float32)
    got = _agree(inplace_gather(n, reverse, scatter), [x.copy()], (2,))
    want = 2 * x
    if reverse:   # block 1's pointers past the end read 0 and write nothing
        padded = np.zeros(2 * n, np.float32)
        padded[:len(x)] = x
        want = 2 * np.concatenate([padded[:n][::-1], padded[n:][::-1]])[:len(x)]
    assert np.array_equal(got[0], want)
