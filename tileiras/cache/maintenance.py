"""What is in the cache's folder, and removing it: stats, clear, trim (store.Cache's, which a compile does
not import) and the size check after a write.

A scan sorts everything under `<root>/v1` into entries (regular files named
by a key), temp files of writers (`.tmp-*`; stale once older than an hour:
their writer was killed) and anything else, which no version of tileiras puts
there: folders, links, FIFOs, stray files. `clear` and `trim` remove all of
the last kind (folders with what they hold, links without following them),
so the cache can always be brought back to a clean state. Nothing here
follows a link.
"""

from __future__ import annotations

import os
import stat
import time

from ..ir.record import record
from .entry import TEMP_PREFIX, hex_name, key_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .store import Cache

STALE_TEMP_SECONDS = 3600            # temp files older than this are leftovers of killed writers


class Scan:
    """The contents of one cache layout folder (or of one shard of it)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, int, float]] = []   # (path, size, mtime)
        self.stale: list[str] = []                        # temp files of killed writers
        self.foreign: list[tuple[str, bool]] = []         # (path, is a real folder)
        self.problems: list[str] = []                     # what could not be read

    @property
    def bytes(self) -> int:
        return sum(size for _, size, _ in self.entries)


def scan_shard(shard: str, found: Scan, now: float) -> None:
    try:
        items = list(os.scandir(shard))
    except FileNotFoundError:
        return
    except OSError as exc:
        found.problems.append(f"cannot list '{shard}': {exc.strerror}")
        return
    for item in items:
        try:
            info = item.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed meanwhile
        except OSError as exc:
            found.problems.append(f"cannot inspect '{item.path}': {exc.strerror}")
            continue
        regular = stat.S_ISREG(info.st_mode)
        if regular and key_name(item.name):
            found.entries.append((item.path, info.st_size, info.st_mtime))
        elif regular and item.name.startswith(TEMP_PREFIX):
            if now - info.st_mtime > STALE_TEMP_SECONDS:
                found.stale.append(item.path)
        else:
            found.foreign.append((item.path, stat.S_ISDIR(info.st_mode)))


def scan(layout_dir: str) -> Scan:
    """Everything under `layout_dir` (missing: nothing)."""
    found, now = Scan(), time.time()
    try:
        if not stat.S_ISDIR(os.lstat(layout_dir).st_mode):  # a link (never followed) or a file
            found.foreign.append((layout_dir, False))
            return found
        items = list(os.scandir(layout_dir))
    except FileNotFoundError:
        return found
    except OSError as exc:
        found.problems.append(f"cannot list '{layout_dir}': {exc.strerror}")
        return found
    for item in items:
        try:
            is_dir = item.is_dir(follow_symlinks=False)
        except OSError:
            is_dir = False
        if is_dir and hex_name(item.name, 2, 2):
            scan_shard(item.path, found, now)
        else:
            found.foreign.append((item.path, is_dir))
    return found


def remove(path: str, is_dir: bool) -> str | None:
    """Remove `path` (a folder with its contents); None, or why it could not be removed."""
    if not is_dir:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            return f"cannot remove '{path}': {exc.strerror}"
        return None
    import shutil

    failures: list[str] = []

    def failed(_function: object, where: str, info: tuple[type, BaseException, object]) -> None:
        error = info[1]
        if not isinstance(error, FileNotFoundError):
            failures.append(f"cannot remove '{where}': {getattr(error, 'strerror', None) or error}")

    shutil.rmtree(path, onerror=failed)  # never follows links: it unlinks them
    return failures[0] if failures else None


def remove_all(paths: list[tuple[str, bool]], problems: list[str]) -> int:
    """Remove each (path, is_dir); returns how many went, adding the reasons of the rest to `problems`."""
    removed = 0
    for path, is_dir in paths:
        problem = remove(path, is_dir)
        if problem is None:
            removed += 1
        else:
            problems.append(problem)
    return removed


@record
class CacheStats:
    root: str
    entries: int
    bytes: int
    max_bytes: int
    hits: int       # in this process
    misses: int     # in this process
    writes_enabled: bool
    other: int = 0  # things in the cache folder that are not entries (clear and trim remove them)

    def render(self) -> str:
        text = (f"cache directory: {self.root}\n"
                f"entries:         {self.entries}\n"
                f"size:            {_human(self.bytes)} of {_human(self.max_bytes)}\n")
        if self.other:
            text += f"not entries:     {self.other} (removed by 'tileir cache clear' and 'trim')\n"
        return text


def _human(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


def _scan(cache: Cache) -> Scan:
    """The cache's layout folder, its killed writers' temp files removed."""
    found = scan(cache._dir())
    remove_all([(path, False) for path in found.stale], found.problems)
    return found


def stats(cache: Cache) -> CacheStats:
    found = _scan(cache)
    return CacheStats(str(cache.root), len(found.entries), found.bytes, cache.max_bytes, cache.hits, cache.misses,
                      cache.writes_enabled, len(found.foreign))


def clear(cache: Cache) -> int:
    found = _scan(cache)
    cache.problems = found.problems
    remove_all(found.foreign, cache.problems)
    return remove_all([(path, False) for path, _, _ in found.entries], cache.problems)


def trim(cache: Cache, limit: int) -> int:
    found = _scan(cache)
    cache.problems = found.problems
    remove_all(found.foreign, cache.problems)
    total, removed = found.bytes, 0
    for path, size, _ in sorted(found.entries, key=lambda e: (e[2], os.path.basename(e[0]))):
        if total <= limit:
            break
        problem = remove(path, False)
        if problem is not None:
            cache.problems.append(problem)
            continue
        total -= size
        removed += 1
    return removed
