"""Host-side convenience: launch a kernel on numpy arrays.

    outs, stats = emulate(ptx, "k", grid, block, [x, y, np.int32(5), 2.0])

Every numpy array with ndim >= 1 is copied into a fresh allocation and passed
as its device address; after the run the arrays are read back (as new
arrays, in argument order). Scalars are passed as they are.
"""

from __future__ import annotations

from typing import Any, Sequence

from .executor import EmulationStats, run_ptx
from .memory import Memory


def emulate(ptx: str, kernel: str, grid: Any, block: Any, args: Sequence[Any], dynamic_smem: int = 0,
            memory: Memory | None = None, stdout: Any = None,
            check_races: bool | None = None) -> tuple[list, EmulationStats]:
    import numpy as np

    mem = memory or Memory()
    params: list = []
    arrays: list[tuple[int, Any]] = []
    for a in args:
        if isinstance(a, np.ndarray) and a.ndim >= 1:
            a = np.ascontiguousarray(a)
            addr = mem.alloc(max(a.nbytes, 1))
            mem.write(addr, a.tobytes())
            arrays.append((addr, a))
            params.append(addr)
        elif isinstance(a, (np.floating, float)):
            params.append(float(a))
        elif isinstance(a, (np.integer, int, bool, np.bool_)):
            params.append(int(a))
        else:
            params.append(a)
    stats = run_ptx(ptx, kernel, grid, block, params, mem, dynamic_smem, stdout=stdout, check_races=check_races)
    outs = [np.frombuffer(mem.read(addr, a.nbytes), dtype=a.dtype).reshape(a.shape).copy() for addr, a in arrays]
    return outs, stats
