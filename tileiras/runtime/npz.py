"""Argument files of `tileir run`: an .npz whose keys are the argument positions.

Key "N" is argument N (an array, or a 0-d array for a scalar); keys "N.0",
"N.1", ... are the arrays of argument N when it is a list of arrays (a
cuTile list parameter). Positions run 0..count-1 without gaps, and each is
either an array or a list, never both.
"""

from __future__ import annotations

import io
import os
import re
from typing import Any

import numpy as np

from .marshal import usage_error

_KEY = re.compile(r"(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?")


def load_args(path: str) -> list[Any]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except FileNotFoundError:
        raise usage_error(f"cannot read argument file '{path}': no such file") from None
    except (OSError, ValueError) as exc:
        raise usage_error(f"'{path}' is not a readable .npz file ({exc})") from None
    plain: dict[int, np.ndarray] = {}
    lists: dict[int, dict[int, np.ndarray]] = {}
    for key, array in arrays.items():
        m = _KEY.fullmatch(key)
        if m is None:
            raise usage_error(f"the keys of '{path}' must be argument positions N, or N.M for array M "
                              f"of a list argument; found '{key}'")
        if m.group(2) is None:
            plain[int(m.group(1))] = array
        else:
            lists.setdefault(int(m.group(1)), {})[int(m.group(2))] = array
    both = sorted(set(plain) & set(lists))
    if both:
        raise usage_error(f"argument {both[0]} of '{path}' is given both as an array and as a list")
    count = len(plain) + len(lists)
    missing = [i for i in range(count) if i not in plain and i not in lists]
    if missing:
        raise usage_error(f"the keys of '{path}' must cover positions 0..{count - 1}; "
                          f"argument {missing[0]} is missing")
    for i, items in lists.items():
        if sorted(items) != list(range(len(items))):
            raise usage_error(f"list argument {i} of '{path}' must have keys {i}.0..{i}.{len(items) - 1}")
    return [plain[i] if i in plain else [lists[i][j] for j in range(len(lists[i]))] for i in range(count)]


def save_args(path: str | os.PathLike[str], arrays: list[Any]) -> None:
    from ..output import write_atomic

    named: dict[str, np.ndarray] = {}
    for i, a in enumerate(arrays):
        if isinstance(a, (list, tuple)):
            named.update({f"{i}.{j}": np.asarray(x) for j, x in enumerate(a)})
        else:
            named[str(i)] = np.asarray(a)
    buf = io.BytesIO()
    np.savez(buf, **named)
    write_atomic(path, buf.getvalue())
