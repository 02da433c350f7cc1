"""tileir_library() mechanics under a real, offline Bazel 4.2.3 (no compile needed).

What these prove without running the real compiler:
  * the Starlark copy of the option checks and action plan equals build_rules;
  * bad attribute values fail at analysis with build_rules' wording;
  * actions hold no absolute paths and declare the compiler as inputs;
  * a user-registered toolchain drives the rule end to end: the library
    links into a cc_binary, an edit reruns only that source's actions, and a
    clean rebuild is served from --disk_cache (the fake compiler stands in,
    as Python sources and as prebuilt executables);
  * the offline repositories (Debian's rules_java and rules_proto, our rules_cc
    stand-in) cover everything Bazel's own tools load.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "bazel_support"))

from bazel_runner import REPO_ROOT, Bazel, aquery_actions, read_execution_log, spawn_outputs  # noqa: E402
from offline_bazelrc import REPOSITORIES  # noqa: E402
from workspaces import BAD_TARGETS, copy_example, make_bad_options_workspace, make_fake_workspace, set_gpu_names  # noqa: E402

DEFS = REPO_ROOT / "bazel" / "defs.bzl"
TILEIR_MNEMONICS = ("TileirPtx", "TileirCubin", "TileirPackage", "TileirHeader")


def _starlark_list(name: str) -> list[str]:
    """A top-level `NAME = [...]` list of defs.bzl, as Python values."""
    match = re.search(rf"^{name} = \[(.*?)\]", DEFS.read_text(), re.S | re.M)
    assert match, f"{name} not found in bazel/defs.bzl"
    return [item.strip().strip('"') for item in match.group(1).split(",") if item.strip()]


@pytest.fixture
def bazel_factory(tmp_path: Path):
    """Bazel servers under tmp_path, each shut down when the test ends."""
    started: list[Bazel] = []

    def make(workspace: Path, name: str = "bazel", **kwargs) -> Bazel:
        instance = Bazel(workspace, tmp_path / name, **kwargs)
        started.append(instance)
        return instance

    yield make
    for instance in started:
        instance.shutdown()


def test_starlark_tables_match_the_compiler_and_build_rules() -> None:
    from build_rules.options import DEBUG_OPT_LEVEL, HEADER_SUFFIXES, OPT_LEVELS, SOURCE_SUFFIXES
    from tileiras.driver.options import GPU_NAMES

    assert _starlark_list("SUPPORTED_GPU_NAMES") == list(GPU_NAMES)
    assert [int(x) for x in _starlark_list("OPT_LEVELS")] == list(OPT_LEVELS)
    assert _starlark_list("SOURCE_SUFFIXES") == list(SOURCE_SUFFIXES)
    assert _starlark_list("HEADER_SUFFIXES") == list(HEADER_SUFFIXES)
    assert f"DEBUG_OPT_LEVEL = {DEBUG_OPT_LEVEL}" in DEFS.read_text()


def test_offline_repositories_define_everything_bazel_tools_loads() -> None:
    """Each symbol @bazel_tools loads from rules_cc/java/proto exists where the offline rc points:
    Debian's rules_java and rules_proto, our rules_cc stand-in."""
    embedded = Path("/usr/share/bazel/embedded_tools")
    assert embedded.is_dir(), "Debian's bazel-bootstrap is not installed: apt-get install -y bazel-bootstrap"
    load = re.compile(r'load\(\s*"@(rules_cc|rules_java|rules_proto)//([^"]+)"((?:\s*,\s*[^)]*)?)\)')
    wanted: dict[tuple[str, str], set[str]] = {}
    for path in embedded.rglob("*"):
        if path.is_file() and (path.suffix in (".bzl", ".tpl") or path.name.startswith("BUILD")):
            for repo, target, names in load.findall(path.read_text(errors="replace")):
                symbols = set(re.findall(r'"(\w+)"', names))  # "name" or alias = "name"
                wanted.setdefault((repo, target), set()).update(symbols)
    assert wanted, "found no loads from rules_cc/rules_java/rules_proto in @bazel_tools"
    for (repo, target), symbols in sorted(wanted.items()):
        package, _, filename = target.partition(":")
        replacement = REPOSITORIES[repo][0] / package / filename
        assert replacement.is_file(), f"@{repo}//{target} is loaded by @bazel_tools but {replacement} is missing"
        text = replacement.read_text()
        for symbol in symbols:
            assert re.search(rf"^(def {symbol}\(|{symbol} = )", text, re.M), f"@{repo}//{target} lacks {symbol}"


