"""The K-major copies sm_90's wgmmas get from the loop around them (kmajor_copies.LoopCopy: whose
operand, the buffer, one slot or two, a copy of B in K halves) are decided once, by `plan-shared-memory`
as its walk meets the loop (shared_stages.predict; beside the bytes it sizes in a kernel whose staging
it does not predict), recorded in its plan (`SharedPlan.kmajor`, for every loop) and printed in the
pass's dump; the lowering (lowering/ops_wgmma.before_loop) only places them, and refuses a plan
without the loop's."""

from __future__ import annotations

from typing import Any

import pytest

from tileiras.errors import CompileError
from tileiras.ir.record import replace
from tileiras.tileas import kmajor_copies, shared_stages

from shared_plan_support import corpus_bytecode, lower, plan_section, watch_lowering


def _copy_lines(dump: str) -> list[str]:
    return [line.strip("/ ") for line in plan_section(dump) if "copied K-major" in line]


def test_the_copies_are_in_the_middle_levels_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    """e4m3 64x64x32: B (N-major, no transposed form) copied into two slots, the group left in flight;
    tf32 128x256x64: B copied in two K halves (whole, it leaves the ring no two stages), one slot."""
    _, dump, _ = lower(monkeypatch, corpus_bytecode("mm_e4m3_64x64x32"), "sm_90")
    assert _copy_lines(dump) == ["the loop at kernels.py:34:4: B of %30 copied K-major into a 64 x 32 swizzled "
                                 "buffer of 2048 B in two slots before it"], dump
    _, dump, _ = lower(monkeypatch, corpus_bytecode("mm_tf32_128x256x64"), "sm_90")
    assert _copy_lines(dump) == ["the loop at kernels.py:34:4: B of %31 copied K-major into a 256 x 32 swizzled "
                                 "buffer of 32768 B in two K halves before it"], dump


@pytest.mark.parametrize("name", ["mm_e4m3_64x64x32", "mm_tf32_128x256x64", "mm_i8_128x128x32"])
def test_the_lowering_places_the_plans_copies_and_decides_none(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Every K-major copy the lowering places is one of the plan's; kmajor_copies.loop_copies never runs
    while a loop is lowered."""
    lowering = watch_lowering(monkeypatch)
    decide = kmajor_copies.loop_copies

    def deciding(*args: Any) -> Any:
        assert not lowering, "the lowering decided a loop's K-major copies"
        return decide(*args)

    monkeypatch.setattr(kmajor_copies, "loop_copies", deciding)
    ir, _, checks = lower(monkeypatch, corpus_bytecode(name), "sm_90")
    copies = [copy for check in checks for given in check.plan.kmajor.values() for copy in given]
    assert copies and "wgmma" in ir


def test_the_lowering_refuses_a_plan_without_the_loops_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan without a loop's K-major copies is an internal error."""
    predict = shared_stages.predict

    def without(*args: Any) -> Any:
        return replace(predict(*args), kmajor={})

    monkeypatch.setattr(shared_stages, "predict", without)
    with pytest.raises(CompileError, match="error: internal: the kernel's plan decides no K-major copies for the "
                                           "loop at .*plan-shared-memory's kmajor"):
        lower(monkeypatch, corpus_bytecode("mm_e4m3_64x64x32"), "sm_90")
