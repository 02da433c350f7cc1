"""Pass `loop-tiles`: a tile too big for the CTA's registers is computed in a loop over chunks.

Every tile value lives in registers, one LLVM value per element a thread holds, so a kernel's code
grows with its tiles: a 2^20-element vector add is 8192 loads, adds and stores a thread, which LLVM
and ptxas need minutes to compile. Where nothing ties one element of a tile to another (loads and
stores through partition views, element-wise ops, splat constants, broadcasts of one value, token
joins), the elements can be computed chunk after chunk in any order. This pass rewrites such a
group of ops into one `cuda_tile.for` over chunks of `CHUNK_ELEMENTS` a thread: each iteration
loads a chunk-sized tile of a twin partition view (tile index `index * k + c` along each axis split
in k), computes and stores it. The code is then that of one chunk, whatever the tile's size, and
ragged edges stay exact: a chunk past the array's bound is padded or masked as the whole tile was.

A group is every op of one block that touches a tile of one shape, plus the token joins of their
tokens; it is looped when every member has a rule in `RULES`, nothing outside reads what it
defines, its tiles are not carried in or out of the block, and no op between its first and last
member has effects the reordering would move across. Tiles of more than `LOOP_ELEMENTS` a thread
are looped (smaller ones are left to `row_chunks.py`, which unrolls a few chunks). `streamable`
tells the compile limits (dialects/limits.py) which tile values this pass takes out of registers.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.attributes import DenseElements
from ..ir.core import Block, Operation, Region, Value
from ..ir.types import PartitionViewType, ScalarType, TileType, TokenType
from .view_order import _erase

# Beyond 128 elements a thread (2^15 on 256 threads) a tile is looped; a chunk is 16 a thread: the
# size `row_chunks.py` unrolls, four 16-byte accesses of f32 in flight a thread.
LOOP_ELEMENTS = 128
CHUNK_ELEMENTS = 16

_VIEW = "cuda_tile.make_partition_view"
_I32 = TileType((), ScalarType("i32"))
# ops that are neither pure nor members: a group may not be reordered across them
_EFFECTS = ("load", "store", "atomic", "print", "assert", "barrier", "alloca")


def _tile(value: Value) -> Optional[TileType]:
    return value.type if isinstance(value.type, TileType) else None


def _of(value: Value, shape: tuple[int, ...]) -> bool:
    t = _tile(value)
    return t is not None and t.shape == shape


# -- which ops a chunk can compute (op name -> rule) ----------------------------------------------

def _elementwise(op: Operation, shape: tuple[int, ...]) -> bool:
    from ..lowering.assign_layouts import elementwise_ops

    return op.name in elementwise_ops() and all(
        _of(v, shape) for v in (*op.operands, *op.results) if isinstance(v.type, TileType))


def _splat(op: Operation, shape: tuple[int, ...]) -> bool:
    return bool(op.attributes["value"].is_splat)


def _broadcast_one(op: Operation, shape: tuple[int, ...]) -> bool:
    src = _tile(op.operands[0])
    return src is not None and src.num_elements == 1


def _view_access(op: Operation, shape: tuple[int, ...]) -> bool:
    view = op.operand("view")
    vtype = view.type if view is not None else None
    index = op.operand_group("index")
    return isinstance(vtype, PartitionViewType) and tuple(vtype.dim_map) == tuple(range(len(shape))) \
        and getattr(view, "owner", None) is not None and view.owner.name == _VIEW \
        and len(index) == len(shape) and all(_tile(i) == _I32 for i in index)  # type: ignore[union-attr]


def _tokens(op: Operation, shape: tuple[int, ...]) -> bool:
    return True


# op name -> may a chunk compute it (ops without a rule: element-wise ones on tiles of the shape)
Rule = Callable[[Operation, tuple[int, ...]], bool]
RULES: dict[str, Rule] = {
    "cuda_tile.constant": _splat,
    "cuda_tile.broadcast": _broadcast_one,
    "cuda_tile.load_view_tko": _view_access,
    "cuda_tile.store_view_tko": _view_access,
    "cuda_tile.join_tokens": _tokens,
}


def _chunkable(op: Operation, shape: tuple[int, ...]) -> bool:
    rule = RULES.get(op.name)
    return rule(op, shape) if rule is not None else _elementwise(op, shape)


# -- groups ------------------------------------------------------------------------------------

def _members(block: Block, shape: tuple[int, ...]) -> list[Operation]:
    """The ops of `block` touching a tile of `shape`, and the token joins of their tokens, in order."""
    members = {op for op in block.operations if any(_of(v, shape) for v in (*op.operands, *op.results))}
    tokens = [r for op in members for r in op.results if isinstance(r.type, TokenType)]
    while tokens:
        for user in tokens.pop().uses:
            if user.name == "cuda_tile.join_tokens" and user.parent is block and user not in members:
                members.add(user)
                tokens.append(user.results[0])
    return [op for op in block.operations if op in members]


def _group(block: Block, shape: tuple[int, ...]) -> Optional[list[Operation]]:
    """The ops of `block` one loop over chunks of `shape` computes, or None where they cannot be."""
    ops = _members(block, shape)
    members = set(ops)
    if not ops or not all(_chunkable(op, shape) for op in ops):
        return None
    if any(user not in members for op in ops for r in op.results for user in r.uses):
        return None   # a tile or token read after the loop (or in another block)
    if any(getattr(v, "owner", None) not in members for op in ops for v in op.operands if _of(v, shape)):
        return None   # a tile carried into the block (a loop's argument) or defined elsewhere
    first, last = block.operations.index(ops[0]), block.operations.index(ops[-1])
    if any(op not in members and (op.regions or any(word in op.short_name for word in _EFFECTS))
           for op in block.operations[first:last]):
        return None
    return ops


def _shapes(block: Block, least: int) -> list[tuple[int, ...]]:
    """The shapes of the tiles of more than `least` elements that `block`'s ops define, in order."""
    seen: dict[tuple[int, ...], None] = {}
    for op in block.operations:
        for r in op.results:
            t = _tile(r)
            if t is not None and t.shape and t.num_elements > least:
                seen.setdefault(t.shape)
    return list(seen)


