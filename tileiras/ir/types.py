"""The cuda_tile type system: element types, tiles, pointers, tokens and views.

Types are immutable, hashable values; equal types compare equal, so the
bytecode type table and the verifier can use them as dictionary keys.
`str(t)` is the short (dialect-prefix-free) spelling `tileirdisasm` prints.
A dynamic dimension or stride is stored as `DYNAMIC` and printed as `?`.
"""

from __future__ import annotations

from .record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Optional

DYNAMIC = -(2**63)  # MLIR's ShapedType::kDynamic


class Type:
    """Base class of every type."""

    __slots__ = ()


@record
class ScalarType(Type):
    """An element type: i1..i64, i4, f16, bf16, f32, tf32, f64, f8*/f4* variants."""

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def is_int(self) -> bool:
        return self.name.startswith("i")

    @property
    def is_float(self) -> bool:
        return not self.is_int

    @property
    def bitwidth(self) -> int:
        return SCALAR_BITS[self.name]


# Element-type spelling -> storage width in bits (tf32 is stored in 32 bits).
SCALAR_BITS: dict[str, int] = {
    "i1": 1, "i4": 4, "i8": 8, "i16": 16, "i32": 32, "i64": 64,
    "f16": 16, "bf16": 16, "f32": 32, "tf32": 32, "f64": 64,
    "f8E4M3FN": 8, "f8E5M2": 8, "f8E8M0FNU": 8, "f4E2M1FN": 4, "fnv8E5M3FNU": 8,
}


@record
class TokenType(Type):
    def __str__(self) -> str:
        return "token"


@record
class PointerType(Type):
    pointee: Type
    ptr_attr: Optional[str] = None  # 13.4 pointer attribute: none, unicast or multicast; None when absent

    def __str__(self) -> str:
        if self.ptr_attr is not None:
            return f"ptr<{self.pointee}, <{self.ptr_attr}>>"
        return f"ptr<{self.pointee}>"


def storage_bytes(elem: Type) -> int:
    """Bytes one element takes in memory: a pointer 8, a scalar its width (at least a byte: i1 and
    the 4-bit types are stored a byte each)."""
    if isinstance(elem, PointerType):
        return 8
    assert isinstance(elem, ScalarType)
    return max(1, elem.bitwidth // 8)


def _dims(values: tuple[int, ...]) -> str:
    return "x".join("?" if v == DYNAMIC else str(v) for v in values)


@record
class TileType(Type):
    """A tile: a statically shaped array of scalars or pointers; shape () is a 0-d tile.

    At nv_tileas a tile's type carries its distributed layout as its `encoding` (a layout of
    tileiras/layout/encodings.py, as Triton's tensor types carry theirs): two tiles of one shape in two
    layouts have two types. None above nv_tileas. `str` leaves it out; the nv_tileas printer shows it
    (`tile<128x64xf16, #mma>`)."""

    shape: tuple[int, ...]
    element: Type
    encoding: object = None

    def with_encoding(self, encoding: object) -> "TileType":
        """This tile's type in another layout (None: without one)."""
        return self if encoding is self.encoding else TileType(self.shape, self.element, encoding)

    def __str__(self) -> str:
        if not self.shape:
            return f"tile<{self.element}>"
        return f"tile<{_dims(self.shape)}x{self.element}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def encoding_text(layout: object) -> str:
    """A layout as a tile type's encoding: its `describe` in the nv_tileas dialect (`#nv_tileas.mma<...>`;
    layout/encoding_text.py reads it back), as the nv_tileas printer and the verifier's diagnostics spell it."""
    return "#nv_tileas." + layout.describe()[1:]  # type: ignore[attr-defined]


@record
class TensorViewType(Type):
    element: Type
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    ptr_attr: Optional[str] = None  # 13.4 pointer attribute; None when absent

    def __str__(self) -> str:
        strides = ",".join("?" if s == DYNAMIC else str(s) for s in self.strides)
        extra = f", #cuda_tile.ptr_attr<{self.ptr_attr}>" if self.ptr_attr is not None else ""
        if not self.shape:
            return f"tensor_view<{self.element}{extra}>"
        return f"tensor_view<{_dims(self.shape)}x{self.element}, strides=[{strides}]{extra}>"


@record
class PaddingValue:
    """Padding value of a view: a keyword such as 'zero', 'neg_inf', 'nan'."""

    kind: str

    def __str__(self) -> str:
        return self.kind


def _tile_shape(shape: tuple[int, ...]) -> str:
    return "tile=(" + "x".join(str(d) for d in shape) + ")"


def _padding(p: Optional[PaddingValue]) -> str:
    return f"padding_value = {p}, " if p is not None else ""


def _dim_map(dim_map: tuple[int, ...]) -> str:
    if tuple(dim_map) == tuple(range(len(dim_map))):
        return ""
    return ", dim_map=[" + ", ".join(str(d) for d in dim_map) + "]"


@record
class PartitionViewType(Type):
    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding_value: Optional[PaddingValue] = None

    def __str__(self) -> str:
        return (f"partition_view<{_tile_shape(self.tile_shape)}, {_padding(self.padding_value)}"
                f"{self.tensor_view}{_dim_map(self.dim_map)}>")


@record
class StridedViewType(Type):
    tile_shape: tuple[int, ...]
    traversal_strides: tuple[int, ...]
    tensor_view: TensorViewType
    dim_map: tuple[int, ...]
    padding_value: Optional[PaddingValue] = None

    def __str__(self) -> str:
        strides = ",".join(str(s) for s in self.traversal_strides)
        return (f"strided_view<{_tile_shape(self.tile_shape)}, traversal_strides=[{strides}], "
                f"{_padding(self.padding_value)}{self.tensor_view}{_dim_map(self.dim_map)}>")


@record
class GatherScatterViewType(Type):
    tile_shape: tuple[int, ...]
    tensor_view: TensorViewType
    sparse_dim: int
    padding_value: Optional[PaddingValue] = None

    def __str__(self) -> str:
        return (f"gather_scatter_view<{_tile_shape(self.tile_shape)}, {_padding(self.padding_value)}"
                f"{self.tensor_view}, sparse_dim={self.sparse_dim}>")


@record
class FunctionType(Type):
    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    def __str__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        if len(self.results) == 1 and not isinstance(self.results[0], FunctionType):
            return f"({ins}) -> {self.results[0]}"
        return f"({ins}) -> (" + ", ".join(str(t) for t in self.results) + ")"


ViewType = (PartitionViewType, StridedViewType, GatherScatterViewType)  # for isinstance


def element_of(t: Type) -> Type:
    """The element type of a tile, or the type itself for a scalar."""
    return t.element if isinstance(t, TileType) else t


# Common singletons, handy in lowering and tests.
I1 = ScalarType("i1")
I8 = ScalarType("i8")
I16 = ScalarType("i16")
I32 = ScalarType("i32")
I64 = ScalarType("i64")
F16 = ScalarType("f16")
BF16 = ScalarType("bf16")
F32 = ScalarType("f32")
F64 = ScalarType("f64")
TOKEN = TokenType()
