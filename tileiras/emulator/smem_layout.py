"""Shared-memory layouts of the asynchronous units: TMA swizzles and the tensor cores' matrix descriptors.

Swizzling permutes 16-byte chunks inside each 128-byte line of shared memory, keyed by the
absolute address: for a span of 32, 64 or 128 bytes, address bits [4, 4+b) are XORed with
bits [7, 7+b), b = 1, 2, 3 (so the pattern repeats every 256, 512 or 1024 bytes). TMA writes
boxes through it and wgmma/tcgen05 read their operands through the same permutation.

A matrix descriptor (wgmma's 64-bit GMMA descriptor, tcgen05's shared-memory descriptor) names
the start address, the leading and stride byte offsets (LBO, SBO) and the swizzle; the operand
is a grid of "core matrices" of 8 rows of 16 bytes. With T = 16 bytes / element size and
W = the swizzle span in 16-byte units (1 without swizzle), an element (mn, k) of an operand
(M or N rows, K columns) lies at, in bytes:

  K-major (K contiguous), mn = r + 8*m, k = t + T*j:
     no swizzle:  r*16 + m*SBO + t*e + j*LBO
     swizzled:    r*16W + m*SBO + t*e + j*16
  MN-major (M/N contiguous), mn = t + T*(w + W*m), k = r + 8*j:
     no swizzle:  t*e + m*SBO + r*16 + j*LBO          (W = 1, w = 0)
     swizzled:    t*e + w*16 + m*LBO + r*16W + j*SBO

then swizzled as above. This is the PTX ISA's canonical layout family (the one CUTLASS's
GMMA layouts describe). The swizzle's row phase (address bits [7, 7+b)) is counted from the
start address's 128-byte row, plus the descriptor's base offset (bits 49-51): the units assume
the start is aligned to the pattern's repeat unless the base offset says where in the pattern it
lies, so a base offset of 0 with an aligned start, or (start >> 7) & 7 with any start, read what
TMA wrote (it swizzles absolute addresses), and any other value reads rows swizzled wrongly.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

def swizzle(addrs: Any, span: int, atom: int = 16) -> Any:
    """Shared addresses (integer array) permuted by the `span`-byte swizzle (0: unchanged) of `atom`-byte
    chunks: address bits [a, a+b) are XORed with bits [7, 7+b), a = log2(atom), b = log2(span / atom).
    (128-byte spans with 32-byte atoms are Blackwell's "128B_BASE32B" mode.)"""
    import numpy as np

    if not span:
        return addrs
    shift = atom.bit_length() - 1
    bits = (span // atom).bit_length() - 1
    a = np.asarray(addrs).astype(np.int64)
    return a ^ (((a >> 7) & ((1 << bits) - 1)) << shift)


def decode_gmma_desc(desc: int) -> tuple[int, int, int, int, int]:
    """wgmma descriptor -> (start address, LBO, SBO, swizzle span in bytes, swizzle atom in bytes)."""
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    span = {0: 0, 1: 128, 2: 64, 3: 32}[(desc >> 62) & 3]
    return start, lbo, sbo, span, 16


# tcgen05 swizzle mode -> (span, atom)
TCGEN05_SWIZZLES = {0: (0, 16), 1: (128, 32), 2: (128, 16), 4: (64, 16), 6: (32, 16)}


def decode_umma_desc(desc: int) -> tuple[int, int, int, int, int]:
    """tcgen05 shared-memory descriptor -> (start address, LBO, SBO, swizzle span, swizzle atom in bytes).

    Raises ValueError for what the emulator does not model (absolute LBO) and for a wrong version
    field (bits 46-48 must be 0b001)."""
    start = (desc & 0x3FFF) << 4
    lbo = ((desc >> 16) & 0x3FFF) << 4
    sbo = ((desc >> 32) & 0x3FFF) << 4
    if (desc >> 46) & 7 != 1:
        raise ValueError(f"tcgen05 shared-memory descriptor 0x{desc:x}: bits 46-48 must be 0b001")
    if (desc >> 52) & 1:
        raise ValueError(f"tcgen05 shared-memory descriptor 0x{desc:x}: absolute LBO mode is not supported")
    mode = (desc >> 61) & 7
    if mode not in TCGEN05_SWIZZLES:
        raise ValueError(f"tcgen05 shared-memory descriptor 0x{desc:x}: swizzle mode {mode} is not supported")
    return (start, lbo, sbo) + TCGEN05_SWIZZLES[mode]


@lru_cache(maxsize=256)
def _offsets(rows: int, cols: int, esize: int, k_major: bool, lbo: int, sbo: int, span: int) -> Any:
    """Byte offsets (rows, cols) of an operand's elements from its start, before swizzling."""
    import numpy as np

    T = 16 // esize
    W = max(span // 16, 1)
    mn = np.arange(rows)[:, None]
    k = np.arange(cols)[None, :]
    if k_major:
        r, m = mn % 8, mn // 8
        t, j = k % T, k // T
        if span:
            off = r * 16 * W + m * sbo + t * esize + j * 16
        else:
            off = r * 16 + m * sbo + t * esize + j * lbo
    else:
        t, rest = mn % T, mn // T
        r, j = k % 8, k // 8
        if span:
            off = t * esize + (rest % W) * 16 + (rest // W) * lbo + r * 16 * W + j * sbo
        else:
            off = t * esize + rest * sbo + r * 16 + j * lbo
    off = off.astype(np.int64)
    off.setflags(write=False)
    return off


def base_offset(desc: int) -> int:
    """The matrix base offset field (bits 49-51) of a wgmma or tcgen05 shared-memory descriptor."""
    return (desc >> 49) & 7


def operand_addresses(start: int, rows: int, cols: int, esize: int, k_major: bool, lbo: int, sbo: int,
                      span: int, atom: int = 16, base: int = -1) -> Any:
    """Shared addresses (rows, cols) of a descriptor-described operand (rows = M or N, cols = K); `base` is
    the descriptor's base offset (-1: the phase of the absolute addresses)."""
    addrs = start + _offsets(rows, cols, esize, k_major, lbo, sbo, span)
    if not span or base < 0:
        return swizzle(addrs, span, atom)
    shift = atom.bit_length() - 1
    bits = (span // atom).bit_length() - 1
    phase = ((addrs >> 7) - (start >> 7) + base) & ((1 << bits) - 1)
    return addrs ^ (phase << shift)
