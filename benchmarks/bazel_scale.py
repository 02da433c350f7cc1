"""Bazel build times of tileir_library(): full, no-op, one touched kernel, cached.

Two workspaces, each built by a fresh offline Bazel server in a temp dir:

  example   examples/bazel (2 kernels + a cc_binary)
  package   a generated package of N kernels (default 200) in one
            tileir_library, plus a cc_binary that links it

For each: the full build (fresh output base; the server start and the
repository set-up are timed apart), a no-op rebuild, a rebuild after one
kernel's content changed (re-exported with another tile size), and a rebuild
after `bazel clean` served from --disk_cache.

    python benchmarks/bazel_scale.py [--kernels 200] [--gpu-names sm_90,sm_100] [--json out.json]

Needs Debian's bazel-bootstrap (Bazel 4.2.3) and cuda-tile (to export the
kernels); runs offline. `measure_scale()` is the Bazel half of
benchmarks/build_scale.py (the same project as CMake, with a remote cache).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests" / "bazel_support"))

from bazel_runner import Bazel, read_execution_log  # noqa: E402
from workspaces import copy_example, set_gpu_names  # noqa: E402

_PROCESSES = re.compile(r"INFO: (\d+) process")
TILEIR_MNEMONICS = ("TileirCompilerZip", "TileirPtx", "TileirCubin", "TileirPackage", "TileirHeader")


@dataclass
class Step:
    workspace: str
    step: str
    seconds: float
    processes: int


def _exporter() -> ModuleType:
    path = REPO_ROOT / "examples" / "bazel" / "kernels" / "export_kernels.py"
    spec = importlib.util.spec_from_file_location("export_kernels", path)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _generated_package(dest: Path, count: int, gpu_names: list[str]) -> Path:
    """A workspace with `count` kernels k000.. (vadd and vscale alternating) in one tileir_library."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    exporter = _exporter()
    shutil.copytree(REPO_ROOT / "examples" / "bazel", dest, ignore=shutil.ignore_patterns("kernels", "bazel-*"))
    (dest / "kernels").mkdir()
    names = []
    for i in range(count):
        name = f"k{i:03d}"
        kernel, params = exporter._parameters(exporter.KERNEL_NAMES[i % 2], exporter.TILE)
        signature = KernelSignature(params, CallingConvention.cutile_python_v1(), symbol=name)
        export_kernel(kernel, [signature], dest / "kernels" / f"{name}.tileirbc", output_format="tileir_bytecode")
        names.append(name)
    srcs = "".join(f'        "kernels/{n}.tileirbc",\n' for n in names)
    gpus = ", ".join(f'"{g}"' for g in gpu_names)
    (dest / "BUILD.bazel").write_text(
        'load("@tileiras//bazel:defs.bzl", "tileir_library")\n\n'
        f'tileir_library(\n    name = "kernels",\n    srcs = [\n{srcs}    ],\n    gpu_names = [{gpus}],\n)\n\n'
        'cc_binary(\n    name = "app",\n    srcs = ["app.c"],\n    deps = [":kernels"],\n)\n')
    (dest / "app.c").write_text(
        '#include <stdio.h>\n#include "kernels.h"\n\n'
        "int main(void) {\n"
        "    int rc = k000_launch(NULL, 1, 1, 1, NULL, 0, 1, NULL, 0, 1, NULL, 0, 1);\n"
        '    printf("k000_launch returned %d\\n", rc);\n'
        "    return 0;\n}\n")
    (dest / "main.c").unlink()
    return dest


def _touch_kernel(path: Path, kind: str) -> None:
    """Change one kernel's content for real: re-export it with another tile size."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    exporter = _exporter()
    kernel, params = exporter._parameters(kind, exporter.TILE // 2)
    signature = KernelSignature(params, CallingConvention.cutile_python_v1(), symbol=path.stem)
    export_kernel(kernel, [signature], path, output_format="tileir_bytecode")


def _snapshot(source: Path, dest: Path) -> Path:
    """A frozen copy of the @tileiras repository: edits to the checkout while the
    benchmark runs would otherwise (rightly) rebuild every kernel."""
    dest.mkdir(parents=True)
    for name in ("WORKSPACE", "BUILD.bazel", "MODULE.bazel"):
        shutil.copy2(source / name, dest / name)
    for name in ("bazel", "build_rules", "cmake", "tileiras"):
        shutil.copytree(source / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def _timed(bazel: Bazel, label: str, step: str, *args: str) -> Step:
    start = time.perf_counter()
    proc = bazel.run("build", *args)
    seconds = time.perf_counter() - start
    match = _PROCESSES.search(proc.stderr)
    return Step(label, step, round(seconds, 2), int(match.group(1)) if match else 0)


def _measure(label: str, workspace: Path, state: Path, target: str, touched: Path, kind: str,
             tileiras_root: Path) -> list[Step]:
    bazel = Bazel(workspace, state, tileiras_root=tileiras_root)
    cache = state / "disk_cache"
    try:
        start = time.perf_counter()
        bazel.run("info", "release")
        bazel.run("fetch", target)
        steps = [Step(label, "server start + repository set-up", round(time.perf_counter() - start, 2), 0)]
        steps.append(_timed(bazel, label, "full build", f"--disk_cache={cache}", target))
        steps.append(_timed(bazel, label, "no-op rebuild", f"--disk_cache={cache}", target))
        _touch_kernel(touched, kind)
        steps.append(_timed(bazel, label, f"one kernel touched ({touched.name})", f"--disk_cache={cache}", target))
        bazel.run("clean")
        steps.append(_timed(bazel, label, "after clean, from --disk_cache", f"--disk_cache={cache}", target))
        return steps
    finally:
        bazel.shutdown()


def _scale_step(bazel: Bazel, name: str, log: Path, setup_s: float, *flags: str):
    """One build of //:app: wall time, TileIR actions looked up, TileIR processes no cache answered."""
    from build_scale import Step as ScaleStep

    start = time.perf_counter()
    bazel.run("build", f"--execution_log_json_file={log}", *flags, "//:app", timeout=7200)
    seconds = time.perf_counter() - start
    spawns = [s for s in read_execution_log(log) if s["mnemonic"] in TILEIR_MNEMONICS]
    return ScaleStep("Bazel", name, setup_s, seconds, len(spawns), sum(not s["remoteCacheHit"] for s in spawns))


