"""Export the example kernels to TileIR bytecode with cuTile Python (no GPU needed).

Run once and commit the outputs; the builds never run this script:

    python examples/kernels/make_kernels.py

writes vadd.tileirbc and vscale.tileirbc into every example that uses them
(examples/cmake/kernels and examples/python-extension/kernels), or only into
the directories given as arguments.

    vadd(a, b, c)        c = a + b            1-D float32 arrays
    vscale(x, y, alpha)  y = alpha * x        1-D float32 arrays, float32 scalar

Each block handles TILE elements; the tail past the array's end is masked.
An array argument becomes (pointer, length, stride) launcher parameters.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cuda.tile as ct
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature, ScalarConstraint,
                                   export_kernel)

TILE = 256
BYTECODE_VERSION = "13.4"   # target-independent bytecode needs 13.3 or later
EXAMPLES = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT_DIRS = (EXAMPLES / "cmake" / "kernels", EXAMPLES / "python-extension" / "kernels")


@ct.kernel
def vadd(a, b, c, tile: ct.Constant[int]):
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(tile,))
    y = ct.load(b, index=(bid,), shape=(tile,))
    ct.store(c, index=(bid,), tile=x + y)


@ct.kernel
def vscale(x, y, alpha: float, tile: ct.Constant[int]):
    bid = ct.bid(0)
    v = ct.load(x, index=(bid,), shape=(tile,))
    ct.store(y, index=(bid,), tile=v * alpha)


def _array() -> ArrayConstraint:
    return ArrayConstraint(ct.float32, 1, index_dtype=ct.int32, stride_lower_bound_incl=0,
                           alias_groups=(), may_alias_internally=False)


KERNELS = {
    "vadd": (vadd, [_array(), _array(), _array(), TILE]),
    "vscale": (vscale, [_array(), _array(), ScalarConstraint(ct.float32), TILE]),
}


def main(argv: list[str]) -> int:
    out_dirs = [Path(a) for a in argv] or list(DEFAULT_OUTPUT_DIRS)
    for name, (kernel, params) in KERNELS.items():
        signature = KernelSignature(params, CallingConvention.cutile_python_v1(), symbol=name)
        for out_dir in out_dirs:
            out_dir.mkdir(parents=True, exist_ok=True)
            out = out_dir / f"{name}.tileirbc"
            export_kernel(kernel, [signature], str(out), output_format="tileir_bytecode",
                          bytecode_version=BYTECODE_VERSION, gpu_code=None)
            print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
