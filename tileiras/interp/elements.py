"""Element types at run time: numpy storage, integer views and memory encoding.

A tile is a numpy array in the *storage* dtype of its element type:

    i1 -> bool          i4 -> int8 (sign-extended)      i8..i64 -> int8..int64
    f16, f32, f64 -> numpy; bf16, f8*, f4E2M1FN -> ml_dtypes; tf32 -> float32
    ptr<T> -> uint64 (a byte address in the interpreter's flat memory)

Integers are signless: signedness belongs to the op, so ops read their
operands through `to_signed` / `to_unsigned` (int64 / uint64 arrays) and
wrap results back with `from_int`. In memory, i1 takes a byte and the 4-bit
types are packed two to a byte, low nibble first (Types.td, tensor_view).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..ir.types import PointerType, ScalarType, TileType, Type
from .errors import InterpError

INT_BITS: dict[str, int] = {"i1": 1, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
_INT_DTYPE = {1: np.bool_, 4: np.int8, 8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UINT_DTYPE = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
FLOAT_NAMES = frozenset({"f16", "bf16", "f32", "tf32", "f64", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN",
                         "fnv8E5M3FNU"})
# float types without a numpy dtype: tiles hold their values in float32, memory holds their bits
CODEC_FLOATS = frozenset({"fnv8E5M3FNU"})


def element(t: Type) -> Type:
    return t.element if isinstance(t, TileType) else t


def is_int(t: Type) -> bool:
    e = element(t)
    return isinstance(e, ScalarType) and e.name in INT_BITS


def is_float(t: Type) -> bool:
    e = element(t)
    return isinstance(e, ScalarType) and not e.name.startswith("i")


def is_ptr(t: Type) -> bool:
    return isinstance(element(t), PointerType)


def int_bits(t: Type) -> int:
    return INT_BITS[element(t).name]  # type: ignore[union-attr]


@lru_cache(maxsize=None)
def _storage(name: str) -> np.dtype:
    if name in INT_BITS:
        return np.dtype(_INT_DTYPE[INT_BITS[name]])
    if name in FLOAT_NAMES:
        from .floats import float_format

        return float_format(name).dtype
    raise InterpError(f"element type '{name}' is not supported by the interpreter")


def storage_dtype(t: Type) -> np.dtype:
    e = element(t)
    if isinstance(e, PointerType):
        return np.dtype(np.uint64)
    if isinstance(e, ScalarType):
        return _storage(e.name)
    raise InterpError(f"'{t}' has no element storage")


# -- integer views --------------------------------------------------------------
def to_signed(x: np.ndarray, bits: int) -> np.ndarray:
    """The values as signed integers (int64)."""
    x = np.asarray(x)
    if bits == 1:
        return np.where(x, -1, 0).astype(np.int64)
    return x.astype(np.int64)


def to_unsigned(x: np.ndarray, bits: int) -> np.ndarray:
    """The values as unsigned integers (uint64)."""
    x = np.asarray(x)
    if bits == 1:
        return x.astype(np.uint64)
    if bits == 4:
        return (x.astype(np.uint8) & np.uint8(0xF)).astype(np.uint64)
    return x.view(_UINT_DTYPE[bits]).astype(np.uint64)


def from_int(x: Any, bits: int) -> np.ndarray:
    """Wrap integers (int64 or uint64 arrays) modulo 2**bits into storage."""
    x = np.asarray(x)
    if bits == 1:
        return (x.astype(np.uint64) & np.uint64(1)).astype(np.bool_)
    if bits == 4:
        low = (x.astype(np.uint64) & np.uint64(0xF)).astype(np.int8)
        return ((low ^ np.int8(8)) - np.int8(8)).astype(np.int8)
    if x.dtype == np.uint64 and bits == 64:
        return x.view(np.int64)
    return x.astype(_INT_DTYPE[bits])


def int_range(bits: int, signed: bool) -> tuple[int, int]:
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


# -- raw bits (bitcast, memory) ------------------------------------------------------
def storage_bits(t: Type) -> int:
    e = element(t)
    if isinstance(e, PointerType):
        return 64
    return e.bitwidth  # type: ignore[union-attr]


def to_bits(x: np.ndarray, t: Type) -> np.ndarray:
    """The bit patterns of the values as uint64."""
    e = element(t)
    x = np.asarray(x)
    if isinstance(e, PointerType):
        return x.astype(np.uint64)
    name = e.name  # type: ignore[union-attr]
    if name in INT_BITS:
        return to_unsigned(x, INT_BITS[name])
    if name == "f4E2M1FN":
        return (x.view(np.uint8) & np.uint8(0xF)).astype(np.uint64)
    if name in CODEC_FLOATS:
        from .floats import encode_bits, float_format

        return encode_bits(x, float_format(name))
    return x.view(_UINT_DTYPE[x.dtype.itemsize * 8]).astype(np.uint64)


def from_bits(bits: np.ndarray, t: Type) -> np.ndarray:
    e = element(t)
    bits = np.asarray(bits, np.uint64)
    if isinstance(e, PointerType):
        return bits
    name = e.name  # type: ignore[union-attr]
    if name in INT_BITS:
        return from_int(bits, INT_BITS[name])
    dt = storage_dtype(e)
    if name == "f4E2M1FN":
        return (bits & np.uint64(0xF)).astype(np.uint8).view(dt)
    if name in CODEC_FLOATS:
        from .floats import decode_bits, float_format

        return decode_bits(bits, float_format(name))
    return bits.astype(_UINT_DTYPE[dt.itemsize * 8]).view(dt)


# -- memory encoding ---------------------------------------------------------------
def is_nibble(t: Type) -> bool:
    """4-bit element types are packed two per byte in memory."""
    e = element(t)
    return isinstance(e, ScalarType) and e.name in ("i4", "f4E2M1FN")


def mem_size(t: Type) -> int:
    """Bytes per element in memory (4-bit types: see `is_nibble`)."""
    e = element(t)
    if isinstance(e, PointerType):
        return 8
    if is_nibble(e) or e.name in CODEC_FLOATS:  # type: ignore[union-attr]
        return 1
    return max(1, e.bitwidth // 8)  # type: ignore[union-attr]


def encode(values: np.ndarray, t: Type) -> bytes:
    """The memory image of a 1-D run of elements."""
    values = np.asarray(values).reshape(-1)
    if is_nibble(t):
        codes = to_bits(values, t).astype(np.uint8)
        if codes.size % 2:
            codes = np.concatenate([codes, np.zeros(1, np.uint8)])
        return (codes[0::2] | (codes[1::2] << 4)).tobytes()
    if element(t) == ScalarType("i1"):
        return values.astype(np.uint8).tobytes()
    if element(t).name in CODEC_FLOATS:  # type: ignore[union-attr]
        return to_bits(values, t).astype(np.uint8).tobytes()
    return np.ascontiguousarray(values.astype(storage_dtype(t))).tobytes()


def decode(raw: np.ndarray, t: Type, count: int) -> np.ndarray:
    """Elements from their memory image (uint8 array)."""
    raw = np.asarray(raw, np.uint8).reshape(-1)
    if is_nibble(t):
        codes = np.empty(raw.size * 2, np.uint8)
        codes[0::2] = raw & 0xF
        codes[1::2] = raw >> 4
        return from_bits(codes[:count].astype(np.uint64), t)
    if element(t) == ScalarType("i1"):
        return raw[:count] != 0
    if element(t).name in CODEC_FLOATS:  # type: ignore[union-attr]
        return from_bits(raw[:count].astype(np.uint64), t)
    dt = storage_dtype(t)
    return raw[: count * dt.itemsize].view(dt).copy()


def cast_scalar(value: Any, t: Type) -> np.ndarray:
    """A Python/numpy number (or raw little-endian bytes) as a 0-d tile of type `t`."""
    e = element(t)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return from_bits(np.asarray(int.from_bytes(bytes(value), "little"), np.uint64), e).reshape(())
    if isinstance(e, PointerType):
        return np.asarray(int(value) & (2**64 - 1), np.uint64)
    name = e.name  # type: ignore[union-attr]
    if name in INT_BITS:
        return from_int(np.asarray(int(value) & (2**64 - 1), np.uint64), INT_BITS[name])
    from .floats import float_format, quantize

    return quantize(np.asarray(float(value)), None, float_format(name))
