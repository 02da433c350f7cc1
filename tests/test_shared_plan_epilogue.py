"""Pass `plan-shared-memory`: the epilogue buffers of an mma accumulator's store ("restage",
"tma-store"; tileiras/tileas/shared_epilogue.py), decided by tileas/epilogue_forms.epilogue for the
plan and the lowering alike, and checked against the lowering's requests."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from tileiras.errors import CompileError
from tileiras.ir.record import replace
from tileiras.lowering.pipeline import lower_module
from tileiras.tileas.shared_plan import STRICT_ENV

from shared_plan_support import corpus_bytecode, lower, plan_section

ROOT = Path(__file__).resolve().parents[1]


def _corpus(name: str, gpu: str) -> str:
    """--print-ir-after-all of a corpus kernel (tests/realistic or tests/tilegym bytecode)."""
    from tileiras.bytecode.reader import read_module

    path = next((ROOT / "tests").glob(f"*/bytecode/{name}.tileirbc"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        lower_module(read_module(path.read_bytes(), str(path)), gpu, print_ir_after_all=True)
    return err.getvalue()


def _planned(monkeypatch, name: str, gpu: str) -> tuple[str, str, list]:   # type: ignore[no-untyped-def]
    """(what compiling the corpus kernel printed, its plan-shared-memory section, per kernel whether
    the check found every request predicted), the check strict."""
    _, dump, checks = lower(monkeypatch, corpus_bytecode(name), gpu)
    return dump, "\n".join(plan_section(dump)), [check.complete for check in checks]


@pytest.mark.parametrize("gpu, request_", [
    # 128 x 128 f16 restaged whole, rows padded by 16 bytes, over the freed rings
    ("sm_80", "restage (epilogue) 34816 B align 128, live over ops 78..78, the buffers released before it, offset 0: "),
    # stored by TMA from wgmma's swizzled layout
    ("sm_90", "tma-store (epilogue) 32768 B align 1024, live over ops 78..78, the buffers released before it, offset 0: "),
    # and from mma.sync's fragments written in that layout (sm_120 has TMA: NVIDIA's stores this tile by it)
    ("sm_120", "tma-store (epilogue) 32768 B align 1024, live over ops 78..78, the buffers released before it, offset 0: "),
])
def test_a_matmuls_epilogue_is_predicted_and_the_kernel_complete(monkeypatch, gpu: str, request_: str) -> None:
    """128x128x64 f16: the store's buffer was the kernel's only request the plan did not predict;
    now every request is, each at its planned offset (the buffers released at the store first)."""
    dump, plan, complete = _planned(monkeypatch, "mm_f16_128x128x64", gpu)
    predicted = plan.splitlines()[1].split("predicted roles: ")[1].split(";")[0].split(", ")
    assert {"restage", "tma-store"} <= set(predicted), plan
    assert f"//     {request_}%29 at kernels.py:41:4" in plan, plan
    assert complete and all(complete) and "dropped" not in dump and "error: internal" not in dump


def test_a_tile_larger_than_the_freed_buffers_is_restaged_a_chunk_of_rows_at_a_time(monkeypatch) -> None:
    """sm_80 tf32 128x256: the f32 accumulator (133120 B padded) is larger than the buffers its
    staged loads took (101376 B): half its rows at a time."""
    dump, plan, complete = _planned(monkeypatch, "mm_tf32_128x256x64", "sm_80")
    assert "//     restage (epilogue) 66560 B align 128, live over ops 80..80, the buffers released before it, " \
           "offset 0: " in plan, plan
    assert complete and all(complete)


def test_a_tma_store_larger_than_the_freed_buffers_goes_through_two_column_chunks(monkeypatch) -> None:
    """sm_90 i8 128x256, its B copied K-major in one slot (`kmajor_copies.two_slots` refused, as for a loop
    whose ring has no room for second slots): the i32 accumulator (128 KB swizzled) is larger than the
    freed buffers (114752 B): two buffers of 64 columns, written in turn. With the two slots it gets by
    default, the freed buffers hold it whole."""
    from tileiras.tileas import kmajor_copies

    dump, plan, complete = _planned(monkeypatch, "mm_i8_128x256x64", "sm_90")
    assert "//     tma-store (epilogue) 131072 B align 1024, live over ops 78..78, the buffers released before it, " \
           "offset 0: " in plan, plan
    monkeypatch.setattr(kmajor_copies, "two_slots", lambda *args: False)
    dump, plan, complete = _planned(monkeypatch, "mm_i8_128x256x64", "sm_90")
    assert "//     tma-store (epilogue) 65536 B align 1024, live over ops 78..78, the buffers released before it, " \
           "offset 0: " in plan, plan
    assert complete and all(complete)


def test_a_persistent_kernels_restaging_is_planned_beside_what_its_loop_keeps_alive(monkeypatch) -> None:
    """A store in the persistent loop restages through bytes nothing alive in the loop uses (the
    rings), alive over the whole loop; nothing is released."""
    dump, plan, complete = _planned(monkeypatch, "tg_matmul_persistent_f16_64x64x32", "sm_80")
    assert "//     restage (epilogue) 9216 B align 128, live over ops 52..82, offset 58368: " in plan, plan
    assert complete and all(complete)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_120"])
def test_a_persistent_kernels_tma_store_is_planned_beside_what_its_loop_keeps_alive(monkeypatch, gpu: str) -> None:
    """On a target with TMA the store in the persistent loop goes by TMA (as NVIDIA's), through a swizzled
    buffer of its own beside the rings, alive over the whole loop; nothing is released."""
    dump, plan, complete = _planned(monkeypatch, "tg_matmul_persistent_f16_64x64x64", gpu)
    assert "//     tma-store (epilogue) 8192 B align 1024, live over ops 51..81, offset " in plan, plan
    assert "restage (epilogue)" not in plan and "released" not in plan, plan
    assert complete and all(complete)


@pytest.mark.parametrize("gpu, role, asks", [
    ("sm_80", "restage", r"'cuda_tile.store_view_tko' at .* writes 34816 B in the plan's restage \(epilogue\) 34800 B "
                         r"align 128, live over ops 78..78"),
    ("sm_90", "tma-store", r"'cuda_tile.store_view_tko' at .* writes 32768 B in the plan's tma-store \(epilogue\) "
                           r"32752 B align 1024, live over ops 78..78"),
])
def test_a_wrong_epilogue_prediction_is_an_internal_error(monkeypatch, gpu: str, role: str, asks: str) -> None:
    from tileiras.tileas import shared_stages

    predict = shared_stages.predict

    def wrong(*args):   # type: ignore[no-untyped-def]
        found = predict(*args)
        return replace(found, requests=[replace(r, nbytes=r.nbytes - 16) if r.role == role else r
                                        for r in found.requests])

    monkeypatch.setattr(shared_stages, "predict", wrong)
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(CompileError, match=asks):
        _corpus("mm_f16_128x128x64", gpu)


def test_an_epilogue_the_plan_did_not_decide_is_an_internal_error(monkeypatch) -> None:
    """The lowering reads each store's epilogue from the plan (lowering/epilogue.decided); it decides none."""
    from tileiras.tileas import shared_stages

    monkeypatch.setattr(shared_stages, "epilogue", lambda facts, op, asked, decisions: [])
    with pytest.raises(CompileError, match=r"error: internal: the kernel's plan decides no epilogue for the store at "
                                           r".*plan-shared-memory's epilogues"):
        _corpus("mm_f16_128x128x64", "sm_80")


def test_after_a_buffer_the_plan_does_not_size_the_epilogue_keeps_its_planned_offset(monkeypatch) -> None:
    """MoE on sm_80: an mma's restaged operand ("mma-stage", here not sized by the plan) comes before
    the store and goes above the plan; the lowering decides the same restaging beside it as the plan
    beside its own buffers, so the prediction holds, at the plan's offset."""
    from tileiras.tileas import shared_operands, shared_plan

    monkeypatch.setattr(shared_operands, "ROLES", ())
    asked = []
    buffer = shared_plan.PlanReader.buffer

    def record(self, op, role, needs, subject=None):   # type: ignore[no-untyped-def]
        planned = self.complete
        found = buffer(self, op, role, needs, subject)
        asked.append((role, planned, found[1] if found is not None else None))
        return found

    monkeypatch.setattr(shared_plan.PlanReader, "buffer", record)
    dump, plan, complete = _planned(monkeypatch, "cp_moe_bf16_down_128x128x64", "sm_80")
    assert "//     restage (epilogue) 34816 B align 128, live over ops 187..187, the buffers released before it, " \
           "offset 0: " in plan, plan
    assert [role for role, _, _ in asked] == ["ring", "mma-stage", "conversion", "conversion", "conversion", "restage"]
    assert asked[-1] == ("restage", False, 0) and "error: internal" not in dump
    assert complete and not any(complete)


def test_beside_a_buffer_the_plan_does_not_size_the_epilogue_is_still_the_plans(monkeypatch) -> None:
    """MoE on sm_90: the plan restages half the rows at a time beside the 32800 bytes it placed. With the
    mma's restaged operand not sized by the plan (placed above it by the lowering), the store's epilogue
    is still the plan's, at the plan's offset: the lowering decides none (before, it decided the whole tile
    beside its own placement, and the plan's decisions were dropped from the store on). (Planned,
    shared_operands.py, the plan decides beside that buffer too: the whole tile,
    tests/test_shared_plan_operands.py.)"""
    from tileiras.tileas import shared_operands

    monkeypatch.setattr(shared_operands, "ROLES", ())
    dump, plan, _ = _planned(monkeypatch, "cp_moe_bf16_down_128x128x64", "sm_90")
    assert "//     restage (epilogue) 17408 B align 128, " in plan, plan
    assert "placed above the plan, not planned: mma-stage x1" in dump and "error: internal" not in dump

def test_attentions_o_on_sm_100_is_stored_by_tma_or_restaged_as_predicted(monkeypatch) -> None:
    """sm_100's warp-specialized attention stores O by TMA from its fragments where the bytes are
    there ("tmem-epilogue", shared_tcgen05.py): then the store has no epilogue of its own; where they
    are not (here: told so, for the plan and the lowering alike), it stores O by TMA through the freed
    buffers as a matmul's store would ("tma-store", epilogue_forms), or, without TMA's epilogue (here:
    told so too), restages it."""
    from tileiras.tileas import tcgen05_buffers

    dump, plan, complete = _planned(monkeypatch, "fa_bf16_q128k64d128", "sm_100")
    assert "tmem-epilogue (epilogue)" in plan and "restage (epilogue)" not in plan, plan
    assert complete == [True] and "error: internal" not in dump
    monkeypatch.setattr(tcgen05_buffers, "tma_stage", lambda *args, **kwargs: None)
    dump, plan, complete = _planned(monkeypatch, "fa_bf16_q128k64d128", "sm_100")
    assert "tmem-epilogue (epilogue)" not in plan and "tma-store (epilogue)" in plan, plan
    assert "restage (epilogue)" not in plan, plan
    assert complete == [True] and "error: internal" not in dump
    from tileiras.tileas import epilogue_forms

    monkeypatch.setattr(epilogue_forms, "_tma_staging", lambda *args, **kwargs: None)
    dump, plan, complete = _planned(monkeypatch, "fa_bf16_q128k64d128", "sm_100")
    assert "tma-store (epilogue)" not in plan and "restage (epilogue)" in plan, plan
    assert complete == [True] and "error: internal" not in dump


def test_a_pointer_store_that_does_not_restage_converts_through_predicted_scratch(monkeypatch) -> None:
    """MoE on sm_80 scatters its 128x128 bf16 tile through pointers in 16-byte runs; where the epilogue
    does not restage it (here: told not to, for the plan and the lowering alike), the fragments go to
    the pointers' layout through conversion scratch, which the plan predicts ("store-conversion")."""
    from tileiras.tileas import epilogue_forms

    decide = epilogue_forms.epilogue
    monkeypatch.setattr(epilogue_forms, "epilogue", lambda k, op, *rest: None if op.name == "cuda_tile.store_ptr_tko"
                        else decide(k, op, *rest))
    dump, plan, _ = _planned(monkeypatch, "cp_moe_bf16_down_128x128x64", "sm_80")
    assert "//     store-conversion (conversion) 32768 B align 16, live over ops " in plan, plan
    # the lowering asked for it, where the plan placed it
    assert "conversion [     0,  32768)  32768 B align 16 alive ops 187..187  cuda_tile.store_ptr_tko" in dump
    assert "//     store-conversion (conversion) 32768 B align 16, live over ops 187..187, offset 0" in plan, plan
