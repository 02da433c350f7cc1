"""Structured control flow: for, loop, if, and their terminators.

Tile values are per-thread registers and every branch condition is a 0-d
(CTA-uniform) tile, so structured control flow maps one-to-one onto LLVM
basic blocks: carried values become one phi per slot. Phis are inserted
once all incoming edges are known (`_insert`), since `continue` and `break`
can come from nested `if`s.
"""

from __future__ import annotations

from typing import Any

from ..ir.core import Operation
from ..ir.types import TileType, TokenType
from ..tileas.plan import plan_of
from .kernel import KernelLowering, op_error
from .llvm_text import llvm_type
from .values import LoopContext, TileRegs, TokenVal


def _flatten(k: KernelLowering, values: list[Any]) -> list[list[str]]:
    return [v.slots if isinstance(v, TileRegs) else [] for v in values]


def _phi_values(k: KernelLowering, types: list[Any], edges: list[tuple[str, list[list[str]]]],
                hint: str, layouts: list[Any]) -> tuple[list[str], list[Any]]:
    """Phi lines merging `edges` and the lowered values they define, one per type (in `layouts`)."""
    lines: list[str] = []
    out: list[Any] = []
    for i, t in enumerate(types):
        if isinstance(t, TokenType):
            out.append(TokenVal())
            continue
        assert isinstance(t, TileType)
        lty = llvm_type(t.element)
        slots = []
        for s in range(k.slots(t, layouts[i])):
            name = k.b.fresh(hint)
            incoming = ", ".join(f"[ {vals[i][s]}, %{label} ]" for label, vals in edges)
            lines.append(f"  {name} = phi {lty} {incoming}")
            slots.append(name)
        out.append(TileRegs(t, slots, layouts[i]))
    return lines, out


def _insert(k: KernelLowering, pos: int, lines: list[str]) -> None:
    k.b.lines[pos:pos] = lines


def _carried_placeholders(k: KernelLowering, types: list[Any], hint: str, layouts: list[Any]) -> list[Any]:
    out: list[Any] = []
    for t, layout in zip(types, layouts):
        if isinstance(t, TokenType):
            out.append(TokenVal())
        else:
            out.append(TileRegs(t, [k.b.fresh(hint) for _ in range(k.slots(t, layout))], layout))
    return out


def _layouts(k: KernelLowering, values: list[Any]) -> list[Any]:
    """The assigned layout of each value (None for tokens)."""
    return [k.layout_of(v) if isinstance(v.type, TileType) else None for v in values]


def _phi_lines_for(k: KernelLowering, placeholders: list[Any], edges: list[tuple[str, list[list[str]]]]) -> list[str]:
    lines = []
    for i, ph in enumerate(placeholders):
        if not isinstance(ph, TileRegs):
            continue
        lty = llvm_type(ph.type.element)
        for s, name in enumerate(ph.slots):
            incoming = ", ".join(f"[ {vals[i][s]}, %{label} ]" for label, vals in edges)
            lines.append(f"  {name} = phi {lty} {incoming}")
    return lines


_TERMINATORS = frozenset({"cuda_tile.yield", "cuda_tile.continue", "cuda_tile.break", "cuda_tile.return"})


def _lower_region(k: KernelLowering, block: Any, ctx: LoopContext) -> None:
    """Lower a region body; an omitted (implicit, operand-less) terminator falls through."""
    k.lower_block(block)
    last = block.operations[-1] if block.operations else None
    if last is None or last.name not in _TERMINATORS:
        edges = ctx.continue_edges if ctx.kind in ("for", "loop") else ctx.exit_edges
        target = ctx.continue_label if ctx.kind in ("for", "loop") else ctx.exit_label
        edges.append((k.b.current_block, []))
        k.b.br(target)


