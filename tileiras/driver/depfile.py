"""Make/Ninja depfiles: `target: dep dep ...`, escaped the way GCC and Clang write them.

Escaping (understood by GNU Make, Ninja and CMake's depfile reader):
  space  -> '\\ '  (and the backslashes right before it are doubled)
  '#'    -> '\\#'
  '$'    -> '$$'
  ':'    -> '\\:'  except a Windows drive letter ('C:\\x', 'C:/x'), which all three accept as is
Newlines cannot be expressed in a depfile: such a path is an error.
"""

from __future__ import annotations

import re
from typing import Optional, Sequence

from ..errors import ExitCode, TileirasError
from ..output import write_atomic

_DRIVE = re.compile(r"^[A-Za-z]:(?=[\\/])")


def escape_path(path: str) -> str:
    if "\n" in path or "\r" in path or "\0" in path:
        raise TileirasError(f"error: cannot write a depfile entry for a path containing a newline: {path!r}",
                            ExitCode.COMPILE_FAILED)
    drive = ""
    if (match := _DRIVE.match(path)) is not None:
        drive, path = match.group(0), path[match.end():]
    out: list[str] = []
    backslashes = 0
    for char in path:
        if char == "\\":
            backslashes += 1
            out.append(char)
            continue
        if char == " ":
            out.append("\\" * backslashes)  # 2N+1 backslashes before a space mean N and a space
            out.append("\\ ")
        elif char == "#":
            out.append("\\#")
        elif char == "$":
            out.append("$$")
        elif char == ":":
            out.append("\\:")
        else:
            out.append(char)
        backslashes = 0
    return drive + "".join(out)


def render_depfile(target: str, deps: Sequence[str]) -> str:
    """The depfile text: one dependency per continuation line, duplicates dropped, order kept."""
    unique = list(dict.fromkeys(deps))
    lines = [escape_path(target) + ":"]
    lines += [" " + escape_path(dep) for dep in unique]
    return " \\\n".join(lines) + "\n"


def write_depfile(path: str, target: str, deps: Sequence[str], inputs: Sequence[str] = ()) -> Optional[str]:
    """Write the depfile (an input of the run, e.g. the source itself, is never overwritten); returns
    the file written, as `write_atomic` does."""
    return write_atomic(path, render_depfile(target, deps), inputs)
