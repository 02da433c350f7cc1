"""Semantics-preserving rewrites of a cuda_tile module, for the canonical form's invariance tests.

Each rewrite takes a module, changes one place of it (chosen by a seeded random generator) in a way
that does not change what the kernel computes, and says whether it found a place. The compiler must
give the same PTX for the rewritten module (tests/test_canonical_invariance.py).
"""

from __future__ import annotations

import random
from typing import Callable, Optional

from tileiras.ir.attributes import DenseElements
from tileiras.ir.core import Block, Operation, Region, Value
from tileiras.ir.types import ScalarType, TileType, TokenType
from tileiras.transforms.rewrite import blocks_of, inside_op, is_movable, is_small

Rewrite = Callable[[Operation, random.Random], bool]
_LOOPS = ("cuda_tile.for", "cuda_tile.loop")


def _entries(module: Operation) -> list[Operation]:
    return [op for op in module.regions[0].blocks[0].operations if op.name == "cuda_tile.entry"]


def _cheap(op: Operation) -> bool:
    return is_movable(op) and bool(op.results) and all(is_small(r) for r in op.results) and \
        (op.name != "cuda_tile.constant" or op.attributes["value"].is_splat)


def _redirect(old: Value, new: Value, where: Callable[[Operation], bool]) -> None:
    for user in list(dict.fromkeys(old.uses)):
        if where(user):
            for i, v in enumerate(user.operands):
                if v is old:
                    user.set_operand(i, new)


def _within(op: Operation, container: Operation) -> bool:
    """`op` is `container` or nested in it."""
    return op is container or inside_op(op, container)


def into_loop(module: Operation, rng: random.Random) -> bool:
    """A copy of a cheap op (a view, a scalar) at the top of a loop that uses it; the loop's uses read it."""
    cases = []
    for entry in _entries(module):
        for loop in (op for op in entry.walk() if op.name in _LOOPS):
            for op in loop.parent.operations:
                if _cheap(op) and any(u is not loop and _within(u, loop) for r in op.results for u in r.uses):
                    cases.append((op, loop))
    if not cases:
        return False
    op, loop = rng.choice(cases)
    body = loop.regions[0].blocks[0]
    copy = op.clone({})
    copy.parent = body
    body.operations.insert(0, copy)
    for old, new in zip(op.results, copy.results):
        _redirect(old, new, lambda u: u is not loop and _within(u, loop) and u is not copy)
    return True


