"""The bytecode mutation fuzzer (tests/fuzz_bytecode.py) at a small, fixed budget: a few thousand
mutants of the corpus through read, verify, limits, print and lowering, a few through the whole
driver. Every one must end in a diagnostic or succeed: no traceback, hang or crash.

TILEIRAS_FUZZ_SECONDS=600 runs it for ten minutes instead (or: python tests/fuzz_bytecode.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
import fuzz_bytecode  # noqa: E402

SEED = 20261123
INPUTS = 3000          # about 5 s on one core
FULL_EVERY = 40        # of the ~100 mutants that lower, 2 or 3 go through LLVM and ptxas


def test_mutated_bytecode_never_escapes_as_a_traceback_hang_or_crash(tmp_path: Path) -> None:
    seconds = float(os.environ.get("TILEIRAS_FUZZ_SECONDS", "0") or 0)
    report = fuzz_bytecode.fuzz(seconds or 3600.0, SEED, max_inputs=None if seconds else INPUTS,
                                full_every=FULL_EVERY, workdir=tmp_path)
    print(report.summary())
    assert report.inputs >= (1 if seconds else INPUTS)
    assert report.outcomes.get("lowered", 0) > 0 and report.outcomes.get("rejected", 0) > 0  # both sides reached
    assert not report.failures, "\n\n".join(detail for _, detail in report.failures)
