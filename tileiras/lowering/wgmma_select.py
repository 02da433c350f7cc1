"""Which mmas run on sm_90's warpgroup tensor cores (`wgmma.mma_async`), and in which form.

The instruction table (PTX ISA, "Warpgroup MMA"): per (A, B, accumulator) element types, the
PTX type suffix and the instruction's K (32 bytes of K per operand row). Only 16-bit operands
may be read M/N-major (the descriptor's transpose bits); tf32, fp8 and int8 operands must be
K-major, so an N-major B of those types is copied K-major in shared memory first (ops_wgmma).

An operand is read by descriptor from a shared matrix in a 128B, 64B or 32B swizzle whose span
is the stored row (smem.SharedMatrix.span): its contiguous extent must be 32 or 64 bytes or a
multiple of 128 bytes.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record
from ..target import caps
from ..ir.types import TileType

_F8 = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}


@record
class WgmmaShape:
    types: str            # PTX suffix: accumulator, A, B ("f32.f16.f16")
    k: int                # the instruction's K
    elem_bytes: int       # bytes of one A/B element in shared memory
    acc_type: str = "float"   # LLVM type of one accumulator register

    @property
    def transposable(self) -> bool:
        """16-bit operands may be stored M/N-major (the instruction's transpose bits)."""
        return self.elem_bytes == 2


def _table() -> dict[tuple[str, str, str], WgmmaShape]:
    out = {
        ("f16", "f16", "f32"): WgmmaShape("f32.f16.f16", 16, 2),
        ("bf16", "bf16", "f32"): WgmmaShape("f32.bf16.bf16", 16, 2),
        ("tf32", "tf32", "f32"): WgmmaShape("f32.tf32.tf32", 8, 4),
        ("i8", "i8", "i32"): WgmmaShape("s32.s8.s8", 32, 1, "i32"),
    }
    for a, pa in _F8.items():
        for b, pb in _F8.items():
            out[(a, b, "f32")] = WgmmaShape(f"f32.{pa}.{pb}", 32, 1)
    return out


SHAPES = _table()


def swizzle_fits(row_bytes: int) -> bool:
    """A stored row that one of wgmma's swizzles (32B, 64B, 128B) lays out whole."""
    return row_bytes in (32, 64) or (row_bytes > 0 and row_bytes % 128 == 0)


def shape_of(op: Operation) -> Optional[WgmmaShape]:
    """The wgmma type row of an mmaf/mmai by its element types (None: no warpgroup form)."""
    if op.name not in ("cuda_tile.mmaf", "cuda_tile.mmai"):
        return None
    key = tuple(str(getattr(op.operand(n).type, "element", "")) for n in ("lhs", "rhs", "acc"))
    shape = SHAPES.get(key)  # type: ignore[arg-type]
    if shape is not None and key[0] == "i8" and not all(
            str(op.attributes.get(f"signedness_{s}", "signed")) == "signed" for s in ("lhs", "rhs")):
        return None   # unsigned int8 keeps its exact path (s8 x u8 forms are not wired here)
    return shape


def select(op: Operation, sm: int, threads: int) -> Optional[WgmmaShape]:
    """The wgmma for `op` on this target and block, or None (mma.sync or the scalar path).

    2-D tiles; M a multiple of 16 rows per warp (each warpgroup's instructions cover 64 rows);
    N a multiple of 16 up to 256 (an N-major B: whole 128-byte atoms); K a multiple of the
    instruction's K with a K-major row that a swizzle holds whole."""
    if not caps(sm).has("wgmma"):
        return None
    shape = shape_of(op)
    if shape is None:
        return None
    lhs, acc = op.operand("lhs").type, op.operand("acc").type
    if not isinstance(acc, TileType) or not isinstance(lhs, TileType) or len(acc.shape) != 2:
        return None
    m, n = acc.shape
    kdim = lhs.shape[-1]
    warps = threads // 32
    if warps % 4 or m % (16 * warps) or n % 16 or n > 256 or kdim % shape.k:
        return None
    if not swizzle_fits(kdim * shape.elem_bytes):
        return None
    if shape.transposable and n * shape.elem_bytes % 128 and not _loaded_b(op):
        return None   # a B computed in registers is staged in whole 128-byte atoms
    return shape


def narrow(op: Operation) -> bool:
    """An mma whose N is not a whole number of 128-byte rows of a 16-bit B (N = 16, 32)."""
    shape, acc = shape_of(op), op.operand("acc").type
    return shape is not None and shape.transposable and acc.shape[-1] * shape.elem_bytes % 128 != 0  # type: ignore[union-attr]


def _loaded_b(op: Operation) -> bool:
    """B is a load (through unit reshapes, transposes, roundings), which the descriptor reads as
    stored whatever N: K-major (attention backward's S = Q K^T over 32 keys) or N-major in the 32B
    or 64B swizzle (MLA decode's 512 x 16 B). A B computed in registers would be staged beside them
    (MLA decode's M = 512 mma overflowed shared memory so)."""
    from .assign_layouts import _passes_shared
    from ..tileaa.mma_operands import source

    return source(op.operand("rhs"), _passes_shared)[0] is not None


def reads_directly(shape: WgmmaShape, operand: str, transposed: bool, rows: int, cols: int) -> bool:
    """Whether a shared operand stored (rows, cols) row-major (`transposed`: the tile is the
    transpose of the stored matrix) is read by descriptor as it is: K-major, or M/N-major for
    16-bit types, with a stored row that a swizzle holds whole."""
    kmajor = transposed if operand == "b" else not transposed
    return (kmajor or shape.transposable) and swizzle_fits(cols * shape.elem_bytes) and rows % 8 == 0
