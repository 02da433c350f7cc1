"""Shared pieces of the instruction decoders: lanes, faults, value helpers."""

from __future__ import annotations

from typing import Any

from ..errors import DeviceFault

__all__ = ["DeviceFault", "lanes_of", "at_lanes", "full"]


def lanes_of(st: Any, m: Any) -> Any:
    """Indices of the active threads (every thread when `m` is None)."""
    import numpy as np

    return st.all_lanes if m is None else np.flatnonzero(m)


def at_lanes(v: Any, lanes: Any, m: Any) -> Any:
    """`v` (an array over all threads, or a scalar) restricted to `lanes`."""
    import numpy as np

    if getattr(v, "ndim", 0) == 0:
        return np.full(lanes.size, v)
    return v if m is None else v[lanes]


def full(st: Any, v: Any) -> Any:
    """`v` as an array over all threads."""
    import numpy as np

    if getattr(v, "ndim", 0) == 0:
        return np.full(st.n, v)
    return v
