"""Shared helpers of the benchmarks: corpus files, oracle paths, timing, tables."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


def _byte_compile() -> None:
    """Byte-compile the checkout once, as `pip install` does: with PYTHONDONTWRITEBYTECODE set,
    every measured process would otherwise recompile every module it imports."""
    import compileall

    for package in ("tileiras", "build_rules"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


_byte_compile()


def corpus_files(version: str | None = None) -> list[tuple[str, Path]]:
    """(kernel name, bytecode path) per corpus kernel, at `version` or the newest it has."""
    return [(name, path) for name, path, _ in corpus_kernels(version)]


def corpus_kernels(version: str | None = None) -> list[tuple[str, Path, str]]:
    """(kernel name, bytecode path, the GPU it was exported for) per corpus kernel."""
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    out = []
    for kernel in manifest["kernels"]:
        files = kernel["files"]
        if not files:
            continue
        chosen = version if version in files else max(files, key=lambda v: tuple(int(p) for p in v.split(".")))
        path = CORPUS / files[chosen]
        if path.exists():
            out.append((kernel["name"], path, kernel.get("gpu_code") or "sm_90"))
    return out


def nvidia_tool(name: str) -> Path | None:
    """NVIDIA's tool from the nvidia-cuda-tileiras wheel (an oracle: benchmarks and tests only)."""
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(base) / "cu13" / "bin" / name
        if candidate.exists():
            return candidate
    return None


def our_command(tool: str) -> list[str]:
    """Our console script when installed next to this Python, else the module from the checkout."""
    script = Path(sys.executable).parent / tool
    if script.exists():
        return [str(script)]
    module = {"tileiras": "tileiras.driver.tileiras_main", "tileirdisasm": "tileiras.driver.disasm_main",
              "tileir": "tileiras.driver.tileir_main"}[tool]
    return [sys.executable, "-m", module]


def best_time(argv: Sequence[str], repeats: int, env: dict[str, str] | None = None) -> float:
    """Minimum wall time of `repeats` runs of a whole process (the least noisy statistic)."""
    best = math.inf
    run_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    for _ in range(repeats):
        start = time.perf_counter()
        result = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=run_env, cwd=ROOT)
        elapsed = time.perf_counter() - start
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, argv))} failed: {result.stderr.decode()[-400:]}")
        best = min(best, elapsed)
    return best


def geomean(values: Sequence[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    print(title)
    widths = [max(len(str(h)), *(len(f"{r[i]}") for r in rows)) for i, h in enumerate(header)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(f"{c}".ljust(w) for c, w in zip(row, widths)))
