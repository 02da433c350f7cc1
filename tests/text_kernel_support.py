"""Kernels written as cuda_tile text in a test: the module and its entry, the layouts the compiler
assigns it, and its PTX from the command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def entry(text: str) -> tuple[Any, Any]:
    """(the module parsed from `text`, its `cuda_tile.entry` op)."""
    from tileiras.frontend import load_module

    module = load_module(text.encode(), "k.mlir")
    return module, next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")


def assignment(text: str, gpu: str) -> tuple[Any, Any]:
    """(the entry, its LayoutAssignment on `gpu` at the threads the compiler chooses)."""
    from tileiras.target import caps
    from tileiras.tileas.assign_layouts import LayoutAssignment
    from tileiras.tileas.warps import choose_threads

    _, op = entry(text)
    return op, LayoutAssignment(op, choose_threads(op, gpu), sm=caps(gpu).sm)


def ptx(text: str, gpu: str, tmp_path: Path, *flags: str) -> tuple[str, str]:
    """(the PTX `tileiras --emit=ptx` writes for `text` on `gpu`, its stderr); a failure fails the test."""
    src, out = tmp_path / "k.mlir", tmp_path / f"k.{gpu}.ptx"
    src.write_text(text)
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", gpu,
                           str(src), "-o", str(out), *flags], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return out.read_text(), done.stderr