def _for(k: KernelLowering, op: Operation) -> None:
    lb = k.tile(op.operand("lowerBound")).slots[0]  # type: ignore[arg-type]
    ub = k.tile(op.operand("upperBound")).slots[0]  # type: ignore[arg-type]
    step = k.tile(op.operand("step")).slots[0]  # type: ignore[arg-type]
    iv_type = op.operand("lowerBound").type  # type: ignore[union-attr]
    ity = llvm_type(iv_type.element)  # type: ignore[union-attr]
    inits = [k.get(v) for v in op.operand_group("initValues")]
    types = [v.type for v in op.operand_group("initValues")]
    unsigned = bool(op.attributes.get("unsignedCmp", False))
    body = op.regions[0].block

    from . import pipelined_loop
    from . import ops_wgmma

    if op in k.hoisted:     # set up before the persistent loop (None: not pipelined after all)
        pipeline = k.hoisted[op]
    else:
        if _tcgen05(k):
            from .ops_tcgen05 import before_loop

            before_loop(k, op)   # tcgen05 buffers the loop needs besides its pipeline's stages
        ops_wgmma.before_loop(k, op)   # wgmma's K-major copies, likewise
        pipeline = pipelined_loop.prepare(k, op)
        declined = plan_of(k.assignment).declined if k.assignment is not None else None
        if pipeline is None and declined and op in declined:   # the middle level's choice, reported
            k.remark("missed", "memory", "RemarkPipelineMissed", "Loop not software-pipelined", op,
                     Reason=declined[op])
    split = k.warp_split
    # a persistent loop running the warp-specialized loop once a tile: that loop's ring is set up here, once
    # (the consumers count its uses over the tiles where they read its stages, not an MMA warp's epilogue)
    tiles = pipelined_loop.begin_persistent(k, op) if split is not None and split.outer is op else None
    tiles = tiles if tiles is not None and (not tiles.mma_reads or tiles.epilogue_fills or _prepares(k)) else None
    if pipeline is not None:
        pipelined_loop.prologue(k, pipeline, lb, step, ub, ity, unsigned)
        if pipelined_loop.epilogue(k, pipeline, op):    # the loop runs in producer and MMA warps
            return
    header, body_label, latch, exit_label = (k.b.label("for_head"), k.b.label("for_body"),
                                             k.b.label("for_latch"), k.b.label("for_exit"))
    pre = k.b.current_block
    k.b.br(header)
    k.b.start_block(header)
    head_pos = len(k.b.lines)
    iv = k.b.fresh("iv")
    counter = k.b.fresh("it") if pipeline is not None else ""
    ring = k.b.fresh("ring") if tiles is not None else ""     # the tile loop's count of the ring's uses
    if tiles is not None:
        tiles.base = ring
    if pipeline is not None:
        pipelined_loop.start_iteration(pipeline, iv, counter)
        k.active_pipelines[op] = pipeline
    carried_layouts = _layouts(k, body.arguments[1:])
    carried = _carried_placeholders(k, types, "carry", carried_layouts)
    cond = k.b.op(f"icmp {'ult' if unsigned else 'slt'} {ity} {iv}, {ub}", "cond")
    k.b.cond_br(cond, body_label, exit_label)
    k.b.start_block(body_label)
    k.set(body.arguments[0], k.splat(iv_type, iv))  # type: ignore[arg-type]
    for arg, value in zip(body.arguments[1:], carried):
        k.set(arg, value)
    ctx = LoopContext("for", continue_label=latch, exit_label=exit_label)
    k.loops.append(ctx)
    _lower_region(k, body, ctx)
    k.loops.pop()
    # latch: merge the continue edges, step the induction variable
    k.b.start_block(latch)
    if len(ctx.continue_edges) == 1:
        next_vals = ctx.continue_edges[0][1]
    else:
        lines, merged = _phi_values(k, types, ctx.continue_edges, "next", carried_layouts)
        _insert(k, len(k.b.lines), lines)
        next_vals = _flatten(k, merged)
    if pipeline is not None:
        pipelined_loop.end_iteration(k, pipeline)
    iv_next = k.b.op(f"add {ity} {iv}, {step}", "ivn")
    counter_next = k.b.op(f"add i32 {counter}, 1", "itn") if pipeline is not None else ""
    latch_end = k.b.current_block
    k.b.br(header)
    phis = [f"  {iv} = phi {ity} [ {lb}, %{pre} ], [ {iv_next}, %{latch_end} ]"]
    if pipeline is not None:
        phis.append(f"  {counter} = phi i32 [ {pipeline.base}, %{pre} ], [ {counter_next}, %{latch_end} ]")
        pipeline.ring_out = counter
        del k.active_pipelines[op]
    if tiles is not None:   # (the loop running the ring once a tile ends before every edge to the latch)
        phis.append(f"  {ring} = phi i32 [ 0, %{pre} ], [ {tiles.ring_out}, %{latch_end} ]")
    phis += _phi_lines_for(k, carried, [(pre, _flatten(k, inits)), (latch_end, next_vals)])
    _insert(k, head_pos, phis)
    k.b.start_block(exit_label)
    if pipeline is not None:
        carried = pipelined_loop.finish(k, pipeline, carried)   # no copy (nor wgmma) in flight after the loop
    if tiles is not None and not tiles.mma_reads:   # (an MMA warp's last releases are never waited for)
        pipelined_loop.end_persistent(k, tiles)
    for result, value in zip(op.results, carried):
        k.set(result, value)
    if _tcgen05(k):
        from .ops_tcgen05 import after_loop

        after_loop(k, op)   # accumulators kept in tensor memory through the loop come back to registers


def _tcgen05(k: KernelLowering) -> bool:
    """Whether the kernel has tcgen05 mmas (else ops_tcgen05's loop hooks do nothing: not loaded)."""
    return k.assignment is not None and bool(getattr(k.assignment, "tcgen05_layouts", None))


