"""Compile cache: --no-cache, a miss into an empty cache, and a hit, side by side (whole processes).

For each kernel (bytecode -> cubin, so lowering, LLVM and ptxas all run on a
miss), every round runs the three commands back to back, in each of the six
orders in turn (each mode follows each other mode equally often):
`--no-cache`; a compile into an empty cache directory (a miss: it pays for
whatever the cache adds, and stores the results); a compile served from a warm
cache (a hit). The table shows, per mode, the median wall time and CPU time
of the whole compile, and miss - no-cache and hit - no-cache paired per round
(each round's runs share the machine's load). The CPU time counts every
process of a compile to its end: the driver, ptxas, and the LLVM worker,
which the driver does not wait for (it exits at once; the worker dies with
it): on Linux this process adopts such orphans (PR_SET_CHILD_SUBREAPER), reaps
them with their CPU time, and starts the next run only once all are gone
(otherwise a worker's exit would overlap, and slow, the next run). Goals: a
miss costs at most 5 ms more CPU than --no-cache (issue 13: "a cold cache must
cost nothing"), a hit is under 50 ms.

On a shared machine the wall times of a few milliseconds drown in other work's: `--instructions`
also counts, under valgrind (callgrind), the instructions the compiler's own processes execute
(the driver and its LLVM worker, each instruction once, the worker's to its end; ptxas, which
assembles the same PTX in every mode, is not traced) for
--no-cache, a miss and a hit: a count other work does not disturb.
`--installed` measures a wheel of the checkout installed with pip (into a temporary `--target`), as a
user runs it: our code is then identified by its installer's RECORD (one stat) rather than by a stat
of each of its files, as in a source checkout or an editable install.
The critical path: a miss's extra work costs its wall time only where the driver works alone. The
driver forks the LLVM worker, hands it the LLVM IR, reads the PTX back, starts ptxas and reaps it;
callgrind dumps the driver's counts at each fork, read and waitpid, so its instructions split into
work before the worker's fork, beside the worker (up to the PTX's arrival), from the PTX to ptxas's
start, beside ptxas (up to its reaping) and after it. The first, third and last are the critical
path (nothing else runs); the others overlap a child that takes longer (the worker loads LLVM,
ptxas assembles), on a machine with a core free for each. Instructions are turned into milliseconds
with a rate measured in the same run: a process importing the driver's and the cache's modules,
counted under callgrind and timed (CPU) natively. A miss is measured into an empty cache and into a
used one (its lookups then make their keys). `--source DIR` (repeatable) measures other checkouts
in the same run, e.g. a `git worktree` of main beside a branch.
Run: `python benchmarks/cache.py [--gpu-name sm_90] [--repeats 7] [--kernel softmax ...] [--limit N]
[--instructions] [--installed] [--source DIR ...]`.
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


def _adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux's PR_SET_CHILD_SUBREAPER), so
    that the compiler's LLVM worker, which the compiler does not wait for (it exits without waiting, and
    the worker ends at its parent's death), is reaped here with its CPU time. Without it the worker's
    time is lost to init, and its exit overlaps the next measured run."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


ADOPTED = False  # set by main(): orphans come here (then the CPU counts every process)
ORPHAN_WAIT_S = 10.0  # a descendant that outlives its compile this long is left alone


def _reap_orphans() -> float:
    """CPU seconds of the orphaned descendants (the LLVM worker), once each has exited."""
    total, deadline = 0.0, time.monotonic() + ORPHAN_WAIT_S
    while True:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return total
        if pid:
            total += usage.ru_utime + usage.ru_stime
        elif time.monotonic() > deadline:
            return total
        else:
            time.sleep(0.001)


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole compile: its CPU counts every process it started, to its
    end (the driver, ptxas, which it waits for, and, adopted here, its LLVM worker, which it does not),
    and is less disturbed than the wall time by other work on the machine. The next run starts only
    once all of them are gone."""
    env = dict(os.environ, **SEARCH_PATH)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as in a build: a stale .pyc is compiled once, not every run
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - start
    orphans = _reap_orphans() if ADOPTED else 0.0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} failed: {done.stderr.decode()[-400:]}")
    return elapsed, _children_cpu() - cpu + orphans


