"""The identities of what a cache entry depends on besides its inputs: LLVM, ptxas and our own code.

A tool's identity is the SHA-256 of its file (libllvmlite, ptxas): content,
not a version string, so a rebuilt or patched tool never reuses entries, and
the same file installed anywhere shares them. Reading a 180 MB library to hash
it is slow, but a wheel's installer already recorded that digest in the
distribution's RECORD (tool_digest.py reads it when the file is the one the
wheel installed). Our own code's identity is compiler_files.fingerprint.

Each answer is remembered in `tool-versions.tsv` beside our code (in
`tileiras/__pycache__/`, as Python keeps its bytecode, so a new cache directory
does not pay for them), or in the cache directory when that cannot be written,
one slot per tool path, with the stamp it holds for (the file's size and
mtime; for our code, compiler_files.stamp): a reinstall or an edit changes the
stamp and the answer is recomputed. A missing or unreadable memo only costs
the slow path. The memo is one line per slot, `slot TAB stamp TAB answer`
(json would cost every compile that makes a key its import); a slot whose
path holds a tab or a newline is not remembered on disk.
"""

from __future__ import annotations

import os
import stat
import time
from functools import lru_cache

import tileiras

from ..atomic import replace_file
from . import compiler_files

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only, as in store.py
    from typing import Callable, Union

    PathLike = Union[str, "os.PathLike[str]"]

MEMO_NAME = "tool-versions.tsv"
MEMO_MAX_BYTES = 1 << 20
# A file changed this recently may change again within its file system's timestamp
# granularity without changing its stamp: such a tree is fingerprinted afresh.
SETTLED_NS = 2_000_000_000
# the coarsest timestamp tick of the file systems a compiler runs from (Linux's are a few ms)
TICK_NS = 50_000_000
_process_memo: dict[str, tuple[str, str]] = {}  # slot -> (stamp, answer)
_memo_files: dict[str, tuple[tuple[int, int, int], dict[str, str]]] = {}  # memo file -> (its version, its slots)
_start_state: compiler_files.State | None = None  # the running compiler's files, taken once, when first needed
_zip_stamp: tuple[int, int, int] | None = None      # a compiler zip's (mtime, ctime, size) at the first look


def tileiras_version() -> str:
    return tileiras.__version__


def _llvmlite_library() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("llvmlite")
    if spec is None or spec.origin is None:
        return None
    binding = os.path.join(os.path.dirname(spec.origin), "binding")
    for name in ("libllvmlite.so", "libllvmlite.dylib", "llvmlite.dll"):
        if os.path.isfile(os.path.join(binding, name)):
            return os.path.join(binding, name)
    return None


def _file_stamp(path: PathLike | None) -> str:
    if path is None:
        return "?"
    try:
        info = os.stat(path)
    except OSError:
        return "?"
    return f"{info.st_size}|{info.st_mtime_ns}"


def _parse(text: str) -> dict[str, str]:
    """slot -> 'stamp TAB answer', from the memo's lines; a line that is not three fields is skipped."""
    slots: dict[str, str] = {}
    for line in text.split("\n"):
        fields = line.split("\t")
        if len(fields) == 3 and all(fields):
            slots[fields[0]] = f"{fields[1]}\t{fields[2]}"
    return slots


def _render(slots: dict[str, str]) -> str:
    return "".join(f"{slot}\t{value}\n" for slot, value in sorted(slots.items())
                   if "\t" not in slot and "\n" not in slot and value.count("\t") == 1 and "\n" not in value)


def _load(memo_path: PathLike) -> dict[str, str]:
    """The memo file's slots (parsed again only when the file changed)."""
    memo_path = os.fspath(memo_path)
    try:
        info = os.stat(memo_path)
    except OSError:
        return {}
    if not stat.S_ISREG(info.st_mode) or info.st_size > MEMO_MAX_BYTES:
        return {}  # a FIFO, a device, something huge: not ours, and reading it might never end
    version = (info.st_mtime_ns, info.st_size, info.st_ino)
    known = _memo_files.get(memo_path)
    if known is not None and known[0] == version:
        return dict(known[1])
    try:
        with open(memo_path, "rb") as handle:
            slots = _parse(handle.read(MEMO_MAX_BYTES).decode("utf-8", "replace"))
    except OSError:
        slots = {}
    _memo_files[memo_path] = (version, slots)
    return dict(slots)


