"""The canonical form: one kernel, one PTX, whatever form it arrives in, and what the passes cost.

    python benchmarks/canonical_form.py                       # all three reports
    python benchmarks/canonical_form.py --versions [--corpus unit|realistic|tilegym] [--gpu-name sm_90]
    python benchmarks/canonical_form.py --rewrites [--seeds 3]
    python benchmarks/canonical_form.py --cost [--limit 20]

--versions: each kernel at every bytecode version (the unit corpus as committed at 13.1-13.4; realistic
and TileGym exported by cuTile at 13.1-13.3, for the target itself where cuTile needs one; all re-encoded
at 13.5 by our writer) compiled to PTX for each target and compared with its 13.4 PTX (comments and
debug lines aside). --rewrites: the same comparison after each semantics-preserving rewrite of
tests/ir_rewrites.py. --cost: whole compiles to cubin (cache off, --time-passes): the canonical-form
passes' share of the compile's CPU time. Prints counts and the pairs that differ.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
TARGETS = ("sm_80", "sm_90", "sm_100", "sm_120")
CANONICAL = ("canonicalize", "simplify-tokens", "licm", "cse", "dce", "canonical-order",
             "canonicalize-nv_tileaa")


def _kernels(corpus: str) -> list[tuple[str, Path]]:
    if corpus == "unit":
        from canonical_support import unit_versions

        return [(name, paths[-1]) for name, paths in unit_versions().items()]
    return [(p.stem, p) for p in sorted((ROOT / "tests" / corpus / "bytecode").glob("*.tileirbc"))]


def _forms(corpus: str, names: list[str], gpu: str, tmp: Path) -> dict[str, dict[str, bytes]]:
    """name -> version -> bytecode of every form of each kernel but the committed one."""
    from canonical_support import exported, reencoded, unit_versions

    forms: dict[str, dict[str, bytes]] = {n: {} for n in names}
    if corpus == "unit":
        for name, paths in unit_versions().items():
            if name in forms:
                forms[name] = {p.stem: p.read_bytes() for p in paths[:-1]}
    else:
        for version in ("13.1", "13.2", "13.3"):
            for name, path in exported(corpus, names, version, gpu, tmp / f"{corpus}-{gpu}-{version}").items():
                forms[name][version] = path.read_bytes()
    for name, path in _kernels(corpus):
        if name in forms:
            forms[name]["13.5"] = reencoded(path, "13.5")
    return forms


def versions(corpora: list[str], targets: list[str]) -> None:
    from canonical_support import normalized_ptx
    from test_canonical_invariance import CHANGES_WITH_VERSION
    from tileiras.frontend import load_module

    with tempfile.TemporaryDirectory() as tmp:
        for corpus in corpora:
            kernels = [(n, p) for n, p in _kernels(corpus) if n not in CHANGES_WITH_VERSION]
            same = differ = refused = 0
            for gpu in targets:
                forms = _forms(corpus, [n for n, _ in kernels], gpu, Path(tmp))
                for name, path in kernels:
                    want = normalized_ptx(load_module(path.read_bytes(), path.name), gpu)
                    if want is None:
                        refused += 1
                        continue
                    bad = [v for v, data in sorted(forms[name].items()) if normalized_ptx(load_module(data, name), gpu) != want]
                    same += not bad
                    differ += bool(bad)
                    if bad:
                        print(f"  differs: {corpus} {name} {gpu} at {', '.join(bad)}", flush=True)
            print(f"versions: {corpus}: {same} kernel-target pairs the same PTX at every version, {differ} differ, "
                  f"{refused} refused by the target", flush=True)


def rewrites(corpora: list[str], targets: list[str], seeds: int) -> None:
    from canonical_support import normalized_ptx
    from ir_rewrites import REWRITES
    from tileiras.frontend import load_module

    for corpus in corpora:
        same = differ = 0
        for name, path in _kernels(corpus):
            data = path.read_bytes()
            for gpu in targets:
                want = normalized_ptx(load_module(data, name), gpu)
                if want is None:
                    continue
                for rewrite, run in sorted(REWRITES.items()):
                    for seed in range(seeds):
                        module = load_module(data, name)
                        if not run(module, random.Random(seed)):
                            continue
                        ok = normalized_ptx(module, gpu) == want
                        same += ok
                        differ += not ok
                        if not ok:
                            print(f"  differs: {corpus} {name} {gpu} {rewrite} seed {seed}", flush=True)
        print(f"rewrites: {corpus}: {same} rewritten kernels the same PTX, {differ} differ", flush=True)


_ROW = re.compile(r"^\s*([0-9.]+)s\s+(.+?)(?: \((sm_\d+)\))?$")


def cost(corpora: list[str], gpu: str, limit: int) -> None:
    total_cpu = canonical = 0.0
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for corpus in corpora:
            for name, path in _kernels(corpus)[:limit or None]:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache",
                                       "--time-passes", "--gpu-name", gpu, str(path), "-o", f"{tmp}/k.cubin"],
                                      capture_output=True, text=True, cwd=ROOT)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if done.returncode:
                    continue
                count += 1
                total_cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                for line in done.stderr.splitlines():
                    m = _ROW.match(line)
                    if m and m.group(2) in CANONICAL:
                        canonical += float(m.group(1))
    share = 100 * canonical / total_cpu if total_cpu else 0.0
    print(f"cost: {count} compiles to cubin for {gpu}: CPU {total_cpu:.1f} s (ptxas and the LLVM worker included), "
          f"canonical-form passes {canonical:.2f} s = {share:.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", action="store_true")
    parser.add_argument("--rewrites", action="store_true")
    parser.add_argument("--cost", action="store_true")
    parser.add_argument("--corpus", action="append", choices=("unit", "realistic", "tilegym"))
    parser.add_argument("--gpu-name", action="append", help=f"targets (default {', '.join(TARGETS)}; --cost: sm_90)")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0, help="--cost: the first N kernels of each corpus")
    args = parser.parse_args()
    every = not (args.versions or args.rewrites or args.cost)
    corpora = args.corpus or ["unit", "realistic", "tilegym"]
    targets = args.gpu_name or list(TARGETS)
    os.environ.setdefault("TILEIRAS_CACHE_DIR", tempfile.mkdtemp(prefix="tileiras-bench-"))
    if args.versions or every:
        versions(corpora, targets)
    if args.rewrites or every:
        rewrites(corpora, targets, args.seeds)
    if args.cost or every:
        cost(corpora, (args.gpu_name or ["sm_90"])[0], args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
