"""The canonical form: the passes every kernel goes through before anything is decided about it.

Run on cuda_tile as read (whatever bytecode version or equivalent form it came in) and again on
nv_tileaa (`tileaa.passes`), so that every analysis and decision below sees one form of each kernel.
Each pass is one function of the entry that says whether it changed anything; the group runs to a fixed
point (a fold may expose an invariant, a hoist a common subexpression).
"""

from __future__ import annotations

from typing import Callable

from ..ir.core import Operation
from .canonicalize import canonicalize
from .cse import cse
from .dce import dce
from .licm import licm
from .order import canonical_order
from .tokens import simplify_tokens
from .unroll_windows import unroll_windows

Pass = Callable[[Operation], bool]

# (name in --print-ir-after-all and --time-passes, pass)
CANONICAL_PASSES: tuple[tuple[str, Pass], ...] = (
    ("canonicalize", canonicalize),
    ("unroll-windows", unroll_windows),
    ("simplify-tokens", simplify_tokens),
    ("licm", licm),
    ("cse", cse),
    ("dce", dce),
    ("canonical-order", canonical_order),
)

_MAX_ROUNDS = 8


def to_canonical(entry: Operation, passes: tuple[tuple[str, Pass], ...] = CANONICAL_PASSES) -> None:
    """Run `passes` over `entry` until none changes it."""
    rounds(passes, lambda _name, run, _round: run(entry))


def rounds(passes: tuple[tuple[str, Pass], ...], apply: Callable[[str, Pass, int], bool]) -> None:
    """`apply(name, pass, round)` for each pass in turn, round after round, until a whole round changes
    nothing (the driver's form: it times, verifies and dumps each)."""
    for round_ in range(_MAX_ROUNDS):
        if not any([apply(name, run, round_) for name, run in passes]):
            return
