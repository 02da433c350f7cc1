"""Build-system scale: a generated CMake project of many TileIR kernels, timed.

    python benchmarks/build_scale.py [--kernels 200] [--per-target 10] [--generator Ninja]
                                     [--tileir-dir DIR] [--work DIR] [--json FILE] [--check]

The project has KERNELS distinct cuTile kernels (exported once to bytecode,
not timed), PER-TARGET of them per add_tileir_kernel() library, and a C
program that links every library. One run reports:

    cold build           fresh build directory, empty compile cache
    no-op rebuild        nothing changed                          goal < 1 s
    touch one kernel     its mtime changes, its content does not  goal < 2 s
    edit one kernel      new content: a real compile of one kernel
    warm fresh build     fresh build directory, warm compile cache  goal >= 10x faster than cold

Build times are `cmake --build` wall times; configure times are listed
separately (they include compiling the cache client once per build tree; the
warm fresh build's actions are answered by the cache server it starts, see
build_rules/README.md). Each rebuild also reports how many TileIR actions ran, so a
"fast" no-op that skipped work it should have done cannot hide. --check
exits 1 when a goal is missed.
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
ACTION = re.compile(r"TileIR (PTX|cubin|object|header) ")
GOALS = {"noop_s": 1.0, "touch_one_s": 2.0, "warm_speedup": 10.0}

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


@dataclass
class Step:
    name: str
    configure_s: float
    build_s: float
    actions: int


def export_kernels(out_dir: Path, first: int, count: int, salt: int) -> None:
    """Distinct kernels k<first>..: y = x * (i + 2) + salt (cuTile, no GPU needed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / "export_kernels.py"  # cuTile reads the kernel's source file
    script.write_text(KERNEL_SOURCE)
    subprocess.run([sys.executable, str(script), str(out_dir), str(first), str(count), str(salt)], check=True)
    script.unlink()


def write_project(root: Path, kernels: int, per_target: int) -> None:
    targets = []
    lines = ["cmake_minimum_required(VERSION 3.20)", "project(build_scale LANGUAGES C)",
             "find_package(TileIR CONFIG REQUIRED)"]
    for t, first in enumerate(range(0, kernels, per_target)):
        names = [f"kernels/k{i:04d}.tileirbc" for i in range(first, min(first + per_target, kernels))]
        lines.append(f"add_tileir_kernel(lib{t:03d} SOURCES {' '.join(names)})")
        targets.append(t)
    lines.append("add_executable(app main.c)")
    lines.append("target_link_libraries(app PRIVATE " + " ".join(f"lib{t:03d}" for t in targets) + ")")
    (root / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    includes = "".join(f'#include "lib{t:03d}.h"\n' for t in targets)
    pointers = ", ".join(f"(void*)k{i:04d}_launch" for i in range(kernels))
    (root / "main.c").write_text(f"#include <stdio.h>\n{includes}\nint main(void) {{\n"
                                 f"  void* launchers[] = {{{pointers}}};\n"
                                 f'  printf("%d launchers\\n", (int)(sizeof launchers / sizeof launchers[0]));\n'
                                 "  return 0;\n}\n")


class Runner:
    def __init__(self, source: Path, generator: str, tileir_dir: Path, python: str, cache: Path) -> None:
        self.source, self.generator, self.tileir_dir, self.python = source, generator, tileir_dir, python
        self.env = dict(os.environ, TILEIRAS_CACHE_DIR=str(cache))
        self.cmake = shutil.which("cmake", path=str(Path(sys.executable).parent)) or "cmake"

    def _run(self, args: list[str]) -> tuple[float, str]:
        start = time.perf_counter()
        result = subprocess.run(args, capture_output=True, text=True, env=self.env)
        elapsed = time.perf_counter() - start
        output = result.stdout + result.stderr
        if result.returncode != 0:
            raise SystemExit(f"build_scale: {' '.join(args[:3])} failed:\n{output[-4000:]}")
        return elapsed, output

    def configure(self, build: Path) -> float:
        return self._run([self.cmake, "-S", str(self.source), "-B", str(build), "-G", self.generator,
                          f"-DTileIR_DIR={self.tileir_dir}", f"-DTileIR_PYTHON={self.python}"])[0]

    def build(self, build: Path) -> tuple[float, int]:
        args = [self.cmake, "--build", str(build), "--parallel", str(os.cpu_count() or 2)]
        elapsed, output = self._run(args)
        return elapsed, len(ACTION.findall(output))


def touch(path: Path) -> None:
    time.sleep(0.05)
    now = time.time_ns()
    os.utime(path, ns=(now, now))


def run(args: argparse.Namespace, work: Path) -> list[Step]:
    source = work / "project"
    kernels_dir = source / "kernels"
    stock = work / "stock"
    if not (stock / f"k{args.kernels - 1:04d}.tileirbc").exists():
        print(f"exporting {args.kernels} kernels with cuTile ...", file=sys.stderr)
        export_kernels(stock, 0, args.kernels, salt=1)
        export_kernels(work / "edited", 0, 1, salt=7)
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(stock, kernels_dir)
    write_project(source, args.kernels, args.per_target)
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    runner = Runner(source, args.generator, args.tileir_dir, args.python, cache)
    steps: list[Step] = []

    cold = work / "build-cold"
    shutil.rmtree(cold, ignore_errors=True)
    configure_s = runner.configure(cold)
    print("cold build ...", file=sys.stderr)
    steps.append(Step("cold build", configure_s, *runner.build(cold)))
    steps.append(Step("no-op rebuild", 0.0, *runner.build(cold)))
    touch(kernels_dir / "k0000.tileirbc")
    steps.append(Step("touch one kernel", 0.0, *runner.build(cold)))
    time.sleep(0.05)
    shutil.copy(work / "edited" / "k0000.tileirbc", kernels_dir / "k0000.tileirbc")
    steps.append(Step("edit one kernel", 0.0, *runner.build(cold)))
    shutil.copy(stock / "k0000.tileirbc", kernels_dir / "k0000.tileirbc")
    runner.build(cold)  # back to the stock kernel (a cache hit), so the warm build below is all hits

    warm = work / "build-warm"
    shutil.rmtree(warm, ignore_errors=True)
    configure_s = runner.configure(warm)
    print("warm fresh build ...", file=sys.stderr)
    steps.append(Step("warm fresh build", configure_s, *runner.build(warm)))
    return steps


def report(steps: list[Step], args: argparse.Namespace) -> tuple[str, dict[str, object], bool]:
    by_name = {s.name: s for s in steps}
    speedup = by_name["cold build"].build_s / max(by_name["warm fresh build"].build_s, 1e-9)
    figures = {"noop_s": by_name["no-op rebuild"].build_s, "touch_one_s": by_name["touch one kernel"].build_s,
               "warm_speedup": speedup}
    met = {"noop_s": figures["noop_s"] < GOALS["noop_s"], "touch_one_s": figures["touch_one_s"] < GOALS["touch_one_s"],
           "warm_speedup": speedup >= GOALS["warm_speedup"]}
    lines = [f"build_scale: {args.kernels} kernels, {args.per_target} per target, {args.generator}, "
             f"{os.cpu_count()} CPUs",
             f"{'step':<20} {'configure s':>12} {'build s':>9} {'TileIR actions':>15}"]
    for step in steps:
        configure = f"{step.configure_s:.2f}" if step.configure_s else "-"
        lines.append(f"{step.name:<20} {configure:>12} {step.build_s:>9.2f} {step.actions:>15}")
    lines.append(f"no-op {figures['noop_s']:.2f} s (goal < 1 s: {'met' if met['noop_s'] else 'MISSED'}); "
                 f"touch one {figures['touch_one_s']:.2f} s (goal < 2 s: {'met' if met['touch_one_s'] else 'MISSED'}); "
                 f"warm fresh build {speedup:.1f}x faster than cold "
                 f"(goal >= 10x: {'met' if met['warm_speedup'] else 'MISSED'})")
    data = {"kernels": args.kernels, "per_target": args.per_target, "generator": args.generator,
            "cpus": os.cpu_count(), "steps": [asdict(s) for s in steps], "figures": figures, "goals_met": met}
    return "\n".join(lines), data, all(met.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", type=int, default=200)
    parser.add_argument("--per-target", type=int, default=10)
    parser.add_argument("--generator", default="Ninja")
    parser.add_argument("--tileir-dir", type=Path, default=REPO / "cmake", help="directory of TileIRConfig.cmake")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the compiler")
    parser.add_argument("--work", type=Path, help="work directory (kept; default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args(argv)
    if args.kernels < 1 or args.per_target < 1:
        parser.error("--kernels and --per-target must be positive")
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        steps = run(args, args.work)
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
