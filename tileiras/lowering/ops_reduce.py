"""reduce, scan and the matrix multiplies (mmaf, mmai).

All of them read elements owned by other threads. A reduce or scan whose
rows `assign_layouts` put in warps combines with shuffles (`warp_reduce.py`);
otherwise the inputs go to shared memory first and each thread computes the
result elements it owns with a counted loop (in slices of the reduced dimension where the whole
tile's scratch would not fit beside the buffers alive at the op). This is the correctness-first
form (one FMA chain per output element); tensor-core paths replace the mma loop per target.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..errors import CompileError
from ..ir.core import Operation
from ..ir.types import TileType
from ..tileas.move_forms import scratch_offsets
from .kernel import KernelLowering, from_storage, op_error, storage_type, to_storage
from ..layout.encodings import BlockedLayout, RowWarpLayout
from .llvm_text import llvm_type
from .values import LoopContext, SharedTileVal, TileRegs

if TYPE_CHECKING:
    from ..tileaa.mma_forms import MmaShape


def to_scratch(k: KernelLowering, tiles: list[TileRegs]) -> list[str]:
    """Store every element of each tile in shared memory; returns each tile's base pointer."""
    bases, offset = scratch_offsets([t.type for t in tiles])
    buf = k.scratch(offset, "reduction")
    k.barrier()
    ptrs = []
    for t, base in zip(tiles, bases):
        p = k.b.op(f"getelementptr i8, ptr addrspace(3) {buf}, i32 {base}", "sb") if base else buf
        ptrs.append(p)
        lty = storage_type(t.type.element)
        for s, v in enumerate(t.slots):
            e = k.elem_index(t.type.num_elements, s, t.layout)
            q = k.b.op(f"getelementptr {lty}, ptr addrspace(3) {p}, i32 {e}", "sp")
            v = to_storage(k, v, t.type.element)
            k.store_first_copy(t.type.num_elements, s, t.layout, f"store {lty} {v}, ptr addrspace(3) {q}")
    k.barrier()
    return ptrs


def scratch_load(k: KernelLowering, base: str, elem: object, index: str) -> str:
    lty = storage_type(elem)  # type: ignore[arg-type]
    q = k.b.op(f"getelementptr {lty}, ptr addrspace(3) {base}, i32 {index}", "sp")
    v = k.b.op(f"load {lty}, ptr addrspace(3) {q}", "sv")
    return from_storage(k, v, elem)  # type: ignore[arg-type]


def counted_loop(k: KernelLowering, start: str, stop: str, step: int, carried: list[tuple[str, str]],
                 body: Callable[[str, list[str]], list[str]]) -> list[str]:
    """for (i = start; i != stop; i += step) carried = body(i, carried); returns the final values."""
    pre = k.b.current_block
    head, loop_body, done = k.b.label("rl_head"), k.b.label("rl_body"), k.b.label("rl_done")
    k.b.br(head)
    k.b.start_block(head)
    pos = len(k.b.lines)
    i = k.b.fresh("ri")
    names = [k.b.fresh("racc") for _ in carried]
    cond = k.b.op(f"icmp ne i32 {i}, {stop}", "rc")
    k.b.cond_br(cond, loop_body, done)
    k.b.start_block(loop_body)
    new = body(i, names)
    nxt = k.b.op(f"add i32 {i}, {step}", "ri")
    end = k.b.current_block
    k.b.br(head)
    phis = [f"  {i} = phi i32 [ {start}, %{pre} ], [ {nxt}, %{end} ]"]
    phis += [f"  {n} = phi {t} [ {init}, %{pre} ], [ {v}, %{end} ]" for n, (t, init), v in zip(names, carried, new)]
    k.b.lines[pos:pos] = phis
    k.b.start_block(done)
    return names


