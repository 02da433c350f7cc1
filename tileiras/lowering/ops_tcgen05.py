"""mmaf / mmai on Blackwell's fifth-generation tensor cores (sm_100 / sm_103): `tcgen05.mma`.

Which mmas run here, with which accumulator layout, is decided at nv_tileas (tileas/tcgen05_select.py,
asked by assign_layouts) and where their columns lie in tensor memory too (tileas/tmem_columns.py);
this module translates them. cp.async copies the loads into swizzled buffers read as stored (A (M, K)
K-major or (K, M) M-major, B (K, N) N-major or (N, K) K-major: the instruction descriptor's transpose
bits; tf32 operands are copied swizzled too, then rounded in place by the epilogue warps of a
warp-specialized loop (warp_specialize_tcgen05.py) or, elsewhere, copied K-major and rounded,
kmajor_copy.py); block-scaled fp8 and fp4 (ops_blockscale.py: fp4's A and B, wherever they are,
packed two to a byte by the mma, fp4_pack.py); M = 256 is two M = 128 instructions side by side in
tensor memory.

A register A (attention's P in P @ V) goes where NVIDIA's compiler puts it: to tensor memory
(`_a_in_tmem`: tcgen05.st of the packed fragments, 16-bit or 8-bit, the MMA's [a-tmem] form,
over the columns of the scores) when it is in the layout of an M = 128 or 256 tcgen05
accumulator (the scores S = Q K^T it was computed from); otherwise (M = 64, whose A has no
lane-per-row image in tensor memory; other layouts) to a swizzled shared buffer read by descriptor.

Per mma op, thread 0 issues the MMAs (one per K step and 128-row half) and commits them to the
kernel's mbarrier (tmem.py); every thread waits for that phase, after which the operands' buffers
may be refilled. The accumulator lives in tensor memory: inside a `for` that carries it and reads
it nowhere else but in a multiply that rescales it (`rescale`: attention's O, corrected by the
softmax), it stays there for the whole loop: the first iteration's first MMA ignores the old
contents when the initial value is zero (else `before_loop` stores it, `tcgen05.st`), the
multiply is done in tensor memory a few columns at a time (`_rescale_in_tmem`, NVIDIA's
correction step), and it is read into registers once after the loop (`after_loop`). Elsewhere
the op stores its accumulator (unless zero: then the first MMA ignores the old contents), runs
and reads it back. Registers <-> tensor memory use the 16x256b shape,
which hands a warp 16 lanes x 8 columns per repetition in exactly the m16n8 accumulator fragment
(lane l: row l/4 and l/4 + 8, columns 2 (l%4) and +1): the registers keep `MmaLayout`'s fragment
order and the epilogue is unchanged. `TmemAccLayout` only places the warps: warp w reaches TMEM
lanes 32 (w % 4) ..+31, so its rows are the ones the MMA wrote there: rows 32 (w % wm) .. (M = 128
and 256: lane = row mod 128, the second half in columns N..2N-1), 32 (w % 4) + 16 (w / 4 % 2) ..
(M = 128 with 8 or more warps: two warps share a quarter, 16 rows each, so that a row is in one
warp, as the softmax's row reductions want) or 16 (w % 4) .. (M = 64: the rows fill lanes 0-15 of
each quarter); the remaining warp factor splits the columns.

Instruction descriptor (PTX ISA "Instruction descriptor", kind::f16/tf32/f8f6f4/i8): D format in
bits 4-5 (1 f32, 2 s32), A and B formats in 7-9 and 10-12, transpose A / B in 15 / 16, N >> 3 in
17-22, M >> 4 in 24-28. Shared-memory descriptor (sm_100 "Shared memory descriptor"): start >> 4
in 0-13, leading / stride byte offsets >> 4 in 16-29 / 32-45, the fixed version 0b001 in 46-48,
base offset 0 (buffers are 1024-byte aligned), swizzle mode in 61-63 (2, 4, 6: 128-, 64-, 32-byte).
Rows of 32 or 64 bytes (K = 32 of 16-bit A, 8-bit operands) use the narrower swizzles, whose atom
is the whole row (layout/shared_matrix.SharedMatrix.span); the stride byte offset is 8 rows of an atom.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..layout.encodings import MmaLayout, PairAccLayout, TmemAccLayout
from ..tileaa.mma_forms import Kind, kind_of
from ..tileaa.mma_operands import carried_factor, rescale, resident_loop
from ..tileas.tcgen05_operands import a_in_tmem, loop_restaged, operand_forms, reads_in_place
from ..tileas.tcgen05_select import RESTAGED
from ..tileas.tmem_columns import columns_of, epoch, epoch_groups, per_column, plan, tmem_a_columns
from .async_copy import fence_async_proxy, is_ready, wait_for
from .kernel import KernelLowering
from ..layout.index_math import warp_coords
from .llvm_text import llvm_type
from .smem import descriptor
from ..layout.shared_matrix import SharedMatrix
from .tmem import tensor_memory, wait_mbarrier
from .values import SharedTileVal, TileRegs


_SWIZZLE_MODE = {128: 2, 64: 4, 32: 6, 16: 0}   # sm_100 descriptor swizzle mode per swizzle span (bytes)
_VERSION = 1 << 46


def _reuses_columns(k: KernelLowering, at: Operation) -> bool:
    """`at` (a `for` or an mma) opens an epoch after another epoch's mmas: it is the outermost
    `for` around the epoch's first mma (else that mma), so that its first tensor-memory access
    waits for every warp's last reads of the earlier epoch's columns (a CTA barrier) once."""
    groups = epoch_groups(k.assignment.tcgen05_layouts)  # type: ignore[union-attr]
    owner = epoch(at)
    if owner not in groups or list(groups).index(owner) == 0:
        return False
    first = opens = groups[owner][0]
    while first is not owner:
        first = first.parent.parent.parent  # type: ignore[union-attr]
        if first.name == "cuda_tile.for":
            opens = first
    return at is opens


def _same_owners(k: KernelLowering, op: Operation) -> bool:
    """Whether every tensor-memory cell `op` stores to before its MMAs (its accumulator, its A)
    is read by the same warp in the other mmas of its epoch that share those columns (`plan`), so
    that each warp's own tcgen05.wait::ld orders its reads before its stores and no CTA barrier
    is needed: all of them place their warps alike (same M and rows per warp) with whole rows per
    warp, and at M = 256 everything stored starts at the same column with halves as wide (so
    that a cell's row is in the same half for all: attention's P over the S it came from)."""
    layouts = k.assignment.tcgen05_layouts  # type: ignore[union-attr]
    starts, _ = plan(layouts)
    group = epoch_groups(layouts)[epoch(op)]

    def items(o: Operation) -> list[tuple[int, int]]:     # (first column, half stride) of what o stores
        _, m, n = layouts[o].shape
        kdim = o.operand("lhs").type.shape[-1]  # type: ignore[union-attr]
        a = [(starts[o][1], kdim)] if tmem_a_columns(o, m) else []
        return a if resident_loop(o) is not None else [(starts[o][0], n)] + a

    shared = {(layouts[o].shape[1], layouts[o].warps) for o in group}
    if len(shared) != 1 or layouts[op].warps[2] != 1:
        return False
    if layouts[op].shape[1] != 256:
        return True
    return len({item for o in group for item in items(o)}) <= 1


def _region(k: KernelLowering, op: Operation, a: bool = False) -> tuple[str, int]:
    """(i32 tensor-memory address of op's accumulator, or of its A with `a`; total columns the
    kernel allocates)."""
    assert k.assignment is not None
    starts, total = plan(k.assignment.tcgen05_layouts)
    start = starts[op][1 if a else 0]
    tm = tensor_memory(k, total)
    return (k.b.pre(f"add i32 {tm.address}, {start}", "tr") if start else tm.address), total


def before_loop(k: KernelLowering, loop: Operation) -> None:
    """Before a `for` (and its pipeline's stages) takes shared memory: the restaging buffers of the
    tcgen05 mmas inside it, so that the pipeline's depth leaves room for them. Then the nonzero
    initial values of the accumulators it keeps in tensor memory go there (the registers die
    here, and a loop that runs no iteration leaves them there for `after_loop`), after a CTA
    barrier where the loop's columns were an earlier loop's (`epoch`: every warp's reads of
    them are done)."""
    from .kmajor_copy import kmajor_buffer

    if k.assignment is None or not getattr(k.assignment, "tcgen05_layouts", None):
        return
    split = getattr(k, "warp_split", None)
    if split is not None and split.loop is loop and split.mmas:
        return      # the warp-specialized loop rounds tf32 operands in their stages (no restaging)
    for op in loop_restaged(k.assignment, loop, k.tmem_buffers, split):
        k.tmem_buffers[op] = tuple(kmajor_buffer(k, op.operand(n).type.shape, role, 4,  # type: ignore[union-attr]
                                                 subject=(op, role))
                                   for n, role in (("lhs", "a"), ("rhs", "b")))
    if _reuses_columns(k, loop):
        k.barrier()
    stored = False
    for op, layout in k.assignment.tcgen05_layouts.items():
        found = resident_loop(op)
        if found is None or found[0] is not loop:
            continue
        init = k.tile(loop.operand_group("initValues")[found[1]])
        if not _is_zero(init):
            _transfer(k, layout, _region(k, op)[0], list(init.slots), kind_of(op).d == 1)  # type: ignore[union-attr]
            stored = True
    if stored:
        k.b.emit('call void asm sideeffect "tcgen05.wait::st.sync.aligned;", "~{memory}"()')


def after_loop(k: KernelLowering, loop: Operation) -> None:
    """After a `for` whose mmas kept their accumulators in tensor memory: read them into registers
    (the loop's results); a loop that ran no iteration gives its initial values (zero: a select;
    others are in tensor memory, `before_loop`)."""
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
        if not _is_zero(init):    # stored before the loop: tensor memory has the result either way
            k.values[loop.results[index]] = TileRegs(init.type, regs, layout)
            continue
        lb = k.tile(loop.operand("lowerBound")).slots[0]  # type: ignore[arg-type]
        ub = k.tile(loop.operand("upperBound")).slots[0]  # type: ignore[arg-type]
        ity = llvm_type(loop.operand("lowerBound").type.element)  # type: ignore[union-attr]
        ran = k.b.op(f"icmp {'ult' if loop.attributes.get('unsignedCmp', False) else 'slt'} {ity} {lb}, {ub}", "tran")
        lty = "float" if kind.d == 1 else "i32"
        merged = [k.b.op(f"select i1 {ran}, {lty} {r}, {lty} {i}", "tacc") for r, i in zip(regs, init.slots)]
        k.values[loop.results[index]] = TileRegs(init.type, merged, layout)


def _is_zero(tile: TileRegs) -> bool:
    return all(s in ("0", "0.000000e+00", "0.0", "0x0000000000000000") for s in tile.slots)


def issued_m(m: int, pair: bool) -> int:
    """The M of one tcgen05.mma for an accumulator of `m` rows: a CTA pair's both CTAs' rows, else at
    most 128 (M = 256 is two instructions side by side)."""
    return 2 * m if pair else min(m, 128)


def instruction(kind: Kind, m: int, n: int, a_m_major: bool = False, b_n_major: bool = True) -> int:
    """The 32-bit instruction descriptor (transpose A: A stored M-major; transpose B: B stored N-major)."""
    return (kind.d << 4) | (kind.a << 7) | (kind.b << 10) | (a_m_major << 15) | (b_n_major << 16) \
        | ((n >> 3) << 17) | ((m >> 4) << 24)


def describe(op: Operation, layout: MmaLayout, pair: bool = False) -> tuple[str, str]:
    """(Instruction, Shape) of the remark: the instruction and its M x N x K (`pair`: a CTA pair's)."""
    kind = kind_of(op)
    assert kind is not None
    _, m, n = layout.shape
    scaled = ".block_scale" if op.name == "cuda_tile.mmaf_scaled" else ""
    return f"Tensor-core SM100 (tcgen05.mma.cta_group::{2 if pair else 1}.kind::{kind.name}{scaled})", \
        f"[{issued_m(m, pair)}, {n}, {kind.k}]"


def lower_tcgen05(k: KernelLowering, op: Operation, lhs: object, rhs: object, acc: TileRegs) -> TileRegs:
    """The MMAs of one mma op. Inside a loop that keeps the accumulator in tensor memory
    (`resident_loop`), the registers are neither stored nor loaded: `before_loop` stores the
    initial value (or, when it is zero, the first iteration's MMA ignores the old contents), a
    rescaling multiply is done in tensor memory (`_rescale_in_tmem`), and `after_loop` reads the
    result; the op's register result is its (unchanged) carried input. Elsewhere a zero
    accumulator is not stored either (the first MMA ignores the old contents). A register A goes
    to tensor memory (`_a_in_tmem`, NVIDIA's form for attention's P @ V) or, where its layout does
    not fit that, to a swizzled shared buffer."""
    from .ops_mma import stage

    split = getattr(k, "warp_split", None)
    # the consumers' part only while the split's loop runs pipelined: a loop whose stages the plan then
    # could not place (an attention with a 4-trip K loop at M = 64, found by tests/fuzz_text.py) runs
    # unsplit, and its mmas are issued here as any other
    if split is not None and split.form == "attention" and op in split.mmas and split.loop in k.active_pipelines:
        from .warp_specialize_tcgen05 import consume_attention_mma

        return consume_attention_mma(k, op, lhs, acc)  # type: ignore[return-value]
    layout = acc.layout
    assert isinstance(layout, TmemAccLayout)
    kind = kind_of(op)
    assert kind is not None
    is_float = kind.d == 1
    restaged = kind.name in RESTAGED
    _, m, n = layout.shape
    address, _ = _region(k, op)
    stores = resident_loop(op) is None and not _is_zero(acc) or bool(tmem_a_columns(op, m)) \
        and isinstance(lhs, TileRegs)
    if _reuses_columns(k, op) or stores and not _same_owners(k, op):
        k.barrier()    # every warp's reads of the columns this op stores to are done
    a_form, b_form = operand_forms(k, op, lhs, rhs)
    a_tmem = _a_in_tmem(k, op, lhs)
    packed = a_form == "packed"
    if restaged:
        a, b = _restaged(k, op, lhs, rhs)
    elif packed:
        from .fp4_pack import pack

        kdim = op.operand("lhs").type.shape[-1]  # type: ignore[union-attr]
        a, b = _Packed(pack(k, lhs, "a", m, kdim), True), _Packed(pack(k, rhs, "b", n, kdim), True)  # type: ignore[arg-type]
    else:
        a = None if a_form == "tmem" else _shared(k, lhs, "a") if a_form == "shared" \
            else _Operand(stage(k, lhs, "a", swizzled=True), True)  # type: ignore[arg-type]
        b = _shared(k, rhs, "b") if b_form == "shared" \
            else _Operand(stage(k, rhs, "b", swizzled=True), False)  # type: ignore[arg-type]
    tm = tensor_memory(k, 0)
    resident = resident_loop(op)
    accumulate = "1"     # i32: the first MMA adds to what tensor memory holds
    if resident is None:
        if _is_zero(acc):
            accumulate = "0"
        else:
            _transfer(k, layout, address, list(acc.slots), is_float)
    else:    # a nonzero initial value was stored before the loop (`before_loop`)
        loop, index = resident
        scale = rescale(op)
        carried = acc if scale is None else k.tile(carried_factor(scale)[0])  # type: ignore[index]
        if _is_zero(k.tile(loop.operand_group("initValues")[index])):
            iv = k.tile(loop.regions[0].block.arguments[0]).slots[0]
            lb = k.tile(loop.operand("lowerBound")).slots[0]  # type: ignore[arg-type]
            ity = llvm_type(loop.operand("lowerBound").type.element)  # type: ignore[union-attr]
            later = k.b.op(f"icmp ne {ity} {iv}, {lb}", "tlater")
            accumulate = k.b.op(f"zext i1 {later} to i32", "tacc")
            if scale is not None:    # the first iteration's MMA ignores what tensor memory holds
                k.guarded(later, lambda: _rescale_in_tmem(k, scale, layout, address) or None)
        elif scale is not None:
            _rescale_in_tmem(k, scale, layout, address)
    scales = None
    if op.name == "cuda_tile.mmaf_scaled":   # the scale factors (ops_blockscale), after the accumulator
        from .ops_blockscale import Tcgen05Scales

        scales = Tcgen05Scales(k, op, k.b.op(f"add i32 {address}, {columns_of(m, n)}", "tsf"), m, n)
    if a_tmem is not None or resident is None and accumulate == "1":
        k.b.emit('call void asm sideeffect "tcgen05.wait::st.sync.aligned;", "~{memory}"()')
    if restaged:
        fence_async_proxy(k)
    elif not packed and not is_ready([v for v in (lhs, rhs) if a_tmem is None or v is rhs]):
        wait_for(k, [lhs, rhs])
        fence_async_proxy(k)
    k.b.emit('call void asm sideeffect "tcgen05.fence::before_thread_sync;", "~{memory}"()')
    k.barrier()
    from . import cta_pair

    pair = cta_pair.runs(k, op)     # the leader issues for both CTAs
    if pair and scales is not None:   # ...once both CTAs restaged their scales (the leader's tcgen05.cp reads both)
        cta_pair.scales_restaged(k)
    idesc = instruction(kind, issued_m(m, pair), n, a is not None and not a.kmajor, not b.kmajor)

    from .pipelined_loop import mma_retired, retiring_pipeline

    in_flight = retiring_pipeline(k, op)
    committed = in_flight is not None and in_flight.committed
    # left in flight: committed to the stage's empty mbarrier, which its release then is
    done = mbarrier_address(k, in_flight) if committed else tm.mbarrier

    def issue() -> None:
        k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
        if scales is not None:
            scales.copy()
        issue_mmas(k, op, a, b, a_tmem, address, accumulate, idesc, scales)
        commit(k, done, pair)

    k.guarded(cta_pair.issuer(k, k.b.op(f"icmp eq i32 {k.tid}, 0", "ti"), op), lambda: issue() or None)
    if committed:   # iteration i - 1's stage, once its MMA has read it, refilled
        assert in_flight is not None and resident is not None
        mma_retired(k, in_flight)
        return TileRegs(acc.type, list(carried.slots), layout)
    wait_mbarrier(k, tm)   # the operands' buffers are free again, the accumulator is complete
    if resident is not None:    # the registers go round the loop unchanged (and unused)
        return TileRegs(acc.type, list(carried.slots), layout)
    k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
    regs = _transfer(k, layout, address, None, is_float)
    k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
    return TileRegs(acc.type, regs, layout)


def mbarrier_address(k: KernelLowering, p: object) -> str:
    """The empty mbarrier of the stage pipeline `p` reads this iteration."""
    from . import mbarrier

    read = k.b.op(f"urem i32 {p.counter}, {p.stages}", "pf")  # type: ignore[attr-defined]
    return mbarrier.address(k, p.empty, read)  # type: ignore[attr-defined]


def mmas_done(k: KernelLowering) -> None:
    """After a loop that left its MMAs in flight (pipelined_loop `committed`): the issuing thread
    commits once more, and every thread waits for that commit: every MMA issued before it has
    completed (the accumulator, and the stages' last releases, have landed)."""
    tm = tensor_memory(k, 0)
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "ti"), lambda: commit(k, tm.mbarrier) or None)
    wait_mbarrier(k, tm)


