"""The nv_tileaa verifier: the facts are there and agree with what they were proved from.

* every integer, pointer and tensor-view value has facts, with positive divisors;
* a constant's divisor divides each of its elements;
* an `assume div_by<n>` result is known divisible by n;
* a tensor view's facts have one divisor per dimension, and a static extent or stride is its own.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir.attributes import DivBy
from ..ir.core import Operation, Value
from ..ir.types import DYNAMIC, TensorViewType
from .facts import UNBOUNDED, Facts, ViewFacts, _knowable


def verify(entry: Operation) -> None:
    """Raise CompileError naming the first broken invariant."""
    for op in entry.walk():
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    _check_value(op, arg)
        for result in op.results:
            _check_value(op, result)
        if op.name == "cuda_tile.constant" and op.results[0].facts is not None:
            _check_constant(op)
        if op.name == "cuda_tile.assume":
            pred = op.attributes.get("predicate")
            facts = op.results[0].facts
            if isinstance(pred, DivBy) and pred.every is None and isinstance(facts, Facts) and facts.divisor % pred.divisor:
                _fail(op, f"assumes div_by<{pred.divisor}> but its result is only known divisible by {facts.divisor}")


def _check_value(op: Operation, value: Value) -> None:
    if isinstance(value.type, TensorViewType):
        facts = value.facts
        if not isinstance(facts, ViewFacts):
            _fail(op, f"a {value.type} has no view facts")
        rank = len(value.type.shape)
        if len(facts.shape_div) != rank or len(facts.stride_div) != rank or facts.base_align < 1:
            _fail(op, f"view facts {facts} do not fit {value.type}")
        for static, div in zip(value.type.shape + value.type.strides, facts.shape_div + facts.stride_div):
            if static != DYNAMIC and static and div != abs(static):
                _fail(op, f"view facts {facts} disagree with the static sizes of {value.type}")
    elif _knowable(value):
        if not isinstance(value.facts, Facts) or value.facts.divisor < 1:
            _fail(op, f"a {value.type} value has no facts")


def _check_constant(op: Operation) -> None:
    from ..ir.dense import element_bits

    t = op.results[0].type
    d = op.results[0].facts.divisor
    bits = getattr(t.element, "bitwidth", 0)
    for raw in set(element_bits(t, op.attributes["value"].raw)):
        signed = raw - (1 << bits) if bits > 1 and raw >> (bits - 1) else raw
        if signed and d != UNBOUNDED and signed % d:
            _fail(op, f"is known divisible by {d} but holds {signed}")


def _fail(op: Operation, message: str) -> None:
    from ..ir.diagnostic_location import location_prefix

    loc = location_prefix(getattr(op, "location", None))
    raise CompileError(f"{loc}error: internal: nv_tileaa verifier: '{op.name}' {message}")
