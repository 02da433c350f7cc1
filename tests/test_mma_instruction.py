"""The instruction of each mma is decided once, by layout assignment (tileas/assign_layouts.py): the
mma.sync shape (`LayoutAssignment.mma_shapes`) or why the mma is left to FMAs (`fma_reasons`), and the
wgmma shape of those on wgmma (`wgmma_shapes`). The lowering (ops_reduce._mma, ops_wgmma.lower_wgmma)
only reads them; the FMA reasons are in the nv_tileas layouts dump, as in the remark."""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pytest

from tileiras import remarks
from tileiras.errors import CompileError
from tileiras.frontend import load_module
from tileiras.lowering import pipeline
from tileiras.lowering.pipeline import lower_module
from tileiras.tileaa import mma_forms
from tileiras.tileas.assign_layouts import LayoutAssignment

from shared_plan_support import corpus_bytecode
from test_tile_layer import _matmul


def _deciding_nothing_while_lowering(monkeypatch: pytest.MonkeyPatch) -> None:
    """mma_forms' choices patched to fail while a kernel is lowered to LLVM (pipeline._lower_entry)."""
    lowering: list[bool] = []
    lower_entry = pipeline._lower_entry

    def marked(*args: Any) -> Any:
        lowering.append(True)
        try:
            return lower_entry(*args)
        finally:
            lowering.pop()

    def refusing(name: str) -> None:
        decide = getattr(mma_forms, name)

        def deciding(*args: Any, **kw: Any) -> Any:
            assert not lowering, f"the lowering decided an mma's instruction ({name})"
            return decide(*args, **kw)
        monkeypatch.setattr(mma_forms, name, deciding)

    monkeypatch.setattr(pipeline, "_lower_entry", marked)
    for name in ("choose", "select_shape", "select_wgmma"):
        refusing(name)


@pytest.mark.parametrize("name,gpu,instruction", [("mm_f16_128x128x64", "sm_80", "mma.m16n8k16"),
                                                  ("mm_f16_128x128x64", "sm_90", "wgmma"),
                                                  ("mm_tf32_128x256x64", "sm_90", "wgmma"),
                                                  ("mm_e4m3_64x64x32", "sm_120", "e4m3")])
def test_the_lowering_reads_each_mmas_instruction(monkeypatch: pytest.MonkeyPatch, name: str, gpu: str,
                                                  instruction: str) -> None:
    _deciding_nothing_while_lowering(monkeypatch)
    module = load_module(corpus_bytecode(name).read_bytes(), name)
    ir, _ = lower_module(module, gpu)
    assert instruction in ir


def test_an_mma_left_to_fmas_says_why_in_its_remark_and_the_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    """f32 x f32: no tensor-core instruction; the reason layout assignment recorded is the remark's
    and a line of the layouts dump."""
    _deciding_nothing_while_lowering(monkeypatch)
    err = io.StringIO()
    with remarks.collecting() as said, contextlib.redirect_stderr(err):
        lower_module(load_module(_matmul("float32", "float32", 32, 64, 32), "fma.tileirbc"), "sm_90",
                     print_ir_after_all=True)
    reasons = [dict(r.args).get("Reason") for r in said if r.name == "RemarkTensorCoreMMA"]
    assert reasons == ["no mma.sync lowering for f32 x f32 -> f32"], reasons
    layouts = err.getvalue().split("// layouts of @", 1)[1].split("IR Dump After", 1)[0]
    assert " on FMAs, no tensor core: no mma.sync lowering for f32 x f32 -> f32" in layouts, layouts


def test_an_mma_layout_assignment_decided_nothing_for_is_an_internal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    init = LayoutAssignment.__init__

    def forgetting(self: LayoutAssignment, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        self.fma_reasons = {}

    monkeypatch.setattr(LayoutAssignment, "__init__", forgetting)
    with pytest.raises(CompileError, match="error: internal: layout assignment chose no instruction for the mma at "):
        lower_module(load_module(_matmul("float32", "float32", 32, 64, 32), "fma.tileirbc"), "sm_90")
