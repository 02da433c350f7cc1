"""The folds of the canonical form, one table: op name -> fold.

A fold returns the values that replace the op's results (None: no change). Floating-point folds keep
the declared semantics: `addf` folds only finite constants under the default rounding and no
flush-to-zero (seed 004, "cuda_tile Canonicalizers and Folds"); integer identities and folds wrap as the
hardware does. `select` folds in the specification's order: same arms, constant condition, boolean
identity, inverted condition (arms swapped), a nested select on the same condition. Powers by 1 and 2
are their source and its square. An integer mma with a zero multiplicand is its accumulator, as is a
float one whose multiplicands are constants, one zero and the other finite, and whose accumulator is a
constant other than -0.0 (+0 products would make a -0.0 +0). An `extract` of a splat (constant or
broadcast) is the smaller splat; one of an elementwise op it alone reads is that op of its operands' extracts (extract
motion, seed 004's nv_tileaa canonicalizers: only the extracted part is computed).
"""

from __future__ import annotations

import math
from typing import Callable, Optional

from ..dialects.elementwise import VALUES
from ..ir.core import Operation, Value
from ..ir.types import TileType
from .constants import is_splat_constant, make_splat, splat_float, splat_int
from .rewrite import defining_op

Fold = Callable[[Operation], Optional[list[Value]]]

_FOLDABLE_FLOATS = frozenset({"f16", "bf16", "f32", "f64"})


def _elem(value: Value) -> str:
    return getattr(getattr(value.type, "element", None), "name", "")


def _fold_addf(op: Operation) -> Optional[list[Value]]:
    if _elem(op.result) not in _FOLDABLE_FLOATS:
        return None
    if op.attributes.get("flush_to_zero") or str(op.attributes.get("rounding_mode", "nearest_even")) != "nearest_even":
        return None
    lhs, rhs = splat_float(op.operands[0]), splat_float(op.operands[1])
    if lhs is None or rhs is None or not (math.isfinite(lhs) and math.isfinite(rhs)):
        return None
    # The sum in f64, rounded once more to the element type, is the correctly rounded sum: f64 has more
    # than twice the precision (plus two bits) of f32, f16 and bf16 (bf16 goes through f32: the same holds).
    try:
        return [make_splat(op.result.type, lhs + rhs, op)]
    except OverflowError:   # past the type's largest value: leave the op as written
        return None


def _int_fold(compute: Callable[[int, int], int], identity: Optional[int]) -> Fold:
    """Constants fold (wrapping to the width); `x op identity` is x."""
    def fold(op: Operation) -> Optional[list[Value]]:
        x, y = op.operands
        a, b = splat_int(x), splat_int(y)
        if identity is not None and b is not None and int(b) == identity and x.type == op.result.type:
            return [x]
        if a is None or b is None or not _elem(op.result).startswith("i"):
            return None
        return [make_splat(op.result.type, compute(int(a), int(b)), op)]
    return fold


def _fold_select(op: Operation) -> Optional[list[Value]]:
    cond, if_true, if_false = op.operands
    if if_true is if_false:
        return [if_true]
    c = splat_int(cond)
    if c is not None:
        return [if_true if bool(c) else if_false]
    inner = defining_op(cond)
    if inner is not None and inner.name == "cuda_tile.xori" and splat_int(inner.operands[1]) == 1 and \
            inner.operands[0].type == cond.type:   # select(not c, a, b) is select(c, b, a)
        return [_select(op, inner.operands[0], if_false, if_true)]
    for i, arm in ((1, if_true), (2, if_false)):   # select(c, select(c, a, b), d) is select(c, a, d)
        nested = defining_op(arm)
        if nested is not None and nested.name == "cuda_tile.select" and nested.operands[0] is cond:
            operands = list(op.operands)
            operands[i] = nested.operands[i]
            return [_select(op, *operands)]
    if _elem(op.result) == "i1" and cond.type == op.result.type:
        t, f = splat_int(if_true), splat_int(if_false)
        if t is not None and f is not None and bool(t) and not bool(f):
            return [cond]
    return None


