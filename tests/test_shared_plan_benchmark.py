"""benchmarks/shared_plan.py: the plan's coverage per corpus, and two trees' LLVM IR compared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "shared_plan.py"), "--corpus", "realistic",
                           "--only", "bmm_f16_64x64x32", "--jobs", "1", *args], capture_output=True, text=True,
                          timeout=300)


def test_the_coverage_of_a_kernel_is_reported_and_its_ir_compared(tmp_path: Path) -> None:
    done = _run("--save-ir", str(tmp_path / "a"))
    assert done.returncode == 0, done.stderr
    assert "realistic: 4 pairs lowered (0 refused by the target); every request predicted in 4, every role " \
           "covered (the plan complete) in 4\n" in done.stdout, done.stdout
    (tmp_path / "a" / "bmm_f16_64x64x32.sm_90.ll").write_text("changed")
    done = _run("--save-ir", str(tmp_path / "b"), "--against", str(tmp_path / "a"))
    assert "LLVM IR: 1 of 4 pairs differ from" in done.stdout and "bmm_f16_64x64x32.sm_90.ll" in done.stdout
