"""The modulo scheduler on its own: MII bounds, II search, Rau placement with eviction, the serial
fallback, the cost evaluator; then the dependence graph and schedule of the realistic matmul."""

from __future__ import annotations

from pathlib import Path

import pytest

from tileiras.schedule import modulo
from tileiras.schedule.ddg import DependenceGraph
from tileiras.schedule.resources import Footprint, Reservation

BYTECODE = Path(__file__).parent / "realistic" / "bytecode"


def _graph(nodes: list[tuple[str, int, list[tuple[str, int, int]]]],
           edges: list[tuple[int, int, int]] = ()) -> DependenceGraph:
    """nodes: (name, latency, [(unit, offset, length)]); edges: (src, dst, distance), latency the src's."""
    g = DependenceGraph([], [])
    for name, latency, rows in nodes:
        g.add(name, Footprint(name, latency, tuple(Reservation(*r) for r in rows)))
    for src, dst, distance in edges:
        g.connect(src, dst, distance=distance, kind="carried" if distance else "data")
    return g


def _check_legal(g: DependenceGraph, s: modulo.Schedule, capacities: dict[str, int]) -> None:
    """Every dependence holds and no modulo row holds more of a unit than it has."""
    for e in g.edges:
        assert s.start[e.dst] >= s.start[e.src] + e.latency - s.ii * e.distance, e
    used: dict[tuple[int, str], int] = {}
    for node in g.nodes:
        for r in node.footprint.reservations:
            for k in range(r.offset, r.offset + r.length):
                cell = ((s.start[node.index] + k) % s.ii, r.unit)
                used[cell] = used.get(cell, 0) + r.count
    assert all(n <= capacities[unit] for (_, unit), n in used.items()), used


# load -> mul -> add -> store, add accumulating into itself: two units, each used twice.
def _chain() -> DependenceGraph:
    return _graph([("load", 3, [("mem", 0, 1)]), ("mul", 2, [("alu", 0, 1)]), ("add", 1, [("alu", 0, 1)]),
                   ("store", 1, [("mem", 0, 1)])], [(0, 1, 0), (1, 2, 0), (2, 3, 0), (2, 2, 1)])


def test_res_mii_is_the_busiest_unit_over_its_capacity() -> None:
    g = _graph([("a", 1, [("alu", 0, 2)]), ("b", 1, [("alu", 0, 3)]), ("c", 1, [("alu", 0, 4), ("mem", 0, 5)])])
    assert modulo.res_mii(g, {"alu": 1, "mem": 1}) == (9, "alu")
    assert modulo.res_mii(g, {"alu": 2, "mem": 1}) == (5, "alu")      # ceil(9 / 2) = 5 = mem's 5
    assert modulo.res_mii(g, {"alu": 3, "mem": 1}) == (5, "mem")


def test_res_mii_rejects_a_unit_the_target_lacks() -> None:
    with pytest.raises(modulo.ScheduleError, match="reserves unit 'tma'"):
        modulo.res_mii(_graph([("copy", 1, [("tma", 0, 1)])]), {"alu": 1})


def test_rec_mii_is_the_worst_cycle_latency_over_its_distance() -> None:
    a_b = [("a", 3, []), ("b", 4, [])]
    assert modulo.rec_mii(_graph(a_b, [(0, 1, 0), (1, 0, 1)])) == 7
    assert modulo.rec_mii(_graph(a_b, [(0, 1, 0), (1, 0, 2)])) == 4      # ceil(7 / 2)
    assert modulo.rec_mii(_graph(a_b, [(0, 1, 0)])) == 1                 # no cycle
    with pytest.raises(modulo.ScheduleError, match="within one iteration: a, b"):
        modulo.rec_mii(_graph(a_b, [(0, 1, 0), (1, 0, 0)]))


def test_group_mii_fits_a_stage_group_and_its_shared_unit_in_one_stage() -> None:
    g = _graph([("x", 4, [("mma", 0, 3)]), ("y", 2, []), ("z", 1, [("mma", 0, 3)])], [(0, 1, 0), (1, 2, 0)])
    for node in g.nodes:
        g.nodes[node.index] = type(node)(node.index, node.name, node.footprint, None, "compute")
    assert modulo.group_chains(g) == ({0: 0, 1: 4, 2: 6}, {"compute": 6})
    assert modulo.group_mii(g) == 7                                   # z starts 6 after x, same stage
    assert modulo.group_mii(g, {"mma": 1}) == 9                       # the next x waits for z's 3 cycles


