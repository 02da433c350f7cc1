"""A looped group whose reductions run along several axes (tileaa/tile_loops.py): a pass per axis.

A tile reduced along two axes, each longer than a chunk (a 1024x1024 tile's row sums and its column
maxima, on one warp: chunks of 512), takes neither the flat form (a chunk would keep both axes
whole) nor the nested one (its outer loop splits the axes one reduction keeps, which the other
reduces). Each reduction axis then gets a pass of its own: the group's ops that lead to the
reductions and scans along that axis and to what reads them, looped as a group of their own (flat or
nested), each pass reading again what it loads, from its view; what depends on no reduction (a
store of the tile doubled) makes a pass of its own (in one of theirs, it would store before their
last loop, which `tile_phases.py` refuses). An op that reads reductions along two axes (a tile less
its row means, then less that tile's column means) would need one pass's results across the other
pass's blocks: such a group is not split (it stays refused by the compile limits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation, Value
from ..ir.types import TokenType
from .tile_phases import ancestors

if TYPE_CHECKING:
    from .tile_loops import Group

# ops that run along one axis of the space: the one their operand's `dim` runs along
_RUNS = ("cuda_tile.reduce", "cuda_tile.scan")
# ops no pass needs (what they order is ordered by the passes' places): dropped with the group
_DROPPED = ("cuda_tile.join_tokens",)
# ops with effects that may lie between the members of a group split into passes (`apart`)
_ACCESSES = ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko", "cuda_tile.load_ptr_tko",
             "cuda_tile.store_ptr_tko")


def axis(group: "Group", op: Operation) -> Optional[int]:
    """The space axis reduction or scan `op` runs along (None for any other op, or a unit axis)."""
    if op.name not in _RUNS:
        return None
    along = group.axes[op.operands[0]][int(op.attributes["dim"])]
    return along if along >= 0 else None


def depends(group: "Group") -> dict[Operation, frozenset[int]]:
    """Per member, the axes of the reductions and scans it reads, directly or not (its own included)."""
    out: dict[Operation, frozenset[int]] = {}
    for op in group.ops:
        mine = {a for v in op.operands for a in out.get(getattr(v, "owner", None), ())}  # type: ignore[arg-type]
        own = axis(group, op)
        out[op] = frozenset(mine | ({own} if own is not None else set()))
    return out


def sinks(group: "Group") -> list[Operation]:
    """The members no member reads (stores, results read after the group), but the dropped ones."""
    members = set(group.ops)
    return [op for op in group.ops if op.name not in _DROPPED
            and not any(user in members for r in op.results for user in r.uses)]


def split(group: "Group") -> Optional[list["Group"]]:
    """The passes of `group`, one per axis its reductions and scans run along (in axis order; then the
    one of what reads no reduction, where anything does), or None
    where it has fewer than two such axes, holds what a pass cannot (member loops), or an op reads
    reductions along two axes."""
    deps = depends(group)
    axes = sorted({a for op in group.ops for a in [axis(group, op)] if a is not None})
    if len(axes) < 2 or group.inner:
        return None
    ends: dict[Optional[int], list[Operation]] = {a: [] for a in axes}
    for op in sinks(group):
        if len(deps[op]) > 1:
            return None
        ends.setdefault(min(deps[op], default=None), []).append(op)
    members = set(group.ops)
    passes = []
    for a, last in ends.items():
        ops = ancestors(last, members, set())
        if not ops:
            continue   # reductions nothing reads
        if any(deps[op] - {a} for op in ops):
            return None
        part = _part(group, [op for op in group.ops if op in ops])
        if part is None:
            return None
        passes.append(part)
    return passes


def _part(group: "Group", ops: list[Operation]) -> Optional["Group"]:
    """A group of `group`'s space holding `ops` (in block order) and their tiles, its cats' operands
    placed (`cat_windows.place`); None where they cannot be."""
    from .cat_windows import place
    from .tile_loops import Group

    part = Group(group.space, group.chunk, group.carry)
    part.ops = ops
    values: set[Value] = {v for op in ops for v in (*op.operands, *op.results)}
    part.axes = {v: a for v, a in group.axes.items() if v in values}
    part.merged = {v: m for v, m in group.merged.items() if v in values}
    part.cats = [op for op in group.cats if op in ops]
    return part if not part.cats or place(part) else None


def apart(group: "Group", between: list[Operation]) -> bool:
    """Whether `group` splits into passes and the ops with effects `between` its members (a store of
    one reduction's result before the other reduction, as cuTile writes it) are memory accesses that
    no token chain orders before or after a member. Tile IR orders accesses by their tokens alone, so
    a pass may then load again after them, or store before them: each pass's loops go where its own
    results are first read, the ops between stay where they are."""
    members = set(group.ops)
    return split(group) is not None and all(op.name in _ACCESSES and not _linked(op, members) for op in between)


def _tokens(values: object) -> list[Value]:
    return [v for v in values if isinstance(v.type, TokenType)]  # type: ignore[attr-defined]


def _linked(op: Operation, members: set[Operation]) -> bool:
    """Whether a chain of tokens runs from a member to `op`, or from `op` to a member."""
    pending, seen = _tokens(op.operands), set()
    while pending:   # what orders `op` after it
        owner = getattr(pending.pop(), "owner", None)
        if owner in members:
            return True
        if isinstance(owner, Operation) and owner not in seen:
            seen.add(owner)
            pending += _tokens(owner.operands)
    pending, seen = _tokens(op.results), set()
    while pending:   # what `op` orders after it
        for user in pending.pop().uses:
            if user in members:
                return True
            if user not in seen:
                seen.add(user)
                pending += _tokens(user.results)
    return False
