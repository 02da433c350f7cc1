"""Versions of the tools whose output a cache entry depends on, fetched cheaply.

Asking LLVM for its version means loading llvmlite's shared library (~0.1 s),
and asking ptxas means running it: both too slow for a cache hit. So each
answer is remembered in `<cache root>/tool-versions.json`, keyed by the tool
file's path, size and mtime: a reinstall changes the key and the answer is
recomputed. A missing or unreadable memo only costs the slow path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import tileiras

MEMO_NAME = "tool-versions.json"
_process_memo: dict[str, str] = {}


def tileiras_version() -> str:
    return tileiras.__version__


def _llvmlite_library() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("llvmlite")
    if spec is None or spec.origin is None:
        return None
    binding = Path(spec.origin).parent / "binding"
    for name in ("libllvmlite.so", "libllvmlite.dylib", "llvmlite.dll"):
        if (binding / name).is_file():
            return binding / name
    return None


def _fingerprint(tool: str, path: Path | None) -> str:
    if path is None:
        return f"{tool}|?"
    try:
        stat = path.stat()
    except OSError:
        return f"{tool}|{path}|?"
    return f"{tool}|{path}|{stat.st_size}|{stat.st_mtime_ns}"


def _remembered(memo_dir: Path | None, key: str, compute: Callable[[], str]) -> str:
    if key in _process_memo:
        return _process_memo[key]
    memo_path = memo_dir / MEMO_NAME if memo_dir is not None else None
    memo: dict[str, str] = {}
    if memo_path is not None:
        try:
            loaded = json.loads(memo_path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                memo = {str(k): str(v) for k, v in loaded.items()}
        except (OSError, ValueError):
            memo = {}
    if key in memo:
        _process_memo[key] = memo[key]
        return memo[key]
    value = compute()
    _process_memo[key] = value
    if memo_path is not None:
        memo[key] = value
        try:
            memo_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = memo_path.with_name(f".{MEMO_NAME}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(memo, sort_keys=True, indent=1), encoding="utf-8")
            os.replace(tmp, memo_path)
        except OSError:
            pass
    return value


def llvm_version(memo_dir: Path | None = None) -> str:
    """LLVM's version as llvmlite reports it (llvm_version_info), e.g. '22.1.0'."""

    def compute() -> str:
        import llvmlite
        import llvmlite.binding as llvm

        return ".".join(map(str, llvm.llvm_version_info)) + f"+llvmlite{llvmlite.__version__}"

    return _remembered(memo_dir, _fingerprint("llvm", _llvmlite_library()), compute)


def ptxas_version(memo_dir: Path | None = None) -> str:
    """The release of the ptxas this process would run, e.g. '13.5.37'."""
    from tileiras.codegen import ptxas

    path = ptxas.find_ptxas()
    return _remembered(memo_dir, _fingerprint("ptxas", path), ptxas.ptxas_version)
