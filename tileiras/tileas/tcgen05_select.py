"""Which mmas run on Blackwell's tcgen05 (sm_100 / sm_103), and their accumulators' layouts in tensor
memory: decided at nv_tileas by layout assignment (`choose_all`), the rest stays on mma.sync, each with
the reason its remark gives (`LayoutAssignment.tcgen05_refused`). lowering/ops_tcgen05.py translates
what is chosen.

tcgen05 takes 2-D mmas (f16, bf16, tf32, e4m3/e5m2, signed int8) whose B is a load used once, possibly
reshaped (unit dimensions), transposed (2-D) or rounded to tf32, and whose A is such a load too or
(except tf32) a register tile; block-scaled fp8 and fp4; M 64, 128 or 256, N a multiple of 16 (8 for
M = 64) up to 256, A and B together within shared memory, enough warps that each TMEM lane quarter
is read by its own warps, rows some swizzle holds whole, and room in the 512 columns of tensor
memory (tmem_columns.py), in program order while they last.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation, Value
from ..ir.types import storage_bytes
from ..layout.encodings import WARP, PairAccLayout, TmemAccLayout
from ..target import caps
from ..target.table import TMEM_COLUMNS
from ..tileaa.mma_forms import Kind, kind_of, swizzle_fits, tcgen05_scales_refused
from ..tileaa.mma_operands import MMAS, loaded, mma_reads, passes
from .tmem_columns import columns_needed, plan

# tf32 operands are f32 loads rounded by an ftof: the mma rounds them itself while it copies them
# from their cp.async buffers into swizzled K-major ones (B transposed), so both descriptors are
# K-major and the products equal the rounded operands' (not the hardware's truncation of raw f32).
RESTAGED = frozenset({"tf32"})

# 4-bit kinds: A and B two elements to a byte, K-major, which no copy of a load gives as it lands: the
# mma packs them from registers or their staged bytes into buffers of its own (fp4_pack.py)
PACKED = frozenset({"mxf4nvf4"})

def choose_all(ops: list[Operation], sm: int, threads: int, returns_early: bool = False
               ) -> "tuple[dict[Operation, TmemAccLayout], dict[Operation, str]]":
    """(the mmas among `ops` that run on tcgen05, placed in tensor memory by `plan`: in program order
    while the 512 columns last; why each other one stays on mma.sync, the remark's reason, which the
    lowering reports), on a target with tcgen05. `returns_early`: the kernel has more exits than its
    last op, and tensor memory is freed at the one exit: none runs on tcgen05."""
    if not caps(sm).has("tcgen05"):
        return {}, {}
    found = {op: _decide(op, threads) for op in ops if op.name in MMAS}
    out: dict[Operation, TmemAccLayout] = {}
    for op, layout in found.items():
        if not returns_early and isinstance(layout, TmemAccLayout) and not _too_large(op, sm) \
                and plan({**out, op: layout})[1] <= TMEM_COLUMNS:
            out[op] = layout
    return out, {op: _why_not(op, sm, found[op], out, returns_early) for op in found if op not in out}


def choose(op: Operation, sm: int, threads: int) -> Optional[TmemAccLayout]:
    """The accumulator layout of `op` when it runs on tcgen05.mma, else None (mma.sync)."""
    if not caps(sm).has("tcgen05") or op.name not in MMAS:
        return None
    found = _decide(op, threads)
    return found if isinstance(found, TmemAccLayout) and not _too_large(op, sm) else None


def _why_not(op: Operation, sm: int, found: "TmemAccLayout | str", chosen: "dict[Operation, TmemAccLayout]",
             returns_early: bool) -> str:
    """Why mma `op` (not among `chosen`; `found`: its layout, or why it has none) stays on mma.sync."""
    if isinstance(found, TmemAccLayout) and _too_large(op, sm):
        return "its A and B, staged whole, exceed shared memory: mma.sync copies them in K slices"
    if isinstance(found, TmemAccLayout) and returns_early:
        return "the kernel returns early: tensor memory is freed at its one exit"
    if isinstance(found, TmemAccLayout):
        return f"its {columns_needed(op, found)} tensor-memory columns do not fit beside the " \
               f"{plan(chosen)[1]} of the kernel's other tcgen05 mmas"
    return found


def _too_large(op: Operation, sm: int) -> bool:
    """A and B together are more than the target's shared memory: tcgen05.mma reads them staged
    whole, where mma.sync copies such loads to its K slices (TileGym's MLA decoding at 256-row K
    tiles: 256 KB)."""
    staged = sum(v.type.num_elements * storage_bytes(v.type.element)  # type: ignore[union-attr]
                 for v in (op.operand("lhs"), op.operand("rhs")))
    return staged > caps(sm).smem_per_block


def _decide(op: Operation, threads: int) -> "TmemAccLayout | str":
    """The tcgen05 accumulator layout of `op`, or why it has none."""
    kind = kind_of(op)
    lhs, acc = op.operand("lhs"), op.operand("acc")
    if kind is None:
        return "tcgen05.mma has no kind for these element types (f16 accumulators, unsigned int8)"
    if len(acc.type.shape) != 2:  # type: ignore[union-attr]
        return "a batched (3-D) tile: tcgen05.mma takes 2-D tiles (unit batches are reshaped away)"
    m, n = acc.type.shape  # type: ignore[union-attr]
    kdim = lhs.type.shape[-1]  # type: ignore[union-attr]
    warps = threads // WARP
    # warps on rows as far as each one's rows stay in its lane quarter (16x256b reaches 16 lanes):
    # M = 128 with 8 warps gives each 16 rows (two per quarter), so a row's softmax stays in a warp
    wm = 4 if m == 64 else 8 if m == 128 and warps % 8 == 0 else m // 32
    if m not in (64, 128, 256) or n > 256 or n % (8 if m == 64 else 16):
        return f"no cta_group::1 instruction computes a {m} x {n} tile (M 64, 128 or 256; N up to 256)"
    if warps % wm:
        return f"{warps} warps cannot read the {m}-row accumulator's tensor-memory lane quarters"
    wn = warps // wm
    per_warp = n // 8 // max(wn, 1)
    if n % (8 * wn) or per_warp & (per_warp - 1) or per_warp > 32:   # one 16x256b.x{1..32} per row block
        return f"{n} columns over {wn} warps is no 16x256b access"
    if kdim % kind.k:
        return f"K = {kdim} is not a multiple of kind::{kind.name}'s K of {kind.k}"
    refused = tcgen05_scales_refused(m, n) if op.name == "cuda_tile.mmaf_scaled" else ""
    if refused:
        return refused
    # A and B of a packed kind go K-major into the mma's own buffers from wherever they are (fp4_pack.py)
    why = "" if kind.name in PACKED else _operands_refused(op, kind, m, n, kdim)
    if why:
        return why
    layout = TmemAccLayout(threads, (1, m, n), (1, wm, wn))
    if m == 64 and is_pair(op) and not pair_refused(op):   # layout B: two row warps, the column halves on
        # lane quarters 2-3
        layout = PairAccLayout(threads, (1, m, n), (1, 2, 2 * wn))
        if n % 16 or (n // 16 // wn) & (n // 16 // wn - 1):
            return f"{n} columns over {wn} warps is no 16x256b access of the pair's column halves"
    if columns_needed(op, layout) > TMEM_COLUMNS:
        return f"it needs {columns_needed(op, layout)} tensor-memory columns, more than the {TMEM_COLUMNS} there are"
    return layout


def _operands_refused(op: Operation, kind: Kind, m: int, n: int, kdim: int) -> str:
    """Why the MMA cannot read `op`'s A and B where cp.async or the mma puts them ("" where it can)."""
    a_src, b_src = loaded(op.operand("lhs")), loaded(op.operand("rhs"))
    if b_src is None:
        return "B is not a load used only by this mma: tcgen05.mma reads B from shared memory"
    if a_src is None and (not register_a(kind) or op.name == "cuda_tile.mmaf_scaled"):
        return "A is computed in registers and read as tf32: tcgen05.mma would truncate what its ftof rounds"
    restaged = kind.name in RESTAGED                      # copied K-major whatever the source's orientation
    a_row = (m if a_src and not restaged else kdim) * kind.elem_bytes    # bytes of a stored row: (K, M) or (M, K)
    b_row = (kdim if b_src or restaged else n) * kind.elem_bytes         # (N, K) or (K, N)
    # an M/N-major row of one 16-byte core matrix is read unswizzled (ops_tcgen05._descriptor)
    a_fits = swizzle_fits(a_row) or bool(a_src) and a_row == 16
    b_fits = swizzle_fits(b_row) or b_src is False and b_row == 16
    if not (a_fits and b_fits):
        return f"stored rows of {a_row} / {b_row} bytes fit no swizzle (32, 64 or a multiple of 128 bytes)"
    return ""


