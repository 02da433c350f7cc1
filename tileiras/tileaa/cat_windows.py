"""The loops of a looped group with `cat`s (tileaa/tile_loops.py): one per window of the space.

A cat makes the group's space its result's; each operand is a tile of the space placed at an offset
along the joined axis (`Group.offsets`, nested cats adding their own; a tile two cats join, or one
cat twice, has a placement for each). The cats' operands cut the joined axes into segments; a window
is one segment per such axis, and each phase's loop becomes one loop per window over the chunks it
holds, computing the ops whose tiles cover the window, each tile at the placement that covers it
(a cat's chunk there is that of the operand covering it). A reduction or scan that runs along a
joined axis is carried from one window's loop to the next (its accumulator, its running value), the
windows visited in the scan's order: the loops then compute what one loop over the whole space would.
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
# where a tile lies: joined space axis it runs along -> where along it the tile starts
Placement = dict[int, int]
# the most placements a tile may have (the search for them stops there)
MOST_PLACEMENTS = 16


def joined_axis(group: "Group", cat: Operation) -> int:
    return group.axes[cat.results[0]][int(cat.attributes["dim"])]


def _length(group: "Group", value: Value, along: int) -> int:
    return value.type.shape[group.axes[value].index(along)]  # type: ignore[union-attr]


def place(group: "Group") -> bool:
    """Fill `group.offsets`: every placement of each tile along the joined axes it runs along, from
    what reads it. A tile as long as the space there lies at 0; a cat's operands lie where its result
    does, one after the other; the operands of any other op where its results do. False where a tile
    lies nowhere, past the space, or in too many places."""
    joined = {joined_axis(group, cat) for cat in group.cats}
    mine = {v: [a for a in group.axes[v] if a in joined] for v in group.axes}
    where: dict[Value, list[Placement]] = {
        v: [{a: 0 for a in axes}] if all(_length(group, v, a) == group.space[a] for a in axes) else []
        for v, axes in mine.items()}

    def add(value: Value, p: Placement) -> bool:
        p = {a: o for a, o in p.items() if a in mine[value]}
        if set(p) != set(mine[value]) or p in where[value]:
            return False
        where[value].append(p)
        return True

    changed = True
    while changed:
        changed = False
        for op in reversed(group.ops):   # readers first: one sweep where nothing is joined twice
            operands = [v for v in op.operands if v in group.axes]
            if op.name == "cuda_tile.cat":
                along, start = joined_axis(group, op), 0
                for operand in op.operands:
                    for p in list(where[op.results[0]]):
                        changed |= add(operand, {**p, along: p[along] + start})
                    start += operand.type.shape[int(op.attributes["dim"])]  # type: ignore[union-attr]
                continue
            for p in [p for r in op.results if r in group.axes for p in where[r]]:
                for v in operands:
                    changed |= add(v, p)
        if any(len(ps) > MOST_PLACEMENTS for ps in where.values()):
            return False
    for v, ps in where.items():
        if mine[v] and not ps or any(p[a] < 0 or p[a] + _length(group, v, a) > group.space[a] for p in ps for a in p):
            return False
    group.offsets = where
    return True


def extents(group: "Group", value: Value, along: int) -> list[tuple[int, int]]:
    """Where along space axis `along` tile `value` of the group lies ([start, end), once per placement);
    none where it does not run along it (then it is the same in every window)."""
    if along not in group.axes[value]:
        return []
    n = _length(group, value, along)
    return [(p[along], p[along] + n) for p in group.offsets.get(value, [])]


def boundaries(group: "Group") -> dict[int, list[int]]:
    """Per joined space axis, the points where a tile of the group starts or ends along it, sorted."""
    points: dict[int, set[int]] = {joined_axis(group, cat): set() for cat in group.cats}
    for along in points:
        points[along] |= {0, group.space[along]}
        for value in group.axes:
            points[along] |= {x for e in extents(group, value, along) for x in e}
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


def _covering(group: "Group", value: Value, lo: dict[int, int], hi: dict[int, int]) -> list[Placement]:
    """The placements of `value` that hold the window [lo, hi)."""
    if value not in group.offsets:
        return [{}]
    return [p for p in group.offsets[value]
            if all(p[a] <= lo[a] and hi[a] <= p[a] + _length(group, value, a) for a in p)]


def operand_at(group: "Group", cat: Operation, window: Window, part: tuple[int, ...],
               where: dict[Value, Placement]) -> Value:
    """The operand of `cat` whose tile holds `window` (where the cat's result lies there: `where`)."""
    along = joined_axis(group, cat)
    lo, start = window[along][0] * part[along], where[cat.results[0]][along]
    for operand in cat.operands:
        start += operand.type.shape[int(cat.attributes["dim"])]  # type: ignore[union-attr]
        if lo < start:
            return operand
    raise AssertionError("a window lies within the cat's result")


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
            ops, skipped, where = [], set(), {}
            for op in phase.ops:
                tiles = [v for v in (op.results if op.name == "cuda_tile.cat" else (*op.operands, *op.results))
                         if v in group.axes]
                covering = [_covering(group, v, lo, hi) for v in tiles]
                if any(len(ps) > 1 for ps in covering):
                    return None   # one tile in two places of one window
                if not all(covering):
                    skipped.add(op)
                elif op.name != "cuda_tile.cat" and any(getattr(v, "owner", None) in skipped for v in op.operands):
                    return None   # (a join of both sides' tokens)
                else:
                    ops.append(op)
                    where.update((v, ps[0]) for v, ps in zip(tiles, covering))
            if not ops:
                continue   # the phase computes nothing there
            window = {a: (lo[a] // part[a], (hi[a] - lo[a]) // part[a]) for a in axes}
            out.append(Phase(ops, [op for op in phase.reduces if op in ops], phase.before, window, where))
    return out