def _started(bazel: Bazel) -> float:
    start = time.perf_counter()
    bazel.run("info", "release")
    bazel.run("fetch", "//:app")
    return time.perf_counter() - start


def snapshot(source: Path, dest: Path) -> Path:
    """A frozen copy of a tileiras checkout (for build_scale.py, CMake's and Bazel's compiler)."""
    shutil.rmtree(dest, ignore_errors=True)
    return _snapshot(source, dest)


def measure_scale(work: Path, project: Path, second: Path, stock: Path, edited: Path, remote: str,
                  tileiras_root: Path) -> list:
    """build_scale.py's steps for Bazel: `project` and `second` are two checkouts of one workspace."""
    disk = f"--disk_cache={work / 'bazel-disk-cache'}"
    shared = f"--remote_cache={remote}"
    logs = work / "bazel-logs"
    logs.mkdir(exist_ok=True)
    kernel = project / "kernels" / stock.name
    instances = []

    def bazel(workspace: Path, name: str) -> Bazel:
        instances.append(Bazel(workspace, work / name, tileiras_root=tileiras_root))
        return instances[-1]

    try:
        print("Bazel: cold build ...", file=sys.stderr)
        first = bazel(project, "bazel-alice")
        steps = [_scale_step(first, "cold build", logs / "cold.json", _started(first), disk, shared)]
        steps.append(_scale_step(first, "no-op rebuild", logs / "noop.json", 0.0, disk, shared))
        os.utime(kernel)
        steps.append(_scale_step(first, "touch one kernel", logs / "touch.json", 0.0, disk, shared))
        shutil.copy(edited, kernel)
        steps.append(_scale_step(first, "edit one kernel", logs / "edit.json", 0.0, disk, shared))
        shutil.copy(stock, kernel)
        first.run("build", disk, shared, "//:app", timeout=7200)
        first.shutdown()
        print("Bazel: warm local cache (--disk_cache, new output base) ...", file=sys.stderr)
        again = bazel(project, "bazel-alice-fresh")
        steps.append(_scale_step(again, "warm local cache", logs / "warm-local.json", _started(again), disk))
        again.shutdown()
        print("Bazel: warm remote cache, second checkout ...", file=sys.stderr)
        other = bazel(second, "bazel-bob")
        steps.append(_scale_step(other, "warm remote cache", logs / "warm-remote.json", _started(other), shared))
        return steps
    finally:
        for instance in instances:
            instance.shutdown()


def _table(steps: list[Step]) -> str:
    lines = ["| workspace | step | seconds | processes |", "| --- | --- | ---: | ---: |"]
    lines += [f"| {s.workspace} | {s.step} | {s.seconds:.2f} | {s.processes} |" for s in steps]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=200, help="kernels in the generated package")
    parser.add_argument("--gpu-names", default="sm_90", help="comma-separated GPU targets")
    parser.add_argument("--json", type=Path, help="also write the measurements here")
    parser.add_argument("--skip-example", action="store_true")
    parser.add_argument("--skip-package", action="store_true")
    parser.add_argument("--tileiras-root", type=Path, default=REPO_ROOT,
                        help="the tileiras checkout to measure, copied first (default: this one)")
    args = parser.parse_args(argv)
    gpus = args.gpu_names.split(",")
    steps: list[Step] = []
    with tempfile.TemporaryDirectory(prefix="tileir-bazel-bench-") as tmp:
        root = Path(tmp)
        tileiras_root = _snapshot(args.tileiras_root, root / "tileiras")
        if not args.skip_example:
            example = copy_example(root / "example")
            set_gpu_names(example, gpus)
            steps += _measure("example (2 kernels)", example, root / "example_state", "//:vector_demo",
                              example / "kernels" / "vscale.tileirbc", "vscale", tileiras_root)
            print(_table(steps), flush=True)
        if not args.skip_package:
            package = _generated_package(root / "package", args.kernels, gpus)
            steps += _measure(f"package ({args.kernels} kernels)", package, root / "package_state", "//:app",
                              package / "kernels" / "k001.tileirbc", "vscale", tileiras_root)
    print()
    print(f"Bazel 4.2.3, gpu_names = {gpus}, {args.kernels}-kernel package")
    print(_table(steps))
    if args.json:
        args.json.write_text(json.dumps([asdict(s) for s in steps], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
