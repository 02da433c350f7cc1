"""Compile cache: --no-cache, a miss into an empty cache, and a hit, side by side (whole processes).

For each kernel (bytecode -> cubin, so lowering, LLVM and ptxas all run on a
miss), every round runs the three commands back to back in a rotating order:
`--no-cache`; a compile into an empty cache directory (a miss: it pays for
whatever the cache adds, and stores the results); a compile served from a warm
cache (a hit). A round's miss is paired with its own --no-cache run, so the
miss overhead (miss - no-cache) is measured under the same machine load; the
table shows the medians over the rounds, and the CPU time the miss adds (less disturbed by other
work on a shared machine than the wall time). Goals: a miss costs at most 5 ms more
than --no-cache (issue 13: "a cold cache must cost nothing"), a hit is under
50 ms.

On a shared machine the wall times of a few milliseconds drown in other work's: `--instructions`
also counts, under valgrind (callgrind), the instructions the compiler's own processes execute
(the driver and its LLVM worker, each instruction once; ptxas, which a miss does not change, is not
traced) for
--no-cache, a miss and a hit: a count other work does not disturb.
`--installed` measures a wheel of the checkout installed with pip (into a temporary `--target`), as a
user runs it: our code is then identified by its installer's RECORD (one stat) rather than by a stat
of each of its files, as in a source checkout or an editable install.
Run: `python benchmarks/cache.py [--gpu-name sm_90] [--repeats 7] [--kernel softmax ...] [--limit N]
[--instructions] [--installed]`.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import resource
except ImportError:  # Windows: wall time only
    resource = None  # type: ignore[assignment]

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, corpus_files, geomean, our_command, print_table  # noqa: E402

MISS_OVERHEAD_GOAL_S = 0.005
HIT_GOAL_S = 0.050
MODES = ("no-cache", "miss", "hit")
SEARCH_PATH = {"PYTHONPATH": str(ROOT)}  # where the measured processes import tileiras from (--installed: a pip target)


def _children_cpu() -> float:
    if resource is None:
        return 0.0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole process; the CPU time counts the processes it
    waited for (ptxas), and is less disturbed than the wall time by other work on the machine."""
    env = dict(os.environ, **SEARCH_PATH)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as in a build: a stale .pyc is compiled once, not every run
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed: {done.stderr.decode()[-400:]}")
    return elapsed, _children_cpu() - cpu


