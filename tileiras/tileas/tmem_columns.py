"""Tensor-memory columns of a kernel's tcgen05 mmas: where each accumulator (and each register A
the MMA reads from tensor memory) lies in the 512 columns, decided before any LLVM.

Per epoch (`epoch`: an operation of the kernel's body; tensor memory is free between epochs, so
each starts at column 0) the accumulators that stay in tensor memory through a loop
(`resident_loop`) take columns side by side; after them, the columns each mma uses only while it
runs (its accumulator when read back at once, its A), shared by the epoch's mmas. `plan` gives
each mma's first columns and the total the kernel allocates (lowering/tmem.py allocates them).
"""

from __future__ import annotations

from ..ir.core import Operation
from ..layout.encodings import TmemAccLayout
from ..tileaa.mma_forms import Kind, kind_of, sf_cells, tcgen05_columns
from ..tileaa.mma_operands import loaded, resident_loop

A_IN_TMEM = frozenset({"f16", "f8f6f4"})   # kinds whose register A goes to tensor memory (ops_tcgen05._a_in_tmem)


def plan(layouts: "dict[Operation, TmemAccLayout]") -> "tuple[dict[Operation, tuple[int, int]], int]":
    """(first column of each mma's accumulator and of its A in tensor memory, columns in all).

    Per epoch (`epoch`; every epoch starts at column 0): the accumulators that stay in tensor
    memory through a loop (`resident_loop`) first, side by side; after them the columns each mma
    uses only while it runs (its accumulator when it is read back at once, its A), which the mmas
    of an epoch share: one mma's read-back accumulator is dead (in registers) before the next
    mma stores anything (attention's P goes over the scores S it was computed from)."""
    starts: dict[Operation, tuple[int, int]] = {}
    total = 0
    for group in epoch_groups(layouts).values():
        resident = 0
        for op in group:
            if resident_loop(op) is not None:
                starts[op] = (resident, 0)
                resident += op_columns(op, *layouts[op].shape[1:])
        transient = 0
        for op in group:
            _, m, n = layouts[op].shape
            acc = op_columns(op, m, n)
            if op in starts:
                starts[op] = (starts[op][0], resident)
                transient = max(transient, tmem_a_columns(op, m))
            else:
                starts[op] = (resident, resident + acc)
                transient = max(transient, acc + tmem_a_columns(op, m))
        total = max(total, resident + transient)
    return starts, total


def epoch(op: Operation) -> Operation:
    """The operation of the kernel's body that contains `op` (or is it). Tensor memory is free
    between epochs: an accumulator lives in tensor memory from its store to its read-back, both in
    its mma's lowering, or through the loop that keeps it there (`resident_loop`), both inside
    its epoch. So the mmas of one epoch take disjoint columns, and each epoch starts from column 0
    (a causal attention's two loops reuse the same columns)."""
    while True:
        block = op.parent
        owner = block.parent.parent if block is not None and block.parent is not None else None
        if owner is None or owner.name == "cuda_tile.entry":
            return op
        op = owner


def epoch_groups(ops: "dict[Operation, TmemAccLayout]") -> "dict[Operation, list[Operation]]":
    """tcgen05 mmas by epoch, both in program order."""
    out: dict[Operation, list[Operation]] = {}
    for op in ops:
        out.setdefault(epoch(op), []).append(op)
    return out


def columns_needed(op: Operation, layout: TmemAccLayout) -> int:
    """Tensor-memory columns of `op`: its accumulator, then its A where that is read from there."""
    _, m, n = layout.shape
    return op_columns(op, m, n) + tmem_a_columns(op, m)


def op_columns(op: Operation, m: int, n: int) -> int:
    """Tensor-memory columns of one mma: its accumulator's, and a block-scaled mma's scale factors."""
    if op.name != "cuda_tile.mmaf_scaled":
        return columns_of(m, n)
    return columns_of(m, n) + tcgen05_columns(m, n, sf_cells(op))


def columns_of(m: int, n: int) -> int:
    """Tensor-memory columns of an M x N f32/s32 accumulator (M = 256: two 128-lane halves)."""
    return n * (2 if m == 256 else 1)


def tmem_a_columns(op: Operation, m: int) -> int:
    """Tensor-memory columns of a register A that the MMA reads from tensor memory: M = 128 (lane =
    row) or 256 (the second half K columns after the first, as the scores' halves it is computed
    from lie, so that each half of P lies over its own half of S), two 16-bit or four 8-bit
    elements per 32-bit column; 0 for an A in shared memory."""
    kind = kind_of(op)
    lhs = op.operand("lhs")
    if kind is None or m not in (128, 256) or kind.name not in A_IN_TMEM or loaded(lhs) is not None:
        return 0
    kdim = lhs.type.shape[-1]  # type: ignore[union-attr]
    return kdim * (m // 128 - 1) + kdim // per_column(kind)


def per_column(kind: Kind) -> int:
    """A's elements per 32-bit tensor-memory column."""
    return 4 // kind.elem_bytes