def duplicate(module: Operation, rng: random.Random) -> bool:
    """A second copy of a cheap effect-free op with several users, just after it; the later users read it
    (tiles of many elements are not merged back: the layout level decides whether one value serves two)."""
    cases = [op for e in _entries(module) for op in e.walk()
             if _cheap(op) and sum(len(set(r.uses)) for r in op.results) >= 2]
    if not cases:
        return False
    op = rng.choice(cases)
    copy = op.clone({})
    block = op.parent
    copy.parent = block
    block.operations.insert(block.operations.index(op) + 1, copy)
    for old, new in zip(op.results, copy.results):
        users = list(dict.fromkeys(old.uses))
        late = set(map(id, users[len(users) // 2:]))
        _redirect(old, new, lambda u: id(u) in late)
    return True


def _uses_results(later: Operation, earlier: Operation) -> bool:
    produced = set(map(id, earlier.results))
    return any(id(v) in produced for op in later.walk() for v in op.operands)


def reorder(module: Operation, rng: random.Random) -> bool:
    """Two adjacent ops swapped where one has no effect and the second does not read the first."""
    cases = []
    for entry in _entries(module):
        for block in blocks_of(entry):
            ops = block.operations
            for a, b in zip(ops, ops[1:-1]):
                if (is_movable(a) or is_movable(b)) and not _uses_results(b, a):
                    cases.append((block, a, b))
    if not cases:
        return False
    block, a, b = rng.choice(cases)
    i = block.operations.index(a)
    block.operations[i], block.operations[i + 1] = b, a
    return True


def add_unused(module: Operation, rng: random.Random) -> bool:
    """An unused token, constant and partition view (of a tensor view the kernel makes) in some block."""
    entries = _entries(module)
    if not entries:
        return False
    entry = rng.choice(entries)
    block = rng.choice(list(blocks_of(entry)))
    at = rng.randrange(len(block.operations))   # before an op, never after the terminator
    new = [Operation("cuda_tile.make_token", [], [TokenType()]),
           Operation("cuda_tile.constant", [], [TileType((), ScalarType("i32"))],
                     {"value": DenseElements(TileType((), ScalarType("i32")), (7).to_bytes(4, "little"))})]
    views = [op for op in block.operations[:at] if op.name == "cuda_tile.make_partition_view"]
    if views:
        view = rng.choice(views)
        new.append(Operation(view.name, list(view.operands), [view.result.type], view.attributes))
    anchor = block.operations[at]
    for op in new:
        anchor.insert_before(op)
    return True


def _zero(type_: object, anchor: Operation) -> Optional[Value]:
    """A value of `type_` for the untaken else branch: a zero tile or a fresh token."""
    if isinstance(type_, TokenType):
        op = Operation("cuda_tile.make_token", [], [type_])
    elif isinstance(type_, TileType) and isinstance(type_.element, ScalarType) and \
            not str(type_.element).startswith("ptr"):
        from tileiras.ir.dense import element_size

        op = Operation("cuda_tile.constant", [], [type_],
                       {"value": DenseElements(type_, bytes(element_size(type_.element)))})
    else:
        return None
    anchor.insert_before(op)
    return op.result


def wrap_in_if(module: Operation, rng: random.Random) -> bool:
    """A run of ops of a block moved into `if true { ... }`; what is used after it comes out as results."""
    cases = []
    for entry in _entries(module):
        for block in blocks_of(entry):
            if block.parent.parent.name in ("cuda_tile.reduce", "cuda_tile.scan"):   # bodies of pure ops only
                continue
            ops = block.operations[:-1]
            for i in range(len(ops)):
                for j in range(i + 1, min(i + 4, len(ops)) + 1):
                    cases.append((block, i, j))
    rng.shuffle(cases)
    for block, i, j in cases:
        run = block.operations[i:j]
        outs = [r for op in run for r in op.results
                if any(not any(_within(u, o) for o in run) for u in r.uses)]
        if all(isinstance(r.type, TokenType) or isinstance(r.type, TileType) and
               not str(r.type.element).startswith("ptr") for r in outs):
            break
    else:
        return False
    anchor = run[0]
    true_ = Operation("cuda_tile.constant", [], [TileType((), ScalarType("i1"))],
                      {"value": DenseElements(TileType((), ScalarType("i1")), b"\xff")})
    anchor.insert_before(true_)
    zeros = [_zero(r.type, anchor) for r in outs]
    if any(z is None for z in zeros):
        return False
    if_op = Operation("cuda_tile.if", [true_.result], [r.type for r in outs])
    then_block, else_block = Block(), Block()
    if_op.add_region(Region([then_block]))
    if_op.add_region(Region([else_block]))
    anchor.insert_before(if_op)
    for op in run:
        block.operations.remove(op)
        then_block.append(op)
    then_block.append(Operation("cuda_tile.yield", list(outs)))
    else_block.append(Operation("cuda_tile.yield", list(zeros)))
    for old, new in zip(outs, if_op.results):
        _redirect(old, new, lambda u: u.parent is not then_block and not any(_within(u, o) for o in run))
    return True


REWRITES: dict[str, Rewrite] = {
    "into-loop": into_loop,
    "duplicate": duplicate,
    "reorder": reorder,
    "add-unused": add_unused,
    "wrap-in-if": wrap_in_if,
}
