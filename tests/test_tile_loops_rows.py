"""Reductions along the rows of a 2-D tile whose results fit a chunk (tileaa/tile_loops.py, `_short_runs`):
on one warp a (256, 256) tile's 256 row sums fit a chunk of 512, but carrying them would leave the
chunk 2 elements of each row (a lane busy of 16, every thread holding all 256 rows: code and compile
time that grow with the tile). They are computed chunk by chunk instead, rows whole in each chunk, as
a tile less its rows' and columns' means is (the kernels of benchmarks/tile_scaling_kernels.py that
run on one warp, exported by cuTile). The PTX stays as small at 2^14 to 2^18 as at 2^24, and the
emulator (race checker on) agrees with the interpreter and numpy on ragged arrays."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("cuda.tile")

import tile_scaling_kernels as kernels  # noqa: E402
from emulator_runs import emulate, interpret  # noqa: E402
from test_tile_loops import _module  # noqa: E402  (the cuTile kernels exported as a user would)
from test_tile_loops_axes import sums_and_maxima_agree  # noqa: E402


def _instructions(name: str, elements: int) -> int:
    """PTX instructions of the kernel for sm_90 (lines that end in ';', directives aside)."""
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.lowering.pipeline import lower_module

    ptx = llvm_to_ptx(lower_module(_module(name, elements), "sm_90")[0], "sm_90")
    return sum(1 for line in ptx.splitlines() if line.strip().endswith(";") and not line.strip().startswith("."))


@pytest.mark.parametrize("name", kernels.ONE_WARP)
def test_code_is_that_of_the_ops_at_every_size(name: str) -> None:
    """From 2^14 (where loops start on one warp) to 2^18 the PTX is no bigger than at 2^24, where every
    reduction's result is longer than a chunk (before: 3939 instructions for sum_rows at 2^16, 18100
    for center_both, 63401 at 2^18; 120, 317 and 307 now)."""
    big = _instructions(name, 1 << 24)
    for log2 in (14, 16, 18):
        assert _instructions(name, 1 << log2) <= max(big, 400), log2


def _ragged(name: str, log2: int, rows_short: int, cols_short: int) -> tuple[list, tuple]:
    """The kernel's arguments over two tiles along its grid's axis (the second `rows_short` rows or
    `cols_short` columns short: zero or -inf padded, stores past the arrays masked) and the grid."""
    rows, cols = kernels.tile_shape(name, 1 << log2)
    along_rows = name != "max_cols"
    shape = (2 * rows - rows_short, cols - cols_short) if along_rows else (rows - rows_short, 2 * cols - cols_short)
    x = np.random.default_rng(log2).standard_normal(shape).astype(np.float32)
    if name == "center_both":
        return [x, np.zeros_like(x)], (2,)
    outputs = {"sum_rows": [shape[0]], "max_cols": [shape[1]], "sum_and_max": [shape[0], 2 * cols]}[name]
    return [x, *(np.zeros(n, np.float32) for n in outputs)], (2,)


def _want(name: str, log2: int, x: np.ndarray) -> list[np.ndarray]:
    """numpy's results of the kernel over `x`, per tile of its padded copy."""
    rows, cols = kernels.tile_shape(name, 1 << log2)
    pad = -np.inf if name == "max_cols" else 0.0
    if name == "max_cols":
        padded = np.pad(x, ((0, rows - x.shape[0]), (0, 2 * cols - x.shape[1])), constant_values=pad)
        return [padded.max(0)[:x.shape[1]]]
    padded = np.pad(x, ((0, 2 * rows - x.shape[0]), (0, cols - x.shape[1]))).astype(np.float64)
    tiles = [padded[:rows], padded[rows:]]
    if name == "sum_rows":
        return [padded.sum(1)[:len(x)]]
    if name == "sum_and_max":
        return [padded.sum(1)[:len(x)], np.concatenate([t.max(0) for t in tiles])]
    centered = [t - t.mean(1, keepdims=True) for t in tiles]
    return [np.concatenate([c - c.mean(0, keepdims=True) for c in centered])[:len(x), :x.shape[1]]]


@pytest.mark.parametrize("name", kernels.ONE_WARP)
@pytest.mark.parametrize("log2,rows_short,cols_short", [
    (12, 16, 32), (14, 16, 32), (16, 48, 80), pytest.param(20, 48, 80, marks=pytest.mark.sweep)])   # 2^20: 2-22 s each
