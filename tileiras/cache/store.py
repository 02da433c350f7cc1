"""A content-addressed on-disk cache of compile artifacts (PTX, cubins).

Boring on purpose, like ccache: one file per key under `<root>/v1/<2 hex>/<key>`,
written to a temp file in the same directory and renamed into place (atomic,
so concurrent writers of one key are safe: both write the same bytes and the
last rename wins). Each entry starts with a header carrying the payload's
length and SHA-256, checked on every read; a corrupt or truncated entry is a
miss and is deleted. A hit touches the entry's mtime, and eviction removes the
least recently used entries once the total size passes the limit.

The cache never fails a compile: an unwritable or full cache directory turns
writes off with a one-line warning, and unreadable entries are misses.

Nor does it store an output that other code than its key names may have made:
a write is skipped when our own files changed since this process made its
keys (versions.compiler_unchanged; modules load lazily, so the compile may
have run either version).

Lookup-only mode (`enter_lookup_only`, for the cache server's workers): every
miss, and anything that would only follow a miss (a write, a disabled cache),
raises `CacheMiss` instead, so the action stops before computing anything and
the build runs it the ordinary way.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
import time
from pathlib import Path

from ..atomic import replace_file
from ..ir.record import record
from .versions import compiler_unchanged

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: a cache hit imports neither typing nor dataclasses
    from typing import Any, Iterator

LAYOUT = "v1"
MAGIC = b"TLRCACHE"
HEADER = struct.Struct("<8sIIQ32s")   # magic, format, reserved, payload length, sha256(payload)
FORMAT = 1
DEFAULT_MAX_BYTES = 1 << 30          # 1 GiB
LOW_WATER = 0.9                      # trimming goes down to 90% of the limit
TEMP_PREFIX = ".tmp-"                # an entry being written: <shard>/.tmp-<random>.tmp
STALE_TEMP_SECONDS = 3600            # temp files older than this are leftovers of killed writers
_KEY = re.compile(r"^[0-9a-f]{16,128}$")
_SIZE = re.compile(r"^\s*([0-9]+)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_lookup_only = False
REMOTE_ENV = "TILEIRAS_REMOTE_CACHE"  # remote.py's switch, read here so a local hit never imports it


class CacheMiss(BaseException):
    """Raised in lookup-only mode where the cache cannot answer.

    A BaseException so that no `except Exception` on the way turns it into a
    compile error: it must reach the server worker that asked.
    """


def enter_lookup_only() -> None:
    """From now on this process only reads the cache: a miss raises CacheMiss."""
    global _lookup_only
    _lookup_only = True


def _miss(what: str) -> None:
    if _lookup_only:
        raise CacheMiss(what)


def default_cache_dir() -> Path:
    """$TILEIRAS_CACHE_DIR, else $XDG_CACHE_HOME/tileiras, else ~/.cache/tileiras."""
    explicit = os.environ.get("TILEIRAS_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "tileiras"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "tileiras" / "cache"
    return Path.home() / ".cache" / "tileiras"


def parse_size(text: str) -> int:
    """'500M' -> 524288000; plain numbers are bytes. ValueError when malformed."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r}")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[match.group(2).lower()]
    return int(match.group(1)) * scale


def default_max_bytes() -> int:
    """$TILEIRAS_CACHE_MAX_SIZE (e.g. 2G), else 1 GiB."""
    try:
        return parse_size(os.environ["TILEIRAS_CACHE_MAX_SIZE"])
    except (KeyError, ValueError):
        return DEFAULT_MAX_BYTES


@record
class CacheStats:
    root: str
    entries: int
    bytes: int
    max_bytes: int
    hits: int       # in this process
    misses: int     # in this process
    writes_enabled: bool

    def render(self) -> str:
        return (f"cache directory: {self.root}\n"
                f"entries:         {self.entries}\n"
                f"size:            {_human(self.bytes)} of {_human(self.max_bytes)}\n")