def _blocks(entry: Operation) -> list[Block]:
    return [block for op in entry.walk() for region in op.regions for block in region.blocks]


def streamable(entry: Operation) -> set[Value]:
    """The tile values of `entry` this pass computes in chunks when they are big (any size here)."""
    out: set[Value] = set()
    for block in _blocks(entry):
        for shape in _shapes(block, 1):
            ops = _group(block, shape)
            if ops is not None:
                out |= {v for op in ops for v in (*op.operands, *op.results) if _of(v, shape)}
    return out


def loop_tiles(entry: Operation, threads: int) -> int:
    """Loop every group of `entry` (run on `threads` threads) over tiles of more than `LOOP_ELEMENTS`
    a thread; the number of loops made."""
    made = 0
    for block in _blocks(entry):
        for shape in _shapes(block, LOOP_ELEMENTS * threads):
            ops = _group(block, shape)
            if ops is not None:
                _rewrite(ops, shape, chunk_shape(shape, CHUNK_ELEMENTS * threads))
                made += 1
    return made


def chunk_shape(shape: tuple[int, ...], size: int) -> tuple[int, ...]:
    """The chunk of `shape` of `size` elements (powers of two), filled from the innermost axis out:
    a chunk's rows stay whole, so its accesses stay as contiguous as the tile's."""
    part, left = [], size
    for n in reversed(shape):
        take = max(1, min(n, left))
        part.append(take)
        left //= take
    return tuple(reversed(part))


# -- the rewrite -------------------------------------------------------------------------------

class _Body:
    """Appends ops to the loop's body."""

    def __init__(self, block: Block, location: object) -> None:
        self.block, self.location = block, location
        self.indices: dict[tuple[Value, int], Value] = {}   # (tile index, axis) -> the chunk's index

    def op(self, name: str, operands: list[Value], attrs: Optional[dict] = None) -> Value:
        return self.block.append(Operation(name, operands, [_I32], attrs or {}, location=self.location)).results[0]

    def const(self, value: int) -> Value:
        raw = value.to_bytes(4, "little", signed=True)
        return self.block.append(Operation("cuda_tile.constant", [], [_I32], {"value": DenseElements(_I32, raw)},
                                           location=self.location)).results[0]


def _outside_const(anchor: Operation, value: int) -> Value:
    raw = value.to_bytes(4, "little", signed=True)
    return anchor.insert_before(Operation("cuda_tile.constant", [], [_I32], {"value": DenseElements(_I32, raw)},
                                          location=anchor.location)).results[0]


