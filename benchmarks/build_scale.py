"""Build-system scale: one generated project of many TileIR kernels, built by CMake+Ninja and by Bazel.

    python benchmarks/build_scale.py [--kernels 1000 | --quick] [--per-target 10] [--systems cmake,bazel]
                                     [--work DIR] [--json FILE] [--check]

The project has KERNELS distinct cuTile kernels (exported once to bytecode,
not timed), PER-TARGET of them per library (add_tileir_kernel() /
tileir_library()), and a C program that links every library. A BuildGrid
server on loopback (scripts/remote-cache.yml) is the team's shared cache:
CMake reaches it through the compile cache's remote tier
(-DTileIR_REMOTE_CACHE), Bazel through --remote_cache. For each build system:

    cold build           fresh build tree, empty caches; fills the local and the remote cache
    no-op rebuild        nothing changed                                 goal < 1 s
    touch one kernel     its mtime changes, its content does not         goal < 2 s
    edit one kernel      new content: one kernel really compiled
    warm local cache     fresh build tree, the local cache warm          goal >= 10x faster than cold
                         (CMake: the compile cache; Bazel: --disk_cache, new output base)
    warm remote cache    a second checkout at another path, fresh build tree, empty local cache,
                         only the remote warm                            goal >= 5x faster than cold

Times are build wall times (CMake's configure and Bazel's server start are
listed apart). "actions" counts the TileIR actions the build system ran or
looked up; "processes" counts the compiler processes actually started
(CMake: tileiras/tileir Pythons started, not counting the cache server's answers;
Bazel: TileIR spawns in --execution_log_json_file that no cache answered), so
a fast step that skipped work it should have done cannot hide. --check exits
1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

ACTION = re.compile(r"TileIR (PTX|cubin|object|header) ")
GOALS = {"noop_s": 1.0, "touch_one_s": 2.0, "warm_local_speedup": 10.0, "warm_remote_speedup": 5.0}
QUICK_KERNELS = 40

KERNEL_SOURCE = '''
import sys
import cuda.tile as ct
from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, export_kernel

@ct.kernel
def axpb(x, y, a: ct.Constant[int], b: ct.Constant[int]):
    bid = ct.bid(0)
    v = ct.load(x, index=(bid,), shape=(256,))
    ct.store(y, index=(bid,), tile=v * a + b)

arr = ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                      may_alias_internally=False)
out_dir, first, count, salt = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for i in range(first, first + count):
    sig = KernelSignature([arr, arr, i + 2, salt], CallingConvention.cutile_python_v1(), symbol=f"k{i:04d}")
    export_kernel(axpb, [sig], f"{out_dir}/k{i:04d}.tileirbc", output_format="tileir_bytecode",
                  bytecode_version="13.4")
'''

# On PYTHONPATH of the CMake builds: every Python that starts logs its command line (the
# cache server's answers start none; an interpreter wrapper would keep the server from answering).
COUNTER = """import os
with open({log!r}, "ab") as _log:
    _log.write(open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ") + b"\\n")
"""


@dataclass
class Step:
    system: str
    name: str
    setup_s: float    # CMake: configure; Bazel: server start
    build_s: float
    actions: int      # TileIR actions run or looked up
    processes: int    # compiler processes actually started


def export_kernels(out_dir: Path, first: int, count: int, salt: int) -> None:
    """Distinct kernels k<first>..: y = x * (i + 2) + salt (cuTile, no GPU needed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / "export_kernels.py"  # cuTile reads the kernel's source file
    script.write_text(KERNEL_SOURCE)
    subprocess.run([sys.executable, str(script), str(out_dir), str(first), str(count), str(salt)], check=True)
    script.unlink()


def _groups(kernels: int, per_target: int) -> list[list[str]]:
    return [[f"k{i:04d}" for i in range(first, min(first + per_target, kernels))]
            for first in range(0, kernels, per_target)]


def write_project(root: Path, kernels: int, per_target: int) -> None:
    """CMakeLists.txt and a Bazel workspace over the same kernels, libraries and main.c."""
    groups = _groups(kernels, per_target)
    lines = ["cmake_minimum_required(VERSION 3.20)", "project(build_scale LANGUAGES C)",
             "find_package(TileIR CONFIG REQUIRED)"]
    build = ['load("@tileiras//bazel:defs.bzl", "tileir_library")', ""]
    for t, names in enumerate(groups):
        sources = [f"kernels/{n}.tileirbc" for n in names]
        lines.append(f"add_tileir_kernel(lib{t:03d} SOURCES {' '.join(sources)})")
        build.append(f'tileir_library(name = "lib{t:03d}", srcs = {json.dumps(sources)}, gpu_names = ["sm_90"])')
    libs = [f"lib{t:03d}" for t in range(len(groups))]
    lines += ["add_executable(app main.c)", "target_link_libraries(app PRIVATE " + " ".join(libs) + ")"]
    build.append(f'cc_binary(name = "app", srcs = ["main.c"], deps = {json.dumps([":" + lib for lib in libs])})')
    (root / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    (root / "BUILD.bazel").write_text("\n".join(build) + "\n")
    (root / "WORKSPACE").write_text((REPO / "examples" / "bazel" / "WORKSPACE").read_text())
    includes = "".join(f'#include "{lib}.h"\n' for lib in libs)
    pointers = ", ".join(f"(void*){n}_launch" for names in groups for n in names)
    (root / "main.c").write_text(f"#include <stdio.h>\n{includes}\nint main(void) {{\n"
                                 f"  void* launchers[] = {{{pointers}}};\n"
                                 f'  printf("%d launchers\\n", (int)(sizeof launchers / sizeof launchers[0]));\n'
                                 "  return 0;\n}\n")


def touch(path: Path) -> None:
    time.sleep(0.05)
    now = time.time_ns()
    os.utime(path, ns=(now, now))


# --- CMake + Ninja ---------------------------------------------------------------------


class CMakeRunner:
    def __init__(self, tileir_dir: Path, python: str, work: Path, remote: str) -> None:
        self.tileir_dir, self.remote, self.python = tileir_dir, remote, python
        self.log = work / "cmake-processes.log"
        self.counter = work / "process-counter"
        self.counter.mkdir(exist_ok=True)
        (self.counter / "sitecustomize.py").write_text(COUNTER.format(log=str(self.log)))
        self.cmake = shutil.which("cmake", path=str(Path(sys.executable).parent)) or "cmake"

    def _run(self, args: list[str], cache: Path) -> tuple[float, str]:
        env = dict(os.environ, TILEIRAS_CACHE_DIR=str(cache), PYTHONPATH=str(self.counter))
        start = time.perf_counter()
        result = subprocess.run(args, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - start
        output = result.stdout + result.stderr
        if result.returncode != 0:
            raise SystemExit(f"build_scale: {' '.join(args[:3])} failed:\n{output[-4000:]}")
        return elapsed, output

    def configure(self, source: Path, build: Path, cache: Path, remote: bool) -> float:
        return self._run([self.cmake, "-S", str(source), "-B", str(build), "-G", "Ninja",
                          f"-DTileIR_DIR={self.tileir_dir}", f"-DTileIR_PYTHON={self.python}",
                          f"-DTileIR_REMOTE_CACHE={self.remote if remote else ''}"], cache)[0]

    def build(self, name: str, build: Path, cache: Path, setup_s: float = 0.0) -> Step:
        self.log.write_text("")
        args = [self.cmake, "--build", str(build), "--parallel", str(os.cpu_count() or 2)]
        elapsed, output = self._run(args, cache)
        if "tileiras: warning" in output:
            print(f"build_scale: warning in {name}:\n" + "\n".join(
                line for line in output.splitlines() if "tileiras: warning" in line)[:2000], file=sys.stderr)
        started = [line for line in self.log.read_text().splitlines()
                   if " tileiras " in line or " tileir " in line]  # not the cache server, not CMake's planner
        return Step("CMake+Ninja", name, setup_s, elapsed, len(ACTION.findall(output)), len(started))


def measure_cmake(work: Path, project: Path, second: Path, stock: Path, edited: Path, remote: str,
                  tileir_dir: Path, python: str) -> list[Step]:
    runner = CMakeRunner(tileir_dir, python, work, remote)
    cache = work / "cmake-cache"
    shutil.rmtree(cache, ignore_errors=True)
    kernel = project / "kernels" / "k0000.tileirbc"
    cold = work / "cmake-build-cold"
    steps = []
    print("CMake: cold build ...", file=sys.stderr)
    steps.append(runner.build("cold build", cold, cache, runner.configure(project, cold, cache, remote=True)))
    steps.append(runner.build("no-op rebuild", cold, cache))
    touch(kernel)
    steps.append(runner.build("touch one kernel", cold, cache))
    shutil.copy(edited, kernel)
    steps.append(runner.build("edit one kernel", cold, cache))
    shutil.copy(stock, kernel)
    runner.build("(back to the stock kernel)", cold, cache)

    print("CMake: warm local cache ...", file=sys.stderr)
    warm = work / "cmake-build-warm"
    steps.append(runner.build("warm local cache", warm, cache, runner.configure(project, warm, cache, remote=False)))

    print("CMake: warm remote cache, second checkout ...", file=sys.stderr)
    other_cache = work / "cmake-cache-second-machine"
    shutil.rmtree(other_cache, ignore_errors=True)
    remote_build = work / "cmake-build-second"
    steps.append(runner.build("warm remote cache", remote_build, other_cache,
                              runner.configure(second, remote_build, other_cache, remote=True)))
    return steps


# --- report ------------------------------------------------------------------------------


def figures_of(steps: list[Step]) -> dict[str, float]:
    by = {s.name: s for s in steps}
    cold = by["cold build"].build_s
    return {"noop_s": by["no-op rebuild"].build_s, "touch_one_s": by["touch one kernel"].build_s,
            "warm_local_speedup": cold / max(by["warm local cache"].build_s, 1e-9),
            "warm_remote_speedup": cold / max(by["warm remote cache"].build_s, 1e-9)}


def goals_met(figures: dict[str, float]) -> dict[str, bool]:
    return {name: (figures[name] < goal if name.endswith("_s") else figures[name] >= goal)
            for name, goal in GOALS.items()}


def report(steps: list[Step], args: argparse.Namespace) -> tuple[str, dict[str, object], bool]:
    systems = list(dict.fromkeys(s.system for s in steps))
    names = list(dict.fromkeys(s.name for s in steps))
    cell = {(s.system, s.name): s for s in steps}
    header = "| step | " + " | ".join(f"{sy} build s | setup s | actions | processes" for sy in systems) + " |"
    lines = [f"build_scale: {args.kernels} kernels, {args.per_target} per library, gpu sm_90, "
             f"{os.cpu_count()} CPUs (setup: CMake configure / Bazel server start)", "",
             header, "| --- |" + " ---: | ---: | ---: | ---: |" * len(systems)]
    for name in names:
        row = [name]
        for system in systems:
            s = cell.get((system, name))
            row += [f"{s.build_s:.2f}", f"{s.setup_s:.2f}" if s.setup_s else "-", str(s.actions),
                    str(s.processes)] if s else ["-"] * 4
        lines.append("| " + " | ".join(row) + " |")
    data: dict[str, object] = {"kernels": args.kernels, "per_target": args.per_target, "cpus": os.cpu_count(),
                               "steps": [asdict(s) for s in steps], "figures": {}, "goals_met": {}}
    ok = True
    lines.append("")
    for system in systems:
        figures = figures_of([s for s in steps if s.system == system])
        met = goals_met(figures)
        ok = ok and all(met.values())
        data["figures"][system], data["goals_met"][system] = figures, met  # type: ignore[index]
        lines.append(f"{system}: no-op {figures['noop_s']:.2f} s, touch one {figures['touch_one_s']:.2f} s, "
                     f"warm local {figures['warm_local_speedup']:.1f}x, "
                     f"warm remote {figures['warm_remote_speedup']:.1f}x faster than cold; goals "
                     + ", ".join(f"{k} {'met' if v else 'MISSED'}" for k, v in met.items()))
    return "\n".join(lines), data, ok


# --- driver ------------------------------------------------------------------------------


def run(args: argparse.Namespace, work: Path) -> list[Step]:
    from remote_support import buildgrid_server

    stock = work / "stock"
    if not (stock / f"k{args.kernels - 1:04d}.tileirbc").exists():
        print(f"exporting {args.kernels} kernels with cuTile ...", file=sys.stderr)
        export_kernels(stock, 0, args.kernels, salt=1)
    if not (work / "edited" / "k0000.tileirbc").exists():
        export_kernels(work / "edited", 0, 1, salt=7)
    checkouts = []
    for name in ("alice/project", "elsewhere/bob/checkout"):  # the second one: another path, another user
        project = work / name
        shutil.rmtree(project, ignore_errors=True)
        project.mkdir(parents=True)
        shutil.copytree(stock, project / "kernels")
        write_project(project, args.kernels, args.per_target)
        checkouts.append(project)
    from bazel_scale import measure_scale, snapshot

    # The compiler both build systems run: a frozen copy, so that edits to the checkout
    # during a run cannot change it (its fingerprint is in every cache key).
    compiler = snapshot(args.tileiras_root, work / "tileiras")
    tileir_dir = args.tileir_dir or compiler / "cmake"
    steps: list[Step] = []
    with buildgrid_server(work / "buildgrid", lifetime=4 * 3600) as remote:
        print(f"remote cache: BuildGrid at {remote}", file=sys.stderr)
        kernel = "k0000.tileirbc"
        if "cmake" in args.systems:
            steps += measure_cmake(work, *checkouts, stock / kernel, work / "edited" / kernel, remote,
                                   tileir_dir, args.python)
            print(report(steps, args)[0], file=sys.stderr)
        if "bazel" in args.systems:
            steps += measure_scale(work, *checkouts, stock / kernel, work / "edited" / kernel, remote, compiler)
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_KERNELS} kernels (overrides --kernels)")
    parser.add_argument("--per-target", type=int, default=10)
    parser.add_argument("--systems", default="cmake,bazel", help="comma-separated: cmake, bazel")
    parser.add_argument("--tileiras-root", type=Path, default=REPO,
                        help="the tileiras checkout to measure, copied first (default: this one)")
    parser.add_argument("--tileir-dir", type=Path, help="directory of TileIRConfig.cmake (default: the copy's)")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the compiler")
    parser.add_argument("--work", type=Path, help="work directory (kept; default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args(argv)
    if args.quick:
        args.kernels = QUICK_KERNELS
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if args.kernels < 1 or args.per_target < 1:
        parser.error("--kernels and --per-target must be positive")
    if not args.systems or set(args.systems) - {"cmake", "bazel"}:
        parser.error("--systems takes cmake, bazel or both")
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        steps = run(args, args.work.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="tileir-build-scale-") as tmp:
            steps = run(args, Path(tmp))
    text, data, ok = report(steps, args)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(data, indent=2) + "\n")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
