"""Exit codes and the one exception type every stage raises for user errors.

The codes are NVIDIA's tileiras public error codes (wiki: Driver Program
Handle); every CLI maps a `TileirasError` to its message on stderr and its
code, never to a traceback.
"""

from __future__ import annotations


class ExitCode:
    """The codes as plain ints: `enum` (with `functools` and `collections`) would
    cost the disassembler a fifth of its start-up."""

    OK = 0
    NO_INPUT = 1          # no positional input file
    INVALID_OPTIONS = 2   # bad option value or combination
    NOT_TILEIR = 3        # not TileIR bytecode / malformed bytecode
    UNREADABLE = 4        # input cannot be read
    COMPILE_FAILED = 5    # parse, verify, lowering, ptxas or output failure


class TileirasError(Exception):
    """A user-facing failure: a one-line (or MLIR-style multi-line) message and an exit code."""

    def __init__(self, message: str, code: int = ExitCode.COMPILE_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.code = int(code)

    def __str__(self) -> str:
        return self.message


class BytecodeError(TileirasError):
    """Malformed or unsupported TileIR bytecode."""

    def __init__(self, message: str, code: int = ExitCode.NOT_TILEIR) -> None:
        super().__init__(message, code)


class CompileError(TileirasError):
    """Verification, lowering, PTX emission or ptxas failure."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.COMPILE_FAILED)


def input_error(path: str, exc: OSError) -> TileirasError:
    """An input that cannot be read, with NVIDIA's codes: missing (or a directory) exits 1, present
    but unreadable (permissions, I/O) exits 4. Every command that reads an input uses this."""
    import os

    missing = not os.path.exists(path) or os.path.isdir(path)
    reason = "Is a directory" if os.path.isdir(path) else (exc.strerror or str(exc))
    return TileirasError(f"error: unable to read input file '{path}': {reason}",
                         ExitCode.NO_INPUT if missing else ExitCode.UNREADABLE)
