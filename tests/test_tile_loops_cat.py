"""`cat` grouped with reductions, scans and other cats (tileaa/cat_windows.py): one loop per window
of the cats' operands, a reduction's accumulator or a scan's running value carried from one window's
loop to the next. One warp a kernel, as in test_tile_loops_more.py (chunks of 512 elements)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate, interpret  # noqa: E402
from test_tile_loops_more import ADD, _agree, _code_does_not_grow, _kernel, _module, _view  # noqa: E402

MAX = ["  (%l: tile<f32>, %r: tile<f32>) {", "    %s = maxf %l, %r : tile<f32>", "    yield %s : tile<f32>", "  }"]


def _joined(n: int, padding: str = "zero") -> tuple[list[str], str]:
    """Lines loading row bx of x and of y ((1, n / 2) tiles, padded) and joining them into %c: (1, n)."""
    v, th = _view((1, n // 2), padding), f"tile<1x{n // 2}xf32>"
    return [f"  %p0 = make_partition_view %t0 : {v}",
            f"  %p1 = make_partition_view %t1 : {v}",
            f"  %x, %lx = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {th}, token",
            f"  %y, %ly = load_view_tko weak %p1[%bx, %c0] token = %tok : {v}, tile<i32> -> {th}, token",
            f"  %c = cat %x, %y dim = 1 : {th}, {th} -> tile<1x{n}xf32>"], f"tile<1x{n}xf32>"


def cat_sum(n: int) -> str:
    """z[bx] = the sum of row bx of x joined to row bx of y."""
    lines, t = _joined(n)
    w = _view((1,))
    return _kernel("cat_sum", [2, 2, 1], [
        *lines, f"  %p2 = make_partition_view %t2 : {w}",
        f"  %s = reduce %c dim=1 identities=[0.000000e+00 : f32] : {t} -> tile<1xf32>", *ADD,
        f"  %st = store_view_tko weak %s, %p2[%bx] token = %tok : tile<1xf32>, {w}, tile<i32> -> token"])


def cat_scan(n: int, reverse: bool = False) -> str:
    """z[bx, :] = the prefix (suffix, `reverse`) sums of row bx of x joined to row bx of y."""
    lines, t = _joined(n)
    w = _view((1, n))
    return _kernel("cat_scan", [2, 2, 2], [
        *lines, f"  %p2 = make_partition_view %t2 : {w}",
        f"  %s = scan %c dim=1 reverse={'true' if reverse else 'false'} identities=[0.000000e+00 : f32] : {t} -> {t}",
        *ADD, f"  %st = store_view_tko weak %s, %p2[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


def cat_rscan(n: int) -> str:
    return cat_scan(n, reverse=True)


def cat_centered(n: int) -> str:
    """z[bx, :] = the joined row less its maximum (padded with -inf): a loop per window for the maximum,
    carried from one to the other, then a loop per window for the difference."""
    lines, t = _joined(n, "neg_inf")
    w = _view((1, n))
    return _kernel("cat_centered", [2, 2, 2], [
        *lines, f"  %p2 = make_partition_view %t2 : {w}",
        f"  %m = reduce %c dim=1 identities=[0xFF800000 : f32] : {t} -> tile<1xf32>", *MAX,
        "  %m2 = reshape %m : tile<1xf32> -> tile<1x1xf32>",
        f"  %mb = broadcast %m2 : tile<1x1xf32> -> {t}",
        f"  %d = subf %c, %mb : {t}",
        f"  %st = store_view_tko weak %d, %p2[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


def cat_nested(n: int) -> str:
    """z[tile bx] = 2 cat(cat(x[2 bx], y[2 bx]), cat(x[2 bx + 1], y[2 bx + 1])) of 1-D tiles of n / 4:
    four windows, each the tile of one load."""
    v, w, tq, th, t = _view((n // 4,), "zero"), _view((n,)), f"tile<{n // 4}xf32>", f"tile<{n // 2}xf32>", f"tile<{n}xf32>"
    return _kernel("cat_nested", [1, 1, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {v}",
        f"  %p2 = make_partition_view %t2 : {w}",
        "  %two = constant <i32: 2> : tile<i32>",
        "  %one = constant <i32: 1> : tile<i32>",
        "  %i0 = muli %bx, %two : tile<i32>",
        "  %i1 = addi %i0, %one : tile<i32>",
        f"  %a, %la = load_view_tko weak %p0[%i0] token = %tok : {v}, tile<i32> -> {tq}, token",
        f"  %b, %lb = load_view_tko weak %p1[%i0] token = %tok : {v}, tile<i32> -> {tq}, token",
        f"  %c, %lc = load_view_tko weak %p0[%i1] token = %tok : {v}, tile<i32> -> {tq}, token",
        f"  %d, %ld = load_view_tko weak %p1[%i1] token = %tok : {v}, tile<i32> -> {tq}, token",
        f"  %ab = cat %a, %b dim = 0 : {tq}, {tq} -> {th}",
        f"  %cd = cat %c, %d dim = 0 : {tq}, {tq} -> {th}",
        f"  %all = cat %ab, %cd dim = 0 : {th}, {th} -> {t}",
        f"  %k = constant <f32: 2.000000e+00> : {t}",
        f"  %z = mulf %all, %k : {t}",
        f"  %st = store_view_tko weak %z, %p2[%bx] token = %tok : {t}, {w}, tile<i32> -> token"])


def cat_swap(n: int) -> str:
    """z[bx, :] = cat(x, y) + 2 cat(y, x) of rows bx of x and y: each tile joined by two cats, at the
    start of one and the end of the other."""
    lines, t = _joined(n)
    th, w = f"tile<1x{n // 2}xf32>", _view((1, n))
    return _kernel("cat_swap", [2, 2, 2], [
        *lines, f"  %p2 = make_partition_view %t2 : {w}",
        f"  %c2 = cat %y, %x dim = 1 : {th}, {th} -> {t}",
        f"  %k = constant <f32: 2.000000e+00> : {t}",
        f"  %d = mulf %c2, %k : {t}",
        f"  %z = addf %c, %d : {t}",
        f"  %st = store_view_tko weak %z, %p2[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


def cat_twice(n: int) -> str:
    """z[bx, :] = cat(x, x) of row bx of x, less its maximum: one tile joined twice by one cat, a
    reduction carried from one window to the next."""
    v, th, t, w = _view((1, n // 2), "neg_inf"), f"tile<1x{n // 2}xf32>", f"tile<1x{n}xf32>", _view((1, n))
    return _kernel("cat_twice", [2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %c = cat %x, %x dim = 1 : {th}, {th} -> {t}",
        f"  %m = reduce %c dim=1 identities=[0xFF800000 : f32] : {t} -> tile<1xf32>", *MAX,
        "  %m2 = reshape %m : tile<1xf32> -> tile<1x1xf32>",
        f"  %mb = broadcast %m2 : tile<1x1xf32> -> {t}",
        f"  %d = subf %c, %mb : {t}",
        f"  %st = store_view_tko weak %d, %p1[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


@pytest.mark.parametrize("kernel,loops", [(cat_sum, 2), (cat_scan, 2), (cat_rscan, 2), (cat_centered, 4),
                                          (cat_nested, 4), (cat_swap, 2), (cat_twice, 4)])
def test_a_cat_with_a_reduction_a_scan_or_a_cat_is_looped(kernel, loops: int) -> None:
    text = _code_does_not_grow(kernel)
    assert text.count(" for %loopIdx") == loops and " cat " not in text


def _rows(n: int, ragged: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two rows of x and y, `ragged` columns short of the half tile, and their padded joins (pad 0)."""
    rng = np.random.default_rng(seed)
    x, y = (rng.standard_normal((2, n // 2 - ragged)).astype(np.float32) for _ in range(2))
    px, py = (np.pad(a, ((0, 0), (0, ragged))) for a in (x, y))
    return x, y, px, py


@pytest.mark.parametrize("log2,ragged", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])
def test_a_cat_sum_agrees(log2: int, ragged: int) -> None:
    x, y, px, py = _rows(1 << log2, ragged, log2)
    got = _agree(cat_sum(1 << log2), [x, y, np.zeros(2, np.float32)], (2,), exact=False)
    assert np.allclose(got[2], np.concatenate([px, py], 1).astype(np.float64).sum(1), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("log2,ragged,reverse", [(13, 40, False), pytest.param(13, 40, True, marks=pytest.mark.sweep),
                                                  pytest.param(15, 1000, False, marks=pytest.mark.sweep)])
def test_a_cat_scan_agrees(log2: int, ragged: int, reverse: bool) -> None:
    """The running value crosses from x's window to y's (from y's to x's, reversed); one row (a scan is
    slow to emulate: 2^13 takes 30 s), close to the interpreter's and to float64's sums."""
    n = 1 << log2
    x, y, px, py = (a[:1] for a in _rows(n, ragged, log2))
    module = _module(cat_scan(n, reverse))
    args = [x, y, np.zeros((1, n), np.float32)]
    got, want = emulate(module, args, "sm_90", (1,)), interpret(module, args, (1,))
    joined = np.concatenate([px, py], 1).astype(np.float64)
    exact = np.cumsum(joined[:, ::-1], 1)[:, ::-1] if reverse else np.cumsum(joined, 1)
    assert np.allclose(got[2], want[2], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[2], exact, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("log2,ragged", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])
def test_a_cat_centered_agrees(log2: int, ragged: int) -> None:
    n = 1 << log2
    rng = np.random.default_rng(log2)
    x = rng.standard_normal((2, n // 2 - ragged)).astype(np.float32)
    y = rng.standard_normal((2, n // 2)).astype(np.float32) + 3   # the maximum in y's window
    got = _agree(cat_centered(n), [x, y, np.zeros((2, n - ragged), np.float32)], (2,))
    joined = np.concatenate([np.pad(x, ((0, 0), (0, ragged)), constant_values=-np.inf), y], 1)
    assert np.array_equal(got[2], (joined - joined.max(1, keepdims=True))[:, :n - ragged])


@pytest.mark.parametrize("log2,ragged", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])
def test_a_nested_cat_agrees(log2: int, ragged: int) -> None:
    """Two blocks; x and y end `ragged` short of the last quarter tile (zero padded), z too (masked)."""
    n = 1 << log2
    rng = np.random.default_rng(log2)
    x, y = (rng.standard_normal(n - ragged).astype(np.float32) for _ in range(2))
    got = _agree(cat_nested(n), [x, y, np.zeros(2 * n - 2 * ragged, np.float32)], (2,))
    px, py = np.pad(x, (0, ragged)), np.pad(y, (0, ragged))
    q = n // 4
    want = np.concatenate([2 * np.concatenate([px[(2 * b) * q:(2 * b + 1) * q], py[(2 * b) * q:(2 * b + 1) * q],
                                               px[(2 * b + 1) * q:(2 * b + 2) * q], py[(2 * b + 1) * q:(2 * b + 2) * q]])
                           for b in range(2)])
    assert np.array_equal(got[2], want[:len(got[2])])


@pytest.mark.parametrize("log2,ragged", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])
def test_tiles_joined_by_two_cats_agree(log2: int, ragged: int) -> None:
    """Two rows of x and y, `ragged` columns short of the half tile (zero padded), z as long."""
    n = 1 << log2
    x, y, px, py = _rows(n, ragged, log2)
    got = _agree(cat_swap(n), [x, y, np.zeros((2, n - ragged), np.float32)], (2,))
    assert np.array_equal(got[2], (np.concatenate([px, py], 1) + 2 * np.concatenate([py, px], 1))[:, :n - ragged])


@pytest.mark.parametrize("log2,ragged", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])
def test_a_tile_joined_twice_agrees(log2: int, ragged: int) -> None:
    n = 1 << log2
    x = np.random.default_rng(log2).standard_normal((2, n // 2 - ragged)).astype(np.float32)
    got = _agree(cat_twice(n), [x, np.zeros((2, n - ragged), np.float32)], (2,))
    px = np.pad(x, ((0, 0), (0, ragged)), constant_values=-np.inf)
    joined = np.concatenate([px, px], 1)
    assert np.array_equal(got[1], (joined - joined.max(1, keepdims=True))[:, :n - ragged])
