"""The index arithmetic of a layout (tileiras/layout/encodings.py), as LLVM instructions.

A layout maps (thread, slot) to the tile's row-major element index: the one emitter of that index
math, for the lowering (LLVM text) and for the decisions that count a warp's accesses
(index_eval.py runs the same instructions in Python). Each function emits through `pre` (one
prologue instruction, which depends only on the thread id, returning its name) and returns i32
value names and an i1 'first copy' (None: always). One function per question, dispatched on the layout's
class; a layout the lowering makes for itself (tmem_epilogue.ColumnChunk) registers its own.
"""

from __future__ import annotations

from functools import singledispatch
from typing import Callable, Optional

from ..layout.encodings import (WARP, BlockedLayout, BroadcastSourceLayout, MmaLayout, MmaRowLayout, PairAccLayout,
                                RowWarpLayout, TmemAccLayout, row_major_strides)

# Emits one prologue instruction (it depends only on the thread id) and returns its name.
Pre = Callable[[str, str], str]


@singledispatch
def element(layout: object, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
    """(i32 element index, i1 'first copy' or None when always) of this thread's `slot`."""
    raise TypeError(f"no index arithmetic for {type(layout).__name__}")


@singledispatch
def coords(layout: object, pre: Pre, tid: str, slot: int) -> tuple[str, str, str, Optional[str]]:
    """(batch, row, col) i32 values of this thread's `slot` of an mma-fragment layout, and i1
    'first copy' (or None)."""
    raise TypeError(f"no fragment coordinates for {type(layout).__name__}")


def has_coords(layout: object) -> bool:
    """Whether `coords` answers for `layout` (mma fragments and what is made of them)."""
    return coords.dispatch(type(layout)) is not coords.dispatch(object)


@singledispatch
def warp_coords(layout: object, pre: Pre, tid: str) -> tuple[str, str, str, Optional[str]]:
    """This thread's warp as (batch, row, col) warp-grid coordinates of an mma-fragment layout, and
    i1 'first copy' (or None) where more warps run than the grid uses (they repeat it)."""
    raise TypeError(f"no warp grid for {type(layout).__name__}")


@element.register
def _blocked(layout: BlockedLayout, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
    v = layout.run(num_elements)
    group, within = divmod(slot, v)
    if v == 1:
        raw = tid if slot == 0 else pre(f"add i32 {tid}, {slot * layout.threads}", "e")
    else:
        base = pre(f"mul i32 {tid}, {v}", "e") if group == 0 else \
            pre(f"mul i32 {pre(f'add i32 {tid}, {group * layout.threads}', 'e')}, {v}", "e")
        raw = base if within == 0 else pre(f"add i32 {base}, {within}", "e")
    if layout.owns_all(num_elements):
        return raw, None
    e = "0" if num_elements == 1 else pre(f"urem i32 {raw}, {num_elements}", "e")
    return e, pre(f"icmp ult i32 {raw}, {num_elements}", "ok")


@element.register
def _row_warp(layout: RowWarpLayout, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
    rows, G, cs = num_elements // layout.cols, layout.groups, layout.per_lane
    group, within = divmod(slot, cs)
    warp = pre(f"lshr i32 {tid}, 5", "w")
    lane = pre(f"and i32 {tid}, 31", "ln")
    if layout.rpw > 1:   # row (warp * rpw + lane / span) of the slot group; lane % span along it
        gw = pre(f"lshr i32 {tid}, {layout.span.bit_length() - 1}", "w")
        lane = pre(f"and i32 {tid}, {layout.span - 1}", "ln")
    else:
        gw = warp if layout.wpr == 1 else pre(f"lshr i32 {warp}, {layout.wpr.bit_length() - 1}", "w")
    part = "0" if layout.wpr == 1 else pre(f"and i32 {warp}, {layout.wpr - 1}", "w")
    raw = gw if group == 0 else pre(f"add i32 {gw}, {group * G}", "r")
    checks = []
    row = raw
    if rows % G:
        row = pre(f"urem i32 {raw}, {rows}", "r")
        checks.append(pre(f"icmp ult i32 {raw}, {rows}", "ok"))
    if layout.cols >= layout.span:
        thread = lane if part == "0" else pre(f"add i32 {pre(f'shl i32 {part}, 5', 'c')}, {lane}", "c")
        run, offset = layout.chunk or cs, 0
        if layout.chunk:   # run i of this lane starts i runs of the whole row's lanes further
            i, within = divmod(within, layout.chunk)
            offset = i * layout.span * layout.chunk
        col = thread if run == 1 else pre(f"mul i32 {thread}, {run}", "c")
        col = col if within + offset == 0 else pre(f"add i32 {col}, {within + offset}", "c")
    elif layout.cols == 1:
        col = "0"
    else:
        col = pre(f"and i32 {lane}, {layout.cols - 1}", "c")
    if layout.cols < layout.span // layout.wpr:
        checks.append(pre(f"icmp ult i32 {lane}, {layout.cols}", "ok"))
    if layout.wpr > 1 and layout.cols < layout.span:
        checks.append(pre(f"icmp eq i32 {part}, 0", "ok"))   # the other warps of the row hold copies
    base = row if layout.cols == 1 else pre(f"mul i32 {row}, {layout.cols}", "e")
    e = base if col == "0" else (col if base == "0" else pre(f"add i32 {base}, {col}", "e"))
    valid = checks[0] if checks else None
    for extra in checks[1:]:
        valid = pre(f"and i1 {valid}, {extra}", "ok")
    return e, valid

@warp_coords.register
def _mma_warps(layout: MmaLayout, pre: Pre, tid: str) -> tuple[str, str, str, Optional[str]]:
    """This thread's warp as (batch, row, col) warp-grid coordinates (col fastest), and i1
    'first copy' (or None) where more warps run than the grid uses (they repeat it)."""
    wb, wm, wn = layout.warps
    warp = pre(f"lshr i32 {tid}, 5", "w")
    used = wb * wm * wn
    valid = None
    if used * WARP != layout.threads:
        valid = pre(f"icmp ult i32 {warp}, {used}", "ok")
        warp = pre(f"urem i32 {warp}, {used}", "w")
    w_n = pre(f"urem i32 {warp}, {wn}", "wn") if wn > 1 else "0"
    w_m = pre(f"urem i32 {pre(f'udiv i32 {warp}, {wn}', 'wm')}, {wm}", "wm") if wm > 1 else "0"
    w_b = pre(f"udiv i32 {warp}, {wn * wm}", "wb") if wb > 1 else "0"
    return w_b, w_m, w_n, valid

@coords.register
def _mma_coords(layout: MmaLayout, pre: Pre, tid: str, slot: int) -> tuple[str, str, str, Optional[str]]:
    """(batch, row, col) i32 values of this thread's `slot`, and i1 'first copy' (or None)."""
    rb, rm, rn = layout.repeats
    wm = layout.warps[1]
    blk, j = divmod(slot, 4)
    bi, rest = divmod(blk, rm * rn)
    mi, ni = divmod(rest, rn)
    lane = pre(f"and i32 {tid}, 31", "ln")
    w_b, w_m, w_n, valid = warp_coords(layout, pre, tid)
    g = pre(f"lshr i32 {lane}, 2", "g")
    t2 = pre(f"shl i32 {pre(f'and i32 {lane}, 3', 't')}, 1", "t2")

    def place(w: str, per_warp: int, block: int, unit: int, within: str) -> str:
        start = block_start(pre, w, per_warp, block, unit)
        if within == "0":
            return start
        return within if start == "0" else pre(f"add i32 {start}, {within}", "c")

    row_in = g if j < 2 else pre(f"add i32 {g}, 8", "g8")
    col_in = t2 if j % 2 == 0 else pre(f"add i32 {t2}, 1", "t2")
    if layout.interleaved:   # (mi * wm + w) * 16 + within
        row = place(w_m, 1, mi * wm, 16, row_in)
    else:
        row = place(w_m, rm, mi, 16, row_in)
    return (place(w_b, rb, bi, 1, "0"), row, place(w_n, rn, ni, 8, col_in), valid)

@element.register
def _mma(layout: MmaLayout, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
    b, r, c, valid = coords(layout, pre, tid, slot)
    _, m, n = layout.shape
    e = pre(f"add i32 {pre(f'mul i32 {r}, {n}', 'e')}, {c}", "e")
    if b != "0":
        e = pre(f"add i32 {pre(f'mul i32 {b}, {m * n}', 'e')}, {e}", "e")
    return e, valid

def block_start(pre: Pre, w: str, per_warp: int, block: int, unit: int) -> str:
    """(w * per_warp + block) * unit: where block `block` of warp coordinate `w` starts (a constant
    where w is "0", so addresses built from it fold)."""
    if w == "0":
        return str(block * unit)
    base = pre(f"mul i32 {w}, {per_warp * unit}", "o")
    return base if block == 0 else pre(f"add i32 {base}, {block * unit}", "o")


@element.register
def _mma_rows(layout: MmaRowLayout, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
    rb, rm, rn = layout.parent.repeats
    block, h = divmod(slot, 2)
    b, r, _, valid = coords(layout.parent, pre, tid, block * rn * 4 + 2 * h)
    _, m, _ = layout.parent.shape
    e = r if b == "0" else pre(f"add i32 {pre(f'mul i32 {b}, {m}', 'e')}, {r}", "e")
    first = pre(f"icmp eq i32 {pre(f'and i32 {tid}, 3', 't')}, 0", "ok")
    return e, first if valid is None else pre(f"and i1 {valid}, {first}", "ok")

def _broadcast_dst_index(layout: BroadcastSourceLayout, pre: Pre, tid: str,
                         slot: int) -> tuple[list[str], Optional[str]]:
    """The multi-index into `dst` of the parent's `slot` (mma coordinates where the parent has
    them, else divided out of the row-major index), and the parent's first-copy i1."""
    if isinstance(layout.parent, MmaLayout):
        b, r, c, valid = coords(layout.parent, pre, tid, slot)
        return ([r, c] if len(layout.dst) == 2 else [b, r, c]), valid
    n = layout._dst_elements()
    e, valid = element(layout.parent, pre, tid, n, slot)
    idx = []
    for dim, stride in zip(layout.dst, row_major_strides(layout.dst)):
        q = e if stride == 1 else pre(f"udiv i32 {e}, {stride}", "q")
        idx.append(q if stride * dim == n else pre(f"urem i32 {q}, {dim}", "i"))
    return idx, valid


@element.register
def _broadcast_source(layout: BroadcastSourceLayout, pre: Pre, tid: str, num_elements: int,
                      slot: int) -> tuple[str, Optional[str]]:
    idx, valid = _broadcast_dst_index(layout, pre, tid, slot)
    src_e = "0"
    for i, d_dst, d_src, stride in zip(idx, layout.dst, layout.src, row_major_strides(layout.src)):
        if d_src == 1 and d_dst > 1:   # a broadcast axis: the first copy sits at index 0
            first = pre(f"icmp eq i32 {i}, 0", "ok")
            valid = first if valid is None else pre(f"and i1 {valid}, {first}", "ok")
        elif d_src > 1:
            term = i if stride == 1 else pre(f"mul i32 {i}, {stride}", "l")
            src_e = term if src_e == "0" else pre(f"add i32 {src_e}, {term}", "l")
    return src_e, valid


@warp_coords.register
def _tmem_warps(layout: TmemAccLayout, pre: Pre, tid: str) -> tuple[str, str, str, Optional[str]]:
    _, wm, wn = layout.warps
    warp = pre(f"lshr i32 {tid}, 5", "w")
    if wm == 8 and layout.shape[1] == 128:   # two warps per lane quarter, 16 rows each: w % 4, then w / 4 % 2
        quarter = pre(f"shl i32 {pre(f'and i32 {warp}, 3', 'wm')}, 1", "wm")
        half = pre(f"and i32 {pre(f'lshr i32 {warp}, 2', 'wm')}, 1", "wm")
        w_m = pre(f"or i32 {quarter}, {half}", "wm")
    else:
        w_m = pre(f"urem i32 {warp}, {wm}", "wm") if wm > 1 else "0"
    w_n = pre(f"udiv i32 {warp}, {wm}", "wn") if wn > 1 else "0"
    return "0", w_m, w_n, None


@warp_coords.register
def _pair_warps(layout: PairAccLayout, pre: Pre, tid: str) -> tuple[str, str, str, Optional[str]]:
    _, _, wn = layout.warps
    warp = pre(f"lshr i32 {tid}, 5", "w")
    w_m = pre(f"and i32 {warp}, 1", "wm")
    half = pre(f"and i32 {pre(f'lshr i32 {warp}, 1', 'wh')}, 1", "wh")
    if wn == 2:
        return "0", w_m, half, None
    return "0", w_m, pre(f"or i32 {pre(f'shl i32 {half}, 1', 'wn')}, {pre(f'lshr i32 {warp}, 2', 'wn')}", "wn"), None
