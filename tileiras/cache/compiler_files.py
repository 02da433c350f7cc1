"""Which files make up the compiler, and the fingerprint of them that cache keys and build systems share.

The compiler is the `tileiras` and `build_rules` packages under one root: a
source checkout or the site-packages a wheel was installed into. Its
fingerprint digests every file's relative path and content, not timestamps or
location, so identical copies share cache entries (and CMake's compiler
stamp), while an edited checkout gets entries of its own.

Reading every file costs a cache hit several milliseconds, so the fingerprint
is remembered under a `stamp` of the files (`tileiras.cache.versions`):
a digest of every file's path, size, mtime and ctime, under a millisecond to
take. Any write, rename or timestamp reset of a file changes its ctime.

`State.unchanged()` tells whether the files are still as a `state` found them
by statting the files and folders it listed, without listing them again (a
file added, removed or renamed changes its folder's mtime; only then is the
folder listed). Paths are strings: pathlib costs a cache miss milliseconds to
import (`compiler_files()` still returns Paths for the build rules).
"""

from __future__ import annotations

import os
import time
from functools import lru_cache

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: the cache's miss path imports neither typing nor pathlib
    from pathlib import Path
    from typing import Union

    PathLike = Union[str, "os.PathLike[str]"]

COMPILER_PACKAGES: tuple[str, ...] = ("tileiras", "build_rules")
# Files inside the packages that are not the compiler (the CMake package the
# wheel installs under tileiras/ does not change what a compile produces).
NOT_COMPILER_DIRS: tuple[str, ...] = ("__pycache__", "cmake_prefix")
# A folder changed this recently may change again without its mtime moving (coarse file system clocks):
# State.unchanged() lists it again instead of trusting its mtime.
RECENT_NS = 2_000_000_000


@lru_cache(maxsize=1)
def package_root() -> str:
    """The directory that holds the tileiras and build_rules packages."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _listing(directory: str) -> tuple[list[os.DirEntry[str]], list[str]]:
    """(the compiler files, the compiler folders) directly in `directory`, unsorted."""
    files: list[os.DirEntry[str]] = []
    folders: list[str] = []
    with os.scandir(directory) as listing:
        for entry in listing:
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                if entry.name not in NOT_COMPILER_DIRS and not entry.is_symlink():
                    folders.append(entry.path)
            elif not entry.name.endswith((".pyc", ".pyo")):
                files.append(entry)
    return files, folders


def _walk(root: PathLike) -> tuple[list[os.DirEntry[str]], list[tuple[str, int, list[str]]]]:
    """The compiler's files under `root`, sorted by path (no bytecode caches, no CMake package), and
    its folders: (path, mtime in ns taken before listing it, or -1 when that mtime is too recent to
    tell a later change, the compiler names in it)."""
    found: list[os.DirEntry[str]] = []
    folders: list[tuple[str, int, list[str]]] = []
    pending = [path for path in (os.path.join(root, package) for package in COMPILER_PACKAGES) if os.path.isdir(path)]
    recent = time.time_ns() - RECENT_NS
    while pending:
        folder = pending.pop()
        mtime = os.stat(folder).st_mtime_ns
        if mtime >= recent:
            mtime = -1  # a change within the file system's clock tick would not move it: list it again
        files, below = _listing(folder)
        folders.append((folder, mtime, _names(files, below)))
        found.extend(files)
        pending.extend(below)
    return sorted(found, key=lambda entry: entry.path), folders


def _names(files: list[os.DirEntry[str]], folders: list[str]) -> list[str]:
    return sorted([entry.name for entry in files] + [os.path.basename(path) for path in folders])


def compiler_files(root: PathLike | None = None) -> list[Path]:
    """Every file of the compiler packages, sorted."""
    from pathlib import Path

    return [Path(entry.path) for entry in _walk(root or package_root())[0]]


def _relative(path: PathLike, base: PathLike) -> str:
    return os.path.relpath(os.fspath(path), os.fspath(base)).replace(os.sep, "/")


def fingerprint(files: list[Path] | list[str], root: PathLike | None = None) -> str:
    """A digest of the compiler: changes exactly when one of its files' content, name or set changes."""
    import hashlib  # OpenSSL: a megabyte, five times faster than sha.py's

    base = root or package_root()
    digest = hashlib.sha256()
    for path in files:
        digest.update(_relative(path, base).encode() + b"\0")
        with open(path, "rb") as handle:
            digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def _is_member(name: str) -> bool:
    """Whether a zip member is a compiler file, by the rules _listing() applies to a directory."""
    parts = name.split("/")
    return (len(parts) > 1 and parts[0] in COMPILER_PACKAGES and not name.endswith(("/", ".pyc", ".pyo"))
            and not any(part.startswith(".") or part in NOT_COMPILER_DIRS for part in parts[1:-1])
            and not parts[-1].startswith("."))