@pytest.mark.slow
def test_bad_attributes_fail_at_analysis_with_clear_messages(tmp_path: Path, bazel_factory) -> None:
    workspace = make_bad_options_workspace(tmp_path / "ws")
    bazel = bazel_factory(workspace)
    good = bazel.run("build", "--nobuild", "//:good", check=False)
    assert good.returncode == 0, good.stderr[-3000:]
    # --nobuild: analysis only; --keep_going: every bad target reports in one run.
    proc = bazel.run("build", "--nobuild", "--keep_going", "//:all", check=False)
    assert proc.returncode != 0
    for name, (_, message) in BAD_TARGETS.items():
        assert f"tileir_library //:{name}: {message}" in proc.stderr, f"{name}: expected '{message}' in\n{proc.stderr[-4000:]}"
    assert "TileIR PTX" not in proc.stderr  # nothing was compiled


@pytest.mark.slow
def test_a_python_without_the_dependencies_is_refused_clearly(tmp_path: Path, bazel_factory) -> None:
    # The test's own Python, isolated from its site-packages: no llvmlite, numpy, ml_dtypes.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec "{sys.executable}" -I -S "$@"\n')
    bare.chmod(0o755)
    bazel = bazel_factory(make_bad_options_workspace(tmp_path / "ws"), python=str(bare))
    proc = bazel.run("build", "--nobuild", "//:good", check=False)
    assert proc.returncode != 0
    assert f"tileiras: the Python at {bare} cannot run the compiler: missing: llvmlite" in proc.stderr, proc.stderr[-3000:]
    assert "TILEIRAS_PYTHON" in proc.stderr


@pytest.mark.slow
def test_action_plan_equals_build_rules_and_is_relocatable(tmp_path: Path, bazel_factory) -> None:
    """aquery of the example: the same actions build_rules plans, relative paths only, compiler as input."""
    from build_rules import BAZEL_POLICY, KernelOptions, library_plan

    gpus = ["sm_100", "sm_90"]
    workspace = copy_example(tmp_path / "ws")
    set_gpu_names(workspace, gpus)
    bazel = bazel_factory(workspace)
    proc = bazel.run("aquery", "--output=jsonproto", 'mnemonic("Tileir.*", //:kernels)')
    actions = aquery_actions(proc.stdout)
    header = next(a for a in actions if a["mnemonic"] == "TileirHeader")["outputs"][0]
    bin_dir = header.rsplit("/", 1)[0]

    sources = ["kernels/vadd.tileirbc", "kernels/vscale.tileirbc"]
    plan = library_plan("kernels", sources, KernelOptions.resolve(gpu_names=gpus), f"{bin_dir}/kernels",
                        policy=BAZEL_POLICY)
    plan_header = plan.header

    def bazel_path(path: str) -> str:  # Bazel keeps the header beside the target
        return header if path == plan_header else path

    expected = sorted(tuple(bazel_path(a) for a in action.args) for action in plan.actions)
    python = "external/tileiras_python/python3"
    compiler_zip = re.compile(r"bazel-out/[^/]+/bin/external/tileiras/bazel/default_toolchain_impl\.compiler\.zip")
    got = []
    for action in actions:
        assert action["arguments"][:2] == [python, "-B"], action["arguments"]
        assert compiler_zip.fullmatch(action["arguments"][2]), action["arguments"]
        assert action["arguments"][3] in ("tileiras", "tileir")
        args = action["arguments"][4:]
        if action["mnemonic"] == "TileirPackage":
            # Bazel's one addition: the fatbin as its own output, for the `fatbin` output group.
            assert args[-2] == "--fatbin-out" and args[-1] == args[args.index("-o") + 1][:-2] + ".fatbin"
            assert action["outputs"] == sorted([args[-3], args[-1]])
            action["outputs"].remove(args[-1])
            args = args[:-2]
        got.append(tuple(args))
    assert sorted(got) == expected
    assert len(actions) == len(plan.actions) == 2 * (2 * len(gpus) + 1) + 1

    by_outputs = {tuple(sorted(bazel_path(o) for o in a.outputs)): a for a in plan.actions}
    for action in actions:
        for arg in action["arguments"]:
            assert not arg.startswith("/") and "=/" not in arg, f"absolute path in {action['arguments']}"
            assert str(tmp_path) not in arg and str(REPO_ROOT) not in arg
        planned = {bazel_path(i) for i in by_outputs[tuple(action["outputs"])].inputs}
        # Exactly: what build_rules says it reads, the compiler (one zip) and the interpreter wrapper.
        assert set(action["inputs"]) == planned | {action["arguments"][2], python}, action["inputs"]

    # The zip packs exactly build_rules' list of compiler files (launcher included).
    from build_rules.toolchain import compiler_files, package_root

    expected_files = sorted(p.relative_to(package_root()).as_posix() for p in compiler_files())
    labels = bazel.run("query", "labels(srcs, @tileiras//:compiler_srcs)").stdout.split()
    assert sorted(label.split("//:", 1)[1] for label in labels) == expected_files
    proc = bazel.run("aquery", "--output=jsonproto", 'mnemonic("TileirCompilerZip", @tileiras//bazel:default_toolchain_impl)')
    (zip_action,) = aquery_actions(proc.stdout)
    packed = sorted(p.split("external/tileiras/", 1)[1] for p in zip_action["inputs"] if p.startswith("external/tileiras/"))
    assert packed == sorted(expected_files + ["bazel/zip_compiler.py"])


