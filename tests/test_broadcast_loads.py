"""A loaded tile that is only broadcast (rope's cos/sin tables over the heads, a bias row) is loaded
where the broadcast result needs it (tileas/assign_layouts `_find_broadcast_loads`, layout
`#broadcast_source`): each thread reads the table elements its own result elements use, so the
broadcast is a register copy and no tile goes through shared memory, as NVIDIA's compiler does it.
Only where no thread would hold a table element twice (`BroadcastSourceLayout.distinct`); the
loads keep 16-byte accesses along the table's rows (`run`) and step their addresses from the first
(`slot_shift`). Checked on the layouts, the PTX and the emulator (race checker on) against numpy."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate  # noqa: E402
from text_kernel_support import assignment, entry, ptx  # noqa: E402

from tileiras.layout.encodings import BlockedLayout, BroadcastSourceLayout  # noqa: E402


def _array(name: str, rank: int) -> str:
    """An array parameter as the runtime passes it: the pointer, then each extent and stride."""
    dims = ", ".join(f"%{name}{kind}{i}: tile<i32>" for kind in "ns" for i in range(rank))
    return f"%{name}: tile<ptr<f32>>, {dims}"


def _kernel(s: int, h: int, d: int) -> str:
    """y[s, h, :] = x[s, h, :] * t[s, :] + t[s, :]: the table t broadcast over the h axis."""
    xv = f"tensor_view<{s}x{h}x{d}xf32, strides=[{h * d},{d},1]>"
    tv = f"tensor_view<{s}x{d}xf32, strides=[{d},1]>"
    xp, tp = f"partition_view<tile=({s}x{h}x{d}), {xv}>", f"partition_view<tile=({s}x{d}), {tv}>"
    tile, row = f"tile<{s}x{h}x{d}xf32>", f"tile<{s}x1x{d}xf32>"
    return f"""
entry @table({_array("x", 3)}, {_array("t", 2)}, {_array("y", 3)}) {{
  %t0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %ax = assume div_by<16>, %x : tile<ptr<f32>>
  %at = assume div_by<16>, %t : tile<ptr<f32>>
  %ay = assume div_by<16>, %y : tile<ptr<f32>>
  %tx = make_tensor_view %ax, shape = [{s}, {h}, {d}], strides = [{h * d}, {d}, 1] : tile<i32> -> {xv}
  %tt = make_tensor_view %at, shape = [{s}, {d}], strides = [{d}, 1] : tile<i32> -> {tv}
  %ty = make_tensor_view %ay, shape = [{s}, {h}, {d}], strides = [{h * d}, {d}, 1] : tile<i32> -> {xv}
  %px = make_partition_view %tx : {xp}
  %pt = make_partition_view %tt : {tp}
  %py = make_partition_view %ty : {xp}
  %vx, %lx = load_view_tko weak %px[%c0, %c0, %c0] token = %t0 : {xp}, tile<i32> -> {tile}, token
  %vt, %lt = load_view_tko weak %pt[%c0, %c0] token = %t0 : {tp}, tile<i32> -> tile<{s}x{d}xf32>, token
  %r = reshape %vt : tile<{s}x{d}xf32> -> {row}
  %b1 = broadcast %r : {row} -> {tile}
  %b2 = broadcast %r : {row} -> {tile}
  %m = mulf %vx, %b1 : {tile}
  %o = addf %m, %b2 : {tile}
  %st = store_view_tko weak %o, %py[%c0, %c0, %c0] token = %t0 : {tile}, {xp}, tile<i32> -> token
  return
}}
"""


def _table_layout(text: str, gpu: str):
    """The layout the table's load (the kernel's second) is assigned."""
    op, layouts = assignment(text, gpu)
    load = [o for o in op.walk() if o.name == "cuda_tile.load_view_tko"][1]
    return layouts.layout(load.results[0])


def test_a_source_layout_runs_along_the_rows_it_keeps() -> None:
    blocked = BlockedLayout(128, 4)
    rows = BroadcastSourceLayout(blocked, (4, 8, 64), (4, 1, 64))
    assert rows.run(256) == 4 and rows.distinct()
    # slot 4 is the thread's next run, 512 elements on: a quarter of the way through the s axis
    assert rows.slot_shift((4, 64), 4) == (1, 0) and rows.slot_shift((4, 1, 64), 5) == (1, 0, 1)
    # 32 heads: a thread's next run lies one head on, over the same table elements
    assert not BroadcastSourceLayout(blocked, (4, 32, 64), (4, 1, 64)).distinct()
    # a column broadcast along the rows: a run holds one element four times
    columns = BroadcastSourceLayout(blocked, (64, 64), (64, 1))
    assert columns.run(64) == 1 and not columns.distinct()
    # a bias row under 16 x 256: each thread's four runs sit in the same columns of four rows
    assert not BroadcastSourceLayout(BlockedLayout(128, 8), (16, 256), (1, 256)).distinct()


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_a_broadcast_table_is_loaded_where_it_is_used(gpu: str, tmp_path: Path) -> None:
    text = _kernel(4, 8, 64)
    layout = _table_layout(text, gpu)
    assert isinstance(layout, BroadcastSourceLayout) and layout.distinct()
    out, _ = ptx(text, gpu, tmp_path)
    assert ".shared" not in out and "bar.sync" not in out and "cp.async" not in out
    assert out.count("ld.global.v4.f32") + out.count("ld.global.v4.b32") >= 2
    module, _ = entry(text)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8, 64)).astype(np.float32)
    t = rng.standard_normal((4, 64)).astype(np.float32)
    got = emulate(module, [x, t, np.zeros_like(x)], gpu)
    assert np.allclose(got[2], x * t[:, None, :] + t[:, None, :], rtol=1e-6, atol=1e-6)


def test_a_table_each_thread_would_hold_twice_keeps_its_layout(tmp_path: Path) -> None:
    """4 positions by 32 heads by 64 columns on 128 threads of 4: a thread's second run lies one
    head on, in the same columns of the same table row; loading it there would load it twice."""
    text = _kernel(4, 32, 64)
    assert not isinstance(_table_layout(text, "sm_90"), BroadcastSourceLayout)
    module, _ = entry(text)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 32, 64)).astype(np.float32)
    t = rng.standard_normal((4, 64)).astype(np.float32)
    got = emulate(module, [x, t, np.zeros_like(x)], "sm_90")
    assert np.allclose(got[2], x * t[:, None, :] + t[:, None, :], rtol=1e-6, atol=1e-6)