def _rewrite(ops: list[Operation], shape: tuple[int, ...], part: tuple[int, ...]) -> None:
    """One `for` over the chunks of `shape`, before the last of `ops`, computing them chunk by chunk."""
    anchor = ops[-1]
    splits = [n // p for n, p in zip(shape, part)]
    count = 1
    for k in splits:
        count *= k
    bounds = [_outside_const(anchor, v) for v in (0, count, 1)]
    body = Block([_I32])
    anchor.insert_before(Operation("cuda_tile.for", bounds, [], {}, regions=[Region([body])],
                                          location=anchor.location))
    emit = _Body(body, anchor.location)
    coords = _chunk_coords(emit, body.arguments[0], splits)
    copies: dict[Value, Value] = {}
    views: dict[Value, Value] = {}
    for op in ops:
        operands = [copies.get(v, v) for v in op.operands]
        if op.name in ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko"):
            operands = _chunk_access(op, operands, part, splits, coords, views, emit)
        types = [TileType(part, r.type.element) if _of(r, shape) else r.type for r in op.results]  # type: ignore[union-attr]
        attributes = dict(op.attributes)
        if op.name == "cuda_tile.constant":
            value = attributes["value"]
            attributes["value"] = DenseElements(TileType(part, value.type.element), value.raw)
        copy = body.append(Operation(op.name, operands, types, attributes, location=op.location,
                                     segment_sizes=op.segment_sizes))
        for old, new in zip(op.results, copy.results):
            copies[old] = new
    body.append(Operation("cuda_tile.continue", [], [], {}, location=anchor.location))
    for op in reversed(ops):
        _erase(op)
    for view in views:
        if not view.uses:
            _erase(view.owner)  # type: ignore[attr-defined]


def _chunk_coords(emit: _Body, iv: Value, splits: list[int]) -> list[Optional[Value]]:
    """Per axis, the chunk's index along it (None where the axis is not split): the induction
    variable in mixed radix `splits`, the last axis fastest."""
    coords: list[Optional[Value]] = []
    stride = 1
    for k in reversed(splits):
        if k == 1:
            coords.append(None)
            continue
        q = iv if stride == 1 else emit.op("cuda_tile.divi", [iv, emit.const(stride)],
                                           {"signedness": "unsigned", "rounding": "zero"})
        coords.append(q if stride * k >= _total(splits) else
                      emit.op("cuda_tile.remi", [q, emit.const(k)], {"signedness": "unsigned"}))
        stride *= k
    return list(reversed(coords))


def _total(splits: list[int]) -> int:
    n = 1
    for k in splits:
        n *= k
    return n


def _chunk_access(op: Operation, operands: list[Value], part: tuple[int, ...], splits: list[int],
                  coords: list[Optional[Value]], views: dict[Value, Value], emit: _Body) -> list[Value]:
    """The operands of a view load/store of one chunk: the twin view of chunk-sized tiles (made
    beside the view), and per split axis the tile index `index * k + c`."""
    view = op.operand("view")
    assert view is not None
    if view not in views:
        vtype = view.type
        assert isinstance(vtype, PartitionViewType)
        owner = view.owner  # type: ignore[attr-defined]
        twin = Operation(_VIEW, list(owner.operands), [PartitionViewType(part, vtype.tensor_view, vtype.dim_map,
                                                                          vtype.padding_value)],
                         owner.attributes, location=owner.location, segment_sizes=owner.segment_sizes)
        owner.insert_before(twin)
        views[view] = twin.results[0]
    operands[operands.index(view)] = views[view]
    index = op.operand_group("index")
    start = next(i for i in range(len(op.operands)) if op.operands[i:i + len(index)] == index)
    for axis, (k, c) in enumerate(zip(splits, coords)):
        if c is None:
            continue
        key = (operands[start + axis], axis)
        if key not in emit.indices:   # accesses at one tile index share its arithmetic
            scaled = emit.op("cuda_tile.muli", [key[0], emit.const(k)], {"overflow": "none"})
            emit.indices[key] = emit.op("cuda_tile.addi", [scaled, c], {"overflow": "none"})
        operands[start + axis] = emit.indices[key]
    return operands
