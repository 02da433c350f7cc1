"""What a newcomer meets first (issue 37, items 1 and 2): `--help | head -1` ends quietly as
NVIDIA's does (by SIGPIPE, nothing on stderr), `tileir --version` works like `tileiras
--version`, and `tileir run --help` says "usage:" once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "tests" / "corpus" / "bytecode" / "ew_float" / "13.4.tileirbc"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _closed_stdout(*argv: str) -> subprocess.CompletedProcess:
    """Run with stdout a pipe whose reader is already gone: the first write to it fails, every time
    (under `| head -1` that happens in about half the runs, when head exits before the write)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, env=ENV, cwd=ROOT, timeout=120)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [
    ("tileiras", "--help"),
    ("tileiras", "--version"),
    ("tileiras", "--help-list-hidden"),
    ("tileiras.driver.tileir_main", "--help"),
    ("tileiras.driver.tileir_main", "cache", "stats"),
    ("tileiras.driver.disasm_main", str(KERNEL)),
    ("tileiras", "--gpu-name", "sm_90", "--emit=ptx", str(KERNEL), "-o", "-"),
], ids=lambda a: " ".join(Path(x).name for x in a))
def test_closed_stdout_ends_quietly_as_nvidias(argv: tuple[str, ...]) -> None:
    res = _closed_stdout(*argv)
    assert res.stderr == ""
    assert res.returncode == -signal.SIGPIPE  # NVIDIA's tileiras and tileirdisasm end so (a shell says 141)


def test_help_piped_into_head_never_reports_an_internal_error() -> None:
    for _ in range(5):
        res = subprocess.run(f"'{sys.executable}' -m tileiras --help | head -1", shell=True, capture_output=True,
                             text=True, env=ENV, cwd=ROOT, timeout=120)
        assert res.stderr == ""
        assert res.stdout.count("\n") == 1


def _tileir(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", *args], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_tileir_version_works_like_tileiras_version(flag: str) -> None:
    from tileiras import __version__

    res = _tileir(flag)
    assert res.returncode == 0, res.stderr
    assert __version__ in res.stdout and res.stderr == ""


def test_tileir_run_help_says_usage_once() -> None:
    res = _tileir("run", "--help")
    assert res.returncode == 0
    assert res.stdout.startswith("usage: tileir run KERNEL.tileirbc")
    bad = _tileir("run", "k.tileirbc")
    assert bad.returncode == 2
    assert "usage: tileir run KERNEL.tileirbc" in bad.stderr and "usage: usage" not in bad.stderr
