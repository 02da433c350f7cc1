"""Pass `infer-facts`: what the program proves about its integers, pointers and tensor views.

cuTile states what its launcher specialized (16-byte aligned bases, shapes and strides divisible
by 16 or 8, a unit innermost stride) with `assume` ops and static tensor-view strides. Vectorized
and asynchronous copies need those facts: a 16-byte copy is legal only where every address it
may touch is 16-byte aligned and no tile boundary cuts it.

Facts flow forward through the ops of `_RULES` (one rule per op: the result's divisor from its
operands'); a loop's induction variable divides like its lower bound and step. Anything else
proves nothing (divisor 1).
"""

from __future__ import annotations

from math import gcd
from typing import Callable, Optional

from ..ir.attributes import DivBy
from ..ir.core import Block, BlockArgument, Operation, Value
from ..ir.record import record
from ..ir.types import DYNAMIC, PointerType, ScalarType, TensorViewType, TileType, element_of

# what "divisible by everything" is capped at (the value 0, or products of large divisors)
UNBOUNDED = 1 << 30


@record
class Facts:
    """Of an integer: a positive divisor of every value it may take; of a pointer: an alignment in bytes."""

    divisor: int = 1


@record
class ViewFacts:
    """Of a tensor view: the alignment of its base (bytes) and, per dimension, a divisor of its extent
    and of its stride (elements)."""

    base_align: int
    shape_div: tuple[int, ...]
    stride_div: tuple[int, ...]


def divisor(value: Optional[Value]) -> int:
    """The divisor `infer-facts` proved for `value` (1 when nothing is known)."""
    facts = getattr(value, "facts", None)
    return facts.divisor if isinstance(facts, Facts) else 1


def static_or_divisor(static: int, value: Optional[Value]) -> int:
    """Divisibility of a view extent or stride: the number itself when static, else what facts say."""
    if static != DYNAMIC:
        return abs(static) if static else UNBOUNDED
    return divisor(value)


def _low_bit(n: int) -> int:
    return min(abs(n) & -abs(n), UNBOUNDED) if n else UNBOUNDED


def _constant(op: Operation) -> int:
    from ..ir.dense import element_bits

    t = op.results[0].type
    elem = element_of(t)
    if not isinstance(t, TileType) or not isinstance(elem, ScalarType) or elem.name.startswith(("f", "bf", "tf")):
        return 1
    bits = elem.bitwidth
    out = 0
    for raw in set(element_bits(t, op.attributes["value"].raw)):
        signed = raw - (1 << bits) if bits > 1 and raw >> (bits - 1) else raw
        out = gcd(out, _low_bit(signed))
    return out or 1


def _assume(op: Operation) -> int:
    pred = op.attributes.get("predicate")
    mine = pred.divisor if isinstance(pred, DivBy) and pred.every is None and pred.divisor > 0 else 1
    return max(divisor(op.operands[0]), mine)


def _same(op: Operation) -> int:
    return divisor(op.operands[0])


def _product(op: Operation) -> int:
    return min(divisor(op.operands[0]) * divisor(op.operands[1]), UNBOUNDED)


def _common(op: Operation) -> int:
    return gcd(*(divisor(v) for v in op.operands[-2:]))


def _shift_left(op: Operation) -> int:
    amount = op.operands[1]
    owner = getattr(amount, "owner", None)
    if isinstance(owner, Operation) and owner.name == "cuda_tile.constant":
        from ..ir.dense import element_bits

        shifts = set(element_bits(owner.results[0].type, owner.attributes["value"].raw))
        if len(shifts) == 1 and (shift := shifts.pop()) < 31:
            return min(divisor(op.operands[0]) << shift, UNBOUNDED)
    return divisor(op.operands[0])


