"""Pass `simplify-tokens`: token chains without links that order nothing.

`join_tokens` is flattened (a joined join contributes its inputs), loses repeated inputs and tokens of
`make_token` (a fresh token orders nothing) while another input remains, and a join of one token is that
token. What each memory op is ordered after is unchanged.
"""

from __future__ import annotations

from ..ir.core import Operation, Value
from .rewrite import defining_op, replace


def simplify_tokens(entry: Operation) -> bool:
    """Simplify every `join_tokens` of `entry`; True if anything changed."""
    changed = False
    for op in list(entry.walk()):
        if op.name == "cuda_tile.join_tokens" and op.parent is not None:
            changed |= _simplify_join(op)
    return changed


def _simplify_join(op: Operation) -> bool:
    inputs: list[Value] = []
    for token in _flat(op.operands):
        if token not in inputs:
            inputs.append(token)
    real = [t for t in inputs if not _fresh(t)]
    inputs = real or inputs[:1]
    if len(inputs) == 1:
        replace(op, inputs)
        return True
    if inputs == op.operands:
        return False
    twin = Operation(op.name, inputs, [op.result.type], op.attributes, location=op.location)
    op.insert_before(twin)
    replace(op, twin.results)
    return True


def _flat(tokens: list[Value]) -> list[Value]:
    out: list[Value] = []
    for t in tokens:
        inner = defining_op(t)
        out += _flat(inner.operands) if inner is not None and inner.name == "cuda_tile.join_tokens" else [t]
    return out


def _fresh(token: Value) -> bool:
    op = defining_op(token)
    return op is not None and op.name == "cuda_tile.make_token"


