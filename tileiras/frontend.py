"""Load a TileIR module from a file or bytes: bytecode or text, read and verified.

The input kind is detected from its first bytes: TileIR bytecode magic,
MLIR bytecode magic (rejected with NVIDIA's hint), otherwise text.
Failures raise `BytecodeError` (exit 3) or `CompileError` (exit 5) with a
one-line (or MLIR-style multi-line) diagnostic.
"""

from __future__ import annotations

import os

from .errors import BytecodeError, CompileError, input_error
from .ir.core import Operation

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Optional, Union

TILEIR_MAGIC = b"\x7fTileIR\x00"
MLIR_MAGIC = b"ML\xefR"
NOT_TILEIR = "error: input does not correspond to Tile IR bytecode"
MLIR_HINT = " (it looks like MLIR bytecode instead)"


def read_input(path: str) -> bytes:
    """The bytes of `path` ("-" is stdin); exit 1 when it is missing, 4 when it cannot be read."""
    from .input_file import read_regular, read_stream

    try:
        if path == "-":
            import sys

            return read_stream(sys.stdin.buffer)
        return read_regular(path)
    except OSError as exc:
        raise input_error(path, exc) from None


def classify(data: bytes) -> str:
    """'bytecode', 'mlir-bytecode', 'text' or 'unknown'."""
    if data.startswith(TILEIR_MAGIC):
        return "bytecode"
    if data.startswith(MLIR_MAGIC):
        return "mlir-bytecode"
    if looks_like_text(data):
        return "text"
    return "unknown"


def looks_like_text(data: bytes) -> bool:
    head = data[:4096]
    if not head.strip():
        return False
    if b"\x00" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        # a multi-byte character may be cut at the 4096 boundary
        try:
            head[:-4].decode("utf-8")
        except UnicodeDecodeError:
            return False
    return True


def load_module(source: Union[str, os.PathLike, bytes, bytearray], filename: Optional[str] = None,
                verify: bool = True, allow_text: bool = True) -> Operation:
    """Read, parse and verify a module; `source` is a path or the file's bytes."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        name = filename or "<input>"
    else:
        name = filename or os.fspath(source)
        data = read_input(os.fspath(source))
    kind = classify(data)
    if kind == "bytecode":
        from .bytecode.reader import read_module

        module = read_module(data, name)
    elif kind == "mlir-bytecode":
        raise BytecodeError(NOT_TILEIR + MLIR_HINT)
    elif kind == "text" and allow_text:
        from .text.parser import parse_module

        module = parse_module(data.decode("utf-8", "replace"), name)
    else:
        raise BytecodeError(NOT_TILEIR)
    if verify:
        from .dialects.verifier import verify_module

        verify_module(module)
    return module


__all__ = ["load_module", "read_input", "classify", "BytecodeError", "CompileError"]
