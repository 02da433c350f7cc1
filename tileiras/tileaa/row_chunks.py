"""Pass `chunk-rows`: an element-wise computation over a long row runs in column chunks.

Every tile value lives in registers, spread over the CTA's threads. A kernel that loads a row of
16k columns, computes element-wise and stores (TileGym's SwiGLU and SiLU-and-mul backward: three
f32 rows of 16384) needs 3 x 64 KB of registers at once, more than the 256 KB register file
allows beside its temporaries, with any number of warps (a thread's share shrinks as the cap of
65536 / threads does): ptxas spills. Nothing ties one column to another, so NVIDIA's compiler
streams such rows: it loads a few columns of each operand, computes and stores them, then the next.

The pass does the same at the tile level, once the warps are chosen on the whole rows
(tileas/warps.py: a thread handles as many elements as before, so its code is no longer): in a
block whose long tiles (more than `LONG_ELEMENTS` a thread) all have one shape and are only
loaded, combined element-wise and stored, it repeats those ops once per chunk of `CHUNK_ELEMENTS`
a thread along the innermost dimension, chunk after chunk, so that one chunk of each value is
live at a time. Loads and stores through partition views read chunk-sized tiles of a twin view at
tile index `index * chunks + c`; pointer-tile gathers and scatters take the chunk's pointers;
`iota` is offset by the chunk's first column. Anything else touching a long tile (a reduction, a
reshape, a broadcast of a whole row, a loop carrying it, a memory op whose token orders others)
leaves the block as it is, as do side effects the reordering would move past. Facts are inferred
again afterwards for the ops it makes (lowering/pipeline.py).
"""

from __future__ import annotations

from typing import Optional

from ..dialects.elementwise import ELEMENTWISE
from ..ir.attributes import DenseElements
from ..ir.core import Block, Operation, Value
from ..ir.types import PartitionViewType, TileType
from .view_order import _erase

# A tile is long beyond 32 elements a thread (a few such f32 rows fill a thread's 255 registers);
# a chunk is 16 a thread: two 16-byte accesses of a 16-bit operand in flight, as NVIDIA's streams.
LONG_ELEMENTS = 32
CHUNK_ELEMENTS = 16

_VIEW = "cuda_tile.make_partition_view"
_VIEW_MEMORY = ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko")
_POINTER_MEMORY = ("cuda_tile.load_ptr_tko", "cuda_tile.store_ptr_tko")
_SOURCES = ("cuda_tile.constant", "cuda_tile.iota", "cuda_tile.broadcast")
# ops that are neither pure nor chunked: the reordering may not move chunked memory ops past them
_EFFECTS = ("load", "store", "atomic", "print", "assert", "barrier", "alloca")


def chunk_rows(entry: Operation, threads: int) -> int:
    """Chunk every eligible block of `entry` (run on `threads` threads); the number chunked."""
    blocks = [block for op in entry.walk() for region in op.regions for block in region.blocks]
    return sum(_chunk_block(block, LONG_ELEMENTS * threads, CHUNK_ELEMENTS * threads) for block in blocks)


def _tile(value: Value) -> Optional[TileType]:
    return value.type if isinstance(value.type, TileType) else None


def _chunk_block(block: Block, least: int, size: int) -> bool:
    """Chunk `block`'s rows of more than `least` elements into chunks of at most `size`."""
    shapes = {t.shape for op in block.operations for v in (*op.operands, *op.results)
              if (t := _tile(v)) is not None and t.num_elements > least}
    if len(shapes) != 1:
        return False
    shape = shapes.pop()
    ops = [op for op in block.operations if any(_row(v, shape) for v in (*op.operands, *op.results))]
    chunks = _chunks(shape, size)
    if chunks is None or not all(_chunkable(op, shape) for op in ops):
        return False
    members = set(ops)
    if any(user not in members for op in ops for r in op.results if _row(r, shape) for user in r.uses):
        return False
    if any(getattr(v, "owner", None) not in members for op in ops for v in op.operands if _row(v, shape)):
        return False   # a row as a block argument (a loop-carried row) or from another block
    first, last = block.operations.index(ops[0]), block.operations.index(ops[-1])
    if any(op not in members and (op.regions or any(word in op.short_name for word in _EFFECTS))
           for op in block.operations[first:last]):
        return False
    _rewrite(ops, shape, chunks)
    return True


def _row(value: Value, shape: tuple[int, ...]) -> bool:
    t = _tile(value)
    return t is not None and t.shape == shape


def _chunks(shape: tuple[int, ...], size: int) -> Optional[int]:
    """How many chunks of at most `size` elements the innermost dimension splits into (a power of
    two dividing it)."""
    total, chunks = 1, 1
    for n in shape:
        total *= n
    while total // chunks > size:
        chunks *= 2
    return chunks if shape and shape[-1] % chunks == 0 else None


