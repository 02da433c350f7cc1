"""Benchmark: our `tileirdisasm` against NVIDIA's on the bytecode corpus.

For every file, both tools run as separate processes (what a build system
sees); each is timed `--repeat` times and the best wall time is kept. Prints
one row per file (ours, NVIDIA's, ratio) and the geometric means, and checks
that both printed the same text. Ours runs through the console script that
pip generates, with this checkout first on the path (`--installed` measures
the installed package instead). The Python floor (an interpreter that starts
and exits, `python -I -S -c pass`) bounds what any CPython tool can reach.

    python benchmarks/disasm.py [--repeat 5] [--debug-info] [--installed] [FILES...]
"""

from __future__ import annotations

import argparse
import glob
import math
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nvidia_tool() -> str:
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations if spec else []) or []:
        path = os.path.join(base, "cu13", "bin", "tileirdisasm")
        if os.access(path, os.X_OK):
            return path
    sys.exit("NVIDIA's tileirdisasm (PyPI nvidia-cuda-tileiras) is not installed")


def our_command() -> list[str]:
    """Our console script when installed next to this interpreter, else the same entry point via -c."""
    script = os.path.join(os.path.dirname(sys.executable), "tileirdisasm")
    if os.path.isfile(script):
        with open(script, "rb") as f:
            if b"tileiras" in f.read(4096):
                return [script]
    return [sys.executable, "-c", "import sys; from tileiras.driver.disasm_main import main; sys.exit(main())"]


def checkout_env() -> dict[str, str]:
    """The environment that makes the console script import this checkout's tileiras."""
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=REPO + (os.pathsep + path if path else ""))


def best_time(cmd: list[str], repeat: int, env: dict[str, str] | None = None) -> tuple[float, str]:
    best = math.inf
    out = ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
        best = min(best, time.perf_counter() - t0)
        out = res.stdout if res.returncode == 0 else f"<exit {res.returncode}>"
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--debug-info", "-g", action="store_true", help="pass -g to both tools")
    ap.add_argument("--installed", action="store_true",
                    help="measure the installed tileiras package, not this checkout")
    ap.add_argument("--no-precompile", action="store_true",
                    help="do not byte-compile tileiras first (pip does it on install; a source checkout with "
                         "PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module on every run)")
    args = ap.parse_args()
    if not args.no_precompile:
        import compileall

        compileall.compile_dir(os.path.join(REPO, "tileiras"), quiet=1)
    files = args.files or sorted(glob.glob(os.path.join(REPO, "tests", "corpus", "bytecode", "*", "*.tileirbc")))
    if not files:
        sys.exit("no corpus files (tests/corpus/bytecode is empty)")
    nv = [nvidia_tool()]
    ours = our_command()
    env = None if args.installed else checkout_env()
    flags = ["-g"] if args.debug_info else []
    floor, _ = best_time([sys.executable, "-I", "-S", "-c", "pass"], max(args.repeat, 10))
    site, _ = best_time([sys.executable, "-c", "pass"], max(args.repeat, 10))
    print(f"ours:   {' '.join(ours[:1])}{'' if args.installed else f' (tileiras from {REPO})'}\nnvidia: {nv[0]}\n")
    print(f"{'file':48} {'ours ms':>9} {'nvidia ms':>10} {'ratio':>7}  same")
    ratios, t_ours, t_nv = [], [], []
    mismatches = 0
    for path in files:
        a, out_a = best_time(ours + flags + [path], args.repeat, env)
        b, out_b = best_time(nv + flags + [path], args.repeat)
        same = out_a == out_b
        mismatches += not same
        ratios.append(a / b)
        t_ours.append(a)
        t_nv.append(b)
        name = os.path.relpath(path, REPO)
        print(f"{name[-48:]:48} {a * 1e3:9.1f} {b * 1e3:10.1f} {a / b:7.2f}  {'yes' if same else 'NO'}")

    def gmean(xs: list[float]) -> float:
        return math.exp(sum(math.log(x) for x in xs) / len(xs))

    print(f"\n{len(files)} files; geometric mean: ours {gmean(t_ours) * 1e3:.1f} ms, nvidia {gmean(t_nv) * 1e3:.1f} ms, "
          f"ratio ours/nvidia {gmean(ratios):.2f} (below 1 means ours is faster); outputs differ on {mismatches}")
    print(f"Python floor: {floor * 1e3:.1f} ms (`python -I -S -c pass`), {site * 1e3:.1f} ms with site; "
          f"floor/nvidia {floor / gmean(t_nv):.2f}: no CPython process can go below that ratio")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
