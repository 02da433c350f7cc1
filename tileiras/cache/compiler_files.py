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

An installed wheel (not an editable install) is identified by its installer's
`RECORD`: pip (or uv) writes it last, with the SHA-256 of every file it
installed, so its digests give the same fingerprint as reading the files, and
its own times stand for all of them (`record_of`): a `pip install` of any other
build, or a reinstall, rewrites it. One stat replaces listing and statting
every file. Edits made inside site-packages by hand are not seen: the
installation is what its RECORD says (edit a source checkout or an editable
install instead, or `tileir cache clear` after such surgery).
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


def record_of(root: PathLike) -> str | None:
    """The installer's RECORD when `root` is the site-packages a wheel of this compiler was installed
    into (a source checkout or an editable install has none there); None otherwise."""
    from tileiras import __version__

    record = os.path.join(root, f"tileiras-{__version__}.dist-info", "RECORD")
    return record if os.path.isfile(record) else None


def _recorded_fingerprint(record: str) -> str | None:
    """fingerprint() of the files a RECORD lists, from its SHA-256 digests (those of the files as
    installed); None when it lists no compiler or a digest that is not SHA-256."""
    import base64
    import hashlib

    members: dict[str, bytes] = {}
    with open(record, encoding="utf-8") as handle:
        for line in handle:
            name, _, rest = line.rstrip("\r\n").partition(",")
            if not _is_member(name):
                continue
            algorithm, _, value = rest.partition(",")[0].partition("=")
            if algorithm != "sha256":
                return None
            members[name] = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    if "tileiras/__init__.py" not in members:
        return None
    digest = hashlib.sha256()
    for name in sorted(members):
        digest.update(name.encode() + b"\0")
        digest.update(members[name])
    return digest.hexdigest()


def fingerprint_of(root: PathLike) -> str:
    """fingerprint() of the compiler at `root`: a directory, or the zip Bazel runs it from
    (bazel/zip_compiler.py keeps each file's relative path, so a zip of a checkout has its digest).
    An installed wheel's comes from its RECORD (record_of)."""
    if not os.path.isfile(root):
        record = record_of(root)
        found = _recorded_fingerprint(record) if record is not None else None
        return found or fingerprint([entry.path for entry in _walk(root)[0]], root)
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
    and its folders with theirs. A compiler zip (Bazel's) stands for its members with its own entry,
    an installed wheel with its RECORD (record_of). Taking one costs a listing of the folders and a
    stat of each file and folder (a zip or an installed wheel: one stat)."""

    __slots__ = ("_paths", "_stats", "_folders", "_folder_times")

    def __init__(self, paths: list[str], stats: list[int], folders: list[str],
                 folder_times: list[int] | None = None) -> None:
        self._paths = paths        # sorted
        self._stats = stats        # ctime, mtime, size of each path in turn
        self._folders = folders
        self._folder_times = folder_times or []  # ctime, mtime of each folder in turn

    @property
    def encoded(self) -> bytes:
        """What a stamp digests: the numbers (8 bytes each), then each path after a NUL."""
        import struct

        return struct.pack(f"<{len(self._stats)}q", *self._stats) + "\0".join(("", *self._paths)).encode("utf-8", "surrogateescape")

    @property
    def newest(self) -> int:
        stats = self._stats
        return max(max(stats[0::3], default=0), max(stats[1::3], default=0))

    def settled_at(self, limit_ns: int) -> bool:
        """Whether, as this state found them, no file or folder changed at or after `limit_ns` (a
        time.time_ns()): for a state taken after that time, whether the files are what they were then,
        with no further look. A folder that changed (a file added, removed or renamed, or Python's
        `__pycache__` created) is a change: what it held before cannot be told any more."""
        if max(self._folder_times, default=0) >= limit_ns:
            return False
        return self.newest < limit_ns

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
    """The compiler's files under `root` (a directory, a zip, or an installed wheel's RECORD) as they are now."""
    root = os.fspath(root)
    record = None if os.path.isfile(root) else record_of(root)
    if record is not None or os.path.isfile(root):
        entries: list[os.DirEntry[str]] | list[str] = [record or root]
        folders: list[str] = []
    else:
        entries, folders = _walk(root)
    paths, stats = [], []
    for item in entries:
        info = os.stat(item) if isinstance(item, str) else item.stat()
        paths.append(item if isinstance(item, str) else item.path)
        stats += (info.st_ctime_ns, info.st_mtime_ns, info.st_size)
    folder_times = []
    for folder in folders:
        info = os.stat(folder)
        folder_times += (info.st_ctime_ns, info.st_mtime_ns)
    return State(paths, stats, folders, folder_times)


def stamp(files_state: State) -> tuple[str, int]:
    """(digest of a `state`, to remember a fingerprint by; the newest file time in ns)."""
    from ..hashing import digest

    return digest(files_state.encoded).hexdigest(), files_state.newest
