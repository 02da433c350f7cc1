"""mmaf on sm_90's warpgroup tensor cores: `wgmma.mma_async` m64nNk16 from shared memory.

assign_layouts picks the mmas (`_runs_on_wgmma`): both operands are loads copied (cp.async,
possibly pipelined) into wgmma's 128-byte swizzled layout (smem.SharedMatrix `swizzled`): A
(M x K) K-major, B (K x N) N-major (the instruction's transposed-B form), each cut into
128-byte column atoms. The accumulator is `MmaLayout(interleaved)`: warp w of warpgroup g holds
rows 64 i + 16 (4 g + w) of instruction i in the m16n8 fragment order, which is exactly the
register order of wgmma's m64nN accumulator.

Per mma: the copies' completion and a `fence.proxy.async` (the operands were written through the
generic proxy, wgmma reads through the async one) before the CTA barrier, then `wgmma.fence`,
one instruction per 64-row block and K step of 16, `commit_group` and `wait_group 0`.

Descriptors (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in bits 0-13, leading and
stride byte offsets >> 4 in bits 16-29 and 32-45, swizzle mode 1 (128B) in bits 62-63. K-major
128B-swizzled A: stride 1024 bytes between 8-row groups (the leading offset is unused). N-major
B: leading offset = bytes from one 64-column atom to the next, stride 1024 bytes between 8-row
(K) groups. A K step inside an atom moves the start address.
"""

from __future__ import annotations

from ..ir.core import Operation
from .async_copy import fence_async_proxy, is_ready, wait_for
from .kernel import KernelLowering
from .layout import MmaLayout
from .ops_mma import stage
from .smem import SWIZZLE_BYTES, SharedMatrix, pointer
from .values import SharedTileVal, TileRegs

_SWIZZLE_128B = 1 << 62
_PTX_TYPE = {"f16": "f16", "bf16": "bf16"}


def lower_wgmma(k: KernelLowering, op: Operation, lhs: object, rhs: object, acc: TileRegs) -> TileRegs:
    layout = acc.layout
    assert isinstance(layout, MmaLayout) and layout.interleaved
    a = lhs.matrix if isinstance(lhs, SharedTileVal) else stage(k, lhs, swizzled=True)  # type: ignore[arg-type]
    b = rhs.matrix if isinstance(rhs, SharedTileVal) else stage(k, rhs, swizzled=True)  # type: ignore[arg-type]
    if not is_ready([lhs, rhs]):
        wait_for(k, [lhs, rhs])
        fence_async_proxy(k)
        k.barrier()
    _, m_size, n_size = layout.shape
    k_size = a.cols
    warps = layout.warps[1]
    rm = layout.repeats[1]
    warp = k.b.pre(f"lshr i32 {k.tid}, 5", "warp")
    group_row = k.b.pre(f"mul i32 {k.b.pre(f'and i32 {warp}, {-4 & 0xFFFFFFFF}', 'wg')}, 16", "wg")  # 16 (4 g)
    ptx = _PTX_TYPE[str(lhs.type.element)]  # type: ignore[attr-defined]
    regs_per = n_size // 2          # f32 accumulators per thread and instruction: 64 x N / 128
    k.b.declare("declare void @llvm.nvvm.wgmma.fence.sync.aligned()")
    k.b.emit("call void @llvm.nvvm.wgmma.fence.sync.aligned()")
    regs = list(acc.slots)
    b_lbo = b.atom_bytes
    for k0 in range(0, k_size, 16):
        b_desc = _descriptor(k, b, _offset_of(b, k0, 0), b_lbo)
        for mi in range(rm):
            row0 = k.b.op(f"add i32 {group_row}, {mi * warps * 16}", "wr") if mi else group_row
            a_desc = _descriptor(k, a, _a_offset(k, a, row0, k0), 16)
            chunk = regs[mi * regs_per:(mi + 1) * regs_per]
            regs[mi * regs_per:(mi + 1) * regs_per] = _issue(k, ptx, n_size, chunk, a_desc, b_desc)
    k.b.declare("declare void @llvm.nvvm.wgmma.commit_group.sync.aligned()")
    k.b.emit("call void @llvm.nvvm.wgmma.commit_group.sync.aligned()")
    k.b.declare("declare void @llvm.nvvm.wgmma.wait_group.sync.aligned(i64 immarg)")
    k.b.emit("call void @llvm.nvvm.wgmma.wait_group.sync.aligned(i64 0)")
    return TileRegs(acc.type, regs, layout)


def _offset_of(matrix: SharedMatrix, row: int, col: int) -> int:
    """Unswizzled byte offset (from the buffer) of constant (row, col): the descriptor's start."""
    per_atom = SWIZZLE_BYTES // matrix.elem_bytes
    return (col // per_atom) * matrix.atom_bytes + row * SWIZZLE_BYTES + (col % per_atom) * matrix.elem_bytes


def _a_offset(k: KernelLowering, a: SharedMatrix, row0: str, k0: int) -> str:
    """Unswizzled offset of A's (row0, k0), row0 an i32 multiple of 64 or 16."""
    base = _offset_of(a, 0, k0)
    rows = k.b.op(f"mul i32 {row0}, {SWIZZLE_BYTES}", "wa")
    return k.b.op(f"add i32 {rows}, {base}", "wa") if base else rows


def _descriptor(k: KernelLowering, matrix: SharedMatrix, offset: "int | str", lbo: int) -> str:
    """The 64-bit matrix descriptor of `matrix` starting at byte `offset` of it."""
    off = str(offset)
    if matrix.stage:
        off = k.b.op(f"add i32 {off}, {matrix.stage}", "wd")
    if matrix.offset:
        off = k.b.op(f"add i32 {off}, {matrix.offset}", "wd") if not off.isdigit() else str(int(off) + matrix.offset)
    addr = k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, off)} to i32", "wd")
    shifted = k.b.op(f"lshr i32 {addr}, 4", "wd")
    start = k.b.op(f"zext i32 {k.b.op(f'and i32 {shifted}, 16383', 'wd')} to i64", "wd")
    const = _SWIZZLE_128B | ((1024 >> 4) << 32) | (((lbo >> 4) & 0x3FFF) << 16)
    return k.b.op(f"or i64 {start}, {const}", "wd")


def _issue(k: KernelLowering, ptx: str, n: int, acc: list[str], a_desc: str, b_desc: str) -> list[str]:
    """One wgmma.mma_async m64nNk16 accumulating into `acc` (N / 2 f32 registers per thread)."""
    count = len(acc)
    outs = ", ".join(f"${i}" for i in range(count))
    text = (f"{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} "
            f"{{{outs}}}, ${count}, ${count + 1}, p, 1, 1, 0, 1; }}")
    constraints = ",".join(["=f"] * count + ["l", "l"] + [str(i) for i in range(count)])
    ret = "{" + ", ".join(["float"] * count) + "}"
    args = ", ".join([f"i64 {a_desc}", f"i64 {b_desc}"] + [f"float {v}" for v in acc])
    res = k.b.op(f'call {ret} asm sideeffect "{text}", "{constraints}"({args})', "wg")
    return [k.b.op(f"extractvalue {ret} {res}, {i}", "wacc") for i in range(count)]
