"""add_tileir_kernel() incremental behaviour with real CMake, Ninja and Make, and a fake compiler.

The fake compiler follows the file contract of the real one (outputs, depfile,
metadata, a linkable object), so these tests pin down the CMake side: which
commands a build runs, with both CMakes and both generators, independent of
the compiler's own state.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_cmake_support import (CMAKES, GENERATORS, PYPI_CMAKE, CMakeProject, actions_in, make_fake_compiler_tree,
                                make_fake_executables, make_fake_project, ran_nothing, read_log,
                                set_fake_other_options, touch)

pytestmark = pytest.mark.slow


def chain(src: str, gpus: list[str], flags: str = "-O3") -> list[str]:
    """The fake log lines of one source's chain (the header not included)."""
    stem = src.split(".")[0]
    lines = []
    for gpu in gpus:
        lines.append(f"ptx {src} {gpu} {flags}")
        lines.append(f"cubin {stem}.{gpu}.ptx {gpu} {flags}")
    lines.append(f"package {stem}.o")
    return lines


KERN = chain("vadd.mlir", ["sm_90", "sm_100"]) + chain("scale.tileirbc", ["sm_90", "sm_100"]) + ["header kern.h"]
OTHER = chain("other.mlir", ["sm_90"]) + ["header other.h"]


def fake_project(tmp_path: Path, cmake: str, generator: str) -> tuple[CMakeProject, Path, Path]:
    tree = make_fake_compiler_tree(tmp_path / "compiler")
    source = make_fake_project(tmp_path / "src")
    log = tmp_path / "fake.log"
    project = CMakeProject(source, tmp_path / "build", cmake, generator,
                           defines={"TileIR_DIR": str(tree), "TileIR_PYTHON": sys.executable},
                           env={"TILEIR_FAKE_LOG": str(log)})
    return project, log, tmp_path / "compiler"


def run_app(project: CMakeProject, config: str = "") -> str:
    exe = project.binary_dir / config / "app" if config else project.binary_dir / "app"
    result = subprocess.run([str(exe)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("generator", GENERATORS)
@pytest.mark.parametrize("cmake", CMAKES)
def test_incremental_builds(tmp_path: Path, cmake: str, generator: str) -> None:
    gen = GENERATORS[generator]
    project, log, tree = fake_project(tmp_path, CMAKES[cmake], gen)
    project.configure()

    # Full build: every chain once; the program links both libraries and runs.
    project.build()
    assert read_log(log) == sorted(KERN + OTHER)
    out = run_app(project)
    assert "rc -1 -1 -1" in out
    assert "vadd: cubin sm_90 -O3 | cubin sm_100 -O3 | ptx sm_100" in out
    assert "other: cubin sm_90 -O3 | ptx sm_90" in out

    # No-op: nothing runs.
    output = project.build()
    assert read_log(log) == [] and ran_nothing(output, gen), output

    # A file the compile read (from the depfile) changed: only that source's chain
    # (and the header, which stays unchanged, so app.cpp is not recompiled).
    touch(project.source / "k" / "common.inc")
    output = project.build()
    assert read_log(log) == sorted(chain("vadd.mlir", ["sm_90", "sm_100"]) + ["header kern.h"])
    assert actions_in(output) == sorted(["PTX vadd.mlir sm_90", "PTX vadd.mlir sm_100", "cubin vadd sm_90",
                                         "cubin vadd sm_100", "object vadd", "header kern.h"])
    assert "main.cpp" not in output

    # A source changed: only its chain.
    touch(project.source / "k" / "scale.tileirbc")
    project.build()
    assert read_log(log) == sorted(chain("scale.tileirbc", ["sm_90", "sm_100"]) + ["header kern.h"])
    output = project.build()
    assert read_log(log) == [] and ran_nothing(output, gen), output

    # New options for one target (in another directory): that target only.
    set_fake_other_options(project.source, "OPT_LEVEL 1 LINEINFO")
    project.build()
    assert read_log(log) == sorted(chain("other.mlir", ["sm_90"], "--lineinfo -O1") + ["header other.h"])
    assert "other: cubin sm_90 --lineinfo -O1 | ptx sm_90" in run_app(project)
    output = project.build()
    assert read_log(log) == [] and ran_nothing(output, gen), output

    # The compiler's files are touched but unchanged: CMake re-runs, no kernel does.
    compiler_main = tree / "tileiras" / "driver" / "tileiras_main.py"
    touch(compiler_main)
    project.build()
    assert read_log(log) == []

    # A new compiler (its files changed): every kernel rebuilds, once.
    compiler_main.write_text(compiler_main.read_text() + "\n# compiler v2\n")
    project.build()
    assert read_log(log) == sorted(KERN + chain("other.mlir", ["sm_90"], "--lineinfo -O1") + ["header other.h"])
    output = project.build()
    assert read_log(log) == [] and ran_nothing(output, gen), output


@pytest.mark.parametrize("cmake", CMAKES)
def test_multi_config_builds_kernels_once(tmp_path: Path, cmake: str) -> None:
    project, log, _ = fake_project(tmp_path, CMAKES[cmake], "Ninja Multi-Config")
    project.configure()
    project.build("--config", "Release")
    assert read_log(log) == sorted(KERN + OTHER)
    project.build("--config", "Debug")
    assert read_log(log) == []  # the kernels do not depend on the host configuration
    for config in ("Release", "Debug"):
        assert "rc -1 -1 -1" in run_app(project, config)
    touch(project.source / "sub" / "other.mlir")
    project.build("--config", "Debug")
    assert read_log(log) == sorted(OTHER)


@pytest.mark.parametrize("generator", GENERATORS)
def test_user_compiler_executables(tmp_path: Path, generator: str) -> None:
    """TileIR_COMPILER / TileIR_TILEIR: the given executables run, and are the dependency."""
    tileiras, tileir = make_fake_executables(tmp_path / "bin")
    source = make_fake_project(tmp_path / "src")
    log = tmp_path / "fake.log"
    project = CMakeProject(source, tmp_path / "build", PYPI_CMAKE, GENERATORS[generator],
                           defines={"TileIR_DIR": str(Path(__file__).resolve().parent.parent / "cmake"),
                                    "TileIR_PYTHON": sys.executable, "TileIR_COMPILER": str(tileiras)},
                           env={"TILEIR_FAKE_LOG": str(log)})
    project.configure()
    project.build()
    assert read_log(log) == sorted(KERN + OTHER)
    touch(tileir)
    project.build()
    assert read_log(log) == sorted(KERN + OTHER)
    output = project.build()
    assert read_log(log) == [] and ran_nothing(output, project.generator), output


def test_compile_error_fails_the_build_and_keeps_failing(tmp_path: Path) -> None:
    project, log, _ = fake_project(tmp_path, PYPI_CMAKE, "Ninja")
    (project.source / "sub" / "other.mlir").write_text("FAIL\n")
    project.configure()
    for _ in range(2):
        result = project.build_raw()
        assert result.returncode != 0
        assert re.search(r"other\.mlir: fake compile failure", result.stdout + result.stderr)