def _remembered(memo_dirs: tuple[str, ...], slot: str, stamp: str, compute: Callable[[], str]) -> str:
    """compute(), remembered under `slot` while `stamp` holds: in this process, and in the memo file of
    the first of `memo_dirs` that can be written (any of them is read)."""
    known = _process_memo.get(slot)
    if known is not None and known[0] == stamp:
        return known[1]
    for memo_dir in memo_dirs:
        held, _, value = _load(os.path.join(memo_dir, MEMO_NAME)).get(slot, "").partition("\t")
        if held == stamp and value:
            break
    else:
        value = compute()
        for memo_dir in memo_dirs:
            memo_path = os.path.join(memo_dir, MEMO_NAME)
            memo = _load(memo_path)  # again: another process may have added slots meanwhile
            memo[slot] = f"{stamp}\t{value}"
            try:
                if not os.path.isdir(memo_dir):
                    os.makedirs(memo_dir, exist_ok=True)
                replace_file(memo_path, _render(memo).encode("utf-8"),
                             mode=0o644)  # facts about files, useful to every user of this installation
                break
            except OSError:
                continue
    _process_memo[slot] = (stamp, value)
    return value


def _dirs(memo_dir: PathLike | None, root: PathLike | None = None) -> tuple[str, ...]:
    """Where answers are remembered: beside the compiler, as Python keeps its bytecode (so a new
    cache directory need not pay for them), else in the cache directory (a read-only installation)."""
    beside = os.path.join(root or compiler_files.package_root(), "tileiras", "__pycache__")
    return (beside,) if memo_dir is None else (beside, os.fspath(memo_dir))


def _tool_identity(memo_dir: PathLike | None, kind: str, path: PathLike | None) -> str:
    if path is None:
        return "missing"

    def compute() -> str:
        from .tool_digest import tool_digest

        return tool_digest(path)

    return _remembered(_dirs(memo_dir), f"{kind}|{os.fspath(path)}", _file_stamp(path), compute)


def llvm_identity(memo_dir: PathLike | None = None) -> str:
    """The identity of the LLVM that makes PTX and host code: its library's digest, 'sha256=...'."""
    return _tool_identity(memo_dir, "llvm", _llvmlite_library())


def ptxas_identity(memo_dir: PathLike | None = None) -> str:
    """The identity of the ptxas this process would run: its digest, 'sha256=...'."""
    from tileiras.codegen import ptxas

    return _tool_identity(memo_dir, "ptxas", ptxas.ptxas_path())


def _running_state() -> compiler_files.State:
    global _start_state
    if _start_state is None:
        _start_state = compiler_files.state(compiler_files.package_root())
    return _start_state


@lru_cache(maxsize=4)  # once per process (the cache server clears it between actions)
def _stamp(base: str) -> tuple[str, int]:
    if base == os.fspath(compiler_files.package_root()):
        return compiler_files.stamp(_running_state())  # the state compiler_unchanged_since checks: one look
    return compiler_files.stamp(compiler_files.state(base))


def compiler_fingerprint(memo_dir: PathLike | None = None, root: PathLike | None = None) -> str:
    """compiler_files.fingerprint of the compiler running here (or of the one at `root`)."""
    base = os.fspath(root or compiler_files.package_root())
    stamp, newest = _stamp(base)

    def compute() -> str:
        return compiler_files.fingerprint_of(base)

    settled = time.time_ns() - newest >= SETTLED_NS
    return _remembered(_dirs(memo_dir, base) if settled else (), f"compiler|{base}", stamp, compute)


def compiler_unchanged_since(opened_ns: int) -> bool:
    """Whether the compiler's files are as they were at `opened_ns` (a time.time_ns(): when this
    process opened its cache).

    Modules load lazily, so a compile whose compiler changed after it started
    may have run either version: its output must not be stored. A file written
    within the file system's timestamp tick before the opening may carry a time
    before it, so the files must not have changed since TICK_NS before the opening;
    then the state the keys were made of, taken at any time after the opening, is
    what every module was loaded from. (Not SETTLED_NS: Bazel makes the compiler's
    zip just before its first compile actions, which must still be stored.)
    One stat per file and folder: the first check takes the state the keys are
    then made of (the store checks before it makes them), so its own times answer."""
    global _start_state, _zip_stamp
    root = compiler_files.package_root()
    if os.path.isfile(root):
        # Bazel's compiler zip: an action's input, complete before the action started and never
        # written while it runs, but often younger than the tick (made just before the first
        # compile, which must still be stored): unchanged since this process first looked
        info = os.stat(root)
        stamp = (info.st_mtime_ns, info.st_ctime_ns, info.st_size)
        if _zip_stamp is None:
            _zip_stamp = stamp
        return stamp == _zip_stamp
    limit = opened_ns - TICK_NS
    if _start_state is None:
        _start_state = compiler_files.state(compiler_files.package_root())
        return _start_state.settled_at(limit)
    return _start_state.settled_before(limit)
