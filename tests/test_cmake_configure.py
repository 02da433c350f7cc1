"""find_package(TileIR) and add_tileir_kernel() at configure time: errors, discovery, generated rules."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_cmake_support import CMAKES, PYPI_CMAKE, REPO, CMakeProject, cmake_version, tileiras_wheel  # noqa: F401

CHECKOUT_DIR = str(REPO / "cmake")


def project(tmp_path: Path, body: str, languages: str = "NONE", cmake: str = PYPI_CMAKE,
            defines: dict[str, str] | None = None, files: dict[str, str] | None = None) -> CMakeProject:
    source = tmp_path / "src"
    source.mkdir(parents=True, exist_ok=True)
    for name, text in (files or {"k/vadd.tileirbc": "x", "k/vscale.mlir": "y"}).items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    (source / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.20)\nproject(t LANGUAGES {languages})\n"
        f"find_package(TileIR CONFIG REQUIRED)\n{body}\n")
    values = {"TileIR_DIR": CHECKOUT_DIR, "TileIR_PYTHON": sys.executable}
    values.update(defines or {})
    return CMakeProject(source, tmp_path / "build", cmake, "Ninja", defines=values)


def configure_error(proj: CMakeProject) -> str:
    result = proj.configure(check=False)
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr
    return result.stderr


# ----------------------------------------------------------------------------- configure-time errors

BAD_CALLS = [
    ("GPU_NAMES sm_91", "unknown GPU name 'sm_91' in GPU_NAMES; supported: sm_80"),
    ("GPU_NAMES sm_90 sm_90", "GPU name 'sm_90' is listed twice"),
    ("OPT_LEVEL 4", "OPT_LEVEL must be one of 0 1 2 3, got '4'"),
    ("OPT_LEVEL", "OPT_LEVEL needs a value"),
    ("DEVICE_DEBUG OPT_LEVEL 3", "DEVICE_DEBUG needs OPT_LEVEL 0"),
    ("STATIC OBJECT", "STATIC and OBJECT exclude each other"),
    ("HEADER ../k.h", "HEADER '../k.h' must be a relative file name"),
    ("HEADER k.txt", "HEADER 'k.txt' must be a relative file name ending in .h or .hpp"),
    ("LINE_INFO", "unknown keyword 'LINE_INFO'"),
    ("GPU_NAMES sm_90 SHARED", "unknown keyword 'SHARED'"),
]


@pytest.mark.parametrize("extra, message", BAD_CALLS)
def test_bad_arguments_fail_at_configure_time(tmp_path: Path, extra: str, message: str) -> None:
    stderr = configure_error(project(tmp_path, f"add_tileir_kernel(k SOURCES k/vadd.tileirbc {extra})"))
    assert message in " ".join(stderr.split()), stderr
    assert "CMakeLists.txt:4 (add_tileir_kernel)" in stderr  # points at the call


@pytest.mark.parametrize("body, message", [
    ("add_tileir_kernel(k SOURCES k/missing.tileirbc)", "source 'k/missing.tileirbc' does not exist"),
    ("add_tileir_kernel(k SOURCES k/vadd.cu)", "source 'k/vadd.cu' is not TileIR"),
    ("add_tileir_kernel(k GPU_NAMES sm_90)", "SOURCES is empty"),
    ("add_tileir_kernel(k BOGUS 1 SOURCES k/vadd.tileirbc)", "unknown argument(s) 'BOGUS 1'"),
    ("add_library(k INTERFACE)\nadd_tileir_kernel(k SOURCES k/vadd.tileirbc)", "a target named 'k' already exists"),
    ("set(TILEIR_GPU_NAMES sm_75)\nadd_tileir_kernel(k SOURCES k/vadd.tileirbc)",
     "unknown GPU name 'sm_75' in TILEIR_GPU_NAMES"),
    ("add_tileir_kernel(k SOURCES k/vadd.tileirbc)", "enable C or CXX"),
])
def test_bad_calls(tmp_path: Path, body: str, message: str) -> None:
    stderr = configure_error(project(tmp_path, body))
    assert message in " ".join(stderr.split()), stderr


def test_two_sources_with_one_stem(tmp_path: Path) -> None:
    files = {"a/k.tileirbc": "x", "b/k.mlir": "y"}
    stderr = configure_error(project(tmp_path, "add_tileir_kernel(k SOURCES a/k.tileirbc b/k.mlir)", "C",
                                     files=files))
    assert "target 'k': sources" in stderr and "would both produce 'k.o'" in stderr


@pytest.mark.parametrize("cmake", CMAKES)
def test_unknown_gpu_with_both_cmakes(tmp_path: Path, cmake: str) -> None:
    stderr = configure_error(project(tmp_path, "add_tileir_kernel(k SOURCES k/vadd.tileirbc GPU_NAMES sm_35)",
                                     cmake=CMAKES[cmake]))
    assert "unknown GPU name 'sm_35'" in stderr


def test_version_requests(tmp_path: Path) -> None:
    proj = project(tmp_path, "")
    text = proj.source.joinpath("CMakeLists.txt").read_text()
    proj.source.joinpath("CMakeLists.txt").write_text(text.replace("TileIR CONFIG", "TileIR 9.0 CONFIG"))
    stderr = configure_error(proj)
    from tileiras import __version__

    assert f"version: {__version__}" in stderr and "not compatible with the version requested" in stderr
    proj.source.joinpath("CMakeLists.txt").write_text(
        text.replace("TileIR CONFIG", "TileIR 0.1...<2 CONFIG") + 'message(STATUS "TileIR ${TileIR_VERSION}")\n')
    result = proj.configure()
    assert re.search(r"-- TileIR \d+\.\d+", result.stdout)


def test_python_without_dependencies_is_reported(tmp_path: Path) -> None:
    stderr = configure_error(project(tmp_path, "", defines={"TileIR_PYTHON": "/usr/bin/false"}))
    assert "no Python can run the compiler" in stderr and "TileIR_PYTHON" in stderr


def test_missing_python_is_reported(tmp_path: Path) -> None:
    stderr = configure_error(project(tmp_path, "", defines={"TileIR_PYTHON": str(tmp_path / "nope")}))
    assert "no such file" in stderr


# ----------------------------------------------------------------------------- discovery and generated rules


def test_python_found_through_python_executable(tmp_path: Path) -> None:
    proj = project(tmp_path, 'message(STATUS "py=${TileIR_PYTHON}")',
                   defines={"TileIR_PYTHON": "", "Python3_EXECUTABLE": sys.executable})
    assert f"-- py={sys.executable}" in proj.configure().stdout


def test_generated_rules(tmp_path: Path) -> None:
    body = """add_tileir_kernel(k1 SOURCES k/vadd.tileirbc k/vscale.mlir GPU_NAMES sm_80 sm_100 OPT_LEVEL 2)
