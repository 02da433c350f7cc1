"""Structured control flow, assertions and printing.

`if` runs one region and returns what its `yield` passes; `for` and `loop`
run their body until the range ends or a `break`; `continue`/`break`/
`return` nested in `if`s travel up as signals to the op they address. A
failed `assert` ends the run with an error naming its message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.core import Operation
from .elements import from_int, int_bits, to_signed, to_unsigned
from .errors import InterpError, KernelAssertion
from .machine import Signal
from .operands import group


def _terminator(kind: str):
    def run(m: Any, op: Operation, args: list) -> Signal:
        return Signal(kind, args)
    return run


def _if(m: Any, op: Operation, args: list) -> Any:
    taken = bool(np.asarray(args[0]).reshape(-1)[0])
    region = op.regions[0] if taken else (op.regions[1] if len(op.regions) > 1 else None)
    if region is None or not region.blocks:
        return []
    sig = m.exec_block(region.blocks[0])
    if sig is None or sig.kind == "yield":
        return [] if sig is None else sig.values
    return sig                                   # continue / break / return: for an enclosing op


def _for(m: Any, op: Operation, args: list) -> Any:
    bound_type = op.operands[0].type
    bits = int_bits(bound_type)
    view = to_unsigned if op.attributes.get("unsignedCmp", False) else to_signed
    lb, ub, step = (int(view(v, bits)) for v in args[:3])
    if step <= 0:
        raise InterpError(f"for: step must be positive, got {step}")
    values = list(args[3:])
    body = op.regions[0].block
    iv = lb
    while iv < ub:
        m.count_iteration()
        induction = from_int(np.asarray(iv & (2**64 - 1), np.uint64), bits)
        sig = _run_body(m, body, [induction] + values)
        if sig.kind == "return":
            return sig
        values = sig.values
        if sig.kind == "break":
            break
        iv += step
    return values


def _run_body(m: Any, block: Any, args: list) -> Any:
    env = m.env
    for a, v in zip(block.arguments, args):
        env[a] = v
    sig = m.exec_block(block)
    return Signal("continue", []) if sig is None else sig


def _loop(m: Any, op: Operation, args: list) -> Any:
    values = list(args)
    body = op.regions[0].block
    while True:
        m.count_iteration()
        sig = _run_body(m, body, values)
        if sig.kind == "return":
            return sig
        values = sig.values
        if sig.kind == "break":
            return values


def _assert(m: Any, op: Operation, args: list) -> list:
    cond = np.asarray(args[0])
    if not cond.all():
        bad = np.argwhere(~cond.astype(bool))
        where = tuple(int(i) for i in bad[0]) if cond.ndim else ()
        index = f" at element {list(where)}" if where else ""
        raise KernelAssertion(f"error: assertion failed: {op.attributes.get('message', '')}{index} "
                              f"({len(bad)} of {cond.size} elements false)")
    return []


def _print(m: Any, op: Operation, args: list) -> list:
    from .printf import format_print

    tiles = group(op, args, "args")
    types = [v.type for v in op.operand_group("args")]
    m.stdout.write(format_print(op.attributes.get("str", ""), tiles, types))
    return [None] * len(op.results)


HANDLERS = {
    "cuda_tile.yield": _terminator("yield"),
    "cuda_tile.continue": _terminator("continue"),
    "cuda_tile.break": _terminator("break"),
    "cuda_tile.return": _terminator("return"),
    "cuda_tile.if": _if,
    "cuda_tile.for": _for,
    "cuda_tile.loop": _loop,
    "cuda_tile.assert": _assert,
    "cuda_tile.print_tko": _print,
    "cuda_tile.print": _print,
}
