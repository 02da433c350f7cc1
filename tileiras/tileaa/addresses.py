"""Where a looped group's accesses put each element: the address as a polynomial in the kernel's scalars
and the positions of the group's iteration space.

A loop over chunks runs a store of chunk c before the loads of chunk c + 1. Where the program orders
a store after a gather of the same array, that is the order it asked for only if each position's
gathered element is the one the store writes at that very position (then chunk c writes only what
chunk c read). A gather's pointers are usually a base plus an iota plus a block's offset (cuTile's
`gather(x, arange(T) + i * T)`), so this module writes both addresses as

    base + sum over space axes a of (coefficient_a * position_a) + constant part

with the coefficients and the constant part polynomials with integer coefficients over the kernel's
scalar values (a dynamic stride times a block index is a product of two of them). Two accesses touch
the same element at every position when their bases are one value and their polynomials are equal.
What this cannot express (a pointer loaded from memory, a shift, a select) proves nothing.

Integers are read as exact: the index arithmetic of a tile of at most 2^24 elements into arrays
addressed by i32 extents is taken not to wrap (the same assumption a view's own address makes).
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation, Value
from ..ir.types import PartitionViewType, PointerType, ScalarType, TileType, DYNAMIC

# a product of the kernel's scalars (ids of their values, sorted; () is 1) -> its integer coefficient
Poly = dict[tuple[int, ...], int]
# per space axis (None: the part that does not vary with the position) its polynomial
Terms = dict[Optional[int], Poly]
# a pointer tile: its base pointer (None for an integer tile) and its terms, in elements
Address = tuple[Optional[int], Terms]

_PASS = ("cuda_tile.assume",)


def _root(value: Value) -> Value:
    """`value` seen through `assume` ops (they restate a value; they do not change it)."""
    while isinstance(getattr(value, "owner", None), Operation) and value.owner.name in _PASS:  # type: ignore[union-attr]
        value = value.owner.operands[0]  # type: ignore[union-attr]
    return value


def _add(a: Poly, b: Poly, scale: int = 1) -> Poly:
    out = dict(a)
    for key, c in b.items():
        out[key] = out.get(key, 0) + scale * c
    return {k: c for k, c in out.items() if c}


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, ca in a.items():
        for kb, cb in b.items():
            key = tuple(sorted(ka + kb))
            out[key] = out.get(key, 0) + ca * cb
    return {k: c for k, c in out.items() if c}


def _add_terms(a: Terms, b: Terms, scale: int = 1) -> Terms:
    out = {k: _add(a.get(k, {}), b.get(k, {}), scale) for k in {*a, *b}}
    return {k: p for k, p in out.items() if p}


def _splat_integer(op: Operation) -> Optional[int]:
    """The integer a splat constant holds (signed), else None."""
    from ..ir.dense import element_bits

    t = op.results[0].type
    if not isinstance(t, TileType) or not isinstance(t.element, ScalarType) or not t.element.name.startswith("i"):
        return None
    found = set(element_bits(t, op.attributes["value"].raw))
    if len(found) != 1:
        return None
    bits, width = found.pop(), t.element.bitwidth
    return bits - (1 << width) if width > 1 and bits >> (width - 1) else bits


def scalar(value: Value) -> Optional[Poly]:
    """A kernel-uniform integer (a tile of one element) as a polynomial over the scalars it is made of;
    anything not built by +, -, * of them and constants is a scalar of its own."""
    value = _root(value)
    op = getattr(value, "owner", None)
    if isinstance(op, Operation):
        if op.name == "cuda_tile.constant":
            n = _splat_integer(op)
            if n is not None:
                return {(): n} if n else {}
        elif op.name in ("cuda_tile.reshape", "cuda_tile.broadcast") or _sign_extends(op):
            return scalar(op.operands[0])
        elif op.name in ("cuda_tile.addi", "cuda_tile.subi", "cuda_tile.muli"):
            a, b = scalar(op.operands[0]), scalar(op.operands[1])
            if a is None or b is None:
                return None
            return _mul(a, b) if op.name == "cuda_tile.muli" else _add(a, b, -1 if op.name == "cuda_tile.subi" else 1)
    t = value.type
    if isinstance(t, TileType) and isinstance(t.element, ScalarType) and t.element.name.startswith("i"):
        return {(id(value),): 1}
    return None


def _sign_extends(op: Operation) -> bool:
    return op.name == "cuda_tile.exti" and str(op.attributes.get("signedness", "")) == "signed"


def tile_address(value: Value, axes: dict[Value, tuple[int, ...]]) -> Optional[Address]:
    """The address (pointer tile) or value (integer tile) of each element of `value`, a tile of a
    group whose tiles run along the space axes `axes` (tileaa/tile_loops.py); None where unknown."""
    value = _root(value)
    t = value.type
    if not isinstance(t, TileType):
        return None
    if t.num_elements == 1:   # a scalar splat: no position part
        if isinstance(t.element, PointerType):
            return id(_pointer_root(value)), {}
        poly = scalar(value)
        return None if poly is None else (None, {None: poly} if poly else {})
    op = getattr(value, "owner", None)
    if value not in axes or not isinstance(op, Operation):
        return None
    if op.name == "cuda_tile.iota":
        along = axes[value][0]
        return (None, {along: {(): 1}}) if along >= 0 else None
    if op.name == "cuda_tile.constant":
        n = _splat_integer(op)
        return None if n is None else (None, {None: {(): n}} if n else {})
    if op.name in ("cuda_tile.reshape", "cuda_tile.broadcast") or _sign_extends(op):
        return tile_address(op.operands[0], axes)   # the same positions of the space: the same terms
    if op.name in ("cuda_tile.addi", "cuda_tile.subi", "cuda_tile.offset"):
        a, b = tile_address(op.operands[0], axes), tile_address(op.operands[1], axes)
        if a is None or b is None or b[0] is not None or (a[0] is not None) != (op.name == "cuda_tile.offset"):
            return None
        return a[0], _add_terms(a[1], b[1], -1 if op.name == "cuda_tile.subi" else 1)
    if op.name == "cuda_tile.muli":
        a, b = tile_address(op.operands[0], axes), tile_address(op.operands[1], axes)
        if a is None or b is None or a[0] is not None or b[0] is not None:
            return None
        if set(b[1]) - {None}:
            a, b = b, a
        if set(b[1]) - {None}:
            return None   # a product of two positions: not affine
        factor = b[1].get(None, {})
        return None, {k: p for k, p in ((k, _mul(p, factor)) for k, p in a[1].items()) if p}
    return None


def _pointer_root(value: Value) -> Value:
    """The scalar pointer a one-element pointer tile splats (through reshapes and broadcasts)."""
    value = _root(value)
    while isinstance(getattr(value, "owner", None), Operation) and \
            value.owner.name in ("cuda_tile.reshape", "cuda_tile.broadcast"):  # type: ignore[union-attr]
        value = _root(value.owner.operands[0])  # type: ignore[union-attr]
    return value


def view_address(access: Operation, tile: Value, axes: dict[Value, tuple[int, ...]]) -> Optional[Address]:
    """The address of each element of `tile` that the view load or store `access` reads or writes:
    base + sum over the view's dimensions d of stride_d * (index_d * tile_d + position_d)."""
    view = access.operand("view")
    vtype = view.type if view is not None else None
    make_view = getattr(view, "owner", None)
    tensor = make_view.operands[0] if isinstance(make_view, Operation) else None
    make_tensor = getattr(tensor, "owner", None)
    if not isinstance(vtype, PartitionViewType) or not isinstance(make_tensor, Operation) \
            or make_tensor.name != "cuda_tile.make_tensor_view" or tile not in axes:
        return None
    dynamic = iter(make_tensor.operand_group("dynamicStrides"))
    strides: list[Poly] = []
    for s in vtype.tensor_view.strides:
        poly = scalar(next(dynamic)) if s == DYNAMIC else ({(): s} if s else {})
        if poly is None:
            return None
        strides.append(poly)
    index = access.operand_group("index")
    terms: Terms = {}
    for d, (stride, size) in enumerate(zip(strides, vtype.tile_shape)):
        start = scalar(index[vtype.dim_map.index(d)]) if d in vtype.dim_map else None
        if start is None:
            return None
        terms = _add_terms(terms, {None: _mul(stride, _mul(start, {(): size}))})
        along = axes[tile][vtype.dim_map.index(d)]
        if along >= 0:
            terms = _add_terms(terms, {along: stride})
    return id(_pointer_root(make_tensor.operand("base"))), terms  # type: ignore[arg-type]


