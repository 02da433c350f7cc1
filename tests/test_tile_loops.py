"""Tiles too big for the CTA's registers are computed in loops over chunks (tileaa/tile_loops.py):
the loop is in the printed IR, the code does not grow with the tile, and the emulator (race checker
on) agrees with the interpreter on big tiles, a ragged last tile included. The kernels are cuTile's
(benchmarks/tile_scaling_kernels.py), exported as a user would."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("cuda.tile")

import tile_scaling_kernels as kernels  # noqa: E402
from emulator_runs import emulate, interpret  # noqa: E402


@lru_cache(maxsize=None)
def _bytecode(name: str, elements: int) -> bytes:
    return kernels.export(name, elements)


def _module(name: str, elements: int):
    from tileiras.frontend import load_module

    return load_module(_bytecode(name, elements), f"{name}.tileirbc")


def _llvm(name: str, elements: int) -> str:
    from tileiras.lowering.pipeline import lower_module

    return lower_module(_module(name, elements), "sm_90")[0]


def _arguments(name: str, length: int) -> list:
    rng = np.random.default_rng(length)
    data = [rng.standard_normal(length).astype(np.float32) for _ in range(2)]
    if name == "saxpy":
        return [np.array(1.5, np.float32), *data]
    if name == "vector_add":
        return [*data, np.zeros(length, np.float32)]
    return [data[0], np.zeros(length, np.float32)]


def _agree_2d(name: str, log2: int, ragged: int) -> None:
    """A 2-D kernel over (rows + ragged, cols + ragged) elements of tiles (rows, cols), as `_agree`."""
    rows, cols = kernels.tile_shape(name, 1 << log2)
    shape = (rows + ragged, 2 * cols + ragged)
    x = np.random.default_rng(log2).standard_normal(shape).astype(np.float32)
    args = [x, np.zeros(shape[::-1], np.float32)]
    module = _module(name, 1 << log2)
    grid = (-(-shape[0] // rows), -(-shape[1] // cols))
    got, want = emulate(module, args, "sm_90", grid), interpret(module, args, grid)
    for a, b in zip(got, want):
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8))
    assert np.array_equal(got[1], x.T)


def _softmax_agrees(log2: int, short: int) -> None:
    """One-row softmax of tiles of 2^log2 over 16 rows `short` elements shorter than the tile (padded
    with -inf): the emulator's rows, reduced chunk by chunk, close to the interpreter's and to numpy's."""
    cols = (1 << log2) - short
    x = np.random.default_rng(log2).standard_normal((16, cols)).astype(np.float32)
    args = [x, np.zeros_like(x)]
    module = _module("softmax", 1 << log2)
    got, want = emulate(module, args, "sm_90", (16,)), interpret(module, args, (16,))
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(got[1], want[1], rtol=1e-5, atol=1e-12)
    assert np.allclose(got[1], e / e.sum(axis=1, keepdims=True), rtol=1e-4, atol=1e-10)


def _row_reduce_agrees(log2: int, ragged: int) -> None:
    """Row sums of (16, 2^log2 / 16) tiles in a loop over column tiles, over 32 rows of 3 tiles and
    `ragged` columns (zero padded): the loop over columns runs inside the loop over chunks."""
    rows, cols = kernels.tile_shape("row_reduce", 1 << log2)
    x = np.random.default_rng(log2).standard_normal((2 * rows, 3 * cols + ragged)).astype(np.float32)
    args = [x, np.zeros(2 * rows, np.float32)]
    module = _module("row_reduce", 1 << log2)
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[1], x.sum(axis=1), rtol=1e-4, atol=1e-3)


def _rms_norm_agrees(log2: int, short: int) -> None:
    """RMSNorm of (16, 2^log2 / 16) tiles over 32 rows `short` elements shorter than the tile (zero
    padded): a loop for the rows' sums of squares, then one whose chunks load the weight row's chunk
    and broadcast it over the rows (and the rows' scales over the columns)."""
    rows, cols = kernels.tile_shape("rms_norm", 1 << log2)
    rng = np.random.default_rng(log2)
    x = rng.standard_normal((2 * rows, cols - short)).astype(np.float32)
    w = rng.standard_normal(cols - short).astype(np.float32)
    args = [x, w, np.zeros_like(x)]
    module = _module("rms_norm", 1 << log2)
    got, want = emulate(module, args, "sm_90", (2,)), interpret(module, args, (2,))
    assert np.allclose(got[2], want[2], rtol=1e-5, atol=1e-6)
    scale = 1 / np.sqrt((x.astype(np.float64) ** 2).sum(axis=1, keepdims=True) / cols + 1e-6)
    assert np.allclose(got[2], x * scale * w, rtol=1e-4, atol=1e-5)


