"""PTX SIMT emulator: runs the PTX our compiler emits on numpy, all threads of a CTA at once.

Public interface (used by `tileir run --backend emulator`):

    mem = Memory(); addr = mem.alloc(nbytes); mem.write(addr, data); mem.read(addr, n)
    stats = run_ptx(ptx, kernel, grid, block, params, mem, dynamic_smem=0)
    run_ptx(..., check_races=False)  # no checking mode (faster); TILEIRAS_EMULATOR_CHECK_RACES=0 too

Checking mode is on by default: data races within a CTA (races.py, happens_before.py) and between
the CTAs of a grid, two of which run at once (grid_races.py); undefined state, registers, shared
and tensor memory starting undefined and poisoned (definedness.py); the fences and orderings of the
asynchronous units (wgmma_fence.py, the tcgen05 fences in happens_before.py, fence.mbarrier_init,
exit_checks.py: tensor memory deallocated and bulk stores done reading before a CTA exits,
setmaxnreg budgets). Always, the ISA's forms: each instruction's minimum .target and the modifier
orders of mma and wgmma (isa_forms.py), and descriptors' base offsets (smem_layout.py).

See `executor.py` for the execution model (divergence, barriers, ordering).

Asynchronous pipelines (sm_90/sm_100): cp.async and bulk copies, mbarriers (`ops/async_ops.py`);
TMA loads/stores through tensor maps in our own encoding (`ops/tma.py`, built on the host with
`tileiras.codegen.tensormap`); wgmma with shared-memory descriptors (`ops/wgmma.py`); tcgen05
tensor memory, MMA (dense and block-scaled), ld/st/cp and commit (`ops/tcgen05.py`); the swizzles
and canonical operand layouts they share (`smem_layout.py`). Asynchronous work completes when it
is issued, except cp.async, which lands when its thread waits for it or exits, or when an mbarrier
phase needs the arrive-on of a cp.async.mbarrier.arrive that tracks it (as late as it can); what a
GPU would leave in flight is checked instead: registers of a wgmma before its
wait_group (`async_regs.py`, always), and with the race checker TMA data read before its mbarrier
phase, generic stores read by the async proxy without fence.proxy.async, and stages overwritten
before the reads of them are ordered (`races.py`, `happens_before.py`).

Thread-block clusters run their CTAs together (`executor.py`, `ops/cluster.py`): distributed shared
memory, barrier.cluster, remote mbarrier arrivals, and the race checker across the cluster's CTAs.
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
