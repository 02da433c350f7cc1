"""mmaf / mmai on Blackwell's fifth-generation tensor cores (sm_100 / sm_103): `tcgen05.mma`.

Selection (`choose_all`, asked by assign_layouts): 2-D mmas (f16, bf16, tf32, e4m3/e5m2, signed
int8) whose operands are both loads used once, possibly reshaped (unit dimensions) or rounded to
tf32: cp.async copies them into swizzled buffers (as for wgmma: A (M x K) K-major, B (K x N)
N-major, the instruction descriptor's "transpose B"; tf32 is restaged K-major, `_restage`); M 64,
128 or 256 (two M=128 instructions side by side in tensor memory), N a multiple of 16 (8 for
M = 64) up to 256, enough warps that each TMEM lane quarter is read by its own warps, and 512
columns of tensor memory for all of them. The rest stays on mma.sync.

Per mma op, thread 0 issues the MMAs (one per K step and 128-row half) and commits them to the
kernel's mbarrier (tmem.py); every thread waits for that phase, after which the operands' buffers
may be refilled. The accumulator lives in tensor memory: inside a `for` that carries it and reads
it nowhere else (`resident_loop`), it stays there for the whole loop: the first iteration's first
MMA ignores the old contents when the initial value is zero (else the first iteration stores it,
`tcgen05.st`), and it is read into registers once after the loop (`after_loop`). Elsewhere the op
stores its accumulator, runs and reads it back. Registers <-> tensor memory use the 16x256b shape,
which hands a warp 16 lanes x 8 columns per repetition in exactly the m16n8 accumulator fragment
(lane l: row l/4 and l/4 + 8, columns 2 (l%4) and +1): the registers keep `MmaLayout`'s fragment
order and the epilogue is unchanged. `TmemAccLayout` only places the warps: warp w reaches TMEM
lanes 32 (w % 4) ..+31, so its rows are the ones the MMA wrote there: rows 32 (w % wm) .. (M = 128
and 256: lane = row mod 128, the second half in columns N..2N-1) or 16 (w % 4) .. (M = 64: the
rows fill lanes 0-15 of each quarter); the remaining warp factor splits the columns.

Instruction descriptor (PTX ISA "Instruction descriptor", kind::f16/tf32/f8f6f4/i8): D format in
bits 4-5 (1 f32, 2 s32), A and B formats in 7-9 and 10-12, transpose A / B in 15 / 16, N >> 3 in
17-22, M >> 4 in 24-28. Shared-memory descriptor (sm_100 "Shared memory descriptor"): start >> 4
in 0-13, leading / stride byte offsets >> 4 in 16-29 / 32-45, the fixed version 0b001 in 46-48,
base offset 0 (buffers are 1024-byte aligned), swizzle mode in 61-63 (2, 4, 6: 128-, 64-, 32-byte).
Rows of 32 or 64 bytes (K = 32 of 16-bit A, 8-bit operands) use the narrower swizzles, whose atom
is the whole row (smem.SharedMatrix.span); the stride byte offset is 8 rows of an atom.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record
from .async_copy import fence_async_proxy, is_ready, wait_for
from .kernel import KernelLowering
from .layout import WARP, MmaLayout, Pre
from .llvm_text import llvm_type
from .smem import SWIZZLE_BYTES, SharedMatrix, pointer
from .tmem import COLUMNS, tensor_memory, wait_mbarrier
from .values import SharedTileVal, TileRegs


@record
class Kind:
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
# tf32 operands are f32 loads rounded by an ftof: the mma rounds them itself while it copies them
# from their cp.async buffers into swizzled K-major ones (B transposed), so both descriptors are
# K-major and the products equal the rounded operands' (not the hardware's truncation of raw f32).
_RESTAGED = frozenset({"tf32"})

_SWIZZLE_MODE = {128: 2, 64: 4, 32: 6}     # sm_100 descriptor swizzle mode per swizzle span (bytes)
_VERSION = 1 << 46


@record
class TmemAccLayout(MmaLayout):
    """An `MmaLayout` whose warps are placed for tensor memory: warp w is at row-warp w % wm and
    column-warp w / wm (rows fastest), so that its rows lie in TMEM lane quarter w % 4."""

    def warp_coords(self, pre: Pre, tid: str) -> tuple[str, str, str, Optional[str]]:
        _, wm, wn = self.warps
        warp = pre(f"lshr i32 {tid}, 5", "w")
        w_m = pre(f"urem i32 {warp}, {wm}", "wm") if wm > 1 else "0"
        w_n = pre(f"udiv i32 {warp}, {wm}", "wn") if wn > 1 else "0"
        return "0", w_m, w_n, None

    def describe(self) -> str:
        return "#tmem_acc" + MmaLayout.describe(self)[4:]


def kind_of(op: Operation) -> Optional[Kind]:
    if op.name == "cuda_tile.mmaf_scaled":     # block-scaled fp8 (ops_blockscale)
        from .ops_blockscale import tcgen05_kind

        return tcgen05_kind(op)  # type: ignore[return-value]
    lhs, rhs, acc = (op.operand(n) for n in ("lhs", "rhs", "acc"))
    key = tuple(str(getattr(v.type, "element", "")) for v in (lhs, rhs, acc))
    kind = KINDS.get(key)  # type: ignore[arg-type]
    if kind is not None and kind.name == "i8" and not (
            op.attributes.get("signedness_lhs", "signed") == "signed"
            and op.attributes.get("signedness_rhs", "signed") == "signed"):
        return None
    return kind


def choose(op: Operation, sm: int, threads: int) -> Optional[TmemAccLayout]:
    """The accumulator layout of `op` when it runs on tcgen05.mma, else None (mma.sync)."""
    if sm not in (100, 103) or op.name not in ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled"):
        return None
    kind = kind_of(op)
    lhs, rhs, acc = (op.operand(n) for n in ("lhs", "rhs", "acc"))
    if kind is None or len(acc.type.shape) != 2:  # type: ignore[union-attr]
        return None
    m, n = acc.type.shape  # type: ignore[union-attr]
    kdim = lhs.type.shape[-1]  # type: ignore[union-attr]
    warps = threads // WARP
    wm = 4 if m == 64 else m // 32
    if m not in (64, 128, 256) or warps % wm or n > 256 or n % (8 if m == 64 else 16):
        return None
    wn = warps // wm
    per_warp = n // 8 // max(wn, 1)
    if n % (8 * wn) or per_warp & (per_warp - 1) or per_warp > 32:   # one 16x256b.x{1..32} per row block
        return None
    if not (_swizzles(kdim * kind.elem_bytes) and _swizzles(n * kind.elem_bytes)) or kdim % kind.k:
        return None
    if kind.name in _RESTAGED and any(threads % (kdim // 4) or (rows * kdim // 4) % threads or (threads // (kdim // 4)) % 8
                                      for rows in (m, n)):    # whole rounds of 16-byte chunks (_restage)
        return None
    if op.name == "cuda_tile.mmaf_scaled":
        from .ops_blockscale import tcgen05_fits

        if not tcgen05_fits(m, n, threads, kdim):
            return None
    if op_columns(op, m, n) > COLUMNS:
        return None
    if not all(_loaded(v) for v in (lhs, rhs)):
        return None
    return TmemAccLayout(threads, (1, m, n), (1, wm, wn))


def _unit_reshape(op: Operation) -> bool:
    """A reshape that only drops or adds unit dimensions (a batched load's (1, rows, cols) tile)."""
    src, dst = op.operands[0].type, op.results[0].type
    return op.name == "cuda_tile.reshape" and \
        [d for d in src.shape if d != 1] == [d for d in dst.shape if d != 1]  # type: ignore[attr-defined]


def _to_tf32(op: Operation) -> bool:
    return op.name == "cuda_tile.ftof" and str(getattr(op.operands[0].type, "element", "")) == "f32" \
        and str(getattr(op.results[0].type, "element", "")) == "tf32"


def _loaded(value: object) -> bool:
    """A tile used once, a plain load possibly reshaped (unit dimensions only) or rounded to tf32:
    cp.async copies it into the buffer the MMA reads (swizzled, in the operand's row-major order;
    tf32: the mma restages it)."""
    while len(value.uses) == 1:  # type: ignore[attr-defined]
        owner = getattr(value, "owner", None)
        name = getattr(owner, "name", "")
        if name == "cuda_tile.load_view_tko":
            return True
        if not (name == "cuda_tile.reshape" and _unit_reshape(owner) or _to_tf32(owner)):  # type: ignore[arg-type]
            return False
        value = owner.operands[0]  # type: ignore[union-attr]
    return False


def feeds(value: object, ops: "dict[Operation, TmemAccLayout]") -> bool:
    """`value` reaches one of `ops` as an operand, through unit reshapes, and the MMA reads the
    buffer it is copied into (swizzled); restaged (tf32) operands keep the plain layout."""
    while len(value.uses) == 1:  # type: ignore[attr-defined]
        user = value.uses[0]  # type: ignore[attr-defined]
        if user in ops:   # A or B (not a block-scaled mma's scales, which it restages itself)
            return kind_of(user).name not in _RESTAGED and value in (user.operand("lhs"), user.operand("rhs"))  # type: ignore[union-attr]
        if not _unit_reshape(user):
            return False
        value = user.results[0]
    return False


def choose_all(ops: list[Operation], sm: int, threads: int) -> dict[Operation, "TmemAccLayout"]:
    """The mmas (among `ops`) that run on tcgen05, each with its own tensor-memory columns: in
    program order while the 512 columns last (the others stay on mma.sync)."""
    out: dict[Operation, TmemAccLayout] = {}
    used = 0
    for op in ops:
        layout = choose(op, sm, threads)
        if layout is None:
            continue
        cols = op_columns(op, layout.shape[1], layout.shape[2])
        if used + cols > COLUMNS:
            continue
        out[op] = layout
        used += cols
    return out


def _region(k: KernelLowering, op: Operation) -> tuple[str, int]:
    """(i32 tensor-memory address of op's accumulator, total columns the kernel allocates)."""
    assignment = k.assignment
    assert assignment is not None
    start = total = 0
    for other, layout in assignment.tcgen05_layouts.items():
        if other is op:
            start = total
        total += op_columns(other, layout.shape[1], layout.shape[2])
    tm = tensor_memory(k, total)
    return (k.b.pre(f"add i32 {tm.address}, {start}", "tr") if start else tm.address), total


def resident_loop(op: Operation) -> Optional[tuple[Operation, int]]:
    """(for op, carried index) when `op`'s accumulator is a value a `for` carries that nothing else
    in the loop reads, and its result only goes back round as that value: the accumulator then
    stays in tensor memory for the whole loop and is read into registers once, after it."""
    acc, result = op.operand("acc"), op.results[0]
    block = op.parent
    loop = block.parent.parent if block is not None and block.parent is not None else None
    if loop is None or loop.name != "cuda_tile.for" or getattr(acc, "owner", None) is not block:
        return None
    last = block.operations[-1]
    index = acc.index - 1  # type: ignore[union-attr]
    if last.name != "cuda_tile.continue" or acc.uses != [op] or result.uses != [last] \
            or index < 0 or last.operands[index] is not result \
            or sum(1 for v in last.operands if v is result) != 1:
        return None
    return loop, index


def before_loop(k: KernelLowering, loop: Operation) -> None:
    """Before a `for` (and its pipeline's stages) takes shared memory: the restaging buffers of the
    tcgen05 mmas inside it, so that the pipeline's depth leaves room for them."""
    if k.assignment is None or not getattr(k.assignment, "tcgen05_layouts", None):
        return
    for op in k.assignment.tcgen05_layouts:
        if kind_of(op).name in _RESTAGED and op not in k.tmem_buffers and _inside(op, loop):  # type: ignore[union-attr]
            k.tmem_buffers[op] = tuple(_restage_matrix(k, op.operand(n).type, n == "rhs")  # type: ignore[arg-type]
                                       for n in ("lhs", "rhs"))


def _inside(op: Operation, loop: Operation) -> bool:
    block = op.parent
    while block is not None and block.parent is not None:
        owner = block.parent.parent
        if owner is loop:
            return True
        block = owner.parent if owner is not None else None
    return False


def after_loop(k: KernelLowering, loop: Operation) -> None:
    """After a `for` whose mmas kept their accumulators in tensor memory: read them into registers
    (the loop's results); a loop that ran no iteration gives its initial values."""
    if k.assignment is None or not getattr(k.assignment, "tcgen05_layouts", None):
        return
    for op, layout in k.assignment.tcgen05_layouts.items():
        found = resident_loop(op)
        if found is None or found[0] is not loop:
            continue
        index = found[1]
        kind = kind_of(op)
        assert kind is not None
        address, _ = _region(k, op)
        k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
        regs = _transfer(k, layout, address, None, kind.d == 1)
        k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
        init = k.tile(loop.operand_group("initValues")[index])
        lb = k.tile(loop.operand("lowerBound")).slots[0]  # type: ignore[arg-type]
        ub = k.tile(loop.operand("upperBound")).slots[0]  # type: ignore[arg-type]
        ity = llvm_type(loop.operand("lowerBound").type.element)  # type: ignore[union-attr]
        ran = k.b.op(f"icmp {'ult' if loop.attributes.get('unsignedCmp', False) else 'slt'} {ity} {lb}, {ub}", "tran")
        lty = "float" if kind.d == 1 else "i32"
        merged = [k.b.op(f"select i1 {ran}, {lty} {r}, {lty} {i}", "tacc") for r, i in zip(regs, init.slots)]
        k.values[loop.results[index]] = TileRegs(init.type, merged, layout)


def _is_zero(tile: TileRegs) -> bool:
    return all(s in ("0", "0.000000e+00", "0.0", "0x0000000000000000") for s in tile.slots)


def _swizzles(row_bytes: int) -> bool:
    """Rows of this many bytes fit a swizzled layout: whole 128-byte atoms, or one 32/64-byte atom."""
    return row_bytes % SWIZZLE_BYTES == 0 or row_bytes in (32, 64)


def columns_of(m: int, n: int) -> int:
    """Tensor-memory columns of an M x N f32/s32 accumulator (M = 256: two 128-lane halves)."""
    return n * (2 if m == 256 else 1)


def op_columns(op: Operation, m: int, n: int) -> int:
    """Tensor-memory columns of one mma: its accumulator's, and a block-scaled mma's scale factors."""
    if op.name != "cuda_tile.mmaf_scaled":
        return columns_of(m, n)
    from .ops_blockscale import tcgen05_columns

    return columns_of(m, n) + tcgen05_columns(m, n)


def instruction(kind: Kind, m: int, n: int) -> int:
    """The 32-bit instruction descriptor: A K-major, B N-major (transposed) unless restaged."""
    b_n_major = kind.name not in _RESTAGED
    return (kind.d << 4) | (kind.a << 7) | (kind.b << 10) | (b_n_major << 16) | ((n >> 3) << 17) | ((m >> 4) << 24)


def describe(op: Operation, layout: MmaLayout) -> tuple[str, str]:
    """(Instruction, Shape) of the remark: the instruction and its M x N x K."""
    kind = kind_of(op)
    assert kind is not None
    _, m, n = layout.shape
    scaled = ".block_scale" if op.name == "cuda_tile.mmaf_scaled" else ""
    return f"Tensor-core SM100 (tcgen05.mma.cta_group::1.kind::{kind.name}{scaled})", f"[{min(m, 128)}, {n}, {kind.k}]"


def lower_tcgen05(k: KernelLowering, op: Operation, lhs: object, rhs: object, acc: TileRegs) -> TileRegs:
    """The MMAs of one mma op. Inside a loop that keeps the accumulator in tensor memory
    (`resident_loop`), the registers are neither stored nor loaded: the first iteration stores the
    initial value (or, when it is zero, its first MMA ignores the old contents), and `after_loop`
    reads the result; the op's register result is its (unchanged) carried input."""
    from .ops_mma import stage

    layout = acc.layout
    assert isinstance(layout, TmemAccLayout)
    kind = kind_of(op)
    assert kind is not None
    is_float = kind.d == 1
    restaged = kind.name in _RESTAGED
    if restaged:
        if op not in k.tmem_buffers:
            k.tmem_buffers[op] = (_restage_matrix(k, lhs.type, False), _restage_matrix(k, rhs.type, True))  # type: ignore[attr-defined]
        a_dst, b_dst = k.tmem_buffers[op]
        a, b = _restage(k, lhs, a_dst, False), _restage(k, rhs, b_dst, True)  # type: ignore[arg-type]
    else:
        a = lhs.matrix if isinstance(lhs, SharedTileVal) else stage(k, lhs, swizzled=True)  # type: ignore[arg-type]
        b = rhs.matrix if isinstance(rhs, SharedTileVal) else stage(k, rhs, swizzled=True)  # type: ignore[arg-type]
    _, m, n = layout.shape
    address, _ = _region(k, op)
    tm = tensor_memory(k, 0)
    resident = resident_loop(op)
    accumulate = "1"     # i32: the first MMA adds to what tensor memory holds
    if resident is None:
        _transfer(k, layout, address, list(acc.slots), is_float)
        k.b.emit('call void asm sideeffect "tcgen05.wait::st.sync.aligned;", "~{memory}"()')
    else:
        loop, index = resident
        iv = k.tile(loop.regions[0].block.arguments[0]).slots[0]
        lb = k.tile(loop.operand("lowerBound")).slots[0]  # type: ignore[arg-type]
        ity = llvm_type(loop.operand("lowerBound").type.element)  # type: ignore[union-attr]
        first = k.b.op(f"icmp eq {ity} {iv}, {lb}", "tfirst")
        if _is_zero(k.tile(loop.operand_group("initValues")[index])):
            accumulate = k.b.op(f"zext i1 {k.b.op(f'xor i1 {first}, true', 'tacc')} to i32", "tacc")
        else:
            def store() -> None:
                _transfer(k, layout, address, list(acc.slots), is_float)
                k.b.emit('call void asm sideeffect "tcgen05.wait::st.sync.aligned;", "~{memory}"()')

            k.guarded(first, lambda: store() or None)
    scales = None
    if op.name == "cuda_tile.mmaf_scaled":   # the scale factors (ops_blockscale), after the accumulator
        from .ops_blockscale import Tcgen05Scales

        scales = Tcgen05Scales(k, op, k.b.op(f"add i32 {address}, {columns_of(m, n)}", "tsf"), m, n)
    if restaged:
        fence_async_proxy(k)
    elif not is_ready([lhs, rhs]):
        wait_for(k, [lhs, rhs])
        fence_async_proxy(k)
    k.b.emit('call void asm sideeffect "tcgen05.fence::before_thread_sync;", "~{memory}"()')
    k.barrier()
    idesc = instruction(kind, min(m, 128), n)

    def issue() -> None:
        k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
        if scales is not None:
            scales.copy()
        for k0 in range(0, a.cols, kind.k):
            b_desc = _descriptor(k, b, _offset_of(b, 0, k0), 16) if restaged else \
                _descriptor(k, b, _offset_of(b, k0, 0), b.atom_bytes)
            for half in range(2 if m == 256 else 1):
                a_desc = _descriptor(k, a, _offset_of(a, 128 * half, k0), 16)
                d = address if half == 0 else k.b.op(f"add i32 {address}, {n}", "td")
                enable = accumulate if k0 == 0 else "1"
                if scales is not None:
                    scales.mma(d, a_desc, b_desc, idesc, k0, half, enable)
                    continue
                k.b.emit(f'call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $4, 0; '
                         f'tcgen05.mma.cta_group::1.kind::{kind.name} [$0], $1, $2, $3, p; }}", '
                         f'"r,l,l,r,r,~{{memory}}"(i32 {d}, i64 {a_desc}, i64 {b_desc}, i32 {idesc}, i32 {enable})')
        k.b.emit(f'call void asm sideeffect "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 '
                 f'[$0];", "r,~{{memory}}"(i32 {tm.mbarrier})')

    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "ti"), lambda: issue() or None)
    wait_mbarrier(k, tm)   # the operands' buffers are free again, the accumulator is complete
    if resident is not None:
        return TileRegs(acc.type, list(acc.slots), layout)
    k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
    regs = _transfer(k, layout, address, None, is_float)
    k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
    return TileRegs(acc.type, regs, layout)


