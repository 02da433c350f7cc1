"""Pass `plan-shared-memory`: the operands' buffers of the kernels with tcgen05 mmas (sm_100) and of
sm_120's fp4 mma.sync (tileiras/tileas/shared_operands.py).

A tcgen05 mma the threads issue stores a register operand in a swizzled buffer ("mma-stage"), packs
a 4-bit one two to a byte ("fp4-pack", a register tile staged first: A's buffers, then B's), then
stages its scale tiles held in registers; sm_120's fp4 mma.sync packs its operands the same way
where the packed copies fit (tileas/mma_sync_staging.packs). Decided by the middle level's functions
(tileas/tcgen05_operands.operand_forms, mma_sync_staging.stages_first and packs), in the plan's dump,
checked strictly against what the lowering asks for: these kernels' plans predict every role, so
the pass chooses their staging from every buffer they will have and the lowering runs once.
"""

from __future__ import annotations


import pytest

from tileiras.errors import CompileError
from tileiras.ir.record import replace
from tileiras.tileas import shared_operands, shared_plan

from shared_plan_support import corpus_bytecode, lower, plan_section


def _lower(monkeypatch, name: str, gpu: str) -> tuple[str, str, list]:  # type: ignore[no-untyped-def]
    """(the LLVM IR, what --print-ir-after-all printed, each kernel's PlanReader) of corpus kernel
    `name` on `gpu`, the check strict."""
    return lower(monkeypatch, corpus_bytecode(name), gpu)


def _plan(dump: str) -> list[str]:
    """The plan-shared-memory section's comment lines."""
    return [line for line in plan_section(dump) if line.startswith("//   ")]


def _asked_by(plan: list[str], at: str) -> list[str]:
    """The planned buffers of the op at source location `at`, without the op's name."""
    return [line[len("//     "):line.index(": %")] for line in plan if "live over" in line and line.endswith(at)]


KERNELS = [
    ("mm_tf32_128x128x64", "sm_100"),          # tf32: the MMA warp issues it from the stages
    ("mm_e4m3_128x128x64", "sm_100"),          # fp8
    ("cp_nvfp4_matmul_128x256x128", "sm_100"),  # fp4, the threads issue it: staged, packed, scaled
    ("cp_mxfp8_matmul_swizzled_256x256x128", "sm_100"),   # scale tiles in registers
    ("cp_moe_bf16_down_128x128x64", "sm_100"),  # a gathered A in registers, then the restaged store
    ("tg_mla_decode_f16_16x128", "sm_100"),    # mma.sync beside tcgen05 mmas
    ("tg_mla_prefill_bf16_g1_64x64_occ1", "sm_100"),   # P (M = 64) staged for its tcgen05 mma
    ("cp_nvfp4_matmul_128x128x128", "sm_120"),  # fp4 mma.sync, packed
]


@pytest.mark.parametrize("name,gpu", KERNELS)
def test_every_request_of_a_kernel_with_tcgen05_or_fp4_mmas_is_predicted(monkeypatch, name: str, gpu: str) -> None:
    """The plan covers every role (complete: the pass chose the staging from every buffer); the
    lowering runs once and every request it makes is predicted, at its planned offset."""
    _, dump, checks = _lower(monkeypatch, name, gpu)
    assert _plan(dump)[0].endswith("; placed above the plan: none"), _plan(dump)[0]
    assert _plan(dump)[1].endswith(": chosen here"), _plan(dump)[1]
    assert len(checks) == 1 and checks[0].complete and not checks[0].unplanned \
        and not checks[0].mismatches
    assert "dropped" not in dump and "not predicted" not in dump


