"""Shared-memory bank conflicts of the loads and stores the emulator runs (a measurement, off by default).

Each access costs what target/shared_banks.wavefronts says. `collecting()` counts, per PTX line, the warp
executions, their wavefronts and the wavefronts a conflict-free access would take (one a phase):
what ptxas and cuobjdump cannot show and a GPU profiler would (`benchmarks/bank_conflicts.py`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

from ..target.shared_banks import wavefronts

# line -> [warp executions, wavefronts, ideal wavefronts]; None: not collecting
_STATS: Optional[dict[int, list[int]]] = None


@contextlib.contextmanager
def collecting() -> Iterator[dict[int, list[int]]]:
    """Count bank conflicts of every shared access run inside the block."""
    global _STATS
    before, _STATS = _STATS, {}
    try:
        yield _STATS
    finally:
        _STATS = before


def active() -> bool:
    return _STATS is not None


def record(line: int, offsets: Any, lanes: Any, nbytes: int) -> None:
    """Add one shared access by the instruction at PTX line `line`."""
    if _STATS is None:
        return
    warps, total, ideal = wavefronts(offsets, lanes, nbytes)
    row = _STATS.setdefault(line, [0, 0, 0])
    row[0] += warps
    row[1] += total
    row[2] += ideal
