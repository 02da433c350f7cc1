"""How a diagnostic names the source location of an op: `loc("file":line:col): error: ...`.

That is MLIR's spelling of a file location, and the one cuTile Python reads from the compiler's
stderr (`cuda/tile/_compile.py`, LOC_RE_SIMPLE: `loc\\("([^"]+)"(?::(\\d+):(\\d+))?\\):\\s*error:`) to
point its exception at the Python line; `file:line:col: error:` showed "Unknown location" there.
Errors in a text input's own syntax keep `file:line:col:` (the lexer's, as mlir-opt prints them).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Any


def _quoted(name: str) -> str:
    """The file name as an MLIR string: `"` and `\\` escaped, control characters as \\XX."""
    out = ['"']
    for ch in name:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\" + format(ord(ch), "02X"))
        else:
            out.append(ch)
    return "".join(out) + '"'


def location_prefix(loc: Any) -> str:
    """`loc("file":line:col): ` for an op's location (a call site names its callee), '' when unknown."""
    while loc is not None and hasattr(loc, "callee"):  # attributes.CallSiteLoc
        loc = loc.callee
    file = getattr(loc, "file", None)
    if not isinstance(file, str) or not file:
        return ""
    return f"loc({_quoted(file)}:{getattr(loc, 'line', 0)}:{getattr(loc, 'column', 0)}): "
