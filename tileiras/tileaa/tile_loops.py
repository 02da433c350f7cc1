"""Pass `loop-tiles`: a tile too big for the CTA's registers is computed in a loop over chunks.

Every tile value lives in registers, one LLVM value per element a thread holds, so a kernel's code
grows with its tiles: a 2^20-element vector add is 8192 loads, adds and stores a thread, which LLVM
and ptxas need minutes to compile. Where nothing ties one element of a tile to another (loads and
stores through partition views, element-wise ops, splat constants, broadcasts along unit axes,
reshapes of unit axes, token joins), the elements can be computed chunk after chunk in any order. This pass rewrites such a
group of ops into one `cuda_tile.for` over chunks of `CHUNK_ELEMENTS` a thread: each iteration
loads a chunk-sized tile of a twin partition view (tile index `index * k + c` along each axis split
in k), computes and stores it. The code is then that of one chunk, whatever the tile's size, and
ragged edges stay exact: a chunk past the array's bound is padded or masked as the whole tile was.

A group is the ops of one block connected through tiles of one size (the iteration space: the shape
of the tile that starts it; a permute reorders a tile's axes in it), plus the joins of their tokens;
it is looped when every member has a rule in `RULES`, nothing outside reads what it defines, its
tiles are not carried into the block, and no op between its first and last member has effects the
reordering would move across. A chunk fills the space from its innermost axis out (a square one
where a permute needs both orders' rows long: a transpose's loads and stores both stay contiguous).
Tiles of more than `LOOP_ELEMENTS` a thread are looped (smaller ones are left to `row_chunks.py`,
which unrolls a few chunks); so are those of more than `ONE_PASS_ELEMENTS` whose group exchanges
elements between threads by a reduction or a scan (row_chunks.py takes none) and takes one
loop that reads each of its inputs once, no loop of the kernel's among its members (`_one_pass`): unrolled, such a group compiles in up to twice
NVIDIA's time from 64 elements a thread (two reductions of a 64 x 64 tile on one warp), looped, it
reads no more memory than unrolled. A reduction whose result fits a chunk is carried by the loop (unless
the chunk would then hold short runs of the rows it reduces; where the group takes no form so, fewer
are: `carried.py`); a bigger one (reduced on along another axis, broadcast back) is computed chunk
by chunk, its reduced axis whole in the chunk; where that axis is longer than a chunk too, the
phases run in an outer loop over blocks of the kept axes (`nested_loops.py`; cats, permutes, merged
axes and member loops that do not store included; a window of blocks of a cat along a kept axis has
an outer loop of its own). A tile reduced along two axes, each too long for either form, takes a
pass per axis (`axis_passes.py`), each looped as a group of its own; where a reduction reads one
along the other axis, the nested form runs along it, and the other is computed in each chunk that
reads it, in a loop of its own (`cross_reductions.py`). The forms are tried in the order of `FORMS`.
A reverse scan's loop visits its chunks last first. A reshape that splits an axis makes the space
the finer tile's: the coarse tile's axis merges space axes (`Group.merged`). A `cat` makes the space
its result's: one loop per window of its operands (of all the group's cats, nested ones included; a
tile two cats join is computed in each window that reads it) runs over the chunks of the joined axis
that window covers, computing the operand's chunk where the cat's was, a reduction or scan carried
from window to window (`Group.offsets`, `cat_windows.py`).
`streamable` tells the compile limits (tileaa/limits.py) which tile
values this pass takes out of registers.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..dialects.elementwise import ELEMENTWISE
from ..ir.attributes import DenseElements
from ..ir.core import Block, Operation, Region, Value
from ..ir.types import PartitionViewType, ScalarType, TileType, TokenType, storage_bytes
from . import axis_passes, cat_windows, cross_reductions
from .addresses import touch_the_same
from .carried import POLICIES, carried, policies
from .row_chunks import twin_view
from .view_order import _erase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .nested_loops import Outer
    from .tile_phases import Phase

# Beyond 128 elements a thread (2^15 on 256 threads) a tile is looped; a chunk is 16 a thread: the
# size `row_chunks.py` unrolls, four 16-byte accesses of f32 in flight a thread.
LOOP_ELEMENTS = 128
CHUNK_ELEMENTS = 16
# Beyond 32 elements a thread (row_chunks.LONG_ELEMENTS), a group that reduces or scans is looped
# where one pass over its tiles computes it (its loop reloads nothing). Not a permute alone: each chunk
# exchanges through shared memory between two CTA barriers, which no load of the next chunk passes, so
# a chunk costs a whole memory latency (the H100 timed transpose_f16_64x128, 64 a thread, at 1.77x
# NVIDIA's time in four chunks, 1.27x in two, 0.98x unlooped)
ONE_PASS_ELEMENTS = 32
_EXCHANGES = ("cuda_tile.reduce", "cuda_tile.scan")

_VIEW = "cuda_tile.make_partition_view"
_I32 = TileType((), ScalarType("i32"))
# ops that are neither pure nor members: a group may not be reordered across them
_EFFECTS = ("load", "store", "atomic", "print", "assert", "barrier", "alloca")


def _tile(value: Value) -> Optional[TileType]:
    return value.type if isinstance(value.type, TileType) else None


# -- which ops a chunk can compute (op name -> rule) ----------------------------------------------

def _elementwise(op: Operation) -> bool:
    shapes = {v.type.shape for v in (*op.operands, *op.results) if isinstance(v.type, TileType)}
    return op.name in ELEMENTWISE and len(shapes) == 1


def _splat(op: Operation) -> bool:
    return bool(op.attributes["value"].is_splat)


def _broadcast(op: Operation) -> bool:
    """A broadcast along unit axes (of one value, of a row over rows, of a column over columns): a
    chunk's is the broadcast of the source's chunk, or of the whole source where the chunk keeps
    whole the axes the source runs along (`_fits`)."""
    src, res = _tile(op.operands[0]), _tile(op.results[0])
    return src is not None and res is not None and len(src.shape) == len(res.shape)


def _reshape(op: Operation) -> bool:
    """A reshape that adds or drops unit axes, or merges axes (splits them, seen from its source): a
    chunk's is the reshape of the chunk (`_merges` says when)."""
    src, res = _tile(op.operands[0]), _tile(op.results[0])
    return src is not None and res is not None and \
        (_long(src.shape) == _long(res.shape) or _merges(_long(src.shape), _long(res.shape)) is not None
         or _merges(_long(res.shape), _long(src.shape)) is not None)


def _merges(fine: list[int], coarse: list[int]) -> Optional[list[range]]:
    """Per axis of `coarse`, the consecutive axes of `fine` it merges (row-major); None where it merges
    none that way."""
    out, i = [], 0
    for n in coarse:
        start, size = i, 1
        while i < len(fine) and size < n:
            size *= fine[i]
            i += 1
        if size != n or i == start:
            return None
        out.append(range(start, i))
    return out if i == len(fine) else None