def _apply_body(k: KernelLowering, op: Operation, elems: list[str], accs: list[str]) -> list[str]:
    """Run the combiner region on scalars: args are (elem_0, acc_0, elem_1, acc_1, ...)."""
    block = op.regions[0].block
    for i, (e, a) in enumerate(zip(elems, accs)):
        for arg, v in ((block.arguments[2 * i], e), (block.arguments[2 * i + 1], a)):
            k.set(arg, TileRegs(arg.type, [v]))  # type: ignore[arg-type]
    ctx = LoopContext("body")
    k.loops.append(ctx)
    k.lower_block(block)
    k.loops.pop()
    if not ctx.exit_edges:
        raise op_error(op, "body must end with a yield")
    return [vals[0] for vals in ctx.exit_edges[-1][1]]


def _reduce_like(k: KernelLowering, op: Operation, scan: bool) -> None:
    srcs = [k.tile(v) for v in op.operands]
    if k.assignment is not None and k.assignment.mma_rows(op):
        from .warp_reduce import mma_row_reduce

        for result, slots in zip(op.results, mma_row_reduce(k, op, srcs, _apply_body)):
            k.set(result, TileRegs(result.type, slots))  # type: ignore[arg-type]
        return
    if k.assignment is not None and k.assignment.in_warps(op):
        # assign_layouts put the rows in warps: combine with shuffles, no shared memory
        assert isinstance(srcs[0].layout, RowWarpLayout)
        from .warp_reduce import warp_reduce, warp_scan

        results = (warp_scan if scan else warp_reduce)(k, op, srcs, _apply_body)
        for result, slots in zip(op.results, results):
            k.set(result, TileRegs(result.type, slots))  # type: ignore[arg-type]
        return
    dim = int(op.attributes["dim"])
    reverse = bool(op.attributes.get("reverse", False))
    chunks = _planned_slices(k, op)
    lts = [llvm_type(s.type.element) for s in srcs]
    rtype0 = op.results[0].type
    assert isinstance(rtype0, TileType)
    results: list[list[str]] = [[] for _ in srcs]
    if chunks > 1:
        _chunked_reduce(k, op, srcs, dim, chunks, lts, results)
    else:
        _whole_reduce(k, op, srcs, dim, scan, reverse, lts, results)
    for result, slots in zip(op.results, results):
        k.set(result, TileRegs(result.type, slots))  # type: ignore[arg-type]


def _planned_slices(k: KernelLowering, op: Operation) -> int:
    """The slices the scratch of reduce / scan / FMA mma `op` goes in, as plan-shared-memory decided them
    beside the buffers it placed (`SharedPlan.slices`: move_forms.reduce_scratch, mma_scratch). A plan
    without them is an internal error: the lowering does not decide."""
    return k.planned.decided("slices", op, f"scratch slices for the '{op.name}'")


def _scratch_elements(k: KernelLowering, bases: list[str], srcs: list[TileRegs], full: list[str], dim: int,
                      i: str, shape: tuple) -> list[str]:
    """Each source's element at index `full` with `i` along `dim`, read from its scratch tile of `shape`."""
    idx = list(full)
    idx[dim] = i
    lin = k.linear(idx, shape)
    return [scratch_load(k, b, s.type.element, lin) for b, s in zip(bases, srcs)]


def _whole_reduce(k: KernelLowering, op: Operation, srcs: list[TileRegs], dim: int, scan: bool, reverse: bool,
                  lts: list[str], results: list[list[str]]) -> None:
    """Every source element in scratch at once; each result slot folds its row (a scan's slot that
    follows another of its run along `dim`, `_scan_run`: that slot's value and one element more)."""
    shape = srcs[0].type.shape
    n = shape[dim]
    bases = to_scratch(k, srcs)
    rtype0 = op.results[0].type
    assert isinstance(rtype0, TileType)
    run = _scan_run(k, shape, dim) if scan else 1
    slots = list(range(k.slots(rtype0)))
    folded: dict[int, list[str]] = {}
    for slot in reversed(slots) if reverse and run > 1 else slots:
        ridx = k.multi_index(rtype0.shape, slot)
        if run > 1 and slot % run != (run - 1 if reverse else 0):
            here = _scratch_elements(k, bases, srcs, list(ridx), dim, ridx[dim], shape)
            folded[slot] = _apply_body(k, op, here, folded[slot + (1 if reverse else -1)])
            continue
        # The fold starts from the first element, not the identity: the identity only
        # pads, and a producer's identity is not always neutral (cuTile gives an f64 max +inf).
        if scan:
            full = list(ridx)
            first = str(n - 1) if reverse else "0"
            start, stop, step = ("1", k.b.op(f"add i32 {ridx[dim]}, 1", "rs"), 1) if not reverse else \
                (str(n - 2), k.b.op(f"sub i32 {ridx[dim]}, 1", "rs"), -1)
        else:
            full = list(ridx[:dim]) + ["0"] + list(ridx[dim:])
            first = "0"
            start, stop, step = ("1", str(n), 1)

        def body(i: str, accs: list[str], full: list[str] = full) -> list[str]:
            return _apply_body(k, op, _scratch_elements(k, bases, srcs, full, dim, i, shape), accs)
        init = _scratch_elements(k, bases, srcs, full, dim, first, shape)
        folded[slot] = counted_loop(k, start, stop, step, list(zip(lts, init)), body)
    for slot in slots:
        for r, v in zip(results, folded[slot]):
            r.append(v)


