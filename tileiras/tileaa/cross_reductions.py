"""Reductions across the nested form's loops (tileaa/nested_loops.py): recomputed in each chunk.

A tile less its rows' sums, then less the sums of that tile's columns (a 1024x1024 tile on one warp:
chunks of 512) reduces along two axes, and the second reduction reads the first: no pass per axis
(axis_passes.py) serves, since the columns' pass would need every row's sum in each of its blocks.
The nested form then runs along the axis of the reductions that read the others (the columns' sums:
an outer loop over blocks of columns, the rows' loop in its body), and each reduction along the
other axis (a cross reduction) is computed where a chunk needs it: a loop of its own, in the chunk,
over the chunks of the axis it reduces, carrying the chunk's share of its result (the sums of the
chunk's rows). What it reads (the tile's load) is read again there: the tile is read once more per
block of the outer loop, for the code of one chunk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Block, Operation, Region, Value
from .axis_passes import axis, depends, sinks
from .tile_phases import ancestors

if TYPE_CHECKING:
    from .tile_loops import Group, _Chunk


def choose(group: "Group") -> Optional[tuple[int, set[Operation]]]:
    """The nested form's axis and the cross reductions of `group`, where its reductions and scans run
    along two axes, those along one of them are reductions that read no reduction or scan (the cross
    ones, their results too long to carry: chunked), every op that ends the group (a store) reads a
    reduction along the other, and no cat joins its tiles."""
    deps = depends(group)
    axes = {a for op in group.ops for a in [axis(group, op)] if a is not None}
    if group.cats:
        return None   # (a cross reduction's loop runs over the whole axis: no windows)
    for along in sorted(axes):
        cross = {op for op in group.ops if axis(group, op) not in (None, along)}
        if len(axes) == 2 and all(op.name == "cuda_tile.reduce" and deps[op] == {axis(group, op)}
                                  and all(r in group.axes for r in op.results) for op in cross) \
                and all(along in deps[op] for op in sinks(group)):
            return along, cross
    return None


def compute(group: "Group", part: tuple[int, ...], chunk: "_Chunk", reduce: Operation, ops: list[Operation],
            handed: dict[Value, Value], into: Block) -> None:
    """The chunk's share of cross reduction `reduce` (a member of the phase computing `ops`, `handed` what
    the earlier phases computed): a loop, appended to `into`, over the chunks of the axis it reduces, the
    others the chunk's (`chunk.coords`), computing what it reads and carrying its accumulators. The
    chunk's copies of its results are the loop's."""
    from .tile_loops import _I32, _Body, _Chunk, _chunk_coords, _chunk_type, _combine, _identity_op

    along = axis(group, reduce)
    assert along is not None
    location = reduce.location
    emit = _Body(into, location)
    inits = [into.append(_identity_op(reduce, _chunk_type(group, r, part), i, location)).results[0]
             for i, r in enumerate(reduce.results)]
    bounds = [emit.const(v) for v in (0, group.space[along] // part[along], 1)]
    body = Block([_I32, *(v.type for v in inits)])
    loop = into.append(Operation("cuda_tile.for", [*bounds, *inits], [v.type for v in inits], {},
                                 regions=[Region([body])], location=location))
    inner = _Body(body, location)
    coords = list(chunk.coords)
    coords[along] = _chunk_coords(inner, body.arguments[0], [group.space[along] // part[along]])[0]
    share = _Chunk(group, part, chunk.splits, coords, inner, chunk.window, chunk.where)
    share.copies.update(handed)
    share.views = chunk.views   # (the twin views of the chunk's accesses)
    for op in _reads(reduce, ops):
        share.clone(op, body)
    copy = share.clone(reduce, body)
    carried = _combine(body, reduce, list(body.arguments[1:]), list(copy.results))
    body.append(Operation("cuda_tile.continue", carried, [], {}, location=location))
    chunk.copies.update(zip(reduce.results, loop.results))


def _reads(reduce: Operation, ops: list[Operation]) -> list[Operation]:
    """The ops of `ops` that `reduce` reads, directly or not, in their order."""
    read = ancestors([reduce], set(ops), set()) - {reduce}
    return [op for op in ops if op in read]
