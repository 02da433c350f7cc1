"""Generated kernel variants: our tileiras against NVIDIA's, parity per class of machine code.

    python benchmarks/generated.py --count 100 --seed 0                 # sm_80/90/100/120
    python benchmarks/generated.py --count 40 --targets sm_90 --jobs 2 --versions 13.4
    python benchmarks/generated.py --count 30 --family attention --emulate 5 --json out.json
    python benchmarks/generated.py --report out.json                   # the report of saved rows
    python benchmarks/generated.py --variants out.json                 # the same variants again

Samples `--count` variants from the grammar of tests/generated/ (matmul, attention, row and
elementwise families; `--seed` makes the sample reproducible, `--versions` keeps to bytecode
versions), exports each with cuTile (cached), compiles it for every target with both compilers
and reads both cubins with cuobjdump (benchmarks/sass_stats.py). It prints:

* the parity table: per class (compile, tensor-core family, TMA, cp.async, mbarrier, setmaxnreg,
  ldmatrix/stmatrix, access width, spills, registers, shared memory, hot-loop instructions per
  tensor-core instruction), the pairs where the class applies (NVIDIA's uses the feature), how many
  of them ours matches, overall and per family;
* every pair short of NVIDIA's, per class, with what each side has and our compiler's remarks
  (`tileiras --remarks=all`) that explain why;
* with `--emulate K`, K sampled variants run on the PTX emulator (race checker on) against numpy.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))   # the tree's compiler, not an installed copy
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "realistic"))
sys.path.insert(0, str(ROOT / "tests" / "generated"))
sys.path.insert(0, str(ROOT / "tests"))
import compilers  # noqa: E402  (both compilers, CPU time measured)
import gaps  # noqa: E402     (the tensor-core generation and access-width readings)
from gaps import TMA_LOADS, TMA_STORES  # noqa: E402
import sass_stats  # noqa: E402
import export  # noqa: E402
import grammar  # noqa: E402
import launch  # noqa: E402
import variant_reference as reference  # noqa: E402  (not `reference`: tests/corpus has one)

TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
FAMILIES = ("matmul", "attention", "row", "elementwise")


# ------------------------------------------------------------------------------ compiling

def compile_ours(bytecode: Path, gpu: str, out: Path, timeout: float) -> tuple[compilers.Compiled, list[dict]]:
    """compilers.compile_ours with --remarks=all written as YAML: (result, remark documents)."""
    from remark_yaml import load_remarks

    yaml_path = out.with_suffix(".remarks.yaml")
    argv = [sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit-metadata",
            "--remarks=all", "--remark-format=yaml", f"--remarks-output-file={yaml_path}",
            "--gpu-name", gpu, str(bytecode), "-o", str(out)]
    compilers._compile_python_once()
    proc, cpu, wall = compilers._run(argv, timeout)
    ok = proc is not None and proc.returncode == 0 and out.exists()
    smem = None
    meta = Path(str(out) + ".json")
    if ok and meta.exists():
        kernels = json.loads(meta.read_text()).get("kernels", [])
        smem = int(kernels[0].get("dynamic_smem", 0)) if kernels else None
    try:
        remarks = load_remarks(yaml_path.read_text()) if yaml_path.exists() else []
    except Exception:       # a remark file cut short by a failed compile says nothing reliable
        remarks = []
    yaml_path.unlink(missing_ok=True)
    meta.unlink(missing_ok=True)
    return compilers.Compiled(ok, out, cpu, wall, "" if ok else compilers._error_line(proc, timeout), smem), remarks


def _side(result: compilers.Compiled, symbol: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"ok": result.ok, "cpu_s": result.cpu_s, "error": result.message}
    if result.ok:
        try:
            stats = sass_stats.cubin_stats(result.cubin).get(symbol)
        except sass_stats.CuobjdumpError as exc:
            stats, entry["error"] = None, str(exc)
        if stats is not None:
            entry["stats"] = sass_stats.as_json(stats)
            entry["dynamic_smem"] = result.dynamic_smem or 0
    result.cubin.unlink(missing_ok=True)
    return entry


def measure(v: grammar.Variant, gpu: str, src: Path, tmp: Path, timeout: float) -> dict[str, Any]:
    """Both compiles of one variant for one target, cuobjdump's figures and our remarks."""
    row: dict[str, Any] = {"name": v.name, "family": v.family, "template": v.template, "gpu": gpu}
    ours, remarks = compile_ours(src, gpu, tmp / f"{v.name}.{gpu}.ours.cubin", timeout)
    row["ours"] = _side(ours, v.name)
    row["ours"]["remarks"] = [{"kind": r["Kind"], "name": r["Name"],
                               "args": {k: str(val) for a in r["Args"] if isinstance(a, dict) for k, val in a.items()}}
                              for r in remarks
                              if r["Name"] != "RemarkTensorViewIndexTypeNarrowing"]
    row["nvidia"] = _side(compilers.compile_nvidia(src, gpu, tmp / f"{v.name}.{gpu}.nvidia.cubin", timeout), v.name)
    return row