@pytest.mark.slow
def test_user_toolchain_links_rebuilds_incrementally_and_hits_disk_cache(tmp_path: Path, bazel_factory) -> None:
    workspace = make_fake_workspace(tmp_path / "ws")
    bazel = bazel_factory(workspace)
    cache = tmp_path / "disk_cache"

    first = bazel.run("run", f"--disk_cache={cache}", "//:app")
    assert "alpha=100 beta=100 no_driver=100" in first.stdout

    # Edit one source: only its PTX/cubin/package actions (and the link) run again.
    (workspace / "alpha.tileirbc").write_bytes(b"alpha v2")
    log = tmp_path / "edit.json"
    bazel.run("build", f"--disk_cache={cache}", f"--execution_log_json_file={log}", "//:app")
    spawns = [s for s in read_execution_log(log) if s["mnemonic"].startswith("Tileir")]
    outputs = sorted(o.rsplit("/", 1)[-1] for s in spawns for o in spawn_outputs(s))
    assert outputs == ["alpha.fatbin", "alpha.o", "alpha.sm_100.cubin", "alpha.sm_100.ptx", "alpha.sm_100.ptx.json",
                       "alpha.sm_90.cubin", "alpha.sm_90.ptx", "alpha.sm_90.ptx.json"]
    assert not any(s["remoteCacheHit"] for s in spawns)

    # A no-op build runs nothing.
    log = tmp_path / "noop.json"
    bazel.run("build", f"--disk_cache={cache}", f"--execution_log_json_file={log}", "//:app")
    assert read_execution_log(log) == []

    # After `bazel clean`, every compiler action is served from the disk cache.
    bazel.run("clean")
    log = tmp_path / "clean.json"
    bazel.run("build", f"--disk_cache={cache}", f"--execution_log_json_file={log}", "//:app")
    spawns = [s for s in read_execution_log(log) if s["mnemonic"].startswith("Tileir")]
    assert sorted(s["mnemonic"] for s in spawns) == sorted(["TileirPtx"] * 4 + ["TileirCubin"] * 4 +
                                                           ["TileirPackage"] * 2 + ["TileirHeader"] +
                                                           ["TileirCompilerZip"])
    assert all(s["remoteCacheHit"] for s in spawns), [s["mnemonic"] for s in spawns if not s["remoteCacheHit"]]
    assert "alpha=100" in bazel.run("run", f"--disk_cache={cache}", "//:app").stdout

    # The same compiler registered as prebuilt executables drives the same actions.
    prebuilt = "--extra_toolchains=//:prebuilt_toolchain"
    actions = aquery_actions(bazel.run("aquery", prebuilt, "--output=jsonproto", 'mnemonic("TileirPtx", //:kernels)').stdout)
    assert actions and all(a["arguments"][:2] == ["fake_compiler/tileiras.sh", "--emit=ptx"] for a in actions)
    assert "alpha=100 beta=100" in bazel.run("run", prebuilt, "//:app").stdout
