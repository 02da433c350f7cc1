"""Copy decisions made on nv_tileaa IR, before any lowering: the views a kernel's loads read
(tileaa/views.py), the width of their accesses (tileaa/access_width.py) and their TMA boxes
(tileas/tma_boxes.py) come from the ops and the facts alone."""

from __future__ import annotations

import pytest

from tileiras.frontend import load_module
from tileiras.host_platform import tma_callback_unsupported
from tileiras.layout.shared_matrix import SharedMatrix
from tileiras.tileaa.access_width import chunk_elements, vector_elements
from tileiras.tileaa.facts import infer_facts
from tileiras.tileaa.views import view_of
from tileiras.tileas import tma_boxes

_T = "tensor_view<?x?xf16, strides=[?,1]>"
_P = f"partition_view<tile=(64x64), {_T}>"
_S = f"strided_view<tile=(64x64), traversal_strides=[64,32], {_T}>"


def _kernel(stride_fact: str, view: str = _P, make: str = "make_partition_view") -> str:
    return f"""
entry @k(%a: tile<ptr<f16>>, %m: tile<i32>, %n: tile<i32>, %s: tile<i32>) {{
  %a16 = assume div_by<16>, %a : tile<ptr<f16>>
  %m16 = assume div_by<16>, %m : tile<i32>
  %n16 = assume div_by<16>, %n : tile<i32>
  %sd = assume div_by<{stride_fact}>, %s : tile<i32>
  %c0 = constant <i32: 0> : tile<i32>
  %t = make_tensor_view %a16, shape = [%m16, %n16], strides = [%sd, 1] : tile<i32> -> {_T}
  %tok = make_token : token
  %v = {make} %t : {view}
  %x, %tx = load_view_tko weak %v[%c0, %c0] token = %tok : {view}, tile<i32> -> tile<64x64xf16>, token
  %ty = store_view_tko weak %x, %v[%c0, %c0] token = %tx : tile<64x64xf16>, {view}, tile<i32> -> token
  return
}}
"""


def _load(text: str):
    module = load_module(text.encode(), "k.mlir")
    entry = next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")
    infer_facts(entry)
    return next(op for op in entry.walk() if op.name == "cuda_tile.load_view_tko")


def _stage() -> SharedMatrix:
    return SharedMatrix(0, 1, 64, 64, 2, swizzled=True)   # 128-byte rows: one 128B swizzle atom a row


needs_callback = pytest.mark.skipif(bool(tma_callback_unsupported()), reason="TMA needs an x86-64 Linux host here")


def test_a_view_is_read_from_the_ir_and_its_facts() -> None:
    view = view_of(_load(_kernel("8")).operand("view"))
    assert view is not None
    assert (view.tile_shape, view.dim_map, view.padding, view.sparse_dim) == ((64, 64), (0, 1), None, None)
    assert view.tensor.base_align == 16 and view.tensor.stride_div == (8, 1) and view.tensor.shape_div == (16, 16)
    assert view_of(_load(_kernel("8")).operand("token")) is None    # not a view


def test_access_widths_follow_the_facts() -> None:
    wide, narrow = _load(_kernel("8")), _load(_kernel("2"))
    tile = wide.results[0].type
    assert vector_elements(wide, view_of(wide.operand("view")), (64, 64), 2, 8) == 8
    assert chunk_elements(wide, view_of(wide.operand("view")), tile) == 8      # 16-byte cp.async
    assert vector_elements(narrow, view_of(narrow.operand("view")), (64, 64), 2, 8) == 2
    assert chunk_elements(narrow, view_of(narrow.operand("view")), tile) == 2  # 4-byte cp.async


@needs_callback
def test_tma_boxes_are_planned_without_lowering() -> None:
    copy, why = tma_boxes.plan(_load(_kernel("8")), _stage())
    assert why == "" and copy is not None
    assert (copy.box, copy.atoms, copy.spec.swizzle, copy.nbytes) == ((64, 64), 1, "128B", 64 * 64 * 2)
    half, _ = tma_boxes.plan(_load(_kernel("8")), _stage(), rows=32)
    assert half is not None and (half.box, half.bands) == ((64, 32), 2)


@needs_callback
@pytest.mark.parametrize("text, reason", [
    (_kernel("2"), "stride 0 is known a multiple of 4 bytes, not of 16"),
    (_kernel("8", _S, "make_strided_view"), "the view is strided or gathers rows"),
])
def test_tma_refusals_say_why(text: str, reason: str) -> None:
    copy, why = tma_boxes.plan(_load(text), _stage())
    assert copy is None and why == reason


@needs_callback
def test_a_pipeline_goes_by_tma_only_where_every_load_can() -> None:
    from tileiras.target import caps

    good, bad = _load(_kernel("8")), _load(_kernel("2"))
    stages = {good: _stage(), bad: _stage()}
    tiles = {load: load.results[0].type for load in stages}
    assert (tma_boxes.box_rows(caps("sm_90")), tma_boxes.box_rows(caps("sm_100"))) == (256, 128)
    copies, why = tma_boxes.pipeline_copies(caps("sm_100"), (good,), stages, set(), tiles, set())
    assert why == {} and copies is not None and copies[good].box == (64, 64)
    copies, why = tma_boxes.pipeline_copies(caps("sm_90"), (good, bad), stages, set(), tiles, set())
    assert copies is None and set(why) == {bad}
    copies, why = tma_boxes.pipeline_copies(caps("sm_90"), (good, bad), stages, {bad}, tiles, {bad})   # cp.async beside
    assert copies is not None and set(copies) == {good} and set(why) == {bad}
