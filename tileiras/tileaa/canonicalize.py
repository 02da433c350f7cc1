"""Pass `canonicalize-nv_tileaa`: the alias-aware level's folds (seed 004, "nv_tileaa Folds,
Canonicalizers, Tokens"), then the canonical form's passes again.

* a pointer load or store whose mask is a true constant is unmasked; a load whose mask is false reads
  nothing (its value is its padding, its token the one it was given), a store whose mask is false writes
  nothing and is erased (its token users see the token it was given);
* `offset(offset(p, a), b)` is `offset(p, a + b)` where the offsets are of one type;
* a shape wrapper of a shape wrapper of the same kind is one wrapper; one that changes no type is its
  source (`reshape`, `broadcast`; a `permute` by the identity);
* `assume(W(x), p)` is `W(assume(x, p))` for a broadcast or reshape W and a predicate that holds element
  by element (`div_by<n>`, `bounded`): the fact sits on the scalar the tile replicates, where every
  other use of it sees it too (the facts pass carries it through W);
* an integer `atomic_rmw` whose argument is its mode's identity (add, or, xor 0; and, umin all ones;
  max the least, min the greatest signed value; umax 0), relaxed or acquire, is an atomic load of the same
  ordering and scope (`atomic_add(lock, 0)`, a spin-wait's read): it writes nothing, as a load does. A
  release has no load form; a float's add flushes subnormals (PTX), so it is not an identity.
The memory ops keep their tokens: what each access is ordered after is unchanged.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation, Value
from ..ir.types import TokenType
from ..transforms.constants import splat_int
from ..transforms.folds import SHAPE_WRAPPERS
from ..transforms.passes import CANONICAL_PASSES, to_canonical
from ..transforms.rewrite import defining_op, replace


def canonicalize_tileaa(entry: Operation) -> None:
    """The nv_tileaa folds, then (where they changed the kernel) the canonical form again, to a fixed point."""
    if _fold_all(entry):
        to_canonical(entry, (("fold-nv_tileaa", _fold_all), *CANONICAL_PASSES))


def _fold_all(entry: Operation) -> bool:
    changed = False
    for op in list(entry.walk()):
        rule = _RULES.get(op.name)
        if rule is not None and op.parent is not None:
            changed |= rule(op)
    return changed


def _mask_constant(op: Operation) -> Optional[bool]:
    mask = op.operand("mask")
    value = splat_int(mask) if mask is not None else None
    return None if value is None else bool(value)


def _without_mask(op: Operation, drop: tuple[str, ...]) -> None:
    """Rebuild `op` without the operand groups in `drop` (segment sizes follow)."""
    groups = [g.name for g in op.definition.operands]
    operands, sizes = [], []
    for name in groups:
        values = [] if name in drop else op.operand_group(name)
        operands += values
        sizes.append(len(values))
    twin = Operation(op.name, operands, [r.type for r in op.results], op.attributes, location=op.location,
                     segment_sizes=tuple(sizes))
    op.insert_before(twin)
    replace(op, twin.results)


def _input_token(op: Operation) -> Value:
    token = op.operand("token")
    if token is not None:
        return token
    fresh = Operation("cuda_tile.make_token", [], [TokenType()], location=op.location)
    op.insert_before(fresh)
    return fresh.result


def _masked_load(op: Operation) -> bool:
    mask = _mask_constant(op)
    if mask is None:
        return False
    if mask:
        _without_mask(op, ("mask", "paddingValue"))
        return True
    pad = op.operand("paddingValue")
    if pad is None or pad.type != op.results[0].type:   # no value of the result's type to give
        return False
    replace(op, [pad, _input_token(op)])
    return True


def _masked_store(op: Operation) -> bool:
    mask = _mask_constant(op)
    if mask is None:
        return False
    if mask:
        _without_mask(op, ("mask",))
    else:
        replace(op, [_input_token(op)])
    return True


def _offset_chain(op: Operation) -> bool:
    inner = defining_op(op.operands[0])
    if inner is None or inner.name != "cuda_tile.offset" or inner.operands[1].type != op.operands[1].type:
        return False
    total = Operation("cuda_tile.addi", [inner.operands[1], op.operands[1]], [op.operands[1].type],
                      {"overflow": "none"}, location=op.location)
    op.insert_before(total)
    op.set_operand(0, inner.operands[0])
    op.set_operand(1, total.result)
    return True


def _wrapper(op: Operation) -> bool:
    source = op.operands[0]
    if source.type == op.result.type and (op.name != "cuda_tile.permute" or _identity(op)):
        replace(op, [source])
        return True
    inner = defining_op(source)
    if inner is not None and inner.name == op.name and op.name != "cuda_tile.permute":
        op.set_operand(0, inner.operands[0])
        return True
    return False


def _identity(op: Operation) -> bool:
    perm = list(op.attributes.get("permutation", ()))
    return perm == list(range(len(perm)))


def _identity_of(mode: str, bits: int) -> Optional[int]:
    """The argument (signed, as `splat_int` reads it) that leaves every value unchanged under `mode`."""
    return {"add": 0, "or": 0, "xor": 0, "umax": 0, "and": -1, "umin": -1,
            "max": -(1 << (bits - 1)), "min": (1 << (bits - 1)) - 1}.get(mode)


def _atomic_identity(op: Operation) -> bool:
    ordering = str(op.attributes.get("memory_ordering_semantics"))
    arg = op.operand("arg")
    name = getattr(arg.type.element, "name", "")   # type: ignore[union-attr]
    if ordering not in ("relaxed", "acquire") or not name.startswith("i") or name == "i1":
        return False
    value = splat_int(arg)
    if value is None or value != _identity_of(str(op.attributes.get("mode")), int(name[1:])):
        return False
    mask = op.operand("mask")
    operands = [op.operand("pointers"), *([mask, arg] if mask is not None else []), *op.operand_group("token")]
    sizes = (1, int(mask is not None), int(mask is not None), len(op.operand_group("token")))
    attrs = {"memory_ordering_semantics": op.attributes["memory_ordering_semantics"],
             "memory_scope": op.attributes["memory_scope"]}
    load = Operation("cuda_tile.load_ptr_tko", operands, [r.type for r in op.results], attrs, location=op.location,
                     segment_sizes=sizes)
    op.insert_before(load)       # masked-off lanes: the argument, as the interpreter gives for the atomic
    replace(op, load.results)
    return True


def _assume_through_wrapper(op: Operation) -> bool:
    from ..ir.attributes import Bounded, DivBy

    pred = op.attributes.get("predicate")
    wrapper = defining_op(op.operands[0])
    if wrapper is None or wrapper.name not in SHAPE_WRAPPERS or \
            not (isinstance(pred, Bounded) or isinstance(pred, DivBy) and pred.every is None):
        return False
    source = wrapper.operands[0]
    inner = Operation(op.name, [source], [source.type], op.attributes, location=op.location)
    op.insert_before(inner)
    outer = Operation(wrapper.name, [inner.result], [op.result.type], wrapper.attributes, location=wrapper.location)
    op.insert_before(outer)
    replace(op, outer.results)
    return True


_RULES = {
    "cuda_tile.assume": _assume_through_wrapper,
    "cuda_tile.atomic_rmw_tko": _atomic_identity,
    "cuda_tile.load_ptr_tko": _masked_load,
    "cuda_tile.store_ptr_tko": _masked_store,
    "cuda_tile.offset": _offset_chain,
    "cuda_tile.reshape": _wrapper,
    "cuda_tile.broadcast": _wrapper,
    "cuda_tile.permute": _wrapper,
}
