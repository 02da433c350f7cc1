"""Blackwell tcgen05: tensor memory, tcgen05.mma, commit, ld/st/cp, waits and fences.

Tensor memory is a per-CTA array of 128 lanes x 512 columns of 32-bit cells
(`TensorMemory`); an address is (lane << 16) | column. alloc hands out column ranges (a
power of two, 32..512, aligned to its size) and writes the address to shared memory.

tcgen05.mma (cta_group::1) is issued by each thread that executes it and computed at once:
D (M x N, in tensor memory) = A * B (+ D), A from shared memory (descriptor) or tensor
memory, B from shared memory, shapes and types from the 32-bit instruction descriptor
(sparsity and f16 accumulators are reported as unsupported); the block-scaled kinds (mxf8f6f4,
and mxf4 / mxf4nvf4 with e2m1 two to a byte) read their scale factors from tensor memory. With M = 128,
row i of D is lane i of the addressed lanes; with M = 64 the rows fill lanes 0-15 of each
32-lane quarter. Each 32-bit column holds one element of a row. tcgen05.commit makes the
mbarrier arrive at once, since every earlier tcgen05 operation has already completed.

tcgen05.ld/st move data between registers and the lanes of the warp's quarter
(warp w reaches lanes 32*(w % 4) ...), in the .32x32b, .16x32bx2, .16x128b and .16x256b shapes (the last
one is the m16n8 accumulator fragment, as CUTLASS's 16dp256b copy traits spell out). An ld's registers are usable at once: NVIDIA's
compiler reads them before tcgen05.wait::ld (ptxas tracks them like any load result), so
the waits only order tensor-memory accesses, which here happen in program order anyway.

The race checker (happens_before.TensorCells) still sees them as asynchronous: an mma's or cp's
accesses of tensor memory are in flight until the issuing thread's next tcgen05.commit, a warp's
ld/st until its wait::ld/st, and another thread may touch those cells only once an mbarrier wait
or barrier orders it after their completion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..errors import DeviceFault
from ..spaces import shared_index, shared_outside, smem_base
from ..parser import Addr, Imm, Instr, Vec
from ..program import K_COLL, K_OP, Decoder, Mods, bad
from ..smem_layout import base_offset, decode_umma_desc, operand_addresses
from .common import lanes_of
from .memory import address
from .wgmma import element_values, operand_bytes, smem_matrix

LANES, COLUMNS = 128, 512

# instruction-descriptor type codes per kind: code -> (type, bytes)
KIND_TYPES = {
    "f16": {0: ("f16", 2), 1: ("bf16", 2)},
    "tf32": {2: ("tf32", 4)},
    "f8f6f4": {0: ("e4m3", 1), 1: ("e5m2", 1)},
    "i8": {0: ("u8", 1), 1: ("s8", 1)},
}
KIND_TYPES["mxf8f6f4"] = KIND_TYPES["f8f6f4"]
# the 4-bit kinds: e2m1 only (code 1), two elements to a byte in shared memory, K-major ("f4": the
# fields they share with the unscaled kinds, decoded as those)
KIND_TYPES["f4"] = KIND_TYPES["mxf4"] = KIND_TYPES["mxf4nvf4"] = {1: ("e2m1", 0)}
KIND_K = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32, "mxf8f6f4": 32, "mxf4": 64, "mxf4nvf4": 64}
BLOCK_SCALED = frozenset({"mxf8f6f4", "mxf4", "mxf4nvf4"})
# block-scaled kind -> {modifier naming the scale block: scale factors per row and MMA (scale_vec::NX)}
SCALE_VECS = {"mxf8f6f4": {"scale_vec::1X": 1, "block32": 1}, "mxf4": {"scale_vec::2X": 2, "block32": 2},
              "mxf4nvf4": {"scale_vec::2X": 2, "block32": 2, "scale_vec::4X": 4, "block16": 4}}
# the 16 e2m1 values by nibble (1 sign, 2 exponent, 1 mantissa bits)
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
DTYPES = {1: "f32", 2: "s32"}
SCALE_TYPES = {0: "ue4m3", 1: "ue8m0"}


def _np() -> Any:
    import numpy as np

    return np


@dataclass
class TensorMemory:
    cells: Any
    allocated: dict = field(default_factory=dict)    # first column -> number of columns
    relinquished: bool = False
    # (start, columns, allocating thread, what its warp knew then) of paired allocs the peer has yet to make
    pair_pending: list = field(default_factory=list)


def tmem(st: Any, thread: int, cta: Optional[int] = None) -> TensorMemory:
    """The tensor memory of thread `thread`'s CTA, or of the cluster's CTA `cta` (each has its own)."""
    if st.tmem is None:
        st.tmem = [TensorMemory(_np().full((LANES, COLUMNS), 0xFFFFFFFF, dtype=_np().uint32))     # poison
                   for _ in range(st.ncta)]
    return st.tmem[thread // st.cta_threads if cta is None else cta]


def _cells(st: Any, lane0: int, col0: int, lanes: int, cols: int, thread: int, what: str,
           cta: Optional[int] = None) -> tuple:
    """Index arrays (lanes, cols) into the cells (of the thread's CTA, or of CTA `cta`), after checking
    the columns are allocated."""
    np = _np()
    tm = tmem(st, thread, cta)
    if lane0 < 0 or lane0 + lanes > LANES or col0 < 0 or col0 + cols > COLUMNS:
        raise DeviceFault(f"{what} reaches outside tensor memory (lanes {lane0}..{lane0 + lanes - 1}, "
                          f"columns {col0}..{col0 + cols - 1})", thread)
    for c in (col0, col0 + cols - 1):
        if not any(s <= c < s + n for s, n in tm.allocated.items()):
            raise DeviceFault(f"{what} uses tensor-memory column {c}, which is not allocated", thread)
    return np.arange(lane0, lane0 + lanes)[:, None], np.arange(col0, col0 + cols)[None, :]


def free_columns(tm: TensorMemory, n: int, *others: TensorMemory) -> Optional[int]:
    """The first n-aligned run of n columns free in `tm` (and in `others`), or None."""
    return next((s for s in range(0, COLUMNS, n)
                 if all(s + n <= a or a + k <= s for t in (tm, *others) for a, k in t.allocated.items())), None)


def _at(st: Any, reader: Any, lane: int) -> int:
    v = _np().asarray(reader(st))
    return int(v if v.ndim == 0 else v[lane])


def _warps(st: Any, m: Any) -> list[int]:
    np = _np()
    active = np.ones(st.n, dtype=bool) if m is None else m
    return np.flatnonzero(np.logical_or.reduceat(active, st.warp_starts)).tolist()


def _cta_group(mods: Mods, ins: Instr, pairs: bool = False) -> bool:
    """Whether the instruction is .cta_group::2 (where `pairs` says this form supports it)."""
    if mods.flag("cta_group::2"):
        if not pairs:
            raise bad(ins, "cta_group::2 is not supported by the emulator for this instruction")
        return True
    mods.flag("cta_group::1")
    return False


# --- allocation ----------------------------------------------------------------------

def _alloc(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    op = mods.need(("alloc", "dealloc", "relinquish_alloc_permit"), "the operation")
    pair = _cta_group(mods, ins, pairs=True)
    mods.need(("sync",), ".sync")
    mods.need(("aligned",), ".aligned")
    mods.flag("shared::cta")
    mods.flag("b32")
    mods.done()
    ops = list(ins.operands)
    if op == "relinquish_alloc_permit":
        def relinquish(st: Any, m: Any) -> None:
            for w in _warps(st, m):
                tmem(st, int(st.warp_starts[w])).relinquished = True

        return (K_COLL, relinquish, None)
    ncols = dec.reader(ops[1], "u32", ins)
    if op == "alloc":
        _, dst = address(dec, ops[0], "shared", ins)

        def alloc(st: Any, m: Any) -> None:
            for w in _warps(st, m):
                t = int(st.warp_starts[w])
                tm = tmem(st, t)
                n = _at(st, ncols, t)
                if n < 32 or n > COLUMNS or n & (n - 1):
                    raise DeviceFault(f"tcgen05.alloc of {n} columns: a power of two in 32..512 is needed", t)
                if tm.relinquished:
                    raise DeviceFault("tcgen05.alloc after tcgen05.relinquish_alloc_permit", t)
                if pair:
                    from .tcgen05_pair import pair_columns

                    start = pair_columns(st, t, n)
                else:
                    start = free_columns(tm, n)
                if start is None:
                    raise DeviceFault(f"tcgen05.alloc of {n} columns: tensor memory is full (on a GPU this "
                                      "waits forever for a dealloc)", t)
                tm.allocated[start] = n
                if st.races is not None:    # fresh cells, written (undefined) by the allocating warp: their
                    # first users must be ordered after the allocation like after a write
                    cells = _tensor_cells(st)
                    cells.forget(start, n, LANES * (t // st.cta_threads), LANES)
                    li, ci = np.arange(LANES)[:, None], np.arange(start, start + n)[None, :]
                    _track(st, li, ci, t, True, ins, None, collective=True)
                    cells.fresh[cells.cells(li + LANES * (t // st.cta_threads), ci)] = True
                d = _at(st, dst, t)
                if d % 4 or shared_outside(st, _np().uint64(d), 4):
                    raise DeviceFault(f"tcgen05.alloc destination 0x{d:x} is misaligned or out of bounds", t)
                d = int(shared_index(st, d))
                st.shared[d:d + 4] = np.frombuffer(int(start).to_bytes(4, "little"), dtype=np.uint8)
                if st.races is not None:
                    st.races.check_bytes(st, _site(ins, True), "shared", st.shared.size, np.arange(d, d + 4),
                                         np.full(4, t))

        return (K_COLL, alloc, None)
    taddr = dec.reader(ops[0], "u32", ins)

    def dealloc(st: Any, m: Any) -> None:
        for w in _warps(st, m):
            t = int(st.warp_starts[w])
            tm = tmem(st, t)
            a, n = _at(st, taddr, t), _at(st, ncols, t)
            if a >> 16 or tm.allocated.get(a & 0xFFFF) != n:
                raise DeviceFault(f"tcgen05.dealloc of {n} columns at 0x{a:x} does not match an allocation", t)
            if st.races is not None:    # like a write of every cell: after every access of them, ordered
                li, ci = np.arange(LANES)[:, None], np.arange(a & 0xFFFF, (a & 0xFFFF) + n)[None, :]
                _track(st, li, ci, t, True, ins, None, collective=True)
            del tm.allocated[a & 0xFFFF]

    return (K_COLL, dealloc, None)


def _track(st: Any, li: Any, ci: Any, tids: Any, write: bool, ins: Instr, owner: Any,
           collective: bool = False, cta: Optional[int] = None, pipe: Any = None) -> None:
    """Record (and check) an access of tensor-memory cells (lanes `li`, columns `ci`, of the threads'
    CTA or of CTA `cta`) for the race checker, in flight until `owner` completes; `pipe`: the pipeline
    class of a tcgen05.mma or tcgen05.cp (happens_before.TensorCells)."""
    cells = _tensor_cells(st)
    tids = _np().broadcast_to(_np().asarray(tids), _np().broadcast_shapes(_np().shape(li), _np().shape(ci)))
    rank = int(tids.flat[0]) // st.cta_threads if cta is None else cta
    idx = cells.cells(_np().asarray(li) + LANES * rank, ci)
    if not write and ins.mods[:1] != ("ld",):      # tcgen05.ld: its registers become undefined instead
        _written(st, cells, idx, int(tids.flat[0]), f"the {ins.opcode}.{'.'.join(ins.mods[:1])}")
    cells.access(idx, tids.ravel(), write, ins.line, f"the {ins.opcode}.{'.'.join(ins.mods[:1])}", owner,
                 collective, pipe)


def _written(st: Any, cells: Any, idx: Any, t: int, what: str) -> None:
    """Tensor memory starts undefined (after tcgen05.alloc too): reading a cell no instruction wrote
    is reported (definedness, with the race checker)."""
    never = (cells.who["w"][idx] < 0) | cells.fresh[idx]
    if never.any():
        c = int(idx[int(_np().argmax(never))])
        lane, col = divmod(c, cells.columns)
        raise DeviceFault(f"read of undefined tensor memory: {what} reads lane {lane % LANES}, column {col}, "
                          "which no instruction wrote since its allocation", t)


def _undefined_cells(st: Any, li: Any, ci: Any, t: int) -> Any:
    """Which of the cells (lanes `li`, columns `ci` of thread t's CTA) no instruction wrote since their
    allocation (None when all were written, or without the checker)."""
    if st.races is None or st.defined is None:
        return None
    cells = _tensor_cells(st)
    idx = cells.cells(_np().asarray(li) + LANES * (t // st.cta_threads), ci).reshape(_np().shape(li))
    never = (cells.who["w"][idx] < 0) | cells.fresh[idx]
    return never if never.any() else None


def _tensor_cells(st: Any) -> Any:
    """The race checker's tensor-memory cells: CTA r's lanes are r * LANES + lane."""
    return st.races.hb.tensor(LANES * st.ncta)


def _site(ins: Instr, write: bool) -> Any:
    from ..races import Site

    return Site(ins.line, write=write, strong=False)


# --- tcgen05.ld / st -----------------------------------------------------------------

def _ldst(dec: Decoder, ins: Instr) -> Any:
    """tcgen05.ld/st with the .32x32b shape (thread i <-> lane base + i) and the .16x32bx2 shape (thread i <->
    lane base + i % 16, threads 16-31 at columns + immHalfSplitoff), .num consecutive columns per thread;
    and the .16x256b shape: per repetition j, 16 lanes x 8 columns in the m16n8 accumulator fragment
    order (registers 4j..4j+3 of thread i: lane base + i/4 (+8 for the last two), columns
    8j + 2(i%4) (+1 for the odd ones)); .16x128b: per repetition j, 16 lanes x 4 columns
    (registers 2j, 2j+1 of thread i: lane base + i/4 (+8 for the second), column 4j + i%4)."""
    np = _np()
    mods = Mods(ins)
    op = mods.need(("ld", "st"), ".ld or .st")
    mods.need(("sync",), ".sync")
    mods.need(("aligned",), ".aligned")
    shape = mods.need(("32x32b", "16x32bx2", "16x128b", "16x256b"),
                      "the .32x32b, .16x32bx2, .16x128b or .16x256b shape (the others are not supported)")
    per_rep = {"16x256b": 4, "16x128b": 2}.get(shape, 1)     # registers per repetition
    top = {"16x256b": 6, "16x128b": 7}.get(shape, 8)
    num = mods.need(tuple(f"x{2 ** i}" for i in range(top)), f".num (.x1 ... .x{2 ** (top - 1)})")
    mods.need(("b32",), ".b32")
    mods.done()
    count = int(num[1:]) * per_rep
    ops = list(ins.operands)
    split = None
    if shape == "16x32bx2":
        imm = ops.pop(2 if op == "ld" else 1)      # ld: r, [taddr], split / st: [taddr], split, r
        if not isinstance(imm, Imm):
            raise bad(ins, "immHalfSplitoff must be an immediate")
        split = imm.value
    if len(ops) != 2:
        raise bad(ins, "expected registers and a [taddr] operand")
    regs_op, addr_op = (ops[0], ops[1]) if op == "ld" else (ops[1], ops[0])
    items = list(regs_op.items) if isinstance(regs_op, Vec) else [regs_op]
    if len(items) != count or not isinstance(addr_op, Addr):
        raise bad(ins, f"expected {count} registers and a [taddr] operand")
    base = dec.reader(addr_op.base, "u32", ins)
    offset = addr_op.offset
    if op == "ld":
        writers = [dec.writer_t(r, "b32", ins) for r in items]
    else:
        readers = [dec.reader(r, "b32", ins) for r in items]
    thread = np.arange(32)
    j = np.arange(count)[None, :]
    if shape == "16x256b":
        r = np.arange(count)
        lane_of = (thread[:, None] // 4 + 8 * ((r[None, :] % 4) // 2))
        col_of = 8 * (r[None, :] // 4) + 2 * (thread[:, None] % 4) + r[None, :] % 2
    elif shape == "16x128b":
        r = np.arange(count)
        lane_of = thread[:, None] // 4 + 8 * (r[None, :] % 2)
        col_of = 4 * (r[None, :] // 2) + thread[:, None] % 4
    elif split is None:
        lane_of, col_of = np.broadcast_to(thread[:, None], (32, count)), np.broadcast_to(j, (32, count))
    else:
        lane_of, col_of = np.broadcast_to((thread % 16)[:, None], (32, count)), (thread // 16)[:, None] * split + j

    def fn(st: Any, m: Any) -> None:
        for w in _warps(st, m):
            t0 = int(st.warp_starts[w])
            tm = tmem(st, t0)
            a = (_at(st, base, t0) + offset) & 0xFFFFFFFF
            lane0, col0 = a >> 16, a & 0xFFFF
            quarter = 32 * ((t0 % st.cta_threads) // 32 % 4)   # the warp's rank in its own CTA (a cluster
            # numbers warps across its CTAs: CTAs of 320 threads put CTA 1's warp 0 at 10)
            nthreads = int(st.warp_sizes[w])
            li = lane0 + lane_of[:nthreads]
            ci = col0 + col_of[:nthreads]
            if li.min() < quarter or li.max() >= quarter + 32:
                raise DeviceFault(f"warp {w} may access tensor-memory lanes {quarter}..{quarter + 31}, "
                                  f"not lanes {int(li.min())}..{int(li.max())}", t0)
            for lo in np.unique(ci[:, 0]).tolist():
                _cells(st, quarter, lo, 1, int(ci.max()) - lo + 1, t0, f"tcgen05.{op}")
            lanes = np.arange(t0, t0 + nthreads)
            if st.races is not None:    # in flight until the warp's tcgen05.wait::ld/st
                _track(st, li, ci, np.broadcast_to(lanes[:, None], li.shape), op == "st", ins, (op, w),
                       collective=True)
            if op == "ld":
                vals = tm.cells[li, ci]
                sel = np.zeros(st.n, dtype=bool)
                sel[lanes] = True
                undefined = _undefined_cells(st, li, ci, t0)
                if undefined is not None:       # what never-written cells hold reaches the registers undefined
                    st.cur_def = np.ones(st.n, dtype=bool)
                    st.cur_def[lanes] = ~undefined.any(axis=1)
                    st.cur_origin = "tensor memory no instruction wrote"
                try:
                    for k, wr in enumerate(writers):
                        full = np.zeros(st.n, dtype=np.uint32)
                        full[lanes] = vals[:, k]
                        wr.put(st, sel, full)
                finally:
                    st.cur_def = True
            else:
                vals = np.stack([np.broadcast_to(np.asarray(r(st)), (st.n,))[lanes] for r in readers], axis=1)
                tm.cells[li, ci] = vals.astype(np.uint32)

    return (K_COLL, fn, None)


def _wait(dec: Decoder, ins: Instr, which: str) -> Any:
    mods = Mods(ins)
    mods.need((f"wait::{which}",), "the wait")
    mods.need(("sync",), ".sync")
    mods.need(("aligned",), ".aligned")
    mods.done()

    def wait(st: Any, m: Any) -> None:
        if st.races is not None:      # the warps' tcgen05.ld (st) accesses are complete
            warps = set(_warps(st, m))
            st.races.hb.finish(lambda o: o[0] == which and o[1] in warps)

    return (K_COLL, wait, None)


# --- tcgen05.mma / commit / cp ------------------------------------------------------

def decode_idesc(idesc: int, kind: str, pair: bool = False) -> dict:
    """The fields of a tcgen05.mma instruction descriptor (`pair`: of a .cta_group::2 MMA); ValueError
    for what is not modelled.

    Block-scaled kinds use bits 4-5 for the B scale-factor ID, bit 23 for the scale type
    (0 UE4M3, 1 UE8M0) and bits 29-30 for the A scale-factor ID; their D is always f32. The 4-bit
    kinds take e2m1 (code 1) for A and B, K-major only (no transpose bits)."""
    if idesc & 0x7:
        raise ValueError("sparse tcgen05.mma is not supported")
    if kind in BLOCK_SCALED:
        if idesc >> 31:
            raise ValueError(f"the K-size bit must be 0 for .kind::{kind} (dense K)")
        plain = "f8f6f4" if kind == "mxf8f6f4" else "f4"
        f = decode_idesc((idesc & ~(0x3 << 4) & ~(1 << 23) & ~(0x3 << 29)) | (1 << 4), plain, pair)
        f.update(sf_b=(idesc >> 4) & 3, sf_a=(idesc >> 29) & 3, scale=SCALE_TYPES[(idesc >> 23) & 1])
        if kind != "mxf8f6f4" and (f["trans_a"] or f["trans_b"]):
            raise ValueError(f".kind::{kind} reads A and B K-major only (transpose bits 15-16 must be 0)")
        return f
    dcode = (idesc >> 4) & 3
    if dcode not in DTYPES:
        raise ValueError(f"accumulator type code {dcode} (f16 accumulators) is not supported")
    types = KIND_TYPES[kind]
    acode, bcode = (idesc >> 7) & 7, (idesc >> 10) & 7
    if acode not in types or bcode not in types:
        raise ValueError(f"input type codes {acode}/{bcode} are not supported for .kind::{kind}")
    m, n = ((idesc >> 24) & 0x1F) << 4, ((idesc >> 17) & 0x3F) << 3
    if pair and (m not in (128, 256) or not 16 <= n <= 256 or n % 16):
        raise ValueError(f"shape M={m} N={n} does not exist for cta_group::2")
    if not pair and (m not in (64, 128) or not 8 <= n <= 256 or n % (8 if m == 64 else 16)):
        raise ValueError(f"shape M={m} N={n} does not exist for cta_group::1")
    if (DTYPES[dcode] == "s32") != (kind == "i8"):
        raise ValueError(f"accumulator type {DTYPES[dcode]} does not go with .kind::{kind}")
    return {"d": DTYPES[dcode], "a": types[acode], "b": types[bcode], "neg_a": (idesc >> 13) & 1,
            "neg_b": (idesc >> 14) & 1, "trans_a": (idesc >> 15) & 1, "trans_b": (idesc >> 16) & 1,
            "m": m, "n": n, "sat": (idesc >> 3) & 1}


def d_lanes(m: int) -> Any:
    """Tensor-memory lane (from the addressed lane) of each row of an M-row accumulator."""
    np = _np()
    r = np.arange(m)
    return r if m == 128 else 32 * (r // 16) + r % 16


def _mma(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mods.need(("mma",), ".mma")
    pair = _cta_group(mods, ins, pairs=True)
    kind = mods.need(tuple(f"kind::{k}" for k in KIND_K),
                     "the kind (.kind::f16, ::tf32, ::f8f6f4, ::i8, ::mxf8f6f4, ::mxf4, ::mxf4nvf4)")[6:]
    scaled = kind in BLOCK_SCALED
    vec = 0          # scale factors per row (of A) / column (of B) and MMA
    if scaled:
        mods.need(("block_scale",), ".block_scale")
        vecs = SCALE_VECS[kind]
        named = mods.one(tuple(vecs))
        vec = vecs[named] if named else min(vecs.values())   # the default: the kind's largest block
    mods.ignore(("collector::a::fill", "collector::a::use", "collector::a::lastuse", "collector::a::discard",
                 "collector::b0::fill", "collector::b0::use", "collector::b0::lastuse", "collector::b0::discard"))
    mods.done()
    ops = list(ins.operands)
    if len(ops) < 5 + 2 * scaled:
        raise bad(ins, "expected [d-tmem], a-desc|[a-tmem], b-desc, idesc, "
                  + ("[scale-A-tmem], [scale-B-tmem], " if scaled else "... ") + "enable-input-d")
    rest = ops[4:]
    sf_ops = []
    if scaled:
        if not all(isinstance(x, Addr) for x in rest[:2]):
            raise bad(ins, "the scale factors must be [tensor-memory] operands")
        sf_ops = [address(dec, x, "shared", ins)[1] for x in rest[:2]]
        rest = rest[2:]
    disable = rest.pop(0) if rest and isinstance(rest[0], Vec) else None
    if not rest:
        raise bad(ins, "missing enable-input-d")
    enable = dec.reader(rest.pop(0), "pred", ins)
    scale_d = rest.pop(0).value if rest and isinstance(rest[0], Imm) else 0
    if rest:
        raise bad(ins, "unexpected operands after enable-input-d")
    if disable is not None and len(disable.items) != 4 * (1 + pair):
        raise bad(ins, f"cta_group::{1 + pair} takes {4 * (1 + pair)} disable-output-lane registers")
    dis = [dec.reader(r, "u32", ins) for r in disable.items] if disable is not None else []
    _, d_addr = address(dec, ops[0], "shared", ins)     # a tensor-memory address: just a 32-bit value
    a_tmem = isinstance(ops[1], Addr)
    if pair and (a_tmem or scale_d):
        raise bad(ins, "cta_group::2 with A in tensor memory or scale-input-d is not supported by the emulator")
    a_op = address(dec, ops[1], "shared", ins)[1] if a_tmem else dec.reader(ops[1], "b64", ins)
    b_op = dec.reader(ops[2], "b64", ins)
    id_op = dec.reader(ops[3], "u32", ins)
    k = KIND_K[kind]
    what = f"tcgen05.mma at line {ins.line}"

    def fn(st: Any, m: Any) -> None:
        for t in lanes_of(st, m).tolist():
            tm = tmem(st, t)
            try:
                f = decode_idesc(_at(st, id_op, t), kind, pair)
            except ValueError as e:
                raise DeviceFault(f"tcgen05.mma instruction descriptor: {e}", t) from None
            if scale_d and kind not in ("f16", "tf32"):
                raise DeviceFault("scale-input-d needs .kind::f16 or .kind::tf32", t)
            mm, n = f["m"], f["n"]
            (aty, aes), (bty, bes) = f["a"], f["b"]
            if pair:
                from .tcgen05_pair import pair_mma

                scales = (_at(st, sf_ops[0], t), _at(st, sf_ops[1], t), vec) if sf_ops else None
                pair_mma(st, t, f, k, _at(st, a_op, t), _at(st, b_op, t), _at(st, d_addr, t) & 0xFFFFFFFF,
                         bool(_at(st, enable, t)), [_at(st, r, t) & 0xFFFFFFFF for r in dis], ins, what, scales)
                continue
            # its pipeline class: mma -> mma runs in issue order only with the same accumulator and shape
            pipe = ("mma", pair, _at(st, d_addr, t) & 0xFFFFFFFF, mm, n, kind)
            if a_tmem:
                a = _at(st, a_op, t) & 0xFFFFFFFF
                per = 4 // aes
                li, ci = _cells(st, a >> 16, a & 0xFFFF, mm, k // per, t, "tcgen05.mma A")
                if st.races is not None:
                    _track(st, li, ci, t, False, ins, ("tcgen05", t), pipe=pipe)
                raw = np.ascontiguousarray(tm.cells[li, ci]).view(np.dtype(f"<u{aes}"))
                A = element_values(raw, aty)
            elif aty == "e2m1":
                A = _fp4_operand(st, _at(st, a_op, t), mm, k, t, what, ins)
            else:
                A = _smem_operand(st, _at(st, a_op, t), mm, k, aty, aes, not f["trans_a"], t, what, ins)
            if bty == "e2m1":
                B = _fp4_operand(st, _at(st, b_op, t), n, k, t, what, ins)
            else:
                B = _smem_operand(st, _at(st, b_op, t), n, k, bty, bes, not f["trans_b"], t, what, ins)
            if sf_ops:
                A = _scaled(A, _scales(st, _at(st, sf_ops[0], t), mm, f["sf_a"], vec, f["scale"], t, ins))
                B = _scaled(B, _scales(st, _at(st, sf_ops[1], t), n, f["sf_b"], vec, f["scale"], t, ins))
            D = ((-A if f["neg_a"] else A) @ (-B if f["neg_b"] else B).T)
            d = _at(st, d_addr, t) & 0xFFFFFFFF
            rows = (d >> 16) + d_lanes(mm)
            li, ci = _cells(st, int(rows.min()), d & 0xFFFF, int(rows.max() - rows.min()) + 1, n, t, "tcgen05.mma D")
            ci = ci[0]
            if st.races is not None and _at(st, enable, t):
                cells = _tensor_cells(st)
                _written(st, cells, cells.cells(rows[:, None] + LANES * (t // st.cta_threads), ci[None, :]), t,
                         "tcgen05.mma accumulating (enable-input-d true)")
            old = tm.cells[rows[:, None], ci[None, :]] if _at(st, enable, t) else None
            out = accumulate(f, D, old, scale_d)
            keep = np.ones(mm, dtype=bool)
            if dis:
                bits = np.array([_at(st, r, t) & 0xFFFFFFFF for r in dis], dtype=np.uint64)
                lane_of_row = rows - (d >> 16)
                keep = ((bits[lane_of_row // 32] >> (lane_of_row % 32).astype(np.uint64)) & 1) == 0
            if st.races is not None:    # written when the thread's next tcgen05.commit completes (the
                # write is checked against D's last write and reads: that orders an accumulating read too)
                _track(st, rows[keep][:, None], ci[None, :], t, True, ins, ("tcgen05", t), pipe=pipe)
            tm.cells[rows[keep][:, None], ci[None, :]] = out[keep]

    return (K_OP, fn, None)


def accumulate(f: dict, D: Any, old: Any, scale_d: int = 0) -> Any:
    """The cells (uint32) of accumulator D (+ the cells `old` hold, unless None, scaled by 2^-scale_d)
    in the type of the instruction descriptor `f`."""
    np = _np()
    if old is not None:
        C = old.view(np.int32).astype(np.int64) if f["d"] == "s32" else old.view(np.float32).astype(np.float64)
        D = D + (C * 2.0 ** -scale_d if scale_d else C)
    if f["d"] == "s32":
        if f["sat"]:
            D = np.clip(D, -(1 << 31), (1 << 31) - 1)
        return (D.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
    return D.astype(np.float32).view(np.uint32)


def _scaled(x: Any, scales: Any) -> Any:
    """Operand rows (rows, K) times their block scales (rows, vec): K cut in `vec` equal blocks."""
    rows, k = x.shape
    vec = scales.shape[1]
    return (x.reshape(rows, vec, k // vec) * scales[:, :, None]).reshape(rows, k)


def _fp4_operand(st: Any, desc: int, rows: int, k: int, t: int, what: str, ins: Instr) -> Any:
    """A K-major e2m1 operand (rows, k): two elements to a byte, the even K in the low nibble, so
    the descriptor describes a (rows, k / 2) matrix of bytes."""
    np = _np()
    raw = _smem_operand(st, desc, rows, k // 2, "u8", 1, True, t, what, ins).astype(np.uint8)
    nibbles = np.stack([raw & 0xF, raw >> 4], axis=-1).reshape(rows, k)
    return np.array(_E2M1)[nibbles]


def _scales(st: Any, addr: int, rows: int, sf_id: int, vec: int, scale: str, t: int, ins: Instr,
            cta: Optional[int] = None) -> Any:
    """The `vec` block scales (scale_vec::NX) of each of `rows` rows (of A) or columns (of B) for
    one MMA: (rows, vec).

    Scale-factor layout in tensor memory: row r is in lane r % 32 of every 32-lane quarter (the
    factors are duplicated to all four, as tcgen05.cp ...warpx4 writes them), column
    addr + r // 32, bytes `sf_id` .. sf_id + vec - 1 (the K blocks the MMA covers) of the 32-bit
    cell; the address's bits 30-31 repeat sf_id (NVIDIA's code derives the descriptor's IDs from
    them), which must be a multiple of `vec`. `cta`: in that CTA's tensor memory (a pair's MMA)."""
    np = _np()
    a = addr & 0xFFFFFFFF
    if a >> 30 != sf_id:
        raise DeviceFault(f"scale-factor address 0x{a:x} selects byte {a >> 30} of its cells (bits 30-31), "
                          f"the instruction descriptor byte {sf_id}", t)
    if sf_id % vec:
        raise DeviceFault(f"scale-factor ID {sf_id} is not a multiple of scale_vec::{vec}X", t)
    lane0, col0 = (a >> 16) & 0x3FFF, a & 0xFFFF
    r = np.arange(rows)
    li, ci = _cells(st, lane0, col0, 32, -(-rows // 32), t, "tcgen05.mma scale factors", cta=cta)
    if st.races is not None:
        _track(st, li, ci, t, False, ins, ("tcgen05", t), cta=cta)
    cells = tmem(st, t, cta).cells[li, ci]                    # (32 lanes, columns)
    shifts = (8 * (sf_id + np.arange(vec))).astype(np.uint32)
    raw = ((cells[r % 32, r // 32][:, None] >> shifts[None, :]) & np.uint32(0xFF)).astype(np.uint8)
    if scale == "ue8m0":
        return np.where(raw == 255, np.nan, np.exp2(raw.astype(np.float64) - 127))
    import ml_dtypes

    return raw.view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _smem_operand(st: Any, desc: int, rows: int, k: int, ty: str, esize: int, k_major: bool, t: int,
                  what: str, ins: Instr, cta: Optional[int] = None) -> Any:
    """The operand a shared-memory descriptor describes, in the issuing thread's CTA or in CTA `cta`."""
    try:
        start, lbo, sbo, span, atom = decode_umma_desc(desc)
    except ValueError as e:
        raise DeviceFault(str(e), t) from None
    base = smem_base(st, t) if cta is None else cta * st.smem_stride
    addrs = operand_addresses(start, rows, k, esize, k_major, lbo, sbo, span, atom, base_offset(desc)) + base
    if st.races is not None:
        owner = ("tcgen05", t)      # complete at the thread's next tcgen05.commit
        st.races.async_read(st, ins.line, operand_bytes(addrs, esize), _np().array([t]), f"the {what}", owner,
                            copy=ins.mods[:1] == ("cp",))
    return smem_matrix(st, addrs, ty, esize, what, t, base)