def _cumsum_agrees(log2: int, short: int) -> None:
    """Prefix sums of one row of 2^log2 (the first of 16 rows) `short` elements shorter than the tile (zero
    padded): each chunk's scan starts from the sum of the chunks before it, which the loop carries."""
    cols = (1 << log2) - short
    x = np.random.default_rng(log2).standard_normal((16, cols)).astype(np.float32)
    args = [x, np.zeros_like(x)]
    module = _module("cumsum", 1 << log2)
    got, want = emulate(module, args, "sm_90", (1,)), interpret(module, args, (1,))   # row 0 (a scan is slow to emulate)
    exact = np.cumsum(x.astype(np.float64), axis=1)
    exact[1:] = 0
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[1], exact, rtol=1e-4, atol=1e-3)


def _agree(name: str, log2: int, ragged: int) -> None:
    """One launch over a tile and a half plus `ragged` elements (the last tile partial; a multiple
    of 16 where the kernel assumes its extents divide by 16, as all but saxpy do) on the emulator with the race checker and on the interpreter: bit for bit the same arrays."""
    tile = 1 << log2
    length = tile + tile // 2 + ragged
    args = _arguments(name, length)
    module = _module(name, tile)
    grid = (-(-length // tile),)
    got, want = emulate(module, args, "sm_90", grid), interpret(module, args, grid)
    for a, b in zip(got, want):
        assert np.array_equal(np.atleast_1d(a).view(np.uint8), np.atleast_1d(b).view(np.uint8))
    if name == "vector_add":
        assert np.array_equal(got[2], args[0] + args[1])
    if name == "gather":
        assert np.array_equal(got[1], args[0] * 2)


def test_the_loop_is_in_the_printed_ir() -> None:
    """The pass rewrites cuda_tile IR: a `for` over 2^20 / 4096 chunks, whose loads and stores read
    chunk-sized tiles at tile index `index * 256 + chunk`."""
    from tileiras.tileas.passes import chunk_long_rows, threads_and_loops
    from tileiras.text.printer import print_module
    from tileiras.tileaa.passes import to_tileaa
    from tileiras.transforms.passes import to_canonical

    module = _module("vector_add", 1 << 20)
    entry = next(op for op in module.walk() if op.name == "cuda_tile.entry")
    to_canonical(entry)
    to_tileaa(entry)
    assert threads_and_loops(entry, "sm_90") == 256
    chunk_long_rows(entry, 256)
    text = print_module(module)
    assert "for %loopIdx in (%cst_0_i32 to %cst_256_i32, step %cst_1_i32)" in text
    assert text.count("load_view_tko") == 2 and "tile<4096xf32>" in text and "tile<1048576x" not in text


@pytest.mark.parametrize("name", sorted(kernels.KERNELS))
def test_code_does_not_grow_with_the_tile(name: str) -> None:
    """2^17 and 2^24 elements: the same LLVM IR but for trip counts, tile indices and names (every
    kernel of the benchmark; on one warp, from 2^20: a smaller reduction's result fits a chunk, its
    loop is not nested), but for the loops pipelined: a loop of a row kernel is pipelined where its
    trips exceed the ring (schedule/pipeline._no_steady_state), so a bigger tile may pipeline a loop
    more (center_both's inner loops of 2^24), each at most once: the code stays within twice the
    small tile's, whatever the tile."""
    small, big = _llvm(name, 1 << (20 if name in kernels.ONE_WARP else 17)), _llvm(name, 1 << 24)
    pipelines = big.count("mbarrier.init") - small.count("mbarrier.init")
    assert pipelines > 0 or abs(len(small.splitlines()) - len(big.splitlines())) <= 4
    assert len(big.splitlines()) <= 2 * len(small.splitlines())
    assert len(big) < 200_000


def test_small_tiles_are_not_looped() -> None:
    assert " for_head" not in _llvm("vector_add", 1 << 12) and "for_head" not in _llvm("vector_add", 1 << 12)


@pytest.mark.parametrize("name,log2,ragged", [("vector_add", 16, 16), ("saxpy", 16, 13), ("cast_chain", 16, 48),
                                                  ("gather", 16, 32)])
def test_emulator_agrees_with_the_interpreter(name: str, log2: int, ragged: int) -> None:
    _agree(name, log2, ragged)


def test_transpose_agrees_with_the_interpreter() -> None:
    """A (256, 256) tile transposed in (64, 64) chunks, over a 272 x 528 array (ragged both ways)."""
    _agree_2d("transpose", 16, 16)


def test_softmax_agrees_with_the_interpreter() -> None:
    """Three loops over (1, 4096) chunks: the row's max, the sum of exponentials, the quotients."""
    _softmax_agrees(16, 48)


def test_row_reduce_agrees_with_the_interpreter() -> None:
    _row_reduce_agrees(16, 48)


def test_rms_norm_agrees_with_the_interpreter() -> None:
    """Row broadcasts: the weight row, loaded and broadcast chunk by chunk."""
    _rms_norm_agrees(16, 48)


@pytest.mark.sweep   # 250 s on the 2-core machine: the emulator's scan of a 4096-element chunk is slow
def test_cumsum_agrees_with_the_interpreter() -> None:
    """16 chunks of (1, 4096), the running sum carried from one to the next."""
    _cumsum_agrees(16, 48)


def _instructions(name: str, elements: int) -> int:
    """PTX instructions of the kernel for sm_90 (lines that end in ';', directives aside)."""
    from tileiras.codegen.nvptx import llvm_to_ptx

    ptx = llvm_to_ptx(_llvm(name, elements), "sm_90")
    return sum(1 for line in ptx.splitlines() if line.strip().endswith(";") and not line.strip().startswith("."))


@pytest.mark.parametrize("log2", [13, 14, 24])
def test_a_scan_folds_its_row_once_a_run(log2: int) -> None:
    """A scan through scratch (a (1, 8192) row on 256 threads, a (1, 4096) chunk from 2^14): of each
    run of a thread's slots holding consecutive elements of the row, only the first folds the row up
    to it in a loop; each other slot adds its element to the value before it (before: a loop per
    slot, 737 instructions at 2^13 and 766 from 2^14, a 42 KB cubin; 2.0 times NVIDIA's CPU time at
    2^13). From 2^24 the chunk loop is pipelined (its ring's mbarriers, a producer warpgroup): 520."""
    assert _instructions("cumsum", 1 << log2) <= (400 if log2 < 24 else 560)


def _cumsum_module(elements: int, reverse: bool):
    """cuTile's cumsum of a (1, elements) row, its scan reversed where `reverse` (suffix sums)."""
    from tileiras.text.parser import parse_module
    from tileiras.text.printer import print_module

    text = print_module(_module("cumsum", elements))
    assert "reverse=false" in text
    return parse_module(text.replace("reverse=false", f"reverse={'true' if reverse else 'false'}"))


def _ptx_counts(module) -> tuple[int, int]:
    """(PTX instructions, of them selp) of `module` for sm_90."""
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.lowering.pipeline import lower_module

    lines = [ln.strip() for ln in llvm_to_ptx(lower_module(module, "sm_90")[0], "sm_90").splitlines()]
    code = [ln for ln in lines if ln.endswith(";") and not ln.startswith(".")]
    return len(code), sum(1 for ln in code if ln.startswith("selp"))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("log2,most", [(11, 280), (12, 490)])
def test_a_scan_in_warps_adds_the_lanes_before_once(log2: int, most: int, reverse: bool) -> None:
    """A row scanned in warps (a (1, 4096) row: 128 elements a lane): each lane folds its elements,
    the lanes' totals are scanned with shuffles, then the lanes before a lane are added to its first
    element, once (a select for lane 0, which has none), and its other elements are folded onto that.
    Before, each element was added to the lanes before it and selected: 133 selp, 597 instructions
    at 2^12 and 325 at 2^11. Forward and reverse cost the same."""
    count, selects = _ptx_counts(_cumsum_module(1 << log2, reverse))
    assert selects <= 8 and count <= most


@pytest.mark.parametrize("reverse", [False, True])
def test_a_scan_in_warps_agrees_with_the_interpreter_exactly(reverse: bool) -> None:
    """Prefix (suffix) sums of small integers in f32 (exact in any order) of a (1, 4096) row in
    warps, 48 elements short (zero padded; the first of 16 rows): bit for bit the interpreter's and
    numpy's."""
    cols = (1 << 12) - 48
    x = np.random.default_rng(12).integers(-8, 9, (16, cols)).astype(np.float32)
    args = [x, np.zeros_like(x)]
    module = _cumsum_module(1 << 12, reverse)
    got, want = emulate(module, args, "sm_90", (1,)), interpret(module, args, (1,))
    exact = np.cumsum(x[:, ::-1], axis=1)[:, ::-1] if reverse else np.cumsum(x, axis=1)
    exact[1:] = 0
    assert np.array_equal(got[1], want[1]) and np.array_equal(got[1], exact)


@pytest.mark.parametrize("log2,short", [(13, 48), (14, 16)])
def test_cumsum_of_runs_agrees_with_the_interpreter(log2: int, short: int) -> None:
    _cumsum_agrees(log2, short)


@pytest.mark.parametrize("log2,short", [(13, 40), (14, 1000)])
def test_a_reverse_scan_of_runs_agrees_with_the_interpreter(log2: int, short: int) -> None:
    """Suffix sums of two rows on the warps the compiler chooses: each run's last slot folds the row
    from its end, the slots before it add their element to the one after (before: a loop a slot,
    944 instructions at 2^13, 515 now)."""
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.lowering.pipeline import lower_module
    from tileiras.text.parser import parse_module
    from test_tile_loops_more import HINTS, reverse_cumsum

    text = reverse_cumsum(1 << log2).replace(HINTS, "")
    ptx = llvm_to_ptx(lower_module(parse_module(text), "sm_90")[0], "sm_90")
    assert sum(1 for line in ptx.splitlines() if line.strip().endswith(";") and not line.strip().startswith(".")) <= 600
    cols = (1 << log2) - short
    x = np.random.default_rng(log2).standard_normal((2, cols)).astype(np.float32)
    args = [x, np.zeros_like(x)]
    got, want = emulate(parse_module(text), args, "sm_90", (2,)), interpret(parse_module(text), args, (2,))
    assert np.allclose(got[1], want[1], rtol=1e-4, atol=1e-3)
    assert np.allclose(got[1], np.cumsum(x[:, ::-1].astype(np.float64), axis=1)[:, ::-1], rtol=1e-4, atol=1e-3)


@pytest.mark.sweep
@pytest.mark.parametrize("log2,short", [(18, 16), (20, 4000)])
def test_cumsum_agrees_with_the_interpreter_at_size(log2: int, short: int) -> None:
    _cumsum_agrees(log2, short)


@pytest.mark.sweep
@pytest.mark.parametrize("log2,short", [(19, 16), (21, 4000)])
def test_rms_norm_agrees_with_the_interpreter_at_size(log2: int, short: int) -> None:
    _rms_norm_agrees(log2, short)


@pytest.mark.sweep
@pytest.mark.parametrize("log2,ragged", [(19, 16), (21, 4000)])
def test_row_reduce_agrees_with_the_interpreter_at_size(log2: int, ragged: int) -> None:
    _row_reduce_agrees(log2, ragged)


@pytest.mark.sweep
@pytest.mark.parametrize("log2,short", [(18, 16), (20, 4000)])
def test_softmax_agrees_with_the_interpreter_at_size(log2: int, short: int) -> None:
    _softmax_agrees(log2, short)


@pytest.mark.sweep
@pytest.mark.parametrize("log2,ragged", [(19, 48), (22, 16)])
def test_transpose_agrees_with_the_interpreter_at_size(log2: int, ragged: int) -> None:
    _agree_2d("transpose", log2, ragged)


@pytest.mark.sweep
@pytest.mark.parametrize("name,log2,ragged", [
    ("vector_add", 20, 16), ("saxpy", 20, 1), ("cast_chain", 22, 32), ("saxpy", 24, 7), ("gather", 21, 16)])
def test_emulator_agrees_with_the_interpreter_at_size(name: str, log2: int, ragged: int) -> None:
    _agree(name, log2, ragged)
