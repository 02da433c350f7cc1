"""TMA: cp.async.bulk.tensor loads and stores through tensor maps, and tensormap.replace.

Tensor maps are in the hardware's 128-byte layout (`tileiras.codegen.tensormap`), read from
wherever the operand points: a kernel parameter (`.param .align 64 .b8 [128]`, by name or
through cvta.param) or global/const memory (a map edited in shared memory must first be
copied out with tensormap.cp_fenceproxy, as on the GPU).

A load moves its box when issued: in-bounds elements come from global memory, the others
are filled (zeros, or NaN for a NaN-fill map); the box lands densely in shared memory
(dimension 0 innermost) through the map's swizzle, and the mbarrier operand then gets
complete_tx(box bytes). A store writes the in-bounds elements of the box back. Bulk
groups (commit_group / wait_group) are therefore always complete. With the race checker,
the load's bytes must not be read before a wait has seen its mbarrier phase, and a store
must not read shared memory written by the generic proxy without a fence.proxy.async.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import DeviceFault
from ..spaces import shared_index, shared_outside
from ..memory import CTA_OFFSET_MASK, CTA_RANK_SHIFT, AccessFault
from ..parser import Addr, Imm, Instr, Sym, TensorAddr, Vec
from ..program import K_COLL, K_OP, Decoder, Mods, bad
from ..smem_layout import swizzle
from .. import spaces
from .common import lanes_of
from .memory import address


def _np() -> Any:
    import numpy as np

    return np


def tensormap_operand(dec: Decoder, base: Addr, ins: Instr) -> tuple[str, Callable[[Any], Any]]:
    """(space, st -> address) of the tensor map a TMA instruction names."""
    if isinstance(base.base, Sym):
        info = dec.lookup_sym(base.base.name)
        if info is not None and info.space == "kparam":
            return address(dec, base, "param", ins)
        if info is not None and info.space == "shared":
            raise bad(ins, "a tensor map must be in .param, .const or .global memory, not .shared")
        return address(dec, base, "global", ins)
    return address(dec, base, "generic", ins)


def read_tensormap(st: Any, space: str, addr: int, lane: int) -> Any:
    """The TensorMap stored at `addr` in `space`; a fault if it is misaligned or not a valid map."""
    from ...codegen.tensormap import SIZE, TensorMapError, decode

    np = _np()
    if addr % 64:
        raise DeviceFault(f"tensor map at 0x{addr:x} is not 64-byte aligned", lane)
    one = np.array([lane], dtype=np.int64)
    (_, buf, _, offs), = spaces.resolve(st, space, np.array([addr], dtype=np.uint64), one, SIZE, 1)[:1]
    if buf is st.shared:
        raise DeviceFault(f"tensor map at generic address 0x{addr:x} is in shared memory; TMA reads maps from "
                          "kernel parameters or global memory", lane)
    raw = buf[int(offs[0]):int(offs[0]) + SIZE].tobytes()
    if st.races is not None and buf is st.mem.buf and st.acquired_maps.get(addr, (None,))[0] != raw[:64] \
            and (addr in st.acquired_maps or not st.mem.from_host(addr, SIZE)):
        raise DeviceFault(f"missing fence.proxy.tensormap::generic.acquire: the tensor map at global address "
                          f"0x{addr:x} is read by TMA as the generic proxy left it, not as an acquire of it "
                          "(after its writes were released) made it visible to the tensor-map proxy", lane)
    try:
        return decode(raw)
    except TensorMapError as e:
        where = "kernel parameter" if space == "kparam" else space
        raise DeviceFault(f"bad tensor map at {where} address 0x{addr:x}: {e}", lane) from None


def box_addresses(st: Any, tm: Any, coords: list[int], lane: int) -> tuple[Any, Any, Any]:
    """(global byte offsets into the heap, in-bounds mask, shared offsets from the box start), one per box
    element, in the box's shared-memory order (dimension 0 innermost)."""
    np = _np()
    es = tm.estrides()
    counts = tm.box_elements()
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in reversed(counts)], indexing="ij")
    inside = np.ones(grids[0].shape, dtype=bool)
    gaddr = np.full(grids[0].shape, tm.address, dtype=np.int64)
    for d in range(tm.rank):
        g = coords[d] + grids[tm.rank - 1 - d] * es[d]
        inside &= (g >= 0) & (g < tm.dims[d])
        gaddr += g * tm.strides[d]
    inside = inside.ravel()
    gaddr = gaddr.ravel()
    goffs = np.zeros(gaddr.size, dtype=np.int64)
    if inside.any():
        sel = np.flatnonzero(inside)
        try:
            goffs[sel] = st.mem.offsets(gaddr[sel].astype(np.uint64), tm.elem_bytes)
        except AccessFault as f:
            raise DeviceFault(f"tensor map element at global address 0x{int(gaddr[sel][f.index]):x} "
                              "(inside the map's dims) is outside every allocation", lane) from None
    soffs = np.arange(gaddr.size, dtype=np.int64) * tm.elem_bytes
    return goffs, inside, soffs