def _commit(dec: Decoder, ins: Instr) -> Any:
    from .async_ops import _arrive, _mbar_keys

    mods = Mods(ins)
    mods.need(("commit",), ".commit")
    _cta_group(mods, ins, pairs=True)      # the mbarrier may be the peer CTA's: nothing else changes
    mods.need(("mbarrier::arrive::one",), ".mbarrier::arrive::one")
    space = "shared" if mods.one(("shared::cluster", "shared::cta")) else "generic"
    multicast = mods.flag("multicast::cluster")
    mods.need(("b64",), ".b64")
    mods.done()
    if len(ins.operands) != 1 + multicast:
        raise bad(ins, "expected [mbar]" + (", ctaMask" if multicast else ""))
    _, mbar = address(dec, ins.operands[0], space, ins)
    mask = dec.reader(ins.operands[1], "u16", ins) if multicast else None

    def commit(st: Any, m: Any) -> None:
        lanes = lanes_of(st, m)
        if lanes.size == 0:
            return
        keys = _mbar_keys(st, mbar, lanes, m, space)
        for key, t in zip(keys.tolist(), lanes.tolist()):
            if mask is None:
                # the thread's tcgen05 operations complete first
                _arrive(st, int(key), 1, t, commit=True, ins=ins)
                continue
            from .tcgen05_pair import multicast_keys

            for k in multicast_keys(st, int(key), _at(st, mask, t) & 0xFFFF, t):   # the same offset in each CTA
                _arrive(st, k, 1, t, commit=True, ins=ins)

    return (K_OP, commit, None)