# ------------------------------------------------------------------------------ the classes

def _smem(e: dict) -> int:
    return (e["stats"]["shared_static"] or 0) + (e.get("dynamic_smem") or 0)


def _per_mma(s: dict) -> float | None:
    return s["hot_loop"] / s["hot_loop_tensor_core"] if s["hot_loop"] and s["hot_loop_tensor_core"] else None


def _tma(s: dict, which: tuple[str, ...] = TMA_LOADS + TMA_STORES) -> int:
    return sum(n for op, n in s["tma"].items() if op in which)


@dataclass(frozen=True)
class Class:
    """One class of the parity table: where it applies (NVIDIA's side has the feature), whether ours
    matches, what each side has, and which of our remarks say why not."""
    says: str
    applies: Callable[[dict, dict], bool]            # (ours' stats, NVIDIA's stats)
    matches: Callable[[dict, dict], bool]
    detail: Callable[[dict, dict], str]
    remarks: tuple[str, ...]                         # our remark names that explain a shortfall


# Entries get the side's whole entry (stats plus dynamic shared memory) as `o` and `n`.
CLASSES: dict[str, Class] = {
    "tensor-core family": Class(
        "the same tensor-core generation (mma.sync / wgmma / tcgen05) as NVIDIA's",
        lambda o, n: bool(n["stats"]["tensor_core"]),
        lambda o, n: gaps._generations(o["stats"]) == gaps._generations(n["stats"]),
        lambda o, n: f"{','.join(sorted(gaps._generations(o['stats']))) or 'none'}|"
                     f"{','.join(sorted(gaps._generations(n['stats'])))}",
        ("RemarkTensorCoreMMA", "RemarkTmaCtaPair")),
    "TMA": Class(
        "TMA loads and TMA stores where NVIDIA's uses them (each direction on its own)",
        lambda o, n: _tma(n["stats"]) > 0,
        lambda o, n: all(_tma(o["stats"], w) or not _tma(n["stats"], w) for w in (TMA_LOADS, TMA_STORES)),
        lambda o, n: f"TMA loads {_tma(o['stats'], TMA_LOADS)}|{_tma(n['stats'], TMA_LOADS)}, "
                     f"stores {_tma(o['stats'], TMA_STORES)}|{_tma(n['stats'], TMA_STORES)}",
        ("RemarkTmaLoadMissed", "RemarkTmaStoreMissed", "RemarkMemoryLoadInstructionSelected",
         "RemarkMemoryStoreInstructionSelected")),
    "cp.async": Class(
        "cp.async (or TMA) where NVIDIA's uses cp.async",
        lambda o, n: n["stats"]["ldgsts"] > 0, lambda o, n: o["stats"]["ldgsts"] > 0 or _tma(o["stats"]) > 0,
        lambda o, n: f"{o['stats']['ldgsts']}|{n['stats']['ldgsts']} LDGSTS",
        ("RemarkMemoryAsyncCopyMissed", "RemarkPipelineMissed", "RemarkMemoryLoadInstructionSelected")),
    "mbarrier": Class(
        "mbarriers where NVIDIA's uses them",
        lambda o, n: n["stats"]["mbarrier"] > 0, lambda o, n: o["stats"]["mbarrier"] > 0,
        lambda o, n: f"{o['stats']['mbarrier']}|{n['stats']['mbarrier']} SYNCS",
        ("RemarkPipelineMissed", "RemarkWarpSpecialization", "RemarkTmaLoadMissed")),
    "setmaxnreg": Class(
        "register reallocation between warp roles where NVIDIA's does it",
        lambda o, n: bool(n["stats"]["setmaxnreg"]), lambda o, n: bool(o["stats"]["setmaxnreg"]),
        lambda o, n: "no setmaxnreg", ("RemarkWarpSpecialization", "RemarkPipelineMissed")),
    "ldmatrix/stmatrix": Class(
        "ldmatrix / stmatrix where NVIDIA's uses them",
        lambda o, n: n["stats"]["ldmatrix"] > 0 or n["stats"]["stmatrix"] > 0,
        lambda o, n: (o["stats"]["ldmatrix"] > 0 or not n["stats"]["ldmatrix"])
        and (o["stats"]["stmatrix"] > 0 or not n["stats"]["stmatrix"]),
        lambda o, n: f"LDSM {o['stats']['ldmatrix']}|{n['stats']['ldmatrix']}, "
                     f"STSM {o['stats']['stmatrix']}|{n['stats']['stmatrix']}",
        ("RemarkTensorCoreMMA", "RemarkMemoryStoreInstructionSelected")),
    "access width": Class(
        "the widest global load and store at least NVIDIA's (TMA counts as 128 bits)",
        lambda o, n: True,
        lambda o, n: all(gaps._widest(o["stats"], k) >= gaps._widest(n["stats"], k)
                         for k in ("global_loads", "global_stores")),
        lambda o, n: "loads {}|{}, stores {}|{} bits".format(
            *(gaps._widest(s["stats"], k) for k in ("global_loads", "global_stores") for s in (o, n))),
        ("RemarkMemoryVectorizedLoadMissed", "RemarkMemoryVectorizedStoreMissed",
         "RemarkMemoryLoadInstructionSelected", "RemarkMemoryStoreInstructionSelected")),
    "spills": Class(
        "no more spill instructions than NVIDIA's",
        lambda o, n: True, lambda o, n: o["stats"]["spills"] <= n["stats"]["spills"],
        lambda o, n: f"{o['stats']['spills']}|{n['stats']['spills']} LDL+STL",
        ("RemarkRegisterSpills", "RemarkRegisterUsage")),
    "registers": Class(
        "at most NVIDIA's registers per thread",
        lambda o, n: True, lambda o, n: (o["stats"]["registers"] or 0) <= (n["stats"]["registers"] or 0),
        lambda o, n: f"{o['stats']['registers']}|{n['stats']['registers']} registers, "
                     f"{o['stats']['threads']}|{n['stats']['threads']} threads",
        ("RemarkRegisterUsage", "RemarkWarpSpecialization")),
    "shared memory": Class(
        "at most 1.25x NVIDIA's shared memory (static + dynamic) per CTA",
        lambda o, n: _smem(n) > 0, lambda o, n: _smem(o) <= 1.25 * _smem(n),
        lambda o, n: f"{_smem(o) / 1024:.0f}|{_smem(n) / 1024:.0f} KiB",
        ("RemarkPipelineDepth", "RemarkPipelineMissed")),
    "hot loop / tensor-core instr": Class(
        "at most 1.25x NVIDIA's instructions per tensor-core instruction in the hot loop",
        lambda o, n: _per_mma(n["stats"]) is not None,
        lambda o, n: _per_mma(o["stats"]) is not None and _per_mma(o["stats"]) <= 1.25 * _per_mma(n["stats"]),
        lambda o, n: "{}|{:.1f} instructions per MMA".format(
            f"{_per_mma(o['stats']):.1f}" if _per_mma(o["stats"]) else "no MMA in the hot loop", _per_mma(n["stats"])),
        ("RemarkPipelineDepth", "RemarkPipelineMissed", "RemarkTensorCoreMMA", "RemarkWarpSpecialization")),
}