def _chunkable(op: Operation, shape: tuple[int, ...]) -> bool:
    if op.name in _SOURCES:
        if op.name == "cuda_tile.constant":
            return bool(op.attributes["value"].is_splat)
        if op.name == "cuda_tile.iota":
            return len(shape) == 1
        src = op.operands[0].type   # a broadcast of values constant along the rows
        return isinstance(src, TileType) and len(src.shape) == len(shape) and src.shape[-1] == 1
    if op.name in _VIEW_MEMORY or op.name in _POINTER_MEMORY:
        if any(r.uses for r in op.results if not isinstance(r.type, TileType)):   # a token ordering others
            return False
        if op.name in _VIEW_MEMORY:
            view = op.operand("view")
            vtype = view.type
            return isinstance(vtype, PartitionViewType) and tuple(vtype.dim_map) == tuple(range(len(shape))) \
                and getattr(view, "owner", None) is not None and view.owner.name == _VIEW  # type: ignore[attr-defined]
        return True
    return op.name in ELEMENTWISE and all(
        _row(v, shape) for v in (*op.operands, *op.results) if isinstance(v.type, TileType))


def _rewrite(ops: list[Operation], shape: tuple[int, ...], chunks: int) -> None:
    """Chunk after chunk, a copy of `ops` on chunk-sized tiles, before the last of them; then drop them."""
    anchor = ops[-1]
    part = (*shape[:-1], shape[-1] // chunks)
    views: dict[Value, Value] = {}
    scaled: dict[Value, Value] = {}   # a tile index times `chunks`
    for c in range(chunks):
        copies: dict[Value, Value] = {}
        for op in ops:
            operands = [copies.get(v, v) for v in op.operands]
            if op.name in _VIEW_MEMORY:
                operands = _chunk_index(op, operands, part, chunks, c, views, scaled, anchor)
            types = [TileType(part, r.type.element) if _row(r, shape) else r.type  # type: ignore[union-attr]
                     for r in op.results]
            attributes = dict(op.attributes)
            if op.name == "cuda_tile.constant":
                value = attributes["value"]
                attributes["value"] = DenseElements(TileType(part, value.type.element), value.raw)
            copy = anchor.insert_before(Operation(op.name, operands, types, attributes, location=op.location,
                                                  segment_sizes=op.segment_sizes))
            result = copy.results[0] if copy.results else None
            if op.name == "cuda_tile.iota" and c and result is not None:
                result = _add_constant(anchor, result, c * part[-1])
            for old, new in zip(op.results, copy.results):
                copies[old] = new
            if result is not None:
                copies[op.results[0]] = result
    for op in reversed(ops):
        for r in op.results:
            assert all(user in ops for user in r.uses)   # tokens are unused, rows read only by `ops`
        _erase(op)
    for view in views:
        if not view.uses:
            _erase(view.owner)  # type: ignore[attr-defined]


def twin_view(view: Value, part: tuple) -> Value:
    """A partition view of the same tensor view as `view`, of `part`-shaped tiles, made beside it (a chunk's
    loads and stores index it at `index * chunks + c`)."""
    vtype = view.type
    assert isinstance(vtype, PartitionViewType)
    owner = view.owner  # type: ignore[attr-defined]
    twin = Operation(_VIEW, list(owner.operands), [PartitionViewType(part, vtype.tensor_view, vtype.dim_map,
                                                                      vtype.padding_value)],
                     owner.attributes, location=owner.location, segment_sizes=owner.segment_sizes)
    owner.insert_before(twin)
    return twin.results[0]


def _chunk_index(op: Operation, operands: list[Value], part: tuple[int, ...], chunks: int, c: int,
                 views: dict[Value, Value], scaled: dict[Value, Value], anchor: Operation) -> list[Value]:
    """The operands of a view load/store of chunk `c`: the twin view of chunk-sized tiles, and the
    innermost tile index `index * chunks + c`."""
    view = op.operand("view")
    if view not in views:
        views[view] = twin_view(view, part)
    position = operands.index(view)
    operands[position] = views[view]
    index = list(op.operand_group("index"))
    start = next(i for i in range(len(op.operands)) if op.operands[i:i + len(index)] == index)
    at = start + len(index) - 1   # the innermost tile index
    if operands[at] not in scaled:
        scaled[operands[at]] = _mul_constant(anchor, operands[at], chunks)
    operands[at] = _add_constant(anchor, scaled[operands[at]], c) if c else scaled[operands[at]]
    return operands


def _constant(anchor: Operation, like: Value, value: int) -> Value:
    t = like.type
    assert isinstance(t, TileType)
    raw = (value % (1 << t.element.bitwidth)).to_bytes(max(1, t.element.bitwidth // 8), "little")  # type: ignore[attr-defined]
    return anchor.insert_before(Operation("cuda_tile.constant", [], [t], {"value": DenseElements(t, raw)},
                                          location=anchor.location)).results[0]


def _add_constant(anchor: Operation, value: Value, amount: int) -> Value:
    return anchor.insert_before(Operation("cuda_tile.addi", [value, _constant(anchor, value, amount)], [value.type],
                                          {"overflow": "none"}, location=anchor.location)).results[0]


def _mul_constant(anchor: Operation, value: Value, factor: int) -> Value:
    return anchor.insert_before(Operation("cuda_tile.muli", [value, _constant(anchor, value, factor)], [value.type],
                                          {"overflow": "none"}, location=anchor.location)).results[0]

