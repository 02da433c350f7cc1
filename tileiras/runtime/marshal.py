"""Kernel arguments from numpy arrays, the way cuTile passes them.

An array with ndim >= 1 becomes `ptr, shape..., strides...` entry
parameters (strides in elements); a 0-d array becomes one scalar parameter;
a Python list (or tuple) of arrays becomes `ptr<i64>, i32`: a device-side
table with one row of i64 words per array (data pointer, shape...,
strides...), which the compiled code reads through a `?x(1+2*ndim)` i64
tensor view, and the number of arrays.
`bind` checks the arrays against the entry signature (count, element type,
index width) before anything runs; `Binding.upload` copies the arrays into a
backend's memory and returns the raw parameter values; `Binding.download`
reads them back after the run.

A backend memory is anything with `alloc(nbytes) -> address`,
`write(address, bytes)` and `read(address, n) -> bytes`: the interpreter's,
the PTX emulator's and a CUDA device all qualify.

Raw parameter values: ints for pointers and integers (signed), Python
floats for f32/f64 and the little-endian bytes of the value for the other
float types (the PTX emulator packs bytes verbatim).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Protocol

import numpy as np

from ..errors import ExitCode, TileirasError
from ..ir.types import PointerType, ScalarType, TileType, Type


class DeviceMemory(Protocol):
    def alloc(self, nbytes: int) -> int: ...
    def write(self, address: int, data: bytes) -> None: ...
    def read(self, address: int, n: int) -> bytes: ...


def usage_error(message: str) -> TileirasError:
    return TileirasError(message if message.startswith("error:") else "error: " + message,
                         ExitCode.INVALID_OPTIONS)


def _scalar_of(t: Type) -> Optional[Type]:
    """The element of a 0-d tile parameter (or the type itself)."""
    if isinstance(t, TileType):
        return t.element if not t.shape else None
    return t


# element type -> numpy dtype names an argument array may have ("V<n>": raw bits of that size,
# which is how np.savez stores bf16/f8 arrays)
_ACCEPT: dict[str, tuple[str, ...]] = {
    "i1": ("bool",), "i8": ("int8", "uint8"), "i16": ("int16", "uint16"), "i32": ("int32", "uint32"),
    "i64": ("int64", "uint64"), "i4": ("int4", "uint4"),
    "f16": ("float16",), "bf16": ("bfloat16", "V2"), "f32": ("float32",), "tf32": ("float32",),
    "f64": ("float64",), "f8E4M3FN": ("float8_e4m3fn", "V1"), "f8E5M2": ("float8_e5m2", "V1"),
    "f8E8M0FNU": ("float8_e8m0fnu", "V1"), "f4E2M1FN": ("float4_e2m1fn",), "fnv8E5M3FNU": ("uint8", "V1"),
}


def _dtype_name(dt: np.dtype) -> str:
    """ml_dtypes' types (kind "V") by their names; raw bits ("void<bits>") as "V<bytes>"."""
    return f"V{dt.itemsize}" if dt.kind == "V" and dt.name.startswith("void") else dt.name


def accepts(elem: Type, dt: np.dtype) -> bool:
    return isinstance(elem, ScalarType) and _dtype_name(dt) in _ACCEPT.get(elem.name, ())


@dataclass
class ArrayArg:
    position: int
    array: np.ndarray
    element: Type
    first_param: int
    index_type: Type
    order: str = "C"                  # memory order of the copy: "C" or "F"
    address: int = 0
    nbytes: int = 0

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements of the memory copy."""
        shape = self.array.shape
        out = [0] * len(shape)
        step = 1
        dims = range(len(shape) - 1, -1, -1) if self.order == "C" else range(len(shape))
        for d in dims:
            out[d] = step
            step *= max(1, shape[d])
        return tuple(out)

    @property
    def descriptor(self) -> list[int]:
        """[address, shape..., strides...]: the entry parameters, or a row of a list's table."""
        return [self.address, *(int(n) for n in self.array.shape), *self.strides]


@dataclass
class ListArg:
    """A list of arrays: its table is uploaded after the arrays it describes."""
    position: int
    items: list[ArrayArg]
    first_param: int
    table: Optional[ArrayArg] = None


I64 = ScalarType("i64")


