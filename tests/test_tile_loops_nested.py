"""Reductions whose result and reduced axis are both longer than a chunk (tileaa/nested_loops.py): an
outer loop over blocks of the kept axes, the reduced axis' chunks in a loop in its body. One warp a
kernel, as in test_tile_loops_more.py (chunks of 512 elements): a (1024, 1024) tile reduced along
either axis takes the nested form. The emulator runs it on chunks of 128 (a (256, 256) tile), the
nested form's smallest case with a quarter of the elements a thread."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate, interpret  # noqa: E402
from test_tile_loops_cat import MAX  # noqa: E402
from test_tile_loops_more import ADD, _agree, _code_does_not_grow, _kernel, _looped, _module, _view  # noqa: E402

# kind -> (the reduce's body, its identity, the load's padding)
KINDS = {"sum": (ADD, "0.000000e+00", "zero"), "max": (MAX, "0xFF800000", "neg_inf")}


def shape(n: int) -> tuple[int, int]:
    """A square tile of `n` elements (the longer axis first where it cannot be)."""
    bits = n.bit_length() - 1
    return 1 << (bits - bits // 2), 1 << (bits // 2)


def reduce_2d(n: int, dim: int = 1, kind: str = "sum") -> str:
    """y[tile bx] = x's tile bx (the tiles stacked along the kept axis) reduced along `dim`."""
    body, identity, padding = KINDS[kind]
    rows, cols = shape(n)
    kept = cols if dim == 0 else rows
    v, w, t = _view((rows, cols), padding), _view((kept,)), f"tile<{rows}x{cols}xf32>"
    index = "%c0, %bx" if dim == 0 else "%bx, %c0"
    return _kernel("reduce_2d", [2, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[{index}] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %s = reduce %x dim={dim} identities=[{identity} : f32] : {t} -> tile<{kept}xf32>", *body,
        f"  %st = store_view_tko weak %s, %p1[%bx] token = %tok : tile<{kept}xf32>, {w}, tile<i32> -> token"])


