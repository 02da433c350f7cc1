"""Splat constants for the folds: read one and build one, without numpy where the value is an integer
or a boolean (a compile that folds no float never imports it: process start-up is part of every build
step)."""

from __future__ import annotations

from typing import Any, Optional

from ..ir.attributes import DenseElements
from ..ir.core import Operation, Value
from ..ir.dense import element_size, first_bits, is_splat
from ..ir.types import TileType
from .rewrite import defining_op


def _splat(value: Value) -> Optional[DenseElements]:
    op = defining_op(value)
    if op is None or op.name != "cuda_tile.constant":
        return None
    dense = op.attributes.get("value")
    if not isinstance(dense, DenseElements) or not is_splat(dense.type, dense.raw):
        return None
    return dense


def splat_int(value: Value) -> Optional[int]:
    """The one value of a splat integer or boolean `constant` (signed; i1 is 0 or 1), or None."""
    dense = _splat(value)
    name = getattr(dense.type.element, "name", "") if dense is not None else ""
    if not name.startswith("i"):
        return None
    bits = first_bits(dense.type, dense.raw)
    if name == "i1":
        return bits & 1
    width = int(name[1:])
    bits &= (1 << width) - 1
    return bits - (1 << width) if bits >> (width - 1) else bits


def splat_float(value: Value) -> Optional[Any]:
    """The one value of a splat floating-point `constant` (a numpy scalar), or None."""
    dense = _splat(value)
    if dense is None or getattr(dense.type.element, "name", "i").startswith("i"):
        return None
    return dense.values.reshape(-1)[0]


def make_splat(type_: TileType, scalar: Any, before: Operation) -> Value:
    """A `constant` of `type_` every element of which is `scalar` (an int, or a numpy scalar of a float
    element's dtype), inserted before `before`."""
    name = type_.element.name  # type: ignore[attr-defined]
    size = element_size(type_.element)
    if name == "i1":
        raw = b"\xff" if scalar else b"\x00"
    elif name.startswith("i"):
        raw = (int(scalar) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    else:
        import numpy as np

        raw = int(np.asarray(scalar).reshape(1).view(f"u{size}")[0]).to_bytes(size, "little")
    op = Operation("cuda_tile.constant", [], [type_], {"value": DenseElements(type_, raw)}, location=before.location)
    before.insert_before(op)
    return op.result
