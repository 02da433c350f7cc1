"""Compile time: our tileiras against NVIDIA's on the same bytecode, in one run.

Whole-process wall time per corpus kernel (bytecode -> cubin, cache off),
best of N runs each, the ratio ours / NVIDIA's, and the geometric mean of the
ratios. Run: `python benchmarks/compile_time.py [--gpu-name sm_90] [--repeats 3]`.
Compare ratios, not absolute times: machines are shared and noisy. The two
compilers' runs alternate (theirs, ours, theirs, ...), so a burst of load from
elsewhere lands on both sides of a ratio instead of on one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import best_time, corpus_kernels, geomean, nvidia_tool, our_command, print_table  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-name", default=None,
                        help="target for every kernel (default: the GPU each kernel was exported for, mostly sm_90)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=0, help="only the first N kernels")
    args = parser.parse_args()
    nvidia = nvidia_tool("tileiras")
    if nvidia is None:
        print("NVIDIA's tileiras (pip install nvidia-cuda-tileiras) is needed for the comparison", file=sys.stderr)
        return 2
    files = corpus_kernels()
    if args.limit:
        files = files[: args.limit]
    rows, ratios = [], []
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "k.cubin")
        for name, path, exported_for in files:
            gpu = args.gpu_name or exported_for
            ours_argv = [*our_command("tileiras"), "--no-cache", "--gpu-name", gpu, str(path), "-o", out]
            theirs_argv = [str(nvidia), "--gpu-name", gpu, str(path), "-o", out]
            try:
                theirs = ours = float("inf")
                for _ in range(args.repeats):
                    theirs = min(theirs, best_time(theirs_argv, 1))
                    ours = min(ours, best_time(ours_argv, 1))
            except RuntimeError as exc:
                rows.append((name, "-", "-", f"skipped: {str(exc).splitlines()[-1][:60]}"))
                continue
            ratios.append(ours / theirs)
            rows.append((name, f"{ours * 1000:.0f} ms", f"{theirs * 1000:.0f} ms", f"{ours / theirs:.2f}"))
    print_table(f"compile time, bytecode -> cubin, {args.gpu_name or 'each kernel on its own GPU'}, "
                f"best of {args.repeats}",
                ("kernel", "ours", "nvidia", "ours/nvidia"), rows)
    print(f"geometric mean ours/nvidia: {geomean(ratios):.2f} over {len(ratios)} kernels (< 1 means we are faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
