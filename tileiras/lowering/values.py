"""What a cuda_tile value becomes during lowering."""

from __future__ import annotations

from typing import Any

from ..ir.record import record
from ..ir.types import TileType
from ..tileaa.views import TensorView, View
from ..tileas.operands import RegisterTile, SharedTile


@record(frozen=False)
class TileRegs(RegisterTile):
    """A tile in registers: one LLVM value per slot of this thread (see layout.py)."""

    type: TileType
    slots: list[str]
    layout: Any = None   # a layout.py layout; None until bound to a value (then the assigned one)


@record
class TensorViewVal(TensorView):
    """A tensor view (its facts: tileaa/views.py) and its base pointer, shape and strides as i64 LLVM values."""

    base: str
    shape: list[str]
    strides: list[str]


@record(frozen=False)
class PartitionViewVal(View):
    """A view that cuts a tensor view into tiles (partition, strided or gather/scatter views)."""

    tensor: TensorViewVal


@record(frozen=False)
class SharedTileVal(SharedTile):
    """A tile that lives in a shared-memory buffer (a load staged for tensor cores).

    `pending` is True while asynchronous copies into it may be in flight: its reader
    waits for them (cp.async.wait_all, or a one-shot TMA load's mbarrier) and for the CTA before it reads."""

    type: TileType
    matrix: Any          # layout/shared_matrix.SharedMatrix
    pending: bool = False
    transposed: bool = False   # the tile is the transpose of the stored (rows, cols) matrix
    tf32: str = ""             # rounding mode when the f32 elements are read as tf32 ("": as stored)
    deferred: Any = None       # tileas/deferred_loads.DeferredLoad: not copied yet (matrix None); its one mma copies
                               # it K slice by K slice (the whole tile does not fit)
    arrival: Any = None        # tma_copy.OneShot: copied by TMA, landed once its mbarrier's phase 0 completes


@record(frozen=False)
class TokenVal:
    """A memory token: ordering only (transforms/token_order.py decides the waits)."""


class LoopContext:
    """Where break/continue/yield jump to inside a for/loop/if region."""

    def __init__(self, kind: str, continue_label: str = "", exit_label: str = "") -> None:
        self.kind = kind                    # "for" | "loop" | "if"
        self.continue_label = continue_label
        self.exit_label = exit_label
        # incoming (block label, values per result slot) collected for the phis
        self.continue_edges: list[tuple[str, list[list[str]]]] = []
        self.exit_edges: list[tuple[str, list[list[str]]]] = []
