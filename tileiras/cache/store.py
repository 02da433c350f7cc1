"""A content-addressed on-disk cache of compile artifacts (PTX, cubins, host objects).

Boring on purpose, like ccache: one file per key under `<root>/v1/<2 hex>/<key>`,
written to a temp file in the same directory and renamed into place (atomic,
so concurrent writers of one key are safe: both write the same bytes and the
last rename wins). Each entry records its full key and the digest of its
payload (entry.py), both checked on every read, and is read without following
links, only when it is a regular file of bounded size. A hit touches the
entry's mtime; eviction removes the least recently used entries once the
total size passes the limit.

The cache never fails a compile and never hangs one: an entry that is not
what its key names (swapped, corrupt, a FIFO, a link, a folder) is a miss with
one warning; a cache that cannot be read or written (permissions, a read-only
mount, a full disk) is a compile without it, with one warning when the user
chose its location (a default location that cannot be written, as in a build
sandbox, is not worth a line per compile). Nor does it store an output that
other code than its key names may have made: a write is skipped when our own
files changed since this process opened its cache (_compiler_unchanged).

A miss costs almost nothing (issue: "a cold cache must cost nothing"). The
driver forks its LLVM worker before it imports this module (LLVM loads beside
the lookup; a hit kills the worker), opens the cache with `defer_writes`, passes keys as `keys.Key` (made
when first needed) and calls `idle()` while it waits for LLVM or ptxas and
`flush()` after it wrote its output. So a cache that holds no entries answers
its lookups without making their keys, the keys and the entries' bytes are
made while the compile waits, and the entries are written once its output
exists. The check that the compiler did not change (one look at its files:
versions.compiler_unchanged_since) runs once for the entries made before it,
before their keys, which are made of that same look: for a cubin, in the
idle() while ptxas runs (the PTX entry is made by then, and a cubin's key
names only ptxas and the PTX), so nothing but the writes runs between the
output and the exit. Nothing on that path imports pathlib, json or re (paths are strings;
keys.canonical_json writes the keys' JSON): tests/test_cache.py checks it.

`get` is a local lookup (`_read_local`), `put` a local write (`_write_local`).

Lookup-only mode (`enter_lookup_only`, for the cache server's workers): every
miss, and anything that would only follow a miss (a write, a disabled cache),
raises `CacheMiss` instead, so the action stops before computing anything and
the build runs it the ordinary way.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from ..atomic import replace_file
from . import entry

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: a cache hit imports neither typing nor dataclasses
    from typing import Any, Callable, Union

    from .keys import Key

    KeyLike = Union[str, Key]
    # the bytes, or how to make them (in idle or flush): the bytes, or the bytes and their digest
    Payload = Union[bytes, Callable[[], Union[bytes, tuple[bytes, bytes]]]]

LAYOUT = "v1"
HEADER = entry.HEADER
DEFAULT_MAX_BYTES = 1 << 30          # 1 GiB
LOW_WATER = 0.9                      # trimming goes down to 90% of the limit
SHARDS = 256                         # two hex digits
_SIZE = r"^\s*([0-9]+)\s*([kmgt]?)i?b?\s*$"   # compiled when a size is parsed (re is slow to import)
# Why a write failed, when it says nothing about other entries: that one entry is skipped.
_ONE_ENTRY_ERRNOS = frozenset((errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST))
# Why a write failed in a sandbox or on a read-only home: silent at the default location.
_NOT_OURS_ERRNOS = frozenset((errno.EROFS, errno.EACCES, errno.EPERM))
_lookup_only = False
_opened_ns: int | None = None  # when this process first opened a cache (time.time_ns())
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


def lookup_only() -> bool:
    """Whether this process only reads the cache (a cache server's worker: it never compiles)."""
    return _lookup_only


def _miss(what: object) -> None:
    if _lookup_only:
        raise CacheMiss(str(what))


def default_cache_dir() -> str:
    """$TILEIRAS_CACHE_DIR, else $XDG_CACHE_HOME/tileiras, else ~/.cache/tileiras."""
    explicit = os.environ.get("TILEIRAS_CACHE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "tileiras")
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return os.path.join(os.environ["LOCALAPPDATA"], "tileiras", "cache")
    return os.path.join(os.path.expanduser("~"), ".cache", "tileiras")


def parse_size(text: str) -> int:
    """'500M' -> 524288000; plain numbers are bytes. ValueError when malformed."""
    import re

    match = re.match(_SIZE, text, re.IGNORECASE)
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


class Cache:
    """The on-disk cache at `root`, bounded to `max_bytes`.

    `chosen`: the user picked this location (--cache-dir, $TILEIRAS_CACHE_DIR), so a cache
    that cannot be written there is worth a warning. `defer_writes`: `put` only queues; the
    entries are written by `idle()` or `flush()`.
    """

    def __init__(self, root: str | os.PathLike[str], max_bytes: int | None = None, chosen: bool = True,
                 defer_writes: bool = False) -> None:
        self.root = os.fspath(root)
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes
        self.chosen = chosen
        self.defer_writes = defer_writes
        self.hits = 0
        self.misses = 0
        self.writes_enabled = True
        self.problems: list[str] = []                      # what clear/trim could not remove
        self._warned = False
        self._unmade: list[Key] = []                       # keys of lookups answered without them
        self._pending: list[tuple[KeyLike, Payload]] = []  # deferred writes
        self._ready: list[tuple[str, bytes]] = []          # deferred writes made (checked): (key, entry)
        self._compiler_changed = False  # a check found the compiler changed: unchecked entries are dropped
        self._written_shards: set[str] = set()
        global _opened_ns
        if _opened_ns is None:  # before the compile loads more of the compiler (_compiler_unchanged)
            _opened_ns = time.time_ns()

    # --- lookups and writes ----------------------------------------------------------

    def get(self, key: KeyLike) -> bytes | None:
        """The payload stored under `key`, or None (a miss)."""
        name = self._lookup_name(key)
        payload = self._read_local(name) if name is not None else None
        if payload is None and name is not None and os.environ.get(REMOTE_ENV):  # the remote tier: local misses only
            payload = self._from_remote(name)
        if payload is None:
            self.misses += 1
            _miss(name or "empty cache")
            return None
        self.hits += 1
        return payload

    def peek(self, key: KeyLike) -> bytes | None:
        """The local payload under `key`, or None, neither counted as a hit or miss nor asked of the
        remote tier: side data of an entry just found (a cubin's ptxas warnings)."""
        name = self._lookup_name(key)
        return self._read_local(name) if name is not None else None

    def put(self, key: KeyLike, data: Payload) -> None:
        """Store `data` (bytes, or a function that makes them) under `key`: now, or with
        defer_writes at flush(), the bytes made at the next idle() or at flush()."""
        _miss(key if isinstance(key, str) else "write")  # something was computed: never in lookup-only mode
        if not self.writes_enabled:
            return
        self._pending.append((key, data))
        if not self.defer_writes:
            self._write_all(self._prepare_all())

    def idle(self) -> None:
        """Work for the time the driver waits on a child process: make the keys that the lookups did
        without (those that name our code are made with their entries) and the entries queued so far,
        checking that the compiler that made them has not changed since the cache opened, so that
        writing them after the output costs little."""
        unmade, self._unmade = self._unmade, []
        for key in unmade:
            if not key.names_our_code:
                self._name_for_write(key)
        self._ready += self._prepare_all()

    def flush(self) -> None:
        """Write the deferred entries (the driver calls this once its output is written). The compiler
        is checked again only for entries that name it and were queued after idle() checked it: for
        a cubin, idle() ran while ptxas made it, and the cubin's key does not name our code."""
        ready, self._ready = self._ready + self._prepare_all(), []
        self._write_all(ready)

    def _write_all(self, ready: list[tuple[str, bytes]]) -> None:
        for name, blob in ready:
            self._store(name, blob)
        self._check_size()

    def _prepare_all(self) -> list[tuple[str, bytes]]:
        """The queued entries that may be stored, made: an entry whose key names our code only when
        our files are as they were when the cache opened (_compiler_unchanged), checked after the entry
        was made and before its key (the check's look at our files is the one the key is made of).
        One check covers every entry made before it."""
        queued, self._pending = self._pending, []
        if not self._compiler_changed and any(_names_our_code(key) for key, _ in queued):
            self._compiler_changed = not _compiler_unchanged()
        made = (self._prepare(key, data) for key, data in queued
                if not (self._compiler_changed and _names_our_code(key)))
        return [prepared for prepared in made if prepared is not None]

    def _prepare(self, key: KeyLike, data: Payload) -> tuple[str, bytes] | None:
        """(the key, the entry's bytes: entry.wrap) to write; None when either cannot be made (warned)."""
        name = self._name_for_write(key)
        if name is None:
            return None
        self._check_key(name)  # a malformed key is the caller's bug: raised
        try:
            made = data if isinstance(data, bytes) else data()
            return name, entry.wrap(name, *made) if isinstance(made, tuple) else entry.wrap(name, made)
        except Exception as exc:  # noqa: BLE001 - as a key that cannot be made: it only costs the entry
            self._warn(f"compile cache: not storing a result: {type(exc).__name__}: {exc}")
            return None

    def _lookup_name(self, key: KeyLike) -> str | None:
        """The key for a lookup; None when the cache holds no entries, so no key is needed."""
        if isinstance(key, str):
            self._check_key(key)
            return key
        if not key.made and not os.path.isdir(self._dir()) and not os.environ.get(REMOTE_ENV):
            self._unmade.append(key)
            return None
        name = key.value
        self._check_key(name)
        return name

    def _name_for_write(self, key: KeyLike) -> str | None:
        if isinstance(key, str):
            return key
        try:
            return key.value
        except Exception as exc:  # noqa: BLE001 - the output exists: a key we cannot make only costs the entry
            self._warn(f"compile cache: not storing a result: {type(exc).__name__}: {exc}")
            return None

    def _store(self, name: str, blob: bytes) -> None:
        """Write the entry `blob` (entry.wrap of its payload) under the checked key `name`."""
        if not self.writes_enabled:
            return
        self._write_local(name, blob)
        if os.environ.get(REMOTE_ENV):
            from .remote import store

            store(name, blob, self.root)

    # --- the local store ---------------------------------------------------------------

    def _dir(self) -> str:
        return os.path.join(self.root, LAYOUT)

    @staticmethod
    def _check_key(key: str) -> None:
        if not entry.key_name(key):
            raise ValueError(f"invalid cache key {key!r}")

    def _path(self, key: str) -> str:
        self._check_key(key)
        return os.path.join(self._dir(), key[:2], key)

    def _read_local(self, key: str) -> bytes | None:
        """The payload of the local entry of `key`; None when there is none or it is not what `key` names."""
        path = self._path(key)
        try:
            blob = entry.read(str(self.root), (LAYOUT, key[:2], key), touch=True, key=key)
            return entry.unwrap(blob, key)
        except FileNotFoundError:
            return None
        except entry.Unexpected as odd:
            if odd.removable:
                entry.remove(path)
            self._warn(f"compile cache: ignoring '{path}': {odd.reason}")
        except OSError as exc:
            self._warn(f"compile cache: cannot read '{path}': {exc.strerror or exc}")
        return None

    def _write_local(self, key: str, blob: bytes) -> None:
        """Write the local entry `blob` of `key` atomically; problems only cost the entry (or further writes)."""
        if len(blob) > min(entry.MAX_BYTES, self.max_bytes):
            return  # it would be evicted at once
        path = self._path(key)
        try:
            self._make_folders(os.path.dirname(path))
            replace_file(path, blob, prefix=entry.TEMP_PREFIX)
        except entry.Unexpected as odd:
            self._warn(f"compile cache: not storing '{path}': {odd.reason}")
            return
        except FileNotFoundError:
            return  # `tileir cache clear` ran meanwhile
        except OSError as exc:
            if exc.errno in _ONE_ENTRY_ERRNOS:
                self._warn(f"compile cache: not storing '{path}': something else is in its place "
                           f"({exc.strerror}); 'tileir cache clear' removes it")
            elif not _is_file(path):  # Windows refuses to replace a file another process reads
                self._disable(exc)
            return
        self._written_shards.add(key[:2])

    def _make_folders(self, shard: str) -> None:
        """The root (any folder, a link is the user's choice), then v1 and the shard: real folders only.
        (Looked at before made: a mkdir of an existing folder costs more than a stat.)"""
        layout = os.path.dirname(shard)
        if _is_real_dir(layout) and _is_real_dir(shard):
            return
        if not os.path.isdir(self.root):
            os.makedirs(self.root, exist_ok=True)
        for folder in (layout, shard):
            try:
                os.mkdir(folder)
            except FileExistsError:
                if not _is_real_dir(folder):
                    raise entry.Unexpected(f"'{folder}' is not a folder") from None

    def _from_remote(self, key: str) -> bytes | None:
        """A remote entry, checked like a local one (its key and digest) and kept locally (remote.py)."""
        from .remote import fetch, warn

        blob = fetch(key, self.root)
        if not blob:
            return None
        try:
            payload = entry.unwrap(blob, key)
        except entry.Unexpected as odd:
            warn(f"remote cache entry for key {key[:16]} is not what its key names ({odd.reason}); ignored")
            return None
        if payload is not None and self.writes_enabled:
            self._write_local(key, blob)
        return payload

    def _disable(self, exc: OSError) -> None:
        self.writes_enabled = False
        if self.chosen or exc.errno not in _NOT_OURS_ERRNOS:
            reason = exc.strerror or str(exc)
            self._warn(f"compile cache disabled: cannot write to '{self.root}': {reason}")

    def _warn(self, message: str) -> None:
        """One warning per process: the first problem is news, the rest would be noise in a build log."""
        if not self._warned:
            self._warned = True
            print(f"tileiras: warning: {message}", file=sys.stderr)

    # --- typed helpers the driver uses -------------------------------------------------

    def get_blob(self, key: KeyLike) -> bytes | None:
        return self.get(key)

    def put_blob(self, key: KeyLike, data: bytes) -> None:
        self.put(key, data)

    def get_ptx(self, key: KeyLike, parse: bool = True) -> tuple[str, Any] | None:
        """(PTX text, ModuleMetadata or None) stored by put_ptx; with `parse=False` the metadata is
        its JSON (bytes), for a caller that parses it only when it needs it (a cubin needs none)."""
        payload = self.get(key)
        if payload is None:
            return None
        try:
            ptx, metadata = _unpack_ptx(payload)
            meta: Any = metadata or None
            if meta is not None and parse:
                from tileiras.codegen.metadata import ModuleMetadata

                meta = ModuleMetadata.from_json(metadata)
        except Exception:  # noqa: BLE001 - anything unreadable is a miss
            name = key if isinstance(key, str) else key.value
            entry.remove(self._path(name))
            _miss(name)
            return None
        if meta is None:
            _miss(key)  # the caller recompiles to get the launch metadata
        return ptx, meta

    def put_ptx(self, key: KeyLike, ptx: str, meta: Any = None) -> None:
        """Store PTX with its launch metadata (a ModuleMetadata or None); the bytes are made later
        with defer_writes (while the compile waits for ptxas, or after the output)."""
        self.put(key, lambda: _pack_ptx(ptx, meta))

    # --- maintenance (maintenance.py: `tileir cache`, and a write that may pass the limit) ---------

    def stats(self) -> Any:
        """A maintenance.CacheStats of what the cache holds (and this process's hits and misses)."""
        from .maintenance import stats

        return stats(self)

    def clear(self) -> int:
        """Remove every entry and whatever else is in the cache's folder; returns how many entries.
        What could not be removed is in `self.problems`."""
        from .maintenance import clear

        return clear(self)

    def trim(self, max_bytes: int | None = None) -> int:
        """Remove what is not an entry, then the least recently used entries until the total is at
        most `max_bytes` (default: the limit); returns how many entries. What could not be removed is
        in `self.problems`."""
        from .maintenance import trim

        return trim(self, self.max_bytes if max_bytes is None else max_bytes)

    def _check_size(self) -> None:
        """Trim when the cache may be over its limit. Keys are hashes, so every shard holds about the
        same share: the shards just written tell the total without listing all 256."""
        if not self._written_shards:
            return
        shards, self._written_shards = self._written_shards, set()
        written = sum(_shard_bytes(os.path.join(self._dir(), shard)) for shard in shards)
        if written * SHARDS / len(shards) > self.max_bytes and self.stats().bytes > self.max_bytes:
            self.trim(int(self.max_bytes * LOW_WATER))


# A PTX entry's payload: the PTX, the JSON of its metadata (keys.canonical_json; none when the metadata
# is unknown), the JSON's length (8 bytes, little-endian), then this line. No json import to write it,
# no escaping of the PTX; a reader checks the line and the length. The PTX comes first so that the
# entry's digest continues the hash of the PTX made for its cubin's key (hashing.text_digest).
PTX_PAYLOAD = b"\ntileiras ptx 2\n"


def _pack_ptx(ptx: str, meta: Any) -> tuple[bytes, bytes]:
    """(the payload, its digest)."""
    from ..hashing import text_digest
    from .keys import canonical_json

    metadata = b"" if meta is None else canonical_json(meta.to_document()).encode("ascii")
    tail = metadata + len(metadata).to_bytes(8, "little") + PTX_PAYLOAD
    state = text_digest(ptx)
    state.update(tail)  # type: ignore[attr-defined]
    return ptx.encode("utf-8") + tail, state.digest()  # type: ignore[attr-defined]


def _unpack_ptx(payload: bytes) -> tuple[str, bytes]:
    """(the PTX, its metadata's JSON or b''); ValueError for anything else."""
    end = len(payload) - len(PTX_PAYLOAD) - 8
    if end < 0 or not payload.endswith(PTX_PAYLOAD):
        raise ValueError("not a PTX entry")
    start = end - int.from_bytes(payload[end:end + 8], "little")
    if start < 0:
        raise ValueError("truncated PTX entry")
    return payload[:start].decode("utf-8"), payload[start:end]


def _names_our_code(key: KeyLike) -> bool:
    """Whether what is stored under `key` may depend on our code (a plain string: assumed so)."""
    return isinstance(key, str) or key.names_our_code


def _compiler_unchanged() -> bool:
    """Whether the compiler's files are as they were when this process opened its first cache (so
    that what it made is what the keys name). versions.py is imported here, once there is a result."""
    from .versions import compiler_unchanged_since

    return _opened_ns is None or compiler_unchanged_since(_opened_ns)


def _shard_bytes(shard: str) -> int:
    """The bytes of whatever is in one shard: the estimate that decides whether to count exactly (a
    miss pays for a listing of the shards it wrote, not for maintenance.py's sorting of their contents)."""
    total = 0
    try:
        with os.scandir(shard) as listing:
            for item in listing:
                try:
                    total += item.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
    except OSError:
        return 0
    return total


def _is_file(path: str) -> bool:
    try:
        return os.path.isfile(path)
    except OSError:
        return False


def _is_real_dir(path: str) -> bool:
    import stat

    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class NullCache(Cache):
    """`--no-cache`: every lookup misses, nothing is written."""

    def __init__(self) -> None:
        super().__init__(os.devnull, 0)
        self.writes_enabled = False

    def get(self, key: KeyLike) -> bytes | None:
        self.misses += 1
        _miss("--no-cache")
        return None

    def peek(self, key: KeyLike) -> bytes | None:
        return None

    def put(self, key: KeyLike, data: Payload) -> None:
        _miss("--no-cache")
        return None


def open_cache(cache_dir: str | os.PathLike[str] | None = None, disabled: bool = False,
               max_bytes: int | None = None, defer_writes: bool = False) -> Cache:
    """The cache a compile uses: `cache_dir` or the default location; a NullCache when disabled."""
    if disabled:
        _miss("--no-cache")  # a disabled cache means compiling
        return NullCache()
    chosen = bool(cache_dir) or bool(os.environ.get("TILEIRAS_CACHE_DIR"))
    cache = Cache(os.fspath(cache_dir) if cache_dir else default_cache_dir(), max_bytes, chosen, defer_writes)
    if os.environ.get("TILEIRAS_CACHE_READONLY", "") not in ("", "0"):
        cache.writes_enabled = False  # a reader of a cache that others (CI) fill: see README.md
    return cache