def explain(row: dict, names: tuple[str, ...]) -> str:
    """Our remarks of `names` on this pair, missed/failed first: the compiler's own account."""
    rank = {"Missed": 0, "Failure": 0, "Analysis": 1, "Passed": 2}
    picked = sorted((r for r in row["ours"].get("remarks", []) if r["name"] in names),
                    key=lambda r: (rank.get(r["kind"], 3), names.index(r["name"])))
    seen, parts = set(), []
    for r in picked:
        args = r["args"]
        why = args.get("Reason") or args.get("Instruction") or args.get("Registers") or ""
        text = f"{r['name'].removeprefix('Remark')}: {args.get('Remark', '')}" + (f" ({why})" if why else "")
        if text not in seen:
            seen.add(text)
            parts.append(text)
    return "; ".join(parts[:3]) if parts else "no remark of ours explains it"


# ------------------------------------------------------------------------------ the report

def _cell(ok: int, total: int) -> str:
    return f"{ok}/{total}" + (f" {100 * ok / total:.0f}%" if total else "")


# the groupings of the parity tables: a row's column value
GROUPINGS: dict[str, tuple[tuple[str, ...], Callable[[dict], str]]] = {
    "family": (FAMILIES, lambda r: r["family"]),
    "target": (TARGETS, lambda r: r["gpu"]),
    "facts": (grammar.FACTS, lambda r: grammar.parse(r["name"])["facts"]),
    "bytecode version": (grammar.VERSIONS, lambda r: grammar.parse(r["name"])["version"]),
}


