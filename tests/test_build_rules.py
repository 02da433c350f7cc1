"""build_rules: the action plan CMake and Bazel both follow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from build_rules import (BAZEL_POLICY, CMAKE_POLICY, KernelOptions, PlanError, library_plan, naming,
                        source_actions)
from build_rules.render_cmake import quote, quote_list, render_plans
from build_rules.toolchain import compiler_files, default_toolchain, fingerprint
from tileiras.driver.options import GPU_NAMES

REPO = Path(__file__).resolve().parent.parent
LAUNCHER = REPO / "build_rules" / "launch.py"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(LAUNCHER), "build_rules", *args], capture_output=True, text=True,
                          cwd=cwd)


# ----------------------------------------------------------------------------- options


def test_defaults() -> None:
    options = KernelOptions.resolve()
    assert options == KernelOptions(("sm_90",), 3, False, False)


def test_device_debug_defaults_to_O0_and_rejects_optimization() -> None:
    assert KernelOptions.resolve(device_debug=True).opt_level == 0
    with pytest.raises(PlanError, match="DEVICE_DEBUG needs OPT_LEVEL 0"):
        KernelOptions.resolve(device_debug=True, opt_level=2)


@pytest.mark.parametrize("gpus, message", [
    (["sm_91"], "unknown GPU name 'sm_91'"),
    (["sm_90", "sm_90"], "listed twice"),
    (["SM_90"], "unknown GPU name"),
])
def test_bad_gpu_names(gpus: list[str], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        KernelOptions.resolve(gpu_names=gpus)


def test_every_compiler_gpu_name_is_accepted() -> None:
    assert KernelOptions.resolve(gpu_names=list(GPU_NAMES)).gpu_names == GPU_NAMES


@pytest.mark.parametrize("level", ["4", "-1", "x", "03", 3.5])
def test_bad_opt_levels(level: object) -> None:
    with pytest.raises(PlanError, match="OPT_LEVEL must be one of 0 1 2 3"):
        KernelOptions.resolve(opt_level=level)  # type: ignore[arg-type]


def test_newest_gpu_is_by_sm_number_not_text() -> None:
    assert KernelOptions.resolve(gpu_names=["sm_100", "sm_90", "sm_121", "sm_80"]).newest_gpu == "sm_121"


# ----------------------------------------------------------------------------- naming


def test_stems_sorted_and_collisions_rejected() -> None:
    assert naming.assign_stems(["x/b.mlir", "a.tileirbc", "c.tileir"]) == [
        ("a", "a.tileirbc"), ("b", "x/b.mlir"), ("c", "c.tileir")]
    with pytest.raises(PlanError, match="would both produce 'k.o'"):
        naming.assign_stems(["a/k.tileirbc", "b/k.mlir"])
    with pytest.raises(PlanError, match="listed twice"):
        naming.assign_stems(["a/k.tileirbc", "a/k.tileirbc"])


def test_target_file_names() -> None:
    files = naming.target_files("out/t", "vadd", "sm_90")
    assert files == naming.TargetFiles("out/t/vadd.sm_90.ptx", "out/t/vadd.sm_90.ptx.json",
                                       "out/t/vadd.sm_90.ptx.d", "out/t/vadd.sm_90.cubin")
    assert naming.target_files("", "k", "sm_80").ptx == "k.sm_80.ptx"
    assert naming.header_path("out/t", "sub/k.h") == "out/t/include/sub/k.h"


# ----------------------------------------------------------------------------- actions


def test_single_source_chain_matches_the_contract() -> None:
    options = KernelOptions.resolve(gpu_names=["sm_90"], opt_level=2, lineinfo=True)
    actions = source_actions("src/vadd.tileirbc", "vadd", options, "o", CMAKE_POLICY)
    assert [a.step for a in actions] == ["ptx", "cubin", "package"]
    ptx, cubin, package = actions
    assert ptx.tool == "tileiras"
    assert list(ptx.args) == ["--emit=ptx", "--gpu-name", "sm_90", "-O2", "--lineinfo", "src/vadd.tileirbc",
                              "-o", "o/vadd.sm_90.ptx", "--emit-metadata",
                              "-MD", "-MF", "o/vadd.sm_90.ptx.d", "-MT", "o/vadd.sm_90.ptx"]
    assert ptx.inputs == ("src/vadd.tileirbc",)
    assert ptx.outputs == ("o/vadd.sm_90.ptx", "o/vadd.sm_90.ptx.json")
    assert ptx.depfile == "o/vadd.sm_90.ptx.d"
    assert list(cubin.args) == ["--emit=cubin", "--gpu-name", "sm_90", "-O2", "--lineinfo", "o/vadd.sm_90.ptx",
                                "-o", "o/vadd.sm_90.cubin"]
    assert cubin.inputs == ("o/vadd.sm_90.ptx", "o/vadd.sm_90.ptx.json")
    assert cubin.depfile is None
    assert package.tool == "tileir"
    assert list(package.args) == ["package", "--metadata", "o/vadd.sm_90.ptx.json",
                                  "--cubin", "sm_90=o/vadd.sm_90.cubin", "--ptx", "sm_90=o/vadd.sm_90.ptx",
                                  "-o", "o/vadd.o"]
    assert package.outputs == ("o/vadd.o",)


def test_multi_gpu_package_embeds_newest_ptx_and_every_metadata() -> None:
    options = KernelOptions.resolve(gpu_names=["sm_100", "sm_80"])
    package = source_actions("k.mlir", "k", options, "d")[-1]
    assert list(package.args) == ["package", "--metadata", "d/k.sm_100.ptx.json", "--metadata", "d/k.sm_80.ptx.json",
                                  "--cubin", "sm_100=d/k.sm_100.cubin", "--cubin", "sm_80=d/k.sm_80.cubin",
                                  "--ptx", "sm_100=d/k.sm_100.ptx", "-o", "d/k.o"]
    assert set(package.inputs) == {"d/k.sm_100.ptx.json", "d/k.sm_80.ptx.json", "d/k.sm_100.cubin",
                                   "d/k.sm_80.cubin", "d/k.sm_100.ptx"}


def test_bazel_policy_has_no_depfiles_and_no_cache() -> None:
    options = KernelOptions.resolve(device_debug=True)
    ptx, cubin, _ = source_actions("k.mlir", "k", options, "d", BAZEL_POLICY)
    assert ptx.depfile is None and "-MD" not in ptx.args
    assert list(ptx.args[:6]) == ["--emit=ptx", "--gpu-name", "sm_90", "-O0", "-g", "--no-cache"]
    assert "--no-cache" in cubin.args and "-g" in cubin.args


def test_library_plan_orders_sources_and_ends_with_the_header() -> None:
    options = KernelOptions.resolve(gpu_names=["sm_90", "sm_100"])
    plan = library_plan("kern", ["z/vscale.tileirbc", "a/vadd.mlir"], options, "out", header="kern.h")
    steps = [(a.step, a.outputs[0].rsplit("/", 1)[-1]) for a in plan.actions]
    assert steps == [
        ("ptx", "vadd.sm_90.ptx"), ("cubin", "vadd.sm_90.cubin"),
        ("ptx", "vadd.sm_100.ptx"), ("cubin", "vadd.sm_100.cubin"), ("package", "vadd.o"),
        ("ptx", "vscale.sm_90.ptx"), ("cubin", "vscale.sm_90.cubin"),
        ("ptx", "vscale.sm_100.ptx"), ("cubin", "vscale.sm_100.cubin"), ("package", "vscale.o"),
        ("header", "kern.h"),
    ]
    header = plan.actions[-1]
    assert list(header.args) == ["header", "--metadata", "out/vadd.sm_90.ptx.json",
                                 "--metadata", "out/vscale.sm_90.ptx.json", "-o", "out/include/kern.h"]
    assert plan.objects == ("out/vadd.o", "out/vscale.o")
    assert plan.header == "out/include/kern.h" and plan.include_dir == "out/include"
    assert len(plan.ptx) == len(plan.cubins) == 4 and len(plan.metadata) == 2
    # Every input is a source or the output of an earlier action: the plan is a DAG in order.
    produced: set[str] = set()
    for action in plan.actions:
        for item in action.inputs:
            assert item in produced or item.endswith((".mlir", ".tileirbc")), (action.step, item)
        produced.update(action.outputs)


def test_library_plan_is_pure_string_work() -> None:
    """Relative paths stay relative (Bazel must see no absolute path)."""
    plan = library_plan("k", ["pkg/k.tileirbc"], KernelOptions.resolve(), "bazel-out/pkg/k", policy=BAZEL_POLICY)
    for action in plan.actions:
        for arg in action.args:
            assert not arg.startswith("/") and "/work/" not in arg


@pytest.mark.parametrize("kwargs, message", [
    ({"sources": []}, "has no SOURCES"),
    ({"sources": ["k.cu"]}, "is not TileIR"),
    ({"sources": ["a;b.mlir"]}, "contains ';'"),
    ({"header": "../k.h"}, "without '..'"),
    ({"header": "/abs/k.h"}, "relative"),
    ({"header": "k.txt"}, "must end in .h or .hpp"),
])
def test_library_plan_rejects(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"sources": ["k.mlir"], "header": None}
    args.update(kwargs)
    with pytest.raises(PlanError, match=message):
        library_plan("k", args["sources"], KernelOptions.resolve(), "out", header=args["header"])  # type: ignore


def test_argv_prepends_the_tool_command() -> None:
    chain = default_toolchain("/py")
    action = source_actions("k.mlir", "k", KernelOptions.resolve(), "d")[0]
    argv = action.argv(chain.command(action.tool))
    assert argv[:3] == ["/py", str(LAUNCHER), "tileiras"] and argv[3] == "--emit=ptx"


# ----------------------------------------------------------------------------- CMake rendering


def test_cmake_quoting() -> None:
    assert quote('a"b\\c$d') == '"a\\"b\\\\c\\$d"'
    assert quote_list(["x", "y z"]) == '"x;y z"'
    with pytest.raises(ValueError):
        quote_list(["a;b"])


def test_rendered_plan_reads_back_in_cmake(tmp_path: Path) -> None:
    plan = library_plan("k$x", ["/s p/a\"q.mlir"], KernelOptions.resolve(), "/o")
    script = tmp_path / "plan.cmake"
    script.write_text(render_plans([plan]) + """
