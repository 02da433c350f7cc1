"""Where an mma.sync reads its operands: the staging decisions of lowering/ops_mma.lower_mma_sync,
made here for the lowering and plan-shared-memory (shared_operands.py) alike.

A register tile is stored in a padded shared buffer ("mma-stage"), unless it is A sitting in the A
fragment layout already (`a_in_registers`: attention's probabilities); both whole where they fit
beside the buffers alive at the op, else K in slices ("mma-slice", each slice's buffer reused by
the next: `operand_staging`, `k_slices`). A load left to this mma (deferred_loads.py) is copied a K
slice at a time. sm_120's fp4 mma.sync packs its operands two to a byte where they are staged whole
and the packed copies fit beside them (`packs`: a register tile staged first, `stages_first`, then
packed, `packed_matrix`). A block-scaled mma.sync stores its scale tiles held in registers before
its operands (`restages_scales`).
"""

from __future__ import annotations

from ..ir.record import replace
from ..ir.types import TileType, storage_bytes
from ..layout.encodings import MmaLayout, rows_replicated
from ..layout.shared_matrix import SharedMatrix, matrix_shape
from ..tileaa.mma_forms import MmaShape
from .deferred_loads import is_deferred, ring_stages
from .operands import RegisterTile, SharedTile, Staging

PACK_ALIGN = 1024   # an fp4 operand's packed buffer is swizzled


def a_in_registers(lhs: object, acc_layout: MmaLayout, shape: MmaShape) -> bool:
    """A 16-bit A operand that is itself an mma result (attention's probabilities) already sits in
    the A fragment layout: accumulator blocks (m, 2kk) and (m, 2kk + 1) are A's K step kk; each warp
    holds the rows of its own row blocks (the same warp grid, or copies of a one-warp grid in every
    warp: `rows_replicated`)."""
    if not isinstance(lhs, RegisterTile) or not isinstance(lhs.layout, MmaLayout) or shape.per_reg != 2:
        return False
    mine, acc = lhs.layout, acc_layout
    same_rows = mine.warps == acc.warps or rows_replicated(mine, acc)
    return same_rows and mine.warps[2] == 1 and mine.shape[:2] == acc.shape[:2] \
        and mine.shape[2] % shape.k == 0 and storage_bytes(lhs.type.element) == 2


def operand_staging(k: Staging, shape: MmaShape, lhs: object, rhs: object,
                    layout: MmaLayout) -> "tuple[bool, list, int]":
    """(A read from registers, the operands this mma.sync stores in shared memory with their K axis,
    the K slices) of an mma whose accumulator is in `layout`: register tiles are staged (A not where
    it sits in the A fragment layout), both whole where they fit beside the live buffers, else K in
    slices; loads left to this mma are copied here, a K slice at a time."""
    from_regs, staged = staged_operands(shape, lhs, rhs, layout)
    return from_regs, staged, k_chunks(k, staged, lhs.type.shape[-1], shape.k)  # type: ignore[attr-defined]


def staged_operands(shape: MmaShape, lhs: object, rhs: object, layout: MmaLayout) -> "tuple[bool, list]":
    """(A read from registers, the operands the mma.sync stores in shared memory with their K axis):
    `operand_staging`'s, without the K slices."""
    from_regs = a_in_registers(lhs, layout, shape)
    return from_regs, [(t, axis) for t, axis in ((lhs, -1), (rhs, -2))
                       if isinstance(t, RegisterTile) and not (t is lhs and from_regs) or is_deferred(t)]


