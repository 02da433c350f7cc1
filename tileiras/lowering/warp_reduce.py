"""Reduce and scan along rows held in warps (`RowWarpLayout`): registers and shuffles only.

Each lane first folds its consecutive elements of a row in order, then the
lanes combine with `shfl.sync`: a butterfly for reduce (every lane ends with
the row's value, which is the `cols == 1` layout of the result), a
Hillis-Steele shift (up, or down for a reverse scan) for an inclusive scan. The combiner is applied with
the earlier part of the row as the accumulator, so a combiner that is
associative but not commutative still gets the sequential fold's answer.
"""

from __future__ import annotations

from typing import Callable

from ..ir.core import Operation
from ..tileas.move_forms import across_warps_scratch
from .kernel import KernelLowering
from ..layout.encodings import MmaLayout, RowWarpLayout
from .llvm_text import llvm_type
from .values import TileRegs

Body = Callable[[KernelLowering, Operation, list[str], list[str]], list[str]]
_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64, "half": 16, "bfloat": 16, "float": 32,
         "double": 64, "ptr": 64}
_INT_OF = {"half": "i16", "bfloat": "i16", "float": "i32", "double": "i64"}


def _shfl32(k: KernelLowering, mode: str, v: str, delta: int) -> str:
    clamp = 0 if mode == "up" else 31  # the segment is the whole warp; rows are masked by the caller
    name = f"llvm.nvvm.shfl.sync.{mode}.i32"
    k.b.declare(f"declare i32 @{name}(i32, i32, i32, i32)")
    return k.b.op(f"call i32 @{name}(i32 -1, i32 {v}, i32 {delta}, i32 {clamp})", "sh")


def shuffle(k: KernelLowering, mode: str, v: str, lty: str, delta: int) -> str:
    """`v` from lane `lane ^ delta` (bfly), `lane - delta` (up) or `lane + delta` (down), for any
    scalar of up to 64 bits."""
    bits = _BITS.get(lty, 0) or int(lty[1:])
    ity = _INT_OF.get(lty, "i64" if lty == "ptr" else lty)
    x = v
    if lty == "ptr":
        x = k.b.op(f"ptrtoint ptr {v} to i64", "sh")
    elif lty in _INT_OF:
        x = k.b.op(f"bitcast {lty} {v} to {ity}", "sh")
    if bits <= 32:
        wide = x if bits == 32 else k.b.op(f"zext {ity} {x} to i32", "sh")
        out = _shfl32(k, mode, wide, delta)
        out = out if bits == 32 else k.b.op(f"trunc i32 {out} to {ity}", "sh")
    else:
        lo = _shfl32(k, mode, k.b.op(f"trunc i64 {x} to i32", "sh"), delta)
        hi = _shfl32(k, mode, k.b.op(f"trunc i64 {k.b.op(f'lshr i64 {x}, 32', 'sh')} to i32", "sh"), delta)
        joined = k.b.op(f"shl i64 {k.b.op(f'zext i32 {hi} to i64', 'sh')}, 32", "sh")
        out = k.b.op(f"or i64 {joined}, {k.b.op(f'zext i32 {lo} to i64', 'sh')}", "sh")
    if lty == "ptr":
        return k.b.op(f"inttoptr i64 {out} to ptr", "sh")
    return k.b.op(f"bitcast {ity} {out} to {lty}", "sh") if lty in _INT_OF else out


def _select(k: KernelLowering, cond: str, lty: str, a: str, b: str) -> str:
    return k.b.op(f"select i1 {cond}, {lty} {a}, {lty} {b}", "sel")


def _lane_bit(k: KernelLowering, bit: int) -> str:
    lane = k.b.pre(f"and i32 {k.tid}, {bit}", "lb")
    return k.b.pre(f"icmp ne i32 {lane}, 0", "lb")


def _lane_in_row(k: KernelLowering, layout: RowWarpLayout) -> str:
    return k.b.pre(f"and i32 {k.tid}, {layout.lanes - 1}", "lr")


