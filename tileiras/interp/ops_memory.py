"""Memory ops: tokens, views, view and pointer loads/stores, atomics, globals.

Tokens order memory effects; a tile block runs its ops in program order, so
every ordering a token can ask for already holds and a token is a plain
marker. Memory ordering and scope attributes need no action for the same
reason. Atomics are applied element by element in tile order, so duplicate
addresses inside one tile see each other's updates, as on hardware.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.core import Operation
from ..ir.types import (DYNAMIC, GatherScatterViewType, PartitionViewType, PointerType, ScalarType,
                        StridedViewType, TensorViewType, Type)
from .elements import (CODEC_FLOATS, element, from_bits, from_int, int_bits, is_nibble, mem_size, storage_dtype,
                       to_bits, to_signed, to_unsigned)
from .errors import InterpError
from .operands import group
from .views import TensorView, TileView

TOKEN = None  # tokens carry no run-time value


def _token(m: Any, op: Operation, args: list) -> list:
    return [TOKEN] * len(op.results)


# -- element access ------------------------------------------------------------------
def read_elements(m: Any, elem: Type, base: int, offsets: np.ndarray) -> np.ndarray:
    """Elements at `base` + offsets (in elements) of type `elem`."""
    offsets = np.asarray(offsets, np.int64).reshape(-1)
    if is_nibble(elem):
        byte = np.uint64(base) + (offsets >> 1).astype(np.uint64)
        raw = m.memory.load(byte, np.dtype(np.uint8))
        codes = np.where(offsets & 1, raw >> 4, raw & 0xF).astype(np.uint64)
        return from_bits(codes, elem)
    size = mem_size(elem)
    addrs = np.uint64(base) + (offsets * size).astype(np.uint64)
    return load_at(m, elem, addrs)


def write_elements(m: Any, elem: Type, base: int, offsets: np.ndarray, values: np.ndarray) -> None:
    offsets = np.asarray(offsets, np.int64).reshape(-1)
    values = np.asarray(values).reshape(-1)
    if is_nibble(elem):
        codes = to_bits(values, elem).astype(np.uint8)
        for k in range(offsets.size):         # read-modify-write of shared bytes, in order
            addr = np.asarray([base + (int(offsets[k]) >> 1)], np.uint64)
            old = int(m.memory.load(addr, np.dtype(np.uint8))[0])
            new = (old & 0x0F) | (int(codes[k]) << 4) if offsets[k] & 1 else (old & 0xF0) | int(codes[k])
            m.memory.store(addr, np.asarray([new], np.uint8))
        return
    size = mem_size(elem)
    store_at(m, elem, np.uint64(base) + (offsets * size).astype(np.uint64), values)


def load_at(m: Any, elem: Type, addrs: np.ndarray) -> np.ndarray:
    if isinstance(elem, ScalarType) and elem.name == "i1":
        return m.memory.load(addrs, np.dtype(np.uint8)) != 0
    if isinstance(elem, ScalarType) and elem.name in CODEC_FLOATS:
        return from_bits(m.memory.load(addrs, np.dtype(np.uint8)).astype(np.uint64), elem)
    return m.memory.load(addrs, storage_dtype(elem))


def store_at(m: Any, elem: Type, addrs: np.ndarray, values: np.ndarray) -> None:
    values = np.asarray(values).reshape(-1)
    if isinstance(elem, ScalarType) and elem.name == "i1":
        values = values.astype(np.uint8)
    elif isinstance(elem, ScalarType) and elem.name in CODEC_FLOATS:
        values = to_bits(values, elem).astype(np.uint8)
    else:
        values = values.astype(storage_dtype(elem))
    m.memory.store(addrs, values)


# -- views ------------------------------------------------------------------------------
def _make_tensor_view(m: Any, op: Operation, args: list) -> list:
    t = op.results[0].type
    assert isinstance(t, TensorViewType)
    dyn_shape = [int(to_unsigned(v, int_bits(o.type)))
                 for v, o in zip(args[1:], op.operand_group("dynamicShape") + op.operand_group("dynamicStrides"))]
    n_shape = len(op.operand_group("dynamicShape"))
    shapes, strides = iter(dyn_shape[:n_shape]), iter(dyn_shape[n_shape:])
    shape = tuple(next(shapes) if s == DYNAMIC else s for s in t.shape)
    stride = tuple(next(strides) if s == DYNAMIC else s for s in t.strides)
    return [TensorView(int(args[0]), t.element, shape, stride)]


def _make_view(m: Any, op: Operation, args: list) -> list:
    t = op.results[0].type
    tensor = args[0]
    pad = t.padding_value.kind if getattr(t, "padding_value", None) is not None else None
    if isinstance(t, PartitionViewType):
        view = TileView("partition", tensor, tuple(t.tile_shape), tuple(t.dim_map), tuple(t.tile_shape), pad)
    elif isinstance(t, StridedViewType):
        view = TileView("strided", tensor, tuple(t.tile_shape), tuple(t.dim_map), tuple(t.traversal_strides), pad)
    elif isinstance(t, GatherScatterViewType):
        rank = len(t.tile_shape)
        view = TileView("gather", tensor, tuple(t.tile_shape), tuple(range(rank)), tuple(t.tile_shape), pad,
                        sparse_dim=t.sparse_dim)
    else:
        raise InterpError(f"unknown view type {t}")
    return [view]


def padding_value(kind: str | None, elem: Type) -> Any:
    if isinstance(elem, ScalarType) and not elem.name.startswith("i") and kind is not None:
        return {"zero": 0.0, "neg_zero": -0.0, "nan": np.nan, "pos_inf": np.inf, "neg_inf": -np.inf}[kind]
    return 0  # no padding value: out-of-bounds elements are unspecified; zero is as good as any


def _view_index(op: Operation, args: list) -> list:
    index = group(op, args, "index")
    return [to_unsigned(x, int_bits(v.type)) for x, v in zip(index, op.operand_group("index"))]


def _view_elements(op: Operation, view: TileView, args: list) -> tuple[np.ndarray, np.ndarray]:
    offsets, inside = view.element_offsets(_view_index(op, args))
    assumed = op.attributes.get("inbounds", ())
    if assumed and any(assumed) and not inside.all():
        # only the dims the producer promised to be in bounds may not be outside
        for i, promised in enumerate(assumed):
            if promised:
                along = np.moveaxis(inside, i, 0).reshape(inside.shape[i], -1).all(axis=1)
                if not along.all():
                    raise InterpError(f"tile dimension {i} is declared in bounds but runs outside the "
                                      f"tensor (shape {list(view.tensor.shape)})")
    return offsets, inside


def _load_view(m: Any, op: Operation, args: list) -> list:
    view: TileView = args[0]
    rtype = op.results[0].type
    elem = rtype.element  # type: ignore[attr-defined]
    offsets, inside = _view_elements(op, view, args)
    out = np.full(view.tile_shape, padding_value(view.padding, elem), dtype=storage_dtype(elem))
    if inside.any():
        out[inside] = read_elements(m, elem, view.tensor.base, offsets[inside])
    return [out.reshape(rtype.shape), TOKEN]  # type: ignore[attr-defined]


def _store_view(m: Any, op: Operation, args: list) -> list:
    tile, view = np.asarray(args[0]), args[1]
    offsets, inside = _view_elements(op, view, args)
    tile = np.broadcast_to(tile, view.tile_shape) if tile.shape != view.tile_shape else tile
    if inside.any():
        write_elements(m, view.tensor.element, view.tensor.base, offsets[inside], tile[inside])
    return [TOKEN]


def _atomic_red_view(m: Any, op: Operation, args: list) -> list:
    view: TileView = args[0]
    (value,) = group(op, args, "value")
    offsets, inside = _view_elements(op, view, args)
    elem = view.tensor.element
    if is_nibble(elem):
        raise InterpError("atomics on 4-bit elements are not supported")
    addrs = np.uint64(view.tensor.base) + (offsets[inside] * mem_size(elem)).astype(np.uint64)
    atomic_rmw(m, op.attributes["mode"], elem, addrs, np.broadcast_to(value, view.tile_shape)[inside])
    return [TOKEN]


def _get_tensor_shape(m: Any, op: Operation, args: list) -> list:
    view = args[0]
    tensor = view.tensor if isinstance(view, TileView) else view
    return [from_int(np.asarray(n, np.int64), int_bits(r.type)) for n, r in zip(tensor.shape, op.results)]


def _get_index_space_shape(m: Any, op: Operation, args: list) -> list:
    return [from_int(np.asarray(n, np.int64), int_bits(r.type)) for n, r in zip(args[0].index_space(), op.results)]


# -- pointers --------------------------------------------------------------------------------
def _pointee(t: Type) -> Type:
    e = element(t)
    assert isinstance(e, PointerType)
    if is_nibble(e.pointee):
        raise InterpError(f"pointers to 4-bit elements ({e}) cannot be dereferenced one element at a time")
    return e.pointee


def _offset(m: Any, op: Operation, args: list) -> list:
    size = mem_size(_pointee(op.operands[0].type))
    delta = to_signed(args[1], int_bits(op.operands[1].type)) * size
    return [np.asarray(args[0], np.uint64) + delta.astype(np.uint64)]


def _load_ptr(m: Any, op: Operation, args: list) -> list:
    rtype = op.results[0].type
    elem = _pointee(op.operands[0].type)
    ptrs = np.broadcast_to(np.asarray(args[0], np.uint64), rtype.shape)  # type: ignore[attr-defined]
    mask_v, pad_v = group(op, args, "mask"), group(op, args, "paddingValue")
    dtype = storage_dtype(elem)
    if not mask_v:
        return [load_at(m, elem, ptrs).reshape(ptrs.shape), TOKEN]
    mask = np.broadcast_to(mask_v[0], ptrs.shape)
    if pad_v:
        out = np.array(np.broadcast_to(pad_v[0], ptrs.shape), dtype=dtype)
    else:
        out = np.zeros(ptrs.shape, dtype)
    if mask.any():
        out[mask] = load_at(m, elem, ptrs[mask])
    return [out, TOKEN]


def _store_ptr(m: Any, op: Operation, args: list) -> list:
    elem = _pointee(op.operands[0].type)
    ptrs = np.asarray(args[0], np.uint64)
    values = np.broadcast_to(np.asarray(args[1]), ptrs.shape)
    mask_v = group(op, args, "mask")
    if mask_v:
        mask = np.broadcast_to(mask_v[0], ptrs.shape)
        ptrs, values = ptrs[mask], values[mask]
    store_at(m, elem, ptrs.reshape(-1), values.reshape(-1))
    return [TOKEN]


# -- atomics -------------------------------------------------------------------------------------
def _combine(mode: str, elem: Type, old: np.ndarray, arg: np.ndarray) -> np.ndarray:
    name = element(elem).name  # type: ignore[union-attr]
    if mode == "xchg":
        return arg
    if mode == "addf":
        if name == "f64":
            return old + arg
        return (old.astype(np.float32) + arg.astype(np.float32)).astype(old.dtype)
    bits = int_bits(elem)
    if mode in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[mode](old, arg)
    if mode == "add":
        return from_int(to_signed(old, bits) + to_signed(arg, bits), bits)
    if mode in ("max", "min"):
        fn = np.maximum if mode == "max" else np.minimum
        return from_int(fn(to_signed(old, bits), to_signed(arg, bits)), bits)
    if mode in ("umax", "umin"):
        fn = np.maximum if mode == "umax" else np.minimum
        return from_int(fn(to_unsigned(old, bits), to_unsigned(arg, bits)), bits)
    raise InterpError(f"unknown atomic mode '{mode}'")


def _rounds(addrs: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements of the tile hit the same address."""
    order = np.argsort(addrs, kind="stable")
    sorted_addrs = addrs[order]
    first = np.r_[True, sorted_addrs[1:] != sorted_addrs[:-1]]
    group_start = np.maximum.accumulate(np.where(first, np.arange(addrs.size), 0))
    rank = np.empty(addrs.size, np.int64)
    rank[order] = np.arange(addrs.size) - group_start
    return rank


