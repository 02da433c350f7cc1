"""Helpers of the plan-shared-memory tests (tests/test_shared_plan*.py): a module lowered with the
plan's check strict, what it printed, each kernel's `PlanReader`, and the plan's dump read back."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from tileiras.lowering.pipeline import lower_module
from tileiras.tileas import shared_plan

ROOT = Path(__file__).resolve().parents[1]
PLAN_DUMP = "// -----// IR Dump After plan-shared-memory (nv_tileas) //----- //"


def corpus_bytecode(name: str) -> Path:
    """The bytecode of corpus kernel `name` (tests/realistic or tests/tilegym)."""
    return next((ROOT / "tests").glob(f"*/bytecode/{name}.tileirbc"))


def lower(monkeypatch, source: "str | bytes | Path", gpu: str) -> tuple[str, str, list]:  # type: ignore[no-untyped-def]
    """(the LLVM IR, what --print-ir-after-all printed, each kernel's PlanReader once it finished) of
    `source` (a corpus kernel's bytecode path, bytecode, or a module's text) on `gpu`, the check strict."""
    from tileiras.bytecode.reader import read_module
    from tileiras.frontend import load_module

    checks: list[shared_plan.PlanReader] = []
    finish = shared_plan.PlanReader.finish

    def kept(self):   # type: ignore[no-untyped-def]
        checks.append(self)
        return finish(self)

    monkeypatch.setattr(shared_plan.PlanReader, "finish", kept)
    monkeypatch.setenv(shared_plan.STRICT_ENV, "1")
    if isinstance(source, str):
        module = load_module(source.encode(), "k.mlir")
    else:
        module = read_module(source.read_bytes(), str(source)) if isinstance(source, Path) else read_module(source, "k")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        ir, _ = lower_module(module, gpu, print_ir_after_all=True)
    return ir, err.getvalue(), checks


def plan_section(dump: str) -> list[str]:
    """The lines of the dump's plan-shared-memory section."""
    lines = dump.splitlines()
    start = lines.index(PLAN_DUMP)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("// -----//"))
    return lines[start + 1:end]


def watch_lowering(monkeypatch, *names: str) -> list[bool]:  # type: ignore[no-untyped-def]
    """Marks the lowering of each loop (pipelined_loop's `names`, `prepare` by default): the list is non-empty
    while one runs, so a decision function patched to assert it empty proves nothing decides again there."""
    from tileiras.lowering import pipelined_loop

    lowering: list[bool] = []

    def lowered(run):   # type: ignore[no-untyped-def]
        def run_lowering(k, op):   # type: ignore[no-untyped-def]
            lowering.append(True)
            try:
                return run(k, op)
            finally:
                lowering.pop()
        return run_lowering

    for name in names or ("prepare",):
        monkeypatch.setattr(pipelined_loop, name, lowered(getattr(pipelined_loop, name)))
    return lowering
