"""The K loops of warp-specialized (and unspecialized) kernels, per role, in the SASS.

    python benchmarks/sass_roles.py mm_f16_128x128x64 mm_bf16_128x256x64 [path.tileirbc] [--gpu-name sm_100]

A loop is a strongly connected part of a function's control-flow graph, so that a K loop counts
with the try_wait retries ptxas moves out of line (sass_stats.loops reads address ranges, which
such a retry's backward branch stretches over half the function). Its role is what it issues:
copies (LDGSTS / UTMALDG: producer), tensor-core MMAs (UTC*MMA, HGMMA, HMMA...: mma) or both
(one loop doing everything, the unspecialized form), or, with neither, shared stores after an
mbarrier wait (prepare: sm_100 epilogue warps preparing stages for the MMA warp). Per kernel,
ours then NVIDIA's: threads, registers, spills, shared memory (KiB) and the instructions of each
role's largest loop.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "realistic"))
sys.path.insert(0, str(HERE.parent))
import sass_stats  # noqa: E402
from tileiras.schedule.scc import cyclic_components  # noqa: E402

COPIES = frozenset({"LDGSTS", "UTMALDG"})
_TARGET = re.compile(r"(0x[0-9a-fA-F]+)\s*$")


def _successors(instrs: list) -> list[list[int]]:
    at = {ins.address: n for n, ins in enumerate(instrs)}
    out = []
    for n, ins in enumerate(instrs):
        succ = []
        m = _TARGET.search(ins.operands.strip()) if ins.base == "BRA" else None
        if m and int(m.group(1), 16) in at:
            succ.append(at[int(m.group(1), 16)])
        # unconditional: no guard predicate and no uniform predicate operand (BRA.U UP0, 0x...)
        ends = ins.base in ("BRA", "EXIT", "RET", "BRX") and not ins.predicate \
            and "P" not in ins.operands.split("0x")[0]
        if not ends and n + 1 < len(instrs):
            succ.append(n + 1)
        out.append(succ)
    return out


def cycles(func: "sass_stats.SassFunction") -> list[list]:
    """The instructions (NOPs left out) of each strongly connected part with a cycle (Tarjan, iterative)."""
    instrs = [i for i in func.instrs if i.base != "NOP"]
    succ = dict(enumerate(_successors(instrs)))
    return [[instrs[n] for n in sorted(part)] for part in cyclic_components(succ)]


def role(body: list) -> str:
    """What a loop's warps do: copy, issue MMAs, both, or prepare stages (shared stores beside an
    mbarrier wait, no copy nor MMA: sm_100 epilogue warps rounding tf32 operands or restaging
    block scales for the MMA warp)."""
    copies = any(i.base in COPIES for i in body)
    mmas = any(i.base in sass_stats.TENSOR_CORE for i in body)
    prepares = any(i.base == "STS" for i in body) and any(i.base == "SYNCS" for i in body)
    return "all" if copies and mmas else "producer" if copies else "mma" if mmas else "prepare" if prepares else ""


def role_loops(func: "sass_stats.SassFunction") -> dict[str, int]:
    """Role -> instructions of its largest loop."""
    out: dict[str, int] = {}
    for body in cycles(func):
        r = role(body)
        if r:
            out[r] = max(out.get(r, 0), len(body))
    return out


def main() -> None:
    import compilers

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--gpu-name", default="sm_100")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            bytecode = Path(name) if name.endswith(".tileirbc") else \
                HERE.parent / "tests" / "realistic" / "bytecode" / f"{name}.tileirbc"
            name = bytecode.stem
            row = [f"{name:22}"]
            for who, compile_ in (("ours", compilers.compile_ours), ("nvidia", compilers.compile_nvidia)):
                done = compile_(bytecode, args.gpu_name, Path(tmp) / f"{name}.{who}.cubin")
                if not done.ok:
                    row.append(f"{who}: failed: {done.message}")
                    continue
                text = sass_stats.cuobjdump(done.cubin, "-sass")
                [(fname, func)] = sass_stats.parse_sass(text).items()
                s = sass_stats.cubin_stats(done.cubin)[fname]
                smem = ((done.dynamic_smem or 0) + (s.shared_static or 0)) / 1024
                loops = " ".join(f"{r}={n}" for r, n in sorted(role_loops(func).items()))
                row.append(f"{who}: thr {s.threads} regs {s.registers} spills {s.spills} smem {smem:.0f}K {loops}")
            print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
