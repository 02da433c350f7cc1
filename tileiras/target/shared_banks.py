"""Shared memory's banks: what a warp's access costs in wavefronts.

32 banks of 4-byte words (every target from sm_80). A warp's access is served in phases: all 32
threads for accesses of up to 4 bytes, half-warps for 8 bytes, quarter-warps for 16. Within a phase
each bank delivers one word a wavefront (threads reading the same word share it), so a phase costs
as many wavefronts as its busiest bank has distinct words. The emulator counts what the kernels it
runs spend (emulator/banks.py); the middle level picks thread mappings and swizzles by it
(tileas/kmajor_lanes.py, tileas/scratch_swizzle.py).
"""

from __future__ import annotations

from typing import Iterable

BANKS = 32
WORD = 4


def wavefronts(offsets: Iterable[int], lanes: Iterable[int], nbytes: int) -> tuple[int, int, int]:
    """(warp executions, wavefronts, ideal wavefronts) of one access: byte `offsets` in shared memory
    of the threads `lanes` (thread indices in the CTA), `nbytes` each. Lanes of several warps
    count as one access per warp (tileas/scratch_swizzle.py numbers its accesses as warps). Plain
    Python: a warp's few dozen accesses cost less so than importing numpy does (a compile's fixed
    cost)."""
    per_phase = 32 if nbytes <= WORD else 16 if nbytes <= 8 else 8
    words_per_access = max(1, -(-nbytes // WORD))
    phases: dict[int, set[int]] = {}      # distinct words of each phase (phases never span two warps)
    warps = set()
    for offset, lane in zip(offsets, lanes):
        lane = int(lane)
        warps.add(lane // 32)
        first = int(offset) // WORD
        phases.setdefault(lane // per_phase, set()).update(range(first, first + words_per_access))
    total = 0
    for words in phases.values():      # each phase's busiest bank
        counts = [0] * BANKS
        for word in words:
            counts[word % BANKS] += 1
        total += max(counts)
    return len(warps), total, len(phases)
