"""mmaf / mmai on sm_90's warpgroup tensor cores: `wgmma.mma_async` m64nNk{8,16,32}.

tileaa/mma_forms.select_wgmma picks the mmas and the instruction (types, K), once, in layout assignment
(`LayoutAssignment.wgmma_shapes`), which the lowering reads. Operands:

* A from registers (the instruction's register form): a 16-bit tile already in the accumulator
  layout of this mma's warps (attention's probabilities): the accumulator blocks (m, 2kk) and
  (m, 2kk + 1) are A's K step kk, as for mma.sync (ops_mma._a_from_registers).
* Otherwise A and B are read by descriptor from shared matrices in a 128B/64B/32B swizzle
  (layout/shared_matrix.SharedMatrix `swizzled`, its span the stored row): a load copied there by cp.async
  (possibly pipelined, through unit reshapes and transposes), or a register tile stored there.
  K-major operands are read as they are; 16-bit operands also M/N-major (transpose bits). A load
  in another orientation (an N-major tf32/fp8/int8 B: those have no transposed form) was copied
  padded and is copied K-major here (kmajor_copy.py, shared with tcgen05), as NVIDIA's
  compiler does. An f32 tile read as tf32 to nearest even is read as stored: wgmma rounds so
  itself (mma_forms.WGMMA_TF32_ROUNDING). Read with another rounding, it is copied K-major and
  rounded on the way as its ftof says, or, K-major in a TMA-fed stage, rounded where it lies (no
  buffer of its own).

The accumulator is `MmaLayout(interleaved)`: warp w of warpgroup g holds rows 64 i + 16 (4 g + w)
of instruction i in the m16n8 fragment order, which is the register order of wgmma's m64nN
accumulator. Per mma: the operands' completion and a `fence.proxy.async` (they were written
through the generic proxy, wgmma reads through the async one) before the CTA barrier, then
`wgmma.fence`, one instruction per 64-row block and K step, `commit_group` and `wait_group 0`;
except in a pipelined K loop whose one wgmma only accumulates (tileas/stage_rings.group_in_flight): there it is
`wait_group 1`, as NVIDIA's, and the pipeline releases the stage the previous iteration's group
read only after that wait (pipelined_loop.mma_retired); `wait_group 0` after the loop.

Descriptors (PTX ISA, "Matrix Descriptor Format"): start address >> 4 in bits 0-13, leading and
stride byte offsets >> 4 in bits 16-29 and 32-45, swizzle mode in bits 62-63 (1: 128B, 2: 64B,
3: 32B). K-major: stride 8 spans between 8-row groups (the leading offset is unused); a K step
inside an atom moves the start address. M/N-major: leading offset = bytes from one column atom
to the next, stride 8 spans between 8-row (K) groups.
"""

from __future__ import annotations

from ..ir.core import Operation
from .async_copy import fence_async_proxy, is_ready, wait_for
from ..ir.record import replace
from .kernel import KernelLowering
from .kmajor_copy import copy_kmajor, place_kmajor, store_kmajor
from ..layout.shared_matrix import SharedMatrix, slot_bytes
from .llvm_text import llvm_type
from ..layout.encodings import MmaLayout
from .ops_mma import _a_from_registers, stage
from .smem import descriptor
from .values import SharedTileVal, TileRegs
from ..tileaa.mma_forms import WgmmaShape, reads_directly
from ..tileas.wgmma_operands import copy_turns, direct, operand_form, read_operands

_SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


class _Operand:
    """A or B as wgmma reads it: a swizzled shared matrix and whether K runs along its rows."""

    def __init__(self, matrix: SharedMatrix, kmajor: bool, chunk: "SharedTileVal | None" = None,
                 ringed: bool = False) -> None:
        self.matrix, self.kmajor = matrix, kmajor
        self.chunk = chunk     # a K-major copy made in K chunks (matrix: the chunk's buffer) of this tile
        self.ringed = ringed   # copied into this iteration's slot of a two-slot buffer (`_slot`)