message(STATUS "name=${_tileir_plan_0_name}")
message(STATUS "n=${_tileir_plan_0_action_count}")
list(GET _tileir_plan_0_action_0_args 4 src)
message(STATUS "src=${src}")
message(STATUS "header=${_tileir_plan_0_header}")
""")
    result = subprocess.run([str(Path(sys.executable).parent / "cmake"), "-P", str(script)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert "-- name=k$x" in result.stdout
    assert "-- n=4" in result.stdout
    assert '-- src=/s p/a"q.mlir' in result.stdout
    assert "-- header=/o/include/k$x.h" in result.stdout


# ----------------------------------------------------------------------------- toolchain


def test_fingerprint_follows_content_not_timestamps(tmp_path: Path) -> None:
    for package in ("tileiras", "build_rules"):
        (tmp_path / package / "__pycache__").mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("x = 1\n")
        (tmp_path / package / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"junk")
    (tmp_path / "tileiras" / "cmake_prefix").mkdir()
    (tmp_path / "tileiras" / "cmake_prefix" / "TileIR.cmake").write_text("# not the compiler\n")
    files = compiler_files(tmp_path)
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["build_rules/__init__.py", "tileiras/__init__.py"]
    first = fingerprint(files, tmp_path)
    (tmp_path / "tileiras" / "__init__.py").touch()
    assert fingerprint(files, tmp_path) == first
    (tmp_path / "tileiras" / "__init__.py").write_text("x = 2\n")
    assert fingerprint(files, tmp_path) != first


def test_compiler_files_cover_the_real_package() -> None:
    names = {f.relative_to(REPO).as_posix() for f in compiler_files()}
    assert "tileiras/driver/tileiras_main.py" in names
    assert "build_rules/launch.py" in names
    assert not any("__pycache__" in n or n.startswith("tileiras/cmake_prefix") for n in names)


# ----------------------------------------------------------------------------- CLI


def test_cli_plan_json(tmp_path: Path) -> None:
    result = run_cli("plan", "--name", "k", "--out-dir", "o", "--gpu-name", "sm_80", "--no-depfiles",
                     "--no-cache", "a.mlir", "b.tileirbc")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    [target] = data["targets"]
    assert target["objects"] == ["o/a.o", "o/b.o"]
    expected = library_plan("k", ["a.mlir", "b.tileirbc"], KernelOptions.resolve(["sm_80"]), "o",
                            policy=BAZEL_POLICY)
    assert target == expected.to_dict()


def test_cli_request_with_several_targets_writes_only_on_change(tmp_path: Path) -> None:
    request = {"policy": {"depfiles": True, "use_cache": True}, "targets": [
        {"name": "a", "sources": ["/s/a.mlir"], "out_dir": "/b/a", "gpu_names": ["sm_90"], "opt_level": 1},
        {"name": "b", "sources": ["/s/b.mlir"], "out_dir": "/b/b", "header": "bee.hpp", "device_debug": True},
    ]}
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    out = tmp_path / "plan.cmake"
    assert run_cli("plan", "--format=cmake", "--request", str(path), "-o", str(out)).returncode == 0
    text = out.read_text()
    assert 'set(_tileir_plan_count "2")' in text
    assert "-O1" in text and "-O0;-g" in text and "/b/b/include/bee.hpp" in text
    before = out.stat().st_mtime_ns
    assert run_cli("plan", "--format=cmake", "--request", str(path), "-o", str(out)).returncode == 0
    assert out.stat().st_mtime_ns == before


@pytest.mark.parametrize("target, message", [
    ({"name": "t", "sources": ["a.mlir"], "out_dir": "o", "gpu_names": ["sm_42"]},
     "target 't': unknown GPU name 'sm_42'"),
    ({"name": "t", "sources": ["a.mlir"], "out_dir": "o", "colour": "red"}, "unknown request field(s): colour"),
    ({"name": "t", "sources": ["a/k.mlir", "b/k.mlir"], "out_dir": "o"}, "would both produce 'k.o'"),
])
def test_cli_request_errors_are_one_line_exit_2(tmp_path: Path, target: dict[str, object], message: str) -> None:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({"targets": [target]}))
    out = tmp_path / "plan.cmake"
    result = run_cli("plan", "--request", str(path), "-o", str(out))
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stderr.startswith("build_rules: error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert not out.exists()


def test_cli_bad_request_file(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text("{nope")
    result = run_cli("plan", "--request", str(tmp_path / "r.json"))
    assert result.returncode == 2 and "is not JSON" in result.stderr
    result = run_cli("plan", "--request", str(tmp_path / "missing.json"))
    assert result.returncode == 4 and "cannot read request" in result.stderr


def test_cli_toolchain_and_gpu_names() -> None:
    result = run_cli("toolchain")
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["TileIR_ROOT"] == str(REPO)
    assert facts["TileIR_SUPPORTED_GPU_NAMES"] == list(GPU_NAMES)
    assert facts["TileIR_TILEIRAS_COMMAND"] == [sys.executable, str(LAUNCHER), "tileiras"]
    assert len(facts["TileIR_COMPILER_FINGERPRINT"]) == 64
    names = run_cli("gpu-names")
    assert names.stdout.split() == list(GPU_NAMES)


def test_launcher_runs_from_its_root_whatever_the_cwd_and_pythonpath(tmp_path: Path) -> None:
    # A directory named like our package in the cwd must not shadow it.
    (tmp_path / "build_rules").mkdir()
    (tmp_path / "build_rules" / "__init__.py").write_text("raise SystemExit('shadowed')\n")
    result = subprocess.run([sys.executable, str(LAUNCHER), "build_rules", "gpu-names"], capture_output=True,
                            text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert "sm_90" in result.stdout.split()
    bad = subprocess.run([sys.executable, str(LAUNCHER), "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage: launch.py" in bad.stderr
