"""Run an external tool (ptxas, fatbinary in tests): argv in, bytes out, status decoded.

The wiki's subprocess harness, in Python: stdin closed, stdout and stderr
captured, an optional wall-clock timeout that kills the child, and exit
statuses decoded the POSIX way (126 not executable, 127 not found, signals by
name) so a deployment problem never reads like a compiler bug.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Sequence

from tileiras.errors import CompileError
from tileiras.ir.record import record

DEFAULT_TIMEOUT_S = 600.0


@record
class ToolResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace").strip()


def run_tool(argv: Sequence[str], cwd: str | None = None, timeout: float | None = None) -> ToolResult:
    """Run `argv`; a failure to start or a timeout raises CompileError, any exit status returns."""
    return start_tool(argv, cwd, timeout).wait()


class RunningTool:
    """A tool started by `start_tool`; `wait` gives its ToolResult."""

    def __init__(self, argv: Sequence[str], cwd: str | None, timeout: float | None) -> None:
        self.argv = list(argv)
        self.limit = timeout if timeout is not None else _timeout_from_env()
        from .children import preexec

        try:
            self.proc = subprocess.Popen(self.argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, preexec_fn=preexec())  # dies with us
        except FileNotFoundError:
            raise CompileError(f"error: {argv[0]}: program not found") from None
        except PermissionError:
            raise CompileError(f"error: {argv[0]}: program could not be executed") from None
        except OSError as exc:
            raise CompileError(f"error: {argv[0]}: program could not be executed: {exc.strerror}") from None

    def wait(self) -> ToolResult:
        try:
            stdout, stderr = self.proc.communicate(timeout=self.limit)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise CompileError(f"error: {os.path.basename(self.argv[0])}: child timed out after {self.limit:g} s") \
                from None
        return ToolResult(self.proc.returncode, stdout, stderr)


def start_tool(argv: Sequence[str], cwd: str | None = None, timeout: float | None = None) -> RunningTool:
    """Start `argv` without waiting for it (the timeout counts from `wait`)."""
    return RunningTool(argv, cwd, timeout)


def describe_status(returncode: int) -> str:
    """A one-line reading of a child's exit status (subprocess reports signals as -N)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    if returncode == 126:
        return "program could not be executed (exit code 126)"
    if returncode == 127:
        return "program not found (exit code 127)"
    return f"exit code {returncode}"


def _timeout_from_env() -> float:
    value = os.environ.get("TILEIRAS_TOOL_TIMEOUT", "")
    try:
        seconds = float(value)
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return seconds if seconds > 0 else DEFAULT_TIMEOUT_S
