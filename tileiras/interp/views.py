"""Tensor views and tile views: which memory element each tile element is.

A tile view maps an index (one integer per index-space dimension) to a tile
of tensor coordinates (Types.td):

* partition_view: tile dim i covers tensor dim dim_map[i], starting at
  index[i] * tile_shape[i];
* strided_view: the same with a start of index[i] * traversal_strides[i];
* gather_scatter_view: dim `sparse_dim` takes its coordinates from a 1-D
  index tile, every other dim d starts at the element offset index[d].

`element_offsets` returns, for every tile element, its linear element offset
in the tensor and whether it lies inside the tensor's shape; loads pad the
outside elements, stores skip them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..ir.types import Type
from .errors import InterpError


@dataclass(frozen=True)
class TensorView:
    base: int                        # byte address of element (0, ..., 0)
    element: Type
    shape: tuple[int, ...]
    strides: tuple[int, ...]         # in elements


@dataclass(frozen=True)
class TileView:
    kind: str                        # "partition" | "strided" | "gather"
    tensor: TensorView
    tile_shape: tuple[int, ...]
    dim_map: tuple[int, ...]         # tile dim -> tensor dim
    steps: tuple[int, ...]           # tile-start spacing per tile dim
    padding: Optional[str] = None
    sparse_dim: int = -1

    def index_space(self) -> tuple[int, ...]:
        shape = self.tensor.shape
        if self.kind == "gather":
            return tuple(shape)
        return tuple(-(-shape[d] // self.steps[i]) for i, d in enumerate(self.dim_map))

    def element_offsets(self, index: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """(linear element offsets int64, in-bounds bool), both of the tile's shape."""
        shape, strides = self.tensor.shape, self.tensor.strides
        rank = len(self.tile_shape)
        if len(index) != rank:
            raise InterpError(f"view of rank {rank} indexed with {len(index)} indices")
        offset = np.zeros(self.tile_shape, np.int64)
        inside = np.ones(self.tile_shape, bool)
        for i in range(rank):
            d = self.dim_map[i]
            n = self.tile_shape[i]
            along = [1] * rank
            along[i] = n
            if self.kind == "gather" and i == self.sparse_dim:
                coord = np.asarray(index[i], np.uint64).reshape(-1)
                if coord.size != n:
                    raise InterpError(f"gather index tile has {coord.size} elements, the view's tile "
                                      f"dimension {i} has {n}")
            else:
                start = int(np.asarray(index[i]).reshape(-1)[0])
                start = start * self.steps[i] if self.kind != "gather" else start
                start = min(start, shape[d])          # beyond the shape all of it is outside
                coord = np.uint64(start) + np.arange(n, dtype=np.uint64)
            ok = coord < np.uint64(shape[d])
            c = np.where(ok, coord, 0).astype(np.int64)
            offset = offset + (c * strides[d]).reshape(along)
            inside = inside & ok.reshape(along)
        return offset, inside
