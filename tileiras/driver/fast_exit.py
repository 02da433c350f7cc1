"""End a command-line run without interpreter teardown.

The compiler's processes are short-lived and started hundreds of times per
build: freeing every module and IR object at exit costs 10-30 ms and buys
nothing. The streams are flushed first, so no output is lost. Only the
console-script path (`main()` called with no argv) ends this way; `main(argv)`
called from Python returns as usual.

A closed stdout (`tileiras --help | head -1`) ends the run quietly, as NVIDIA's
tools end: by SIGPIPE (a shell reports 141), never with a message on stderr.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import NoReturn

BROKEN_PIPE = 128 + signal.SIGPIPE  # the code `main(argv)` returns when stdout's reader went away


def stdout_closed() -> int:
    """The reader of stdout went away: send what is still buffered nowhere, return BROKEN_PIPE.

    Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError (in whichever
    print reaches the pipe first: racy under `| head`); every CLI catches it and calls this."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())  # the interpreter's own flush at exit must not fail again
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
    return BROKEN_PIPE


def stdout_gone() -> bool:
    """Whether stdout is a pipe nobody reads any more (a BrokenPipeError may come from another pipe)."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def closed_stdout(exc: BaseException) -> bool:
    """Whether `exc` is stdout's reader going away (to be ended quietly, not reported)."""
    return isinstance(exc, BrokenPipeError) and stdout_gone()


def exit_now(code: int) -> "NoReturn":
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):  # the reader went away (`| head`): nothing left to deliver
        code = stdout_closed() if code == 0 else code
    try:
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    if code == BROKEN_PIPE:  # end as a C tool ends on a closed pipe: by the signal, silently
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(code)
