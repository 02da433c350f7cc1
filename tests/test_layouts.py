"""Layout assignment (tileas/assign_layouts.py): which layout each tile gets, and what it buys.

A reduction along the innermost axis puts its rows in warps, so the PTX combines with
`shfl.sync` and needs no shared memory or CTA barrier; a reduction along another axis still
goes through shared memory. Correctness of both paths is checked by the differential tests
(test_differential.py, test_random_programs.py) on the SIMT emulator.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tileiras.frontend import load_module
from tileiras.tileas.assign_layouts import LayoutAssignment
from tileiras.layout.encodings import BlockedLayout, RowWarpLayout
from tileiras.layout.index_eval import Evaluator
from tileiras.layout.index_math import element
from tileiras.lowering.pipeline import lower_module

_KERNEL = """entry @rows(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<f32>>, %arg4: tile<i32>) {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg1], strides = [%arg2, %arg4] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
  %pview = make_partition_view %tview : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg1], strides = [%arg4] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(OUT), tensor_view<?xf32, strides=[?]>>
  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>
  %tile, %result_token = load_view_tko weak %pview[%blockId_x, %blockId_y] token = %0 : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> tile<16x64xf32>, token
  %1 = exp %tile : tile<16x64xf32>
  %reduce = reduce %1 dim=DIM identities=[0.000000e+00 : f32] : tile<16x64xf32> -> tile<OUTxf32>
  (%reduce_lhs: tile<f32>, %reduce_rhs: tile<f32>) {
    %3 = addf %reduce_lhs, %reduce_rhs : tile<f32>
    yield %3 : tile<f32>
  }
  %2 = store_view_tko weak %reduce, %pview_1[%blockId_x] token = %0 : tile<OUTxf32>, partition_view<tile=(OUT), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}
