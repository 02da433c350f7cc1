"""How a pipelined loop's stages are filled (TMA boxes or cp.async, cluster multicast, a CTA pair's
halves) is decided once, by `plan-shared-memory` (tileiras/tileas/pipeline_copies.py), recorded in the
kernel's plan (`KernelPlan.ring_copies`) and printed in the pass's dump; the lowering
(lowering/pipelined_loop.prepare) reads the decision, refuses a plan without it, and decides nothing."""

from __future__ import annotations

import pytest

from tileiras.errors import CompileError
from tileiras.lowering import pipelined_loop
from tileiras.tileas import pipeline_copies
from tileiras.tileas.pipeline_copies import RingCopies
from tileiras.tileas.tma_boxes import TmaCopy

from shared_plan_support import corpus_bytecode, lower, plan_section


def _copy_lines(dump: str) -> list[str]:
    """The ring copies' lines of the dump's plan-shared-memory section."""
    section = plan_section(dump)
    start = [i for i, line in enumerate(section) if "copies by" in line]
    return [line.strip("/ ") for i, line in enumerate(section) if start and i >= start[0] and "live over" not in line
            and not line.startswith("// shared-memory plan of")]


def _decided(monkeypatch) -> list:   # type: ignore[no-untyped-def]
    """The decisions plan-shared-memory records, as they are made."""
    made: list = []
    decide_all = pipeline_copies.decide_all

    def kept(k):   # type: ignore[no-untyped-def]
        made.append(decide_all(k))
        return made[-1]

    monkeypatch.setattr(pipeline_copies, "decide_all", kept)
    return made


def test_the_tma_copies_are_decided_in_the_middle_levels_dump(monkeypatch) -> None:
    """cuTile's 128x256x64 matmul on sm_90: both loads by TMA (A one 64x128 box, B four 64x64 boxes a
    stage), in plan-shared-memory's dump, before any LLVM; the plan holds them typed, their tensor maps
    not yet numbered (the lowering numbers its hidden parameters)."""
    made = _decided(monkeypatch)
    ir, dump, _ = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")
    assert _copy_lines(dump) == [
        "the loop at kernels/cp_MatMul.py:80:4: copies by TMA",
        "%tile: TMA, 1 box of 64x128 swizzle 128B, 16384 bytes a stage",
        "%tile_32: TMA, 4 boxes of 64x64 swizzle 128B, 32768 bytes a stage"], _copy_lines(dump)
    (decided,) = made
    (copies,) = decided.values()
    assert isinstance(copies, RingCopies) and copies.cluster is None and len(copies.tma) == 2
    assert all(isinstance(t, TmaCopy) and t.slot == -1 for t in copies.tma.values())
    assert "cp.async.bulk.tensor.2d" in ir


def test_a_cta_pairs_and_a_clusters_copies_are_in_the_dump(monkeypatch) -> None:
    """sm_100's CTA pair: each CTA copies half of B; sm_90's 1x4 cluster split: A is multicast in four
    slices, each stage released in the 4 CTAs."""
    _, dump, _ = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_100")
    lines = _copy_lines(dump)
    assert lines[0].endswith("copies by TMA") and "each CTA of the pair 128 elements of box dimension 0" in lines[2]
    _, dump, _ = lower(monkeypatch, corpus_bytecode("tg_matmul_persistent_f16_128x512x64"), "sm_90")
    lines = _copy_lines(dump)
    assert "one slice of 4 multicast to the CTAs sharing it" in lines[1], lines
    assert lines[-1] == "multicast over 4 CTAs, each stage released in 4 CTAs", lines


def test_cp_async_groups_decide_nothing(monkeypatch) -> None:
    """sm_80 hands its stages over with cp.async groups: no decision, none in the dump."""
    made = _decided(monkeypatch)
    _, dump, _ = lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_80")
    assert made == [{}] and _copy_lines(dump) == []


def test_the_lowering_refuses_a_plan_without_the_copies(monkeypatch) -> None:
    """A plan that does not say how a pipelined loop's stages are filled is an internal error: the
    lowering does not decide it itself."""
    monkeypatch.setattr(pipeline_copies, "decide_all", lambda k: {})
    with pytest.raises(CompileError, match="error: internal: the kernel's plan decides no copies for the "
                                           "pipelined loop at .*ring_copies"):
        lower(monkeypatch, corpus_bytecode("cp_matmul_f16_128x256x64"), "sm_90")


@pytest.mark.parametrize("name,gpu", [("cp_matmul_f16_128x256x64", "sm_100"),
                                      ("tg_matmul_persistent_f16_128x512x64", "sm_90")])
def test_the_lowering_decides_no_copies(monkeypatch, name: str, gpu: str) -> None:
    """While a loop is lowered (pipelined_loop.prepare), nothing chooses its copies again."""
    lowering: list[bool] = []
    prepare, choose = pipelined_loop.prepare, pipeline_copies.choose

    def lowered(k, op):   # type: ignore[no-untyped-def]
        lowering.append(True)
        try:
            return prepare(k, op)
        finally:
            lowering.pop()

    def watched(*args, **kwargs):   # type: ignore[no-untyped-def]
        assert not lowering, "the lowering chose a ring's copies"
        return choose(*args, **kwargs)

    monkeypatch.setattr(pipelined_loop, "prepare", lowered)
    monkeypatch.setattr(pipeline_copies, "choose", watched)
    ir, _, _ = lower(monkeypatch, corpus_bytecode(name), gpu)
    assert "cp.async.bulk.tensor" in ir
