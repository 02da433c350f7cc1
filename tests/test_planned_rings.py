"""What a pipelined loop's stages hold (each load's staged tile, swizzle and bytes, a CTA pair's half of B,
the mma left in flight: stage_rings.StageRing) is decided once, by `plan-shared-memory` as its walk meets
the loop (shared_stages.predict: the K-major copies given before it decide `retiring`), recorded in its
plan (`SharedPlan.rings`, for every loop with a pipeline plan) and printed in the pass's dump; the
lowering (lowering/pipelined_loop.prepare, `planned_ring`) only reads it, and refuses a plan without it.
A kernel whose staging the plan does not predict has no ring in any loop."""

from __future__ import annotations

from typing import Any

import pytest

from tileiras.errors import CompileError
from tileiras.ir.record import replace
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
def test_the_lowering_reads_each_ring_from_the_plan(monkeypatch: pytest.MonkeyPatch, name: str, gpu: str) -> None:
    """Every ring the lowering lowers is the plan's own; the lowering has no way to give one itself."""
    read: list = []
    planned = pipelined_loop.planned_ring

    def reading(k: Any, op: Any) -> Any:
        read.append((op, planned(k, op)))
        return read[-1][1]

    monkeypatch.setattr(pipelined_loop, "planned_ring", reading)
    _, _, checks = lower(monkeypatch, corpus_bytecode(name), gpu)
    rings = {op: ring for check in checks for op, ring in check.plan.rings.items()}
    assert any(ring for _, ring in read) and all(rings.get(op) is ring for op, ring in read), read
    assert not hasattr(pipelined_loop, "ring_of")


def test_the_lowering_refuses_a_plan_without_the_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan without a pipelined loop's ring is an internal error."""
    predict = shared_stages.predict

    def without(*args: Any) -> Any:
        return replace(predict(*args), rings={})

    monkeypatch.setattr(shared_stages, "predict", without)
    with pytest.raises(CompileError, match="error: internal: the kernel's plan decides no stage ring for the loop at "
                                           ".*plan-shared-memory's rings"):
        lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")
