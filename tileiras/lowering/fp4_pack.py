"""e2m1 operands packed two to a byte, K-major, by their mma (tcgen05's 4-bit kind, sm_120's fp4 mma.sync).

tcgen05.mma .kind::mxf4nvf4 reads A (M, K) and B (N, K) K-major with two e2m1 elements to a byte,
the even K in the low nibble; sm_120's m16n8k64 fp4 mma.sync takes fragments that are the 8-bit
ones of such bytes, which ldmatrix reads (ops_mma._PackedFragments). No load lands that way here:
fp4 tiles are one element to a byte in registers and in staged buffers, and a matmul's B is stored
(K, N), N contiguous. So the mma packs each operand into a buffer of its own once its elements are
in shared memory (a register tile is staged first, `ops_mma.stage`): every thread packs runs of 16
elements along K into 8 bytes, into rows of K / 2 bytes swizzled as TMA writes them (at K = 128,
64-byte rows and the 64-byte swizzle: NVIDIA's layout for these operands), which tcgen05 reads by
descriptor (ops_tcgen05._Packed) and ldmatrix by address. NVIDIA's compiler copies A by TMA as
stored and transposes B's nibbles in shared memory; this is the same data path with A packed by the
threads as well.
"""

from __future__ import annotations

from ..ir.record import replace
from .async_copy import fence_async_proxy, is_ready, wait_for
from .kernel import KernelLowering
from .smem import element_offset, pointer
from ..layout.shared_matrix import SharedMatrix
from .values import SharedTileVal, TileRegs
from ..tileas.mma_sync_staging import packed_matrix, stages_first

RUN = 16           # elements one thread packs at a time: 8 bytes, one shared store


def pack(k: KernelLowering, value: "TileRegs | SharedTileVal", role: str, rows: int, kdim: int) -> SharedMatrix:
    """The packed K-major buffer of operand `value` (role "a": the (rows, kdim) tile A; "b": the
    (kdim, rows) tile B), written by the threads and fenced for the async proxy (before any later
    barrier publishes it: the next operand's packing meets the CTA too). The caller meets the CTA
    at a barrier before the MMA reads it."""
    from .ops_mma import stage

    if stages_first(value):
        src, transposed = stage(k, value, role), False     # stage meets the CTA before it stores
    else:
        src, transposed = value.matrix, value.transposed
        if not is_ready([value]):
            wait_for(k, [value])
    k.barrier()   # every element is in `src`; the previous MMAs' reads of the packed buffer are done
    dst = packed_matrix(rows, kdim)
    dst = replace(dst, offset=k.alloc_buffer(dst.nbytes, "fp4-pack", role))
    per_row = kdim // RUN
    units = rows * per_row
    for first in range(0, units, k.threads):
        unit = k.b.op(f"add i32 {k.tid}, {first}", "pk") if first else k.tid
        x = k.b.op(f"udiv i32 {unit}, {per_row}", "pk")
        kk = k.b.op(f"shl i32 {k.b.op(f'urem i32 {unit}, {per_row}', 'pk')}, 4", "pk")

        def one() -> None:
            words = _packed_words(k, _run(k, src, role, transposed, x, kk))
            at = pointer(k, element_offset(k, dst, "0", x, k.b.op(f"lshr i32 {kk}, 1", "pk")))
            k.b.emit(f"store <2 x i32> {words}, ptr addrspace(3) {at}, align 8")

        k.guarded(k.b.op(f"icmp ult i32 {unit}, {units}", "pk") if first + k.threads > units else None,
                  lambda: one() or None)
    fence_async_proxy(k)    # the MMA reads the buffer through the async proxy
    return dst


def _run(k: KernelLowering, src: SharedMatrix, role: str, transposed: bool, x: str, kk: str) -> str:
    """<16 x i8>: elements kk .. kk + 15 along K of row x (A) or column x (B) of the operand, as `src`
    stores them (one to a byte): one 16-byte load where they are contiguous and aligned there."""
    along_cols = (role == "a") != transposed       # K runs along the stored rows
    if along_cols and not src.swizzled and not src.stage and src.pitch % RUN == 0 and src.offset % RUN == 0:
        at = pointer(k, element_offset(k, src, "0", x, kk))
        return k.b.op(f"load <16 x i8>, ptr addrspace(3) {at}, align 16", "pk")
    vec = "undef"
    for i in range(RUN):
        kdx = k.b.op(f"add i32 {kk}, {i}", "pk") if i else kk
        r, c = (x, kdx) if along_cols else (kdx, x)
        at = pointer(k, element_offset(k, src, "0", r, c))
        byte = k.b.op(f"load i8, ptr addrspace(3) {at}", "pk")
        vec = k.b.op(f"insertelement <16 x i8> {vec}, i8 {byte}, i32 {i}", "pk")
    return vec


def _packed_words(k: KernelLowering, run: str) -> str:
    """<2 x i32>: 16 elements one to a byte (low nibbles) as 8 bytes, element 2i in the low nibble of
    byte i: per 32-bit word of 4 elements, w | w >> 4 puts pairs in bytes 0 and 2."""
    words = k.b.op(f"bitcast <16 x i8> {run} to <4 x i32>", "pk")
    halves = []
    for i in range(4):
        w = k.b.op(f"and i32 {k.b.op(f'extractelement <4 x i32> {words}, i32 {i}', 'pk')}, 252645135", "pk")
        t = k.b.op(f"or i32 {w}, {k.b.op(f'lshr i32 {w}, 4', 'pk')}", "pk")
        low = k.b.op(f"and i32 {t}, 255", "pk")
        high = k.b.op(f"and i32 {k.b.op(f'lshr i32 {t}, 8', 'pk')}, 65280", "pk")
        halves.append(k.b.op(f"or i32 {low}, {high}", "pk"))
    out = "undef"
    for j in range(2):
        word = k.b.op(f"or i32 {halves[2 * j]}, {k.b.op(f'shl i32 {halves[2 * j + 1]}, 16', 'pk')}", "pk")
        out = k.b.op(f"insertelement <2 x i32> {out}, i32 {word}, i32 {j}", "pk")
    return out
