"""PTX fundamental types: width, kind and the numpy dtype each one computes in."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class PtxType:
    name: str
    bits: int
    kind: str   # 'b' bits, 'u' unsigned, 's' signed, 'f' float, 'pred', or a packed kind ('f16x2', ...)

    @property
    def nbytes(self) -> int:
        return max(1, self.bits // 8)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def signed(self) -> bool:
        return self.kind == "s"


_TABLE: dict[str, tuple[int, str]] = {
    "pred": (1, "pred"),
    "b8": (8, "b"), "b16": (16, "b"), "b32": (32, "b"), "b64": (64, "b"), "b128": (128, "b"),
    "u8": (8, "u"), "u16": (16, "u"), "u32": (32, "u"), "u64": (64, "u"),
    "s8": (8, "s"), "s16": (16, "s"), "s32": (32, "s"), "s64": (64, "s"),
    "f16": (16, "f"), "bf16": (16, "f"), "f32": (32, "f"), "f64": (64, "f"), "tf32": (32, "f"),
    "e4m3": (8, "f"), "e5m2": (8, "f"), "e2m1": (4, "f"),
    "f16x2": (32, "x2"), "bf16x2": (32, "x2"), "f32x2": (64, "x2"),
    "e4m3x2": (16, "x2"), "e5m2x2": (16, "x2"), "e2m3x2": (16, "x2"), "e3m2x2": (16, "x2"),
    "e2m1x2": (8, "x2"), "ue8m0x2": (16, "x2"), "ue5m3x2": (16, "x2"),
    "s2": (2, "s"), "u4": (4, "u"), "s4": (4, "s"), "b1": (1, "b"),
}

TYPE_NAMES = frozenset(_TABLE)


def ptx_type(name: str) -> PtxType:
    bits, kind = _TABLE[name]
    return PtxType(name, bits, kind)


@lru_cache(maxsize=None)
def np_dtype(name: str) -> Any:
    """The numpy dtype values of this type compute in (packed types compute as raw bits)."""
    import ml_dtypes
    import numpy as np

    t = ptx_type(name)
    if name == "pred":
        return np.dtype(np.bool_)
    if name == "bf16":
        return np.dtype(ml_dtypes.bfloat16)
    if name == "e4m3":
        return np.dtype(ml_dtypes.float8_e4m3fn)
    if name == "e5m2":
        return np.dtype(ml_dtypes.float8_e5m2)
    if name in ("f16", "f32", "f64"):
        return np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[name])
    if name == "tf32":
        return np.dtype(np.float32)
    if t.kind == "s":
        return np.dtype(f"int{t.bits}")
    return uint_dtype(t.bits)


@lru_cache(maxsize=None)
def uint_dtype(bits: int) -> Any:
    import numpy as np

    if bits == 1:
        return np.dtype(np.bool_)
    return np.dtype({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits])


@lru_cache(maxsize=None)
def sint_dtype(bits: int) -> Any:
    import numpy as np

    return np.dtype({8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}[bits])
