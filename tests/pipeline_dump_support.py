"""A kernel's `--print-ir-after-all` dump from the command line, and the pipelined loops its schedule lists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def dump(src: Path, gpu: str, tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "tileiras", str(src), "--no-cache", "--gpu-name", gpu,
                           "--print-ir-after-all", "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


def pipelines(text: str) -> list[tuple[int, str]]:
    """(stages, the rest of the line) per pipelined loop of the schedule's dump."""
    return [(int(m.group(1)), m.group(2)) for m in re.finditer(r"^//   loop at .*?: (\d+)-stage (.*)$", text, re.M)]
