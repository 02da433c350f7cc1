"""Pass `plan-shared-memory` (tileiras/tileas/shared_plan.py): the buffers sized before emission, its
dump, the lowering's requests checked against it, and an overflow's diagnostic unchanged."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import re
from pathlib import Path

import pytest

from tileiras.errors import CompileError
from tileiras.frontend import load_module
from tileiras.ir.record import replace
from tileiras.lowering.pipeline import lower_module
from tileiras.tileas import shared_sizes, shared_stages
from tileiras.tileas.shared_plan import STRICT_ENV

ROOT = Path(__file__).resolve().parents[1]
VIEW = "tensor_view<?x?xf32, strides=[?,?]>"


def _transpose(rows: int, cols: int) -> str:
    """A tile loaded, transposed (its elements move between threads through conversion scratch)
    and stored."""
    return f"""
entry @k(%p: tile<ptr<f32>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>, %s1: tile<i32>) {{
  %tv = make_tensor_view %p, shape = [%n0, %n1], strides = [%s0, %s1] : tile<i32> -> {VIEW}
  %v = make_partition_view %tv : partition_view<tile=({rows}x{cols}), {VIEW}>
  %o = make_partition_view %tv : partition_view<tile=({cols}x{rows}), {VIEW}>
  %c0 = constant <i32: 0> : tile<i32>
  %x, %tk = load_view_tko weak %v[%c0, %c0] : partition_view<tile=({rows}x{cols}), {VIEW}>, tile<i32> -> tile<{rows}x{cols}xf32>, token
  %t = permute %x [1, 0] : tile<{rows}x{cols}xf32> -> tile<{cols}x{rows}xf32>
  %st = store_view_tko weak %t, %o[%c0, %c0] : tile<{cols}x{rows}xf32>, partition_view<tile=({cols}x{rows}), {VIEW}>, tile<i32> -> token
  return
}}
"""


def _lower(text: str, gpu: str = "sm_90") -> str:
    """What --print-ir-after-all prints for the module."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        lower_module(load_module(text.encode(), "k.mlir"), gpu, print_ir_after_all=True)
    return err.getvalue()


def _roles(line: str) -> tuple[set[str], set[str]]:
    """(the roles predicted, those placed above the plan) of the plan dump's roles line."""
    predicted, asked = line.split("predicted roles: ")[1].split("; placed above the plan: ")
    return set(predicted.split(", ")) - {"none"}, set(asked.split(", ")) - {"none"}


def _section(dump: str, name: str) -> list[str]:
    lines = dump.splitlines()
    start = lines.index(f"// -----// IR Dump After {name} (nv_tileas) //----- //")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("// -----//"))
    return lines[start + 1:end]


def test_the_plan_is_dumped_with_each_buffer_before_emission() -> None:
    dump = _lower(_transpose(32, 64))
    plan = _section(dump, "plan-shared-memory")
    assert plan[0] == "// shared-memory plan of @k:"
    predicted, asked = _roles(plan[1])
    assert {"conversion", "warp-reduction", "tmem-control", "staging", "ring", "restage"} <= predicted, plan[1]
    assert not predicted & asked and predicted | asked == set(shared_sizes.ROLES), plan[1]
    buffers = [line for line in plan if "live over" in line]
    # 32 x 64 f32, while the permute runs, at the start of shared memory
    assert len(buffers) == 1 and "conversion (conversion) 8192 B align 16, live over ops " in buffers[0], plan
    assert ", offset 0: " in buffers[0] and "k.mlir:8:" in buffers[0], plan
    # the dump comes before the LLVM IR, and the lowering placed the same buffer
    assert dump.index("plan-shared-memory") < dump.index("IR Dump After lower-to-llvm")
    assert "conversion [     0,   8192)   8192 B align 16" in dump