def atomic_rmw(m: Any, mode: str, elem: Type, addrs: np.ndarray, arg: np.ndarray) -> np.ndarray:
    """Apply `mode` at each address in tile order; returns the old values."""
    addrs = np.asarray(addrs, np.uint64).reshape(-1)
    arg = np.asarray(arg).reshape(-1).astype(storage_dtype(elem))
    old = np.empty(addrs.size, storage_dtype(elem))
    if addrs.size == 0:
        return old
    rank = _rounds(addrs)
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        cur = load_at(m, elem, addrs[sel])
        old[sel] = cur
        store_at(m, elem, addrs[sel], _combine(mode, elem, cur, arg[sel]))
    return old


def _atomic_rmw(m: Any, op: Operation, args: list) -> list:
    elem = _pointee(op.operands[0].type)
    ptrs = np.asarray(args[0], np.uint64)
    arg = np.broadcast_to(np.asarray(args[1]), ptrs.shape)
    mask_v = group(op, args, "mask")
    mask = np.broadcast_to(mask_v[0], ptrs.shape) if mask_v else np.ones(ptrs.shape, bool)
    out = np.array(arg, dtype=storage_dtype(elem))     # masked-out lanes: unspecified, the argument
    out[mask] = atomic_rmw(m, op.attributes["mode"], elem, ptrs[mask], arg[mask])
    return [out, TOKEN]


