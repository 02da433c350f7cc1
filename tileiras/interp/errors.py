"""Errors of a kernel run: all are `TileirasError`s with exit code 5."""

from __future__ import annotations

from ..errors import ExitCode, TileirasError


class InterpError(TileirasError):
    """The kernel cannot be executed or failed while executing."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.COMPILE_FAILED)


class MemoryFault(InterpError):
    """An access outside every allocation (the interpreter's segfault)."""


class KernelAssertion(InterpError):
    """A `cuda_tile.assert` found a false element."""
