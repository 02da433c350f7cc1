"""Bytecode reader and writer: structure, version handling and round trips.

Round trip: our bytes -> NVIDIA's tileirdisasm prints exactly what it
prints for the original file; NVIDIA's tileiras accepts what we write.
"""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

from tileiras.bytecode.reader import read_module, read_version  # noqa: E402
from tileiras.bytecode.writer import write_module  # noqa: E402
from tileiras.errors import BytecodeError, CompileError  # noqa: E402
from tileiras.ir import attributes as A  # noqa: E402
from tileiras.ir import types as T  # noqa: E402

needs_oracle = pytest.mark.skipif(fs.oracle() is None, reason="NVIDIA's tileirdisasm is not installed")


def _body(module):
    return module.regions[0].blocks[0].operations


def test_module_structure_and_attribute_conventions() -> None:
    data = fs.sample_bytes("13.4")["views"]
    module = read_module(data, "views.tileirbc")
    assert module.name == "cuda_tile.module" and module.attributes["sym_name"] == "kernels"
    (entry,) = _body(module)
    assert entry.name == "cuda_tile.entry"
    assert entry.attributes["sym_name"] == "k"
    ftype = entry.attributes["function_type"]
    assert isinstance(ftype, T.FunctionType) and len(ftype.inputs) == 3
    block = entry.regions[0].blocks[0]
    assert [a.type for a in block.arguments] == list(ftype.inputs)
    ops = {}
    for op in block.operations:
        ops.setdefault(op.name, op)
    load = ops["cuda_tile.load_view_tko"]
    assert load.attributes["memory_ordering_semantics"] == "relaxed"
    assert load.attributes["memory_scope"] == "device"
    hints = load.attributes["optimization_hints"]
    assert isinstance(hints, A.OptimizationHints) and hints.get("sm_90", "latency") == 2
    assert load.attributes["inbounds"] == (False, False)
    assert len(load.operand_group("index")) == 2 and load.operand("token") is not None
    assert [str(r.type) for r in load.results] == ["tile<16x32xf32>", "token"]
    pv = load.operand("view").type
    assert isinstance(pv, T.PartitionViewType) and pv.dim_map == (1, 0) and str(pv.padding_value) == "neg_inf"
    tv_op = ops["cuda_tile.make_tensor_view"]
    assert tv_op.segment_sizes == (1, 1, 1)


def test_enum_int_and_dense_attribute_values() -> None:
    module = read_module(fs.sample_bytes("13.4")["int_arith"], "x")
    ops = _body(module)[0].regions[0].blocks[0].operations
    by = {}
    for op in ops:
        by.setdefault(op.name, []).append(op)
    assert by["cuda_tile.addi"][0].attributes["overflow"] == "no_signed_wrap"
    assert [o.attributes["rounding"] for o in by["cuda_tile.divi"]] == ["zero", "positive_inf", "negative_inf"]
    assert by["cuda_tile.cmpi"][0].attributes["comparison_predicate"] == "greater_than"
    dense = by["cuda_tile.constant"][0].attributes["value"]
    assert isinstance(dense, A.DenseElements)
    assert dense.values.tolist() == [1, -2, 3, 2147483647]


def test_reduce_identities_and_predicates() -> None:
    ops = _body(read_module(fs.sample_bytes("13.4")["reduce_scan"], "x"))[0].regions[0].blocks[0].operations
    reduces = [op for op in ops if op.name == "cuda_tile.reduce"]
    ident = reduces[1].attributes["identities"]
    assert isinstance(ident[0], A.FloatAttr) and ident[0].value == float("-inf")
    assert ident[1] == A.IntegerAttr(-1, T.I32)
    body = reduces[1].regions[0].blocks[0]
    assert len(body.arguments) == 4 and body.operations[-1].name == "cuda_tile.yield"
    misc = _body(read_module(fs.sample_bytes("13.4")["misc"], "x"))[0].regions[0].blocks[0].operations
    preds = [op.attributes["predicate"] for op in misc if op.name == "cuda_tile.assume"]
    assert A.DivBy(4, 4, 0) in preds and A.Bounded(-3, 100) in preds and A.Bounded(None, None) in preds


