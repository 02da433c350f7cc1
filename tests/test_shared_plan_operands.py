"""Pass `plan-shared-memory`: the buffers an mma asks for its operands (tileiras/tileas/shared_operands.py).

An mma.sync or wgmma operand in registers restaged in shared memory ("mma-stage"), and an mma on the
FMA path reading its operands from scratch ("reduction", in K slices where they do not fit whole):
decided in the middle level (tileas/mma_sync_staging.operand_staging, wgmma_operands.read_operands /
restaged, move_forms.mma_scratch) for the plan and the lowering alike, in the plan's dump, checked
strictly against what the lowering asks for.
"""

from __future__ import annotations


import pytest

from tileiras.errors import CompileError
from tileiras.ir.record import replace

from shared_plan_support import corpus_bytecode, lower, plan_section


def _planned(monkeypatch, name: str, gpu: str) -> tuple[str, list[str], list]:  # type: ignore[no-untyped-def]
    """(what compiling the corpus kernel printed, its plan-shared-memory section, each kernel's
    PlanReader), the check strict."""
    _, dump, checks = lower(monkeypatch, corpus_bytecode(name), gpu)
    return dump, plan_section(dump), checks


def _buffers(plan: list[str], role: str) -> list[str]:
    return [line for line in plan if line.startswith(f"//     {role} (")]


