"""Whether a pipelined loop's mbarriers are freed after it (their bytes then serve the buffers after the
loop; the loop invalidates them and a CTA barrier follows) or kept to the kernel's end is decided once,
by `plan-shared-memory` (tileiras/tileas/warp_roles.frees_barriers), recorded in the kernel's plan
(`KernelPlan.barriers_freed`) and printed in the pass's dump; the lowering
(lowering/pipelined_loop.prepare) reads the decision, refuses a plan without it, and decides nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tileiras.errors import CompileError
from tileiras.tileas import warp_roles

from shared_plan_support import corpus_bytecode, lower, plan_section, watch_lowering

ROOT = Path(__file__).resolve().parent.parent


def _barrier_lines(dump: str) -> list[str]:
    return [line.strip("/ ") for line in plan_section(dump) if "its mbarriers" in line]


def test_kept_barriers_are_in_the_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    """cuTile's 128x256x64 matmul on sm_90 fits with its mbarriers alive to the kernel's end: the dump says so."""
    _, dump, _ = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")
    assert _barrier_lines(dump) == ["the loop at kernels/cp_MatMul.py:80:4: its mbarriers kept to the kernel's end"]


def test_cp_async_groups_have_no_barriers_to_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """sm_80 hands its stages over with cp.async groups: no mbarriers, no decision."""
    _, dump, _ = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_80")
    assert _barrier_lines(dump) == []


def free_barriers_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan as shared_choice does where nothing else fits: the loops' mbarriers freed after their loops."""
    from tileiras.tileas import shared_choice

    monkeypatch.setattr(shared_choice, "choose",
                        lambda plan: shared_choice._padded_or_not(plan, defer=False, free=True))


def test_freed_barriers_are_in_the_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    """sm_120's sub-tiled 128 x 256 GEMM: its column halves' 64 KB exchange after the loop fits with the loop's
    mbarriers kept, above every data buffer (shared_plan.place); planned with them freed (shared_choice's
    fallback), the plan records it, and the lowering, reading it, invalidates them and meets the CTA at a
    barrier."""
    for sub in ("tests/generated", "tests/realistic", "benchmarks"):
        monkeypatch.syspath_prepend(str(ROOT / sub))
    import export
    import grammar

    v = grammar.parse("g_gemm_f16_rr_128x256x32_zero_tiles_subtile_aligned_h0_v13p2")
    bytecode = export.bytecode(v, "sm_120").read_bytes()
    ir, dump, _ = lower(monkeypatch, bytecode, "sm_120")
    (line,) = _barrier_lines(dump)
    assert line.endswith(": its mbarriers kept to the kernel's end"), line
    free_barriers_first(monkeypatch)
    ir, dump, _ = lower(monkeypatch, bytecode, "sm_120")
    (line,) = _barrier_lines(dump)
    assert line.endswith(": its mbarriers freed after it (invalidated, then a CTA barrier)"), line
    assert "mbarrier.inval" in ir


def test_the_lowering_refuses_a_plan_without_the_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that does not say whether a pipelined loop's mbarriers are freed is an internal error."""
    monkeypatch.setattr(warp_roles, "barriers_freed", lambda *args: {})
    with pytest.raises(CompileError, match="error: internal: the kernel's plan decides no mbarrier lifetime for "
                                           "the pipelined loop at .*barriers_freed"):
        lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")


@pytest.mark.parametrize("name,gpu", [("cp_matmul_f16_128x256x64", "sm_90"),
                                      ("tg_matmul_persistent_f16_128x512x64", "sm_90")])
def test_the_lowering_decides_no_lifetime(monkeypatch: pytest.MonkeyPatch, name: str, gpu: str) -> None:
    """While a loop is lowered (pipelined_loop.prepare), nothing decides its mbarriers' lifetime again;
    plan-shared-memory did, for every loop the lowering then reads it for."""
    lowering = watch_lowering(monkeypatch)
    decided: list = []
    frees = warp_roles.frees_barriers

    def deciding(split: Any, loop: Any, entry: Any, free: bool) -> bool:
        assert not lowering, "the lowering decided the mbarriers' lifetime"
        decided.append(loop)
        return frees(split, loop, entry, free)

    monkeypatch.setattr(warp_roles, "frees_barriers", deciding)
    ir, _, _ = lower(monkeypatch, corpus_bytecode(name), gpu)
    assert decided and "mbarrier.init" in ir