def _long(shape: tuple[int, ...]) -> list[int]:
    return [n for n in shape if n != 1]


def _view_access(op: Operation) -> bool:
    view = op.operand("view")
    vtype = view.type if view is not None else None
    tile = op.results[0] if op.name == "cuda_tile.load_view_tko" else op.operands[0]
    rank = len(tile.type.shape)  # type: ignore[union-attr]
    index = op.operand_group("index")
    return isinstance(vtype, PartitionViewType) and tuple(vtype.dim_map) == tuple(range(rank)) \
        and getattr(view, "owner", None) is not None and view.owner.name == _VIEW \
        and len(index) == rank and all(_tile(i) == _I32 for i in index)  # type: ignore[union-attr]


def _always(op: Operation) -> bool:
    return True


def _iota(op: Operation) -> bool:
    """A 1-D iota of i32: a chunk's is the chunk-sized iota plus the chunk's first index."""
    t = op.results[0].type
    return isinstance(t, TileType) and len(t.shape) == 1 and t.element == _I32.element


def _reduce(op: Operation) -> bool:
    """A reduce (of one tile or several: an arg-max's values and indices) whose body combines
    element-wise (it then combines whole accumulators)."""
    body = op.regions[0].blocks[0].operations if op.regions and op.regions[0].blocks else []
    return all(inner.name in ELEMENTWISE or inner.name == "cuda_tile.yield" for inner in body)


def _cat(op: Operation) -> bool:
    """A join of two tiles along one axis: its chunks are those of one operand or the other, each
    computed by its own loop over the chunks of the joined axis it covers (`_loop`'s window)."""
    lhs, rhs, res = (_tile(v) for v in (*op.operands, op.results[0]))
    return lhs is not None and rhs is not None and res is not None and len(lhs.shape) == len(res.shape)


def _scan(op: Operation) -> bool:
    """A scan of one tile combining element-wise: a chunk's is the chunk's scan combined with the
    running value the loop carries (what the chunks before it combine to; a reverse scan's loop
    visits the chunks along its axis last first)."""
    return len(op.operands) == 1 and _reduce(op)


# op name -> may a chunk compute it (ops without a rule: element-wise ones on tiles of one shape)
RULES: dict[str, Callable[[Operation], bool]] = {
    "cuda_tile.constant": _splat,
    "cuda_tile.broadcast": _broadcast,
    "cuda_tile.reshape": _reshape,
    "cuda_tile.load_view_tko": _view_access,
    "cuda_tile.store_view_tko": _view_access,
    "cuda_tile.permute": _always,   # a chunk's permute is the permute of the chunk (axes reordered)
    "cuda_tile.reduce": _reduce,    # into an accumulator the loop carries (tile_phases.py)
    "cuda_tile.scan": _scan,        # from the running value the loop carries
    "cuda_tile.for": _always,       # carrying tiles of the group: run whole per chunk (`_loop_axes`)
    "cuda_tile.continue": _always,  # of such a loop
    "cuda_tile.join_tokens": _always,
    "cuda_tile.iota": _iota,
    "cuda_tile.cat": _cat,          # one loop per operand, over the chunks it covers
}


def _chunkable(op: Operation) -> bool:
    rule = RULES.get(op.name)
    return rule(op) if rule is not None else _elementwise(op)


# -- groups ------------------------------------------------------------------------------------

# per axis of a tile value, the axis of the group's iteration space it runs along; -1 for a unit axis
# (a row's leading one, any axis of length 1: it runs along no axis, a chunk's is 1 long too)
Axes = tuple[int, ...]


class Group:
    """Ops of one block computing tiles of one iteration space (`space`, the shape of the tile that
    started it), each tile value with its `axes` in that space (a permute reorders them)."""

    def __init__(self, space: tuple[int, ...], chunk: int, carry: str = POLICIES[0]) -> None:
        self.space, self.chunk = space, chunk
        self.carry = carry   # which reductions its loops carry (carried.py)
        self.ops: list[Operation] = []            # the members in the group's block, in order
        self.inner: set[Operation] = set()        # the members in the bodies of member loops
        self.axes: dict[Value, Axes] = {}
        # tile value -> {its axis: the space axes it merges (outer first)}: a tile reshaped into the
        # space's finer axes (the axis itself runs along the outer one in `axes`)
        self.merged: dict[Value, dict[int, tuple[int, ...]]] = {}
        # where the tiles lie along the cats' joined axes: tile value -> its placements, each {joined space
        # axis it runs along: where along it the tile starts} (several: a tile joined by two cats;
        # `cat_windows.place`)
        self.offsets: dict[Value, list[dict[int, int]]] = {}
        self.cats: list[Operation] = []
        # the nested form (nested_loops.py): the space axes an outer loop splits into blocks, each block's
        # reductions carried by the loops in its body
        self.outer: tuple[int, ...] = ()
        # whether ops with effects lie between the members, apart from them (`axis_passes.apart`): only the
        # passes of its reductions' axes may loop it
        self.apart = False
        # the nested form's cross reductions (cross_reductions.py): each computed in the chunks that read it
        self.cross: set[Operation] = set()

    def values(self) -> list[Value]:
        return list(self.axes)

    def carried(self) -> list[Operation]:
        """The reductions whose results the loops carry (the others are computed chunk by chunk)."""
        return [op for op in self.ops if op not in self.cross and
                (_carried(op, self) or (self.outer and op.name == "cuda_tile.reduce"))]

    def shape(self, value: Value, part: tuple[int, ...]) -> tuple[int, ...]:
        """The chunk-sized shape of `value` for chunks `part` of the space."""
        merged = self.merged.get(value, {})
        return tuple(_product([part[s] for s in merged[i]]) if i in merged else part[a] if a >= 0 else 1
                     for i, a in enumerate(self.axes[value]))


def _unit(value: Value, axes: Axes) -> Axes:
    """`axes` of `value` with -1 on its unit axes (one value seen through reshapes: one spelling)."""
    shape = value.type.shape  # type: ignore[union-attr]
    return tuple(-1 if n == 1 else a for n, a in zip(shape, axes))


def _size(t: TileType) -> int:
    return t.num_elements


def _in_space(value: Value, elements: int) -> bool:
    t = _tile(value)
    return t is not None and bool(t.shape) and t.num_elements == elements


def _carried(op: Operation, group: Group) -> bool:
    """Whether `op` is a reduction into a value the group's loops carry (the reduce of a chunk has the
    whole result's shape: carried.py says which). The others are computed chunk by chunk: a chunk then
    keeps whole the axis each reduces."""
    return carried(op, group.chunk, group.carry)