def _atomic_cas(m: Any, op: Operation, args: list) -> list:
    elem = _pointee(op.operands[0].type)
    ptrs = np.asarray(args[0], np.uint64)
    cmp = np.broadcast_to(np.asarray(args[1]), ptrs.shape)
    val = np.broadcast_to(np.asarray(args[2]), ptrs.shape)
    mask_v = group(op, args, "mask")
    mask = np.broadcast_to(mask_v[0], ptrs.shape) if mask_v else np.ones(ptrs.shape, bool)
    out = np.array(cmp, dtype=storage_dtype(elem))     # masked-out lanes return `cmp`
    addrs, c, v = ptrs[mask], cmp[mask], val[mask]
    old = np.empty(addrs.size, storage_dtype(elem))
    if addrs.size:
        rank = _rounds(addrs)
        for r in range(int(rank.max()) + 1):
            sel = rank == r
            cur = load_at(m, elem, addrs[sel])
            old[sel] = cur
            hit = to_bits(cur, elem) == to_bits(c[sel], elem)     # bitwise, also for floats
            store_at(m, elem, addrs[sel][hit], v[sel][hit])
    out[mask] = old
    return [out, TOKEN]


# -- globals and stack ------------------------------------------------------------------------------
def _get_global(m: Any, op: Operation, args: list) -> list:
    name = op.attributes["name"]
    if name not in m.globals:
        raise InterpError(f"no global named '@{name}' in the module")
    return [np.asarray(m.globals[name], np.uint64)]


