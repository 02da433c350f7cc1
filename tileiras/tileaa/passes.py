"""cuda_tile -> nv_tileaa: the level's passes in order (each of one entry)."""

from __future__ import annotations

from .canonicalize import canonicalize_tileaa
from .facts import infer_facts
from .view_order import order_views
from .verify import verify

# (pass name for --time-passes and --print-ir-after-all, function of the entry)
PASSES = (
    ("order-views", order_views),
    ("canonicalize-nv_tileaa", canonicalize_tileaa),
    ("infer-facts", infer_facts),
    ("verify-nv_tileaa", verify),
)


def to_tileaa(entry) -> None:
    """Run every pass of the level on `entry` (idempotent)."""
    for _name, run in PASSES:
        run(entry)
