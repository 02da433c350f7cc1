"""Matrix multiplies on the FMA path (f32 x f32, f64: no tensor-core form) read their operands from the
shared stages their loads are copied into (assign_layouts._fma_reads), as tensor-core operands are: a loop's
loads are pipelined (cp.async rings on sm_80; TMA into unpadded stages, a producer warpgroup and setmaxnreg on
sm_90+), and the FMA chains read a 16-byte run of K (of A stored (M, K)) or of N (of B stored (K, N)) a load
(lowering/ops_reduce._fma_chains). Before, both operands went through registers into scratch every iteration,
and no loop was pipelined. Checked on the plan, the PTX, and the emulator (race checker on) against numpy."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import edit_ptx, emulate, removing  # noqa: E402
from text_kernel_support import assignment, entry, ptx  # noqa: E402


def _matmul(elem: str = "f32", m: int = 64, n: int = 32, kt: int = 32, a_transposed: bool = False) -> str:
    """C (m x n) = sum over K tiles of A (m x kt) @ B (kt x n), K given at launch; A stored K-major
    (M, K) or, `a_transposed`, (K, M) and permuted in the kernel."""
    view = f"tensor_view<?x?x{elem}, strides=[?,1]>"
    cview = f"tensor_view<{m}x{n}x{elem}, strides=[{n},1]>"
    a_tile = (kt, m) if a_transposed else (m, kt)
    pa = f"partition_view<tile=({a_tile[0]}x{a_tile[1]}), {view}>"
    pb = f"partition_view<tile=({kt}x{n}), {view}>"
    pc = f"partition_view<tile=({m}x{n}), {cview}>"
    a_shape = "[%k16, %cm]" if a_transposed else "[%cm, %k16]"
    a_stride = "[%cm, 1]" if a_transposed else "[%k16, 1]"
    a_index = "[%i, %c0]" if a_transposed else "[%c0, %i]"
    load_a = (f"%xt, %t1 = load_view_tko weak %pa{a_index} token = %t0 : {pa}, tile<i32> -> tile<{kt}x{m}x{elem}>, token\n"
              f"    %x = permute %xt [1, 0] : tile<{kt}x{m}x{elem}> -> tile<{m}x{kt}x{elem}>") if a_transposed else \
        f"%x, %t1 = load_view_tko weak %pa{a_index} token = %t0 : {pa}, tile<i32> -> tile<{m}x{kt}x{elem}>, token"
    return f"""
entry @mm(%a: tile<ptr<{elem}>>, %an0: tile<i32>, %an1: tile<i32>, %as0: tile<i32>, %as1: tile<i32>,
          %b: tile<ptr<{elem}>>, %bn0: tile<i32>, %bn1: tile<i32>, %bs0: tile<i32>, %bs1: tile<i32>,
          %c: tile<ptr<{elem}>>, %cn0: tile<i32>, %cn1: tile<i32>, %cs0: tile<i32>, %cs1: tile<i32>,
          %k: tile<i32>) {{
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %cm = constant <i32: {m}> : tile<i32>
  %cn = constant <i32: {n}> : tile<i32>
  %ckt = constant <i32: {kt}> : tile<i32>
  %aa = assume div_by<16>, %a : tile<ptr<{elem}>>
  %ab = assume div_by<16>, %b : tile<ptr<{elem}>>
  %ac = assume div_by<16>, %c : tile<ptr<{elem}>>
  %k16 = assume div_by<16>, %k : tile<i32>
  %ta = make_tensor_view %aa, shape = {a_shape}, strides = {a_stride} : tile<i32> -> {view}
  %tb = make_tensor_view %ab, shape = [%k16, %cn], strides = [%cn, 1] : tile<i32> -> {view}
  %tc = make_tensor_view %ac, shape = [{m}, {n}], strides = [{n}, 1] : tile<i32> -> {cview}
  %pa = make_partition_view %ta : {pa}
  %pb = make_partition_view %tb : {pb}
  %pc = make_partition_view %tc : {pc}
  %steps = divi %k16, %ckt signed : tile<i32>
  %z = constant <{elem}: 0.0> : tile<{m}x{n}x{elem}>
  %t0 = make_token : token
  %acc = for %i in (%c0 to %steps, step %c1) : tile<i32> iter_values(%s = %z) -> (tile<{m}x{n}x{elem}>) {{
    {load_a}
    %y, %t2 = load_view_tko weak %pb[%i, %c0] token = %t0 : {pb}, tile<i32> -> tile<{kt}x{n}x{elem}>, token
    %d = mmaf %x, %y, %s : tile<{m}x{kt}x{elem}>, tile<{kt}x{n}x{elem}>, tile<{m}x{n}x{elem}>
    continue %d : tile<{m}x{n}x{elem}>
  }}
  %st = store_view_tko weak %acc, %pc[%c0, %c0] token = %t0 : tile<{m}x{n}x{elem}>, {pc}, tile<i32> -> token
  return
}}
"""


def _loads(entry) -> list:
    return [op for op in entry.walk() if op.name == "cuda_tile.load_view_tko"]


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_the_fma_paths_loads_are_staged_and_pipelined(gpu: str) -> None:
    from tileiras.schedule.pipeline import plan_pipelines

    entry, layouts = assignment(_matmul(), gpu)
    (mma,) = [op for op in entry.walk() if op.name == "cuda_tile.mmaf"]
    assert mma in layouts.fma_reasons
    loads = _loads(entry)
    assert all(layouts.is_shared_operand(op.results[0]) for op in loads)
    assert all(layouts.fma_rows(op.results[0]) for op in loads)     # both read as stored
    (plan,) = plan_pipelines(entry, layouts).values()
    assert plan.pipelined and set(plan.loads) == set(loads)


def test_a_transposed_operand_is_staged_padded() -> None:
    """A stored (K, M), read along M by the FMAs: staged, but not in an unpadded stage (its reads would
    fall on one bank), so it keeps cp.async beside B's TMA box."""
    entry, layouts = assignment(_matmul(a_transposed=True), "sm_90")
    a_load, b_load = _loads(entry)
    assert layouts.is_shared_operand(a_load.results[0]) and layouts.is_shared_operand(b_load.results[0])
    assert not layouts.fma_rows(a_load.results[0]) and layouts.fma_rows(b_load.results[0])


