"""Generated kernel variants on a CUDA GPU: our cubin's outputs against numpy.

    python benchmarks/generated_gpu.py --save DIR --count 200 --seed 0 --pick 40   # here: compile
    python benchmarks/generated_gpu.py --save DIR --names NAME...                  # named variants
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
import export  # noqa: E402  (re-runs a script with a fixed hash seed)
import grammar  # noqa: E402
import launch  # noqa: E402
import variant_reference as reference  # noqa: E402


def save(out: Path, count: int, seed: int, pick: int, gpu: str, names: list[str] | None = None) -> int:
    import compilers
    from generated import first_target, pick_emulated

    if names:       # the variants a change was made for, checked on the GPU by name
        chosen = [grammar.parse(n) for n in names]
    else:
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
        theirs = compilers.compile_nvidia(src, gpu, out / f"{v.name}.nvidia.cubin")
        if theirs.ok:       # its launch: threads from the cubin, shared memory by cuTile's rule
            import sass_stats

            stats = sass_stats.cubin_stats(theirs.cubin).get(v.name)
            if stats is None or not stats.threads:
                theirs.cubin.unlink(missing_ok=True)
            else:
                (out / f"{v.name}.nvidia.json").write_text(json.dumps(
                    {"threads": stats.threads, "static_smem": stats.shared_static or 0}))
        saved.append(v.name)
        print(f"saved {v.name}", flush=True)
    (out / "variants.json").write_text(json.dumps({"gpu": gpu, "variants": saved}, indent=1))
    print(f"{len(saved)} variants saved in {out}, {failed} failed")
    return 1 if failed else 0


def run_one(kit: Path, name: str, side: str = "ours") -> list[str]:
    """Run variant `name` from the kit on the GPU (our cubin, or NVIDIA's): the problems found (none:
    it matches numpy)."""
    from tileiras.codegen.metadata import ModuleMetadata
    from tileiras.frontend import load_module
    from tileiras.ir.record import replace
    from tileiras.runtime import backends, run_arrays

    meta = ModuleMetadata.from_json((kit / f"{name}.cubin.json").read_bytes())
    if side == "ours":
        cubin = (kit / f"{name}.cubin").read_bytes()
    else:       # NVIDIA's cubin takes the same parameters; its block and shared memory are its own
        cubin = (kit / f"{name}.nvidia.cubin").read_bytes()
        launch_facts = json.loads((kit / f"{name}.nvidia.json").read_text())
        optin = _smem_optin()
        meta = replace(meta, kernels=tuple(
            replace(k, block=(launch_facts["threads"], 1, 1), tma=(),
                    dynamic_smem=max(0, optin - launch_facts["static_smem"])) for k in meta.kernels))
    backends.compile_module = lambda req, emit, gpu: (cubin, meta)      # the saved compile
    v = grammar.parse(name)
    spec = launch.launch(v)
    args = reference.inputs(v, spec)
    want = reference.expected(v, spec, args)
    source = (kit / f"{name}.tileirbc").read_bytes()
    module = load_module(source, f"{name}.tileirbc")
    got = run_arrays(module, name, spec.grid, reference.copies(args), backend="gpu",
                     source=source, filename=f"{name}.tileirbc")
    return reference.compare(v, spec, got, want, args)


def _smem_optin() -> int:
    from cuda.bindings import driver

    driver.cuInit(0)
    _, dev = driver.cuDeviceGet(0)
    attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    return int(driver.cuDeviceGetAttribute(attr, dev)[1])


def _child(kit: Path, name: str, side: str, timeout: float) -> list[str]:
    argv = [sys.executable, __file__, "--child", name, "--side", side, "--load", str(kit)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, PYTHONHASHSEED="0"))
    except subprocess.TimeoutExpired:
        return [f"no answer in {timeout:g} s (a hang?)"]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("[")]
    return json.loads(lines[-1]) if lines else [
        f"exit {proc.returncode}: " + " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])]


def _mismatch(problems: list[str]) -> bool:
    """Whether the run finished and only its values differ from numpy (variant_reference.compare's words)."""
    return bool(problems) and all(p.startswith("argument ") and " differ" in p for p in problems)


def load(kit: Path, timeout: float) -> int:
    names = json.loads((kit / "variants.json").read_text())["variants"]
    passed = hardware = 0
    for name in names:
        problems = _child(kit, name, "ours", timeout)
        verdict = "ok  " if not problems else "FAIL"
        if _mismatch(problems) and (kit / f"{name}.nvidia.json").exists():
            theirs = _child(kit, name, "nvidia", timeout)
            if _mismatch(theirs):   # NVIDIA's differs from numpy too: the hardware's arithmetic
                verdict, hardware = "hw  ", hardware + 1
                problems = problems + [f"NVIDIA's cubin differs too: {theirs[0]}"]
            else:
                problems = problems + [f"NVIDIA's cubin: {theirs[0] if theirs else 'matches numpy'}"]
        passed += verdict != "FAIL"
        print(f"  {verdict} {name}" + "".join(f"\n      {p}" for p in problems), flush=True)
    print(f"GPU vs numpy: {passed} of {len(names)} variants match"
          + (f" ({hardware} only as NVIDIA's cubin does: the hardware's arithmetic)" if hardware else ""))
    return 0 if passed == len(names) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", type=Path, metavar="DIR")
    parser.add_argument("--load", type=Path, metavar="DIR")
    parser.add_argument("--count", type=int, default=200, help="variants sampled (--save)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pick", type=int, default=40, help="variants kept (--save)")
    parser.add_argument("--gpu-name", default="sm_90", help="the GPU's target (--save)")
    parser.add_argument("--names", nargs="+", metavar="NAME", help="these variants instead of a sample (--save)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per variant (--load)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--side", default="ours", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        try:
            problems = run_one(args.load, args.child, args.side)
        except Exception as exc:          # a launch failure is a finding, reported as such
            problems = [f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}"]
        print(json.dumps(problems))
        return 0
    if args.save:
        return save(args.save, args.count, args.seed, args.pick, args.gpu_name, args.names)
    if args.load:
        return load(args.load, args.timeout)
    parser.error("one of --save DIR or --load DIR is needed")
    return 2


if __name__ == "__main__":
    export.stable_hashes(str(Path(__file__).resolve()))
    sys.exit(main())