def measure(path: Path, gpu: str, rounds: int, work: Path) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of each mode per round, for one kernel."""
    base = [*our_command("tileiras"), "--gpu-name", gpu, str(path), "-o", str(work / "k.cubin")]
    empty, warm = work / "empty-cache", work / "warm-cache"
    shutil.rmtree(warm, ignore_errors=True)
    commands = {"no-cache": [*base, "--no-cache"], "miss": [*base, "--cache-dir", str(empty)],
                "hit": [*base, "--cache-dir", str(warm)]}
    run_once(commands["hit"])  # fills the warm cache
    times: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
    for index in range(rounds):
        for mode in MODES[index % 3:] + MODES[:index % 3]:  # no mode always runs first
            shutil.rmtree(empty, ignore_errors=True)
            times[mode].append(run_once(commands[mode]))
    return times


def instructions(path: Path, gpu: str, work: Path) -> dict[str, int]:
    """Instructions executed by the driver process and the processes it forks (callgrind), per mode:
    --no-cache, a miss into an empty cache and a hit (each after an untraced run of the same command,
    so that bytecode caches and the tools' digests are in place, as in a build)."""
    base = [*our_command("tileiras"), "--gpu-name", gpu, str(path), "-o", str(work / "k.cubin")]
    counts: dict[str, int] = {}
    for mode, extra in (("no-cache", ["--no-cache"]), ("miss", ["--cache-dir", str(work / "cold")]),
                        ("hit", ["--cache-dir", str(work / "warm")])):
        shutil.rmtree(work / "cold", ignore_errors=True)
        run_once([*base, *extra])
        shutil.rmtree(work / "cold", ignore_errors=True)
        for old in glob.glob(str(work / "callgrind.*")):
            os.unlink(old)
        # a forked child's profile starts with its parent's counts: dumping (and zeroing) them just
        # before each fork counts the instructions before a fork once, in the parent's part files
        run_once(["valgrind", "--tool=callgrind", "--trace-children=no", "--dump-before=PyOS_BeforeFork",
                  f"--callgrind-out-file={work}/callgrind.%p", *base, *extra])
        counts[mode] = 0
        for out in glob.glob(str(work / "callgrind.*")):
            with open(out, encoding="utf-8", errors="replace") as handle:
                found = re.search(r"^(?:summary|totals): (\d+)", handle.read(), re.MULTILINE)
            counts[mode] += int(found.group(1)) if found else 0
    shutil.rmtree(work / "warm", ignore_errors=True)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-name", default="sm_90")
    parser.add_argument("--repeats", type=int, default=7, help="rounds per kernel (medians are shown)")
    parser.add_argument("--kernel", action="append", default=[], help="only this corpus kernel (repeatable)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N kernels")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of --no-cache, a miss and a hit under valgrind (slow)")
    parser.add_argument("--installed", action="store_true",
                        help="measure a wheel of the checkout installed with pip, not the checkout itself")
    args = parser.parse_args()
    files = [(name, path) for name, path in corpus_files() if not args.kernel or name in args.kernel]
    if args.limit:
        files = files[: args.limit]
    rows, overheads, hits, counted = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="tileiras-cache-bench-") as tmp:
        if args.installed:
            site = Path(tmp) / "site"
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                            "--no-index", "--target", str(site), str(ROOT)], check=True)
            SEARCH_PATH["PYTHONPATH"] = str(site)
        for name, path in files:
            if args.instructions and shutil.which("valgrind"):
                try:
                    counts = instructions(path, args.gpu_name, Path(tmp))
                except RuntimeError:
                    counts = {}
                if counts:
                    added = counts["miss"] - counts["no-cache"]
                    counted.append((name, f"{counts['no-cache'] / 1e6:.1f} M", f"{counts['miss'] / 1e6:.1f} M",
                                    f"{added / 1e6:+.1f} M", f"{added / counts['no-cache'] * 100:+.2f} %",
                                    f"{counts['hit'] / 1e6:.1f} M"))
            try:
                times = measure(path, args.gpu_name, args.repeats, Path(tmp))
            except RuntimeError as exc:
                rows.append((name, "-", "-", "-", "-", "-", "-", f"skipped: {str(exc).splitlines()[-1][:60]}"))
                continue
            plain, miss, hit = (statistics.median(wall for wall, _ in times[mode]) for mode in MODES)
            overhead = statistics.median(m[0] - p[0] for m, p in zip(times["miss"], times["no-cache"]))
            cpu_overhead = statistics.median(m[1] - p[1] for m, p in zip(times["miss"], times["no-cache"]))
            overheads.append(overhead)
            hits.append(hit)
            verdict = ["ok" if overhead <= MISS_OVERHEAD_GOAL_S else "miss over +5 ms"]
            if hit >= HIT_GOAL_S:
                verdict.append("hit over 50 ms")
            rows.append((name, f"{plain * 1000:.0f} ms", f"{miss * 1000:.0f} ms", f"{overhead * 1000:+.1f} ms",
                         f"{cpu_overhead * 1000:+.1f} ms", f"{hit * 1000:.0f} ms", f"{hit / plain:.2f}",
                         ", ".join(verdict)))
    where = "an installed wheel" if args.installed else "the checkout"
    print_table(f"compile cache, bytecode -> cubin, {args.gpu_name}, {where}, whole process, median of {args.repeats} rounds",
                ("kernel", "--no-cache", "miss", "miss - no-cache", "(CPU)", "hit", "hit/no-cache", "goals"), rows)
    if counted:
        print_table(f"instructions of the driver and its LLVM worker (callgrind), {args.gpu_name}",
                    ("kernel", "--no-cache", "miss", "miss - no-cache", "of --no-cache", "hit"), counted)
    if hits:
        print(f"miss - no-cache (paired per round): median {statistics.median(overheads) * 1000:+.1f} ms, "
              f"worst {max(overheads) * 1000:+.1f} ms over {len(overheads)} kernels "
              f"(goal <= {MISS_OVERHEAD_GOAL_S * 1000:.0f} ms); hit: geomean {geomean(hits) * 1000:.0f} ms, "
              f"worst {max(hits) * 1000:.0f} ms (goal < {HIT_GOAL_S * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
