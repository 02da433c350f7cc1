"""Layout assignment: choose a layout (layout.py) for every tile value of a kernel.

Runs over an entry before code emission, in two walks:

1. Backward, from the anchors: a reduce or scan along the innermost axis whose
   row fits a warp wants its operands in `RowWarpLayout(cols=row length)`.
   The wish flows back through elementwise ops, reshapes and row broadcasts
   to the producers that can make any layout (loads, iota, constants).
2. Forward, in program order, each op gets its result layouts and the layout
   it reads each operand in:
   * producers (load_view, iota, constant): what their users want, else blocked;
   * elementwise ops (and pointer offset/load/store): their operands' common
     layout; operands in another layout are converted;
   * reshape: its operand's layout (row-major order is preserved);
   * a broadcast along the row axis of a row-warp tile stays in registers;
   * row reduce/scan anchors whose operands arrive in row-warp: results row-warp
     (others take the generic shared-memory path below);
   * ops that already move data through shared memory (permute, extract,
     cat, insert, pack, other reduces and scans, stores to views) read any
     layout and produce blocked tiles;
   * every other op reads and produces blocked tiles.

A conversion is recorded where a value's layout differs from the layout its
user reads; `KernelLowering` performs it (through shared memory) before it
lowers the user. Two refinements keep conversions rare:
* a splat (a broadcast scalar, a uniform constant, elementwise ops of splats)
  is the same value everywhere, so it is rebuilt in any layout for free and
  does not vote on its users' layout;
* a conversion of a value whose producer could have made the wanted layout
  directly becomes a wish, and the walks run again (kept while they remove
  conversions).
"""

from __future__ import annotations

from typing import Iterator, Optional

from ..ir.core import Operation, Value
from ..ir.types import TileType
from .layout import BlockedLayout, Layout, RowWarpLayout

_REDUCE_LIKE = ("cuda_tile.reduce", "cuda_tile.scan")
_PRODUCERS = ("cuda_tile.constant", "cuda_tile.iota", "cuda_tile.load_view_tko")
# read operands of any layout (through shared memory or per-element coordinates); results blocked
_ANY_OPERAND = ("cuda_tile.permute", "cuda_tile.extract", "cuda_tile.cat", "cuda_tile.insert", "cuda_tile.pack",
                "cuda_tile.unpack", "cuda_tile.store_view_tko", "cuda_tile.broadcast", "cuda_tile.reshape",
                "cuda_tile.reduce", "cuda_tile.scan")
_POINTER_ELEMENTWISE = ("cuda_tile.offset", "cuda_tile.load_ptr_tko", "cuda_tile.store_ptr_tko")


def _elementwise_ops() -> frozenset[str]:
    from . import ops_arith, ops_math

    return frozenset(ops_arith.LOWERINGS) | frozenset(ops_math.LOWERINGS) | frozenset(_POINTER_ELEMENTWISE)


def _walk(block_ops: list[Operation]) -> Iterator[Operation]:
    for op in block_ops:
        yield op
        for region in op.regions:
            for block in region.blocks:
                yield from _walk(block.operations)


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


def row_broadcast(src: TileType, dst: TileType, src_layout: Layout) -> Optional[RowWarpLayout]:
    """The row-warp layout a broadcast result has for free (no data movement), if any.

    Either each row's one element goes to the whole row (src (..., 1), same
    rows), or one row goes to every row (src (1.., cols)).
    """
    cols = dst.shape[-1]
    if not isinstance(src_layout, RowWarpLayout) or len(src.shape) != len(dst.shape) or not RowWarpLayout.fits(cols):
        return None
    if src_layout.cols == 1 and src.shape[-1] == 1 and src.shape[:-1] == dst.shape[:-1]:
        return RowWarpLayout(src_layout.threads, cols)
    if src_layout.cols == cols == src.shape[-1] and src.num_elements == cols:
        return src_layout
    return None


