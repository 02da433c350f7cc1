"""Shared helpers of the CMake tests (no tests here).

* the two CMake binaries the tests must pass with (PyPI's and the system's),
  the generators, and a `CMakeProject` that configures, builds and reports
  which TileIR actions a build ran (from the COMMENT lines both Ninja and
  Make print);
* a *fake compiler tree*: a copy of the package whose `tileiras` and `tileir`
  commands only follow the file contract (outputs, depfile, metadata, a real
  linkable object made with `cc`), so the CMake integration itself can be
  tested without the real compiler. Each fake run appends a line to
  $TILEIR_FAKE_LOG.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
PYPI_CMAKE = str(VENV_BIN / "cmake")
SYSTEM_CMAKE = os.environ.get("TILEIR_TEST_SYSTEM_CMAKE", "/usr/bin/cmake")
NINJA = shutil.which("ninja", path=str(VENV_BIN)) or shutil.which("ninja") or "ninja"
MAKE = shutil.which("make") or "make"

CMAKES = {"pypi": PYPI_CMAKE, "system": SYSTEM_CMAKE}
GENERATORS = {"ninja": "Ninja", "make": "Unix Makefiles"}

ACTION_LINE = re.compile(r"TileIR (PTX|cubin|object|header) (\S+)(?: \((sm_\d+)\))?")


def cmake_version(cmake: str) -> tuple[int, ...]:
    out = subprocess.run([cmake, "--version"], capture_output=True, text=True, check=True).stdout
    match = re.search(r"cmake version (\d+)\.(\d+)\.(\d+)", out)
    assert match, out
    return tuple(int(x) for x in match.groups())


def actions_in(output: str) -> list[str]:
    """The TileIR actions a build ran, as 'step name [gpu]' strings, sorted."""
    found = []
    for line in output.splitlines():
        match = ACTION_LINE.search(line)
        if match:
            step, name, gpu = match.groups()
            found.append(f"{step} {name}" + (f" {gpu}" if gpu else ""))
    return sorted(found)


@dataclass
class CMakeProject:
    source: Path
    binary_dir: Path
    cmake: str
    generator: str
    defines: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("VIRTUAL_ENV", None)
        env.update(self.env)
        return env

    def configure(self, check: bool = True) -> subprocess.CompletedProcess[str]:
        program = NINJA if "Ninja" in self.generator else MAKE
        args = [self.cmake, "-S", str(self.source), "-B", str(self.binary_dir), "-G", self.generator,
                f"-DCMAKE_MAKE_PROGRAM={program}"]
        args += [f"-D{key}={value}" for key, value in self.defines.items()]
        result = subprocess.run(args, capture_output=True, text=True, env=self._env())
        if check:
            assert result.returncode == 0, f"configure failed:\n{result.stdout}\n{result.stderr}"
        return result

    def build_raw(self, *extra: str) -> subprocess.CompletedProcess[str]:
        args = [self.cmake, "--build", str(self.binary_dir), *extra]
        if "Makefiles" in self.generator:
            args += ["--", "-j2"]
        return subprocess.run(args, capture_output=True, text=True, env=self._env())

    def build(self, *extra: str) -> str:
        """Builds; returns the combined output, after checking it succeeded."""
        result = self.build_raw(*extra)
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"build failed:\n{output}"
        return output


def ran_nothing(output: str, generator: str) -> bool:
    """True when a build output shows no command ran."""
    if "Ninja" in generator:
        return "no work to do" in output
    return not re.search(r"^\[\s*\d+%\] (TileIR|Building|Linking|Generating)", output, re.MULTILINE) \
        and "TileIR" not in output.replace("Built target", "")


def touch(path: Path) -> None:
    """Make `path` newer than everything built before (mtime granularity is coarse on some filesystems)."""
    time.sleep(0.05)
    now = time.time_ns()
    os.utime(path, ns=(now, now))


# --------------------------------------------------------------------------- fake compiler

FAKE_TILEIRAS = r'''
"""Fake tileiras: follows the build contract (outputs, depfile, metadata), compiles nothing."""
import json, os, re, sys

def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    def take(flag, default=None):
        if flag not in args:
            return default
        i = args.index(flag); value = args[i + 1]; del args[i:i + 2]; return value
    emit = next(a for a in args if a.startswith("--emit=")); args.remove(emit); emit = emit.split("=", 1)[1]
    gpu = take("--gpu-name"); out = take("-o"); depfile = take("-MF"); dep_target = take("-MT", out)
    flags = sorted(a for a in args if a.startswith("-") and a not in ("-MD", "--emit-metadata"))
    src = [a for a in args if not a.startswith("-")][0]
    log = os.environ.get("TILEIR_FAKE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{emit} {os.path.basename(src)} {gpu} {' '.join(flags)}\n")
    text = open(src, "rb").read()
    if text.startswith(b"FAIL"):
        print(f"error: {src}: fake compile failure", file=sys.stderr)
        return 5
    deps = [src]
    if emit == "ptx":
        for match in re.finditer(rb"^include (\S+)$", text, re.MULTILINE):
            path = os.path.join(os.path.dirname(src), match.group(1).decode())
            open(path, "rb").read()
            deps.append(path)
        stem = os.path.basename(src).split(".")[0]
        with open(out, "w") as f:
            f.write(f"// fake PTX of {stem} for {gpu} {' '.join(flags)}\n")
        if "--emit-metadata" in args:
            meta = {"gpu": gpu, "kernels": [{"name": stem, "params": [{"name": "n", "type": "i32"}],
                                             "block": [128, 1, 1], "dynamic_smem": 0, "cluster": [1, 1, 1]}]}
            with open(out + ".json", "w") as f:
                json.dump(meta, f)
        if depfile:
            esc = lambda p: p.replace(" ", "\\ ")
            with open(depfile, "w") as f:
                f.write(f"{esc(dep_target)}: {' '.join(esc(d) for d in deps)}\n")
    else:
        with open(out, "w") as f:
            f.write(f"cubin {gpu} {' '.join(flags)}")
    return 0

if __name__ == "__main__":
    sys.exit(main())
'''

FAKE_TILEIR = r'''
"""Fake tileir: `package` makes a real object with `cc`, `header` writes only on change."""
import json, os, subprocess, sys

def main(argv=None):
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0)
    if command == "cmake-dir":
        print(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "cmake"))
        return 0
    metas, cubins, ptx, out = [], [], [], None
    for flag, value in zip(args[::2], args[1::2]):
        {"--metadata": metas, "--cubin": cubins, "--ptx": ptx}.get(flag, []).append(value)
        if flag == "-o":
            out = value
    log = os.environ.get("TILEIR_FAKE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{command} {os.path.basename(out)}\n")
    # package gets one metadata file per GPU of one module, header one per module.
    kernels = list({k["name"]: k for m in metas for k in json.load(open(m))["kernels"]}.values())
    if command == "header":
        lines = ["#pragma once", "#include <stdint.h>", "#define TILEIR_ERROR_NO_DRIVER (-1)",
                 "#define TILEIR_ERROR_NO_DEVICE (-2)", "#ifdef __cplusplus", 'extern "C" {', "#endif"]
        for k in kernels:
            lines.append(f"int {k['name']}_launch(void* stream, uint32_t gx, uint32_t gy, uint32_t gz, int32_t n);")
            lines.append(f"extern const char {k['name']}_info[];")
        lines += ["#ifdef __cplusplus", "}", "#endif", ""]
        text = "\n".join(lines)
        if not (os.path.exists(out) and open(out).read() == text):
            with open(out, "w") as f:
                f.write(text)
        return 0
    info = " | ".join(open(c.split("=", 1)[1]).read() for c in cubins) + " | ptx " + ",".join(p.split("=")[0] for p in ptx)
    code = "#include <stdint.h>\n" + "".join(
        f'int {k["name"]}_launch(void* s, uint32_t x, uint32_t y, uint32_t z, int32_t n) {{ return -1; }}\n'
        f'const char {k["name"]}_info[] = "{info}";\n' for k in kernels)
    subprocess.run(["cc", "-x", "c", "-c", "-fPIC", "-", "-o", out], input=code.encode(), check=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
'''


def make_fake_compiler_tree(root: Path) -> Path:
    """A copy of the package (cmake/, build_rules/, tileiras/) with fake tools; returns its cmake dir."""
    for name in ("cmake", "build_rules", "tileiras"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "tileiras" / "driver" / "tileiras_main.py").write_text(FAKE_TILEIRAS)
    (root / "tileiras" / "driver" / "tileir_main.py").write_text(FAKE_TILEIR)
    return root / "cmake"


def make_fake_executables(directory: Path) -> tuple[Path, Path]:
    """The fake tools as stand-alone executables (for TileIR_COMPILER / TileIR_TILEIR)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, code in (("tileiras", FAKE_TILEIRAS), ("tileir", FAKE_TILEIR)):
        path = directory / name
        path.write_text(f"#!{sys.executable}\n{code}")
        path.chmod(0o755)
        paths.append(path)
    return paths[0], paths[1]


