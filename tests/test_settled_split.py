"""The warp split as its loop's copies settle it (an attention's MMA warp kept only where TMA copies every
load, a TMA-fed tcgen05 producer one warp) is decided once, by `plan-shared-memory`, on the very copies
it records for the loop (`settled_split.settle` on `KernelPlan.ring_copies`); the lowering reads the
settled split and the copies, and settles nothing again (no second computation to assert against)."""

from __future__ import annotations

from typing import Any

import pytest

from tileiras.tileas import pipeline_copies, settled_split

from shared_plan_support import corpus_bytecode, lower, watch_lowering


@pytest.mark.parametrize("name,gpu,form", [("fa_f16_q64k64d64", "sm_100", "attention"),
                                           ("cp_matmul_f16_128x256x64", "sm_100", "tcgen05"),
                                           ("cp_matmul_f16_128x256x64", "sm_90", "wgmma")])
def test_the_split_is_settled_once_on_the_recorded_copies(monkeypatch: pytest.MonkeyPatch, name: str, gpu: str,
                                                          form: str) -> None:
    """Attention on sm_100 keeps its MMA warp (TMA copies both K and V), the sm_100 matmul's TMA producer
    is one warp, the sm_90 matmul keeps the wgmma form: each settled, last, on the copies the plan
    records for the loop; nothing settles while a loop is lowered."""
    lowering = watch_lowering(monkeypatch)
    settles: list = []
    recorded: list = []
    settle, settled, decide_all = settled_split.settle, settled_split.settled, pipeline_copies.decide_all

    def settling(split: Any, copies: Any, ring: Any = None, alone: int = 0) -> Any:
        assert not lowering, "the lowering settled the split"
        settles.append((copies, settle(split, copies, ring, alone)))
        return settles[-1][1]

    def deciding(k: Any) -> Any:
        assert not lowering, "the lowering settled the split"
        return settled(k)

    def recording(k: Any) -> Any:
        recorded.append(decide_all(k))
        return recorded[-1]

    monkeypatch.setattr(settled_split, "settle", settling)
    monkeypatch.setattr(settled_split, "settled", deciding)
    monkeypatch.setattr(pipeline_copies, "decide_all", recording)
    ir, _, _ = lower(monkeypatch, corpus_bytecode(name), gpu)
    ((rings, _),) = recorded
    copies, split = settles[-1]      # plan-shared-memory's last step
    assert split.form == form and copies is rings[split.loop]
    assert form != "tcgen05" or split.producers == 32    # TMA-fed: the producer is one warp
    assert "mbarrier" in ir
