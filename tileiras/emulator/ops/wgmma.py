"""Hopper warpgroup MMA: wgmma.fence / mma_async / commit_group / wait_group.

A warpgroup is four consecutive warps (threads 128*w ... 128*w + 127). mma_async
computes D = A * B (+ D when scale-d is true) for every warpgroup executing it, when it
issues: A (64 x K) comes from shared memory through a matrix descriptor or from registers,
B (N x K, or K x N when transposed) from shared memory; descriptors are decoded and
swizzled as `smem_layout.py` describes. fp8 inputs with an f32 accumulator accumulate at the
lower precision the ISA allows them (`fp8_accumulate`). tf32 operands read from shared memory are rounded to
nearest (ties to even) from their f32 bits, as an H200 does (measured: wgmmas fed unrounded f32
matched ones fed cvt.rn.tf32 values bit for bit, five matmuls of 16.7M outputs each); register A
operands keep the top 19 bits (not measured). Products are exact and the sum is rounded
once to the accumulator type. The accumulator registers (and register A operands) stay *pending*
until a wgmma.wait_group retires the wgmma-group holding the instruction: touching them
before is reported (`async_regs.py`). With the race checker, the shared operands must be
visible to the async proxy (TMA data waited for, generic stores fenced).

Accumulator fragment (m64nN): in warp w of the warpgroup, lane l (g = l >> 2, t = l & 3),
element i of the thread's N/2 accumulators is row 16w + g + 8*((i >> 1) & 1), column
8*(i >> 2) + 2t + (i & 1); f16 accumulators pack elements 2j, 2j+1 into register j.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Optional

from ..async_regs import Pending
from ..errors import DeviceFault
from ..spaces import smem_base
from ..parser import Imm, Instr, Vec
from ..program import K_COLL, WARPGROUP, Decoder, Mods, bad
from ..smem_layout import base_offset, decode_gmma_desc, operand_addresses
from .tensor import _elements, _layout

# input type -> (K of one instruction, element bytes, A register fragment (shape, layout kind))
INPUTS = {
    "f16": (16, 2, ("m16n8k16", "h")), "bf16": (16, 2, ("m16n8k16", "h")), "tf32": (8, 4, ("m16n8k8", "t")),
    "e4m3": (32, 1, ("m16n8k32", "b")), "e5m2": (32, 1, ("m16n8k32", "b")),
    "s8": (32, 1, ("m16n8k32", "b")), "u8": (32, 1, ("m16n8k32", "b")),
}
ACCUMULATORS = {"f16": ("f16", "bf16", "e4m3", "e5m2"), "f32": ("f16", "bf16", "tf32", "e4m3", "e5m2"),
                "s32": ("s8", "u8")}


FP8 = ("e4m3", "e5m2")
# fp8 inputs with an f32 accumulator: the PTX ISA (wgmma, from 9.2) says the current implementation accumulates
# "at higher than half precision but lower than single precision". Modelled as a Hopper measurement shows it (a
# GH200 adding 32 products of 1/256 per wgmma stalls at 64; DeepSeek-V3 reports "around 14 bits" on an H800):
# each addend (the K exact products and C) is aligned to the largest one's exponent and truncated below its
# 14-bit significand (ALIGN_BITS fraction bits), then summed and rounded to f32 once.
ALIGN_BITS = 13


def fp8_accumulate(A: Any, B: Any, C: Any) -> Any:
    """D = A @ B.T (+ C), (M x K) and (N x K) exact fp8 values, with the fp8 wgmma's aligned accumulation."""
    np = _np()
    terms = A[:, None, :] * B[None, :, :]                   # M x N x K exact products
    if C is not None:
        terms = np.concatenate([terms, np.asarray(C, dtype=np.float64)[:, :, None]], axis=2)
    if not np.isfinite(terms).all():
        return terms.sum(axis=2)                            # inf / NaN propagate as in an exact sum
    top = np.abs(terms).max(axis=2, keepdims=True)
    exp = np.floor(np.log2(np.where(top > 0, top, 1.0)))
    quantum = np.exp2(exp - ALIGN_BITS)
    return (np.trunc(terms / quantum) * quantum).sum(axis=2)


def _np() -> Any:
    import numpy as np

    return np


