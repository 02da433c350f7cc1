"""The tensor-core instructions an mma can run as, per family, with the choice of each: mma.sync
(sm_80 on, `select_shape`), wgmma (sm_90, `select_wgmma`), tcgen05.mma's kinds (sm_100 / sm_103,
`kind_of`) and the block-scaled forms of `mmaf_scaled`. Properties of the op and its target that the
levels ask before deciding how it runs (the cluster split's CTA pair, the layout assignment, the warp
roles); the lowering emits the form chosen.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record
from ..ir.types import TileType
from ..layout.encodings import fragment_multiple
from ..target import caps
from .mma_operands import passes_shared, source


@record
class Kind:
    """One tcgen05.mma kind."""
    name: str          # .kind::NAME
    a: int             # A / B format codes of the instruction descriptor
    b: int
    d: int             # accumulator format code (1 f32, 2 s32)
    k: int             # K per instruction
    elem_bytes: int


# (A, B, accumulator) element types -> the tcgen05 kind that computes them
KINDS: dict[tuple[str, str, str], Kind] = {
    ("f16", "f16", "f32"): Kind("f16", 0, 0, 1, 16, 2),
    ("bf16", "bf16", "f32"): Kind("f16", 1, 1, 1, 16, 2),
    ("f8E4M3FN", "f8E4M3FN", "f32"): Kind("f8f6f4", 0, 0, 1, 32, 1),
    ("f8E5M2", "f8E5M2", "f32"): Kind("f8f6f4", 1, 1, 1, 32, 1),
    ("i8", "i8", "i32"): Kind("i8", 1, 1, 2, 32, 1),
    ("tf32", "tf32", "f32"): Kind("tf32", 2, 2, 1, 8, 4),
}

# block-scaled operand element types and their PTX names (fp8 e4m3 / e5m2, fp4 e2m1)
SCALED_ELEMENTS = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2", "f4E2M1FN": "e2m1"}
SCALE_BLOCK = 32          # K per instruction = elements per scale (mxf8f6f4, scale_vec::1X)
_F8_CODE = {"f8E4M3FN": 0, "f8E5M2": 1}    # A / B format codes of kind::mxf8f6f4


@record
class Scaled:
    """One block-scaled mma.sync form: its kind, scale factors per instruction (scale_vec::NX)
    and their PTX type, and the instruction's K."""
    kind: str
    vec: int
    stype: str
    k: int


# (operand element, scale element, elements per scale) -> the block-scaled mma.sync form
SCALED: dict[tuple[str, str, int], Scaled] = {
    ("f8", "f8E8M0FNU", 32): Scaled("mxf8f6f4", 1, "ue8m0", 32),
    ("f4E2M1FN", "f8E8M0FNU", 32): Scaled("mxf4", 2, "ue8m0", 64),
    ("f4E2M1FN", "f8E8M0FNU", 16): Scaled("mxf4nvf4", 4, "ue8m0", 64),
    ("f4E2M1FN", "f8E4M3FN", 16): Scaled("mxf4nvf4", 4, "ue4m3", 64),
}


