"""Cache benefit: cold compile vs cache hit, whole-process time per corpus kernel.

For each kernel: a cold compile into an empty cache directory (bytecode -> cubin,
so lowering, LLVM and ptxas all run), then the same command again, now served
from the cache. Best of N runs each; the ratio hit / cold and the geometric
mean. Goal (issue 5): a hit under 50 ms per kernel.
Run: `python benchmarks/cache.py [--gpu-name sm_90] [--repeats 3] [--limit N]`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_time, corpus_files, geomean, our_command, print_table  # noqa: E402

HIT_GOAL_S = 0.050


def measure(path: Path, gpu: str, repeats: int, work: Path) -> tuple[float, float]:
    """(best cold time, best hit time) for one kernel."""
    cache = work / "cache"
    argv = [*our_command("tileiras"), "--gpu-name", gpu, "--cache-dir", str(cache), str(path), "-o",
            str(work / "k.cubin")]
    cold = float("inf")
    for _ in range(repeats):
        shutil.rmtree(cache, ignore_errors=True)
        cold = min(cold, best_time(argv, 1))
    hit = best_time(argv, repeats)  # the last cold run filled the cache
    return cold, hit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-name", default="sm_90")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="only the first N kernels")
    args = parser.parse_args()
    files = corpus_files()
    if args.limit:
        files = files[: args.limit]
    rows, ratios, hits = [], [], []
    with tempfile.TemporaryDirectory(prefix="tileiras-cache-bench-") as tmp:
        for name, path in files:
            try:
                cold, hit = measure(path, args.gpu_name, args.repeats, Path(tmp))
            except RuntimeError as exc:
                rows.append((name, "-", "-", "-", f"skipped: {str(exc).splitlines()[-1][:60]}"))
                continue
            ratios.append(hit / cold)
            hits.append(hit)
            rows.append((name, f"{cold * 1000:.0f} ms", f"{hit * 1000:.0f} ms", f"{hit / cold:.2f}",
                         "ok" if hit < HIT_GOAL_S else "over 50 ms"))
    print_table(f"compile cache, bytecode -> cubin, {args.gpu_name}, best of {args.repeats}",
                ("kernel", "cold", "hit", "hit/cold", "goal"), rows)
    if hits:
        print(f"geometric mean hit/cold: {geomean(ratios):.3f}; hit time: geomean {geomean(hits) * 1000:.0f} ms, "
              f"worst {max(hits) * 1000:.0f} ms over {len(hits)} kernels (goal < {HIT_GOAL_S * 1000:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