# shape -> (rows, 32-bit columns, {row block: the 32-lane quarters it is copied to})
CP_SHAPES = {"128x256b": (128, 8, None), "4x256b": (4, 8, None), "128x128b": (128, 4, None),
             "32x128b.warpx4": (32, 4, {0: (0, 1, 2, 3)}),
             "64x128b.warpx2::02_13": (64, 4, {0: (0, 2), 1: (1, 3)}),
             "64x128b.warpx2::01_23": (64, 4, {0: (0, 1), 1: (2, 3)})}


def _cp(dec: Decoder, ins: Instr) -> Any:
    from .tcgen05_pair import pair_ctas

    np = _np()
    mods = Mods(ins)
    mods.need(("cp",), ".cp")
    pair = _cta_group(mods, ins, pairs=True)
    shape = next((m for m in mods.rest if m in ("128x256b", "4x256b", "128x128b", "32x128b", "64x128b")), None)
    if shape is None:
        raise bad(ins, "missing the shape (.128x256b, .4x256b, .128x128b, .32x128b.warpx4, .64x128b.warpx2::..)")
    mods.flag(shape)
    if shape in ("32x128b", "64x128b"):
        shape += "." + mods.need(("warpx4",) if shape == "32x128b" else ("warpx2::02_13", "warpx2::01_23"),
                                 ".warpx4" if shape == "32x128b" else ".warpx2::02_13 or ::01_23")
    mods.done()
    _, taddr = address(dec, ins.operands[0], "shared", ins)
    desc = dec.reader(ins.operands[1], "b64", ins)
    rows, cols, copies = CP_SHAPES[shape]
    what = f"tcgen05.cp at line {ins.line}"

    def fn(st: Any, m: Any) -> None:
        for t in lanes_of(st, m).tolist():
            # .cta_group::2: in each CTA of the pair, from its shared memory into its tensor memory (same
            # descriptor and address), as the pair's MMA reads each CTA's operands where they are
            ctas: tuple = pair_ctas(st, t, "tcgen05.cp") if pair else (None,)
            for p in ctas:
                _copy(st, t, p, _smem_operand(st, _at(st, desc, t), rows, cols, "u32", 4, True, t, what, ins,
                                              cta=p).astype(np.uint32), _at(st, taddr, t) & 0xFFFFFFFF)

    def _copy(st: Any, t: int, p: Optional[int], vals: Any, a: int) -> None:
        tm = tmem(st, t, p)
        if copies is None:
            li, ci = _cells(st, a >> 16, a & 0xFFFF, rows, cols, t, "tcgen05.cp", cta=p)
            if st.races is not None:
                _track(st, li, ci, t, True, ins, ("tcgen05", t), cta=p, pipe=("cp", pair))
            tm.cells[li, ci] = vals
            return
        if a >> 16:
            raise DeviceFault(f"tcgen05.cp.{shape} must address lane 0, not lane {a >> 16}", t)
        for block, quarters in copies.items():
            for q in quarters:
                li, ci = _cells(st, 32 * q, a & 0xFFFF, 32, cols, t, "tcgen05.cp", cta=p)
                if st.races is not None:
                    _track(st, li, ci, t, True, ins, ("tcgen05", t), cta=p, pipe=("cp", pair))
                tm.cells[li, ci] = vals[32 * block:32 * block + 32]

    return (K_OP, fn, None)