def _human(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{count} B"


class Cache:
    """The on-disk cache at `root`, bounded to `max_bytes`."""

    def __init__(self, root: Path | str, max_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self.hits = 0
        self.misses = 0
        self.writes_enabled = True
        self._warned = False

    # --- entries -----------------------------------------------------------------

    def _dir(self) -> Path:
        return self.root / LAYOUT

    def _path(self, key: str) -> Path:
        if not _KEY.match(key):
            raise ValueError(f"invalid cache key {key!r}")
        return self._dir() / key[:2] / key

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            with open(path, "rb") as handle:
                blob = handle.read()
        except OSError:
            blob = None
        payload = _unwrap(blob) if blob is not None else None
        if payload is None and blob is not None:
            self._remove(path)
        if payload is None and os.environ.get(REMOTE_ENV):  # the remote tier: local misses only
            payload = self._from_remote(key, path)
        if payload is None:
            self.misses += 1
            _miss(key)
            return None
        try:
            os.utime(path)  # LRU: a hit makes the entry the most recent
        except OSError:
            pass
        self.hits += 1
        return payload

    def put(self, key: str, data: bytes) -> None:
        _miss(key)  # something was computed: never in lookup-only mode
        if not self.writes_enabled or not compiler_unchanged():
            return
        path = self._path(key)
        entry = _wrap(data)
        if os.environ.get(REMOTE_ENV):
            from .remote import store

            store(key, entry, self.root)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(path, entry, prefix=TEMP_PREFIX)
        except OSError as exc:
            # Windows refuses to replace a file another process has open: that
            # process is reading the same key, so the entry is already there.
            if not path.is_file():
                self._disable(exc)
        if self.writes_enabled:
            self._maybe_trim()

    def _from_remote(self, key: str, path: Path) -> bytes | None:
        """A remote entry, checked like a local one and kept locally (remote.py)."""
        from .remote import fetch, warn

        entry = fetch(key, self.root)
        payload = _unwrap(entry) if entry else None
        if entry and payload is None:
            warn(f"remote cache entry for key {key[:16]} does not match its key or digest; ignored")
        if payload is not None and self.writes_enabled:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                replace_file(path, entry, prefix=TEMP_PREFIX)
            except OSError:
                pass  # served from the remote all the same
        return payload

    def _disable(self, exc: OSError) -> None:
        self.writes_enabled = False
        if not self._warned:
            self._warned = True
            reason = exc.strerror or str(exc)
            print(f"tileiras: warning: compile cache disabled: cannot write to '{self.root}': {reason}",
                  file=sys.stderr)

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass

    # --- typed helpers the driver uses ---------------------------------------------

    def get_blob(self, key: str) -> bytes | None:
        return self.get(key)

    def put_blob(self, key: str, data: bytes) -> None:
        self.put(key, data)

    def get_ptx(self, key: str) -> tuple[str, Any] | None:
        """(PTX text, ModuleMetadata or None) stored by put_ptx."""
        payload = self.get(key)
        if payload is None:
            return None
        try:
            document = json.loads(payload)
            ptx = str(document["ptx"])
            meta = None
            if document.get("metadata") is not None:
                from tileiras.codegen.metadata import ModuleMetadata

                meta = ModuleMetadata.from_json(document["metadata"])
        except Exception:  # noqa: BLE001 - anything unreadable is a miss
            self._remove(self._path(key))
            _miss(key)
            return None
        if meta is None:
            _miss(key)  # the caller recompiles to get the launch metadata
        return ptx, meta

    def put_ptx(self, key: str, ptx: str, meta: Any = None) -> None:
        metadata = meta.to_json() if meta is not None and hasattr(meta, "to_json") else None
        document = {"ptx": ptx, "metadata": metadata}
        self.put(key, json.dumps(document, sort_keys=True).encode("utf-8"))

    # --- maintenance ---------------------------------------------------------------

    def _entries(self) -> Iterator[tuple[Path, int, float]]:
        """(path, size, mtime) of every entry; stale temp files are removed on the way."""
        now = time.time()
        try:
            shards = list(os.scandir(self._dir()))
        except OSError:
            return
        for shard in shards:
            if not shard.is_dir(follow_symlinks=False):
                continue
            try:
                files = list(os.scandir(shard.path))
            except OSError:
                continue
            for item in files:
                try:
                    info = item.stat(follow_symlinks=False)
                except OSError:
                    continue
                if item.name.startswith(TEMP_PREFIX):
                    if now - info.st_mtime > STALE_TEMP_SECONDS:
                        self._remove(Path(item.path))
                    continue
                if _KEY.match(item.name):
                    yield Path(item.path), info.st_size, info.st_mtime

    def stats(self) -> CacheStats:
        entries = list(self._entries())
        return CacheStats(str(self.root), len(entries), sum(size for _, size, _ in entries), self.max_bytes,
                          self.hits, self.misses, self.writes_enabled)

    def clear(self) -> int:
        """Remove every entry; returns how many."""
        removed = 0
        for path, _, _ in list(self._entries()):
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        return removed

    def trim(self, max_bytes: int | None = None) -> int:
        """Evict least recently used entries until the total is at most `max_bytes`; returns how many."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        entries = sorted(self._entries(), key=lambda e: (e[2], e[0].name))
        total = sum(size for _, size, _ in entries)
        removed = 0
        for path, size, _ in entries:
            if total <= limit:
                break
            try:
                path.unlink()
            except FileNotFoundError:
                pass  # another process evicted it
            except OSError:
                continue
            total -= size
            removed += 1
        return removed

    def _maybe_trim(self) -> None:
        entries = list(self._entries())
        if sum(size for _, size, _ in entries) > self.max_bytes:
            self.trim(int(self.max_bytes * LOW_WATER))


class NullCache(Cache):
    """`--no-cache`: every lookup misses, nothing is written."""

    def __init__(self) -> None:
        super().__init__(Path(os.devnull), 0)
        self.writes_enabled = False

    def get(self, key: str) -> bytes | None:
        self.misses += 1
        _miss(key)
        return None

    def put(self, key: str, data: bytes) -> None:
        _miss(key)
        return None


def _wrap(data: bytes) -> bytes:
    return HEADER.pack(MAGIC, FORMAT, 0, len(data), hashlib.sha256(data).digest()) + data


def _unwrap(blob: bytes) -> bytes | None:
    if len(blob) < HEADER.size:
        return None
    magic, fmt, _, length, digest = HEADER.unpack_from(blob, 0)
    payload = blob[HEADER.size:]
    if magic != MAGIC or fmt != FORMAT or length != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def open_cache(cache_dir: str | os.PathLike[str] | None = None, disabled: bool = False,
               max_bytes: int | None = None) -> Cache:
    """The cache a compile uses: `cache_dir` or the default location; a NullCache when disabled."""
    if disabled:
        _miss("--no-cache")  # a disabled cache means compiling
        return NullCache()
    return Cache(Path(cache_dir) if cache_dir else default_cache_dir(), max_bytes)
