"""SASS of a cubin per function, from NVIDIA's cuobjdump (the nvidia-cuda-cuobjdump wheel): the
ground truth that optimization remarks are tested against."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import frontend_samples as fs  # noqa: E402

CUOBJDUMP = fs.oracle("cuobjdump")

# memory opcode width suffixes -> bits; no suffix is 32 bits
_WIDTH = {"U8": 8, "S8": 8, "U16": 16, "S16": 16, "64": 64, "128": 128}


def functions(cubin: Path) -> dict[str, list[str]]:
    """Function symbol -> its SASS opcodes (predicates dropped), in order."""
    text = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if m := re.match(r"\s*Function : (\S+)", line):
            current = out.setdefault(m.group(1), [])
        elif current is not None and (m := re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)):
            current.append(m.group(1))
    return out


def registers(cubin: Path) -> dict[str, int]:
    """Function -> registers per thread (cuobjdump -res-usage)."""
    text = subprocess.run([CUOBJDUMP, "-res-usage", str(cubin)], check=True, capture_output=True, text=True).stdout
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"Function (\S+):\s*\n\s*REG:(\d+)", text)}


def width(opcode: str) -> int:
    """Bits moved per thread by a load/store opcode (LDG.E.U16 -> 16, LDG.E.128 -> 128, LDG.E -> 32)."""
    for part in opcode.split(".")[1:]:
        if part in _WIDTH:
            return _WIDTH[part]
    return 32


def widths(opcodes: list[str], family: str) -> set[int]:
    """Widths of every `family` opcode (LDG, STG, LDGSTS) in a function."""
    return {width(op) for op in opcodes if op.split(".")[0] == family}
