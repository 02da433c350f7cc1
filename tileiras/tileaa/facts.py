"""Pass `infer-facts`: what the program proves about its integers, pointers and tensor views.

cuTile states what its launcher specialized (16-byte aligned bases, shapes and strides divisible
by 16 or 8, a unit innermost stride) with `assume` ops and static tensor-view strides. Vectorized
and asynchronous copies need those facts: a 16-byte copy is legal only where every address it
may touch is 16-byte aligned and no tile boundary cuts it.

Facts flow forward through the ops of `_RULES` (one rule per op: the result's divisor from its
operands'); a loop's induction variable divides like its lower bound and step. Anything else
proves nothing (divisor 1).

Tiles also get per-dimension facts in the manner of Triton's AxisInfo (`_AXES`): contiguity (aligned
groups of so many elements along a dimension step by one; a pointer by one element), a divisor of
each such group's first element, and constancy (aligned groups that are equal). They flow through
iota, constants (a non-splat index list examined element by element), broadcast and reshape,
add/sub/mul, `select`, compares against a group-aligned bound, `offset` and `assume div_by<n, every
e along d>` / `same_elements`; any other element-wise op keeps only the constancy of its operands.
Gathers and scatters through a tile of pointers built as a base plus iota offsets are vectorized
with them (access_width.py).
"""

from __future__ import annotations

from math import gcd
from typing import Callable, Optional

from ..dialects.elementwise import ELEMENTWISE
from ..ir.attributes import DivBy, SameElements
from ..ir.core import Block, BlockArgument, Operation, Value
from ..ir.record import record
from ..ir.types import DYNAMIC, PointerType, ScalarType, TensorViewType, TileType, element_of

# what "divisible by everything" is capped at (the value 0, or products of large divisors)
UNBOUNDED = 1 << 30


@record
class Facts:
    """Of an integer: a positive divisor of every value it may take; of a pointer: an alignment in bytes."""

    divisor: int = 1
    # per dimension of a tile (empty: a scalar, or nothing known beyond `divisor`)
    contiguity: tuple[int, ...] = ()   # aligned groups of this many along d step by one
    run_divisor: tuple[int, ...] = ()  # a divisor of each such group's first element (pointer: bytes)
    constancy: tuple[int, ...] = ()    # aligned groups of this many along d are equal


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


Axes = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]   # contiguity, run divisor, constancy


def axes(value: Optional[Value]) -> Axes:
    """The per-dimension facts of a tile value (what nothing is known defaults to)."""
    shape = _shape(value)
    facts = getattr(value, "facts", None)
    if isinstance(facts, Facts) and len(facts.contiguity) == len(shape):
        return facts.contiguity, facts.run_divisor, facts.constancy
    d = divisor(value)
    return (1,) * len(shape), (d,) * len(shape), (1,) * len(shape)


def _shape(value: Optional[Value]) -> tuple[int, ...]:
    t = getattr(value, "type", None)
    return tuple(t.shape) if isinstance(t, TileType) else ()


