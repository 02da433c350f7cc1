"""The emulator reports the bugs of benchmarks/mutation_ops.py's catalogue put into our compiler's PTX.

The default run checks the mutants the emulator used to miss (issue 36: undefined accumulators, a
deleted wgmma.fence or tcgen05 fence, an ignored descriptor base offset, the .target ignored, the
mma layouts' order, tcgen05.dealloc or cp.async.bulk.wait_group.read removed, a skipped stage-full
wait, a deleted bar.sync, a too-large wgmma.wait_group) on the f16 matmul; `-m sweep` samples one
mutant of every operator on every target (benchmarks/mutations.py measures the whole score).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import mutation_ops  # noqa: E402
import mutations  # noqa: E402

KERNEL = "mm_f16_128x128x64"
OPERATORS = {op.name: op for op in mutation_ops.CATALOGUE}


@functools.lru_cache(maxsize=None)
def case(gpu: str) -> mutations.Case:
    c = mutations.prepare(KERNEL, gpu)
    assert c is not None
    assert mutations.outcome(c, c.ptx) is None, "the unmutated PTX must run clean"
    return c


def mutant(gpu: str, operator: str, site: str = "", last: bool = False) -> tuple[str, str]:
    """(description, PTX) of the first (`last`: the last) mutant of `operator` whose description contains
    `site` and that mutations.py does not list as equivalent."""
    c = case(gpu)
    found = [(what, ptx) for line, what, ptx in OPERATORS[operator].mutants(c.ptx)
             if site in what and mutations.equivalent(OPERATORS[operator], what, c, line) is None]
    assert found, f"no '{operator}' mutant at '{site}' in the {gpu} PTX"
    return found[-1] if last else found[0]


# (target, operator, a piece of the mutation's description, what the report says)
MISSED_BEFORE = [
    ("sm_80", "delete an accumulator's zero-init", "", "undefined value stored"),
    ("sm_90", "delete an accumulator's zero-init", "", "undefined value stored"),
    ("sm_100", "first tcgen05.mma accumulates", "", "read of undefined tensor memory"),
    ("sm_90", "delete wgmma.fence", "", "without wgmma.fence"),
    ("sm_100", "delete tcgen05.fence::before_thread_sync", "", "data race on tensor memory"),
    ("sm_100", "delete tcgen05.fence::after_thread_sync", "last", "data race on tensor memory"),
    ("sm_90", "descriptor base offset", "", "mismatch"),
    ("sm_100", "descriptor base offset", "", "mismatch"),
    ("sm_90", "lower the target", "-> sm_80", "needs .target"),
    ("sm_80", "mma layouts .col.row", "", "takes the layouts .row.col"),
    ("sm_90", "delete cp.async.bulk.wait_group", "", "exits while the bulk copy"),
    ("sm_90", "skip an mbarrier wait", "", ""),
    ("sm_90", "delete bar.sync", "", ""),
    ("sm_90", "raise a wait_group count", "wgmma.wait_group", ""),
]


@pytest.mark.parametrize("gpu, operator, site, says", MISSED_BEFORE,
                         ids=[f"{g}-{o}-{s}" for g, o, s, _ in MISSED_BEFORE])
def test_mutants_the_emulator_used_to_miss_are_reported(gpu, operator, site, says) -> None:
    what, ptx = mutant(gpu, operator, "" if site == "last" else site, last=site == "last")
    reported = mutations.outcome(case(gpu), ptx)
    assert reported is not None, f"survived: {what}"
    assert says in reported, reported


def test_tcgen05_dealloc_removed_is_reported() -> None:
    c = case("sm_100")
    ptx = "\n".join(line for line in c.ptx.split("\n") if "tcgen05.dealloc" not in line)
    assert ptx != c.ptx
    reported = mutations.outcome(c, ptx)
    assert reported is not None and "still allocated" in reported, reported


@pytest.mark.sweep
@pytest.mark.parametrize("gpu", mutations.TARGETS)
def test_a_sample_of_every_operator_is_reported(gpu) -> None:
    results = mutations.score([case(gpu)], per_operator=1, seed=36)
    survivors = [f"{r.operator.name}: {r.what}" for r in results if r.verdict == "survived"]
    assert not survivors, "\n".join(survivors)
