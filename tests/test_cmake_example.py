"""examples/cmake with the real compiler: both CMakes, Ninja and Make, built, run and rebuilt.

These need the whole compiler (bytecode -> PTX -> cubin -> object + header);
they fail, not skip, until it works end to end.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_cmake_support import CMAKES, GENERATORS, PYPI_CMAKE, REPO, CMakeProject, actions_in, ran_nothing, touch

pytestmark = pytest.mark.slow

EXAMPLE = REPO / "examples" / "cmake"
CHAIN_VSCALE = sorted(["PTX vscale.tileirbc sm_90", "cubin vscale sm_90", "object vscale",
                       "header vector_kernels.h"])
EXTRA_TARGET = "\nadd_tileir_kernel(extra_kernels SOURCES kernels/vadd.tileirbc @OPTIONS@)\n"


def gpu_present() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def example(tmp_path: Path, cmake: str, generator: str, extra_options: str | None = None) -> CMakeProject:
    source = tmp_path / "example"
    shutil.copytree(EXAMPLE, source)
    if extra_options is not None:
        set_extra_options(source, extra_options)
    return CMakeProject(source, tmp_path / "build", cmake, generator,
                        defines={"TileIR_DIR": str(REPO / "cmake"), "TileIR_PYTHON": sys.executable},
                        env={"TILEIRAS_CACHE_DIR": str(tmp_path / "cache")})


def set_extra_options(source: Path, options: str) -> None:
    text = (EXAMPLE / "CMakeLists.txt").read_text() + EXTRA_TARGET.replace("@OPTIONS@", options)
    (source / "CMakeLists.txt").write_text(text)


def _build_file(project: CMakeProject) -> str:
    path = project.binary_dir / "build.ninja"
    if path.exists():
        return path.read_text()
    return "".join(p.read_text() for p in project.binary_dir.glob("CMakeFiles/*.dir/build.make"))


def run_example(project: CMakeProject) -> str:
    result = subprocess.run([str(project.binary_dir / "vector_ops")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    if gpu_present():
        assert "vadd and vscale match the CPU" in result.stdout, result.stdout
    else:
        assert "no GPU present" in result.stdout, result.stdout
    return result.stdout


@pytest.mark.parametrize("generator", GENERATORS)
@pytest.mark.parametrize("cmake", CMAKES)
def test_example_builds_runs_and_rebuilds_incrementally(tmp_path: Path, cmake: str, generator: str) -> None:
    gen = GENERATORS[generator]
    project = example(tmp_path, CMAKES[cmake], gen, extra_options="")
    project.configure()
    output = project.build()
    assert actions_in(output).count("header vector_kernels.h") == 1
    run_example(project)

    output = project.build()
    assert ran_nothing(output, gen), output

    # One kernel changed: its chain and the header, nothing of the other kernel or target.
    touch(project.source / "kernels" / "vscale.tileirbc")
    output = project.build()
    assert actions_in(output) == CHAIN_VSCALE, output
    run_example(project)
    output = project.build()
    assert ran_nothing(output, gen), output

    # New options for one target: only its actions rerun.
    set_extra_options(project.source, "OPT_LEVEL 2 LINEINFO")
    output = project.build()
    assert actions_in(output) == sorted(["PTX vadd.tileirbc sm_90", "cubin vadd sm_90", "object vadd",
                                         "header extra_kernels.h"]), output
    assert '"name": "extra_kernels"' in (project.binary_dir / "CMakeFiles" / "TileIR" / "request.json").read_text()
    assert "--gpu-name sm_90 -O2 --lineinfo" in output or "-O2" in _build_file(project)
    output = project.build()
    assert ran_nothing(output, gen), output


def test_touching_a_kernel_does_not_recompile_host_code(tmp_path: Path) -> None:
    """The header is regenerated with the same text, so the C++ program is only relinked.

    Needs `tileir header` to leave an unchanged header untouched (Ninja's restat
    and the header stamp do the rest).
    """
    project = example(tmp_path, PYPI_CMAKE, "Ninja")
    project.configure()
    project.build()
    touch(project.source / "kernels" / "vadd.tileirbc")
    output = project.build()
    assert "main.cpp" not in output, output
    assert "Linking CXX executable vector_ops" in output


def test_fresh_build_dir_reuses_the_compile_cache(tmp_path: Path) -> None:
    """A second build directory with the same cache: every compile step is a cache hit (same outputs)."""
    first = example(tmp_path / "a", PYPI_CMAKE, "Ninja")
    first.env["TILEIRAS_CACHE_DIR"] = str(tmp_path / "cache")
    first.configure()
    first.build()
    second = CMakeProject(first.source, tmp_path / "b" / "build", PYPI_CMAKE, "Ninja", dict(first.defines),
                          dict(first.env))
    second.configure()
    second.build()
    for name in ("vadd.sm_90.ptx", "vadd.sm_90.cubin", "vscale.o"):
        assert (first.binary_dir / "tileir" / "vector_kernels" / name).read_bytes() == \
            (second.binary_dir / "tileir" / "vector_kernels" / name).read_bytes()
    run_example(second)


@pytest.mark.gpu
def test_example_computes_on_the_gpu(tmp_path: Path) -> None:
    if not gpu_present():
        pytest.skip("no CUDA GPU here")
    project = example(tmp_path, PYPI_CMAKE, "Ninja")
    project.configure()
    project.build()
    assert "match the CPU" in run_example(project)