FAKE_MAIN = r'''
#include <cstdio>
#include "kern.h"
#include "sub/other.h"
int main() {
  std::printf("rc %d %d %d\n", vadd_launch(nullptr, 1, 1, 1, 0), scale_launch(nullptr, 1, 1, 1, 0),
              other_launch(nullptr, 1, 1, 1, 0));
  std::printf("vadd: %s\nother: %s\n", vadd_info, other_info);
  return 0;
}
'''

FAKE_CMAKELISTS = """cmake_minimum_required(VERSION 3.20)
project(fake_kernels LANGUAGES C CXX)
find_package(TileIR CONFIG REQUIRED)
add_tileir_kernel(kern SOURCES k/vadd.mlir k/scale.tileirbc GPU_NAMES sm_90 sm_100)
add_subdirectory(sub)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE kern other)
"""

FAKE_SUB_CMAKELISTS = """add_tileir_kernel(other OBJECT SOURCES other.mlir HEADER sub/other.h @OTHER_OPTIONS@)
"""


def make_fake_project(root: Path, other_options: str = "") -> Path:
    """Two targets in two directories: `kern` (STATIC, 2 sources x 2 GPUs, one with an
    included file) and `other` (OBJECT, in sub/), and a program that links both."""
    (root / "k").mkdir(parents=True, exist_ok=True)
    (root / "sub").mkdir(exist_ok=True)
    (root / "k" / "vadd.mlir").write_text("kernel vadd\ninclude common.inc\n")
    (root / "k" / "common.inc").write_text("common\n")
    (root / "k" / "scale.tileirbc").write_bytes(b"\x7fTileIR\x00scale")
    (root / "sub" / "other.mlir").write_text("kernel other\n")
    (root / "CMakeLists.txt").write_text(FAKE_CMAKELISTS)
    set_fake_other_options(root, other_options)
    (root / "main.cpp").write_text(FAKE_MAIN)
    return root