def test_a_tcgen05_fp4_mma_stages_and_packs_a_then_b_then_restages_its_scales(monkeypatch) -> None:
    """cuTile's nvfp4 128x256x128 on sm_100: tensor memory first (its control block above every data buffer,
    with the mbarriers: shared_plan.place), then A (128 x 128 e2m1 in registers,
    rows padded) staged and packed (64-byte rows, the 64-byte swizzle), then B (128 x 256) the same,
    then the scales restaged (both scale tiles are staged loads); the store writes the accumulator
    swizzled through the buffers the mma frees, for one thread's TMA boxes (as NVIDIA's stores it)."""
    _, dump, _ = _lower(monkeypatch, "cp_nvfp4_matmul_128x256x128", "sm_100")
    plan = _plan(dump)
    assert _asked_by(plan, "cp_BlockScaledMatMul.py:145:22") == [
        "tmem-control (tmem) 128 B align 128, live over its op to the kernel's end, offset 84992",
        "mma-stage (restaging) 18432 B align 128, live over ops 90..90, for a, offset 3200",
        "fp4-pack (restaging) 8192 B align 1024 swizzle 64B, live over ops 90..90, for a, offset 22528",
        "mma-stage (restaging) 34816 B align 128, live over ops 90..90, for b, offset 30720",
        "fp4-pack (restaging) 16384 B align 1024 swizzle 64B, live over ops 90..90, for b, offset 65536",
        "scales (buffer) 3072 B align 128, live over its op to the kernel's end, offset 81920"], plan
    assert _asked_by(plan, "cp_BlockScaledMatMul.py:149:4") == [
        "tma-store (epilogue) 65536 B align 1024, live over ops 104..104, the buffers released before it, offset 0"]


def test_a_tcgen05_mmas_scale_tiles_in_registers_are_staged_after_its_operands(monkeypatch) -> None:
    """cuTile's swizzled mxfp8 256x256x128: the scale tiles come out of a conversion in registers, so the
    mma stages SF_A (512 B) and SF_B (1152 B) before it restages them for tcgen05.cp; its A and B
    are the loop's swizzled stages (nothing to stage)."""
    _, dump, _ = _lower(monkeypatch, "cp_mxfp8_matmul_swizzled_256x256x128", "sm_100")
    assert [line.split(", offset")[0] for line in _asked_by(_plan(dump), "cp_BlockScaledMatMul.py:145:22")] == [
        "tmem-control (tmem) 128 B align 128, live over its op to the kernel's end",
        "mma-stage (restaging) 512 B align 128, live over ops 118..118, for a-scale",
        "mma-stage (restaging) 1152 B align 128, live over ops 118..118, for b-scale",
        "scales (buffer) 1536 B align 128, live over its op to the kernel's end"]


def test_attentions_register_p_at_m_64_is_staged_swizzled_for_its_tcgen05_mma(monkeypatch) -> None:
    """TileGym's MLA prefill: the second loop's P @ V (M = 64: P has no lane-per-row image in tensor
    memory) stores P in a swizzled buffer (above the second loop's stages); the first loop's P goes through
    its MMA warp's P buffer."""
    _, dump, _ = _lower(monkeypatch, "tg_mla_prefill_bf16_g1_64x64_occ1", "sm_100")
    plan = _plan(dump)
    assert _asked_by(plan, "tg_mla.py:127:14") == [
        "mma-stage (restaging) 8192 B align 1024 swizzle 128B, live over ops 237..237, for a, offset 147456"], plan
    assert any(line.startswith("//     p-buffer (restaging) 8192 B ") for line in plan)


def test_an_mma_sync_beside_tcgen05_mmas_has_its_operand_staged_as_planned(monkeypatch) -> None:
    """TileGym's MLA decode on sm_100: 16-row mmas stay on mma.sync in a kernel whose others run on
    tcgen05; the one whose operand is in registers stages it, as planned (padded rows: with the mbarriers
    above every data buffer, padded stages fit)."""
    _, dump, _ = _lower(monkeypatch, "tg_mla_decode_f16_16x128", "sm_100")
    assert "//   staged tiles padded: chosen here" in dump
    assert _asked_by(_plan(dump), "tg_mla_decoding.py:120:14") == [
        "mma-stage (restaging) 6144 B align 128, live over ops 136..136, for b, offset 151552"]


def test_sm_120s_fp4_mma_packs_where_the_packed_copies_fit(monkeypatch) -> None:
    """sm_120's nvfp4 mma.sync: A and B staged one element a byte, each packed after its staging."""
    _, dump, _ = _lower(monkeypatch, "cp_nvfp4_matmul_128x128x128", "sm_120")
    assert _asked_by(_plan(dump), "cp_BlockScaledMatMul.py:145:22") == [
        "mma-stage (restaging) 18432 B align 128, live over ops 89..89, for a, offset 2176",
        "fp4-pack (restaging) 8192 B align 1024 swizzle 64B, live over ops 89..89, for a, offset 21504",
        "mma-stage (restaging) 18432 B align 128, live over ops 89..89, for b, offset 29696",
        "fp4-pack (restaging) 8192 B align 1024 swizzle 64B, live over ops 89..89, for b, offset 48128"]


