"""Reading an input: a regular file of bounded size, judged before a byte is read.

`open()` on a FIFO blocks until a writer comes (a cache-server worker waited forever), and
`/dev/zero` never ends (the CLI read until memory ran out). So an input is opened without
blocking and without following a swap (the opened file is the one stat saw), refused unless it is
a regular file of at most MAX_INPUT_BYTES, and read to the size stat gave. NVIDIA's codes: a
missing input or a directory exits 1; anything else that cannot be read (a FIFO, a device, a
socket, a file over the bound, no permission) exits 4.
"""

from __future__ import annotations

import os
import stat

from .errors import ExitCode, TileirasError

MAX_INPUT_BYTES = 256 << 20  # a kernel's bytecode or text is kilobytes; the compile limits refuse far less
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_KINDS = ((stat.S_IFIFO, "a FIFO"), (stat.S_IFCHR, "a character device"), (stat.S_IFBLK, "a block device"),
          (stat.S_IFSOCK, "a socket"))


def _refuse(path: str, why: str, what: str, code: int = ExitCode.UNREADABLE) -> TileirasError:
    return TileirasError(f"error: unable to read {what} '{path}': {why}", code)


def _judge(path: str, info: os.stat_result, what: str, limit: int) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise _refuse(path, "Is a directory", what, ExitCode.NO_INPUT)
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for bits, name in _KINDS if stat.S_IFMT(info.st_mode) == bits), "not a regular file")
        raise _refuse(path, f"it is {kind}, not a regular file" if kind.startswith("a ") else kind, what)
    if info.st_size > limit:
        raise _refuse(path, f"{info.st_size} bytes, more than the {limit} an input may have", what)


def read_regular(path: str, what: str = "input file", limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the regular file at `path`; TileirasError (exit 1 or 4) for anything else."""
    from .errors import input_error

    try:
        _judge(path, os.stat(path), what, limit)  # before opening: opening a device may do something
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        error = input_error(path, exc)
        raise _refuse(path, error.message.rsplit(": ", 1)[-1], what, error.code) from None
    try:
        info = os.fstat(fd)
        _judge(path, info, what, limit)  # what was opened, should the path have been swapped meanwhile
        chunks, got = [], 0
        while got <= info.st_size:  # one byte past the size: a file that grows is read to the bound only
            chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if got > limit:
                raise _refuse(path, f"more than the {limit} bytes an input may have", what)
        return b"".join(chunks)
    except OSError as exc:
        raise _refuse(path, exc.strerror or str(exc), what) from None
    finally:
        os.close(fd)


def read_stream(stream: object, what: str = "standard input", limit: int = MAX_INPUT_BYTES) -> bytes:
    """At most `limit` bytes of a stream (`-`: stdin); more is refused (exit 4), never read on."""
    data = stream.read(limit + 1)  # type: ignore[attr-defined]
    if len(data) > limit:
        raise TileirasError(f"error: unable to read {what}: more than the {limit} bytes an input may have",
                            ExitCode.UNREADABLE)
    return data
