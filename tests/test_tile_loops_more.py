"""More ops computed in loops over chunks (tileaa/tile_loops.py), on kernels written in the text form:
reverse scans, loops that store while they carry a tile, ... Each kernel asks for one warp
(`num_worker_warps_per_cta = 1`), so that a tile of 2^13 elements (256 a thread) is already looped,
in chunks of 512: the emulator (race checker on) runs it in seconds. Each test checks the nv_tileaa
IR (a loop, whose code does not grow with the tile) and the emulator against the interpreter, a
ragged edge included."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate, interpret  # noqa: E402

HINTS = "optimization_hints=<sm_90 = {num_worker_warps_per_cta = 1}>"


def _view(shape: tuple[int, ...], padding: str = "") -> str:
    rank = len(shape)
    dims = "x".join(str(n) for n in shape)
    strides = ",".join(["?"] * (rank - 1) + ["1"])
    pad = f", padding_value = {padding}" if padding else ""
    return f"partition_view<tile=({dims}){pad}, tensor_view<{'?x' * rank}f32, strides=[{strides}]>>"


def _tensor(rank: int) -> str:
    return f"tensor_view<{'?x' * rank}f32, strides=[{','.join(['?'] * (rank - 1) + ['1'])}]>"


def _args(ranks: list[int]) -> tuple[str, list[str]]:
    """The entry's arguments for arrays of `ranks` (pointer, shape, strides each) and the lines making
    their tensor views %t0, %t1, ..."""
    args, lines, n = [], [], 0
    for i, rank in enumerate(ranks):
        ptr = f"%a{n}"
        shape = [f"%a{n + 1 + d}" for d in range(rank)]
        strides = [f"%a{n + 1 + rank + d}" for d in range(rank)]   # the last one is 1 (the view's type says so)
        args += [f"{ptr}: tile<ptr<f32>>"] + [f"{v}: tile<i32>" for v in shape + strides]
        n += 1 + 2 * rank
        lines.append(f"  %t{i} = make_tensor_view {ptr}, shape = [{', '.join(shape)}], strides = [{', '.join(strides[:-1] + ['1'])}]"
                     f" : tile<i32> -> {_tensor(rank)}")
    return ", ".join(args), lines


def _kernel(name: str, ranks: list[int], body: list[str]) -> str:
    args, views = _args(ranks)
    return "\n".join([f"cuda_tile.module @m {{", f"entry @{name}({args}) {HINTS} {{", "  %tok = make_token : token",
                      *views, "  %bx, %by, %bz = get_tile_block_id : tile<i32>",
                      "  %c0 = constant <i32: 0> : tile<i32>", *body, "  return", "}", "}"]) + "\n"


def _module(text: str):
    from tileiras.text.parser import parse_module

    return parse_module(text)


def _looped(text: str) -> str:
    """The nv_tileaa IR of `text` once loop-tiles ran (on sm_90), printed."""
    from tileiras.tileas.passes import threads_and_loops
    from tileiras.text.printer import print_module
    from tileiras.tileaa.passes import to_tileaa
    from tileiras.transforms.passes import to_canonical

    module = _module(text)
    entry = next(op for op in module.walk() if op.name == "cuda_tile.entry")
    to_canonical(entry)
    to_tileaa(entry)
    assert threads_and_loops(entry, "sm_90") == 32
    return print_module(module)


def _code_does_not_grow(kernel, small: int = 1 << 13, big: int = 1 << 22) -> str:
    """The looped IR of `kernel(big)`: a `for`, no tile of `big` elements left, and as many lines as
    that of `kernel(small)`."""
    a, b = _looped(kernel(small)), _looped(kernel(big))
    assert " for %loopIdx" in b
    assert f"{big}x" not in b and f"({big})" not in b and f"x{big})" not in b
    assert len(a.splitlines()) == len(b.splitlines())
    return b


def _agree(text: str, args: list, grid: tuple, exact: bool = True) -> list:
    """The emulator's arrays (race checker on), bit for bit the interpreter's (close to them where not
    `exact`: sums in another order)."""
    module = _module(text)
    got, want = emulate(module, args, "sm_90", grid), interpret(module, args, grid)
    for a, b in zip(got, want):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)) if exact else np.allclose(a, b, rtol=1e-5, atol=1e-6)
    return got


# -- reverse scans -----------------------------------------------------------------------------------

def reverse_cumsum(n: int) -> str:
    """y[r, :] = suffix sums of x[r, :], one row of `n` a block (zero padded)."""
    v, w, t = _view((1, n), "zero"), _view((1, n)), f"tile<1x{n}xf32>"
    return _kernel("rcumsum", [2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%bx, %c0] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %y = scan %x dim=1 reverse=true identities=[0.000000e+00 : f32] : {t} -> {t}",
        "  (%l: tile<f32>, %r: tile<f32>) {",
        "    %s = addf %l, %r : tile<f32>",
        "    yield %s : tile<f32>",
        "  }",
        f"  %st = store_view_tko weak %y, %p1[%bx, %c0] token = %tok : {t}, {w}, tile<i32> -> token"])


def test_reverse_scan_is_looped_last_chunk_first() -> None:
    text = _code_does_not_grow(reverse_cumsum)
    assert "subi" in text and "reverse=true" in text


@pytest.mark.parametrize("log2,short", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])  # 2^16: 260 s
def test_reverse_scan_agrees(log2: int, short: int) -> None:
    """Two rows `short` elements shorter than the tile: the suffix sums start from the padded end."""
    cols = (1 << log2) - short
    x = np.random.default_rng(log2).standard_normal((2, cols)).astype(np.float32)
    module = _module(reverse_cumsum(1 << log2))
    args = [x, np.zeros_like(x)]
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    exact = np.cumsum(x[:, ::-1].astype(np.float64), axis=1)[:, ::-1]
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[1], exact, rtol=1e-4, atol=1e-3)


# -- loops that store while they carry a tile ----------------------------------------------------------

def running_sums(n: int, steps: int = 3) -> str:
    """y[k] = x[0] + ... + x[k] over tiles k of `n` of block bx's `steps`: the running tile is carried by
    a loop that stores it every step (its stores chained by a token, its loads not)."""
    v, t = _view((n,)), f"tile<{n}xf32>"
    return _kernel("running", [1, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {v}",
        f"  %k = constant <i32: {steps}> : tile<i32>",
        "  %one = constant <i32: 1> : tile<i32>",
        "  %base = muli %bx, %k : tile<i32>",
        f"  %zero = constant <f32: 0.000000e+00> : {t}",
        f"  %acc, %last = for %i in (%c0 to %k, step %one) : tile<i32> iter_values(%a = %zero, %st = %tok) -> ({t}, token) {{",
        "    %j = addi %base, %i : tile<i32>",
        f"    %x, %lt = load_view_tko weak %p0[%j] token = %tok : {v}, tile<i32> -> {t}, token",
        f"    %s = addf %a, %x : {t}",
        f"    %st2 = store_view_tko weak %s, %p1[%j] token = %st : {t}, {v}, tile<i32> -> token",
        f"    continue %s, %st2 : {t}, token",
        "  }"])


def test_a_loop_that_stores_is_run_per_chunk() -> None:
    text = _code_does_not_grow(running_sums)
    assert text.count(" for ") == 2 and "store_view_tko" in text.split(" for ")[2]


@pytest.mark.parametrize("log2,ragged", [(13, 48), (15, 1000)])
def test_a_loop_that_stores_agrees(log2: int, ragged: int) -> None:
    """Two blocks of three tiles, the last one `ragged` elements into its tile."""
    n = 1 << log2
    length = 5 * n + ragged
    x = np.random.default_rng(log2).standard_normal(length).astype(np.float32)
    got = _agree(running_sums(n), [x, np.zeros_like(x)], (2,))
    want = np.zeros_like(x)
    for b in range(2):
        acc = np.zeros(n, np.float32)
        for k in range(3):
            part = x[(3 * b + k) * n:(3 * b + k + 1) * n]
            acc[:len(part)] += part
            want[(3 * b + k) * n:(3 * b + k) * n + len(part)] = acc[:len(part)]
    assert np.array_equal(got[1], want)


# -- reductions over several axes --------------------------------------------------------------------

ADD = ["  (%l: tile<f32>, %r: tile<f32>) {", "    %s = addf %l, %r : tile<f32>", "    yield %s : tile<f32>", "  }"]


def total(n: int, rows: int = 8) -> str:
    """y[b] = the sum of the (rows, n / rows) tile b (zero padded): its columns' sums (a tile too big
    to carry, computed chunk by chunk, each chunk's rows whole), then their sum (carried)."""
    cols = n // rows
    v, w, t = _view((rows, cols), "zero"), _view((1,)), f"tile<{rows}x{cols}xf32>"
    return _kernel("total", [2, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%c0, %bx] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %cols = reduce %x dim=0 identities=[0.000000e+00 : f32] : {t} -> tile<{cols}xf32>", *ADD,
        f"  %all = reduce %cols dim=0 identities=[0.000000e+00 : f32] : tile<{cols}xf32> -> tile<f32>", *ADD,
        "  %y = reshape %all : tile<f32> -> tile<1xf32>",
        f"  %st = store_view_tko weak %y, %p1[%bx] token = %tok : tile<1xf32>, {w}, tile<i32> -> token"])


