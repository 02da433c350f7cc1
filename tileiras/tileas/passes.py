"""nv_tileaa -> nv_tileas: the level's decisions in order. The warps per CTA (`warps.py`), tiles too
big for registers looped in chunks and long rows streamed (tileaa/tile_loops.py, row_chunks.py,
whose chunk sizes follow the warps), a layout for every tile value (`assign_layouts.py`), then the
passes of PASSES on the laid-out IR: conversions, the loops' pipelines, the warp roles, the shared
memory. The lowering reads what they decided and translates."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, ContextManager

from ..ir.core import Operation
from ..target import caps
from ..tileaa.passes import to_tileaa
from ..tileaa.row_chunks import chunk_rows
from ..tileaa.tile_loops import loop_tiles
from .assign_layouts import LayoutAssignment
from .buffers import compute_lifetimes
from .fuse_conversions import fuse_conversions
from .materialize import materialize_layouts
from .plan import plan_pipelines, plan_warp_roles
from .shared_plan import plan_shared_memory
from .verify import verify
from .warps import choose_threads

# (pass name for --time-passes and --print-ir-after-all, function of (entry, assignment)): the passes
# on the laid-out IR
PASSES = (
    ("materialize-layouts", materialize_layouts),
    ("fuse-conversions", lambda entry, _assignment: fuse_conversions(entry)),
    ("verify-nv_tileas", verify),
    ("shared-buffer-lifetimes", compute_lifetimes),   # op positions for the lowering's buffer plan
    ("plan-pipelines", plan_pipelines),             # the loops pipelined, their loads and schedules
    ("plan-warp-roles", plan_warp_roles),           # the warp-specialized loop and its roles
    ("plan-shared-memory", plan_shared_memory),     # the shared-memory buffers, sized and placed
)


def threads_and_loops(entry: Operation, gpu: str) -> int:
    """Stage `loop-tiles`: the entry's threads, chosen on its whole tiles; then tiles too big for
    registers computed in loops over chunks, checked against the compile limits in the form they
    are lowered in."""
    from ..tileaa.limits import check_kernel

    threads = choose_threads(entry, gpu)
    if loop_tiles(entry, threads):
        to_tileaa(entry)
    check_kernel(entry, looped=False)   # what stays in registers, in the form it is lowered in
    return threads


def chunk_long_rows(entry: Operation, threads: int) -> None:
    """Stage `chunk-rows`: long element-wise rows streamed in unrolled chunks (and the facts of the
    ops that makes inferred)."""
    if chunk_rows(entry, threads):
        to_tileaa(entry)


def assign_layouts(entry: Operation, gpu: str, threads: int) -> LayoutAssignment:
    """Stage `assign-layouts`: a layout for every tile value, the mmas' instructions with them."""
    return LayoutAssignment(entry, threads, sm=caps(gpu).sm)


def run_passes(entry: Operation, assignment: LayoutAssignment) -> None:
    """Run every pass of PASSES on the laid-out `entry` (idempotent)."""
    for _name, run in PASSES:
        run(entry, assignment)


def to_tileas(entries: list[Operation], gpu: str,
              stage: "Callable[[str], ContextManager[object]]" = lambda _name: nullcontext()) -> list[LayoutAssignment]:
    """`entries` (at nv_tileaa) brought to nv_tileas for `gpu`: every stage above, in order, each over
    all entries inside `stage(name)` (the driver's timer for --time-passes); their layout assignments."""
    with stage("loop-tiles"):
        threads = [threads_and_loops(op, gpu) for op in entries]
    with stage("chunk-rows"):
        for op, n in zip(entries, threads):
            chunk_long_rows(op, n)
    with stage("assign-layouts"):
        assignments = [assign_layouts(op, gpu, n) for op, n in zip(entries, threads)]
    for name, run in PASSES:
        with stage(name):
            for op, assignment in zip(entries, assignments):
                run(op, assignment)
    return assignments