def parity(rows: list[dict], by: str = "family") -> tuple[list[str], list[list[str]], dict[str, list[tuple[dict, str]]]]:
    """(columns; table rows: class, all, each value of `by`; short pairs per class with their detail)."""
    values, key = GROUPINGS[by]
    nv_ok = [r for r in rows if r["nvidia"]["ok"]]
    both = [r for r in nv_ok if r["ours"].get("stats") and r["nvidia"].get("stats")]
    short: dict[str, list[tuple[dict, str]]] = {"compile": [(r, r["ours"]["error"]) for r in nv_ok
                                                            if not r["ours"]["ok"]]}

    def counts(sel: list[dict], ok: Callable[[dict], bool]) -> list[str]:
        return [_cell(sum(ok(r) for r in sel), len(sel))] + \
               [_cell(sum(ok(r) for r in sel if key(r) == x), sum(key(r) == x for r in sel)) for x in values]

    table = [["compile", *counts(nv_ok, lambda r: r["ours"]["ok"])]]
    for name, cls in CLASSES.items():
        sel = [r for r in both if cls.applies(r["ours"], r["nvidia"])]
        table.append([name, *counts(sel, lambda r, c=cls: c.matches(r["ours"], r["nvidia"]))])
        short[name] = [(r, cls.detail(r["ours"], r["nvidia"])) for r in sel if not cls.matches(r["ours"], r["nvidia"])]
    return ["class", "all", *values], table, short


def _table(cols: list[str], table: list[list[str]]) -> list[str]:
    widths = [max(len(c), *(len(t[i]) for t in table)) for i, c in enumerate(cols)]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [cols, *table]]


