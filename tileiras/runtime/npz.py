"""Argument files of `tileir run`: an .npz whose keys "0", "1", ... are the arguments in order."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from .marshal import usage_error


def load_args(path: str) -> list[np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except FileNotFoundError:
        raise usage_error(f"cannot read argument file '{path}': no such file") from None
    except (OSError, ValueError) as exc:
        raise usage_error(f"'{path}' is not a readable .npz file ({exc})") from None
    keys = sorted(arrays, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
    expected = [str(i) for i in range(len(arrays))]
    if keys != expected:
        raise usage_error(f"the keys of '{path}' must be 0..{len(arrays) - 1} (the argument positions), "
                          f"found {', '.join(sorted(arrays)) or 'none'}")
    return [arrays[k] for k in expected]


def save_args(path: str | os.PathLike[str], arrays: list[Any]) -> None:
    from ..driver.output import write_atomic

    buf = io.BytesIO()
    np.savez(buf, **{str(i): np.asarray(a) for i, a in enumerate(arrays)})
    write_atomic(path, buf.getvalue())