def test_print_tko_before_13_2_has_a_synthesized_token() -> None:
    ops = _body(read_module(fs.sample_bytes("13.1")["misc"], "x"))[0].regions[0].blocks[0].operations
    prints = [op for op in ops if op.name == "cuda_tile.print_tko"]
    assert prints and all(str(op.results[0].type) == "token" for op in prints)


@pytest.mark.parametrize("version", fs.VERSIONS)
def test_read_version(version: str) -> None:
    assert read_version(fs.sample_bytes(version)["misc"]) == tuple(int(x) for x in version.split("."))


@needs_oracle
@pytest.mark.parametrize("version", fs.VERSIONS)
def test_write_roundtrip_through_nvidia(tmp_path, version: str) -> None:
    files = [(n, d) for n, d in fs.sample_bytes(version).items()]
    files += [(os.path.basename(os.path.dirname(p)), open(p, "rb").read()) for p in fs.corpus_files()
              if p.endswith(f"{version}.tileirbc")][:25]
    for name, data in files:
        src = tmp_path / f"{name}.orig"
        src.write_bytes(data)
        ref = fs.run_oracle(["-g", str(src)])
        if ref.returncode != 0:
            continue
        ours = tmp_path / f"{name}.ours"
        ours.write_bytes(write_module(read_module(data, name), version))
        got = fs.run_oracle(["-g", str(ours)])
        assert got.returncode == 0, f"{name}: NVIDIA rejects our bytes: {got.stderr}"
        assert got.stdout == ref.stdout, f"{name}: round trip changed the module"


@pytest.mark.parametrize("version", fs.VERSIONS)
def test_write_then_read_is_stable(version: str) -> None:
    from tileiras.text.printer import print_module

    for name, data in fs.sample_bytes(version).items():
        m1 = read_module(data, name)
        m2 = read_module(write_module(m1, version), name)
        assert print_module(m2, True) == print_module(m1, True), name


@pytest.mark.skipif(fs.oracle("tileiras") is None, reason="NVIDIA's tileiras is not installed")
def test_nvidia_tileiras_compiles_our_bytecode(tmp_path) -> None:
    for name in ("control_flow", "reduce_scan", "float_arith"):
        data = write_module(read_module(fs.sample_bytes("13.4")[name], name), "13.3")
        src = tmp_path / f"{name}.tileirbc"
        src.write_bytes(data)
        out = tmp_path / f"{name}.o"
        res = fs.run_oracle(["--gpu-name", "sm_90", str(src), "-o", str(out)], tool="tileiras")
        assert res.returncode == 0, f"{name}: {res.stderr}"
        assert out.stat().st_size > 0


def test_writer_rejects_features_newer_than_the_target() -> None:
    m = read_module(fs.sample_bytes("13.4")["tokens_13_4"], "x")
    with pytest.raises(CompileError, match="not available in bytecode version 13.3"):
        write_module(m, "13.3")
    m = read_module(fs.sample_bytes("13.3")["views_13_3"], "x")
    with pytest.raises(CompileError, match="make_strided_view' op is not available in bytecode version 13.2"):
        write_module(m, "13.2")
    m = read_module(fs.sample_bytes("13.3")["low_precision_types"], "x")
    with pytest.raises(CompileError, match="type 'f8E8M0FNU' requires bytecode version 13.2"):
        write_module(m, "13.1")
    with pytest.raises(CompileError, match="unsupported bytecode version"):
        write_module(m, "12.9")


def test_writer_downgrades_when_fields_hold_defaults() -> None:
    m = read_module(fs.sample_bytes("13.4")["int_arith"], "x")
    for op in m.walk():  # negi's overflow (13.2) must be 'none' for 13.1
        if op.name == "cuda_tile.negi":
            op.attributes["overflow"] = "none"
    data = write_module(m, "13.1")
    assert read_version(data) == (13, 1)
    assert read_module(data, "x") is not None


def test_reader_rejects_op_from_newer_version_in_old_file() -> None:
    m = read_module(fs.sample_bytes("13.4")["tokens_13_4"], "x")
    data = bytearray(write_module(m, "13.4"))
    data[9] = 3  # claim 13.3: the 13.4 opcodes are now unknown
    with pytest.raises(BytecodeError, match="unsupported opcode 120 for bytecode version 13.3"):
        read_module(bytes(data), "x")