def report(rows: list[dict], header: str) -> list[str]:
    out = [header]
    for by in GROUPINGS:
        cols, table, short = parity(rows, by)
        out += ["", f"parity per class and {by}: pairs where ours matches NVIDIA's / pairs where the class applies"]
        out += _table(cols, table)
    out.append("")
    out.append("classes: compile = ours compiles where NVIDIA's does; " +
               "; ".join(f"{n} = {c.says}" for n, c in CLASSES.items()))
    nv_fail = [r for r in rows if not r["nvidia"]["ok"]]
    out.append(f"NVIDIA's failed {len(nv_fail)} pairs (not compared): " +
               ", ".join(sorted({r['nvidia']['error'][:90] for r in nv_fail}))[:600])
    both = [r for r in rows if r["ours"]["ok"] and r["nvidia"]["ok"] and r["nvidia"]["cpu_s"] > 0]
    if both:
        geo = math.exp(sum(math.log(max(r["ours"]["cpu_s"], 1e-3) / r["nvidia"]["cpu_s"]) for r in both) / len(both))
        out.append(f"compile CPU time ours/NVIDIA's over {len(both)} pairs: geomean {geo:.2f}x")
    out += ["", "pairs short of NVIDIA's (ours|NVIDIA's), with our remarks:"]
    for name, pairs in short.items():
        if not pairs:
            continue
        out.append(f"  {name}: {len(pairs)}")
        remark_names = CLASSES[name].remarks if name in CLASSES else ()
        for r, detail in pairs:
            why = "" if name == "compile" else f" -- {explain(r, remark_names)}"
            out.append(f"    {r['name']} {r['gpu']}: {detail}{why}")
    return out


# ------------------------------------------------------------------------------ emulation

def first_target(spec: launch.Launch) -> int:
    """The oldest SM the variant's kernel runs on: the block-scaled mma sm_100, fp8 (and fp4) values
    sm_89, the rest sm_80."""
    arrays = [a for p in spec.params for a in (p.arrays if isinstance(p, launch.ArrList) else (p,))
              if isinstance(a, launch.Arr)]
    fp8 = any(a.dtype.startswith(("float8", "float4")) for a in arrays)
    return 100 if spec.kernel == "gemm_scaled" else 89 if fp8 else 80


def pick_emulated(variants: list[grammar.Variant], k: int) -> list[grammar.Variant]:
    """K variants with a numpy reference: the cheapest of each template in turn, so that a small K
    spans the families."""
    by_template: dict[str, list[grammar.Variant]] = {}
    for v in sorted((v for v in variants if reference.supported(v)), key=lambda v: reference.cost(launch.launch(v))):
        by_template.setdefault(v.template, []).append(v)
    queues = list(by_template.values())
    chosen: list[grammar.Variant] = []
    while len(chosen) < k and any(queues):
        for q in queues:
            if q and len(chosen) < k:
                chosen.append(q.pop(0))
    return chosen