def test_a_buffer_smaller_than_what_its_op_writes_is_an_internal_error(monkeypatch) -> None:
    """The lowering states only what it writes in the buffer the plan placed (its size, alignment, swizzle and
    lifetime are the plan's): a planned buffer that cannot hold it is refused."""
    sized = shared_sizes.conversion
    monkeypatch.setattr(shared_sizes, "SIZERS", (
        ("conversion", lambda entry, a: [replace(r, nbytes=r.nbytes - 16) for r in sized(entry, a)]),))
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(CompileError, match=r"error: internal: shared-memory plan: kernel 'k' for sm_90: "
                                           r"'cuda_tile.permute' at .* writes 8192 B in the plan's conversion "
                                           r"\(conversion\) 8176 B"):
        _lower(_transpose(32, 64))


def test_the_plans_buffer_is_taken_as_planned(monkeypatch) -> None:
    """A buffer the plan placed larger, or aligned more, than the op needs is the op's as planned: the lowering
    decides neither."""
    sized = shared_sizes.conversion
    monkeypatch.setattr(shared_sizes, "SIZERS", (
        ("conversion", lambda entry, a: [replace(r, nbytes=r.nbytes + 16, align=128) for r in sized(entry, a)]),))
    monkeypatch.setenv(STRICT_ENV, "1")
    dump = _lower(_transpose(32, 64))
    assert "conversion [     0,   8208)   8208 B align 128" in dump


def test_a_request_the_plan_did_not_place_is_an_internal_error(monkeypatch) -> None:
    monkeypatch.setattr(shared_sizes, "SIZERS", (("conversion", lambda entry, a: []),))
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(CompileError, match=r"'cuda_tile.permute' at .* asks for a conversion buffer of 8192 B, "
                                           r"which the plan does not place"):
        _lower(_transpose(32, 64))


def test_a_predicted_request_never_asked_for_is_an_internal_error(monkeypatch) -> None:
    sized = shared_sizes.conversion
    monkeypatch.setattr(shared_sizes, "SIZERS", (
        ("conversion", lambda entry, a: sized(entry, a) + [replace(r, role="conversion", nbytes=64, subject="spare")
                                                           for r in sized(entry, a)]),))
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(CompileError, match=r"never asks for the planned conversion .*, for spare"):
        _lower(_transpose(32, 64))


def test_the_lowering_places_every_buffer_at_the_plans_offset_and_the_verifier_checks_them(monkeypatch) -> None:
    """The lowering places no buffer itself: each goes at the plan's offset, and the buffer verifier
    (tileas/buffers.verify, in every compile) catches a plan whose buffers alive at once share bytes:
    here every planned offset moved to 0 (the bmm's two ring stages and their mbarriers)."""
    from tileiras.tileas import shared_plan

    class Stacked(shared_plan.SharedBuffers):
        def allocate(self, *args, **kwargs):   # type: ignore[no-untyped-def]
            buffer = super().allocate(*args, **kwargs)
            self.buffers[-1] = replace(buffer, offset=0)
            return self.buffers[-1]

    taken = []
    buffer = shared_plan.PlanReader.buffer

    def recorded(self, op, role, needs, subject=None):  # type: ignore[no-untyped-def]
        found = buffer(self, op, role, needs, subject)
        taken.append((role, found[1] if found is not None else None))
        return found
    monkeypatch.setattr(shared_plan.PlanReader, "buffer", recorded)
    monkeypatch.setenv(STRICT_ENV, "1")
    _corpus("bmm_f16_64x64x32", "sm_90")
    assert taken == [("ring", 0), ("ring", 32768), ("mbarriers", 65536), ("tma-store", 0)], taken
    monkeypatch.setattr(shared_plan, "SharedBuffers", Stacked)
    with pytest.raises(CompileError, match=r"error: internal: shared buffer verifier: kernel 'bmm_f16_64x64x32': "
                                           r"the ring buffer \[0, 32768\) and the ring buffer .* share bytes"):
        _corpus("bmm_f16_64x64x32", "sm_90")


