"""PTX SIMT emulator: runs the PTX our compiler emits on numpy, all threads of a CTA at once.

Public interface (used by `tileir run --backend emulator`):

    mem = Memory(); addr = mem.alloc(nbytes); mem.write(addr, data); mem.read(addr, n)
    stats = run_ptx(ptx, kernel, grid, block, params, mem, dynamic_smem=0)
    run_ptx(..., check_races=True)   # report data races (races.py); TILEIRAS_EMULATOR_CHECK_RACES=1 too

See `executor.py` for the execution model (divergence, barriers, ordering).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Memory", "run_ptx", "EmulationStats", "EmulatorError", "load_program"]


def __getattr__(name: str) -> Any:
    if name == "Memory":
        from .memory import Memory

        return Memory
    if name in ("run_ptx", "EmulationStats", "load_program"):
        from . import executor

        return getattr(executor, name)
    if name == "EmulatorError":
        from .errors import EmulatorError

        return EmulatorError
    raise AttributeError(name)
