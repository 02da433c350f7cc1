"""What a pipelined loop's stages hold (each load's staged tile, swizzle and bytes, a CTA pair's half of B,
the mma left in flight: stage_rings.StageRing) is decided once, by `plan-shared-memory` as its walk meets
the loop (shared_stages.predict: the K-major copies given before it decide `retiring`), recorded in its
plan (`SharedPlan.rings`) and printed in the pass's dump; the lowering (lowering/pipelined_loop.prepare,
`planned_ring`) reads it, and refuses a plan that predicts the staging without it. Only where the plan
does not predict the kernel's staging, or the lowering voided it, does the lowering give the ring itself."""

from __future__ import annotations

from typing import Any

import pytest

from tileiras.errors import CompileError
from tileiras.lowering import pipelined_loop
from tileiras.tileas import shared_stages

from shared_plan_support import corpus_bytecode, lower, plan_section


def _ring_lines(dump: str) -> list[str]:
    return [line.strip("/ ") for line in plan_section(dump)
            if "a stage holds" in line or "left in flight" in line or "a CTA pair runs" in line]


def test_the_ring_is_in_the_middle_levels_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuTile's 128x256x64 matmul: on sm_90 both stages swizzled, the wgmma's group left in flight; on
    sm_100 a CTA pair, each CTA staging half of B (8192 + 16384 bytes a stage)."""
    _, dump, _ = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")
    assert _ring_lines(dump) == [
        "the loop at kernels/cp_MatMul.py:80:4: a stage holds %tile 16384 B swizzled, %tile_32 32768 B swizzled",
        "the loop at kernels/cp_MatMul.py:80:4: mma %30 left in flight, reading its stage an iteration longer"], dump
    _, dump, _ = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_100")
    assert _ring_lines(dump) == [
        "the loop at kernels/cp_MatMul.py:80:4: a stage holds %tile 8192 B swizzled, %tile_33 16384 B swizzled",
        "the loop at kernels/cp_MatMul.py:80:4: a CTA pair runs %34, each CTA staging half of %tile_33"], dump


@pytest.mark.parametrize("name,gpu", [("cp_matmul_f16_128x256x64", "sm_90"), ("cp_matmul_f16_128x256x64", "sm_100"),
                                      ("cp_matmul_f16_128x256x64", "sm_80"),
                                      ("tg_matmul_persistent_f16_128x512x64", "sm_90"), ("fa_f16_q64k64d64", "sm_100")])
def test_the_lowering_gives_no_ring_itself(monkeypatch: pytest.MonkeyPatch, name: str, gpu: str) -> None:
    """Where the plan predicts the kernel's staging, the lowering reads each loop's ring from it."""
    def refused(*args: Any) -> Any:
        raise AssertionError("the lowering gave a ring itself")

    monkeypatch.setattr(pipelined_loop, "ring_of", refused)
    _, _, checks = lower(monkeypatch, corpus_bytecode(name), gpu)
    assert checks and all(check.plan.rings for check in checks)


def test_the_lowering_refuses_a_plan_without_the_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that predicts the staging but not a pipelined loop's ring is an internal error."""
    predict = shared_stages.predict

    def without(*args: Any) -> Any:
        staged = predict(*args)
        return None if staged is None else (*staged[:4], {})

    monkeypatch.setattr(shared_stages, "predict", without)
    with pytest.raises(CompileError, match="error: internal: the kernel's plan has no stage ring for the loop at "
                                           ".*plan-shared-memory's rings"):
        lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")


def test_a_kernel_the_plan_does_not_stage_gets_its_ring_from_the_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that does not predict the staging (shared_stages.predict: None) has no rings: the lowering
    gives the ring itself, beside the buffers it placed (as before the plan recorded them): the wgmma still
    keeps its group in flight."""
    given: list = []
    ring_of = pipelined_loop.ring_of

    def giving(k: Any, op: Any) -> Any:
        given.append(op)
        return ring_of(k, op)

    monkeypatch.setattr(shared_stages, "predict", lambda *args: None)
    monkeypatch.setattr(pipelined_loop, "ring_of", giving)
    ir, _, checks = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")
    assert given and not any(check.plan.rings for check in checks) and "wgmma.wait_group.sync.aligned(i64 1)" in ir
