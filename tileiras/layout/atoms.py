"""Hardware atoms as layouts: which matrix element each thread's value is, per instruction.

A fragment is a (thread, value) -> index layout over a rows x cols matrix, index = row + rows*col
(column-major, as in CuTe), with the matrix oriented as the PTX ISA draws it: A is M x K, B is
K x N, C/D is M x N. Threads are lanes (a warp) or the 128 threads of a warpgroup; a lane splits
as (lane % 4, lane / 4) = (threadID_in_group, groupID). Values are in register order, the
elements of one 32-bit register fastest.

Sources (facts): PTX ISA "Matrix Fragments for mma.m16n8k*", "Warp-level matrix load
instruction: ldmatrix", "Register Fragments and Shared Memory Matrix Layouts" for wgmma, and
the tensor-map / matrix-descriptor swizzle modes.
"""

from __future__ import annotations

from ..ir.record import record
from .algebra import Layout, Swizzle


@record
class Fragment:
    rows: int
    cols: int
    tv: Layout          # (thread, value) -> row + rows * col

    def coord(self, thread: int, value: int) -> tuple[int, int]:
        """(row, col) of a thread's value."""
        i = self.tv(thread, value)
        return i % self.rows, i // self.rows


def _frag(rows: int, cols: int, shape: tuple, stride: tuple) -> Fragment:
    return Fragment(rows, cols, Layout(shape, stride))


# The m16n8 accumulator (f32, f16x2 and s32 alike): lane (t, g) holds rows g, g+8, columns 2t, 2t+1.
MMA_C = _frag(16, 8, ((4, 8), (2, 2)), ((32, 1), (16, 8)))

# (mma.sync shape, operand element bits) -> (A fragment, B fragment)
MMA_SYNC: dict[tuple[str, int], tuple[Fragment, Fragment]] = {
    ("m16n8k8", 16): (_frag(16, 8, ((4, 8), (2, 2)), ((32, 1), (16, 8))),
                      _frag(8, 8, ((4, 8), 2), ((2, 8), 1))),
    ("m16n8k16", 16): (_frag(16, 16, ((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128))),
                       _frag(16, 8, ((4, 8), (2, 2)), ((2, 16), (1, 8)))),
    ("m16n8k8", 32): (_frag(16, 8, ((4, 8), (2, 2)), ((16, 1), (8, 64))),
                      _frag(8, 8, ((4, 8), 2), ((1, 8), 4))),
    ("m16n8k16", 8): (_frag(16, 16, ((4, 8), (4, 2)), ((64, 1), (16, 8))),
                      _frag(16, 8, ((4, 8), 4), ((4, 16), 1))),
    ("m16n8k32", 8): (_frag(16, 32, ((4, 8), (4, 2, 2)), ((64, 1), (16, 8, 256))),
                      _frag(32, 8, ((4, 8), (4, 2)), ((4, 32), (1, 16)))),
}


@record
class LdMatrix:
    """ldmatrix.sync.aligned.m8n8.x{count}[.trans].b16 over `count` stored 8x8 matrices, indexed
    r + 8c + 64q (stored row r, column c, matrix q)."""
    count: int
    trans: bool
    addresses: Layout   # lane -> index of the stored row whose address that lane supplies
    fragment: Layout    # (lane, value) -> index of the stored element the lane receives


# Lanes 8q..8q+7 address the rows of matrix q (lanes past 8*count are ignored). Without .trans
# lane (t, g) receives row g, columns 2t, 2t+1 of each matrix; with .trans, column g, rows 2t, 2t+1.
LDMATRIX: dict[tuple[int, bool], LdMatrix] = {
    (1, False): LdMatrix(1, False, Layout(8, 1), Layout(((4, 8), 2), ((16, 1), 8))),
    (1, True): LdMatrix(1, True, Layout(8, 1), Layout(((4, 8), 2), ((2, 8), 1))),
    (2, False): LdMatrix(2, False, Layout((8, 2), (1, 64)), Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))),
    (2, True): LdMatrix(2, True, Layout((8, 2), (1, 64)), Layout(((4, 8), (2, 2)), ((2, 8), (1, 64)))),
    (4, False): LdMatrix(4, False, Layout((8, 4), (1, 64)), Layout(((4, 8), (2, 4)), ((16, 1), (8, 64)))),
    (4, True): LdMatrix(4, True, Layout((8, 4), (1, 64)), Layout(((4, 8), (2, 4)), ((2, 8), (1, 64)))),
}


def wgmma_accumulator(n: int) -> Fragment:
    """The m64nNk16 accumulator of a warpgroup: warp w holds rows 16w..16w+15 as the m16n8
    accumulator does, repeated over the N/8 column blocks."""
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma N must be a multiple of 8 in [8, 256], not {n}")
    return _frag(64, n, ((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


@record
class SwizzleMode:
    """A shared-memory swizzle of TMA and wgmma, on byte offsets: 16-byte chunks of each
    `span`-byte row are XORed with the row index mod span/16 (rows of 128 bytes)."""
    swizzle: Swizzle    # on byte offsets
    span: int           # bytes of one swizzled row
    tensormap: int      # CUtensorMapSwizzle value
    wgmma: int          # swizzle field of the wgmma matrix descriptor

    def in_elements(self, elem_bytes: int) -> Swizzle:
        """The same permutation on element indices (elements of 1 to 16 bytes)."""
        shift = elem_bytes.bit_length() - 1
        if elem_bytes not in (1, 2, 4, 8, 16):
            raise ValueError(f"swizzled elements are 1 to 16 bytes, not {elem_bytes}")
        s = self.swizzle
        return Swizzle(s.bits, s.base - shift, s.shift)


SMEM_SWIZZLES: dict[str, SwizzleMode] = {
    "none": SwizzleMode(Swizzle(0, 4, 3), 16, 0, 0),
    "32B": SwizzleMode(Swizzle(1, 4, 3), 32, 1, 3),
    "64B": SwizzleMode(Swizzle(2, 4, 3), 64, 2, 2),
    "128B": SwizzleMode(Swizzle(3, 4, 3), 128, 3, 1),
}