def emulate(variants: list[grammar.Variant], k: int, targets: list[str]) -> list[str]:
    """K sampled variants (pick_emulated), each on one target in turn, on the emulator against numpy."""
    chosen = pick_emulated(variants, k)
    lines = [f"emulator vs numpy, {len(chosen)} variants:"]
    for i, v in enumerate(chosen):
        spec = launch.launch(v)
        usable = [t for t in targets if int(t[3:]) >= first_target(spec)] or ["sm_100"]
        gpu = usable[i % len(usable)]
        try:
            problems = reference.emulate(v, spec, export.bytecode(v, gpu).read_bytes(), gpu)
        except Exception as exc:    # a compile or emulator failure is a finding, reported
            problems = [f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"]
        lines.append(f"  {'ok  ' if not problems else 'FAIL'} {v.name} {gpu}" + "".join(f"\n      {p}" for p in problems))
    passed = sum(line.startswith("  ok") for line in lines)
    lines.append(f"  {passed} of {len(chosen)} match numpy")
    return lines


def named(path: Path) -> list[grammar.Variant]:
    """The variants a file names: one name a line, or the rows a --json run wrote (in their order)."""
    text = path.read_text()
    names = [r["name"] for r in json.loads(text)] if text.lstrip().startswith("[") else text.split()
    return [grammar.parse(n) for n in dict.fromkeys(names)]


def restriction(specs: list[str]) -> grammar.Restrict | None:
    """--restrict AXIS=V,V,... -> the axis values (of any template) whose text is listed."""
    out: grammar.Restrict = {}
    for spec in specs:
        axis, _, values = spec.partition("=")
        wanted = set(values.split(","))
        out[axis] = tuple({v for t in grammar.TEMPLATES.values() for a in t.axes if a.name == axis
                           for v in a.values if str(v) in wanted})
    return out or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=40, help="variants to sample (default 40)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), metavar="SM")
    parser.add_argument("--versions", nargs="+", choices=grammar.VERSIONS, help="bytecode versions to draw")
    parser.add_argument("--family", action="append", choices=FAMILIES, help="only these families")
    parser.add_argument("--restrict", action="append", default=[], metavar="AXIS=V,V",
                        help="draw only these values of an axis (e.g. dtype=mxfp8,nvfp4 or facts=none)")
    parser.add_argument("--jobs", type=int, default=1, help="pairs compiled in parallel (default 1)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per compile")
    parser.add_argument("--emulate", type=int, default=0, metavar="K", help="run K variants on the emulator")
    parser.add_argument("--json", type=Path, help="write every row (figures, remarks) to this file")
    parser.add_argument("--variants", type=Path, metavar="FILE",
                        help="compile these variants (names, one a line, or the rows of a --json file) instead of a sample")
    parser.add_argument("--emulate-only", action="store_true", help="skip the compiles: only --emulate K")
    parser.add_argument("--report", type=Path, metavar="JSON", help="only print the report of rows written by --json")
    args = parser.parse_args(argv)
    if args.report:
        rows = json.loads(args.report.read_text())
        names = {r["name"] for r in rows}
        print("\n".join(report(rows, f"generated variants, ours vs NVIDIA's tileiras: {len(names)} variants, "
                                      f"{len(rows)} kernel-target pairs from {args.report}")))
        return 0
    if compilers.nvidia_tileiras() is None or sass_stats.cuobjdump_path() is None:
        print("error: needs nvidia-cuda-tileiras and nvidia-cuda-cuobjdump (pip install them)", file=sys.stderr)
        return 2
    templates = tuple(n for n, t in grammar.TEMPLATES.items() if not args.family or t.family in args.family)
    restrict = restriction(args.restrict + ([f"version={','.join(args.versions)}"] if args.versions else []))
    variants = named(args.variants) if args.variants else grammar.sample(args.seed, args.count, templates, restrict)
    if args.emulate_only:
        print("\n".join(emulate(variants, args.emulate, args.targets)))
        return 0
    jobs, lines = [], []
    for v in variants:                  # exported up front: cuTile is not thread-safe
        for gpu in args.targets:
            try:
                jobs.append((v, gpu, export.bytecode(v, gpu)))
            except export.ExportError as exc:
                lines.append(f"export failed: {exc}")
    header = (f"generated variants, ours vs NVIDIA's tileiras: seed {args.seed}, {len(variants)} variants, "
              f"{len(jobs)} kernel-target pairs, targets {' '.join(args.targets)}, "
              f"versions {' '.join(args.versions or grammar.VERSIONS)}")
    print(header, flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(measure, v, gpu, src, Path(tmp), args.timeout) for v, gpu, src in jobs]
        for i, fut in enumerate(futures):
            rows.append(fut.result())
            r = rows[-1]
            if args.json:               # after every pair, so that a long run cut short still reports
                args.json.write_text(json.dumps(rows, indent=1) + "\n")
            print(f"[{i + 1}/{len(jobs)}] {r['name']} {r['gpu']}: ours {'ok' if r['ours']['ok'] else 'FAIL'}, "
                  f"NVIDIA's {'ok' if r['nvidia']['ok'] else 'FAIL'}", file=sys.stderr, flush=True)
    for line in lines + report(rows, header):
        print(line)
    if args.emulate:
        for line in emulate(variants, args.emulate, args.targets):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    export.stable_hashes(str(Path(__file__).resolve()))
    sys.exit(main())