def set_fake_other_options(root: Path, options: str) -> None:
    (root / "sub" / "CMakeLists.txt").write_text(FAKE_SUB_CMAKELISTS.replace("@OTHER_OPTIONS@", options))


def read_log(path: Path) -> list[str]:
    """The fake tools' log lines, sorted, and the log cleared."""
    if not path.exists():
        return []
    lines = sorted(line for line in path.read_text().splitlines() if line)
    path.unlink()
    return lines


# --------------------------------------------------------------------------- the tileiras wheel

WHEEL_SOURCES = ("pyproject.toml", "CMakeLists.txt", "README.md", "tileiras", "build_rules", "cmake")


def build_tileiras_wheel(work: Path) -> Path:
    """`pip wheel` of this checkout (its files as they are now), without build isolation."""
    source = work / "source"
    source.mkdir(parents=True)
    for name in WHEEL_SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif path.exists():
            shutil.copy2(path, source / name)
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                             "-w", str(work / "dist"), str(source)], capture_output=True, text=True)
    assert result.returncode == 0, f"pip wheel of tileiras failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return next((work / "dist").glob("tileiras-*.whl"))


try:
    import pytest

    @pytest.fixture(scope="session")
    def tileiras_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return build_tileiras_wheel(tmp_path_factory.mktemp("tileiras_wheel"))
except ImportError:  # pragma: no cover - imported by scripts without pytest
    pass