def _scan_run(k: KernelLowering, shape: tuple[int, ...], dim: int) -> int:
    """How many consecutive slots of this thread hold consecutive elements along `dim` of a tile of
    `shape` (a run of the blocked layout inside one row; 1 where the slots are not so): a scan's
    value at each but the first of a run is the one before it and one element more, so only the
    first folds its row in a loop (sequentially, as the interpreter does: the same values)."""
    layout = k.layout
    total = 1
    for d in shape:
        total *= d
    if not isinstance(layout, BlockedLayout) or not layout.owns_all(total):
        return 1
    run = layout.run(total)
    inner = 1
    for d in shape[dim + 1:]:
        inner *= d
    return run if inner == 1 and shape[dim] % run == 0 else 1


def _chunked_reduce(k: KernelLowering, op: Operation, srcs: list[TileRegs], dim: int, chunks: int,
                    lts: list[str], results: list[list[str]]) -> None:
    """The reduction slice by slice along `dim`: each slice's elements in scratch (a tile of the
    slice's shape), then every result slot folds that slice into its running value."""
    shape = srcs[0].type.shape
    width = shape[dim] // chunks
    sliced = tuple(width if d == dim else size for d, size in enumerate(shape))
    rtype0 = op.results[0].type
    assert isinstance(rtype0, TileType)
    running: list[list[str]] = []
    for c in range(chunks):
        bases = _slice_to_scratch(k, srcs, [dim] * len(srcs), c, chunks)
        for slot in range(k.slots(rtype0)):
            ridx = k.multi_index(rtype0.shape, slot)
            full = list(ridx[:dim]) + ["0"] + list(ridx[dim:])

            def body(i: str, accs: list[str], full: list[str] = full) -> list[str]:
                return _apply_body(k, op, _scratch_elements(k, bases, srcs, full, dim, i, sliced), accs)
            if c == 0:
                first = _scratch_elements(k, bases, srcs, full, dim, "0", sliced)
                running.append(counted_loop(k, "1", str(width), 1, list(zip(lts, first)), body))
            else:
                running[slot] = counted_loop(k, "0", str(width), 1, list(zip(lts, running[slot])), body)
    for slot_values in running:
        for r, v in zip(results, slot_values):
            r.append(v)


