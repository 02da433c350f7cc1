"""The loops of a looped group with `cat`s (tileaa/tile_loops.py): one per window of the space.

A cat makes the group's space its result's; each operand is a tile of the space placed at an offset
along the joined axis (`Group.offsets`, nested cats adding their own). The cats' operands cut the
joined axes into segments; a window is one segment per such axis, and each phase's loop becomes one
loop per window over the chunks it holds, computing the ops whose tiles cover the window (a cat's
chunk there is that of the operand covering it). A reduction or scan that runs along a joined axis
is carried from one window's loop to the next (its accumulator, its running value), the windows
visited in the scan's order: the loops then compute what one loop over the whole space would.
"""

from __future__ import annotations

from itertools import product
from math import gcd
from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation, Value
from .tile_phases import Phase

if TYPE_CHECKING:
    from .tile_loops import Group

# a loop's window: space axis -> (its first chunk along the axis, how many chunks)
Window = dict[int, tuple[int, int]]


def joined_axis(group: "Group", cat: Operation) -> int:
    return group.axes[cat.results[0]][int(cat.attributes["dim"])]


def extent(group: "Group", value: Value, along: int) -> Optional[tuple[int, int]]:
    """Where along space axis `along` tile `value` of the group lies ([start, end)); None where it does
    not run along it (then it is the same in every window)."""
    axes = group.axes[value]
    if along not in axes:
        return None
    start = group.offsets.get(value, {}).get(along, 0)
    return start, start + value.type.shape[axes.index(along)]  # type: ignore[union-attr]


def boundaries(group: "Group") -> dict[int, list[int]]:
    """Per joined space axis, the points where a tile of the group starts or ends along it, sorted."""
    points: dict[int, set[int]] = {joined_axis(group, cat): set() for cat in group.cats}
    for along in points:
        points[along] |= {0, group.space[along]}
        for value in group.axes:
            points[along] |= set(extent(group, value, along) or ())
    return {along: sorted(p) for along, p in points.items()}


def longest_chunk(group: "Group", along: int) -> int:
    """The longest run along joined axis `along` that a chunk may have: a power of two dividing every
    boundary (a chunk then never spans two tiles)."""
    g = 0
    for p in boundaries(group).get(along, []):
        g = gcd(g, p)
    return g & -g if g else group.space[along]


def fits(group: "Group", part: tuple[int, ...]) -> bool:
    """Whether chunks `part` fall each within one tile along every joined axis."""
    return all(p % part[along] == 0 for along, points in boundaries(group).items() for p in points)


def _covers(group: "Group", value: Value, lo: dict[int, int], hi: dict[int, int]) -> bool:
    for along in lo:
        e = extent(group, value, along)
        if e is not None and not (e[0] <= lo[along] and hi[along] <= e[1]):
            return False
    return True


def operand_at(group: "Group", cat: Operation, window: Window, part: tuple[int, ...]) -> Value:
    """The operand of `cat` whose tile holds `window`."""
    along = joined_axis(group, cat)
    lo = window[along][0] * part[along]
    return next(v for v in cat.operands if extent(group, v, along)[0] <= lo < extent(group, v, along)[1])  # type: ignore[index]


def windows(group: "Group", part: tuple[int, ...], plan: list[Phase], reverse: set[int]) -> Optional[list[Phase]]:
    """Each phase of `plan` as one loop per window (the windows along an axis in `reverse`, scanned
    backwards, last first); None where an op of one window's loop would read what only another's
    computes."""
    points = boundaries(group)
    axes = sorted(points)
    segments = []
    for along in axes:
        runs = list(zip(points[along], points[along][1:]))
        segments.append(runs[::-1] if along in reverse else runs)
    out = []
    for phase in plan:
        for runs in product(*segments):
            lo = {a: r[0] for a, r in zip(axes, runs)}
            hi = {a: r[1] for a, r in zip(axes, runs)}
            ops, skipped = [], set()
            for op in phase.ops:
                tiles = [v for v in (op.results if op.name == "cuda_tile.cat" else (*op.operands, *op.results))
                         if v in group.axes]
                if not all(_covers(group, v, lo, hi) for v in tiles):
                    skipped.add(op)
                elif op.name != "cuda_tile.cat" and any(getattr(v, "owner", None) in skipped for v in op.operands):
                    return None   # (a join of both sides' tokens)
                else:
                    ops.append(op)
            if not ops:
                continue   # the phase computes nothing there
            window = {a: (lo[a] // part[a], (hi[a] - lo[a]) // part[a]) for a in axes}
            out.append(Phase(ops, [op for op in phase.reduces if op in ops], phase.before, window))
    return out
