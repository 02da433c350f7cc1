"""Test helpers for the tensor-core tests: shared-memory operand images in the PTX ISA's canonical
layouts, built element by element from the ISA's description (not from the emulator's code), and
the descriptors that name them.

An operand is an (MN, K) matrix of raw element bits. Core matrices are 8 rows of 16 bytes.
K-major: without swizzle each 8 (MN) x 16-byte (K) core matrix is contiguous, LBO steps along K,
SBO along MN; with an S-byte swizzle each MN row is S bytes of K, 8 rows make an atom, SBO steps
between atoms along MN. MN-major: without swizzle each core matrix is 8 K-rows of 16 bytes of MN,
SBO steps along MN, LBO along K; with an S-byte swizzle each K row is S bytes of MN, 8 rows make
an atom, LBO steps between atoms along MN and SBO between atoms along K. Swizzling XORs address
bits [4, 4+b) with bits [7, 7+b), b = log2(S / 16), on the absolute shared address.
"""

from __future__ import annotations

import numpy as np

SPAN_BITS = {0: 0, 32: 1, 64: 2, 128: 3}
WGMMA_MODE = {0: 0, 128: 1, 64: 2, 32: 3}
UMMA_MODE = {0: 0, 128: 2, 64: 4, 32: 6}


def image(mat: np.ndarray, k_major: bool, span: int, base: int) -> tuple[np.ndarray, int, int]:
    """(bytes of the operand placed at shared address `base`, LBO, SBO); `base` must be 1024-aligned."""
    rows, cols = mat.shape
    e = mat.itemsize
    T = 16 // e
    if k_major and not span:
        lbo, sbo = 128, 128 * (cols // T)
        where = lambda mn, k: (mn // 8) * sbo + (k // T) * lbo + (mn % 8) * 16 + (k % T) * e  # noqa: E731
    elif k_major:
        lbo, sbo = 16, 8 * span
        where = lambda mn, k: (mn // 8) * sbo + (mn % 8) * span + k * e  # noqa: E731
    elif not span:
        sbo, lbo = 128, 128 * (rows // T)
        where = lambda mn, k: (mn // T) * sbo + (k // 8) * lbo + (k % 8) * 16 + (mn % T) * e  # noqa: E731
    else:
        per = span // e
        sbo, lbo = 8 * span, 8 * span * max(cols // 8, 1)
        where = lambda mn, k: (mn // per) * lbo + (k // 8) * sbo + (k % 8) * span + (mn % per) * e  # noqa: E731
    size = max(where(r, c) for r in range(rows) for c in range(cols)) + e
    out = np.zeros(size + 1024, np.uint8)
    raw = mat.view(np.uint8).reshape(rows, cols, e)
    bits = SPAN_BITS[span]
    for r in range(rows):
        for c in range(cols):
            a = base + where(r, c)
            a ^= ((a >> 7) & ((1 << bits) - 1)) << 4
            out[a - base:a - base + e] = raw[r, c]
    return out, lbo, sbo


def gmma_desc(start: int, lbo: int, sbo: int, span: int) -> int:
    return (start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (WGMMA_MODE[span] << 62)


def umma_desc(start: int, lbo: int, sbo: int, span: int) -> int:
    return (start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (1 << 46) | (UMMA_MODE[span] << 61)
