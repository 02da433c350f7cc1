"""Atomic output writes: a failed run never leaves a partial or stale file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import TileirasError, ExitCode


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write `data` to `path` via a temp file in the same directory and a rename."""
    target = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
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
