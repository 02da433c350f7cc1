"""LLVM IR string literals: one spelling for every module that writes IR text.

Kept out of `lowering` so the host-object and `.nv.host` writers (used by the cache server's
workers, which must not import the compiler's lowering) can share it."""
from __future__ import annotations


def c_string(data: bytes) -> str:
    """The inside of an LLVM IR c"..." literal of `data`."""
    return "".join(_CHAR[b] for b in data)


_CHAR = [chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}" for b in range(256)]
