"""CUDA system calls the driver provides to every module: `vprintf` and `__assertfail`.

PTX declares them `.extern .func` without a body; the emulator runs them
here. `vprintf(format, args)` reads the NUL-terminated format and the
argument buffer (each argument at its natural alignment: 4-byte ints and
chars, 8-byte longs, doubles and pointers) and writes the text to the
launch's `stdout`, one thread after another in thread order.
`__assertfail(message, file, line, function, charSize)` aborts the launch
with an `EmulatorError` naming the message and the failing thread.
"""

from __future__ import annotations

import re
import struct
from typing import Any, Callable

from .errors import DeviceFault

_SPEC = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXcsfFeEgGaAp%n])")


def read_cstring(st: Any, lane: int, addr: int, limit: int = 1 << 16) -> bytes:
    """Bytes at a generic address up to (not including) the first NUL."""
    out = bytearray()
    while len(out) < limit:
        b = _read(st, lane, addr + len(out), 1)[0]
        if b == 0:
            return bytes(out)
        out.append(b)
    raise DeviceFault(f"vprintf: string at 0x{addr:x} is not terminated within {limit} bytes", lane)


def _read(st: Any, lane: int, addr: int, size: int) -> bytes:
    from . import spaces

    import numpy as np

    lanes = np.array([lane], dtype=np.int64)
    parts = spaces.resolve(st, "generic", np.array([addr], dtype=np.uint64), lanes, size, 1)
    _, buf, _, offs = parts[0]
    o = int(offs[0])
    return bytes(buf[o:o + size])


def format_printf(st: Any, lane: int, fmt: bytes, args_addr: int) -> str:
    """C printf formatting of `fmt` with arguments read from the vprintf buffer."""
    text = fmt.decode("utf-8", errors="replace")
    out: list[str] = []
    pos = 0
    offset = 0

    def take(size: int) -> bytes:
        nonlocal offset
        offset = (offset + size - 1) // size * size
        raw = _read(st, lane, args_addr + offset, size)
        offset += size
        return raw

    for m in _SPEC.finditer(text):
        out.append(text[pos:m.start()])
        pos = m.end()
        flags, width, prec, length, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        if width == "*":
            width = str(struct.unpack("<i", take(4))[0])
        if prec == "*":
            prec = str(struct.unpack("<i", take(4))[0])
        spec = "%" + (flags or "") + (width or "") + (f".{prec}" if prec is not None else "")
        if conv in "di":
            raw = take(8 if length in ("l", "ll", "j", "z", "t") else 4)
            v = int.from_bytes(raw, "little", signed=True)
            if length == "hh":
                v = (v & 0xFF) - ((v & 0x80) << 1)
            elif length == "h":
                v = (v & 0xFFFF) - ((v & 0x8000) << 1)
            out.append((spec + "d") % v)
        elif conv in "ouxX":
            size = 8 if length in ("l", "ll", "j", "z", "t") else 4
            v = int.from_bytes(take(size), "little")
            if length == "hh":
                v &= 0xFF
            elif length == "h":
                v &= 0xFFFF
            out.append((spec + ("d" if conv == "u" else conv)) % v)
        elif conv == "c":
            out.append((spec + "c") % chr(int.from_bytes(take(4), "little") & 0xFF))
        elif conv in "fFeEgG":
            v = struct.unpack("<d", take(8))[0]
            out.append((spec + conv) % v)
        elif conv in "aA":
            v = struct.unpack("<d", take(8))[0]
            s = v.hex()
            out.append(s.upper() if conv == "A" else s)
        elif conv == "s":
            ptr = int.from_bytes(take(8), "little")
            s = "(null)" if ptr == 0 else read_cstring(st, lane, ptr).decode("utf-8", errors="replace")
            out.append((spec + "s") % s)
        elif conv == "p":
            out.append("0x%x" % int.from_bytes(take(8), "little"))
        else:   # %n writes nothing on the GPU
            take(8)
    out.append(text[pos:])
    return "".join(out)


def vprintf(st: Any, lanes: Any, args: list) -> Any:
    import numpy as np

    fmts, bufs = args
    counts = np.zeros(lanes.size, dtype=np.int32)
    for i, lane in enumerate(lanes.tolist()):
        fmt = read_cstring(st, lane, int(fmts[i]))
        text = format_printf(st, lane, fmt, int(bufs[i]))
        st.stdout.write(text)
        counts[i] = len(text)
    return counts


def assertfail(st: Any, lanes: Any, args: list) -> Any:
    message, file_, line, function, _ = args
    lane = int(lanes[0])
    msg = read_cstring(st, lane, int(message[0])).decode("utf-8", errors="replace")
    where = []
    if int(file_[0]):
        where.append(read_cstring(st, lane, int(file_[0])).decode("utf-8", errors="replace") + f":{int(line[0])}")
    if int(function[0]):
        where.append("in " + read_cstring(st, lane, int(function[0])).decode("utf-8", errors="replace"))
    suffix = f" ({' '.join(where)})" if where else ""
    raise DeviceFault(f"device assertion failed: {msg}{suffix}", lane)


# name -> (implementation, parameter types, result type or None)
BUILTINS: dict[str, tuple[Callable[..., Any], tuple[str, ...], str | None]] = {
    "vprintf": (vprintf, ("b64", "b64"), "b32"),
    "__assertfail": (assertfail, ("b64", "b64", "b32", "b64", "b64"), None),
}
