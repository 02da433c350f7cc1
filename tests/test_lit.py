"""The FileCheck tests of tests/lit (the canonical form's passes, through `tileir opt`), run by lit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

LIT = Path(__file__).resolve().parent / "lit"


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is a test dependency (pip install lit filecheck)"
    return found


def test_lit_suite() -> None:
    done = subprocess.run([_tool("lit"), "-v", str(LIT), f"-Dpython={sys.executable}",
                           f"-Dfilecheck={_tool('filecheck')}"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Passed" in done.stdout and "Failed" not in done.stdout.split("Testing Time")[-1]