def test_ii_search_finds_the_known_optimum() -> None:
    g, caps = _chain(), {"mem": 1, "alu": 1}
    s = modulo.modulo_schedule(g, caps)
    assert (s.kind, s.ii, s.res_mii, s.rec_mii, s.bottleneck) == ("modulo", 2, 2, 1, "mem")
    # mul and add both need the alu: add cannot take mul's row (5 = 3 mod 2) and goes to 6
    assert s.start == (0, 3, 6, 7) and s.stages == 4
    assert s.reason == "II = MII, bound by ResMII 2 (mem)"
    _check_legal(g, s, caps)
    assert modulo.evaluate(g, s) == modulo.Cost(ii=2, stages=4, lifetime=3 + 3 + 1 + 2)


def test_a_recurrence_forces_ii_above_res_mii() -> None:
    g = _graph([("load", 5, [("mem", 0, 1)]), ("a", 4, [("alu", 0, 1)]), ("b", 2, [("alu", 0, 1)])],
               [(0, 1, 0), (1, 2, 0), (2, 1, 1)])
    s = modulo.modulo_schedule(g, {"alu": 1, "mem": 1})
    assert (s.kind, s.ii, s.res_mii, s.rec_mii) == ("modulo", 6, 2, 6)
    assert s.start == (0, 5, 9)
    assert s.reason == "II = MII, bound by RecMII 6 (a loop-carried dependence)"
    _check_legal(g, s, {"alu": 1, "mem": 1})


# Three 2-cycle holds of one unit at II 6: A and B, placed first at their earliest cycles 1 and 4,
# leave rows 0 and 3, no two in a row; C must evict A, which then fits at 2.
def _fragmenting() -> DependenceGraph:
    g = _graph([("R", 1, []), ("A", 1, [("U", 0, 2)]), ("B", 1, [("U", 0, 2)]), ("C", 1, [("U", 0, 2)])])
    g.connect(0, 1, latency=1)
    g.connect(0, 2, latency=4)
    return g


def test_placement_backtracks_by_evicting() -> None:
    g = _fragmenting()
    placed = modulo.place_at(g, 6, {"U": 1}, [3, 2, 1, 0], budget=16)
    assert placed == ([0, 2, 4, 0], 5)          # 5 placements for 4 ops: A was placed twice
    assert modulo.place_at(g, 6, {"U": 1}, [3, 2, 1, 0], budget=4) is None
    s = modulo.modulo_schedule(g, {"U": 1})
    assert (s.ii, s.start, s.placements) == (6, (0, 2, 4, 0), 5)
    _check_legal(g, s, {"U": 1})


def test_an_exhausted_budget_moves_on_to_the_next_ii() -> None:
    s = modulo.modulo_schedule(_fragmenting(), {"U": 1}, budget_ratio=1)
    assert (s.kind, s.ii, s.res_mii) == ("modulo", 7, 6)
    assert s.reason == "II 1 above MII (no placement fits below), bound by ResMII 6 (U)"
    _check_legal(_fragmenting(), s, {"U": 1})


def test_the_serial_schedule_is_the_fallback() -> None:
    g, caps = _chain(), {"mem": 1, "alu": 1}
    serial = modulo.serial_schedule(g)
    assert (serial.kind, serial.ii, serial.start, serial.stages) == ("serial", 7, (0, 3, 5, 6), 1)
    capped = modulo.modulo_schedule(g, caps, max_ii=1)
    assert (capped.kind, capped.ii, capped.start) == ("serial", 7, (0, 3, 5, 6))
    assert capped.reason == "MII 2 is past the largest II worth trying (1)"
    # a recurrence as long as the whole iteration: overlapping buys nothing
    g = _graph([("a", 4, [("alu", 0, 1)]), ("b", 2, [("alu", 0, 1)])], [(0, 1, 0), (1, 0, 1)])
    s = modulo.modulo_schedule(g, {"alu": 1})
    assert (s.kind, s.ii) == ("serial", 6)
    assert s.reason == "the modulo schedule at II 6 is no better than one iteration at a time (6)"


def test_long_holds_wrap_onto_their_own_rows() -> None:
    table = modulo.ReservationTable(3, {"U": 2})
    long = Footprint("x", 5, (Reservation("U", 0, 5),))   # rows 0,1,2,0,1: two of row 0 and 1
    assert table.fits(long, 0)
    table.place(0, long, 0)
    assert not table.fits(Footprint("y", 1, (Reservation("U", 0, 1),)), 3)     # row 0 is full
    assert table.fits(Footprint("y", 1, (Reservation("U", 0, 1),)), 2)
    assert table.conflicts(Footprint("y", 1, (Reservation("U", 0, 1),)), 4) == {0}