def centered(n: int, rows: int = 8) -> str:
    """y = x - the means of x's columns, over (rows, n / rows) tiles: the column sums are computed and
    broadcast back chunk by chunk (a chunk's rows whole)."""
    cols = n // rows
    v, w, t = _view((rows, cols), "zero"), _view((rows, cols)), f"tile<{rows}x{cols}xf32>"
    return _kernel("centered", [2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%c0, %bx] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %sums = reduce %x dim=0 identities=[0.000000e+00 : f32] : {t} -> tile<{cols}xf32>", *ADD,
        f"  %k = constant <f32: {1 / rows}> : tile<{cols}xf32>",
        f"  %means = mulf %sums, %k : tile<{cols}xf32>",
        f"  %row = reshape %means : tile<{cols}xf32> -> tile<1x{cols}xf32>",
        f"  %m = broadcast %row : tile<1x{cols}xf32> -> {t}",
        f"  %y = subf %x, %m : {t}",
        f"  %st = store_view_tko weak %y, %p1[%c0, %bx] token = %tok : {t}, {w}, tile<i32> -> token"])


def test_a_reduction_over_two_axes_is_looped() -> None:
    text = _code_does_not_grow(total)
    assert text.count(" for ") == 1 and text.count("= reduce ") == 2


def test_a_reduction_broadcast_back_is_looped() -> None:
    text = _code_does_not_grow(centered)
    assert text.count(" for ") == 1


