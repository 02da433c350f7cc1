"""Buffer assignment: ring slots from the schedule, sharing disjoint lifetimes, barrier slots, and
fewer stages where a target's shared memory does not hold the rings."""

from __future__ import annotations

import pytest

from tileiras.schedule import buffers as bf
from tileiras.schedule.buffers import PipelinedValue, Ring
from tileiras.schedule.resources import machine
from tileiras.target import caps

DEEPEST = caps("sm_90").max_stages   # the target table's deepest ring

A_TILE = 128 * (64 * 2 + 16)     # a 128x64 f16 tile, 16 bytes of padding a row: 18432 bytes


def _operands(consumed: int) -> list[PipelinedValue]:
    return [PipelinedValue("%a", A_TILE, 0, consumed), PipelinedValue("%b", A_TILE, 0, consumed)]


def test_slots_cover_the_iterations_between_copy_and_first_use() -> None:
    assert PipelinedValue("v", 1, 0, 41).slots(32) == 3      # lands in the 2nd II after: 2 ahead + 1 read
    assert PipelinedValue("v", 1, 0, 32).slots(32) == 2
    assert PipelinedValue("v", 1, 5, 5).slots(32) == 1       # used in its own stage: no ring
    assert PipelinedValue("v", 1, 0, 41).live(32) == (0, 96)


def test_lifetimes_are_compared_modulo_ii() -> None:
    assert bf.disjoint((0, 10), (10, 20), 32)
    assert not bf.disjoint((0, 10), (5, 15), 32)
    assert bf.disjoint((25, 35), (3, 20), 32)                # 25..34 wraps to rows 25..31, 0..2
    assert not bf.disjoint((25, 35), (2, 20), 32)
    assert not bf.disjoint((0, 20), (40, 60), 32)            # 20 + 20 rows cannot fit in 32


def test_disjoint_values_of_one_size_share_a_ring() -> None:
    values = [PipelinedValue("%p", 4096, 0, 0, released=10), PipelinedValue("%q", 4096, 16, 16, released=30),
              PipelinedValue("%r", 4096, 5, 5, released=20), PipelinedValue("%s", 2048, 16, 16, released=30)]
    # q lives after p in every II; r overlaps p; s is disjoint from p but of another size
    assert bf.share(values, 32) == {"%q": "%p"}
    fit = bf.assign(values, 32, 0, 1 << 20, "cp.async", DEEPEST, uniform=False)
    assert fit.rings == (Ring("%p", 2, 4096, 0), Ring("%q", 2, 4096, 0, shares="%p"),
                         Ring("%r", 2, 4096, 8192), Ring("%s", 2, 2048, 16384))
    assert fit.nbytes == 2 * (4096 + 4096 + 2048)


def test_prefetched_values_live_until_their_stage_ends_and_never_share() -> None:
    # the lowering issues every copy of an iteration together and frees slots at one barrier
    assert bf.share(_operands(41), 32) == {}
    assert bf.share(_operands(0), 32) == {}


def test_the_schedule_depth_is_kept_where_it_fits() -> None:
    fit = bf.assign(_operands(41), 32, 0, machine(80).smem_bytes, "cp.async", DEEPEST)
    assert (fit.stages, fit.wanted, fit.nbytes) == (3, 3, 6 * A_TILE)
    assert fit.rings == (Ring("%a", 3, A_TILE, 0), Ring("%b", 3, A_TILE, 3 * A_TILE))
    assert fit.reason == "3 stages as scheduled: 110592 bytes beside 0 in 166912"
    assert (fit.barriers.in_flight, fit.barriers.wait_pending, fit.barriers.nbytes) == (2, 1, 0)



@pytest.mark.parametrize("trips, stages, reason", [
    (2, 2, "2 stages for the loop's 2 iterations"),     # a third slot would never be filled
    (1, 2, "2 stages for the loop's 1 iteration"),      # never fewer than two
    (3, 3, "3 stages as scheduled"), (None, 3, "3 stages as scheduled"),
])
def test_a_static_trip_count_bounds_the_depth(trips, stages: int, reason: str) -> None:
    fit = bf.assign(_operands(41), 32, 0, machine(80).smem_bytes, "cp.async", DEEPEST, trips=trips)
    assert (fit.stages, fit.wanted, fit.nbytes) == (stages, stages, 2 * stages * A_TILE)
    assert fit.reason.startswith(reason + ":"), fit.reason


