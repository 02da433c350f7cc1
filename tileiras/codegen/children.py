"""Child processes die with the compiler.

The compiler's children (the forked LLVM worker, `run_isolated` children,
ptxas) stay in its process group, so a terminal's Ctrl-C or a build tool's
signal to the group reaches them too. When the compiler alone is killed
(kill -9, an OOM kill), Linux's PR_SET_PDEATHSIG makes the kernel send each
child SIGKILL at once, instead of letting it run on for seconds. Elsewhere
the LLVM worker still ends when its request pipe closes, and ptxas when its
run is over.

PR_SET_PDEATHSIG fires when the *thread* that started the child ends, so it
is only set while the process has a single thread.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Any, Callable, Optional

_PR_SET_PDEATHSIG = 1
_SIGKILL = 9
_prctl: Any = None  # libc's prctl, once loaded; False where there is none


def _load_prctl() -> Any:
    global _prctl
    if _prctl is None:
        _prctl = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _prctl = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError, ImportError):
                pass
    return _prctl


def _single_threaded() -> bool:
    threading = sys.modules.get("threading")  # never imported: no other thread was ever started
    return threading is None or threading.active_count() == 1


def die_with_parent(parent: int) -> None:
    """Call in a child right after fork (`parent`: the forking process's pid): the kernel will
    SIGKILL the child when the parent dies; a parent already gone ends the child now."""
    prctl = _load_prctl()
    if prctl:
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def preexec() -> Optional[Callable[[], None]]:
    """A `preexec_fn` for subprocess that makes the child die with this process, or None where
    that is not possible (not Linux, or other threads run: a preexec_fn is unsafe then)."""
    if not _load_prctl() or not _single_threaded():
        return None
    parent = os.getpid()
    return lambda: die_with_parent(parent)