def _op_axes(op: Operation, known: Value, axes: Axes, block: Block, group: Group) -> Optional[dict[Value, Axes]]:
    """The axes of the tiles of `op` in the group, given those of `known` (None where they do not
    follow: shapes that differ, or a permute that is not one)."""
    if op.name == "cuda_tile.broadcast":
        return _broadcast_axes(op, known, axes, block, group)
    if op.name == "cuda_tile.reshape":
        other = op.results[0] if known is op.operands[0] else op.operands[0]
        long = iter([a for a in axes if a >= 0])
        return {known: axes, other: tuple(-1 if n == 1 else next(long) for n in other.type.shape)}  # type: ignore[union-attr]
    if op.name == "cuda_tile.reduce":
        if known not in op.operands:
            return None   # the axis it reduces is not in the space of its result
        operands = {v: axes for v in op.operands}   # (several: one shape)
        if _carried(op, group):
            return operands   # its results are not chunked
        dim = int(op.attributes["dim"])
        return {**operands, **{r: axes[:dim] + axes[dim + 1:] for r in op.results}}
    if op.name == "cuda_tile.permute":
        perm = tuple(int(p) for p in op.attributes["permutation"])
        src, res = op.operands[0], op.results[0]
        if known is src:
            return {src: axes, res: tuple(axes[p] for p in perm)}
        back = [0] * len(perm)
        for i, p in enumerate(perm):
            back[p] = axes[i]
        return {src: tuple(back), res: axes}
    shape = known.type.shape  # type: ignore[union-attr]
    tiles = [v for v in (*op.operands, *op.results) if _tile(v) is not None and _tile(v).shape]  # type: ignore[union-attr]
    if any(v.type.shape != shape for v in tiles):  # type: ignore[union-attr]
        return None
    return {v: axes for v in tiles}


def _broadcast_axes(op: Operation, known: Value, axes: Axes, block: Block, group: Group) -> Optional[dict[Value, Axes]]:
    """A broadcast's result runs along the space; its source along the same axes but the broadcast
    ones. The source is computed per chunk too (a weight row loaded chunk by chunk) unless it is one
    value, comes from another block or from a reduction (a row's mean: done before the loop that
    reads it, `tile_phases.py`): then the loop reads it whole."""
    src, res = op.operands[0], op.results[0]
    if known is src:   # reached from a source the group computes: the result's unit axes are its own
        full = tuple(i if a < 0 else a for i, a in enumerate(axes))
        return {src: axes, res: full} if sorted(full) == list(range(len(full))) else None
    src_axes = _unit(src, axes)
    t = _tile(src)
    owner = getattr(src, "owner", None)
    if t is None or t.num_elements == 1 or not isinstance(owner, Operation) or owner.parent is not block \
            or _after_reduce(owner, block, group):
        return {res: axes}
    return {res: axes, src: src_axes}


def _after_reduce(op: Operation, block: Block, group: Group) -> bool:
    """Whether `op` reads, directly or not, a carried reduction of `block`."""
    pending, seen = [op], set()
    while pending:
        op = pending.pop()
        if _carried(op, group):
            return True
        seen.add(op)
        pending += [v.owner for v in op.operands if isinstance(getattr(v, "owner", None), Operation)  # type: ignore[attr-defined]
                    and v.owner.parent is block and v.owner not in seen]  # type: ignore[attr-defined]
    return False


def _grow(block: Block, seed: Value, chunk: int, carry: str) -> Optional[Group]:
    """The group of ops of `block` connected to `seed` through tiles of its size, or None where one
    of them cannot be computed chunk by chunk."""
    t = _tile(seed)
    assert t is not None
    group = Group(t.shape, chunk, carry)
    elements = t.num_elements
    group.axes[seed] = _unit(seed, tuple(range(len(t.shape))))
    members: set[Operation] = set()
    blocks = {block}   # the group's block and the bodies of its member loops
    pending = [seed]
    while pending:
        value = pending.pop()
        owner = getattr(value, "owner", None)
        touching = ([owner] if isinstance(owner, Operation) else []) + list(value.uses)
        for op in touching:
            if op in members:
                continue
            inner = op.parent is not block
            if op.parent not in blocks or not _chunkable(op) or op.name in (_OUTER_ONLY if inner else _INNER_ONLY):
                return None
            merged = group.merged.get(value)
            if op.name == "cuda_tile.reshape" and _long(op.operands[0].type.shape) != _long(op.results[0].type.shape):  # type: ignore[union-attr]
                axes, merged = _merge_axes(op, value, group) if merged is None else (None, None)
            elif merged is not None and op.name in _KEEP_AXES:
                return None   # merged axes through ops that move axes: not followed
            elif op.name == "cuda_tile.for":
                axes = _loop_axes(op, value, group.axes[value], elements)
                if axes is not None:
                    blocks.add(op.regions[0].blocks[0])
            elif op.name == "cuda_tile.cat":
                axes = _cat_axes(op, value, group)
            else:
                axes = _op_axes(op, value, group.axes[value], block, group)
            if axes is None:
                return None
            members.add(op)
            for v, a in axes.items():
                a = _unit(v, a)
                if group.axes.setdefault(v, a) != a:
                    return None   # one tile seen along two orders
                if merged and v is not value and group.merged.setdefault(v, merged) != merged:
                    return None
                if v is not value and v not in pending:
                    pending.append(v)
    tokens = [r for op in members for r in op.results if isinstance(r.type, TokenType)]
    while tokens:   # the joins of the group's tokens order the group's own accesses
        for user in tokens.pop().uses:
            if user.name == "cuda_tile.join_tokens" and user.parent is block and user not in members:
                members.add(user)
                tokens.append(user.results[0])
    group.ops = [op for op in block.operations if op in members]
    group.inner = {op for op in members if op.parent is not block}
    if group.cats and (group.merged or group.inner):
        return None   # a window of a merged axis is not one run of the space's axes; member loops with cats
        # are not windowed (not needed yet: their tiles would each need a window of their own)
    if group.cats and not cat_windows.place(group):
        return None
    return group


def _cat_axes(op: Operation, known: Value, group: Group) -> Optional[dict[Value, Axes]]:
    """A cat: its operands run along the result's axes, each from its offset along the joined axis
    (where each lies in the space: `cat_windows.place`, once the group is grown)."""
    axes, dim = group.axes[known], int(op.attributes["dim"])
    if axes[dim] < 0:
        return None
    group.cats.append(op)
    return {v: axes for v in (*op.operands, op.results[0])}


# ops whose tiles do not all share the axes of the one the group reached them from
_KEEP_AXES = ("cuda_tile.broadcast", "cuda_tile.reshape", "cuda_tile.reduce", "cuda_tile.scan", "cuda_tile.permute",
              "cuda_tile.for")


