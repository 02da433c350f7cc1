"""How a pipelined loop's stages are filled (TMA boxes or cp.async, cluster multicast, a CTA pair's
halves), and whether a loop-invariant operand is copied once by TMA before its loop, is decided once,
by `plan-shared-memory` (tileiras/tileas/pipeline_copies.py), recorded in the kernel's plan
(`KernelPlan.ring_copies`, `once_copies`) and printed in the pass's dump; the lowering
(lowering/pipelined_loop.prepare, load_invariant) reads the decision, refuses a plan without it, and
decides nothing."""

from __future__ import annotations

import pytest

from tileiras.errors import CompileError
from tileiras.tileas import pipeline_copies
from tileiras.tileas.pipeline_copies import OnceCopy, RingCopies
from tileiras.tileas.tma_boxes import TmaCopy

from shared_plan_support import corpus_bytecode, lower, plan_section, watch_lowering


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
    ((decided, shots),) = made
    (copies,) = decided.values()
    assert shots == {}
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
    assert made == [({}, {})] and _copy_lines(dump) == []


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_a_loop_invariant_operand_copied_once_is_in_the_dump(monkeypatch, gpu: str) -> None:
    """Attention's queries, loaded before the KV loop that reads them every iteration: copied once by TMA
    (its own mbarrier), as plan-shared-memory's dump says, beside the loop's ring copies."""
    made = _decided(monkeypatch)
    _, dump, _ = lower(monkeypatch, corpus_bytecode("fa_f16_q64k64d64"), gpu)
    assert _copy_lines(dump) == [
        "the loop at kernels.py:90:4: copies by TMA",
        "%tile_73: TMA, 1 box of 64x64x1 swizzle 128B, 8192 bytes a stage",
        "%tile_76: TMA, 1 box of 64x64x1 swizzle 128B, 8192 bytes a stage",
        "%tile at kernels.py:83:20: copied once by TMA before its loop, 1 box of 64x64x1 swizzle 128B, 8192 bytes"], \
        _copy_lines(dump)
    ((_, shots),) = made
    (shot,) = shots.values()
    assert isinstance(shot, OnceCopy) and isinstance(shot.tma, TmaCopy) and shot.tma.slot == -1 and not shot.why


@pytest.mark.parametrize("name,missing,message", [
    ("cp_matmul_f16_128x256x64", "rings", "decides no copies for the pipelined loop at .*ring_copies"),
    ("fa_f16_q64k64d64", "once", "decides no loop-invariant copies .*once_copies")])
def test_the_lowering_refuses_a_plan_without_the_copies(monkeypatch, name: str, missing: str, message: str) -> None:
    """A plan that does not say how a pipelined loop's stages are filled, or how a loop-invariant
    operand is copied, is an internal error: the lowering does not decide it itself."""
    decide_all = pipeline_copies.decide_all

    def without(k):   # type: ignore[no-untyped-def]
        rings, shots = decide_all(k)
        return ({}, shots) if missing == "rings" else (rings, None)

    monkeypatch.setattr(pipeline_copies, "decide_all", without)
    with pytest.raises(CompileError, match=f"error: internal: the kernel's plan {message}"):
        lower(monkeypatch, corpus_bytecode(name), "sm_90")


@pytest.mark.parametrize("name,gpu", [("cp_matmul_f16_128x256x64", "sm_100"),
                                      ("tg_matmul_persistent_f16_128x512x64", "sm_90"),
                                      ("fa_f16_q64k64d64", "sm_90")])
def test_the_lowering_decides_no_copies(monkeypatch, name: str, gpu: str) -> None:
    """While a loop or a loop-invariant load is lowered (pipelined_loop.prepare, load_invariant),
    nothing chooses its copies again."""
    lowering = watch_lowering(monkeypatch, "prepare", "load_invariant")

    def watched(decide):   # type: ignore[no-untyped-def]
        def deciding(*args, **kwargs):   # type: ignore[no-untyped-def]
            assert not lowering, "the lowering chose copies"
            return decide(*args, **kwargs)
        return deciding

    for name_ in ("choose", "decide", "once"):
        monkeypatch.setattr(pipeline_copies, name_, watched(getattr(pipeline_copies, name_)))
    ir, _, _ = lower(monkeypatch, corpus_bytecode(name), gpu)
    assert "cp.async.bulk.tensor" in ir
