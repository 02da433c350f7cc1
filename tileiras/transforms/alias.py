"""Alias facts: what memory a token-ordered op touches, and whether two such ops can overlap.

An access is described by its *root* (where the memory comes from) and its
*place* within the root:

* roots: a module global (`get_global`), a tile-block-local buffer
  (`alloca`), a kernel argument, or anything else (`int_to_ptr`, values carried
  through loops). Distinct globals and distinct allocas never overlap; an
  alloca lives in this CTA's shared memory, so no kernel argument points into
  it. A kernel argument may point at a global (the host can pass its address)
  or at another argument's memory, so those may alias.
* places: a view access names its tiling (the tensor view's base, shape and
  strides, the tile shape and dim map, compared structurally so two
  `make_partition_view` ops of one tensor view are the same tiling) and its
  tile index; a pointer access names its pointer tile and mask.

`relation(a, b)` classifies two accesses:

* `DISJOINT`: different roots that cannot overlap;
* `DISJOINT_IF_INJECTIVE`: tiles of one partition whose indices differ (distinct
  constants, or a loop's induction variable in two iterations). Their coordinates differ; the bytes differ as long as the tensor
  view maps distinct coordinates to distinct addresses, which only the runtime
  strides tell (a stride-0 view repeats memory). The lowering tests that;
* `DISJOINT_IF_SEPARATE`: views of two tensor views that may share memory
  (two kernel arguments, say an in-place update). The lowering tests that their
  address ranges do not meet;
* `SAME`: the same elements in the same order (one tiling and equal indices,
  or one pointer tile under the same mask), so an element is touched by
  whichever thread holds it in each op's layout;
* `MAY`: anything else.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

from ..ir.core import BlockArgument, Operation, Value
from ..ir.types import PartitionViewType

DISJOINT, DISJOINT_IF_INJECTIVE, DISJOINT_IF_SEPARATE, SAME, MAY = (
    "disjoint", "disjoint-if-injective", "disjoint-if-separate", "same", "may")

# token-ordered op -> operand that names the memory it touches
_ADDRESS = {
    "cuda_tile.load_view_tko": "view", "cuda_tile.store_view_tko": "view", "cuda_tile.atomic_red_view_tko": "view",
    "cuda_tile.load_ptr_tko": "source", "cuda_tile.store_ptr_tko": "destination",
    "cuda_tile.atomic_rmw_tko": "pointers", "cuda_tile.atomic_cas_tko": "pointers",
}
# ops whose result's pointers are (some of) their first operand's pointers
# `nv_tileas.convert_layout` (after layout materialization) keeps its values too
_POINTER_THROUGH = frozenset({"cuda_tile.offset", "cuda_tile.assume", "cuda_tile.broadcast", "cuda_tile.reshape",
                              "cuda_tile.permute", "cuda_tile.extract", "nv_tileas.convert_layout"})
_SAME_VALUES = ("cuda_tile.assume", "nv_tileas.convert_layout")


def _look_through(value: Value) -> Value:
    """`assume` only states a fact about its operand; a layout conversion only moves it."""
    while isinstance(getattr(value, "owner", None), Operation) and value.owner.name in _SAME_VALUES:
        value = value.owner.operands[0]
    return value


def pointer_root(value: Value) -> tuple[str, Any]:
    """("global", symbol), ("alloca", op), ("arg", None) or ("any", None) for the pointers in `value`."""
    while True:
        owner = getattr(value, "owner", None)
        if isinstance(value, BlockArgument):
            parent = value.owner.parent.parent if value.owner.parent is not None else None
            return ("arg", None) if parent is not None and parent.name == "cuda_tile.entry" else ("any", None)
        if not isinstance(owner, Operation):
            return ("any", None)
        if owner.name in _POINTER_THROUGH:
            value = owner.operands[0]
        elif owner.name == "cuda_tile.get_global":
            return ("global", str(owner.attributes.get("name")))
        elif owner.name == "cuda_tile.alloca":
            return ("alloca", owner)
        else:
            return ("any", None)


def _key(value: Value) -> tuple[Any, ...]:
    """Structural identity of an index or shape operand: its constant, or the value itself."""
    value = _look_through(value)
    owner = getattr(value, "owner", None)
    if isinstance(owner, Operation) and owner.name == "cuda_tile.constant":
        return ("const", str(value.type), bytes(owner.attributes["value"].raw))
    return ("value", value)


def _values(key: Any) -> Iterator[Value]:
    """The SSA values a key names."""
    if isinstance(key, Value):
        yield key
    elif isinstance(key, tuple):
        for part in key:
            yield from _values(part)


def _tensor_key(tensor: Value) -> tuple[Any, ...]:
    """Structural key of a tensor view: its base, dynamic shape and strides, and type."""
    owner = getattr(tensor, "owner", None)
    if not isinstance(owner, Operation) or owner.name != "cuda_tile.make_tensor_view":
            return ("value", tensor)
    base, *dims = owner.operands
    return (_look_through(base), tuple(_key(d) for d in dims), str(tensor.type))


def _tiling(view: Value) -> Optional[tuple[Any, ...]]:
    """Structural key of a partition view's tiling; None for views whose tiles may overlap or
    whose rows come from data (strided and gather/scatter views)."""
    owner = getattr(view, "owner", None)
    if not isinstance(owner, Operation) or owner.name != "cuda_tile.make_partition_view":
        return None
    vtype = view.type
    assert isinstance(vtype, PartitionViewType)
    return (_tensor_key(owner.operands[0]), tuple(vtype.tile_shape), tuple(vtype.dim_map))


class Access:
    """The memory one token-ordered op touches (see the module docstring)."""

    __slots__ = ("op", "root", "tiling", "tensor_view", "tensor_key", "index", "pointers", "mask")

    def __init__(self, op: Operation) -> None:
        self.op = op
        address = op.operand(_ADDRESS[op.name])
        assert address is not None
        self.tiling: Optional[tuple[Any, ...]] = None
        self.tensor_view: Optional[Value] = None
        self.tensor_key: Optional[tuple[Any, ...]] = None
        self.index: tuple[tuple[Any, ...], ...] = ()
        self.pointers: Optional[Value] = None
        self.mask: Optional[Value] = None
        if op.name.endswith("_view_tko"):
            view_op = getattr(address, "owner", None)
            tensor = view_op.operands[0] if isinstance(view_op, Operation) and view_op.operands else None
            tensor_op = getattr(tensor, "owner", None)
            base = tensor_op.operands[0] if isinstance(tensor_op, Operation) and tensor_op.operands else None
            self.root = pointer_root(base) if base is not None else ("any", None)
            self.tiling = _tiling(address)
            self.tensor_view = tensor
            self.tensor_key = _tensor_key(tensor) if tensor is not None else None
            self.index = tuple(_key(v) for v in op.operand_group("index"))
        else:
            self.root = pointer_root(address)
            self.pointers = _look_through(address)
            self.mask = op.operand("mask")


def _distinct(x: tuple[Any, ...], y: tuple[Any, ...], advances: Callable[[Value], bool]) -> bool:
    """Two index keys that hold different values: distinct constants of one type, or an induction
    variable seen in two iterations."""
    if x[0] == y[0] == "const":
        return x != y and x[1] == y[1]
    return x == y and x[0] == "value" and advances(x[1])


def _roots_disjoint(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    if a == b or "any" in (a[0], b[0]):
        return False
    if "alloca" in (a[0], b[0]):
        return True  # shared memory of this CTA: no argument or global points into it
    return a[0] == b[0] == "global"  # two different globals; an argument may point at a global


def _never(value: Value) -> bool:
    return False


def relation(a: Access, b: Access, varies: Callable[[Value], bool] = _never,
             advances: Callable[[Value], bool] = _never) -> str:
    """How the memory of two accesses relates (see the module docstring). `a` may have run in an
    earlier loop iteration: `varies(v)` is True for values that name something else in `a` than in
    `b`, and `advances(v)` for those that certainly hold a different value there (an induction
    variable)."""
    if _roots_disjoint(a.root, b.root):
        return DISJOINT
    if a.tiling is not None and a.tiling == b.tiling:
        if any(varies(v) for v in _values(a.tiling)):
            return MAY
        if a.index == b.index and not any(varies(v) for v in _values(a.index)):
            return SAME
        if any(_distinct(x, y, advances) for x, y in zip(a.index, b.index)):
            return DISJOINT_IF_INJECTIVE
        return MAY
    if a.pointers is not None and a.pointers is b.pointers and a.mask is b.mask and not varies(a.pointers):
        return SAME
    if a.tensor_view is not None and b.tensor_view is not None and a.tensor_key != b.tensor_key:
        return DISJOINT_IF_SEPARATE
    return MAY
