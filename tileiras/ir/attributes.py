"""Attribute values of cuda_tile operations.

Conventions (the lowering reads `op.attributes[name]` directly):

* Names are exactly the argument names of NVIDIA's Ops.td
  (`memory_ordering_semantics`, `memory_scope`, `comparison_predicate`,
  `comparison_ordering`, `signedness`, `rounding_mode`, `overflow`,
  `sym_name`, `function_type`, `value`, `dim`, `permutation`, ...).
* Enum attributes are `str`: the keyword the printer writes, e.g. "weak",
  "relaxed", "acquire", "tl_blk", "device", "less_than", "signed",
  "unsigned", "nearest_even", "full", "none", "add", "public"
  (see `ENUMS` for every enum and its bytecode value order).
* Integer attributes are `int`; `BoolAttr` and unit attributes are `bool`
  (an absent unit attribute is simply missing from the dict, or False).
* Integer arrays (DenseI32ArrayAttr) are `tuple[int, ...]`; bool arrays
  (DenseBoolArrayAttr, e.g. `inbounds`) are `tuple[bool, ...]`.
* String and symbol attributes are `str`; type attributes are `Type`.
* Dense constants are `DenseElements` (the TileType, the raw little-endian
  bytes as stored in bytecode, and `.values`, a numpy array built lazily).
* Typed scalars inside array attributes (reduce/scan `identities`) are
  `IntegerAttr` / `FloatAttr`.
* Assume predicates are `DivBy`, `SameElements`, `Bounded`; optimization
  hints are `OptimizationHints`; debug info scopes are the `DI*` classes and
  a call-site location is `CallSiteLoc` (an op's `location` is a
  `core.Location`, a `CallSiteLoc` or None for unknown).
"""

from __future__ import annotations

from .record import record

from .types import ScalarType, TileType, Type

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Optional, Union

# Enum name -> keywords in bytecode-value order (value = index).
ENUMS: dict[str, tuple[str, ...]] = {
    "Signedness": ("unsigned", "signed"),
    "IntegerOverflow": ("none", "no_signed_wrap", "no_unsigned_wrap", "no_wrap"),
    "RoundingMode": ("nearest_even", "zero", "negative_inf", "positive_inf", "approx", "full",
                     "nearest_int_to_zero", "nearest_away"),
    "ComparisonOrdering": ("unordered", "ordered"),
    "ComparisonPredicate": ("equal", "not_equal", "less_than", "less_than_or_equal",
                            "greater_than", "greater_than_or_equal"),
    "AtomicRMWMode": ("and", "or", "xor", "add", "addf", "max", "min", "umax", "umin", "xchg"),
    "MemoryScope": ("tl_blk", "device", "sys"),
    "MemoryOrderingSemantics": ("weak", "relaxed", "acquire", "release", "acq_rel"),
    "PaddingValue": ("zero", "neg_zero", "nan", "pos_inf", "neg_inf"),
    "SymbolVisibility": ("public", "private"),
    "MultimemReductionKind": ("add", "min", "max", "and", "or", "xor", "umin", "umax"),
}

# Enum name -> its attribute mnemonic in the generic form, `#cuda_tile.<mnemonic><value>`.
ENUM_MNEMONICS: dict[str, str] = {
    "IntegerOverflow": "overflow", "RoundingMode": "rounding", "Signedness": "signedness",
    "ComparisonPredicate": "comparison_predicate", "ComparisonOrdering": "comparison_ordering",
    "MemoryScope": "memory_scope", "MemoryOrderingSemantics": "memory_ordering_semantics",
    "AtomicRMWMode": "atomic_rmw_mode", "SymbolVisibility": "symbol_visibility", "PaddingValue": "padding_value",
    "MultimemReductionKind": "multimem_reduction_kind",
}

# Enum name -> bytecode version that introduced each value beyond the first release.
ENUM_VALUE_SINCE: dict[tuple[str, str], str] = {
    ("RoundingMode", "nearest_away"): "13.4",
}

ENUM_INDEX: dict[str, dict[str, int]] = {name: {kw: i for i, kw in enumerate(kws)} for name, kws in ENUMS.items()}


