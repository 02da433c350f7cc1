"""How a kernel stages its tiles (tileiras/tileas/shared_choice.py): the order of the assumptions
plan-shared-memory plans the kernel under, the plan it keeps, and the one lowering under it."""

from __future__ import annotations

from typing import Optional

import pytest

from tileiras.tileas.shared_choice import choose
from tileiras.tileas.shared_plan import Assumptions

PADDED, UNPADDED = Assumptions(True, 0, False), Assumptions(False, 0, False)


class _Plan:
    def __init__(self, assumes: Assumptions, excess: int, refused: bool, hinted: bool = False,
                 unstaged: int = 0) -> None:
        self.assumes, self.excess, self.refused, self.unstaged = assumes, excess, refused, unstaged
        self.share, self.limit = (1, 2) if hinted else (2, 2)     # an occupancy hint's share below the limit


def _run(table: dict[Assumptions, tuple]) -> tuple[Optional[Assumptions], list[Assumptions]]:
    """The assumptions kept (None: the last plan, which overflows) and those planned, where the plan
    under a gives table[a] = (excess, refused[, hinted, unstaged]) (absent: it fits, no pipeline refused)."""
    tried: list[Assumptions] = []

    def plan(assumes: Assumptions) -> _Plan:
        tried.append(assumes)
        return _Plan(assumes, *table.get(assumes, (0, False)))

    kept = choose(plan)
    return (None if kept.excess else kept.assumes), tried


def test_padded_is_kept_where_it_fits_and_pipelines_everything() -> None:
    assert _run({}) == (PADDED, [PADDED])


@pytest.mark.parametrize("unpadded, kept", [
    ((0, False), UNPADDED),        # the pipeline fits without the padding: worth more than it
    ((0, True), PADDED),           # refused either way: the padding stays
    ((512, False), PADDED),        # unpadded overflows (its bigger pipeline): the padded kernel stays
])
def test_a_refused_pipeline_tries_unpadded_stages(unpadded: tuple[int, bool], kept: Assumptions) -> None:
    assert _run({PADDED: (0, True), UNPADDED: unpadded}) == (kept, [PADDED, UNPADDED])


def _reserving(defer: bool, free: bool) -> dict[Assumptions, tuple[int, bool]]:
    """An overflow that reserving room for the loop body never cures (under `defer`, `free`)."""
    return {Assumptions(True, 0, defer, free): (1000, False), Assumptions(False, 0, defer, free): (300, False),
            Assumptions(False, 300, defer, free): (200, False), Assumptions(False, 500, defer, free): (100, False),
            Assumptions(False, 600, defer, free): (50, False)}


def test_an_overflow_reserves_room_for_the_loop_body_then_frees_the_loop_barriers() -> None:
    kept, tried = _run(_reserving(False, False))
    assert kept == Assumptions(True, 0, False, True)
    assert tried == [PADDED, UNPADDED, Assumptions(False, 300, False), Assumptions(False, 500, False),
                     Assumptions(False, 600, False), Assumptions(True, 0, False, True)]


def test_then_defers_loads() -> None:
    kept, tried = _run(_reserving(False, False) | _reserving(False, True))
    assert kept == Assumptions(True, 0, True, True)
    assert len(tried) == 11 and tried[5:] == [Assumptions(True, 0, False, True), Assumptions(False, 0, False, True),
                                              Assumptions(False, 300, False, True), Assumptions(False, 500, False, True),
                                              Assumptions(False, 600, False, True), Assumptions(True, 0, True, True)]


def test_reserving_room_is_kept_once_it_fits() -> None:
    kept, tried = _run({PADDED: (1000, False), UNPADDED: (300, False)})
    assert kept == Assumptions(False, 300, False) and len(tried) == 3


def test_where_everything_overflows_the_last_attempt_says_so() -> None:
    every = {a: (64, False) for a in [Assumptions(p, r, d, f) for p in (True, False) for d in (False, True)
                                     for f in (False, True) for r in (0, 64, 128, 192)]}
    outcome_kept, tried = _run(every)
    assert outcome_kept is None
    assert tried[-1] == Assumptions(False, 192, True, True) and len(tried) == 15