def _select(op: Operation, cond: Value, if_true: Value, if_false: Value) -> Value:
    twin = Operation(op.name, [cond, if_true, if_false], [op.result.type], op.attributes, location=op.location)
    op.insert_before(twin)
    return twin.result


SHAPE_WRAPPERS = frozenset({"cuda_tile.reshape", "cuda_tile.broadcast"})   # ops that copy elements into another shape


def _fold_power(op: Operation) -> Optional[list[Value]]:
    """`x ** 1` is x; `x ** 2` is `x * x` (the product is the correctly rounded square, as a correctly
    rounded power is: LLVM rewrites pow(x, 2.0) so without fast-math; cuTile writes `x ** 2` as
    `fpowf` of 2.0 up to 13.3 and as `fpowi` of 2 from 13.4, one op here)."""
    source, exponent = op.operands
    while (wrapper := defining_op(exponent)) is not None and wrapper.name in SHAPE_WRAPPERS:
        exponent = wrapper.operands[0]     # a scalar 2 reshaped and broadcast is 2 everywhere
    n = splat_float(exponent) if op.name == "cuda_tile.fpowf" else splat_int(exponent)
    if n is None or source.type != op.result.type:
        return None
    if n == 1:
        return [source]
    if n == 2:
        square = Operation("cuda_tile.mulf", [source, source], [op.result.type], {"rounding_mode": "nearest_even"},
                           location=op.location)
        return [op.insert_before(square).results[0]]
    return None


def _fold_mma(op: Operation) -> Optional[list[Value]]:
    lhs, rhs, acc = op.operands
    if acc.type != op.result.type:
        return None
    if op.name == "cuda_tile.mmai":
        return [acc] if 0 in (splat_int(lhs), splat_int(rhs)) else None
    a, b, c = splat_float(lhs), splat_float(rhs), splat_float(acc)
    if a is None or b is None or c is None or 0.0 not in (a, b) or not (math.isfinite(a) and math.isfinite(b)):
        return None
    return [acc] if c != 0.0 or math.copysign(1.0, c) > 0 else None


def _fold_extract(op: Operation) -> Optional[list[Value]]:
    source = op.operands[0]
    result = op.result.type
    if is_splat_constant(source):
        value = splat_int(source) if _elem(source).startswith("i") else splat_float(source)
        return [make_splat(result, value, op)] if value is not None else None  # type: ignore[arg-type]
    inner = defining_op(source)
    if inner is not None and inner.name == "cuda_tile.broadcast" and \
            all(d == 1 for d in inner.operands[0].type.shape):  # type: ignore[union-attr]
        splat = Operation(inner.name, [inner.operands[0]], [result], location=op.location)   # a splat's part
        return [op.insert_before(splat).results[0]]
    if inner is None or inner.name not in VALUES or inner.regions or len(source.uses) != 1 or \
            len(inner.results) != 1 or not all(isinstance(v.type, TileType) and v.type.shape == source.type.shape
                                               for v in inner.operands):  # type: ignore[union-attr]
        return None
    parts = [Operation(op.name, [v, *op.operands[1:]], [TileType(result.shape, v.type.element)],  # type: ignore[union-attr]
                       op.attributes, location=op.location) for v in inner.operands]
    for part in parts:
        op.insert_before(part)
    moved = Operation(inner.name, [p.result for p in parts], [result], inner.attributes, location=inner.location)
    return [op.insert_before(moved).results[0]]


FOLDS: dict[str, Fold] = {
    "cuda_tile.mmai": _fold_mma,
    "cuda_tile.mmaf": _fold_mma,
    "cuda_tile.extract": _fold_extract,
    "cuda_tile.addf": _fold_addf,
    "cuda_tile.addi": _int_fold(lambda a, b: a + b, 0),
    "cuda_tile.subi": _int_fold(lambda a, b: a - b, 0),
    "cuda_tile.muli": _int_fold(lambda a, b: a * b, 1),
    "cuda_tile.select": _fold_select,
    "cuda_tile.fpowf": _fold_power,
    "cuda_tile.fpowi": _fold_power,
}


def fold(op: Operation) -> Optional[list[Value]]:
    rule = FOLDS.get(op.name)
    return rule(op) if rule is not None else None
