"""How a command-line run's failure ends: one line on stderr and an exit code, never a traceback.
Imports nothing a compile-cache hit does not (fast_exit, which needs `signal`, only on a failure)."""

from __future__ import annotations

import os
import sys

from ..errors import ExitCode, TileirasError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Callable, Optional


def one_line_failures(run: "Callable[[], int]", too_deep: str, internal: str,
                      closed: "Optional[Callable[[], int]]" = None) -> int:
    """`run()`'s exit code; a failure becomes one line on stderr and an exit code, never a traceback
    (TILEIRAS_DEBUG=1 re-raises a bug of ours): `too_deep` names what nests too deeply, `internal`
    what a bug of ours is called; a closed stdout ends by `closed` (None: re-raised, for the caller's
    caller to end quietly)."""
    try:
        return run()
    except TileirasError as exc:
        try:
            sys.stdout.flush()   # what the run printed comes before its error
        except OSError:
            pass
        print(exc.message, file=sys.stderr)
        return int(exc.code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return int(ExitCode.COMPILE_FAILED)
    except RecursionError:
        print(f"error: {too_deep}", file=sys.stderr)
        return int(ExitCode.COMPILE_FAILED)
    except Exception as exc:  # a bug of ours
        from .fast_exit import closed_stdout

        if closed_stdout(exc):
            if closed is None:
                raise
            return closed()
        if os.environ.get("TILEIRAS_DEBUG"):
            raise
        print(f"error: {internal}: {type(exc).__name__}: {exc} (set TILEIRAS_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return int(ExitCode.COMPILE_FAILED)