def test_emulator_agrees_at_size(name: str, log2: int, rows_short: int, cols_short: int) -> None:
    """Two tiles, the second ragged (and every row short of the tile: padding in the reductions; the
    extents multiples of 16, as the kernels assume), on the emulator with the race checker: close to
    the interpreter and to numpy, maxima bit for bit."""
    args, grid = _ragged(name, log2, rows_short, cols_short)
    module = _module(name, 1 << log2)
    got, ref = emulate(module, args, "sm_90", grid), interpret(module, args, grid)
    for out, (a, b, want) in enumerate(zip(got[1:], ref[1:], _want(name, log2, args[0]))):
        exact = name == "max_cols" or (name == "sum_and_max" and out == 1)
        if exact:
            assert np.array_equal(a, b) and np.array_equal(a, want.astype(np.float32))
        else:
            assert np.allclose(a, b, rtol=1e-4, atol=1e-4) and np.allclose(a, want, rtol=1e-4, atol=1e-4)


# -- one pass from 32 elements a thread (tile_loops.ONE_PASS_ELEMENTS) -----------------------------------

def _loops_of(name: str, log2: int) -> int:
    """The loops loop-tiles makes in the cuTile kernel `name` of 2^log2 elements (on sm_90)."""
    from tileiras.tileaa.passes import to_tileaa
    from tileiras.tileaa.tile_loops import loop_tiles
    from tileiras.tileas.warps import choose_threads
    from tileiras.transforms.passes import to_canonical

    entry = next(op for op in _module(name, 1 << log2).walk() if op.name == "cuda_tile.entry")
    to_canonical(entry)
    to_tileaa(entry)
    return loop_tiles(entry, choose_threads(entry, "sm_90"))


@pytest.mark.parametrize("name,log2", [("sum_and_max", 11), ("sum_and_max", 12), ("sum_rows", 12), ("max_cols", 12),
                                       ("cumsum", 15)])
def test_one_pass_groups_loop_from_64_elements_a_thread(name: str, log2: int) -> None:
    """A reduction or scan that one loop computes, reading its tile once, is looped from 64 elements
    a thread (one warp from 2^11, eight from 2^14), not unrolled to 128: the code of the ops, no more
    than at 2^24 (before: 555 and 913 instructions for sum_and_max at 2^11 and 2^12, 613 for sum_rows,
    511 for max_cols, 7220 for cumsum at 2^15; sum_and_max at 2^12 compiled in 2.1 times NVIDIA's CPU
    time, cumsum at 2^15 in 2.8 s)."""
    assert _loops_of(name, log2) >= 1
    assert _instructions(name, 1 << log2) <= max(_instructions(name, 1 << 24), 400)


@pytest.mark.parametrize("log2, loops", [(14, 0), (15, 0), (16, 1)])
def test_a_transpose_stays_whole_up_to_128_elements_a_thread(log2: int, loops: int) -> None:
    """A permute alone is looped only beyond 128 elements a thread: each chunk exchanges through shared
    memory between two CTA barriers, so a chunk costs a memory latency (transpose_f16_64x128, 64 a thread,
    took 1.77x NVIDIA's time on the H100 in four chunks, 0.98x whole; compiled whole, 2^14 and 2^15 take
    1.2 and 0.7 times NVIDIA's CPU time)."""
    assert bool(_loops_of("transpose", log2)) == bool(loops)


@pytest.mark.parametrize("name,log2", [("center_both", 12), ("softmax", 15), ("softmax", 14)])
def test_groups_of_several_passes_stay_whole_up_to_128_elements_a_thread(name: str, log2: int) -> None:
    """A group whose loops would read its tile again (a reduction read back by the tile: a mean
    subtracted, a softmax's three loops) stays in registers up to 128 elements a thread."""
    assert _loops_of(name, log2) == 0


def test_a_transpose_of_64_elements_a_thread_agrees() -> None:
    """(128, 128), whole, over a 144 x 272 array, ragged both ways."""
    from test_tile_loops import _agree_2d

    _agree_2d("transpose", 14, 16)


# -- rows narrower than a warp (layout/encodings.row_layout): several rows a warp, a vector a lane ------

def _narrow(n: int, rows: int) -> str:
    """Row sums beside column maxima of x's (rows, n / rows) tile bx (text form, one warp)."""
    import test_tile_loops_axes as axes

    return axes.sum_and_max(n, "%tok", rows=rows)


