"""Pass `plan-shared-memory` on sm_100 (tileiras/tileas/shared_tcgen05.py): the buffers of the
tcgen05 kernels (the warp-specialized matmul's MMA warp and chunked epilogue, attention's P buffer
and O's TMA store, block-scaled scales, packed fp4 operands) predicted before emission, each one
the lowering asks for, at the plan's offset; a wrong prediction is an internal error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tileiras.errors import CompileError
from tileiras.ir.record import replace
from tileiras.tileas import shared_tcgen05

from shared_plan_support import lower, plan_section

ROOT = Path(__file__).resolve().parents[1]


def _lower(bytecode: bytes, monkeypatch) -> tuple[str, list[bool]]:   # type: ignore[no-untyped-def]
    """(--print-ir-after-all of the module on sm_100, per kernel whether the plan predicted every
    request of the kernel), the check strict."""
    _, dump, checks = lower(monkeypatch, bytecode, "sm_100")
    return dump, [check.complete for check in checks]


def _corpus(name: str) -> bytes:
    return next((ROOT / "tests").glob(f"*/bytecode/{name}.tileirbc")).read_bytes()


def _plan(dump: str) -> list[str]:
    """The buffers of the dump's plan-shared-memory section."""
    return [line[len("//     "):line.index(": %")] for line in plan_section(dump) if "live over" in line]


def test_a_specialized_128x128x64_matmul_is_predicted_whole(monkeypatch) -> None:
    """The MMA-warp form: the loop's stages and mbarriers, then (its MMA warp) tensor memory's
    control block, then (its epilogue warps) the swizzled buffer the accumulator's column chunks
    are written into for one TMA store, over the stages, which are free after the loop."""
    dump, complete = _lower(_corpus("mm_f16_128x128x64"), monkeypatch)
    assert _plan(dump) == [
        "ring (ring) 65536 B align 1024 swizzle 128B, live over ops 60..64, for %tile, offset 0",
        "ring (ring) 65536 B align 1024 swizzle 128B, live over ops 60..64, for %tile_32, offset 65536",
        "mbarriers (buffer) 64 B align 8, live over its op to the kernel's end, offset 131072",
        "tmem-control (tmem) 128 B align 128, live over its op to the kernel's end, offset 131200",
        "tmem-epilogue (epilogue) 32768 B align 1024, live over ops 78..78, offset 0"], _plan(dump)
    assert complete == [True] and "dropped" not in dump


def test_a_specialized_128x256x64_matmul_is_predicted_whole(monkeypatch) -> None:
    """Two epilogue warpgroups (128 x 256): 3 stages, and the whole f16 C tile's swizzled buffer."""
    dump, complete = _lower(_corpus("mm_f16_128x256x64"), monkeypatch)
    assert _plan(dump) == [
        "ring (ring) 49152 B align 1024 swizzle 128B, live over ops 61..65, for %tile, offset 0",
        "ring (ring) 98304 B align 1024 swizzle 128B, live over ops 61..65, for %tile_32, offset 49152",
        "mbarriers (buffer) 48 B align 8, live over its op to the kernel's end, offset 147456",
        "tmem-control (tmem) 128 B align 128, live over its op to the kernel's end, offset 147584",
        "tmem-epilogue (epilogue) 65536 B align 1024, live over ops 79..79, offset 0"], _plan(dump)
    assert complete == [True]


def test_an_attentions_p_buffer_and_o_store_are_predicted(monkeypatch) -> None:
    """Specialized attention at M = 64: P goes through a swizzled buffer the MMA warp asks for (after
    the stages and the handshake, before tensor memory), and O is stored by TMA through a buffer
    over the freed stages, asked by its store (the mbarriers and tensor memory's control block above
    every data buffer: shared_plan.place)."""
    dump, complete = _lower(_corpus("fa_f16_q64k64d64"), monkeypatch)
    plan = _plan(dump)
    assert plan[-3:] == [
        "p-buffer (restaging) 8192 B align 1024 swizzle 128B, live over ops 74..103, offset 57344",
        "tmem-control (tmem) 128 B align 128, live over its op to the kernel's end, offset 65664",
        "tmem-epilogue (epilogue) 8192 B align 1024, live over ops 126..126, offset 8192"], plan
    assert complete == [True]


def test_a_p_buffer_before_a_second_loop_keeps_its_depth(monkeypatch) -> None:
    """Causal TileGym attention at 64 x 64: the P buffer of the first (specialized) loop comes
    before the second loop's stages; planned, the second loop's depth is the plan's (nothing
    dropped: it was, while the P buffer was not predicted)."""
    dump, _ = _lower(_corpus("tg_fmha_f16_d128_causal_64x64"), monkeypatch)
    plan = _plan(dump)
    assert sum(line.startswith("p-buffer ") for line in plan) == 1 and plan[-1].startswith("tmem-epilogue "), plan
    assert "dropped" not in dump