def _slice_to_scratch(k: KernelLowering, tiles: list[TileRegs], dims: list[int], c: int, chunks: int) -> list[str]:
    """Store the elements of slice `c` of `chunks` (indices c * width .. of its dimension in `dims`)
    of each tile in scratch, at their row-major index in the slice; each tile's base pointer."""
    bases, offset = scratch_offsets([t.type for t in tiles], chunks)
    buf = k.scratch(offset, "reduction")
    k.barrier()
    ptrs = []
    for t, base, dim in zip(tiles, bases, dims):
        p = k.b.op(f"getelementptr i8, ptr addrspace(3) {buf}, i32 {base}", "sb") if base else buf
        ptrs.append(p)
        lty = storage_type(t.type.element)
        shape = t.type.shape
        inner = 1
        for d in shape[dim + 1:]:
            inner *= d
        n = shape[dim]
        width = n // chunks
        for s, v in enumerate(t.slots):
            e = k.elem_index(t.type.num_elements, s, t.layout)
            outer = k.b.op(f"udiv i32 {e}, {n * inner}", "cs")
            at = k.b.op(f"urem i32 {e}, {n * inner}", "cs")          # index within one outer block
            lo = c * width * inner
            mine = k.b.op(f"and i1 {k.b.op(f'icmp uge i32 {at}, {lo}', 'cs')}, "
                          f"{k.b.op(f'icmp ult i32 {at}, {lo + width * inner}', 'cs')}", "cs")
            valid = k.slot_valid(t.type.num_elements, s, t.layout)
            if valid is not None:
                mine = k.b.op(f"and i1 {mine}, {valid}", "cs")
            local = k.b.op(f"add i32 {k.b.op(f'mul i32 {outer}, {width * inner}', 'cs')}, "
                           f"{k.b.op(f'sub i32 {at}, {lo}', 'cs')}", "cs")
            q = k.b.op(f"getelementptr {lty}, ptr addrspace(3) {p}, i32 {local}", "sp")
            stored = to_storage(k, v, t.type.element)
            k.guarded(mine, lambda q=q, stored=stored, lty=lty: k.b.emit(f"store {lty} {stored}, ptr addrspace(3) {q}"))
    k.barrier()
    return ptrs


def _reduce(k: KernelLowering, op: Operation) -> None:
    _reduce_like(k, op, scan=False)


def _scan(k: KernelLowering, op: Operation) -> None:
    _reduce_like(k, op, scan=True)


def _to_float(k: KernelLowering, v: str, elem: object, out_ty: str) -> str:
    """An mma operand element as the accumulator's float type (narrow formats through cvt)."""
    from .ops_arith import _NARROW, _float_convert, _from_narrow

    name = getattr(elem, "name", "")
    if name in _NARROW:
        v, ty = _from_narrow(k, v, name)
        return _float_convert(k, v, ty, out_ty)
    return _float_convert(k, v, llvm_type(elem), out_ty)  # type: ignore[arg-type]


def _require_narrow(k: KernelLowering, op: Operation, *tiles: TileRegs) -> None:
    from .features import require
    from .ops_arith import _NARROW

    for t in tiles:
        name = getattr(t.type.element, "name", "")
        if name in _NARROW:
            require(op, name, k.sm, k.gpu)
        elif llvm_type(t.type.element) == "i8" and name != "i8":
            raise op_error(op, f"element type {name} is not supported by this compiler yet")


def _not_tcgen05(k: KernelLowering, op: Operation) -> dict[str, str]:
    """The remark's Reason where a target with tcgen05 runs `op` on mma.sync, as layout assignment
    recorded it (`LayoutAssignment.tcgen05_refused`)."""
    if not k.caps.has("tcgen05") or k.assignment is None:
        return {}
    why = k.assignment.tcgen05_refused.get(op)
    if why is None:
        raise CompileError(f"error: internal: layout assignment records no reason the mma at {op.location} "
                           f"stays off tcgen05 (tcgen05_select.choose_all)")
    return {"Reason": "not tcgen05.mma: " + why}


def _mma_shape(k: KernelLowering, op: Operation) -> "MmaShape | None":
    """The mma.sync instruction layout assignment chose for `op` (`LayoutAssignment.mma_shapes`), None
    where it left `op` to FMAs (`fma_reasons`). An mma it decided nothing for is an internal error."""
    assignment = k.assignment
    if assignment is None or (op not in assignment.mma_shapes and op not in assignment.fma_reasons):
        raise CompileError(f"error: internal: layout assignment chose no instruction for the mma at {op.location} "
                           f"(mma_forms.choose)")
    return assignment.mma_shapes.get(op)  # type: ignore[return-value]


