"""mmaf / mmai on tensor cores with `mma.sync` (sm_80 and newer).

The operands go to shared memory (as for every op that crosses threads);
each warp then computes 16x8 blocks of the result: per block it loads the
accumulator fragment, loops over K in steps of the instruction's k, builds
the A and B fragments lane by lane from shared memory, issues `mma.sync`,
and stores the fragment back. A barrier later, every thread reads its
result elements in the blocked layout.

Fragment ownership (PTX ISA, "Matrix Fragments for mma.m16n8k*"): with
g = lane / 4 and t = lane % 4, register j of A holds row `g + ROW[j]`,
columns `k_lane(t) + KOFF[j] + e`; register j of B holds column g, rows
`k_lane(t) + BOFF[j] + e`; the accumulator holds (g, 2t..2t+1) and
(g + 8, 2t..2t+1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..ir.core import Operation
from ..ir.types import TileType
from .kernel import KernelLowering
from .llvm_text import llvm_type
from .ops_reduce import counted_loop, scratch_load, to_scratch
from .values import TileRegs


@dataclass(frozen=True)
class MmaShape:
    intrinsic: str
    k: int                          # the instruction's K
    per_reg: int                    # operand elements packed in one 32-bit register
    reg_type: str                   # LLVM type of one A/B register
    a_rows: tuple[int, ...] = (0, 8, 0, 8)
    a_koff: tuple[int, ...] = (0, 0, 8, 8)
    b_koff: tuple[int, ...] = (0, 8)
    acc_type: str = "float"

    def k_lane(self, t: int) -> int:
        return t * self.per_reg


# (A element, B element, accumulator element) -> the mma.sync that computes it
SHAPES: dict[tuple[str, str, str], MmaShape] = {
    ("f16", "f16", "f32"): MmaShape("llvm.nvvm.mma.m16n8k16.row.col.f32.f32", 16, 2, "<2 x half>"),
    ("bf16", "bf16", "f32"): MmaShape("llvm.nvvm.mma.m16n8k16.row.col.bf16", 16, 2, "i32"),
    ("tf32", "tf32", "f32"): MmaShape("llvm.nvvm.mma.m16n8k8.row.col.tf32", 8, 1, "i32",
                                      a_koff=(0, 0, 4, 4), b_koff=(0, 4)),
    ("i8", "i8", "i32"): MmaShape("llvm.nvvm.mma.m16n8k32.row.col.s8", 32, 4, "i32",
                                  a_koff=(0, 0, 16, 16), b_koff=(0, 16), acc_type="i32"),
}


def select_shape(op: Operation, lhs: TileType, rhs: TileType, acc: TileType) -> Optional[MmaShape]:
    key = tuple(str(t.element) for t in (lhs, rhs, acc))
    shape = SHAPES.get(key)  # type: ignore[arg-type]
    if shape is None:
        return None
    if key[0] == "i8" and not (op.attributes.get("signedness_lhs", "signed") == "signed"
                               and op.attributes.get("signedness_rhs", "signed") == "signed"):
        return None  # unsigned int8 keeps the exact scalar path
    m, n = acc.shape[-2:]
    if m % 16 or n % 8 or lhs.shape[-1] % shape.k:
        return None
    return shape


def lower_mma_sync(k: KernelLowering, op: Operation, shape: MmaShape,
                   lhs: TileRegs, rhs: TileRegs, acc: TileRegs) -> TileRegs:
    rtype = acc.type
    batched = len(rtype.shape) == 3
    batch = rtype.shape[0] if batched else 1
    m_size, n_size = rtype.shape[-2:]
    k_size = lhs.type.shape[-1]
    a_base, b_base, c_base = to_scratch(k, [lhs, rhs, acc])
    lane = k.b.pre(f"and i32 {k.tid}, 31", "lane")
    warp = k.b.pre(f"lshr i32 {k.tid}, 5", "warp")
    g = k.b.pre(f"lshr i32 {lane}, 2", "g")
    t = k.b.pre(f"and i32 {lane}, 3", "t")
    g8 = k.b.pre(f"add i32 {g}, 8", "g")
    t2 = k.b.pre(f"shl i32 {t}, 1", "t")
    t2p = k.b.pre(f"add i32 {t2}, 1", "t")
    k_lane = k.b.pre(f"mul i32 {t}, {shape.per_reg}", "kl") if shape.per_reg != 1 else t
    blocks_n = n_size // 8
    blocks_per_batch = (m_size // 16) * blocks_n
    nwarps = k.threads // 32
    acc_ty = shape.acc_type

    def index(b: str, row: str, col: str, dims: tuple[int, ...]) -> str:
        return k.linear([b, row, col] if batched else [row, col], dims)

    def block_body(blk: str, _: list[str]) -> list[str]:
        b = k.b.op(f"udiv i32 {blk}, {blocks_per_batch}", "mb") if batched else "0"
        rem = k.b.op(f"urem i32 {blk}, {blocks_per_batch}", "mb") if batched else blk
        m0 = k.b.op(f"mul i32 {k.b.op(f'udiv i32 {rem}, {blocks_n}', 'mb')}, 16", "mb")
        n0 = k.b.op(f"mul i32 {k.b.op(f'urem i32 {rem}, {blocks_n}', 'mb')}, 8", "mb")
        rows = [k.b.op(f"add i32 {m0}, {r}", "mr") for r in (g, g8)]
        cols = [k.b.op(f"add i32 {n0}, {c}", "mc") for c in (t2, t2p)]
        c_idx = [index(b, r, c, rtype.shape) for r in rows for c in cols]
        c_init = [scratch_load(k, c_base, rtype.element, i) for i in c_idx]
        a_rows = [k.b.op(f"add i32 {m0}, {g if r == 0 else g8}", "ar") for r in shape.a_rows]
        b_col = k.b.op(f"add i32 {n0}, {g}", "bc")

        def k_body(k0: str, c: list[str]) -> list[str]:
            base_k = k.b.op(f"add i32 {k0}, {k_lane}", "kk")
            a_regs = [_pack(k, shape, [scratch_load(k, a_base, lhs.type.element, index(
                b, row, k.b.op(f"add i32 {base_k}, {koff + e}", "ak"), lhs.type.shape))
                for e in range(shape.per_reg)], lhs.type.element)
                for row, koff in zip(a_rows, shape.a_koff)]
            b_regs = [_pack(k, shape, [scratch_load(k, b_base, rhs.type.element, index(
                b, k.b.op(f"add i32 {base_k}, {koff + e}", "bk"), b_col, rhs.type.shape))
                for e in range(shape.per_reg)], rhs.type.element)
                for koff in shape.b_koff]
            ret = "{" + ", ".join([acc_ty] * 4) + "}"
            args = [(shape.reg_type, r) for r in a_regs + b_regs] + [(acc_ty, v) for v in c]
            res = k.b.call(ret, shape.intrinsic, args, hint="mma")
            return [k.b.op(f"extractvalue {ret} {res}, {i}", "mma") for i in range(4)]
        c_out = counted_loop(k, "0", str(k_size), shape.k, [(acc_ty, v) for v in c_init], k_body)
        for i, v in zip(c_idx, c_out):
            p = k.b.op(f"getelementptr {acc_ty}, ptr addrspace(3) {c_base}, i32 {i}", "cs")
            k.b.emit(f"store {acc_ty} {v}, ptr addrspace(3) {p}")
        return []

    _strided_loop(k, warp, batch * blocks_per_batch, nwarps, block_body)
    k.barrier()
    out = [scratch_load(k, c_base, rtype.element, k.elem_index(rtype.num_elements, s))
           for s in range(k.slots(rtype))]
    return TileRegs(rtype, out)


def _strided_loop(k: KernelLowering, start: str, stop: int, step: int, body) -> None:
    """for (i = start; i < stop; i += step) body(i): a per-warp trip count."""
    pre = k.b.current_block
    head, loop, done = k.b.label("wl_head"), k.b.label("wl_body"), k.b.label("wl_done")
    k.b.br(head)
    k.b.start_block(head)
    pos = len(k.b.lines)
    i = k.b.fresh("wi")
    k.b.cond_br(k.b.op(f"icmp ult i32 {i}, {stop}", "wc"), loop, done)
    k.b.start_block(loop)
    body(i, [])
    nxt = k.b.op(f"add i32 {i}, {step}", "wi")
    end = k.b.current_block
    k.b.br(head)
    k.b.lines[pos:pos] = [f"  {i} = phi i32 [ {start}, %{pre} ], [ {nxt}, %{end} ]"]
    k.b.start_block(done)


def _pack(k: KernelLowering, shape: MmaShape, elems: list[str], elem: object) -> str:
    """Pack operand elements into one 32-bit fragment register."""
    name = getattr(elem, "name", "")
    if name == "tf32":
        return k.b.call("i32", "llvm.nvvm.f2tf32.rna", [("float", elems[0])])
    if name == "f16":
        vec = "undef"
        for i, e in enumerate(elems):
            vec = k.b.op(f"insertelement <2 x half> {vec}, half {e}, i32 {i}", "pk")
        return vec
    lty = llvm_type(elem)  # type: ignore[arg-type]
    vec = "undef"
    for i, e in enumerate(elems):
        vec = k.b.op(f"insertelement <{len(elems)} x {lty}> {vec}, {lty} {e}, i32 {i}", "pk")
    return k.b.op(f"bitcast <{len(elems)} x {lty}> {vec} to i32", "pk")