def _fill_bytes(tm: Any) -> Any:
    np = _np()
    from ..ptxtypes import np_dtype

    if tm.fill != "nan":
        return np.zeros(tm.elem_bytes, dtype=np.uint8)
    name = {"f32_ftz": "f32", "tf32": "f32", "tf32_ftz": "f32"}.get(tm.dtype, tm.dtype)
    return np.frombuffer(np.array(np.nan).astype(np_dtype(name)).tobytes(), dtype=np.uint8)


def _shared_span(st: Any, dst: int, tm: Any, lane: int) -> Any:
    """Shared byte addresses (elements, bytes) of the box at `dst`, swizzled, bounds-checked."""
    np = _np()
    align = 128 if tm.swizzle != "none" else 16
    if dst % align:
        raise DeviceFault(f"TMA shared-memory address 0x{dst:x} is not {align}-byte aligned", lane)
    nbytes = tm.box_bytes()
    if shared_outside(st, np.uint64(dst), nbytes):
        raise DeviceFault(f"TMA box of {nbytes} bytes at shared address 0x{dst:x} is out of bounds", lane)
    elems = dst + np.arange(0, nbytes, tm.elem_bytes, dtype=np.int64)
    return shared_index(st, swizzle(elems, tm.swizzle_bytes, tm.swizzle_atom))[:, None] + np.arange(tm.elem_bytes)


def _coords(dec: Decoder, vec: Vec, rank: int, ins: Instr) -> list:
    if len(vec.items) != rank:
        raise bad(ins, f"a .{rank}d copy needs {rank} coordinates, got {len(vec.items)}")
    return [dec.reader(c, "s32", ins) for c in vec.items]


def _at(st: Any, reader: Any, lane: int) -> int:
    v = _np().asarray(reader(st))
    return int(v if v.ndim == 0 else v[lane])


def bulk_tensor(dec: Decoder, ins: Instr, mods: Mods) -> Any:
    """cp.async.bulk.tensor.Nd ... (the modifiers after `bulk`); loads and stores."""
    mods.need(("tensor",), ".tensor")
    dim = mods.need(("1d", "2d", "3d", "4d", "5d"), "the dimension (.1d ... .5d)")
    rank = int(dim[0])
    if mods.flag("im2col", "im2col::w", "im2col::w::128", "im2col_no_offs"):
        raise bad(ins, "im2col tensor copies are not supported by the emulator")
    mods.flag("tile")
    hint = mods.flag("L2::cache_hint")
    pair = mods.one(("cta_group::1", "cta_group::2")) == "cta_group::2"
    ops = list(ins.operands)
    if ops and isinstance(ops[0], TensorAddr):
        # store: [tensorMap, coords], [srcMem]
        mods.need(("global",), "the .global destination")
        mods.need(("shared::cta",), "the .shared::cta source")
        mods.need(("bulk_group",), ".bulk_group")
        mods.done()
        if pair:
            raise bad(ins, ".cta_group::2 applies to loads into shared memory")
        if len(ops) != 2 + hint:
            raise bad(ins, "expected [tensorMap, coords], [srcMem]" + (", cache-policy" if hint else ""))
        tspace, taddr = tensormap_operand(dec, ops[0].base, ins)
        coords = _coords(dec, ops[0].coords, rank, ins)
        _, src = address(dec, ops[1], "shared", ins)
        return (K_OP, _store(taddr, tspace, coords, src, rank, ins), None)
    mods.need(("shared::cluster", "shared::cta"), "the shared-memory destination")
    mods.need(("global",), "the .global source")
    mods.need(("mbarrier::complete_tx::bytes",), ".mbarrier::complete_tx::bytes")
    multicast = mods.flag("multicast::cluster")
    mods.done()
    want = 3 + multicast + hint
    if len(ops) != want or not isinstance(ops[1], TensorAddr):
        raise bad(ins, "expected [dstMem], [tensorMap, coords], [mbar]" + (", ctaMask" if multicast else "")
                  + (", cache-policy" if hint else ""))
    _, dst = address(dec, ops[0], "shared", ins)
    tspace, taddr = tensormap_operand(dec, ops[1].base, ins)
    coords = _coords(dec, ops[1].coords, rank, ins)
    _, mbar = address(dec, ops[2], "shared", ins)
    mask = dec.reader(ops[3], "u16", ins) if multicast else None
    return (K_OP, _load(taddr, tspace, coords, dst, mbar, mask, pair, rank, ins), None)


