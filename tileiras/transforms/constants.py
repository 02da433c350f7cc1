"""Splat constants for the folds: read one and build one, without numpy (process start-up is part of
every build step, and numpy is not otherwise imported by a small compile). Floats are read and written
with `struct` (f16, f32, f64; bf16 through f32, rounded to nearest even)."""

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


def is_splat_constant(value: Value) -> bool:
    return _splat(value) is not None


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


_FLOAT_FORMATS = {"f16": "<e", "f32": "<f", "f64": "<d"}


def splat_float(value: Value) -> Optional[float]:
    """The one value of a splat f16, bf16, f32 or f64 `constant`, or None."""
    import struct

    dense = _splat(value)
    name = getattr(dense.type.element, "name", "") if dense is not None else ""
    size = element_size(dense.type.element) if dense is not None else 0
    raw = dense.raw[:size] if dense is not None else b""
    if name in _FLOAT_FORMATS:
        return struct.unpack(_FLOAT_FORMATS[name], raw)[0]
    if name == "bf16":
        return struct.unpack("<f", b"\x00\x00" + raw)[0]
    return None


def _float_bytes(name: str, x: float) -> bytes:
    import struct

    if name in _FLOAT_FORMATS:
        return struct.pack(_FLOAT_FORMATS[name], x)
    bits = struct.unpack("<I", struct.pack("<f", x))[0]   # bf16: f32, then to nearest even in its top half
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    if bits & 0x7F80 == 0x7F80:   # rounded up to infinity: past bf16's range, as struct says of the others
        raise OverflowError("float too large to pack as bf16")
    return bits.to_bytes(2, "little")


def make_splat(type_: TileType, scalar: Any, before: Operation) -> Value:
    """A `constant` of `type_` every element of which is `scalar` (an int, or a float rounded to the
    element type: f16, bf16, f32, f64), inserted before `before`."""
    name = type_.element.name  # type: ignore[attr-defined]
    size = element_size(type_.element)
    if name == "i1":
        raw = b"\xff" if scalar else b"\x00"
    elif name.startswith("i"):
        raw = (int(scalar) & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    else:
        raw = _float_bytes(name, float(scalar))
    op = Operation("cuda_tile.constant", [], [type_], {"value": DenseElements(type_, raw)}, location=before.location)
    before.insert_before(op)
    return op.result
