"""examples/bazel built by a real, offline Bazel 4.2.3 with the real compiler.

Build and run the example; edit one kernel and see only its actions rerun;
`bazel clean` then a rebuild served from --disk_cache; a second checkout at
another path with another output root produces byte-identical outputs (no
absolute path leaks into an action or an output).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "bazel_support"))

from bazel_runner import Bazel, read_execution_log, spawn_outputs  # noqa: E402
from workspaces import copy_example  # noqa: E402

pytestmark = pytest.mark.slow

COMPILER_MNEMONICS = ("TileirCompilerZip", "TileirPtx", "TileirCubin", "TileirPackage", "TileirHeader")


@pytest.fixture
def bazel_factory(tmp_path: Path):
    started: list[Bazel] = []

    def make(workspace: Path, name: str = "bazel") -> Bazel:
        instance = Bazel(workspace, tmp_path / name)
        started.append(instance)
        return instance

    yield make
    for instance in started:
        instance.shutdown()


def _compiler_spawns(log: Path) -> list[dict]:
    return [s for s in read_execution_log(log) if s["mnemonic"] in COMPILER_MNEMONICS]


def _outputs(bazel: Bazel) -> dict[str, str]:
    """sha256 of every file the kernels target and the binary produce, by workspace-relative name."""
    bin_dir = Path(bazel.info("bazel-bin"))
    files = sorted(p for p in (bin_dir / "kernels").rglob("*") if p.is_file())
    files += [bin_dir / "kernels.h"]
    return {str(p.relative_to(bin_dir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def _export_module(workspace: Path):
    spec = importlib.util.spec_from_file_location("export_kernels", workspace / "kernels" / "export_kernels.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _gpu_present() -> bool:
    """A loadable CUDA driver that reports at least one device (what main.c checks too)."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def test_example_builds_and_runs(tmp_path: Path, bazel_factory) -> None:
    bazel = bazel_factory(copy_example(tmp_path / "ws"))
    proc = bazel.run("run", "//:vector_demo", check=False)
    assert proc.returncode == 0, proc.stderr[-6000:]
    if _gpu_present():
        assert "vector_demo: vadd and vscale ran on the GPU; all 4096 elements correct" in proc.stdout, proc.stdout
    else:
        assert "vector_demo: built with kernels vadd and vscale; no GPU present" in proc.stdout, proc.stdout
    header = (Path(bazel.info("bazel-bin")) / "kernels.h").read_text()
    assert "int vadd_launch(CUstream stream" in header and "int vscale_launch(CUstream stream" in header
    groups = bazel.run("build", "//:kernels", "--output_groups=ptx,cubin,fatbin").stderr
    assert "vadd.sm_90.ptx" in groups and "vscale.sm_90.cubin" in groups


def test_editing_one_kernel_reruns_only_its_actions(tmp_path: Path, bazel_factory) -> None:
    workspace = copy_example(tmp_path / "ws")
    bazel = bazel_factory(workspace)
    bazel.run("build", "//:vector_demo")

    # A real edit: vscale re-exported with another tile size (valid bytecode, new content).
    source = workspace / "kernels" / "vscale.tileirbc"
    before = source.read_bytes()
    _export_module(workspace).export("vscale", source, tile=128)
    assert source.read_bytes() != before

    log = tmp_path / "edit.json"
    bazel.run("build", f"--execution_log_json_file={log}", "//:vector_demo")
    spawns = _compiler_spawns(log)
    outputs = {o.rsplit("/", 1)[-1] for s in spawns for o in spawn_outputs(s)}
    assert {"vscale.sm_90.ptx", "vscale.sm_90.cubin", "vscale.o"} <= outputs, outputs
    assert not any(name.startswith("vadd") for name in outputs), outputs
    assert "TileirCompilerZip" not in {s["mnemonic"] for s in spawns}

    log = tmp_path / "noop.json"
    bazel.run("build", f"--execution_log_json_file={log}", "//:vector_demo")
    assert read_execution_log(log) == [], "a no-op build ran actions"


def test_clean_rebuild_is_served_from_disk_cache_and_outputs_are_reproducible(tmp_path: Path, bazel_factory) -> None:
    cache = tmp_path / "disk_cache"
    first = bazel_factory(copy_example(tmp_path / "ws"), "bazel_a")
    first.run("build", f"--disk_cache={cache}", "//:vector_demo")
    digests = _outputs(first)

    first.run("clean")
    log = tmp_path / "clean.json"
    first.run("build", f"--disk_cache={cache}", f"--execution_log_json_file={log}", "//:vector_demo")
    spawns = _compiler_spawns(log)
    assert sorted(s["mnemonic"] for s in spawns) == sorted(["TileirPtx", "TileirCubin", "TileirPackage"] * 2 +
                                                           ["TileirHeader", "TileirCompilerZip"])
    misses = [s["progressMessage"] for s in spawns if not s["remoteCacheHit"]]
    assert not misses, f"not served from the disk cache: {misses}"
    assert _outputs(first) == digests

    # Another checkout, another output root, no cache: the same bytes.
    second = bazel_factory(copy_example(tmp_path / "elsewhere" / "checkout"), "bazel_b")
    second.run("build", "//:vector_demo")
    assert _outputs(second) == digests