def _mma(k: KernelLowering, op: Operation) -> None:
    from .ops_mma import lower_mma_sync

    scaled = op.name == "cuda_tile.mmaf_scaled"
    lhs, rhs = (k.get(op.operand(n)) for n in ("lhs", "rhs"))  # type: ignore[arg-type]
    acc = k.tile(op.operand("acc"))  # type: ignore[arg-type]
    scales = [k.get(op.operand(n)) for n in ("lhs_scale", "rhs_scale")] if scaled else []  # type: ignore[arg-type]
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    if scaled:
        from .features import require

        require(op, "mmaf_scaled", k.sm, k.gpu)
    _require_narrow(k, op, lhs, rhs, *scales)
    shape = _mma_shape(k, op)
    assignment = k.assignment
    assert assignment is not None     # _mma_shape read it
    tcgen05 = shape is not None and assignment.is_tcgen05(op)
    if scaled and shape is not None and not tcgen05:
        from .ops_blockscale import describe, lower

        k.remark("passed", "tensorcore", "RemarkTensorCoreMMA", "MMA operation successfully optimized to use Tensor Cores",
                 op, Instruction=describe(op, k.sm), Shape=shape.describe(), **_not_tcgen05(k, op))
        k.set(op.results[0], lower(k, op, shape, lhs, rhs, acc, scales))
        return
    if tcgen05:
        from .ops_tcgen05 import describe, lower_tcgen05

        from .cta_pair import runs

        instruction, mnk = describe(op, k.layout_of(op.results[0]), runs(k, op))  # type: ignore[arg-type]
        k.remark("passed", "tensorcore", "RemarkTensorCoreMMA", "MMA operation successfully optimized to use Tensor Cores",
                 op, Instruction=instruction, Shape=mnk)
        k.set(op.results[0], lower_tcgen05(k, op, lhs, rhs, acc))
        return
    if shape is not None and assignment.is_wgmma(op):
        from .ops_wgmma import lower_wgmma

        k.set(op.results[0], lower_wgmma(k, op, lhs, rhs, acc))
        return
    if shape is not None:
        k.remark("passed", "tensorcore", "RemarkTensorCoreMMA", "MMA operation successfully optimized to use Tensor Cores",
                 op, Instruction="Tensor-core SM80 (mma.sync)", Shape=shape.describe(), **_not_tcgen05(k, op))
        k.set(op.results[0], lower_mma_sync(k, op, shape, lhs, rhs, acc))
        return
    scales = [k.tile(op.operand(n)) for n in ("lhs_scale", "rhs_scale")] if scaled else []  # type: ignore[arg-type]
    is_float = op.name != "cuda_tile.mmai"
    k.remark("failed", "tensorcore", "RemarkTensorCoreMMA", "MMA operation failed to optimize to use Tensor Cores, it is using FMA instructions instead", op, Instruction="FMA" if is_float else "integer multiply-add", Shape="[1, 1, 1]", Reason=assignment.fma_reasons[op])
    _fma(k, op, rtype, acc, lhs, rhs, scales)


def _fma(k: KernelLowering, op: Operation, rtype: TileType, acc: TileRegs, lhs: "TileRegs | SharedTileVal",
         rhs: "TileRegs | SharedTileVal", scales: list[TileRegs]) -> None:
    """An mma on the FMA path: A and B read from shared memory (`_Operand`), where a staged load left
    them (assign_layouts._fma_reads) or, from registers, through scratch (in the K slices
    plan-shared-memory chose, move_forms.mma_scratch)."""
    from .async_copy import is_ready, wait_for

    kdim = lhs.type.shape[-1]
    chunks = _planned_slices(k, op)
    width = kdim // chunks
    staged = [t for t in (lhs, rhs) if isinstance(t, SharedTileVal)]
    if staged and not is_ready(staged):
        wait_for(k, staged)
        k.barrier()     # every thread's copies landed
    # the operands held in registers (role, tile, K's axis), which go through scratch
    held = [(role, t, len(t.type.shape) + axis) for role, t, axis in (("a", lhs, -1), ("b", rhs, -2))
            if not isinstance(t, SharedTileVal)]
    tiles = [t for _, t, _ in held]
    out = list(acc.slots)
    for chunk in range(chunks):
        bases = [] if not held and not scales else to_scratch(k, [*tiles, *scales]) if chunks == 1 else \
            _slice_to_scratch(k, tiles, [axis for _, _, axis in held], chunk, chunks)
        scratch = {role: base for (role, _, _), base in zip(held, bases)}
        operands = [_Operand(k, t, scratch.get(role), width, chunk * width, role) for t, role in ((lhs, "a"), (rhs, "b"))]
        out = _fma_chains(k, op, rtype, acc, out, operands, scales, bases[len(held):], width)
    k.set(op.results[0], TileRegs(rtype, out))


