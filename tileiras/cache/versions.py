"""Versions of the tools whose output a cache entry depends on, ours included, fetched cheaply.

Asking LLVM for its version means loading llvmlite's shared library (~0.1 s),
asking ptxas means running it, and fingerprinting our own code means reading
all its files (~5 ms): all too slow for a cache hit. So each answer is
remembered in `<cache root>/tool-versions.json`, one slot per tool path, with
the stamp it holds for (the tool file's size and mtime; for our code,
compiler_files.stamp): a reinstall or an edit changes the stamp and the answer
is recomputed. A missing or unreadable memo only costs the slow path.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from pathlib import Path

import tileiras

from ..atomic import replace_file
from . import compiler_files

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only, as in store.py
    from typing import Callable

MEMO_NAME = "tool-versions.json"
# A file changed this recently may change again within its file system's timestamp
# granularity without changing its stamp: such a tree is fingerprinted afresh.
SETTLED_NS = 2_000_000_000
_process_memo: dict[str, tuple[str, str]] = {}  # slot -> (stamp, answer)
_keyed_stamp: str | None = None  # the running compiler's stamp when this process fingerprinted it


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


def _file_stamp(path: Path | None) -> str:
    if path is None:
        return "?"
    try:
        stat = path.stat()
    except OSError:
        return "?"
    return f"{stat.st_size}|{stat.st_mtime_ns}"


def _load(memo_path: Path) -> dict[str, str]:
    try:
        loaded = json.loads(memo_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def _remembered(memo_dir: Path | None, slot: str, stamp: str, compute: Callable[[], str]) -> str:
    """compute(), remembered under `slot` (in this process and in the memo file) while `stamp` holds."""
    known = _process_memo.get(slot)
    if known is not None and known[0] == stamp:
        return known[1]
    memo_path = memo_dir / MEMO_NAME if memo_dir is not None else None
    memo = _load(memo_path) if memo_path is not None else {}
    held, _, value = memo.get(slot, "").partition("\t")
    if held != stamp or not value:
        value = compute()
        if memo_path is not None:
            memo[slot] = f"{stamp}\t{value}"
            try:
                memo_path.parent.mkdir(parents=True, exist_ok=True)
                replace_file(memo_path, json.dumps(memo, sort_keys=True, indent=1).encode("utf-8"))
            except OSError:
                pass
    _process_memo[slot] = (stamp, value)
    return value


def llvm_version(memo_dir: Path | None = None) -> str:
    """LLVM's version as llvmlite reports it (llvm_version_info), e.g. '22.1.0'."""

    def compute() -> str:
        import llvmlite
        import llvmlite.binding as llvm

        return ".".join(map(str, llvm.llvm_version_info)) + f"+llvmlite{llvmlite.__version__}"

    library = _llvmlite_library()
    return _remembered(memo_dir, f"llvm|{library or '?'}", _file_stamp(library), compute)


def ptxas_version(memo_dir: Path | None = None) -> str:
    """The release of the ptxas this process would run, e.g. '13.5.37'."""
    from tileiras.codegen import ptxas

    path = ptxas.find_ptxas()
    return _remembered(memo_dir, f"ptxas|{path}", _file_stamp(path), ptxas.ptxas_version)


@lru_cache(maxsize=4)  # once per process (the cache server clears it between actions)
def compiler_fingerprint(memo_dir: Path | None = None, root: Path | None = None) -> str:
    """compiler_files.fingerprint of the compiler running here (or of the one at `root`)."""
    global _keyed_stamp
    base = root or compiler_files.package_root()
    stamp, newest = compiler_files.stamp(base)
    if root is None:
        _keyed_stamp = stamp

    def compute() -> str:
        return compiler_files.fingerprint_of(base)

    if time.time_ns() - newest < SETTLED_NS:
        return compute()
    return _remembered(memo_dir, f"compiler|{base}", stamp, compute)


def compiler_unchanged() -> bool:
    """Whether the compiler's files are as they were when this process fingerprinted them.

    Modules load lazily, so a compile whose compiler changed after its cache
    keys were made may have run either version: its output must not be stored."""
    return _keyed_stamp is None or compiler_files.stamp(compiler_files.package_root())[0] == _keyed_stamp
