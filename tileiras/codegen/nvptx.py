"""LLVM IR text -> PTX text, through LLVM's NVPTX backend (llvmlite).

The target table (`targets.py`) picks the CPU and PTX ISA version; `-O0..-O3`
map to LLVM's standard new-pass-manager pipelines and to the codegen level.
Output is deterministic: the same IR, target and level give the same bytes.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from tileiras.errors import CompileError, ExitCode, TileirasError

from . import targets
from .isolate import run_isolated

TRIPLE = "nvptx64-nvidia-cuda"
_TARGET_LINE = re.compile(r"^\.target\s+(sm_[0-9]+[af]?)(.*)$", re.MULTILINE)
_VERSION_LINE = re.compile(r"^\.version\s+[0-9]+\.[0-9]+$", re.MULTILINE)
_TRIPLE_LINE = re.compile(r'^target triple\s*=\s*"([^"]*)"', re.MULTILINE)


def _llvm() -> Any:
    """LLVM, loaded and initialised once per process (ctypes on llvmlite's library: ~10 ms)."""
    from . import llvm_capi

    return llvm_capi.load()


def select_target(llvm_ir: str, gpu: str) -> targets.Target:
    """The table row to compile for: `gpu`, or its `a` variant when the IR needs one."""
    row = targets.lookup(gpu)
    if row.suffix == "" and targets.ARCH_SPECIFIC_USE.search(llvm_ir):
        variant = targets.arch_specific_variant(row)
        if variant is not None:
            return variant
    return row


def llvm_to_ptx(llvm_ir: str, gpu: str, opt_level: int = 3, debug: bool = False, worker: Any = None) -> str:
    """Compile one LLVM IR module to PTX for `gpu` (sm_80 .. sm_121, with a/f variants).

    Debug information comes from the module's own metadata: a compile unit with
    `emissionKind: FullDebug` gives DWARF and `.target sm_XX, debug`;
    `DebugDirectivesOnly` gives `.loc` line info only (what `--lineinfo` wants).
    `debug=True` compiles at -O0, since optimised device debugging is not supported.
    """
    return emit_later(llvm_ir, gpu, opt_level, debug, worker)()


def emit_later(llvm_ir: str, gpu: str, opt_level: int = 3, debug: bool = False,
               worker: Any = None) -> Callable[[], str]:
    """`llvm_to_ptx` in two halves: with an LLVMWorker the module is handed over now and the
    returned function waits for its PTX, so the caller can do other work in between."""
    if opt_level not in (0, 1, 2, 3):
        raise TileirasError(f"error: invalid optimization level {opt_level} (expected 0..3)", ExitCode.INVALID_OPTIONS)
    row = select_target(llvm_ir, gpu)
    found = _TRIPLE_LINE.search(llvm_ir)
    if found and found.group(1) and not found.group(1).startswith("nvptx"):
        raise CompileError(f"error: LLVM module targets '{found.group(1)}', not NVPTX")
    level = 0 if debug else opt_level
    if worker is not None:  # an LLVMWorker started before the module was read
        worker.submit(llvm_ir, row, level)
        return lambda: _fix_header(worker.result(), row)
    _llvm()  # load LLVM in the parent, so a forked child starts with it
    ptx = run_isolated("LLVM NVPTX code generation", lambda: _emit(llvm_ir, row, level))
    return lambda: _fix_header(ptx, row)


def _emit(llvm_ir: str, row: targets.Target, opt_level: int) -> str:
    from . import llvm_capi
    from .libdevice import needs_libdevice, read_libdevice

    libdevice = read_libdevice() if needs_libdevice(llvm_ir) else None
    ptx = llvm_capi.compile_ir(llvm_ir, TRIPLE, row.llvm_cpu, f"+ptx{row.llvm_ptx}", opt_level,
                               link=libdevice, internalize="__nv_")
    return ptx.decode("utf-8")


def _fix_header(ptx: str, row: targets.Target) -> str:
    """Declare the target's real `.version`/`.target` where LLVM cannot (sm_107)."""
    match = _TARGET_LINE.search(ptx)
    if match is None:
        raise CompileError("error: LLVM produced PTX without a .target directive")
    line = f".target {row.name}{match.group(2)}"
    ptx = ptx[: match.start()] + line + ptx[match.end():]
    if row.header_rewritten:
        version = f".version {row.ptx_version // 10}.{row.ptx_version % 10}"
        ptx = _VERSION_LINE.sub(version, ptx, count=1)
    return ptx


def ptx_has_dwarf(ptx: str) -> bool:
    """True when the PTX declares `.target ..., debug` (it carries DWARF sections)."""
    match = _TARGET_LINE.search(ptx)
    return bool(match and re.search(r"\bdebug\b", match.group(2)))


def ptx_target(ptx: str) -> str | None:
    """The `sm_XX[a|f]` a PTX module's `.target` line names."""
    match = _TARGET_LINE.search(ptx)
    return match.group(1) if match else None
