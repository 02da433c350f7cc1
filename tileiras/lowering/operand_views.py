"""The ways a loaded tile reaches the mmas that read it from shared memory.

A tile staged for the tensor cores may be read by several mmas, each through its own chain of ops
that only change how the buffer is read (unit reshapes, 2-D transposes, roundings to tf32): the
keys and values of attention's backward pass are read as they are by one mma and transposed by
another. `mma_reads` follows every use of such a tile; the tile stays in one shared buffer as long
as every path ends at an mma operand, and each mma reads it with its own path's orientation.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Operation, Value
from ..ir.record import record

MMAS = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")


@record
class MmaRead:
    operand: Value       # the value the mma reads (the end of the path)
    mma: Operation
    transposed: bool     # the path transposes the tile an odd number of times
    rounded: bool        # the path rounds the tile to tf32


OPERANDS = ("lhs", "rhs")                          # A and B
SCALED_OPERANDS = OPERANDS + ("lhs_scale", "rhs_scale")   # and a block-scaled mma's scales


def _reads(user: Operation, v: Value, roles: tuple[str, ...]) -> bool:
    return v is not user.operand("acc") and any(
        user.operand(r) is v for r in roles if r in OPERANDS or user.name == "cuda_tile.mmaf_scaled")


def mma_reads(value: Value, passes: Callable[[Operation], bool],
              roles: tuple[str, ...] = OPERANDS) -> Optional[list[MmaRead]]:
    """Every path from `value` to an mma reading it as one of `roles` (A or B) through ops that
    `passes` accepts, or None when some use leads anywhere else (or nowhere)."""
    out: list[MmaRead] = []
    stack = [(value, False, False)]
    while stack:
        v, transposed, rounded = stack.pop()
        if not v.uses:
            return None
        for user in v.uses:
            if user.name in MMAS and _reads(user, v, roles):
                out.append(MmaRead(v, user, transposed, rounded))
            elif passes(user):
                stack.append((user.results[0], transposed ^ (user.name == "cuda_tile.permute"),
                              rounded or user.name == "cuda_tile.ftof"))
            else:
                return None
    return out


def tree_values(value: Value, passes: Callable[[Operation], bool]) -> list[Value]:
    """`value` and every value on its paths to the mmas (as `mma_reads` follows them)."""
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(user.results[0] for user in v.uses if user.name not in MMAS and passes(user))
    return out


def source(value: Value, passes: Callable[[Operation], bool]) -> tuple[Optional[Operation], bool]:
    """(the load `value` is a view of, through ops `passes` accepts, or None; whether the path from
    the load transposes it)."""
    transposed = False
    while True:
        owner = getattr(value, "owner", None)
        if not isinstance(owner, Operation):
            return None, False
        if owner.name == "cuda_tile.load_view_tko":
            return owner, transposed
        if not passes(owner):
            return None, False
        transposed ^= owner.name == "cuda_tile.permute"
        value = owner.operands[0]
