"""13.5 multimem view ops and pointer attributes: text -> IR -> text, text -> 13.5 bytecode -> text.

The kernels are written in the form NVIDIA's tileirdisasm 13.5 prints (observed on bytecode that our
writer produced): pointer attributes `ptr<T, <multicast>>` and `#cuda_tile.ptr_attr<...>` in views,
`make_tensor_view` spelling out such a base pointer's type, and the multimem ops with the view first,
`reduction` in the attribute dictionary (elided when `add`) and the token type after the index types.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

from tileiras.bytecode.reader import read_module, read_version  # noqa: E402
from tileiras.bytecode.writer import write_module  # noqa: E402
from tileiras.dialects.verifier import verify_module  # noqa: E402
from tileiras.errors import CompileError  # noqa: E402
from tileiras.ir import types as T  # noqa: E402
from tileiras.text.lexer import ParseError  # noqa: E402
from tileiras.text.parser import parse_module  # noqa: E402
from tileiras.text.printer import print_module  # noqa: E402

_TV = "tensor_view<?xi32, strides=[1], #cuda_tile.ptr_attr<multicast>>"
_PV = f"partition_view<tile=(16), {_TV}>"
_TV2 = "tensor_view<64x64xf16, strides=[64,1], #cuda_tile.ptr_attr<multicast>>"
_PV2 = f"partition_view<tile=(16x16), {_TV2}>"

KERNELS = {
    "reductions": (
        "entry @multimem(%arg0: tile<ptr<i32, <multicast>>>, %arg1: tile<i32>, %arg2: tile<ptr<i32, <none>>>, "
        "%arg3: tile<ptr<i32, <unicast>>>) {\n"
        "  %0 = make_token : token\n"
        f"  %tview = make_tensor_view %arg0, shape = [%arg1], strides = [1] : tile<ptr<i32, <multicast>>>, "
        f"tile<i32> -> {_TV}\n"
        "  %tview_0 = make_tensor_view %arg2, shape = [%arg1], strides = [1] : tile<ptr<i32, <none>>>, tile<i32> "
        "-> tensor_view<?xi32, strides=[1], #cuda_tile.ptr_attr<none>>\n"
        "  %tview_1 = make_tensor_view %arg3, shape = [%arg1], strides = [1] : tile<ptr<i32, <unicast>>>, "
        "tile<i32> -> tensor_view<?xi32, strides=[1], #cuda_tile.ptr_attr<unicast>>\n"
        "  %blockId_x, %blockId_y, %blockId_z = get_tile_block_id : tile<i32>\n"
        f"  %pview = make_partition_view %tview : {_PV}\n"
        "  %reduced_values, %result_token = multimem_load_reduce_view_tko relaxed sys %pview[%blockId_x]  "
        f"attributes {{reduction = #cuda_tile.multimem_reduction_kind<min>}} : {_PV}, tile<i32> -> tile<16xi32>, "
        "token\n"
        "  %reduced_values_2, %result_token_3 = multimem_load_reduce_view_tko relaxed sys %pview[%blockId_x] "
        f"inbounds = [true] attributes {{reduction = #cuda_tile.multimem_reduction_kind<umax>}} : {_PV}, "
        "tile<i32> -> tile<16xi32>, token\n"
        "  %1 = multimem_reduce_view_tko release device %pview, %reduced_values[%blockId_x]  "
        f"attributes {{reduction = #cuda_tile.multimem_reduction_kind<xor>}} : {_PV}, tile<16xi32>, tile<i32> "
        "-> token\n"
        f"  %2 = multimem_reduce_view_tko release device %pview, %reduced_values[%blockId_x]  : {_PV}, "
        "tile<16xi32>, tile<i32> -> token\n"
        f"  %3 = multimem_store_view_tko weak %pview, %reduced_values[%blockId_x] inbounds = [true] : {_PV}, "
        "tile<16xi32>, tile<i32> -> token\n"
        "  return\n"
        "}\n"),
    "tokens_2d": (
        "entry @multimem(%arg0: tile<ptr<f16, <multicast>>>, %arg1: tile<i64>) {\n"
        "  %0 = make_token : token\n"
        "  %tview = make_tensor_view %arg0, shape = [64, 64], strides = [64, 1] : tile<ptr<f16, <multicast>>> "
        f"-> {_TV2}\n"
        f"  %pview = make_partition_view %tview : {_PV2}\n"
        "  %reduced_values, %result_token = multimem_load_reduce_view_tko weak %pview[%arg1, %arg1] token = %0  "
        f": {_PV2}, tile<i64>, token -> tile<16x16xf16>, token\n"
        "  %1 = multimem_store_view_tko relaxed device %pview, %reduced_values[%arg1, %arg1] token = "
        f"%result_token inbounds = [true, false] : {_PV2}, tile<16x16xf16>, tile<i64>, token -> token\n"
        "  %2 = multimem_reduce_view_tko relaxed device %pview, %reduced_values[%arg1, %arg1] token = %1  : "
        f"{_PV2}, tile<16x16xf16>, tile<i64>, token -> token\n"
        "  return\n"
        "}\n"),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_text_round_trip(name: str) -> None:
    text = KERNELS[name]
    module = parse_module(text, f"{name}.mlir")
    verify_module(module)
    assert print_module(module) == text


def test_parsed_attributes_and_pointer_kinds() -> None:
    module = parse_module(KERNELS["reductions"], "r.mlir")
    ops = {}
    for op in module.walk():
        ops.setdefault(op.name, []).append(op)
    loads = ops["cuda_tile.multimem_load_reduce_view_tko"]
    assert [op.attributes["reduction"] for op in loads] == ["min", "umax"]
    assert [op.attributes["inbounds"] for op in loads] == [(False,), (True,)]
    reduces = ops["cuda_tile.multimem_reduce_view_tko"]
    assert [op.attributes["reduction"] for op in reduces] == ["xor", "add"]  # add: the elided default
    assert all(op.attributes["memory_scope"] == "device" for op in reduces)
    store = ops["cuda_tile.multimem_store_view_tko"][0]
    assert store.operand("view").type == loads[0].operand("view").type
    assert store.operand("tile") is loads[0].results[0]
    entry = ops["cuda_tile.entry"][0]
    args = entry.regions[0].blocks[0].arguments
    assert [a.type.element.ptr_attr for a in args if isinstance(a.type.element, T.PointerType)] == \
        ["multicast", "none", "unicast"]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_bytecode_13_5_round_trip(name: str) -> None:
    text = KERNELS[name]
    data = write_module(parse_module(text, f"{name}.mlir"), "13.5")
    assert read_version(data) == (13, 5)
    assert print_module(read_module(data, f"{name}.tileirbc")) == text


def test_multimem_needs_13_5_and_pointer_attributes_13_4() -> None:
    module = parse_module(KERNELS["tokens_2d"], "t.mlir")
    with pytest.raises(CompileError):
        write_module(module, "13.4")
    with pytest.raises(CompileError):
        write_module(module, "13.3")


@pytest.mark.parametrize("bad, message", [
    ("%pview[%arg1, %arg1] token = %0  : {pv}, tile<i64> -> tile<16x16xf16>, token",
     "expected the token type after the index types"),
    ("%pview[%arg1, %arg1]  attributes {{reduction = #cuda_tile.multimem_reduction_kind<mul>}} : {pv}, tile<i64> "
     "-> tile<16x16xf16>, token", "mul"),
])
def test_malformed_multimem_text(bad: str, message: str) -> None:
    text = KERNELS["tokens_2d"].split("  %reduced_values")[0] + \
        "  %r, %t = multimem_load_reduce_view_tko weak " + bad.format(pv=_PV2) + "\n  return\n}\n"
    with pytest.raises(ParseError) as info:
        parse_module(text, "bad.mlir")
    assert message in info.value.message


needs_oracle = pytest.mark.skipif(fs.oracle() is None, reason="NVIDIA's tileirdisasm is not installed")


@needs_oracle
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_nvidia_disassembles_our_13_5_bytecode_to_the_same_text(name: str, tmp_path) -> None:
    text = KERNELS[name]
    path = tmp_path / f"{name}.tileirbc"
    path.write_bytes(write_module(parse_module(text, f"{name}.mlir"), "13.5"))
    res = subprocess.run([fs.oracle(), str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout == text