def _uniform_constant(op: Operation) -> bool:
    value = op.attributes["value"]
    raw, elem = value.raw, op.results[0].type.element  # type: ignore[attr-defined]
    size = max(1, getattr(elem, "bitwidth", 8) // 8)
    return len({raw[i:i + size] for i in range(0, len(raw), size)}) <= 1


class LayoutAssignment:
    """The layouts of one kernel: per tile value, and per op the layout it reads each operand in."""

    def __init__(self, entry: Operation, threads: int) -> None:
        self.blocked = BlockedLayout(threads)
        self.threads = threads
        self._elementwise = _elementwise_ops()
        ops = list(_walk(entry.regions[0].block.operations))
        self.splats = self._find_splats(ops)
        wants = self._wants(ops, {})
        self._run(ops, wants)
        for _ in range(3):
            before = (self._layouts, self._reads, self.conversions, self.warp_ops, self.cost)
            extra = {v: layout for _, v, layout in self.conversions if v not in wants and v not in self.splats}
            if not extra:
                break
            wants = self._wants(ops, {**wants, **extra})
            self._run(ops, wants)
            if self.cost >= before[-1]:
                self._layouts, self._reads, self.conversions, self.warp_ops, self.cost = before
                break

    def _run(self, ops: list[Operation], wants: dict[Value, Layout]) -> None:
        self._layouts: dict[Value, Layout] = {}
        self._reads: dict[Operation, list[Optional[Layout]]] = {}
        self.conversions: list[tuple[Operation, Value, Layout]] = []
        self.warp_ops: set[Operation] = set()
        for op in ops:
            self._assign(op, wants)
        self.cost = sum(1 for _, v, _ in self.conversions if v not in self.splats)

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
                    or op.name in self._elementwise and op.name not in _POINTER_ELEMENTWISE and tiles
                    and all(v in splats for v in tiles)):
                splats.add(op.results[0])
        return splats

    # -- queries ----------------------------------------------------------------------
    def layout(self, value: Value) -> Layout:
        return self._layouts.get(value, self.blocked)

    def operand_layouts(self, op: Operation) -> Optional[list[Optional[Layout]]]:
        return self._reads.get(op)

    def in_warps(self, op: Operation) -> bool:
        """True for a reduce/scan whose rows were put in warps (lowered with shuffles)."""
        return op in self.warp_ops

    def is_splat(self, value: Value) -> bool:
        return value in self.splats

    # -- walk 1: what the anchors want ------------------------------------------------
    def _wants(self, ops: list[Operation], seeds: dict[Value, Layout]) -> dict[Value, Layout]:
        wants: dict[Value, Layout] = dict(seeds)

        def want(value: Value, layout: Layout) -> None:
            if _tile(value) is not None and value not in wants:
                wants[value] = layout

        for op in reversed(ops):
            cols = row_anchor(op)
            if cols is not None:
                for v in op.operands:
                    want(v, RowWarpLayout(self.threads, cols))
                continue
            wanted = wants.get(op.results[0]) if op.results else None
            if wanted is None:
                continue
            if op.name in self._elementwise or op.name == "cuda_tile.reshape":
                n = op.results[0].type.num_elements  # type: ignore[attr-defined]
                for v in op.operands:
                    if _tile(v) is not None and v.type.num_elements == n:  # type: ignore[attr-defined]
                        want(v, wanted)
            elif op.name == "cuda_tile.broadcast" and isinstance(wanted, RowWarpLayout):
                src, dst = op.operands[0].type, op.results[0].type
                if isinstance(src, TileType) and isinstance(dst, TileType):
                    for candidate in (RowWarpLayout(self.threads, 1), wanted):
                        if row_broadcast(src, dst, candidate) == wanted:
                            want(op.operands[0], candidate)
                            break
        return wants

    # -- walk 2: layouts and conversions ------------------------------------------------
    def _set(self, value: Value, layout: Layout) -> None:
        if _tile(value) is not None and layout != self.blocked:
            self._layouts[value] = layout

    def _reads_as(self, op: Operation, layouts: list[Optional[Layout]]) -> None:
        self._reads[op] = layouts
        for v, layout in zip(op.operands, layouts):
            if layout is not None and _tile(v) is not None and self.layout(v) != layout:
                self.conversions.append((op, v, layout))

    def _assign(self, op: Operation, wants: dict[Value, Layout]) -> None:
        tiles = [v for v in op.operands if _tile(v) is not None]
        cols = row_anchor(op)
        row = RowWarpLayout(self.threads, cols) if cols is not None else None
        if row is not None and all(self.layout(v) == row or v in self.splats for v in tiles):
            # Only when the rows arrive in warps: converting them first would cost the shared
            # memory round trip that the generic reduce takes anyway, and leave a row-warp result.
            self.warp_ops.add(op)
            self._reads_as(op, [row if _tile(v) is not None else None for v in op.operands])
            for r in op.results:
                self._set(r, row if op.name == "cuda_tile.scan" else RowWarpLayout(self.threads, 1))
            return
        if op.name in _PRODUCERS:
            for r in op.results:
                self._set(r, wants.get(r, self.blocked))
            return
        if op.name in self._elementwise and len({v.type.num_elements for v in tiles}) <= 1:  # type: ignore[attr-defined]
            present = [self.layout(v) for v in tiles if v not in self.splats]
            result = op.results[0] if op.results and _tile(op.results[0]) is not None else None
            chosen = self.blocked
            wanted = wants.get(result) if result is not None else None
            if present:
                chosen = wanted if wanted in present else present[0]
            elif wanted is not None:
                chosen = wanted  # splats only: rebuilt in the layout the result is wanted in
            self._reads_as(op, [chosen if _tile(v) is not None else None for v in op.operands])
            if result is not None:
                self._set(result, chosen)
            return
        if op.name == "cuda_tile.reshape":
            self._set(op.results[0], self.layout(op.operands[0]))
            return
        if op.name == "cuda_tile.broadcast":
            src, dst = op.operands[0].type, op.results[0].type
            assert isinstance(src, TileType) and isinstance(dst, TileType)
            free = row_broadcast(src, dst, self.layout(op.operands[0]))
            wanted = wants.get(op.results[0])
            self._set(op.results[0], free if free is not None and wanted in (None, free) else
                      wanted or self.blocked)
            return
        if op.name in _ANY_OPERAND:
            return  # results blocked; operands read as they are
        self._reads_as(op, [self.blocked if _tile(v) is not None else None for v in op.operands])

    # -- for --print-ir-after-all ----------------------------------------------------------
    def describe(self, name_of) -> list[str]:
        """Comment lines: each non-blocked tile value's layout, then each conversion."""
        lines = [f"//   {name_of(v)} : {v.type} {layout.describe()}" for v, layout in self._layouts.items()]
        lines += [f"//   {'splat' if v in self.splats else 'convert'} {name_of(v)} to {layout.describe()} for {op.name}"
                  for op, v, layout in self.conversions]
        lines.insert(0, f"//   everything else: {self.blocked.describe()}")
        return lines