@dataclass
class Binding:
    kernel: str
    param_types: list[Type]
    arrays: list[Any]                 # the given arrays, in order
    array_args: list[ArrayArg] = field(default_factory=list)
    scalar_params: dict[int, Any] = field(default_factory=dict)   # param index -> raw value
    list_args: list[ListArg] = field(default_factory=list)

    def upload(self, memory: DeviceMemory) -> list[Any]:
        """Copy every array (and list table) into `memory`; the raw value of every entry parameter."""
        params: list[Any] = [None] * len(self.param_types)
        for a in self.array_args:
            _place(memory, a)
            desc = a.descriptor
            params[a.first_param:a.first_param + len(desc)] = desc
        for lst in self.list_args:
            for a in lst.items:
                _place(memory, a)
            rows = np.array([a.descriptor for a in lst.items], np.int64) if lst.items else np.zeros((0, 1), np.int64)
            lst.table = ArrayArg(lst.position, rows, I64, -1, I64)
            _place(memory, lst.table)
            params[lst.first_param] = lst.table.address
            params[lst.first_param + 1] = len(lst.items)
        for i, v in self.scalar_params.items():
            params[i] = v
        return params

    def download(self, memory: DeviceMemory) -> list[Any]:
        """Every argument as it is in `memory` now (0-d arrays unchanged, a list as a list of arrays)."""
        out: list[Any] = list(self.arrays)
        for a in self.array_args:
            out[a.position] = _fetch(memory, a)
        for lst in self.list_args:
            out[lst.position] = [_fetch(memory, a) for a in lst.items]
        return out


def _place(memory: DeviceMemory, a: ArrayArg) -> None:
    from ..interp.elements import encode

    data = _memory_image(a, encode)
    a.nbytes = len(data)
    a.address = memory.alloc(max(1, len(data)))
    if data:
        memory.write(a.address, data)


def _fetch(memory: DeviceMemory, a: ArrayArg) -> np.ndarray:
    from ..interp.elements import decode

    raw = np.frombuffer(memory.read(a.address, a.nbytes), np.uint8) if a.nbytes else np.zeros(0, np.uint8)
    dt = a.array.dtype
    count = a.array.size
    if dt.name not in ("int4", "uint4", "float4_e2m1fn"):     # (ml_dtypes types have kind "V")
        flat = raw[: count * dt.itemsize].view(dt) if count else np.zeros(0, dt)
    else:
        flat = decode(raw, a.element, count).view(dt)
    return flat.reshape(a.array.shape, order=a.order).copy(order="K")


def _memory_image(a: ArrayArg, encode: Any) -> bytes:
    arr = a.array
    dt = arr.dtype
    if dt.name in ("int4", "uint4", "float4_e2m1fn"):
        codes = np.ascontiguousarray(arr.reshape(-1, order=a.order)).view(np.uint8) & 0xF
        if codes.size % 2:
            codes = np.concatenate([codes, np.zeros(1, np.uint8)])
        return (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8).tobytes()
    return arr.tobytes(order=a.order)


def _is_int(t: Optional[Type]) -> bool:
    return isinstance(t, ScalarType) and t.name.startswith("i")


def _scalar_value(arr: np.ndarray, elem: ScalarType, position: int) -> Any:
    dt = arr.dtype
    name = elem.name
    ok = (name == "i1" and dt.kind == "b") or \
         (name.startswith("i") and name != "i1" and dt.kind in "iu" and dt.itemsize * 8 == elem.bitwidth) or \
         accepts(elem, dt)
    if not ok:
        raise usage_error(f"argument {position} is a {_dtype_name(dt)} scalar, the kernel parameter is {name}")
    if name.startswith("i"):
        return int(arr.astype(np.int64)) if dt.kind in "biu" and dt != np.uint64 else int(arr.view(np.int64))
    if name in ("f32", "f64"):
        return float(arr)
    return arr.tobytes()                      # f16, bf16, f8...: the raw bits