def _destinations(st: Any, dst: int, mbar: int, mask: Any, pair: bool, lane: int) -> list[tuple[int, int]]:
    """(shared address of the box, of the mbarrier) in each CTA a TMA load writes.

    Unicast: `dst` and `mbar` as given; the mbarrier must be in the destination CTA or, with
    .cta_group::2, in the other CTA of its pair. Multicast: the CTAs of `mask`, each at the
    CTA-relative offsets of `dst` and `mbar`; with .cta_group::2 each destination signals the
    mbarrier of the CTA of its pair that `mbar` names (the pair's leader, for an even one)."""
    rank_d, rank_m = dst >> CTA_RANK_SHIFT, mbar >> CTA_RANK_SHIFT
    if mask is None:
        if rank_m != rank_d and not (pair and rank_m == rank_d ^ 1):
            raise DeviceFault(f"TMA load into CTA {rank_d} completes on an mbarrier in CTA {rank_m}: it must be "
                              "in the destination CTA" + ("" if pair else " (or, with .cta_group::2, its peer)"),
                              lane)
        return [(dst, mbar)]
    if mask == 0:
        raise DeviceFault("multicast mask 0 names no CTA", lane)
    if mask >> st.ncta:
        cluster = "one-CTA cluster" if st.ncta == 1 else f"cluster of {st.ncta} CTAs"
        raise DeviceFault(f"multicast mask 0x{mask:x} names CTAs outside this {cluster}", lane)
    out = []
    for r in range(st.ncta):
        if mask >> r & 1:
            to = (r & ~1) | (rank_m & 1) if pair else r
            out.append(((dst & CTA_OFFSET_MASK) | r << CTA_RANK_SHIFT, (mbar & CTA_OFFSET_MASK) | to << CTA_RANK_SHIFT))
    return out


def _load(taddr: Any, tspace: str, coords: list, dst: Any, mbar: Any, mask: Any, pair: bool, rank: int,
          ins: Instr) -> Any:
    np = _np()
    from .async_ops import _get, _mbar_keys, tx_done, published

    def fn(st: Any, m: Any) -> None:
        for lane in lanes_of(st, m).tolist():
            tm, goffs, inside = _box(st, tspace, taddr, coords, rank, lane)
            data = None
            cmask = None if mask is None else _at(st, mask, lane) & 0xFFFF
            for d, mb in _destinations(st, _at(st, dst, lane), _at(st, mbar, lane), cmask, pair, lane):
                sidx = _shared_span(st, d, tm, lane)
                if data is None:
                    data = np.broadcast_to(_fill_bytes(tm), sidx.shape).copy()
                    if inside.any():
                        gsel = goffs[inside][:, None] + np.arange(tm.elem_bytes)
                        data[inside] = st.mem.buf[gsel]
                        if st.races is not None:
                            st.races.check_bytes(st, _site(ins, False), "global", st.mem.buf.size, gsel.ravel(),
                                                 np.full(gsel.size, lane))
                one = np.array([lane], dtype=np.int64)
                key = int(_mbar_keys(st, lambda _st, a=np.uint64(mb): a, one, None, "shared")[0])
                b = _get(st, key, lane)
                published(st, b, lane, "a TMA load's completion", async_proxy=True)
                if st.races is not None:
                    st.races.async_write(st, ins.line, sidx.ravel(), lane, key, b.phase + 1)
                st.shared[sidx] = data
                tx_done(st, b, tm.box_bytes(), ins)

    return fn