def test_an_ops_buffers_of_one_role_are_found_by_subject_in_any_order(monkeypatch) -> None:
    """A loop's two rings are its requests of role "ring" for its two loads (`Request.subject`): the lowering
    gets each load's ring whatever order it asks in; asking for one twice, or for a load the plan gave no
    ring, is an internal error."""
    from tileiras.tileas import shared_plan

    readers = []
    init = shared_plan.PlanReader.__init__

    def kept(self, plan, where):  # type: ignore[no-untyped-def]
        init(self, plan, where)
        readers.append(self)
    monkeypatch.setattr(shared_plan.PlanReader, "__init__", kept)
    monkeypatch.setenv(STRICT_ENV, "1")
    _corpus("bmm_f16_64x64x32", "sm_90")
    plan = readers[-1].plan
    rings = [r for r in plan.requests.values() if r.role == "ring"]
    assert len(rings) == 2 and all(r.subject.name == "cuda_tile.load_view_tko" for r in rings)
    reader = shared_plan.PlanReader(plan, "again")
    backwards = [reader.buffer(r.op, "ring", r.nbytes, r.subject) for r in reversed(rings)]
    assert [offset for _, offset in backwards] == [32768, 0]
    assert [request for request, _ in backwards] == list(reversed(rings))
    with pytest.raises(CompileError, match=r"asks twice for its ring \(ring\) .*, for load_view_tko at "):
        reader.buffer(rings[0].op, "ring", rings[0].nbytes, rings[0].subject)
    with pytest.raises(CompileError, match=r"asks for a ring buffer of 16 B for lhs, which the plan does not place"):
        shared_plan.PlanReader(plan, "again").buffer(rings[0].op, "ring", 16, "lhs")


def test_without_the_strict_check_a_mismatch_is_a_note_of_the_dump(monkeypatch) -> None:
    """Not strict (outside the tests): a request the plan mispredicted is listed with the kernel's
    schedule and placed above every planned buffer, where it overlaps none (the code stays correct)."""
    sized = shared_sizes.conversion
    monkeypatch.setattr(shared_sizes, "SIZERS", (
        ("conversion", lambda entry, a: [replace(r, nbytes=r.nbytes - 16) for r in sized(entry, a)]),))
    monkeypatch.delenv(STRICT_ENV, raising=False)
    dump = _lower(_transpose(32, 64))
    assert "error: internal: shared-memory plan: kernel 'k' for sm_90: 'cuda_tile.permute'" in dump
    assert "placed above the plan, not planned: conversion x1" in dump


def test_roles_not_predicted_are_placed_above_the_plan(monkeypatch) -> None:
    monkeypatch.setattr(shared_sizes, "SIZERS", ())
    monkeypatch.setenv(STRICT_ENV, "1")
    dump = _lower(_transpose(32, 64))
    line = next(line for line in dump.splitlines() if line.startswith("//   predicted roles: "))
    predicted, asked = _roles(line)
    assert "conversion" in asked and "conversion" not in predicted and "staging" in predicted, line
    # alive to the kernel's end, aligned for any buffer: nothing else known of it
    assert re.search(r"buffer +\[ +0, +8192\) +8192 B align 1024 alive ops \d+\.\.\d+ +cuda_tile.permute", dump), dump


def test_every_call_site_role_is_listed() -> None:
    """Each role an alloc_buffer / new_matrix / place_kmajor / scratch call names (or a `role=` passes on) is a
    role of ROLES."""
    import re

    call = re.compile(r'(?:alloc_buffer|new_matrix|place_kmajor|scratch)\((?:[^()"]|\([^()]*\))*"([a-z0-9-]+)"')
    used = set()
    for path in (ROOT / "tileiras" / "lowering").glob("*.py"):
        text = path.read_text()
        used |= set(re.findall(r'role="([a-z0-9-]+)"', text)) | set(call.findall(text))
    assert used and used <= set(shared_sizes.ROLES), used - set(shared_sizes.ROLES)
    assert {role for role, _ in shared_sizes.SIZERS} | set(shared_stages.ROLES) <= set(shared_sizes.ROLES)


