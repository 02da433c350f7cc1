"""Compile cost against the tile size: our tileiras and NVIDIA's, side by side (issue 35).

    python benchmarks/tile_scaling.py                   # the quick subset: 2^10, 2^14, 2^17
    python benchmarks/tile_scaling.py --all             # every power of two from 2^10 to 2^24
    python benchmarks/tile_scaling.py --sizes 12,20 --only vector_add --only saxpy --json out.json

Each kernel of `tile_scaling_kernels.py` (cuTile Python, exported to bytecode) is compiled for one
tile size at a time by both compilers, to a cubin, with the cache off. Per row: CPU time (user +
system of the compiler's whole process tree, ptxas included: on shared machines it varies far less
than wall time), peak memory (the largest resident set of any process of the tree) and cubin size,
then the ratios ours / NVIDIA's. A compile that runs past `--timeout` seconds (300 by default) is
stopped and shown as such, and that compiler is not run on the kernel's larger tiles. NVIDIA's tileiras (pip package nvidia-cuda-tileiras) is the oracle here,
never part of the product.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import ROOT, nvidia_tool, print_table  # noqa: E402
import tile_scaling_kernels as kernels  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "realistic"))
from compilers import _TREE_CPU  # noqa: E402  (writes "cpu_seconds max_rss_kib" of the whole tree)

QUICK = (10, 14, 17)
ALL = tuple(range(10, 25))


@dataclass
class Run:
    ok: bool
    cpu_s: float
    peak_mb: float
    cubin_kb: float
    note: str = ""   # why it failed: the first error line, or "timeout"


def run(argv: list[str], out: Path, timeout: float) -> Run:
    """One compile to `out`; its CPU time, peak memory and cubin size."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.NamedTemporaryFile("r", suffix=".usage") as usage, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _TREE_CPU, usage.name, *argv], stdout=subprocess.DEVNULL,
                                stderr=err, text=True, cwd=ROOT, env=env, start_new_session=True)
        timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGKILL))
        timer.start()
        try:
            code = proc.wait()
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
        fields = usage.read().split()
        cpu, rss = (float(fields[0]), float(fields[1])) if fields else (wall, 0.0)
        if code != 0 or not out.exists():
            err.seek(0)
            lines = [ln.strip() for ln in err.read().splitlines() if ln.strip()]
            errors = [ln for ln in lines if "error" in ln.lower()] or lines or [f"exit {code}"]
            note = f"timeout ({timeout:.0f} s)" if wall >= timeout and code < 0 else errors[0][:160]
            return Run(False, cpu, rss / 1024, 0.0, note)
        return Run(True, cpu, rss / 1024, out.stat().st_size / 1024)


SKIPPED = Run(False, 0.0, 0.0, 0.0, "not run")   # the side not asked for


def compile_both(bytecode: Path, gpu: str, timeout: float, sides: str = "both",
                 past: dict[str, str] | None = None) -> tuple[Run, Run]:
    """Both compiles of one module (or those of `sides`); a side whose compile of a smaller tile of
    the kernel timed out (`past`: side -> why) is not run again."""
    past = past or {}
    nvidia = nvidia_tool("tileiras")
    ours_out, theirs_out = bytecode.with_suffix(".ours.cubin"), bytecode.with_suffix(".nvidia.cubin")
    if sides == "nvidia":
        ours = SKIPPED
    elif "ours" in past:
        ours = Run(False, 0.0, 0.0, 0.0, past["ours"])
    else:
        ours = run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--gpu-name", gpu,
                    str(bytecode), "-o", str(ours_out)], ours_out, timeout)
    if sides == "ours":
        theirs = SKIPPED
    elif nvidia is None:
        theirs = Run(False, 0.0, 0.0, 0.0, "NVIDIA's tileiras is not installed")
    elif "nvidia" in past:
        theirs = Run(False, 0.0, 0.0, 0.0, past["nvidia"])
    else:
        theirs = run([str(nvidia), "--gpu-name", gpu, str(bytecode), "-o", str(theirs_out)], theirs_out, timeout)
    for path in (ours_out, theirs_out):
        path.unlink(missing_ok=True)
    return ours, theirs


def _cell(r: Run, what: str) -> str:
    if not r.ok:
        return "-"
    return {"cpu": f"{r.cpu_s:.2f} s", "mem": f"{r.peak_mb:.0f} MB", "cubin": f"{r.cubin_kb:.0f} KB"}[what]


