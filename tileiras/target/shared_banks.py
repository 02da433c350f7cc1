"""Shared memory's banks: what a warp's access costs in wavefronts.

32 banks of 4-byte words (every target from sm_80). A warp's access is served in phases: all 32
threads for accesses of up to 4 bytes, half-warps for 8 bytes, quarter-warps for 16. Within a phase
each bank delivers one word a wavefront (threads reading the same word share it), so a phase costs
as many wavefronts as its busiest bank has distinct words. The emulator counts what the kernels it
runs spend (emulator/banks.py); the lowering picks thread mappings by it (lowering/kmajor_copy.py).
"""

from __future__ import annotations

from typing import Any

BANKS = 32
WORD = 4


def wavefronts(offsets: Any, lanes: Any, nbytes: int) -> tuple[int, int, int]:
    """(warp executions, wavefronts, ideal wavefronts) of one access: byte `offsets` in shared memory
    of the threads `lanes` (thread indices in the CTA), `nbytes` each. Lanes of several warps
    count as one access per warp (tileas/scratch_swizzle.py numbers its accesses as warps)."""
    import numpy as np

    per_phase = 32 if nbytes <= WORD else 16 if nbytes <= 8 else 8
    words_per_access = max(1, -(-nbytes // WORD))
    offsets = np.asarray(offsets, dtype=np.int64)
    lanes = np.asarray(lanes, dtype=np.int64)
    first = offsets // WORD
    words = (first[:, None] + np.arange(words_per_access)[None, :]).ravel()
    phase = np.repeat(lanes // per_phase, words_per_access)    # phases never span two warps
    warps = int(np.unique(lanes // 32).size)
    # distinct words of each phase, then each phase's busiest bank (lanes of several warps: summed)
    distinct = np.unique((phase << 32) | words)
    phases, which = np.unique(distinct >> 32, return_inverse=True)
    counts = np.zeros((phases.size, BANKS), dtype=np.int64)
    np.add.at(counts, (which, (distinct & 0xFFFFFFFF) % BANKS), 1)
    return warps, int(counts.max(axis=1).sum()), int(phases.size)
