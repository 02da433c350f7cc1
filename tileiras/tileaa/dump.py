"""The nv_tileaa part of `--print-ir-after-all`: the facts proved, where they say something."""

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


def _describe(facts: object, value: Value) -> str:
    if isinstance(facts, ViewFacts):
        return (f"base aligned to {facts.base_align} B, extents divisible by {facts.shape_div}, "
                f"strides by {facts.stride_div}")
    if isinstance(facts, Facts) and facts.divisor > 1:
        if isinstance(element_of(value.type), PointerType):
            return f"aligned to {facts.divisor} B"
        return "zero" if facts.divisor == UNBOUNDED else f"divisible by {facts.divisor}"
    return ""