@record
class IntegerAttr:
    """A typed integer (`0 : i32`); `value` is the signed value."""

    value: int
    type: Type


@record
class FloatAttr:
    """A typed float (`0.000000e+00 : f32`); `bits` is the IEEE bit pattern."""

    value: float
    type: Type
    bits: int


@record
class DictAttr:
    """An MLIR dictionary attribute: ordered (name, value) pairs."""

    items: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        for k, v in self.items:
            if k == key:
                return v
        return default


class DenseElements:
    """A dense constant: a tile type plus its raw little-endian element bytes.

    `raw` is what bytecode stores (i1 one byte per element; sub-byte float
    types one byte per element as well); `values` is a numpy array decoded
    on first use so the disassembler never imports numpy unless it must.
    """

    __slots__ = ("type", "raw", "_values")

    def __init__(self, type: TileType, raw: bytes, values: Any = None) -> None:
        self.type = type
        self.raw = bytes(raw)
        self._values = values

    @property
    def values(self) -> Any:
        if self._values is None:
            from .dense import decode_dense  # numpy, lazily

            self._values = decode_dense(self.type, self.raw)
        return self._values

    @property
    def element_type(self) -> Type:
        return self.type.element

    @property
    def is_splat(self) -> bool:
        from .dense import is_splat

        return is_splat(self.type, self.raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DenseElements) and self.type == other.type and self.raw == other.raw

    def __hash__(self) -> int:
        return hash((self.type, self.raw))

    def __repr__(self) -> str:
        return f"DenseElements({self.type}, {len(self.raw)} bytes)"


@record
class DivBy:
    """`div_by<divisor[, every E along A]>`."""

    divisor: int
    every: Optional[int] = None
    along: Optional[int] = None


@record
class SameElements:
    """`same_elements<[d0, d1, ...]>`."""

    values: tuple[int, ...]


@record
class Bounded:
    """`bounded<lb, ub>`; None is an open bound (printed `?`)."""

    lb: Optional[int]
    ub: Optional[int]


AssumePredicate = (DivBy, SameElements, Bounded)  # for isinstance


@record
class OptimizationHints:
    """Per-architecture optimization hints.

    `entries` keeps the bytecode/textual order: (arch, ((key, value), ...)),
    arch being "sm_90" ... or "default"; values are int or bool.
    """

    entries: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()

    def for_arch(self, arch: str) -> dict[str, Any]:
        """The hints for `arch`, falling back to the "default" entry per key."""
        out: dict[str, Any] = {}
        for name, items in self.entries:
            if name == "default":
                for k, v in items:
                    out.setdefault(k, v)
        for name, items in self.entries:
            if name == arch:
                out.update(dict(items))
        return out

    def get(self, arch: str, key: str, default: Any = None) -> Any:
        return self.for_arch(arch).get(key, default)


# -- debug info ---------------------------------------------------------------
@record
class DIFile:
    name: str
    directory: str


@record
class DICompileUnit:
    file: DIFile


@record
class DISubprogram:
    file: DIFile
    line: int
    name: str
    linkage_name: str
    compile_unit: DICompileUnit
    scope_line: int = 0


@record
class DILexicalBlock:
    scope: Any  # DISubprogram | DILexicalBlock
    file: DIFile
    line: int
    column: int = 0


@record
class CallSiteLoc:
    """MLIR `callsite(callee at caller)`; file/line/column are the callee's."""

    callee: Any
    caller: Any

    @property
    def file(self) -> str:
        return getattr(self.callee, "file", "")

    @property
    def line(self) -> int:
        return getattr(self.callee, "line", 0)

    @property
    def column(self) -> int:
        return getattr(self.callee, "column", 0)

    @property
    def scope(self) -> Any:
        return getattr(self.callee, "scope", None)

    def __str__(self) -> str:
        return str(self.callee)


def scalar_attr(value: Any, type: ScalarType) -> Union[IntegerAttr, FloatAttr]:
    """Build a typed scalar attribute from a Python number."""
    if type.is_int:
        return IntegerAttr(int(value), type)
    from .floats import float_to_bits

    return FloatAttr(float(value), type, float_to_bits(float(value), type.name))
