"""Gathers and scatters through tiles of pointers (base + iota offsets, as TileGym's row kernels
build them) are widened to 16-byte accesses where the pointer facts (tileaa/facts.py: contiguity,
run divisor, constancy per dimension) prove aligned runs and a mask constant over each run; a
shifted (unaligned) start stays one element per access. Both run on the emulator with the race
checker as the interpreter does, a masked tail included."""

from __future__ import annotations

import io
import re
import sys
from functools import lru_cache
from pathlib import Path

import cuda.tile as ct
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate_and_interpret  # noqa: E402

TILE, ROWS, COLS = 1024, 16, 1008   # 1008 columns of a 1024-wide tile: a masked tail of 16
GRID = 2   # the rows run (extents must divide by 16, as the launcher assumes)


def _scale_rows(x, y, TILE: ct.Constant[int], SHIFT: ct.Constant[int]):
    row = ct.bid(0)
    cols = ct.arange(TILE, dtype=ct.int32) + SHIFT
    a = ct.gather(x, (row, cols), check_bounds=True)
    ct.scatter(y, (row, cols), ct.astype(ct.astype(a, ct.float32) * 2.0, y.dtype), check_bounds=True)


@lru_cache(maxsize=None)
def _bytecode(shift: int) -> bytes:
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       export_kernel)

    array = ArrayConstraint(dtype=ct.float16, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0,
                            alias_groups=(), may_alias_internally=False, stride_constant=(None, 1),
                            shape_divisible_by=16, stride_divisible_by=(8, 1), base_addr_divisible_by=16)
    kernel = ct.kernel(_scale_rows)
    buf = io.BytesIO()
    export_kernel(kernel, [KernelSignature(parameters=[array, array, ConstantConstraint(TILE), ConstantConstraint(shift)],
                                           calling_convention=CallingConvention.cutile_python_v1())],
                  buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code="sm_90")
    return buf.getvalue()


def _module(shift: int):
    from tileiras.frontend import load_module

    return load_module(_bytecode(shift), "rows.tileirbc")


def _ptx(shift: int) -> str:
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.lowering.pipeline import lower_module

    module = _module(shift)
    return llvm_to_ptx(lower_module(module, "sm_90")[0], "sm_90")


def test_pointer_facts_of_a_row_gather() -> None:
    """base + (row * stride + iota): runs of the whole tile, 16-byte aligned starts; the bounds mask
    is constant over groups of 16 (the extent divides by 16)."""
    from tileiras.tileaa.facts import axes
    from tileiras.tileaa.passes import to_tileaa

    for shift, run_divisor in ((0, 16), (1, 2)):
        entry = next(op for op in _module(shift).walk() if op.name == "cuda_tile.entry")
        to_tileaa(entry)
        gather = next(op for op in entry.walk() if op.name == "cuda_tile.load_ptr_tko")
        assert axes(gather.operands[0]) == ((TILE,), (run_divisor,), (1,))
        assert axes(gather.operands[1])[2] == ((16,) if shift == 0 else (1,))


@pytest.mark.parametrize("shift,width", [(0, 128), (1, 16)])
def test_row_gathers_are_widened_only_where_aligned(shift: int, width: int) -> None:
    ptx = _ptx(shift)
    for kind in ("ld", "st"):
        found = {int(v or 1) * int(bits) for v, bits in re.findall(rf"{kind}\.global(?:\.v(\d))?\.[bu](\d+)", ptx)}
        assert found == {width}, (kind, found)


@pytest.mark.parametrize("shift", [0, 1])
def test_row_gathers_with_a_masked_tail_match_the_interpreter(shift: int) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float16)
    y = np.full((ROWS, COLS), -7.0, np.float16)
    emulated, interpreted = emulate_and_interpret(_module(shift), [x, y], "sm_90", (GRID, 1, 1))
    expect = y.copy()
    expect[:GRID, shift:] = (x[:GRID, shift:].astype(np.float32) * 2).astype(np.float16)
    assert np.array_equal(interpreted[1], expect)
    assert np.array_equal(emulated[1], expect)


