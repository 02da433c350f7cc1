"""Pass `order-views`: a tensor-core operand loaded through a transposing view is loaded row-major.

cuTile's `ct.load(..., order=(.., 1, 0))` (attention's K^T, MoE's weights) becomes a partition
view whose `dim_map` swaps the two tile dimensions: the tile's innermost dimension walks the
tensor's strided one. Read that way no access is vectorizable (one element per load, each with
its own bounds check, kept live until stored to shared memory: hundreds of registers, spills).

For a load only mmas read, the pass loads the same elements through the view with the identity
`dim_map` (tensor order, innermost dimension contiguous: 16-byte copies, cp.async, TMA) and
transposes the result with `permute` [1, 0], which a shared-memory operand passes through without
moving data (it is read by `ldmatrix` without `.trans`, or by a wgmma descriptor as N-major).
This is the form `ct.transpose(ct.load(...))` already has. Only 2-D tiles (any number of unit
dimensions) are rewritten; anything else keeps its view. A `dim_map` that only moves unit
dimensions (the non-unit ones in tensor order) is made the identity too, the tile reshaped back:
the same elements, now a (rows, cols) shared matrix instead of batches of one row.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Block, Operation, Value
from ..ir.types import PartitionViewType, TensorViewType, TileType

LOAD = "cuda_tile.load_view_tko"
VIEW = "cuda_tile.make_partition_view"


def order_views(entry: Operation) -> int:
    """Rewrite `entry`'s transposing tensor-core loads; the number rewritten."""
    from .mma_operands import for_tensor_cores

    views: dict[Value, Value] = {}
    rewritten = 0
    for op in list(entry.walk()):
        if op.name != LOAD or not for_tensor_cores(op) or _scaled(op):
            continue
        plan = _transposed_pair(op)
        if plan is None and not _moves_unit_dims_only(op):
            continue
        old_view = op.operand("view")
        if old_view not in views:
            views[old_view] = _identity_view(old_view)
        if plan is None:
            _reorder(op, views[old_view])
        else:
            _rewrite(op, views[old_view], plan)
        rewritten += 1
    for old_view in views:
        if not old_view.uses:
            _erase(old_view.owner)  # type: ignore[attr-defined]
    return rewritten


def _scaled(load: Operation) -> bool:
    """True when a block-scaled mma reads the load (its operand staging is its own: left as it is)."""
    users = list(load.results[0].uses)
    while users:
        user = users.pop()
        if user.name == "cuda_tile.mmaf_scaled":
            return True
        if user.name in ("cuda_tile.reshape", "cuda_tile.permute"):
            users.extend(user.results[0].uses)
    return False


def _partition_view(load: Operation) -> Optional[PartitionViewType]:
    """The type of the partition view `load` reads, where a make_partition_view op made it."""
    view = load.operand("view")
    vtype = view.type if view is not None else None
    if not isinstance(vtype, PartitionViewType) or not isinstance(getattr(view, "owner", None), Operation) \
            or view.owner.name != VIEW:  # type: ignore[union-attr]
        return None
    return vtype


def _transposed_pair(load: Operation) -> Optional[tuple[int, int]]:
    """The tile's two non-unit dimensions (outer, inner) where the view walks them in transposed
    order and the outer one is the tensor's contiguous (unit-stride, innermost) dimension."""
    vtype = _partition_view(load)
    if vtype is None:
        return None
    dims = tuple(vtype.dim_map)
    tensor = vtype.tensor_view
    if dims == tuple(range(len(dims))) or not isinstance(tensor, TensorViewType) or tensor.strides[-1] != 1:
        return None
    big = [i for i, n in enumerate(vtype.tile_shape) if n != 1]
    if len(big) != 2:
        return None
    outer, inner = big
    if dims[outer] != len(dims) - 1 or dims[inner] > dims[outer]:
        return None
    return outer, inner


def _moves_unit_dims_only(load: Operation) -> bool:
    """The view's `dim_map` is not the identity but keeps the tile's non-unit dimensions in tensor
    order (it only moves unit ones: TileGym's MLA decode reads a (128, 1, 512) tile of a [batch,
    sequence, head] tensor through dim_map [1, 0, 2]): the same elements in the same order as the
    tensor-order tile, which a shared matrix stores as (rows, cols) where this one is 128 batches of
    one row."""
    vtype = _partition_view(load)
    if vtype is None:
        return False
    dims = tuple(vtype.dim_map)
    order = [dims[i] for i, n in enumerate(vtype.tile_shape) if n != 1]
    return dims != tuple(range(len(dims))) and order == sorted(order)


