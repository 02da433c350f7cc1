"""Layout assignment: choose a layout (layout.py) for every tile value of a kernel.

Runs over an entry before code emission, in two walks:

1. Backward, from the anchors: a reduce or scan along the innermost axis whose
   row fits a warp wants its operands in `RowWarpLayout(cols=row length)`, and
   a broadcast along rows that fit a warp wants its source in the layout that
   makes it free. The wish flows back through elementwise ops, reshapes,
   row broadcasts and loops (a loop result's wish goes to what the body
   continues with and to the init value) to the producers that can make any
   layout (loads, iota, constants).
2. Forward, in program order, each op gets its result layouts and the layout
   it reads each operand in:
   * producers (load_view, iota, constant): what their users want, else blocked;
   * elementwise ops (and pointer offset/load/store): their operands' common
     layout; operands in another layout are converted;
   * a scatter of mma fragments whose pointers allow 16-byte accesses
     (vector_width.restaged_scatter): pointers and mask in that blocked layout,
     the fragments as they are (the lowering restages them through the freed
     buffers, as view epilogues do);
   * reshape: its operand's layout (row-major order is preserved);
   * a broadcast along the row axis of a row-warp tile stays in registers;
   * row reduce/scan anchors whose operands arrive in row-warp: results row-warp
     (others take the generic shared-memory path below);
   * ops that already move data through shared memory (permute, extract,
     cat, insert, pack, other reduces and scans, stores to views) read any
     layout and produce blocked tiles;
   * mma ops that run on tensor cores (mma_forms.choose; `mma_shapes`, `wgmma_shapes`): result and
     accumulator in `MmaLayout`, A and B read as they are (they are staged in
     shared memory);
   * loops carry a value in the layout of what the loop body yields for it
     when that is an mma fragment or rows in warps (a K loop's accumulator,
     attention's row max and sum, a sum reduced along its rows after the
     loop stay in registers), else blocked: each plan's walk runs again until
     the carried layouts settle;
   * every other op reads and produces blocked tiles.

A conversion is recorded where a value's layout differs from the layout its
user reads; `KernelLowering` performs it (through shared memory) before it
lowers the user. Refinements keep conversions rare:
* a splat (a broadcast scalar, a uniform constant, elementwise ops of splats)
  is the same value everywhere, so it is rebuilt in any layout for free and
  does not vote on its users' layout;
* a conversion becomes a wish (for the converted value, or for the result of
  the elementwise op that reads it), and the walks run again; wishes
  accumulate and the cheapest round is kept.

A broadcast whose result element-wise ops combine with mma fragments is no
anchor: the fragments keep their layout, so rows in warps would only convert.

Every shared-memory round trip costs two CTA barriers, and rows in warps are
not always worth their conversions. So each candidate assignment is costed in
round trips (`_round_trips`: conversions, reduces/scans not in warps,
broadcasts not free), anchors are dropped one at a time where that is cheaper,
and a kernel never gets more than the all-blocked assignment
(`row_warps=False`) costs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator, Optional

from ..ir.core import Operation, Value
from ..dialects.elementwise import ELEMENTWISE, POINTER

# atomics through a tile of pointers read their operands in one layout, as element-wise ops do: mma fragments in
# their own (a split-K epilogue adds its accumulator where it is, as NVIDIA's does, rather than converting it whole
# through shared memory: 128 KB for a 128 x 256 i32 accumulator, past sm_120's 99 KB)
ATOMICS = frozenset({"cuda_tile.atomic_rmw_tko", "cuda_tile.atomic_cas_tko"})
MEMORY = POINTER | ATOMICS     # per-element memory ops: never a splat, an index or a broadcast table
from ..ir.types import TileType, storage_bytes
from ..target import caps
from ..layout.encodings import (BlockedLayout, BroadcastSourceLayout, Layout, MmaLayout, MmaRowLayout, RowWarpLayout,
                                column_window,
                                row_layout, rows_replicated)
from .plan import KernelPlan
from .vector_width import vector_width
from ..tileaa.mma_operands import SCALED_OPERANDS, MmaRead, mma_reads, passes_shared, tree_values

if TYPE_CHECKING:
    from ..tileaa.mma_forms import WgmmaShape

_REDUCE_LIKE = ("cuda_tile.reduce", "cuda_tile.scan")
_MMA = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")
_LOOPS = ("cuda_tile.for", "cuda_tile.loop")
_PRODUCERS = ("cuda_tile.constant", "cuda_tile.iota", "cuda_tile.load_view_tko")
# read operands of any layout (through shared memory or per-element coordinates); results blocked
_ANY_OPERAND = ("cuda_tile.permute", "cuda_tile.extract", "cuda_tile.cat", "cuda_tile.insert", "cuda_tile.pack",
                "cuda_tile.unpack", "cuda_tile.store_view_tko", "cuda_tile.broadcast", "cuda_tile.reshape",
                "cuda_tile.reduce", "cuda_tile.scan")
# refinement rounds at most (each adds wishes, so the rounds end anyway; this bounds compile time)
_ROUNDS = 4



def extracted_columns(op: Operation, source: object) -> Optional[MmaLayout]:
    """The layout in which extract `op` takes whole columns of a tile in mma fragment layout `source`
    without moving them (`column_window`: a sub-tiled epilogue's column halves), or None: the extract
    then goes through shared memory (tileas/move_forms.extract_form)."""
    window = column_extract(op)
    return column_window(source, *window) if window is not None else None


def column_extract(op: Operation) -> Optional[tuple[int, int]]:
    """(first column, columns) where extract `op` takes a constant window of columns of every row and
    batch of a 2-D or 3-D tile, else None."""
    from ..transforms.constants import splat_int

    src, dst = op.operand("source").type, op.results[0].type
    assert isinstance(src, TileType) and isinstance(dst, TileType)
    starts = [splat_int(v) for v in op.operand_group("indices")]
    if any(s is None for s in starts) or src.shape[:-1] != dst.shape[:-1] or any(starts[:-1]) \
            or not 2 <= len(src.shape) <= 3:
        return None
    width = dst.shape[-1]
    return starts[-1] * width, width  # type: ignore[operator]


def _walk(block_ops: list[Operation]) -> Iterator[Operation]:
    return (inner for op in block_ops for inner in op.walk())


def _continue_targets(entry: Operation) -> dict[Operation, Operation]:
    """Each `continue` op -> the innermost for/loop it continues."""
    out: dict[Operation, Operation] = {}

    def visit(ops: list[Operation], loop: Optional[Operation]) -> None:
        for op in ops:
            if op.name == "cuda_tile.continue" and loop is not None:
                out[op] = loop
            inner = op if op.name in _LOOPS else loop
            for region in op.regions:
                for block in region.blocks:
                    visit(block.operations, inner)

    visit(entry.regions[0].block.operations, None)
    return out


# combiners whose operands may be combined in any order (float add within the usual tolerance)
_COMMUTATIVE = frozenset({"cuda_tile.addf", "cuda_tile.maxf", "cuda_tile.minf", "cuda_tile.addi", "cuda_tile.maxi",
                          "cuda_tile.mini", "cuda_tile.andi", "cuda_tile.ori", "cuda_tile.xori", "cuda_tile.mulf",
                          "cuda_tile.muli"})


def _commutative(op: Operation) -> bool:
    """A reduce whose combiner is one commutative op of its two block arguments per result."""
    body = op.regions[0].block if op.regions else None
    if body is None or len(op.operands) != 1:
        return False
    ops = [o for o in body.operations if o.name != "cuda_tile.yield"]
    return len(ops) == 1 and ops[0].name in _COMMUTATIVE and set(ops[0].operands) == set(body.arguments[:2])


def _mma_row_broadcast(dst: TileType, src_layout: Layout, wanted: Optional[Layout] = None) -> Optional[MmaLayout]:
    """The mma layout a broadcast of mma rows along the columns has for free, if any: the rows' own
    grid, or the one the result is `wanted` in where each of its warps holds those rows too
    (`rows_replicated`: an attention output spread over the warps its one-warp scores leave idle)."""
    if not isinstance(src_layout, MmaRowLayout):
        return None
    parent = src_layout.parent
    shape = (1, *dst.shape) if len(dst.shape) == 2 else tuple(dst.shape)
    if len(shape) != 3 or shape[:2] != parent.shape[:2] or shape[2] % 8:
        return None
    if type(wanted) is type(parent) and wanted.shape == shape and rows_replicated(parent, wanted):  # type: ignore[union-attr]
        return wanted  # type: ignore[return-value]
    return type(parent)(parent.threads, shape, parent.warps, parent.interleaved)   # (a tcgen05 one stays one)


def broadcast_source(src: TileType, dst: TileType, result: Layout) -> BroadcastSourceLayout:
    """The layout of a broadcast's source that makes the broadcast a register copy into `result`
    (missing leading axes of the source count as extent 1)."""
    shape = (1,) * (len(dst.shape) - len(src.shape)) + tuple(src.shape)
    return BroadcastSourceLayout(result, tuple(dst.shape), shape)


def _free_by_source(src: TileType, dst: TileType, src_layout: Layout) -> Optional[Layout]:
    """The result layout a broadcast has for free when its source is in `broadcast_source` form."""
    if isinstance(src_layout, BroadcastSourceLayout) and src_layout == broadcast_source(src, dst, src_layout.parent):
        return src_layout.parent
    return None


def _mma_forms(ops: list[Operation], sm: int) -> "tuple[dict[Operation, object], dict[Operation, str]]":
    """(the mmas that run on tensor cores -> the mma.sync instruction mma_forms.choose picks, each
    other mma -> why it is left to FMAs: its remark's reason)."""
    from ..tileaa.mma_forms import choose

    shapes: dict[Operation, object] = {}
    refused: dict[Operation, str] = {}
    for op in ops:
        if op.name in _MMA:
            lhs, rhs, acc = (op.operand(n).type for n in ("lhs", "rhs", "acc"))  # type: ignore[union-attr]
            choice = choose(op, lhs, rhs, acc, sm)  # type: ignore[arg-type]
            if isinstance(choice, str):
                refused[op] = choice
            else:
                shapes[op] = choice
    return shapes, refused


def _tile(value: Value) -> Optional[TileType]:
    t = value.type
    return t if isinstance(t, TileType) and t.num_elements > 1 else None


def row_anchor(op: Operation) -> Optional[int]:
    """The row length when `op` is a reduce/scan along the innermost axis of a row that fits a warp."""
    if op.name not in _REDUCE_LIKE:
        return None
    t = _tile(op.operands[0])
    if t is None or int(op.attributes["dim"]) != len(t.shape) - 1:
        return None
    cols = t.shape[-1]
    return cols if cols > 1 and RowWarpLayout.fits(cols) else None


def row_broadcast(src: TileType, dst: TileType, src_layout: Layout, vec: int) -> Optional[RowWarpLayout]:
    """The row-warp layout a broadcast result has for free (no data movement), if any.

    Either each row's one element goes to the whole row (src (..., 1), same
    rows), or one row goes to every row (src (1.., cols)).
    """
    cols = dst.shape[-1]
    if not isinstance(src_layout, RowWarpLayout) or len(src.shape) != len(dst.shape) or not RowWarpLayout.fits(cols):
        return None
    if src_layout.cols == 1 and src.shape[-1] == 1 and src.shape[:-1] == dst.shape[:-1]:
        rows = row_layout(src_layout.threads, dst.shape, vec=vec)
        return rows if rows.row_values() == src_layout else None
    if src_layout.cols == cols == src.shape[-1] and src.num_elements == cols:
        return src_layout
    return None


def _free_row_source(src: TileType, dst: TileType, threads: int, vec: int) -> Optional[RowWarpLayout]:
    """The layout of a broadcast's source that makes the result rows of a warp for free, if any."""
    cols = dst.shape[-1]
    if src.num_elements == 1 or not RowWarpLayout.fits(cols):
        return None
    rows = row_layout(threads, dst.shape, vec=vec)
    for candidate in (rows.row_values(), rows):
        if row_broadcast(src, dst, candidate, vec) == rows:
            return candidate
    return None


def _uniform_constant(op: Operation) -> bool:
    value = op.attributes["value"]
    raw, elem = value.raw, op.results[0].type.element  # type: ignore[attr-defined]
    size = max(1, getattr(elem, "bitwidth", 8) // 8)
    return len({raw[i:i + size] for i in range(0, len(raw), size)}) <= 1


# stages of an FMA mma's A and B that must fit the target's shared memory for its loads to be staged (a
# pipeline's ring needs two)
FMA_STAGES = 2


class _Plan:
    """One candidate assignment: the wishes it started from and what the forward walk made of them."""

    __slots__ = ("anchors", "wants", "layouts", "reads", "conversions", "warp_ops", "mma_rows", "carried", "cost")

    def __init__(self, anchors: frozenset[Operation], wants: dict[Value, Layout]) -> None:
        self.anchors = anchors
        self.wants = wants
        self.layouts: dict[Value, Layout] = {}
        self.reads: dict[Operation, list[Optional[Layout]]] = {}
        self.conversions: list[tuple[Operation, Value, Layout]] = []
        self.warp_ops: set[Operation] = set()
        self.mma_rows: set[Operation] = set()   # row reduces of mma fragments (quad shuffles)
        self.carried: dict[Operation, list[Optional[Layout]]] = {}   # loop -> its carried values' layouts
        self.cost = 0


class LayoutAssignment:
    """The layouts of one kernel: per tile value, and per op the layout it reads each operand in.

    `row_warps=False` gives the plain all-blocked assignment (the baseline the cost check compares with).
    """

    def __init__(self, entry: Operation, threads: int, row_warps: bool = True, sm: int = 80) -> None:
        self.blocked = BlockedLayout(threads, vector_width(entry))
        self.threads = threads
        self._elementwise = ELEMENTWISE | ATOMICS
        self._ops = list(_walk(entry.regions[0].block.operations))
        self.splats = self._find_splats(self._ops)
        self.index_only = self._find_index_only(self._ops)
        self.broadcast_loads = self._find_broadcast_loads(self._ops)
        self.sm = sm
        self.caps = caps(sm)             # what the target has (tileiras/target/table.py)
        # tensor-core mmas -> their mma_forms.MmaShape (mma.sync); the others -> why they are left to FMAs
        self.mma_shapes, self.fma_reasons = _mma_forms(self._ops, sm)
        self.mma_derived = self._find_mma_derived()
        self.rows_in_warps = any(self._reduces_rows(op) for op in self._ops)
        self.row_reduced = self._row_reduced_mmas()
        self.wgmma_ops = self._wgmma_ops()
        # the mmas on wgmma, in program order -> their instruction (mma_forms.select_wgmma)
        self.wgmma_shapes = {op: self._wgmma_shape(op) for op in self._ops if op in self.wgmma_ops}
        # mmas on tcgen05 -> their accumulators' layouts; the others, on a target with tcgen05 -> why not
        self.tcgen05_layouts, self.tcgen05_refused = self._tcgen05_layouts()
        self.mma_layouts = {op: layout for op in self._ops if (layout := self._mma_layout(op)) is not None}
        results = {op.results[0]: layout for op, layout in self.mma_layouts.items()}
        # loop -> its carried values' layouts: the mma fragments its body yields (each plan adds rows in warps)
        self._fragments_carried = {op: self._carried_layouts(op, results) for op in self._ops if op.name in _LOOPS}
        self.shared_operands = self._find_shared_operands()
        self.fragment_bound = self._find_fragment_bound()
        self.restaged_scatters = self._find_restaged_scatters(entry)
        self._continue_targets = _continue_targets(entry)
        anchors = [op for op in self._ops if self._anchor(op)] if row_warps else []
        plan = self._choose(anchors)
        self.carried = plan.carried
        self._layouts, self._reads = plan.layouts, plan.reads
        self.conversions, self.warp_ops, self.mma_row_ops = plan.conversions, plan.warp_ops, plan.mma_rows
        # the kernel's schedule decisions, which the passes after the layouts fill (tileas/plan.py)
        self.plan = KernelPlan({})

    def _anchor(self, op: Operation) -> bool:
        """Ops that gain from rows in warps: a row reduce/scan (shuffles instead of shared memory) and
        a broadcast along rows (register copies instead of shared memory). Not a reduce of mma
        fragments: those reduce in the mma layout."""
        if self._reduces_rows(op):
            return False
        if op.name == "cuda_tile.broadcast":
            src, dst = op.operands[0].type, op.results[0].type
            return op.results[0] not in self.fragment_bound and \
                _free_row_source(src, dst, self.threads, self.blocked.vec) is not None  # type: ignore[arg-type]
        return row_anchor(op) is not None

    def _find_restaged_scatters(self, entry: Operation) -> dict[Operation, BlockedLayout]:
        """Scatters that store mma fragments through the freed shared buffers in 16-byte runs
        (vector_width.restaged_scatter), with the blocked layout their pointers and mask are read
        in: at the kernel's end, where nothing after them uses the buffers (tensor memory's mbarrier
        and address slot are kept alive apart: tileas/buffers.KEPT)."""
        if not self.mma_layouts:
            return {}
        from .buffers import buffers_free_after
        from .vector_width import restaged_scatter

        out = {}
        for op in self._ops:
            if op.name == "cuda_tile.store_ptr_tko" and (layout := restaged_scatter(op, self.threads)) is not None \
                    and buffers_free_after(entry, op, self.is_shared_operand):
                out[op] = layout
        return out

    def _find_fragment_bound(self) -> set[Value]:
        """Tiles that element-wise ops combine with tensor-core fragments (mma results, loops carrying
        them, and element-wise results of those), directly or through further element-wise ops: they
        take the fragments' layout whatever is wished (an epilogue's scatter addresses and mask), so
        rows in warps for them would only add a conversion."""
        fragments: set[Value] = set()
        for op in self._ops:
            if op in self.mma_layouts:
                fragments.add(op.results[0])
            elif op in self._fragments_carried:
                fragments.update(r for r, layout in zip(op.results, self._fragments_carried[op]) if layout is not None)
            elif op.name in self._elementwise and op.results and any(v in fragments for v in op.operands):
                fragments.update(r for r in op.results if _tile(r) is not None)
        bound: set[Value] = set()
        for op in reversed(self._ops):
            if op.name in self._elementwise and (any(v in fragments for v in op.operands) or
                                                 any(r in bound for r in op.results)):
                bound.update(v for v in op.operands if _tile(v) is not None and v not in fragments)
        return bound

    def _row_reduced_mmas(self) -> set[Operation]:
        """The tensor-core mmas whose results, through elementwise ops and reshapes, are reduced along
        their rows (attention's scores, not its output)."""
        reduced: set[Operation] = set()
        for mma in self.mma_shapes:
            derived = self._derived([mma])
            if any(self._reduces_rows(op) and any(v in derived for v in op.operands) for op in self._ops):
                reduced.add(mma)
        return reduced

    def _find_mma_derived(self) -> set[Value]:
        """Tiles computed from tensor-core mma results by elementwise ops, reshapes and row broadcasts
        (the scores of an attention, before their row max and sum)."""
        return self._derived(self.mma_shapes)

    def _derived(self, mmas: "Iterable[Operation]") -> set[Value]:
        """The results of `mmas` and the tiles elementwise ops and reshapes compute from them."""
        sources = set(mmas)
        derived: set[Value] = set()
        for op in self._ops:
            if op in sources:
                derived.add(op.results[0])
            elif (op.name in self._elementwise or op.name == "cuda_tile.reshape") and op.results \
                    and any(v in derived for v in op.operands):
                derived.update(r for r in op.results if _tile(r) is not None)
        return derived

    def _reduces_rows(self, op: Operation) -> bool:
        """A commutative reduce along the innermost axis of an mma-derived tile."""
        if op.name != "cuda_tile.reduce" or not all(v in self.mma_derived for v in op.operands):
            return False
        t = _tile(op.operands[0])
        return t is not None and int(op.attributes["dim"]) == len(t.shape) - 1 and _commutative(op)

    def _mma_layout(self, op: Operation) -> Optional[MmaLayout]:
        """The accumulator layout of an mma that runs on tensor cores, else None."""
        if op not in self.mma_shapes:
            return None
        acc = op.operand("acc").type
        if op in self.tcgen05_layouts:
            return self.tcgen05_layouts[op]
        if op in self.wgmma_ops:   # every warp on rows: warpgroup w's rows are 64 i + 16 w
            return MmaLayout(self.threads, (1, *acc.shape), (1, self.threads // 32, 1), True)  # type: ignore[union-attr]
        # rows reduced later stay within one warp column: the reduce is then a quad shuffle; an mma
        # whose own rows are not reduced spreads its columns over the warps that leaves idle
        return MmaLayout.for_shape(self.threads, acc.shape, self.rows_in_warps,  # type: ignore[union-attr]
                                   spread_columns=op not in self.row_reduced)

    def _wgmma_shape(self, op: Operation) -> "WgmmaShape | None":
        """sm_90 warpgroup mma: the instruction mma_forms.select_wgmma picks for a tensor-core mma's
        types and tile shapes, or None."""
        from ..tileaa.mma_forms import select_wgmma

        return select_wgmma(op, self.sm, self.threads) if op in self.mma_shapes else None

    def _find_shared_operands(self) -> set[Value]:
        """Loaded tiles that only tensor-core mmas read, as A or B, possibly through reshapes that
        add or drop unit dimensions and 2-D transposes: they go to shared memory directly, and the
        reshapes and transposes only change how the mma reads the buffer."""
        out: set[Value] = set()
        for op in self._ops:
            if op.name != "cuda_tile.load_view_tko":
                continue
            # every mma reading it (A, B or a block scale), each its own way
            reads = mma_reads(op.results[0], passes_shared, SCALED_OPERANDS)
            if reads and (all(read.mma in self.mma_layouts for read in reads)
                          or all(self._fma_reads(read) for read in reads)):
                out.update(tree_values(op.results[0], passes_shared))
        return out

    def _fma_reads(self, read: "MmaRead") -> bool:
        """An mma on the FMA path reading the tile as A or B, as stored or transposed: it reads each
        element from shared memory where it lies (ops_reduce._fma_chains), so the load is staged there
        directly (and a loop's copies can be issued ahead) instead of through registers and scratch.
        Not a block-scaled one's (its scales are read beside A and B from one scratch) nor a tf32 read,
        nor one whose A and B could not be staged twice over (`FMA_STAGES`): through registers, its
        scratch takes them a K slice at a time (a 128 x 128 by 128 x 256 f32 batch: 192 KB staged)."""
        mma = read.mma
        if mma not in self.fma_reasons or mma.name == "cuda_tile.mmaf_scaled" or read.rounded:
            return False
        tiles = [mma.operand(n).type for n in ("lhs", "rhs")]
        nbytes = sum(t.num_elements * storage_bytes(t.element) for t in tiles)  # type: ignore[union-attr]
        return FMA_STAGES * nbytes <= self.caps.smem_per_block

    def _wgmma_ops(self) -> set[Operation]:
        """The mmas on wgmma. A narrow one (N = 16 or 32) only where every tensor-core mma of the
        kernel is on wgmma: beside mma.sync accumulators its fragments are converted back and forth
        (TileGym's MLA decode, whose M = 512 mma stays on mma.sync, spilled 16 instructions)."""
        from ..tileaa.mma_forms import narrow

        ops = {op for op in self._ops if self._wgmma_shape(op) is not None}
        if any(op not in ops for op in self.mma_shapes):
            ops = {op for op in ops if not narrow(op)}
        return ops

    def is_wgmma(self, op: Operation) -> bool:
        return op in self.wgmma_ops

    # -- sm_100 tcgen05 (tcgen05_select.py decides) --------------------------------------
    def _tcgen05_layouts(self) -> tuple[dict[Operation, Layout], dict[Operation, str]]:
        from .tcgen05_select import choose_all

        mmas = [op for op in self._ops if op in self.mma_shapes]
        returns_early = any(op.name == "cuda_tile.return" for op in self._ops[:-1])   # tensor memory is freed at the one exit
        return choose_all(mmas, self.sm, self.threads, returns_early)

    def is_tcgen05(self, op: Operation) -> bool:
        return op in self.tcgen05_layouts

    def is_swizzled(self, value: Value) -> bool:
        """A loaded tile that a wgmma (by descriptor, as it is stored) or a tcgen05 mma reads: copied
        in its swizzled layout."""
        if not self.tcgen05_layouts:   # feeds no tcgen05 mma
            return self._wgmma_reads_as_stored(value)
        from .tcgen05_select import feeds

        return self._wgmma_reads_as_stored(value) or feeds(value, self.tcgen05_layouts)

    def _wgmma_reads_as_stored(self, value: Value) -> bool:
        """Loaded tiles that wgmmas read by descriptor as stored (through unit reshapes and
        transposes; several mmas may read one tile, each its own way). Otherwise (an N-major B of
        a type without a transposed form) the tile stays padded, and the mma copies it K-major."""
        from ..tileaa.mma_forms import reads_directly

        reads, stored = mma_reads(value, passes_shared), _tile(value)
        if not reads or stored is None:
            return False
        rows, cols = stored.shape[-2:]
        for read in reads:
            if read.rounded or read.mma not in self.wgmma_ops:
                return False   # read as tf32: the wgmma lowering copies it, rounded
            role = "a" if read.operand is read.mma.operand("lhs") else "b"
            if not reads_directly(self.wgmma_shapes[read.mma], role, read.transposed, rows, cols):
                return False
        return True

    def only_wgmma_reads(self, value: Value) -> bool:
        """A loaded tile that only wgmmas read, as A or B (through unit reshapes, transposes and
        tf32 roundings), by descriptor as stored or through their K-major copy (ops_wgmma.py),
        which reads a swizzled stage as well as a padded one: a TMA-fed stage may be swizzled."""
        reads = mma_reads(value, passes_shared)
        return bool(reads) and all(read.mma in self.wgmma_ops for read in reads)  # type: ignore[union-attr]

    def only_ldmatrix_reads(self, value: Value) -> bool:
        """A loaded tile that only mma.sync ops read, as A or B (through unit reshapes and transposes),
        by ldmatrix, which takes a swizzled stage as well as a padded one (the swizzle moves whole
        16-byte rows): 16-bit elements, or K contiguous as stored. Other operands gather their
        fragments element by element, where a swizzled address costs registers a padded one does not."""
        reads, stored = mma_reads(value, passes_shared), _tile(value)
        if not reads or stored is None:
            return False
        wide = getattr(stored.element, "bitwidth", 0) == 16   # type: ignore[union-attr]
        for read in reads:
            user = read.mma
            if user not in self.mma_shapes or user in self.wgmma_ops or user in self.tcgen05_layouts \
                    or user.name == "cuda_tile.mmaf_scaled":
                return False
            kmajor = read.transposed if read.operand is user.operand("rhs") else not read.transposed
            if not (wide or kmajor):
                return False
        return True

    def is_shared_operand(self, value: Value) -> bool:
        return value in self.shared_operands

    def fma_rows(self, value: Value) -> bool:
        """A staged tile only mmas on the FMA path read, each as stored (A (M, K), B (K, N)): their
        threads read it in 16-byte runs along its rows, a quarter warp's eight reading one row, so an
        unpadded stage has no bank conflicts and TMA can fill it as one unswizzled box (stage_rings)."""
        reads = mma_reads(value, passes_shared)
        return value in self.shared_operands and bool(reads) and all(
            self._fma_reads(read) and not read.transposed for read in reads)

    def _carried_layouts(self, loop: Operation, layouts: dict[Value, Layout]) -> list[Optional[Layout]]:
        """Per carried value of a for/loop: the fragment layout (mma or mma rows) that `layouts` give
        the value its body continues with; None (blocked) otherwise."""
        body = loop.regions[0].block
        last = body.operations[-1] if body.operations else None
        count = len(loop.operand_group("initValues"))
        if last is None or last.name != "cuda_tile.continue":
            return [None] * count
        out: list[Optional[Layout]] = []
        for v in last.operands[:count]:
            layout = layouts.get(v)
            out.append(layout if isinstance(layout, (MmaLayout, MmaRowLayout, RowWarpLayout)) else None)
        return out

    # -- choosing among plans by their barrier cost -------------------------------------
    def _choose(self, anchors: list[Operation]) -> _Plan:
        """The cheapest plan found: all anchors in warps, then each anchor dropped where that is
        cheaper, and all-blocked if that is cheaper still. Ties keep a reduce or scan in warps
        (shuffles beat the serial fold of the shared-memory path) but drop a broadcast anchor
        (row-warp tiles of few columns take more registers than blocked ones)."""
        best = self._refined(frozenset(anchors))
        if not anchors:
            return best
        for anchor in anchors:
            if anchor in best.anchors:
                candidate = self._refined(best.anchors - {anchor})
                tie_drops = anchor.name == "cuda_tile.broadcast"
                if candidate.cost < best.cost or tie_drops and candidate.cost == best.cost:
                    best = candidate
        blocked = self._refined(frozenset())
        return blocked if blocked.cost < best.cost else best

    def _refined(self, anchors: frozenset[Operation]) -> _Plan:
        """The plan for `anchors`, refined: conversions become wishes (`_wishes`) and the walks run
        again. Wishes accumulate over the rounds (a round may only move a conversion that the next
        one removes), and the cheapest round wins; then the same where readers of a free broadcast
        follow its layout (`_followed`), kept only where cheaper."""
        first = self._plan(anchors, {})
        best = self._rounds(anchors, first, follow=False)
        if any(self._followed(v, first) for _, v, _ in first.conversions):
            followed = self._rounds(anchors, first, follow=True)
            best = followed if followed.cost < best.cost else best
        return best

    def _rounds(self, anchors: frozenset[Operation], plan: _Plan, follow: bool) -> _Plan:
        seeds: dict[Value, Layout] = {}
        best = plan
        for _ in range(_ROUNDS):
            extra = self._wishes(plan, follow)
            if not extra:
                break
            seeds = {**seeds, **extra}
            plan = self._plan(anchors, seeds)
            best = plan if plan.cost < best.cost else best
        return best

    def _wishes(self, plan: _Plan, follow: bool = False) -> dict[Value, Layout]:
        """New wishes that may remove a conversion of `v` for `op`: `v` in the layout `op` reads, as
        its producer may make it directly; or, where `v` is already wished for (or, with `follow`, is a
        free broadcast whose readers follow it: `_followed`), the elementwise `op`'s result in `v`'s
        layout, so that `op` reads `v` as it is and its other operands follow."""
        extra: dict[Value, Layout] = {}
        for op, v, layout in plan.conversions:
            if v in self.splats:
                continue
            result = op.results[0] if op.name in self._elementwise and op.results else None
            if v not in plan.wants and not (follow and self._followed(v, plan)):
                extra[v] = layout
                continue
            if result is not None and _tile(result) is not None and result not in plan.wants:
                extra[result] = self._layout(plan, v)
        return extra

    def _followed(self, v: Value, plan: _Plan) -> bool:
        """Whether `v`'s readers should take its layout rather than convert it: a broadcast free in that layout
        (a row's statistic along its row: a norm's rstd, a softmax's max and sum) whose runs are as long as the
        blocked layout's (accesses in it as wide). Converted, it is a whole tile through shared memory each
        time (a softmax's 4 x 4096 chunk: 64 registers a thread, twice)."""
        owner = getattr(v, "owner", None)
        tile = _tile(v)
        if not isinstance(owner, Operation) or owner.name != "cuda_tile.broadcast" or tile is None \
                or not self._free_broadcast(owner, plan):
            return False
        layout = self._layout(plan, v)
        return layout.run(tile.num_elements) >= self.blocked.run(tile.num_elements)

    def _plan(self, anchors: frozenset[Operation], seeds: dict[Value, Layout]) -> _Plan:
        """The forward walk for `anchors` and `seeds`; loops carry what their bodies yield, so the
        walk runs again until the carried layouts settle."""
        wants = self._wants(anchors, seeds)
        carried = self._fragments_carried
        for _ in range(_ROUNDS):
            plan = _Plan(anchors, wants)
            plan.carried = carried
            for op in self._ops:
                self._assign(op, plan)
            settled = {loop: self._carried_layouts(loop, plan.layouts) for loop in carried}
            if settled == carried:
                break
            carried = settled
        plan.cost = self._round_trips(plan)
        return plan

    def _round_trips(self, plan: _Plan) -> int:
        """The shared-memory round trips (2 CTA barriers each) that depend on the layouts: conversions
        (a splat is rebuilt, and an op converts an operand once), reduces and scans not in warps, and
        broadcasts that are not free row broadcasts."""
        converted = {(op, v) for op, v, _ in plan.conversions if v not in self.splats}
        shared = sum(1 for op in self._ops if op.name in _REDUCE_LIKE and op not in plan.warp_ops
                     and op not in plan.mma_rows
                     or op.name == "cuda_tile.broadcast" and not self._free_broadcast(op, plan))
        return len(converted) + shared

    def _free_broadcast(self, op: Operation, plan: _Plan) -> bool:
        """A broadcast of a scalar, or along the rows of a row-warp tile (as `ops_shape` lowers it)."""
        src, dst = op.operands[0], op.results[0]
        src_type, dst_type = src.type, dst.type
        assert isinstance(src_type, TileType) and isinstance(dst_type, TileType)
        return src_type.num_elements == 1 or \
            row_broadcast(src_type, dst_type, self._layout(plan, src), self.blocked.vec) == self._layout(plan, dst) or \
            _mma_row_broadcast(dst_type, self._layout(plan, src)) == self._layout(plan, dst) or \
            _free_by_source(src_type, dst_type, self._layout(plan, src)) == self._layout(plan, dst)

    def _find_splats(self, ops: list[Operation]) -> set[Value]:
        """Tiles that hold one value in every element (rebuilt in any layout without data movement)."""
        splats: set[Value] = set()
        for op in ops:
            if not op.results or _tile(op.results[0]) is None:
                continue
            tiles = [v for v in op.operands if isinstance(v.type, TileType)]
            if (op.name == "cuda_tile.broadcast" and op.operands[0].type.num_elements == 1  # type: ignore[attr-defined]
                    or op.name == "cuda_tile.constant" and _uniform_constant(op)
                    or op.name == "cuda_tile.reshape" and op.operands[0] in splats
                    or op.name in self._elementwise and op.name not in MEMORY and tiles
                    and all(v in splats for v in tiles)):
                splats.add(op.results[0])
        return splats

    def _find_index_only(self, ops: list[Operation]) -> set[Value]:
        """Tiles computed from element indices alone (iota, splats, and reshapes, broadcasts and
        arithmetic of those: a causal mask's row and column indices): cheap to compute in any
        layout, so a broadcast of one is computed where the broadcast result needs it instead of
        moving through shared memory."""
        out: set[Value] = set(self.splats)
        for op in ops:
            if not op.results or _tile(op.results[0]) is None:
                continue
            tiles = [v for v in op.operands if isinstance(v.type, TileType)]
            if (op.name == "cuda_tile.iota"
                    or op.name in ("cuda_tile.reshape", "cuda_tile.broadcast") and op.operands[0] in out
                    or op.name in self._elementwise and op.name not in MEMORY and tiles
                    and all(v in out or _tile(v) is None for v in tiles)):
                out.add(op.results[0])
        return out

    def _find_broadcast_loads(self, ops: list[Operation]) -> set[Value]:
        """Loaded tiles only broadcast (through reshapes and conversions: rope's cos/sin tables, a
        bias row): each thread can load the elements the broadcast result needs where it needs
        them (`broadcast_source`), as NVIDIA's does, instead of moving them through shared memory."""
        chain: set[Value] = set()
        for op in ops:
            if op.name == "cuda_tile.load_view_tko" or op.results and _tile(op.results[0]) is not None and (
                    op.name == "cuda_tile.reshape" or op.name in self._elementwise and op.name not in MEMORY
                    and [v for v in op.operands if _tile(v) is not None] == [op.operands[0]]) \
                    and op.operands[0] in chain:
                chain.add(op.results[0])
        kept: set[Value] = set()
        for op in reversed(ops):
            if op.results and op.results[0] in chain and op.results[0].uses and all(
                    u.name == "cuda_tile.broadcast" or u.results and u.results[0] in kept for u in op.results[0].uses):
                kept.add(op.results[0])
        return kept

    # -- queries ----------------------------------------------------------------------
    def layout(self, value: Value) -> Layout:
        return self._layouts.get(value, self.blocked)

    def operand_layouts(self, op: Operation) -> Optional[list[Optional[Layout]]]:
        return self._reads.get(op)

    def mma_rows(self, op: Operation) -> bool:
        """True for a row reduce of mma fragments (lowered with quad shuffles)."""
        return op in self.mma_row_ops

    def in_warps(self, op: Operation) -> bool:
        """True for a reduce/scan whose rows were put in warps (lowered with shuffles)."""
        return op in self.warp_ops

    def is_splat(self, value: Value) -> bool:
        return value in self.splats

    # -- walk 1: what the anchors (and the seeds) want ---------------------------------
    def _wants(self, anchors: frozenset[Operation], seeds: dict[Value, Layout]) -> dict[Value, Layout]:
        wants: dict[Value, Layout] = dict(seeds)

        def want(value: Value, layout: Layout) -> None:
            if _tile(value) is not None and value not in wants:
                wants[value] = layout

        for op in reversed(self._ops):
            if op.name == "cuda_tile.continue" and (loop := self._loop_of(op)) is not None:
                # a loop carries a value in the layout its users want: the body's yield wants it
                for v, wanted in zip(op.operands, self._carried_wants(loop, wants)):
                    if wanted is not None:
                        want(v, wanted)
                continue
            if op.name in _LOOPS:
                for v, wanted in zip(op.operand_group("initValues"), self._carried_wants(op, wants)):
                    if wanted is not None:
                        want(v, wanted)
                continue
            if op in anchors and op.name in _REDUCE_LIKE:
                for v in op.operands:
                    if _tile(v) is not None:
                        want(v, self._row_for(op, v.type.shape))  # type: ignore[attr-defined]
                continue
            wanted = wants.get(op.results[0]) if op.results else None
            if op.name == "cuda_tile.broadcast":
                src, dst = op.operands[0].type, op.results[0].type
                source = _free_row_source(src, dst, self.threads, self.blocked.vec)  # type: ignore[arg-type]
                rows = row_layout(self.threads, dst.shape, vec=self.blocked.vec)  # type: ignore[attr-defined]
                # an anchor broadcast wants its result in rows unless its users want otherwise
                if source is not None and (wanted == rows or wanted is None and op in anchors):
                    want(op.operands[0], source)
                elif wanted is not None and op.operands[0] in self.index_only and op.operands[0] not in self.splats:
                    want(op.operands[0], broadcast_source(src, dst, wanted))  # type: ignore[arg-type]
                elif op.operands[0] in self.broadcast_loads and \
                        (loaded := broadcast_source(src, dst, wanted or self.blocked)).distinct():  # type: ignore[arg-type]
                    want(op.operands[0], loaded)
            elif wanted is not None and (op.name in self._elementwise or op.name == "cuda_tile.reshape"):
                n = op.results[0].type.num_elements  # type: ignore[attr-defined]
                for v in op.operands:
                    if _tile(v) is not None and v.type.num_elements == n:  # type: ignore[attr-defined]
                        want(v, wanted)
        return wants

    def _carried_wants(self, loop: Operation, wants: dict[Value, Layout]) -> list[Optional[Layout]]:
        """Per carried value of a for/loop: the layout wished for its result (for) or its block
        argument, as far as the walk has seen; a loop carries what its users want."""
        first = 1 if loop.name == "cuda_tile.for" else 0
        args = loop.regions[0].block.arguments[first:]
        results = loop.results if loop.name == "cuda_tile.for" else ()
        out: list[Optional[Layout]] = []
        for i in range(len(loop.operand_group("initValues"))):
            wanted = wants.get(results[i]) if i < len(results) else None
            out.append(wanted if wanted is not None else wants.get(args[i]) if i < len(args) else None)
        return out

    # -- walk 2: layouts and conversions ------------------------------------------------
    def _layout(self, plan: _Plan, value: Value) -> Layout:
        return plan.layouts.get(value, self.blocked)

    def _set(self, plan: _Plan, value: Value, layout: Layout) -> None:
        if _tile(value) is not None and layout != self.blocked:
            plan.layouts[value] = layout

    def _reads_as(self, plan: _Plan, op: Operation, layouts: list[Optional[Layout]]) -> None:
        plan.reads[op] = layouts
        for v, layout in zip(op.operands, layouts):
            if layout is not None and _tile(v) is not None and self._layout(plan, v) != layout:
                plan.conversions.append((op, v, layout))

    def _assign(self, op: Operation, plan: _Plan) -> None:
        tiles = [v for v in op.operands if _tile(v) is not None]
        if self._reduces_rows(op):
            parent = self._layout(plan, op.operands[0])
            if isinstance(parent, MmaLayout) and parent.warps[2] == 1 and \
                    all(self._layout(plan, v) == parent for v in op.operands):
                plan.mma_rows.add(op)
                self._reads_as(plan, op, [None] * len(op.operands))
                for r in op.results:
                    self._set(plan, r, MmaRowLayout(parent))
                return
        cols = row_anchor(op)
        row = self._row_for(op, op.operands[0].type.shape) if cols is not None else None  # type: ignore[attr-defined]
        if row is not None and all(self._layout(plan, v) == row or v in self.splats for v in tiles):
            # Only when the rows arrive in warps: converting them first would cost the shared
            # memory round trip that the generic reduce takes anyway, and leave a row-warp result.
            plan.warp_ops.add(op)
            self._reads_as(plan, op, [row if _tile(v) is not None else None for v in op.operands])
            for r in op.results:
                self._set(plan, r, row if op.name == "cuda_tile.scan" else row.row_values())
            return
        if op.name in _PRODUCERS:
            for r in op.results:
                self._set(plan, r, plan.wants.get(r, self.blocked))
            return
        wide = self.restaged_scatters.get(op)
        if wide is not None and isinstance(self._layout(plan, op.operand("value")), MmaLayout):
            # fragments restaged in 16-byte runs by the lowering (epilogue.restage): the pointers and mask
            # are read in those runs' layout, the value as it is
            self._reads_as(plan, op, [None if v is op.operand("value") or _tile(v) is None else wide
                                      for v in op.operands])
            return
        if op.name in self._elementwise and len({v.type.num_elements for v in tiles}) <= 1:  # type: ignore[attr-defined]
            present = [self._layout(plan, v) for v in tiles if v not in self.splats]
            result = op.results[0] if op.results and _tile(op.results[0]) is not None else None
            chosen = self.blocked
            wanted = plan.wants.get(result) if result is not None else None
            if present:
                # fragments of tensor-core results stay where they are (whatever the wishes): others
                # convert to them, and loops then carry them in the fragments' layout
                fragments = [layout for layout in present if isinstance(layout, (MmaLayout, MmaRowLayout))]
                chosen = fragments[0] if fragments else wanted if wanted in present else present[0]
            elif wanted is not None:
                chosen = wanted  # splats only: rebuilt in the layout the result is wanted in
            self._reads_as(plan, op, [chosen if _tile(v) is not None else None for v in op.operands])
            if result is not None:
                self._set(plan, result, chosen)
            return
        if op.name == "cuda_tile.reshape":
            self._set(plan, op.results[0], self._layout(plan, op.operands[0]))
            return
        if op.name == "cuda_tile.broadcast":
            src, dst = op.operands[0].type, op.results[0].type
            assert isinstance(src, TileType) and isinstance(dst, TileType)
            mma = _mma_row_broadcast(dst, self._layout(plan, op.operands[0]), plan.wants.get(op.results[0])) or \
                _free_by_source(src, dst, self._layout(plan, op.operands[0]))
            if mma is not None:
                self._set(plan, op.results[0], mma)
                return
            free = row_broadcast(src, dst, self._layout(plan, op.operands[0]), self.blocked.vec)
            wanted = plan.wants.get(op.results[0])
            self._set(plan, op.results[0], free if free is not None and wanted in (None, free) else
                      wanted or self.blocked)
            return
        if op in self.mma_layouts:
            layout = self.mma_layouts[op]
            self._reads_as(plan, op, [layout if v is op.operand("acc") else None for v in op.operands])
            self._set(plan, op.results[0], layout)
            return
        if op.name in _LOOPS:
            self._assign_loop(op, plan)
            return
        if op.name == "cuda_tile.continue" and self._loop_of(op) is not None:
            carried = plan.carried[self._loop_of(op)]  # type: ignore[index]
            self._reads_as(plan, op, [(carried[i] if i < len(carried) else None) or self.blocked
                                      if _tile(v) is not None else None for i, v in enumerate(op.operands)])
            return
        if op.name == "cuda_tile.extract" and (window := extracted_columns(op, self._layout(plan, op.operand("source")))):
            self._set(plan, op.results[0], window)   # an mma fragment's columns, kept in registers
            return
        if op.name in _ANY_OPERAND:
            return  # results blocked; operands read as they are
        self._reads_as(plan, op, [self.blocked if _tile(v) is not None else None for v in op.operands])

    def _row_for(self, op: Operation, shape: tuple[int, ...]) -> RowWarpLayout:
        """The row layout a row reduce or scan anchor reads: lanes' runs interleaved for coalesced
        accesses, except where the combining order matters (scans, reduces that may not commute)."""
        scan = op.name == "cuda_tile.scan"
        return row_layout(self.threads, shape, scan, self.blocked.vec, ordered=not scan and not _commutative(op))

    def _loop_of(self, op: Operation) -> Optional[Operation]:
        """The for/loop a `continue` belongs to."""
        return self._continue_targets.get(op)

    def _assign_loop(self, op: Operation, plan: _Plan) -> None:
        carried = plan.carried[op]
        inits = op.operand_group("initValues")
        body = op.regions[0].block
        first = 1 if op.name == "cuda_tile.for" else 0
        layouts = [layout or self.blocked for layout in carried]
        first_init = len(op.operands) - len(inits)
        self._reads_as(plan, op, [None if _tile(v) is None else
                                  layouts[i - first_init] if i >= first_init else self.blocked
                                  for i, v in enumerate(op.operands)])
        for arg, layout in zip(body.arguments[first:], layouts):
            self._set(plan, arg, layout)
        if op.name == "cuda_tile.for":
            for result, layout in zip(op.results, layouts):
                self._set(plan, result, layout)