def test_trip_counts_are_read_from_constant_bounds() -> None:
    from tileiras.frontend import load_module
    from tileiras.schedule.pipeline import trip_count

    text = """
entry @k(%n: tile<i32>) {
  %c0 = constant <i32: 0> : tile<i32>
  %c3 = constant <i32: 3> : tile<i32>
  %c10 = constant <i32: 10> : tile<i32>
  for %i in (%c0 to %c10, step %c3) : tile<i32> {
    continue
  }
  for %j in (%c0 to %n, step %c3) : tile<i32> {
    continue
  }
  return
}
"""
    module = load_module(text.encode(), "k.mlir")
    loops = [op for op in module.walk() if op.name == "cuda_tile.for"]
    assert [trip_count(loop) for loop in loops] == [4, None]

@pytest.mark.parametrize("sm, used, stages", [
    (80, 0, 3), (90, 0, 3), (120, 0, 2),          # 99 KB hold 2 of the 3 wanted
    (80, 60000, 2), (120, 30000, 0),              # beside the kernel's other buffers
])
def test_fewer_stages_where_the_target_does_not_hold_them(sm, used, stages) -> None:
    limit = machine(sm).smem_bytes
    fit = bf.assign(_operands(41), 32, used, limit, "cp.async", DEEPEST)
    assert (fit.stages, fit.wanted, fit.nbytes) == (stages, 3, 2 * A_TILE * max(stages, bf.MIN_STAGES))
    if stages == 0:
        assert fit.barriers is None
        assert fit.reason == f"2 stages of {2 * A_TILE} bytes do not fit beside {used} bytes in {limit}"
    elif stages < 3:
        assert fit.reason == f"3 stages wanted, {stages} fit: {fit.nbytes} bytes beside {used} in {limit}"


def test_mbarriers_take_shared_memory_and_can_cost_a_stage() -> None:
    bars = bf.barriers("mbarrier", 4)
    assert (bars.mbarriers, bars.nbytes, bars.in_flight, bars.wait_pending) == (8, 64, 3, -1)
    rings = 4 * 2 * A_TILE
    assert bf.assign(_operands(100), 32, 0, rings + 64, "mbarrier", DEEPEST).stages == 4
    assert bf.assign(_operands(100), 32, 0, rings + 63, "mbarrier", DEEPEST).stages == 3
    assert bf.assign(_operands(100), 32, 0, rings + 63, "cp.async", DEEPEST).stages == 4   # groups cost nothing
    with pytest.raises(ValueError, match="unknown copy mechanism 'bulk'"):
        bf.barriers("bulk", 2)


def test_tensor_memory_rings_fit_in_tensor_memory() -> None:
    acc = [PipelinedValue("%acc", 64 * 1024, 0, 40, memory="tmem")]
    tmem = machine(100).family.tmem_bytes
    fit = bf.assign(acc, 32, 0, machine(100).smem_bytes, "mbarrier", DEEPEST, tmem_limit=tmem)
    assert (fit.stages, fit.nbytes) == (3, 48)                # 192 KB of 256 KB of TMEM; only barriers in smem
    assert bf.assign(acc, 32, 0, machine(100).smem_bytes, "mbarrier", DEEPEST, tmem_limit=0).stages == 0   # sm_90: none


def test_deep_schedules_are_capped() -> None:
    fit = bf.assign([PipelinedValue("%a", 1024, 0, 1000)], 32, 0, 1 << 20, "cp.async", DEEPEST)
    assert (fit.wanted, fit.stages) == (DEEPEST, DEEPEST)


def test_a_reader_that_holds_its_slot_an_iteration_longer_gets_one_more() -> None:
    """A wgmma group left in flight releases its stage after the next iteration's wait: the ring
    needs a slot more, and the value lives one II longer (so it shares with fewer)."""
    held = PipelinedValue("v", A_TILE, 0, 41, held=1)
    assert held.slots(32) == 4 and held.live(32) == (0, 128)
    fit = bf.assign([held, PipelinedValue("w", A_TILE, 0, 41, held=1)], 32, 0, 1 << 20, "mbarrier", DEEPEST)
    assert fit.stages == fit.wanted == 4
    # where 4 slots do not fit, the assignment falls back as it does for any depth
    tight = bf.assign([held], 32, 0, 3 * A_TILE + 64, "mbarrier", DEEPEST)
    assert (tight.stages, tight.wanted) == (3, 4)
