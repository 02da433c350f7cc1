"""Team-scale builds on a real REAPI server (BuildGrid on loopback).

* Bazel's remote cache: examples/bazel built from one checkout fills it; a
  second checkout at another path, with its own output root, gets a remote
  hit for every TileIR action. Both builds run sandboxed with a strict action
  environment: the actions read only declared inputs (the compiler is one),
  and nothing machine-specific reaches a key or an output.
* The compile cache's remote tier: a Bazel build with
  --define=tileiras_remote_cache=URL puts PTX and cubins there, and a CMake
  build (-DTileIR_REMOTE_CACHE=URL, an empty local cache) compiles nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "bazel_support"))

from bazel_runner import Bazel, read_execution_log  # noqa: E402
from remote_support import buildgrid_server  # noqa: E402
from test_cmake_support import PYPI_CMAKE, REPO, CMakeProject, actions_in  # noqa: E402
from workspaces import EXAMPLE_DIR, copy_example  # noqa: E402

pytestmark = pytest.mark.slow

TILEIR_MNEMONICS = ("TileirCompilerZip", "TileirPtx", "TileirCubin", "TileirPackage", "TileirHeader")
HERMETIC = ["build --spawn_strategy=sandboxed", "build --incompatible_strict_action_env"]
COMPILING = ("tileiras.lowering", "tileiras.codegen.nvptx")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with buildgrid_server(tmp_path_factory.mktemp("buildgrid")) as url:
        yield url


@pytest.fixture
def bazel_factory(tmp_path: Path):
    started: list[Bazel] = []

    def make(workspace: Path, name: str, extra_rc: list[str]) -> Bazel:
        instance = Bazel(workspace, tmp_path / name, extra_rc=extra_rc)
        started.append(instance)
        return instance

    yield make
    for instance in started:
        instance.shutdown()


def tileir_spawns(log: Path) -> list[dict]:
    return [s for s in read_execution_log(log) if s["mnemonic"] in TILEIR_MNEMONICS]


def test_a_second_checkout_gets_remote_hits_for_every_tileir_action(tmp_path: Path, server: str,
                                                                    bazel_factory) -> None:
    rc = HERMETIC + [f"build --remote_cache={server}"]
    first = bazel_factory(copy_example(tmp_path / "alice" / "ws"), "bazel_alice", rc)
    log = tmp_path / "first.json"
    first.run("build", f"--execution_log_json_file={log}", "//:vector_demo")
    ran = tileir_spawns(log)
    assert ran and not any(s["remoteCacheHit"] for s in ran)
    runners = {s["runner"] for s in ran}
    assert all("sandbox" in r for r in runners), f"TileIR actions ran unsandboxed: {runners}"

    second = bazel_factory(copy_example(tmp_path / "elsewhere" / "bob" / "checkout"), "bazel_bob", rc)
    log = tmp_path / "second.json"
    second.run("build", f"--execution_log_json_file={log}", "//:vector_demo")
    spawns = tileir_spawns(log)
    assert sorted(s["mnemonic"] for s in spawns) == sorted(s["mnemonic"] for s in ran)
    misses = [s["progressMessage"] for s in spawns if not s["remoteCacheHit"]]
    assert not misses, f"not served by the remote cache: {misses}"
    print(f"remote cache hits on the second checkout: {len(spawns)} of {len(spawns)} TileIR actions")


def _shared_cmake_project(tmp_path: Path, url: str) -> CMakeProject:
    """The Bazel example's kernels (same bytes, same GPU, same options) in a CMake project."""
    source = tmp_path / "cmake_project"
    (source / "kernels").mkdir(parents=True)
    for kernel in ("vadd", "vscale"):
        (source / "kernels" / f"{kernel}.tileirbc").write_bytes((EXAMPLE_DIR / "kernels" / f"{kernel}.tileirbc")
                                                                 .read_bytes())
    (source / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.24)\nproject(shared LANGUAGES C)\n"
        "find_package(TileIR CONFIG REQUIRED)\n"
        "add_tileir_kernel(kernels SOURCES kernels/vadd.tileirbc kernels/vscale.tileirbc GPU_NAMES sm_90)\n")
    return CMakeProject(source, tmp_path / "cmake_build", PYPI_CMAKE, "Ninja",
                        defines={"TileIR_DIR": str(REPO / "cmake"), "TileIR_PYTHON": sys.executable,
                                 "TileIR_REMOTE_CACHE": url},
                        env={"TILEIRAS_CACHE_DIR": str(tmp_path / "cmake_machine_cache"),
                             "PYTHONPROFILEIMPORTTIME": "1"})


def test_a_cmake_build_reuses_the_cubins_a_bazel_build_put_in_the_remote_cache(tmp_path: Path, server: str,
                                                                                bazel_factory) -> None:
    bazel = bazel_factory(copy_example(tmp_path / "ws"), "bazel",
                          HERMETIC + [f"build --define=tileiras_remote_cache={server}"])
    bazel.run("build", "//:kernels")
    bazel_bin = Path(bazel.info("bazel-bin"))

    project = _shared_cmake_project(tmp_path, server)
    project.configure()
    output = project.build()
    ran = actions_in(output)
    assert "PTX vadd.tileirbc sm_90" in ran and "cubin vscale sm_90" in ran, ran
    compiled = [name for name in COMPILING if f"| {name}" in output]
    assert not compiled, f"the CMake build compiled ({compiled}) instead of using the Bazel build's entries"
    assert "tileiras: warning" not in output, output[-3000:]
    for kernel in ("vadd", "vscale"):
        for suffix in ("ptx", "cubin"):
            name = f"{kernel}.sm_90.{suffix}"
            assert (project.binary_dir / "tileir" / "kernels" / name).read_bytes() == \
                (bazel_bin / "kernels" / name).read_bytes(), name
    entries = [p for p in (tmp_path / "cmake_machine_cache" / "v1").glob("*/*")]
    assert len(entries) >= 4, "remote hits were not kept in the local cache"
