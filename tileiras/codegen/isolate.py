"""Run a function in a forked child, so that a fatal LLVM error becomes an exception.

LLVM reports some failures (instruction selection, a PTX version the target
cannot use) with `report_fatal_error`, which prints "LLVM ERROR: ..." and
ends the process: no Python exception is raised. Compiling in a forked child
turns that into a `CompileError` carrying LLVM's own message, instead of a
dead build step with a half-printed diagnostic.

Forking is cheap (copy-on-write; llvmlite is already loaded in the parent) but
unsafe in a multi-threaded process, and absent on Windows: there the function
runs in-process, which differs only in how a fatal LLVM error is reported.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from tileiras.errors import CompileError, ExitCode, TileirasError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: a cache hit forks the LLVM worker and must not import typing
    from typing import Any, Callable, TypeVar

    T = TypeVar("T")

_CHILD_FAILED = 70  # the child could not even report its result


def can_fork() -> bool:
    # A process that never imported `threading` has started no Python threads (and skips its import).
    threading = sys.modules.get("threading")
    return hasattr(os, "fork") and (threading is None or threading.active_count() == 1)


def run_isolated(what: str, fn: Callable[[], T]) -> T:
    """`fn()` in a child process; its result or exception comes back here.

    `what` names the stage in the diagnostic when the child dies.
    """
    if not can_fork():
        return fn()
    import pickle
    import tempfile

    with tempfile.TemporaryFile() as errlog:
        read_end, write_end = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # child: never returns
            _child(parent, fn, read_end, write_end, errlog.fileno())
        os.close(write_end)
        try:
            with os.fdopen(read_end, "rb") as reader:
                payload = reader.read()
        finally:
            _, status = os.waitpid(pid, 0)
        if payload:
            kind, value = pickle.loads(payload)
            if kind == "ok":
                return value
            message, code = value  # errors cross as (message, exit code): exceptions do not pickle their code
            raise CompileError(message) if code == ExitCode.COMPILE_FAILED else TileirasError(message, code)
        errlog.seek(0)
        text = errlog.read().decode("utf-8", errors="replace").strip()
        raise CompileError(f"error: {what} failed: {text or _describe(status)}")


def _child(parent: int, fn: Callable[[], Any], read_end: int, write_end: int, errlog_fd: int) -> None:
    code = 0
    try:
        from .children import die_with_parent

        die_with_parent(parent)
        os.close(read_end)
        os.dup2(errlog_fd, 2)  # LLVM writes its fatal message to fd 2
        if faulthandler.is_enabled():  # an expected abort is not a Python crash worth a stack dump
            faulthandler.disable()
        try:
            result: tuple[str, Any] = ("ok", fn())
        except TileirasError as exc:
            result = ("err", (exc.message, int(exc.code)))
        except Exception as exc:  # noqa: BLE001 - everything must cross the pipe
            result = ("err", (f"error: {exc}", int(ExitCode.COMPILE_FAILED)))
        import pickle

        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(data)
        while view:
            written = os.write(write_end, view)
            view = view[written:]
        os.close(write_end)
    except BaseException:  # noqa: BLE001 - the child must never unwind into the caller
        code = _CHILD_FAILED
    os._exit(code)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        import signal

        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"compiler process killed by {name}"
    return f"compiler process exited with code {os.WEXITSTATUS(status)}"
