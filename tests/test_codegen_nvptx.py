"""LLVM IR -> PTX (llvmlite NVPTX) for every target, each result accepted by ptxas."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.codegen import targets
from tileiras.codegen.cubin import read_cubin
from tileiras.codegen.nvptx import llvm_to_ptx, ptx_target
from tileiras.codegen.ptxas import assemble
from tileiras.errors import CompileError, ExitCode, TileirasError

DATA = Path(__file__).parent / "data" / "llvm"
ROOT = Path(__file__).parent.parent
KERNELS = {"vadd": "vadd", "scalars": "axpb", "allparams": "allparams"}


def kernel_ir(name: str) -> str:
    return (DATA / f"{name}.ll").read_text()


def header(ptx: str) -> tuple[str, str]:
    version = re.search(r"^\.version (\S+)$", ptx, re.MULTILINE)
    target = re.search(r"^\.target (.+)$", ptx, re.MULTILINE)
    assert version and target
    return version.group(1), target.group(1)


@pytest.mark.parametrize("gpu", targets.BASE_TARGETS)
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_every_target_compiles_and_assembles(kernel: str, gpu: str) -> None:
    ptx = llvm_to_ptx(kernel_ir(kernel), gpu)
    row = targets.TARGETS[gpu]
    assert header(ptx) == (f"{row.ptx_version // 10}.{row.ptx_version % 10}", gpu)
    assert f".visible .entry {KERNELS[kernel]}(" in ptx
    cubin = assemble(ptx, gpu)
    assert read_cubin(cubin).sm == row.sm


def test_documented_targets_are_all_in_the_table() -> None:
    wanted = ["sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_100", "sm_103", "sm_107", "sm_110",
              "sm_120", "sm_121"]
    assert list(targets.BASE_TARGETS) == wanted


@pytest.mark.parametrize("gpu", ["sm_90a", "sm_100a", "sm_100f", "sm_103a", "sm_107a", "sm_110a", "sm_120a",
                                 "sm_121a", "sm_121f"])
def test_arch_and_family_variants(gpu: str) -> None:
    ptx = llvm_to_ptx(kernel_ir("vadd"), gpu)
    assert header(ptx)[1] == gpu
    assert read_cubin(assemble(ptx, gpu)).sm == targets.TARGETS[gpu].sm


def test_maxntid_from_attribute_and_from_legacy_annotation() -> None:
    assert ".maxntid 128" in llvm_to_ptx(kernel_ir("vadd"), "sm_80")
    assert ".maxntid 256" in llvm_to_ptx(kernel_ir("scalars"), "sm_80")


SETMAXNREG = """
target triple = "nvptx64-nvidia-cuda"
declare void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32)
define ptx_kernel void @grow() #0 {
  call void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 240)
  ret void
}
attributes #0 = { "nvvm.reqntid"="128" }
"""


def test_arch_specific_intrinsic_selects_the_a_variant() -> None:
    ptx = llvm_to_ptx(SETMAXNREG, "sm_90")
    assert header(ptx)[1] == "sm_90a"
    assert "setmaxnreg.inc.sync.aligned.u32" in ptx
    assert read_cubin(assemble(ptx, "sm_90")).sm == 90  # ptxas gets -arch sm_90a from the .target


def test_fatal_llvm_error_becomes_compile_error() -> None:
    # sm_80 has no setmaxnreg: LLVM aborts in instruction selection, in a child process.
    with pytest.raises(CompileError) as info:
        llvm_to_ptx(SETMAXNREG, "sm_80")
    assert info.value.code == ExitCode.COMPILE_FAILED
    assert "LLVM ERROR" in info.value.message or "Cannot select" in info.value.message


def test_invalid_ir_reports_llvm_message() -> None:
    with pytest.raises(CompileError) as info:
        llvm_to_ptx("define void @f( {", "sm_90")
    assert "invalid LLVM IR" in info.value.message and "error:" in info.value.message


def test_ir_that_does_not_verify() -> None:
    text = "define ptx_kernel void @k() {\n  %x = add i32 1, 2\n}\n"  # block without terminator
    with pytest.raises(CompileError):
        llvm_to_ptx(text, "sm_90")


def test_host_triple_is_rejected() -> None:
    with pytest.raises(CompileError, match="x86_64"):
        llvm_to_ptx('target triple = "x86_64-unknown-linux-gnu"\n', "sm_90")


@pytest.mark.parametrize("gpu", ["sm_70", "sm_99", "compute_90", "sm_80a", ""])
def test_unknown_target(gpu: str) -> None:
    with pytest.raises(TileirasError) as info:
        llvm_to_ptx(kernel_ir("vadd"), gpu)
    assert info.value.code == ExitCode.INVALID_OPTIONS


def test_bad_opt_level() -> None:
    with pytest.raises(TileirasError) as info:
        llvm_to_ptx(kernel_ir("vadd"), "sm_90", opt_level=4)
    assert info.value.code == ExitCode.INVALID_OPTIONS


def test_opt_levels_change_code_and_all_assemble() -> None:
    outputs = {level: llvm_to_ptx(kernel_ir("scalars"), "sm_89", opt_level=level) for level in range(4)}
    assert outputs[0] != outputs[3]
    for level, ptx in outputs.items():
        assemble(ptx, "sm_89", opt_level=level)


def test_full_debug_info_gives_dwarf_and_assembles() -> None:
    ptx = llvm_to_ptx(kernel_ir("vadd_debug"), "sm_90", opt_level=3, debug=True)
    assert header(ptx)[1] == "sm_90, debug"
    assert re.search(r"\.section\s+\.debug_info", ptx) and re.search(r"^\s*\.loc\s+1 4 7", ptx, re.MULTILINE)
    assert ptx_target(ptx) == "sm_90"
    # ptxas refuses optimised debugging: DWARF-carrying PTX is assembled with -g at -O0.
    assert read_cubin(assemble(ptx, "sm_90", opt_level=3)).sm == 90


def test_line_directives_only_keeps_optimised_assembly() -> None:
    ir = kernel_ir("vadd_debug").replace("FullDebug", "DebugDirectivesOnly")
    ptx = llvm_to_ptx(ir, "sm_100", opt_level=3)
    assert header(ptx)[1] == "sm_100"
    assert ".debug_info" not in ptx and re.search(r"^\s*\.loc\s+1 3 5", ptx, re.MULTILINE)
    assert '.file\t1 "kernels/vadd.tile"' in ptx
    with_lines = assemble(ptx, "sm_100", opt_level=3, lineinfo=True)
    assert with_lines != assemble(ptx, "sm_100", opt_level=3)


def test_debug_flag_compiles_at_O0() -> None:
    ir = kernel_ir("scalars")
    assert llvm_to_ptx(ir, "sm_90", opt_level=3, debug=True) == llvm_to_ptx(ir, "sm_90", opt_level=0)


def test_output_is_deterministic_in_process() -> None:
    ir = kernel_ir("allparams")
    assert llvm_to_ptx(ir, "sm_100") == llvm_to_ptx(ir, "sm_100")


def test_output_is_deterministic_across_processes_and_directories(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from tileiras.codegen.nvptx import llvm_to_ptx; "
        "sys.stdout.write(llvm_to_ptx(Path(sys.argv[1]).read_text(), 'sm_120'))"
    )
    results = []
    for sub in ("one", "two dir"):
        cwd = tmp_path / sub
        cwd.mkdir()
        env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED=sub[0] == "o" and "1" or "2")
        done = subprocess.run([sys.executable, "-c", script, str(DATA / "vadd.ll")], cwd=cwd, env=env,
                              capture_output=True, text=True, check=True)
        results.append(done.stdout)
    assert results[0] == results[1] == llvm_to_ptx(kernel_ir("vadd"), "sm_120")


def test_multithreaded_caller_compiles_in_process() -> None:
    import threading

    from tileiras.codegen.isolate import can_fork

    release = threading.Event()
    helper = threading.Thread(target=release.wait, daemon=True)
    helper.start()
    try:
        assert not can_fork()  # forking a threaded process is unsafe: the compile runs here instead
        in_process = llvm_to_ptx(kernel_ir("vadd"), "sm_86")
        with pytest.raises(CompileError, match="invalid LLVM IR"):
            llvm_to_ptx("define void @f( {", "sm_86")
    finally:
        release.set()
        helper.join()
    assert in_process == llvm_to_ptx(kernel_ir("vadd"), "sm_86")


def test_errors_keep_their_exit_code_across_the_fork() -> None:
    from tileiras.codegen.isolate import run_isolated

    def fail() -> None:
        raise TileirasError("error: bad option in the child", ExitCode.INVALID_OPTIONS)

    with pytest.raises(TileirasError) as info:
        run_isolated("test", fail)
    assert (info.value.message, info.value.code) == ("error: bad option in the child", ExitCode.INVALID_OPTIONS)
    def crash() -> None:
        raise ValueError("boom")

    with pytest.raises(CompileError, match="boom"):
        run_isolated("test", crash)
    assert run_isolated("test", lambda: {"answer": 42}) == {"answer": 42}
