"""What a cuda_tile value becomes during lowering."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..ir.types import TileType, TensorViewType


@dataclass
class TileRegs:
    """A tile in registers: one LLVM value per slot of this thread (see layout.py)."""

    type: TileType
    slots: list[str]


@dataclass
class TensorViewVal:
    """A tensor view: base pointer plus shape and strides as i64 LLVM values."""

    type: TensorViewType
    base: str
    shape: list[str]
    strides: list[str]


@dataclass
class PartitionViewVal:
    """A view that cuts a tensor view into tiles (partition or strided views)."""

    tensor: TensorViewVal
    tile_shape: tuple[int, ...]
    dim_map: tuple[int, ...]
    padding: Optional[str]
    traversal_strides: Optional[tuple[int, ...]] = None  # strided views
    sparse_dim: Optional[int] = None                     # gather/scatter views: rows come from a tile


@dataclass
class TokenVal:
    """A memory token; `pending` is True when it follows an earlier memory op."""

    pending: bool = False


@dataclass
class LoopContext:
    """Where break/continue/yield jump to inside a for/loop/if region."""

    kind: str                               # "for" | "loop" | "if"
    continue_label: str = ""
    exit_label: str = ""
    # incoming (block label, values per result slot) collected for the phis
    continue_edges: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    exit_edges: list[tuple[str, list[list[str]]]] = field(default_factory=list)