add_tileir_kernel(k2 OBJECT SOURCES k/vadd.tileirbc HEADER inc/k2.hpp LINEINFO)
add_tileir_kernel(k3 SOURCES k/vscale.mlir DEVICE_DEBUG)
get_target_property(t1 k1 TYPE)
get_target_property(t2 k2 TYPE)
get_target_property(libs k1 INTERFACE_LINK_LIBRARIES)
message(STATUS "types=${t1},${t2} libs=${libs} dl=${CMAKE_DL_LIBS}")"""
    proj = project(tmp_path, body, "C")
    result = proj.configure()
    assert "-- types=STATIC_LIBRARY,OBJECT_LIBRARY libs=dl dl=dl" in result.stdout
    ninja = (proj.binary_dir / "build.ninja").read_text()
    state = proj.binary_dir / "CMakeFiles" / "TileIR"

    # One planner run for the directory: all three targets in one request.
    request = json.loads((state / "request.json").read_text())
    assert [t["name"] for t in request["targets"]] == ["k1", "k2", "k3"]
    assert request["targets"][2]["opt_level"] == 0 and request["targets"][2]["device_debug"] is True

    launcher = str(REPO / "build_rules" / "launch.py")
    out = proj.binary_dir / "tileir" / "k1"
    ptx_cmd = (f"{sys.executable} {launcher} tileiras --emit=ptx --gpu-name sm_100 -O2 {proj.source}/k/vadd.tileirbc "
               f"-o {out}/vadd.sm_100.ptx --emit-metadata -MD -MF {out}/vadd.sm_100.ptx.d -MT {out}/vadd.sm_100.ptx")
    assert ptx_cmd in ninja
    assert f"--ptx sm_100={out}/vscale.sm_100.ptx -o {out}/vscale.o" in ninja
    assert "--lineinfo" in ninja and "-O0 -g" in ninja
    assert (proj.binary_dir / "tileir" / "k2" / "include" / "inc").is_dir()
    # Depfiles, the compiler stamp and the options stamp on every compile step.
    ptx_edges = [block for block in ninja.split("\n\n") if "--emit=ptx" in block]
    assert len(ptx_edges) == 2 * 2 + 1 + 1
    for block in ptx_edges:
        assert "depfile = " in block or "DEP_FILE = " in block
        assert "CMakeFiles/TileIR/compiler.stamp" in block and "options.stamp" in block
    assert (state / "compiler.stamp").read_text().strip() == json.loads(subprocess.run(
        [sys.executable, launcher, "build_rules", "toolchain"], capture_output=True, text=True,
        check=True).stdout)["TileIR_COMPILER_FINGERPRINT"]
    # Every compiler file re-runs CMake when it changes.
    assert str(REPO / "tileiras" / "driver" / "tileiras_main.py") in ninja


@pytest.mark.skipif(sys.platform == "win32", reason="the cache client is Unix-only")
def test_actions_go_through_the_cache_client(tmp_path: Path) -> None:
    proj = project(tmp_path, "add_tileir_kernel(k SOURCES k/vadd.tileirbc)", "C")
    proj.configure()
    state = proj.binary_dir / "CMakeFiles" / "TileIR"
    client = state / "tileir-client"
    assert os.access(client, os.X_OK)
    fingerprint = (state / "compiler.stamp").read_text().strip()
    server_id = hashlib.sha256(f"{fingerprint}\n{sys.executable}\n{REPO}".encode()).hexdigest()[:16]
    prefix = f"{client} {state}/server-{server_id}.sock {sys.executable} {REPO / 'build_rules' / 'launch.py'} "
    ninja = (proj.binary_dir / "build.ninja").read_text()
    commands = [line for line in ninja.splitlines() if "launch.py tileir" in line and "COMMAND = " in line]
    assert len(commands) == 4 and all(prefix in line for line in commands), commands
    # A reconfigure keeps the client (it is built once per change of its source or compiler).
    before = client.stat().st_mtime_ns
    proj.configure()
    assert client.stat().st_mtime_ns == before

    plain = project(tmp_path / "off", "add_tileir_kernel(k SOURCES k/vadd.tileirbc)", "C",
                    defines={"TileIR_CACHE_SERVER": "OFF"})
    plain.configure()
    assert "tileir-client" not in (plain.binary_dir / "build.ninja").read_text()


def test_reconfigure_keeps_stamps(tmp_path: Path) -> None:
    proj = project(tmp_path, "add_tileir_kernel(k SOURCES k/vadd.tileirbc)", "C")
    proj.configure()
    stamps = [proj.binary_dir / "CMakeFiles" / "TileIR" / "compiler.stamp",
              proj.binary_dir / "tileir" / "k" / "options.stamp"]
    before = [s.stat().st_mtime_ns for s in stamps]
    proj.configure()
    assert [s.stat().st_mtime_ns for s in stamps] == before


def test_minimum_cmake_version_is_documented() -> None:
    text = (REPO / "cmake" / "TileIRConfig.cmake").read_text()
    assert "VERSION_LESS 3.20" in text
    for cmake in CMAKES.values():
        assert cmake_version(cmake) >= (3, 20, 0)


# ----------------------------------------------------------------------------- tileir cmake-dir


def test_cmake_dir_in_a_checkout() -> None:
    result = subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "cmake-dir"], capture_output=True,
                            text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(REPO / "cmake")
    bad = subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "cmake-dir", "x"],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2 and "unexpected argument" in bad.stderr


@pytest.mark.slow
def test_installed_wheel_found_with_cmake_dir(tmp_path: Path, tileiras_wheel: Path) -> None:
    """pip install the wheel into a venv; `tileir cmake-dir` + TileIR_DIR is all CMake needs."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python3"
    site = next((venv / "lib").glob("python3*/site-packages"))
    # The venv sees this environment's packages (llvmlite, ...) but gets its own tileiras.
    (site / "deps.pth").write_text(next(p for p in map(Path, sys.path) if p.name == "site-packages"
                                        and (p / "llvmlite").is_dir()).as_posix() + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", "--ignore-installed",
                    str(tileiras_wheel)], check=True)
    tileir = venv / "bin" / "tileir"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    found = subprocess.run([str(tileir), "cmake-dir"], capture_output=True, text=True, check=True, env=env)
    cmake_dir = Path(found.stdout.strip())
    assert cmake_dir == site / "tileiras" / "cmake_prefix" / "lib" / "cmake" / "TileIR"
    proj = project(tmp_path, 'add_tileir_kernel(k SOURCES k/vadd.tileirbc)\n'
                             'message(STATUS "py=${TileIR_PYTHON} root=${TileIR_ROOT}")', "C",
                   defines={"TileIR_DIR": str(cmake_dir), "TileIR_PYTHON": ""})
    proj.env = {"PATH": "/usr/bin:/bin"}
    result = proj.configure()
    # No Python named anywhere: the venv's own Python runs the venv's compiler.
    assert f"-- py={venv}/bin/python3 root={site}" in result.stdout
    ninja = (proj.binary_dir / "build.ninja").read_text()
    assert f"{venv}/bin/python3 {site}/build_rules/launch.py tileiras --emit=ptx" in ninja
    # nothing of the source checkout is used (a .venv inside the checkout may hold cmake itself)
    for part in ("tileiras", "build_rules", "cmake"):
        assert str(REPO / part) + os.sep not in ninja.replace(str(proj.source), "")