def _ratio(a: Run, b: Run, what: str) -> str:
    if not (a.ok and b.ok):
        return "-"
    x, y = {"cpu": (a.cpu_s, b.cpu_s), "cubin": (a.cubin_kb, b.cubin_kb)}[what]
    return f"{x / max(y, 1e-9):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every size from 2^10 to 2^24 elements")
    parser.add_argument("--sizes", help="comma-separated powers of two (e.g. 10,16,20)")
    parser.add_argument("--only", action="append", choices=sorted(kernels.KERNELS), help="one kernel (repeatable)")
    parser.add_argument("--gpu-name", default="sm_90")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per compile (default 300)")
    parser.add_argument("--side", choices=("both", "ours", "nvidia"), default="both",
                        help="compile with both compilers (default) or one")
    parser.add_argument("--nvidia-from", type=Path, metavar="JSON",
                        help="NVIDIA's figures from an earlier --json instead of compiling again (they take hours "
                             "at the large sizes, and do not change with our code)")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--markdown", action="store_true",
                        help="also print CPU times as a Markdown table (a kernel a row, a size a column)")
    args = parser.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else ALL if args.all else QUICK
    names = args.only or list(kernels.KERNELS)
    earlier = {(r["kernel"], r["log2_elements"]): Run(**r["nvidia"])
               for r in json.loads(args.nvidia_from.read_text())} if args.nvidia_from else {}
    rows, records = [], []
    with tempfile.TemporaryDirectory(prefix="tile-scaling-") as tmp:
        for name in names:
            past: dict[str, str] = {}   # side -> the smaller tile it timed out on (larger ones are not run)
            for bits in sizes:
                bytecode = Path(tmp) / f"{name}_{bits}.tileirbc"
                bytecode.write_bytes(kernels.export(name, 1 << bits))
                known = earlier.get((name, bits))
                side = "ours" if known is not None and args.side == "both" else args.side
                ours, theirs = compile_both(bytecode, args.gpu_name, args.timeout, side, past)
                theirs = known if known is not None else theirs
                for side, r in (("ours", ours), ("nvidia", theirs)):
                    if r.note.startswith("timeout ("):
                        past.setdefault(side, f"not run: timed out at 2^{bits}")
                notes = "; ".join(f"{side}: {r.note}" for side, r in (("ours", ours), ("nvidia", theirs))
                                  if r.note and r is not SKIPPED)
                rows.append((name, f"2^{bits}", _cell(ours, "cpu"), _cell(theirs, "cpu"), _ratio(ours, theirs, "cpu"),
                             _cell(ours, "mem"), _cell(theirs, "mem"), _cell(ours, "cubin"), _cell(theirs, "cubin"),
                             _ratio(ours, theirs, "cubin"), notes))
                records.append({"kernel": name, "log2_elements": bits, "ours": asdict(ours), "nvidia": asdict(theirs)})
                print(f"  {name} 2^{bits}: ours {_cell(ours, 'cpu')} nvidia {_cell(theirs, 'cpu')} {notes}",
                      file=sys.stderr, flush=True)
    print_table(f"compile cost by tile size, bytecode -> cubin for {args.gpu_name} (CPU time, peak memory, cubin)",
                ("kernel", "tile", "ours cpu", "nvidia cpu", "cpu x", "ours mem", "nvidia mem", "ours cubin",
                 "nvidia cubin", "cubin x", "notes"), rows)
    if args.json:
        args.json.write_text(json.dumps(records, indent=1) + "\n")
    if args.markdown:
        print("\n".join(markdown(records)))
    return 0


def markdown(records: list[dict]) -> list[str]:
    """CPU seconds, ours / NVIDIA's ("-": failed or past the timeout), a kernel a row, a size a column."""
    sizes = sorted({r["log2_elements"] for r in records})
    kernels_ = list(dict.fromkeys(r["kernel"] for r in records))
    cells = {(r["kernel"], r["log2_elements"]): r for r in records}

    def cpu(run: dict) -> str:
        return f"{run['cpu_s']:.2f}" if run["ok"] else "-"

    lines = ["| kernel | " + " | ".join(f"2^{b}" for b in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
    for name in kernels_:
        row = [f"{cpu(cells[name, b]['ours'])} / {cpu(cells[name, b]['nvidia'])}" if (name, b) in cells else ""
               for b in sizes]
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
