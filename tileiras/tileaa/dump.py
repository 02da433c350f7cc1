"""The nv_tileaa part of `--print-ir-after-all`: the facts proved, where they say something.

A tile's per-dimension facts (facts.py) follow its divisor, one list per kind, where any says more
than nothing: `contiguity [1, 128] divisibility [8, 16] constancy [64, 1]` reads "along dimension 1,
aligned runs of 128 step by one from a multiple of 16 (a pointer: 16 bytes); along dimension 0,
groups of 64 are equal"."""

from __future__ import annotations

from typing import Callable

from ..ir.core import Operation, Value
from ..ir.types import PointerType, element_of
from .facts import UNBOUNDED, Facts, ViewFacts


def fact_lines(entry: Operation, name_of: Callable[[Value], str]) -> list[str]:
    lines = []
    for op in entry.walk():
        values = [a for region in op.regions for block in region.blocks for a in block.arguments] + list(op.results)
        for v in values:
            line = _describe(v.facts, v)
            if line:
                lines.append(f"//   {name_of(v)} : {v.type} {line}")
    return lines


def _number(n: int) -> str:
    return "inf" if n >= UNBOUNDED else str(n)


def _dims(facts: Facts) -> str:
    """The per-dimension lists, or "" when they prove nothing beyond the divisor."""
    c, s, k = facts.contiguity, facts.run_divisor, facts.constancy
    if not c or all(x == 1 for x in c + k) and all(d == facts.divisor for d in s):
        return ""
    return " ".join(f"{name} [{', '.join(map(_number, xs))}]"
                    for name, xs in (("contiguity", c), ("divisibility", s), ("constancy", k)))


def _describe(facts: object, value: Value) -> str:
    if isinstance(facts, ViewFacts):
        return (f"base aligned to {facts.base_align} B, extents divisible by {facts.shape_div}, "
                f"strides by {facts.stride_div}")
    if not isinstance(facts, Facts):
        return ""
    parts = []
    if facts.divisor > 1:
        if isinstance(element_of(value.type), PointerType):
            parts.append(f"aligned to {facts.divisor} B")
        else:
            parts.append("zero" if facts.divisor == UNBOUNDED else f"divisible by {facts.divisor}")
    dims = _dims(facts)
    if dims:
        parts.append(dims)
    return ", ".join(parts)
