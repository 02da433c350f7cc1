"""What the program says about its integers and pointers: divisibility and alignment.

cuTile states what its launcher specialized (16-byte aligned bases, shapes and
strides divisible by 16 or 8, a unit innermost stride) with `assume` ops and
static tensor-view strides. Vectorized and asynchronous copies need those
facts: a 16-byte copy is legal only where every address it may touch is
16-byte aligned and no tile boundary cuts it.
"""

from __future__ import annotations

from ..ir.core import Operation, Value
from ..ir.types import DYNAMIC
from ..tileas.ops import CONVERT_LAYOUT


def divisor(value: Value) -> int:
    """A positive integer that divides every value `value` may take (1 when nothing is known);
    for a pointer, an alignment in bytes."""
    from ..ir.attributes import DivBy

    best = 1
    seen = 0
    while seen < 64:
        seen += 1
        owner = getattr(value, "owner", None)
        if not isinstance(owner, Operation):
            return best
        if owner.name == "cuda_tile.assume":
            pred = owner.attributes.get("predicate")
            if isinstance(pred, DivBy) and pred.every is None and pred.divisor > 0:
                best = max(best, pred.divisor)
            value = owner.operands[0]
            continue
        if owner.name == CONVERT_LAYOUT:   # the same values, distributed otherwise
            value = owner.operands[0]
            continue
        if owner.name == "cuda_tile.constant":
            try:
                raw = int.from_bytes(owner.attributes["value"].raw, "little", signed=True)
            except Exception:
                return best
            return max(best, abs(raw) & -abs(raw)) if raw else max(best, 1 << 30)
        return best
    return best


def static_or_divisor(static: int, value: "Value | None") -> int:
    """Divisibility of a view extent: the extent itself when static, else what facts say."""
    if static != DYNAMIC:
        return abs(static) if static else 1 << 30
    return divisor(value) if value is not None else 1
