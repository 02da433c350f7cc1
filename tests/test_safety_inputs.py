"""Inputs are regular files of bounded size, judged before a byte is read (issue 37, item 7): the
CLI read /dev/zero until memory ran out and waited on a FIFO forever. Each is refused at once, one
line, exit 4 (a directory or a missing file: exit 1, as before)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tileiras.input_file import MAX_INPUT_BYTES

ROOT = Path(__file__).resolve().parent.parent


def _make(kind: str, tmp_path: Path) -> str:
    if kind == "fifo":
        os.mkfifo(tmp_path / "k.tileirbc")
        return str(tmp_path / "k.tileirbc")
    if kind == "huge":
        with open(tmp_path / "k.tileirbc", "wb") as handle:
            handle.write(b"\x7fTileIR\x00")
            handle.truncate(MAX_INPUT_BYTES + 1)  # sparse: reading it whole would take a while and memory
        return str(tmp_path / "k.tileirbc")
    return "/dev/zero"


COMMANDS = {
    "tileiras": ["tileiras.driver.tileiras_main", "--gpu-name", "sm_90", "{input}", "-o", "k.cubin"],
    "tileir asm": ["tileiras.driver.tileir_main", "asm", "{input}", "-o", "k2.tileirbc"],
    "tileir scan-deps": ["tileiras.driver.tileir_main", "scan-deps", "{input}"],
    "tileirdisasm": ["tileiras.driver.disasm_main", "{input}"],
}
REASONS = {"fifo": "it is a FIFO, not a regular file", "/dev/zero": "it is a character device, not a regular file",
           "huge": f"{MAX_INPUT_BYTES + 1} bytes, more than the {MAX_INPUT_BYTES} an input may have"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", sorted(REASONS))
def test_an_input_that_is_not_a_bounded_regular_file_is_refused_before_reading(
        tmp_path: Path, kind: str, command: str) -> None:
    path = _make(kind, tmp_path)
    argv = [a.replace("{input}", path) for a in COMMANDS[command]]
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert time.monotonic() - start < 30
    assert done.returncode == (2 if command == "tileirdisasm" else 4), done.stderr  # NVIDIA's disasm: 2
    assert f"unable to read input file '{path}': {REASONS[kind]}" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "k.cubin").exists()


def test_standard_input_is_read_to_the_bound_only(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "asm", "-", "-o", "k.tileirbc"],
                              stdin=zero, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 4
    assert done.stderr.strip() == (f"error: unable to read standard input: more than the {MAX_INPUT_BYTES} bytes "
                                   "an input may have")
