"""Matrix multiply-accumulate: mmaf, mmai, mmaf_scaled (2-D or batched 3-D).

Floating MMA is computed in f64 (exact products of every input type, one
accumulation) and rounded once into the accumulator type; tensor cores
accumulate in a different order and precision, so other backends match it
within a tolerance that grows with K. Integer MMA is exact: products of i8
summed in f64 stay below 2**53 for any K a tile can hold, then wrap to i32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.core import Operation
from .elements import element, from_int, to_signed, to_unsigned
from .floats import float_format, quantize

_F64 = np.float64


def _operand(x: Any, t: Any) -> np.ndarray:
    """An MMA input in f64; tf32 keeps only its 19 significant bits, as tensor cores read it."""
    x = np.asarray(x)
    if element(t).name == "tf32":  # type: ignore[union-attr]
        x = (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return x.astype(_F64)


def _mmaf(m: Any, op: Operation, args: list) -> list:
    a, b = _operand(args[0], op.operands[0].type), _operand(args[1], op.operands[1].type)
    c = np.asarray(args[2], _F64)
    fmt = float_format(element(op.results[0].type).name)  # type: ignore[union-attr]
    with np.errstate(all="ignore"):
        return [quantize(np.matmul(a, b) + c, None, fmt)]


def _mmai(m: Any, op: Operation, args: list) -> list:
    def view(x: Any, attr: str) -> np.ndarray:
        signed = op.attributes.get(attr, "signed") == "signed"
        return (to_signed(x, 8) if signed else to_unsigned(x, 8)).astype(_F64)

    a, b = view(args[0], "signedness_lhs"), view(args[1], "signedness_rhs")
    acc = to_signed(args[2], 32)
    return [from_int(np.matmul(a, b).astype(np.int64) + acc, 32)]


def _mmaf_scaled(m: Any, op: Operation, args: list) -> list:
    a, b, c, sa, sb = (np.asarray(x, _F64) for x in args)
    k = a.shape[-1]
    va, vb = k // sa.shape[-1], k // sb.shape[-2]      # scale block sizes along K
    a = a * np.repeat(sa, va, axis=-1)
    b = b * np.repeat(sb, vb, axis=-2)
    fmt = float_format(element(op.results[0].type).name)  # type: ignore[union-attr]
    with np.errstate(all="ignore"):
        return [quantize(np.matmul(a, b) + c, None, fmt)]


HANDLERS = {
    "cuda_tile.mmaf": _mmaf,
    "cuda_tile.mmai": _mmai,
    "cuda_tile.mmaf_scaled": _mmaf_scaled,
}
