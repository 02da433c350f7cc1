"""Shared-memory bank conflicts of our PTX, measured on the emulator (tileiras/emulator/banks.py).

    python benchmarks/bank_conflicts.py mm_i8_128x128x64 mm_tf32_64x64x32 --gpu-name sm_90

Each realistic configuration (tests/realistic) runs at its emulator-sized launch; every shared
load and store counts its wavefronts (one per phase of a conflict-free access, more where threads
of a phase hit one bank at different words). Prints per configuration the total against the ideal,
and the PTX lines that waste the most wavefronts: the cost a GPU profiler would show and SASS does
not (NVIDIA's int8 and tf32 matmuls transpose B with ldmatrix; ours with 32-bit shared stores).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "realistic"))


def measure(name: str, gpu: str, top: int) -> list[str]:
    from test_realistic_emulator import _run

    from tileiras.driver.tileiras_main import main as tileiras
    from tileiras.emulator import banks

    with banks.collecting() as stats:
        _run(name, "small", "emulator", gpu)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.ptx"
        src = ROOT / "tests" / "realistic" / "bytecode" / f"{name}.tileirbc"
        tileiras(["--emit=ptx", "--gpu-name", gpu, str(src), "-o", str(out)])
        lines = out.read_text().split("\n")
    total = sum(r[1] for r in stats.values())
    ideal = sum(r[2] for r in stats.values())
    report = [f"{name} {gpu}: {total} shared wavefronts, {ideal} without conflicts "
              f"({total / ideal if ideal else 0:.2f}x)"]
    worst = sorted(stats.items(), key=lambda kv: kv[1][2] - kv[1][1])[:top]
    for line, (warps, waves, best) in worst:
        if waves == best:
            break
        text = lines[line - 1].strip() if 0 < line <= len(lines) else "?"
        report.append(f"  line {line:5d}: {waves / best:5.2f}x ({waves - best} extra in {warps} warp executions)  {text}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", help="tests/realistic configuration names")
    parser.add_argument("--gpu-name", default="sm_90")
    parser.add_argument("--top", type=int, default=8, help="worst lines shown per configuration")
    args = parser.parse_args(argv)
    for name in args.configs:
        print("\n".join(measure(name, args.gpu_name, args.top)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