_FACTS = """
entry @k(%a: tile<ptr<f16>>, %s: tile<i32>, %n: tile<i32>) {
  %a16 = assume div_by<16>, %a : tile<ptr<f16>>
  %s8 = assume div_by<8>, %s : tile<i32>
  %n16 = assume div_by<16>, %n : tile<i32>
  %r = iota : tile<64xi32>
  %c = iota : tile<128xi32>
  %r2 = reshape %r : tile<64xi32> -> tile<64x1xi32>
  %rb = broadcast %r2 : tile<64x1xi32> -> tile<64x128xi32>
  %sr = reshape %s8 : tile<i32> -> tile<1x1xi32>
  %sb = broadcast %sr : tile<1x1xi32> -> tile<64x128xi32>
  %rows = muli %rb, %sb : tile<64x128xi32>
  %c2 = reshape %c : tile<128xi32> -> tile<1x128xi32>
  %cb = broadcast %c2 : tile<1x128xi32> -> tile<64x128xi32>
  %off = addi %rows, %cb : tile<64x128xi32>
  %ar = reshape %a16 : tile<ptr<f16>> -> tile<1x1xptr<f16>>
  %ab = broadcast %ar : tile<1x1xptr<f16>> -> tile<64x128xptr<f16>>
  %p = offset %ab, %off : tile<64x128xptr<f16>>, tile<64x128xi32> -> tile<64x128xptr<f16>>
  %nr = reshape %n16 : tile<i32> -> tile<1x1xi32>
  %nb = broadcast %nr : tile<1x1xi32> -> tile<64x128xi32>
  %in = cmpi less_than %cb, %nb, signed : tile<64x128xi32> -> tile<64x128xi1>
  %one = constant <i32: 1> : tile<64x128xi32>
  %shift = addi %off, %one : tile<64x128xi32>
  %m = muli %cb, %sb : tile<64x128xi32>
  %h = assume div_by<16, every 8 along 1>, %m : tile<64x128xi32>
  %same = assume same_elements<[1, 4]>, %m : tile<64x128xi32>
  return
}
"""


def test_pointer_facts_flow_through_two_dimensional_offsets_and_assumptions() -> None:
    """Per dimension (contiguity, run divisor, constancy) of a 64x128 tile of pointers a + row * s + col,
    the bounds mask col < n, a shifted offset, and what `assume` adds."""
    from tileiras.frontend import load_module
    from tileiras.tileaa.facts import axes
    from tileiras.tileaa.passes import to_tileaa

    entry = next(op for op in load_module(_FACTS.encode(), "facts.mlir").walk() if op.name == "cuda_tile.entry")
    to_tileaa(entry)
    lines = _FACTS.splitlines()
    values = {lines[op.location.line - 1].split(" = ")[0].strip(): op.results[0]
              for op in entry.walk() if op.location is not None and op.results and " = " in lines[op.location.line - 1]}
    expected = {
        "%off": ((1, 128), (1, 8), (1, 1)),
        "%p": ((1, 128), (2, 16), (1, 1)),          # 16-byte aligned runs of 128 halves along a row
        "%in": ((1, 1), (1, 1), (64, 16)),          # col < n: constant over groups of 16 columns
        "%shift": ((1, 128), (1, 1), (1, 1)),       # runs start at odd offsets
        "%m": ((1, 1), (8, 8), (64, 1)),
        "%h": ((1, 8), (8, 16), (64, 1)),
        "%same": ((1, 1), (8, 8), (64, 4)),
    }
    assert {name: axes(values[name]) for name in expected} == expected


# -- 2-D gathers and scatters of whole rows (a MoE's token rows picked by an index tile) -----------
TM, TN = 128, 64   # 128 rows of 64 bf16 per block: 8 lanes of one 16-byte vector per row, 4 rows per warp
SRC_ROWS, COLS2 = 512, 256


def _moe_rows(x, token_ids, y, TM: ct.Constant[int], TN: ct.Constant[int]):
    """y[block rows] = 2 x[token_ids[block rows]] over one column tile: the A gather and C scatter
    of cuTile's fused MoE, without the mma."""
    bid_m, bid_n = ct.bid(0), ct.bid(1)
    slots = bid_m * TM + ct.arange(TM, dtype=ct.int32)
    rows = ct.gather(token_ids, slots)
    cols = bid_n * TN + ct.arange(TN, dtype=ct.int32)
    a = ct.gather(x, (rows[:, None], cols[None, :]))
    ct.scatter(y, (slots[:, None], cols[None, :]), ct.astype(ct.astype(a, ct.float32) * 2.0, y.dtype))