# Each round runs the three modes in one of these orders, in turn: each mode follows each other
# mode equally often, so what a run leaves behind (the page cache, the processor's caches) favours none.
ORDERS = (("no-cache", "miss", "hit"), ("miss", "hit", "no-cache"), ("hit", "no-cache", "miss"),
          ("no-cache", "hit", "miss"), ("hit", "miss", "no-cache"), ("miss", "no-cache", "hit"))


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
        for mode in ORDERS[index % len(ORDERS)]:
            shutil.rmtree(empty, ignore_errors=True)
            times[mode].append(run_once(commands[mode]))
    return times


def _ms(seconds: float, sign: str = "") -> str:
    return f"{seconds * 1000:{sign}.1f}"


def timing_row(name: str, times: dict[str, list[tuple[float, float]]]) -> tuple[list[str], float, float, float]:
    """The table row of one kernel: each mode's median wall and CPU, then miss - no-cache and
    hit - no-cache paired per round (medians); and (miss - no-cache wall, its CPU, hit wall)."""
    medians = {mode: [statistics.median(t[i] for t in times[mode]) for i in (0, 1)] for mode in MODES}
    paired = {mode: [statistics.median(m[i] - p[i] for m, p in zip(times[mode], times["no-cache"])) for i in (0, 1)]
              for mode in ("miss", "hit")}
    miss_wall, miss_cpu = paired["miss"]
    hit = medians["hit"][0]
    verdict = ["ok" if miss_cpu <= MISS_OVERHEAD_GOAL_S else "miss CPU over +5 ms"]
    if hit >= HIT_GOAL_S:
        verdict.append("hit over 50 ms")
    row = [name, *(_ms(medians[mode][i]) for mode in MODES for i in (0, 1)),
           *(_ms(paired[mode][i], "+") for mode in ("miss", "hit") for i in (0, 1)), ", ".join(verdict)]
    return row, miss_wall, miss_cpu, hit


TIMING_HEADER = ("kernel", "--no-cache wall", "CPU", "miss wall", "CPU", "hit wall", "CPU",
                 "miss - no-cache wall", "CPU", "hit - no-cache wall", "CPU", "goals")


# callgrind dumps a process's counts (and zeroes them) at these points, so each part of the driver's
# profile is the work between two of them: a fork (the LLVM worker's, then ptxas's), a read (the
# worker's PTX arrives through one) and a waitpid (ptxas's exit is reaped by one).
DUMPS = ("--dump-before=PyOS_BeforeFork", "--dump-after=os_read", "--dump-after=os_waitpid", "--dump-before=os__exit")
SEGMENTS = ("before the worker", "beside the worker", "PTX -> ptxas", "beside ptxas", "after ptxas")
CRITICAL = ("before the worker", "PTX -> ptxas", "after ptxas")  # nothing else runs then


def _parts(work: Path) -> dict[int, list[tuple[int, str, int]]]:
    """pid -> its profile's parts in order: (part number, what ended it, instructions)."""
    found: dict[int, list[tuple[int, str, int]]] = {}
    for out in glob.glob(str(work / "callgrind.*")):
        with open(out, encoding="utf-8", errors="replace") as handle:
            text = handle.read(1 << 16)  # the header and, for a part, its totals are near the top
            if "totals:" not in text and "summary:" not in text:
                text += handle.read()
        fields = {name: re.search(rf"^{name}: *(.*)$", text, re.MULTILINE) for name in ("pid", "part", "desc: Trigger")}
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.MULTILINE)
        if not fields["pid"]:
            continue  # a file left empty: its process was killed before it wrote anything (its parts say all)
        pid = int(fields["pid"].group(1))
        part = int(fields["part"].group(1)) if fields["part"] else 1
        trigger = fields["desc: Trigger"].group(1) if fields["desc: Trigger"] else ""
        found.setdefault(pid, []).append((part, trigger, int(total.group(1)) if total else 0))
    return {pid: sorted(parts) for pid, parts in found.items()}