def element_values(raw: Any, ty: str, tf32_nearest: bool = False) -> Any:
    """Unsigned raw bits (any shape) of `ty` elements -> float64 (int64 for integers) values. tf32:
    the top 19 bits of each f32 (truncated), or rounded to them, ties to even (`tf32_nearest`)."""
    np = _np()
    if ty in ("s8", "u8"):
        return raw.astype(np.uint8).view(np.int8 if ty == "s8" else np.uint8).astype(np.int64)
    if ty == "tf32":
        bits = raw.astype(np.uint32)
        if tf32_nearest:
            bits = tf32_round_nearest(bits)
        return (bits & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if ty == "f32":
        return raw.astype(np.uint32).view(np.float32).astype(np.float64)
    from ..ptxtypes import np_dtype

    dt = np_dtype(ty)
    return raw.astype(np.dtype(f"u{dt.itemsize}")).view(dt).astype(np.float64)


def tf32_round_nearest(bits: Any) -> Any:
    """f32 bits (uint32) rounded to tf32's 10 mantissa bits, ties to even; infinities and NaN kept."""
    np = _np()
    lsb = (bits >> np.uint32(13)) & np.uint32(1)
    rounded = (bits + np.uint32(0xFFF) + lsb) & np.uint32(0xFFFFE000)
    return np.where((bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000), bits, rounded)


def smem_matrix(st: Any, addrs: Any, ty: str, esize: int, what: str, lane: int, base: Optional[int] = None,
                tf32_nearest: bool = False) -> Any:
    """The values of a matrix whose elements lie at `addrs` (any shape): offsets in the state's shared
    buffer, inside the shared memory of the lane's CTA (or the one starting at `base`); tf32 elements
    read as `element_values` says."""
    np = _np()
    base = smem_base(st, lane) if base is None else base
    if addrs.size and (int(addrs.min()) < base or int(addrs.max()) + esize > base + st.smem_size):
        raise DeviceFault(f"{what} operand reaches outside shared memory (addresses 0x{int(addrs.min()):x}.."
                          f"0x{int(addrs.max()):x})", lane)
    raw = st.shared[addrs[..., None] + np.arange(esize)]
    bits = np.ascontiguousarray(raw).view(np.dtype(f"<u{esize}"))[..., 0]
    return element_values(bits, ty, tf32_nearest)


def operand_bytes(addrs: Any, esize: int) -> Any:
    np = _np()
    return (addrs[..., None] + np.arange(esize)).ravel()


@lru_cache(maxsize=None)
def accumulator_layout(n: int) -> tuple[Any, Any]:
    """(rows, cols), each (4 warps, 32 lanes, N/2 elements), of a warpgroup's m64nN accumulator."""
    np = _np()
    w = np.arange(4)[:, None, None]
    lane = np.arange(32)[None, :, None]
    i = np.arange(n // 2)[None, None, :]
    g, t = lane >> 2, lane & 3
    rows = 16 * w + g + 8 * ((i >> 1) & 1)
    cols = 8 * (i >> 2) + 2 * t + (i & 1)
    return np.broadcast_to(rows, (4, 32, n // 2)).copy(), np.broadcast_to(cols, (4, 32, n // 2)).copy()


def _warpgroups(st: Any, m: Any, ins: Instr) -> list[int]:
    """The warpgroups executing the instruction; each must be complete and all present."""
    np = _np()
    active = np.ones(st.n, dtype=bool) if m is None else m
    if st.n % 128:
        raise DeviceFault(f"{ins.opcode}.{ins.mods[0]} needs whole warpgroups; the block has {st.n} threads")
    per = active.reshape(-1, 128)
    groups = np.flatnonzero(per.any(axis=1))
    alive = ~st.exited.reshape(-1, 128)
    for g in groups.tolist():
        if not (per[g] | ~alive[g]).all():
            missing = int(np.argmax(~per[g] & alive[g])) + 128 * g
            raise DeviceFault(f"warpgroup {g} executes {ins.opcode}.{ins.mods[0]} without all of its threads "
                              f"(thread {missing} is elsewhere)", missing)
    return groups.tolist()


def _uniform(st: Any, reader: Any, g: int, what: str) -> int:
    np = _np()
    v = np.asarray(reader(st))
    if v.ndim == 0:
        return int(v)
    part = v[128 * g:128 * g + 128]
    live = ~st.exited[128 * g:128 * g + 128]
    vals = np.unique(part[live])
    if vals.size != 1:
        raise DeviceFault(f"{what} differs between the threads of warpgroup {g}", 128 * g)
    return int(vals[0])


def _mma_async(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    mods.need(("mma_async",), ".mma_async")
    mods.need(("sync",), ".sync")
    mods.need(("aligned",), ".aligned")
    shape = next((x for x in mods.rest if x.startswith("m64n")), None)
    if shape is None:
        raise bad(ins, "missing the .m64nNkK shape")
    mods.flag(shape)
    satfinite = mods.flag("satfinite")
    types = mods.types()
    mods.done()
    if len(types) != 3:
        raise bad(ins, "expected .dtype.atype.btype")
    dty, aty, bty = types
    if aty not in INPUTS or bty not in INPUTS or aty not in ACCUMULATORS.get(dty, ()):
        raise bad(ins, f"unsupported types .{dty}.{aty}.{bty}")
    if (aty in ("f16", "bf16", "tf32") and bty != aty) or (aty in ("s8", "u8")) != (bty in ("s8", "u8")):
        raise bad(ins, f"mismatched input types .{aty}/.{bty}")
    k, esize, afrag = INPUTS[aty]
    try:
        n = int(shape[4:shape.index("k")])
        kk = int(shape[shape.index("k") + 1:])
    except ValueError:
        raise bad(ins, f"bad shape .{shape}") from None
    if kk != k or not (8 <= n <= 256 and n % 8 == 0):
        raise bad(ins, f"shape .{shape} does not exist for .{aty} inputs (m64nNk{k}, N = 8..256 by 8)")
    ops = list(ins.operands)
    if not isinstance(ops[0], Vec):
        raise bad(ins, "the accumulator must be a vector of registers")
    integer = dty == "s32"
    per_reg = 2 if dty == "f16" else 1
    if len(ops[0].items) != n // 2 // per_reg:
        raise bad(ins, f"m64n{n} .{dty} needs {n // 2 // per_reg} accumulator registers")
    a_regs = isinstance(ops[1], Vec)
    transposable = aty in ("f16", "bf16")
    nimm = 0 if integer else (2 + (transposable and 1) + (transposable and not a_regs and 1))
    if len(ops) != 4 + nimm:
        raise bad(ins, f"expected {4 + nimm} operands")
    imms = ops[4:]
    if not all(isinstance(x, Imm) for x in imms):
        raise bad(ins, "scale and transpose operands must be immediates")
    scale_a = imms[0].value if nimm else 1
    scale_b = imms[1].value if nimm else 1
    if scale_a not in (1, -1) or scale_b not in (1, -1):
        raise bad(ins, "imm-scale-a/b must be 1 or -1")
    trans_a = bool(imms[2].value) if transposable and not a_regs else False
    trans_b = bool(imms[-1].value) if transposable else False
    d_regs = [dec.reg_of(r, ins) for r in ops[0].items]
    if None in d_regs:
        raise bad(ins, "the accumulator must be registers")
    creg = "b32"
    d_read = [dec.reader(r, creg, ins) for r in ops[0].items]
    d_write = [dec.writer_t(r, creg, ins) for r in ops[0].items]
    pending_regs = set(d_regs)
    if a_regs:
        shape16, kind = afrag
        ra, ca, na = _layout(shape16, kind, "a")
        per_a = {"h": 2, "t": 1, "b": 4}[kind]
        if len(ops[1].items) != na // per_a:
            raise bad(ins, f"the A fragment needs {na // per_a} registers")
        a_read = [dec.reader(r, "b32", ins) for r in ops[1].items]
        pending_regs |= {dec.reg_of(r, ins) for r in ops[1].items} - {None}
    else:
        a_desc = dec.reader(ops[1], "b64", ins)
    b_desc = dec.reader(ops[2], "b64", ins)
    scale_d = dec.reader(ops[3], "pred", ins)
    dec.read_only_when([dec.reg_of(r, ins) for r in ops[0].items], scale_d)
    dec.prog.async_regs |= pending_regs
    dec.prog.async_exempt.add(id(ins))
    rows_i, cols_i = accumulator_layout(n)
    fp8_f32 = aty in FP8 and dty == "f32"
    pending = frozenset(pending_regs)
    what = f"wgmma.mma_async at line {ins.line}"

    from ..wgmma_fence import check as check_fence

    names = dec.prog.reg_names

    def fn(st: Any, m: Any) -> None:
        for g in _warpgroups(st, m, ins):
            check_fence(st, g, pending, names, ins.line)
            lanes = np.arange(128 * g, 128 * g + 128)
            base = smem_base(st, 128 * g)       # descriptor addresses are the CTA's
            if a_regs:
                raw = np.stack([np.broadcast_to(np.asarray(r(st)), (st.n,))[lanes] for r in a_read], axis=1)
                vals = _elements(raw.astype(np.uint32), aty).reshape(4, 32, -1)
                A = np.zeros((64, k), dtype=vals.dtype)
                for w in range(4):
                    A[16 * w + ra, ca] = vals[w]
            else:
                desc = _uniform(st, a_desc, g, "the A descriptor")
                start, lbo, sbo, span, _ = decode_gmma_desc(desc)
                addrs = operand_addresses(start, 64, k, esize, not trans_a, lbo, sbo, span,
                                          base=base_offset(desc)) + base
                if st.races is not None:
                    st.races.async_read(st, ins.line, operand_bytes(addrs, esize), lanes, f"the {what}",
                                        ("wgmma", g, st.wgmma_committed.get(g, 0)))
                A = smem_matrix(st, addrs, aty, esize, "wgmma A", int(lanes[0]), tf32_nearest=True)
            desc = _uniform(st, b_desc, g, "the B descriptor")
            start, lbo, sbo, span, _ = decode_gmma_desc(desc)
            addrs = operand_addresses(start, n, k, esize, not trans_b, lbo, sbo, span, base=base_offset(desc)) + base
            if st.races is not None:
                st.races.async_read(st, ins.line, operand_bytes(addrs, esize), lanes, f"the {what}",
                                        ("wgmma", g, st.wgmma_committed.get(g, 0)))
            B = smem_matrix(st, addrs, bty, esize, "wgmma B", int(lanes[0]), tf32_nearest=True)
            C = None
            if _uniform(st, scale_d, g, "scale-d"):
                raw = np.stack([np.broadcast_to(np.asarray(r(st)), (st.n,))[lanes] for r in d_read], axis=1)
                acc = _elements(raw.astype(np.uint32), dty).reshape(4, 32, -1)
                C = np.zeros((64, n), dtype=acc.dtype)
                C[rows_i, cols_i] = acc
            if fp8_f32:
                D = fp8_accumulate(A * scale_a, B * scale_b, C)
            else:
                D = (A * scale_a) @ (B * scale_b).T
                D = D if C is None else D + C
            elems = D[rows_i, cols_i].reshape(128, -1)
            if integer:
                if satfinite:
                    elems = np.clip(elems, -(1 << 31), (1 << 31) - 1)
                out = (elems.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32)
            elif dty == "f32":
                out = elems.astype(np.float32).view(np.uint32)
            else:
                out = np.ascontiguousarray(elems.astype(np.float16)).view(np.uint32)
            sel = np.zeros(st.n, dtype=bool)
            sel[lanes] = True
            full_out = np.zeros((st.n, out.shape[1]), dtype=np.uint32)
            full_out[lanes] = out
            for j, w in enumerate(d_write):
                w.put(st, sel, full_out[:, j])
            st.pending_regs.append(Pending(sel, pending, ins.line, "wgmma.mma_async", "wgmma.wait_group", g))

    return (K_COLL, fn, WARPGROUP)


def _group_op(dec: Decoder, ins: Instr) -> Any:
    mods = Mods(ins)
    op = mods.need(("fence", "commit_group", "wait_group"), ".fence, .commit_group or .wait_group")
    mods.need(("sync",), ".sync")
    mods.need(("aligned",), ".aligned")
    mods.done()
    if op == "fence":
        if ins.operands:
            raise bad(ins, "wgmma.fence takes no operands")

        def fence(st: Any, m: Any) -> None:
            from .. import redundancy
            from ..wgmma_fence import fence

            groups = _warpgroups(st, m, ins)
            redundancy.wgmma_fence(st, groups, ins.line)
            fence(st, groups)

        return (K_COLL, fence, WARPGROUP)
    if op == "commit_group":
        def commit(st: Any, m: Any) -> None:
            for g in _warpgroups(st, m, ins):
                n = st.wgmma_committed.get(g, 0)
                for p in st.pending_regs:
                    if p.what == "wgmma.mma_async" and p.unit == g and p.group is None:
                        p.group = n
                st.wgmma_committed[g] = n + 1

        return (K_COLL, commit, WARPGROUP)
    if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
        raise bad(ins, "expected an immediate group count")
    keep = ins.operands[0].value

    def wait(st: Any, m: Any) -> None:
        for g in _warpgroups(st, m, ins):
            done = st.wgmma_committed.get(g, 0) - keep
            st.pending_regs = [p for p in st.pending_regs if not (
                p.what == "wgmma.mma_async" and p.unit == g and p.group is not None and p.group < done)]
            if st.races is not None:     # the retired groups' shared-memory reads are complete
                st.races.hb.finish(lambda o: o[0] == "wgmma" and o[1] == g and o[2] < done)

    return (K_COLL, wait, WARPGROUP)


def _wgmma(dec: Decoder, ins: Instr) -> Any:
    if ins.mods[:1] == ("mma_async",):
        return _mma_async(dec, ins)
    return _group_op(dec, ins)


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {"wgmma": _wgmma}
