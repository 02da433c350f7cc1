"""Where a tile lies in a shared-memory buffer: the geometry the lowering emits addresses for and
nv_tileas plans buffers by (row-major matrices, padded or in the tensor cores' swizzle).

Padding: a matrix whose rows are whole 16-byte chunks gets 16 bytes after each row (where the kernel
pads its buffers: `matrix_shape`'s `padded`), so the 8 rows an ldmatrix or a warp's 16-byte copies touch
at one column fall in 8 different bank groups. Swizzled: rows cut in `span`-byte atoms whose 16-byte
chunks are XORed with the row (wgmma's, tcgen05's and TMA's layout); patterns repeat every 1024 bytes.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.record import record
from ..ir.types import TileType, storage_bytes

BUFFER_ALIGN = 128
SWIZZLE_BYTES = 128      # the widest swizzle span (wgmma/TMA): patterns repeat every 8 spans, 1024-byte aligned
KMAJOR_ALIGN = 1024      # a K-major buffer's alignment: the swizzle pattern's period


@record
class SharedMatrix:
    """A (batch, rows, cols) tile stored row-major (cols contiguous) in a buffer."""
    offset: int          # of the buffer, bytes from the start of the buffers region
    batch: int
    rows: int
    cols: int
    elem_bytes: int
    padded: bool = True
    stage: str = ""      # i32 bytes added to every offset (the current stage of a pipelined buffer)
    swizzled: bool = False   # the tensor cores' swizzle: rows cut in `span`-byte atoms (see `atoms`)

    @property
    def span(self) -> int:
        """Bytes of one swizzle atom row: 128, or the whole row where it is 32 or 64 bytes (the
        32- and 64-byte swizzles of wgmma and tcgen05: a K-major operand of K = 32 or 64 bytes)."""
        return min(SWIZZLE_BYTES, self.cols * self.elem_bytes)

    @property
    def pitch(self) -> int:
        """Bytes from one row to the next (padded: see the module's docstring)."""
        row = self.cols * self.elem_bytes
        if self.swizzled:
            return self.span
        return row + 16 if self.padded and row % 16 == 0 else row

    @property
    def atom_bytes(self) -> int:
        """Bytes of one column atom (every row's `span` bytes of those columns), swizzled layouts."""
        return self.batch * self.rows * self.span

    @property
    def nbytes(self) -> int:
        if self.swizzled:
            return -(-self.cols * self.elem_bytes // self.span) * self.atom_bytes
        return -(-self.batch * self.rows * self.pitch // BUFFER_ALIGN) * BUFFER_ALIGN


def offset_of(matrix: SharedMatrix, r: int, c: int) -> int:
    """lowering/smem.element_offset of element (0, r, c) as a number, the stage left out (stages are whole
    swizzle periods): for choosing, at compile time, which thread moves which element."""
    if not matrix.swizzled:
        return matrix.offset + r * matrix.pitch + c * matrix.elem_bytes
    span = matrix.span
    per_atom = span // matrix.elem_bytes
    off = (c // per_atom) * matrix.atom_bytes + r * span + (c % per_atom) * matrix.elem_bytes
    return matrix.offset + (off ^ ((off >> 3) & ((span // 16 - 1) << 4)))


def row_flip(matrix: SharedMatrix) -> "Callable[[int], int] | None":
    """Where the offset of row r0 ^ t (t below 8, r0 sharing no bit with it) is that of row r0
    xor-ed with a delta of t alone: the delta. So it is in a swizzled matrix of whole 8-row atoms
    placed on a swizzle period (its stages are whole periods too): the row's bytes and its chunk key
    are both linear in the row's bits. None otherwise (a padded matrix: rows add up, with carries)."""
    span = matrix.span if matrix.swizzled else 0
    if not span or matrix.atom_bytes % (8 * span) or matrix.offset % (8 * span):
        return None
    per_key = span // 8
    rows_mask = ((span // 16 - 1) << 4) // per_key
    return lambda t: t * span ^ (t & rows_mask) * per_key


def matrix_dims(shape: tuple[int, ...]) -> Optional[tuple[int, int, int]]:
    """(batch, rows, cols) of a tile stored as a shared matrix: a 2-D or 3-D tile, or a higher one
    whose leading dimensions are all 1 (a 4-D view's (1, 1, rows, cols) block); None otherwise."""
    if len(shape) == 2:
        return 1, shape[0], shape[1]
    if len(shape) >= 3 and all(d == 1 for d in shape[:-3]):
        return shape[-3], shape[-2], shape[-1]
    return None


def steps_evenly(m: SharedMatrix, threads: int, vec: int) -> bool:
    """Whether `threads` copying `m` in chunks of `vec` elements, chunk i of a thread `threads` chunks
    after its previous one, each keep to one column, their rows a fixed step apart that keeps a
    swizzled row's xor pattern (a multiple of 8 rows): one address per thread, the others an
    immediate away (lowering/async_copy._issue_stepped)."""
    chunks_per_row = m.cols // vec
    total = m.batch * m.rows * chunks_per_row
    return m.batch == 1 and threads % chunks_per_row == 0 and total % threads == 0 \
        and (not m.swizzled or (threads // chunks_per_row) % 8 == 0)


def matrix_shape(tile: TileType, padded: bool, swizzled: bool = False, elem_bytes: int = 0,
                 dense: bool = False) -> SharedMatrix:
    """The (unplaced) shared matrix of `tile`: its geometry and size (`padded`: the kernel pads staged rows
    against bank conflicts, `Assumptions.padded`; `dense`: these rows never are)."""
    shape = tile.shape
    batch, rows, cols = matrix_dims(shape)  # type: ignore[misc]
    return SharedMatrix(0, batch, rows, cols, elem_bytes or storage_bytes(tile.element), padded and not dense,
                        swizzled=swizzled)


def k_and_x(shape: "tuple[int, ...]", role: str) -> tuple[int, int]:
    """(K, M) of an A tile (M, K), (K, N) of a B tile (K, N)."""
    return (shape[1], shape[0]) if role == "a" else (shape[0], shape[1])


def kmajor_shape(rows: int, cols: int, elem_bytes: int, padded: bool) -> SharedMatrix:
    """A swizzled (rows, cols) K-major buffer, not yet placed (offset 0): what lowering/kmajor_copy's
    `kmajor_matrix` asks for, and what plan-shared-memory decides of a loop's copies (tileas/kmajor_copies.loop_copies)."""
    return SharedMatrix(0, 1, rows, cols, elem_bytes, padded, swizzled=True)


def slot_bytes(m: SharedMatrix) -> int:
    """Bytes from one slot of a K-major buffer to the next: whole swizzle periods."""
    return -(-m.nbytes // KMAJOR_ALIGN) * KMAJOR_ALIGN


def kmajor_bytes(m: SharedMatrix, slots: int) -> int:
    """Bytes of a K-major buffer holding `slots` copies of `m`, `slot_bytes` apart."""
    return m.nbytes + (slots - 1) * slot_bytes(m)