def staged_tile(tile: TileType, axis: int, chunks: int) -> "tuple[str, TileType, str]":
    """(role, tile shape, subject) of the buffer an operand staged in `chunks` K slices (K along `axis`) is
    stored in: the whole tile ("mma-stage"), or one slice ("mma-slice"); the subject names the operand, A
    (K along its last axis) or B (shared_plan.Request.subject)."""
    operand = "a" if axis == -1 else "b"
    if chunks == 1:
        return "mma-stage", tile, operand
    return "mma-slice", slice_type(tile, axis, tile.shape[axis] // chunks), operand


def k_chunks(k: Staging, staged: list, kdim: int, kstep: int) -> int:
    """K slices of an mma whose `staged` operands (tile, K axis) fit the target's shared memory."""
    return k_slices(k, staged, kdim, kstep, k.caps.smem_per_block - k.static_smem_bytes)


def k_slices(k: Staging, staged: list, kdim: int, kstep: int, limit: int) -> int:
    """The fewest K slices (a power of two dividing K, each a multiple of the instruction's k) whose
    staged operands fit below `limit` beside the buffers alive at the op (a deferred load's slices
    two at a time: `ring_stages`)."""
    start, end = k.op_lifetime()
    chunks = 1
    while staged:
        # unpadded: where only the padding overflows, the kernel is lowered again without it (lowering/smem.py)
        nbytes = sum(replace(matrix_shape(slice_type(t.type, axis, kdim // chunks), k.pad_buffers), padded=False).nbytes
                     * (ring_stages(chunks) if is_deferred(t) else 1) for t, axis in staged)
        if k.buffers.first_fit(nbytes, 128, start, end) + nbytes <= limit or kdim % (2 * chunks) \
                or (kdim // (2 * chunks)) % kstep:
            break
        chunks *= 2
    return chunks


def slice_type(tile: TileType, axis: int, width: int) -> TileType:
    """`tile` with `width` elements along `axis`."""
    shape = list(tile.shape)
    shape[axis] = width
    return TileType(tuple(shape), tile.element)


def packs(k: Staging, shape: MmaShape, lhs: object, rhs: object, staged: list, chunks: int) -> bool:
    """Whether the mma.sync packs its fp4 operands two to a byte (A's buffers, then B's) rather than
    read them one element a byte: an fp4 mma.sync (`packs_fp4`) whose operands are staged whole
    (`staged`, `chunks`: operand_staging's; no load left to it) and whose packed copies fit beside
    them."""
    return chunks == 1 and not any(is_deferred(t) for t in (lhs, rhs)) and packs_fp4(shape, lhs, rhs) \
        and _packing_fits(k, staged, lhs.type.shape[-1], shape, lhs, rhs)  # type: ignore[attr-defined]


def packs_fp4(shape: MmaShape, lhs: object, rhs: object) -> bool:
    """The fp4 mma.sync (m16n8k64, eight e2m1 a register) on 2-D tiles: its operands are packed two to
    a byte, K-major, and their fragments read by ldmatrix as 8-bit ones."""
    return shape.per_reg == 8 and all(len(t.type.shape) == 2 and getattr(t.type.element, "bitwidth", 0) == 4  # type: ignore
                                      for t in (lhs, rhs))


def _packing_fits(k: Staging, staged: list, kdim: int, shape: MmaShape, lhs: object, rhs: object) -> bool:
    """The packed copies of A and B (half a byte an element, 1024-byte aligned) fit beside the operands
    staged one element a byte: else the fragments are gathered from those alone."""
    packed = sum(-(-t.type.num_elements // 2 // PACK_ALIGN) * PACK_ALIGN for t in (lhs, rhs))  # type: ignore[attr-defined]
    return k_slices(k, staged, kdim, shape.k, k.caps.smem_per_block - k.static_smem_bytes - packed) == 1


def stages_first(value: object) -> bool:
    """Whether an operand is stored in shared memory (padded rows, "mma-stage") before it is packed:
    a register tile."""
    return isinstance(value, RegisterTile)


def packed_matrix(rows: int, kdim: int) -> SharedMatrix:
    """The (unplaced) packed K-major buffer ("fp4-pack") of a 4-bit operand of `rows` rows and `kdim` K."""
    return SharedMatrix(0, 1, rows, kdim // 2, 1, padded=False, swizzled=True)


def restages_scales(tile: object) -> bool:
    """Whether a block-scaled mma stores a scale tile in shared memory itself (A's before B's, before
    the mma's operands): one not staged already."""
    return not isinstance(tile, SharedTile)
