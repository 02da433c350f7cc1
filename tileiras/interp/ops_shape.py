"""Constants, shape algebra, selection and launch geometry."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.core import Operation
from ..ir.types import TileType
from .elements import from_bits, from_int, int_bits, storage_dtype, to_unsigned
from .errors import InterpError


def dense_values(value: Any, tile_type: TileType) -> np.ndarray:
    """The elements of a DenseElements attribute (a splat is broadcast)."""
    elem = tile_type.element
    name = elem.name  # type: ignore[union-attr]
    raw = np.frombuffer(value.raw, np.uint8)
    count = int(np.prod(tile_type.shape, dtype=np.int64))
    if name == "i1":
        vals = raw != 0
    elif name in ("i4", "f4E2M1FN", "fnv8E5M3FNU"):  # one byte (or nibble) each, no numpy dtype
        vals = from_bits(raw.astype(np.uint64), elem)
    else:
        dt = storage_dtype(elem)
        if raw.size % dt.itemsize:
            raise InterpError(f"constant of type {tile_type} has {raw.size} bytes")
        vals = raw.view(dt)
    if vals.size == 1:
        return np.broadcast_to(vals.reshape(()), tile_type.shape)
    if vals.size != count:
        raise InterpError(f"constant of type {tile_type} has {vals.size} elements")
    return vals.reshape(tile_type.shape)


def _constant(m: Any, op: Operation, args: list) -> list:
    return [dense_values(op.attributes["value"], op.results[0].type)]  # type: ignore[arg-type]


def _iota(m: Any, op: Operation, args: list) -> list:
    t = op.results[0].type
    return [from_int(np.arange(t.shape[0], dtype=np.int64), int_bits(t))]  # type: ignore[attr-defined]


def _broadcast(m: Any, op: Operation, args: list) -> list:
    return [np.broadcast_to(args[0], op.results[0].type.shape)]  # type: ignore[attr-defined]


def _reshape(m: Any, op: Operation, args: list) -> list:
    return [np.reshape(args[0], op.results[0].type.shape)]  # type: ignore[attr-defined]


def _permute(m: Any, op: Operation, args: list) -> list:
    return [np.transpose(args[0], tuple(op.attributes["permutation"]))]


def _cat(m: Any, op: Operation, args: list) -> list:
    return [np.concatenate([np.asarray(args[0]), np.asarray(args[1])], axis=int(op.attributes["dim"]))]


def _slices(op: Operation, big: tuple[int, ...], small: tuple[int, ...], indices: list) -> tuple[slice, ...]:
    out = []
    for d, (n, k, idx) in enumerate(zip(big, small, indices)):
        i = int(to_unsigned(idx, int_bits(op.operand_group("indices")[d].type)))
        if (i + 1) * k > n:
            raise InterpError(f"slice index {i} of dimension {d} is out of bounds "
                              f"({n // k} slices of {k})")
        out.append(slice(i * k, (i + 1) * k))
    return tuple(out)


def _extract(m: Any, op: Operation, args: list) -> list:
    src = np.asarray(args[0])
    shape = op.results[0].type.shape  # type: ignore[attr-defined]
    return [src[_slices(op, src.shape, shape, args[1:])]]


def _insert(m: Any, op: Operation, args: list) -> list:
    src, dst = np.asarray(args[0]), np.array(args[1])
    dst[_slices(op, dst.shape, src.shape, args[2:])] = src
    return [dst]


def _select(m: Any, op: Operation, args: list) -> list:
    return [np.where(args[0], args[1], args[2]).astype(np.asarray(args[1]).dtype)]


def _block_id(m: Any, op: Operation, args: list) -> list:
    return [np.asarray(v, np.int32) for v in m.block_id]


def _num_blocks(m: Any, op: Operation, args: list) -> list:
    return [np.asarray(v, np.int32) for v in m.grid]


HANDLERS = {
    "cuda_tile.constant": _constant,
    "cuda_tile.iota": _iota,
    "cuda_tile.broadcast": _broadcast,
    "cuda_tile.reshape": _reshape,
    "cuda_tile.permute": _permute,
    "cuda_tile.cat": _cat,
    "cuda_tile.extract": _extract,
    "cuda_tile.insert": _insert,
    "cuda_tile.select": _select,
    "cuda_tile.get_tile_block_id": _block_id,
    "cuda_tile.get_num_tile_blocks": _num_blocks,
}