def _alloca(m: Any, op: Operation, args: list) -> list:
    pointee = element(op.results[0].type).pointee  # type: ignore[union-attr]
    n = int(op.attributes.get("num_elem", 0))
    nbytes = (n + 1) // 2 if is_nibble(pointee) else n * mem_size(pointee)
    addr = m.memory.alloc(nbytes, max(1, int(op.attributes.get("alignment", 1) or 1)))
    m.block_allocations.append(addr)
    return [np.asarray(addr, np.uint64)]


def _multimem(m: Any, op: Operation, args: list) -> list:
    raise InterpError(f"'{op.name}' needs multicast memory across GPUs, which the interpreter does not model")


HANDLERS = {
    "cuda_tile.make_token": _token,
    "cuda_tile.join_tokens": _token,
    "cuda_tile.memory_fence_alias_tko": _token,
    "cuda_tile.gdc_launch_dependents_tko": _token,   # grid dependency control: no effect in one launch
    "cuda_tile.gdc_wait_tko": _token,
    "cuda_tile.make_tensor_view": _make_tensor_view,
    "cuda_tile.make_partition_view": _make_view,
    "cuda_tile.make_strided_view": _make_view,
    "cuda_tile.make_gather_scatter_view": _make_view,
    "cuda_tile.load_view_tko": _load_view,
    "cuda_tile.store_view_tko": _store_view,
    "cuda_tile.atomic_red_view_tko": _atomic_red_view,
    "cuda_tile.get_tensor_shape": _get_tensor_shape,
    "cuda_tile.get_index_space_shape": _get_index_space_shape,
    "cuda_tile.offset": _offset,
    "cuda_tile.load_ptr_tko": _load_ptr,
    "cuda_tile.store_ptr_tko": _store_ptr,
    "cuda_tile.atomic_rmw_tko": _atomic_rmw,
    "cuda_tile.atomic_cas_tko": _atomic_cas,
    "cuda_tile.get_global": _get_global,
    "cuda_tile.alloca": _alloca,
    "cuda_tile.multimem_load_reduce_view_tko": _multimem,
    "cuda_tile.multimem_reduce_view_tko": _multimem,
    "cuda_tile.multimem_store_view_tko": _multimem,
}
