"""The nv_tileaa level (tileiras/tileaa): facts on integers, pointers and views, and its verifier."""

from __future__ import annotations

import pytest

from tileiras.errors import CompileError
from tileiras.frontend import load_module
from tileiras.tileaa.facts import UNBOUNDED, Facts, ViewFacts, divisor, infer_facts
from tileiras.tileaa.verify import verify

_KERNEL = """
entry @k(%a: tile<ptr<f16>>, %n: tile<i32>, %s: tile<i32>) {
  %a16 = assume div_by<16>, %a : tile<ptr<f16>>
  %n16 = assume div_by<16>, %n : tile<i32>
  %s8 = assume div_by<8>, %s : tile<i32>
  %c0 = constant <i32: 0> : tile<i32>
  %c3 = constant <i32: 3> : tile<i32>
  %c4 = constant <i32: 4> : tile<i32>
  %c64 = constant <i32: 64> : tile<i32>
  %cneg = constant <i32: -24> : tile<i32>
  %ramp = constant <i32: [0, 8, 16, 4]> : tile<4xi32>
  %m = muli %s8, %c4 : tile<i32>
  %sum = addi %m, %c3 : tile<i32>
  %sh = shli %n16, %c3 : tile<i32>
  %p = offset %a16, %s8 : tile<ptr<f16>>, tile<i32> -> tile<ptr<f16>>
  %ta = make_tensor_view %a16, shape = [%n16, 64], strides = [%s8, 1] : tile<i32> -> tensor_view<?x64xf16, strides=[?,1]>
  %t0 = make_token : token
  %tok = for %i in (%c0 to %n16, step %c64) : tile<i32> iter_values(%t = %t0) -> (token) {
    continue %t : token
  }
  %pv = make_partition_view %ta : partition_view<tile=(16x64), tensor_view<?x64xf16, strides=[?,1]>>
  %x, %tx = load_view_tko weak %pv[%c0, %c0] token = %tok : partition_view<tile=(16x64), tensor_view<?x64xf16, strides=[?,1]>>, tile<i32> -> tile<16x64xf16>, token
  %ty = store_view_tko weak %x, %pv[%c0, %c0] token = %tx : tile<16x64xf16>, partition_view<tile=(16x64), tensor_view<?x64xf16, strides=[?,1]>>, tile<i32> -> token
  return
}
"""


def _entry():
    module = load_module(_KERNEL.encode(), "facts.mlir")
    entry = next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")
    infer_facts(entry)   # the pass alone: the level's canonical form would erase the unused values inspected here
    return entry


def _by_name(entry) -> dict[str, object]:
    """The values as `_KERNEL` names them: each op's first result by the line that defines it."""
    lines = _KERNEL.splitlines()
    out = {}
    for op in entry.walk():
        if op.location is not None and op.results:
            text = lines[op.location.line - 1].strip()
            if " = " in text:
                out[text.split(" = ")[0].split(",")[0]] = op.results[0]
        if op.name == "cuda_tile.for":
            out["%i"] = op.regions[0].block.arguments[0]
    out["%a"] = entry.regions[0].block.arguments[0]
    return out


def test_facts_flow_from_assumptions_constants_and_arithmetic() -> None:
    values = _by_name(_entry())
    expected = {"%a16": 16, "%n16": 16, "%s8": 8, "%c0": UNBOUNDED, "%c3": 1, "%c64": 64, "%cneg": 8,
                "%ramp": 4, "%m": 32, "%sum": 1, "%sh": 128, "%p": 16, "%i": 64}
    got = {name: divisor(values[name]) for name in expected}
    assert got == expected
    assert values["%ta"].facts == ViewFacts(base_align=16, shape_div=(16, 64), stride_div=(8, 1))
    assert isinstance(values["%a"].facts, Facts) and divisor(values["%a"]) == 1   # the argument itself: nothing


def test_verifier_reports_facts_that_do_not_hold() -> None:
    entry = _entry()
    values = _by_name(entry)
    verify(entry)
    values["%c64"].facts = Facts(128)
    with pytest.raises(CompileError, match="known divisible by 128 but holds 64"):
        verify(entry)
    values["%c64"].facts = Facts(64)
    values["%n16"].facts = Facts(8)
    with pytest.raises(CompileError, match="assumes div_by<16>"):
        verify(entry)
    values["%n16"].facts = Facts(16)
    values["%ta"].facts = ViewFacts(16, (16, 32), (8, 1))
    with pytest.raises(CompileError, match="disagree with the static sizes"):
        verify(entry)
    values["%ta"].facts = None
    with pytest.raises(CompileError, match="has no view facts"):
        verify(entry)


def test_print_ir_after_all_and_time_passes_show_the_level(capsys: pytest.CaptureFixture[str]) -> None:
    from tileiras.lowering.pipeline import lower_module

    module = load_module(_KERNEL.encode(), "facts.mlir")
    lower_module(module, "sm_90", print_ir_after_all=True)
    dump = capsys.readouterr().err
    assert "IR Dump After infer-facts" in dump
    for name in ("canonicalize", "simplify-tokens", "licm", "cse", "dce"):   # the canonical form's passes
        assert f"IR Dump After {name} (cuda_tile)" in dump
    assert "%tview : tensor_view<?x64xf16, strides=[?,1]> base aligned to 16 B, extents divisible by (16, 64), strides by (8, 1)" in dump
