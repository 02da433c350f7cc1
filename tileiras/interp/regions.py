"""reduce and scan: a combiner region applied along one dimension.

The combiner's block takes (element, accumulator) pairs, one pair per
operand, and yields the new accumulators. It is associative by contract and
holds only elementwise ops on 0-d tiles, so the interpreter runs it on whole
slices at once: reduce combines neighbouring halves in a tree (padded with
the identity to a power of two), scan is a Hillis-Steele inclusive prefix:
log2(n) combiner runs instead of n. A combiner with a shape-changing op
falls back to element-by-element folding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.attributes import FloatAttr, IntegerAttr
from ..ir.core import Block, Operation
from ..ir.types import Type
from .elements import element, from_bits, from_int, int_bits, storage_dtype

# Ops whose result shape comes from their type, not their operands: a combiner
# holding one cannot run on batched slices.
_SHAPED = frozenset({
    "cuda_tile.broadcast", "cuda_tile.reshape", "cuda_tile.permute", "cuda_tile.cat", "cuda_tile.extract",
    "cuda_tile.insert", "cuda_tile.iota", "cuda_tile.reduce", "cuda_tile.scan", "cuda_tile.mmaf",
    "cuda_tile.mmai", "cuda_tile.mmaf_scaled", "cuda_tile.pack", "cuda_tile.unpack", "cuda_tile.load_ptr_tko",
    "cuda_tile.load_view_tko",
})


def _identity(attr: Any, t: Type) -> np.ndarray:
    elem = element(t)
    if isinstance(attr, FloatAttr):
        return from_bits(np.asarray(attr.bits, np.uint64), elem)
    if isinstance(attr, IntegerAttr):
        return from_int(np.asarray(attr.value & (2**64 - 1), np.uint64), int_bits(elem))
    return np.asarray(attr, storage_dtype(elem))


def _vectorizable(block: Block) -> bool:
    return all(op.name not in _SHAPED for op in block.operations)


def _combine(m: Any, body: Block, elems: list, accs: list, dtypes: list) -> list:
    args = [v for pair in zip(elems, accs) for v in pair]
    out = m.call_block(body, args)
    shape = np.shape(elems[0])
    return [np.broadcast_to(np.asarray(v).astype(dt, copy=False), shape) for v, dt in zip(out, dtypes)]


def _fold_scalar(m: Any, body: Block, xs: list, ids: list, dtypes: list) -> list:
    """Sequential fold along axis 0 of each operand, one element position at a time."""
    rest = xs[0].shape[1:]
    outs = [np.empty(rest, dt) for dt in dtypes]
    for pos in np.ndindex(*rest):
        acc = list(ids)
        for j in range(xs[0].shape[0]):
            acc = _combine(m, body, [x[(j,) + pos] for x in xs], acc, dtypes)
        for o, a in zip(outs, acc):
            o[pos] = a
    return outs


def _reduce(m: Any, op: Operation, args: list) -> list:
    dim = int(op.attributes["dim"])
    body = op.regions[0].block
    types = [v.type for v in op.operands]
    dtypes = [storage_dtype(t) for t in types]
    ids = [_identity(a, t) for a, t in zip(op.attributes["identities"], types)]
    xs = [np.moveaxis(np.asarray(x), dim, 0) for x in args]
    n = xs[0].shape[0]
    if not _vectorizable(body):
        return _fold_scalar(m, body, xs, ids, dtypes)
    size = 1 << max(0, (n - 1).bit_length())
    if size != n:
        xs = [np.concatenate([x, np.broadcast_to(i, (size - n,) + x.shape[1:]).astype(x.dtype)])
              for x, i in zip(xs, ids)]
    if n == 0:
        return [np.broadcast_to(i, x.shape[1:]).astype(dt) for x, i, dt in zip(xs, ids, dtypes)]
    while size > 1:
        xs = _combine(m, body, [x[1::2] for x in xs], [x[0::2] for x in xs], dtypes)
        size //= 2
    return [x[0] for x in xs]


def _scan(m: Any, op: Operation, args: list) -> list:
    dim = int(op.attributes["dim"])
    reverse = bool(op.attributes.get("reverse", False))
    body = op.regions[0].block
    types = [v.type for v in op.operands]
    dtypes = [storage_dtype(t) for t in types]
    ids = [_identity(a, t) for a, t in zip(op.attributes["identities"], types)]
    xs = [np.moveaxis(np.asarray(x), dim, 0) for x in args]
    if reverse:
        xs = [x[::-1] for x in xs]
    n = xs[0].shape[0]
    if not _vectorizable(body):
        ys = [np.empty(x.shape, dt) for x, dt in zip(xs, dtypes)]
        for pos in np.ndindex(*xs[0].shape[1:]):
            acc = list(ids)
            for j in range(n):
                acc = _combine(m, body, [x[(j,) + pos] for x in xs], acc, dtypes)
                for y, a in zip(ys, acc):
                    y[(j,) + pos] = a
    else:
        ys = [np.array(x, dtype=dt) for x, dt in zip(xs, dtypes)]
        d = 1
        while d < n:
            new = _combine(m, body, [y[d:] for y in ys], [y[:-d] for y in ys], dtypes)
            ys = [np.concatenate([y[:d], v]) for y, v in zip(ys, new)]
            d *= 2
    if reverse:
        ys = [y[::-1] for y in ys]
    return [np.moveaxis(y, 0, dim) for y in ys]


HANDLERS = {
    "cuda_tile.reduce": _reduce,
    "cuda_tile.scan": _scan,
}