def issue_mmas(k: KernelLowering, op: Operation, a: "Optional[_Operand]", b: "_Operand", a_tmem: Optional[str],
               address: str, accumulate: str, idesc: int, scales: object = None) -> None:
    """The calling thread's tcgen05.mma instructions of `op` (one per K step and 128-row half) on
    operands `a` (None: A in tensor memory at `a_tmem`) and `b`, into the accumulator at
    tensor-memory `address`; `accumulate` (i32): whether the first adds to what tensor memory
    holds. Also the warp-specialized MMA warp's body (warp_specialize_tcgen05.py)."""
    from .cta_pair import runs

    kind = kind_of(op)
    assert kind is not None
    _, m, n = k.assignment.tcgen05_layouts[op].shape  # type: ignore[union-attr]
    group = 2 if runs(k, op) else 1
    for k0 in range(0, op.operand("lhs").type.shape[-1], kind.k):  # type: ignore[union-attr]
        b_desc = b.descriptor(k, 0, k0)
        for half in range(2 if m == 256 else 1):
            d = address if half == 0 else k.b.op(f"add i32 {address}, {n}", "td")
            enable = accumulate if k0 == 0 else "1"
            if a is None:    # [a-tmem]: 2 or 4 elements per column, the second half K columns on
                column = k0 // per_column(kind) + half * op.operand("lhs").type.shape[-1]  # type: ignore[union-attr]
                a_at = k.b.op(f"add i32 {a_tmem}, {column}", "ta") if column else a_tmem
                a_text, a_cons, a_arg = "[$1]", "r", f"i32 {a_at}"
            else:
                a_desc = a.descriptor(k, 128 * half, k0)
                if scales is not None:
                    scales.mma(d, a_desc, b_desc, idesc, k0, half, enable)  # type: ignore[attr-defined]
                    continue
                a_text, a_cons, a_arg = "$1", "l", f"i64 {a_desc}"
            k.b.emit(f'call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $4, 0; '
                     f'tcgen05.mma.cta_group::{group}.kind::{kind.name} [$0], {a_text}, $2, $3, p; }}", '
                     f'"r,{a_cons},l,r,r,~{{memory}}"(i32 {d}, {a_arg}, i64 {b_desc}, i32 {idesc}, i32 {enable})')