def _segments(parts: list[tuple[int, str, int]]) -> dict[str, int]:
    """The driver's instructions per SEGMENTS: before the worker's fork; while the worker runs (up to
    the last read before ptxas's fork: the PTX); from the PTX to ptxas's fork; while ptxas runs (up to
    the last waitpid: its exit); after ptxas. The first, third and last are the critical path: the
    driver works alone. (Without a ptxas fork, as on a hit, everything after the worker's fork is
    counted 'beside the worker'.)"""
    forks = [i for i, (_, trigger, _) in enumerate(parts) if "PyOS_BeforeFork" in trigger]
    bounds: dict[str, tuple[int, int]] = {}  # segment -> [first, last) part index
    if not forks:
        bounds["before the worker"] = (0, len(parts))
    else:
        first = forks[0] + 1
        bounds["before the worker"] = (0, first)
        if len(forks) < 2:
            bounds["beside the worker"] = (first, len(parts))
        else:
            spawn = forks[-1] + 1  # the one ptxas of a single target
            reads = [i for i in range(first, spawn) if "os_read" in parts[i][1]]
            ptx = reads[-1] + 1 if reads else first
            waits = [i for i in range(spawn, len(parts)) if "os_waitpid" in parts[i][1]]
            reaped = waits[-1] + 1 if waits else spawn
            bounds.update({"beside the worker": (first, ptx), "PTX -> ptxas": (ptx, spawn),
                           "beside ptxas": (spawn, reaped), "after ptxas": (reaped, len(parts))})
    return {name: sum(count for _, _, count in parts[low:high]) for name, (low, high) in bounds.items()}


def _empty(work: Path, used: bool) -> None:
    """The caches of a miss: "cold" empty, "used" holding entries of other compiles (its lookups
    then make their keys; none of its entries is this compile's)."""
    for name in ("cold", "used"):
        shutil.rmtree(work / name, ignore_errors=True)
    if used:
        (work / "used" / "v1" / "00").mkdir(parents=True)
        (work / "used" / "v1" / "00" / ("00" * 32)).write_bytes(b"an entry of another compile")


def _callgrind(argv: list[str], work: Path) -> dict[int, list[tuple[int, str, int]]]:
    for old in glob.glob(str(work / "callgrind.*")):
        os.unlink(old)
    # a forked child's profile starts with its parent's counts: dumping (and zeroing) them just
    # before each fork counts the instructions before a fork once, in the parent's part files
    run_once(["valgrind", "--tool=callgrind", "--trace-children=no", *DUMPS,
              f"--callgrind-out-file={work}/callgrind.%p", *argv])
    return _parts(work)


def instructions(path: Path, gpu: str, work: Path) -> dict[str, dict[str, int]]:
    """Instructions executed by the driver process and its LLVM worker (callgrind), per mode
    (--no-cache, a miss into an empty cache, a miss into a used one and a hit; each after an untraced run of the same command,
    so that bytecode caches and the tools' digests are in place, as in a build): the driver's per
    SEGMENTS, 'worker' (the LLVM worker; a hit's, killed, leaves no profile), 'total' and 'critical'
    (a hit's: all the driver's work, none of it overlaps useful work)."""
    base = [*our_command("tileiras"), "--gpu-name", gpu, str(path), "-o", str(work / "k.cubin")]
    counts: dict[str, dict[str, int]] = {}
    for mode, extra in (("no-cache", ["--no-cache"]), ("miss", ["--cache-dir", str(work / "cold")]),
                        ("miss, used cache", ["--cache-dir", str(work / "used")]),
                        ("hit", ["--cache-dir", str(work / "warm")])):
        _empty(work, used=False)
        run_once([*base, *extra])
        _empty(work, used=True)
        processes = _callgrind([*base, *extra], work)
        # the driver is the process that forks; its children (the LLVM worker) do not
        driver = max(processes, key=lambda pid: (sum("PyOS_BeforeFork" in t for _, t, _ in processes[pid]), -pid))
        row = dict.fromkeys(SEGMENTS, 0)
        row.update(_segments(processes[driver]))
        children = [parts for pid, parts in processes.items() if pid != driver]
        # a worker killed with the driver (PR_SET_PDEATHSIG: the slow traced worker may still be on its way
        # out then) loses its last part; the driver exits only after the worker's last reply, so what is
        # lost after the worker's last read (the end of its requests) is its exit alone. Complete then.
        complete = all(any(end in trigger for _, trigger, _ in parts for end in ("termination", "os__exit", "os_read"))
                       for parts in children)
        row["worker"] = sum(count for parts in children for _, _, count in parts) if complete else -1
        # a hit's worker is killed unused: all the driver does is its critical path
        row["critical"] = sum(row[name] for name in (SEGMENTS if mode == "hit" else CRITICAL))
        row["total"] = sum(row[name] for name in SEGMENTS) + row["worker"] if complete else -1
        counts[mode] = row
    shutil.rmtree(work / "warm", ignore_errors=True)
    return counts