def lower_wgmma(k: KernelLowering, op: Operation, lhs: object, rhs: object, acc: TileRegs) -> TileRegs:
    layout = acc.layout
    assert isinstance(layout, MmaLayout) and layout.interleaved
    assert k.assignment is not None and op in k.assignment.wgmma_ops   # layout assignment put it on wgmma (_mma)
    shape = k.assignment.wgmma_shapes[op]      # and chose its instruction
    _, m_size, n_size = layout.shape
    roles = read_operands(shape, lhs, rhs, layout)
    a_regs = len(roles) == 1
    k.remark("passed", "tensorcore", "RemarkTensorCoreMMA", "MMA operation successfully optimized to use Tensor Cores",
             op, Instruction="Tensor-core SM90 (wgmma.mma_async" + (", A from registers)" if a_regs else ")"),
             Shape=f"[64, {n_size}, {shape.k}]")
    shared = [v for v, _ in roles if isinstance(v, SharedTileVal)]
    copied = [v for v, role in roles if isinstance(v, SharedTileVal) and not direct(shape, v, role)]
    if not is_ready(shared) or copied:
        wait_for(k, shared)
    if copied:
        k.barrier()   # the copies landed everywhere; earlier readers of the K-major buffers are done
    turns = copy_turns(lhs, layout, shape)
    a = None if a_regs else _operand(k, op, shape, roles[0][0], "a")  # type: ignore[arg-type]
    b = _operand(k, op, shape, roles[-1][0], "b", turns=turns)  # type: ignore[arg-type]
    if not is_ready([v for v, _ in roles if not any(v is c for c in copied)]):
        fence_async_proxy(k)    # a K-major copy fenced its own writes (kmajor_copy.copy_kmajor)
    if copied or not is_ready([v for v, _ in roles]):
        k.barrier()
    k_size = lhs.type.shape[-1]  # type: ignore[attr-defined]
    warps = layout.warps[1]
    rm = layout.repeats[1]
    # the warp index broadcast from lane 0: ptxas then knows it warp-uniform and builds the descriptors in
    # uniform registers (as CUTLASS's canonical_warp_group_idx), not in vector ones moved over per wgmma
    k.b.declare("declare i32 @llvm.nvvm.shfl.sync.idx.i32(i32, i32, i32, i32)")
    warp = k.b.pre(f"call i32 @llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 {k.b.pre(f'lshr i32 {k.tid}, 5', 'warp')}, "
                   "i32 0, i32 31)", "warp")
    group_row = k.b.pre(f"mul i32 {k.b.pre(f'and i32 {warp}, {-4 & 0xFFFFFFFF}', 'wg')}, 16", "wg")  # 16 (4 g)
    regs_per = n_size // 2          # accumulators per thread and instruction: 64 x N / 128
    # a register A's fragments are made before the fence, and they and the accumulator pass through
    # it: the PTX ISA wants wgmma.fence between any register access and the wgmma reading the same
    # registers, and where LLVM put the conversions after it ptxas serialized the group (C7519, the
    # causal d128 attentions' P @ V)
    frags = {(mi, k0): _a_from_registers(k, lhs, mi, k0)  # type: ignore[arg-type]
             for k0 in range(0, k_size, shape.k) for mi in range(rm)} if a is None else {}
    regs, frags = _fence(k, list(acc.slots), llvm_type(acc.type.element), frags)  # type: ignore[arg-type]
    width = b.matrix.cols if b.chunk is not None else k_size
    for k0 in range(0, k_size, shape.k):
        if k0 and k0 % width == 0:   # B's next K chunk, once every group reading the last one is done
            k.b.declare("declare void @llvm.nvvm.wgmma.commit_group.sync.aligned()")
            k.b.emit("call void @llvm.nvvm.wgmma.commit_group.sync.aligned()")
            regs = list(wait_group(k, 0, TileRegs(acc.type, regs, layout)).slots)  # type: ignore[union-attr]
            k.barrier()
            copy_kmajor(k, b.chunk, "b", b.matrix, k0, turns=turns)  # type: ignore[arg-type]
            k.barrier()
            k.b.emit("call void @llvm.nvvm.wgmma.fence.sync.aligned()")
        b_desc = _descriptor(k, b.matrix, _offset(k, b, "0", k0 % width), b.kmajor)
        for mi in range(rm):
            chunk = regs[mi * regs_per:(mi + 1) * regs_per]
            if a is None:
                a_in = frags[(mi, k0)]
            else:
                row0 = k.b.op(f"add i32 {group_row}, {mi * warps * 16}", "wr") if mi else group_row
                a_in = [_descriptor(k, a.matrix, _offset(k, a, row0, k0), a.kmajor)]
            regs[mi * regs_per:(mi + 1) * regs_per] = _issue(k, shape, n_size, chunk, a_in, b_desc,
                                                             a is not None and not a.kmajor, not b.kmajor)
    k.b.declare("declare void @llvm.nvvm.wgmma.commit_group.sync.aligned()")
    k.b.emit("call void @llvm.nvvm.wgmma.commit_group.sync.aligned()")
    from .pipelined_loop import mma_retired, retiring_pipeline

    pipeline = retiring_pipeline(k, op)
    # one group stays in flight only where nothing but the next iteration's wgmma touches the
    # accumulator and every operand is read from its stage or from this iteration's slot of a K-major
    # copy (a copy of one slot is rewritten next time)
    rewritten = len(copied) > sum(o is not None and o.ringed for o in (a, b))
    wait_group(k, 1 if pipeline is not None and not rewritten else 0)
    if pipeline is not None:
        mma_retired(k, pipeline)   # the previous iteration's group is done: its stage may be refilled
    return TileRegs(acc.type, regs, layout)


