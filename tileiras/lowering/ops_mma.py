"""mmaf / mmai on tensor cores with `mma.sync` m16n8k* (sm_80 and newer).

The accumulator stays in registers in `MmaLayout` (layout.py): the K loop of a
matmul carries it as phis, never through memory. Per mma op:

1. the A and B operands are staged in padded shared-memory buffers
   (`smem.SharedMatrix`, row-major as the tiles are), unless they already are;
2. a barrier, then each warp walks K in steps of the instruction's k: it loads
   the A fragments of its row blocks and the B fragments of its column blocks
   with `ldmatrix` (`.trans` for a B stored N-contiguous; per-element loads
   where ldmatrix cannot express the fragment: 32- and 8-bit B), and issues
   one `mma.sync` per (row block, column block) on the accumulator registers.

Fragment ownership (PTX ISA, "Matrix Fragments for mma.m16n8k*"): lane l has
g = l / 4, t = l % 4; A register j holds row g + 8 (j % 2), K elements from
(j / 2) k/2 + t e (e = elements per 32-bit register); B register j holds
column g, K elements from j k/2 + t e. Every k/2 run of K is 16 bytes: one
row of an 8x8 b16 matrix, which is what ldmatrix hands out.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record
from ..ir.types import TileType
from .kernel import KernelLowering, storage_bytes, storage_type, to_storage
from .layout import MmaLayout
from .llvm_text import llvm_type
from .smem import SharedMatrix, element_offset, pointer
from .values import SharedTileVal, TileRegs


@record
class MmaShape:
    intrinsic: str
    k: int                          # the instruction's K
    per_reg: int                    # operand elements packed in one 32-bit register
    reg_type: str                   # LLVM type of one A/B register
    acc_type: str = "float"


# (A element, B element, accumulator element) -> the mma.sync that computes it
SHAPES: dict[tuple[str, str, str], MmaShape] = {
    ("f16", "f16", "f32"): MmaShape("llvm.nvvm.mma.m16n8k16.row.col.f32.f32", 16, 2, "<2 x half>"),
    ("bf16", "bf16", "f32"): MmaShape("llvm.nvvm.mma.m16n8k16.row.col.bf16", 16, 2, "i32"),
    ("tf32", "tf32", "f32"): MmaShape("llvm.nvvm.mma.m16n8k8.row.col.tf32", 8, 1, "i32"),
    ("i8", "i8", "i32"): MmaShape("llvm.nvvm.mma.m16n8k32.row.col.s8", 32, 4, "i32", acc_type="i32"),
}


def select_shape(op: Operation, lhs: TileType, rhs: TileType, acc: TileType) -> Optional[MmaShape]:
    """The mma.sync for these operand types and shapes, or None (the exact scalar path)."""
    if op.name == "cuda_tile.mmaf_scaled":
        return None
    key = tuple(str(t.element) for t in (lhs, rhs, acc))
    shape = SHAPES.get(key)  # type: ignore[arg-type]
    if shape is None:
        return None
    if key[0] == "i8" and not (op.attributes.get("signedness_lhs", "signed") == "signed"
                               and op.attributes.get("signedness_rhs", "signed") == "signed"):
        return None  # unsigned int8 keeps the exact scalar path
    if not MmaLayout.fits(acc.shape) or lhs.shape[-1] % shape.k:
        return None
    return shape


def stage(k: KernelLowering, tile: TileRegs) -> SharedMatrix:
    """Store a register tile in a new (padded) buffer (row-major, as its shape says)."""
    shape = tile.type.shape
    batch, rows, cols = (1, *shape) if len(shape) == 2 else shape
    elem = tile.type.element
    nbytes = storage_bytes(elem)
    matrix = SharedMatrix(0, batch, rows, cols, nbytes)
    matrix = SharedMatrix(k.alloc_buffer(matrix.nbytes), batch, rows, cols, nbytes)
    lty = storage_type(elem)
    k.barrier()  # earlier readers of this buffer (the previous iteration's mma) are done
    for slot, v in enumerate(tile.slots):
        idx = k.multi_index(shape, slot, tile.layout)
        b, r, c = (idx if len(idx) == 3 else ["0", *idx])
        p = pointer(k, element_offset(k, matrix, b, r, c))
        k.store_first_copy(tile.type.num_elements, slot, tile.layout,
                           f"store {lty} {to_storage(k, v, elem)}, ptr addrspace(3) {p}")
    return matrix


class _Fragments:
    """Loads the A or B fragments of one operand matrix for one warp."""

    def __init__(self, k: KernelLowering, shape: MmaShape, matrix: SharedMatrix, operand: str, elem: object) -> None:
        self.k, self.shape, self.m, self.operand, self.elem = k, shape, matrix, operand, elem
        lane = k.b.pre(f"and i32 {k.tid}, 31", "lane")
        self.lane = lane
        q = k.b.pre(f"lshr i32 {lane}, 3", "q")
        r8 = k.b.pre(f"and i32 {lane}, 7", "r8")
        half = shape.k // 2
        # A is stored (M, K): K contiguous. B is stored (K, N): N contiguous.
        self.trans = operand == "b"
        self.ldmatrix = not self.trans or matrix.elem_bytes == 2
        q_lo = k.b.pre(f"shl i32 {k.b.pre(f'and i32 {q}, 1', 'q')}, 3", "q")   # 8 (q % 2)
        q_hi = k.b.pre(f"lshr i32 {q}, 1", "q")                                 # q / 2
        # ldmatrix.x4 matrix q: A (stored M x K): rows +8 (q % 2), K +k/2 (q / 2);
        # B (stored K x N, .trans): K +8 (q % 2), N +8 (q / 2). Lane rows run along the stored rows.
        self.lane_r = k.b.pre(f"add i32 {r8}, {q_lo}", "lr")
        self.lane_c = k.b.pre(f"mul i32 {q_hi}, {half if operand == 'a' else 8}", "lc")

    def _ldsm(self, b: str, r0: str, c0: str, count: int) -> list[str]:
        k = self.k
        r = self.lane_r if r0 == "0" else k.b.op(f"add i32 {r0}, {self.lane_r}", "fr")
        c = self.lane_c if c0 == "0" else k.b.op(f"add i32 {c0}, {self.lane_c}", "fc")
        p = pointer(k, element_offset(k, self.m, b, r, c))
        trans = ".trans" if self.trans else ""
        ret = "{" + ", ".join(["i32"] * count) + "}"
        res = k.b.call(ret, f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x{count}{trans}.b16",
                       [("ptr addrspace(3)", p)], hint="ldsm")
        return [k.b.op(f"extractvalue {ret} {res}, {i}", "fg") for i in range(count)]

    def _gather(self, b: str, coords: list[tuple[str, str]]) -> str:
        """One 32-bit register from per-element loads (b, row, col) of the stored matrix."""
        k = self.k
        lty = storage_type(self.elem)  # type: ignore[arg-type]
        vals = []
        for r, c in coords:
            p = pointer(k, element_offset(k, self.m, b, r, c))
            vals.append(k.b.op(f"load {lty}, ptr addrspace(3) {p}", "fe"))
        if len(vals) == 1:
            return vals[0] if lty == "i32" else k.b.op(f"bitcast {lty} {vals[0]} to i32", "fe")
        vec = "undef"
        for i, v in enumerate(vals):
            vec = k.b.op(f"insertelement <{len(vals)} x {lty}> {vec}, {lty} {v}, i32 {i}", "fe")
        return k.b.op(f"bitcast <{len(vals)} x {lty}> {vec} to i32", "fe")

    def a(self, b: str, m0: str, k0: int) -> list[str]:
        """The 4 A registers of the 16-row block at m0, K step at k0."""
        return self._ldsm(b, m0, str(k0), 4)

    def b_pair(self, b: str, k0: int, n0: str, count: int) -> list[list[str]]:
        """The 2 B registers of `count` (1 or 2) adjacent 8-column blocks from n0."""
        k, half, e = self.k, self.shape.k // 2, self.shape.per_reg
        if self.ldmatrix:
            regs = self._ldsm(b, str(k0), n0, 2 * count)
            return [regs[2 * i:2 * i + 2] for i in range(count)]
        g = k.b.pre(f"lshr i32 {self.lane}, 2", "g")
        te = k.b.pre(f"mul i32 {k.b.pre(f'and i32 {self.lane}, 3', 't')}, {e}", "te")
        out = []
        for i in range(count):
            n = k.b.op(f"add i32 {n0}, {g if i == 0 else k.b.pre(f'add i32 {g}, {8 * i}', 'g')}", "fn")
            regs = []
            for j in range(2):
                kk = [k.b.op(f"add i32 {te}, {k0 + j * half + x}", "fk") for x in range(e)]
                regs.append(self._gather(b, [(kr, n) for kr in kk]))
            out.append(regs)
        return out


def lower_mma_sync(k: KernelLowering, op: Operation, shape: MmaShape, lhs: "TileRegs | SharedTileVal",
                   rhs: "TileRegs | SharedTileVal", acc: TileRegs) -> TileRegs:
    layout = acc.layout
    assert isinstance(layout, MmaLayout)
    from .async_copy import wait_for

    a_mat = lhs.matrix if isinstance(lhs, SharedTileVal) else stage(k, lhs)
    b_mat = rhs.matrix if isinstance(rhs, SharedTileVal) else stage(k, rhs)
    wait_for(k, [lhs, rhs])
    k.barrier()
    a_frag = _Fragments(k, shape, a_mat, "a", lhs.type.element)
    b_frag = _Fragments(k, shape, b_mat, "b", rhs.type.element)
    rb, rm, rn = layout.repeats
    wb, wm, wn = layout.warps
    used = wb * wm * wn
    warp = k.b.pre(f"lshr i32 {k.tid}, 5", "warp")
    if used * 32 != k.threads:
        warp = k.b.pre(f"urem i32 {warp}, {used}", "warp")
    w_n = k.b.pre(f"urem i32 {warp}, {wn}", "wn") if wn > 1 else "0"
    w_m = k.b.pre(f"urem i32 {k.b.pre(f'udiv i32 {warp}, {wn}', 'wm')}, {wm}", "wm") if wm > 1 else "0"
    w_b = k.b.pre(f"udiv i32 {warp}, {wn * wm}", "wb") if wb > 1 else "0"

    def origin(w: str, per_warp: int, unit: int, block: int) -> str:
        if w == "0":
            return str(block * unit)
        base = k.b.pre(f"mul i32 {w}, {per_warp * unit}", "o")
        return base if block == 0 else k.b.pre(f"add i32 {base}, {block * unit}", "o")

    acc_ty = shape.acc_type
    regs = list(acc.slots)
    ret = "{" + ", ".join([acc_ty] * 4) + "}"
    for bi in range(rb):
        b = origin(w_b, rb, 1, bi)
        for k0 in range(0, lhs.type.shape[-1], shape.k):
            a_regs = [a_frag.a(b, origin(w_m, rm, 16, mi), k0) for mi in range(rm)]
            b_regs: list[list[str]] = []
            for ni in range(0, rn, 2):
                b_regs += b_frag.b_pair(b, k0, origin(w_n, rn, 8, ni), min(2, rn - ni))
            for mi in range(rm):
                for ni in range(rn):
                    blk = (bi * rm + mi) * rn + ni
                    c = regs[4 * blk:4 * blk + 4]
                    args = [(shape.reg_type, _as(k, r, shape.reg_type)) for r in a_regs[mi] + b_regs[ni]]
                    res = k.b.call(ret, shape.intrinsic, args + [(acc_ty, v) for v in c], hint="mma")
                    regs[4 * blk:4 * blk + 4] = [k.b.op(f"extractvalue {ret} {res}, {i}", "acc") for i in range(4)]
    return TileRegs(acc.type, regs, layout)


def _as(k: KernelLowering, reg: str, ty: str) -> str:
    return reg if ty == "i32" else k.b.op(f"bitcast i32 {reg} to {ty}", "fb")