@pytest.mark.parametrize("log2,ragged", [(13, 40), (16, 1000)])
def test_a_reduction_over_two_axes_agrees(log2: int, ragged: int) -> None:
    """Two blocks' tiles, the second `ragged` columns into its tile."""
    rows, cols = 8, (1 << log2) // 8
    x = np.random.default_rng(log2).standard_normal((rows, cols + ragged)).astype(np.float32)
    got, want = emulate(_module(total(1 << log2)), [x, np.zeros(2, np.float32)], "sm_90", (2,)), \
        interpret(_module(total(1 << log2)), [x, np.zeros(2, np.float32)], (2,))
    exact = [x[:, :cols].astype(np.float64).sum(), x[:, cols:].astype(np.float64).sum()]
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[1], exact, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("log2,ragged", [(13, 40), (16, 1000)])
def test_a_reduction_broadcast_back_agrees(log2: int, ragged: int) -> None:
    rows, cols = 8, (1 << log2) // 8
    x = np.random.default_rng(log2).standard_normal((rows, cols + ragged)).astype(np.float32)
    got = _agree(centered(1 << log2), [x, np.zeros_like(x)], (2,), exact=False)
    assert np.allclose(got[1], x - x.mean(axis=0, keepdims=True), rtol=1e-4, atol=1e-5)


# -- reshapes that split (or merge) axes -----------------------------------------------------------------

def split_rows(n: int, rows: int = 8) -> str:
    """y[:, tile b] = 2 x[tile b] reshaped to (rows, n / rows): a chunk of the 1-D tile is a run of one
    row of the 2-D one (the space is the 2-D tile's; the 1-D tile merges its axes)."""
    cols = n // rows
    v, w = _view((n,), "zero"), _view((rows, cols))
    t, t2 = f"tile<{n}xf32>", f"tile<{rows}x{cols}xf32>"
    return _kernel("split_rows", [1, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%bx] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %r = reshape %x : {t} -> {t2}",
        f"  %two = constant <f32: 2.000000e+00> : {t2}",
        f"  %y = mulf %r, %two : {t2}",
        f"  %st = store_view_tko weak %y, %p1[%c0, %bx] token = %tok : {t2}, {w}, tile<i32> -> token"])


def merge_rows(n: int, rows: int = 8) -> str:
    """y[tile b] = x[:, tile b] (rows, n / rows) flattened: the reshape merges the axes of the space."""
    cols = n // rows
    v, w = _view((rows, cols), "zero"), _view((n,))
    t, t2 = f"tile<{rows}x{cols}xf32>", f"tile<{n}xf32>"
    return _kernel("merge_rows", [2, 1], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {w}",
        f"  %x, %lt = load_view_tko weak %p0[%c0, %bx] token = %tok : {v}, tile<i32> -> {t}, token",
        f"  %r = reshape %x : {t} -> {t2}",
        f"  %st = store_view_tko weak %r, %p1[%bx] token = %tok : {t2}, {w}, tile<i32> -> token"])