def bind(kernel: str, param_types: list[Type], arrays: list[Any]) -> Binding:
    """Match `arrays` to the entry parameters; raises a usage error on any mismatch."""
    arrays = [[np.asarray(x) for x in a] if isinstance(a, (list, tuple)) else np.asarray(a) for a in arrays]
    binding = Binding(kernel, list(param_types), arrays)
    k = 0
    n = len(param_types)

    def describe() -> str:
        return "(" + ", ".join(str(t) for t in param_types) + ")"

    for pos, arr in enumerate(arrays):
        if k >= n:
            raise usage_error(f"kernel '{kernel}' takes {n} parameters {describe()}; argument {pos} is one too many")
        if isinstance(arr, list):
            binding.list_args.append(_bind_list(kernel, param_types, k, pos, arr))
            k += 2
            continue
        t = _scalar_of(param_types[k])
        if arr.ndim == 0:
            if not isinstance(t, ScalarType):
                raise usage_error(f"argument {pos} is a scalar, but parameter {k} of '{kernel}' is {param_types[k]} "
                                  "(pass an array with ndim >= 1 for a pointer)")
            binding.scalar_params[k] = _scalar_value(arr, t, pos)
            k += 1
            continue
        if not isinstance(t, PointerType):
            raise usage_error(f"argument {pos} is an array, but parameter {k} of '{kernel}' is {param_types[k]}")
        ndim = arr.ndim
        if k + 1 + 2 * ndim > n:
            raise usage_error(f"argument {pos} is a {ndim}-d array and needs {1 + 2 * ndim} parameters "
                              f"(ptr, shape, strides) from parameter {k}; '{kernel}' has only {n} {describe()}")
        index = [_scalar_of(param_types[k + 1 + j]) for j in range(2 * ndim)]
        if not all(_is_int(i) for i in index) or len({str(i) for i in index}) != 1:
            raise usage_error(f"argument {pos} is a {ndim}-d array, but parameters {k + 1}..{k + 2 * ndim} of "
                              f"'{kernel}' are not its shape and strides {describe()}")
        if not accepts(t.pointee, arr.dtype):
            raise usage_error(f"argument {pos} has dtype {_dtype_name(arr.dtype)}, the kernel parameter is "
                              f"ptr<{t.pointee}>")
        arr, order = _contiguous(arr)
        arrays[pos] = arr
        a = ArrayArg(pos, arr, t.pointee, k, index[0], order)  # type: ignore[arg-type]
        limit = (1 << (index[0].bitwidth - 1)) - 1  # type: ignore[union-attr]
        if max(list(arr.shape) + list(a.strides)) > limit:
            raise usage_error(f"argument {pos}: shape {arr.shape} does not fit the kernel's {index[0]} index type")
        binding.array_args.append(a)
        k += 1 + 2 * ndim
    if k != n:
        raise usage_error(f"kernel '{kernel}' takes {n} parameters {describe()}; the {len(arrays)} arguments "
                          f"provide {k}")
    return binding


def _contiguous(arr: np.ndarray) -> tuple[np.ndarray, str]:
    """The array in one contiguous block, and that block's order ("C" or "F")."""
    if arr.flags.f_contiguous and not arr.flags.c_contiguous:
        return arr, "F"
    return np.ascontiguousarray(arr), "C"


def _bind_list(kernel: str, param_types: list[Type], k: int, pos: int, items: list[np.ndarray]) -> ListArg:
    """A list of arrays for parameters k, k+1 (`ptr<i64>, i32`: table and length)."""
    table = _scalar_of(param_types[k])
    count = _scalar_of(param_types[k + 1]) if k + 1 < len(param_types) else None
    if not (isinstance(table, PointerType) and str(table.pointee) == "i64" and _is_int(count)):
        raise usage_error(f"argument {pos} is a list of arrays, but parameters {k}, {k + 1} of '{kernel}' are not "
                          "a descriptor table and its length (ptr<i64>, i32)")
    if len({a.ndim for a in items}) > 1 or any(a.ndim == 0 for a in items):
        raise usage_error(f"argument {pos}: the arrays of a list must all have the same ndim >= 1")
    out: list[ArrayArg] = []
    for i, a in enumerate(items):
        # the table does not say the element type: take the one the dtype stands for
        elem = next((name for name, dts in _ACCEPT.items() if _dtype_name(a.dtype) in dts), None)
        if elem is None:
            raise usage_error(f"argument {pos}[{i}] has dtype {_dtype_name(a.dtype)}, which no element type takes")
        a, order = _contiguous(a)
        out.append(ArrayArg(pos, a, ScalarType(elem), -1, I64, order))
    return ListArg(pos, out, k)
