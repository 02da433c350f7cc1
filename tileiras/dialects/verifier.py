"""Verifier of cuda_tile modules (structural, type and shape rules).

Ops are checked in MLIR's order: an op's own invariants (operand/result
constraints, type relations, its verifier), then the ops nested in its
regions, then the checks that look at those regions. The first failure
raises `CompileError` with an MLIR-style diagnostic,
`loc("file":line:col): error: 'cuda_tile.X' op message`, located at the op's own
location when the module carries one.
"""

from __future__ import annotations


from ..errors import CompileError
from ..ir.core import Operation
from ..ir.diagnostic_location import location_prefix as _prefix
from .registry import find
from .verify_ops import OP_CHECKS, REGION_CHECKS
from .verify_rules import VerifyFailure, check_invariants

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Iterator, Optional

    from ..ir.core import Value


def location_prefix(loc: Any) -> str:
    """`loc("file":line:col): ` for a location (call sites use the callee), '' when unknown."""
    return _prefix(loc)


def diagnostic(op: Optional[Operation], message: str, with_op: bool = True) -> str:
    prefix = location_prefix(op.location) if op is not None else ""
    if op is not None and with_op:
        return f"{prefix}error: '{op.name}' op {message}"
    return f"{prefix}error: {message}"


def verify_module(module: Operation) -> None:
    """Raise CompileError on the first rule the module breaks. nv_tileas IR (read from a dump) is held to
    cuda_tile's rules on its types without their layouts: whether the layouts agree is the nv_tileas
    verifier's (tileas/verify.py)."""
    module = _without_layouts(module)
    try:
        if module.name != "cuda_tile.module":
            raise VerifyFailure(module, "expected a 'cuda_tile.module'")
        body = module.regions[0].blocks[0].operations if module.regions and module.regions[0].blocks else []
        # MLIR's order: every nested op's own rules first, then the module's rules about its contents.
        for op in body:
            _verify_op(op)
        seen: set[str] = set()
        for op in body:
            if op.name not in ("cuda_tile.entry", "cuda_tile.global"):
                raise VerifyFailure(op, "is not allowed at module level; expected 'cuda_tile.entry' or "
                                        "'cuda_tile.global'")
            sym = op.attributes.get("sym_name")
            if sym in seen:
                raise VerifyFailure(op, f"redefinition of symbol named '{sym}'")
            seen.add(sym)
    except VerifyFailure as exc:
        with_op = not exc.message.startswith("`")
        raise CompileError(diagnostic(exc.op, exc.message, with_op)) from None
    except RecursionError:
        raise CompileError("error: module is nested too deeply to verify") from None


def _without_layouts(module: Operation) -> Operation:
    """`module`, or where one of its tiles has a layout in its type, a copy whose tiles have none."""
    if all(v.layout is None for v in _values(module)):
        return module
    module = module.clone()
    for v in _values(module):
        v.layout = None
    return module


def _values(module: Operation) -> "Iterator[Value]":
    for op in module.walk():
        yield from op.results
        for region in op.regions:
            for block in region.blocks:
                yield from block.arguments


def _verify_op(op: Operation) -> None:
    defn = find(op.name)
    if defn is None:
        raise VerifyFailure(op, "is not a registered operation")
    check_invariants(op, defn)
    check = OP_CHECKS.get(op.name)
    if check is not None:
        check(op)
    for region in op.regions:
        for block in region.blocks:
            ops = block.operations
            if not ops:
                raise VerifyFailure(op, "region must end with a terminator")
            for inner in ops:
                _verify_op(inner)
            last = ops[-1]
            if not last.definition.has_trait("Terminator"):
                raise VerifyFailure(last, "block must end with a terminator operation")
            for inner in ops[:-1]:
                if inner.definition.has_trait("Terminator"):
                    raise VerifyFailure(inner, "must be the last operation in the parent block")
    rcheck = REGION_CHECKS.get(op.name)
    if rcheck is not None:
        rcheck(op)