def test_where_sm_120s_packed_copies_do_not_fit_neither_packs(monkeypatch) -> None:
    """Told that the packed copies do not fit (mma_sync_staging._packing_fits, which `packs` reads for
    the lowering and the plan alike), the mma reads the operands one element a byte: no "fp4-pack"."""
    from tileiras.tileas import mma_sync_staging

    monkeypatch.setattr(mma_sync_staging, "_packing_fits", lambda *args: False)
    _, dump, checks = _lower(monkeypatch, "cp_nvfp4_matmul_128x128x128", "sm_120")
    assert [line.split(" (")[0] for line in _asked_by(_plan(dump), "cp_BlockScaledMatMul.py:145:22")] == \
        ["mma-stage", "mma-stage"]
    assert checks and all(c.complete for c in checks)


@pytest.mark.parametrize("name,gpu,role,hook", [
    ("cp_nvfp4_matmul_128x256x128", "sm_100", "fp4-pack", "_packed"),
    ("cp_nvfp4_matmul_128x256x128", "sm_100", "mma-stage", "_packed"),
    ("cp_nvfp4_matmul_128x128x128", "sm_120", "fp4-pack", "_packed"),
    ("cp_moe_bf16_down_128x128x64", "sm_100", "mma-stage", "_tcgen05"),
    ("cp_mxfp8_matmul_swizzled_256x256x128", "sm_100", "mma-stage", "_scale_tiles"),
])
def test_a_wrong_prediction_is_an_internal_error(monkeypatch, name: str, gpu: str, role: str, hook: str) -> None:
    """The pass planning a buffer 128 bytes smaller than the lowering writes: the strict check stops at the
    request."""
    sized = getattr(shared_operands, hook)

    def smaller(*args):   # type: ignore[no-untyped-def]
        return [replace(r, nbytes=r.nbytes - 128) if r.role == role else r for r in sized(*args)]

    monkeypatch.setattr(shared_operands, hook, smaller)
    with pytest.raises(CompileError, match=f"error: internal: shared-memory plan: .* writes \\d+ B in the plan's "
                                           f"{role} "):
        _lower(monkeypatch, name, gpu)


def test_operands_planned_in_another_order_are_found_by_subject(monkeypatch) -> None:
    """B's buffers planned before A's (their sizes differ at 128x256): the lowering finds each operand's
    buffers by their subject ("a", "b": `Request.subject`), not by the order it asks in, so the kernel lowers
    with every buffer the plan's (where the n-th request of a role once was the n-th asked, A took B's)."""
    tcgen05 = shared_operands._tcgen05

    def swapped(*args):   # type: ignore[no-untyped-def]
        out = tcgen05(*args)
        return out[2:4] + out[:2] + out[4:]

    monkeypatch.setattr(shared_operands, "_tcgen05", swapped)
    _, dump, checks = _lower(monkeypatch, "cp_nvfp4_matmul_128x256x128", "sm_100")
    assert all(check.complete for check in checks)
    staged = [line for line in _asked_by(_plan(dump), "cp_BlockScaledMatMul.py:145:22") if "mma-stage" in line]
    assert [line.split(", for ")[1].split(",")[0] for line in staged] == ["b", "a"], staged


def test_an_operand_buffer_the_mma_warp_never_asks_for_is_an_internal_error(monkeypatch) -> None:
    """The pass predicting a staged operand for an mma its loop's MMA warp issues (from the stages):
    the lowering never asks for it, which the check says once the kernel is lowered."""
    from tileiras.tileas import shared_tcgen05

    monkeypatch.setattr(shared_tcgen05, "issued_by_mma_warp", lambda facts, op, fits: False)
    tcgen05 = shared_operands._tcgen05

    def staged(facts, at, op, lhs, rhs, shared, fits):   # type: ignore[no-untyped-def]
        return tcgen05(facts, at, op, lhs, rhs, shared, fits) + [
            shared_plan.Request(op, "mma-stage", "restaging", 16384, 1024, 128, at.op_lifetime())]

    monkeypatch.setattr(shared_operands, "_tcgen05", staged)
    with pytest.raises(CompileError, match=r"never asks for the planned mma-stage \(restaging\) 16384 B"):
        _lower(monkeypatch, "mm_f16_128x128x64", "sm_100")