def test_an_overflow_keeps_its_diagnostic_and_exit_code(tmp_path: Path) -> None:
    src = tmp_path / "big.mlir"
    # 256 KB of scratch: more than sm_90's 227 KB, the tile held whole (a print ordered after the store keeps
    # loop-tiles from transposing it in chunks, which needs no such scratch)
    src.write_text(_transpose(256, 256).replace("  return\n", '  %pr = print_tko "done\\n" token = %st -> token\n  return\n'))
    result = subprocess.run([sys.executable, "-m", "tileiras", "--no-cache", "--emit=ptx", "--gpu-name", "sm_90",
                             str(src), "-o", str(tmp_path / "big.ptx")], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT), STRICT_ENV: "1"})
    assert result.returncode == 5, result.stderr
    assert "error: kernel 'k' needs 262144 bytes of shared memory (262144 for buffers alive at once, of 262144 " \
           "conversion asked for; 0 allocas); sm_90 allows at most 232448 per block" in result.stderr
    assert "internal" not in result.stderr


def _corpus(name: str, gpu: str, unsupported: str = "") -> str:
    """--print-ir-after-all of a corpus kernel (tests/realistic or tests/tilegym bytecode); `unsupported`:
    the error its lowering stops at (the passes before it were dumped)."""
    from tileiras.bytecode.reader import read_module

    path = next((ROOT / "tests").glob(f"*/bytecode/{name}.tileirbc"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), \
            (pytest.raises(CompileError, match=unsupported) if unsupported else contextlib.nullcontext()):
        lower_module(read_module(path.read_bytes(), str(path)), gpu, print_ir_after_all=True)
    return err.getvalue()


@pytest.mark.parametrize("gpu, stages, barriers", [("sm_80", 6, ""), ("sm_90", 8, "mbarriers (buffer) 128 B align 8")])
def test_a_pipeline_depth_is_decided_by_the_plan_and_read_by_the_lowering(monkeypatch, gpu: str, stages: int,
                                                                          barriers: str) -> None:
    """The pass fits the loop's stages beside what it placed before the loop; the lowering takes that
    depth from the plan (planned_fit), and its rings and mbarriers are the predicted ones."""
    from tileiras.lowering import pipelined_loop

    read = []
    planned = pipelined_loop.planned_fit
    monkeypatch.setattr(pipelined_loop, "planned_fit", lambda k, op: read.append(planned(k, op)) or read[-1])
    monkeypatch.setenv(STRICT_ENV, "1")
    dump = _corpus("bmm_f16_64x64x32", gpu)
    plan = "\n".join(_section(dump, "plan-shared-memory"))
    assert f": {stages} stages beside 0 B planned before it (" in plan, plan
    assert plan.count("ring (ring) ") == 2 and barriers in plan, plan
    assert [fit.stages for fit in read] == [stages]
    assert f"{stages}-stage" in dump and "dropped" not in dump


def _planned(monkeypatch, name: str, gpu: str) -> tuple[str, str]:   # type: ignore[no-untyped-def]
    """(what compiling the corpus kernel printed, its plan-shared-memory section), the check strict."""
    monkeypatch.setenv(STRICT_ENV, "1")
    dump = _corpus(name, gpu)
    return dump, "\n".join(_section(dump, "plan-shared-memory"))


def _mispredict(monkeypatch, role: str, size) -> None:   # type: ignore[no-untyped-def]
    """shared_stages.predict with the sizes of `role`'s requests changed by `size`; the check strict."""
    from tileiras.tileas import shared_stages

    predict = shared_stages.predict

    def wrong(*args):   # type: ignore[no-untyped-def]
        found = predict(*args)
        return replace(found, requests=[replace(r, nbytes=size(r.nbytes)) if r.role == role else r
                                        for r in found.requests])

    monkeypatch.setattr(shared_stages, "predict", wrong)
    monkeypatch.setenv(STRICT_ENV, "1")


@pytest.mark.parametrize("role,size,kernel,asks", [
    ("ring", lambda n: n - 1024, "bmm_f16_64x64x32",
     r"'cuda_tile.for' at .* writes 32768 B in the plan's ring \(ring\) 31744 B align 1024 swizzle 64B"),
    ("kmajor", lambda n: n // 2, "mm_e4m3_64x64x32",
     r"'cuda_tile.for' at .* writes 4096 B in the plan's kmajor \(buffer\) 2048 B align 1024"),
    ("reduction", lambda n: n - 16, "cp_layernorm_bwd_dwdb_f16_32x1024",
     r"'cuda_tile.reduce' at .* writes \d+ B in the plan's reduction \(reduction\) \d+ B align 16"),
])
def test_a_wrong_prediction_is_an_internal_error(monkeypatch, role: str, size, kernel: str, asks: str) -> None:  # type: ignore[no-untyped-def]
    _mispredict(monkeypatch, role, size)
    with pytest.raises(CompileError, match=asks):
        _corpus(kernel, "sm_90")


def test_a_staged_load_the_plan_did_not_predict_is_an_internal_error(monkeypatch) -> None:
    from tileiras.tileas import shared_stages

    predict = shared_stages.predict
    monkeypatch.setattr(shared_stages, "predict", lambda *args: replace(
        found := predict(*args), requests=[r for r in found.requests if r.role != "staging"]))
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(CompileError, match=r"'cuda_tile.load_view_tko' at .* asks for a staging buffer of \d+ B, "
                                           r"which the plan does not place"):
        _corpus("cp_nvfp4_matmul_128x128x128", "sm_80")


def test_staged_loads_are_dumped_with_their_lifetimes_and_offsets(monkeypatch) -> None:
    """(sm_80 stops at the block-scaled mma, after the passes: the plan was dumped.)"""
    monkeypatch.setenv(STRICT_ENV, "1")
    plan = _section(_corpus("cp_nvfp4_matmul_128x128x128", "sm_80", "requires sm_100"), "plan-shared-memory")
    staged = [line for line in plan if line.startswith("//     staging (staging) ")]
    assert len(staged) == 2 and all(", offset " in line for line in staged), plan


def test_where_a_buffer_before_the_loop_is_not_planned_the_depth_stays_the_plans(monkeypatch) -> None:
    """sm_90 attention in e4m3: the restaged mma operand of the first loop (mma-stage, here not sized by
    the plan) comes before the next loop's stages: it goes above every planned buffer, and the dump says
    so (no error); the depths and every other buffer's offset are still the plan's (the lowering decides
    none)."""
    from tileiras.lowering import pipelined_loop
    from tileiras.tileas import shared_operands

    read = []
    planned = pipelined_loop.planned_fit
    monkeypatch.setattr(pipelined_loop, "planned_fit", lambda k, op: read.append((k, op, planned(k, op))) or read[-1][2])
    monkeypatch.setattr(shared_operands, "ROLES", ())
    monkeypatch.setenv(STRICT_ENV, "1")
    dump = _corpus("cp_fmha_e4m3_d64_causal_128x128", "sm_90")
    assert "placed above the plan, not planned: mma-stage x" in dump and "error: internal" not in dump
    assert read and all(fitted is k.planned.plan.fits[op][1] for k, op, fitted in read)


def test_a_reductions_scratch_before_a_loop_is_planned_and_its_depth_holds(monkeypatch) -> None:
    """layernorm's reduces (each row over four warps, carried through its loop in rows) combine the
    warps' partial sums through scratch ("warp-reduction") before the next loop's stages: sized by
    ops_reduce, which the pass calls too, so the loops' depths are the plan's (nothing dropped). Its
    loops all pipelined here: the two short ones are left to plain loads otherwise (pipeline._no_steady_state)."""
    from tileiras.schedule import pipeline

    monkeypatch.setattr(pipeline, "_no_steady_state", lambda plan: "")
    dump, plan = _planned(monkeypatch, "layernorm_chunked_f16_n16384_t1024", "sm_90")
    # the second loop beside the first's mbarriers only (its ring's bytes are free again: stage_rings.fit_beside)
    assert "//     warp-reduction (reduction) 16 B" in plan and "8 stages beside 128 B" in plan, plan
    assert "dropped" not in dump and "error: internal" not in dump


def test_a_reduction_sliced_to_fit_is_predicted_in_as_many_slices(monkeypatch) -> None:
    """sm_120's 32x1024 column sums of layernorm's backward do not fit whole beside the staged
    loads: the pass decides the same two slices the lowering does (ops_reduce.slices)."""
    monkeypatch.setenv(STRICT_ENV, "1")
    plan = "\n".join(_section(_corpus("cp_layernorm_bwd_dwdb_f16_32x1024", "sm_120"), "plan-shared-memory"))
    assert "//     reduction (reduction) 65536 B align 16, live over ops " in plan, plan


def test_a_loops_kmajor_copies_are_predicted_and_its_depth_holds(monkeypatch) -> None:
    """sm_90's K-major copy of an e4m3 B, asked by the loop before its stages (kmajor_copies.loop_copies,
    which the pass decides: SharedPlan.kmajor): two slots of 2048 B, the loop's wgmma keeping its group in flight;
    predicted, so the loop's depth is the plan's (nothing dropped)."""
    dump, plan = _planned(monkeypatch, "mm_e4m3_64x64x32", "sm_90")
    assert "//     kmajor (buffer) 4096 B align 1024, live over its op to the kernel's end, for (%30, b), offset 0: " \
        in plan, plan
    assert "stages beside 4096 B planned before it" in plan and "dropped" not in dump, plan


def test_tensor_memorys_control_block_is_planned_where_the_lowering_first_asks_for_it(monkeypatch) -> None:
    """sm_100 attention: the MMA warp of the warp-specialized loop allocates tensor memory, after the
    loop's stages (tcgen05_buffers.first_asker names the op; the pass plans the control block there, with the
    mbarriers above every other buffer: shared_plan.place): the bytes before the loop are the lowering's, so the
    loop's depth (two stages, as its producer's copies' latency asks: test_ring_depth.py) is the plan's and
    nothing is dropped."""
    from tileiras.lowering import pipelined_loop

    read = []
    planned = pipelined_loop.planned_fit
    monkeypatch.setattr(pipelined_loop, "planned_fit", lambda k, op: read.append(planned(k, op)) or read[-1])
    dump, plan = _planned(monkeypatch, "fa_bf16_q128k64d128", "sm_100")
    assert ": 2 stages beside 32776 B planned before it (" in plan, plan
    assert "//     tmem-control (tmem) 128 B align 128, live over its op to the kernel's end, offset 98432: %for" in plan
    assert [fit.stages for fit in read] == [2] and "dropped" not in dump


def test_tensor_memory_planned_at_the_kernels_start_is_an_internal_error(monkeypatch) -> None:
    """A block-scaled mma outside any warp-specialized loop asks for tensor memory itself, after the
    loads staged before it; planned at the kernel's start instead, the mma's request is one the plan
    does not predict."""
    from tileiras.tileas import tcgen05_buffers

    monkeypatch.setattr(tcgen05_buffers, "first_asker", lambda entry, assignment: entry)
    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(CompileError, match=r"'cuda_tile.mmaf_scaled' at .* asks for a tmem-control buffer of 128 B, "
                                           r"which the plan does not place"):
        _corpus("cp_nvfp4_matmul_128x128x128", "sm_100")


def test_an_invariant_load_tma_refuses_is_planned_as_the_staging_it_gets(monkeypatch) -> None:
    """Attention's queries are copied once by TMA before the loop; where TMA cannot copy them (here:
    told so, where plan-shared-memory decides it: pipeline_copies.once) the lowering stages them like
    any other load, with cp.async and no mbarrier of their own, and the plan predicts that (not an
    "invariant" buffer)."""
    from tileiras.tileas import pipeline_copies, tma_boxes

    plan, once = tma_boxes.plan, pipeline_copies.once
    queries = []

    def refusing(op, *args, **kwargs):   # type: ignore[no-untyped-def]
        if any(op is q for q in queries):
            return None, "refused by the test"
        return plan(op, *args, **kwargs)

    def spied(k, op):   # type: ignore[no-untyped-def]
        queries.append(op)
        return once(k, op)

    dump, planned = _planned(monkeypatch, "fa_f16_q64k64d64", "sm_90")
    assert "invariant (staging)" in planned, planned
    monkeypatch.setattr(pipeline_copies, "once", spied)
    monkeypatch.setattr(tma_boxes, "plan", refusing)
    dump, planned = _planned(monkeypatch, "fa_f16_q64k64d64", "sm_90")
    assert "invariant (staging)" not in planned and "staging (staging)" in planned, planned
    assert queries and "error: internal" not in dump