def _prepares(k: KernelLowering) -> bool:
    """Whether the tcgen05 form's epilogue warps prepare each stage before the MMA warp reads it (tf32
    rounding, block scales): they wait for its stages then, counting the ring's uses over the tiles."""
    if not _tcgen05(k):
        return False
    from .warp_specialize_tcgen05 import prepared

    return prepared(k)


def _loop(k: KernelLowering, op: Operation) -> None:
    inits = [k.get(v) for v in op.operand_group("initValues")]
    types = [v.type for v in op.operand_group("initValues")]
    body = op.regions[0].block
    header, exit_label = k.b.label("loop_head"), k.b.label("loop_exit")
    pre = k.b.current_block
    k.b.br(header)
    k.b.start_block(header)
    head_pos = len(k.b.lines)
    carried = _carried_placeholders(k, types, "carry", _layouts(k, body.arguments))
    for arg, value in zip(body.arguments, carried):
        k.set(arg, value)
    ctx = LoopContext("loop", continue_label=header, exit_label=exit_label)
    k.loops.append(ctx)
    _lower_region(k, body, ctx)
    k.loops.pop()
    _insert(k, head_pos, _phi_lines_for(k, carried, [(pre, _flatten(k, inits)), *ctx.continue_edges]))
    k.b.start_block(exit_label)
    result_types = [r.type for r in op.results]
    if ctx.exit_edges:
        lines, merged = _phi_values(k, result_types, ctx.exit_edges, "brk", _layouts(k, op.results))
        _insert(k, len(k.b.lines), lines)
    else:
        merged = _carried_placeholders(k, result_types, "undef", _layouts(k, op.results))
        k.b.emit("unreachable")
    for result, value in zip(op.results, merged):
        k.set(result, value)


def _if(k: KernelLowering, op: Operation) -> None:
    cond = k.tile(op.operand("condition")).slots[0]  # type: ignore[arg-type]
    then_label, else_label, join = k.b.label("then"), k.b.label("else"), k.b.label("endif")
    has_else = len(op.regions) > 1 and op.regions[1].blocks and op.regions[1].blocks[0].operations
    k.b.cond_br(cond, then_label, else_label if has_else else join)
    pre = k.b.current_block
    ctx = LoopContext("if", exit_label=join)
    k.loops.append(ctx)
    k.b.start_block(then_label)
    _lower_region(k, op.regions[0].block, ctx)
    if has_else:
        k.b.start_block(else_label)
        _lower_region(k, op.regions[1].block, ctx)
    k.loops.pop()
    if not has_else:
        ctx.exit_edges.append((pre, []))
    k.b.start_block(join)
    types = [r.type for r in op.results]
    if not types:
        return
    edges = [e for e in ctx.exit_edges if e[1] or not types]
    if edges:
        lines, merged = _phi_values(k, types, edges, "ifv", _layouts(k, op.results))
        _insert(k, len(k.b.lines), lines)
    else:
        merged = _carried_placeholders(k, types, "undef", _layouts(k, op.results))
    for result, value in zip(op.results, merged):
        k.set(result, value)


def _innermost(k: KernelLowering, kinds: tuple[str, ...], op: Operation) -> LoopContext:
    for ctx in reversed(k.loops):
        if ctx.kind in kinds:
            return ctx
    raise op_error(op, "is not inside a region it can terminate")


def _edge_values(k: KernelLowering, op: Operation) -> list[list[str]]:
    return _flatten(k, [k.get(v) for v in op.operands])


def _yield(k: KernelLowering, op: Operation) -> None:
    ctx = k.loops[-1] if k.loops else None
    if ctx is None or ctx.kind not in ("if", "body"):
        raise op_error(op, "yield outside an if/reduce/scan body")
    ctx.exit_edges.append((k.b.current_block, _edge_values(k, op)))
    if ctx.kind == "if":  # a reduce/scan body's yield only hands its values back
        k.b.br(ctx.exit_label)


def _continue(k: KernelLowering, op: Operation) -> None:
    ctx = _innermost(k, ("for", "loop"), op)
    ctx.continue_edges.append((k.b.current_block, _edge_values(k, op)))
    k.b.br(ctx.continue_label)


def _break(k: KernelLowering, op: Operation) -> None:
    ctx = _innermost(k, ("loop",), op)
    ctx.exit_edges.append((k.b.current_block, _edge_values(k, op)))
    k.b.br(ctx.exit_label)


def _return(k: KernelLowering, op: Operation) -> None:
    k.b.emit("ret void")


LOWERINGS = {
    "cuda_tile.for": _for, "cuda_tile.loop": _loop, "cuda_tile.if": _if,
    "cuda_tile.yield": _yield, "cuda_tile.continue": _continue, "cuda_tile.break": _break,
    "cuda_tile.return": _return,
}
