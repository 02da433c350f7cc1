"""The entry's optimization hints as the levels below read them: one reader, one fallback.

A hint is given per architecture (`sm_90 = {occupancy = 2}`) or by default; the target's own entry
wins (ir/attributes.OptimizationHints.for_arch). A value that is not a positive integer counts as
no hint (the verifier has already refused hints outside their ranges).
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..target import caps


def entry_hint(entry: Operation, gpu: "str | int", key: str) -> Optional[int]:
    """The entry's hint `key` on `gpu` (a name or an SM number), or None where it gives none."""
    hints = entry.attributes.get("optimization_hints")
    value = hints.for_arch(caps(gpu).name).get(key) if hasattr(hints, "for_arch") else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def occupancy(entry: Operation, gpu: "str | int") -> int:
    """The CTAs an SM the entry's `occupancy` hint asks for on `gpu` (1: none)."""
    return entry_hint(entry, gpu, "occupancy") or 1


def cluster_size(entry: Operation, gpu: "str | int") -> int:
    """The CTAs a cluster the entry's `num_cta_in_cga` hint asks for on `gpu` (1: none)."""
    return entry_hint(entry, gpu, "num_cta_in_cga") or 1
