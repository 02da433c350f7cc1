"""One cache entry on disk: its format, and reading it without trusting what sits at its path.

An entry is a header, the full key it was stored under, then the payload:

    magic "TLRCACHE" | format u32 | key length u32 | payload length u64 | digest(payload) | key | payload

A reader names the key it expects: an entry that records another key (copied
or renamed over this one), whose payload does not match its digest (a flipped
bit, a truncated file) or whose header is not ours is not an answer.

Reading opens the folders below the cache root one at a time without following
links (a link there could point anywhere), then the entry file without
following a link and without blocking (a FIFO would block a plain open
forever), and reads only a regular file no larger than MAX_BYTES (a link to
/dev/zero would never end). Given the key it expects, it reads the header
first and the payload only when the header names that key and the file's size
is the size the header announces (a 1 GiB sparse file with a foreign header
took 6.7 s and 1.06 GB for one lookup when read whole). Where the platform lacks `dir_fd` and O_NOFOLLOW
(Windows), the same checks run on the path with lstat.
"""

from __future__ import annotations

import os
import stat
import struct

MAGIC = b"TLRCACHE"
HEADER = struct.Struct("<8sIIQ32s")   # magic, format, key length, payload length, digest
FORMAT = 3                            # 3: BLAKE2b-256 digests (2: SHA-256; 1: no key)
MAX_BYTES = 1 << 30                   # no entry is larger: a cubin or PTX is far below this
TEMP_PREFIX = ".tmp-"                 # an entry being written: <shard>/.tmp-<random>.tmp
_HEX = frozenset("0123456789abcdef")


def hex_name(name: str, low: int, high: int) -> bool:
    """`name` is `low`..`high` lowercase hex digits (an entry's file name is its key; a shard's, two
    digits). Plain string tests: `re` costs a cache miss milliseconds to import."""
    return low <= len(name) <= high and _HEX.issuperset(name)


def key_name(name: str) -> bool:
    return hex_name(name, 16, 128)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
FILE_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC | getattr(os, "O_BINARY", 0)
SAFE_OPEN = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd


class Unexpected(Exception):
    """Something other than an entry of ours sits where an entry should be: `reason` says what."""

    def __init__(self, reason: str, removable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.removable = removable  # a name that may be unlinked (not a folder)


def wrap(key: str, payload: bytes, payload_digest: bytes | None = None) -> bytes:
    """The entry of `payload` under `key`; `payload_digest`: the payload's digest, when the caller
    has it (store._pack_ptx continues a hash made for a key)."""
    if payload_digest is None:
        from ..hashing import digest  # here: opening a cache and missing need no hashing

        payload_digest = digest(payload).digest()
    name = key.encode("ascii")
    return HEADER.pack(MAGIC, FORMAT, len(name), len(payload), payload_digest) + name + payload


def unwrap(blob: bytes, key: str) -> bytes | None:
    """The payload stored under `key`; None for an entry of an older format (a plain miss).
    Raises Unexpected for anything else that is not that entry."""
    if len(blob) < HEADER.size:
        raise Unexpected("truncated entry")
    magic, fmt, key_length, length, digest = HEADER.unpack_from(blob, 0)
    if magic != MAGIC:
        raise Unexpected("not a cache entry")
    if fmt < FORMAT:
        return None
    if fmt != FORMAT:
        raise Unexpected(f"entry format {fmt} is not {FORMAT}")
    name = key.encode("ascii")
    start = HEADER.size + key_length
    if blob[HEADER.size:start] != name:
        recorded = blob[HEADER.size:start].decode("ascii", "replace")[:80]
        raise Unexpected(f"the entry records another key ({recorded})")
    payload = blob[start:]
    if length != len(payload):
        raise Unexpected(f"truncated entry ({len(payload)} of {length} payload bytes)")
    from ..hashing import digest as payload_digest

    if payload_digest(payload).digest() != digest:
        raise Unexpected("the payload does not match its digest")
    return payload


def _worth_reading(head: bytes, key: str, size: int) -> bool:
    """Whether the payload after `head` (the header and the key's room) can be `key`'s entry. False
    leaves `unwrap(head)` to say why not (or to call an older format a miss); raises Unexpected
    when the header is ours and right but the file's size is not what it announces."""
    if len(head) < HEADER.size:
        return False
    magic, fmt, key_length, length, _ = HEADER.unpack_from(head, 0)
    if magic != MAGIC or fmt != FORMAT or head[HEADER.size:HEADER.size + key_length] != key.encode("ascii"):
        return False
    if HEADER.size + key_length + length != size:
        raise Unexpected(f"{size} bytes where the header announces {HEADER.size + key_length + length}")
    return True


def _read_entry(fd: int, size: int, key: str | None) -> bytes:
    """The file's bytes; with `key`, only its header when the payload cannot be that key's."""
    if key is None:
        return _read_fd(fd, size)
    head = _read_fd(fd, min(size, HEADER.size + len(key)))
    if not _worth_reading(head, key, size):
        return head
    return head + _read_fd(fd, size - len(head))


def _check(info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise Unexpected("a folder, not an entry", removable=False)
    if stat.S_ISLNK(info.st_mode):
        raise Unexpected("a symbolic link, not an entry")
    if not stat.S_ISREG(info.st_mode):
        raise Unexpected("not a regular file")
    if info.st_size > MAX_BYTES:
        raise Unexpected(f"{info.st_size} bytes, more than any entry")


def _read_fd(fd: int, size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = os.read(fd, size - got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read(root: str, parts: tuple[str, ...], touch: bool, key: str | None = None) -> bytes:
    """The bytes of the regular file at root/parts[0]/.../parts[-1]; `touch` sets its mtime to now;
    `key`: the entry expected there (its header is checked before the payload is read).
    FileNotFoundError when it is not there; Unexpected or another OSError when something else is."""
    if not SAFE_OPEN:
        return _read_by_path(os.path.join(root, *parts), touch, key)
    fds = [os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)]  # the root itself may be a link: the user's choice
    try:
        for folder in parts[:-1]:
            try:
                fds.append(os.open(folder, DIR_FLAGS, dir_fd=fds[-1]))
            except FileNotFoundError:
                raise
            except OSError as exc:  # a link (ELOOP), a file, no permission
                raise Unexpected(f"cannot open the folder '{folder}': {exc.strerror}", removable=False) from None
        info = os.stat(parts[-1], dir_fd=fds[-1], follow_symlinks=False)
        _check(info)  # before opening: opening a device may do something
        fd = os.open(parts[-1], FILE_FLAGS, dir_fd=fds[-1])
        try:
            opened = os.fstat(fd)
            _check(opened)
            if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                raise Unexpected("replaced while being opened")
            data = _read_entry(fd, opened.st_size, key)
            if touch and len(data) == opened.st_size:
                try:
                    os.utime(fd)  # LRU: a hit makes the entry the most recent
                except OSError:
                    pass
            return data
        finally:
            os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)


def _read_by_path(path: str, touch: bool, key: str | None) -> bytes:
    folder = os.path.dirname(path)
    if os.path.islink(folder) or os.path.islink(os.path.dirname(folder)):
        raise Unexpected("a folder of the cache is a link", removable=False)
    _check(os.lstat(path))
    with open(path, "rb") as handle:
        opened = os.fstat(handle.fileno())
        _check(opened)
        data = _read_entry(handle.fileno(), opened.st_size, key)
    if touch and len(data) == opened.st_size:
        try:
            os.utime(path)
        except OSError:
            pass
    return data


def remove(path: str) -> None:
    """Unlink the name at `path` (never what a link points to); errors are ignored."""
    try:
        os.unlink(path)
    except OSError:
        pass