# The rate that turns instructions into milliseconds: a process of the same kind of work as the
# cache's (imports of the driver's and the cache's modules, no children), counted under callgrind
# and timed (CPU) natively, in the same run as the counts it converts.
CALIBRATION = ("import tileiras.driver.tileiras_main, tileiras.driver.compile, tileiras.cache.store, "
               "tileiras.cache.keys, tileiras.cache.versions, tileiras.bytecode.sections, tileiras.codegen.ptxas")


def instruction_rate(work: Path, repeats: int) -> tuple[float, int, float]:
    """(instructions per millisecond of CPU, the calibration's instructions, its median CPU ms)."""
    argv = [sys.executable, "-c", CALIBRATION]
    env = dict(os.environ, **SEARCH_PATH)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(argv, env=env, check=True)  # bytecode caches in place
    cpu = []
    for _ in range(max(repeats, 5)):
        child = subprocess.Popen(argv, env=env)
        _, _, usage = os.wait4(child.pid, 0)
        child.returncode = 0
        cpu.append((usage.ru_utime + usage.ru_stime) * 1000)
    count = sum(c for parts in _callgrind(argv, work).values() for _, _, c in parts)
    median = statistics.median(cpu)
    return count / median, count, median


def _instruction_rows(name: str, counts: dict[str, dict[str, int]], per_ms: float) -> list[tuple[str, ...]]:
    """The per-mode rows of the instruction table, and miss - no-cache."""
    columns = (*SEGMENTS, "worker", "critical", "total")
    def cell(value: int, sign: str = "") -> str:
        return "?" if value is None else f"{value / 1e6:{sign}.2f}"

    rows = [(name, mode, *(cell(None if row[c] < 0 else row[c]) for c in columns), f"{row['critical'] / per_ms:.1f}")
            for mode, row in counts.items()]
    for miss in ("miss", "miss, used cache"):
        pair = (counts[miss], counts["no-cache"])
        delta = {c: None if min(r[c] for r in pair) < 0 else pair[0][c] - pair[1][c] for c in columns}
        rows.append((name, f"{miss} - no-cache", *(cell(delta[c], "+") for c in columns),
                     f"{delta['critical'] / per_ms:+.2f}"))
    return rows


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
    parser.add_argument("--source", action="append", default=[],
                        help="measure this checkout instead (repeatable: several side by side in one run, e.g. "
                             "a `git worktree` of main beside this branch)")
    args = parser.parse_args()
    global ADOPTED
    ADOPTED = _adopt_orphans()
    files = [(name, path) for name, path in corpus_files() if not args.kernel or name in args.kernel]
    if args.limit:
        files = files[: args.limit]
    rows, overheads, hits, counted = [], [], [], []
    added: dict[str, list[float]] = {}  # source -> critical-path ms a miss adds, per kernel
    whole: dict[str, list[float]] = {}  # source -> ms of the instructions a miss adds in the driver and the worker
    rate: tuple[float, int, float] | None = None
    sources = [Path(source).resolve() for source in args.source] or [ROOT]
    with tempfile.TemporaryDirectory(prefix="tileiras-cache-bench-") as tmp:
        for number, source in enumerate(sources):
            SEARCH_PATH["PYTHONPATH"] = str(source)
            if args.installed:
                site = Path(tmp) / f"site{number}"
                subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                                "--no-index", "--target", str(site), str(source)], check=True)
                SEARCH_PATH["PYTHONPATH"] = str(site)
            elif source != ROOT:
                subprocess.run([sys.executable, "-m", "compileall", "-q", str(source / "tileiras")], check=True)
            for kernel, path in files:
                name = kernel if len(sources) == 1 else f"{source.name}:{kernel}"
                if args.instructions and shutil.which("valgrind"):
                    try:
                        counts = instructions(path, args.gpu_name, Path(tmp))
                    except RuntimeError:
                        counts = {}
                    if counts:
                        if rate is None:
                            rate = instruction_rate(Path(tmp), args.repeats)
                        counted.extend(_instruction_rows(name, counts, rate[0]))
                        for miss in ("miss", "miss, used cache"):
                            added.setdefault(f"{source.name}, {miss}", []).append(
                                (counts[miss]["critical"] - counts["no-cache"]["critical"]) / rate[0])
                            if min(counts[miss]["total"], counts["no-cache"]["total"]) >= 0:
                                whole.setdefault(f"{source.name}, {miss}", []).append(
                                    (counts[miss]["total"] - counts["no-cache"]["total"]) / rate[0])
                try:
                    times = measure(path, args.gpu_name, args.repeats, Path(tmp))
                except RuntimeError as exc:
                    rows.append([name, *["-"] * (len(TIMING_HEADER) - 2), f"skipped: {str(exc).splitlines()[-1][:60]}"])
                    continue
                row, miss_wall, miss_cpu, hit = timing_row(name, times)
                rows.append(row)
                overheads.append((miss_wall, miss_cpu))
                hits.append(hit)
    where = "an installed wheel" if args.installed else "the checkout"
    counted_cpu = ("CPU: every process of the compile to its end (the driver, ptxas and the LLVM worker)" if ADOPTED
                   else "CPU: the driver and ptxas (the LLVM worker, never waited for, is not counted here)")
    print_table(f"compile cache, bytecode -> cubin, {args.gpu_name}, {where}, whole process, ms, median of "
                f"{args.repeats} rounds (differences paired per round); {counted_cpu}", TIMING_HEADER, rows)
    if counted:
        print_table(f"instructions (M) of the driver per segment and of its LLVM worker (callgrind), {args.gpu_name}; "
                    f"critical = the driver alone: {' + '.join(CRITICAL)}",
                    ("kernel", "mode", *SEGMENTS, "worker", "critical", "total", "critical ms"), counted)
        print(f"instructions -> ms: {rate[0] / 1000:.0f} M per CPU second, measured in this run: "  # type: ignore
              f"`python -c \"import <the driver's and the cache's modules>\"` is {rate[1] / 1e6:.1f} M "  # type: ignore
              f"instructions (callgrind) and {rate[2]:.1f} ms CPU (median of {max(args.repeats, 5)} native runs)")  # type: ignore
        for source, extra in added.items():
            print(f"critical path, miss - no-cache ({source}): median {statistics.median(extra):+.2f} ms, worst "
                  f"{max(extra):+.2f} ms over {len(extra)} kernels (goal <= {MISS_OVERHEAD_GOAL_S * 1000:.0f} ms: "
                  f"{'met' if max(extra) <= MISS_OVERHEAD_GOAL_S * 1000 else 'not met'})")
        for source, extra in whole.items():
            print(f"all instructions (driver and LLVM worker), miss - no-cache ({source}): median "
                  f"{statistics.median(extra):+.2f} ms, worst {max(extra):+.2f} ms over {len(extra)} kernels (the "
                  f"kernel's work for the cache's files comes on top: see the CPU times)")
    if hits:
        walls, cpus = [w for w, _ in overheads], [c for _, c in overheads]
        print(f"miss - no-cache (paired per round): CPU median {statistics.median(cpus) * 1000:+.1f} ms, worst "
              f"{max(cpus) * 1000:+.1f} ms; wall median {statistics.median(walls) * 1000:+.1f} ms, worst "
              f"{max(walls) * 1000:+.1f} ms over {len(cpus)} kernels (goal <= {MISS_OVERHEAD_GOAL_S * 1000:.0f} ms); "
              f"hit: geomean {geomean(hits) * 1000:.0f} ms, worst {max(hits) * 1000:.0f} ms "
              f"(goal < {HIT_GOAL_S * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