@pytest.mark.parametrize("kernel", [split_rows, merge_rows])
def test_a_reshape_that_splits_an_axis_is_looped(kernel) -> None:
    _code_does_not_grow(kernel)


@pytest.mark.parametrize("log2,ragged", [(13, 40), (16, 1000)])
def test_a_reshape_that_splits_an_axis_agrees(log2: int, ragged: int) -> None:
    n, cols = 1 << log2, (1 << log2) // 8
    x = np.random.default_rng(log2).standard_normal(n + n // 2 + ragged).astype(np.float32)
    got = _agree(split_rows(n), [x, np.zeros((8, 2 * cols), np.float32)], (2,))
    padded = np.zeros(2 * n, np.float32)
    padded[:len(x)] = x
    assert np.array_equal(got[1], np.concatenate([2 * padded[:n].reshape(8, cols), 2 * padded[n:].reshape(8, cols)], 1))


@pytest.mark.parametrize("log2,ragged", [(13, 40), (16, 1000)])
def test_a_reshape_that_merges_axes_agrees(log2: int, ragged: int) -> None:
    n, cols = 1 << log2, (1 << log2) // 8
    x = np.random.default_rng(log2).standard_normal((8, cols + ragged)).astype(np.float32)
    got = _agree(merge_rows(n), [x, np.zeros(2 * n, np.float32)], (2,))
    padded = np.zeros((8, 2 * cols), np.float32)
    padded[:, :x.shape[1]] = x
    assert np.array_equal(got[1], np.concatenate([padded[:, :cols].ravel(), padded[:, cols:].ravel()]))


# -- cat: one loop per operand --------------------------------------------------------------------------

def cat_rows(n: int, dim: int = 1) -> str:
    """z = 2 * cat(x, y) along `dim` of [8, n / 8] tiles (x's, y's halves of that axis from two arrays):
    block bx's tile of each."""
    rows, cols = 8, n // 8
    half = (rows // 2, cols) if dim == 0 else (rows, cols // 2)
    v, w = _view(half, "zero"), _view((rows, cols))
    th, t = f"tile<{half[0]}x{half[1]}xf32>", f"tile<{rows}x{cols}xf32>"
    return _kernel("cat", [2, 2, 2], [
        f"  %p0 = make_partition_view %t0 : {v}",
        f"  %p1 = make_partition_view %t1 : {v}",
        f"  %p2 = make_partition_view %t2 : {w}",
        f"  %x, %lx = load_view_tko weak %p0[%c0, %bx] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %y, %ly = load_view_tko weak %p1[%c0, %bx] token = %tok : {v}, tile<i32> -> {th}, token",
        f"  %c = cat %x, %y dim = {dim} : {th}, {th} -> {t}",
        f"  %z = addf %c, %c : {t}",
        f"  %st = store_view_tko weak %z, %p2[%c0, %bx] token = %tok : {t}, {w}, tile<i32> -> token"])


def cat_axis0(n: int) -> str:
    return cat_rows(n, 0)


@pytest.mark.parametrize("kernel", [cat_rows, cat_axis0])
def test_a_cat_is_looped_once_per_operand(kernel) -> None:
    text = _code_does_not_grow(kernel, small=1 << 15)   # from where each operand has several chunks a row
    assert text.count(" for %loopIdx") == 2 and " cat " not in text


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("log2,ragged", [(13, 40), pytest.param(16, 1000, marks=pytest.mark.sweep)])
def test_a_cat_agrees(log2: int, ragged: int, dim: int) -> None:
    """Two blocks; each array's columns end `ragged` short of the second block's tiles (zero padded
    loads, masked stores)."""
    n = 1 << log2
    rows, cols = 8, n // 8
    half = (rows // 2, cols) if dim == 0 else (rows, cols // 2)
    rng = np.random.default_rng(log2 + dim)
    x, y = (rng.standard_normal((half[0], 2 * half[1] - ragged)).astype(np.float32) for _ in range(2))
    out = np.zeros((rows, 2 * cols - ragged), np.float32)
    got = _agree(cat_rows(n, dim), [x, y, out], (2,))
    for b in range(2):
        px, py = (np.zeros(half, np.float32) for _ in range(2))
        part = slice(b * half[1], (b + 1) * half[1])
        px[:, :x[:, part].shape[1]], py[:, :y[:, part].shape[1]] = x[:, part], y[:, part]
        want = 2 * np.concatenate([px, py], dim)
        cols_here = got[2][:, b * cols:(b + 1) * cols].shape[1]
        assert np.array_equal(got[2][:, b * cols:(b + 1) * cols], want[:, :cols_here])