def _merge_axes(op: Operation, known: Value, group: Group) -> tuple[Optional[dict[Value, Axes]],
                                                                    Optional[dict[int, tuple[int, ...]]]]:
    """The axes of a reshape that merges the axes of `known` into those of the other tile: each merged
    axis runs along its outer space axis, and merges the space axes of the `known` axes it covers.
    Reached from the merged side (the space would need axes it lacks): None."""
    other = op.results[0] if known is op.operands[0] else op.operands[0]
    ks, os_ = known.type.shape, other.type.shape  # type: ignore[union-attr]
    long_known = [a for n, a in zip(ks, group.axes[known]) if n != 1]
    runs = _merges(_long(ks), _long(os_))
    if runs is None:
        return None, None
    axes, merged, r = [], {}, iter(runs)
    for i, n in enumerate(os_):
        if n == 1:
            axes.append(-1)
            continue
        covers = tuple(long_known[j] for j in next(r))
        axes.append(covers[0])
        if len(covers) > 1:
            merged[i] = covers
    return {known: group.axes[known], other: tuple(axes)}, merged


# members that only the group's own block may hold (a loop's body has no phases), and those only the
# body of a member loop may (the group's own block continuing its loop would carry tiles out of it)
_OUTER_ONLY = ("cuda_tile.reduce", "cuda_tile.scan")
_INNER_ONLY = ("cuda_tile.continue",)


def _loop_axes(op: Operation, known: Value, axes: Axes, elements: int) -> Optional[dict[Value, Axes]]:
    """A `for` whose carried values are tiles of the group (with the shape of `known`) and tokens, and
    whose body reads memory and stores the group's tiles: it runs whole for each chunk, inside the
    chunk loop (`_stores_keep_order` says when its stores may). The axes of its carried tiles, block
    arguments and results; None where it does not qualify."""
    body = op.regions[0].blocks[0]
    inits = op.operand_group("initValues")
    shape = known.type.shape  # type: ignore[union-attr]
    tiles = [i for i, v in enumerate(inits) if not isinstance(v.type, TokenType)]
    if not tiles or any(not _in_space(inits[i], elements) or inits[i].type.shape != shape for i in tiles):  # type: ignore[union-attr]
        return None
    if any(inner.regions or any(word in inner.short_name for word in _EFFECTS if word not in ("load", "store"))
           for inner in body.operations):
        return None
    return {v: axes for i in tiles for v in (inits[i], body.arguments[1 + i], op.results[i])}


def _stores_keep_order(group: Group) -> bool:
    """A member loop's body runs once per chunk, so its stores of chunk c all precede those of chunk
    c + 1: every store in it must be the group's (chunked), and the body's loads unordered after them
    (their tokens from outside the loop); the order of two stores of one element is then kept when
    both write through views of one tiling of their tensor (one element, one chunk)."""
    for loop in (op for op in (*group.ops, *group.inner) if op.name == "cuda_tile.for"):
        body = loop.regions[0].blocks[0]
        tilings: dict[Value, object] = {}
        for inner in body.operations:
            if "store" in inner.short_name:
                view = inner.operand("view")
                if inner not in group.inner or view is None or view.owner.name != _VIEW:  # type: ignore[attr-defined]
                    return False
                if tilings.setdefault(view.owner.operands[0], view.type) != view.type:  # type: ignore[attr-defined]
                    return False
            if "load" in inner.short_name:
                token = inner.operand("token")
                owner = getattr(token, "owner", None)
                if token is not None and (owner is body or getattr(owner, "parent", None) is body):
                    return False
    return True


def _closed(block: Block, group: Group) -> bool:
    """Nothing outside `group` reads what it defines, its tiles are all its own, and no op between its
    first and last member has effects a loop around the members would reorder."""
    return _sealed(block, group) and not _interleaved(block, group)


def _sealed(block: Block, group: Group) -> bool:
    """Nothing outside `group` reads what it defines (but the results of its carried reductions), its
    accesses keep their order chunk by chunk, and its tiles are all its own."""
    ops, members = group.ops, set(group.ops)
    carried = set(group.carried())
    if any(user not in members for op in ops if op not in carried for r in op.results for user in r.uses):
        return False   # a tile or token read after the loop (or in another block); a reduction's result may be
    if not _ordered_accesses_agree(group) or not _stores_keep_order(group):
        return False
    defined = members | group.inner
    loops = {op.regions[0].blocks[0] for op in defined if op.name == "cuda_tile.for"}
    if any(v.owner not in defined and v.owner not in loops for v in group.axes):  # type: ignore[attr-defined]
        return False   # a tile carried into the block (another loop's argument)
    return True


def _interleaved(block: Block, group: Group) -> list[Operation]:
    """The ops between the first and last member of `group` that have effects (not its own)."""
    members = set(group.ops)
    first, last = block.operations.index(group.ops[0]), block.operations.index(group.ops[-1])
    return [op for op in block.operations[first:last]
            if op not in members and (op.regions or any(word in op.short_name for word in _EFFECTS))]


def _ordered_accesses_agree(group: Group) -> bool:
    """Every store ordered after a load of the group (through tokens) writes the elements that load
    read (the same partition of the same tensor view at the same tile index; for a gather or a
    scatter, the same address at every position: `addresses.py`): a loop that loads and stores chunk
    by chunk then keeps the order the tokens ask for."""
    members = set(group.ops)
    for store in group.ops:
        if store.name not in _STORES or store.operand("token") is None:
            continue
        pending, seen = [store.operand("token")], set()
        while pending:
            owner = getattr(pending.pop(), "owner", None)
            if owner not in members or owner in seen:
                continue
            seen.add(owner)
            views = owner.name == "cuda_tile.load_view_tko" and store.name == "cuda_tile.store_view_tko"
            if owner.name in _LOADS and not (views and _same_elements(owner, store)
                                             or touch_the_same(owner, store, group.axes)):
                return False
            pending += [v for v in owner.operands if isinstance(v.type, TokenType)]
    return True


_STORES = ("cuda_tile.store_view_tko", "cuda_tile.store_ptr_tko")
_LOADS = ("cuda_tile.load_view_tko", "cuda_tile.load_ptr_tko")


def _same_elements(load: Operation, store: Operation) -> bool:
    a, b = load.operand("view"), store.operand("view")
    return a is not None and b is not None and a.type == b.type and \
        a.owner.operands[0] is b.owner.operands[0] and \
        load.operand_group("index") == store.operand_group("index")  # type: ignore[union-attr]


# ops whose chunks combine with a value the loop carries: they split only the axis they run along
_CARRIES = ("cuda_tile.reduce", "cuda_tile.scan")


