"""Views as nv_tileaa knows them: what a partition, strided or gather/scatter view of a tensor view
made in the kernel says about the memory a tile load or store touches, read from the IR and the
facts `infer-facts` proved (facts.py), without any value of the lowering.

Decisions about copies (vector access widths, cp.async chunks, TMA boxes) read these records; the
lowering's values (lowering/values.py) extend them with the LLVM names of the base and extents.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation, Value
from ..ir.record import record
from ..ir.types import GatherScatterViewType, PartitionViewType, StridedViewType, TensorViewType
from .facts import ViewFacts

INDEXED = ("cuda_tile.load_view_tko", "cuda_tile.store_view_tko", "cuda_tile.atomic_red_view_tko")
VIEW_OPS = ("cuda_tile.make_partition_view", "cuda_tile.make_strided_view", "cuda_tile.make_gather_scatter_view")


@record
class TensorView(ViewFacts):
    """A tensor view: its type and the facts proved of its base, extents and strides."""

    type: TensorViewType


@record
class View:
    """A view cutting `tensor` into tiles of `tile_shape`: tile dimension i runs along tensor
    dimension `dim_map[i]`; `traversal_strides` for strided views (tile starts step by these),
    `sparse_dim` for gather/scatter views (that dimension's rows come from a tile of indices)."""

    tensor: TensorView
    tile_shape: tuple[int, ...]
    dim_map: tuple[int, ...]
    padding: Optional[str]
    traversal_strides: Optional[tuple[int, ...]] = None
    sparse_dim: Optional[int] = None


def tensor_view(value: Value) -> TensorView:
    """The tensor view `value` (a `make_tensor_view` result, after infer-facts)."""
    facts = value.facts
    assert isinstance(facts, ViewFacts) and isinstance(value.type, TensorViewType)
    return TensorView(facts.base_align, facts.shape_div, facts.stride_div, value.type)


def cut(vtype: object) -> dict:
    """How a view type cuts its tensor: View's fields but `tensor`."""
    assert isinstance(vtype, (PartitionViewType, StridedViewType, GatherScatterViewType))
    padding = vtype.padding_value.kind if vtype.padding_value is not None else None
    if isinstance(vtype, GatherScatterViewType):
        rank = len(vtype.tile_shape)
        return dict(tile_shape=tuple(vtype.tile_shape), dim_map=tuple(range(rank)), padding=padding,
                    sparse_dim=int(vtype.sparse_dim))
    strides = vtype.traversal_strides if isinstance(vtype, StridedViewType) else None
    return dict(tile_shape=tuple(vtype.tile_shape), dim_map=tuple(vtype.dim_map), padding=padding,
                traversal_strides=strides)


def view_of(value: Optional[Value]) -> Optional[View]:
    """The view `value` is; None where it is not a view of a tensor view made in the kernel."""
    op = getattr(value, "owner", None)
    if op is None or getattr(op, "name", None) not in VIEW_OPS:
        return None
    tensor = op.operands[0]
    if getattr(tensor, "owner", None) is None or tensor.owner.name != "cuda_tile.make_tensor_view" \
            or not isinstance(tensor.facts, ViewFacts):
        return None
    return View(tensor_view(tensor), **cut(op.results[0].type))


def cut_from(op: Operation) -> Value:
    """The tensor view the partition view of load or store `op` was cut from (its `make_tensor_view`'s result)."""
    return op.operand("view").owner.operands[0]  # type: ignore[union-attr]


def row_indices(op: Operation) -> "Value | None":
    """The tile of row indices of `op`'s gather / scatter view (its index along the sparse dimension),
    which the lowering (ops_memory.view_index) stores in scratch ("reduction") for every thread to read; None where `op`
    reads no such view. The lowering and the pass plan-shared-memory (tileas/shared_operands.py)
    both ask it."""
    view = op.operand("view") if op.name in INDEXED else None
    if view is None or not isinstance(view.type, GatherScatterViewType):
        return None
    return op.operand_group("index")[view.type.sparse_dim]
