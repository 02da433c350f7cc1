"""Lowering of `nv_tileaa.cluster_ctarank` (tileaa/clusters.py): the CTA's rank in its cluster."""

from __future__ import annotations

from ..ir.core import Operation
from .kernel import KernelLowering


def _ctarank(k: KernelLowering, op: Operation) -> None:
    name = "llvm.nvvm.read.ptx.sreg.cluster.ctarank"
    k.b.declare(f"declare i32 @{name}()")
    v = k.b.pre(f"call i32 @{name}()", "ctarank")
    k.set(op.results[0], k.splat(op.results[0].type, v))  # type: ignore[arg-type]


LOWERINGS = {"nv_tileaa.cluster_ctarank": _ctarank}
