"""Dense constant storage: MLIR's raw buffer layout and numpy views of it.

Storage: each element takes a whole number of bytes (sub-byte types take a
byte), except i1 which MLIR bit-packs (LSB first); a buffer holding a single
element is a splat. numpy and ml_dtypes are imported only here.
"""

from __future__ import annotations


from .types import SCALAR_BITS, Type, TileType

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any


# Storage widths that differ from SCALAR_BITS: tf32 is a 19-bit APFloat (3 bytes).
_STORAGE_BITS = {"tf32": 19}


def element_size(elem: Type) -> int:
    """Bytes per element in the raw buffer (i1 is bit-packed, see element_bits)."""
    name = getattr(elem, "name", "")
    bits = _STORAGE_BITS.get(name) or SCALAR_BITS.get(name, 64)
    return max(1, (bits + 7) // 8)


def raw_size_ok(t: TileType, nbytes: int) -> bool:
    """MLIR's isValidRawBuffer: a splat (one element) or every element."""
    n = num_elements(t)
    if t.element.name == "i1":  # type: ignore[attr-defined]
        return nbytes == 1 or nbytes == (n + 7) // 8
    size = element_size(t.element)
    return nbytes == size or nbytes == size * n


def num_elements(t: TileType) -> int:
    n = 1
    for d in t.shape:
        n *= d
    return n


def is_splat(t: TileType, raw: bytes) -> bool:
    if t.element.name == "i1":  # type: ignore[attr-defined]
        return len(raw) == 1 and raw[0] in (0, 0xFF) or num_elements(t) == 1
    return len(raw) == element_size(t.element) or num_elements(t) == 1


def first_bits(t: TileType, raw: bytes) -> int:
    """The bit pattern of element 0 (no expansion of splats)."""
    if t.element.name == "i1":  # type: ignore[attr-defined]
        return raw[0] & 1 if raw else 0
    size = element_size(t.element)
    return int.from_bytes(raw[:size], "little")


def element_bits(t: TileType, raw: bytes) -> list[int]:
    """The bit pattern of every element, in row-major order (splats expanded)."""
    n = num_elements(t)
    name = t.element.name  # type: ignore[attr-defined]
    if name == "i1":
        if len(raw) == 1 and raw[0] in (0, 0xFF):
            return [raw[0] & 1] * n
        return [(raw[i // 8] >> (i % 8)) & 1 for i in range(n)]
    size = element_size(t.element)
    if len(raw) == size:
        v = int.from_bytes(raw, "little")
        return [v] * n
    return [int.from_bytes(raw[i * size:(i + 1) * size], "little") for i in range(n)]


_NP_NAMES = {
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "i4": "int8",
    "f16": "float16", "f32": "float32", "f64": "float64", "tf32": "float32",
}
_ML_NAMES = {"bf16": "bfloat16", "f8E4M3FN": "float8_e4m3fn", "f8E5M2": "float8_e5m2",
             "f8E8M0FNU": "float8_e8m0fnu", "f4E2M1FN": "float4_e2m1fn"}


def decode_dense(t: TileType, raw: bytes) -> Any:
    """A numpy array of shape `t.shape` holding the constant's values."""
    import numpy as np

    name = t.element.name  # type: ignore[attr-defined]
    bits = element_bits(t, raw)
    shape = tuple(t.shape)
    if name in ("i1",):
        return np.array(bits, dtype=np.bool_).reshape(shape)
    if name.startswith("i"):
        width = SCALAR_BITS[name]
        vals = [b - (1 << width) if b >> (width - 1) else b for b in bits]
        return np.array(vals, dtype=_NP_NAMES[name]).reshape(shape)
    if name in _ML_NAMES:
        import ml_dtypes

        dt = np.dtype(getattr(ml_dtypes, _ML_NAMES[name]))
        arr = np.array(bits, dtype=np.uint8 if dt.itemsize == 1 else np.uint16).view(dt)
        return arr.reshape(shape)
    if name == "tf32":  # 19-bit pattern: sign, 8-bit exponent, 10-bit mantissa -> f32 bits
        return np.array([b << 13 for b in bits], dtype=np.uint32).view(np.float32).reshape(shape)
    dt = np.dtype(_NP_NAMES[name])
    udt = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    return np.array(bits, dtype=udt).view(dt).reshape(shape)