def warp_reduce(k: KernelLowering, op: Operation, srcs: list[TileRegs], body: Body) -> list[list[str]]:
    layout = srcs[0].layout
    assert isinstance(layout, RowWarpLayout)
    ltys = [llvm_type(s.type.element) for s in srcs]
    cs = layout.per_lane
    results: list[list[str]] = [[] for _ in srcs]
    for g in range(len(srcs[0].slots) // cs):
        accs = [s.slots[g * cs] for s in srcs]
        for j in range(1, cs):
            accs = body(k, op, [s.slots[g * cs + j] for s in srcs], accs)
        delta = 1
        while delta < layout.lanes:
            other = [shuffle(k, "bfly", a, t, delta) for a, t in zip(accs, ltys)]
            upper = _lane_bit(k, delta)  # this lane holds the later half of the pair
            elems = [_select(k, upper, t, a, o) for a, o, t in zip(accs, other, ltys)]
            earlier = [_select(k, upper, t, o, a) for a, o, t in zip(accs, other, ltys)]
            accs = body(k, op, elems, earlier)
            delta *= 2
        for r, a in zip(results, accs):
            r.append(a)
    if layout.wpr > 1:
        results = _across_warps(k, op, srcs, layout, results, body)
    return results


def _across_warps(k: KernelLowering, op: Operation, srcs: list[TileRegs], layout: RowWarpLayout,
                  partials: list[list[str]], body: Body) -> list[list[str]]:
    """Each row's `wpr` warp partials through shared memory: lane 0 of every warp writes its own,
    then every thread folds its row's partials in column order (warp order)."""
    from .kernel import from_storage, storage_type, to_storage

    wpr, G = layout.wpr, layout.groups
    groups = len(partials[0])
    bases, offset = across_warps_scratch(layout, [s.type for s in srcs])
    buf = k.scratch(offset, "warp-reduction")
    warp = k.b.pre(f"lshr i32 {k.tid}, 5", "w")
    lane0 = k.b.pre(f"icmp eq i32 {k.b.pre(f'and i32 {k.tid}, 31', 'ln')}, 0", "l0")
    # the row group's first warp: row (within the slot group) * wpr is where its partials start
    first = k.b.pre(f"and i32 {warp}, {-wpr & 0xFFFFFFFF}", "w")

    def at(src: int, group: int, idx: str) -> str:
        lty = storage_type(srcs[src].type.element)
        base = k.b.op(f"getelementptr i8, ptr addrspace(3) {buf}, i32 {bases[src]}", "xp") if bases[src] else buf
        pos = idx if group == 0 else k.b.op(f"add i32 {idx}, {group * G * wpr}", "xi")
        return k.b.op(f"getelementptr {lty}, ptr addrspace(3) {base}, i32 {pos}", "xp")

    k.barrier()  # earlier readers of the scratch are done
    for g in range(groups):
        for i, s in enumerate(srcs):
            lty = storage_type(s.type.element)
            p = at(i, g, warp)
            value = to_storage(k, partials[i][g], s.type.element)
            k.guarded(lane0, lambda p=p, value=value, lty=lty: k.b.emit(f"store {lty} {value}, ptr addrspace(3) {p}"))
    k.barrier()
    out: list[list[str]] = [[] for _ in srcs]
    for g in range(groups):
        accs: list[str] = []
        for part in range(wpr):
            idx = first if part == 0 else k.b.op(f"add i32 {first}, {part}", "xi")
            vals = [from_storage(k, k.b.op(f"load {storage_type(s.type.element)}, ptr addrspace(3) {at(i, g, idx)}",
                                            "xv"), s.type.element) for i, s in enumerate(srcs)]
            accs = vals if not accs else body(k, op, vals, accs)
        for r, a in zip(out, accs):
            r.append(a)
    return out


def warp_scan(k: KernelLowering, op: Operation, srcs: list[TileRegs], body: Body) -> list[list[str]]:
    """Inclusive scan along each row; a reverse scan runs from the row's end (shuffles down)."""
    layout = srcs[0].layout
    assert isinstance(layout, RowWarpLayout)
    reverse = bool(op.attributes.get("reverse", False))
    mode = "down" if reverse else "up"
    ltys = [llvm_type(s.type.element) for s in srcs]
    cs = layout.per_lane
    results: list[list[str]] = [[] for _ in srcs]
    in_row = _lane_in_row(k, layout)

    def has_neighbour(delta: int) -> str:
        """i1: lane `delta` away in scan order (before this one) belongs to the same row."""
        if reverse:
            return k.b.pre(f"icmp ult i32 {in_row}, {layout.lanes - delta}", "hs")
        return k.b.pre(f"icmp uge i32 {in_row}, {delta}", "hs")

    order = list(range(cs))[::-1] if reverse else list(range(cs))
    for g in range(len(srcs[0].slots) // cs):
        total: list[str] = []   # this lane's own elements folded in scan order
        for j in order:
            elems = [s.slots[g * cs + j] for s in srcs]
            total = elems if not total else body(k, op, elems, total)
        delta = 1
        while delta < layout.lanes:
            other = [shuffle(k, mode, a, t, delta) for a, t in zip(total, ltys)]
            combined = body(k, op, total, other)
            has = has_neighbour(delta)
            total = [_select(k, has, t, c, a) for c, a, t in zip(combined, total, ltys)]
            delta *= 2
        if cs == 1:
            final = {0: total}
        else:
            # the lanes before this one (an exclusive prefix) go in front of its first element, once
            # (one select, where a lane has none before it), and its elements are folded onto that
            before = [shuffle(k, mode, a, t, 1) for a, t in zip(total, ltys)]
            has = has_neighbour(1)
            final = {}
            running: list[str] = []
            for j in order:
                elems = [s.slots[g * cs + j] for s in srcs]
                if not running:
                    combined = body(k, op, elems, before)
                    running = [_select(k, has, t, c, a) for c, a, t in zip(combined, elems, ltys)]
                else:
                    running = body(k, op, elems, running)
                final[j] = running
        for j in range(cs):
            for r, v in zip(results, final[j]):
                r.append(v)
    return results


def mma_row_reduce(k: KernelLowering, op: Operation, srcs: list[TileRegs], body: Body) -> list[list[str]]:
    """Reduce the rows of mma fragments (`MmaLayout`, each row in one warp): every thread folds its
    elements of fragment rows g and g + 8, then the quad's 4 lanes combine (xor 1, xor 2). The
    combiner is commutative (assign_layouts checks), so the order does not matter."""
    layout = srcs[0].layout
    assert isinstance(layout, MmaLayout) and layout.warps[2] == 1
    ltys = [llvm_type(s.type.element) for s in srcs]
    rb, rm, rn = layout.repeats
    results: list[list[str]] = [[] for _ in srcs]
    for block in range(rb * rm):
        for h in range(2):
            accs: list[str] = []
            for ni in range(rn):
                for j in (2 * h, 2 * h + 1):
                    slot = (block * rn + ni) * 4 + j
                    elems = [s.slots[slot] for s in srcs]
                    accs = elems if not accs else body(k, op, elems, accs)
            for delta in (1, 2):
                accs = body(k, op, [shuffle(k, "bfly", a, t, delta) for a, t in zip(accs, ltys)], accs)
            for r, a in zip(results, accs):
                r.append(a)
    return results