def _fits(group: Group, part: tuple[int, ...]) -> bool:
    """Every carried reduce and scan of the group splits only its reduced axis into chunks: the reduce
    of a chunk then has the shape of the whole result, and accumulates into it; every other reduce
    keeps its reduced axis whole (a chunk's is then the chunk of its result). Every broadcast of a tile
    the loop reads whole keeps whole the axes that tile runs along."""
    if not all(_contiguous([part[s] for s in axes], [group.space[s] for s in axes])
               for merged in group.merged.values() for axes in merged.values()):
        return False
    if group.cats and not cat_windows.fits(group, part):
        return False   # a chunk across two operands
    carried = set(group.carried())
    for op in group.ops:
        if op.name in _CARRIES and op not in group.cross:   # (a cross reduction: a loop of its own)
            axes, dim = group.axes[op.operands[0]], int(op.attributes["dim"])
            if op in carried or op.name == "cuda_tile.scan":   # (the nested form's outer loop splits the others)
                if any(a >= 0 and part[a] != group.space[a] and a not in group.outer
                       for i, a in enumerate(axes) if i != dim):
                    return False
            elif axes[dim] >= 0 and part[axes[dim]] != group.space[axes[dim]]:
                return False
        if op.name == "cuda_tile.broadcast" and op.operands[0] not in group.axes:
            axes = _unit(op.operands[0], group.axes[op.results[0]])
            if any(a >= 0 and part[a] != group.space[a] for a in axes):
                return False
    # one axis scanned both ways: no order of its chunks serves both
    return len(set(_scan_axes(group))) == len({a for a, _ in _scan_axes(group)})


def _contiguous(part: list[int], whole: list[int]) -> bool:
    """Whether a chunk `part` of axes `whole` (outer first) is one run of their row-major merge: whole
    inside an axis, one element outside it."""
    inner = len(part)
    while inner and part[inner - 1] == whole[inner - 1]:
        inner -= 1
    return all(p == 1 for p in part[:max(0, inner - 1)])


def _scan_axes(group: Group) -> list[tuple[int, bool]]:
    """(space axis, reverse) of each scan of the group."""
    return [(group.axes[op.operands[0]][int(op.attributes["dim"])], bool(op.attributes.get("reverse")))
            for op in group.ops if op.name == "cuda_tile.scan"]


def _groups(block: Block, least: int, chunk: int, carry: str = POLICIES[0],
            done: frozenset[Value] = frozenset()) -> list[Group]:
    """The groups of `block` over tiles of more than `least` elements that loops over chunks of `chunk`
    elements can compute, carrying the reductions `carry` says (carried.py); not grown from `done`."""
    out: list[Group] = []
    seen: set[Value] = set(done)
    for op in list(block.operations):
        for r in op.results:
            t = _tile(r)
            if t is None or not t.shape or t.num_elements <= least or r in seen:
                continue
            group = _grow(block, r, chunk, carry)
            if group is None:
                seen.add(r)
                continue
            seen |= set(group.axes)
            if _closed(block, group):
                out.append(group)
            elif _sealed(block, group) and axis_passes.apart(group, _interleaved(block, group)):
                group.apart = True   # loops of its passes only: they leave those ops where they are
                out.append(group)
    return out


def _blocks(entry: Operation) -> list[Block]:
    return [block for op in entry.walk() for region in op.regions for block in region.blocks]


def streamable(entry: Operation) -> set[Value]:
    """The tile values of `entry` this pass computes in chunks when they are big (any size here), under
    any policy (each grows only what the ones before leave whole)."""
    out: set[Value] = set()
    for block in _blocks(entry):
        for carry in policies(_reduces(block), 1):
            out |= {v for group in _groups(block, 1, 1, carry, frozenset(out)) for v in group.values()}
    return out


def _reduces(block: Block) -> list[Operation]:
    return [op for op in block.operations if op.name == "cuda_tile.reduce"]


def loop_tiles(entry: Operation, threads: int) -> int:
    """Loop every group of `entry` (run on `threads` threads) over tiles of more than `LOOP_ELEMENTS`
    a thread (`ONE_PASS_ELEMENTS` where `_one_pass`), in the first of `FORMS` that takes it; what none takes is grown again carrying fewer
    reductions (the next of carried.POLICIES). The number of loops made."""
    made = 0
    for block in _blocks(entry):
        for carry in policies(_reduces(block), CHUNK_ELEMENTS * threads):
            for group in _groups(block, ONE_PASS_ELEMENTS * threads, CHUNK_ELEMENTS * threads, carry):
                work = next((work for form in FORMS for work in [form(block, group)] if work), None)
                if work and _product(list(group.space)) <= LOOP_ELEMENTS * threads and not _one_pass(group, work):
                    continue   # left whole: its loops would reload what registers hold
                for each, (part, plan) in work or ():
                    _loops(each, part, plan)
                    made += len(plan) + bool(each.outer)
                if work:
                    _drop(group)
    return made


def _one_pass(group: Group, work: "Work") -> bool:
    """Whether `group` exchanges elements between threads and `work` computes it in one flat loop
    (each input read once), no loop of the kernel's among its members (a row loop's chunks would
    each run that loop over narrower boxes, which its pipeline then does not stage)."""
    return any(op.name in _EXCHANGES for op in group.ops) and len(work) == 1 and \
        not work[0][0].outer and len(work[0][1][1]) == 1 and \
        not group.inner and all(op.name != "cuda_tile.for" for op in group.ops)


# a group's loops: the groups they compute (the group, or parts of it) with their chunk and phases
Work = list[tuple["Group", tuple[tuple[int, ...], list["Phase"]]]]


def _whole(block: Block, group: Group) -> Optional[Work]:
    """The group in one form, flat or nested (`_plan`)."""
    planned = None if group.apart else _plan(block, group)
    return [(group, planned)] if planned is not None else None


def _per_axis(block: Block, group: Group) -> Optional[Work]:
    """A pass per axis its reductions run along (`axis_passes.py`), each in one form; all planned
    before any loop is made."""
    passes = axis_passes.split(group) or []
    plans = [_plan(block, each) for each in passes]
    return list(zip(passes, plans)) if passes and None not in plans else None  # type: ignore[arg-type]


def _across(block: Block, group: Group) -> Optional[Work]:
    """The nested form along the reduction that reads those along another axis, each of them computed
    in the chunks that read it (`cross_reductions.py`)."""
    planned = None if group.apart else _plan(block, group, cross=True)
    return [(group, planned)] if planned is not None else None


# the forms a group may take, in the order they are tried
FORMS: tuple[Callable[[Block, Group], Optional[Work]], ...] = (_whole, _per_axis, _across)


def _plan(block: Block, group: Group, cross: bool = False) -> Optional[tuple[tuple[int, ...], list["Phase"]]]:
    """The chunk and the loops of `group`: flat (one loop per phase, per window of its cats), or
    nested (`nested_loops.py`: reductions too long both ways, an outer loop over blocks of their
    results; with `cross`, only that, its cross reductions in each chunk); None where it takes
    neither form."""
    from . import nested_loops
    from .tile_phases import phases

    if cross:
        return nested_loops.plan(block, group, cross=True)
    part = chunk_shape(group, group.chunk)
    plan = phases(block, group.ops, set(group.carried())) if _fits(group, part) else None
    if plan is not None and group.cats:
        plan = cat_windows.windows(group, part, plan, {a for a, reverse in _scan_axes(group) if reverse})
    return (part, plan) if plan is not None else nested_loops.plan(block, group)


