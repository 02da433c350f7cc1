"""The layout side of token ordering (transforms/token_order.py).

`thread_local` tells the ordering pass when two accesses of the same
elements are done by the same threads: both read or write their data tile in
one layout that holds every element exactly once (a replicated layout writes
an element from its first copy only, so another copy's thread would read
memory it did not write). `emit_wait` then lowers an op's wait: a CTA
barrier, or one guarded by runtime tests of the tensor views' shapes and
strides (a view is injective; two views' address ranges do not meet).
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.types import TileType
from ..transforms.token_order import ThreadLocal
from .kernel import KernelLowering
from ..ir.types import storage_bytes
from ..layout.encodings import Layout
from .values import TensorViewVal

# store op -> operand holding the data it writes (loads and atomics: their first result)
_STORED = {"cuda_tile.store_view_tko": "tile", "cuda_tile.store_ptr_tko": "value", "cuda_tile.atomic_red_view_tko": "value"}


def _access_layout(op: Operation) -> Optional[tuple[Layout, int]]:
    """(layout, element count) in which `op` reads or writes its data tile (at the nv_tileas level
    an operand is in the layout its op reads it in)."""
    name = _STORED.get(op.name)
    value = op.operand(name) if name is not None else op.results[0]
    if value is None or not isinstance(value.type, TileType) or value.layout is None:
        return None
    return value.layout, value.type.num_elements


def thread_local() -> ThreadLocal:
    def same_threads(a: Operation, b: Operation) -> bool:
        la, lb = _access_layout(a), _access_layout(b)
        return la is not None and la == lb and la[0].owns_all(la[1])
    return same_threads


def _injective(k: KernelLowering, view: TensorViewVal) -> str:
    """i1: distinct in-bounds coordinates of `view` have distinct addresses.

    Sufficient test, in row-major and in column-major dimension order: each
    stride exceeds the largest offset the inner dimensions reach. Dimensions
    of extent <= 1 have one coordinate and are skipped.
    """
    rank = len(view.shape)
    orders = [list(reversed(range(rank)))] + ([list(range(rank))] if rank > 1 else [])
    tests = []
    for order in orders:
        span, ok = "0", "true"
        for d in order:
            n, s = view.shape[d], view.strides[d]
            wide = k.b.op(f"icmp sgt i64 {n}, 1", "inj")
            clear = k.b.op(f"icmp sgt i64 {s}, {span}", "inj")
            ok = k.b.op(f"and i1 {ok}, {k.b.op(f'select i1 {wide}, i1 {clear}, i1 true', 'inj')}", "inj")
            reach = k.b.op(f"mul i64 {s}, {k.b.op(f'sub i64 {n}, 1', 'inj')}", "inj")
            span = k.b.op(f"add i64 {span}, {k.b.op(f'select i1 {wide}, i64 {reach}, i64 0', 'inj')}", "inj")
        tests.append(ok)
    return tests[0] if len(tests) == 1 else k.b.op(f"or i1 {tests[0]}, {tests[1]}", "inj")


def _address_range(k: KernelLowering, view: TensorViewVal) -> tuple[str, str, str]:
    """(i64 first byte, i64 one past the last byte, i1 'the range is exact') of `view`'s elements;
    not exact when a stride is negative (the range formula assumes strides >= 0)."""
    size = storage_bytes(view.type.element)
    start = k.b.op(f"ptrtoint ptr {view.base} to i64", "rng")
    span, exact = "0", "true"
    for n, s in zip(view.shape, view.strides):
        last = k.b.op(f"select i1 {k.b.op(f'icmp sgt i64 {n}, 0', 'rng')}, i64 {n}, i64 1", "rng")
        reach = k.b.op(f"mul i64 {s}, {k.b.op(f'sub i64 {last}, 1', 'rng')}", "rng")
        span = k.b.op(f"add i64 {span}, {reach}", "rng")
        exact = k.b.op(f"and i1 {exact}, {k.b.op(f'icmp sge i64 {s}, 0', 'rng')}", "rng")
    count = k.b.op(f"add i64 {span}, 1", "rng")
    end = k.b.op(f"add i64 {start}, {k.b.op(f'mul i64 {count}, {size}', 'rng')}", "rng")
    return start, end, exact


def _separate(k: KernelLowering, a: TensorViewVal, b: TensorViewVal) -> str:
    """i1: the address ranges of two tensor views do not meet."""
    a_start, a_end, a_exact = _address_range(k, a)
    b_start, b_end, b_exact = _address_range(k, b)
    apart = k.b.op(f"or i1 {k.b.op(f'icmp ule i64 {a_end}, {b_start}', 'sep')}, "
                   f"{k.b.op(f'icmp ule i64 {b_end}, {a_start}', 'sep')}", "sep")
    return k.b.op(f"and i1 {apart}, {k.b.op(f'and i1 {a_exact}, {b_exact}', 'sep')}", "sep")


_TESTS = {"injective": _injective, "separate": _separate}


def _barrier(k: KernelLowering) -> None:
    k.b.declare("declare void @llvm.nvvm.membar.cta()")
    k.b.emit("call void @llvm.nvvm.membar.cta()")
    k.barrier()


def emit_wait(k: KernelLowering, op: Operation) -> None:
    """Make the accesses `op` is token-ordered after visible to every thread that needs them."""
    wait = k.order.wait(op) if k.order is not None else None
    if wait is None:
        return
    if wait.barrier:
        _barrier(k)
        return
    passed = "true"
    for kind, *views in wait.unless:
        test = _TESTS[kind](k, *(k.get(v) for v in views))
        passed = test if passed == "true" else k.b.op(f"and i1 {passed}, {test}", "inj")
    # shapes and strides are 0-d tiles, the same in every thread: all threads take one branch
    k.guarded(k.b.op(f"xor i1 {passed}, true", "inj"), lambda: _barrier(k))