def scaled_form(op: Operation) -> "Scaled | None":
    """The block-scaled form of `op`'s operand and scale types (None: no tensor-core form)."""
    lhs, rhs, scale = (op.operand(n).type for n in ("lhs", "rhs", "lhs_scale"))
    a, b = str(lhs.element), str(rhs.element)  # type: ignore[union-attr]
    if a != b and not (a in SCALED_ELEMENTS and b in SCALED_ELEMENTS and "f4E2M1FN" not in (a, b)):
        return None
    key = "f8" if a in SCALED_ELEMENTS and a != "f4E2M1FN" else a
    return SCALED.get((key, str(scale.element), lhs.shape[-1] // scale.shape[-1]))  # type: ignore[union-attr]


def kind_of(op: Operation) -> Optional[Kind]:
    """The tcgen05 kind that computes mma `op`, or None."""
    if op.name == "cuda_tile.mmaf_scaled":
        return _scaled_kind(op)
    lhs, rhs, acc = (op.operand(n) for n in ("lhs", "rhs", "acc"))
    key = tuple(str(getattr(v.type, "element", "")) for v in (lhs, rhs, acc))
    kind = KINDS.get(key)  # type: ignore[arg-type]
    if kind is not None and kind.name == "i8" and not (
            op.attributes.get("signedness_lhs", "signed") == "signed"
            and op.attributes.get("signedness_rhs", "signed") == "signed"):
        return None
    return kind


def _scaled_kind(op: Operation) -> Optional[Kind]:
    """A block-scaled mma's kind: fp8 (e4m3/e5m2, ue8m0 per 32: kind::mxf8f6f4; a K tile over 128
    takes a cell of scale factors per 128, as fp4's do) or fp4 (e2m1, ue8m0 per 32 or ue4m3 / ue8m0
    per 16: kind::mxf4nvf4, whose A and B the mma packs two to a byte, K-major)."""
    lhs, rhs, acc = (op.operand(n).type for n in ("lhs", "rhs", "acc"))
    f = scaled_form(op)
    if f is not None and f.k == 64:
        return Kind("mxf4nvf4", 1, 1, 1, 64, 1)
    if f is None or not fragment_multiple(acc.shape) or lhs.shape[-1] % SCALE_BLOCK:  # type: ignore[union-attr]
        return None
    return Kind("mxf8f6f4", _F8_CODE[str(lhs.element)], _F8_CODE[str(rhs.element)], 1, SCALE_BLOCK, 1)  # type: ignore[union-attr]


# -- mma.sync (sm_80 on): m16n8kK per warp, the fragments in registers --------------------------
@record
class MmaShape:
    intrinsic: str
    k: int                          # the instruction's K
    per_reg: int                    # operand elements packed in one 32-bit register
    reg_type: str                   # LLVM type of one A/B register
    acc_type: str = "float"
    ptx: str = ""                   # the instruction as inline PTX where LLVM has no intrinsic for it

    def describe(self) -> str:
        return f"[16, 8, {self.k}]"


# (A element, B element, accumulator element) -> the mma.sync that computes it
SHAPES: dict[tuple[str, str, str], MmaShape] = {
    ("f16", "f16", "f32"): MmaShape("llvm.nvvm.mma.m16n8k16.row.col.f32.f32", 16, 2, "<2 x half>"),
    ("bf16", "bf16", "f32"): MmaShape("llvm.nvvm.mma.m16n8k16.row.col.bf16", 16, 2, "i32"),
    ("tf32", "tf32", "f32"): MmaShape("llvm.nvvm.mma.m16n8k8.row.col.tf32", 8, 1, "i32"),
    ("i8", "i8", "i32"): MmaShape("llvm.nvvm.mma.m16n8k32.row.col.s8", 32, 4, "i32", acc_type="i32"),
}


# 8-bit floats (sm_89 and newer, as the element types themselves): m16n8k32 with the int8 fragment
# layout, the operands copied to shared memory as they are; A and B types may differ
F8 = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}


def f8_form(a: str, b: str) -> MmaShape:
    return MmaShape("", 32, 4, "i32", ptx=f"mma.sync.aligned.m16n8k32.row.col.f32.{F8[a]}.{F8[b]}.f32")


def select_shape(op: Operation, lhs: TileType, rhs: TileType, acc: TileType,
                 sm: Optional[int] = None) -> Optional[MmaShape]:
    """The mma.sync for these operand types and shapes, or None (the exact scalar path); `sm`: the
    target, where the instruction depends on it (block-scaled fp4: sm_120's only)."""
    choice = choose(op, lhs, rhs, acc, sm)
    return choice if isinstance(choice, MmaShape) else None


def choose(op: Operation, lhs: TileType, rhs: TileType, acc: TileType, sm: Optional[int] = None) -> "MmaShape | str":
    """The mma.sync that computes this op, or why none does (the reason its remark gives)."""
    if op.name == "cuda_tile.mmaf_scaled":
        return choose_scaled(op, lhs, rhs, acc, sm)
    key = tuple(str(t.element) for t in (lhs, rhs, acc))
    f8 = key[0] in F8 and key[1] in F8 and key[2] == "f32"
    shape = f8_form(key[0], key[1]) if f8 else SHAPES.get(key)  # type: ignore[arg-type]
    if shape is None:
        return f"no mma.sync lowering for {key[0]} x {key[1]} -> {key[2]}"
    if key[0] == "i8" and not (op.attributes.get("signedness_lhs", "signed") == "signed"
                               and op.attributes.get("signedness_rhs", "signed") == "signed"):
        return "unsigned int8 operands keep the exact scalar path"
    if not fragment_multiple(acc.shape) or lhs.shape[-1] % shape.k:
        return (f"tile shape {list(acc.shape[-2:]) + [lhs.shape[-1]]} is not a multiple of the instruction "
                f"shape [16, 8, {shape.k}]")
    return shape


def choose_scaled(op: Operation, lhs: TileType, rhs: TileType, acc: TileType, sm: "int | None" = None) -> "MmaShape | str":
    """The mma.sync shape (MmaShape) whose fragments this op uses, or why none: m16n8k32
    fp8 on every target; m16n8k64 fp4 where the block-scaled mma.sync is native (`sm`), else fp4 widened to e4m3."""
    a, b = str(lhs.element), str(rhs.element)
    scale = op.operand("lhs_scale").type  # type: ignore[union-attr]
    form_ = scaled_form(op)
    if a not in SCALED_ELEMENTS or b not in SCALED_ELEMENTS:
        return f"block-scaled {a} x {b} has no tensor-core path in this lowering (fp8 e4m3/e5m2, fp4 e2m1 only)"
    if form_ is None:
        return (f"block-scaled {a} x {b} with {scale.element} scales per {lhs.shape[-1] // scale.shape[-1]} "  # type: ignore[union-attr]
                "has no tensor-core path in this lowering (fp8: ue8m0 per 32; fp4: ue8m0 per 32 or 16, "
                "e4m3 per 16)")
    if form_.k == 64 and sm is None:
        return "block-scaled fp4 has no tcgen05 form in this lowering (kind::mxf4nvf4 is not implemented)"
    native = form_.k == 64 and caps(sm).blockscale == "native"   # type: ignore[arg-type]
    k_inst = 64 if native else 32
    if not fragment_multiple(acc.shape) or lhs.shape[-1] % k_inst:
        return (f"tile shape {list(acc.shape[-2:]) + [lhs.shape[-1]]} is not a multiple of the instruction "
                f"shape [16, 8, {k_inst}]")
    if native:
        return MmaShape("", 64, 8, "i32")
    if form_.k == 64:       # fp4 elsewhere: widened to e4m3 as the fragments are gathered (exact)
        return f8_form("f8E4M3FN", "f8E4M3FN")
    return f8_form(a, b)


# -- wgmma (sm_90): a warpgroup's mma, its operands read from shared memory by descriptor --------
# The instruction table (PTX ISA, "Warpgroup MMA"): per (A, B, accumulator) element types, the PTX type
# suffix and the instruction's K (32 bytes of K per operand row). Only 16-bit operands may be read
# M/N-major (the descriptor's transpose bits); tf32, fp8 and int8 operands must be K-major, so an
# N-major B of those types is copied K-major in shared memory first (lowering/ops_wgmma.py). An operand
# is read from a shared matrix in a 128B, 64B or 32B swizzle whose span is the stored row: its
# contiguous extent must be 32 or 64 bytes or a multiple of 128 bytes.
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


# How wgmma reads f32 bits from shared memory as tf32: rounded to nearest, ties to even. Measured on
# an H200: wgmmas fed unrounded f32 (no cvt, an f32 TMA map) matched ones fed cvt.rn.tf32 values bit
# for bit, five matmuls of 16.7M outputs each. An operand read as tf32 with this rounding needs no
# rounding of its own (tileas/wgmma_operands.read_operands); other modes are still rounded in shared memory.
WGMMA_TF32_ROUNDING = "nearest_even"


def _wgmma_table() -> dict[tuple[str, str, str], WgmmaShape]:
    out = {
        ("f16", "f16", "f32"): WgmmaShape("f32.f16.f16", 16, 2),
        ("bf16", "bf16", "f32"): WgmmaShape("f32.bf16.bf16", 16, 2),
        ("tf32", "tf32", "f32"): WgmmaShape("f32.tf32.tf32", 8, 4),
        ("i8", "i8", "i32"): WgmmaShape("s32.s8.s8", 32, 1, "i32"),
    }
    for a, pa in F8.items():
        for b, pb in F8.items():
            out[(a, b, "f32")] = WgmmaShape(f"f32.{pa}.{pb}", 32, 1)
    return out


WGMMA = _wgmma_table()


def swizzle_fits(row_bytes: int) -> bool:
    """A stored row that one of wgmma's swizzles (32B, 64B, 128B) lays out whole."""
    return row_bytes in (32, 64) or (row_bytes > 0 and row_bytes % 128 == 0)


def wgmma_shape_of(op: Operation) -> Optional[WgmmaShape]:
    """The wgmma type row of an mmaf/mmai by its element types (None: no warpgroup form)."""
    if op.name not in ("cuda_tile.mmaf", "cuda_tile.mmai"):
        return None
    key = tuple(str(getattr(op.operand(n).type, "element", "")) for n in ("lhs", "rhs", "acc"))
    shape = WGMMA.get(key)  # type: ignore[arg-type]
    if shape is not None and key[0] == "i8" and not all(
            str(op.attributes.get(f"signedness_{s}", "signed")) == "signed" for s in ("lhs", "rhs")):
        return None   # unsigned int8 keeps its exact path (s8 x u8 forms are not wired here)
    return shape


def select_wgmma(op: Operation, sm: int, threads: int) -> Optional[WgmmaShape]:
    """The wgmma for `op` on this target and block, or None (mma.sync or the scalar path).

    2-D tiles; M a multiple of 16 rows per warp (each warpgroup's instructions cover 64 rows);
    N a multiple of 16 up to 256 (an N-major B: whole 128-byte atoms); K a multiple of the
    instruction's K with a K-major row that a swizzle holds whole."""
    if not caps(sm).has("wgmma"):
        return None
    shape = wgmma_shape_of(op)
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
    shape, acc = wgmma_shape_of(op), op.operand("acc").type
    return shape is not None and shape.transposable and acc.shape[-1] * shape.elem_bytes % 128 != 0  # type: ignore[union-attr]


def _loaded_b(op: Operation) -> bool:
    """B is a load (through unit reshapes, transposes, roundings), which the descriptor reads as
    stored whatever N: K-major (attention backward's S = Q K^T over 32 keys) or N-major in the 32B
    or 64B swizzle (MLA decode's 512 x 16 B). A B computed in registers would be staged beside them
    (MLA decode's M = 512 mma overflowed shared memory so)."""
    return source(op.operand("rhs"), passes_shared)[0] is not None


def reads_directly(shape: WgmmaShape, operand: str, transposed: bool, rows: int, cols: int) -> bool:
    """Whether a shared operand stored (rows, cols) row-major (`transposed`: the tile is the
    transpose of the stored matrix) is read by descriptor as it is: K-major, or M/N-major for
    16-bit types, with a stored row that a swizzle holds whole."""
    kmajor = transposed if operand == "b" else not transposed
    return (kmajor or shape.transposable) and swizzle_fits(cols * shape.elem_bytes) and rows % 8 == 0

# Block scales on tcgen05 (lowering/ops_blockscale.py restages them): one tcgen05.cp covers 128 rows (A) or
# columns (B), writing 4 tensor-memory columns from 512 bytes of shared memory (32 rows of 16 bytes).
SF_ROWS = 128                  # rows (A) or columns (B) one tcgen05.cp covers
SF_COLS = 4                    # tensor-memory columns it writes
SF_CHUNK_BYTES = 512           # its shared-memory source: 32 rows of 16 bytes, no swizzle


def scale_blocks(op: Operation) -> tuple[int, int]:
    """(elements per scale factor, K blocks of the tile: scale factors per row of A / column of B)."""
    lhs, scale = op.operand("lhs").type, op.operand("lhs_scale").type
    return lhs.shape[-1] // scale.shape[-1], scale.shape[-1]  # type: ignore[union-attr]


def sf_cells(op: Operation) -> int:
    """32-bit tensor-memory cells of a row's scale factors: one per 4 K blocks (a K tile of 128 is one
    cell with 32-element blocks, two with NVFP4's 16)."""
    return -(-scale_blocks(op)[1] // 4)


def sf_chunks(rows: int) -> int:
    """128-row chunks of one operand's scale factors (A's rows or B's columns): a partial one is copied whole,
    its rows past `rows` never read (an N of 64 reads lanes 0-31 of columns 0-1 of B's chunk)."""
    return -(-rows // SF_ROWS)


def tcgen05_scales_refused(m: int, n: int) -> str:
    """Why tcgen05 takes no block scales of an m x n accumulator here ("" where it does): M of whole 128-row
    halves, N any width of the M = 128 instruction (a multiple of 16 up to 256), not both 256. NVIDIA's runs a
    256 x 64 MXFP8 tile so, B's scales in one partial chunk."""
    if m not in (128, 256):
        return f"M = {m}: the scale factors are copied in 128-row chunks of whole M = 128 MMAs"
    if not (16 <= n <= 256 and n % 16 == 0):
        return f"N = {n}: no M = 128 block-scaled instruction is that wide"
    if m + n >= 512:
        return "a 256 x 256 accumulator fills tensor memory's 512 columns, none left for the scale factors"
    return ""


def tcgen05_columns(m: int, n: int, cells: int = 1) -> int:
    """Tensor-memory columns of the scale factors, after the accumulator's: per cell of a row, a
    column per 32 rows of A and of B (whole chunks)."""
    return SF_COLS * (sf_chunks(m) + sf_chunks(n)) * cells


def tcgen05_sf_bytes(m: int, n: int, cells: int = 1) -> int:
    """Shared-memory bytes of A's and B's scale factors restaged for tcgen05.cp (a 512-byte chunk per
    128 rows, or fewer, and cell)."""
    return (sf_chunks(m) + sf_chunks(n)) * SF_CHUNK_BYTES * cells