def _access(op: Operation, axes: dict[Value, tuple[int, ...]]) -> tuple[Optional[Address], object]:
    """The address of each element a view or pointer load or store touches, and the element type."""
    if op.name in ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko"):
        tile = op.results[0] if op.name == "cuda_tile.load_view_tko" else op.operands[0]
        view = op.operand("view")
        element = view.type.tensor_view.element if view is not None and isinstance(view.type, PartitionViewType) else None
        return view_address(op, tile, axes), element
    pointers = op.operand("source" if op.name == "cuda_tile.load_ptr_tko" else "destination")
    element = pointers.type.element if pointers is not None and isinstance(pointers.type, TileType) else None
    if not isinstance(element, PointerType) or pointers is None:
        return None, None
    return tile_address(pointers, axes), element.pointee


def touch_the_same(load: Operation, store: Operation, axes: dict[Value, tuple[int, ...]]) -> bool:
    """Whether the load (a gather or a view load) reads, at every position of the space, exactly the
    element the store (through a view or pointers) writes at that position: then looping both chunk by
    chunk keeps the order the program asks for (each element is read before it is written, by the
    same chunk)."""
    (read, a), (written, b) = _access(load, axes), _access(store, axes)
    if read is None or read[0] is None or read != written or a is None or a != b:
        return False
    # an axis the address does not move along (a static stride of 0) puts one element at positions of
    # several chunks: a later chunk would read what an earlier one wrote
    return all(along in written[1] for along in axes.get(load.results[0], ()) if along >= 0)