def _fence(dec: Decoder, ins: Instr) -> Any:
    """tcgen05.fence::before/after_thread_sync: order tcgen05 operations with thread synchronization
    (the race checker's tensor-memory clocks, happens_before.py)."""
    mods = Mods(ins)
    which = mods.need(("fence::before_thread_sync", "fence::after_thread_sync"), "the fence")
    mods.done()
    after = which == "fence::after_thread_sync"

    def fence(st: Any, m: Any) -> None:
        if st.races is not None:
            lanes = np.flatnonzero(m) if m is not None else np.arange(st.n)
            if after:
                st.races.hb.tcgen05_after_sync(lanes)
            else:
                st.races.hb.tcgen05_before_sync(lanes)

    np = _np()
    return (K_OP, fence, None)


def _tcgen05(dec: Decoder, ins: Instr) -> Any:
    head = ins.mods[0] if ins.mods else ""
    if head in ("alloc", "dealloc", "relinquish_alloc_permit"):
        return _alloc(dec, ins)
    if head in ("ld", "st"):
        return _ldst(dec, ins)
    if head in ("wait::ld", "wait::st"):
        return _wait(dec, ins, head[6:])
    if head == "mma":
        return _mma(dec, ins)
    if head == "commit":
        return _commit(dec, ins)
    if head == "cp":
        return _cp(dec, ins)
    if head.startswith("fence::"):
        return _fence(dec, ins)
    raise bad(ins, "unsupported tcgen05 instruction")


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {"tcgen05": _tcgen05}
