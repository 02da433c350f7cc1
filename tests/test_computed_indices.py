"""Loads whose tile index the loop body computes from the induction variable (`k + offset`, `chunk * 4 + c`:
a split-K range, a row block's chunks, the loop-tiles pass's own chunk loops) are pipelined as loads indexed
by the induction variable are: the pipeliner takes the scalar ops computing the index with the copies
(schedule/pipeline.index_ops), and the lowering computes them again at each copied iteration's induction
variable (lowering/pipelined_loop.at_iteration). Checked on the plan, the PTX, and the emulator (race checker
on) against the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import emulate, interpret  # noqa: E402
from text_kernel_support import assignment, entry, ptx  # noqa: E402

RV = "tensor_view<?x64xf32, strides=[64,1]>"
RP = f"partition_view<tile=(1x64), {RV}>"
# rows y[i] = x[i + off] - max(x[i + off]) for i < n - off; INDEX is the loaded row's index
ROWS = f"""
entry @rows(%x: tile<ptr<f32>>, %n: tile<i32>, %xn1: tile<i32>, %xs0: tile<i32>, %xs1: tile<i32>,
            %y: tile<ptr<f32>>, %yn0: tile<i32>, %yn1: tile<i32>, %ys0: tile<i32>, %ys1: tile<i32>,
            %off: tile<i32>) {{
  %t0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %ax = assume div_by<16>, %x : tile<ptr<f32>>
  %ay = assume div_by<16>, %y : tile<ptr<f32>>
  %tx = make_tensor_view %ax, shape = [%n, 64], strides = [64, 1] : tile<i32> -> {RV}
  %ty = make_tensor_view %ay, shape = [%n, 64], strides = [64, 1] : tile<i32> -> {RV}
  %px = make_partition_view %tx : {RP}
  %py = make_partition_view %ty : {RP}
  %m = subi %n, %off : tile<i32>
  %for = for %i in (%c0 to %m, step %c1) : tile<i32> iter_values(%s = %off) -> (tile<i32>) {{
    %j = addi %i, %off : tile<i32>
    %row, %lt = load_view_tko weak %px[INDEX, %c0] token = %t0 : {RP}, tile<i32> -> tile<1x64xf32>, token
    %mx = reduce %row dim=1 identities=[0xFF800000 : f32] : tile<1x64xf32> -> tile<1xf32>
    (%a: tile<f32>, %b: tile<f32>) {{
      %r = maxf %a, %b : tile<f32>
      yield %r : tile<f32>
    }}
    %r2 = reshape %mx : tile<1xf32> -> tile<1x1xf32>
    %bm = broadcast %r2 : tile<1x1xf32> -> tile<1x64xf32>
    %d = subf %row, %bm : tile<1x64xf32>
    %st = store_view_tko weak %d, %py[%i, %c0] token = %t0 : tile<1x64xf32>, {RP}, tile<i32> -> token
    %s1 = addi %s, %c1 : tile<i32>
    continue %s1 : tile<i32>
  }}
  return
}}
"""

AV = "tensor_view<?x?xf16, strides=[?,1]>"
CV = "tensor_view<64x64xf32, strides=[64,1]>"
# C = A[:, 32 koff:] @ B[32 koff:, :] over 64 x 64 tiles, K in steps of 32 from the tile index koff
MATMUL = f"""
entry @mm(%a: tile<ptr<f16>>, %an0: tile<i32>, %k: tile<i32>, %as0: tile<i32>, %as1: tile<i32>,
          %b: tile<ptr<f16>>, %bn0: tile<i32>, %bn1: tile<i32>, %bs0: tile<i32>, %bs1: tile<i32>,
          %c: tile<ptr<f32>>, %cn0: tile<i32>, %cn1: tile<i32>, %cs0: tile<i32>, %cs1: tile<i32>,
          %kt: tile<i32>, %koff: tile<i32>) {{
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %aa = assume div_by<16>, %a : tile<ptr<f16>>
  %ab = assume div_by<16>, %b : tile<ptr<f16>>
  %ac = assume div_by<16>, %c : tile<ptr<f32>>
  %k16 = assume div_by<16>, %k : tile<i32>
  %c64 = constant <i32: 64> : tile<i32>
  %ta = make_tensor_view %aa, shape = [%c64, %k16], strides = [%k16, 1] : tile<i32> -> {AV}
  %tb = make_tensor_view %ab, shape = [%k16, %c64], strides = [%c64, 1] : tile<i32> -> {AV}
  %tc = make_tensor_view %ac, shape = [64, 64], strides = [64, 1] : tile<i32> -> {CV}
  %pa = make_partition_view %ta : partition_view<tile=(64x32), {AV}>
  %pb = make_partition_view %tb : partition_view<tile=(32x64), {AV}>
  %pc = make_partition_view %tc : partition_view<tile=(64x64), {CV}>
  %z = constant <f32: 0.0> : tile<64x64xf32>
  %t0 = make_token : token
  %acc = for %i in (%c0 to %kt, step %c1) : tile<i32> iter_values(%s = %z) -> (tile<64x64xf32>) {{
    %kk = addi %i, %koff : tile<i32>
    %x, %t1 = load_view_tko weak %pa[%c0, %kk] token = %t0 : partition_view<tile=(64x32), {AV}>, tile<i32> -> tile<64x32xf16>, token
    %y, %t2 = load_view_tko weak %pb[%kk, %c0] token = %t0 : partition_view<tile=(32x64), {AV}>, tile<i32> -> tile<32x64xf16>, token
    %d = mmaf %x, %y, %s : tile<64x32xf16>, tile<32x64xf16>, tile<64x64xf32>
    continue %d : tile<64x64xf32>
  }}
  %st = store_view_tko weak %acc, %pc[%c0, %c0] token = %t0 : tile<64x64xf32>, partition_view<tile=(64x64), {CV}>, tile<i32> -> token
  return
}}
"""


def _plans(text: str, gpu: str) -> dict:
    from tileiras.schedule.pipeline import plan_pipelines

    return plan_pipelines(*assignment(text, gpu))


@pytest.mark.parametrize("index, staged", [("%i", True), ("%j", True), ("%s", False)])
def test_a_load_indexed_by_arithmetic_on_the_induction_variable_is_staged(index: str, staged: bool) -> None:
    """The row's index as the induction variable, as `i + off` computed in the body (its `addi` issued with the
    copies), or as a value the loop carries (it changes with every iteration: not staged)."""
    plans = _plans(ROWS.replace("INDEX", index), "sm_90")
    assert bool(plans) == staged
    for plan in plans.values():
        assert plan.pipelined and len(plan.loads) == 1
        assert [op.name for op in plan.index_ops] == (["cuda_tile.addi"] if index == "%j" else [])


@pytest.mark.parametrize("divisor, staged", [("%c2", True), ("%off", False)])
def test_an_index_divided_by_a_runtime_value_is_not_computed_ahead(divisor: str, staged: bool) -> None:
    """Copies issued ahead compute their index for iterations the loop may not run (none where it runs no
    iteration): a division by a constant stays with the copies, one by a runtime value (zero, for all the
    compiler knows) keeps the load in the body."""
    text = ROWS.replace("%j = addi %i, %off : tile<i32>",
                        f"%c2 = constant <i32: 2> : tile<i32>\n    %j = divi %i, {divisor} signed : tile<i32>")
    assert "divi" in text
    plans = _plans(text.replace("INDEX", "%j"), "sm_90")
    assert bool(plans) == staged


def test_the_matmuls_k_offset_is_computed_with_the_copies() -> None:
    plans = _plans(MATMUL, "sm_80")
    (plan,) = plans.values()
    assert len(plan.loads) == 2 and [op.name for op in plan.index_ops] == ["cuda_tile.addi"]
    groups = {node.op.name: node.group for node in plan.graph.nodes if node.op is not None}
    assert groups["cuda_tile.addi"] == groups["cuda_tile.load_view_tko"] == "copies"


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", "sm_120"])
def test_rows_at_an_offset_are_copied_ahead_and_match_the_interpreter(gpu: str, tmp_path: Path) -> None:
    """21 rows from row 3 on through a ring of fewer stages: each copy's row is its own iteration's `i + 3`
    (a copy at the current iteration's index, or at 0, differs from the interpreter in every row)."""
    text = ROWS.replace("INDEX", "%j")
    out, _ = ptx(text, gpu, tmp_path)
    assert "cp.async.bulk.tensor" in out and "mbarrier" in out
    module, _ = entry(text)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((24, 64)).astype(np.float32), np.zeros((24, 64), np.float32), np.int32(3)]
    got, want = emulate(module, args, gpu), interpret(module, args)
    assert np.array_equal(got[1], want[1])
    assert np.array_equal(want[1][:21], args[0][3:] - args[0][3:].max(axis=1, keepdims=True))


