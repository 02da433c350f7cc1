"""mmaf_scaled (block-scaled fp8, MXFP8: e4m3/e5m2 with one ue8m0 scale per 32 K) on tensor cores.

The operands go through the mma.sync machinery of ops_mma (accumulator in `MmaLayout` registers,
A and B staged in shared memory, m16n8k32 fragments with the 8-bit layout); each instruction's K
(32) is exactly one scale block, so every instruction applies one A scale per row and one B
scale per column. The form per target (`FORMS`):

* sm_120 / sm_121: `mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32` with
  .ue8m0 scales, what NVIDIA's compiler issues there (SASS QMMA with scale factors). Scale
  operands (PTX ISA "Block Scaling for mma.sync", scale_vec::1X, selectors byte 0 / thread 0):
  the 32-bit scale-a-data of lane 4g holds SF_A of row g in its low byte, lane 4g + 1 that of
  row g + 8; the scale-b-data of lane 4g holds SF_B of column g. Every lane loads its byte (lanes
  4g + 2 and + 3 repeat 4g and 4g + 1; the instruction does not read them).
* sm_100 / sm_103 / sm_110: PTX has no block-scaled mma.sync there. NVIDIA's compiler issues
  tcgen05.mma ...kind::mxf8f6f4.block_scale with cta_group::2 (a CTA pair); with one CTA the
  default 256 x 256 accumulator takes all 512 tensor-memory columns, leaving none for the scale
  factors, so ours scales in registers: per 32-wide K block an fp8 mma.sync into zero, then
  acc += partial * (SF_A[row] * SF_B[col]) by FMA (ue8m0 scales are powers of two: the product
  is exact unless it leaves f32's range).

fp4 (f4E2M1FN) operands and ue4m3 scales keep the scalar path (their remark says so).
"""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import TileType
from .kernel import KernelLowering
from .layout import MmaLayout
from .smem import SharedMatrix, element_offset, pointer
from .values import SharedTileVal, TileRegs

_F8 = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}
_BLOCK = 32          # K per instruction = elements per scale (mxf8f6f4, scale_vec::1X)

# target SM -> the form of its block-scaled mma ("native": the block_scale mma.sync;
# "fma": fp8 mma.sync per scale block, scaled into the accumulator by FMA)
FORMS: dict[int, str] = {120: "native", 121: "native", 100: "fma", 103: "fma", 110: "fma"}


def choose(op: Operation, lhs: TileType, rhs: TileType, acc: TileType) -> "object | str":
    """The m16n8k32 fp8 mma.sync shape (ops_mma.MmaShape) whose fragments this op uses, or why none."""
    from .ops_mma import _f8

    a, b = str(lhs.element), str(rhs.element)
    scale = str(op.operand("lhs_scale").type.element)  # type: ignore[union-attr]
    if a not in _F8 or b not in _F8:
        return f"block-scaled {a} x {b} has no tensor-core path in this lowering (fp8 e4m3/e5m2 only)"
    if scale != "f8E8M0FNU" or lhs.shape[-1] // op.operand("lhs_scale").type.shape[-1] != _BLOCK:  # type: ignore[union-attr]
        return f"block-scaled mma with {scale} scales has no tensor-core path in this lowering (ue8m0 per 32 only)"
    if not MmaLayout.fits(acc.shape) or lhs.shape[-1] % _BLOCK:
        return (f"tile shape {list(acc.shape[-2:]) + [lhs.shape[-1]]} is not a multiple of the instruction "
                f"shape [16, 8, {_BLOCK}]")
    return _f8(a, b)


def form(sm: int) -> str:
    """The block-scaled form of a target (unknown newer targets scale by FMA: fp8 mma.sync exists
    on every target that accepts mmaf_scaled)."""
    return FORMS.get(sm, "fma")


def accumulator_weight(gpu: str) -> int:
    """How many accumulators' worth of registers a thread needs for the warps rule (warps.py): the
    FMA form keeps each instruction's partial sums and the scales beside the accumulator, and with
    as many warps as plain mma.sync gets it runs out of registers (128 x 128 tiles spill)."""
    return 2 if form(int(gpu[3:].rstrip("af"))) == "fma" else 1


def describe(op: Operation, sm: int) -> str:
    """The remark's Instruction."""
    a, b = (_F8[str(op.operand(n).type.element)] for n in ("lhs", "rhs"))  # type: ignore[union-attr]
    if form(sm) == "native":
        return f"Tensor-core SM120 (mma.sync.kind::mxf8f6f4.block_scale.scale_vec::1X.{a}.{b}.ue8m0)"
    return f"Tensor-core SM89 (mma.sync.{a}.{b}, block scales by FMA)"