def commit(k: KernelLowering, mbarrier: str, pair: bool = False) -> None:
    """The calling thread's tcgen05 operations so far arrive once on the mbarrier at `mbarrier` when
    done (`pair`: at its offset in both CTAs of the pair, cta_pair.py)."""
    if pair:
        from .cta_pair import commit as pair_commit

        pair_commit(k, mbarrier)
        return
    k.b.emit(f'call void asm sideeffect "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 '
             f'[$0];", "r,~{{memory}}"(i32 {mbarrier})')


def region(k: KernelLowering, op: Operation) -> str:
    """i32 tensor-memory address of `op`'s accumulator."""
    return _region(k, op)[0]


class _Operand:
    """A or B in shared memory as the MMA reads it: a swizzled matrix, K-major (stored (M or N, K))
    or M/N-major (stored (K, M or N): the instruction descriptor's transpose bit)."""

    def __init__(self, matrix: SharedMatrix, kmajor: bool) -> None:
        self.matrix, self.kmajor = matrix, kmajor

    def descriptor(self, k: KernelLowering, x0: int, k0: int) -> str:
        """The shared-memory descriptor of the block at M/N index x0, K index k0."""
        if self.kmajor:
            return _descriptor(k, self.matrix, _offset_of(self.matrix, x0, k0), 16)
        return _descriptor(k, self.matrix, _offset_of(self.matrix, k0, x0), self.matrix.atom_bytes, mn_major=True)


