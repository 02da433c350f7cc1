"""cuTile Python locates a compile error from the compiler's stderr (issue 37, item 4): its parser
(`cuda.tile._compile._parse_tileir_stderr`, the `loc("file":line:col): error:` regex) must find the
Python line of the failing op in ours, and the message must name the .tileirbc being compiled (a
CMake build's log shows only the failing command's stderr)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# cuTile exports it for sm_120 too, but its ftof to e5m3 needs sm_107: every compiler refuses it
E5M3 = ROOT / "tests" / "corpus" / "bytecode" / "cast_e5m3" / "13.4.tileirbc"


def test_cutile_reads_the_location_of_our_compile_error(tmp_path: Path) -> None:
    parse = pytest.importorskip("cuda.tile._compile")._parse_tileir_stderr
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--gpu-name", "sm_120", str(E5M3),
                           "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 5
    message, loc = parse(done.stderr)
    assert not loc.is_unknown(), done.stderr
    assert (loc.filename, loc.line, loc.col) == ("kernels/casts.py", 128, 46)
    assert message.splitlines()[0].startswith("'cuda_tile.ftof' op element type fnv8E5M3FNU requires sm_107")
    assert done.stderr.splitlines()[-1] == f"error: failed to compile Tile IR program '{E5M3}'"


def test_location_prefix_is_mlirs_spelling() -> None:
    from tileiras.ir.attributes import CallSiteLoc
    from tileiras.ir.core import Location
    from tileiras.ir.diagnostic_location import location_prefix

    assert location_prefix(Location("k.py", 3, 4)) == 'loc("k.py":3:4): '
    assert location_prefix(CallSiteLoc(Location("f.py", 1, 2), Location("k.py", 3, 4))) == 'loc("f.py":1:2): '
    assert location_prefix(Location('a"b\\c.py', 1, 1)) == 'loc("a\\"b\\\\c.py":1:1): '
    assert location_prefix(None) == "" and location_prefix(Location("", 0, 0)) == ""