class _Scales:
    """Loads the scale factors one lane needs, from a scale tile staged in shared memory: SF_A
    (rows, K / 32) or SF_B (K / 32, columns); a transposed shared tile is the transpose of what
    is stored. Each byte is loaded once per (batch, block start, K block)."""

    def __init__(self, k: KernelLowering, tile: "TileRegs | SharedTileVal", along_rows: bool) -> None:
        from .ops_mma import stage

        self.k = k
        self.elem = tile.type.element
        self.matrix: SharedMatrix = tile.matrix if isinstance(tile, SharedTileVal) else stage(k, tile)
        self.transposed = isinstance(tile, SharedTileVal) and tile.transposed
        self.along_rows = along_rows          # SF_A: (x, kb); SF_B: (kb, x)
        self.cache: dict[tuple[str, str, int], str] = {}

    def byte(self, b: str, x: str, kb: int) -> str:
        """The scale (i32, zero-extended byte) of row/column `x` (i32 expression), K block kb."""
        key = (b, x, kb)
        if key not in self.cache:
            k = self.k
            r, c = (x, str(kb)) if self.along_rows else (str(kb), x)
            if self.transposed:
                r, c = c, r
            p = pointer(k, element_offset(k, self.matrix, b, r, c))
            self.cache[key] = k.b.op(f"zext i8 {k.b.op(f'load i8, ptr addrspace(3) {p}', 'sf')} to i32", "sf")
        return self.cache[key]

    def value(self, b: str, x: str, kb: int) -> str:
        """The scale as an f32 (2^(e - 127); 0xFF is NaN)."""
        from .ops_reduce import _to_float

        key = (b, x, -1 - kb)
        if key not in self.cache:
            k = self.k
            byte = k.b.op(f"trunc i32 {self.byte(b, x, kb)} to i8", "sf")
            self.cache[key] = _to_float(k, byte, self.elem, "float")
        return self.cache[key]


def _lane_offsets(k: KernelLowering) -> dict[str, str]:
    """Per lane (g = lane / 4, t = lane % 4): "a": the A row its scale-a-data holds (g + 8 (lane % 2)),
    "g" / "g8": its accumulator rows g and g + 8 (and its scale-b-data's column g), "c0" / "c1": its
    accumulator columns 2 t and 2 t + 1."""
    lane = k.b.pre(f"and i32 {k.tid}, 31", "lane")
    g = k.b.pre(f"lshr i32 {lane}, 2", "g")
    odd = k.b.pre(f"and i32 {lane}, 1", "sfo")
    t2 = k.b.pre(f"shl i32 {k.b.pre(f'and i32 {lane}, 3', 't')}, 1", "t2")
    return {"a": k.b.pre(f"add i32 {g}, {k.b.pre(f'shl i32 {odd}, 3', 'sfo')}", "sfr"), "g": g,
            "g8": k.b.pre(f"add i32 {g}, 8", "g8"), "c0": t2, "c1": k.b.pre(f"add i32 {t2}, 1", "t21")}


def lower(k: KernelLowering, op: Operation, shape: object, lhs: "TileRegs | SharedTileVal",
          rhs: "TileRegs | SharedTileVal", acc: TileRegs, scales: list) -> TileRegs:
    """The block-scaled mma of `op` on this target's form (module docstring)."""
    from .ops_mma import lower_mma_sync

    sa, sb = _Scales(k, scales[0], True), _Scales(k, scales[1], False)
    lanes = _lane_offsets(k)
    a, b = (_F8[str(v.type.element)] for v in (lhs, rhs))
    native = form(k.sm) == "native"
    at: dict[tuple[str, str], str] = {}

    def add(x: str, lane_part: str) -> str:
        """Block start x plus one of this lane's offsets (each sum once per op)."""
        key = (x, lane_part)
        if key not in at:
            at[key] = lanes[lane_part] if x == "0" else k.b.op(f"add i32 {x}, {lanes[lane_part]}", "sfx")
        return at[key]

    def issue_native(bt: str, m0: str, n0: str, k0: int, args: list[tuple[str, str]], c: list[str]) -> list[str]:
        kb = k0 // _BLOCK
        fa = sa.byte(bt, add(m0, "a"), kb)
        fb = sb.byte(bt, add(n0, "g"), kb)
        text = (f"mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.{a}.{b}.f32.ue8m0 "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13}, {$14}, {0, 0}, {$15}, {0, 0};")
        cons = ",".join(["=f"] * 4 + ["r"] * 6 + ["f"] * 4 + ["r", "r"])
        operands = ", ".join([f"{t} {v}" for t, v in args] + [f"float {v}" for v in c] + [f"i32 {fa}", f"i32 {fb}"])
        ret = "{float, float, float, float}"
        res = k.b.op(f'call {ret} asm "{text}", "{cons}"({operands})', "mma")
        return [k.b.op(f"extractvalue {ret} {res}, {i}", "acc") for i in range(4)]

    def issue_fma(bt: str, m0: str, n0: str, k0: int, args: list[tuple[str, str]], c: list[str]) -> list[str]:
        from .ops_mma import _issue

        kb = k0 // _BLOCK
        ret = "{float, float, float, float}"
        res = _issue(k, shape, ret, args + [("float", "0.0")] * 4)  # type: ignore[arg-type]
        part = [k.b.op(f"extractvalue {ret} {res}, {i}", "acc") for i in range(4)]
        rows = [sa.value(bt, add(m0, part), kb) for part in ("g", "g8")]
        cols = [sb.value(bt, add(n0, part), kb) for part in ("c0", "c1")]
        out = []
        for i in range(4):   # accumulator i: row g + 8 (i / 2), column 2 t + i % 2
            s = k.b.op(f"fmul float {rows[i // 2]}, {cols[i % 2]}", "sfm")
            out.append(k.b.call("float", "llvm.fma.f32", [("float", part[i]), ("float", s), ("float", c[i])],
                                hint="acc"))
        return out

    return lower_mma_sync(k, op, shape, lhs, rhs, acc, issue_native if native else issue_fma,  # type: ignore[arg-type]
                          also_read=scales)

