"""How a kernel stages its tiles (tileiras/tileas/shared_choice.py): the order of the assumptions tried,
and the choice made by plan-shared-memory where its plans predict every buffer."""

from __future__ import annotations

import re
from typing import Optional

import pytest

from tileiras.tileas.shared_choice import Outcome, attempts
from tileiras.tileas.shared_plan import Assumptions

PADDED, UNPADDED = Assumptions(True, 0, False), Assumptions(False, 0, False)


def _run(table: dict[Assumptions, tuple[int, bool]]) -> tuple[Optional[Assumptions], list[Assumptions]]:
    """The assumptions kept and those tried, where attempt a gives table[a] = (excess, refused)
    (absent: it fits, no pipeline refused)."""
    tried: list[Assumptions] = []

    def attempt(assumes: Assumptions) -> Outcome[Assumptions]:
        tried.append(assumes)
        excess, refused = table.get(assumes, (0, False))
        return Outcome(None if excess else assumes, excess, refused)

    return attempts(attempt).result, tried


def test_padded_is_kept_where_it_fits_and_pipelines_everything() -> None:
    assert _run({}) == (PADDED, [PADDED])


@pytest.mark.parametrize("unpadded, kept", [
    ((0, False), UNPADDED),        # the pipeline fits without the padding: worth more than it
    ((0, True), PADDED),           # refused either way: the padding stays
    ((512, False), PADDED),        # unpadded overflows (its bigger pipeline): the padded kernel stays
])
def test_a_refused_pipeline_tries_unpadded_stages(unpadded: tuple[int, bool], kept: Assumptions) -> None:
    assert _run({PADDED: (0, True), UNPADDED: unpadded}) == (kept, [PADDED, UNPADDED])


def test_an_overflow_reserves_room_for_the_loop_body_then_defers_loads() -> None:
    table = {PADDED: (1000, False), UNPADDED: (300, False), Assumptions(False, 300, False): (200, False),
             Assumptions(False, 500, False): (100, False), Assumptions(False, 600, False): (50, False),
             Assumptions(True, 0, True): (0, False)}
    kept, tried = _run(table)
    assert kept == Assumptions(True, 0, True)
    assert tried == [PADDED, UNPADDED, Assumptions(False, 300, False), Assumptions(False, 500, False),
                     Assumptions(False, 600, False), Assumptions(True, 0, True)]


def test_reserving_room_is_kept_once_it_fits() -> None:
    kept, tried = _run({PADDED: (1000, False), UNPADDED: (300, False)})
    assert kept == Assumptions(False, 300, False) and len(tried) == 3


def test_where_everything_overflows_the_last_attempt_says_so() -> None:
    every = {a: (64, False) for a in [Assumptions(p, r, d) for p in (True, False) for d in (False, True)
                                     for r in (0, 64, 128, 192)]}
    outcome_kept, tried = _run(every)
    assert outcome_kept is None
    assert tried[-1] == Assumptions(False, 192, True) and len(tried) == 10


def test_a_complete_plan_chooses_and_the_kernel_is_lowered_once(monkeypatch) -> None:
    """TileGym's group GEMM on sm_120: padded stages leave its pipeline no room, unpadded ones fit:
    the pass chooses unpadded and the lowering runs once, with the same LLVM IR as trying both."""
    import contextlib
    import io
    from pathlib import Path

    from tileiras.frontend import load_module
    from tileiras.lowering import pipeline
    from tileiras.tileas.shared_plan import STRICT_ENV, SharedPlan

    source = Path(__file__).parent / "tilegym" / "bytecode" / "tg_group_gemm_f16_64x128x128.tileirbc"
    monkeypatch.setenv(STRICT_ENV, "1")

    def lower(complete: bool) -> tuple[str, str, list[Assumptions]]:
        tried: list[Assumptions] = []
        lower_once = pipeline._lower_entry

        def counted(*args):   # type: ignore[no-untyped-def]
            tried.append(args[-1])
            return lower_once(*args)

        with monkeypatch.context() as m:
            m.setattr(pipeline, "_lower_entry", counted)
            m.setattr(SharedPlan, "complete", property(lambda self: complete))
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                ir, _ = pipeline.lower_module(load_module(source.read_bytes(), source.name), "sm_120",
                                             print_ir_after_all=True)
        return ir, err.getvalue(), tried

    chosen_ir, dump, tried = lower(True)
    assert tried == [UNPADDED]
    assert "//   staged tiles unpadded: chosen here" in dump
    assert "//   shared-memory plan: kernel 'tg_group_gemm_f16_64x128x128' for sm_120: every buffer predicted" in dump
    retried_ir, dump, tried = lower(False)
    assert tried == [PADDED, UNPADDED]
    assert "//   staged tiles padded: the lowering tries the assumptions in turn" in dump
    # the same code but for the numbers of loop metadata (a counter the padded attempt advanced)
    assert re.sub(r"!1\d{6}\b", "!L", chosen_ir) == re.sub(r"!1\d{6}\b", "!L", retried_ir)


def test_the_schedule_names_the_requests_the_plan_did_not_size(monkeypatch) -> None:
    """A role the plan does not size (here the conversion scratch, taken out of the sizers): the
    schedule's dump says its requests were placed as asked, with their count per role, and the
    lowering tries the assumptions itself."""
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
    assert "//   shared-memory plan: kernel 'k' for sm_90: placed as asked, not predicted: conversion x1" in dump
    assert "//   staged tiles padded: the lowering tries the assumptions in turn (not every buffer predicted)" in dump