def _realistic_plan(gpu: str):
    from tileiras.frontend import load_module
    from tileiras.tileas.assign_layouts import LayoutAssignment
    from tileiras.tileas.warps import choose_threads
    from tileiras.schedule.pipeline import plan_pipelines

    module = load_module((BYTECODE / "mm_f16_128x128x64.tileirbc").read_bytes(), "mm.tileirbc")
    entry = next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")
    sm = int(gpu.split("_")[1])
    plans = plan_pipelines(entry, LayoutAssignment(entry, choose_threads(entry, gpu), sm=sm))
    assert len(plans) == 1
    return next(iter(plans.values()))


@pytest.mark.parametrize("gpu, unit, tick, ii_cycles, first_use", [
    # sm_80: mma.sync bound (1M FMAs at 1024/clk); the second 16 KB copy lands 1312 cycles in
    ("sm_80", "mma.sync", 32, 1024, 41),
    # sm_90: wgmma at 2048/clk ties the copies' 2 x 256 cycles of L2 bandwidth
    ("sm_90", "wgmma", 16, 512, 73),
])
def test_the_matmul_k_loop_is_scheduled_from_its_ir(gpu, unit, tick, ii_cycles, first_use) -> None:
    plan = _realistic_plan(gpu)
    g, s = plan.graph, plan.schedule
    assert [n.name for n in g.nodes] == ["load_view_tko", "load_view_tko", "mmaf"]
    assert [n.footprint.op_class for n in g.nodes] == ["copy_async", "copy_async", unit]
    assert [n.group for n in g.nodes] == ["copies", "copies", "compute"]
    # the accumulator recurrence waits for the tensor unit's hold, not for the drain
    carried = [e for e in g.edges if e.distance]
    assert [(e.src, e.dst, e.latency) for e in carried] == [(2, 2, 32)]
    assert (g.tick, s.kind, s.ii * g.tick) == (tick, "modulo", ii_cycles)
    assert plan.first_use == (first_use, first_use) and plan.issue == 0