def test_operands_too_large_to_stage_twice_stay_in_registers() -> None:
    """A 128 x 128 by 128 x 256 f32 product: 192 KB of operands, which no ring of two stages holds on any
    target; they go through registers and the scratch takes them in K slices, as before."""
    entry, layouts = assignment(_matmul(m=128, n=256, kt=128), "sm_90")
    assert not any(layouts.is_shared_operand(op.results[0]) for op in _loads(entry))


@pytest.mark.parametrize("gpu, copies", [
    ("sm_80", r"cp\.async\.(ca|cg)\.shared\.global"),
    ("sm_90", r"cp\.async\.bulk\.tensor\.2d"),
    ("sm_100", r"cp\.async\.bulk\.tensor\.2d"),
    ("sm_120", r"cp\.async\.bulk\.tensor\.2d"),
])
def test_the_fmas_read_16_byte_runs_from_the_stages(gpu: str, copies: str, tmp_path: Path) -> None:
    """The loads are copied ahead (cp.async, or TMA with warp roles), and the FMA loop reads A's rows and B's
    columns four f32 at a time; no operand goes through scratch (plan-shared-memory plans no "reduction")."""
    out, dump = ptx(_matmul(), gpu, tmp_path, "--print-ir-after-all")
    assert re.search(copies, out)
    assert "ld.shared.v4.f32" in out or "ld.shared.v4.b32" in out
    assert "reduction (reduction)" not in dump
    if gpu != "sm_80":
        assert "setmaxnreg" in out


def _run(text: str, gpu: str, k: int, elem=np.float32, m: int = 64, n: int = 32, a_transposed: bool = False,
         seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    module, _ = entry(text)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(elem)
    b = rng.standard_normal((k, n)).astype(elem)
    stored_a = np.ascontiguousarray(a.T) if a_transposed else a
    got = emulate(module, [stored_a, b, np.zeros((m, n), elem), np.int32(k)], gpu)
    return got[2], a.astype(np.float64) @ b.astype(np.float64)


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_the_staged_fma_matmul_matches_numpy(gpu: str) -> None:
    """Five K tiles through rings of fewer stages: each iteration reads its own stage."""
    got, want = _run(_matmul(), gpu, 160)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90"])
def test_a_transposed_a_matches_numpy(gpu: str) -> None:
    got, want = _run(_matmul(a_transposed=True), gpu, 96, a_transposed=True, seed=1)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4)


def test_an_f64_matmul_matches_numpy() -> None:
    """f64: 16-byte runs of two elements."""
    got, want = _run(_matmul("f64", m=32, n=32, kt=16), "sm_90", 64, elem=np.float64, m=32, n=32, seed=2)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-12)


def test_the_race_checker_sees_a_stage_read_before_its_copies_land(monkeypatch, tmp_path: Path) -> None:
    """sm_80's ring: with the wait for the oldest copy group taken out, the FMAs read a stage whose
    cp.async copies may still be in flight."""
    from tileiras.emulator.errors import DeviceFault
    from tileiras.errors import TileirasError

    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    edit_ptx(monkeypatch, removing(r"\tcp\.async\.wait_group\s+\d+;\n"))
    with pytest.raises((DeviceFault, TileirasError)):
        _run(_matmul(), "sm_80", 160)


@pytest.mark.parametrize("gpu, lanes", [("sm_80", 64), ("sm_90", 128)])
def test_the_scheduler_costs_the_fma_path_on_the_fp32_lanes(gpu: str, lanes: int) -> None:
    """The modulo scheduler costs an FMA-path mma as its FMAs on the FP32 lanes (128 x 32 x 64 = 262144 of
    them), not as tensor-core work: the loop is bound by the ALU, its copies land within an iteration, and the
    ring is two stages (costed as mma.sync, this GEMM asked four on sm_90: 176 KB of stages)."""
    from tileiras.schedule.pipeline import plan_pipelines
    from tileiras.schedule.resources import machine
    from tileiras.target import caps

    assert machine(caps(gpu).sm).fma(262144, 0).latency >= 262144 // lanes
    entry, layouts = assignment(_matmul(m=128, kt=64), gpu)
    (plan,) = plan_pipelines(entry, layouts).values()
    assert "(alu)" in plan.describe()[0], plan.describe()[0]
    assert plan.depth <= 2
