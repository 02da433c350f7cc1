"""The SHA-256 of a tool's file, cheaply when a wheel installed it.

An installer writes each file's digest and size into its distribution's
`*.dist-info/RECORD` after writing the file. So when the file still has the
recorded size and was not modified after the RECORD was written, the recorded
digest is the file's: reading a few kilobytes replaces hashing libllvmlite
(~180 MB, ~0.2 s) or ptxas (~50 MB). Anything else (a CUDA toolkit's ptxas, a
file changed after installation) is hashed.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

CHUNK = 1 << 20
MAX_PARENTS = 6  # how far above the file its site-packages directory may be


def _encode(digest: bytes) -> str:
    """RECORD's spelling: 'sha256=' and unpadded URL-safe base64."""
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def hashed_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return _encode(digest.digest())


def _records_listing(path: Path) -> list[tuple[Path, str]]:
    """(RECORD, path relative to its directory) for each RECORD that may list `path`: those in an
    ancestor directory whose distribution name starts with the file's top-level folder there."""
    found: list[tuple[Path, str]] = []
    for depth, ancestor in enumerate(path.parents):
        if depth >= MAX_PARENTS:
            break
        relative = path.relative_to(ancestor)
        top = relative.parts[0].lower().replace("-", "_")
        try:
            names = os.listdir(ancestor)
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and name.lower().replace("-", "_").startswith(top):
                found.append((ancestor / name / "RECORD", relative.as_posix()))
        if found:
            break
    return found


def recorded_digest(path: Path) -> str | None:
    """The digest the installer recorded for `path`, if the file is still what it installed."""
    try:
        info = path.stat()
    except OSError:
        return None
    for record, relative in _records_listing(path):
        try:
            written = record.stat().st_mtime_ns
            lines = record.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for line in lines:
            fields = line.rsplit(",", 2)
            if len(fields) != 3 or fields[0] != relative or not fields[1].startswith("sha256="):
                continue
            if fields[2] == str(info.st_size) and info.st_mtime_ns <= written:
                return fields[1]
            return None  # listed, but changed since it was installed
    return None


def tool_digest(path: str | os.PathLike[str]) -> str:
    """'sha256=<base64>' of the file at `path` (recorded by its installer, else computed)."""
    path = Path(path)
    return recorded_digest(path) or hashed_digest(path)
