"""Regenerate the example's TileIR bytecode with cuTile Python (no GPU needed).

Run once and commit the outputs; Bazel never runs this script:
    python examples/bazel/kernels/export_kernels.py
"""

from __future__ import annotations

from pathlib import Path

import cuda.tile as ct
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                   ScalarConstraint, export_kernel)

TILE = 256


@ct.kernel
def vadd(a, b, c, tile: ct.Constant[int]):
    """c = a + b over 1-D float32 arrays."""
    bid = ct.bid(0)
    x = ct.load(a, index=(bid,), shape=(tile,))
    y = ct.load(b, index=(bid,), shape=(tile,))
    ct.store(c, index=(bid,), tile=x + y)


@ct.kernel
def vscale(x, y, alpha: float, tile: ct.Constant[int]):
    """y = alpha * x over 1-D float32 arrays."""
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


def main() -> None:
    here = Path(__file__).resolve().parent
    for name, (kernel, params) in KERNELS.items():
        signature = KernelSignature(params, CallingConvention.cutile_python_v1(), symbol=name)
        out = here / f"{name}.tileirbc"
        export_kernel(kernel, [signature], out, output_format="tileir_bytecode")
        print(f"wrote {out.relative_to(here.parent)} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
