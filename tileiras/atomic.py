"""Replacing a file atomically: write a private temp file beside it, then rename it over.

Readers see the old content or the new, never a partial file, and a failed
write leaves no temp file behind. The driver's outputs and the compile cache's
files are written this way. tempfile is not imported: it costs a cache hit
several milliseconds.
"""

from __future__ import annotations

import errno
import os


def create_temp(directory: str, prefix: str) -> tuple[int, str]:
    """(fd, path) of a new file `<prefix><random>.tmp` in `directory`: created exclusively
    (O_EXCL, so never someone else's file), mode 0600, not inherited by child processes."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = os.path.join(directory, f"{prefix}{os.urandom(6).hex()}.tmp")
        try:
            return os.open(path, flags, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", directory)


def replace_file(target: str | os.PathLike[str], data: bytes, prefix: str | None = None,
                 mode: int | None = None) -> None:
    """Make `target` hold `data`, through a temp file named `<prefix>...` (default `.<target name>.`)
    in the same directory, given `mode` (else it stays 0600) just before the rename.
    Raises OSError, with the temp file removed."""
    path = os.fspath(target)
    directory, name = os.path.split(path)
    fd, tmp = create_temp(directory or ".", f".{name}." if prefix is None else prefix)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
