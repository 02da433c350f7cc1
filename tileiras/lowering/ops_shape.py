"""Constants, iota and the ops that rearrange tiles.

Reshape keeps row-major order, so it is free in every layout, and so is a
broadcast along the rows of a row-warp tile or of a source held in the
result's `BroadcastSourceLayout`. The others move elements
between threads through shared memory (`KernelLowering.exchange`), each
described only by the map from a result element's index to the source
element it takes; they read any layout and write the result's.
"""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.record import replace
from ..ir.types import ScalarType, TileType, element_of
from ..tileas.assign_layouts import column_extract
from ..tileas.move_forms import broadcast_form, extract_form, permute_scratch
from .kernel import KernelLowering, from_storage, storage_type, to_storage
from ..ir.types import storage_bytes
from ..layout.encodings import MmaLayout, RowWarpLayout, window_slot
from .llvm_text import float_bits_literal, llvm_type
from ..tileas.scratch_swizzle import permute_swizzle
from .values import SharedTileVal, TileRegs


def _scalar_literal(raw: bytes, elem: ScalarType) -> str:
    """LLVM constant for one element stored as `raw` (little-endian bytecode storage)."""
    lty = llvm_type(elem)
    if lty == "i1":
        return "true" if any(raw) else "false"
    if lty in ("half", "bfloat", "float", "double"):
        return float_bits_literal(int.from_bytes(raw, "little"), lty)
    return str(int.from_bytes(raw, "little", signed=True))


def _constant(k: KernelLowering, op: Operation) -> None:
    attr = op.attributes["value"]
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    elem = rtype.element
    assert isinstance(elem, ScalarType)
    size = storage_bytes(elem)
    raw = attr.raw
    chunks = [raw[i:i + size] for i in range(0, len(raw), size)]
    if len(set(chunks)) == 1:
        k.set(op.results[0], k.splat(rtype, _scalar_literal(chunks[0], elem), k.layout_of(op.results[0])))
        return
    # A non-uniform constant: a table in constant memory, indexed by element.
    lty = storage_type(elem)
    items = [_scalar_literal(c, elem) for c in chunks]
    if llvm_type(elem) == "i1":
        items = ["1" if v == "true" else "0" for v in items]
    name = f"@__tileir_const{len(k.globals)}_{k.entry.attributes.get('sym_name', 'k')}"
    k.globals.append(f"{name} = internal addrspace(4) constant [{len(items)} x {lty}] "
                     f"[{', '.join(f'{lty} {v}' for v in items)}], align 16")
    slots = []
    layout = k.layout_of(op.results[0])
    for s in range(k.slots(rtype, layout)):
        e = k.elem_index(rtype.num_elements, s, layout)
        p = k.b.op(f"getelementptr [{len(items)} x {lty}], ptr addrspace(4) {name}, i32 0, i32 {e}", "cp")
        v = k.b.op(f"load {lty}, ptr addrspace(4) {p}", "cv")
        slots.append(from_storage(k, v, elem))
    k.set(op.results[0], TileRegs(rtype, slots))


def _iota(k: KernelLowering, op: Operation) -> None:
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    lty = llvm_type(rtype.element)
    slots = []
    layout = k.layout_of(op.results[0])
    for s in range(k.slots(rtype, layout)):
        e = k.elem_index(rtype.num_elements, s, layout)
        if lty == "i32":
            slots.append(e)
        elif lty == "i64":
            slots.append(k.b.op(f"zext i32 {e} to i64", "io"))
        else:
            slots.append(k.b.op(f"trunc i32 {e} to {lty}", "io"))
    k.set(op.results[0], TileRegs(rtype, slots))


def _reshape(k: KernelLowering, op: Operation) -> None:
    shared = k.get(op.operands[0])
    if isinstance(shared, SharedTileVal):  # only unit dimensions come or go (assign_layouts.py)
        k.set(op.results[0], replace(shared, type=op.results[0].type))
        return
    src = k.tile(op.operands[0])
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    k.set(op.results[0], TileRegs(rtype, list(src.slots)))


