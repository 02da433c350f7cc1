"""Atomic output writes: a failed run never leaves a partial or stale file."""

from __future__ import annotations

import os
from pathlib import Path

from ..atomic import replace_file
from .errors import TileirasError, ExitCode


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write `data` to `path` via a temp file in the same directory and a rename."""
    target = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    try:
        replace_file(target, payload, mode=0o644)
    except OSError as exc:
        raise TileirasError(f"error: cannot write '{target}': {exc.strerror}", ExitCode.COMPILE_FAILED) from None
