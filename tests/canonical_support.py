"""What the canonical form's invariance is checked on: a module's PTX for one target, normalized
(comments, debug lines and the module's name aside), and the kernels to check it with."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Optional

from tileiras.errors import CompileError
from tileiras.ir.core import Operation

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "bytecode"
TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")


_REGISTER = re.compile(r"%(rd|rs|r|fd|f|p|hh|h|q)(\d+)\b")


def _renamed(lines: list[str]) -> list[str]:
    """Virtual registers numbered by first appearance (per class): value names aside, as ptxas sees them."""
    names: dict[str, str] = {}
    counts: dict[str, int] = {}

    def name(m: "re.Match[str]") -> str:
        key = m.group(0)
        if key not in names:
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
            names[key] = f"%{m.group(1)}{counts[m.group(1)]}"
        return names[key]

    return [_REGISTER.sub(name, line) for line in lines]


def normalized_ptx(module: Operation, gpu: str) -> Optional[list[str]]:
    """The PTX of `module` for `gpu` without comments and debug lines, its virtual registers numbered by first
    appearance (debug lines and value names aside); None where the target refuses it."""
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.lowering.pipeline import lower_module

    try:
        llvm_ir, _ = lower_module(module, gpu)
    except CompileError:
        return None
    lines = []
    for line in llvm_to_ptx(llvm_ir, gpu).splitlines():
        s = line.strip()
        if s and not s.startswith(("//", ".loc", ".file")):
            lines.append(s)
    return _renamed(lines)


def unit_versions() -> dict[str, list[Path]]:
    """Unit corpus kernel -> its bytecode at every version cuTile exported it (13.1 .. 13.4)."""
    return {d.name: sorted(d.glob("*.tileirbc")) for d in sorted(CORPUS.iterdir()) if any(d.glob("*.tileirbc"))}


def reencoded(path: Path, version: str) -> bytes:
    """`path` written again at `version` by our own writer (cuTile 1.7 cannot write 13.5)."""
    from tileiras.bytecode.writer import write_module
    from tileiras.frontend import load_module

    return write_module(load_module(path.read_bytes(), path.name), version)


def exported(corpus: str, names: list[str], version: str, gpu: str, out: Path) -> dict[str, Path]:
    """The corpus kernels `names` exported by cuTile at `version` (for target `gpu` before 13.3, as cuTile
    requires) into `out`: name -> bytecode."""
    out.mkdir(parents=True, exist_ok=True)
    only = [a for n in names for a in ("--only", n)]
    # exit 1 where cuTile refuses some kernel at this version (block scaling before 13.3): the others count
    subprocess.run([sys.executable, "generate.py", "--out", str(out), "--bytecode-version", version,
                    "--gpu-code", gpu, *only], cwd=ROOT / "tests" / corpus, capture_output=True,
                   env=dict(os.environ, PYTHONHASHSEED="0"))
    return {n: out / "bytecode" / f"{n}.tileirbc" for n in names if (out / "bytecode" / f"{n}.tileirbc").exists()}


def exported_per_target(corpus: str, names: list[str], gpus: list[str], version: str,
                        out: Path) -> dict[tuple[str, str], Path]:
    """(name, target) -> the kernel exported by cuTile at `version`: once for every target from 13.3 on,
    for each target itself before (where cuTile needs one). The gap benchmarks compare per version."""
    per_target = tuple(map(int, version.split("."))) < (13, 3)
    found: dict[tuple[str, str], Path] = {}
    for gpu in (gpus if per_target else gpus[:1]):
        for name, path in exported(corpus, names, version, gpu, out / f"{corpus}-{version}-{gpu}").items():
            for target in ([gpu] if per_target else gpus):
                found[(name, target)] = path
    return found