def _reorder(load: Operation, view: Value) -> None:
    """load -> the same load in tensor order (`_moves_unit_dims_only`), reshaped to the old shape."""
    old_tile = load.results[0].type
    new_load = _in_tensor_order(load, view)
    back = load.insert_before(Operation("cuda_tile.reshape", [new_load.results[0]], [old_tile],
                                        location=load.location))
    for old, new in zip(load.results[1:], new_load.results[1:]):
        old.replace_all_uses_with(new)
    load.results[0].replace_all_uses_with(back.results[0])
    _erase(load)


def _in_tensor_order(load: Operation, view: Value) -> Operation:
    """A load like `load` through `view` (its identity-dim_map twin), inserted before it: indices,
    in-bounds flags and tile shape moved to tensor order."""
    vtype = load.operand("view").type
    assert isinstance(vtype, PartitionViewType)
    dims = tuple(vtype.dim_map)
    indices = load.operand_group("index")
    rest = load.operands[1 + len(indices):]
    new_indices: list[Value] = [indices[0]] * len(indices)
    for i, d in enumerate(dims):
        new_indices[d] = indices[i]
    attributes = dict(load.attributes)
    inbounds = attributes.get("inbounds")
    if inbounds is not None and len(inbounds) == len(dims):
        moved = list(inbounds)
        for i, d in enumerate(dims):
            moved[d] = inbounds[i]
        attributes["inbounds"] = tuple(moved)
    tile = tuple(vtype.tile_shape[dims.index(d)] for d in range(len(dims)))
    elem = load.results[0].type.element  # type: ignore[union-attr]
    return load.insert_before(Operation(LOAD, [view, *new_indices, *rest],
                                        [TileType(tile, elem), *(r.type for r in load.results[1:])],
                                        attributes, location=load.location, segment_sizes=load.segment_sizes))


def _identity_view(view: Value) -> Value:
    """A twin of `view` (placed just after it) whose tile dimensions are in tensor order."""
    old = view.owner  # type: ignore[attr-defined]
    vtype = view.type
    assert isinstance(vtype, PartitionViewType)
    dims = tuple(vtype.dim_map)
    tile = tuple(vtype.tile_shape[dims.index(d)] for d in range(len(dims)))
    twin_type = PartitionViewType(tile, vtype.tensor_view, tuple(range(len(dims))), vtype.padding_value)
    twin = Operation(VIEW, list(old.operands), [twin_type], old.attributes, location=old.location,
                     segment_sizes=old.segment_sizes)
    _insert_after(old, twin)
    return twin.results[0]


def _rewrite(load: Operation, view: Value, pair: tuple[int, int]) -> None:
    """load -> load in tensor order, reshape to 2-D, permute [1, 0]; the old load's reshapes to that
    2-D shape read the permute, any other user a reshape back to the old shape."""
    old_tile = load.results[0].type
    assert isinstance(old_tile, TileType)
    new_load = _in_tensor_order(load, view)
    tile = new_load.results[0].type.shape  # type: ignore[union-attr]
    elem = old_tile.element
    outer, inner = pair
    stored = (old_tile.shape[inner], old_tile.shape[outer])   # rows along the strided dimension
    flat = new_load.results[0]
    if tile != stored:   # drop the unit dimensions
        flat = load.insert_before(Operation("cuda_tile.reshape", [flat], [TileType(stored, elem)],
                                            location=load.location)).results[0]
    swapped = load.insert_before(Operation("cuda_tile.permute", [flat],
                                           [TileType(stored[::-1], elem)], {"permutation": (1, 0)},
                                           location=load.location))
    for old, new in zip(load.results[1:], new_load.results[1:]):
        old.replace_all_uses_with(new)
    result = load.results[0]
    for user in list(result.uses):
        out = user.results[0].type if user.name == "cuda_tile.reshape" else None
        if isinstance(out, TileType) and out.shape == stored[::-1]:
            user.results[0].replace_all_uses_with(swapped.results[0])
            _erase(user)
    if result.uses and old_tile.shape == stored[::-1]:
        result.replace_all_uses_with(swapped.results[0])
    elif result.uses:
        back = load.insert_before(Operation("cuda_tile.reshape", [swapped.results[0]], [old_tile],
                                            location=load.location))
        result.replace_all_uses_with(back.results[0])
    _erase(load)


def _insert_after(anchor: Operation, op: Operation) -> None:
    block: Block = anchor.parent  # type: ignore[assignment]
    op.parent = block
    block.operations.insert(block.operations.index(anchor) + 1, op)


def _erase(op: Operation) -> None:
    """Drop `op` (whose results are unused) from its block and from its operands' uses."""
    assert all(not r.uses for r in op.results)
    for v in op.operands:
        v.uses.remove(op)
    op.parent.operations.remove(op)  # type: ignore[union-attr]
    op.parent = None
