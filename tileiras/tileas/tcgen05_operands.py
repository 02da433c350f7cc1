"""How a tcgen05 mma the threads issue hands A and B to the tensor cores: the decisions of
lowering/ops_tcgen05.lower_tcgen05, made here for the lowering and plan-shared-memory
(shared_operands.py) alike.

tf32 operands are copied K-major and rounded into buffers their outermost loop asks for before its
stages (`loop_restaged`; an mma outside loops asks for them itself); 4-bit ones are packed two to a
byte; a register A in an M = 128 / 256 accumulator's fragment layout goes to tensor memory
(`a_in_tmem`); a staged load is read in its own buffer where it is swizzled as one matrix
(`reads_in_place`), else through a K-major copy; other register tiles are stored swizzled.
"""

from __future__ import annotations

from typing import Container

from ..ir.core import Operation
from ..layout.encodings import TmemAccLayout
from ..tileaa.mma_forms import kind_of
from ..transforms.rewrite import inside_op
from .operands import RegisterTile, SharedTile, Staging
from .tcgen05_select import PACKED, RESTAGED
from .tmem_columns import tmem_a_columns


def operand_forms(k: Staging, op: Operation, lhs: object, rhs: object) -> tuple[str, str]:
    """How A and B reach the tensor cores: "restaged" (tf32: copied K-major and rounded), "packed"
    (4-bit: packed two to a byte into buffers of the mma's own, a register tile staged first),
    "tmem" (a register A in tensor memory, `a_in_tmem`), "shared" (a staged load, read in its own
    buffer or a K-major copy) or "staged" (a register tile stored in a swizzled buffer)."""
    kind = kind_of(op)
    assert kind is not None
    if kind.name in RESTAGED:
        return "restaged", "restaged"
    if kind.name in PACKED:
        return "packed", "packed"
    a = "tmem" if a_in_tmem(k, op, lhs) else "shared" if isinstance(lhs, SharedTile) else "staged"
    return a, "shared" if isinstance(rhs, SharedTile) else "staged"


def a_in_tmem(k: Staging, op: Operation, lhs: object) -> bool:
    """Whether register A `lhs` goes to tensor memory for the MMA to read there: in the fragment
    layout of an M = 128 or 256 tcgen05 accumulator (`tmem_a_columns`)."""
    m = k.assignment.tcgen05_layouts[op].shape[1]
    if not tmem_a_columns(op, m) or not isinstance(lhs, RegisterTile):
        return False
    layout = lhs.layout
    return isinstance(layout, TmemAccLayout) and layout.shape[1] == m


def reads_in_place(value: SharedTile) -> bool:
    """Whether the MMA reads staged operand `value` in its own buffer (swizzled, one matrix), not
    through a K-major copy of its own ("kmajor-copy")."""
    return value.matrix.swizzled and value.matrix.batch == 1


def loop_restaged(assignment: object, loop: Operation, given: "Container[Operation]", split: object
                  ) -> list[Operation]:
    """The tf32 mmas inside `loop` whose K-major copy buffers (A's, then B's) `loop` asks for before
    its stages: those not `given` theirs yet (by an outer loop); none in the warp-specialized loop
    (`split`: its MMA warp rounds them in their stages)."""
    if split is not None and split.loop is loop and split.mmas:  # type: ignore[attr-defined]
        return []
    layouts = getattr(assignment, "tcgen05_layouts", None) or {}
    return [op for op in layouts if kind_of(op).name in RESTAGED and op not in given and inside_op(op, loop)]  # type: ignore[union-attr]