def fingerprint_of(root: PathLike) -> str:
    """fingerprint() of the compiler at `root`: a directory, or the zip Bazel runs it from
    (bazel/zip_compiler.py keeps each file's relative path, so a zip of a checkout has its digest)."""
    if not os.path.isfile(root):
        return fingerprint([entry.path for entry in _walk(root)[0]], root)
    import hashlib
    import zipfile

    digest = hashlib.sha256()
    with zipfile.ZipFile(root) as archive:
        for name in sorted(filter(_is_member, archive.namelist())):
            digest.update(name.encode() + b"\0")
            digest.update(hashlib.sha256(archive.read(name)).digest())
    return digest.hexdigest()


def _file_line(path: str, info: os.stat_result) -> str:
    return f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}"


class State:
    """The compiler's files as found at one moment: `lines` (every file's path, size, mtime and
    ctime, one line each: any write, rename or timestamp reset changes a line), `newest` (the newest
    of those times, in ns), and what `unchanged()` looks at again. A compiler zip (Bazel's) stands
    for its members with its own line."""

    __slots__ = ("lines", "newest", "_files", "_folders")

    def __init__(self, lines: str, newest: int, files: list[tuple[str, str]],
                 folders: list[tuple[str, int, list[str]]]) -> None:
        self.lines, self.newest = lines, newest
        self._files = files        # (path, its line)
        self._folders = folders    # (path, mtime in ns, the compiler names in it)

    def unchanged(self) -> bool:
        """Whether every file and folder is still as found: a stat of each, a listing only of a
        folder whose mtime moved (a new __pycache__ moves it without changing the compiler)."""
        try:
            for path, line in self._files:
                if _file_line(path, os.stat(path)) != line:
                    return False
            for path, mtime, names in self._folders:
                if os.stat(path).st_mtime_ns != mtime and _names(*_listing(path)) != names:
                    return False
        except OSError:
            return False
        return True


def state(root: PathLike) -> State:
    """The compiler's files under `root` (a directory, or a zip) as they are now."""
    root = os.fspath(root)
    if os.path.isfile(root):
        info = os.stat(root)
        line = _file_line(root, info)
        return State(line, max(info.st_mtime_ns, info.st_ctime_ns), [(root, line)], [])
    entries, folders = _walk(root)
    files: list[tuple[str, str]] = []
    newest = 0
    for entry in entries:
        info = entry.stat()
        files.append((entry.path, _file_line(entry.path, info)))
        newest = max(newest, info.st_mtime_ns, info.st_ctime_ns)
    return State("\n".join(line for _, line in files), newest, files, folders)


def stamp(files_state: State) -> tuple[str, int]:
    """(digest of a `state`, to remember a fingerprint by; the newest file time in ns)."""
    from .sha import sha256

    return sha256(files_state.lines.encode("utf-8", "surrogateescape")).hexdigest(), files_state.newest