# bytes the FMA chains read of a staged operand at once: one 16-byte shared load
_RUN_BYTES = 16


class _Operand:
    """How the FMA chains read one operand (A, `role` "a", (M, K); B, "b", (K, N)) of the K slice
    starting at `first` (`width` of K): from the operand's scratch slice at `base`, row-major, an
    element at a time; or from the shared matrix its load was staged in (transposed: stored the other
    way round), in 16-byte runs along whichever of K or M / N the stage holds contiguously
    (`k_run`, `x_run`: the elements a run holds; 1 where the operand is read an element at a time)."""

    def __init__(self, k: KernelLowering, tile: "TileRegs | SharedTileVal", base: "str | None", width: int,
                 first: int, role: str) -> None:
        from ..ir.types import storage_bytes

        self.k, self.tile, self.base, self.first, self.role = k, tile, base, first, role
        self.elem = tile.type.element
        self.lty = storage_type(self.elem)  # type: ignore[arg-type]
        shape = tile.type.shape
        self.batched = len(shape) == 3
        self.sliced = (*shape[:-1], width) if role == "a" else (*shape[:-2], width, shape[-1])
        self.k_run = self.x_run = 1
        if isinstance(tile, SharedTileVal):
            m, eb = tile.matrix, storage_bytes(self.elem)  # type: ignore[arg-type]
            if m.pitch % _RUN_BYTES == 0 and m.offset % _RUN_BYTES == 0 and m.cols * eb % _RUN_BYTES == 0 \
                    and eb < _RUN_BYTES:
                if (role == "a") != tile.transposed:    # each row of K contiguous
                    self.k_run = _RUN_BYTES // eb
                else:
                    self.x_run = _RUN_BYTES // eb

    def _stage_at(self, b: str, x: str, kk: str) -> str:
        k, tile = self.k, self.tile
        assert isinstance(tile, SharedTileVal)
        from .smem import element_offset, pointer

        kk = kk if not self.first else k.b.op(f"add i32 {kk}, {self.first}", "fk")
        r, c = (x, kk) if self.role == "a" else (kk, x)
        return pointer(k, element_offset(k, tile.matrix, b, *((c, r) if tile.transposed else (r, c))))

    def _run(self, p: str, count: int) -> list[str]:
        vec = f"<{count} x {self.lty}>"
        v = self.k.b.op(f"load {vec}, ptr addrspace(3) {p}, align {_RUN_BYTES}", "sv")
        return [self.k.b.op(f"extractelement {vec} {v}, i32 {j}", "sv") for j in range(count)]

    def element(self, b: str, x: str, kk: str) -> str:
        k = self.k
        if not isinstance(self.tile, SharedTileVal):
            idx = [x, kk] if self.role == "a" else [kk, x]
            return scratch_load(k, self.base, self.elem, k.linear([b, *idx] if self.batched else idx, self.sliced))  # type: ignore[arg-type]
        v = k.b.op(f"load {self.lty}, ptr addrspace(3) {self._stage_at(b, x, kk)}", "sv")
        return from_storage(k, v, self.elem)  # type: ignore[arg-type]

    def along_k(self, b: str, x: str, kk: str, count: int) -> list[str]:
        """Elements (x, kk .. kk + count - 1): one run where `count` is `k_run` (kk a multiple of it)."""
        if count > 1 and count == self.k_run:
            return [from_storage(self.k, v, self.elem) for v in self._run(self._stage_at(b, x, kk), count)]  # type: ignore[arg-type]
        return [self.element(b, x, _plus(self.k, kk, j)) for j in range(count)]

    def along_x(self, b: str, x: str, kk: str, count: int) -> list[str]:
        """Elements (x .. x + count - 1, kk): one run where `count` is `x_run` (x a multiple of it)."""
        assert count == self.x_run > 1
        return [from_storage(self.k, v, self.elem) for v in self._run(self._stage_at(b, x, kk), count)]  # type: ignore[arg-type]


