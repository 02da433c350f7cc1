"""`assume`: pass the value through, and check the promise it makes.

A broken assumption is undefined behaviour on a GPU (the compiler trusts
it), so the ground truth reports it instead of running on: the predicates
of AttrDefs.td are checked exactly -- `bounded` on the signed values,
`div_by` on the first element of each group of `every` along `along` (the
others must step by one element), `same_elements` per dimension group, and
`div_by` on a tensor_view on its base address.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.attributes import Bounded, DivBy, SameElements
from ..ir.core import Operation
from .elements import element, int_bits, is_int, mem_size, to_signed, to_unsigned
from .errors import InterpError
from .views import TensorView


def _broken(op: Operation, what: str) -> InterpError:
    return InterpError(f"assumption broken: {what}; a GPU would run with undefined behaviour")


def _div_by(op: Operation, pred: DivBy, value: Any) -> None:
    t = op.operands[0].type
    if isinstance(value, TensorView):
        if value.base % pred.divisor:
            raise _broken(op, f"tensor_view base address {value.base:#x} is not divisible by {pred.divisor}")
        return
    x = np.asarray(value)
    if is_int(t):
        vals = to_signed(x, int_bits(t))
        step = 1
    else:                                            # pointers: unsigned addresses
        vals = to_unsigned(x, 64).astype(object)
        step = mem_size(element(t).pointee)          # type: ignore[union-attr]
    every = pred.every or 1
    along = pred.along or 0
    if x.ndim == 0:
        firsts, rest_ok = vals.reshape(1), True
    else:
        moved = np.moveaxis(vals, along, 0)
        starts = np.arange(0, moved.shape[0], every)
        firsts = moved[starts]
        offs = np.arange(moved.shape[0]) % every
        base = np.repeat(firsts, every, axis=0)[: moved.shape[0]]
        rest_ok = bool(np.all(moved == base + (offs * step).reshape((-1,) + (1,) * (moved.ndim - 1))))
    bad = np.asarray([int(v) % pred.divisor for v in np.asarray(firsts).reshape(-1)])
    if bad.any() or not rest_ok:
        shown = ", ".join(str(int(v)) for v in np.asarray(firsts).reshape(-1)[:4])
        group = f", every {pred.every} along {pred.along}" if pred.every else ""
        raise _broken(op, f"div_by<{pred.divisor}{group}> does not hold (group starts {shown}...)")


def _bounded(op: Operation, pred: Bounded, value: Any) -> None:
    vals = to_signed(np.asarray(value), int_bits(op.operands[0].type))
    if pred.lb is not None and (vals < pred.lb).any():
        raise _broken(op, f"bounded<{pred.lb}, {'?' if pred.ub is None else pred.ub}>: value {int(vals.min())}")
    if pred.ub is not None and (vals > pred.ub).any():
        raise _broken(op, f"bounded<{'?' if pred.lb is None else pred.lb}, {pred.ub}>: value {int(vals.max())}")


def _same_elements(op: Operation, pred: SameElements, value: Any) -> None:
    x = np.asarray(value)
    for axis, size in enumerate(pred.values):
        if size <= 1 or axis >= x.ndim:
            continue
        moved = np.moveaxis(x, axis, 0)
        firsts = np.repeat(moved[::size], size, axis=0)[: moved.shape[0]]
        if not np.array_equal(moved, firsts):
            raise _broken(op, f"same_elements<{list(pred.values)}> does not hold along dimension {axis}")


def _assume(m: Any, op: Operation, args: list) -> list:
    pred = op.attributes.get("predicate")
    value = args[0]
    if isinstance(pred, DivBy):
        _div_by(op, pred, value)
    elif isinstance(pred, Bounded):
        _bounded(op, pred, value)
    elif isinstance(pred, SameElements):
        _same_elements(op, pred, value)
    return [value]


HANDLERS = {"cuda_tile.assume": _assume}
