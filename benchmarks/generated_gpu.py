"""Generated kernel variants on a CUDA GPU: our cubin's outputs against numpy.

    python benchmarks/generated_gpu.py --save DIR --count 200 --seed 0 --pick 40   # here: compile
    python benchmarks/generated_gpu.py --load DIR                                  # on the GPU

`--save` samples `--count` variants from the grammar of tests/generated/ (the numpy-referenced
ones that run on `--gpu-name`), picks `--pick` of them the way benchmarks/generated.py picks the
emulated ones (the cheapest of each template in turn), exports each with cuTile and compiles it
with our compiler, writing the bytecode, the cubin and its launch metadata to DIR. `--load` needs
no compiler and no cuTile (numpy, ml_dtypes, cuda-bindings): each variant runs in a process of
its own (a fault or a hang spoils only its CUDA context) through `tileir run`'s GPU backend with
the saved cubin, on the small launch shapes of the emulator tests, and is compared with numpy by
the tolerance the emulator tests use (tests/generated/variant_reference.py). Exit 1 when any
variant differs, faults or hangs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "realistic"))
sys.path.insert(0, str(ROOT / "tests" / "generated"))
sys.path.insert(0, str(ROOT / "tests"))
import grammar  # noqa: E402
import launch  # noqa: E402
import variant_reference as reference  # noqa: E402


def first_target(spec: launch.Launch) -> int:
    """The oldest SM the variant's kernel runs on (block-scaled mma sm_100, fp8 sm_89)."""
    arrays = [a for p in spec.params for a in (p.arrays if isinstance(p, launch.ArrList) else (p,))
              if isinstance(a, launch.Arr)]
    fp8 = any(a.dtype.startswith(("float8", "float4")) for a in arrays)
    return 100 if spec.kernel == "gemm_scaled" else 89 if fp8 else 80


def save(out: Path, count: int, seed: int, pick: int, gpu: str) -> int:
    import compilers
    import export
    from generated import pick_emulated

    variants = [v for v in grammar.sample(seed, count)
                if reference.supported(v) and first_target(launch.launch(v)) <= int(gpu[3:])]
    chosen = pick_emulated(variants, pick)
    out.mkdir(parents=True, exist_ok=True)
    saved, failed = [], 0
    for v in chosen:
        try:
            src = export.bytecode(v, gpu)
        except export.ExportError as exc:
            print(f"export failed: {v.name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        (out / f"{v.name}.tileirbc").write_bytes(src.read_bytes())
        cubin = out / f"{v.name}.cubin"
        result = compilers.compile_ours(src, gpu, cubin)     # the cubin and its .json metadata
        if not result.ok:
            print(f"compile failed: {v.name}: {result.message}", file=sys.stderr)
            failed += 1
            continue
        saved.append(v.name)
        print(f"saved {v.name}", flush=True)
    (out / "variants.json").write_text(json.dumps({"gpu": gpu, "variants": saved}, indent=1))
    print(f"{len(saved)} variants saved in {out}, {failed} failed")
    return 1 if failed else 0


def run_one(kit: Path, name: str) -> list[str]:
    """Run variant `name` from the kit on the GPU: the problems found (none: it matches numpy)."""
    import numpy as np

    from tileiras.codegen.metadata import ModuleMetadata
    from tileiras.frontend import load_module
    from tileiras.runtime import backends, run_arrays

    cubin = (kit / f"{name}.cubin").read_bytes()
    meta = ModuleMetadata.from_json((kit / f"{name}.cubin.json").read_bytes())
    backends.compile_module = lambda req, emit, gpu: (cubin, meta)      # the saved compile
    v = grammar.parse(name)
    spec = launch.launch(v)
    args = reference.inputs(v, spec)
    want = reference.expected(v, spec, args)
    source = (kit / f"{name}.tileirbc").read_bytes()
    module = load_module(source, f"{name}.tileirbc")
    got = run_arrays(module, name, spec.grid, [np.copy(a) for a in args], backend="gpu",
                     source=source, filename=f"{name}.tileirbc")
    return reference.compare(v, spec, got, want, args)


def load(kit: Path, timeout: float) -> int:
    names = json.loads((kit / "variants.json").read_text())["variants"]
    passed = 0
    for name in names:
        argv = [sys.executable, __file__, "--child", name, "--load", str(kit)]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  env=dict(os.environ, PYTHONHASHSEED="0"))
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
            problems = json.loads(lines[-1]) if lines else [
                f"exit {proc.returncode}: " + " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])]
        except subprocess.TimeoutExpired:
            problems = [f"no answer in {timeout:g} s (a hang?)"]
        passed += not problems
        print(f"  {'ok  ' if not problems else 'FAIL'} {name}" + "".join(f"\n      {p}" for p in problems),
              flush=True)
    print(f"GPU vs numpy: {passed} of {len(names)} variants match")
    return 0 if passed == len(names) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, metavar="DIR")
    parser.add_argument("--load", type=Path, metavar="DIR")
    parser.add_argument("--count", type=int, default=200, help="variants sampled (--save)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pick", type=int, default=40, help="variants kept (--save)")
    parser.add_argument("--gpu-name", default="sm_90", help="the GPU's target (--save)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per variant (--load)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        try:
            problems = run_one(args.load, args.child)
        except Exception as exc:          # a launch failure is a finding, reported as such
            problems = [f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"]
        print(json.dumps(problems))
        return 0
    if args.save:
        return save(args.save, args.count, args.seed, args.pick, args.gpu_name)
    if args.load:
        return load(args.load, args.timeout)
    parser.error("one of --save DIR or --load DIR is needed")
    return 2


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":     # cuTile walks sets of strings: deterministic exports
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]],
                  dict(os.environ, PYTHONHASHSEED="0"))
    sys.exit(main())
