"""Atomic output writes: a failed run never leaves a partial or stale file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from .errors import TileirasError, ExitCode


def _create_temp(directory: Path, name: str) -> tuple[int, str]:
    """An exclusively created, private temp file beside the target (tempfile's mkstemp without
    importing tempfile, which costs a cache hit several milliseconds)."""
    for _ in range(100):
        tmp = os.path.join(directory, f".{name}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name")


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write `data` to `path` via a temp file in the same directory and a rename."""
    target = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = _create_temp(directory, target.name)
    except OSError as exc:
        raise TileirasError(f"error: cannot write '{target}': {exc.strerror}", ExitCode.COMPILE_FAILED) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TileirasError(f"error: cannot write '{target}': {exc.strerror}", ExitCode.COMPILE_FAILED) from None
