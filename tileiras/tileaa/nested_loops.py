"""The nested form of a looped group (tileaa/tile_loops.py): an outer loop over blocks of the kept axes.

A reduction is carried by its loop when its result fits a chunk, and computed chunk by chunk when
its reduced axis fits one; a reduction whose result and reduced axis are both longer (a 1024x1024
tile summed along either axis on one warp: chunks of 512) fits neither. Its group is then computed
in two levels: an outer loop over blocks of the axes its reductions keep (`Group.outer`), each block
as long as a chunk allows, and in its body the group's phases (tile_phases.py) for that block: a
loop over the chunks of the reduced axis carrying the block's accumulator, then what reads it (a
store of the block of the result, a broadcast back over the block's rows) in the block's chunks.
A scan along that axis runs the same way, its running value block-sized. A cat along that axis
makes each such loop one per window of it (`cat_windows.py`), the block's accumulator carried from
one window's loop to the next. The code is that of one chunk per phase (per window), whatever the
tile's size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Block, Operation, Region, Value
from .tile_phases import Phase, phases

if TYPE_CHECKING:
    from .tile_loops import Group

# Along the reduced axis, a chunk reads a run of this many elements where that axis is the innermost
# one (a warp's 128-byte line of f32: loads stay coalesced); along another axis, one element (the
# kept innermost axis then holds the chunk's run, and the accumulator grows element-wise).
RUN = 32


class Outer:
    """The body of the outer loop: where each phase goes (before its `continue`), the block's index
    along each space axis (None where the outer loop does not split it), and what a phase hands the
    later ones (a reduction's result -> the accumulator its loop ends with)."""

    def __init__(self, at: Operation, coords: list[Optional[Value]]) -> None:
        self.at, self.coords = at, coords
        self.copies: dict[Value, Value] = {}


def reduced_axis(group: "Group") -> Optional[int]:
    """The space axis every reduction and scan of the group runs along (but its cross reductions,
    `cross_reductions.py`), where the group may take the nested form: reductions and scans along one
    axis, no reduction carried (each result longer than a chunk), member loops that do not store."""
    from .tile_loops import _carried

    if any("store" in op.short_name for op in group.inner):
        return None   # a member loop that stores would store again in each phase that reads it
    runs = [op for op in group.ops if op.name in ("cuda_tile.reduce", "cuda_tile.scan") and op not in group.cross]
    along = {group.axes[op.operands[0]][int(op.attributes["dim"])] for op in runs}
    if len(along) != 1 or any(_carried(op, group) for op in runs):
        return None
    axis = along.pop()
    return axis if axis >= 0 else None


def chunk(group: "Group", axis: int, size: int) -> tuple[int, ...]:
    """The chunk of the nested form: `RUN` elements (or 1) along reduced `axis`, the rest of `size`
    over the kept axes from the innermost out."""
    space = group.space
    out = [1] * len(space)
    out[axis] = min(space[axis], RUN if axis == len(space) - 1 else 1)
    left = size // out[axis]
    for a in reversed(range(len(space))):
        if a != axis:
            out[a] = max(1, min(space[a], left))
            left //= out[a]
    return tuple(out)


def chunks(group: "Group", axis: int, size: int) -> list[tuple[int, ...]]:
    """The chunks the nested form may take, best first: `chunk`'s, then one run of the space, filled
    from its innermost axis out (where a tile merges axes: a chunk reads one run of it, `_fits`)."""
    space, left = group.space, size
    run = [1] * len(space)
    for a in reversed(range(len(space))):
        run[a] = max(1, min(space[a], left))
        left //= run[a]
    return [chunk(group, axis, size), tuple(run)]


def plan(block: Block, group: "Group", cross: bool = False) -> Optional[tuple[tuple[int, ...], list[Phase]]]:
    """The chunk and the phases of `group` in the nested form (setting `group.outer`), or None where it
    does not take it. With `cross`: a group reducing along two axes, one reduction reading the others
    (`cross_reductions.py`: those computed in each chunk, setting `group.cross`)."""
    from . import cross_reductions
    from .tile_loops import _fits, _scan_axes

    chosen = cross_reductions.choose(group) if cross else None
    if cross and chosen is None:
        return None
    group.cross = chosen[1] if chosen else set()
    axis = reduced_axis(group)
    if axis is None:
        group.cross = set()
        return None
    group.outer = tuple(a for a in range(len(group.space)) if a != axis)
    fitting = [part for part in chunks(group, axis, group.chunk)   # (a reduced axis whole: the flat form's case)
               if part[axis] < group.space[axis] and _fits(group, part)]
    reduces = {op for op in group.ops if op.name == "cuda_tile.reduce"} - group.cross
    steps = phases(block, group.ops, reduces, inside=True) if fitting else None
    part = fitting[0] if fitting else ()
    if steps is not None and group.cats:
        steps = windows(group, part, steps, {a for a, reverse in _scan_axes(group) if reverse})
    if steps is None:
        group.outer, group.cross = (), set()
    return (part, steps) if steps is not None else None


def windows(group: "Group", part: tuple[int, ...], steps: list[Phase], reverse: set[int]) -> Optional[list[Phase]]:
    """The phases `steps` of a nested group with cats, as loops over windows (`cat_windows.windows`):
    those whose tiles run along a joined axis one per window, the others (a store of the block's
    results, cats along the reduced axis only) once. A window along a kept axis is a window of blocks:
    an outer loop of its own, its phases in its body (the phases grouped by it, in their order); None
    where a phase would lie in none."""
    from . import cat_windows

    out: list[Phase] = []
    joined = {cat_windows.joined_axis(group, cat) for cat in group.cats}
    for step in steps:
        if not any(a in joined for op in step.ops for v in (*op.operands, *op.results)
                   if v in group.axes for a in group.axes[v]):
            out.append(step)
            continue
        each = cat_windows.windows(group, part, [step], reverse)
        if each is None:
            return None
        out += each
    keys = [blocks(group, step) for step in out]
    if joined & set(group.outer) and not all(keys):
        return None
    order = list(dict.fromkeys(keys))
    return [step for _, step in sorted(zip(keys, out), key=lambda pair: order.index(pair[0]))]


def blocks(group: "Group", step: Phase) -> tuple[tuple[int, tuple[int, int]], ...]:
    """The window of blocks phase `step` runs in: its window along the outer loop's axes."""
    return tuple(sorted((a, w) for a, w in (step.window or {}).items() if a in group.outer))


def enclose(group: "Group", part: tuple[int, ...], at: Operation, window: Optional[dict] = None) -> Outer:
    """The outer loop over the blocks of `part` along `group.outer` (those of `window`, a window of
    blocks: along its axes, its blocks' indices count from its first), before `at`, with an empty
    body but for the blocks' indices."""
    from .tile_loops import _I32, _Body, _chunk_coords, _outside_const

    window = window or {}
    splits = [window[a][1] if a in window else n // p if a in group.outer else 1
              for a, (n, p) in enumerate(zip(group.space, part))]
    count = 1
    for k in splits:
        count *= k
    bounds = [_outside_const(at, v) for v in (0, count, 1)]
    body = Block([_I32])
    at.insert_before(Operation("cuda_tile.for", bounds, [], {}, regions=[Region([body])], location=at.location))
    coords = _chunk_coords(_Body(body, at.location), body.arguments[0], splits)
    end = body.append(Operation("cuda_tile.continue", [], [], {}, location=at.location))
    return Outer(end, coords)
