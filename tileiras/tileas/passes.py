"""cuda_tile (with its layout assignment) -> nv_tileas: the level's passes in order."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.core import Operation
from .buffers import compute_lifetimes
from .fuse_conversions import fuse_conversions
from .materialize import materialize_layouts
from .plan import plan_pipelines, plan_warp_roles
from .shared_plan import plan_shared_memory
from .verify import verify

if TYPE_CHECKING:
    from ..lowering.assign_layouts import LayoutAssignment

# (pass name for --time-passes and --print-ir-after-all, function of (entry, assignment))
PASSES = (
    ("materialize-layouts", materialize_layouts),
    ("fuse-conversions", lambda entry, _assignment: fuse_conversions(entry)),
    ("verify-nv_tileas", verify),
    ("shared-buffer-lifetimes", compute_lifetimes),   # op positions for the lowering's buffer plan
    ("plan-pipelines", plan_pipelines),             # the loops pipelined, their loads and schedules
    ("plan-warp-roles", plan_warp_roles),           # the warp-specialized loop and its roles
    ("plan-shared-memory", plan_shared_memory),     # the shared-memory buffers, sized and placed
)


def to_tileas(entry: Operation, assignment: "LayoutAssignment") -> None:
    """Run every pass of the level on `entry` (idempotent)."""
    for _name, run in PASSES:
        run(entry, assignment)