@pytest.mark.parametrize("gpu, ahead", [("sm_80", r"cp\.async\.wait_group\s+[1-9]"),
                                        ("sm_90", r"cp\.async\.bulk\.tensor.*mbarrier")])
def test_a_k_range_from_an_offset_is_pipelined_and_matches_the_interpreter(gpu: str, ahead: str,
                                                                           tmp_path: Path) -> None:
    """A split-K range written as `k + koff` over `kt` steps: cp.async groups (sm_80: waiting for all but the
    copies in flight) or TMA (sm_90) copies ahead."""
    import re

    out, _ = ptx(MATMUL, gpu, tmp_path)
    assert re.search(ahead, out)
    module, _ = entry(MATMUL)
    rng = np.random.default_rng(1)
    k, kt, koff = 256, 5, 2
    a = rng.standard_normal((64, k)).astype(np.float16)
    b = rng.standard_normal((k, 64)).astype(np.float16)
    args = [a, b, np.zeros((64, 64), np.float32), np.int32(kt), np.int32(koff)]
    got, want = emulate(module, args, gpu), interpret(module, args)
    lo, hi = 32 * koff, 32 * (koff + kt)
    exact = a[:, lo:hi].astype(np.float64) @ b[lo:hi].astype(np.float64)
    assert np.allclose(want[2], exact, rtol=1e-3, atol=1e-2)
    assert np.allclose(got[2], want[2], rtol=1e-3, atol=1e-2)
