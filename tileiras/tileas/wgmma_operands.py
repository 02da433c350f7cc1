"""How a wgmma reads its operands: the decisions of lowering/ops_wgmma, made here for the lowering
and plan-shared-memory (shared_operands.py) alike.

A reads from registers where it sits in the accumulator's layout (`a_in_registers`), else by
descriptor with B (`read_operands`). A shared operand is read as stored where the instruction takes
that form ("direct"), else rounded where it lies, or copied K-major into a buffer its loop gave or
into one of its own; a register tile is stored swizzled as it is ("stage") or, a B of a type with no
transposed form, K-major ("store") (`operand_form`).
"""

from __future__ import annotations

import copy
from typing import Callable

from ..ir.core import Operation
from ..layout.encodings import MmaLayout
from ..tileaa.mma_forms import WGMMA_TF32_ROUNDING, WgmmaShape, reads_directly
from .operands import RegisterTile, SharedTile


def a_in_registers(lhs: object, acc_layout: MmaLayout, shape: WgmmaShape) -> bool:
    """A 16-bit A that sits in this mma's accumulator layout (warpgroup rows): its registers are
    the A fragments of the register form, no shared memory involved."""
    if not isinstance(lhs, RegisterTile) or not isinstance(lhs.layout, MmaLayout) or shape.elem_bytes != 2:
        return False
    mine = lhs.layout
    return mine.interleaved and mine.warps == acc_layout.warps and mine.shape[:2] == acc_layout.shape[:2]


def direct(shape: WgmmaShape, value: SharedTile, role: str) -> bool:
    """Read by descriptor as stored: swizzled, in a form the instruction takes, and not an f32
    tile read as tf32 with a rounding wgmma does not apply (the copy rounds it as its ftof says)."""
    m = value.matrix
    return m.swizzled and m.batch == 1 and not value.tf32 \
        and reads_directly(shape, role, value.transposed, m.rows, m.cols)


def operand_form(op: Operation, shape: WgmmaShape, value: object, role: str, given: dict,
                 rounds_in_place: "Callable[[], bool]") -> str:
    """How wgmma reads operand `value` (A: role "a", B: "b"): "direct" (a shared tile by descriptor,
    as stored), "rounded" (an f32 stage rounded to tf32 where it lies, `rounds_in_place`), "given"
    (copied K-major into the buffer its loop gave, `given`: (mma, role) -> buffer,
    kmajor_copies.loop_copies), "copy" (copied K-major into a buffer of its own), "stage" (a register
    tile staged swizzled, `restaged`) or "store" (a register B stored K-major into a buffer of its
    own). "copy" and "store" ask for a "kmajor-copy" buffer, "stage" for an "mma-stage" one."""
    if isinstance(value, SharedTile):
        if direct(shape, value, role):
            return "direct"
        if rounds_in_place():
            return "rounded"
        return "given" if (op, role) in given else "copy"
    return "stage" if restaged(shape, value, role) else "store"


def read_operands(shape: WgmmaShape, lhs: object, rhs: object, layout: MmaLayout) -> "list[tuple[object, str]]":
    """The operands this wgmma (its accumulator in `layout`) reads by descriptor, with their role
    ("a", "b"): B alone where A sits in registers (`a_in_registers`), else both. A shared operand
    read as tf32 with the rounding wgmma applies itself comes back as stored."""
    roles = [(rhs, "b")] if a_in_registers(lhs, layout, shape) else [(lhs, "a"), (rhs, "b")]
    return [(_as_wgmma_reads(value), role) for value, role in roles]


def _as_wgmma_reads(value: object) -> object:
    if not isinstance(value, SharedTile) or value.tf32 != WGMMA_TF32_ROUNDING:
        return value
    plain = copy.copy(value)    # a plan stand-in keeps its `source`
    plain.tf32 = ""
    return plain


def restaged(shape: WgmmaShape, value: object, role: str) -> bool:
    """Whether `value`, an operand read by descriptor, is a register tile stored as it is in a
    swizzled buffer ("mma-stage"): A, or a B of a type with a transposed form (one without is stored
    K-major instead); not a shared operand."""
    return isinstance(value, RegisterTile) and (role == "a" or shape.transposable)


def copy_turns(lhs: object, acc_layout: MmaLayout, shape: WgmmaShape) -> bool:
    """Whether B's K-major copy may turn its lanes' rows (tileas/kmajor_lanes.WarpShape), which costs each
    thread a few registers across the copy: only beside an A loaded into shared memory, not one computed in
    registers (attention's P, with the softmax's state: fp8 attention's V copy spilled 40% more on sm_90
    with them)."""
    return not a_in_registers(lhs, acc_layout, shape) and isinstance(lhs, SharedTile)
