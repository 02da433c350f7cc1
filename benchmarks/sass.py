"""Machine code side by side: our tileiras against NVIDIA's on the realistic kernels.

    python benchmarks/sass.py                          # every configuration, every target
    python benchmarks/sass.py --sample                 # the fast sample (as the default tests)
    python benchmarks/sass.py --only mm_f16 --only fa_ --gpu-name sm_80 --gpu-name sm_90
    python benchmarks/sass.py --json out.json          # also write every figure as JSON

Compiles each configuration of tests/realistic/manifest.json with both compilers, reads each
cubin with cuobjdump (-sass, -res-usage, -elf) and prints per kernel and target, as
``ours|nvidia``: registers, spills (LDL+STL instructions), shared memory in KiB (static, plus
dynamic where known: ours from its launch metadata), threads per CTA (.nv.info REQNTID),
tensor-core instructions by family (HMMA/IMMA/QMMA: mma.sync; HGMMA...: wgmma; UTCMMA: tcgen05),
LDGSTS (cp.async), TMA (UTMALDG/UTMASTG/...), SYNCS (mbarrier), LDSM (ldmatrix), global access
widths (bits:count of LDG and STG) and the size of the hot loop (the innermost loop with the
most tensor-core, then memory, instructions). Compile time is CPU time (process and children),
and the summary gives the geometric mean and the worst of ours/NVIDIA's.
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
sys.path.insert(0, str(ROOT))   # the tree's compiler, not an installed copy
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "realistic"))
import compilers  # noqa: E402
import gaps  # noqa: E402
import sass_stats  # noqa: E402
sys.path.insert(0, str(ROOT / "tests"))
from canonical_support import exported_per_target  # noqa: E402


def select(manifest: dict, only: list[str] | None, families: list[str] | None,
           sample: bool) -> list[dict]:
    out = []
    for c in manifest["configs"]:
        if only and not any(o in c["name"] for o in only):
            continue
        if families and c["family"] not in families:
            continue
        if sample and not c["sample"]:
            continue
        out.append(c)
    return out


def measure(config: dict, gpu: str, tmp: Path, src: Path | None = None) -> dict[str, Any]:
    """Both compiles of one configuration for one target (its committed bytecode, or `src`), and what
    cuobjdump says of each."""
    src = src or compilers.HERE / config["file"]
    row: dict[str, Any] = {"name": config["name"], "family": config["family"], "gpu": gpu}
    for side, compile_fn in (("ours", compilers.compile_ours), ("nvidia", compilers.compile_nvidia)):
        cubin = tmp / f"{config['name']}.{gpu}.{side}.cubin"
        result = compile_fn(src, gpu, cubin)
        entry: dict[str, Any] = {"ok": result.ok, "cpu_s": result.cpu_s, "wall_s": result.wall_s,
                                 "error": result.message}
        if result.ok:
            try:
                stats = sass_stats.cubin_stats(cubin).get(config["symbol"])
            except sass_stats.CuobjdumpError as exc:
                entry.update(ok=False, error=str(exc))
                stats = None
            if stats is not None:
                entry["stats"] = sass_stats.as_json(stats)
                entry["dynamic_smem"] = result.dynamic_smem
        row[side] = entry
    return row


# ---------------------------------------------------------------------------------- printing

def _counts(d: dict) -> str:
    return ",".join(f"{k}:{v}" for k, v in d.items()) or "-"


def _smem(entry: dict) -> str:
    st = entry["stats"]
    total = (st["shared_static"] or 0) + (entry.get("dynamic_smem") or 0)
    return f"{total / 1024:.0f}"


# column title -> how one side's entry prints
COLUMNS: dict[str, Any] = {
    "regs": lambda e: str(e["stats"]["registers"]),
    "spill": lambda e: str(e["stats"]["spills"]),
    "smemKB": _smem,
    "thr": lambda e: str(e["stats"]["threads"] or "?"),
    "tensor": lambda e: _counts(e["stats"]["tensor_core"]),
    "LDGSTS": lambda e: str(e["stats"]["ldgsts"]),
    "TMA": lambda e: str(sum(e["stats"]["tma"].values())),
    "SYNCS": lambda e: str(e["stats"]["mbarrier"]),
    "LDSM": lambda e: str(e["stats"]["ldmatrix"]),
    "LDG": lambda e: _counts(e["stats"]["global_loads"]),
    "STG": lambda e: _counts(e["stats"]["global_stores"]),
    "loop": lambda e: str(e["stats"]["hot_loop"] if e["stats"]["hot_loop"] is not None else "-"),
    "cpu_s": lambda e: f"{e['cpu_s']:.1f}",
}


def cells(row: dict) -> list[str]:
    ours, theirs = row["ours"], row["nvidia"]
    out = []
    for fmt in COLUMNS.values():
        a = fmt(ours) if "stats" in ours else "FAIL"
        b = fmt(theirs) if "stats" in theirs else "FAIL"
        out.append(f"{a}|{b}")
    return out


def print_rows(rows: list[dict]) -> None:
    header = ["kernel", "target", *COLUMNS]
    table = [[r["name"], r["gpu"], *cells(r)] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h)
              for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths)))


def summary(rows: list[dict]) -> list[str]:
    lines = []
    ours_fail = [r for r in rows if not r["ours"]["ok"]]
    nv_fail = [r for r in rows if not r["nvidia"]["ok"]]
    lines.append(f"{len(rows)} kernel-target pairs: ours compiled {len(rows) - len(ours_fail)}, "
                 f"NVIDIA's compiled {len(rows) - len(nv_fail)}")
    for r in ours_fail:
        lines.append(f"  ours FAILED {r['name']} {r['gpu']}: {r['ours']['error']}")
    for r in nv_fail:
        lines.append(f"  NVIDIA's FAILED {r['name']} {r['gpu']}: {r['nvidia']['error']}")
    both = [r for r in rows if r["ours"]["ok"] and r["nvidia"]["ok"] and r["nvidia"]["cpu_s"] > 0]
    if both:
        ratios = [(r["ours"]["cpu_s"] / r["nvidia"]["cpu_s"], r) for r in both]
        geo = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
        worst, wr = max(ratios, key=lambda t: t[0])
        lines.append(f"compile CPU time ours/NVIDIA's over {len(both)} pairs both compiled: "
                     f"geomean {geo:.2f}, worst {worst:.2f} ({wr['name']} {wr['gpu']}: "
                     f"{wr['ours']['cpu_s']:.1f} s vs {wr['nvidia']['cpu_s']:.1f} s)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="TEXT",
                        help="configurations whose name contains TEXT (repeatable)")
    parser.add_argument("--family", action="append", help="matmul, attention, layernorm, ...")
    parser.add_argument("--sample", action="store_true", help="only the default test sample")
    parser.add_argument("--gpu-name", action="append", metavar="SM",
                        help="targets (repeatable; default: each configuration's targets)")
    parser.add_argument("--jobs", type=int, default=2, help="compiles in parallel (default 2)")
    parser.add_argument("--json", type=Path, help="write every figure to this file")
    parser.add_argument("--bytecode-version", metavar="V",
                        help="compile the kernels exported by cuTile at V (13.1..13.4) instead of the committed 13.4")
    args = parser.parse_args(argv)
    if sass_stats.cuobjdump_path() is None:
        print("error: cuobjdump is not installed (pip install nvidia-cuda-cuobjdump "
              "nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 2
    if compilers.nvidia_tileiras() is None:
        print("error: NVIDIA's tileiras is not installed (pip install nvidia-cuda-tileiras)",
              file=sys.stderr)
        return 2
    configs = select(compilers.manifest(), args.only, args.family, args.sample)
    if not configs:
        print("error: no configuration matches the filters", file=sys.stderr)
        return 1
    jobs = [(c, g) for c in configs for g in c["targets"]
            if not args.gpu_name or g in args.gpu_name]
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        sources = exported_per_target("realistic", [c["name"] for c in configs], sorted({g for _, g in jobs}),
                                      args.bytecode_version, Path(tmp)) if args.bytecode_version else {}
        jobs = [(c, g) for c, g in jobs if not args.bytecode_version or (c["name"], g) in sources]
        rows = list(pool.map(lambda job: measure(job[0], job[1], Path(tmp), sources.get((job[0]["name"], job[1]))),
                             jobs))
    print(f"SASS, ours|NVIDIA's, {len(configs)} configurations, {len(jobs)} kernel-target pairs, "
          f"bytecode {args.bytecode_version or compilers.manifest()['bytecode_version']}")
    print_rows(rows)
    for line in summary(rows) + gaps.gaps(rows):
        print(line)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
