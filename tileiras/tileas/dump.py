"""The nv_tileas part of `--print-ir-after-all` beside the IR (whose tile types carry their layouts)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..ir.core import Operation, Value

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment


def layout_lines(entry: Operation, assignment: "LayoutAssignment", name_of: Callable[[Value], str]) -> list[str]:
    """Comment lines beside the printed IR, whose tile types carry their layouts and whose conversions are
    ops: the values kept in shared memory for tensor cores, why each mma left to FMAs runs on no tensor
    core (`fma_reasons`), why each mma a tcgen05 target leaves on mma.sync stays off tcgen05
    (`tcgen05_refused`)."""
    lines = [f"//   the kernel's default layout: {assignment.blocked.describe()}"]
    lines += [f"//   {name_of(v)} : {v.type} in shared memory (copied for tensor cores)" for v in assignment.shared_operands]
    lines += [f"//   {name_of(op.results[0])} on FMAs, no tensor core: {why}" for op, why in assignment.fma_reasons.items()]
    lines += [f"//   {name_of(op.results[0])} not on tcgen05.mma: {why}" for op, why in assignment.tcgen05_refused.items()]
    return lines
