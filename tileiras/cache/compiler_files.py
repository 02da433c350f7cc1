"""Which files make up the compiler, and the fingerprint of them that cache keys and build systems share.

The compiler is the `tileiras` and `build_rules` packages under one root: a
source checkout or the site-packages a wheel was installed into. Its
fingerprint digests every file's relative path and content, not timestamps or
location, so identical copies share cache entries (and CMake's compiler
stamp), while an edited checkout gets entries of its own.

Reading every file costs a cache hit several milliseconds, so the fingerprint
is remembered under a `stamp` of the files (`tileiras.cache.versions`):
a digest of every file's path, size, mtime and ctime. Any write, rename or timestamp reset of a file changes its ctime.

`State.settled_before(t)` tells whether nothing changed since the time `t` by
statting the files and folders a `state` listed, without listing them again: a
write changes a file's ctime; a file added, removed or renamed changes its
folder's mtime. Paths are strings: pathlib costs a cache miss milliseconds to
import (`compiler_files()` still returns Paths for the build rules).
"""

from __future__ import annotations

import os
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


def _walk(root: PathLike) -> tuple[list[os.DirEntry[str]], list[str]]:
    """The compiler's files under `root`, sorted by path (no bytecode caches, no CMake package), and
    its folders."""
    found: list[os.DirEntry[str]] = []
    folders: list[str] = []
    pending = [path for path in (os.path.join(root, package) for package in COMPILER_PACKAGES) if os.path.isdir(path)]
    while pending:
        folder = pending.pop()
        folders.append(folder)
        files, below = _listing(folder)
        found.extend(files)
        pending.extend(below)
    return sorted(found, key=lambda entry: entry.path), folders


def compiler_files(root: PathLike | None = None) -> list[Path]:
    """Every file of the compiler packages, sorted."""
    from pathlib import Path

    return [Path(entry.path) for entry in _walk(root or package_root())[0]]


def _relative(path: PathLike, base: PathLike) -> str:
    return os.path.relpath(os.fspath(path), os.fspath(base)).replace(os.sep, "/")


def fingerprint(files: list[Path] | list[str], root: PathLike | None = None) -> str:
    """A digest of the compiler: changes exactly when one of its files' content, name or set changes."""
    import hashlib  # OpenSSL: for a megabyte, faster than hashing.py's BLAKE2b (only when the stamp changed)

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


class State:
    """The compiler's files as found at one moment: each file's path and its ctime, mtime and size
    (any write, rename or timestamp reset changes one), `newest` (the newest of those times, in ns),
    and its folders. A compiler zip (Bazel's) stands for its members with its own entry. Taking one
    costs a listing of the folders and a stat of each file."""

    __slots__ = ("_paths", "_stats", "_folders")

    def __init__(self, paths: list[str], stats: list[int], folders: list[str]) -> None:
        self._paths = paths        # sorted
        self._stats = stats        # ctime, mtime, size of each path in turn
        self._folders = folders

    @property
    def encoded(self) -> bytes:
        """What a stamp digests: the numbers (digits and spaces), then each path after a NUL."""
        text = " ".join(map(str, self._stats)) + "\0" + "\0".join(self._paths)
        return text.encode("utf-8", "surrogateescape")

    @property
    def newest(self) -> int:
        stats = self._stats
        return max(max(stats[0::3], default=0), max(stats[1::3], default=0))

    def settled_before(self, limit_ns: int) -> bool:
        """Whether no file or folder changed at or after `limit_ns` (a time.time_ns()), so that the
        files are now what they were then: a stat of each. A folder whose times moved is listed again:
        Python creating its `__pycache__` moves them without changing the compiler."""
        try:
            for path in self._paths:
                info = os.stat(path)
                if info.st_ctime_ns >= limit_ns or info.st_mtime_ns >= limit_ns:
                    return False
            known_files, known_folders = None, None
            for folder in self._folders:
                info = os.stat(folder)
                if info.st_ctime_ns < limit_ns and info.st_mtime_ns < limit_ns:
                    continue
                if known_files is None:
                    known_files, known_folders = set(self._paths), set(self._folders)
                files, below = _listing(folder)
                if any(entry.path not in known_files for entry in files) or not known_folders.issuperset(below):
                    return False   # a compiler file or folder appeared (a removal fails its stat above)
        except OSError:
            return False
        return True


def state(root: PathLike) -> State:
    """The compiler's files under `root` (a directory, or a zip) as they are now."""
    root = os.fspath(root)
    if os.path.isfile(root):
        entries: list[os.DirEntry[str]] | list[str] = [root]
        folders: list[str] = []
    else:
        entries, folders = _walk(root)
    paths, stats = [], []
    for item in entries:
        info = os.stat(item) if isinstance(item, str) else item.stat()
        paths.append(item if isinstance(item, str) else item.path)
        stats += (info.st_ctime_ns, info.st_mtime_ns, info.st_size)
    return State(paths, stats, folders)


def stamp(files_state: State) -> tuple[str, int]:
    """(digest of a `state`, to remember a fingerprint by; the newest file time in ns)."""
    from .hashing import digest

    return digest(files_state.encoded).hexdigest(), files_state.newest
