"""mmaf / mmai on tensor cores with `mma.sync` m16n8k* (sm_80 and newer).

The accumulator stays in registers in `MmaLayout` (layout.py): the K loop of a
matmul carries it as phis, never through memory. Per mma op:

1. the A and B operands are staged in padded shared-memory buffers
   (`layout/shared_matrix.SharedMatrix`, row-major as the tiles are), unless they already are;
   where they do not fit whole, K goes in slices: register tiles are stored a slice at a
   time, and a load left to this mma (tileas/deferred_loads.py) is copied a slice at a time,
   the next slice's cp.async in flight while this one is read (`_SliceRing`). Which operands,
   how many slices and whether fp4 operands are packed is decided in
   tileas/mma_sync_staging.py;
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

from typing import Callable, Optional, Sequence

from ..ir.core import Operation
from ..ir.record import replace
from ..tileaa.mma_forms import MmaShape, f8_form
from .kernel import KernelLowering, storage_type, to_storage
from ..ir.types import storage_bytes
from ..layout.encodings import MmaLayout
from ..layout.index_math import block_start, warp_coords
from .llvm_text import llvm_type
from .smem import element_offset, pointer
from ..layout.shared_matrix import SharedMatrix
from .values import SharedTileVal, TileRegs
from ..tileas.deferred_loads import is_deferred, ring_axis, ring_stages
from ..tileas.mma_sync_staging import staged_operands, staged_tile


def stage(k: KernelLowering, tile: TileRegs, operand: str, swizzled: bool = False) -> SharedMatrix:
    """Store a register tile in a new (padded) buffer (row-major, as its shape says); `operand`: which of
    the op's operands it is ("a", "b", "a-scale", "b-scale"), the buffer's subject."""
    from .async_copy import new_matrix

    # read by this op's mma only (it waits for its reads before the op ends): the op's lifetime
    matrix = new_matrix(k, tile.type, "mma-stage", swizzled=swizzled, subject=operand)
    k.barrier()  # earlier readers of this buffer's bytes (the previous iteration's mma, an earlier owner) are done
    store_tile(k, tile, matrix)
    if swizzled:   # wgmma reads it through the async proxy: fence before any barrier publishes it
        from .async_copy import fence_async_proxy

        fence_async_proxy(k)
    return matrix


def store_tile(k: KernelLowering, tile: TileRegs, matrix: SharedMatrix) -> None:
    """Each thread stores its elements of a register tile into `matrix` (as its shape says), in
    runs of consecutive elements where it can (`_store_run`)."""
    shape, elem = tile.type.shape, tile.type.element
    lty = storage_type(elem)
    run = _store_run(tile, matrix)
    for slot in range(0, len(tile.slots), run):
        idx = k.multi_index(shape, slot, tile.layout)
        b, r, c = (idx if len(idx) == 3 else ["0", *idx])
        p = pointer(k, element_offset(k, matrix, b, r, c))
        if run == 1:
            value, vty = to_storage(k, tile.slots[slot], elem), lty
        else:
            from .ops_memory import _pack

            value, vty = _pack(k, tile.slots[slot:slot + run], elem, "stg"), f"<{run} x {lty}>"
        k.store_first_copy(tile.type.num_elements, slot, tile.layout,
                           f"store {vty} {value}, ptr addrspace(3) {p}, align {run * storage_bytes(elem)}")


def _store_run(tile: TileRegs, matrix: SharedMatrix) -> int:
    """Elements one shared store of `stage` moves: the layout's runs of consecutive row elements (a
    gathered row's 16-byte vector), up to 16 bytes, where no thread holds a replica and the matrix
    keeps them contiguous and aligned (a padded row's pitch, a swizzle's 16-byte chunks)."""
    n, elem = tile.type.num_elements, tile.type.element
    bits = getattr(elem, "bitwidth", 0)
    if bits < 8 or storage_type(elem) != llvm_type(elem) or not tile.layout.owns_all(n) or matrix.stage:
        return 1
    nbytes = bits // 8
    run = tile.layout.run(n)
    while run > 1 and (run * nbytes > 16 or tile.type.shape[-1] % run or matrix.offset % (run * nbytes)
                       or not matrix.swizzled and matrix.pitch % (run * nbytes)):
        run //= 2
    return run


def stage_slice(k: KernelLowering, tile: TileRegs, axis: int, chunk: int, chunks: int,
                matrix: Optional[SharedMatrix]) -> SharedMatrix:
    """Store K slice `chunk` of `chunks` (K along `axis`: -1 for A, -2 for B) of a register tile in
    `matrix` (the previous slice's buffer; None: a new buffer of the slice's shape), after a
    barrier (the previous slice's fragment reads are done)."""
    from .async_copy import new_matrix

    shape, elem = tile.type.shape, tile.type.element
    width = shape[axis] // chunks
    lo = chunk * width
    if matrix is None:
        role, sliced, operand = staged_tile(tile.type, axis, chunks)
        matrix = new_matrix(k, sliced, role, subject=operand)
    lty = storage_type(elem)
    k.barrier()
    for slot, v in enumerate(tile.slots):
        idx = k.multi_index(shape, slot, tile.layout)
        b, r, c = (idx if len(idx) == 3 else ["0", *idx])
        at = c if axis == -1 else r
        mine = k.b.op(f"and i1 {k.b.op(f'icmp sge i32 {at}, {lo}', 'ks')}, "
                      f"{k.b.op(f'icmp slt i32 {at}, {lo + width}', 'ks')}", "ks")
        valid = k.slot_valid(tile.type.num_elements, slot, tile.layout)
        if valid is not None:
            mine = k.b.op(f"and i1 {mine}, {valid}", "ks")
        local = k.b.op(f"sub i32 {at}, {lo}", "ks") if lo else at
        r, c = (r, local) if axis == -1 else (local, c)
        p = pointer(k, element_offset(k, matrix, b, r, c))
        stored = to_storage(k, v, elem)
        k.guarded(mine, lambda p=p, stored=stored: k.b.emit(f"store {lty} {stored}, ptr addrspace(3) {p}"))
    return matrix


class _SliceRing:
    """The K slices of a load its mma copies (tileas/deferred_loads.py), in a ring of two slots: slice
    c + 1 is copied while slice c is read. Each slice is a band of the tile as stored (`ring_axis`)."""

    def __init__(self, k: KernelLowering, value: SharedTileVal, operand: str, width: int, chunks: int) -> None:
        from .async_copy import slice_matrix

        self.value, self.width = value, width
        self.kaxis = ring_axis(value, operand)
        self.stages = ring_stages(chunks)
        self.ring = slice_matrix(k, value, self.kaxis, width, self.stages, operand)

    def slot(self, chunk: int) -> SharedMatrix:
        return replace(self.ring, offset=self.ring.offset + chunk % self.stages * self.ring.nbytes)

    def issue(self, k: KernelLowering, chunk: int) -> None:
        from .async_copy import issue_slice

        issue_slice(k, self.value, self.slot(chunk), self.kaxis, chunk * self.width)


# ldmatrix.x4 hands matrix q = lane / 8 to fragment registers in this order; per operand and
# stored orientation, the offset of matrix q in stored (row, col) coordinates is
# (8 or k/2) * (q % 2) + ... as (row step for q % 2, row step for q / 2, col step for q % 2, col step for q / 2);
# "half" stands for k/2 (16 bytes of K).
_X4_STEPS = {
    ("a", True): (8, 0, 0, "half"),    # stored (M, K): a0..a3 = rows +8, then K +k/2
    ("b", True): (0, 8, "half", 0),    # stored (N, K): b0, b1 of a block = K +k/2, then the next 8 columns
    ("a", False): (0, 8, 8, 0),        # stored (K, M), .trans: rows (M) +8, then K +8
    ("b", False): (8, 0, 0, 8),        # stored (K, N), .trans: K +8, then the next 8 columns
}


class _Fragments:
    """Loads the A or B fragments of one operand, staged in a shared matrix, for one warp.

    `kmajor`: the stored rows run along M (A) or N (B) and K is contiguous; otherwise K runs
    along the stored rows and ldmatrix transposes (16-bit elements only; other widths gather
    their fragments element by element)."""

    def __init__(self, k: KernelLowering, shape: MmaShape, matrix: SharedMatrix, operand: str, elem: object,
                 kmajor: bool) -> None:
        self.k, self.shape, self.m, self.operand, self.elem, self.kmajor = k, shape, matrix, operand, elem, kmajor
        self.lane = lane = k.b.pre(f"and i32 {k.tid}, 31", "lane")
        # 4-bit elements sit one to a byte in shared memory: their registers pack nibbles for the
        # fp4 mma (8 a register), or widen each to e4m3 for the fp8 one (4 a register) (`_gather`)
        four = getattr(elem, "bitwidth", 8) == 4
        self.nibbles = four and shape.per_reg == 8
        self.widen = four and shape.per_reg == 4
        self.ldmatrix = (kmajor or matrix.elem_bytes == 2) and not self.nibbles
        half = shape.k // 2
        q = k.b.pre(f"lshr i32 {lane}, 3", "q")
        q_lo = k.b.pre(f"and i32 {q}, 1", "q")
        q_hi = k.b.pre(f"lshr i32 {q}, 1", "q")
        r8 = k.b.pre(f"and i32 {lane}, 7", "r8")

        def lane_term(base: str, step_lo: object, step_hi: object) -> str:
            acc = base
            for q_part, step in ((q_lo, step_lo), (q_hi, step_hi)):
                step = half if step == "half" else step
                if step:
                    term = k.b.pre(f"mul i32 {q_part}, {step}", "q")
                    acc = term if acc == "0" else k.b.pre(f"add i32 {acc}, {term}", "q")
            return acc

        r_lo, r_hi, c_lo, c_hi = _X4_STEPS[(operand, kmajor)]
        self.lane_r = lane_term(r8, r_lo, r_hi)
        self.lane_c = lane_term("0", c_lo, c_hi)

    def _stored(self, x: str, kk: str) -> tuple[str, str]:
        """Stored (row, col) of the operand element at (M or N index x, K index kk)."""
        return (x, kk) if self.kmajor else (kk, x)

    def _ldsm(self, b: str, x0: str, k0: int, count: int) -> list[str]:
        """ldmatrix of the fragments at (x0, K step k0). The K offset is an immediate of the
        instruction ([base+imm]): the address register depends only on the block, so a K loop's
        steps share it (LLVM hoists every distinct address of an unpipelined loop into a register
        of its own, and does not fold offsets into an intrinsic's address)."""
        k = self.k
        r0, c0 = self._stored(x0, "0")
        r = self.lane_r if r0 == "0" else k.b.op(f"add i32 {r0}, {self.lane_r}", "fr")
        c = self.lane_c if c0 == "0" else (c0 if self.lane_c == "0" else k.b.op(f"add i32 {c0}, {self.lane_c}", "fc"))
        offset = element_offset(k, self.m, b, r, c)
        step = self.m.elem_bytes if self.kmajor else self.m.pitch
        imm = k0 * step
        if self.kmajor and self.m.swizzled:
            # K runs along the swizzled rows: the K step's 16-byte chunks are the block's xor-ed with
            # its offset within the span (the row's base is span-aligned), then whole column atoms on
            offset, imm = _swizzle_step(k, self.m, offset, imm)
        p = pointer(k, offset)
        trans = "" if self.kmajor else ".trans"
        ret = "{" + ", ".join(["i32"] * count) + "}"
        outs = ", ".join(f"${i}" for i in range(count))
        text = f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16 {{{outs}}}, [${count}+{imm}];"
        # sideeffect: ordered against the barriers that publish the buffer (no memory operand says so)
        res = k.b.op(f'call {ret} asm sideeffect "{text}", "{",".join(["=r"] * count)},l"(ptr addrspace(3) {p})',
                     "ldsm")
        regs = [k.b.op(f"extractvalue {ret} {res}, {i}", "fg") for i in range(count)]
        return [_e2m1_to_e4m3(k, r) for r in regs] if self.widen else regs

    def _gather(self, b: str, x: str, ks: list[str]) -> str:
        """One 32-bit register from per-element loads: operand elements (x, each of ks)."""
        k = self.k
        lty = storage_type(self.elem)  # type: ignore[arg-type]
        vals = []
        for kk in ks:
            r, c = self._stored(x, kk)
            p = pointer(k, element_offset(k, self.m, b, r, c))
            vals.append(k.b.op(f"load {lty}, ptr addrspace(3) {p}", "fe"))
        if len(vals) == 1:
            return vals[0] if lty == "i32" else k.b.op(f"bitcast {lty} {vals[0]} to i32", "fe")
        vec = "undef"
        for i, v in enumerate(vals):
            vec = k.b.op(f"insertelement <{len(vals)} x {lty}> {vec}, {lty} {v}, i32 {i}", "fe")
        if self.nibbles:
            return _nibbles(k, vec)
        word = k.b.op(f"bitcast <{len(vals)} x {lty}> {vec} to i32", "fe")
        return _e2m1_to_e4m3(k, word) if self.widen else word

    def _lane_parts(self) -> tuple[str, str]:
        k, e = self.k, self.shape.per_reg
        g = k.b.pre(f"lshr i32 {self.lane}, 2", "g")
        te = k.b.pre(f"mul i32 {k.b.pre(f'and i32 {self.lane}, 3', 't')}, {e}", "te")
        return g, te

    def _gathered(self, b: str, x0: str, k0: int, regs: list[tuple[int, int]]) -> list[str]:
        """Registers (x offset, k offset) of a fragment, element by element."""
        k = self.k
        g, te = self._lane_parts()
        out = []
        for dx, dk in regs:
            x = k.b.op(f"add i32 {x0}, {g}", "fx") if dx == 0 else k.b.op(f"add i32 {x0}, {k.b.pre(f'add i32 {g}, {dx}', 'g')}", "fx")
            ks = [k.b.op(f"add i32 {te}, {k0 + dk + i}", "fk") for i in range(self.shape.per_reg)]
            out.append(self._gather(b, x, ks))
        return out

    def a(self, b: str, m0: str, k0: int) -> list[str]:
        """The 4 A registers of the 16-row block at m0, K step at k0."""
        if self.ldmatrix:
            return self._ldsm(b, m0, k0, 4)
        half = self.shape.k // 2
        return self._gathered(b, m0, k0, [(0, 0), (8, 0), (0, half), (8, half)])

    def b_pair(self, b: str, k0: int, n0: str, count: int) -> list[list[str]]:
        """The 2 B registers of `count` (1 or 2) adjacent 8-column blocks from n0."""
        if self.ldmatrix:
            regs = self._ldsm(b, n0, k0, 2 * count)
            return [regs[2 * i:2 * i + 2] for i in range(count)]
        half = self.shape.k // 2
        regs = self._gathered(b, n0, k0, [(8 * i + 0, dk) for i in range(count) for dk in (0, half)])
        return [regs[2 * i:2 * i + 2] for i in range(count)]


def _swizzle_step(k: KernelLowering, matrix: SharedMatrix, offset: str, step: int) -> tuple[str, int]:
    """(byte offset, immediate) of the bytes `step` further along a row of a swizzled `matrix` than
    `offset` (a 16-byte chunk at the start of that row's span): the swizzle xors the chunk number with
    the row's, so the offset within the span is xor-ed in, and whole spans are column atoms further."""
    atoms, within = divmod(step, matrix.span)
    if within:
        offset = k.b.op(f"xor i32 {offset}, {within}", "sw")
    return offset, atoms * matrix.atom_bytes


def _nibbles(k: KernelLowering, vec: str) -> str:
    """Eight 4-bit elements, one per byte of the <8 x i8> `vec` (low nibbles), as one 32-bit
    register, element i in bits 4i .. 4i + 3 (the e2m1 fragment order): per 4 bytes, byte 2j | byte
    2j + 1 << 4 into bytes 0 and 2, then those bytes of both halves (a prmt)."""
    words = k.b.op(f"bitcast <8 x i8> {vec} to <2 x i32>", "fn")
    lo4 = k.b.op(f"and <2 x i32> {words}, <i32 {0x0F0F0F0F}, i32 {0x0F0F0F0F}>", "fn")
    pairs = k.b.op(f"or <2 x i32> {lo4}, {k.b.op(f'lshr <2 x i32> {lo4}, <i32 4, i32 4>', 'fn')}", "fn")
    as_bytes = k.b.op(f"bitcast <2 x i32> {pairs} to <8 x i8>", "fn")
    picked = k.b.op(f"shufflevector <8 x i8> {as_bytes}, <8 x i8> poison, <4 x i32> <i32 0, i32 2, i32 4, i32 6>", "fn")
    return k.b.op(f"bitcast <4 x i8> {picked} to i32", "fn")


# e4m3 bytes of the e2m1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (every e2m1 value is one exactly),
# as the two prmt source words
_E4M3_OF_E2M1 = (0x3C383000, 0x4C484440)


def _e2m1_to_e4m3(k: KernelLowering, word: str) -> str:
    """Four e2m1 elements, one per byte (low nibble), as four e4m3 bytes: the magnitude (3 bits)
    picks a table byte (a prmt whose selector nibble i is byte i's magnitude), the sign moves from
    bit 3 to bit 7. fp8 mma.sync then multiplies them exactly (sm_100's fp4 path, ops_blockscale)."""
    mag = k.b.op(f"and i32 {word}, {0x07070707}", "w4")
    pairs = k.b.op(f"or i32 {mag}, {k.b.op(f'lshr i32 {mag}, 4', 'w4')}", "w4")     # bytes 0, 2: m0|m1<<4, m2|m3<<4
    low = k.b.op(f"and i32 {pairs}, 255", "w4")
    high = k.b.op(f"and i32 {k.b.op(f'lshr i32 {pairs}, 8', 'w4')}, 65280", "w4")
    sel = k.b.op(f"or i32 {low}, {high}", "w4")
    lo, hi = _E4M3_OF_E2M1
    looked = k.b.op(f'call i32 asm "prmt.b32 $0, $1, $2, $3;", "=r,r,r,r"(i32 {lo}, i32 {hi}, i32 {sel})', "w4")
    sign = k.b.op(f"shl i32 {k.b.op(f'and i32 {word}, {0x08080808}', 'w4')}, 4", "w4")
    return k.b.op(f"or i32 {looked}, {sign}", "w4")


# An mma.sync issuer other than the plain one (ops_blockscale): given (batch, first row, first column,
# K step, the A and B registers as typed arguments, the 4 accumulator registers) it returns the new 4.
Issuer = Callable[[str, str, str, int, list[tuple[str, str]], list[str]], list[str]]


def _planned_staging(k: KernelLowering, op: Operation) -> tuple[int, bool]:
    """(the K slices mma.sync `op` stages its operands in, whether it packs fp4 ones) as plan-shared-memory
    decided them beside the buffers it placed (`SharedPlan.slices`, `packed`: mma_sync_staging.operand_staging,
    packs). A plan without them is an internal error: the lowering does not decide."""
    return k.planned.decided("slices", op, "operand staging for the mma"), op in k.planned.plan.packed


def lower_mma_sync(k: KernelLowering, op: Operation, shape: MmaShape, lhs: "TileRegs | SharedTileVal",
                   rhs: "TileRegs | SharedTileVal", acc: TileRegs, issuer: Optional[Issuer] = None,
                   also_read: Sequence[object] = ()) -> TileRegs:
    """The mma.sync instructions of one mma op; `also_read`: further shared tiles the issuer reads
    (their copies are waited for, and the barrier published them, with A's and B's)."""
    layout = acc.layout
    assert isinstance(layout, MmaLayout)
    from .async_copy import is_ready, wait_for

    kdim = lhs.type.shape[-1]
    from_regs, staged = staged_operands(shape, lhs, rhs, layout)
    chunks, packed = _planned_staging(k, op)
    width = kdim // chunks
    rings = {role: _SliceRing(k, t, role, width, chunks) for t, role in ((lhs, "a"), (rhs, "b")) if is_deferred(t)}
    if rings:
        k.barrier()   # earlier readers of the rings' bytes are done
        for ring in rings.values():
            ring.issue(k, 0)
        where = f"{op.name} at {op.location}" if getattr(op, "location", None) else op.name
        k.schedule_notes.append(f"//   {where}: deferred load{'s' if len(rings) > 1 else ''} "
                                f"copied in {chunks} K slices of {width}, {rings[next(iter(rings))].stages} "
                                f"in flight")
    regs = list(acc.slots)
    if packed:
        return TileRegs(acc.type, _packed_fp4_steps(k, shape, layout, lhs, rhs, regs, issuer, also_read), layout)
    a_mat: Optional[SharedMatrix] = None
    b_mat: Optional[SharedMatrix] = None
    for chunk in range(chunks):
        a_mat = rings["a"].slot(chunk) if "a" in rings else lhs.matrix if isinstance(lhs, SharedTileVal) else \
            None if from_regs else stage(k, lhs, "a") if chunks == 1 else stage_slice(k, lhs, -1, chunk, chunks, a_mat)
        b_mat = rings["b"].slot(chunk) if "b" in rings else rhs.matrix if isinstance(rhs, SharedTileVal) else \
            stage(k, rhs, "b") if chunks == 1 else stage_slice(k, rhs, -2, chunk, chunks, b_mat)
        read = ([rhs] if from_regs else [lhs, rhs]) + list(also_read)
        if not is_ready(read):   # fragments from registers need no barrier
            wait_for(k, [lhs, rhs, *also_read])
            k.barrier()
        if chunk + 1 < chunks:   # the next slice lands while this one is read (its slot's readers passed the barrier)
            for ring in rings.values():
                ring.issue(k, chunk + 1)
        sliced = [chunk * width if chunks > 1 and any(t is x for x, _ in staged) else 0 for t in (lhs, rhs)]
        regs = _k_steps(k, shape, layout, lhs, rhs, a_mat, b_mat, regs, chunk * width, width, sliced, issuer)
    return TileRegs(acc.type, regs, layout)


class _PackedFragments:
    """The fragments of an fp4 operand packed two to a byte, K-major: the 8-bit m16n8k32 fragments of
    the packed bytes (a register's 4 bytes are 8 consecutive K elements, the even one in each low
    nibble: the e2m1 fragment order), read by ldmatrix; K indices in elements, halved into bytes."""

    def __init__(self, k: KernelLowering, matrix: SharedMatrix, operand: str) -> None:
        from ..ir.types import ScalarType

        self.inner = _Fragments(k, f8_form("f8E4M3FN", "f8E4M3FN"), matrix, operand, ScalarType("i8"), True)

    def a(self, b: str, m0: str, k0: int) -> list[str]:
        return self.inner.a(b, m0, k0 // 2)

    def b_pair(self, b: str, k0: int, n0: str, count: int) -> list[list[str]]:
        return self.inner.b_pair(b, k0 // 2, n0, count)


def _packed_fp4_steps(k: KernelLowering, shape: MmaShape, layout: MmaLayout, lhs: "TileRegs | SharedTileVal",
                      rhs: "TileRegs | SharedTileVal", regs: list[str], issuer: Optional[Issuer],
                      also_read: Sequence[object]) -> list[str]:
    """The fp4 mma.sync of one op on operands packed K-major by fp4_pack (A (M, K), B (N, K)), their
    fragments by ldmatrix (NVIDIA's sm_120 fp4 matmuls: LDSM beside OMMA)."""
    from .async_copy import is_ready, wait_for
    from .fp4_pack import pack

    m, kdim = lhs.type.shape  # type: ignore[union-attr]
    n = rhs.type.shape[-1]  # type: ignore[union-attr]
    a_mat, b_mat = pack(k, lhs, "a", m, kdim), pack(k, rhs, "b", n, kdim)
    if not is_ready(list(also_read)):
        wait_for(k, list(also_read))
    k.barrier()   # the packed operands (and the scales) are published
    return _k_steps(k, shape, layout, lhs, rhs, a_mat, b_mat, regs, 0, kdim, [0, 0], issuer,
                    (_PackedFragments(k, a_mat, "a"), _PackedFragments(k, b_mat, "b")))


def _k_steps(k: KernelLowering, shape: MmaShape, layout: MmaLayout, lhs: "TileRegs | SharedTileVal",
             rhs: "TileRegs | SharedTileVal", a_mat: Optional[SharedMatrix], b_mat: SharedMatrix,
             regs: list[str], k_first: int, width: int, starts: list[int], issuer: Optional[Issuer],
             fragments: "Optional[tuple[object, object]]" = None) -> list[str]:
    """The mma.sync instructions of K indices k_first .. k_first + width on the accumulator
    registers `regs`; `starts`: the K index of A's and B's stored K 0 (a staged slice's first);
    `fragments`: A's and B's fragment readers where the operands are not stored as their tiles say."""
    regs = list(regs)
    # A is read K-major unless transposed; B the other way round
    a_elem, b_elem = lhs.type.element, rhs.type.element
    if fragments is not None:
        a_frag, b_frag = fragments
    else:
        a_frag = _Fragments(k, shape, a_mat, "a", a_elem, not getattr(lhs, "transposed", False)) \
            if a_mat is not None else None
        b_frag = _Fragments(k, shape, b_mat, "b", b_elem, getattr(rhs, "transposed", False))
    rb, rm, rn = layout.repeats
    w_b, w_m, w_n, _ = warp_coords(layout, k.b.pre, k.tid)

    def origin(w: str, per_warp: int, unit: int, block: int) -> str:
        return block_start(k.b.pre, w, per_warp, block, unit)

    acc_ty = shape.acc_type
    if issuer is not None:   # each block's first row / column, once (the issuer indexes scales by them)
        rows = [[origin(w_m, rm, 16, mi) for mi in range(rm)] for _ in range(rb)]
        cols = [[origin(w_n, rn, 8, ni) for ni in range(rn)] for _ in range(rb)]
    ret = "{" + ", ".join([acc_ty] * 4) + "}"
    for bi in range(rb):
        b = origin(w_b, rb, 1, bi)
        for k0 in range(k_first, k_first + width, shape.k):
            a_k0, b_k0 = k0 - starts[0], k0 - starts[1]
            a_regs = [_a_from_registers(k, lhs, bi * rm + mi, k0) if a_frag is None else  # type: ignore[arg-type]
                      a_frag.a(b, origin(w_m, rm, 16, mi), a_k0) for mi in range(rm)]
            a_regs = [_tf32(k, regs_, getattr(lhs, "tf32", "")) for regs_ in a_regs]
            # B a pair of column blocks at a time, each used at once: a gathered B (8- and 32-bit
            # elements, several loads per register) then holds two blocks' registers, not all
            for n0 in range(0, rn, 2):
                pairs = b_frag.b_pair(b, b_k0, origin(w_n, rn, 8, n0), min(2, rn - n0))
                for ni, b_regs in enumerate((_tf32(k, r, getattr(rhs, "tf32", "")) for r in pairs), n0):
                    for mi in range(rm):
                        blk = (bi * rm + mi) * rn + ni
                        c = regs[4 * blk:4 * blk + 4]
                        args = [(shape.reg_type, _as(k, r, shape.reg_type)) for r in a_regs[mi] + b_regs]
                        if issuer is not None:
                            regs[4 * blk:4 * blk + 4] = issuer(b, rows[bi][mi], cols[bi][ni], k0, args, c)
                            continue
                        res = _issue(k, shape, ret, args + [(acc_ty, v) for v in c])
                        regs[4 * blk:4 * blk + 4] = [k.b.op(f"extractvalue {ret} {res}, {i}", "acc") for i in range(4)]
    return regs


def _issue(k: KernelLowering, shape: MmaShape, ret: str, args: list[tuple[str, str]]) -> str:
    """One mma.sync: the intrinsic, or inline PTX (D = 4 results; A, B, C operands in order)."""
    if not shape.ptx:
        return k.b.call(ret, shape.intrinsic, args, hint="mma")
    na, nb = 4, 2
    groups = [range(0, 4), range(4, 4 + na), range(4 + na, 4 + na + nb), range(4 + na + nb, 8 + na + nb)]
    text = shape.ptx + " " + ", ".join("{" + ", ".join(f"${i}" for i in g) + "}" for g in groups) + ";"
    cons = ",".join(["=f" if shape.acc_type == "float" else "=r"] * 4 + ["r"] * (na + nb) +
                    ["f" if shape.acc_type == "float" else "r"] * 4)
    arg_text = ", ".join(f"{t} {v}" for t, v in args)
    return k.b.op(f'call {ret} asm "{text}", "{cons}"({arg_text})', "mma")


def _a_from_registers(k: KernelLowering, lhs: TileRegs, row_block: int, k0: int) -> list[str]:
    """The 4 A registers of row block `row_block` (of this warp), K step at k0, from fragments."""
    layout = lhs.layout
    rn = layout.repeats[2]
    lty = llvm_type(lhs.type.element)
    out = []
    for ni, pair in ((k0 // 8, (0, 1)), (k0 // 8, (2, 3)), (k0 // 8 + 1, (0, 1)), (k0 // 8 + 1, (2, 3))):
        base = (row_block * rn + ni) * 4
        vec = "undef"
        for i, j in enumerate(pair):
            vec = k.b.op(f"insertelement <2 x {lty}> {vec}, {lty} {lhs.slots[base + j]}, i32 {i}", "pa")
        out.append(k.b.op(f"bitcast <2 x {lty}> {vec} to i32", "pa"))
    return out


def _tf32(k: KernelLowering, regs: list[str], mode: str) -> list[str]:
    """Fragment registers of f32 elements rounded to tf32 with `mode` (the staged tile's ftof)."""
    if not mode:
        return regs
    from .ops_arith import _round_to_tf32

    out = []
    for r in regs:
        rounded = _round_to_tf32(k, k.b.op(f"bitcast i32 {r} to float", "tf"), mode)
        out.append(k.b.op(f"bitcast float {rounded} to i32", "tf"))
    return out


def _as(k: KernelLowering, reg: str, ty: str) -> str:
    return reg if ty == "i32" else k.b.op(f"bitcast i32 {reg} to {ty}", "fb")