def chunk_shape(group: Group, size: int) -> tuple[int, ...]:
    """The chunk of the group's space of `size` elements (powers of two). Filled from the innermost
    axis out, so that a chunk's rows stay whole and its accesses as contiguous as the tile's (the axes a
    reduce keeps first: it then splits only its own); where a permute reorders the axes, as square
    as it can be, so that rows stay long on both sides."""
    space = group.space
    if group.cats:   # a chunk within one operand of each cat (`_fits`)
        joined = {cat_windows.joined_axis(group, cat) for cat in group.cats}
        space = tuple(min(n, cat_windows.longest_chunk(group, a)) if a in joined else n for a, n in enumerate(space))
    if any(op.name == "cuda_tile.permute" for op in group.ops):
        part = [1] * len(space)
        while _product(part) < size and any(p < n for p, n in zip(part, space)):
            axis = min((a for a in reversed(range(len(space))) if part[a] < space[a]), key=lambda a: part[a])
            part[axis] *= 2
        return tuple(part)
    carried = set(group.carried())
    along = {op: group.axes[op.operands[0]][int(op.attributes["dim"])] for op in group.ops if op.name in _CARRIES}
    whole = {a for op, a in along.items() if op.name == "cuda_tile.reduce" and op not in carried}
    reduced = {a for op, a in along.items() if op in carried or op.name == "cuda_tile.scan"} | \
        {a for op in group.ops if op.name == "cuda_tile.broadcast" and op.operands[0] not in group.axes
         for a in group.axes[op.results[0]] if a >= 0 and a not in _unit(op.operands[0], group.axes[op.results[0]])}
    order = [a for a in reversed(range(len(space))) if a in whole] + \
        [a for a in reversed(range(len(space))) if a not in reduced | whole] + \
        [a for a in reversed(range(len(space))) if a in reduced - whole]   # the axes a local reduce reduces whole,
    # then a carried reduction's other axes
    out, left = [1] * len(space), size
    for a in order:
        out[a] = max(1, min(space[a], left))
        left //= out[a]
    return tuple(out)


def _product(values: list[int]) -> int:
    n = 1
    for v in values:
        n *= v
    return n


# -- the rewrite -------------------------------------------------------------------------------

class _Body:
    """Appends ops to the loop's body."""

    def __init__(self, block: Block, location: object) -> None:
        self.block, self.location = block, location
        self.indices: dict[tuple[Value, object, int], Value] = {}   # (tile index, axes, block) -> the chunk's

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


def _loops(group: Group, part: tuple[int, ...], plan: list["Phase"]) -> None:
    """One `for` over the chunks `part` of the group's space per phase of `plan`, each computing its
    ops chunk by chunk (a cat's windows: one loop each, `cat_windows.py`, a reduction or scan carried
    from one to the next; the nested form: all in the body of an outer loop over blocks, `nested_loops.py`).
    The group's ops stay, unread but for their operands (`_drop`)."""
    from .nested_loops import blocks, enclose

    carried: dict[Operation, list[Value]] = {}
    outer, window = None, None
    for i, phase in enumerate(plan):
        if group.outer and (outer is None or blocks(group, phase) != window):   # a window of blocks' loop
            window = blocks(group, phase)
            outer, carried = enclose(group, part, plan[-1].before, dict(window)), {}
        carried.update(_loop(group, part, phase, carried, outer))
        later = {op for next_ in plan[i + 1:] for op in next_.ops}
        for op in phase.reduces:
            if op not in later and outer is None:   # its last window done: what reads it reads the loop's results
                for r, v in zip(op.results, carried[op]):
                    r.replace_all_uses_with(v)


def _drop(group: Group) -> None:
    """Drop the ops of `group`, once loops compute them, and the views no op reads any more."""
    for op in reversed(group.ops):
        _erase_tree(op)
    views = {v for op in (*group.ops, *group.inner) for v in op.operands if isinstance(v.type, PartitionViewType)}
    for view in views:
        if not view.uses:
            _erase(view.owner)  # type: ignore[attr-defined]


def _erase_tree(op: Operation) -> None:
    """Drop `op` and the ops of its regions (they no longer read the values of the block)."""
    for region in op.regions:
        for block in region.blocks:
            for inner in reversed(list(block.operations)):
                _erase_tree(inner)
    _erase(op)


