"""Real kernels: our tileiras against NVIDIA's on the TileGym / cutile-python corpus.

    python benchmarks/tilegym.py --jobs 1                          # every row, sm_80/90/100/120
    python benchmarks/tilegym.py --only tg_fmha --gpu-name sm_90    # a subset
    python benchmarks/tilegym.py --sample                           # the fast test sample
    python benchmarks/tilegym.py --json out.json --record           # keep the figures; write
                                                                    # nvidia_targets to the manifest

Compiles each row of tests/tilegym/manifest.json (bytecode exported by tests/tilegym/generate.py
at the kernels' own default tile sizes) with both compilers and prints, per kernel and target:
ok/FAIL of each (with the compiler's error line), the compile CPU time of each (process and
children, ptxas included) and ours/NVIDIA's, and, where both compiled, registers, spills and
tensor-core instructions by family from cuobjdump (benchmarks/sass_stats.py) as ours|NVIDIA's.
The summary counts the pairs each compiled, lists every failure of ours where NVIDIA's compiled,
and gives the geometric mean and the worst of the CPU-time ratio. ``--timeout`` bounds each
compile (a timeout counts as a failure of that compiler).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CORPUS = ROOT / "tests" / "tilegym"
TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
sys.path.insert(0, str(ROOT))   # the tree's compiler, not an installed copy
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "realistic"))
import compilers  # noqa: E402  (compile with either tileiras, CPU time measured)
import gaps  # noqa: E402
import sass_stats  # noqa: E402
sys.path.insert(0, str(ROOT / "tests"))
from canonical_support import exported_per_target  # noqa: E402


def manifest() -> dict[str, Any]:
    return json.loads((CORPUS / "manifest.json").read_text())


def select(rows: list[dict], only: list[str] | None, sample: bool) -> list[dict]:
    return [r for r in rows if (not only or any(o in r["name"] for o in only))
            and (not sample or r["sample"])]


def _stats(cubin: Path, symbol: str) -> dict[str, Any] | None:
    try:
        stats = sass_stats.cubin_stats(cubin).get(symbol)
    except sass_stats.CuobjdumpError:
        return None
    return None if stats is None else sass_stats.as_json(stats)


def measure(row: dict, gpu: str, tmp: Path, timeout: float, sass: bool, src: Path | None = None) -> dict[str, Any]:
    """Both compiles of one row for one target (its committed bytecode, or `src`)."""
    src = src or CORPUS / row["file"]
    out: dict[str, Any] = {"name": row["name"], "gpu": gpu}
    for side, compile_fn in (("ours", compilers.compile_ours), ("nvidia", compilers.compile_nvidia)):
        cubin = tmp / f"{row['name']}.{gpu}.{side}.cubin"
        result = compile_fn(src, gpu, cubin, timeout)
        entry: dict[str, Any] = {"ok": result.ok, "cpu_s": result.cpu_s, "wall_s": result.wall_s,
                                 "error": result.message}
        if result.ok and sass:
            entry["stats"] = _stats(cubin, row["name"])
        cubin.unlink(missing_ok=True)
        out[side] = entry
    return out


# ---------------------------------------------------------------------------------- printing

def _pair(row: dict, key: str) -> str:
    a, b = (row[s].get("stats") for s in ("ours", "nvidia"))
    if not a or not b:
        return "-"
    fmt = (lambda d: ",".join(f"{k}:{v}" for k, v in d.items()) or "-") if key == "tensor_core" else str
    return f"{fmt(a[key])}|{fmt(b[key])}"


def line(row: dict) -> str:
    ours, nv = row["ours"], row["nvidia"]
    status = f"{'ok' if ours['ok'] else 'FAIL'}/{'ok' if nv['ok'] else 'FAIL'}"
    ratio = f"{ours['cpu_s'] / nv['cpu_s']:.2f}x" if ours["ok"] and nv["ok"] and nv["cpu_s"] > 0 else "-"
    cells = [row["name"].ljust(44), row["gpu"].ljust(6), status.ljust(9),
             f"{ours['cpu_s']:7.1f}", f"{nv['cpu_s']:6.1f}", ratio.rjust(7),
             _pair(row, "registers").ljust(8), _pair(row, "spills").ljust(6), _pair(row, "tensor_core")]
    text = "  ".join(cells)
    for side in ("ours", "nvidia"):
        if not row[side]["ok"]:
            text += f"\n      {side}: {row[side]['error']}"
    return text


HEADER = "  ".join(["kernel".ljust(44), "target", "ours/nv".ljust(9), "ours_s", "nv_s", "ratio".rjust(7),
                    "regs".ljust(8), "spills", "tensor cores (ours|nvidia)"])


def summary(rows: list[dict]) -> list[str]:
    nv_ok = [r for r in rows if r["nvidia"]["ok"]]
    ours_ok = [r for r in rows if r["ours"]["ok"]]
    both = [r for r in nv_ok if r["ours"]["ok"] and r["nvidia"]["cpu_s"] > 0]
    lines = [f"{len(rows)} kernel-target pairs: NVIDIA's compiled {len(nv_ok)}, ours compiled {len(ours_ok)}"
             f", ours compiled {len(both)} of the {len(nv_ok)} NVIDIA's compiled"
             + (f" ({100 * len(both) / len(nv_ok):.0f}%)" if nv_ok else "")]
    for r in nv_ok:
        if not r["ours"]["ok"]:
            lines.append(f"  ours FAILED {r['name']} {r['gpu']}: {r['ours']['error']}")
    for r in rows:
        if not r["nvidia"]["ok"]:
            lines.append(f"  NVIDIA's FAILED {r['name']} {r['gpu']} (ours {'ok' if r['ours']['ok'] else 'failed'})"
                         f": {r['nvidia']['error']}")
    for gpu in sorted({r["gpu"] for r in both}) + [None]:
        sel = [r for r in both if gpu is None or r["gpu"] == gpu]
        if not sel:
            continue
        ratios = [(r["ours"]["cpu_s"] / r["nvidia"]["cpu_s"], r) for r in sel]
        geo = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
        worst, wr = max(ratios, key=lambda t: t[0])
        lines.append(f"compile CPU time ours/NVIDIA's{' on ' + gpu if gpu else ', all targets'}, "
                     f"{len(sel)} pairs: geomean {geo:.2f}x, worst {worst:.2f}x ({wr['name']} {wr['gpu']}: "
                     f"{wr['ours']['cpu_s']:.1f} s vs {wr['nvidia']['cpu_s']:.1f} s), "
                     f"over 10x: {sum(x > 10 for x, _ in ratios)}")
    return lines


def record(rows: list[dict]) -> None:
    """Write where NVIDIA's compiled each row into the manifest (``nvidia_targets``). A compile
    that timed out says nothing either way: the row keeps what the manifest had."""
    path = CORPUS / "manifest.json"
    data = manifest()
    seen: dict[str, dict[str, bool]] = {}
    for r in rows:
        if r["nvidia"]["ok"] or not r["nvidia"]["error"].startswith("timed out"):
            seen.setdefault(r["name"], {})[r["gpu"]] = r["nvidia"]["ok"]
    for c in data["configs"]:
        if c["name"] in seen:
            known = {g: g in c.get("nvidia_targets", data["targets"]) for g in data["targets"]}
            known.update(seen[c["name"]])
            c["nvidia_targets"] = [g for g in data["targets"] if known[g]]
    sys.path.insert(0, str(CORPUS))
    from generate import manifest_bytes  # noqa: PLC0415
    path.write_bytes(manifest_bytes(data))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="TEXT", help="rows whose name contains TEXT")
    parser.add_argument("--sample", action="store_true", help="only the default test sample")
    parser.add_argument("--gpu-name", action="append", metavar="SM", help=f"targets (default: {' '.join(TARGETS)})")
    parser.add_argument("--jobs", type=int, default=1, help="compiles in parallel (default 1)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per compile (default 600)")
    parser.add_argument("--no-sass", action="store_true", help="skip cuobjdump (registers, spills, tensor cores)")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--record", action="store_true", help="write nvidia_targets into the manifest")
    parser.add_argument("--bytecode-version", metavar="V",
                        help="compile the kernels exported by cuTile at V (13.1..13.4) instead of the committed 13.4")
    args = parser.parse_args(argv)
    if compilers.nvidia_tileiras() is None:
        print("error: NVIDIA's tileiras is not installed (pip install nvidia-cuda-tileiras)", file=sys.stderr)
        return 2
    sass = not args.no_sass and sass_stats.cuobjdump_path() is not None
    rows = select(manifest()["configs"], args.only, args.sample)
    if not rows:
        print("error: no row matches the filters", file=sys.stderr)
        return 1
    gpus = args.gpu_name or list(TARGETS)
    jobs = [(r, g) for r in rows for g in gpus]
    version = args.bytecode_version or manifest()["bytecode_version"]
    print(f"TileGym corpus, ours vs NVIDIA's tileiras: {len(rows)} kernels, {len(jobs)} kernel-target pairs, "
          f"bytecode {version}")
    print(HEADER, flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        sources = exported_per_target("tilegym", [r["name"] for r in rows], gpus, args.bytecode_version,
                                      Path(tmp)) if args.bytecode_version else {}
        jobs = [(r, g) for r, g in jobs if not args.bytecode_version or (r["name"], g) in sources]
        futures = [pool.submit(measure, r, g, Path(tmp), args.timeout, sass, sources.get((r["name"], g)))
                   for r, g in jobs]
        for fut in futures:             # in order, each printed as soon as it is done
            results.append(fut.result())
            print(line(results[-1]), flush=True)
    for text in summary(results) + gaps.gaps(results):
        print(text)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.record:
        record(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
