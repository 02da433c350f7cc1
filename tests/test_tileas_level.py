"""The nv_tileas level (tileiras/tileas): layouts on values, explicit conversions, its verifier."""

from __future__ import annotations

from pathlib import Path

import pytest

from tileiras.errors import CompileError
from tileiras.frontend import load_module
from tileiras.ir.core import Operation
from tileiras.tileas.assign_layouts import LayoutAssignment
from tileiras.lowering.pipeline import lower_module
from tileiras.tileas.warps import choose_threads
from tileiras.tileaa.passes import to_tileaa
from tileiras.tileas.fuse_conversions import fuse_conversions
from tileiras.tileas.materialize import tile_values
from tileiras.tileas.ops import CONVERT_LAYOUT
from tileiras.tileas.passes import run_passes
from tileiras.tileas.verify import verify

# a kernel with a conversion through shared memory and splat constants rebuilt in another layout
# (causal attention had both until its mask was built in the fragment layout directly)
_KERNEL = Path(__file__).parent / "corpus" / "bytecode" / "print_assert" / "13.4.tileirbc"


def _module():
    return load_module(_KERNEL.read_bytes(), str(_KERNEL))


def _entry(module) -> Operation:
    return next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")


def _at_tileas() -> tuple[Operation, LayoutAssignment]:
    entry = _entry(_module())
    to_tileaa(entry)
    assignment = LayoutAssignment(entry, choose_threads(entry, "sm_80"), sm=80)
    run_passes(entry, assignment)
    return entry, assignment


def _converts(entry: Operation) -> list[Operation]:
    return [op for op in entry.walk() if op.name == CONVERT_LAYOUT]


def test_every_tile_value_has_a_layout_and_every_conversion_is_an_op() -> None:
    entry, assignment = _at_tileas()
    assert all(v.layout is not None for v in tile_values(entry))
    converts = _converts(entry)
    assert 0 < len(converts) <= len(assignment.conversions)
    rebuilt = [op for op in converts if op.attributes.get("rematerialize")]
    assert rebuilt and len(rebuilt) < len(converts)   # splats are rebuilt, the mask is moved
    for op in converts:   # each one feeds the op it was made for, in the layout that op reads
        for user in op.results[0].uses:
            wanted = assignment.operand_layouts(user)
            assert wanted[user.operands.index(op.results[0])] == op.results[0].layout


def test_the_passes_are_idempotent() -> None:
    entry, assignment = _at_tileas()
    before = len(_converts(entry))
    run_passes(entry, assignment)
    assert len(_converts(entry)) == before


def test_verifier_reports_a_missing_conversion() -> None:
    entry, assignment = _at_tileas()
    convert = next(op for op in _converts(entry) if not op.attributes.get("rematerialize"))
    convert.results[0].replace_all_uses_with(convert.operands[0])
    with pytest.raises(CompileError, match="a conversion is missing"):
        verify(entry, assignment)


def test_verifier_reports_a_conversion_to_the_same_layout() -> None:
    entry, assignment = _at_tileas()
    convert = next(op for op in _converts(entry) if not op.attributes.get("rematerialize"))
    convert.operands[0].layout = convert.results[0].layout
    with pytest.raises(CompileError, match="to itself"):
        verify(entry, assignment)


def test_fuse_conversions_keeps_one_per_value_layout_and_block() -> None:
    entry, assignment = _at_tileas()
    convert = _converts(entry)[0]
    user = convert.results[0].uses[0]
    twin = user.insert_before(Operation(CONVERT_LAYOUT, [convert.operands[0]], [convert.results[0].type],
                                        convert.attributes))
    twin.results[0].layout = convert.results[0].layout
    user.set_operand(user.operands.index(convert.results[0]), twin.results[0])
    count = len(_converts(entry))
    assert fuse_conversions(entry) == 1
    assert len(_converts(entry)) == count - 1 and twin not in _converts(entry)
    assert user.operands.count(convert.results[0]) >= 1
    verify(entry, assignment)


def test_lowering_leaves_the_callers_module_at_cuda_tile(capsys: pytest.CaptureFixture[str]) -> None:
    module = _module()
    lower_module(module, "sm_80", print_ir_after_all=True)
    lower_module(module, "sm_90")   # a second target starts again from cuda_tile
    assert not any(op.name.startswith("nv_tileas.") for op in _entry(module).walk())
    assert all(v.layout is None for v in tile_values(_entry(module)))
    dump = capsys.readouterr().err
    assert "nv_tileas.convert_layout" in dump and "rematerialize" in dump


def _matmul_at_tileas(gpu: str) -> tuple[Operation, LayoutAssignment]:
    """The realistic 128x128x64 f16 matmul at nv_tileas: an mma accumulator carried by a loop."""
    from tileiras.tileas.passes import to_tileas

    path = Path(__file__).parent / "realistic" / "bytecode" / "mm_f16_128x128x64.tileirbc"
    entry = _entry(load_module(path.read_bytes(), str(path)))
    to_tileaa(entry)
    return entry, to_tileas([entry], gpu)[0]


def test_a_tiles_layout_is_its_types_encoding() -> None:
    """As Triton's tensor types carry their encodings: the layout is part of the type, two tiles of one shape
    in two layouts have two types, and setting a value's layout gives it its type in that layout."""
    from tileiras.ir.types import TileType

    entry, assignment = _matmul_at_tileas("sm_90")
    values = [v for v in tile_values(entry) if v.type.num_elements > 1]
    assert values and all(v.type.encoding is v.layout and v.layout is not None for v in values)
    acc = next(op for op in entry.walk() if op.name == "cuda_tile.mmaf").results[0]
    twin = TileType(acc.type.shape, acc.type.element, assignment.blocked)
    assert twin != acc.type and twin.with_encoding(None) == acc.type.with_encoding(None)
    assert str(twin) == str(acc.type) == "tile<128x128xf32>"   # `str` is cuda_tile's spelling; the printer adds it
    layout = acc.layout
    acc.layout = assignment.blocked
    assert acc.type == twin and acc.layout == assignment.blocked
    acc.layout = layout


@pytest.mark.parametrize("gpu", ["sm_80", "sm_100"])
def test_verifier_reports_a_loop_carrying_a_value_in_two_layouts(gpu: str) -> None:
    entry, assignment = _matmul_at_tileas(gpu)
    verify(entry, assignment)
    loop = next(op for op in entry.walk() if op.name == "cuda_tile.for")
    loop.results[0].layout = assignment.blocked        # the loop's result no longer in its accumulator's layout
    with pytest.raises(CompileError, match=r"internal: nv_tileas verifier: 'cuda_tile.for' has values that must "
                                           r"share a layout in different ones: .*#blocked"):
        verify(entry, assignment)


def test_verifier_reports_an_element_conversion_that_moves_its_tile() -> None:
    """ftof keeps its tile where it is: a change of layout is a convert_layout's."""
    entry, assignment = _matmul_at_tileas("sm_90")
    cast = next(op for op in entry.walk() if op.name == "cuda_tile.ftof")
    cast.results[0].layout = assignment.blocked
    with pytest.raises(CompileError, match="'cuda_tile.ftof' has values that must share a layout"):
        verify(entry, assignment)


def test_verifier_reports_a_conversion_that_changes_more_than_the_layout() -> None:
    from tileiras.ir.types import ScalarType

    entry, assignment = _at_tileas()
    convert = _converts(entry)[0]
    result = convert.results[0]
    result.type = result.type.__class__(result.type.shape, ScalarType("f64"), result.type.encoding)
    with pytest.raises(CompileError, match="changes the type"):
        verify(entry, assignment)
