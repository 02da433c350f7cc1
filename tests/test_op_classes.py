"""The dialect's table of elementwise ops (dialects/elementwise.py) and the lowering's emitters are
one set: an op the passes move as elementwise has its emitter, and no emitter is left out of it."""

from __future__ import annotations

from tileiras.dialects import elementwise
from tileiras.dialects.cuda_tile import ALIASES
from tileiras.dialects.registry import find
from tileiras.lowering import ops_arith, ops_math


def test_the_lowering_emits_each_elementwise_op() -> None:
    assert set(ops_arith.LOWERINGS) == elementwise.ARITHMETIC
    assert set(ops_math.LOWERINGS) == elementwise.MATH


def test_each_elementwise_op_is_a_dialect_op() -> None:
    missing = [name for name in sorted(elementwise.ELEMENTWISE) if find(ALIASES.get(name, name)) is None]
    assert not missing
