"""Regenerate the example's TileIR bytecode with cuTile Python (no GPU needed).

Run once and commit the outputs; Bazel never runs this script:
    python examples/bazel/kernels/export_kernels.py
"""

from __future__ import annotations

from pathlib import Path

import cuda.tile as ct
from cuda.tile.compilation import (ArrayConstraint, CallingConvention, KernelSignature,
                                   ScalarConstraint, export_kernel)

TILE = 256  # main.c launches N / TILE blocks


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


def _parameters(name: str, tile: int) -> tuple[object, list[object]]:
    table = {
        "vadd": (vadd, [_array(), _array(), _array(), tile]),
        "vscale": (vscale, [_array(), _array(), ScalarConstraint(ct.float32), tile]),
    }
    return table[name]


KERNEL_NAMES = ("vadd", "vscale")


def export(name: str, out: Path, tile: int = TILE) -> Path:
    """Write kernel `name` as TileIR bytecode; its launcher is `<name>_launch`."""
    kernel, params = _parameters(name, tile)
    signature = KernelSignature(params, CallingConvention.cutile_python_v1(), symbol=name)
    export_kernel(kernel, [signature], out, output_format="tileir_bytecode")
    return out


def main() -> None:
    here = Path(__file__).resolve().parent
    for name in KERNEL_NAMES:
        out = export(name, here / f"{name}.tileirbc")
        print(f"wrote {out.relative_to(here.parent)} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