def _slot_indices(k: KernelLowering, rtype: TileType, layout: object, slots: int) -> list[tuple[tuple, tuple[str, str, str]]]:
    """Per accumulator slot: (a key naming its (batch, row, column), those indices as i32 values). In
    a blocked layout owning every element, each slot's element lies a fixed distance from slot 0's in
    every thread (`BlockedLayout.slot_shift`): the key is that distance, the indices slot 0's plus it
    (so slots of one row share their row's value, and a run of columns starts where slot 0's does,
    a multiple of the layout's run); else the key is the indices themselves."""
    batched = len(rtype.shape) == 3
    shifts = [layout.slot_shift(rtype.shape, s) for s in range(slots)] if isinstance(layout, BlockedLayout) else [None]
    if all(shift is not None for shift in shifts):
        origin = k.multi_index(rtype.shape, 0, layout)  # type: ignore[arg-type]
        origin = origin if batched else ["0", *origin]
        out = []
        for shift in shifts:
            key = tuple(shift) if batched else (0, *shift)  # type: ignore[misc]
            out.append((key, tuple(_plus(k, o, d) for o, d in zip(origin, key))))
        return out  # type: ignore[return-value]
    out = []
    for slot in range(slots):
        idx = k.multi_index(rtype.shape, slot, layout)  # type: ignore[arg-type]
        where = (idx[0], idx[1], idx[2]) if batched else ("0", idx[0], idx[1])
        out.append((where, where))
    return out  # type: ignore[return-value]


def _plus(k: KernelLowering, v: str, j: int) -> str:
    return v if not j else k.b.op(f"add i32 {v}, {j}", "fk")