def _offset(op: Operation) -> int:
    elem = element_of(op.results[0].type)
    pointee = elem.pointee if isinstance(elem, PointerType) else None
    size = max(1, getattr(pointee, "bitwidth", 8) // 8)
    return gcd(divisor(op.operands[0]), min(divisor(op.operands[1]) * size, UNBOUNDED))


# op -> the divisor of its (first) result
_RULES: dict[str, Callable[[Operation], int]] = {
    "cuda_tile.constant": _constant,
    "cuda_tile.assume": _assume,
    "cuda_tile.muli": _product,
    "cuda_tile.addi": _common, "cuda_tile.subi": _common, "cuda_tile.select": _common,
    "cuda_tile.shli": _shift_left,
    "cuda_tile.offset": _offset,
    # the same values, reshaped, replicated or widened
    "cuda_tile.broadcast": _same, "cuda_tile.reshape": _same, "cuda_tile.permute": _same, "cuda_tile.exti": _same,
}


def _knowable(value: Value) -> bool:
    elem = element_of(value.type)
    return isinstance(elem, PointerType) or isinstance(elem, ScalarType) and elem.name.startswith("i")


def infer_facts(entry: Operation) -> None:
    """Give every integer and pointer value of `entry` its Facts, every tensor view its ViewFacts."""
    for op in entry.walk():
        if op.name == "cuda_tile.for":
            iv = op.regions[0].block.arguments[0]
            iv.facts = Facts(gcd(divisor(op.operand("lowerBound")), divisor(op.operand("step"))))
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if arg.facts is None and _knowable(arg):
                        arg.facts = Facts()
        if op.name == "cuda_tile.make_tensor_view":
            op.results[0].facts = _view_facts(op)
            continue
        rule = _RULES.get(op.name)
        for index, result in enumerate(op.results):
            if _knowable(result):
                result.facts = Facts(rule(op) if rule is not None and index == 0 else 1)


def _view_facts(op: Operation) -> ViewFacts:
    vtype = op.results[0].type
    assert isinstance(vtype, TensorViewType)

    def divisors(static: tuple[int, ...], group: str) -> tuple[int, ...]:
        dynamic = iter(op.operand_group(group))
        return tuple(static_or_divisor(d, next(dynamic) if d == DYNAMIC else None) for d in static)

    return ViewFacts(divisor(op.operand("base")), divisors(vtype.shape, "dynamicShape"),
                     divisors(vtype.strides, "dynamicStrides"))



@record
class Source:
    """Where a kernel-uniform integer or pointer comes from: entry parameter `param` (passed through
    `assume` ops only), or the constant `const` (param -1)."""

    param: int = -1
    const: int = 0


def source(value: Optional[Value]) -> Optional[Source]:
    """The Source of `value`, or None when it is computed (anything but `assume` and a splat constant)."""
    while value is not None:
        owner = getattr(value, "owner", None)
        if isinstance(value, BlockArgument):
            region = owner.parent if isinstance(owner, Block) else None
            entry = region.parent if region is not None else None
            return Source(value.index) if getattr(entry, "name", "") == "cuda_tile.entry" else None
        if not isinstance(owner, Operation):
            return None
        if owner.name == "cuda_tile.assume":
            value = owner.operands[0]
            continue
        if owner.name == "cuda_tile.constant":
            from ..ir.dense import element_bits

            found = set(element_bits(owner.results[0].type, owner.attributes["value"].raw))
            return Source(const=found.pop()) if len(found) == 1 else None
        return None
    return None


@record
class ViewSources:
    """A tensor view made wholly of kernel parameters and constants: its base pointer's parameter and
    per dimension (outermost first, as the view lists them) the Source of its extent and stride."""

    base: int
    shape: tuple[Source, ...]
    strides: tuple[Source, ...]


def view_sources(view: Value) -> tuple[Optional[ViewSources], str]:
    """(ViewSources of the tensor view `view`, "") or (None, why not): a TMA descriptor is filled at
    launch from the kernel's own arguments, so each part must be one of them or a constant."""
    op = getattr(view, "owner", None)
    if not isinstance(op, Operation) or op.name != "cuda_tile.make_tensor_view":
        return None, "the tensor view is not made in the kernel"
    vtype = op.results[0].type
    assert isinstance(vtype, TensorViewType)
    base = source(op.operand("base"))
    if base is None or base.param < 0:
        return None, "the view's base pointer is computed, not a kernel parameter"

    def parts(static: tuple[int, ...], group: str, what: str) -> tuple[Optional[tuple[Source, ...]], str]:
        dynamic = iter(op.operand_group(group))
        out = []
        for d, n in enumerate(static):
            s = Source(const=n) if n != DYNAMIC else source(next(dynamic))
            if s is None:
                return None, f"the view's {what} {d} is computed, not a kernel parameter or a constant"
            out.append(s)
        return tuple(out), ""

    shape, why = parts(vtype.shape, "dynamicShape", "extent")
    if shape is None:
        return None, why
    strides, why = parts(vtype.strides, "dynamicStrides", "stride")
    if strides is None:
        return None, why
    return ViewSources(base.param, shape, strides), ""
