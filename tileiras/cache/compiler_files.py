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
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

COMPILER_PACKAGES: tuple[str, ...] = ("tileiras", "build_rules")
# Files inside the packages that are not the compiler (the CMake package the
# wheel installs under tileiras/ does not change what a compile produces).
NOT_COMPILER_DIRS: tuple[str, ...] = ("__pycache__", "cmake_prefix")


@lru_cache(maxsize=1)
def package_root() -> Path:
    """The directory that holds the tileiras and build_rules packages."""
    return Path(__file__).resolve().parent.parent.parent


def _collect(directory: str, found: list[os.DirEntry[str]]) -> None:
    with os.scandir(directory) as listing:
        for entry in listing:
            if entry.name.startswith("."):
                continue
            if entry.is_dir():
                if entry.name not in NOT_COMPILER_DIRS and not entry.is_symlink():
                    _collect(entry.path, found)
            elif not entry.name.endswith((".pyc", ".pyo")):
                found.append(entry)


def _entries(root: Path) -> list[os.DirEntry[str]]:
    """The compiler's files under `root`, sorted by path (no bytecode caches, no CMake package)."""
    found: list[os.DirEntry[str]] = []
    for package in COMPILER_PACKAGES:
        if os.path.isdir(root / package):
            _collect(str(root / package), found)
    return sorted(found, key=lambda entry: entry.path)


def compiler_files(root: Path | None = None) -> list[Path]:
    """Every file of the compiler packages, sorted."""
    return [Path(entry.path) for entry in _entries(root or package_root())]


def fingerprint(files: list[Path], root: Path | None = None) -> str:
    """A digest of the compiler: changes exactly when one of its files' content, name or set changes."""
    import hashlib  # OpenSSL: a megabyte, five times faster than sha.py's

    base = root or package_root()
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(base).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _is_member(name: str) -> bool:
    """Whether a zip member is a compiler file, by the rules _entries() applies to a directory."""
    parts = name.split("/")
    return (len(parts) > 1 and parts[0] in COMPILER_PACKAGES and not name.endswith(("/", ".pyc", ".pyo"))
            and not any(part.startswith(".") or part in NOT_COMPILER_DIRS for part in parts[1:-1])
            and not parts[-1].startswith("."))


def fingerprint_of(root: Path) -> str:
    """fingerprint() of the compiler at `root`: a directory, or the zip Bazel runs it from
    (bazel/zip_compiler.py keeps each file's relative path, so a zip of a checkout has its digest)."""
    if not root.is_file():
        return fingerprint(compiler_files(root), root)
    import zipfile

    import hashlib

    digest = hashlib.sha256()
    with zipfile.ZipFile(root) as archive:
        for name in sorted(filter(_is_member, archive.namelist())):
            digest.update(name.encode() + b"\0")
            digest.update(hashlib.sha256(archive.read(name)).digest())
    return digest.hexdigest()


def state(root: Path) -> tuple[str, int]:
    """Every compiler file's path, size, mtime and ctime, one line each (any write, rename or
    timestamp reset changes a line); the newest of those times in ns. A compiler zip (Bazel's)
    stands for its members with its own line."""
    if root.is_file():
        info = root.stat()
        return f"{root}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}", max(info.st_mtime_ns,
                                                                                         info.st_ctime_ns)
    lines: list[str] = []
    newest = 0
    for entry in _entries(root):
        info = entry.stat()
        lines.append(f"{entry.path}\0{info.st_size}\0{info.st_mtime_ns}\0{info.st_ctime_ns}")
        newest = max(newest, info.st_mtime_ns, info.st_ctime_ns)
    return "\n".join(lines), newest


def stamp(files_state: tuple[str, int]) -> tuple[str, int]:
    """(digest of a `state`, to remember a fingerprint by; the newest file time in ns)."""
    from .sha import sha256

    lines, newest = files_state
    return sha256(lines.encode("utf-8", "surrogateescape")).hexdigest(), newest