def test_a_specialized_block_scaled_matmuls_scale_stages_are_predicted(monkeypatch) -> None:
    """Block-scaled 128x128x128: the MMA warp asks for every stage's restaged scales (4 x 1024 B)
    before tensor memory."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_blockscale_lowering import _kernel

    dump, complete = _lower(_kernel(128, 128, 128), monkeypatch)
    plan = _plan(dump)
    assert [line.split(" (")[0] for line in plan] == ["ring"] * 4 + ["mbarriers", "tmem-stages", "tmem-control",
                                                                    "tmem-epilogue"], plan
    assert plan[5] == "tmem-stages (buffer) 4096 B align 128, live over its op to the kernel's end, offset 135168"
    assert complete == [True]


def test_an_unspecialized_fp4_mmas_packed_operands_and_scales_are_predicted(monkeypatch) -> None:
    """cuTile's mxfp4 matmul: its mma asks for tensor memory first (its control block placed above every data
    buffer), then stages and packs A and B
    (64-byte swizzle: shared_operands.py), then stages its scale tile held in registers and
    restages the scales; the store stores the accumulator by TMA through the buffers it frees."""
    dump, complete = _lower(_corpus("cp_mxfp4_matmul_128x128x128"), monkeypatch)
    assert _plan(dump)[1:] == [
        "tmem-control (tmem) 128 B align 128, live over its op to the kernel's end, offset 55808",
        "mma-stage (restaging) 18432 B align 128, live over ops 83..83, for a, offset 640",
        "fp4-pack (restaging) 8192 B align 1024 swizzle 64B, live over ops 83..83, for a, offset 19456",
        "mma-stage (restaging) 18432 B align 128, live over ops 83..83, for b, offset 27648",
        "fp4-pack (restaging) 8192 B align 1024 swizzle 64B, live over ops 83..83, for b, offset 46080",
        "mma-stage (restaging) 512 B align 128, live over ops 83..83, for a-scale, offset 54272",
        "scales (buffer) 1024 B align 128, live over its op to the kernel's end, offset 54784",
        # the accumulator written swizzled through the buffers it frees, stored by TMA (shared_epilogue.py)
        "tma-store (epilogue) 32768 B align 1024, live over ops 97..97, the buffers released before it, offset 0"], \
        _plan(dump)
    assert complete == [True] and "dropped" not in dump


@pytest.mark.parametrize("name,role,hook", [
    ("mm_f16_128x128x64", "tmem-epilogue", "at_loop"),
    ("fa_f16_q64k64d64", "p-buffer", "at_loop"),
    ("fa_f16_q64k64d64", "tmem-epilogue", "at_op"),
    ("cp_mxfp4_matmul_128x128x128", "scales", "at_op")])
def test_a_wrong_tcgen05_prediction_is_an_internal_error(monkeypatch, name: str, role: str, hook: str) -> None:
    """The pass planning a buffer 128 bytes smaller than the lowering writes: the strict check stops at the
    request."""
    sized = getattr(shared_tcgen05, hook)

    def smaller(*args):   # type: ignore[no-untyped-def]
        return [replace(r, nbytes=r.nbytes - 128) if r.role == role else r for r in sized(*args)]

    monkeypatch.setattr(shared_tcgen05, hook, smaller)
    with pytest.raises(CompileError, match=f"error: internal: shared-memory plan: .* writes \\d+ B in the plan's "
                                           f"{role} "):
        _lower(_corpus(name), monkeypatch)


def test_an_attention_whose_copies_are_not_all_tmas_is_planned_as_the_lowering_settles_it(monkeypatch) -> None:
    """Where TMA cannot copy the loads, the specialized attention has no MMA warp (its consumers
    issue the mmas), as plan-shared-memory settles the split (tileas/settled_split.settled) and the lowering
    checks it: no handshake, no P buffer, no store of O from tensor memory's
    epilogue (O goes by TMA through the freed buffers instead: epilogue_forms, the view's descriptor
    can be made), tensor memory asked for by the first mma, and P, in
    registers, staged swizzled by the mma that reads it (M = 64: not in tensor memory)."""
    from tileiras.tileas import tma_boxes

    monkeypatch.setattr(tma_boxes, "pipeline_copies", lambda caps, loads, *args: (None, {load: "" for load in loads}))
    dump, _ = _lower(_corpus("fa_f16_q64k64d64"), monkeypatch)
    plan = _plan(dump)
    assert [line.split(" (")[0] for line in plan] == ["invariant", "mbarriers", "ring", "ring", "mbarriers",
                                                      "tmem-control", "mma-stage", "tma-store"], plan
    assert "the consumers issue the tcgen05 mmas" in dump


def _predicted_roles(dump: str) -> set[str]:
    line = next(line for line in dump.splitlines() if line.startswith("//   predicted roles: "))
    return set(line.split("predicted roles: ")[1].split(";")[0].split(", "))


def test_a_ctas_pairs_accumulator_needs_no_conversion_where_the_pair_runs(monkeypatch) -> None:
    """cuTile's 128x256x64 matmul over a CTA pair: its mma runs as the pair, so no accumulator goes
    through the pair's layout by a conversion: "pair-conversion" is predicted (none). Where the pair
    is refused where the layouts were chosen (each CTA alone, cta_group::1) the conversion is not
    planned: it goes above the plan. (Where the loads refuse TMA the accumulator keeps the unpaired
    layout: no conversion, tcgen05_select.pair_refused.)"""
    from tileiras.tileas import cta_pairs

    dump, _ = _lower(_corpus("cp_matmul_f16_128x256x64"), monkeypatch)
    assert "tcgen05.mma.cta_group::2" in dump and "pair-conversion" in _predicted_roles(dump)
    monkeypatch.setattr(cta_pairs, "plan", lambda *args, **kwargs: None)
    dump, _ = _lower(_corpus("cp_matmul_f16_128x256x64"), monkeypatch)
    assert "tcgen05.mma.cta_group::2" not in dump and "pair-conversion" not in _predicted_roles(dump)
    assert "placed above the plan, not planned: pair-conversion x" in dump
