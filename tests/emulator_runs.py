"""What the tests of realistic kernels on the emulator share: compile a kernel, run it on the emulator
with the race checker against the interpreter (or numpy), and run it with its PTX edited (a wait or a
fence removed) to show the race checker reports what the edit breaks."""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np


def entry(module: Any) -> str:
    """The name of the module's (first) entry."""
    return next(str(op.attributes["sym_name"]) for op in module.regions[0].block.operations
                if op.name == "cuda_tile.entry")


def emulate(module: Any, args: list, gpu: str, grid: tuple = (1, 1, 1)) -> list:
    """The arrays after a launch on the emulator for `gpu`, race checker on (`args` are left alone)."""
    from tileiras.runtime import run_arrays

    return run_arrays(module, entry(module), grid, [np.copy(a) for a in args], backend="emulator", gpu_name=gpu,
                      check_races=True)


def interpret(module: Any, args: list, grid: tuple = (1, 1, 1)) -> list:
    from tileiras.runtime import run_arrays

    return run_arrays(module, entry(module), grid, [np.copy(a) for a in args], backend="interpreter")


def emulate_and_interpret(module: Any, args: list, gpu: str, grid: tuple = (1, 1, 1)) -> tuple[list, list]:
    """(the emulator's arrays with the race checker on, the interpreter's) after one launch each."""
    return emulate(module, args, gpu, grid), interpret(module, args, grid)


def edit_ptx(monkeypatch: Any, edit: Callable[[str], str]) -> list[str]:
    """Every PTX the runtime compiles from now on goes through `edit`; the edited texts are appended
    to the list returned."""
    from tileiras.runtime import backends

    real = backends.compile_module
    seen: list[str] = []

    def edited(req: Any, emit: Any, gpu: Any) -> tuple:
        ptx, meta = real(req, emit, gpu)
        seen.append(edit(ptx.decode()))
        return seen[-1].encode(), meta

    monkeypatch.setattr(backends, "compile_module", edited)
    return seen


def removing(pattern: str, count: int | None = None, needs: str = "") -> Callable[[str], str]:
    """An edit deleting every match of `pattern` (`count` of them if given, at least one anyway) from
    a PTX that contains `needs`."""
    def edit(text: str) -> str:
        out, n = re.subn(pattern, "", text)
        assert n and (count is None or n == count), (pattern, n)
        assert needs in out, needs
        return out

    return edit


def without_wait(what: str) -> Callable[[str], str]:
    """An edit taking out the try_wait loop on the barrier our PTX comments `// wait: {what}` (the wait
    succeeds at once)."""
    def edit(text: str) -> str:
        lines = text.splitlines()
        hits = [i for i, line in enumerate(lines) if f"// wait: {what}" in line]
        assert hits, f"no '{what}' wait in the PTX"
        for i in hits:
            lines[i] = "\tmov.u32 " + lines[i].split("selp.u32 ")[1].split(",")[0] + ", 1;"
        return "\n".join(lines)

    return edit
