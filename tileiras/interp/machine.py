"""The interpreter loop: runs an entry over a grid of tile blocks.

Each tile block runs the entry body once, op by op, in program order (which
honours every token ordering), with tiles as numpy arrays. An op's handler
gets the machine, the op and its operand values and returns its result
values, or a `Signal` when it transfers control (yield, continue, break,
return); region ops (if, for, loop, reduce, scan) run their regions through
`exec_block` and consume the signals addressed to them.

A block's ops are planned once (handler + operand lists) and reused on every
execution, so loops and grid blocks pay only the handler calls.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional, Sequence, TextIO

from ..errors import TileirasError
from ..ir.core import Block, Operation, Value
from ..ir.types import FunctionType
from .errors import InterpError
from .memory import Memory

Handler = Callable[["Machine", Operation, list], Any]


class Signal:
    """A control transfer out of a block: yield, continue, break or return."""

    __slots__ = ("kind", "values")

    def __init__(self, kind: str, values: list) -> None:
        self.kind = kind
        self.values = values


def _handlers() -> dict[str, Handler]:
    from . import assume, control, ops_convert, ops_float, ops_int, ops_memory, ops_mma, ops_shape, regions

    table: dict[str, Handler] = {}
    for module in (ops_int, ops_float, ops_convert, ops_shape, ops_memory, ops_mma, control, regions, assume):
        table.update(module.HANDLERS)
    return table


_HANDLERS: Optional[dict[str, Handler]] = None


def handlers() -> dict[str, Handler]:
    global _HANDLERS
    if _HANDLERS is None:
        _HANDLERS = _handlers()
    return _HANDLERS


def _unknown(m: "Machine", op: Operation, args: list) -> Any:
    raise InterpError(f"the interpreter has no semantics for '{op.name}'")


class Machine:
    """One module loaded into one memory; `launch` runs an entry on a grid."""

    def __init__(self, module: Operation, memory: Optional[Memory] = None, stdout: Optional[TextIO] = None,
                 max_loop_iterations: int = 50_000_000) -> None:
        self.module = module
        self.memory = memory if memory is not None else Memory()
        self.stdout = stdout if stdout is not None else sys.stdout
        self.max_loop_iterations = max_loop_iterations
        self.loop_iterations = 0
        self.env: dict[Value, Any] = {}
        self.block_id: tuple[int, int, int] = (0, 0, 0)
        self.grid: tuple[int, int, int] = (1, 1, 1)
        self.block_allocations: list[int] = []
        self._plans: dict[Block, list[tuple[Handler, Operation, list[Value], list[Value]]]] = {}
        self.globals: dict[str, int] = {}
        self._load_globals()

    # -- module -------------------------------------------------------------------------
    def _top_ops(self) -> list[Operation]:
        if not self.module.regions or not self.module.regions[0].blocks:
            return []
        return self.module.regions[0].block.operations

    def _load_globals(self) -> None:
        from .elements import encode
        from .ops_shape import dense_values

        for op in self._top_ops():
            if op.name != "cuda_tile.global":
                continue
            value = op.attributes["value"]
            data = encode(dense_values(value, value.type), value.type.element)
            addr = self.memory.alloc(len(data), int(op.attributes.get("alignment", 0) or 0))
            self.memory.write(addr, data)
            self.globals[op.attributes["sym_name"]] = addr

    def entries(self) -> list[Operation]:
        return [op for op in self._top_ops() if op.name == "cuda_tile.entry"]

    def entry(self, name: str) -> Operation:
        found = [op for op in self.entries() if op.attributes.get("sym_name") == name]
        if not found:
            names = ", ".join(op.attributes.get("sym_name", "?") for op in self.entries()) or "none"
            raise InterpError(f"error: no kernel named '{name}' in the module (kernels: {names})")
        return found[0]

    # -- running ------------------------------------------------------------------------
    def launch(self, kernel: str, grid: Sequence[int], params: Sequence[Any]) -> None:
        """Run `kernel` once per tile block of `grid`; `params` are the raw entry parameters."""
        import numpy as np

        with np.errstate(all="ignore"):     # IEEE exceptions and integer wrap are the semantics
            self._launch(kernel, grid, params)

    def _launch(self, kernel: str, grid: Sequence[int], params: Sequence[Any]) -> None:
        from .elements import cast_scalar

        entry = self.entry(kernel)
        ftype = entry.attributes["function_type"]
        assert isinstance(ftype, FunctionType)
        if len(params) != len(ftype.inputs):
            raise InterpError(f"error: kernel '{kernel}' takes {len(ftype.inputs)} parameters, "
                              f"{len(params)} were given")
        values = [cast_scalar(p, t) for p, t in zip(params, ftype.inputs)]
        body = entry.regions[0].block
        gx, gy, gz = (tuple(int(g) for g in grid) + (1, 1, 1))[:3]
        if min(gx, gy, gz) < 1:
            raise InterpError(f"error: grid ({gx}, {gy}, {gz}) has an empty dimension")
        self.grid = (gx, gy, gz)
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    self.block_id = (x, y, z)
                    self.env = dict(zip(body.arguments, values))
                    self.block_allocations = []
                    try:
                        self.exec_block(body)
                    finally:
                        for addr in self.block_allocations:
                            self.memory.free(addr)

    def _plan(self, block: Block) -> list[tuple[Handler, Operation, list[Value], list[Value]]]:
        table = handlers()
        plan = [(table.get(op.name, _unknown), op, list(op.operands), list(op.results)) for op in block.operations]
        self._plans[block] = plan
        return plan

    def exec_block(self, block: Block) -> Optional[Signal]:
        """Run a block's ops; the signal of its terminator, or None if it ran off the end."""
        env = self.env
        plan = self._plans.get(block) or self._plan(block)
        for handler, op, operands, results in plan:
            try:
                out = handler(self, op, [env[v] for v in operands])
            except TileirasError as exc:
                raise self._locate(exc, op) from None
            except RecursionError:
                raise
            except Exception as exc:
                raise self._locate(InterpError(f"internal interpreter error: {type(exc).__name__}: {exc}"),
                                   op) from exc
            if out.__class__ is Signal:
                return out
            for r, v in zip(results, out):
                env[r] = v
        return None

    def call_block(self, block: Block, args: Sequence[Any]) -> list:
        """Bind a block's arguments, run it, and return the values its terminator passes on."""
        env = self.env
        for a, v in zip(block.arguments, args):
            env[a] = v
        sig = self.exec_block(block)
        return [] if sig is None else sig.values

    def count_iteration(self) -> None:
        self.loop_iterations += 1
        if self.loop_iterations > self.max_loop_iterations:
            raise InterpError(f"loop iteration limit ({self.max_loop_iterations}) exceeded: "
                              "the kernel does not terminate")

    def _locate(self, exc: TileirasError, op: Operation) -> TileirasError:
        if getattr(exc, "located", False):
            return exc
        loc = op.location
        where = f"{loc}: " if loc is not None and str(loc) else ""
        message = exc.message
        if message.startswith("error: "):
            message = message[len("error: "):]
        x, y, z = self.block_id
        located = type(exc)(f"{where}error: '{op.name}' op {message} (tile block ({x}, {y}, {z}))") \
            if isinstance(exc, InterpError) else exc
        located.located = True  # type: ignore[attr-defined]
        return located
