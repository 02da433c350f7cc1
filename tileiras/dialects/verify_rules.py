"""Per-op verification rules (filled in by the verifier work)."""

from __future__ import annotations

from ..ir.core import Operation


def check_op(op: Operation) -> None:
    return None
