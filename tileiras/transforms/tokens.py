"""Pass `simplify-tokens`: token chains without links that order nothing.

`join_tokens` is flattened (a joined join contributes its inputs), loses repeated inputs and tokens of
`make_token` (a fresh token orders nothing) while another input remains, and a join of one token is that
token. What each memory op is ordered after is unchanged, but for orderings the data already gives:

A `for` that carries a token gathering its weak loads' result tokens (`join_tokens` of the carried token
and theirs, nothing else reading it), read after the loop only by ops that compute with a value the loop
carries from its previous value and every one of those loads' tiles (a split-K GEMM's atomic add of its
accumulator, which cuTile orders after the K loop's loads), where only mmas read the loads' tiles, orders
nothing the data does not. An mma's operand is staged whole (in shared memory) before any thread's tensor
cores read it, so what a thread computes from the accumulator comes after every element of every
iteration's loads was read, whichever thread read it (a tile added in registers would not do: a thread's
sum says nothing of the other threads' loads). The token is dropped from the loop (its readers take its
initial value), which then carries its accumulators alone, as the pipelines and warp roles expect.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Block, Operation, Region, Value
from ..ir.types import TokenType
from .rewrite import defining_op, erase_tree, replace

_LOADS = ("cuda_tile.load_view_tko", "cuda_tile.load_ptr_tko")
_MMAS = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")
_PASS = ("cuda_tile.reshape", "cuda_tile.permute")   # an operand reshaped or transposed is still staged whole


def simplify_tokens(entry: Operation) -> bool:
    """Simplify every `join_tokens` of `entry`, then drop the loops' tokens the data orders; True if
    anything changed."""
    changed = False
    for op in list(entry.walk()):
        if op.name == "cuda_tile.join_tokens" and op.parent is not None:
            changed |= _simplify_join(op)
    for op in list(entry.walk()):
        if op.name == "cuda_tile.for" and op.parent is not None:
            dropped = _data_ordered_token(op)
            if dropped is not None:
                _drop_carried(op, dropped)
                changed = True
    if changed:
        for op in list(entry.walk()):
            if op.name == "cuda_tile.join_tokens" and op.parent is not None:
                _simplify_join(op)
    return changed


def _data_ordered_token(loop: Operation) -> Optional[int]:
    """The index of a token `loop` carries that orders only what the data orders (module docstring)."""
    body = loop.regions[0].blocks[0]
    carried, yielded = body.arguments[1:], body.terminator.operands  # type: ignore[union-attr]
    for j, arg in enumerate(carried):
        if not isinstance(arg.type, TokenType):
            continue
        join = defining_op(yielded[j])
        if join is None or join.name != "cuda_tile.join_tokens" or join.parent is not body \
                or arg.uses != [join] or join.result.uses != [body.terminator]:
            continue
        loads = [defining_op(t) for t in join.operands if t is not arg]
        if not loads or any(load is None or load.name not in _LOADS or load.parent is not body
                            or str(load.attributes.get("memory_ordering_semantics", "weak")) != "weak"
                            or t is not load.results[-1] or not _only_mmas_read(load.results[0])
                            for load, t in zip(loads, [t for t in join.operands if t is not arg])):
            continue
        # carried values computed from their own previous value and every load's tile: after the loop, each
        # depends on the loads of every iteration
        tiles = [load.results[0] for load in loads]  # type: ignore[union-attr]
        whole = [loop.results[k] for k, value in enumerate(yielded)
                 if k != j and all(dep in _slice(value, body) for dep in [carried[k], *tiles])]
        if whole and all(_computes_with(reader, whole) for reader in _readers(loop.results[j])):
            return j
    return None


def _only_mmas_read(tile: Value) -> bool:
    """Whether only mmas read `tile` (through reshapes and transposes), as an operand."""
    reads = [(tile, user) for user in tile.uses]
    while reads:
        value, user = reads.pop()
        if user.name in _PASS:
            reads += [(user.results[0], u) for u in user.results[0].uses]
        elif user.name not in _MMAS or value not in (user.operand("lhs"), user.operand("rhs")):
            return False
    return bool(tile.uses)


def _slice(value: Value, block: Block) -> set[Value]:
    """The values of `block` (and its arguments) `value` is computed from, itself included."""
    seen: set[Value] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if v in seen:
            continue
        seen.add(v)
        op = defining_op(v)
        if op is not None and op.parent is block:
            todo += op.operands
    return seen


def _readers(token: Value) -> list[Operation]:
    """The ops ordered after `token`, through the joins it goes into."""
    out: list[Operation] = []
    for user in token.uses:
        out += _readers(user.result) if user.name == "cuda_tile.join_tokens" else [user]
    return out


def _computes_with(op: Operation, values: list[Value]) -> bool:
    """Whether an operand of `op` is computed from one of `values`, in `op`'s block."""
    block = op.parent
    return block is not None and any(v in _slice(operand, block) for operand in op.operands
                                     if not isinstance(operand.type, TokenType) for v in values)


def _drop_carried(loop: Operation, j: int) -> None:
    """`loop` rebuilt without its carried value `j`, whose readers after it take its initial value."""
    inits = loop.operand_group("initValues")
    loop.results[j].replace_all_uses_with(inits[j])
    body = loop.regions[0].blocks[0]
    keep = [k for k in range(len(inits)) if k != j]
    bounds = loop.operands[:len(loop.operands) - len(inits)]
    twin = Operation(loop.name, [*bounds, *(inits[k] for k in keep)], [loop.results[k].type for k in keep],
                     loop.attributes, location=loop.location,
                     segment_sizes=(*loop.segment_sizes[:-1], len(keep)) if loop.segment_sizes else None)
    block = twin.add_region(Region()).add_block(Block())
    mapping: dict[Value, Value] = {}
    for k, arg in enumerate(body.arguments):
        if k != j + 1:
            mapping[arg] = new = block.add_argument(arg.type, arg.name_hint)
            new.layout, new.facts = arg.layout, arg.facts
    last = body.terminator
    assert last is not None
    for op in body.operations[:-1]:
        if op is not defining_op(last.operands[j]):
            block.append(op.clone(mapping))
    block.append(Operation(last.name, [mapping.get(last.operands[k], last.operands[k]) for k in keep], [],
                           last.attributes, location=last.location))
    loop.insert_before(twin)
    for new, k in zip(twin.results, keep):
        loop.results[k].replace_all_uses_with(new)
    erase_tree(loop)


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