def _restage_matrix(k: KernelLowering, operand: object, transpose: bool) -> SharedMatrix:
    """The K-major swizzled buffer a restaged operand (A (M, K), or B (K, N) transposed) goes to."""
    from ..ir.types import TileType
    from .async_copy import new_matrix

    rows, cols = operand.shape[-2:]  # type: ignore[attr-defined]
    return new_matrix(k, TileType((cols, rows) if transpose else (rows, cols), operand.element), swizzled=True)  # type: ignore[attr-defined]


def _restage(k: KernelLowering, tile: "SharedTileVal | TileRegs", dst: SharedMatrix, transpose: bool) -> SharedMatrix:
    """`dst`: a K-major swizzled copy of a tf32 operand, rounded as its ftof says: A (M, K) as it is,
    B (K, N) transposed to (N, K). From its cp.async buffer (after the copies and a barrier): each
    thread writes 16-byte chunks (row R of `dst`, 4 consecutive K) R0 + i dR, so that every address
    is a per-thread base plus a constant (dR is a multiple of the 8 rows a swizzle pattern spans);
    from registers (rare: loads that could not be copied asynchronously): element by element."""
    from .ops_arith import _round_to_tf32
    from .smem import element_offset

    if isinstance(tile, TileRegs):
        for slot, value in enumerate(tile.slots):
            *_, r, c = k.multi_index(tile.type.shape, slot, tile.layout)
            dst_r, dst_c = (c, r) if transpose else (r, c)
            k.store_first_copy(tile.type.num_elements, slot, tile.layout, f"store float {value}, ptr addrspace(3) "
                               f"{pointer(k, element_offset(k, dst, '0', dst_r, dst_c))}")
        return dst
    if not is_ready([tile]):
        wait_for(k, [tile])
        k.barrier()
    # (the previous MMA's reads of `dst` completed before every thread passed its mbarrier wait)
    src = tile.matrix
    chunks = dst.cols // 4                               # 16-byte chunks per row of dst
    row0 = k.b.pre(f"udiv i32 {k.tid}, {chunks}", "rr")
    k0 = k.b.pre(f"mul i32 {k.b.pre(f'urem i32 {k.tid}, {chunks}', 'rk')}, 4", "rk")
    step = k.threads // chunks                           # rows of dst between a thread's chunks
    dst0 = element_offset(k, dst, "0", row0, k0)
    if transpose:     # dst (n, k..k+3) <- src (k..k+3, n): a column of src, 4 rows apart by its pitch
        src0 = element_offset(k, src, "0", k0, row0)
        per_slot, per_value = step * src.elem_bytes, src.pitch
    else:             # dst (m, k..k+3) <- src (m, k..k+3): one 16-byte vector
        src0 = element_offset(k, src, "0", row0, k0)
        per_slot, per_value = step * src.pitch, src.elem_bytes
    for slot in range(dst.rows * chunks // k.threads):
        base = k.b.op(f"add i32 {src0}, {slot * per_slot}", "ro") if slot else src0
        values = []
        for i in range(4):
            at = k.b.op(f"add i32 {base}, {i * per_value}", "ro") if i else base
            v = k.b.op(f"load float, ptr addrspace(3) {pointer(k, at)}, align 4", "rv")
            values.append(_round_to_tf32(k, v, tile.tf32) if tile.tf32 else v)
        vec = "undef"
        for i, v in enumerate(values):
            vec = k.b.op(f"insertelement <4 x float> {vec}, float {v}, i32 {i}", "rw")
        at = k.b.op(f"add i32 {dst0}, {slot * step * dst.span}", "ro") if slot else dst0
        k.b.emit(f"store <4 x float> {vec}, ptr addrspace(3) {pointer(k, at)}, align 16")
    return dst


def _transfer(k: KernelLowering, layout: TmemAccLayout, base: str, values: Optional[list[str]],
              is_float: bool) -> list[str]:
    """tcgen05.st (values given) or tcgen05.ld (None) of this warp's fragments: per 16-row block, one
    16x256b access of all its 8-column blocks. Returns the registers (the loaded ones for ld)."""
    _, m, n = layout.shape
    _, rm, rn = layout.repeats
    _, w_m, w_n, _ = layout.warp_coords(k.b.pre, k.tid)
    count = rn * 4
    out: list[str] = []
    for mi in range(rm):
        row = k.b.pre(f"add i32 {k.b.pre(f'mul i32 {w_m}, {rm * 16}', 'tr')}, {mi * 16}", "tr") \
            if w_m != "0" else str(mi * 16)
        lane, col = _lane_and_column(k, m, n, row)
        if w_n != "0":
            col = k.b.pre(f"add i32 {col}, {k.b.pre(f'mul i32 {w_n}, {rn * 8}', 'tc')}", "tc")
        offset = k.b.pre(f"or i32 {k.b.pre(f'shl i32 {lane}, 16', 'tl')}, {col}", "to")
        addr = k.b.op(f"add i32 {base}, {offset}", "ta")
        if values is not None:
            bits = [k.b.op(f"bitcast float {v} to i32", "tb") if is_float else v
                    for v in values[mi * count:(mi + 1) * count]]
            ops = ", ".join(f"${i + 1}" for i in range(count))
            args = ", ".join([f"i32 {addr}"] + [f"i32 {v}" for v in bits])
            k.b.emit(f'call void asm sideeffect "tcgen05.st.sync.aligned.16x256b.x{rn}.b32 [$0], {{{ops}}};", '
                     f'"r{",r" * count},~{{memory}}"({args})')
            continue
        ret = "{" + ", ".join(["i32"] * count) + "}"
        ops = ", ".join(f"${i}" for i in range(count))
        res = k.b.op(f'call {ret} asm sideeffect "tcgen05.ld.sync.aligned.16x256b.x{rn}.b32 {{{ops}}}, '
                     f'[${count}];", "{"=r," * count}r,~{{memory}}"(i32 {addr})', "tl")
        for i in range(count):
            v = k.b.op(f"extractvalue {ret} {res}, {i}", "tv")
            out.append(k.b.op(f"bitcast i32 {v} to float", "tv") if is_float else v)
    return out


def _lane_and_column(k: KernelLowering, m: int, n: int, row: str) -> tuple[str, str]:
    """(TMEM lane, column) of accumulator row `row` (i32, a multiple of 16), column 0."""
    if m == 64:      # rows 16 q .. 16 q + 15 fill lanes 0-15 of quarter q
        if row.isdigit():
            return str(32 * (int(row) // 16)), "0"
        return k.b.pre(f"shl i32 {row}, 1", "tl"), "0"
    if m == 128:
        return row, "0"
    if row.isdigit():
        return str(int(row) % 128), str((int(row) // 128) * n)
    return k.b.pre(f"and i32 {row}, 127", "tl"), k.b.pre(f"mul i32 {k.b.pre(f'lshr i32 {row}, 7', 'tl')}, {n}", "tc")


def _offset_of(matrix: SharedMatrix, row: int, col: int) -> int:
    """Unswizzled byte offset (from the buffer) of constant (row, col): a descriptor's start."""
    per_atom = matrix.span // matrix.elem_bytes
    return (col // per_atom) * matrix.atom_bytes + row * matrix.span + (col % per_atom) * matrix.elem_bytes


def _descriptor(k: KernelLowering, matrix: SharedMatrix, offset: int, lbo: int) -> str:
    """The 64-bit shared-memory descriptor of `matrix` starting at byte `offset` of it."""
    off = str(offset + matrix.offset)
    if matrix.stage:
        off = k.b.op(f"add i32 {matrix.stage}, {off}", "wd")
    addr = k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, off)} to i32", "wd")
    shifted = k.b.op(f"lshr i32 {addr}, 4", "wd")
    start = k.b.op(f"zext i32 {k.b.op(f'and i32 {shifted}, 16383', 'wd')} to i64", "wd")
    stride = 8 * matrix.span           # from one group of 8 rows (K-major) or 8 K rows (N-major) to the next
    const = (_SWIZZLE_MODE[matrix.span] << 61) | _VERSION | ((stride >> 4) << 32) | (((lbo >> 4) & 0x3FFF) << 16)
    return k.b.op(f"or i64 {start}, {const}", "wd")