def test_the_pass_chooses_unpadded_stages_and_the_kernel_is_lowered_once(monkeypatch) -> None:
    """TileGym's group GEMM on sm_120, copied by cp.async (its tensor maps made in the kernel where ptxas reads
    PTX 9.4 would fill swizzled stages, padded or not: that choice is not made then): padded stages leave its
    pipeline no room, unpadded ones fit: the pass plans both, keeps unpadded, and the lowering runs once,
    placing every buffer where the plan placed it (the strict check)."""
    import contextlib
    import io
    from pathlib import Path

    from tileiras.codegen import ptxas
    from tileiras.frontend import load_module
    from tileiras.lowering import pipeline
    from tileiras.tileas import shared_plan

    monkeypatch.setattr(ptxas, "ptx_isa_unsupported", lambda version: "an older ptxas")

    source = Path(__file__).parent / "tilegym" / "bytecode" / "tg_group_gemm_f16_64x128x128.tileirbc"
    monkeypatch.setenv(shared_plan.STRICT_ENV, "1")
    lowered: list[Assumptions] = []
    planned: list[Assumptions] = []
    lower_once, plan_once = pipeline._lower_entry, shared_plan._plan
    monkeypatch.setattr(pipeline, "_lower_entry", lambda *args: lowered.append(args[-1]) or lower_once(*args))
    monkeypatch.setattr(shared_plan, "_plan", lambda *args: planned.append(args[-1]) or plan_once(*args))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        pipeline.lower_module(load_module(source.read_bytes(), source.name), "sm_120", print_ir_after_all=True)
    dump = err.getvalue()
    assert planned == [PADDED, UNPADDED] and lowered == [UNPADDED]
    assert "//   staged tiles unpadded: chosen here\n" in dump
    assert "//   shared-memory plan: kernel 'tg_group_gemm_f16_64x128x128' for sm_120: every buffer planned" in dump


def test_the_schedule_names_the_requests_the_plan_did_not_size(monkeypatch) -> None:
    """A role the plan does not size (here the conversion scratch, taken out of the sizers): the
    schedule's dump says its requests were placed above the plan, with their count per role, and that the
    staging was chosen from the buffers predicted."""
    import contextlib
    import io

    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module
    from tileiras.tileas import shared_sizes

    monkeypatch.setattr(shared_sizes, "SIZERS", tuple(s for s in shared_sizes.SIZERS if s[0] != "conversion"))
    text = """
entry @k(%p: tile<ptr<f32>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>, %s1: tile<i32>) {
  %tv = make_tensor_view %p, shape = [%n0, %n1], strides = [%s0, %s1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
  %v = make_partition_view %tv : partition_view<tile=(64x128), tensor_view<?x?xf32, strides=[?,?]>>
  %o = make_partition_view %tv : partition_view<tile=(128x64), tensor_view<?x?xf32, strides=[?,?]>>
  %c0 = constant <i32: 0> : tile<i32>
  %x, %tk = load_view_tko weak %v[%c0, %c0] : partition_view<tile=(64x128), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> tile<64x128xf32>, token
  %t = permute %x [1, 0] : tile<64x128xf32> -> tile<128x64xf32>
  %st = store_view_tko weak %t, %o[%c0, %c0] : tile<128x64xf32>, partition_view<tile=(128x64), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> token
  return
}
"""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        lower_module(load_module(text.encode(), "k.mlir"), "sm_90", print_ir_after_all=True)
    dump = err.getvalue()
    assert "//   shared-memory plan: kernel 'k' for sm_90: placed above the plan, not planned: conversion x1" in dump
    assert "//   staged tiles padded: chosen here, from the buffers predicted (not every role is)" in dump


def _wide(a: Assumptions) -> Assumptions:
    """`a` planned within the target's limit, beyond the occupancy hint's share."""
    return Assumptions(a.padded, a.reserve, a.defer, a.free_barriers, in_share=False)


def test_a_kernel_that_fits_its_occupancy_hints_share_is_kept_there() -> None:
    assert _run({PADDED: (0, False, True)}) == (PADDED, [PADDED])


def test_a_kernel_that_cannot_keep_its_occupancy_hint_is_planned_within_the_targets_limit() -> None:
    """Padded and unpadded, and reserving room against the share, all pass it: the kernel is planned again in
    the same order within the target's limit (its rings as deep as fits there)."""
    table = {PADDED: (100, False, True), UNPADDED: (100, False, True), Assumptions(False, 100, False): (50, False, True),
             Assumptions(False, 150, False): (10, False, True), Assumptions(False, 160, False): (5, False, True),
             _wide(PADDED): (0, False, True)}
    kept, tried = _run(table)
    assert kept == _wide(PADDED)
    assert tried == [PADDED, UNPADDED, Assumptions(False, 100, False), Assumptions(False, 150, False),
                     Assumptions(False, 160, False), _wide(PADDED)]


@pytest.mark.parametrize("wide_unstaged, kept_wide", [(0, True), (2, False)])
def test_a_share_that_leaves_loops_unpipelined_yields_to_the_targets_limit_where_that_pipelines_more(
        wide_unstaged: int, kept_wide: bool) -> None:
    """Within its share the kernel fits only with two loops unpipelined: within the target's limit, where
    those loops are pipelined, it is planned there; where they are not either, the share is kept."""
    table = {PADDED: (0, True, True, 2), UNPADDED: (0, True, True, 2),
             _wide(PADDED): (0, wide_unstaged > 0, True, wide_unstaged),
             _wide(UNPADDED): (0, wide_unstaged > 0, True, wide_unstaged)}
    kept, _ = _run(table)
    assert kept == (_wide(PADDED) if kept_wide else PADDED)