"""


def _module(dim: int):
    out = 16 if dim == 1 else 64
    text = _KERNEL.replace("DIM", str(dim)).replace("OUT", str(out))
    return load_module(text.encode(), "rows.mlir")


def _entry(module):
    return next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")


def _ptx(module) -> str:
    from tileiras.codegen.nvptx import llvm_to_ptx

    return llvm_to_ptx(lower_module(module, "sm_90")[0], "sm_90")


def test_row_reduction_puts_rows_in_warps() -> None:
    module = _module(dim=1)
    assignment = LayoutAssignment(_entry(module), 128)
    layouts = {str(v.type): layout for v, layout in assignment._layouts.items()}
    # the load makes the rows directly (no conversion), exp keeps them, the reduce leaves one per row;
    # a row of 64 f32 is 16 lanes of one 16-byte vector each, two rows per warp
    assert layouts == {"tile<16x64xf32>": RowWarpLayout(128, 64, rpw=2), "tile<16xf32>": RowWarpLayout(128, 1, rpw=2)}
    assert assignment.conversions == []


def test_row_reduction_uses_shuffles_and_no_barrier() -> None:
    ptx = _ptx(_module(dim=1))
    assert ptx.count("shfl.sync.bfly.b32") == 2 * 4   # 2 row groups per thread, 4 butterfly steps (16 lanes)
    assert "bar.sync" not in ptx and "barrier" not in ptx
    assert ".shared" not in ptx


def test_column_reduction_stays_in_shared_memory() -> None:
    module = _module(dim=0)
    assert LayoutAssignment(_entry(module), 128)._layouts == {}   # all blocked
    ptx = _ptx(module)
    assert "shfl.sync" not in ptx
    assert "bar.sync" in ptx


def test_row_warp_layout_places_rows_in_warps() -> None:
    """Element index and ownership per (thread, slot), evaluated with Python arithmetic."""
    def run(layout, n: int, tid: int, slot: int) -> tuple[int, bool]:
        ev = Evaluator(tid)
        e, ok = element(layout, ev.pre, "%tid", n, slot)
        return ev.value(e), True if ok is None else bool(ev.value(ok))

    wide = RowWarpLayout(128, 64)            # 8 rows of 64: lane l holds columns 2l, 2l+1
    assert wide.slots(8 * 64) == 2 * 2
    assert run(wide, 8 * 64, 32 * 1 + 3, 0) == (1 * 64 + 6, True)     # warp 1, lane 3: row 1
    assert run(wide, 8 * 64, 32 * 1 + 3, 3) == (5 * 64 + 7, True)     # second row group: row 5
    narrow = RowWarpLayout(128, 8)           # 2 rows of 8: lanes repeat columns, warps repeat rows
    assert narrow.slots(16) == 1
    assert run(narrow, 16, 32 * 1 + 9, 0) == (1 * 8 + 1, False)       # a replica: lane 9 repeats column 1
    assert run(narrow, 16, 32 * 1 + 1, 0) == (1 * 8 + 1, True)
    assert run(narrow, 16, 32 * 3 + 1, 0)[1] is False                 # warp 3 repeats row 1
    assert not RowWarpLayout.fits(48) and RowWarpLayout.fits(96) and RowWarpLayout.fits(4)
    assert BlockedLayout(128).slots(16 * 64) == 8


def test_print_ir_after_all_shows_layouts(capsys: pytest.CaptureFixture[str]) -> None:
    lower_module(_module(dim=1), "sm_90", print_ir_after_all=True)
    err = capsys.readouterr().err
    dump = err.split("IR Dump After assign-layouts", 1)[1].split("IR Dump After lower-to-llvm", 1)[0]
    # each tile type carries its layout, named once at the top of the level's text
    assert "#row_warp = #nv_tileas.row_warp<cols=64, warps=4, rows_per_warp=2>\n" in dump
    assert "#row_warp1 = #nv_tileas.row_warp<cols=1, warps=4, rows_per_warp=2>\n" in dump
    assert "%1 = exp %tile  : tile<16x64xf32, #row_warp>\n" in dump
    assert ": tile<16x64xf32, #row_warp> -> tile<16xf32, #row_warp1>" in dump


def _corpus(name: str):
    newest = max((Path(__file__).parent / "corpus" / "bytecode" / name).glob("*.tileirbc"))
    return load_module(newest.read_bytes(), str(newest))


def test_row_scan_uses_shuffles_and_no_barrier() -> None:
    ptx = _ptx(_corpus("scan_int"))
    assert "shfl.sync.up.b32" in ptx
    assert "bar.sync" not in ptx


# %c is converted to rows for %d; once it is wished for in rows, %f converts %g instead, and only
# a third walk, with both wishes, leaves no conversion.
_CHAIN = """entry @chain(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<f32>>, %arg4: tile<i32>) {
  %0 = make_token : token
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg1], strides = [%arg2, %arg4] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
  %pview = make_partition_view %tview : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg1], strides = [%arg4] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(16), tensor_view<?xf32, strides=[?]>>
  %x, %y, %z = get_tile_block_id : tile<i32>
  %a, %t1 = load_view_tko weak %pview[%x, %y] token = %0 : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> tile<16x64xf32>, token
  %e, %t2 = load_view_tko weak %pview[%y, %x] token = %0 : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> tile<16x64xf32>, token
  %g, %t3 = load_view_tko weak %pview[%z, %x] token = %0 : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> tile<16x64xf32>, token
  %b = exp %a : tile<16x64xf32>
  %c = negf %e : tile<16x64xf32>
  %d = addf %b, %c : tile<16x64xf32>
  %f = mulf %c, %g : tile<16x64xf32>
  %reduce = reduce %b dim=1 identities=[0.000000e+00 : f32] : tile<16x64xf32> -> tile<16xf32>
  (%lhs: tile<f32>, %rhs: tile<f32>) {
    %s = addf %lhs, %rhs : tile<f32>
    yield %s : tile<f32>
  }
  %t4 = store_view_tko weak %reduce, %pview_1[%x] token = %0 : tile<16xf32>, partition_view<tile=(16), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  %t5 = store_view_tko weak %d, %pview[%x, %z] token = %0 : tile<16x64xf32>, partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> token
  %t6 = store_view_tko weak %f, %pview[%z, %z] token = %0 : tile<16x64xf32>, partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> token
  return
}
"""


def test_refinement_keeps_earlier_wishes() -> None:
    module = load_module(_CHAIN.encode(), "chain.mlir")
    assignment = LayoutAssignment(_entry(module), 128)
    assert assignment.conversions == []
    assert sorted(set(assignment._layouts.values()), key=str) == [RowWarpLayout(128, 1, rpw=2),
                                                                   RowWarpLayout(128, 64, rpw=2)]
    assert len(assignment._layouts) == 8   # the seven 16x64 tiles in rows of 64, the sums one per row
    assert "bar.sync" not in _ptx(module)


def _barriers(entry, row_warps: bool) -> int:
    from tileiras.lowering.pipeline import lower_entry

    from tileiras.tileas.passes import run_passes

    from tileiras.tileaa.passes import to_tileaa

    entry = entry.clone()   # the nv_tileas level is made on a copy: the caller lowers `entry` again
    to_tileaa(entry)
    assignment = LayoutAssignment(entry, 128, row_warps=row_warps)
    run_passes(entry, assignment)
    text = lower_entry(entry, "sm_90", None, assignment)[0]
    return text.count("call void @llvm.nvvm.barrier0")


# kernels whose row reductions, scans or row broadcasts save barriers (the others only must not lose)
_SAVES = {"reduce_int", "reduce_axes", "scan", "scan_int", "softmax", "layernorm", "argmax_argmin", "gather_2d",
          "shape_reshape"}


@pytest.mark.parametrize("name", ["attention", "if_else", *sorted(_SAVES)])
def test_no_more_barriers_than_all_blocked(name: str) -> None:
    """Row warps are chosen only where they save barriers (conversions cost a shared-memory round trip)."""
    entries = [op for op in _corpus(name).regions[0].block.operations if op.name == "cuda_tile.entry"]
    counts = [(_barriers(entry, row_warps=True), _barriers(entry, row_warps=False)) for entry in entries]
    assert counts and all(chosen <= blocked for chosen, blocked in counts)
    assert any(chosen < blocked for chosen, blocked in counts) == (name in _SAVES)


# A loop accumulates 16x64 tiles; the sum is reduced along rows (DIM 1) or columns (DIM 0) after it.
_LOOP = """entry @acc(%arg0: tile<ptr<f32>>, %arg1: tile<i32>, %arg2: tile<i32>, %arg3: tile<ptr<f32>>, %arg4: tile<i32>) {
  %0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %zero = constant <f32: 0.000000e+00> : tile<16x64xf32>
  %tview = make_tensor_view %arg0, shape = [%arg1, %arg1], strides = [%arg2, %arg4] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
  %pview = make_partition_view %tview : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>
  %tview_0 = make_tensor_view %arg3, shape = [%arg1], strides = [%arg4] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %pview_1 = make_partition_view %tview_0 : partition_view<tile=(OUT), tensor_view<?xf32, strides=[?]>>
  %x, %y, %z = get_tile_block_id : tile<i32>
  %for = for %i in (%c0 to %arg2, step %c1) : tile<i32> iter_values(%acc = %zero) -> (tile<16x64xf32>) {
    %tile, %t = load_view_tko weak %pview[%x, %i] token = %0 : partition_view<tile=(16x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> tile<16x64xf32>, token
    %sum = addf %acc, %tile : tile<16x64xf32>
    continue %sum : tile<16x64xf32>
  }
  %reduce = reduce %for dim=DIM identities=[0.000000e+00 : f32] : tile<16x64xf32> -> tile<OUTxf32>
  (%lhs: tile<f32>, %rhs: tile<f32>) {
    %s = addf %lhs, %rhs : tile<f32>
    yield %s : tile<f32>
  }
  %t2 = store_view_tko weak %reduce, %pview_1[%x] token = %0 : tile<OUTxf32>, partition_view<tile=(OUT), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}
"""


def _loop_module(dim: int):
    text = _LOOP.replace("DIM", str(dim)).replace("OUT", str(16 if dim == 1 else 64))
    return load_module(text.encode(), "acc.mlir")


def test_loop_carries_the_layout_its_result_is_reduced_in() -> None:
    """A sum accumulated in a loop and reduced along rows after it: the loop carries the rows in
    warps (the load makes them, the loop's init is a splat), so the reduce shuffles and no tile
    goes through shared memory."""
    module = _loop_module(dim=1)
    entry = _entry(module)
    assignment = LayoutAssignment(entry, 128)
    loop = next(op for op in entry.walk() if op.name == "cuda_tile.for")
    rows = RowWarpLayout(128, 64, rpw=2)
    assert assignment.layout(loop.results[0]) == rows
    assert assignment.layout(loop.regions[0].block.arguments[1]) == rows
    assert assignment.conversions == []
    assert [op.name for op in assignment.warp_ops] == ["cuda_tile.reduce"]
    ptx = _ptx(module)
    assert "shfl.sync.bfly.b32" in ptx and "st.shared" not in ptx   # the ring is filled by copies


def test_loop_reduced_along_columns_stays_blocked() -> None:
    module = _loop_module(dim=0)
    assert LayoutAssignment(_entry(module), 128)._layouts == {}
    assert "st.shared" in _ptx(module)


def test_row_sum_kernel_reduces_in_warps() -> None:
    """The realistic row_sum (a 16x512 f32 accumulator, summed along rows after its loop): no
    reduction buffer in shared memory, only the pipeline's ring and mbarriers."""
    path = Path(__file__).parent / "realistic" / "bytecode" / "row_sum_f32_16x512.tileirbc"
    module = load_module(path.read_bytes(), path.name)
    entry = _entry(module)
    from tileiras.tileaa.passes import to_tileaa

    entry = entry.clone()
    to_tileaa(entry)
    assignment = LayoutAssignment(entry, 128)
    assert assignment.conversions == []
    assert [op.name for op in assignment.warp_ops] == ["cuda_tile.reduce"]
