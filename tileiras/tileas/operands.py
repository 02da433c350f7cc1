"""How an mma operand is held when the op reading it is lowered, as the operand decisions see it.

A tile is held in registers (`RegisterTile`: its type and the layout it is assigned) or in a
shared-memory buffer (`SharedTile`: a load staged for the tensor cores, possibly through unit
reshapes, a transpose or a tf32 rounding). The operand decisions (mma_sync_staging.py,
wgmma_operands.py, tcgen05_operands.py, deferred_loads.py) read only these fields; the lowering's
values (lowering/values.TileRegs, SharedTileVal) are these classes with their LLVM names and
buffers, and plan-shared-memory holds stand-ins without (shared_operands.py).

`Staging`: what those decisions read of the kernel at the op being lowered (or planned): the
buffers alive there and the target's limit.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..ir.types import TileType


class RegisterTile:
    """An operand tile in registers: its type and its layout (a layout/encodings layout)."""

    type: TileType
    layout: Any


class SharedTile:
    """An operand tile in shared memory: `matrix` (layout/shared_matrix.SharedMatrix; None for a
    load left to its mma, `deferred`: deferred_loads.DeferredLoad), read `transposed` from its
    storage, as tf32 with rounding `tf32` ("": as stored)."""

    type: TileType
    matrix: Any
    transposed: bool
    tf32: str
    deferred: Any


class Buffers(Protocol):
    def first_fit(self, nbytes: int, align: int, start: int, end: int) -> int: ...


class Staging(Protocol):
    """What the operand decisions read of the kernel at an op: its layout assignment, the target's
    capabilities, whether buffers pad their rows, the buffers placed so far and the bytes of the
    allocas, whether an oversized load may be left to its mma (the last-resort lowering), the op's
    lifetime (its first and last position in the kernel's liveness order)."""

    assignment: Any
    caps: Any
    pad_buffers: bool
    buffers: Buffers
    static_smem_bytes: int
    defer_loads: bool

    def op_lifetime(self) -> tuple[int, int]: ...
