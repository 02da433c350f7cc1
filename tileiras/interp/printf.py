"""C printf formatting of tiles (`print_tko`).

Each conversion of the format string consumes one tile argument. A 0-d tile
prints as its value; a tile of rank >= 1 prints as nested brackets with the
conversion applied to every element, rows separated by ", " (the output
cuTile documents: `[0, 1, 2, 3]`). Length modifiers (h, l, ll, ...) are
accepted and ignored; %u %o %x %X read the element's bits as unsigned, as
C does for the promoted integer.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..ir.types import Type
from .elements import element, int_bits, is_int, to_signed, to_unsigned
from .errors import InterpError

_SPEC = re.compile(r"%([-+ #0]*)(\d+)?(?:\.(\d+))?(hh|h|ll|l|j|z|t|L)?([diouxXeEfFgGaAcs%])")


def _format_one(value: Any, flags: str, width: str, prec: str, conv: str) -> str:
    if conv == "i":
        conv = "d"
    if conv in "aA":
        text = float(value).hex()
        text = text.upper() if conv == "A" else text
        return text.rjust(int(width)) if width else text
    if conv == "c":
        return chr(int(value) & 0xFF)
    spec = "%" + flags + (width or "") + ("." + prec if prec is not None else "")
    if conv in "diuoxX":
        spec += "d" if conv == "u" else conv
        return spec % int(value)
    return (spec + conv) % float(value)


def _values(tile: Any, t: Type, conv: str) -> np.ndarray:
    """The elements as Python-formattable numbers for the conversion."""
    tile = np.asarray(tile)
    if is_int(t):
        bits = int_bits(t)
        if conv in "uoxX":
            return to_unsigned(tile, bits)
        return to_signed(tile, bits) if bits > 1 else tile.astype(np.int64)
    if tile.dtype == np.uint64:          # pointers
        return tile
    return tile.astype(np.float64)


def _render(values: np.ndarray, fmt: tuple[str, str, Any, str]) -> str:
    if values.ndim == 0:
        return _format_one(values.item(), *fmt)
    return "[" + ", ".join(_render(v, fmt) for v in values) + "]"


def format_print(text: str, args: list, types: list[Type]) -> str:
    out: list[str] = []
    pos = 0
    k = 0
    for match in _SPEC.finditer(text):
        out.append(text[pos:match.start()])
        pos = match.end()
        flags, width, prec, _length, conv = match.groups()
        if conv == "%":
            out.append("%")
            continue
        if conv == "s":
            raise InterpError("print: %s has no tile argument to print")
        if k >= len(args):
            raise InterpError(f"print: the format '{text}' has more conversions than the {len(args)} arguments")
        vals = _values(args[k], element(types[k]), conv)
        out.append(_render(vals, (flags, width, prec, conv)))
        k += 1
    out.append(text[pos:])
    if k != len(args):
        raise InterpError(f"print: the format '{text}' has {k} conversions for {len(args)} arguments")
    return "".join(out)
