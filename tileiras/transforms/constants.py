"""Splat constants for the folds: read one (`splat_value`) and build one (`make_splat`)."""

from __future__ import annotations

from typing import Any, Optional

from ..ir.attributes import DenseElements
from ..ir.core import Operation, Value
from ..ir.dense import element_size
from ..ir.types import TileType
from .rewrite import defining_op


def splat_value(value: Value) -> Optional[Any]:
    """The one value of a splat `constant` (a numpy scalar), or None."""
    op = defining_op(value)
    if op is None or op.name != "cuda_tile.constant":
        return None
    dense = op.attributes.get("value")
    if not isinstance(dense, DenseElements) or not dense.is_splat:
        return None
    return dense.values.reshape(-1)[0] if dense.values.size else None


def make_splat(type_: TileType, scalar: Any, before: Operation) -> Value:
    """A `constant` of `type_` every element of which is `scalar` (a numpy scalar of the element's dtype),
    inserted before `before`."""
    import numpy as np

    name = type_.element.name  # type: ignore[attr-defined]
    if name == "i1":
        raw = b"\xff" if bool(scalar) else b"\x00"
    else:
        size = element_size(type_.element)
        bits = int(np.asarray(scalar).reshape(1).view(f"u{size}")[0]) if name[0] != "i" else int(scalar)
        raw = (bits & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    op = Operation("cuda_tile.constant", [], [type_], {"value": DenseElements(type_, raw)}, location=before.location)
    before.insert_before(op)
    return op.result
