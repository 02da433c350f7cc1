"""The one error type the emulator raises: unsupported PTX, bad launches, faults."""

from __future__ import annotations

from ..errors import ExitCode, TileirasError


class EmulatorError(TileirasError):
    """A PTX program the emulator cannot run, or a fault while running it.

    Faults (out-of-bounds or misaligned accesses, deadlocks, `trap`) name the
    instruction, its PTX line, the thread and block, and the address.
    """

    def __init__(self, message: str) -> None:
        if not message.startswith("error:"):
            message = f"error: {message}"
        super().__init__(message, ExitCode.COMPILE_FAILED)


class DeviceFault(Exception):
    """A fault raised while executing one instruction; the executor adds where it happened."""

    def __init__(self, message: str, thread: "int | None" = None) -> None:
        super().__init__(message)
        self.message = message
        self.thread = thread
