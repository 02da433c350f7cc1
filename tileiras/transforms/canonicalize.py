"""Pass `canonicalize`: the folds (folds.py) and the structural patterns of `if`, to a fixed point.

The `if` patterns (seed 004, "cuda_tile Canonicalizers and Folds"):
* a constant condition inlines the branch it takes (its ops move before the `if`);
* a condition `xori(c, true)` with an else branch becomes `c` with the branches swapped;
* two adjacent `if`s on the same condition become one (CombineIfs);
* `if a { if b { ... } }`, neither with results nor an else that does anything, becomes
  `if (a and b) { ... }` (CombineNestedIfs; the spec's form also takes an outer else yielding poison,
  which cuda_tile cannot write);
* a result both branches yield as the same value is that value; unused results are dropped;
* branches that only yield become `select`s where the values have the condition's shape
  (ConvertToSelect; a select needs its condition in the values' shape, a token none);
* an else that only yields, with no results, is dropped (RemoveEmptyElseBranch); an `if` with no
  results and nothing but yields in its branches is erased;
* a branch ending in `return`, where nothing but the kernel's exit follows the `if`'s block, ends in a
  yield, and the ops after the `if` move into the other branch (MoveTerminatorToParent): the kernel
  has one exit, as tensor memory and warp-specialized pipelines need (`if pid >= n: return`).
No pattern reorders, duplicates or erases a token-ordered memory op.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Block, Operation, Region, Value
from ..ir.types import TileType
from .constants import splat_int
from .folds import fold
from .rewrite import defining_op, erase, erase_tree, inside_op, is_movable, replace, unused

_MAX_ROUNDS = 32   # each round strictly shrinks or settles the IR; a bound keeps a bug from hanging


def canonicalize(entry: Operation) -> bool:
    """Fold and simplify `entry` until nothing changes; True if anything did."""
    changed = False
    for _ in range(_MAX_ROUNDS):
        if not _round(entry):
            break
        changed = True
    return changed


def _round(entry: Operation) -> bool:
    changed = False
    for op in list(entry.walk()):
        if op.parent is None or op is entry:   # erased by an earlier rewrite of this round
            continue
        if op.name == "cuda_tile.if":
            changed |= _canonical_if(op)
            continue
        values = fold(op)
        if values is not None:
            producers = [defining_op(v) for v in op.operands]
            replace(op, values)
            _erase_dead(producers)
            changed = True
    return changed


def _erase_dead(ops: list) -> None:
    """Erase those of `ops` a fold left unused and effect-free, and then their producers so left (as the
    greedy driver erases trivially dead ops: a fold that asks for a value's one reader sees it)."""
    while ops:
        op = ops.pop()
        if op is not None and op.parent is not None and is_movable(op) and unused(op):
            ops += [defining_op(v) for v in op.operands]
            erase(op)


def _canonical_if(op: Operation) -> bool:
    cond = splat_int(op.operands[0])
    if cond is not None:
        return _inline(op, bool(cond))
    if _hoist_return(op) or _invert(op) or _combine_with_next(op) or _combine_nested(op):
        return True
    if _forward_same_yields(op) | _drop_unused_results(op):
        return True
    if _to_select(op) or _drop_empty_else(op):
        return True
    if not op.results and all(_only_yields(b) for r in op.regions for b in r.blocks):
        erase_tree(op)
        return True
    return False


def _branch(op: Operation, taken: bool) -> Optional[Block]:
    region = op.regions[0] if taken else (op.regions[1] if len(op.regions) > 1 else None)
    return region.blocks[0] if region is not None and region.blocks else None


def _inline(op: Operation, taken: bool) -> bool:
    block = _branch(op, taken)
    if block is None:   # an if without else whose condition is false: nothing runs (and nothing is yielded)
        erase_tree(op)
        return True
    last = block.terminator
    if last is None or last.name != "cuda_tile.yield":   # break/continue/return leave the if: keep it
        return False
    for inner in block.operations[:-1]:
        op.insert_before(inner)
    block.operations = [last]
    values = list(last.operands)
    erase(last)
    for result, value in zip(op.results, values):
        result.replace_all_uses_with(value)
    erase_tree(op)
    return True


def _invert(op: Operation) -> bool:
    if len(op.regions) < 2 or not op.regions[1].blocks:
        return False
    xor = defining_op(op.operands[0])
    if xor is None or xor.name != "cuda_tile.xori":
        return False
    one = splat_int(xor.operands[1])
    if one is None or not bool(one):
        return False
    op.set_operand(0, xor.operands[0])
    op.regions[0], op.regions[1] = op.regions[1], op.regions[0]
    return True


def _combine_with_next(op: Operation) -> bool:
    """Two adjacent `if`s on the same condition, both branches ending in yields, become one: the second's
    branches follow the first's, its results come after the first's (CombineIfs)."""
    block = op.parent
    at = block.operations.index(op)
    nxt = block.operations[at + 1] if at + 1 < len(block.operations) else None
    if nxt is None or nxt.name != "cuda_tile.if" or nxt.operands[0] is not op.operands[0]:
        return False
    if len(op.regions) != len(nxt.regions) or len(_yields(op)) != len(op.regions) or \
            len(_yields(nxt)) != len(nxt.regions):
        return False
    if any(inside_op(user, nxt) for r in op.results for user in r.uses):   # the merge would break dominance
        return False
    merged = Operation(op.name, [op.operands[0]], [r.type for r in op.results + nxt.results], op.attributes,
                       location=op.location, segment_sizes=op.segment_sizes)
    op.insert_before(merged)
    for first, second in zip(op.regions, nxt.regions):
        a, b = first.blocks[0], second.blocks[0]
        yield_a, yield_b = a.terminator, b.terminator
        values = list(yield_a.operands) + list(yield_b.operands)
        erase(yield_a)
        erase(yield_b)
        for inner in list(b.operations):
            b.operations.remove(inner)
            a.append(inner)
        a.append(Operation("cuda_tile.yield", values, [], location=yield_a.location))
        b.operations = []
    for region in list(op.regions):
        merged.add_region(region)
    op.regions = []
    n = len(op.results)
    for old, new in zip(op.results, merged.results[:n]):
        old.replace_all_uses_with(new)   # the second if's branches read the first's results from here on
    for old, new in zip(nxt.results, merged.results[n:]):
        old.replace_all_uses_with(new)
    erase_tree(nxt)
    erase(op)
    return True


def _yields(op: Operation) -> list[list[Value]]:
    return [list(r.blocks[0].terminator.operands) for r in op.regions if r.blocks and r.blocks[0].terminator
            is not None and r.blocks[0].terminator.name == "cuda_tile.yield"]


def _forward_same_yields(op: Operation) -> bool:
    yields = _yields(op)
    if len(yields) != 2:
        return False
    changed = False
    for i, result in enumerate(op.results):
        a, b = yields[0][i], yields[1][i]
        if a is b and result.uses:
            result.replace_all_uses_with(a)
            changed = True
    return changed


def _drop_unused_results(op: Operation) -> bool:
    keep = [i for i, r in enumerate(op.results) if r.uses]
    if len(keep) == len(op.results) or len(_yields(op)) != len(op.regions):
        return False
    for region in op.regions:
        block = region.blocks[0]
        last = block.terminator
        new_last = Operation(last.name, [last.operands[i] for i in keep], [], last.attributes, location=last.location)
        erase(last)
        block.append(new_last)
    _keep_results(op, keep)
    return True


def _keep_results(op: Operation, keep: list[int]) -> None:
    """`op` rebuilt with only its results `keep` (their uses follow), its regions moved over."""
    twin = Operation(op.name, list(op.operands), [op.results[i].type for i in keep], op.attributes,
                     location=op.location, segment_sizes=op.segment_sizes)
    for region in list(op.regions):
        twin.add_region(region)
    op.regions = []
    op.insert_before(twin)
    for new, i in zip(twin.results, keep):
        op.results[i].replace_all_uses_with(new)
    erase(op)


def _only_yields(block: Block) -> bool:
    return [o.name for o in block.operations] == ["cuda_tile.yield"]


def _drop_empty_else(op: Operation) -> bool:
    """An else branch that only yields nothing, of an `if` without results (RemoveEmptyElseBranch)."""
    if op.results or len(op.regions) < 2 or not op.regions[1].blocks or not _only_yields(op.regions[1].blocks[0]):
        return False
    erase_tree(op.regions[1].blocks[0].terminator)
    op.regions[1].blocks = []        # an if without else: its else region holds no block
    return True


def _combine_nested(op: Operation) -> bool:
    """`if a { if b { X } }` -> `if (a and b) { X }` (CombineNestedIfs): no results, no else doing
    anything at either level, and the inner condition (defined outside: the outer branch holds only the
    inner `if`) of the outer's type."""
    if op.results or not op.regions[0].blocks:
        return False
    body = op.regions[0].blocks[0]
    if len(body.operations) != 2 or body.operations[0].name != "cuda_tile.if" \
            or body.operations[1].name != "cuda_tile.yield" or body.operations[1].operands:
        return False
    inner = body.operations[0]
    if inner.results or inner.operands[0].type != op.operands[0].type or not inner.regions[0].blocks:
        return False
    if any(len(x.regions) > 1 and x.regions[1].blocks and not _only_yields(x.regions[1].blocks[0]) for x in (op, inner)):
        return False
    inner_body = inner.regions[0].blocks[0]
    if inner_body.terminator is None or inner_body.terminator.name != "cuda_tile.yield":
        return False                # a break / continue / return inside: its exit is the inner if's
    both = op.insert_before(Operation("cuda_tile.andi", [op.operands[0], inner.operands[0]], [op.operands[0].type],
                                      location=op.location))
    op.set_operand(0, both.results[0])
    for moved in inner_body.operations[:-1]:
        inner.insert_before(moved)
    inner_body.operations = inner_body.operations[-1:]
    erase_tree(inner)
    return True


def _to_select(op: Operation) -> bool:
    """Branches that only yield, results of the condition's shape: `select`s (ConvertToSelect)."""
    cond = op.operands[0]
    yields = _yields(op)
    if not op.results or len(yields) != 2 or len(op.regions) != 2 \
            or not all(_only_yields(r.blocks[0]) for r in op.regions):
        return False
    if not all(isinstance(r.type, TileType) and isinstance(cond.type, TileType) and r.type.shape == cond.type.shape
               and str(r.type.element) != "f4E2M1FN" for r in op.results):
        return False
    values = [op.insert_before(Operation("cuda_tile.select", [cond, a, b], [r.type], location=op.location)).results[0]
              for r, a, b in zip(op.results, yields[0], yields[1])]
    for result, value in zip(op.results, values):
        result.replace_all_uses_with(value)
    erase_tree(op)
    return True


def _exits_after(block: Block) -> bool:
    """Whether the kernel exits once `block` ends: it ends in `return`, or in a yield of nothing as a
    branch of an `if` that only the exit follows."""
    last = block.terminator
    if last is not None and last.name == "cuda_tile.return":
        return True
    owner = block.parent.parent if block.parent is not None else None
    if last is None or last.name != "cuda_tile.yield" or last.operands or owner is None \
            or owner.name != "cuda_tile.if" or owner.parent is None:
        return False
    outer = owner.parent
    return outer.operations.index(owner) == len(outer.operations) - 2 and _exits_after(outer)


def _hoist_return(op: Operation) -> bool:
    """MoveTerminatorToParent: a branch ends in `return` and the kernel exits once the `if`'s block ends:
    the ops between the `if` and the block's end move to the end of the other branch (whose yields
    replace the `if`'s results), and each `return` of a branch becomes a yield of nothing."""
    block = op.parent
    if not _exits_after(block):
        return False
    branches = [r.blocks[0] for r in op.regions if r.blocks]
    returning = [b for b in branches if b.terminator is not None and b.terminator.name == "cuda_tile.return"]
    if not returning:
        return False
    others = [b for b in branches if b not in returning]
    if others and (others[0].terminator is None or others[0].terminator.name != "cuda_tile.yield"):
        return False
    rest = block.operations[block.operations.index(op) + 1:-1]
    if others:
        other = others[0]
        for result, value in zip(op.results, list(other.terminator.operands)):
            result.replace_all_uses_with(value)
        _end_with_yield(other, rest)
    elif len(branches) == 1:          # no else: the rest is its else
        if len(op.regions) < 2:
            op.add_region(Region())
        _end_with_yield(op.regions[1].add_block(Block()), rest)
    else:                             # both branches return: what follows never runs
        for dead in reversed(rest):
            erase_tree(dead)
    for branch in returning:
        _end_with_yield(branch, [])
    if op.results:               # their uses were replaced by the other branch's yields (or erased)
        _keep_results(op, [])
    return True


def _end_with_yield(block: Block, moved: list[Operation]) -> None:
    """`block`'s terminator replaced by `moved` (taken from their block) and a yield of nothing."""
    last = block.terminator
    location = last.location if last is not None else None
    if last is not None:
        erase(last)
    for inner in moved:
        inner.parent.operations.remove(inner)
        block.append(inner)
    block.append(Operation("cuda_tile.yield", [], [], location=location))
