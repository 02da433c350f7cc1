"""The launcher header: C and C++ compatible, coexists with cuda.h, names sanitised."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tileiras.codegen import cabi
from tileiras.codegen.header import guard_from_path, make_header
from tileiras.codegen.metadata import KernelInfo, KernelParam, ModuleMetadata
from tileiras.codegen.ptxas import find_ptxas
from tileiras.errors import CompileError

DATA = Path(__file__).parent / "data" / "llvm"
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def meta(name: str, gpu: str = "sm_90") -> ModuleMetadata:
    loaded = ModuleMetadata.from_json((DATA / f"{name}.meta.json").read_text())
    return ModuleMetadata(loaded.kernels, gpu)


def test_signature_and_types() -> None:
    text = make_header([meta("allparams")], "ALL_H")
    assert ("int allparams_launch(CUstream stream, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z, "
            "int64_t* out, uint8_t flag, int8_t v8, int16_t v16, int32_t v32, int64_t v64, uint16_t h, "
            "uint16_t bf, float f, double d);") in text
    assert "#include <stdint.h>" in text and 'extern "C" {' in text
    assert "#ifndef ALL_H\n#define ALL_H" in text
    for name, value, _ in cabi.ERROR_CODES[1:]:
        assert f"#define {name} ({value})" in text


@pytest.mark.parametrize("spelling, c_type", [
    ("ptr<f32>", "float*"), ("ptr<f64>", "double*"), ("ptr<i8>", "int8_t*"), ("ptr<i16>", "int16_t*"),
    ("ptr<i32>", "int32_t*"), ("ptr<i64>", "int64_t*"), ("ptr<f16>", "void*"), ("ptr<bf16>", "void*"),
    ("ptr<f8E4M3FN>", "void*"), ("i1", "uint8_t"), ("f16", "uint16_t"), ("bf16", "uint16_t"), ("f64", "double"),
])
def test_c_types(spelling: str, c_type: str) -> None:
    assert cabi.c_type(spelling) == c_type


def test_launcher_names_are_sanitised_deterministically() -> None:
    names = cabi.launcher_names(["vadd", "my.kernel-1", "9lives", "a.b", "a_b"])
    assert names["vadd"] == "vadd_launch"
    assert names["my.kernel-1"] == "my_kernel_1_launch"
    assert names["9lives"] == "_9lives_launch"
    assert names["a_b"] == "a_b_launch"
    assert names["a.b"].startswith("a_b_") and names["a.b"] != "a_b_launch"
    assert cabi.launcher_names(["a.b", "a_b"]) == {"a.b": names["a.b"], "a_b": "a_b_launch"}


def test_parameter_names_fall_back_to_argN() -> None:
    params = [KernelParam("int", "i32"), KernelParam("", "i32"), KernelParam("x y", "f32"), KernelParam("ok", "f32"),
              KernelParam("ok", "f32"), KernelParam("stream", "i64")]
    assert cabi.param_names(params) == ["arg0", "arg1", "arg2", "ok", "arg4", "arg5"]


def test_targets_must_agree_on_the_signature() -> None:
    vadd = meta("vadd")
    changed = ModuleMetadata((KernelInfo("vadd", (KernelParam("a", "ptr<f16>"),) + vadd.kernels[0].params[1:],
                                         (128, 1, 1)),), "sm_80")
    with pytest.raises(CompileError, match="different parameters"):
        make_header([vadd, changed], "X_H")
    with pytest.raises(CompileError, match="twice"):
        make_header([vadd, vadd], "X_H")


def test_one_header_declares_the_launchers_of_several_modules() -> None:
    """A library with several sources gets one header; each module may have several targets."""
    vadd, scalars = meta("vadd"), meta("scalars", "sm_80")
    text = make_header([vadd, meta("vadd", "sm_80"), scalars], "X_H")
    assert text.count("vadd_launch(CUstream stream") == 1
    assert text.count("_launch(CUstream stream") == 1 + len(scalars.kernels)
    clash = ModuleMetadata(vadd.kernels + scalars.kernels, "sm_90")
    with pytest.raises(CompileError, match="defined by two modules"):
        make_header([vadd, clash], "X_H")


def test_guard_from_path() -> None:
    assert guard_from_path("out/kernels.h") == "TILEIR_KERNELS_H"
    assert guard_from_path("C:\\x\\my-kernels.hpp") == "TILEIR_MY_KERNELS_HPP"


def test_output_is_stable() -> None:
    metas = [meta("vadd", "sm_90"), meta("vadd", "sm_80")]
    assert make_header(metas, "G") == make_header(list(reversed(metas)), "G")


def compile_c(tmp_path: Path, source: str, compiler: str, *flags: str) -> None:
    (tmp_path / "use.c").write_text(source)
    done = subprocess.run([compiler, *flags, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-I", str(tmp_path),
                           str(tmp_path / "use.c")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@needs_gcc
@pytest.mark.parametrize("compiler, flags", [("gcc", ("-std=c99", "-pedantic")), ("gcc", ("-std=c11",)),
                                             ("g++", ("-x", "c++", "-std=c++11", "-pedantic"))])
def test_two_headers_compile_together(tmp_path: Path, compiler: str, flags: tuple[str, ...]) -> None:
    if shutil.which(compiler) is None:
        pytest.skip(f"no {compiler}")
    (tmp_path / "a.h").write_text(make_header([meta("vadd")], guard_from_path("a.h")))
    (tmp_path / "b.h").write_text(make_header([meta("allparams")], guard_from_path("b.h")))
    compile_c(tmp_path, '#include "a.h"\n#include "b.h"\n#include "a.h"\n'
              "int main(void) { return vadd_launch(0, 1, 1, 1, 0, 0, 0, 1) + TILEIR_ERROR_NO_DEVICE; }\n",
              compiler, *flags)


@needs_gcc
@pytest.mark.parametrize("order", ["cuda_first", "cuda_last"])
def test_header_coexists_with_cuda_h(tmp_path: Path, order: str) -> None:
    include = find_ptxas().parent.parent / "include"
    if not (include / "cuda.h").is_file():
        pytest.skip("no cuda.h in the nvcc wheel")
    (tmp_path / "k.h").write_text(make_header([meta("vadd")], "K_H"))
    lines = ["#include <cuda.h>", '#include "k.h"']
    if order == "cuda_last":
        lines.reverse()
    compile_c(tmp_path, "\n".join(lines) + "\nint f(CUstream s) { return vadd_launch(s, 1, 1, 1, 0, 0, 0, 1); }\n",
              "gcc", "-std=c11", "-I", str(include))


def test_array_arguments_are_named_pointer_shapes_strides(tmp_path: Path) -> None:
    """Issue 37, item 5: a cuTile array argument's parameters are named as the kernel uses them (a view
    of rank r over %argN and the 2r integers after it), and the header says how an array expands."""
    import os
    import sys

    root = Path(__file__).resolve().parent.parent
    kernel = root / "tests" / "corpus" / "bytecode" / "ew_scalar" / "13.4.tileirbc"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--gpu-name", "sm_90",
                           "--emit=obj", str(kernel), "-o", str(tmp_path / "k.o"), "--header", str(tmp_path / "k.h")],
                          capture_output=True, text=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                          timeout=300)
    assert done.returncode == 0, done.stderr
    header = (tmp_path / "k.h").read_text()
    assert ("int ew_scalar_float32_launch(CUstream stream, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z, "
            "float* arg0, int32_t arg0_shape0, int32_t arg0_stride0, float* arg3, int32_t arg3_shape0, "
            "int32_t arg3_stride0, float arg6, float arg7, uint8_t arg8);") in header
    assert "argN, argN_shape0, ..., argN_shape<r-1>, argN_stride0, ..., argN_stride<r-1>" in header


def test_a_pointer_without_a_view_keeps_its_plain_names() -> None:
    from tileiras.codegen.param_names import entry_param_names
    from tileiras.text.parser import parse_module

    text = ("entry @k(%p: tile<ptr<f32>>, %n: tile<i32>, %s: tile<i32>, %q: tile<ptr<f32>>, %m: tile<i32>, "
            "%t: tile<i32>) {\n"
            "  %v = make_tensor_view %q, shape = [%m], strides = [%t] : tile<i32> -> tensor_view<?xf32, strides=[?]>\n"
            "  return\n}\n")
    entry = parse_module(text, "k.mlir").regions[0].blocks[0].operations[0]
    params = tuple(KernelParam(f"arg{i}", t) for i, t in enumerate(["ptr<f32>", "i32", "i32", "ptr<f32>", "i32", "i32"]))
    assert entry_param_names(entry, params) == ["arg0", "arg1", "arg2", "arg3", "arg3_shape0", "arg3_stride0"]
    swapped = text.replace("shape = [%m], strides = [%t]", "shape = [%n], strides = [%t]")
    entry = parse_module(swapped, "k.mlir").regions[0].blocks[0].operations[0]
    assert entry_param_names(entry, params)[3:] == ["arg3", "arg4", "arg5"]  # another layout: not renamed