@lru_cache(maxsize=None)
def _moe_module():
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       export_kernel)

    from tileiras.frontend import load_module

    def array(dtype, ndim: int) -> ArrayConstraint:
        return ArrayConstraint(dtype=dtype, ndim=ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False, stride_constant=(None,) * (ndim - 1) + (1,),
                               shape_divisible_by=16, stride_divisible_by=(8,) * (ndim - 1) + (1,),
                               base_addr_divisible_by=16)

    buf = io.BytesIO()
    signature = KernelSignature(parameters=[array(ct.bfloat16, 2), array(ct.int32, 1), array(ct.bfloat16, 2),
                                            ConstantConstraint(TM), ConstantConstraint(TN)],
                                calling_convention=CallingConvention.cutile_python_v1())
    export_kernel(ct.kernel(_moe_rows), [signature], buf, output_format="tileir_bytecode", bytecode_version="13.4",
                  gpu_code="sm_90")
    return load_module(buf.getvalue(), "moe_rows.tileirbc")


def test_two_dimensional_row_gathers_and_scatters_are_128_bit_and_match_the_interpreter() -> None:
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.lowering.pipeline import lower_module

    ptx = llvm_to_ptx(lower_module(_moe_module(), "sm_90")[0], "sm_90")
    widths = {kind: {int(v or 1) * int(bits) for v, bits in re.findall(rf"{kind}\.global(?:\.v(\d))?\.[bsu](\d+)", ptx)}
              for kind in ("ld", "st")}
    assert widths == {"ld": {32, 128}, "st": {128}}, widths   # the index tile 32-bit, the rows 16 bytes
    rng = np.random.default_rng(5)
    import ml_dtypes

    x = rng.standard_normal((SRC_ROWS, COLS2)).astype(ml_dtypes.bfloat16)
    token_ids = rng.permutation(SRC_ROWS)[:TM * 2].astype(np.int32)   # two blocks of rows, in any order
    y = np.zeros((TM * 2, COLS2), ml_dtypes.bfloat16)
    grid = (2, COLS2 // TN // 2, 1)   # half the column tiles: the rest stays zero
    emulated, interpreted = emulate_and_interpret(_moe_module(), [x, token_ids, y, ], "sm_90", grid)
    expect = y.copy()
    expect[:, :COLS2 // 2] = (x[token_ids, :COLS2 // 2].astype(np.float32) * 2).astype(ml_dtypes.bfloat16)
    assert np.array_equal(interpreted[2], expect)
    assert np.array_equal(emulated[2], expect)


def test_the_dump_shows_pointer_facts_per_dimension(capsys: pytest.CaptureFixture[str]) -> None:
    """--print-ir-after-all: the gathered rows' pointers step by one element along the columns, from
    16-byte aligned starts; the rows are loaded a 16-byte vector a thread (in the row layout, 4 rows per warp,
    or the blocked one of 8-element runs where its readers follow a free broadcast's layout: the same machine
    code, 176 instructions and 8 LDG.128 on sm_90)."""
    from tileiras.lowering.pipeline import lower_module

    lower_module(_moe_module(), "sm_90", print_ir_after_all=True)
    err = capsys.readouterr().err
    facts = err.split("// facts of @", 1)[1].split("IR Dump After", 1)[0]
    assert re.search(r"tile<128x64xptr<bf16>> aligned to 2 B, contiguity \[1, 64\] divisibility \[2, 16\] "
                     r"constancy \[1, 1\]", facts), facts
    tileas = err.split("(nv_tileas) //----- //", 1)[1].split("// layouts of @", 1)[0]
    aliases = [m[1] for m in re.finditer(r"^#(\w+) = #nv_tileas\.(?:row_warp<cols=64, warps=8, rows_per_warp=4>|"
                                          r"blocked<threads=256, vec=8>)$", tileas, re.M)]
    assert aliases, tileas
    loaded = re.search(r"= load_ptr_tko .* -> tile<128x64xbf16, #(\w+)>, token", tileas)
    assert loaded and loaded[1] in aliases, tileas


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", pytest.param("sm_80", marks=pytest.mark.sweep)])
def test_fused_moe_gathers_and_scatters_are_128_bit_and_match_the_interpreter(gpu: str) -> None:
    """cuTile's fused MoE (TileGym corpus, 128x128x64 bf16): token rows of A gathered in 16-byte
    vectors (a row of 64 per 8 lanes), the accumulator restaged through the freed buffers and
    scattered in 16-byte vectors (the pointers computed in that layout; on sm_100 from tensor
    memory, whose mbarrier the freed buffers keep); emulator = interpreter."""
    import ml_dtypes

    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    path = ROOT / "tests" / "tilegym" / "bytecode" / "cp_moe_bf16_up_128x128x64.tileirbc"
    module = load_module(path.read_bytes(), str(path))
    ptx = llvm_to_ptx(lower_module(module, gpu)[0], gpu)
    widths = {kind: {int(v or 1) * int(bits) for v, bits in re.findall(rf"{kind}\.global(?:\.v(\d))?\.[bsu](\d+)", ptx)}
              for kind in ("ld", "st")}
    assert 128 in widths["ld"] and widths["st"] == {128}, widths
    rng = np.random.default_rng(7)
    tokens, hidden, n, experts, topk = 32, 128, 128, 16, 4
    a = rng.standard_normal((tokens, hidden)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((experts, n, hidden)).astype(ml_dtypes.bfloat16)
    c = np.zeros((tokens * topk, n), ml_dtypes.bfloat16)
    weights = rng.random(tokens * topk).astype(np.float32)
    token_ids = rng.permutation(tokens * topk)[:128].astype(np.int32)
    token_ids[100:] = tokens * topk   # padding slots: out of bounds, masked off
    expert_ids = np.full(16, 3, np.int32)
    emulated, interpreted = emulate_and_interpret(module, [a, b, c, weights, token_ids, expert_ids, np.int32(topk)],
                                                  gpu, (1, 1, 1))
    expect = np.zeros((tokens * topk, n), np.float32)
    for slot in token_ids[:100]:
        expect[slot] = a[slot // topk].astype(np.float32) @ b[3].astype(np.float32).T
    assert np.allclose(interpreted[2].astype(np.float32), expect, rtol=2e-2, atol=5e-2)
    assert np.array_equal(emulated[2], interpreted[2])


_INDEX_LIST = """
entry @k(%c: tile<i1>) {
  %idx = constant <i32: [0, 1, 2, 3, 8, 9, 10, 11, 32, 33, 34, 35, 36, 37, 38, 39]> : tile<16xi32>
  %i = iota : tile<16xi32>
  %cr = reshape %c : tile<i1> -> tile<1xi1>
  %cb = broadcast %cr : tile<1xi1> -> tile<16xi1>
  %sel = select %cb, %idx, %i : tile<16xi1>, tile<16xi32>
  %odd = constant <i32: [1, 1, 1, 1, 5, 5, 5, 5, 9, 9, 9, 9, 9, 9, 9, 9]> : tile<16xi32>
  return
}
"""


def test_index_lists_and_selects_have_runs() -> None:
    """A constant index list runs over aligned groups of 4 from multiples of 4; a select of it and
    an iota under a uniform condition keeps the common runs; equal neighbours make constancy."""
    from tileiras.frontend import load_module
    from tileiras.tileaa.facts import axes
    from tileiras.tileaa.passes import to_tileaa

    entry = next(op for op in load_module(_INDEX_LIST.encode(), "idx.mlir").walk() if op.name == "cuda_tile.entry")
    to_tileaa(entry)
    lines = _INDEX_LIST.splitlines()
    values = {lines[op.location.line - 1].split(" = ")[0].strip(): op.results[0]
              for op in entry.walk() if op.location is not None and op.results and " = " in lines[op.location.line - 1]}
    assert axes(values["%idx"]) == ((4,), (4,), (1,))
    assert axes(values["%sel"]) == ((4,), (4,), (1,))
    assert axes(values["%odd"]) == ((1,), (1,), (4,))