def _fence(k: KernelLowering, acc: list[str], ty: str, frags: "dict[tuple[int, int], list[str]]"
           ) -> "tuple[list[str], dict[tuple[int, int], list[str]]]":
    """wgmma.fence with the accumulator (`ty` values) and the register-A fragments (i32) as tied
    operands: every write of them is ordered before it, and the wgmmas read what it hands back."""
    keys = list(frags)
    out = _tied(k, "wgmma.fence.sync.aligned;", [(ty, v) for v in acc] + [("i32", r) for key in keys for r in frags[key]])
    fenced, at = out[:len(acc)], len(acc)
    new: dict[tuple[int, int], list[str]] = {}
    for key in keys:
        new[key], at = out[at:at + len(frags[key])], at + len(frags[key])
    return fenced, new


def _tied(k: KernelLowering, text: str, values: "list[tuple[str, str]]") -> list[str]:
    """The asm `text` with `values` ((LLVM type, value) pairs) passed through it as tied operands (as
    CUTLASS's register fences do): what reads the results comes after it, what wrote them before."""
    ret = "{" + ", ".join(t for t, _ in values) + "}"
    constraints = ",".join([f"={'f' if t == 'float' else 'r'}" for t, _ in values] + [str(i) for i in range(len(values))])
    args = ", ".join(f"{t} {v}" for t, v in values)
    res = k.b.op(f'call {ret} asm sideeffect "{text}", "{constraints},~{{memory}}"({args})', "wt")
    return [k.b.op(f"extractvalue {ret} {res}, {i}", "wtv") for i in range(len(values))]


def wait_group(k: KernelLowering, pending: int, acc: "TileRegs | None" = None) -> "TileRegs | None":
    """wgmma.wait_group: at most `pending` committed groups of this warpgroup still in flight. With
    `acc`, the accumulator it waits for passes through the wait (tied asm operands, as CUTLASS's
    register fences do), so that nothing reading it is moved above the wait: LLVM would otherwise
    hoist the epilogue's conversions into the loop's exit, and ptxas then serializes every wgmma."""
    if acc is None:
        k.b.declare("declare void @llvm.nvvm.wgmma.wait_group.sync.aligned(i64 immarg)")
        k.b.emit(f"call void @llvm.nvvm.wgmma.wait_group.sync.aligned(i64 {pending})")
        return None
    ty = llvm_type(acc.type.element)  # type: ignore[arg-type]
    slots = _tied(k, f"wgmma.wait_group.sync.aligned {pending};", [(ty, v) for v in acc.slots])
    return TileRegs(acc.type, slots, acc.layout)


