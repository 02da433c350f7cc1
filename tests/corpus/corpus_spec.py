"""Declarative description of corpus kernels.

Each file under ``kernels/`` defines cuTile kernels and a module-level ``KERNELS``
list of :class:`Kernel` records.  ``generate.py`` turns every record into one
bytecode module per TileIR version plus one ``manifest.json`` entry; the manifest
is what the other test suites read, so everything here is plain data that
serialises to JSON (only ``Kernel.function`` is a live cuTile object).

Input recipes are deterministic: ``reference.make_args`` seeds a numpy generator
from the kernel, entry, case and parameter names, so every test run (and every
backend) sees the same arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

VERSIONS: tuple[str, ...] = ("13.1", "13.2", "13.3", "13.4")

# manifest dtype name -> TileIR element type spelled as tileirdisasm prints it.
# Unsigned arrays are signless in TileIR: signedness lives on the ops.
ELEMENT_TYPES: dict[str, str] = {
    "bool": "i1",
    "int8": "i8", "uint8": "i8",
    "int16": "i16", "uint16": "i16",
    "int32": "i32", "uint32": "i32",
    "int64": "i64", "uint64": "i64",
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "float8_e4m3fn": "f8E4M3FN", "float8_e5m2": "f8E5M2",
    "float8_e8m0fnu": "f8E8M0FNU",
}


# --------------------------------------------------------------------------- parameters

@dataclass(frozen=True)
class Arr:
    """An array parameter (cuTile ``ArrayConstraint``): ``ptr, shape..., strides...``."""
    dtype: str
    ndim: int
    index_dtype: str = "int32"
    stride_constant: tuple[int | None, ...] | None = None
    shape_divisible_by: int | tuple[int, ...] = 1
    stride_divisible_by: int | tuple[int, ...] = 1
    base_addr_divisible_by: int = 1
    alias_groups: tuple[str, ...] = ()
    may_alias_internally: bool = False

    kind = "array"

    def abi(self) -> list[str]:
        index = ELEMENT_TYPES[self.index_dtype]
        return [f"ptr<{ELEMENT_TYPES[self.dtype]}>"] + [index] * (2 * self.ndim)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "array", "dtype": self.dtype, "ndim": self.ndim,
            "index_dtype": self.index_dtype,
            "stride_constant": list(self.stride_constant) if self.stride_constant else None,
            "shape_divisible_by": _listify(self.shape_divisible_by),
            "stride_divisible_by": _listify(self.stride_divisible_by),
            "base_addr_divisible_by": self.base_addr_divisible_by,
            "alias_groups": list(self.alias_groups),
            "may_alias_internally": self.may_alias_internally,
        }


@dataclass(frozen=True)
class Scalar:
    """A runtime scalar parameter (cuTile ``ScalarConstraint``): one entry parameter."""
    dtype: str

    kind = "scalar"

    def abi(self) -> list[str]:
        return [ELEMENT_TYPES[self.dtype]]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "scalar", "dtype": self.dtype}


@dataclass(frozen=True)
class Const:
    """A compile-time constant (``ct.Constant``): folded into the module, no entry parameter."""
    value: bool | int | float

    kind = "constant"

    def abi(self) -> list[str]:
        return []

    def to_json(self) -> dict[str, Any]:
        return {"kind": "constant", "value": self.value}


@dataclass(frozen=True)
class ArrList:
    """A list of arrays (cuTile ``ListConstraint``).  The entry receives a pointer to a
    table of i64 words, three per array for 1-D elements (data pointer, shape, stride),
    and the list length."""
    element: Arr
    elements_may_alias: bool = False

    kind = "list"

    def abi(self) -> list[str]:
        return ["ptr<i64>", "i32"]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "list", "element": self.element.to_json(),
                "elements_may_alias": self.elements_may_alias,
                "descriptor": "i64 words per element: data pointer, shape..., strides..."}


Param = Arr | Scalar | Const | ArrList


def _listify(v: int | Sequence[int]) -> int | list[int]:
    return v if isinstance(v, int) else list(v)


# --------------------------------------------------------------------------- inputs

def uniform(lo: float, hi: float) -> list:
    return ["uniform", lo, hi]


def randint(lo: int, hi: int) -> list:
    """Integers in [lo, hi)."""
    return ["randint", lo, hi]


def normal(mu: float = 0.0, sigma: float = 1.0) -> list:
    return ["normal", mu, sigma]


def full(value: float | int) -> list:
    return ["full", value]


def choice(values: Sequence[float | int]) -> list:
    return ["choice", list(values)]


def arange(start: int = 0, step: int = 1) -> list:
    return ["arange", start, step]


ZEROS: list = ["full", 0]


@dataclass(frozen=True)
class Case:
    """One launch: array shapes and initial contents, scalar values, grid."""
    grid: tuple[int, ...]
    # name -> (shape, init recipe); a list parameter maps to a list of those
    arrays: Mapping[str, Any]
    scalars: Mapping[str, bool | int | float] = field(default_factory=dict)
    name: str = "default"

    def to_json(self, params: Mapping[str, Param]) -> dict[str, Any]:
        grid = tuple(self.grid) + (1,) * (3 - len(self.grid))
        arrays: dict[str, Any] = {}
        for pname, p in params.items():
            if isinstance(p, Arr):
                shape, init = self.arrays[pname]
                if len(shape) != p.ndim:
                    raise ValueError(f"case {self.name}: {pname} has ndim {p.ndim}, shape {shape}")
                arrays[pname] = {"shape": list(shape), "dtype": p.dtype, "init": init}
            elif isinstance(p, ArrList):
                arrays[pname] = [{"shape": list(shape), "dtype": p.element.dtype, "init": init}
                                 for shape, init in self.arrays[pname]]
        extra = set(self.arrays) - set(arrays)
        if extra:
            raise ValueError(f"case {self.name}: unknown arrays {sorted(extra)}")
        scalars = {}
        for pname, p in params.items():
            if isinstance(p, Scalar):
                scalars[pname] = {"dtype": p.dtype, "value": self.scalars[pname]}
        return {"name": self.name, "grid": list(grid), "arrays": arrays, "scalars": scalars}


# --------------------------------------------------------------------------- kernels

@dataclass(frozen=True)
class Entry:
    """One exported entry (one cuTile ``KernelSignature``)."""
    symbol: str
    params: Mapping[str, Param]           # in the kernel's Python parameter order
    cases: Sequence[Case]
    reference: str                        # function name in reference.py
    outputs: tuple[str, ...]              # array parameters the kernel writes
    tolerance: Mapping[str, float] | str = "exact"   # "exact" or {"rtol":..,"atol":..}
    options: Mapping[str, Any] = field(default_factory=dict)   # extra facts for the reference

    def abi(self) -> list[str]:
        return [t for p in self.params.values() for t in p.abi()]


@dataclass(frozen=True)
class Kernel:
    """One bytecode module: a cuTile kernel exported with one signature per entry."""
    name: str
    function: Callable
    entries: Sequence[Entry]
    description: str
    gpu_code: str = "sm_90"
    # Versions cuTile is expected to refuse, with the reason; the generator checks
    # that it really does refuse them (and nothing else).
    skip: Mapping[str, str] = field(default_factory=dict)
    # Expected stdout lines per block, for print kernels (see reference.py).
    prints: bool = False


def elementwise_case(params: Mapping[str, Param], shape: tuple[int, ...], grid: tuple[int, ...],
                     inits: Mapping[str, list], default: list | None = None,
                     name: str = "default", scalars: Mapping[str, Any] | None = None) -> Case:
    """A case where every array parameter has the same shape."""
    arrays = {}
    for pname, p in params.items():
        if isinstance(p, Arr):
            init = inits.get(pname, default)
            if init is None:
                raise ValueError(f"no init recipe for {pname}")
            arrays[pname] = (shape, init)
    return Case(grid=grid, arrays=arrays, scalars=dict(scalars or {}), name=name)


def case(grid: tuple[int, ...], name: str = "default", scalars: Mapping[str, Any] | None = None,
         **arrays: tuple[tuple[int, ...], list]) -> Case:
    """Shorthand: ``case((2,), x=((128,), uniform(0, 1)), out=((128,), ZEROS))``."""
    return Case(grid=tuple(grid), arrays=arrays, scalars=dict(scalars or {}), name=name)


def tol(value: float) -> dict[str, float]:
    """Relative and absolute tolerance of ``value``."""
    return {"rtol": value, "atol": value}
