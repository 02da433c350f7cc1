"""The row kernels' TMA buffers in pass `plan-shared-memory` (tileiras/tileas/shared_rows.py): the
group of row loads ("row-load", one mbarrier per load) and the stores ("row-store") predicted by
the decisions the lowering follows (tileas/row_copies.py: `group`, `store_copy`), checked strictly
against what the lowering asks for."""

from __future__ import annotations

import re

import pytest

from tileiras.errors import CompileError
from tileiras.ir.record import replace
from tileiras.tileas import shared_stages

from shared_plan_support import corpus_bytecode, lower, plan_section


def _compile(monkeypatch, name: str, gpu: str = "sm_90") -> tuple[str, str, list[bool]]:  # type: ignore[no-untyped-def]
    """(--print-ir-after-all of the corpus kernel, its plan-shared-memory section, per kernel whether
    the plan predicted every request), the check strict."""
    _, dump, checks = lower(monkeypatch, corpus_bytecode(name), gpu)
    return dump, "\n".join(plan_section(dump)), [check.complete for check in checks]


@pytest.mark.parametrize("name, nbytes", [("layernorm_f16_n4096", 8192), ("layernorm_f16_n16384", 32768)])
def test_a_layernorms_row_group_and_store_are_predicted(monkeypatch, name: str, nbytes: int) -> None:
    """x, w and b (a row of f16 each) copied by TMA at x's load: three unpadded buffers alive from
    the group's issue to each load's read, then three mbarriers; y stored through one buffer alive
    while the store runs. Every request of the kernel is predicted and placed at the plan's offset."""
    dump, plan, complete = _compile(monkeypatch, name)
    assert "row-load, row-store" in plan and "placed above the plan" in plan
    loads = re.findall(rf"//     row-load \(staging\) {nbytes} B align 128, live over ops (\d+)\.\.(\d+), "
                       rf"for %\w+, offset (\d+): ", plan)
    assert len(loads) == 3, plan
    assert len({first for first, _, _ in loads}) == 1          # issued together at x's load
    assert [int(offset) for _, _, offset in loads] == [0, nbytes, 2 * nbytes]
    assert f"//     mbarriers (buffer) 24 B align 8, live over its op to the kernel's end, offset {3 * nbytes}: " \
        in plan, plan
    assert re.search(rf"//     row-store \(staging\) {nbytes} B align 128, live over ops (\d+)\.\.\1, offset 0: ",
                     plan), plan
    assert complete == [True]
    assert "error: internal" not in dump and "dropped" not in dump


def test_a_group_cut_by_its_budget_is_predicted_as_cut(monkeypatch) -> None:
    """The group takes what is left of the opt-in limit less row_copies.MARGIN beside the bytes placed
    before it: with a margin leaving room for two rows of 32 KiB only, the plan, deciding by the
    same function, predicts two buffers and two mbarriers, as the lowering asks."""
    from tileiras.target import caps
    from tileiras.tileas import row_copies

    monkeypatch.setattr(row_copies, "MARGIN", caps(90).smem_per_block - 2 * 32768 - 100)
    dump, plan, complete = _compile(monkeypatch, "layernorm_f16_n16384")
    assert plan.count("//     row-load (staging) 32768 B") == 2, plan
    assert "//     mbarriers (buffer) 16 B align 8" in plan, plan
    assert complete == [True] and "error: internal" not in dump


def test_sm_80_predicts_no_row_buffers(monkeypatch) -> None:
    """(No TMA before sm_90: the row roles are predicted, and none is asked for.)"""
    dump, plan, complete = _compile(monkeypatch, "layernorm_f16_n4096", "sm_80")
    assert "row-load, row-store" in plan
    assert not re.search(r"//     (row-load|row-store|mbarriers) ", plan), plan
    assert complete == [True]


def _mispredict(monkeypatch, change) -> None:   # type: ignore[no-untyped-def]
    """shared_stages.predict with each request changed by `change` (None: left out)."""
    predict = shared_stages.predict

    def wrong(*args):   # type: ignore[no-untyped-def]
        found = predict(*args)
        return replace(found, requests=[change(r) for r in found.requests if change(r) is not None])
    monkeypatch.setattr(shared_stages, "predict", wrong)


@pytest.mark.parametrize("role, change, asks", [
    ("row-load", lambda r: replace(r, nbytes=r.nbytes - 128) if r.role == "row-load" else r,
     r"'cuda_tile.load_view_tko' at .* writes 8192 B in the plan's row-load \(staging\) 8064 B align 128"),
    ("row-store", lambda r: None if r.role == "row-store" else r,
     r"'cuda_tile.store_view_tko' at .* asks for a row-store buffer of 8192 B, which the plan does not place"),
    ("mbarriers", lambda r: replace(r, nbytes=8) if r.role == "mbarriers" else r,
     r"'cuda_tile.load_view_tko' at .* writes 24 B in the plan's mbarriers \(buffer\) 8 B align 8"),
])
def test_a_wrong_row_prediction_is_an_internal_error(monkeypatch, role: str, change,  # type: ignore[no-untyped-def]
                                                    asks: str) -> None:
    _mispredict(monkeypatch, change)
    with pytest.raises(CompileError, match=asks):
        _compile(monkeypatch, "layernorm_f16_n4096")