def _text_instructions(text: str) -> int:
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.lowering.pipeline import lower_module
    from tileiras.text.parser import parse_module

    ptx = llvm_to_ptx(lower_module(parse_module(text), "sm_90")[0], "sm_90")
    return sum(1 for line in ptx.splitlines() if line.strip().endswith(";") and not line.strip().startswith("."))


@pytest.mark.parametrize("log2,rows", [(14, 1024), (16, 4096), (16, 16384), (18, 16384), (16, 256), (18, 512)])
def test_narrow_rows_are_several_to_a_warp(log2: int, rows: int) -> None:
    """Tall tiles of rows of 16 (or 4) elements, looped in chunks of 32 (or 128) whole rows: each warp
    holds 8 rows (32), each lane a 16-byte vector, so the sums fold in the lane and take two shuffles
    (none). With square ones whose row sums fit a chunk, no more code than a (4096, 4096) tile's, whose
    reductions are all longer than a chunk (before: a row a warp, each thread every row of the chunk:
    1179 and 2646 instructions for the narrow rows; 5092 at (256, 256), where the sums were carried)."""
    assert _text_instructions(_narrow(1 << log2, rows)) <= _text_instructions(_narrow(1 << 24, 4096))


def test_narrow_rows_agree() -> None:
    """Two blocks of (4096, 16) tiles, the second 40 rows short, both 5 columns short (zero padded,
    stores masked): the emulator (race checker on) against the interpreter and numpy."""
    from tileiras.text.parser import parse_module

    rows, cols = 4096, 16
    sums_and_maxima_agree(parse_module(_narrow(rows * cols, rows)), rows, cols, (40, 5), 63, 1e-5)


# -- reductions along two axes that fit a chunk both (carried.py's policies) ------------------------

def _centred(n: int, rows: int, warps: bool = True) -> str:
    """x's tile bx less its rows' means, less its columns' then (text form; one warp, or the warps the
    compiler chooses: 8 here)."""
    import test_tile_loops_axes as axes
    from test_tile_loops_more import HINTS

    text = axes.double_centered(n, rows)
    return text if warps else text.replace(HINTS, "")


def _loops_made(text: str, threads: int) -> int:
    from tileiras.tileaa.passes import to_tileaa
    from tileiras.tileaa.tile_loops import loop_tiles
    from tileiras.text.parser import parse_module
    from tileiras.transforms.passes import to_canonical

    entry = next(op for op in parse_module(text).walk() if op.name == "cuda_tile.entry")
    to_canonical(entry)
    to_tileaa(entry)
    return loop_tiles(entry, threads)


@pytest.mark.parametrize("log2,rows", [(16, 16), (18, 64), (20, 256)])
def test_two_axes_that_fit_a_chunk_are_looped(log2: int, rows: int) -> None:
    """On 8 warps (chunks of 4096) a (16, 4096) or (64, 4096) tile's row sums and column sums both fit
    a chunk, and carrying both would keep both axes whole in it: the row sums are computed chunk by
    chunk in whole rows instead, the column sums carried; two loops, the code of the ops (before: no
    form, the tile whole in registers, 3989 and 14489 instructions at (256, 256) and (512, 512), 2^20
    refused over the compile limits). Both loops are pipelined (the chunk's tile index computed from the
    loop's: schedule/pipeline.index_ops), their rings' TMA copies and mbarriers beside the ops' code: 1429
    (760 unpipelined)."""
    text = _centred(1 << log2, rows, warps=False)
    assert _loops_made(text, 256) == 2   # the column sums' loop, the stores'
    assert _text_instructions(text) <= 1500


def test_two_axes_that_fit_a_chunk_agree() -> None:
    """One warp (chunks of 512): two blocks of (16, 512) tiles, the second 5 rows short, both 24 columns
    short (zero padded: the padding counts in the means; stores masked)."""
    from tileiras.text.parser import parse_module

    rows, cols = 16, 512
    x = np.random.default_rng(64).standard_normal((2 * rows - 5, cols - 24)).astype(np.float32)
    module = parse_module(_centred(rows * cols, rows))
    args = [x, np.zeros_like(x)]
    got, ref = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], ref[1], rtol=1e-4, atol=1e-5)
    padded = np.pad(x, ((0, 5), (0, 24))).astype(np.float64)
    centred = [t - t.mean(1, keepdims=True) for t in (padded[:rows], padded[rows:])]
    want = np.concatenate([c - c.mean(0, keepdims=True) for c in centred])[:len(x), :x.shape[1]]
    assert np.allclose(got[1], want, rtol=1e-4, atol=1e-5)