class _Packed(_Operand):
    """A 4-bit operand packed two to a byte (fp4_pack.py): its K steps, in elements, are half as
    many bytes."""

    def descriptor(self, k: KernelLowering, x0: int, k0: int) -> str:
        return super().descriptor(k, x0, k0 // 2)


def _shared(k: KernelLowering, value: SharedTileVal, role: str) -> _Operand:
    """A shared operand as the MMA reads it: its own buffer where that is swizzled (`feeds`), else
    (a buffer that other readers share in the plain layout) a K-major swizzled copy."""
    if reads_in_place(value):
        return _Operand(value.matrix, value.transposed == (role == "b"))
    from .kmajor_copy import copy_kmajor

    if not is_ready([value]):
        wait_for(k, [value])
    k.barrier()   # the source landed everywhere; the previous MMA's reads of a copy finished before its wait
    return _Operand(copy_kmajor(k, value, role, None), True)


def _a_in_tmem(k: KernelLowering, op: Operation, lhs: object) -> Optional[str]:
    """A register A that this MMA reads from tensor memory (columns reserved by `tmem_a_columns`):
    in the fragment layout of an M = 128 or 256 tcgen05 accumulator (each warp's rows in its own
    lane quarter; M = 256: rows 128.. in the next K / 2 columns), each thread packs its two 16-bit
    neighbours of a row into one 32-bit column and stores them with the 16x128b shape, whose
    register r of thread l is lane l/4 + 8 (r % 2), column l % 4 + 4 (r / 2): exactly the packed
    m16n8 fragments (rows l/4 and l/4 + 8, columns 2 (l % 4) and + 1 of each 8-column block).
    8-bit elements: four to a column, gathered within each quad of lanes (`_quad_words`).
    The i32 address of A's first column, or None (A is in shared memory)."""
    if not a_in_tmem(k, op, lhs):
        return None
    base = _region(k, op, a=True)[0]
    _transfer(k, lhs.layout, base, list(lhs.slots), False, llvm_type(lhs.type.element))  # type: ignore
    return base


def _quad_words(k: KernelLowering, chunk: list[str]) -> list[str]:
    """The 16x128b words of one 16-row block of 8-bit fragments (`chunk`: per 8-column block j,
    [top c, c + 1, bottom c, c + 1] with c = 2 (l % 4)): the word of column 4 p + q (q = l % 4)
    holds columns 16 p + 4 q .. + 3 of a row, the pairs of quad lanes 2 (q % 2) and + 1 of block
    2 p + q / 2; each lane packs its pairs (top | bottom << 16) and reads the two it needs of
    both blocks of a pair (four shuffles), then joins them: words [top, bottom] per pair p."""
    name = "llvm.nvvm.shfl.sync.idx.i32"
    k.b.declare(f"declare i32 @{name}(i32, i32, i32, i32)")
    lane = k.b.pre(f"and i32 {k.tid}, 31", "tq")
    q = k.b.pre(f"and i32 {lane}, 3", "tq")
    odd = k.b.pre(f"and i32 {q}, 1", "tq")
    src0 = k.b.pre(f"or i32 {k.b.pre(f'and i32 {lane}, 28', 'tq')}, {k.b.pre(f'shl i32 {odd}, 1', 'tq')}", "tq")
    src1 = k.b.pre(f"or i32 {src0}, 1", "tq")
    low = k.b.pre(f"icmp ult i32 {q}, 2", "tq")

    def byte(v: str, shift: int) -> str:
        wide = k.b.op(f"zext i8 {v} to i32", "tq")
        return k.b.op(f"shl i32 {wide}, {shift}", "tq") if shift else wide

    def word(j: int) -> str:       # this lane's pairs of block j: top | bottom << 16
        parts = [byte(chunk[4 * j + i], 8 * i) for i in range(4)]
        return k.b.op(f"or i32 {k.b.op(f'or i32 {parts[0]}, {parts[1]}', 'tq')}, "
                      f"{k.b.op(f'or i32 {parts[2]}, {parts[3]}', 'tq')}", "tq")

    def shfl(v: str, src: str) -> str:
        return k.b.op(f"call i32 @{name}(i32 -1, i32 {v}, i32 {src}, i32 31)", "tq")

    out = []
    for p in range(len(chunk) // 8):
        a, b = word(2 * p), word(2 * p + 1)
        w0 = k.b.op(f"select i1 {low}, i32 {shfl(a, src0)}, i32 {shfl(b, src0)}", "tq")
        w1 = k.b.op(f"select i1 {low}, i32 {shfl(a, src1)}, i32 {shfl(b, src1)}", "tq")
        top = k.b.op(f"or i32 {k.b.op(f'and i32 {w0}, 65535', 'tq')}, {k.b.op(f'shl i32 {w1}, 16', 'tq')}", "tq")
        bottom = k.b.op(f"or i32 {k.b.op(f'lshr i32 {w0}, 16', 'tq')}, "
                        f"{k.b.op(f'and i32 {w1}, -65536', 'tq')}", "tq")
        out += [top, bottom]
    return out


def _restaged(k: KernelLowering, op: Operation, lhs: object, rhs: object) -> "tuple[_Operand, _Operand]":
    """A and B of a tf32 mma copied K-major (kmajor_copy.py), rounded as their ftof says."""
    from .kmajor_copy import copy_kmajor, kmajor_buffer, store_kmajor

    if op not in k.tmem_buffers:
        k.tmem_buffers[op] = tuple(kmajor_buffer(k, op.operand(n).type.shape, role, 4)  # type: ignore[union-attr]
                                   for n, role in (("lhs", "a"), ("rhs", "b")))
    out = []
    for tile, role, dst in zip((lhs, rhs), "ab", k.tmem_buffers[op]):
        if isinstance(tile, TileRegs):
            out.append(_Operand(store_kmajor(k, tile, role, dst), True))
            continue
        if not is_ready([tile]):
            wait_for(k, [tile])
            k.barrier()   # the copies landed everywhere (the previous MMA's reads of dst completed
            #               before every thread passed its mbarrier wait)
        out.append(_Operand(copy_kmajor(k, tile, role, dst), True))  # type: ignore[arg-type]
    return out[0], out[1]


_RESCALE_REPS = 8     # 8-column blocks per tcgen05.ld / st of the in-place rescale (32 registers)


def _rescale_in_tmem(k: KernelLowering, scale: Operation, layout: TmemAccLayout, base: str) -> None:
    """Multiply the accumulator in tensor memory by the factor of `scale` (a tile in the
    accumulator's layout, element by element: the softmax's per-row correction broadcast along
    rows), a few 8-column blocks at a time, so that the accumulator never occupies registers whole:
    once the previous MMAs completed (the caller's mbarrier wait), each thread reads, multiplies and
    writes back its own fragments, with `fmul` as the multiply's lowering (ops_arith)."""
    factor = k.tile(carried_factor(scale)[1]).slots  # type: ignore[index]
    _, rm, rn = layout.repeats
    count = rn * 4
    k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
    for mi in range(rm):
        addr = _block_address(k, layout, base, mi, 1)
        for r0 in range(0, rn, _RESCALE_REPS):
            reps = min(_RESCALE_REPS, rn - r0)
            at = k.b.op(f"add i32 {addr}, {8 * r0}", "ta") if r0 else addr
            old = _load(k, at, reps, True)
            k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
            slots = factor[mi * count + 4 * r0:mi * count + 4 * (r0 + reps)]
            new = [k.b.op(f"fmul float {v}, {f}", "tsc") for v, f in zip(old, slots)]
            _store(k, at, [k.b.op(f"bitcast float {v} to i32", "tb") for v in new], f"16x256b.x{reps}")
    k.b.emit('call void asm sideeffect "tcgen05.wait::st.sync.aligned;", "~{memory}"()')


def _block_address(k: KernelLowering, layout: TmemAccLayout, base: str, mi: int, per_col: int) -> str:
    """i32 tensor-memory address of this warp's first 8-column block in its 16-row block `mi`
    (`per_col` elements per 32-bit column)."""
    _, m, n = layout.shape
    _, rm, rn = layout.repeats
    if isinstance(layout, PairAccLayout):   # quarter q holds rows 32 (q % 2) .. of column half q // 2
        warp = k.b.pre(f"lshr i32 {k.tid}, 5", "w")
        lane = k.b.pre(f"shl i32 {k.b.pre(f'and i32 {warp}, 3', 'tl')}, 5", "tl")
        if mi:
            lane = k.b.pre(f"add i32 {lane}, {16 * mi}", "tl")
        col = k.b.pre(f"mul i32 {k.b.pre(f'lshr i32 {warp}, 2', 'tc')}, {rn * 8 // per_col}", "tc") \
            if layout.warps[2] > 2 else "0"
        offset = k.b.pre(f"or i32 {k.b.pre(f'shl i32 {lane}, 16', 'tl')}, {col}", "to")
        return k.b.op(f"add i32 {base}, {offset}", "ta")
    _, w_m, w_n, _ = warp_coords(layout, k.b.pre, k.tid)
    row = k.b.pre(f"add i32 {k.b.pre(f'mul i32 {w_m}, {rm * 16}', 'tr')}, {mi * 16}", "tr") \
        if w_m != "0" else str(mi * 16)
    lane, col = _lane_and_column(k, m, n, row)     # M = 256: the second half n columns on, packed or not
    if w_n != "0":
        col = k.b.pre(f"add i32 {col}, {k.b.pre(f'mul i32 {w_n}, {rn * 8 // per_col}', 'tc')}", "tc")
    offset = k.b.pre(f"or i32 {k.b.pre(f'shl i32 {lane}, 16', 'tl')}, {col}", "to")
    return k.b.op(f"add i32 {base}, {offset}", "ta")


def _store(k: KernelLowering, addr: str, bits: list[str], shape: str) -> None:
    """tcgen05.st of the i32 registers `bits` with `shape` at `addr`."""
    ops = ", ".join(f"${i + 1}" for i in range(len(bits)))
    args = ", ".join([f"i32 {addr}"] + [f"i32 {v}" for v in bits])
    k.b.emit(f'call void asm sideeffect "tcgen05.st.sync.aligned.{shape}.b32 [$0], {{{ops}}};", '
             f'"r{",r" * len(bits)},~{{memory}}"({args})')


def _load(k: KernelLowering, addr: str, reps: int, is_float: bool) -> list[str]:
    """tcgen05.ld.16x256b.x`reps` at `addr`: this thread's 4 `reps` registers (floats if `is_float`)."""
    count = reps * 4
    ret = "{" + ", ".join(["i32"] * count) + "}"
    ops = ", ".join(f"${i}" for i in range(count))
    res = k.b.op(f'call {ret} asm sideeffect "tcgen05.ld.sync.aligned.16x256b.x{reps}.b32 {{{ops}}}, '
                 f'[${count}];", "{"=r," * count}r,~{{memory}}"(i32 {addr})', "tl")
    out = []
    for i in range(count):
        v = k.b.op(f"extractvalue {ret} {res}, {i}", "tv")
        out.append(k.b.op(f"bitcast i32 {v} to float", "tv") if is_float else v)
    return out


def _transfer(k: KernelLowering, layout: TmemAccLayout, base: str, values: Optional[list[str]],
              is_float: bool, packed: str = "", blocks: Optional[tuple[int, int]] = None) -> list[str]:
    """tcgen05.st (values given) or tcgen05.ld (None) of this warp's fragments: per 16-row block, one
    16x256b access of all its 8-column blocks. Returns the registers (the loaded ones for ld).
    `packed` (the LLVM type of 16-bit values, or "i8", st only): the neighbours of a row share a
    32-bit column, stored with the 16x128b shape (`_a_in_tmem`). `blocks` (ld only): (first, count)
    of the warp's 8-column blocks, read alone (a column chunk, `read_columns`)."""
    if isinstance(layout, PairAccLayout) and k.cta_pair is None:
        return _transfer_alone(k, layout, base, values, is_float)
    _, rm, rn = layout.repeats
    first, rn = blocks if blocks is not None else (0, rn)
    count = rn * 4
    per_col = (4 if packed == "i8" else 2) if packed else 1          # elements per 32-bit column
    out: list[str] = []
    for mi in range(rm):
        addr = _block_address(k, layout, base, mi, per_col)
        if first:
            addr = k.b.op(f"add i32 {addr}, {first * 8}", "ta")
        if values is None:
            out += _load(k, addr, rn, is_float)
            continue
        chunk = values[mi * count:(mi + 1) * count]
        if packed == "i8":
            _store(k, addr, _quad_words(k, chunk), f"16x128b.x{rn // 2}")
        elif packed:      # [top row c, c + 1, bottom row c, c + 1] per block -> [top, bottom] words
            _store(k, addr, [_pack(k, packed, chunk[i], chunk[i + 1]) for i in range(0, count, 2)],
                   f"16x128b.x{rn}")
        else:
            _store(k, addr, [k.b.op(f"bitcast float {v} to i32", "tb") if is_float else v for v in chunk],
                   f"16x256b.x{rn}")
    return out


def _transfer_alone(k: KernelLowering, layout: "PairAccLayout", base: str, values: Optional[list[str]],
                    is_float: bool) -> list[str]:
    """`_transfer` of a CTA pair's accumulator rows where the CTA runs its mma alone (cta_group::1
    M = 64, cta_pair.py): tensor memory holds them in the M = 64 layout, whose rows no warp of the
    pair layout can reach, so the registers go through shared memory (a layout conversion)."""
    from ..ir.types import ScalarType, TileType

    _, m, n = layout.shape
    alone = TmemAccLayout(layout.threads, layout.shape, (1, 4, layout.warps[2] // 2))
    tile = TileType((m, n), ScalarType("f32" if is_float else "i32"))
    if values is None:
        regs = _transfer(k, alone, base, None, is_float)
        k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
        return k.convert(TileRegs(tile, regs, alone), layout, role="pair-conversion").slots
    return _transfer(k, alone, base, k.convert(TileRegs(tile, list(values), layout), alone, role="pair-conversion").slots,
                     is_float)


def read_columns(k: KernelLowering, op: Operation, first: int, count: int) -> list[str]:
    """This thread's registers of 8-column blocks first .. first + count - 1 (of its warp's) of
    `op`'s accumulator, read from tensor memory and waited for: one column chunk of the epilogue
    (tmem_epilogue.py), in `ColumnChunk` slot order."""
    layout = k.assignment.tcgen05_layouts[op]  # type: ignore[union-attr]
    kind = kind_of(op)
    assert kind is not None
    regs = _transfer(k, layout, region(k, op), None, kind.d == 1, blocks=(first, count))
    k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
    return regs


def _pack(k: KernelLowering, lty: str, lo: str, hi: str) -> str:
    """Two 16-bit values in one 32-bit word, `lo` in the low half (the lower column index)."""
    vec = k.b.op(f"insertelement <2 x {lty}> undef, {lty} {lo}, i32 0", "tp")
    vec = k.b.op(f"insertelement <2 x {lty}> {vec}, {lty} {hi}, i32 1", "tp")
    return k.b.op(f"bitcast <2 x {lty}> {vec} to i32", "tp")


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


def _descriptor(k: KernelLowering, matrix: SharedMatrix, offset: int, lbo: int, mn_major: bool = False) -> str:
    """The 64-bit shared-memory descriptor of `matrix` starting at byte `offset` of it; `lbo` is the
    stride between atoms along K (K-major) or along M/N (`mn_major`)."""
    stride = 8 * matrix.span           # from one group of 8 rows (K-major) or 8 K rows (N-major) to the next
    if mn_major and matrix.span == 16:
        # Unswizzled M/N-major rows of one 16-byte core matrix: the canonical layout swaps the two offsets
        # (M/N atoms `SBO` apart, groups of 8 K rows `LBO` apart), PTX ISA "Shared memory descriptor".
        stride, lbo = lbo, stride
    fields = (_SWIZZLE_MODE[matrix.span] << 61) | _VERSION | ((stride >> 4) << 32) | (((lbo >> 4) & 0x3FFF) << 16)
    return descriptor(k, [offset, matrix.stage, matrix.offset], fields)
