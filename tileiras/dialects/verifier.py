"""Verifier of cuda_tile modules (structural, type and shape rules).

Diagnostics follow MLIR: `file:line:col: error: 'cuda_tile.X' op message`,
using the op's own location when the module carries one.
"""

from __future__ import annotations

from ..driver.errors import CompileError
from ..ir.core import Operation


def verify_module(module: Operation) -> None:
    """Raise CompileError on the first rule a module breaks."""
    from .verify_rules import check_op

    for op in module.walk():
        check_op(op)