def _slot(k: KernelLowering, op: Operation, buffer: SharedMatrix) -> "tuple[SharedMatrix, bool]":
    """(this iteration's slot of K-major copy `buffer`, whether it is one of two): iteration i writes
    slot i % 2 while iteration i - 1's group, left in flight, reads the other. The plan's ring leaves
    the group in flight only over copies its loop gave two slots (stage_rings.group_in_flight, from
    the copies of the same plan, `SharedPlan.kmajor`)."""
    from .pipelined_loop import retiring_pipeline

    pipeline = retiring_pipeline(k, op)
    if pipeline is None:
        return buffer, False
    parity = k.b.op(f"and i32 {pipeline.counter}, 1", "ws")
    return replace(buffer, stage=k.b.op(f"mul i32 {parity}, {slot_bytes(buffer)}", "ws")), True


def _rounds_in_place(k: KernelLowering, shape: WgmmaShape, value: SharedTileVal, role: str) -> bool:
    """An f32 operand read as tf32 whose stage a TMA-fed pipeline filled, stored K-major as wgmma
    reads it: rounded where it lies (each thread rewrites the blocks it read; nothing else reads the
    stage before the loop releases it), so it needs no K-major buffer of its own (before_loop)."""
    m = value.matrix
    return bool(value.tf32) and m.swizzled and m.batch == 1 \
        and reads_directly(shape, role, value.transposed, m.rows, m.cols) \
        and any(p.tma and any(ring.offset == m.offset for ring in p.matrices.values())
                for p in k.active_pipelines.values())


def _operand(k: KernelLowering, op: Operation, shape: WgmmaShape, value: "SharedTileVal | TileRegs",
             role: str, turns: bool = True) -> _Operand:
    """The swizzled shared matrix wgmma reads `value` from (A: role "a", B: "b"); `turns`: whether a
    K-major copy may turn its lanes' rows (wgmma_operands.copy_turns)."""
    form = operand_form(op, shape, value, role, k.wgmma_buffers,
                        lambda: _rounds_in_place(k, shape, value, role))  # type: ignore[arg-type]
    if form == "direct":
        assert isinstance(value, SharedTileVal)
        return _Operand(value.matrix, value.transposed if role == "b" else not value.transposed)
    if form == "rounded":   # the stage becomes its own K-major copy
        return _Operand(copy_kmajor(k, value, role, value.matrix, turns=turns), True)  # type: ignore[arg-type]
    if form == "given":
        buffer = k.wgmma_buffers[(op, role)]
        chunked = buffer.cols < value.type.shape[0 if role == "b" else -1]
        buffer, ringed = _slot(k, op, buffer)
        return _Operand(copy_kmajor(k, value, role, buffer, turns=turns), True, value if chunked else None, ringed)  # type: ignore
    if form == "copy":      # a buffer of its own, rewritten once the group that read it is done
        return _Operand(copy_kmajor(k, value, role, None, turns=turns), True)  # type: ignore[arg-type]
    if form == "stage":   # A, or a 16-bit B that stays N-major (K, N) as the tile is
        return _Operand(stage(k, value, role, swizzled=True), role == "a")  # type: ignore[arg-type]
    return _Operand(store_kmajor(k, value, "b", None), True)  # type: ignore[arg-type]  # transposed: no N-major form