def _loop(group: Group, part: tuple[int, ...], phase: "Phase", before: dict[Operation, list[Value]],
          outer: Optional["Outer"] = None) -> dict[Operation, list[Value]]:
    """The loop of one phase, before `phase.before` (in the nested form, in `outer`'s body: over the
    chunks of the block, or none where the phase's tiles all lie within one); per reduction and scan of
    it, what it carries out (its results, the running value after its last chunk). Those in `before`
    start from there (an earlier window's loop), the others from their identities."""
    at = outer.at if outer is not None else phase.before
    splits = [n // p for n, p in zip(group.space, part)]
    window = phase.window
    for along, (_first, chunks) in (window or {}).items():   # the chunks of one window of the cats
        splits[along] = chunks
    steps = [1 if a in group.outer else k for a, k in enumerate(splits)]   # what this loop visits
    if outer is not None and all(a in group.outer for a in window or ()) and not any(
            steps[a] > 1 for op in phase.ops for v in (*op.operands, *op.results)
            if v in group.axes for a in group.axes[v] if a >= 0):   # (a window's loop: one even of one chunk)
        return _straight(group, part, splits, phase, outer)
    bounds = [_outside_const(at, v) for v in (0, _product(steps), 1)]
    scans = [op for op in phase.ops if op.name == "cuda_tile.scan"]
    inits = [v for op in phase.reduces for v in before.get(op) or
             [_identity(at, op, _chunk_type(group, r, part), i) for i, r in enumerate(op.results)]] + \
        [v for op in scans for v in before.get(op) or
         [_identity(at, op, _without(_chunk_type(group, op.results[0], part), int(op.attributes["dim"])))]]
    body = Block([_I32, *(v.type for v in inits)])
    loop = at.insert_before(Operation("cuda_tile.for", [*bounds, *inits], [v.type for v in inits], {},
                                      regions=[Region([body])], location=at.location))
    emit = _Body(body, at.location)
    coords = _chunk_coords(emit, body.arguments[0], steps)
    if outer is not None:   # the block's index along the axes the outer loop splits
        coords = [outer.coords[a] if a in group.outer else c for a, c in enumerate(coords)]
    for axis in {a for a, reverse in _scan_axes(group) if reverse and coords[a] is not None}:
        last = emit.const(splits[axis] - 1)   # a reverse scan's chunks, last first
        coords[axis] = emit.op("cuda_tile.subi", [last, coords[axis]], {"overflow": "none"})  # type: ignore[list-item]
    chunk = _Chunk(group, part, splits, coords, emit, window, phase.where)
    if outer is not None:
        chunk.copies.update(outer.copies)
    args = iter(body.arguments[1:])   # per reduction its accumulators, then per scan its running value
    accs = {op: [next(args) for _ in op.results] for op in phase.reduces}
    runs = {op: next(args) for op in scans}
    carried: list[Value] = []
    for op in phase.ops:
        if op in group.cross:
            cross_reductions.compute(group, part, chunk, op, phase.ops, outer.copies if outer else {}, body)
            continue
        copy = chunk.clone(op, body)
        if op in phase.reduces:
            carried += _combine(body, op, accs[op], list(copy.results))
        if op in scans:
            chunk.copies[op.results[0]], runs[op] = _carry_scan(body, op, copy, runs[op])
    carried += runs.values()
    body.append(Operation("cuda_tile.continue", carried, [], {}, location=at.location))
    results = iter(loop.results)
    out = {op: [next(results) for _ in op.results] for op in phase.reduces}
    out.update((op, [next(results)]) for op in scans)
    if outer is not None:   # the later phases of the block read the block's results
        outer.copies.update((r, v) for op in phase.reduces for r, v in zip(op.results, out[op]))
    return out


def _straight(group: Group, part: tuple[int, ...], splits: list[int], phase: "Phase", outer: "Outer") -> dict:
    """A phase of the nested form whose tiles lie within the block (what reads its reductions' results,
    a store of them): its ops once, in the outer loop's body, on the block's chunk."""
    body = Block()
    chunk = _Chunk(group, part, splits, outer.coords, _Body(body, outer.at.location), phase.window, phase.where)
    chunk.copies.update(outer.copies)
    for op in phase.ops:
        if op in group.cross:
            cross_reductions.compute(group, part, chunk, op, phase.ops, outer.copies, body)
        else:
            chunk.clone(op, body)
    for op in list(body.operations):   # made apart (clones append), then moved into place
        body.operations.remove(op)
        outer.at.insert_before(op)
    return {}


def _chunk_type(group: Group, value: Value, part: tuple[int, ...]) -> object:
    """The type of a chunk of `value`: chunk-sized where the group splits it (the nested form's results)."""
    t = value.type
    return TileType(group.shape(value, part), t.element) if value in group.axes else t  # type: ignore[union-attr]


class _Chunk:
    """Copies the group's ops into a chunk loop's body, on chunk-sized tiles."""

    def __init__(self, group: Group, part: tuple[int, ...], splits: list[int], coords: list[Optional[Value]],
                 emit: "_Body", window: Optional[dict[int, tuple[int, int]]] = None,
                 where: Optional[dict[Value, dict[int, int]]] = None) -> None:
        self.group, self.part, self.splits, self.coords, self.emit = group, part, splits, coords, emit
        self.window = window   # the loop of one window of the cats: space axis -> (first chunk, chunks)
        self.where = where or {}   # in that window, the placement of each tile (`Phase.where`)
        self.shifted: dict[tuple, Value] = {}
        self.copies: dict[Value, Value] = {}
        self.views: dict = {}   # (view, chunk shape) -> its twin

    def type(self, value: Value) -> object:
        return _chunk_type(self.group, value, self.part)

    def clone(self, op: Operation, into: Block) -> Operation:
        """The chunk's copy of member `op`, appended to `into` (a member loop with its body)."""
        group, copies = self.group, self.copies
        if op.name == "cuda_tile.cat":   # the chunk of the operand holding this loop's window
            assert self.window is not None
            operand = copies[cat_windows.operand_at(group, op, self.window, self.part, self.where)]
            copies[op.results[0]] = operand
            return operand.owner  # type: ignore[return-value]
        operands = [copies.get(v, v) for v in op.operands]
        if op.name in ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko"):
            tile = op.results[0] if op.name == "cuda_tile.load_view_tko" else op.operands[0]
            self.emit.block = into   # the index arithmetic goes beside the access
            operands = _chunk_access(op, operands, group.shape(tile, self.part), group.axes[tile],
                                     lambda axis: self.coord(tile, axis), self.views, self.emit)
        types = [self.type(r) for r in op.results]
        attributes = dict(op.attributes)
        if op.name == "cuda_tile.constant":
            attributes["value"] = DenseElements(types[0], attributes["value"].raw)  # type: ignore[arg-type]
        copy = into.append(Operation(op.name, operands, types, attributes, location=op.location,  # type: ignore[arg-type]
                                     segment_sizes=op.segment_sizes))
        copies.update(zip(op.results, copy.results))
        if op.name == "cuda_tile.iota":
            copies[op.results[0]] = self._shifted_iota(op, copy.results[0], into)
        if op.name == "cuda_tile.for":
            source = op.regions[0].blocks[0]
            twin = Block()
            for arg in source.arguments:
                copies[arg] = twin.add_argument(self.type(arg), arg.name_hint)  # type: ignore[arg-type]
            copy.add_region(Region([twin]))
            for inner in source.operations:
                if inner in group.inner:
                    self.clone(inner, twin)
                else:
                    twin.append(inner.clone(copies))
        else:
            for region in op.regions:   # a reduce's body
                copy.add_region(Region([_clone_block(region.blocks[0])]))
        return copy

    def coord(self, value: Value, axis: int) -> tuple[int, Optional[Value], object]:
        """Along `axis` of tile `value`: its chunks, the chunk's index (None where it is not split;
        emitted into `self.emit.block`) and a key naming it. A merged axis is cut into chunks along
        its outer space axes only (`_fits`): the index is theirs in mixed radix."""
        merged = self.group.merged.get(value, {}).get(axis)
        if merged is None:
            along = self.group.axes[value][axis]
            if self.window is not None and along in self.window:
                return self._windowed(value, axis, along)
            return self.splits[along], self.coords[along], along
        k, c = 1, None
        for s in merged:
            if self.coords[s] is None:
                continue
            emit = self.emit
            c = self.coords[s] if c is None else emit.op(
                "cuda_tile.addi", [emit.op("cuda_tile.muli", [c, emit.const(self.splits[s])], {"overflow": "none"}),
                                   self.coords[s]], {"overflow": "none"})  # type: ignore[list-item]
            k *= self.splits[s]
        return k, c, merged

    def _windowed(self, value: Value, axis: int, along: int) -> tuple[int, Optional[Value], object]:
        """Along the joined axis in an operand's loop: the chunks of `value` (a cat operand's tile or
        the space's), and the chunk's index in it: the loop's, shifted by where the operand starts."""
        k = value.type.shape[axis] // self.part[along]  # type: ignore[union-attr]
        start = self.window[along][0] - self.where.get(value, {}).get(along, 0) // self.part[along]  # type: ignore[index]
        c = self.coords[along]
        if k == 1 or (not start and c is not None):
            return k, c, (along, 0, k)
        key = (along, start, id(self.emit.block))
        if key not in self.shifted:   # one shifted index per block (a constant where the loop has one chunk)
            shift = self.emit.const(start)
            self.shifted[key] = shift if c is None else self.emit.op("cuda_tile.addi", [c, shift], {"overflow": "none"})
        return k, self.shifted[key], (along, start, k)

    def _shifted_iota(self, op: Operation, iota: Value, into: Block) -> Value:
        """The chunk's copy `iota` of `op` plus the index of its first element: c * chunk length, splat."""
        emit, where = self.emit, self.emit.block
        emit.block = into
        c = self.coord(op.results[0], 0)[1] if self.group.axes[op.results[0]][0] >= 0 else None
        if c is None:
            emit.block = where
            return iota
        t = iota.type
        assert isinstance(t, TileType)
        start = emit.op("cuda_tile.muli", [c, emit.const(t.shape[0])], {"overflow": "none"})
        one = TileType((1,), t.element)
        flat = into.append(Operation("cuda_tile.reshape", [start], [one], {}, location=emit.location)).results[0]
        splat = into.append(Operation("cuda_tile.broadcast", [flat], [t], {}, location=emit.location)).results[0]
        emit.block = where
        return into.append(Operation("cuda_tile.addi", [iota, splat], [t], {"overflow": "none"},
                                     location=emit.location)).results[0]


def _clone_block(block: Block) -> Block:
    mapping: dict[Value, Value] = {}
    twin = Block()
    for arg in block.arguments:
        mapping[arg] = twin.add_argument(arg.type, arg.name_hint)
    for op in block.operations:
        twin.append(op.clone(mapping))
    return twin


def _combine(body: Block, reduce: Operation, accs: list[Value], parts: list[Value]) -> list[Value]:
    """The reduce's body applied to whole accumulators: `accs` (one per operand) combined with the
    chunk's `parts` (its block takes each operand's pair in turn)."""
    region = reduce.regions[0].blocks[0]
    mapping: dict[Value, Value] = dict(zip(region.arguments, (v for pair in zip(accs, parts) for v in pair)))
    t = accs[0].type
    assert isinstance(t, TileType)
    for op in region.operations:
        if op.name == "cuda_tile.yield":
            return [mapping[v] for v in op.operands]
        copy = body.append(Operation(op.name, [mapping[v] if v in mapping else v for v in op.operands],
                                     [TileType(t.shape, r.type.element) for r in op.results],  # type: ignore[union-attr]
                                     op.attributes, location=op.location, segment_sizes=op.segment_sizes))
        mapping.update(zip(op.results, copy.results))
    raise AssertionError("a reduce body ends with its yield")


def _without(t: object, dim: int) -> TileType:
    assert isinstance(t, TileType)
    return TileType(t.shape[:dim] + t.shape[dim + 1:], t.element)


def _carry_scan(body: Block, scan: Operation, copy: Operation, run: Value) -> tuple[Value, Value]:
    """The chunk's scan `copy` combined with the running value `run` of the chunks before it (after
    it, for a reverse scan: on the right then), and the running value after the chunk: `run` combined
    with the reduce of the chunk (the scan's body)."""
    dim, location = int(scan.attributes["dim"]), scan.location
    reverse = bool(scan.attributes.get("reverse"))
    chunk = copy.results[0].type
    assert isinstance(chunk, TileType)
    attributes = {k: v for k, v in scan.attributes.items() if k != "reverse"}
    total = body.append(Operation("cuda_tile.reduce", [copy.operands[0]], [_without(chunk, dim)], attributes,
                                  regions=[Region([_clone_block(scan.regions[0].blocks[0])])],
                                  location=location)).results[0]
    after = _combine(body, scan, [total], [run])[0] if reverse else _combine(body, scan, [run], [total])[0]
    unit = TileType(chunk.shape[:dim] + (1,) + chunk.shape[dim + 1:], chunk.element)
    flat = body.append(Operation("cuda_tile.reshape", [run], [unit], {}, location=location)).results[0]
    spread = body.append(Operation("cuda_tile.broadcast", [flat], [chunk], {}, location=location)).results[0]
    if reverse:
        return _combine(body, scan, [copy.results[0]], [spread])[0], after
    return _combine(body, scan, [spread], [copy.results[0]])[0], after


def _identity(at: Operation, reduce: Operation, t: object, index: int = 0) -> Value:
    """The reduce's (or scan's) identity of operand `index`, splat over `t`: the accumulator before the
    first chunk."""
    return at.insert_before(_identity_op(reduce, t, index, at.location)).results[0]


def _identity_op(reduce: Operation, t: object, index: int, location: object) -> Operation:
    """The constant of `_identity`."""
    ident = reduce.attributes["identities"][index]
    assert isinstance(t, TileType) and isinstance(t.element, ScalarType)
    width = storage_bytes(t.element)
    bits = ident.bits if hasattr(ident, "bits") else int(ident.value if hasattr(ident, "value") else ident)
    raw = (bits % (1 << (8 * width))).to_bytes(width, "little")
    return Operation("cuda_tile.constant", [], [t], {"value": DenseElements(t, raw)}, location=location)


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
        coords.append(q if stride * k >= _product(splits) else
                      emit.op("cuda_tile.remi", [q, emit.const(k)], {"signedness": "unsigned"}))
        stride *= k
    return list(reversed(coords))


def _chunk_access(op: Operation, operands: list[Value], part: tuple[int, ...], axes: Axes,
                  coord: Callable[[int], tuple[int, Optional[Value], object]], views: dict[Value, Value],
                  emit: _Body) -> list[Value]:
    """The operands of a view load/store of one chunk (`part`, the chunk's shape in the tile's own
    axes, which run along `axes` of the space; `coord` gives per axis its chunks, the chunk's index
    and a key): the twin view of chunk-sized tiles (made beside the view; one per view and chunk
    shape), and per split axis the tile index `index * k + c`."""
    view = op.operand("view")
    assert view is not None
    if (view, part) not in views:
        views[view, part] = twin_view(view, part)  # type: ignore[index]
    operands[operands.index(view)] = views[view, part]  # type: ignore[index]
    index = op.operand_group("index")
    start = next(i for i in range(len(op.operands)) if op.operands[i:i + len(index)] == index)
    for axis, along in enumerate(axes):
        if along < 0:
            continue   # a unit axis: the chunk's index is the tile's
        k, c, what = coord(axis)
        if c is None:
            continue
        key = (operands[start + axis], what, id(emit.block))
        if key not in emit.indices:   # accesses at one tile index in one block share its arithmetic
            scaled = emit.op("cuda_tile.muli", [key[0], emit.const(k)], {"overflow": "none"})
            emit.indices[key] = emit.op("cuda_tile.addi", [scaled, c], {"overflow": "none"})  # type: ignore[index]
        operands[start + axis] = emit.indices[key]  # type: ignore[index]
    return operands