def _lcm(a: int, b: int) -> int:
    return min(a * b // gcd(a, b), UNBOUNDED)


def _at(contiguity: int, run_divisor: int, group: int) -> int:
    """A divisor of the elements at multiples of `group` along a dimension (group divides or is a
    multiple of `contiguity`): a run's first element, or one a multiple of `group` past it."""
    if group % contiguity == 0:
        return run_divisor
    return gcd(run_divisor, group) if contiguity % group == 0 else 1


def _element_divisor(value: Value) -> int:
    """A divisor of every element (from the runs of one element)."""
    c, s, _ = axes(value)
    out = divisor(value)
    for cd, sd in zip(c, s):
        if cd == 1:
            out = _lcm(out, sd)
    return out


def _axes_iota(op: Operation) -> Axes:
    n = _shape(op.results[0])
    return n, (UNBOUNDED,) * len(n), (1,) * len(n)


# elements of a non-splat constant examined for runs (an index list of a gather); larger ones prove nothing
_CONSTANT_ELEMENTS = 1 << 16


def _axes_constant(op: Operation) -> Axes:
    n = _shape(op.results[0])
    if op.attributes["value"].is_splat:
        return (1,) * len(n), (_constant(op),) * len(n), n
    values = _integers(op)
    if values is None:
        return (1,) * len(n), (_constant(op),) * len(n), (1,) * len(n)
    c, s, k = [], [], []
    for d in range(len(n)):
        run = _groups(values, d, 1)
        c.append(run)
        firsts = values.take(range(0, n[d], run), axis=d)
        s.append(_divides_all(firsts))
        k.append(_groups(values, d, 0))
    return tuple(c), tuple(s), tuple(k)


def _integers(op: Operation):  # -> Optional[numpy.ndarray]
    """The values of an integer constant tile (None: not integers, or too many to examine)."""
    from ..ir.dense import decode_dense

    t = op.results[0].type
    elem = element_of(t)
    if not isinstance(t, TileType) or not isinstance(elem, ScalarType) or not elem.name.startswith("i") \
            or t.num_elements > _CONSTANT_ELEMENTS:
        return None
    return decode_dense(t, op.attributes["value"].raw).astype("int64")


def _groups(values, d: int, step: int) -> int:
    """The largest aligned group size along `d` (a power of two dividing the extent) over which
    neighbours differ by `step` (1: runs, 0: equal)."""
    import numpy as np

    rows = np.moveaxis(values, d, -1)
    n = rows.shape[-1]
    group = 1
    while group * 2 <= n and n % (group * 2) == 0 and \
            (np.diff(rows.reshape(*rows.shape[:-1], n // (group * 2), group * 2), axis=-1) == step).all():
        group *= 2
    return group


def _divides_all(values) -> int:
    out = 0
    for v in set(int(x) for x in values.flat):
        out = gcd(out, _low_bit(v))
    return out or 1


def _axes_assume(op: Operation) -> Axes:
    c, s, k = (list(x) for x in axes(op.operands[0]))
    pred = op.attributes.get("predicate")
    if isinstance(pred, DivBy) and pred.divisor > 0:
        if pred.every is None:
            s = [_lcm(sd, pred.divisor) for sd in s]
        elif pred.along is not None and pred.along < len(c) and pred.every >= c[pred.along]:
            d = pred.along   # groups of `every` step by one from a multiple of `divisor`
            s[d] = _lcm(s[d], pred.divisor) if pred.every % c[d] == 0 else pred.divisor
            c[d] = pred.every
    elif isinstance(pred, SameElements):
        k = [max(kd, n) for kd, n in zip(k, pred.values)]
    return tuple(c), tuple(s), tuple(k)


def _axes_broadcast(op: Operation) -> Optional[Axes]:
    src, out = _shape(op.operands[0]), _shape(op.results[0])
    if len(src) > len(out):
        return None
    lead = len(out) - len(src)
    c0, s0, k0 = axes(op.operands[0])
    every = _element_divisor(op.operands[0])
    c, s, k = [1] * lead, [every] * lead, list(out[:lead])
    for d, n in enumerate(src):
        if n == out[lead + d]:
            c.append(c0[d]), s.append(s0[d]), k.append(k0[d])
        else:   # a dimension of one, replicated
            c.append(1), s.append(every), k.append(out[lead + d])
    return tuple(c), tuple(s), tuple(k)


def _axes_reshape(op: Operation) -> Optional[Axes]:
    """Only dimensions of one added or dropped: the others keep their facts."""
    src, out = _shape(op.operands[0]), _shape(op.results[0])
    kept = [d for d, n in enumerate(src) if n != 1]
    if [n for n in out if n != 1] != [src[d] for d in kept]:
        return None
    c0, s0, k0 = axes(op.operands[0])
    every = _element_divisor(op.operands[0])
    c, s, k, it = [], [], [], iter(kept)
    for n in out:
        if n == 1:
            c.append(1), s.append(every), k.append(1)
        else:
            d = next(it)
            c.append(c0[d]), s.append(s0[d]), k.append(k0[d])
    return tuple(c), tuple(s), tuple(k)


def _combine(a: Value, b: Value, scale: int = 1, commutes: bool = True) -> Axes:
    """a + b (b scaled by `scale` bytes, for `offset`): contiguous where one is contiguous and the
    other constant over the same aligned groups."""
    (ca, sa, ka), (cb, sb, kb) = axes(a), axes(b)
    c, s, k = [], [], []
    for d in range(len(ca)):
        run = max(gcd(ca[d], kb[d]), gcd(ka[d], cb[d]) if commutes else 1)
        c.append(run)
        s.append(gcd(_at(ca[d], sa[d], run), min(_at(cb[d], sb[d], run) * scale, UNBOUNDED)))
        k.append(gcd(ka[d], kb[d]))
    return tuple(c), tuple(s), tuple(k)


def _axes_add(op: Operation) -> Axes:
    return _combine(op.operands[0], op.operands[1])


def _axes_sub(op: Operation) -> Axes:
    return _combine(op.operands[0], op.operands[1], commutes=False)


def _axes_offset(op: Operation) -> Axes:
    elem = element_of(op.results[0].type)
    pointee = elem.pointee if isinstance(elem, PointerType) else None
    return _combine(op.operands[0], op.operands[1], max(1, getattr(pointee, "bitwidth", 8) // 8))


def _is_one(value: Value) -> bool:
    owner = getattr(value, "owner", None)
    while isinstance(owner, Operation) and owner.name in ("cuda_tile.broadcast", "cuda_tile.reshape"):
        owner = getattr(owner.operands[0], "owner", None)
    if not isinstance(owner, Operation) or owner.name != "cuda_tile.constant":
        return False
    from ..ir.dense import element_bits

    return set(element_bits(owner.results[0].type, owner.attributes["value"].raw)) == {1}


def _axes_mul(op: Operation) -> Axes:
    a, b = op.operands[0], op.operands[1]
    for x, one in ((a, b), (b, a)):
        if _is_one(one):
            return axes(x)
    k = tuple(gcd(x, y) for x, y in zip(axes(a)[2], axes(b)[2]))
    every = min(_element_divisor(a) * _element_divisor(b), UNBOUNDED)
    return (1,) * len(k), (every,) * len(k), k


# x < n, x >= n (x contiguous, n constant along d) and their mirrors: constant over groups that
# divide x's runs, start at multiples of the group and n
_BELOW = {"less_than": 0, "greater_than_or_equal": 0, "greater_than": 1, "less_than_or_equal": 1}


def _axes_cmp(op: Operation) -> Axes:
    k = list(_elementwise_constancy(op))
    side = _BELOW.get(str(op.attributes.get("comparison_predicate")))
    if side is not None:
        (cx, sx, _), (cn, sn, kn) = axes(op.operands[side]), axes(op.operands[1 - side])
        for d in range(len(k)):
            if cn[d] == 1 and kn[d] > 1 and cx[d] > 1:
                group = gcd(gcd(cx[d], sx[d]), gcd(sn[d], kn[d]))
                k[d] = max(k[d], group)
    n = len(k)
    return (1,) * n, (divisor(op.results[0]),) * n, tuple(k)


def _elementwise_constancy(op: Operation) -> tuple[int, ...]:
    k = _shape(op.results[0])
    for v in op.operands:
        if _shape(v) == k:
            k = tuple(gcd(x, y) for x, y in zip(k, axes(v)[2]))
    return k


def _axes_select(op: Operation) -> Axes:
    """cond ? a : b: runs where both sides run and the condition is constant over the run."""
    (_, _, kc), (ca, sa, ka), (cb, sb, kb) = (axes(v) for v in op.operands[:3])
    c = tuple(gcd(gcd(x, y), z) for x, y, z in zip(ca, cb, kc))
    s = tuple(gcd(_at(x, p, run), _at(y, q, run)) for x, p, y, q, run in zip(ca, sa, cb, sb, c))
    return c, s, tuple(gcd(gcd(x, y), z) for x, y, z in zip(ka, kb, kc))


def _axes_same(op: Operation) -> Axes:
    return axes(op.operands[0])


# op -> the per-dimension facts of its (first) tile result; None: only `divisor` known
_AXES: dict[str, Callable[[Operation], Optional[Axes]]] = {
    "cuda_tile.iota": _axes_iota, "cuda_tile.constant": _axes_constant, "cuda_tile.assume": _axes_assume,
    "cuda_tile.broadcast": _axes_broadcast, "cuda_tile.reshape": _axes_reshape,
    "cuda_tile.addi": _axes_add, "cuda_tile.subi": _axes_sub, "cuda_tile.muli": _axes_mul,
    "cuda_tile.offset": _axes_offset, "cuda_tile.cmpi": _axes_cmp, "cuda_tile.exti": _axes_same,
    "cuda_tile.select": _axes_select,
}


def _result_axes(op: Operation, result: Value, divisor_: int) -> Axes:
    n = len(_shape(result))
    rule = _AXES.get(op.name)
    found = rule(op) if rule is not None else None
    if found is None:
        found = (1,) * n, (divisor_,) * n, _elementwise_constancy(op) if _same_shapes(op) else (1,) * n
    c, s, k = found
    shape = _shape(result)
    c = tuple(min(x, m) for x, m in zip(c, shape))
    k = tuple(min(x, m) for x, m in zip(k, shape))
    s = tuple(_lcm(x, divisor_) for x in s)
    return c, s, k



def _same_shapes(op: Operation) -> bool:
    """An element-wise op: every tile operand and the result of one shape."""
    shape = _shape(op.results[0])
    return op.name in ELEMENTWISE and all(_shape(v) == shape for v in op.operands if isinstance(v.type, TileType))


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
                d = rule(op) if rule is not None and index == 0 else 1
                result.facts = Facts(d, *_result_axes(op, result, d)) if index == 0 and _shape(result) else Facts(d)


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
    per dimension (outermost first, as the view lists them) the Source of its extent and stride.
    `built`: a view whose parts the kernel computes (a grouped GEMM's arrays, read from a list), its
    descriptor made in the kernel: `base` and each `Source.param` then index the operands of its
    `make_tensor_view` instead of the kernel's parameters."""

    base: int
    shape: tuple[Source, ...]
    strides: tuple[Source, ...]
    built: bool = False


def view_sources(view: Value, built: bool = False) -> tuple[Optional[ViewSources], str]:
    """(ViewSources of the tensor view `view`, "") or (None, why not): a TMA descriptor is filled at
    launch from the kernel's own arguments, so each part must be one of them or a constant. `built`:
    a descriptor the kernel may make itself where a part is computed (the ViewSources then name the
    view's operands, `ViewSources.built`)."""
    op = getattr(view, "owner", None)
    if not isinstance(op, Operation) or op.name != "cuda_tile.make_tensor_view":
        return None, "the tensor view is not made in the kernel"
    vtype = op.results[0].type
    assert isinstance(vtype, TensorViewType)
    base = source(op.operand("base"))
    if base is None or base.param < 0:
        if built:
            return _operand_sources(op, vtype), ""
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
    strides, why2 = parts(vtype.strides, "dynamicStrides", "stride") if shape is not None else (None, why)
    if shape is None or strides is None:
        return (_operand_sources(op, vtype), "") if built else (None, why or why2)
    return ViewSources(base.param, shape, strides), ""


def _operand_sources(op: Operation, vtype: TensorViewType) -> ViewSources:
    """The parts of the view `op` makes as its own operands (index among `op.operands`) or constants."""
    index = {id(v): i for i, v in enumerate(op.operands)}

    def parts(static: tuple[int, ...], group: str) -> tuple[Source, ...]:
        dynamic = iter(op.operand_group(group))
        return tuple(Source(const=n) if n != DYNAMIC else Source(index[id(next(dynamic))]) for n in static)

    return ViewSources(index[id(op.operand("base"))], parts(vtype.shape, "dynamicShape"),
                       parts(vtype.strides, "dynamicStrides"), built=True)
