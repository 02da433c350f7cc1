"""Pass `cse`: an effect-free op equal to one that dominates it is replaced by that op's results.

Equal means the same name, operands, attributes and result types. Scopes follow dominance: a block sees
the ops of the blocks around it, never those of a sibling region (MLIR's CSE on single-block regions).
Only values of at most one element a thread merge (views, tokens, assumes, scalars and their index and
shape arithmetic): two equal tiles of many elements (an iota read as rows and as columns) may want
different layouts, and whether one value should serve both is the layout level's decision.
"""

from __future__ import annotations

from typing import Any, Hashable, Optional

from ..ir.core import Block, Operation
from .rewrite import is_movable, is_small, replace


def cse(entry: Operation) -> bool:
    """Merge equal effect-free ops of `entry`; True if anything changed."""
    return _block_scopes(entry, [{}])


def _block_scopes(op: Operation, scopes: list[dict[Hashable, Operation]]) -> bool:
    changed = False
    for region in op.regions:
        for block in region.blocks:
            scopes.append({})
            changed |= _cse_block(block, scopes)
            scopes.pop()
    return changed


def _cse_block(block: Block, scopes: list[dict[Hashable, Operation]]) -> bool:
    changed = False
    for op in list(block.operations):
        if op.regions:
            changed |= _block_scopes(op, scopes)
            continue
        if not is_movable(op) or not op.results or not all(is_small(r) for r in op.results):
            continue
        key = _key(op)
        if key is None:
            continue
        twin = next((s[key] for s in reversed(scopes) if key in s), None)
        if twin is None:
            scopes[-1][key] = op
        else:
            replace(op, twin.results)
            changed = True
    return changed


def _key(op: Operation) -> Optional[Hashable]:
    key = (op.name, tuple(map(id, op.operands)), tuple(op.attributes.items()), tuple(r.type for r in op.results),
           op.segment_sizes)
    try:
        hash(key)
    except TypeError:   # a list or dict attribute: compare it frozen
        try:
            key = key[:2] + (tuple((k, _frozen(v)) for k, v in op.attributes.items()),) + key[3:]
            hash(key)
        except TypeError:   # an attribute with no equality we trust: leave the op alone
            return None
    return key


def _frozen(value: Any) -> Hashable:
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    return value