def register_a(kind: Kind) -> bool:
    """Kinds whose A may be a register tile (attention's probabilities): all but tf32 (whose copies
    round): 16-bit ones go to tensor memory where they can (ops_tcgen05._a_in_tmem), the rest to a swizzled
    shared buffer."""
    return kind.name not in RESTAGED


def feeds(value: Value, ops: "dict[Operation, TmemAccLayout]") -> bool:
    """`value` reaches `ops` (and only them) as an operand, through unit reshapes, 2-D transposes and
    roundings to tf32 (on every path, several mmas possibly reading it), and the MMAs read the buffer
    it is copied into (swizzled). A tf32 operand's buffer is swizzled too where its rows fit a
    swizzle: the warp-specialized loop rounds it in place and the MMA reads it as stored
    (warp_specialize_tcgen05.py); elsewhere the mma restages it K-major from there (ops_tcgen05._restaged)."""
    row = getattr(getattr(value, "type", None), "shape", (0,))[-1] * 4
    reads = mma_reads(value, passes)
    return bool(reads) and all(read.mma in ops and kind_of(read.mma).name not in PACKED  # type: ignore[union-attr]
                               and (kind_of(read.mma).name not in RESTAGED  # type: ignore[union-attr]
                                    or swizzle_fits(row)) for read in reads)


def pair_refused(op: Operation) -> str:
    """Why the CTA pair of `op` (`is_pair`) cannot run after all ("" where it may): the pair copies its
    A and B by TMA (cta_pairs.plan), and a view whose facts refuse TMA (tma_boxes.view_refused) leaves
    each CTA its own 64 rows, in the unpaired layout (no accumulator goes through the pair's layout by
    a conversion)."""
    from ..tileaa.mma_operands import source
    from .tma_boxes import view_refused

    for name in ("lhs", "rhs"):
        load = source(op.operand(name), passes)[0]
        if load is None or not load.name.startswith("cuda_tile.load"):
            return f"{name} is not a load"
        why = view_refused(load, storage_bytes(load.results[0].type.element))  # type: ignore[union-attr]
        if why:
            return f"{name}'s load is not copied by TMA: {why}"
    return ""


def is_pair(op: Operation) -> bool:
    """Whether `op` is the mma a cluster's CTA pairs run as one (tileaa/clusters.PAIR_ATTR)."""
    from ..tileaa.clusters import PAIR_ATTR
    from .buffers import _parent_op

    entry: Optional[Operation] = op
    while entry is not None and entry.name != "cuda_tile.entry":
        entry = _parent_op(entry)
    return entry is not None and bool(entry.attributes.get(PAIR_ATTR))
