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
import struct
import sys
from tileiras.errors import CompileError, ExitCode, TileirasError

from .isolate import _describe, can_fork

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only: a cache hit starts this worker and must not import typing
    from typing import Any, Optional

# Frames on the pipes: a length, then the bytes. A request is "target\nlevel\n" + LLVM IR; a
# reply is b"o" + PTX, or b"e" + exit code (4 bytes) + message. (pickle would cost an import.)
# The target HOST_OBJECT asks for the x86-64 `.nv.host` object of host IR (nv_host.py) instead.
_LENGTH = struct.Struct("<Q")
_CODE = struct.Struct("<i")
HOST_OBJECT = "nv-host"


def _write_frame(fd: int, data: bytes) -> None:
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


def _read_frame(fd: int) -> Optional[bytes]:
    head = _read_exact(fd, _LENGTH.size)
    return None if head is None else _read_exact(fd, _LENGTH.unpack(head)[0])


def _anonymous_file() -> Any:
    """A file for the child's stderr, gone when closed: memfd on Linux (no tempfile import)."""
    if hasattr(os, "memfd_create"):
        try:
            return os.fdopen(os.memfd_create("tileiras-llvm-stderr", os.MFD_CLOEXEC), "w+b")
        except OSError:
            pass
    import tempfile

    return tempfile.TemporaryFile()


_unreaped: set[int] = set()


def _reap_later(pid: int) -> None:
    """Reap `pid` if it has exited, else at the next worker start or at interpreter exit."""
    if not _unreaped:
        import atexit

        atexit.register(_reap, True)
    _unreaped.add(pid)
    _reap(False)


def _reap(block: bool) -> None:
    for pid in list(_unreaped):
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _unreaped.discard(pid)


class LLVMWorker:
    """A forked process with LLVM loaded that turns LLVM IR into PTX, one request at a time.

    `submit` hands over a module and returns at once; `result` waits for its PTX. At most one
    request is outstanding, so neither side can block on a full pipe.
    """

    def __init__(self) -> None:
        self.pid: Optional[int] = None
        self._pending = False
        if not can_fork():
            return  # threads or Windows: compile in-process instead
        _reap(False)
        self._errlog = _anonymous_file()
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(req_w)
            os.close(res_r)
            self._serve(parent, req_r, res_w)  # never returns
        os.close(req_r)
        os.close(res_w)
        self.pid, self._req, self._res = pid, req_w, res_r

    def _serve(self, parent: int, req: int, res: int) -> None:
        try:
            from .children import die_with_parent

            die_with_parent(parent)  # a killed compiler takes its worker along, even mid-compile
            os.dup2(self._errlog.fileno(), 2)  # LLVM writes its fatal message to fd 2
            if faulthandler.is_enabled():
                faulthandler.disable()
            from . import libdevice, targets  # noqa: F401  (imported while idle, used by _emit)
            from .nvptx import _emit, _llvm

            _llvm()
            while (request := _read_frame(req)) is not None:
                target_name, level, llvm_ir = request.decode("utf-8").split("\n", 2)
                try:
                    if target_name == HOST_OBJECT:
                        from .nv_host import compile_host_ir

                        reply = b"o" + compile_host_ir(llvm_ir)
                    else:
                        reply = b"o" + _emit(llvm_ir, targets.TARGETS[target_name], int(level)).encode("utf-8")
                except TileirasError as exc:
                    reply = b"e" + _CODE.pack(int(exc.code)) + exc.message.encode("utf-8")
                except Exception as exc:  # noqa: BLE001 - everything must cross the pipe
                    reply = b"e" + _CODE.pack(int(ExitCode.COMPILE_FAILED)) + f"error: {exc}".encode("utf-8")
                _write_frame(res, reply)
        except BaseException:  # noqa: BLE001 - the child must never unwind into the caller
            pass
        os._exit(0)

    def submit(self, llvm_ir: str, target: Any, opt_level: int) -> None:
        """Start compiling `llvm_ir` for `target` (a targets.Target); `result` returns the PTX."""
        assert not self._pending, "one request at a time"
        if self.pid is None:
            from .nvptx import _emit

            self._local = _emit(llvm_ir, target, opt_level)
            self._pending = True
            return
        try:
            _write_frame(self._req, f"{target.name}\n{opt_level}\n{llvm_ir}".encode("utf-8"))
        except OSError:
            pass  # the child died: `result` says why
        self._pending = True

    def result(self) -> str:
        return self._reply().decode("utf-8")

    def host_object(self, host_ir: str) -> bytes:
        """The `.nv.host` object of `host_ir` (nv_host.compile_host_ir), made where LLVM is
        already loaded: the parent then neither loads LLVM nor forks a child for it."""
        assert not self._pending, "one request at a time"
        if self.pid is None:
            from .isolate import run_isolated
            from .nv_host import compile_host_ir

            return run_isolated(".nv.host code generation", lambda: compile_host_ir(host_ir))
        try:
            _write_frame(self._req, f"{HOST_OBJECT}\n0\n{host_ir}".encode("utf-8"))
        except OSError:
            pass  # the child died: `_reply` says why
        self._pending = True
        return self._reply()

    def _reply(self) -> bytes:
        assert self._pending, "nothing submitted"
        self._pending = False
        if self.pid is None:
            return self._local.encode("utf-8")
        try:
            reply = _read_frame(self._res)
        except OSError:
            reply = None
        if not reply:
            raise CompileError(f"error: LLVM NVPTX code generation failed: {self._death_note()}")
        if reply[:1] == b"o":
            return reply[1:]
        code = _CODE.unpack_from(reply, 1)[0]
        message = reply[1 + _CODE.size:].decode("utf-8")
        raise CompileError(message) if code == ExitCode.COMPILE_FAILED else TileirasError(message, code)

    def emit(self, llvm_ir: str, target: Any, opt_level: int) -> str:
        self.submit(llvm_ir, target, opt_level)
        return self.result()

    def _death_note(self) -> str:
        status = 0
        if self.pid is not None:
            _, status = os.waitpid(self.pid, 0)
            self.pid = None
        self._errlog.seek(0)
        text = self._errlog.read().decode("utf-8", errors="replace").strip()
        return text or _describe(status)

    def close(self) -> None:
        """End the worker: it sees its request pipe close and exits. Its exit (unmapping LLVM)
        takes milliseconds, so it is reaped later rather than waited for here."""
        if self.pid is None:
            return
        for fd in (self._req, self._res):
            try:
                os.close(fd)
            except OSError:
                pass
        _reap_later(self.pid)
        self.pid = None
        self._errlog.close()

    def discard(self) -> None:
        """End a worker that will get no request (a cache hit): it is killed rather than left to
        finish loading LLVM, then reaped like a closed one."""
        if self.pid is not None:
            try:
                os.kill(self.pid, 9)  # SIGKILL; its stderr file and pipes are closed below
            except OSError:
                pass
        self.close()

    def __enter__(self) -> "LLVMWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