def _box(st: Any, tspace: str, taddr: Any, coords: list, rank: int, lane: int) -> tuple:
    """(tensor map, global byte offsets of the box's elements, which lie inside the tensor) of a
    lane's bulk tensor copy."""
    tm = read_tensormap(st, tspace, _at(st, taddr, lane), lane)
    if tm.rank != rank:
        raise DeviceFault(f"a .{rank}d copy through a rank-{tm.rank} tensor map", lane)
    if tm.interleave != "none":
        raise DeviceFault("interleaved tensor maps are not supported by the emulator", lane)
    c = [_at(st, r, lane) for r in coords]
    c = [v - (1 << 32) if v >= 1 << 31 else v for v in c]   # coordinates are signed 32-bit
    goffs, inside, _ = box_addresses(st, tm, c, lane)
    return tm, goffs, inside


def _site(ins: Instr, write: bool) -> Any:
    from ..races import Site

    return Site(ins.line, write=write, strong=False)


def _store(taddr: Any, tspace: str, coords: list, src: Any, rank: int, ins: Instr) -> Any:
    np = _np()

    def fn(st: Any, m: Any) -> None:
        issued: set = set()
        for lane in lanes_of(st, m).tolist():
            # threads of a warp storing the same box issue one store (what ptxas makes of warp-uniform operands)
            key = (lane // 32, _at(st, taddr, lane), tuple(_at(st, r, lane) for r in coords), _at(st, src, lane))
            if key in issued:
                continue
            issued.add(key)
            tm, goffs, inside = _box(st, tspace, taddr, coords, rank, lane)
            sidx = _shared_span(st, _at(st, src, lane), tm, lane)
            if st.races is not None:    # the store reads shared memory until its bulk group retires
                st.races.async_read(st, ins.line, sidx.ravel(), np.array([lane]),
                                    f"the TMA store at line {ins.line}",
                                    ("bulk", lane, int(st.bulk_committed[lane])))
            if inside.any():
                gsel = goffs[inside][:, None] + np.arange(tm.elem_bytes)
                if st.races is not None:
                    st.races.check_bytes(st, _site(ins, True), "global", st.mem.buf.size, gsel.ravel(),
                                         np.full(gsel.size, lane))
                st.mem.buf[gsel] = st.shared[sidx[inside]]

    return fn


# --- cp.reduce.async.bulk.tensor -----------------------------------------------------

REDUCTIONS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")


def reduce_tensor(dec: Decoder, ins: Instr) -> Any:
    """cp.reduce.async.bulk.tensor.Nd.global.shared::cta.op.tile.bulk_group [tensorMap, coords], [srcMem]:
    combine the box into global memory element-wise (in the map's element type), in-bounds elements only."""
    np = _np()
    mods = Mods(ins)
    for m in ("reduce", "async", "bulk", "tensor"):
        mods.need((m,), f".{m}")
    dim = mods.need(("1d", "2d", "3d", "4d", "5d"), "the dimension (.1d ... .5d)")
    rank = int(dim[0])
    mods.need(("global",), ".global")
    mods.need(("shared::cta",), ".shared::cta")
    op = mods.need(REDUCTIONS, "the reduction")
    mods.flag("tile")
    mods.need(("bulk_group",), ".bulk_group")
    hint = mods.flag("L2::cache_hint")
    mods.done()
    ops = list(ins.operands)
    if len(ops) != 2 + hint or not isinstance(ops[0], TensorAddr):
        raise bad(ins, "expected [tensorMap, coords], [srcMem]")
    tspace, taddr = tensormap_operand(dec, ops[0].base, ins)
    coords = _coords(dec, ops[0].coords, rank, ins)
    _, src = address(dec, ops[1], "shared", ins)

    def fn(st: Any, m: Any) -> None:
        from ...codegen.tensormap import DTYPES
        from ..ptxtypes import np_dtype

        for lane in lanes_of(st, m).tolist():
            tm = read_tensormap(st, tspace, _at(st, taddr, lane), lane)
            if tm.rank != rank or tm.interleave != "none":
                raise DeviceFault(f"a .{rank}d reduction through a rank-{tm.rank} or interleaved tensor map", lane)
            name = {"s64": "s64", "u64": "u64", "s32": "s32", "u32": "u32", "u16": "u16", "u8": "u8",
                    "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}.get(tm.dtype)
            is_float = DTYPES[tm.dtype][2]
            if name is None or (is_float and op not in ("add", "min", "max")) or \
                    (op in ("inc", "dec") and name != "u32"):
                raise DeviceFault(f"cp.reduce .{op} does not exist for .{tm.dtype} tensors", lane)
            c = [_at(st, r, lane) for r in coords]
            c = [v - (1 << 32) if v >= 1 << 31 else v for v in c]
            goffs, inside, _ = box_addresses(st, tm, c, lane)
            sidx = _shared_span(st, _at(st, src, lane), tm, lane)
            if st.races is not None:
                st.races.async_read(st, ins.line, sidx.ravel(), np.array([lane]),
                                    f"the TMA reduction at line {ins.line}",
                                    ("bulk", lane, int(st.bulk_committed[lane])))
            if not inside.any():
                continue
            dt = np_dtype(name)
            gsel = goffs[inside][:, None] + np.arange(tm.elem_bytes)
            if st.races is not None:      # an atomic read-modify-write of each element
                from ..races import Site

                st.races.check_bytes(st, Site(ins.line, write=True, strong=True), "global", st.mem.buf.size,
                                     gsel.ravel(), np.full(gsel.size, lane))
            old = np.ascontiguousarray(st.mem.buf[gsel]).view(dt)[:, 0]
            new = np.ascontiguousarray(st.shared[sidx[inside]]).view(dt)[:, 0]
            out = _combine(op, old, new)
            st.mem.buf[gsel] = np.ascontiguousarray(out.astype(dt)).view(np.uint8).reshape(-1, tm.elem_bytes)

    return (K_OP, fn, None)


def _combine(op: str, old: Any, new: Any) -> Any:
    np = _np()
    if op == "add":
        if old.dtype.kind == "f":
            return (old.astype(np.float64) + new.astype(np.float64)).astype(old.dtype)
        return old + new
    if op in ("min", "max"):
        return (np.minimum if op == "min" else np.maximum)(old, new)
    if op == "inc":
        return np.where(old >= new, 0, old + 1).astype(old.dtype)
    if op == "dec":
        return np.where((old == 0) | (old > new), new, old - 1).astype(old.dtype)
    return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op](old, new)


# --- tensormap.replace --------------------------------------------------------------

# field -> takes an ordinal (the bits each field occupies are codegen.tensormap's)
_FIELDS = {"global_address": False, "rank": False, "elemtype": False, "swizzle_mode": False,
           "interleave_layout": False, "fill_mode": False, "global_dim": True, "global_stride": True,
           "box_dim": True, "element_stride": True}


def tensormap_cp_fenceproxy(dec: Decoder, ins: Instr) -> Any:
    """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.{cta,cluster,gpu,sys}.sync.aligned
    [dst], [src], 128: copy a map edited in shared memory to global memory (the fence is a no-op here)."""
    np = _np()
    mods = Mods(ins)
    mods.need(("cp_fenceproxy",), ".cp_fenceproxy")
    mods.need(("global",), ".global")
    mods.need(("shared::cta",), ".shared::cta")
    mods.need(("tensormap::generic",), ".tensormap::generic")
    mods.need(("release",), ".release")
    mods.one(("cta", "cluster", "gpu", "sys"))
    mods.need(("sync",), ".sync")
    mods.need(("aligned",), ".aligned")
    mods.done()
    ops = list(ins.operands)
    if len(ops) != 3 or not isinstance(ops[2], Imm) or ops[2].value != 128:
        raise bad(ins, "expected [dst], [src], 128")
    _, dst = address(dec, ops[0], "global", ins)
    _, src = address(dec, ops[1], "shared", ins)

    def fn(st: Any, m: Any) -> None:
        st.tensormap_releases += 1
        for lane in lanes_of(st, m).tolist():
            d, s_ = _at(st, dst, lane), _at(st, src, lane)
            one = np.array([lane], dtype=np.int64)
            (_, sbuf, _, so), = spaces.resolve(st, "shared", np.array([s_], dtype=np.uint64), one, 128, 128)
            (_, dbuf, _, do), = spaces.resolve(st, "global", np.array([d], dtype=np.uint64), one, 128, 64)
            dbuf[int(do[0]):int(do[0]) + 128] = sbuf[int(so[0]):int(so[0]) + 128]

    return (K_COLL, fn, None)


def tensormap_fence(dec: Decoder, ins: Instr) -> Any:
    """fence.proxy.tensormap::generic.release.scope, and .acquire.scope [addr], 128. The race checker
    keeps, per map a CTA acquired, the first 64 bytes the acquire saw (what TMA then reads, `read_tensormap`),
    and wants a release by the CTA (or a cp_fenceproxy) between a change of the map and its acquire."""
    np = _np()
    if "release" in ins.mods:
        def release(st: Any, m: Any) -> None:
            st.tensormap_releases += 1
        return (K_OP, release, None)
    ops = list(ins.operands)
    if len(ops) != 2 or not isinstance(ops[1], Imm) or ops[1].value != 128:
        raise bad(ins, "expected [addr], 128")
    _, where = address(dec, ops[0], "global", ins)

    def acquire(st: Any, m: Any) -> None:
        if st.races is None:
            return
        for lane in lanes_of(st, m).tolist():
            addr = _at(st, where, lane)
            one = np.array([lane], dtype=np.int64)
            (_, buf, _, off), = spaces.resolve(st, "global", np.array([addr], dtype=np.uint64), one, 128, 64)
            raw = buf[int(off[0]):int(off[0]) + 64].tobytes()
            seen, released = st.acquired_maps.get(addr, (None, -1))
            if raw != seen and released == st.tensormap_releases:
                raise DeviceFault(f"missing fence.proxy.tensormap::generic.release: the tensor map at global "
                                  f"address 0x{addr:x} changed since its last acquire with no release since", lane)
            st.acquired_maps[addr] = (raw, st.tensormap_releases)

    return (K_OP, acquire, None)


def _tensormap(dec: Decoder, ins: Instr) -> Any:
    if ins.mods[:1] == ("cp_fenceproxy",):
        return tensormap_cp_fenceproxy(dec, ins)
    return tensormap_replace(dec, ins)


def tensormap_replace(dec: Decoder, ins: Instr) -> Any:
    """tensormap.replace.tile.field{.space}.b1024.type [addr], {ord,} new_val.

    Edits a map in global or shared memory in place (`codegen.tensormap.replace`): `.rank` takes
    the rank minus one (as the PTX ISA says), `.global_dim`/`.box_dim`/`.element_stride` ordinal i
    is dimension i, `.global_stride` ordinal i is the byte stride of dimension i + 1 (the strides
    CUtensorMap stores), the enums take the PTX ISA's numbering. `.swizzle_atomicity` other
    than the default (16 bytes, 0) is not modelled."""
    np = _np()
    mods = Mods(ins)
    mods.need(("replace",), ".replace")
    mods.need(("tile",), ".tile")
    field = mods.need(tuple(_FIELDS) + ("swizzle_atomicity",), "the field")
    space = mods.one(("global", "shared::cta"), "global")
    space = "shared" if space == "shared::cta" else "global"
    mods.need(("b1024",), ".b1024")
    mods.need(("b32", "b64"), ".b32 or .b64")
    mods.done()
    ops = list(ins.operands)
    _, addr = address(dec, ops[0], space, ins)
    if field == "swizzle_atomicity":
        value = dec.reader(ops[1], "u32", ins)

        def atomicity(st: Any, m: Any) -> None:
            for lane in lanes_of(st, m).tolist():
                if _at(st, value, lane) != 0:
                    raise DeviceFault("tensormap.replace .swizzle_atomicity other than 16 bytes is not modelled",
                                      lane)

        return (K_OP, atomicity, None)
    from ...codegen.tensormap import SIZE, replace

    has_ord = _FIELDS[field]
    if len(ops) != 2 + has_ord:
        raise bad(ins, "expected [addr], ord, new_val" if has_ord else "expected [addr], new_val")
    if has_ord and not isinstance(ops[1], Imm):
        raise bad(ins, "the ordinal must be an immediate")
    ordinal = ops[1].value if has_ord else 0
    if has_ord and not 0 <= ordinal < 5 - (field == "global_stride"):
        raise bad(ins, f"ordinal {ordinal} is out of range")
    value = dec.reader(ops[-1], "u64", ins)

    def fn(st: Any, m: Any) -> None:
        for lane in lanes_of(st, m).tolist():
            a = _at(st, addr, lane)
            if a % 64:
                raise DeviceFault(f"tensor map at 0x{a:x} is not 64-byte aligned", lane)
            one = np.array([lane], dtype=np.int64)
            (_, buf, _, offs), = spaces.resolve(st, space, np.array([a], dtype=np.uint64), one, SIZE, 1)
            o = int(offs[0])
            raw = replace(buf[o:o + SIZE].tobytes(), field, ordinal, _at(st, value, lane))
            buf[o:o + SIZE] = np.frombuffer(raw, dtype=np.uint8)

    return (K_OP, fn, None)


HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {"tensormap": _tensormap}
