"""PTX emulator speed: simulated warp-instructions per second on the corpus kernels.

Every corpus case (the manifest's inputs and grids) is compiled once with our
compiler (PTX for --gpu-name, default sm_80), then run on the SIMT emulator.
Per kernel it reports the warp-instructions one launch issues, the CTAs, the
first launch's time (parsing and decoding the PTX included) and the best of N
warm launches, and the warm rate in warp-instructions per second; the last
row totals the suite. Compile time is not counted: see compile_time.py.

Run: `python benchmarks/emulator.py [--gpu-name sm_90] [--repeats 3] [--filter ew_]`.
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CORPUS, ROOT, print_table  # noqa: E402

sys.path.insert(0, str(CORPUS))
sys.path.insert(0, str(ROOT))


def _launches(gpu: str, name_filter: str) -> list:
    """(label, ptx, kernel, grid, block, dynamic smem, params factory) per corpus case."""
    import reference

    from tileiras.frontend import load_module
    from tileiras.ir.types import FunctionType
    from tileiras.runtime.backends import RunRequest, compile_module, kernel_info
    from tileiras.runtime.marshal import bind

    manifest = reference.load_manifest()
    compiled: dict[tuple[str, str], tuple[str, object]] = {}
    out = []
    for kernel, entry, case in reference.iter_cases(manifest):
        label = f"{entry['symbol']}-{case['name']}"
        if name_filter and name_filter not in label:
            continue
        target = kernel.get("gpu_code") or gpu
        target = gpu if target in ("sm_90", "sm_80") else target
        files = kernel["files"]
        path = files[max(files, key=lambda v: tuple(int(p) for p in v.split(".")))]
        module = load_module(str(CORPUS / path))
        args = reference.make_args(kernel, entry, case)
        order = [p["name"] for p in entry["params"] if p["kind"] in ("array", "scalar", "list")]
        ops = [op for op in module.regions[0].block.operations
               if op.name == "cuda_tile.entry" and op.attributes.get("sym_name") == entry["symbol"]]
        ftype = ops[0].attributes["function_type"]
        assert isinstance(ftype, FunctionType)
        binding = bind(entry["symbol"], list(ftype.inputs), [args[n] for n in order])
        key = (path, target)
        if key not in compiled:
            req = RunRequest(module, (CORPUS / path).read_bytes(), path, entry["symbol"], (1, 1, 1), binding,
                             target)
            try:
                try:
                    ptx, meta = compile_module(req, "ptx", target)
                except Exception as exc:
                    # a module using a feature the target lacks (f8 on sm_80) runs on the oldest that has it
                    found = re.search(r"requires (sm_\d+) or newer", str(exc))
                    if not found:
                        raise
                    ptx, meta = compile_module(req, "ptx", found.group(1))
            except Exception as exc:   # a kernel our compiler does not handle yet: reported, not timed
                compiled[key] = (None, str(exc).splitlines()[0])
            else:
                compiled[key] = (ptx.decode(), meta)
        ptx, meta = compiled[key]
        if ptx is None:
            out.append((label, None, meta, None, None, 0, None, None))
            continue
        info = kernel_info(meta, entry["symbol"])
        grid = tuple((list(case["grid"]) + [1, 1, 1])[:3])
        out.append((label, ptx, entry["symbol"], grid, tuple(info.block), int(info.dynamic_smem), binding, info))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-name", default="sm_80")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--filter", default="", help="only cases whose name contains this")
    args = parser.parse_args()

    from tileiras.emulator import Memory, run_ptx

    rows = []
    total_wi = total_first = total_best = 0.0
    suite_start = time.perf_counter()
    from tileiras.runtime.backends import tma_hidden_params

    for label, ptx, kernel, grid, block, smem, binding, info in _launches(args.gpu_name, args.filter):
        if ptx is None:
            rows.append((label, "-", "-", "-", "-", f"not compiled: {kernel[:50]}"))
            continue
        best = float("inf")
        first = None
        stats = None
        try:
            for i in range(args.repeats + 1):
                memory = Memory()
                params = binding.upload(memory)
                params = [*params, *tma_hidden_params(info, params)]   # a TMA kernel's tensor maps
                start = time.perf_counter()
                stats = run_ptx(ptx, kernel, grid, block, params, memory, dynamic_smem=smem, stdout=io.StringIO())
                elapsed = time.perf_counter() - start
                if i == 0:
                    first = elapsed
                else:
                    best = min(best, elapsed)
        except Exception as exc:
            rows.append((label, "-", "-", "-", "-", f"failed: {str(exc).splitlines()[0][:60]}"))
            continue
        assert stats is not None and first is not None
        total_wi += stats.warp_instructions
        total_first += first
        total_best += best
        rows.append((label, f"{stats.warp_instructions}", f"{stats.ctas}", f"{first * 1000:.1f} ms",
                     f"{best * 1000:.1f} ms", f"{stats.warp_instructions / best:,.0f}"))
    rows.append(("TOTAL", f"{int(total_wi)}", "", f"{total_first:.2f} s", f"{total_best:.2f} s",
                 f"{total_wi / total_best:,.0f}" if total_best else "-"))
    print_table(f"PTX emulator on the corpus ({args.gpu_name}), warm = best of {args.repeats}; "
                f"suite wall time {time.perf_counter() - suite_start:.1f} s including compiles",
                ("case", "warp-instr", "CTAs", "first", "warm", "warp-instr/s"), rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
