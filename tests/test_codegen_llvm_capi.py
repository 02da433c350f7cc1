"""The ctypes binding of llvmlite's C layer (codegen/llvm_capi.py) and the LLVM worker process.

The binding declares llvmlite's C signatures itself, so these tests compare it with llvmlite's own
Python API on the same module: a signature that drifted would show up as different PTX or a crash.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.errors import CompileError

TRIPLE = "nvptx64-nvidia-cuda"
KERNEL = """
define ptx_kernel void @scale(ptr %p, float %s) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %i = zext i32 %tid to i64
  %q = getelementptr float, ptr %p, i64 %i
  %v = load float, ptr %q
  %e = call float @__nv_expf(float %v)
  %r = fmul float %e, %s
  store float %r, ptr %q
  ret void
}
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare float @__nv_expf(float)
"""


def _via_llvmlite(ir: str, libdevice: bytes) -> str:
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu="sm_90", features="+ptx88", opt=3,
                                                                     reloc="default", codemodel="default")
    module = llvm.parse_assembly(ir)
    module.triple = TRIPLE
    module.data_layout = str(machine.target_data)
    lib = llvm.parse_bitcode(libdevice)
    lib.triple, lib.data_layout = module.triple, module.data_layout
    module.link_in(lib)
    for fn in module.functions:
        if fn.name.startswith("__nv_") and not fn.is_declaration:
            fn.linkage = "internal"
    builder = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=3))
    builder.getModulePassManager().run(module, builder)
    return machine.emit_assembly(module)


def test_same_ptx_as_llvmlites_own_api() -> None:
    from tileiras.codegen import llvm_capi
    from tileiras.codegen.libdevice import read_libdevice

    ours = llvm_capi.compile_ir(KERNEL, TRIPLE, "sm_90", "+ptx88", 3, link=read_libdevice(),
                                internalize="__nv_").decode()
    assert "ex2.approx" in ours and "__nv_" not in ours  # inlined, and the unused library dropped
    assert ours == _via_llvmlite(KERNEL, read_libdevice())


def test_object_files_and_versions() -> None:
    from tileiras.codegen import llvm_capi

    obj = llvm_capi.compile_ir("define i32 @f(i32 %x) {\n  ret i32 %x\n}\n", "x86_64-unknown-linux-gnu",
                               "generic", "", 2, object_file=True, reloc="pic", optimize=False)
    assert obj[:4] == b"\x7fELF"
    assert llvm_capi.load().version()[0] >= 15


@pytest.mark.parametrize("ir,message", [
    ("define void @f() {\n  ret i32 0\n}\n", "invalid LLVM IR"),
    ("define void @f() {\nentry:\n  br label %nowhere\n}\n", "invalid LLVM IR"),
])
def test_bad_ir_reports_llvms_message(ir: str, message: str) -> None:
    from tileiras.codegen import llvm_capi

    with pytest.raises(CompileError) as info:
        llvm_capi.compile_ir(ir, TRIPLE, "sm_90", "+ptx88", 3)
    assert message in info.value.message and ("error" in info.value.message.lower())


def test_worker_reports_a_fatal_llvm_error_and_keeps_results_apart() -> None:
    from tileiras.codegen import targets
    from tileiras.codegen.worker import LLVMWorker

    wgmma = ("declare void @llvm.nvvm.wgmma.fence.sync.aligned()\n"
             "define ptx_kernel void @k() {\n  call void @llvm.nvvm.wgmma.fence.sync.aligned()\n  ret void\n}\n")
    with LLVMWorker() as worker:
        worker.submit("define ptx_kernel void @a() {\n  ret void\n}\n", targets.TARGETS["sm_90"], 3)
        assert ".entry a" in worker.result()
        with pytest.raises(CompileError, match="invalid LLVM IR"):
            worker.emit("not llvm", targets.TARGETS["sm_90"], 3)  # an ordinary error: the worker lives on
        assert ".entry a" in worker.emit("define ptx_kernel void @a() {\n  ret void\n}\n", targets.TARGETS["sm_80"], 3)
        with pytest.raises(CompileError) as info:  # LLVM ends the worker: its own message comes back
            worker.emit(wgmma, targets.TARGETS["sm_80"], 3)
    assert "LLVM ERROR" in info.value.message and "wgmma" in info.value.message


def test_a_cold_compile_loads_neither_llvmlites_python_layer_nor_the_cache(tmp_path: Path) -> None:
    """What keeps a small compile fast: checked in a fresh interpreter, as the driver runs."""
    corpus = Path(__file__).parent / "corpus" / "bytecode" / "shape_const"
    source = sorted(corpus.glob("*.tileirbc"))[-1]
    probe = ("import sys\nfrom tileiras.driver.tileiras_main import main\n"
             f"rc = main(['--no-cache', '--gpu-name', 'sm_90', {str(source)!r}, '-o', {str(tmp_path / 'k.cubin')!r}])\n"
             "print(rc, sorted(m for m in sys.modules if m.startswith(('llvmlite', 'tileiras.cache', 'pickle'))))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent).stdout.strip()
    assert out == "0 []", out
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"