def _broadcast(k: KernelLowering, op: Operation) -> None:
    src = k.tile(op.operands[0])
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    layout = k.layout_of(op.results[0])
    form = broadcast_form(src.type, rtype, src.layout, layout, k.layout.vec)
    if form == "splat":
        k.set(op.results[0], k.splat(rtype, src.slots[0], layout))
        return
    if form == "fragment-rows":
        # each thread already holds its fragment rows: result slot (block, ni, j) takes row j / 2
        assert isinstance(layout, MmaLayout)
        rn = layout.repeats[2]
        slots = [src.slots[(s // 4 // rn) * 2 + (s % 4) // 2] for s in range(k.slots(rtype, layout))]
        k.set(op.results[0], TileRegs(rtype, slots))
        return
    if form == "in-place":
        # the source was computed where each result slot takes it (an index-only tile)
        k.set(op.results[0], TileRegs(rtype, list(src.slots)))
        return
    if form == "row-warps":
        # rows already sit in their warps: each result slot copies a source slot
        assert isinstance(layout, RowWarpLayout)
        per_lane = layout.per_lane
        from_column = src.type.shape[-1] != 1
        slots = [src.slots[s % per_lane if from_column else s // per_lane] for s in range(k.slots(rtype, layout))]
        k.set(op.results[0], TileRegs(rtype, slots))
        return
    sshape = src.type.shape
    offset = len(rtype.shape) - len(sshape)  # leading dims are new

    def src_index(idx: list[str]) -> str:
        kept = ["0" if sshape[d] == 1 else idx[d + offset] for d in range(len(sshape))]
        return k.linear(kept, sshape)
    k.set(op.results[0], k.exchange(src, rtype, src_index, layout))


def _permute(k: KernelLowering, op: Operation) -> None:
    shared = k.get(op.operands[0])
    role = permute_scratch(op, k.assignment, shared)
    if role is None:  # a staged mma operand: read it the other way round
        k.set(op.results[0], replace(shared, type=op.results[0].type, transposed=not shared.transposed))
        return
    src = k.tile(op.operands[0])
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    perm = tuple(op.attributes["permutation"])

    def src_index(idx: list[str]) -> str:
        sidx = ["0"] * len(perm)
        for i, p in enumerate(perm):
            sidx[p] = idx[i]
        return k.linear(sidx, src.type.shape)
    swizzle = permute_swizzle(tuple(src.type.shape), perm, storage_bytes(src.type.element),
                              src.layout or k.layout, k.layout)
    k.set(op.results[0], k.exchange(src, rtype, src_index, role=role, swizzle=swizzle))


def _extract(k: KernelLowering, op: Operation) -> None:
    src = k.tile(op.operand("source"))  # type: ignore[arg-type]
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    window = k.layout_of(op.results[0])
    form = extract_form(op, src.layout, window)
    if form == "in-place":   # mma fragment columns: the slots, in place
        start, _ = column_extract(op)  # type: ignore[misc]
        first, blocks = start // 8, window.repeats[2]  # type: ignore[attr-defined]
        k.set(op.results[0], TileRegs(rtype, [src.slots[window_slot(src.layout, first, blocks, s)]  # type: ignore[arg-type]
                                              for s in range(window.slots(rtype.num_elements))], window))
        return
    if form == "window":
        k.set(op.results[0], _columns_of_warps(k, op, src, window))
        return
    indices = [k.tile(v).slots[0] for v in op.operand_group("indices")]
    itys = [llvm_type(element_of(v.type)) for v in op.operand_group("indices")]
    starts = []
    for i, (v, t) in enumerate(zip(indices, itys)):
        v32 = v if t == "i32" else k.b.op(f"trunc {t} {v} to i32", "x")
        starts.append(k.b.op(f"mul i32 {v32}, {rtype.shape[i]}", "x"))

    def src_index(idx: list[str]) -> str:
        sidx = [k.b.op(f"add i32 {s}, {i}", "x") for s, i in zip(starts, idx)]
        return k.linear(sidx, src.type.shape)
    k.set(op.results[0], k.exchange(src, rtype, src_index))


def _columns_of_warps(k: KernelLowering, op: Operation, src: TileRegs, layout: object) -> TileRegs:
    """Extract `op`'s window of whole warps' columns (move_forms.extract_form "window"): the warps whose
    columns it holds write their elements at their place in a scratch of the window's size, then every
    thread reads its slots of the result."""
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    start, width = column_extract(op)  # type: ignore[misc]
    n, cols = src.type.num_elements, src.type.shape[-1]
    lty = storage_type(rtype.element)
    buf = k.scratch(rtype.num_elements * storage_bytes(rtype.element))
    k.barrier()     # earlier readers of the scratch are done

    def place(slot: int) -> str:      # row-major index in the window: (e / cols) * width + e % cols - start
        e = k.elem_index(n, slot, src.layout)
        row = k.b.pre(f"udiv i32 {e}, {cols}", "wr")
        col = k.b.pre(f"urem i32 {e}, {cols}", "wc")
        at = k.b.pre(f"add i32 {k.b.pre(f'mul i32 {row}, {width}', 'wr')}, {col}", "wi")
        return k.b.pre(f"sub i32 {at}, {start}", "wi")

    def write() -> None:
        for slot, v in enumerate(src.slots):
            p = k.b.op(f"getelementptr {lty}, ptr addrspace(3) {buf}, i32 {place(slot)}", "sp")
            k.store_first_copy(n, slot, src.layout, f"store {lty} {to_storage(k, v, rtype.element)}, ptr addrspace(3) {p}")
    first = k.b.pre(f"urem i32 {k.elem_index(n, 0, src.layout)}, {cols}", "wc")   # the warp's columns hold it
    inside = k.b.pre(f"and i1 {k.b.pre(f'icmp uge i32 {first}, {start}', 'wi')}, "
                     f"{k.b.pre(f'icmp ult i32 {first}, {start + width}', 'wi')}", "wi")
    k.guarded(inside, write)
    k.barrier()
    return TileRegs(rtype, [k._from_shared(buf, lty, rtype.element, k.elem_index(rtype.num_elements, s, layout))  # type: ignore[arg-type]
                            for s in range(k.slots(rtype, layout))], layout)  # type: ignore[arg-type]


def _cat(k: KernelLowering, op: Operation) -> None:
    lhs, rhs = k.tile(op.operands[0]), k.tile(op.operands[1])
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    dim = int(op.attributes["dim"])
    split = lhs.type.shape[dim]

    def src_index(idx: list[str]) -> str:
        # the lhs elements come first in the scratch buffer, then the rhs elements
        in_rhs = k.b.op(f"icmp uge i32 {idx[dim]}, {split}", "x")
        ridx = list(idx)
        ridx[dim] = k.b.op(f"sub i32 {idx[dim]}, {split}", "x")
        li = k.linear(idx, lhs.type.shape)
        ri = k.b.op(f"add i32 {k.linear(ridx, rhs.type.shape)}, {lhs.type.num_elements}", "x")
        return k.b.op(f"select i1 {in_rhs}, i32 {ri}, i32 {li}", "x")
    k.set(op.results[0], k.exchange([lhs, rhs], rtype, src_index))


def _insert(k: KernelLowering, op: Operation) -> None:
    """The destination tile with `source` written at tile coordinate `indices` (inverse of extract)."""
    src = k.tile(op.operands[0])
    dest = k.tile(op.operands[1])
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    starts = []
    for v, size in zip(op.operands[2:], src.type.shape):
        t = llvm_type(element_of(v.type))
        v32 = k.tile(v).slots[0]
        if t != "i32":
            v32 = k.b.op(f"trunc {t} {v32} to i32", "x")
        starts.append(k.b.op(f"mul i32 {v32}, {size}", "x"))

    def src_index(idx: list[str]) -> str:
        inside = None
        local = []
        for i, start, size in zip(idx, starts, src.type.shape):
            rel = k.b.op(f"sub i32 {i}, {start}", "x")
            ok = k.b.op(f"icmp ult i32 {rel}, {size}", "x")
            inside = ok if inside is None else k.b.op(f"and i1 {inside}, {ok}", "x")
            local.append(rel)
        from_src = k.b.op(f"add i32 {k.linear(local, src.type.shape)}, {dest.type.num_elements}", "x")
        return k.b.op(f"select i1 {inside}, i32 {from_src}, i32 {k.linear(idx, rtype.shape)}", "x")
    k.set(op.results[0], k.exchange([dest, src], rtype, src_index))


def _pack_like(k: KernelLowering, op: Operation) -> None:
    """pack/unpack: reinterpret a rank-1 tile as bytes (or back) through shared memory.

    4-bit element types hold two elements per byte, the first in the low nibble.
    """
    from .ops_reduce import scratch_load, to_scratch

    src = k.tile(op.operands[0])
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    (base,) = to_scratch(k, [src])
    packed, unpacked = (rtype, src.type) if op.name.endswith(".pack") else (src.type, rtype)
    nibbles = getattr(unpacked.element, "bitwidth", 8) == 4
    slots = []
    for s in range(k.slots(rtype)):
        e = k.elem_index(rtype.num_elements, s)
        if not nibbles:
            width = max(1, getattr(rtype.element, "bitwidth", 8) // 8)  # bytes per result element
            at = e if width == 1 else k.b.op(f"mul i32 {e}, {width}", "pk")
            p = k.b.op(f"getelementptr i8, ptr addrspace(3) {base}, i32 {at}", "pk")
            slots.append(k.b.op(f"load {storage_type(rtype.element)}, ptr addrspace(3) {p}", "pk"))
        elif op.name.endswith(".pack"):
            lo_i = k.b.op(f"mul i32 {e}, 2", "pk")
            hi_i = k.b.op(f"add i32 {lo_i}, 1", "pk")
            lo = k.b.op(f"and i8 {scratch_load(k, base, src.type.element, lo_i)}, 15", "pk")
            hi = k.b.op(f"shl i8 {scratch_load(k, base, src.type.element, hi_i)}, 4", "pk")
            slots.append(k.b.op(f"or i8 {lo}, {hi}", "pk"))
        else:
            byte = scratch_load(k, base, src.type.element, k.b.op(f"lshr i32 {e}, 1", "pk"))
            odd = k.b.op(f"and i32 {e}, 1", "pk")
            shift = k.b.op(f"trunc i32 {k.b.op(f'shl i32 {odd}, 2', 'pk')} to i8", "pk")
            slots.append(k.b.op(f"and i8 {k.b.op(f'lshr i8 {byte}, {shift}', 'pk')}, 15", "pk"))
    k.set(op.results[0], TileRegs(rtype, slots))


LOWERINGS = {
    "cuda_tile.insert": _insert, "cuda_tile.pack": _pack_like, "cuda_tile.unpack": _pack_like,
    "cuda_tile.constant": _constant, "cuda_tile.iota": _iota,
    "cuda_tile.reshape": _reshape, "cuda_tile.broadcast": _broadcast, "cuda_tile.permute": _permute,
    "cuda_tile.extract": _extract, "cuda_tile.cat": _cat,
}