def _fma_chains(k: KernelLowering, op: Operation, rtype: TileType, acc: TileRegs, accs: list[str],
                operands: "list[_Operand]", scales: list[TileRegs], scale_bases: list[str], width: int) -> list[str]:
    """Every accumulator slot (values `accs`, in `acc`'s layout) plus its row of A times its column of
    B over the K slice (`width` elements; `operands`: how A and B are read): one loop over K carrying
    them all, so that slots sharing a row of A or a column of B read its elements once a step (an
    outer product, as NVIDIA's FMA loops), a step a 16-byte run of K where a stage holds K contiguously
    (A (M, K)), and B's columns of a thread's consecutive slots in runs where its stage holds N
    contiguously. A loop a slot read two shared elements an FMA and spilled: a 32 x 256 f32 accumulator
    (64 slots a thread), 446 spill instructions and 1841 hot-loop instructions on sm_90; one loop,
    none and 94. (Where the slots outnumber the registers, a 128 x 256 f32 bmm's 256 a thread, both
    spill: 122 and 160 spill instructions on sm_90, 471 and 361 on sm_80; loops of 32 or 64 slots spill
    as much.) Each slot's FMAs run in K's order."""
    out_ty = llvm_type(rtype.element)
    is_float = op.name != "cuda_tile.mmai"
    batched = len(rtype.shape) == 3
    a_op, b_op = operands
    kdim = op.operand("lhs").type.shape[-1]  # type: ignore[union-attr]
    sign_a = str(op.attributes.get("signedness_lhs", "signed")) == "signed"
    sign_b = str(op.attributes.get("signedness_rhs", "signed")) == "signed"
    run = max(a_op.k_run, b_op.k_run)
    run = run if width % run == 0 else 1
    layout = acc.layout or k.layout

    def widen(v: str, elem: object, signed: bool) -> str:
        if is_float:
            return _to_float(k, v, elem, out_ty)
        ty = llvm_type(elem)  # type: ignore[arg-type]
        return v if ty == out_ty else k.b.op(f"{'sext' if signed else 'zext'} {ty} {v} to {out_ty}", "mw")

    at = _slot_indices(k, rtype, layout, len(accs))
    # A's rows and B's columns: the index (b, m) / (b, n) each slot reads, keyed by what names it
    a_keys = [(key[0], key[1]) for key, _ in at]
    b_keys = [(key[0], key[2]) for key, _ in at]
    # B's columns in runs of `n_run`: static column offsets s .. s + n_run - 1 from a first column that is a
    # multiple of n_run (a blocked layout's slot groups: `_slot_indices`)
    n_run = b_op.x_run if b_op.x_run > 1 and at and isinstance(at[0][0][2], int) and isinstance(layout, BlockedLayout) \
        and layout.run(rtype.num_elements) % b_op.x_run == 0 and rtype.shape[-1] % b_op.x_run == 0 else 1

    def body(kk: str, carried: list[str]) -> list[str]:
        a_vals: dict[tuple, list[str]] = {}
        b_vals: dict[tuple, list[str]] = {}
        for slot, (_, (bidx, m, n_)) in enumerate(at):    # each distinct row of A and column of B read once a step
            if a_keys[slot] not in a_vals:
                a_vals[a_keys[slot]] = [widen(v, a_op.elem, sign_a) for v in a_op.along_k(bidx, m, kk, run)]
            key = b_keys[slot]
            if key in b_vals:
                continue
            col = key[1]
            if n_run > 1 and isinstance(col, int) and all((key[0], col - col % n_run + w) in b_keys for w in range(n_run)):
                first = col - col % n_run
                n0 = at[b_keys.index((key[0], first))][1][2]
                cols = [b_op.along_x(bidx, n0, _plus(k, kk, j), n_run) for j in range(run)]
                for w in range(n_run):
                    b_vals[key[0], first + w] = [widen(c[w], b_op.elem, sign_b) for c in cols]
            else:
                b_vals[key] = [widen(v, b_op.elem, sign_b) for v in b_op.along_k(bidx, n_, kk, run)]
        out = list(carried)
        for j in range(run):
            kj = _plus(k, kk, j)
            out = [fma(kj, c, *at[slot][1], a_vals[a_keys[slot]][j], b_vals[b_keys[slot]][j])
                   for slot, c in enumerate(out)]
        return out

    def fma(kk: str, c: str, bidx: str, m: str, n_: str, a: str, b: str) -> str:
        if scales:
            # each scale covers V consecutive elements along K
            sa_t, sb_t = scales
            kv_a = k.b.op(f"udiv i32 {kk}, {kdim // sa_t.type.shape[-1]}", "sv")
            kv_b = k.b.op(f"udiv i32 {kk}, {kdim // sb_t.type.shape[-2]}", "sv")
            sa_idx = k.linear([bidx, m, kv_a] if batched else [m, kv_a], sa_t.type.shape)
            sb_idx = k.linear([bidx, kv_b, n_] if batched else [kv_b, n_], sb_t.type.shape)
            sa = widen(scratch_load(k, scale_bases[0], sa_t.type.element, sa_idx), sa_t.type.element, True)
            sb = widen(scratch_load(k, scale_bases[1], sb_t.type.element, sb_idx), sb_t.type.element, True)
            a = k.b.op(f"fmul {out_ty} {a}, {sa}", "sc")
            b = k.b.op(f"fmul {out_ty} {b}, {sb}", "sc")
        if is_float:
            return k.b.call(out_ty, f"llvm.fma.{_FMA_SUFFIX[out_ty]}", [(out_ty, a), (out_ty, b), (out_ty, c)])
        p = k.b.op(f"mul {out_ty} {a}, {b}", "mm")
        return k.b.op(f"add {out_ty} {c}, {p}", "mm")
    return counted_loop(k, "0", str(width), run, [(out_ty, c) for c in accs], body)


_FMA_SUFFIX = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16"}


LOWERINGS = {
    "cuda_tile.reduce": _reduce, "cuda_tile.scan": _scan,
    "cuda_tile.mmaf": _mma, "cuda_tile.mmai": _mma, "cuda_tile.mmaf_scaled": _mma,
}