def test_the_chosen_ii_and_stages_are_in_the_dump_and_the_remark(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    result = subprocess.run([sys.executable, "-m", "tileiras", "--no-cache", "--emit=llvm", "--print-ir-after-all",
                             "--remarks-passed=memory", "--gpu-name", "sm_80",
                             str(BYTECODE / "mm_f16_128x128x64.tileirbc"), "-o", str(tmp_path / "mm.ll")],
                            capture_output=True, text=True, cwd=root, timeout=300)
    assert result.returncode == 0, result.stderr
    dump = result.stderr.split("IR Dump After schedule", 1)[1].split("IR Dump After lower-to-llvm", 1)[0]
    assert ("modulo schedule, II 1024 cycles (32 ticks of 32; ResMII 32, RecMII 32): II = MII, "
            "bound by ResMII 32 (mma.sync); 2 schedule stages") in dump
    assert "stage 0: load_view_tko@0 load_view_tko@352\n" in dump and "stage 1: mmaf@1312\n" in dump
    assert ("3-stage cp.async pipeline of 2 tile loads, 35840 bytes a stage, copies 2 iterations ahead "
            "(3 stages as scheduled: 107520 bytes beside 0 in 166912; "
            "3 cp.async groups (2 in flight, wait_group 1) and the CTA barrier)") in dump
    remark = result.stdout.split("name: RemarkPipelineDepth", 1)[1].split("in function", 1)[0]
    for note in ("Stages = 3", "II = 1024 cycles", "WantedStages = 3",
                 "reason: II = MII, bound by ResMII 32 (mma.sync) (in ticks of 32 cycles); 3 stages as scheduled"):
        assert note in remark, remark


def test_a_group_longer_than_a_stage_cannot_be_placed() -> None:
    g = _graph([("x", 5, [("alu", 0, 1)]), ("y", 1, [("alu", 0, 1)])], [(0, 1, 0)])
    for node in g.nodes:
        g.nodes[node.index] = type(node)(node.index, node.name, node.footprint, None, "compute")
    assert modulo.place_at(g, 5, {"alu": 1}, [1, 0], budget=10) is None      # y starts 5 after x
    assert modulo.place_at(g, 6, {"alu": 1}, [1, 0], budget=10) == ([0, 5], 2)


def test_a_kernel_planned_twice_is_scheduled_once(monkeypatch) -> None:
    """128x256 tf32 on sm_80: the padded stages do not fit, so plan-shared-memory plans the kernel
    again unpadded (whose stages do not fit either: the padded plan is kept, tileas/shared_choice.py);
    both plans, and the one lowering, take the one modulo schedule made before them."""
    from tileiras.bytecode.reader import read_module
    from tileiras.lowering import pipeline
    from tileiras.schedule import pipeline as plans
    from tileiras.tileas import shared_plan

    lowered, planned, scheduled = [], [], []
    real_lower, real_plan, real_schedule = pipeline._lower_entry, shared_plan._plan, plans.modulo_schedule
    monkeypatch.setattr(pipeline, "_lower_entry", lambda *a: lowered.append(a[-1]) or real_lower(*a))
    monkeypatch.setattr(shared_plan, "_plan", lambda *a: planned.append(a[-1]) or real_plan(*a))
    monkeypatch.setattr(plans, "modulo_schedule", lambda *a, **kw: scheduled.append(1) or real_schedule(*a, **kw))
    name = "mm_tf32_128x256x64"
    pipeline.lower_module(read_module((BYTECODE / f"{name}.tileirbc").read_bytes(), name), "sm_80")
    assert [assumes.padded for assumes in planned] == [True, False]
    assert [assumes.padded for assumes in lowered] == [True]
    assert len(scheduled) == 1


# a row loop storing what it computes from each row it loads; its load takes TOKEN
_ROWS = """
entry @rows(%x: tile<ptr<f32>>, %y: tile<ptr<f32>>, %n: tile<i32>) {
  %t0 = make_token : token
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %c64 = constant <i32: 64> : tile<i32>
  %ax = assume div_by<16>, %x : tile<ptr<f32>>
  %ay = assume div_by<16>, %y : tile<ptr<f32>>
  %tx = make_tensor_view %ax, shape = [%n, 64], strides = [64, 1] : tile<i32> -> tensor_view<?x64xf32, strides=[64,1]>
  %ty = make_tensor_view %ay, shape = [%n, 64], strides = [64, 1] : tile<i32> -> tensor_view<?x64xf32, strides=[64,1]>
  %px = make_partition_view %tx : partition_view<tile=(1x64), tensor_view<?x64xf32, strides=[64,1]>>
  %py = make_partition_view %ty : partition_view<tile=(1x64), tensor_view<?x64xf32, strides=[64,1]>>
  %for = for %i in (%c0 to %n, step %c1) : tile<i32> iter_values(%tok = %t0) -> (token) {
    %row, %lt = load_view_tko weak %px[%i, %c0] token = %TOKEN : partition_view<tile=(1x64), tensor_view<?x64xf32, strides=[64,1]>>, tile<i32> -> tile<1x64xf32>, token
    %m = reduce %row dim=1 identities=[0xFF800000 : f32] : tile<1x64xf32> -> tile<1xf32>
    (%a: tile<f32>, %b: tile<f32>) {
      %mx = maxf %a, %b : tile<f32>
      yield %mx : tile<f32>
    }
    %r = reshape %m : tile<1xf32> -> tile<1x1xf32>
    %bm = broadcast %r : tile<1x1xf32> -> tile<1x64xf32>
    %d = subf %row, %bm : tile<1x64xf32>
    %st = store_view_tko weak %d, %py[%i, %c0] token = %tok : tile<1x64xf32>, partition_view<tile=(1x64), tensor_view<?x64xf32, strides=[64,1]>>, tile<i32> -> token
    continue %st : token
  }
  return
}
"""


@pytest.mark.parametrize("token, staged", [("%t0", True), ("%tok", False)])
def test_a_loops_stores_hold_back_only_the_loads_their_tokens_order(token: str, staged: bool) -> None:
    """Tile IR orders weak memory ops through tokens only: a row loop that stores each result may still
    load the next rows ahead where its loads do not take the stores' tokens (a softmax writing another
    tensor), and not where a load takes the token the previous iteration's store carried."""
    from tileiras.frontend import load_module
    from tileiras.schedule.pipeline import plan_pipelines
    from tileiras.tileas.assign_layouts import LayoutAssignment
    from tileiras.tileas.warps import choose_threads

    module = load_module(_ROWS.replace("%TOKEN", token).encode(), "rows.mlir")
    entry = next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")
    plans = plan_pipelines(entry, LayoutAssignment(entry, choose_threads(entry, "sm_90"), sm=90))
    assert bool(plans) == staged
    assert all(plan.pipelined and len(plan.loads) == 1 for plan in plans.values())
