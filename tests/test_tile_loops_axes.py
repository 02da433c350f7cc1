"""One tile reduced along two axes, each longer than a chunk (tileaa/axis_passes.py): a pass per axis,
each looped as a group of its own (nested here), each reading the tile again from its view. One warp
a kernel, as in test_tile_loops_more.py (chunks of 512 elements): a (1024, 1024) tile's row sums and
column maxima take a nested loop each. The emulator runs them on chunks of 128 (a (256, 256) tile)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate, interpret  # noqa: E402
from test_tile_loops_cat import MAX  # noqa: E402
import test_tile_loops_nested as nested  # noqa: E402
from test_tile_loops_more import ADD, _code_does_not_grow, _kernel, _looped, _module, _view  # noqa: E402

shape = nested.shape
small_chunks = nested.small_chunks   # chunks of 4 elements a thread: the nested form from (256, 256)


def sum_and_max(n: int, between: str = "", rows: int = 0) -> str:
    """s[tile bx] = the sums of x's tile bx along its rows, m[tile bx] its maxima along its columns
    (zero padded: the padding is in both). `between`: the token of the store of s, stored between
    the two reductions (as cuTile writes it; "" for both stores after both). `rows`: the tile's (a
    square tile by default)."""
    rows, cols = (rows, n // rows) if rows else shape(n)
    v, t = _view((rows, cols), "zero"), f"tile<{rows}x{cols}xf32>"
    wr, wc = _view((rows,)), _view((cols,))
    store_s = f"  %s1 = store_view_tko weak %s, %p1[%bx] token = {between or '%tok'} : tile<{rows}xf32>, {wr}, " \
        "tile<i32> -> token"
    return _kernel("sum_and_max", [2, 1, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {wr}",
        f"  %p2 = make_partition_view %t2 : {wc}",
        f"  %x, %lt = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %s = reduce %x dim=1 identities=[0.000000e+00 : f32] : {t} -> tile<{rows}xf32>", *ADD,
        *([store_s] if between else []),
        f"  %m = reduce %x dim=0 identities=[0xFF800000 : f32] : {t} -> tile<{cols}xf32>", *MAX,
        *([] if between else [store_s]),
        f"  %s2 = store_view_tko weak %m, %p2[%bx] token = %tok : tile<{cols}xf32>, {wc}, tile<i32> -> token"])


def centered_and_sums(n: int) -> str:
    """y = x's tile bx less the maxima of its rows, s[tile bx] the sums of its columns, and x twice
    (what reads no reduction: a pass of its own)."""
    rows, cols = shape(n)
    v, w, t = _view((rows, cols), "zero"), _view((rows, cols)), f"tile<{rows}x{cols}xf32>"
    wc, u = _view((cols,)), f"tile<{rows}x1xf32>"
    return _kernel("centered_and_sums", [2, 2, 1, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %p2 = make_partition_view %t2 : {wc}",
        f"  %p3 = make_partition_view %t3 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %m = reduce %x dim=1 identities=[0xFF800000 : f32] : {t} -> tile<{rows}xf32>", *MAX,
        f"  %m2 = reshape %m : tile<{rows}xf32> -> {u}",
        f"  %mb = broadcast %m2 : {u} -> {t}",
        f"  %y = subf %x, %mb : {t}",
        f"  %s = reduce %x dim=0 identities=[0.000000e+00 : f32] : {t} -> tile<{cols}xf32>", *ADD,
        f"  %x2 = addf %x, %x : {t}",
        f"  %s1 = store_view_tko weak %y, %p1[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token",
        f"  %s2 = store_view_tko weak %s, %p2[%bx] token = %tok : tile<{cols}xf32>, {wc}, tile<i32> -> token",
        f"  %s3 = store_view_tko weak %x2, %p3[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


def double_centered(n: int, rows: int = 0) -> str:
    """y = x less the means of its rows, less the means of that tile's columns: the columns' means read
    the rows' (cross_reductions.py: the nested form along the columns, each chunk's rows' sums in a
    loop of their own). `rows`: the tile's (a square tile by default)."""
    rows, cols = (rows, n // rows) if rows else shape(n)
    v, w, t = _view((rows, cols), "zero"), _view((rows, cols)), f"tile<{rows}x{cols}xf32>"
    ur, uc, tr, tc = f"tile<{rows}x1xf32>", f"tile<1x{cols}xf32>", f"tile<{rows}xf32>", f"tile<{cols}xf32>"
    return _kernel("double_centered", [2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %r = reduce %x dim=1 identities=[0.000000e+00 : f32] : {t} -> {tr}", *ADD,
        f"  %kr = constant <f32: {1 / cols:e}> : {tr}",
        f"  %rm = mulf %r, %kr : {tr}",
        f"  %r2 = reshape %rm : {tr} -> {ur}",
        f"  %rb = broadcast %r2 : {ur} -> {t}",
        f"  %d = subf %x, %rb : {t}",
        f"  %c = reduce %d dim=0 identities=[0.000000e+00 : f32] : {t} -> {tc}", *ADD,
        f"  %kc = constant <f32: {1 / rows:e}> : {tc}",
        f"  %cm = mulf %c, %kc : {tc}",
        f"  %c2 = reshape %cm : {tc} -> {uc}",
        f"  %cb = broadcast %c2 : {uc} -> {t}",
        f"  %y = subf %d, %cb : {t}",
        f"  %st = store_view_tko weak %y, %p1[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


@pytest.mark.parametrize("between", ["", "%tok"])
def test_a_tile_reduced_along_two_axes_takes_a_pass_each(between: str) -> None:
    """Two nested loops, one per axis, each loading the tile; no more code at 2^24 than at 2^20. A
    store between the reductions that no token orders after the load stays between the passes."""
    text = _code_does_not_grow(lambda n: sum_and_max(n, between), small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 4 and text.count("= reduce ") == 2
    assert text.count("load_view_tko") == 2


def test_carried_reductions_take_a_pass_each_around_a_store() -> None:
    """Results that fit a chunk (a (16, 512) tile: chunks of 512 hold runs of 32 of each row): a flat
    loop per axis carrying its reduction; the store of the sums, between the reductions and no member
    (it reads a carried result), stays between the loops."""
    text = _looped(sum_and_max(1 << 13, "%tok", rows=16))
    assert text.count(" for %loopIdx") == 2 and text.count("= reduce ") == 2
    loops = [i for i, line in enumerate(text.splitlines()) if " for %loopIdx" in line]
    stores = [i for i, line in enumerate(text.splitlines()) if "store_view_tko" in line]
    assert loops[0] < stores[0] < loops[1] < stores[1]


def test_row_sums_of_short_runs_are_computed_chunk_by_chunk() -> None:
    """A (256, 256) or (512, 512) tile: its row sums fit a chunk, but carried they would leave the chunk
    runs of 2 (or 1) of each row (tile_loops._short_runs). One loop over chunks of whole rows: the
    sums computed and stored chunk by chunk, the column maxima carried, stored after it."""
    text = _code_does_not_grow(lambda n: sum_and_max(n, "%tok"), small=1 << 16, big=1 << 18)
    assert text.count(" for %loopIdx") == 1 and text.count("= reduce ") == 2
    lines = text.splitlines()
    loop = next(i for i, line in enumerate(lines) if " for %loopIdx" in line)
    stores = [i for i, line in enumerate(lines) if "store_view_tko" in line]
    assert loop < stores[0] and "tile<1xf32>" in lines[stores[0]] and "tile<512xf32>" in lines[stores[1]]


def test_a_store_ordered_after_the_load_stays_refused() -> None:
    """A store between the reductions ordered after the tile's load by its token: the second pass
    would read the tile again after it (an element it wrote, where the arrays overlap)."""
    from tileiras.errors import CompileError

    with pytest.raises(CompileError) as info:
        _looped(sum_and_max(1 << 20, between="%lt"))
    assert int(info.value.code) == 5 and "over the compile limit" in info.value.message


def test_a_pass_with_phases_beside_another() -> None:
    """The columns' sums (an outer loop, in it the sums' loop), the rows' maxima (an outer loop, in it
    the maxima's loop and the store's), the doubled tile (one loop)."""
    text = _code_does_not_grow(centered_and_sums, small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 6 and text.count("= reduce ") == 2
    assert text.count("store_view_tko") == 3


def test_a_reduction_of_another_axis_reduction_is_nested_across() -> None:
    """An outer loop over blocks of columns; in it the columns' sums' loop and the stores', each chunk
    (a row of the block) with a loop summing its row."""
    text = _code_does_not_grow(double_centered, small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 5 and text.count("= reduce ") == 3


def _ragged(seed: int, rows: int, cols: int) -> np.ndarray:
    """Two blocks' tiles along rows, the second 40 rows short and both 24 columns short."""
    return np.random.default_rng(seed).standard_normal((2 * rows - 40, cols - 24)).astype(np.float32)


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("log2,between,loops", [(16, "", 4), (16, "%tok", 4), (14, "%tok", 1)])
def test_a_tile_reduced_along_two_axes_agrees(log2: int, between: str, loops: int) -> None:
    """Two blocks' tiles, ragged both ways (zero padded, stores masked past the arrays): (256, 256),
    nested; (128, 128), one flat loop, the sums computed and stored chunk by chunk, the maxima
    carried. The sums close to the interpreter's and numpy's, the maxima bit for bit."""
    n = 1 << log2
    rows, cols = shape(n)
    assert _looped(sum_and_max(n, between)).count(" for %loopIdx") == loops
    x = _ragged(60, rows, cols)
    args = [x, np.zeros(len(x), np.float32), np.zeros(2 * cols - 24, np.float32)]
    module = _module(sum_and_max(n, between))
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3) and np.array_equal(got[2], want[2])
    padded = np.pad(x, ((0, 40), (0, 24)))
    assert np.allclose(got[1], padded.astype(np.float64).sum(1)[:len(x)], rtol=1e-4, atol=1e-3)
    maxima = np.concatenate([padded[:rows].max(0), padded[rows:].max(0)])[:2 * cols - 24]
    assert np.array_equal(got[2], maxima)


def test_carried_reductions_around_a_store_agree() -> None:
    """Two blocks' (16, 512) tiles (a flat loop per axis, the store of the sums between them), the
    second 5 rows short, both 24 columns short (zero padded, stores masked)."""
    n, rows, cols = 1 << 13, 16, 512
    text = sum_and_max(n, "%tok", rows=rows)
    assert _looped(text).count(" for %loopIdx") == 2
    sums_and_maxima_agree(_module(text), rows, cols, (5, 24), 62, 1e-4)


def sums_and_maxima_agree(module: object, rows: int, cols: int, short: tuple[int, int], seed: int, tol: float) -> None:
    """Two blocks of a `sum_and_max` kernel of (rows, cols) tiles, `short` (rows, columns) short of two whole
    tiles (zero padded, stores masked): the emulator (race checker on) against the interpreter and numpy, the
    row sums within `tol`, the column maxima exactly."""
    x = np.random.default_rng(seed).standard_normal((2 * rows - short[0], cols - short[1])).astype(np.float32)
    args = [x, np.zeros(len(x), np.float32), np.zeros(2 * cols, np.float32)]
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    padded = np.pad(x, ((0, short[0]), (0, short[1])))
    assert np.allclose(got[1], want[1], rtol=tol, atol=tol)
    assert np.allclose(got[1], padded.astype(np.float64).sum(1)[:len(x)], rtol=tol, atol=tol)
    assert np.array_equal(got[2], want[2])
    assert np.array_equal(got[2], np.concatenate([padded[:rows].max(0), padded[rows:].max(0)]))


@pytest.mark.usefixtures("small_chunks")
def test_a_pass_with_phases_beside_another_agrees() -> None:
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(centered_and_sums(n)).count(" for %loopIdx") == 6
    x = _ragged(61, rows, cols)
    args = [x, np.zeros_like(x), np.zeros(2 * cols - 24, np.float32), np.zeros_like(x)]
    module = _module(centered_and_sums(n))
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.array_equal(got[1], want[1]) and np.array_equal(got[3], want[3])
    assert np.allclose(got[2], want[2], rtol=1e-4, atol=1e-3)
    padded = np.pad(x, ((0, 40), (0, 24)))
    assert np.array_equal(got[1], (padded - padded.max(1, keepdims=True))[:len(x), :x.shape[1]])
    sums = np.concatenate([padded[:rows].astype(np.float64).sum(0), padded[rows:].astype(np.float64).sum(0)])
    assert np.allclose(got[2], sums[:2 * cols - 24], rtol=1e-4, atol=1e-3)
    assert np.array_equal(got[3], 2 * x)


# -- cats in the nested form: a loop per window of the reduced axis, in the outer loop's body -----------

def cat_reduce(n: int, kind: str = "sum", joined: int = 1, dim: int = 1) -> str:
    """s[tile bx] = the sums (maxima) along `dim` of x's and y's tiles bx joined along `joined` (side by
    side, or one above the other), padded with zeros (-inf)."""
    body, identity, padding = nested.KINDS[kind]
    rows, cols = shape(n)
    half = (rows, cols // 2) if joined == 1 else (rows // 2, cols)
    kept = cols if dim == 0 else rows
    v, w = _view(half, padding), _view((kept,))
    th, t = f"tile<{half[0]}x{half[1]}xf32>", f"tile<{rows}x{cols}xf32>"
    index = "%bx, %c0" if dim == 1 else "%c0, %bx"
    return _kernel("cat_reduce", [2, 2, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {v}",
        f"  %p2 = make_partition_view %t2 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[{index}] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %y, %ly = load_view_tko weak %p1[{index}] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %c = cat %x, %y dim = {joined} : {th}, {th} -> {t}",
        f"  %s = reduce %c dim={dim} identities=[{identity} : f32] : {t} -> tile<{kept}xf32>", *body,
        f"  %st = store_view_tko weak %s, %p2[%bx] token = %tok : tile<{kept}xf32>, {w}, tile<i32> -> token"])


def cat_softmax(n: int) -> str:
    """z[tile bx] = the softmax along rows of x's and y's tiles bx joined side by side (padded with
    -inf): per block of rows, the maxima's loops (one per window), the sums', then the stores'."""
    rows, cols = shape(n)
    v, w = _view((rows, cols // 2), "neg_inf"), _view((rows, cols))
    th, t = f"tile<{rows}x{cols // 2}xf32>", f"tile<{rows}x{cols}xf32>"
    r, u = f"tile<{rows}xf32>", f"tile<{rows}x1xf32>"
    return _kernel("cat_softmax", [2, 2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {v}",
        f"  %p2 = make_partition_view %t2 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %y, %ly = load_view_tko weak %p1[%bx, %c0] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %c = cat %x, %y dim = 1 : {th}, {th} -> {t}",
        f"  %m = reduce %c dim=1 identities=[0xFF800000 : f32] : {t} -> {r}", *MAX,
        f"  %m2 = reshape %m : {r} -> {u}",
        f"  %mb = broadcast %m2 : {u} -> {t}",
        f"  %d = subf %c, %mb : {t}",
        f"  %e = exp %d : {t}",
        f"  %s = reduce %e dim=1 identities=[0.000000e+00 : f32] : {t} -> {r}", *ADD,
        f"  %s2 = reshape %s : {r} -> {u}",
        f"  %sb = broadcast %s2 : {u} -> {t}",
        f"  %z = divf %e, %sb : {t}",
        f"  %st = store_view_tko weak %z, %p2[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


@pytest.mark.parametrize("kind", list(nested.KINDS))
def test_a_cat_reduced_along_its_long_axis_is_nested(kind: str) -> None:
    """An outer loop over blocks of rows, in its body a loop per operand carrying the block's sums."""
    text = _code_does_not_grow(lambda n: cat_reduce(n, kind), small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 3 and text.count("= reduce ") == 2 and " cat " not in text


def test_a_softmax_of_a_cat_is_nested() -> None:
    """An outer loop over blocks of rows; in its body the maxima, the sums and the stores, a loop per
    operand each."""
    text = _code_does_not_grow(cat_softmax, small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 7 and text.count("= reduce ") == 4 and " cat " not in text


def _halves(seed: int, rows: int, cols: int, pad: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x and y for two blocks of (rows, cols / 2) tiles, x 24 columns short of its tile, both 40 rows
    short of the second; and the blocks' joined tiles, padded with `pad`."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2 * rows - 40, cols // 2 - 24)).astype(np.float32)
    y = rng.standard_normal((2 * rows - 40, cols // 2)).astype(np.float32)
    joined = np.concatenate([np.pad(x, ((0, 40), (0, 24)), constant_values=pad),
                             np.pad(y, ((0, 40), (0, 0)), constant_values=pad)], 1)
    return x, y, joined


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("kind", list(nested.KINDS))
def test_a_cat_reduced_along_its_long_axis_agrees(kind: str) -> None:
    """Two blocks of (256, 256) joined tiles, ragged in the middle (x's padding) and below."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(cat_reduce(n, kind)).count(" for %loopIdx") == 3
    x, y, joined = _halves(70, rows, cols, 0.0 if kind == "sum" else -np.inf)
    args = [x, y, np.zeros(len(x), np.float32)]
    module = _module(cat_reduce(n, kind))
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    if kind == "max":
        assert np.array_equal(got[2], want[2]) and np.array_equal(got[2], joined.max(1)[:len(x)])
    else:
        assert np.allclose(got[2], want[2], rtol=1e-4, atol=1e-3)
        assert np.allclose(got[2], joined.astype(np.float64).sum(1)[:len(x)], rtol=1e-4, atol=1e-3)


@pytest.mark.usefixtures("small_chunks")
def test_a_softmax_of_a_cat_agrees() -> None:
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(cat_softmax(n)).count(" for %loopIdx") == 7
    x, y, joined = _halves(71, rows, cols, -np.inf)
    args = [x, y, np.zeros((len(x), cols), np.float32)]
    module = _module(cat_softmax(n))
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[2], want[2], rtol=1e-5, atol=1e-7)
    real = joined[:len(x)].astype(np.float64)   # (rows all padding have no softmax)
    e = np.exp(real - real.max(1, keepdims=True))
    assert np.allclose(got[2], e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-6)


# -- the nested form with permutes and merged axes ---------------------------------------------------

def transposed_sums(n: int) -> str:
    """s[tile bx] = the sums along rows of x's tile bx transposed: the sums of its columns."""
    rows, cols = shape(n)
    v, w = _view((rows, cols), "zero"), _view((cols,))
    t, tt = f"tile<{rows}x{cols}xf32>", f"tile<{cols}x{rows}xf32>"
    return _kernel("transposed_sums", [2, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %xt = permute %x [1, 0] : {t} -> {tt}",
        f"  %s = reduce %xt dim=1 identities=[0.000000e+00 : f32] : {tt} -> tile<{cols}xf32>", *ADD,
        f"  %st = store_view_tko weak %s, %p1[%bx] token = %tok : tile<{cols}xf32>, {w}, tile<i32> -> token"])


def transposed_centered(n: int) -> str:
    """y[tile bx] = x's tile bx transposed, less the maxima of its rows (of x's columns)."""
    rows, cols = shape(n)
    v, w = _view((rows, cols), "zero"), _view((cols, rows))
    t, tt, r, u = f"tile<{rows}x{cols}xf32>", f"tile<{cols}x{rows}xf32>", f"tile<{cols}xf32>", f"tile<{cols}x1xf32>"
    return _kernel("transposed_centered", [2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %xt = permute %x [1, 0] : {t} -> {tt}",
        f"  %m = reduce %xt dim=1 identities=[0xFF800000 : f32] : {tt} -> {r}", *MAX,
        f"  %m2 = reshape %m : {r} -> {u}",
        f"  %mb = broadcast %m2 : {u} -> {tt}",
        f"  %y = subf %xt, %mb : {tt}",
        f"  %st = store_view_tko weak %y, %p1[%c0, %bx] token = %tok : {tt}, {w}, tile<i32> -> token"])


def flat_rows(n: int) -> str:
    """s[tile bx] = the sums along rows of x's 1-D tile bx seen as a square tile."""
    rows, cols = shape(n)
    v, w = _view((n,), "zero"), _view((rows,))
    t1, t = f"tile<{n}xf32>", f"tile<{rows}x{cols}xf32>"
    return _kernel("flat_rows", [1, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[%bx] token = %tok : {v}, tile<i32> -> {t1}, token",
        f"  %x2 = reshape %x : {t1} -> {t}",
        f"  %s = reduce %x2 dim=1 identities=[0.000000e+00 : f32] : {t} -> tile<{rows}xf32>", *ADD,
        f"  %st = store_view_tko weak %s, %p1[%bx] token = %tok : tile<{rows}xf32>, {w}, tile<i32> -> token"])


def flat_cols(n: int) -> str:
    """s[tile bx] = the maxima along columns of x's 1-D tile bx seen as a square tile."""
    rows, cols = shape(n)
    v, w = _view((n,), "zero"), _view((cols,))
    t1, t = f"tile<{n}xf32>", f"tile<{rows}x{cols}xf32>"
    return _kernel("flat_cols", [1, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[%bx] token = %tok : {v}, tile<i32> -> {t1}, token",
        f"  %x2 = reshape %x : {t1} -> {t}",
        f"  %s = reduce %x2 dim=0 identities=[0xFF800000 : f32] : {t} -> tile<{cols}xf32>", *MAX,
        f"  %st = store_view_tko weak %s, %p1[%bx] token = %tok : tile<{cols}xf32>, {w}, tile<i32> -> token"])


@pytest.mark.parametrize("kernel,loops", [(transposed_sums, 2), (transposed_centered, 3), (flat_rows, 2),
                                          (flat_cols, 2)])
def test_permutes_and_merged_axes_are_nested(kernel, loops: int) -> None:
    """A permute, or a reshape merging the space's axes (its chunks one run of the 1-D tile: a block of
    one row where the rows are reduced), in the nested form."""
    text = _code_does_not_grow(kernel, small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == loops


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("kernel", [transposed_sums, transposed_centered])
def test_a_permute_in_the_nested_form_agrees(kernel) -> None:
    """Two blocks' (256, 256) tiles along rows, ragged both ways (zero padded, stores masked)."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(kernel(n)).count(" for %loopIdx") > 1
    x = _ragged(80, rows, cols)
    padded = np.pad(x, ((0, 40), (0, 24)))
    blocks = [padded[:rows], padded[rows:]]
    if kernel is transposed_sums:
        args = [x, np.zeros(2 * cols - 24, np.float32)]
        want = np.concatenate([b.astype(np.float64).sum(0) for b in blocks])[:2 * cols - 24]
    else:
        args = [x, np.zeros((cols - 24, len(x)), np.float32)]
        want = np.concatenate([(b - b.max(0, keepdims=True)).T for b in blocks], 1)[:cols - 24, :len(x)]
    module = _module(kernel(n))
    got, ref = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], ref[1], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[1], want, rtol=1e-4, atol=1e-3)


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("kernel", [flat_rows, flat_cols])
def test_merged_axes_in_the_nested_form_agree(kernel) -> None:
    """Two blocks' 1-D tiles of 2^16 seen as (256, 256), the second 1000 elements short (zero padded)."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(kernel(n)).count(" for %loopIdx") == 2
    x = np.random.default_rng(81).standard_normal(2 * n - 1000).astype(np.float32)
    blocks = np.pad(x, (0, 1000)).reshape(2, rows, cols)
    want = np.concatenate([b.astype(np.float64).sum(1) if kernel is flat_rows else b.max(0) for b in blocks])
    args = [x, np.zeros(len(want) - 8, np.float32)]
    module = _module(kernel(n))
    got, ref = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], ref[1], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[1], want[:len(want) - 8], rtol=1e-4, atol=1e-3)


def summed_steps(n: int, steps: int = 3, stores: bool = False) -> str:
    """s[tile bx] = the sums along rows of x's tiles bx * steps + k added over k (a loop carrying the
    tile, run whole for each chunk; `stores`: the running tile stored in x's place each step)."""
    rows, cols = shape(n)
    v, w, t = _view((rows, cols), "zero"), _view((rows,)), f"tile<{rows}x{cols}xf32>"
    store = f"    %s2 = store_view_tko weak %s, %p0[%j, %c0] token = %lt : {t}, {v}, tile<i32> -> token"
    return _kernel("summed_steps", [2, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %k = constant <i32: {steps}> : tile<i32>",
        "  %one = constant <i32: 1> : tile<i32>",
        "  %base = muli %bx, %k : tile<i32>",
        f"  %zero = constant <f32: 0.000000e+00> : {t}",
        f"  %acc = for %i in (%c0 to %k, step %one) : tile<i32> iter_values(%a = %zero) -> ({t}) {{",
        "    %j = addi %base, %i : tile<i32>",
        f"    %x, %lt = load_view_tko weak %p0[%j, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"    %s = addf %a, %x : {t}",
        *([store] if stores else []),
        f"    continue %s : {t}",
        "  }",
        f"  %r = reduce %acc dim=1 identities=[0.000000e+00 : f32] : {t} -> tile<{rows}xf32>", *ADD,
        f"  %st = store_view_tko weak %r, %p1[%bx] token = %tok : tile<{rows}xf32>, {w}, tile<i32> -> token"])


def test_a_member_loop_in_the_nested_form() -> None:
    """The outer loop over blocks of rows; in its body the chunks' loop, in it the member loop."""
    text = _code_does_not_grow(summed_steps, small=1 << 20, big=1 << 24)
    assert text.count(" for %loopIdx") == 3 and text.count("= reduce ") == 1


def test_a_member_loop_that_stores_stays_refused() -> None:
    """Each phase reading the loop would run it, and store, again."""
    from tileiras.errors import CompileError

    with pytest.raises(CompileError) as info:
        _looped(summed_steps(1 << 20, stores=True))
    assert int(info.value.code) == 5 and "over the compile limit" in info.value.message


@pytest.mark.usefixtures("small_chunks")
def test_a_member_loop_in_the_nested_form_agrees() -> None:
    """Two blocks of three (256, 256) tiles, the last one 40 rows short, all 24 columns short."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(summed_steps(n)).count(" for %loopIdx") == 3
    x = np.random.default_rng(82).standard_normal((6 * rows - 40, cols - 24)).astype(np.float32)
    args = [x, np.zeros(2 * rows - 8, np.float32)]
    module = _module(summed_steps(n))
    got, ref = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], ref[1], rtol=1e-4, atol=1e-3)
    tiles = np.pad(x, ((0, 40), (0, 24))).astype(np.float64).reshape(2, 3, rows, cols)
    assert np.allclose(got[1], tiles.sum(1).sum(2).ravel()[:2 * rows - 8], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("joined,dim,small", [(0, 1, 1 << 20), (1, 0, 1 << 22)])
def test_a_cat_along_a_kept_axis_is_nested(joined: int, dim: int, small: int) -> None:
    """Tiles joined along the axis the reduction keeps: an outer loop per operand (a window of blocks),
    in its body the reduced axis' loop. (At 2^20 a side-by-side operand is one block wide: its outer
    loop's index is a constant, and the code four lines shorter.)"""
    text = _code_does_not_grow(lambda n: cat_reduce(n, "sum", joined, dim), small=small, big=1 << 24)
    assert text.count(" for %loopIdx") == 4 and text.count("= reduce ") == 2 and " cat " not in text


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("joined,dim,kind", [(0, 1, "sum"), (1, 0, "max")])
def test_a_cat_along_a_kept_axis_agrees(joined: int, dim: int, kind: str) -> None:
    """Two blocks of (256, 256) joined tiles (x's and y's halves of 128 rows, or columns), x and y
    ragged both ways (padded as the loads ask, the results' stores masked)."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(cat_reduce(n, kind, joined, dim)).count(" for %loopIdx") == 4
    half = (rows // 2, cols) if joined == 0 else (rows, cols // 2)
    blocks = (2 * half[0], half[1]) if dim == 1 else (half[0], 2 * half[1])
    rng = np.random.default_rng(83)
    x, y = (rng.standard_normal((blocks[0] - 40, blocks[1] - 24)).astype(np.float32) for _ in range(2))
    pad = 0.0 if kind == "sum" else -np.inf
    px, py = (np.pad(a, ((0, 40), (0, 24)), constant_values=pad).astype(np.float64) for a in (x, y))
    if dim == 1:
        tiles = [np.concatenate([px[b * half[0]:(b + 1) * half[0]], py[b * half[0]:(b + 1) * half[0]]], joined)
                 for b in range(2)]
    else:
        tiles = [np.concatenate([px[:, b * half[1]:(b + 1) * half[1]], py[:, b * half[1]:(b + 1) * half[1]]], joined)
                 for b in range(2)]
    want = np.concatenate([t.sum(dim) if kind == "sum" else t.max(dim) for t in tiles])[:-8]
    args = [x, y, np.zeros(len(want), np.float32)]
    module = _module(cat_reduce(n, kind, joined, dim))
    got, ref = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[2], ref[2], rtol=1e-4, atol=1e-3) and np.allclose(got[2], want, rtol=1e-4, atol=1e-3)
    assert kind == "sum" or np.array_equal(got[2], want.astype(np.float32))


def cat_sum_and_max(n: int) -> str:
    """s[tile bx] = the sums along rows of x's and y's tiles bx joined side by side, m[tile bx] the
    maxima along its columns (zero padded)."""
    rows, cols = shape(n)
    v, th, t = _view((rows, cols // 2), "zero"), f"tile<{rows}x{cols // 2}xf32>", f"tile<{rows}x{cols}xf32>"
    wr, wc = _view((rows,)), _view((cols,))
    return _kernel("cat_sum_and_max", [2, 2, 1, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {v}",
        f"  %p2 = make_partition_view %t2 : {wr}",
        f"  %p3 = make_partition_view %t3 : {wc}",
        f"  %x, %lx = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %y, %ly = load_view_tko weak %p1[%bx, %c0] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %c = cat %x, %y dim = 1 : {th}, {th} -> {t}",
        f"  %s = reduce %c dim=1 identities=[0.000000e+00 : f32] : {t} -> tile<{rows}xf32>", *ADD,
        f"  %s1 = store_view_tko weak %s, %p2[%bx] token = %tok : tile<{rows}xf32>, {wr}, tile<i32> -> token",
        f"  %m = reduce %c dim=0 identities=[0xFF800000 : f32] : {t} -> tile<{cols}xf32>", *MAX,
        f"  %s2 = store_view_tko weak %m, %p3[%bx] token = %tok : tile<{cols}xf32>, {wc}, tile<i32> -> token"])


def test_a_cat_reduced_along_two_axes_takes_a_pass_each() -> None:
    """The rows' sums: an outer loop, a loop per operand in it; the columns' maxima: an outer loop per
    operand, a loop in each. From 2^22 on (at 2^20 an operand is one block wide)."""
    text = _code_does_not_grow(cat_sum_and_max, small=1 << 22, big=1 << 24)
    assert text.count(" for %loopIdx") == 7 and text.count("= reduce ") == 4 and " cat " not in text


@pytest.mark.usefixtures("small_chunks")
def test_a_cat_reduced_along_two_axes_agrees() -> None:
    """Two blocks of (256, 256) joined tiles, x and y ragged (zero padded, the results' stores masked)."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(cat_sum_and_max(n)).count(" for %loopIdx") == 7
    x, y, joined = _halves(84, rows, cols, 0.0)
    blocks = [joined[:rows], joined[rows:]]
    sums = np.concatenate([b.astype(np.float64).sum(1) for b in blocks])[:len(x)]
    maxima = np.concatenate([b.max(0) for b in blocks])
    args = [x, y, np.zeros(len(x), np.float32), np.zeros(2 * cols - 8, np.float32)]
    module = _module(cat_sum_and_max(n))
    got, ref = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[2], ref[2], rtol=1e-4, atol=1e-3) and np.allclose(got[2], sums, rtol=1e-4, atol=1e-3)
    assert np.array_equal(got[3], ref[3]) and np.array_equal(got[3], maxima[:2 * cols - 8])


@pytest.mark.usefixtures("small_chunks")
def test_a_reduction_of_another_axis_reduction_agrees() -> None:
    """Two blocks' (256, 256) tiles along rows, ragged both ways (zero padded: the padding counts in
    the means; stores masked)."""
    n = 1 << 16
    rows, cols = shape(n)
    assert _looped(double_centered(n)).count(" for %loopIdx") == 5
    x = _ragged(85, rows, cols)
    module = _module(double_centered(n))
    args = [x, np.zeros_like(x)]
    got, ref = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], ref[1], rtol=1e-4, atol=1e-5)
    padded = np.pad(x, ((0, 40), (0, 24))).astype(np.float64)
    tiles = [padded[:rows], padded[rows:]]
    centered = [t - t.mean(1, keepdims=True) for t in tiles]
    want = np.concatenate([c - c.mean(0, keepdims=True) for c in centered])[:len(x), :x.shape[1]]
    assert np.allclose(got[1], want, rtol=1e-4, atol=1e-5)
