"""NVIDIA's tools as test oracles, and the op/type roster the corpus must cover.

Only tests and the corpus generator use this module; the product never calls
NVIDIA's ``tileiras`` or ``tileirdisasm``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VERSIONS: tuple[str, ...] = ("13.1", "13.2", "13.3", "13.4")

# Every cuda_tile op of bytecode versions 13.1..13.4, spelled as tileirdisasm prints
# it, with the first version that has it (NVIDIA's dialect definitions and the
# "since" notes of cuTile's bytecode encoder).
OP_ROSTER: dict[str, str] = {
    **{op: "13.1" for op in (
        "absf", "absi", "addf", "addi", "andi", "assert", "assume", "atomic_cas_tko",
        "atomic_rmw_tko", "bitcast", "break", "broadcast", "cat", "ceil", "cmpf", "cmpi",
        "constant", "continue", "cos", "cosh", "divf", "divi", "entry", "exp", "exp2",
        "exti", "extract", "floor", "fma", "for", "ftof", "ftoi", "get_global",
        "get_index_space_shape", "get_num_tile_blocks", "get_tensor_shape",
        "get_tile_block_id", "global", "if", "int_to_ptr", "iota", "itof", "join_tokens",
        "load_ptr_tko", "load_view_tko", "log", "log2", "loop", "make_partition_view",
        "make_tensor_view", "make_token", "maxf", "maxi", "minf", "mini", "mmaf", "mmai",
        "module", "mulf", "mulhii", "muli", "negf", "negi", "offset", "ori", "permute",
        "fpowf", "print_tko", "ptr_to_int", "ptr_to_ptr", "reduce", "remf", "remi",
        "reshape", "return", "rsqrt", "scan", "select", "shli", "shri", "sin", "sinh",
        "sqrt", "store_ptr_tko", "store_view_tko", "subf", "subi", "tan", "tanh",
        "trunci", "xori", "yield")},
    "atan2": "13.2",
    **{op: "13.3" for op in (
        "alloca", "atomic_red_view_tko", "make_gather_scatter_view", "make_strided_view",
        "mmaf_scaled", "pack", "unpack")},
    **{op: "13.4" for op in (
        "fpowi", "gdc_launch_dependents_tko", "gdc_wait_tko", "insert",
        "memory_fence_alias_tko")},
}

# Element types of versions 13.1..13.4 as tileirdisasm spells them, with first version.
TYPE_ROSTER: dict[str, str] = {
    **{t: "13.1" for t in ("i1", "i8", "i16", "i32", "i64", "f16", "bf16", "f32", "tf32",
                           "f64", "f8E4M3FN", "f8E5M2")},
    "f8E8M0FNU": "13.2",
    "f4E2M1FN": "13.3", "i4": "13.3",
    "fnv8E5M3FNU": "13.4",
}

# The disassembler prints no `module` line: every file is one module, so the
# op is covered by construction.
IMPLICIT_OPS: frozenset[str] = frozenset({"module"})

_OP_LINE = re.compile(
    r"^\s*(?:%[\w#:]+(?:\s*,\s*%[\w#:]+)*\s*=\s*)?([a-z_][a-z0-9_]*)\b")
_NOT_OPS = frozenset({"else", "loc"})
_ELEM = re.compile(r"(?:(?<![\w.])|(?<=[\d?]x))(i1|i4|i8|i16|i32|i64|f16|bf16|f32|tf32|f64|f8E4M3FN|f8E5M2|"
                   r"f8E8M0FNU|f4E2M1FN|fnv8E5M3FNU)(?![\w])")


def _bin_dir() -> Path:
    """Where the nvidia-cuda-tileiras wheel put its binaries."""
    override = os.environ.get("TILEIRAS_ORACLE_BIN")
    if override:
        return Path(override)
    for base in map(Path, sys.path):
        cand = base / "nvidia" / "cu13" / "bin"
        if (cand / "tileirdisasm").exists():
            return cand
    return Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" \
        / "site-packages" / "nvidia" / "cu13" / "bin"


def tileirdisasm_path() -> Path:
    return _bin_dir() / "tileirdisasm"


def tileiras_path() -> Path:
    return _bin_dir() / "tileiras"


def available() -> bool:
    return tileirdisasm_path().exists() and tileiras_path().exists()


def run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """subprocess.run that retries a spawn failing with OSError: starting many
    processes from threads at once occasionally fails with EFAULT/EAGAIN here."""
    for attempt in range(4):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except OSError:
            if attempt == 3:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def disasm(path: str | os.PathLike, debug_info: bool = False) -> subprocess.CompletedProcess:
    cmd = [str(tileirdisasm_path())] + (["-g"] if debug_info else []) + [str(path)]
    return run(cmd, timeout=120)


def assemble(path: str | os.PathLike, gpu_name: str,
             options: list[str] | None = None) -> subprocess.CompletedProcess:
    """Run NVIDIA's tileiras on ``path``; the cubin goes to a throw-away directory."""
    with tempfile.TemporaryDirectory(prefix="corpus-oracle-") as tmp:
        out = Path(tmp) / "out.cubin"
        return run([str(tileiras_path()), "--gpu-name", gpu_name, *(options or []), "-o",
                    str(out), str(path)], timeout=900)


def ops_in(text: str) -> set[str]:
    """cuda_tile op mnemonics used in tileirdisasm output (or hand-written text like it)."""
    ops = set()
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "}(#/" or stripped.startswith("} else"):
            continue
        m = _OP_LINE.match(line)
        if m and m.group(1) not in _NOT_OPS:
            ops.add(m.group(1))
    return ops


def element_types_in(text: str) -> set[str]:
    """Element types mentioned in types of tileirdisasm output (ignores debug info)."""
    types = set()
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        # Strings in print/assert carry user text; drop them before scanning.
        line = re.sub(r'"(?:[^"\\]|\\.)*"', '""', line)
        types.update(_ELEM.findall(line))
    return types