def softmax(n: int, dim: int = 1) -> str:
    """y = the softmax of x's tile bx along `dim` (padded with -inf): a block's maximum, then its sum of
    exponentials, each a loop over the reduced axis' chunks, then a loop storing the block."""
    rows, cols = shape(n)
    v, w, t = _view((rows, cols), "neg_inf"), _view((rows, cols)), f"tile<{rows}x{cols}xf32>"
    r = f"tile<{rows if dim == 1 else cols}xf32>"
    u = f"tile<{rows}x1xf32>" if dim == 1 else f"tile<1x{cols}xf32>"
    return _kernel("softmax", [2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %m = reduce %x dim={dim} identities=[0xFF800000 : f32] : {t} -> {r}", *MAX,
        f"  %m2 = reshape %m : {r} -> {u}",
        f"  %mb = broadcast %m2 : {u} -> {t}",
        f"  %d = subf %x, %mb : {t}",
        f"  %e = exp %d : {t}",
        f"  %s = reduce %e dim={dim} identities=[0.000000e+00 : f32] : {t} -> {r}", *ADD,
        f"  %s2 = reshape %s : {r} -> {u}",
        f"  %sb = broadcast %s2 : {u} -> {t}",
        f"  %y = divf %e, %sb : {t}",
        f"  %st = store_view_tko weak %y, %p1[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


def _kernels() -> list:
    return [pytest.param(lambda n, d=dim, k=kind: reduce_2d(n, d, k), id=f"{kind}-axis{dim}")
            for dim in (0, 1) for kind in KINDS]


@pytest.mark.parametrize("kernel", _kernels())
def test_a_reduction_long_both_ways_is_nested(kernel) -> None:
    """Two loops, one in the other, whose code does not grow from 2^20 to 2^24 elements."""
    text = _code_does_not_grow(kernel, small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 2 and text.count("= reduce ") == 1


@pytest.mark.parametrize("dim", [0, 1])
def test_a_softmax_long_both_ways_is_nested(dim: int) -> None:
    """An outer loop over blocks, in its body three loops: the maximum, the sum, the store."""
    text = _code_does_not_grow(lambda n: softmax(n, dim), small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 4 and text.count("= reduce ") == 2


@pytest.fixture
def small_chunks(monkeypatch, tmp_path):
    """Chunks of 4 elements a thread (loops from 32): the nested form from (256, 256); a compile
    cache of its own (the PTX depends on the chunk)."""
    from tileiras.tileaa import tile_loops

    monkeypatch.setattr(tile_loops, "CHUNK_ELEMENTS", 4)
    monkeypatch.setattr(tile_loops, "LOOP_ELEMENTS", 32)
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path))


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_reduction_long_both_ways_agrees(dim: int, kind: str, small_chunks) -> None:
    """Two blocks' (256, 256) tiles, the second ragged along both axes (padded as the load asks, its
    results past the array masked); the emulator (race checker on) close to the interpreter and to
    numpy, bit for bit for a maximum."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(reduce_2d(n, dim, kind)).count(" for %loopIdx") == 2
    full = (2 * rows, cols) if dim == 1 else (rows, 2 * cols)
    x = np.random.default_rng(dim).standard_normal((full[0] - 40, full[1] - 24)).astype(np.float32)
    kept = x.shape[1 - dim]
    got = _agree(reduce_2d(n, dim, kind), [x, np.zeros(kept, np.float32)], (2,), exact=kind == "max")
    reduced = x.astype(np.float64).sum(dim) if kind == "sum" else x.max(dim)   # padding changes neither
    assert np.allclose(got[1], reduced, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dim", [1, pytest.param(0, marks=pytest.mark.sweep)])
def test_a_reduction_long_both_ways_agrees_at_size(dim: int) -> None:
    """One (1024, 1024) tile on one warp, in the chunks a compile makes (512), ragged both ways: 12 s."""
    n = 1 << 20
    x = np.random.default_rng(20 + dim).standard_normal((1024 - 40, 1024 - 24)).astype(np.float32)
    module, args = _module(reduce_2d(n, dim)), [x, np.zeros(x.shape[1 - dim], np.float32)]
    got, want = emulate(module, args, "sm_90", (1,)), interpret(module, args, (1,))
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3)   # sums of 1000 in another order
    assert np.allclose(got[1], x.astype(np.float64).sum(dim), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dim", [0, 1])
def test_a_softmax_long_both_ways_agrees(dim: int, small_chunks) -> None:
    """Two blocks' (256, 256) tiles along rows, the second ragged both ways (padded with -inf, stores
    masked past the array)."""
    n = 1 << 16
    rows, cols = shape(n)
    x = np.random.default_rng(30 + dim).standard_normal((2 * rows - 40, cols - 24)).astype(np.float32)
    module, args = _module(softmax(n, dim)), [x, np.zeros_like(x)]
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], want[1], rtol=1e-5, atol=1e-7)
    blocks = [x[:rows].astype(np.float64), x[rows:].astype(np.float64)]
    exact = np.concatenate([np.exp(b - b.max(dim, keepdims=True)) / np.exp(b - b.max(dim, keepdims=True)).sum(
        dim, keepdims=True) for b in blocks])
    assert np.allclose(got[1], exact, rtol=1e-4, atol=1e-6)


ARGMAX = ["  (%v: tile<f32>, %va: tile<f32>, %j: tile<i32>, %ja: tile<i32>) {",
          "    %ge = cmpf greater_than_or_equal ordered %v, %va : tile<f32> -> tile<i1>",
          "    %m = select %ge, %v, %va : tile<i1>, tile<f32>",
          "    %k = select %ge, %j, %ja : tile<i1>, tile<i32>",
          "    yield %m, %k : tile<f32>, tile<i32>", "  }"]


def argmax(n: int, dim: int = 1, rows: int = 0) -> str:
    """y[tile bx] = the maxima of x's tile bx along `dim` (padded with -inf), z[tile bx] their indices
    (as f32): a reduce of two tiles, the values and an iota broadcast along the kept axis. `rows`: the
    tile's kept axis (a square tile by default)."""
    rows, cols = (rows, n // rows) if rows else shape(n)
    rows, cols = (rows, cols) if dim == 1 else (cols, rows)
    kept, long = (rows, cols) if dim == 1 else (cols, rows)
    v, w, t, ti = _view((rows, cols), "neg_inf"), _view((kept,)), f"tile<{rows}x{cols}xf32>", f"tile<{rows}x{cols}xi32>"
    unit = f"tile<1x{cols}xi32>" if dim == 1 else f"tile<{rows}x1xi32>"
    r, ri = f"tile<{kept}xf32>", f"tile<{kept}xi32>"
    index = "%bx, %c0" if dim == 1 else "%c0, %bx"
    return _kernel("argmax", [2, 1, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %p2 = make_partition_view %t2 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[{index}] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %io = iota : tile<{long}xi32>",
        f"  %i1 = reshape %io : tile<{long}xi32> -> {unit}",
        f"  %ix = broadcast %i1 : {unit} -> {ti}",
        f"  %m, %k = reduce %x, %ix dim={dim} identities=[0xFF800000 : f32, 0 : i32] : {t}, {ti} -> {r}, {ri}", *ARGMAX,
        f"  %kf = itof %k signed : {ri} -> {r}",
        f"  %s1 = store_view_tko weak %m, %p1[%bx] token = %tok : {r}, {w}, tile<i32> -> token",
        f"  %s2 = store_view_tko weak %kf, %p2[%bx] token = %tok : {r}, {w}, tile<i32> -> token"])


@pytest.mark.parametrize("dim", [0, 1])
def test_an_argmax_is_looped(dim: int) -> None:
    """A reduce of two tiles: carried where its results fit a chunk (16 kept), nested where not."""
    flat = _code_does_not_grow(lambda n: argmax(n, dim, rows=16), small=1 << 16, big=1 << 22)
    assert flat.count(" for %loopIdx") == 1 and flat.count("= reduce ") == 1
    nested = _code_does_not_grow(lambda n: argmax(n, dim), small=1 << 20, big=1 << 24)
    assert nested.count(" for %loopIdx") == 2 and nested.count("= reduce ") == 1


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("carried", [True, False])
def test_an_argmax_agrees(dim: int, carried: bool, small_chunks) -> None:
    """Two blocks' tiles of 2^16 (carried: (4096, 16) along its columns, (4, 16384) along its rows, a
    chunk of 128 then holding runs of 32 of each row; nested: (256, 256)), the second ragged both ways;
    maxima and indices bit for bit numpy's (distinct values: no ties)."""
    n = 1 << 16
    rows = (4 if dim == 1 else 16) if carried else 0
    text = argmax(n, dim, rows)
    assert _looped(text).count(" for %loopIdx") == (2 if not rows else 1)
    tile = (rows, n // rows) if rows else shape(n)
    tile = tile if dim == 1 else tile[::-1]
    full = (2 * tile[0], tile[1]) if dim == 1 else (tile[0], 2 * tile[1])
    x = np.random.default_rng(40 + dim).standard_normal((full[0] - 5, full[1] - 24)).astype(np.float32)
    kept = x.shape[1 - dim]
    got = _agree(text, [x, np.zeros(kept, np.float32), np.zeros(kept, np.float32)], (2,))
    assert np.array_equal(got[1], x.max(dim)) and np.array_equal(got[2], x.argmax(dim).astype(np.float32))


def cumsum(n: int, dim: int = 1, reverse: bool = False) -> str:
    """y = the prefix (suffix: `reverse`) sums of x's tile bx along `dim`: a scan long both ways,
    nested as a reduction is (the running value of the block carried over the reduced axis' chunks)."""
    rows, cols = shape(n)
    v, w, t = _view((rows, cols), "zero"), _view((rows, cols)), f"tile<{rows}x{cols}xf32>"
    return _kernel("cumsum", [2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %s = scan %x dim={dim} reverse={'true' if reverse else 'false'} identities=[0.000000e+00 : f32]"
        f" : {t} -> {t}", *ADD,
        f"  %st = store_view_tko weak %s, %p1[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


@pytest.mark.parametrize("dim", [0, 1])
def test_a_scan_long_both_ways_is_nested(dim: int) -> None:
    text = _code_does_not_grow(lambda n: cumsum(n, dim, reverse=True), small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 2 and text.count("= scan ") == 1


@pytest.mark.parametrize("dim,reverse", [(0, False), (1, True)])
def test_a_scan_long_both_ways_agrees(dim: int, reverse: bool, small_chunks) -> None:
    """Two blocks' (256, 256) tiles along rows, the second ragged both ways (zero padded, stores masked
    past the array); close to the interpreter's and to float64's sums."""
    n = 1 << 16
    rows, cols = shape(n)
    x = np.random.default_rng(50 + dim).standard_normal((2 * rows - 40, cols - 24)).astype(np.float32)
    module, args = _module(cumsum(n, dim, reverse)), [x, np.zeros_like(x)]
    assert _looped(cumsum(n, dim, reverse)).count(" for %loopIdx") == 2
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3)
    blocks = [np.pad(b, ((0, rows - len(b)), (0, 24))).astype(np.float64) for b in (x[:rows], x[rows:])]
    sums = [np.flip(np.cumsum(np.flip(b, dim), dim), dim) if reverse else np.cumsum(b, dim) for b in blocks]
    exact = np.concatenate(sums)[:len(x), :x.shape[1]]
    assert np.allclose(got[1], exact, rtol=1e-4, atol=1e-3)
