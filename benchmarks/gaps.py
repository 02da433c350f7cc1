"""Where our machine code still falls short of NVIDIA's, per the issues' "done when" checks.

    python benchmarks/gaps.py ROWS.json [ROWS.json ...]   # JSON written by sass.py or tilegym.py --json
    python benchmarks/gaps.py --table A.json B.json ...   # one column per file (per bytecode version, per tree)

Each row is one kernel and target with both compilers' cuobjdump figures (`sass_stats.as_json`). A
check names every pair where NVIDIA's has something ours lacks; a pair either side failed to
compile is left to the benchmark's own summary.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

TMA_LOADS = ("UTMALDG", "UBLKCP", "UTMAPF", "UBLKPF")      # global -> shared (or prefetch)
TMA_STORES = ("UTMASTG", "UTMAREDG", "UBLKRED")            # shared -> global

# SASS tensor-core family -> its generation (the instruction family each issue compares)
GENERATION: dict[str, str] = {
    "HMMA": "mma.sync", "IMMA": "mma.sync", "QMMA": "mma.sync", "OMMA": "mma.sync", "DMMA": "mma.sync",
    "BMMA": "mma.sync", "HGMMA": "wgmma", "IGMMA": "wgmma", "QGMMA": "wgmma", "BGMMA": "wgmma",
    "UTCMMA": "tcgen05",
}


def _generations(stats: dict) -> set[str]:
    return {GENERATION.get(family, family) for family in stats["tensor_core"]}


def _widest(stats: dict, key: str) -> int:
    """Bits per thread of the widest access in `key` (global_loads / global_stores; loads count
    cp.async's too); a kernel that moves tiles by TMA in that direction has no narrower need (a TMA load
    says nothing of the stores: a row max loading its rows by TMA stores its 4 f16 maxima 16 bits at a
    time). A file written before cp.async widths were kept counts its cp.async as 128 (ours and NVIDIA's
    issue 16-byte copies)."""
    if any(n for op, n in stats["tma"].items() if op in (TMA_LOADS if key == "global_loads" else TMA_STORES)):
        return 128
    widths = [int(bits) for bits in stats[key]]
    if key == "global_loads" and stats["ldgsts"]:
        widths += [int(bits) for bits in stats.get("ldgsts_widths", {"128": stats["ldgsts"]})]
    return max(widths, default=0)


def _pairs(stats: dict) -> bool:
    """Whether the kernel's tensor-core instructions run on a CTA pair (tcgen05 cta_group::2: SASS .2CTA)."""
    return any(".2CTA" in opcode for opcode in stats.get("tensor_shapes", {}))


def _async(stats: dict) -> bool:
    return bool(stats["ldgsts"] or sum(stats["tma"].values()) or stats["mbarrier"])


# check -> (what it says, gap(ours, nvidia, gpu) -> detail or None)
CHECKS: dict[str, tuple[str, Callable[[dict, dict, str], str | None]]] = {
    "spills": ("ours spills where NVIDIA's does not",
               lambda o, n, g: f"{o['spills']} spill instructions" if o["spills"] and not n["spills"] else None),
    "load width": ("our widest global load is narrower than NVIDIA's (TMA counts as 128)",
                   lambda o, n, g: f"{_widest(o, 'global_loads')}|{_widest(n, 'global_loads')} bits"
                   if _widest(o, "global_loads") < _widest(n, "global_loads") else None),
    "store width": ("our widest global store is narrower than NVIDIA's (TMA counts as 128)",
                    lambda o, n, g: f"{_widest(o, 'global_stores')}|{_widest(n, 'global_stores')} bits"
                    if _widest(o, "global_stores") < _widest(n, "global_stores") else None),
    "ldmatrix": ("NVIDIA's reads mma.sync operands with ldmatrix, ours does not",
                 lambda o, n, g: "LDSM 0" if n["ldmatrix"] and not o["ldmatrix"]
                 and "mma.sync" in _generations(o) else None),
    "tensor cores": ("another tensor-core generation than NVIDIA's",
                     lambda o, n, g: f"{','.join(sorted(_generations(o))) or 'none'}|"
                     f"{','.join(sorted(_generations(n))) or 'none'}"
                     if _generations(n) and _generations(o) != _generations(n) else None),
    "CTA pairs": ("NVIDIA's runs its MMAs on a CTA pair (tcgen05.mma.cta_group::2), ours on one CTA",
                  lambda o, n, g: "one CTA" if _pairs(n) and not _pairs(o) else None),
    "async copies": ("NVIDIA's copies asynchronously (cp.async, TMA or mbarriers), ours does not",
                     lambda o, n, g: "none" if _async(n) and not _async(o) else None),
    # setmaxnreg marks warp roles with different register needs; a tcgen05 kernel (accumulator in tensor
    # memory) may specialize its warps without it, so these two say where to look, not a defect each
    "setmaxnreg, tensor-core kernels": (
        "NVIDIA's reallocates registers between warp roles (setmaxnreg), ours does not",
        lambda o, n, g: "no setmaxnreg" if n.get("setmaxnreg") and not o.get("setmaxnreg") and n["tensor_core"]
        else None),
    "setmaxnreg, other kernels": (
        "the same for kernels without tensor cores (NVIDIA's TMA producer warps)",
        lambda o, n, g: "no setmaxnreg" if n.get("setmaxnreg") and not o.get("setmaxnreg") and not n["tensor_core"]
        else None),
}


def gaps(rows: list[dict[str, Any]]) -> list[str]:
    """One line per check (pairs compared, pairs short), then one indented line per short pair."""
    both = [r for r in rows if r["ours"].get("stats") and r["nvidia"].get("stats")]
    lines = [f"gaps vs NVIDIA's over {len(both)} pairs with both cubins:"]
    for name, (says, check) in CHECKS.items():
        short = [(r, detail) for r in both
                 if (detail := check(r["ours"]["stats"], r["nvidia"]["stats"], r["gpu"])) is not None]
        lines.append(f"  {name}: {len(short)} ({says})")
        lines.extend(f"    {r['name']} {r['gpu']}: {detail}" for r, detail in short)
    return lines


def table(named: list[tuple[str, list[dict[str, Any]]]]) -> list[str]:
    """The pairs short of NVIDIA's per check, one column per set of rows: the same kernels as another
    bytecode version or from another tree, side by side (pairs where both compiled, then each check)."""
    both = {name: [r for r in rows if r["ours"].get("stats") and r["nvidia"].get("stats")] for name, rows in named}
    width = max([len(n) for n, _ in named] + [8])
    head = f"{'check'.ljust(32)}  " + "  ".join(n.rjust(width) for n, _ in named)
    lines = [head, f"{'pairs with both cubins'.ljust(32)}  " + "  ".join(str(len(both[n])).rjust(width) for n, _ in named)]
    for check_name, (_, check) in CHECKS.items():
        counts = [sum(check(r["ours"]["stats"], r["nvidia"]["stats"], r["gpu"]) is not None for r in both[n])
                  for n, _ in named]
        lines.append(f"{check_name.ljust(32)}  " + "  ".join(str(c).rjust(width) for c in counts))
    return lines


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    side_by_side = "--table" in args
    paths = [Path(p) for p in args if p != "--table"]
    if not paths:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    named: list[tuple[str, list[dict]]] = []
    for path in paths:
        try:
            named.append((path.stem, json.loads(path.read_text())))
        except (OSError, ValueError) as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 1
    if side_by_side:
        print("\n".join(table(named)))
        return 0
    for line in gaps([r for _, rows in named for r in rows]):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
