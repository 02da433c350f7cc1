"""How much of each kernel's shared memory `plan-shared-memory` predicts before emission.

    python benchmarks/shared_plan.py                            # the three corpora, sm_80/90/100/120
    python benchmarks/shared_plan.py --corpus tilegym --only fmha --gpu-name sm_100
    python benchmarks/shared_plan.py --save-ir NEW [--against OLD]   # LLVM IR per pair; compare two trees

Lowers every kernel-target pair in-process to LLVM IR (no ptxas) with the plan's strict check (a
request the plan mispredicted is an internal error) and reads the schedule of --print-ir-after-all.
Prints per corpus (realistic, tilegym, unit): the pairs lowered, the pairs where every request the
lowering made was predicted, those whose plan covers every role (`SharedPlan.complete`: the pass
chose how the kernel stages its tiles from every buffer it will have), the roles whose buffers went
above the plan (not predicted), with the number of pairs asking for each, and the roles the plans
do not cover. `--save-ir` writes each pair's LLVM IR;
`--against` compares them with another tree's (generated code identical, or which pairs differ).
Targets a kernel's element types do not run on (fp8 on sm_80, block scaling before sm_100) are
counted apart, as refused.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import os
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
_UNPREDICTED = re.compile(r"placed above the plan, not planned: (.*)$")


def corpora() -> dict[str, list[tuple[str, Path]]]:
    """corpus -> (kernel name, bytecode) of each kernel (the unit corpus: each kernel's newest version)."""
    out = {name: [(p.stem, p) for p in sorted((ROOT / "tests" / name / "bytecode").glob("*.tileirbc"))]
           for name in ("realistic", "tilegym")}
    out["unit"] = [(d.name, sorted(d.glob("*.tileirbc"))[-1])
                   for d in sorted((ROOT / "tests" / "corpus" / "bytecode").iterdir()) if any(d.glob("*.tileirbc"))]
    return out


def lower(job: tuple[str, str, Path, str, str]) -> dict:
    """One pair lowered: ok / refused / error, and what its schedule says of the plan."""
    corpus, name, path, gpu, save = job
    sys.path.insert(0, str(ROOT))
    os.environ["TILEIRAS_STRICT_SHARED_PLAN"] = "1"
    from tileiras.errors import CompileError
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    row = {"corpus": corpus, "kernel": name, "gpu": gpu, "status": "ok", "complete": 0, "kernels": 0,
           "unpredicted": [], "uncovered": []}
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ir, _ = lower_module(load_module(path.read_bytes(), path.name), gpu, print_ir_after_all=True)
    except CompileError as e:
        text = str(e)
        row["status"] = "error" if "internal" in text or "requires sm_" not in text else "refused"
        row["message"] = text.splitlines()[0][:300]
        return row
    if save:
        Path(save, f"{name}.{gpu}.ll").write_text(ir)
    for line in err.getvalue().splitlines():
        if line.startswith("//   predicted roles: "):
            row["kernels"] += 1
            row["complete"] += line.endswith("placed above the plan: none")
        if line.startswith("//   predicted roles: "):
            row["uncovered"] += [r for r in line.split("placed above the plan: ")[1].split(", ") if r != "none"]
        match = _UNPREDICTED.search(line)
        if match:
            row["unpredicted"] += [part.rsplit(" x", 1)[0] for part in match.group(1).split(", ")]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=("realistic", "tilegym", "unit"), action="append")
    parser.add_argument("--only", default="", help="kernels whose name contains this")
    parser.add_argument("--gpu-name", action="append", help="targets (default: sm_80, sm_90, sm_100, sm_120)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--save-ir", default="", help="write each pair's LLVM IR into this folder")
    parser.add_argument("--against", default="", help="compare the saved LLVM IR with this folder's")
    parser.add_argument("--list", action="store_true", help="print each pair whose plan is incomplete")
    args = parser.parse_args()
    if args.against and not args.save_ir:
        parser.error("--against needs --save-ir")
    if args.save_ir:
        Path(args.save_ir).mkdir(parents=True, exist_ok=True)
    gpus = args.gpu_name or list(TARGETS)
    jobs = [(corpus, name, path, gpu, args.save_ir) for corpus, kernels in corpora().items()
            if not args.corpus or corpus in args.corpus for name, path in kernels if args.only in name for gpu in gpus]
    with concurrent.futures.ProcessPoolExecutor(max(1, args.jobs)) as pool:
        rows = list(pool.map(lower, jobs, chunksize=1))
    failed = 0
    for corpus in dict.fromkeys(row["corpus"] for row in rows):
        mine = [row for row in rows if row["corpus"] == corpus]
        lowered = [row for row in mine if row["status"] == "ok"]
        complete = [row for row in lowered if row["complete"] == row["kernels"]]
        roles = Counter(role for row in lowered for role in set(row["unpredicted"]))
        print(f"{corpus}: {len(lowered)} pairs lowered ({sum(r['status'] == 'refused' for r in mine)} refused by "
              f"the target); every request predicted in {sum(not r['unpredicted'] for r in lowered)}, every role "
              f"covered (the plan complete) in {len(complete)}")
        if roles:
            print("  roles placed above the plan (pairs): " + ", ".join(f"{role} {n}" for role, n in roles.most_common()))
        uncovered = Counter(role for row in lowered for role in set(row["uncovered"]))
        if uncovered:
            print("  roles the plan does not cover (pairs): " +
                  ", ".join(f"{role} {n}" for role, n in uncovered.most_common()))
        if args.list:
            for row in lowered:
                if row["unpredicted"] or row["complete"] != row["kernels"]:
                    print(f"    {row['kernel']} {row['gpu']}: asked {', '.join(sorted(set(row['unpredicted']))) or '-'}; "
                          f"not covered {', '.join(sorted(set(row['uncovered']))) or '-'}")
        for row in mine:
            if row["status"] == "error":
                failed += 1
                print(f"  ERROR {row['kernel']} {row['gpu']}: {row['message']}")
    if args.against:
        differ = [f.name for f in sorted(Path(args.save_ir).glob("*.ll"))
                  if not (Path(args.against) / f.name).exists() or
                  (Path(args.against) / f.name).read_text() != f.read_text()]
        print(f"LLVM IR: {len(differ)} of {len(list(Path(args.save_ir).glob('*.ll')))} pairs differ from "
              f"{args.against}" + "".join(f"\n  {name}" for name in differ))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