def before_loop(k: KernelLowering, loop: Operation) -> None:
    """Before a `for` (and its pipeline's stages) takes shared memory: the K-major copy buffers of
    the wgmmas inside it, as plan-shared-memory decided them (`SharedPlan.kmajor`:
    tileas/kmajor_copies.loop_copies, beside the buffers it placed before the loop, its depth leaving
    room for them). A plan without the loop's is an internal error: the lowering does not decide."""
    if k.assignment is None or not k.assignment.wgmma_ops:
        return      # no wgmma to copy operands for
    for copy in k.planned.decided("kmajor", loop, "K-major copies for the loop"):
        k.wgmma_buffers[copy.key] = place_kmajor(k, copy.matrix, "kmajor", copy.slots, copy.key)


def _offset(k: KernelLowering, operand: _Operand, x0: str, k0: int) -> "int | str":
    """Unswizzled byte offset (from the buffer) of the operand's element (M/N index x0, K index
    k0): the descriptor's start. x0 is "0" or an i32 multiple of 64 (a warpgroup's first row)."""
    m = operand.matrix
    per_atom = m.span // m.elem_bytes
    if operand.kmajor:   # stored (x, k)
        const = (k0 // per_atom) * m.atom_bytes + (k0 % per_atom) * m.elem_bytes
        scale = m.span
    else:                # stored (k, x): x0 is a multiple of the atom's columns
        const = k0 * m.span
        scale = m.atom_bytes // per_atom
    if x0 == "0":
        return const
    rows = k.b.op(f"mul i32 {x0}, {scale}", "wa")
    return k.b.op(f"add i32 {rows}, {const}", "wa") if const else rows


def _descriptor(k: KernelLowering, matrix: SharedMatrix, offset: "int | str", kmajor: bool) -> str:
    """The 64-bit matrix descriptor of `matrix` starting at byte `offset` of it."""
    lbo = 16 if kmajor else matrix.atom_bytes
    fields = (_SWIZZLE_MODE[matrix.span] << 62) | (((8 * matrix.span) >> 4) << 32) | (((lbo >> 4) & 0x3FFF) << 16)
    return descriptor(k, [offset, matrix.stage, matrix.offset], fields)


def _issue(k: KernelLowering, shape: WgmmaShape, n: int, acc: list[str], a: list[str], b_desc: str,
           trans_a: bool, trans_b: bool) -> list[str]:
    """One wgmma.mma_async m64nNk accumulating into `acc` (N / 2 registers per thread); `a` is
    one descriptor or the 4 A registers of the register form."""
    count = len(acc)
    outs = ", ".join(f"${i}" for i in range(count))
    if len(a) == 1:
        a_text, a_cons, a_args = f"${count}", ["l"], [f"i64 {a[0]}"]
    else:
        a_text = "{" + ", ".join(f"${count + i}" for i in range(len(a))) + "}"
        a_cons, a_args = ["r"] * len(a), [f"i32 {r}" for r in a]
    b_pos = count + len(a)
    if shape.acc_type == "i32":
        imms = ""                                   # integer forms take no scale or transpose
    elif shape.transposable:
        imms = ", 1, 1" + (f", {int(trans_a)}" if len(a) == 1 else "") + f", {int(trans_b)}"
    else:
        imms = ", 1, 1"
    text = (f"{{ .reg .pred p; setp.ne.b32 p, 1, 0; wgmma.mma_async.sync.aligned.m64n{n}k{shape.k}.{shape.types} "
            f"{{{outs}}}, {a_text}, ${b_pos}, p{imms}; }}")
    reg = "f" if shape.acc_type == "float" else "r"
    constraints = ",".join([f"={reg}"] * count + a_cons + ["l"] + [str(i) for i in range(count)])
    ty = shape.acc_type
    ret = "{" + ", ".join([ty] * count) + "}"
    args = ", ".join(a_args + [f"i64 {b_desc}"] + [f"{ty} {v}" for v in acc])
    res = k.b.op(f'call {ret} asm sideeffect "{text}", "{constraints}"({args})', "wg")
    return [k.b.op(f"extractvalue {ret} {res}, {i}", "wacc") for i in range(count)]
