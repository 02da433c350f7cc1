"""LLVM code generation in a child process started early.

Loading LLVM (llvmlite's shared library) is the largest fixed cost of a
compile. The driver forks this worker before it reads the module, so LLVM
loads on the other core while the parent parses, verifies and lowers; the
parent then hands each target's LLVM IR over a pipe and gets PTX back.
Running LLVM in a child also turns a fatal LLVM error ("LLVM ERROR: ...",
which ends the process) into a `CompileError` carrying LLVM's message, as
`isolate.run_isolated` does for a single call.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import struct
import sys
import tempfile
from typing import Any, Optional

from tileiras.driver.errors import CompileError, ExitCode, TileirasError

from .isolate import _describe, can_fork

_LENGTH = struct.Struct("<Q")


def _write_msg(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> Optional[bytes]:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _read_msg(fd: int) -> Any:
    head = _read_exact(fd, _LENGTH.size)
    if head is None:
        return None
    body = _read_exact(fd, _LENGTH.unpack(head)[0])
    return None if body is None else pickle.loads(body)


class LLVMWorker:
    """A forked process with LLVM loaded that turns LLVM IR into PTX, one request at a time."""

    def __init__(self) -> None:
        self.pid: Optional[int] = None
        if not can_fork():
            return  # threads or Windows: compile in-process instead
        self._errlog = tempfile.TemporaryFile()
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(req_w)
            os.close(res_r)
            self._serve(req_r, res_w)  # never returns
        os.close(req_r)
        os.close(res_w)
        self.pid, self._req, self._res = pid, req_w, res_r

    def _serve(self, req: int, res: int) -> None:
        try:
            os.dup2(self._errlog.fileno(), 2)  # LLVM writes its fatal message to fd 2
            if faulthandler.is_enabled():
                faulthandler.disable()
            from . import targets
            from .nvptx import _emit, _llvm

            _llvm()
            while True:
                request = _read_msg(req)
                if request is None:
                    break
                llvm_ir, target_name, opt_level = request
                try:
                    reply: tuple[str, Any] = ("ok", _emit(llvm_ir, targets.TARGETS[target_name], opt_level))
                except TileirasError as exc:
                    reply = ("err", (exc.message, int(exc.code)))
                except Exception as exc:  # noqa: BLE001 - everything must cross the pipe
                    reply = ("err", (f"error: {exc}", int(ExitCode.COMPILE_FAILED)))
                _write_msg(res, reply)
        except BaseException:  # noqa: BLE001 - the child must never unwind into the caller
            pass
        os._exit(0)

    def emit(self, llvm_ir: str, target: Any, opt_level: int) -> str:
        from .nvptx import _emit

        if self.pid is None:
            return _emit(llvm_ir, target, opt_level)
        try:
            _write_msg(self._req, (llvm_ir, target.name, opt_level))
            reply = _read_msg(self._res)
        except OSError:
            reply = None
        if reply is None:
            raise CompileError(f"error: LLVM NVPTX code generation failed: {self._death_note()}")
        kind, value = reply
        if kind == "ok":
            return value
        message, code = value
        raise CompileError(message) if code == ExitCode.COMPILE_FAILED else TileirasError(message, code)

    def _death_note(self) -> str:
        status = 0
        if self.pid is not None:
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
        self._errlog.seek(0)
        text = self._errlog.read().decode("utf-8", errors="replace").strip()
        return text or _describe(status)

    def close(self) -> None:
        if self.pid is None:
            return
        for fd in (self._req, self._res):
            try:
                os.close(fd)
            except OSError:
                pass
        os.waitpid(self.pid, 0)
        self.pid = None
        self._errlog.close()

    def __enter__(self) -> "LLVMWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