def test_an_fma_mmas_operands_in_two_k_slices_are_planned(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """TileGym's f32 bmm 128x256x128 on sm_80 (no f32 mma.sync: the exact FMA path): A 128x128 and B
    128x256 f32 (192 KB) would not fit whole; in two K slices, 96 KB of scratch, planned at offset 0.
    Every request of the kernel is predicted: nothing is left to the lowering's placement."""
    dump, plan, _ = _planned(monkeypatch, "cp_bmm_f32_128x256x128", "sm_80")
    scratch = _buffers(plan, "reduction")
    assert len(scratch) == 1 and "reduction (reduction) 98304 B align 16" in scratch[0], plan
    assert ", offset 0: " in scratch[0]
    assert "dropped" not in dump and "error: internal" not in dump


@pytest.mark.parametrize("gpu, staged", [
    ("sm_80", "mma-stage (restaging) 18432 B align 128, "),                 # 128 x 64 bf16, rows padded by 16 B
    ("sm_90", "mma-stage (restaging) 16384 B align 1024 swizzle 128B, "),   # wgmma's A, swizzled
    ("sm_100", "mma-stage (restaging) 16384 B align 1024 swizzle 128B, "),  # tcgen05's A, swizzled
])
def test_a_gathered_a_operand_is_restaged_as_planned(monkeypatch, gpu: str, staged: str) -> None:  # type: ignore[no-untyped-def]
    """MoE's A rows are gathered into registers, so its mma stores them in shared memory itself,
    beside B's pipeline stages (planned before it)."""
    dump, plan, _ = _planned(monkeypatch, "cp_moe_bf16_up_128x128x64", gpu)
    restaged = _buffers(plan, "mma-stage")
    assert len(restaged) == 1 and staged in restaged[0], plan
    assert "kernels/cp_MoE.py:76:22" in restaged[0]
    assert "error: internal" not in dump


def test_the_epilogue_after_a_restaged_operand_is_decided_beside_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """MoE on sm_90: with the mma's restaged A planned, the plan decides the store's restaging beside
    the same 50176 bytes the lowering took (the whole tile, 34816 B), so nothing is dropped and
    every request of the kernel is predicted."""
    dump, plan, checks = _planned(monkeypatch, "cp_moe_bf16_down_128x128x64", "sm_90")
    assert _buffers(plan, "mma-stage") and any("restage (epilogue) 34816 B align 128" in line for line in plan), plan
    assert "dropped" not in dump and "error: internal" not in dump
    assert checks[-1].complete and not checks[-1].mismatches


def test_an_e4m3_attentions_restaged_probabilities_keep_the_next_loops_depth(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """sm_90 causal attention in e4m3: P (f32 -> e4m3, not in the A fragment layout) is restaged for
    wgmma in each of the two loops; the first one's buffer comes before the second loop's stages, and
    being planned, the second loop's depth is the plan's (the staging roles are not dropped)."""
    dump, plan, _ = _planned(monkeypatch, "cp_fmha_e4m3_d64_causal_128x128", "sm_90")
    restaged = _buffers(plan, "mma-stage")
    assert len(restaged) == 2 and all("16384 B align 1024 swizzle 128B" in line for line in restaged), plan
    assert sum("stages beside " in line for line in plan) == 2, plan
    assert "dropped" not in dump and "are not all planned" not in dump and "error: internal" not in dump


def test_a_block_scaled_mmas_register_scales_are_restaged_as_planned(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """sm_120's block-scaled mma (ops_blockscale) stores a scale tile held in registers in shared
    memory before its operands (mma_sync_staging.restages_scales): SF_B, 1024 B."""
    dump, plan, _ = _planned(monkeypatch, "cp_mxfp8_matmul_256x256x128", "sm_120")
    restaged = _buffers(plan, "mma-stage")
    assert len(restaged) == 1 and "mma-stage (restaging) 1024 B align 128, " in restaged[0], plan
    assert "error: internal" not in dump


def test_fp4_operands_in_registers_are_staged_whole_before_their_packing(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """sm_120's nvfp4 mma: A and B, in registers, are staged one element a byte (128 x 128, rows padded)
    before fp4_pack packs each (mma_sync_staging.packs: the packed copies fit beside them): A's two buffers,
    then B's (tests/test_shared_plan_tc_operands.py has more)."""
    dump, plan, _ = _planned(monkeypatch, "cp_nvfp4_matmul_128x128x128", "sm_120")
    operands = [line.split(" (")[0][len("//     "):] for line in plan if "%29 at " in line]
    assert operands == ["mma-stage", "fp4-pack", "mma-stage", "fp4-pack"], plan
    restaged = _buffers(plan, "mma-stage")
    assert len(restaged) == 2 and all("mma-stage (restaging) 18432 B align 128, " in line for line in restaged), plan
    assert "fp4-pack" not in plan[1].split("placed above the plan: ")[1], plan[1]
    assert "error: internal" not in dump


@pytest.mark.parametrize("kernel, gpu, role, asks", [
    ("cp_moe_bf16_up_128x128x64", "sm_80", "mma-stage",
     r"'cuda_tile.mmaf' at .* writes 18432 B in the plan's mma-stage \(restaging\) 18304 B align 128"),
    ("cp_bmm_f32_128x256x128", "sm_80", "reduction",
     r"'cuda_tile.mmaf' at .* writes 98304 B in the plan's reduction \(reduction\) 98176 B align 16"),
])
def test_a_wrong_operand_prediction_is_an_internal_error(monkeypatch, kernel: str, gpu: str, role: str,
                                                         asks: str) -> None:  # type: ignore[no-untyped-def]
    from tileiras.tileas import shared_operands

    requests = shared_operands.requests

    def wrong(*args):   # type: ignore[no-untyped-def]
        return [replace(r, nbytes=r.nbytes - 128) if r.role == role else r for r in requests(*args) or []]

    monkeypatch.setattr(shared_operands, "requests", wrong)
    with pytest.raises(CompileError, match=asks):
        _planned(monkeypatch, kernel, gpu)


def test_the_plan_and_the_lowering_stage_the_same_operands(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Where the lowering stages an operand the plan took to be in shared memory, the check says so."""
    from tileiras.tileas import shared_operands

    monkeypatch.setattr(shared_operands, "requests", lambda *args: [])
    with pytest.raises(CompileError, match=r"'cuda_tile.mmaf' at .* asks for a mma-stage buffer of 16384 B for a, "
                                           r"which the plan does not place"):
        _planned(monkeypatch, "cp_moe_bf16_up_128x128x64", "sm_90")


# -- scratch an op's operand goes through ("reduction") --------------------------------------------
VIEW1 = "tensor_view<?xf32, strides=[?]>"
VIEW1H = "tensor_view<?xf16, strides=[?]>"
VIEW2D = "tensor_view<?x?xf32, strides=[?,?]>"
GATHER = f"gather_scatter_view<tile=(32x8), padding_value = neg_zero, {VIEW2D}, sparse_dim=0>"
SCATTER = f"gather_scatter_view<tile=(32x8), {VIEW2D}, sparse_dim=0>"
INDICES = "partition_view<tile=(32), tensor_view<?xi32, strides=[?]>>"

PACK = f"""
entry @k(%p: tile<ptr<f32>>, %n: tile<i32>, %s: tile<i32>, %q: tile<ptr<f16>>) {{
  %tv = make_tensor_view %p, shape = [%n], strides = [%s] : tile<i32> -> {VIEW1}
  %v = make_partition_view %tv : partition_view<tile=(64), {VIEW1}>
  %ov = make_tensor_view %q, shape = [%n], strides = [%s] : tile<i32> -> {VIEW1H}
  %o = make_partition_view %ov : partition_view<tile=(128), {VIEW1H}>
  %c0 = constant <i32: 0> : tile<i32>
  %x, %tk = load_view_tko weak %v[%c0] : partition_view<tile=(64), {VIEW1}>, tile<i32> -> tile<64xf32>, token
  %b = pack %x : tile<64xf32> -> tile<256xi8>
  %h = unpack %b : tile<256xi8> -> tile<128xf16>
  %st = store_view_tko weak %h, %o[%c0] : tile<128xf16>, partition_view<tile=(128), {VIEW1H}>, tile<i32> -> token
  return
}}
"""

ROWS = f"""
entry @k(%p: tile<ptr<f32>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>, %s1: tile<i32>,
         %ip: tile<ptr<i32>>, %in: tile<i32>, %is: tile<i32>,
         %q: tile<ptr<f32>>, %m0: tile<i32>, %m1: tile<i32>, %t0: tile<i32>, %t1: tile<i32>, %col: tile<i32>) {{
  %tv = make_tensor_view %p, shape = [%n0, %n1], strides = [%s0, %s1] : tile<i32> -> {VIEW2D}
  %g = make_gather_scatter_view %tv : {GATHER}
  %itv = make_tensor_view %ip, shape = [%in], strides = [%is] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %ipv = make_partition_view %itv : {INDICES}
  %c0 = constant <i32: 0> : tile<i32>
  %idx, %t = load_view_tko weak %ipv[%c0] : {INDICES}, tile<i32> -> tile<32xi32>, token
  %x, %t2 = load_view_tko weak %g[%idx, %col] : {GATHER}, tile<32xi32>, tile<i32> -> tile<32x8xf32>, token
  %ov = make_tensor_view %q, shape = [%m0, %m1], strides = [%t0, %t1] : tile<i32> -> {VIEW2D}
  %s = make_gather_scatter_view %ov : {SCATTER}
  %st = store_view_tko weak %x, %s[%idx, %c0] : tile<32x8xf32>, {SCATTER}, tile<32xi32>, tile<i32> -> token
  return
}}
"""


def _text_planned(monkeypatch, text: str, gpu: str) -> tuple[str, list[str], list]:  # type: ignore[no-untyped-def]
    _, dump, checks = lower(monkeypatch, text, gpu)
    return dump, plan_section(dump), checks


def test_a_pack_and_an_unpack_go_through_planned_scratch(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """ops_shape._pack_like reinterprets its operand through scratch: 64 f32 then 256 i8, 256 B each,
    alive while the op runs (so both at offset 0)."""
    dump, plan, _ = _text_planned(monkeypatch, PACK, "sm_90")
    scratch = _buffers(plan, "reduction")
    assert len(scratch) == 2 and all("reduction (reduction) 256 B align 16" in line and ", offset 0: " in line
                                     for line in scratch), plan
    assert "k.mlir:9:" in scratch[0] and "k.mlir:10:" in scratch[1]
    assert "error: internal" not in dump


def test_a_gather_and_a_scatters_row_indices_go_through_planned_scratch(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """ops_memory.view_index: the 32 row indices (i32) of a gather load and of a scatter store, 128 B
    each, in scratch for every thread to read."""
    dump, plan, _ = _text_planned(monkeypatch, ROWS, "sm_80")
    scratch = _buffers(plan, "reduction")
    assert len(scratch) == 2 and all("reduction (reduction) 128 B align 16" in line for line in scratch), plan
    assert "k.mlir:11:" in scratch[0] and "k.mlir:14:" in scratch[1]
    assert "error: internal" not in dump


def test_an_unpredicted_pack_scratch_is_an_internal_error(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tileiras.tileas import shared_operands

    requests = shared_operands.requests
    monkeypatch.setattr(shared_operands, "requests",
                        lambda facts, op, *args: [] if op.name == "cuda_tile.unpack" else requests(facts, op, *args))
    with pytest.raises(CompileError, match=r"'cuda_tile.unpack' at .* asks for a reduction buffer of 256 B, "
                                           r"which the plan does not place"):
        _text_planned(monkeypatch, PACK, "sm_90")


def test_the_last_resorts_deferred_loads_are_planned_as_k_slices(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """TileGym's MLA decoding on sm_120: K and V (128 KB each) fit only when each mma copies its load
    in 4 K slices, two in flight (lowering/pipeline.py's last resort, `Assumptions.defer`): the plan
    of that attempt leaves them unstaged (deferred_loads.defers) and predicts the mmas' rings ("k-slice":
    2 x 128 x (128 + 8) f16, 2 x 32 x (512 + 8) f16) and P's K slice beside V's ("mma-slice")."""
    _, _, checks = _planned(monkeypatch, "tg_mla_decode_f16_16x128", "sm_120")
    last = checks[-1]
    assert last.plan.assumes.defer and not last.mismatches
    planned = [(r.role, r.nbytes) for r in last.plan.requests.values() if r.role in ("k-slice", "mma-slice", "staging")]
    assert ("k-slice", 69632) in planned and ("k-slice", 66560) in planned and ("mma-slice", 1536) in planned, planned
    assert ("staging", 133120) not in planned and all(n < 65536 for role, n in planned if role == "staging"), planned
    assert {"k-slice", "mma-slice", "staging"} <= last.plan.covered


# -- an mma operand whose load falls back to registers --------------------------------------------
V16 = "tensor_view<?x?xf16, strides=[?,?]>"
VOUT = "tensor_view<?x?xf32, strides=[?,1]>"
FALLBACK = f"""
entry @k(%a: tile<ptr<f16>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>, %s1: tile<i32>,
         %o: tile<ptr<f32>>, %m0: tile<i32>, %m1: tile<i32>, %t0: tile<i32>) {{
  %c0 = constant <i32: 0> : tile<i32>
  %tv = make_tensor_view %a, shape = [%n0, %n1], strides = [%s0, %s1] : tile<i32> -> {V16}
  %pa = make_partition_view %tv : partition_view<tile=(64x32), {V16}>
  %x, %t1 = load_view_tko weak %pa[%c0, %c0] : partition_view<tile=(64x32), {V16}>, tile<i32> -> tile<64x32xf16>, token
  %y, %t2 = load_view_tko weak %pa[%c0, %c0] : partition_view<tile=(64x32), {V16}>, tile<i32> -> tile<64x32xf16>, token
  %yt = permute %y [1, 0] : tile<64x32xf16> -> tile<32x64xf16>
  %acc = constant <f32: 0.0> : tile<64x64xf32>
  %d = mmaf %x, %yt, %acc : tile<64x32xf16>, tile<32x64xf16>, tile<64x64xf32>
  %otv = make_tensor_view %o, shape = [%m0, %m1], strides = [%t0, 1] : tile<i32> -> {VOUT}
  %po = make_partition_view %otv : partition_view<tile=(64x64), {VOUT}>
  %st = store_view_tko weak %d, %po[%c0, %c0] : tile<64x64xf32>, partition_view<tile=(64x64), {VOUT}>, tile<i32> -> token
  return
}}
"""


def test_operands_whose_copies_are_not_legal_are_transposed_and_restaged_as_planned(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A and B^T read through a view whose strides are not known: cp.async cannot copy them
    (`chunk_elements`), so both are loads in registers on sm_90 (wgmma's swizzled stage, its xor
    pattern changing every 2 rows of the 128 threads' elements: tileaa/access_width.staged_copy): B's
    transpose goes through scratch ("operand-conversion", move_forms.permute_scratch) and the mma
    restages both (A 64 x 32, B 32 x 64 f16, swizzled)."""
    dump, plan, _ = _text_planned(monkeypatch, FALLBACK, "sm_90")
    moved = _buffers(plan, "operand-conversion")
    assert len(moved) == 1 and "operand-conversion (conversion) 4096 B align 16" in moved[0], plan
    restaged = _buffers(plan, "mma-stage")
    staged = ["mma-stage (restaging) 4096 B align 1024 swizzle 64B, ",
              "mma-stage (restaging) 4096 B align 1024 swizzle 128B, "]
    assert len(restaged) == 2 and all(want in line for want, line in zip(staged, restaged)), plan
    assert "error: internal" not in dump


def test_an_operand_read_transposed_without_legal_copies_is_staged_at_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same kernel on mma.sync (sm_80, padded stages): B, read transposed, is loaded element by
    element and each element stored into its staged matrix at once (staged_copy "registers": 64 x 32
    f16 as stored, padded rows, 5120 B), with no conversion scratch; A, read as stored, stays a
    register load the mma restages (64 x 32, 5120 B)."""
    dump, plan, _ = _text_planned(monkeypatch, FALLBACK, "sm_80")
    assert not _buffers(plan, "operand-conversion"), plan
    staging, restaged = _buffers(plan, "staging"), _buffers(plan, "mma-stage")
    assert len(staging) == 1 and "staging (staging) 5120 B align 128, " in staging[0], plan
    assert "k.mlir:8:" in staging[0], plan      # the load of B
    assert len(restaged) == 1 and "mma-stage (restaging) 5120 B align 128, " in restaged[0], plan
    assert "error: internal" not in dump


_TF32_NO_LOOP = """
entry @k(%a: tile<ptr<f32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {
  %tv = make_tensor_view %a, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %tc = make_tensor_view %c, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %va = make_partition_view %tv : partition_view<tile=(128x32), tensor_view<?x?xf32, strides=[?,1]>>
  %vb = make_partition_view %tv : partition_view<tile=(32x128), tensor_view<?x?xf32, strides=[?,1]>>
  %vc = make_partition_view %tc : partition_view<tile=(128x128), tensor_view<?x?xf32, strides=[?,1]>>
  %c0 = constant <i32: 0> : tile<i32>
  %x, %t1 = load_view_tko weak %va[%c0, %c0] : partition_view<tile=(128x32), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<128x32xf32>, token
  %y, %t2 = load_view_tko weak %vb[%c0, %c0] : partition_view<tile=(32x128), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<32x128xf32>, token
  %xt = ftof %x : tile<128x32xf32> -> tile<128x32xtf32>
  %yt = ftof %y : tile<32x128xf32> -> tile<32x128xtf32>
  %z = constant <f32: 0.0> : tile<128x128xf32>
  %d = mmaf %xt, %yt, %z : tile<128x32xtf32>, tile<32x128xtf32>, tile<128x128xf32>
  %tk = store_view_tko weak %d, %vc[%c0, %c0] : tile<128x128xf32>, partition_view<tile=(128x128), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
  return
}
"""


_TF32_PERSISTENT = """
entry @k(%a: tile<ptr<f32>>, %c: tile<ptr<f32>>, %n: tile<i32>) {
  %tv = make_tensor_view %a, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %tc = make_tensor_view %c, shape = [%n, %n], strides = [%n, 1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,1]>
  %va = make_partition_view %tv : partition_view<tile=(128x32), tensor_view<?x?xf32, strides=[?,1]>>
  %vb = make_partition_view %tv : partition_view<tile=(32x128), tensor_view<?x?xf32, strides=[?,1]>>
  %vc = make_partition_view %tc : partition_view<tile=(128x128), tensor_view<?x?xf32, strides=[?,1]>>
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %c4 = constant <i32: 4> : tile<i32>
  %z = constant <f32: 0.0> : tile<128x128xf32>
  %c2 = constant <i32: 2> : tile<i32>
  %tko = for %j in (%c0 to %c2, step %c1) : tile<i32> iter_values(%tt = %c0) -> (tile<i32>) {
  %acc = for %i in (%c0 to %c4, step %c1) : tile<i32> iter_values(%s = %z) -> (tile<128x128xf32>) {
    %x, %t1 = load_view_tko weak %va[%c0, %i] : partition_view<tile=(128x32), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<128x32xf32>, token
    %y, %t2 = load_view_tko weak %vb[%i, %c0] : partition_view<tile=(32x128), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> tile<32x128xf32>, token
    %xt = ftof %x : tile<128x32xf32> -> tile<128x32xtf32>
    %yt = ftof %y : tile<32x128xf32> -> tile<32x128xtf32>
    %d = mmaf %xt, %yt, %s : tile<128x32xtf32>, tile<32x128xtf32>, tile<128x128xf32>
    continue %d : tile<128x128xf32>
  }
  %tk = store_view_tko weak %acc, %vc[%j, %c0] : tile<128x128xf32>, partition_view<tile=(128x128), tensor_view<?x?xf32, strides=[?,1]>>, tile<i32> -> token
  continue %tt : tile<i32>
  }
  return
}
"""


@pytest.mark.parametrize("text, gpu, asker", [
    (_TF32_NO_LOOP, "sm_90", "%3 at k.mlir:14:3"),       # wgmma: no loop gave them a buffer (operand_form)
    (_TF32_NO_LOOP, "sm_100", "%3 at k.mlir:14:3"),      # tcgen05 outside loops: the mma asks (_restaged)
    (_TF32_PERSISTENT, "sm_100", "%for at k.mlir:13:3"),  # unspecialized: the outer loop asks, before the
])                                                          # K loop's stages (tcgen05_operands.loop_restaged)
def test_tf32_operands_kmajor_copies_are_predicted(monkeypatch, text: str, gpu: str, asker: str) -> None:
    """128x128x32 tf32 mmas: their f32 operands are rounded to tf32 in K-major copies ("kmajor-copy"),
    A's then B's, each alive to the kernel's end, asked where the lowering asks (the mma, or the
    outermost loop around it); the kernel's plan is complete and every buffer at its planned offset."""
    _, dump, checks = lower(monkeypatch, text, gpu)
    copies = [line for line in dump.splitlines() if line.startswith("//     kmajor-copy (buffer) 16384 B align 1024, "
                                                                  "live over its op to the kernel's end")]
    assert len(copies) == 2 and all(line.endswith(asker) for line in copies), dump
    assert "; placed above the plan: none" in dump and f"for {gpu}: every buffer planned" in dump
    assert len(checks) == 1 and checks[0].complete


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_a_mispredicted_kmajor_copy_is_an_internal_error(monkeypatch, gpu: str) -> None:
    """The tf32 mma outside loops with its K-major copies planned 1024 bytes too small: the strict
    check stops at the first."""
    from tileiras.tileas import shared_operands

    requests = shared_operands.requests
    monkeypatch.setattr(shared_operands, "requests", lambda *args: [
        replace(r, nbytes=r.nbytes - 1024) if r.role == "kmajor-copy" else r for r in requests(*args) or []])
    with pytest.raises(CompileError, match=r"writes 16384 B in the plan's kmajor-copy \(buffer\) 15360 B"):
        lower(monkeypatch, _TF32_NO_LOOP, gpu)


# -- a gathered tensor-core operand ---------------------------------------------------------------
_G16 = "tensor_view<?x?xf16, strides=[?,1]>"
_GATHERED_A = f"gather_scatter_view<tile=(64x32), {_G16}, sparse_dim=0>"
_ROWS64 = "partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>"
GATHERED_MMA = f"""
entry @k(%a: tile<ptr<f16>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>,
         %ip: tile<ptr<i32>>, %in: tile<i32>, %is: tile<i32>,
         %o: tile<ptr<f32>>, %m0: tile<i32>, %m1: tile<i32>, %t0: tile<i32>) {{
  %c0 = constant <i32: 0> : tile<i32>
  %tv = make_tensor_view %a, shape = [%n0, %n1], strides = [%s0, 1] : tile<i32> -> {_G16}
  %g = make_gather_scatter_view %tv : {_GATHERED_A}
  %itv = make_tensor_view %ip, shape = [%in], strides = [%is] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %ipv = make_partition_view %itv : {_ROWS64}
  %idx, %t = load_view_tko weak %ipv[%c0] : {_ROWS64}, tile<i32> -> tile<64xi32>, token
  %x, %t1 = load_view_tko weak %g[%idx, %c0] : {_GATHERED_A}, tile<64xi32>, tile<i32> -> tile<64x32xf16>, token
  %pb = make_partition_view %tv : partition_view<tile=(32x64), {_G16}>
  %y, %t2 = load_view_tko weak %pb[%c0, %c0] : partition_view<tile=(32x64), {_G16}>, tile<i32> -> tile<32x64xf16>, token
  %acc = constant <f32: 0.0> : tile<64x64xf32>
  %d = mmaf %x, %y, %acc : tile<64x32xf16>, tile<32x64xf16>, tile<64x64xf32>
  %otv = make_tensor_view %o, shape = [%m0, %m1], strides = [%t0, 1] : tile<i32> -> {VOUT}
  %po = make_partition_view %otv : partition_view<tile=(64x64), {VOUT}>
  %st = store_view_tko weak %d, %po[%c0, %c0] : tile<64x64xf32>, partition_view<tile=(64x64), {VOUT}>, tile<i32> -> token
  return
}}
"""


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_a_gathered_mma_operand_loaded_into_registers_asks_for_planned_row_scratch(monkeypatch, gpu: str) -> None:  # type: ignore[no-untyped-def]
    """A gathered A that only an mma reads, without facts to copy it by cp.async, is a register load its mma
    restages: its 64 row indices (256 B) go through scratch at the load, which the plan sizes (the walk used
    to skip what a register load asks for its operands, so a gathered operand left the plan incomplete)."""
    dump, plan, checks = _text_planned(monkeypatch, GATHERED_MMA, gpu)
    scratch = _buffers(plan, "reduction")
    assert len(scratch) == 1 and "reduction (reduction) 256 B align 16" in scratch[0] and "k.mlir:11:" in scratch[0], plan
    assert checks[-1].complete and not checks[-1].unplanned and "error: internal" not in dump
