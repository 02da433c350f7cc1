"""Views, pointer and view loads/stores, tokens, atomics and block ids.

A view load computes, for each element this thread holds, the tensor
coordinate `index * tile + local` per dimension, masks it against the
tensor's shape, and loads (or substitutes the view's padding value). Memory
ordering and scope attributes map to LLVM atomic orderings and NVPTX sync
scopes. Tokens carry ordering only: transforms/token_order.py decides which
ops wait for the CTA, and token_waits.py emits the waits.
"""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import (DYNAMIC, PointerType, ScalarType, TensorViewType,
                        TileType, element_of)
from .kernel import KernelLowering, from_storage, op_error, storage_type, to_storage
from ..ir.types import storage_bytes
from ..layout.encodings import Layout, RowWarpLayout
from ..tileaa.allocas import alloca_bytes, alloca_size
from ..tileaa.access_width import chunk_elements, pointer_access, vector_elements, view_access
from ..tileaa.views import cut, row_indices, tensor_view
from .llvm_text import float_bits_literal, llvm_type
from .token_waits import emit_wait
from .values import PartitionViewVal, TensorViewVal, TileRegs, TokenVal

_ORDERING = {"relaxed": "monotonic", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel"}
_SCOPE = {"tl_blk": ' syncscope("block")', "device": ' syncscope("device")', "sys": ""}

# padding keyword -> (float bits for f16, bf16, f32, f64), integers pad with 0
_PADDING_BITS = {
    "zero": (0x0000, 0x0000, 0x00000000, 0x0000000000000000),
    "neg_zero": (0x8000, 0x8000, 0x80000000, 0x8000000000000000),
    "nan": (0x7E00, 0x7FC0, 0x7FC00000, 0x7FF8000000000000),
    "pos_inf": (0x7C00, 0x7F80, 0x7F800000, 0x7FF0000000000000),
    "neg_inf": (0xFC00, 0xFF80, 0xFF800000, 0xFFF0000000000000),
}


def padding_literal(kind: str | None, elem: ScalarType) -> str:
    """The padding value as a literal of the element's storage type (an i1 is loaded as an i8)."""
    lty = llvm_type(elem)
    if lty in ("half", "bfloat", "float", "double"):
        bits = _PADDING_BITS[kind or "zero"][("half", "bfloat", "float", "double").index(lty)]
        return float_bits_literal(bits, lty)
    return "0"


def _i64(k: KernelLowering, v: str, src_ty: str) -> str:
    if src_ty == "i64":
        return v
    return k.b.op(f"sext {src_ty} {v} to i64", "w")


def _make_token(k: KernelLowering, op: Operation) -> None:
    k.set(op.results[0], TokenVal())


def _assume(k: KernelLowering, op: Operation) -> None:
    """Pass the value through, telling LLVM the fact (alignment, divisibility, bounds)."""
    from ..ir.attributes import Bounded, DivBy

    value = k.get(op.operands[0])
    k.set(op.results[0], value)
    pred = op.attributes.get("predicate")
    if not isinstance(value, TileRegs) or not isinstance(pred, (DivBy, Bounded)):
        return
    elem = value.type.element
    k.b.declare("declare void @llvm.assume(i1)")
    uniform = value.type.num_elements == 1  # only per-element facts of the whole tile are cheap to state
    for v in value.slots[:1] if uniform else []:
        if isinstance(pred, DivBy) and pred.every is None and pred.divisor > 1:
            if isinstance(elem, PointerType):
                k.b.emit(f'call void @llvm.assume(i1 true) [ "align"(ptr {v}, i64 {pred.divisor}) ]')
            elif isinstance(elem, ScalarType) and elem.is_int and elem.bitwidth >= 8:
                ty = llvm_type(elem)
                rem = k.b.op(f"srem {ty} {v}, {pred.divisor}", "as")
                k.b.emit(f"call void @llvm.assume(i1 {k.b.op(f'icmp eq {ty} {rem}, 0', 'as')})")
        elif isinstance(pred, Bounded) and isinstance(elem, ScalarType) and elem.is_int and elem.bitwidth >= 8:
            ty = llvm_type(elem)
            if pred.lb is not None:
                k.b.emit(f"call void @llvm.assume(i1 {k.b.op(f'icmp sge {ty} {v}, {pred.lb}', 'as')})")
            if pred.ub is not None:
                k.b.emit(f"call void @llvm.assume(i1 {k.b.op(f'icmp sle {ty} {v}, {pred.ub}', 'as')})")


def _block_ids(kind: str):
    def lower(k: KernelLowering, op: Operation) -> None:
        from ..tileaa.clusters import is_clustered

        # a tile block split over a cluster (tileaa/clusters.py) is the cluster: its id and count
        sreg = {"ctaid": "clusterid", "nctaid": "nclusterid"}[kind] if is_clustered(k.entry) else kind
        for axis, result in zip("xyz", op.results):
            name = f"llvm.nvvm.read.ptx.sreg.{sreg}.{axis}"
            k.b.declare(f"declare i32 @{name}()")
            v = k.b.pre(f"call i32 @{name}()", kind)
            k.set(result, k.splat(result.type, v))  # type: ignore[arg-type]
    return lower


def _make_tensor_view(k: KernelLowering, op: Operation) -> None:
    vtype = op.results[0].type
    assert isinstance(vtype, TensorViewType)
    base = k.tile(op.operand("base")).slots[0]  # type: ignore[arg-type]
    dyn_shape = [k.tile(v).slots[0] for v in op.operand_group("dynamicShape")]
    dyn_strides = [k.tile(v).slots[0] for v in op.operand_group("dynamicStrides")]
    shape_types = [llvm_type(element_of(v.type)) for v in op.operand_group("dynamicShape")]
    stride_types = [llvm_type(element_of(v.type)) for v in op.operand_group("dynamicStrides")]

    def fill(static: tuple[int, ...], dyn: list[str], tys: list[str]) -> list[str]:
        out, it = [], iter(zip(dyn, tys))
        for d in static:
            if d == DYNAMIC:
                v, t = next(it)
                out.append(_i64(k, v, t))
            else:
                out.append(str(d))
        return out

    k.remark("missed", "memory", "RemarkTensorViewIndexTypeNarrowing", "Could not narrow tensor_view indexing to i32: index computations use 64 bits", op, Reason="view offsets are computed in i64 (index narrowing is not implemented)")
    k.set(op.results[0], _tensor_view(op, base, fill(vtype.shape, dyn_shape, shape_types),
                                      fill(vtype.strides, dyn_strides, stride_types)))
    from .kernel_maps import at_view

    at_view(k, op)   # the tensor maps the kernel makes of this view, where it makes them once


def _tensor_view(op: Operation, base: str, shape: list[str], strides: list[str]) -> TensorViewVal:
    """The tensor view `op` makes: the facts nv_tileaa proved of it (tileaa/views.py), and its LLVM values."""
    facts = tensor_view(op.results[0])
    return TensorViewVal(facts.base_align, facts.shape_div, facts.stride_div, facts.type, base, shape, strides)


def _make_gather_scatter_view(k: KernelLowering, op: Operation) -> None:
    k.set(op.results[0], _partition_view(op, k.get(op.operands[0])))


def _make_partition_view(k: KernelLowering, op: Operation) -> None:
    k.set(op.results[0], _partition_view(op, k.get(op.operands[0])))


def _partition_view(op: Operation, tensor: object) -> PartitionViewVal:
    """The partition, strided or gather/scatter view `op` cuts from `tensor`."""
    assert isinstance(tensor, TensorViewVal)
    return PartitionViewVal(tensor, **cut(op.results[0].type))


def _view_addresses(k: KernelLowering, op: Operation, view: PartitionViewVal, tile_type: TileType, layout: Layout):
    """Per slot of `layout`: (pointer, in-bounds i1 or None) of the element this thread holds."""
    return _slot_addresses(k, op, view, layout, range(k.slots(tile_type, layout)))


def _slot_addresses(k: KernelLowering, op: Operation, view: PartitionViewVal, layout: Layout,
                    slots: range) -> list[tuple[str, "str | None"]]:
    """(pointer, in-bounds i1 or None) of the element this thread holds in each of `slots`.

    Where the layout places every slot a constant distance from slot 0 (mma fragments; blocked
    tiles whose runs carry into no other dimension, `BlockedLayout.slot_shift`), one address is
    computed and the others step from it (`_shifted_addresses`); else each is computed on its
    own, which leaves LLVM one hoisted 64-bit offset and coordinate per element of a loop's
    loads where no fact proves wide accesses (a 256 x 32 bf16 tile without facts: 255 registers
    and 254 spill instructions on sm_90, 234 and none stepped). Row tiles step only where more than
    `LSR_POINTERS` shifts cross runtime strides (`_runtime_shifts`): elsewhere LLVM folds or keeps few offsets,
    and the stepped form's bounds checks cost TileGym's rmsnorm backward (4096 columns, a few rows of
    runtime stride, 255 registers) 10 and 26 spill instructions on sm_80 and sm_120."""
    index = view_index(k, op, view)
    shift = getattr(layout, "slot_shift", None)
    if shift is not None and view.sparse_dim is None and slots.start == 0:
        shifts = [shift(view.tile_shape, slot) for slot in slots]
        rows = isinstance(getattr(layout, "parent", layout), RowWarpLayout)   # (a broadcast source's too)
        if all(d is not None for d in shifts) and (not rows or len(_runtime_shifts(view, shifts)) > LSR_POINTERS):
            return _shifted_addresses(k, op, view, index, k.multi_index(view.tile_shape, 0, layout),
                                      shifts)  # type: ignore[arg-type]
    return [element_address(k, op, view, index, k.multi_index(view.tile_shape, slot, layout))
            for slot in slots]


def _runtime_shifts(view: PartitionViewVal, shifts: list) -> set:
    """The slots' shifts from slot 0 along dimensions of runtime stride, as (dim, distance) pairs: each distinct
    one a pointer of its own (`_shifted_addresses`)."""
    return {tuple((dim, d) for dim, d in enumerate(shift)
                  if d and not view.tensor.strides[view.dim_map[dim]].lstrip("-").isdigit()) for shift in shifts}


# the most pointers with runtime shifts a tile's addresses leave to LLVM's loop strength reduction
# (`_shifted_addresses`); above it, each would keep its own hoisted 64-bit offset alive in the loop
LSR_POINTERS = 8


def _unseen(k: KernelLowering, ptr: str) -> str:
    """`ptr` through a move LLVM cannot see through (out of loop strength reduction's sight), made in the
    global space where every pointer of the kernel is global (no alloca), so that its accesses stay
    ld.global / st.global (a generic pointer's would be generic accesses)."""
    from .ops_arith import pointers_all_global

    if not pointers_all_global(k):
        return k.b.op(f'call ptr asm "mov.b64 $0, $1;", "=l,l"(ptr {ptr})', "a")
    g = k.b.op(f"addrspacecast ptr {ptr} to ptr addrspace(1)", "a")
    moved = k.b.op(f'call ptr addrspace(1) asm "mov.b64 $0, $1;", "=l,l"(ptr addrspace(1) {g})', "a")
    return k.b.op(f"addrspacecast ptr addrspace(1) {moved} to ptr", "a")


def _shifted_addresses(k: KernelLowering, op: Operation, view: PartitionViewVal, index: tuple[list[str], object],
                       local: list[str], shifts: list[tuple[int, ...]]) -> list[tuple[str, "str | None"]]:
    """`element_address` of the elements at `local` + each shift (constant, >= 0 per tile dimension).

    Slot 0's address is computed once; a shift along dimensions of runtime stride gives one
    pointer per distinct such shift (a fragment row), the rest is a constant offset that ptxas
    folds into the access ([%rd+16]); bounds compare slot 0's coordinate plus the shift.
    Where more than `LSR_POINTERS` shifts have a runtime part, slot 0's pointer passes through an
    opaque move: in a loop, LLVM's loop strength reduction otherwise rewrites each such pointer as
    one induction pointer plus a loop-invariant 64-bit offset of its own, which ptxas keeps in two
    registers per pointer across the loop (a group GEMM's 64x128x32 f16 tiles without facts, every
    stride a runtime value: 255 registers and 92 spill instructions on sm_80; 202 and none hidden).
    Building each of an epilogue's 64 addresses from the tile index instead gives LLVM's
    straight-line strength reduction one block of ~700 instructions to rewrite (most of a
    persistent matmul's LLVM time)."""
    ptr0, checks, coords = _element_parts(k, op, view, index, local)
    elem = storage_type(view.tensor.type.element)
    bounds: dict[tuple[int, int], str] = {}
    runtime_shifts = _runtime_shifts(view, shifts)
    chained = len(runtime_shifts) > LSR_POINTERS
    if chained:
        ptr0 = _unseen(k, ptr0)
    rows: dict[tuple[tuple[int, int], ...], str] = {}
    if chained:     # each pointer a step from another (`_stepped_from`), in the order that makes that possible
        rows[()] = ptr0
        for key in sorted(runtime_shifts, key=lambda key: tuple(dict(key).get(d, 0) for d in range(len(shifts[0])))):
            rows[key] = _stepped_from(k, elem, view, rows, key)
    oks: dict[tuple[str, ...], "str | None"] = {}

    def within(dim: int, d: int) -> str:
        if d == 0:
            return checks[dim]
        if (dim, d) not in bounds:   # compared as element_address does (what LLVM knows of it folds)
            coord = k.b.op(f"add i64 {coords[dim]}, {d}", "a")
            bounds[(dim, d)] = k.b.op(f"icmp ult i64 {coord}, {view.tensor.shape[view.dim_map[dim]]}", "a")
        return bounds[(dim, d)]

    out = []
    for shift in shifts:
        const, runtime = 0, []
        for dim, d in enumerate(shift):
            stride = view.tensor.strides[view.dim_map[dim]]
            if d and stride.lstrip("-").isdigit():
                const += d * int(stride)
            elif d:
                runtime.append((dim, d))
        key = tuple(runtime)
        if key not in rows:
            offset = "0"
            for dim, d in runtime:
                term = k.b.op(f"mul i64 {view.tensor.strides[view.dim_map[dim]]}, {d}", "a")
                offset = term if offset == "0" else k.b.op(f"add i64 {offset}, {term}", "a")
            rows[key] = ptr0 if offset == "0" else k.b.op(f"getelementptr {elem}, ptr {ptr0}, i64 {offset}", "a")
        ptr = rows[key] if const == 0 else k.b.op(f"getelementptr {elem}, ptr {rows[key]}, i64 {const}", "a")
        names = tuple(within(dim, shift[dim]) for dim in checks)
        if names not in oks:
            oks[names] = _all(k, list(names))
        out.append((ptr, oks[names]))
    return out


def _stepped_from(k: KernelLowering, elem: str, view: PartitionViewVal, rows: dict, key: tuple) -> str:
    """The pointer of runtime shift `key` ((dim, d) pairs) stepped from the nearest one already made (`rows`)
    below it (along the fewest dimensions, then the shortest step; slot 0's, `()`, at worst): offsets
    from slot 0 would each be a loop-invariant 64-bit value LLVM hoists and keeps live across a loop (a
    persistent softmax's 4 x 4096 f16 chunk without facts: 64 of them, 200 spill instructions on sm_90),
    where steps of one stride repeat."""
    shifts = dict(key)
    best: "tuple[tuple[int, int], tuple, dict] | None" = None
    for have in rows:
        had = dict(have)
        if any(had.get(dim, 0) > shifts.get(dim, 0) for dim in set(had) | set(shifts)):
            continue
        steps = {dim: d - had.get(dim, 0) for dim, d in shifts.items() if d != had.get(dim, 0)}
        rank = (len(steps), sum(steps.values()))
        if best is None or rank < best[0]:
            best = (rank, have, steps)
    assert best is not None, "slot 0's pointer lies below every shift"
    _, have, steps = best
    offset = "0"
    for dim, d in sorted(steps.items()):
        term = k.b.op(f"mul i64 {view.tensor.strides[view.dim_map[dim]]}, {d}", "a")
        offset = term if offset == "0" else k.b.op(f"add i64 {offset}, {term}", "a")
    return k.b.op(f"getelementptr {elem}, ptr {rows[have]}, i64 {offset}", "a")


def view_index(k: KernelLowering, op: Operation, view: PartitionViewVal) -> tuple[list[str], object]:
    """The op's tile index as i64 values per dimension (the gather dimension: "" and the
    shared-memory base of its row indices, which every thread reads)."""
    index: list[str] = []
    rows_base = None
    for d, v in enumerate(op.operand_group("index")):
        if d == view.sparse_dim:
            from .ops_reduce import to_scratch

            (rows_base,) = to_scratch(k, [k.tile(row_indices(op))])  # type: ignore[arg-type]
            index.append("")
            continue
        index.append(_i64(k, k.tile(v).slots[0], llvm_type(element_of(v.type))))
    return index, rows_base


# the ops that read a gather / scatter view's row indices through scratch (`view_index`)
def element_address(k: KernelLowering, op: Operation, view: PartitionViewVal, index: tuple[list[str], object],
                    local: list[str]) -> tuple[str, "str | None"]:
    """(pointer, in-bounds i1 or None) of the tile element at i32 multi-index `local`.

    A partition view's tile `index` starts at `index * tile` along each tensor
    dimension (`index * traversal_stride` for a strided view); a gather/scatter
    view takes the coordinates along its sparse dimension from a 1-D tile of
    row indices instead. Dimensions the op marks `inbounds` skip the check.
    """
    ptr, checks, _ = _element_parts(k, op, view, index, local)
    return ptr, _all(k, list(checks.values()))


def stepped_addresses(k: KernelLowering, op: Operation, view: PartitionViewVal, index: tuple[list[str], object],
                      local: list[str], dim: int, step: int, count: int,
                      elements: bool = False) -> list[tuple[str, "str | None"]]:
    """`element_address` of the elements at `local` + i `step` along tile dimension `dim`, i < count.

    One address is computed; each next one is a pointer step further (one register holds the
    step), and its bound along `dim` compares what remains of the tensor past the first element
    with a constant. Computing each address on its own instead leaves a loop with one 64-bit
    register per element for the loop-invariant parts (offsets, coordinates), which spills. Where the
    addresses are `elements`' (loaded one by one, no copy legal), the step is a runtime value and more
    than `LSR_POINTERS` elements take it, the first pointer passes through an opaque move
    (`_shifted_addresses`): loop strength reduction otherwise rewrites each as the loop's pointer plus
    a hoisted 64-bit offset of its own (a bf16 B of 64 x 256 without facts, 128 elements a thread stored
    at once: 300 spill instructions on sm_80, none so). cp.async chunks keep LSR's form: the corpus's
    tf32 GEMMs (16 chunks a thread, runtime strides) spill none with it and took 4-7 more hot-loop
    instructions without it."""
    if view.sparse_dim is not None:
        return [element_address(k, op, view, index, [*local[:dim], k.b.op(f"add i32 {local[dim]}, {i * step}", "a"),
                                                     *local[dim + 1:]]) for i in range(count)]
    ptr, checks, coords = _element_parts(k, op, view, index, local)
    others = _all(k, [ok for d, ok in checks.items() if d != dim])
    tdim = view.dim_map[dim]
    remaining = None
    if dim in checks:   # elements left along dim from the first one (0 when it is already outside)
        shape, coord = view.tensor.shape[tdim], coords[dim]
        left = k.b.op(f"sub i64 {shape}, {coord}", "a")
        remaining = k.b.op(f"select i1 {checks[dim]}, i64 {left}, i64 0", "a")
    elem = storage_type(view.tensor.type.element)
    stride = view.tensor.strides[tdim]
    jump = str(step) if stride == "1" else k.b.op(f"mul i64 {stride}, {step}", "a")
    if elements and count > LSR_POINTERS and not stride.lstrip("-").isdigit():
        ptr = _unseen(k, ptr)
    out = []
    for i in range(count):
        if i:
            ptr = k.b.op(f"getelementptr {elem}, ptr {ptr}, i64 {jump}", "a")
        ok = None if remaining is None else (checks[dim] if i == 0 else k.b.op(f"icmp ugt i64 {remaining}, {i * step}", "a"))
        out.append((ptr, _all(k, [c for c in (others, ok) if c is not None])))
    return out


def _all(k: KernelLowering, checks: list[str]) -> "str | None":
    ok_all = None
    for ok in checks:
        ok_all = ok if ok_all is None else k.b.op(f"and i1 {ok_all}, {ok}", "a")
    return ok_all


def _element_parts(k: KernelLowering, op: Operation, view: PartitionViewVal, index: tuple[list[str], object],
                   local: list[str]) -> tuple[str, dict[int, str], dict[int, str]]:
    """(pointer, in-bounds i1 per checked tile dimension, i64 tensor coordinate per tile dimension)."""
    starts, rows_base = index
    index_vals = op.operand_group("index")
    inbounds = tuple(op.attributes.get("inbounds", ()) or ())
    tile_shape = view.tile_shape
    elem = storage_type(view.tensor.type.element)
    offset = "0"
    checks: dict[int, str] = {}
    coords: dict[int, str] = {}
    # index[i] moves along tile dimension i, which covers tensor dimension dim_map[i]
    for i, dim in enumerate(view.dim_map):
        if i == view.sparse_dim:
            from .ops_reduce import scratch_load

            rows_elem = element_of(index_vals[i].type)
            row = scratch_load(k, rows_base, rows_elem, local[i])  # type: ignore[arg-type]
            coord = _i64(k, row, llvm_type(rows_elem))
        else:
            if view.sparse_dim is not None:
                step = 1  # a gather/scatter view's other indices are element offsets
            else:
                step = view.traversal_strides[i] if view.traversal_strides else tile_shape[i]
            start = starts[i] if step == 1 else k.b.op(f"mul i64 {starts[i]}, {step}", "a")
            loc = k.b.op(f"zext i32 {local[i]} to i64", "a") if local[i] != "0" else "0"
            coord = k.b.op(f"add i64 {start}, {loc}", "a")
        coords[i] = coord
        if not (dim < len(inbounds) and inbounds[dim]):
            checks[i] = k.b.op(f"icmp ult i64 {coord}, {view.tensor.shape[dim]}", "a")
        term = k.b.op(f"mul i64 {coord}, {view.tensor.strides[dim]}", "a")
        offset = term if offset == "0" else k.b.op(f"add i64 {offset}, {term}", "a")
    ptr = k.b.op(f"getelementptr {elem}, ptr {view.tensor.base}, i64 {offset}", "a")
    return ptr, checks, coords


def _write_guard(k: KernelLowering, num_elements: int, slot: int, extra: str | None,
                 layout: Layout | None = None) -> str | None:
    """i1 'this slot writes': the first copy of its element (replicas stay silent), and `extra`
    (a mask or a bounds check) when given; None when the slot always writes."""
    first = k.slot_valid(num_elements, slot, layout)
    if first is None or extra is None:
        return extra if first is None else first
    return k.b.op(f"and i1 {extra}, {first}", "a")


def _load(k: KernelLowering, ptr: str, elem_ty: str, ordering: str, scope: str, align: int) -> str:
    if ordering == "weak":
        return k.b.op(f"load {elem_ty}, ptr {ptr}, align {align}", "ld")
    return k.b.op(f"load atomic {elem_ty}, ptr {ptr}{_SCOPE.get(scope, '')} "
                  f"{_ORDERING[ordering]}, align {align}", "ld")


def _store(k: KernelLowering, ptr: str, elem_ty: str, value: str, ordering: str, scope: str, align: int) -> None:
    if ordering == "weak":
        k.b.emit(f"store {elem_ty} {value}, ptr {ptr}, align {align}")
    else:
        k.b.emit(f"store atomic {elem_ty} {value}, ptr {ptr}{_SCOPE.get(scope, '')} "
                 f"{_ORDERING[ordering]}, align {align}")


def _align(elem: ScalarType | PointerType) -> int:
    return storage_bytes(elem)


def _ordering(op: Operation) -> tuple[str, str]:
    return (str(op.attributes.get("memory_ordering_semantics", "weak")),
            str(op.attributes.get("memory_scope", "device")))


def _load_view(k: KernelLowering, op: Operation) -> None:
    emit_wait(k, op)
    view = k.get(op.operand("view"))  # type: ignore[arg-type]
    if not isinstance(view, PartitionViewVal):
        raise op_error(op, "loads from this kind of view are not supported yet")
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    elem = rtype.element
    assert isinstance(elem, ScalarType)
    lty = storage_type(elem)
    ordering, scope = _ordering(op)
    pipeline = k.pipelined_load(op)
    if pipeline is not None:
        from ..tileas.stage_rings import reads_shared
        from .pipelined_loop import load

        ahead = pipeline.stages if pipeline.specialized else pipeline.stages - 1
        if pipeline.tma and op in pipeline.tma:
            from ..tileas.tma_boxes import describe

            k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op,
                     Instruction="TMA load (cp.async.bulk.tensor to shared memory)", Boxes=describe(pipeline.tma[op]),
                     Pipeline=f"{pipeline.stages} stages, issued {ahead} iterations ahead by one thread")
        elif vec := chunk_elements(op, view, rtype):
            k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op,
                     Instruction="Ldgsts instruction (cp.async to shared memory)",
                     Width=f"{8 * storage_bytes(elem) * vec} bits",
                     Pipeline=f"{pipeline.stages} stages, issued {ahead} iterations ahead")
        else:   # no copy legal: the producer's (or a block scale's) element loads (stage_rings.StageRing.through_registers)
            k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op,
                     Instruction="Global-memory load instruction, each element stored to shared memory at once",
                     Width=f"{8 * storage_bytes(elem)} bits",
                     Pipeline=f"{pipeline.stages} stages, issued {ahead} iterations ahead")
        staged = load(k, pipeline, op)
        if not reads_shared(k, op):     # a row loop's tile: from its stage into registers
            from .row_tma import read_tile

            layout = k.layout_of(op.results[0])
            slots = restore_padding(k, op, view, rtype, layout, read_tile(k, staged.matrix, rtype, layout))
            staged = TileRegs(rtype, slots, layout)
        k.set(op.results[0], staged)
        k.set(op.results[1], TokenVal())
        return
    if ordering == "weak" and k.assignment is not None and k.assignment.is_shared_operand(op.results[0]):
        from .async_copy import load_to_shared
        from .pipelined_loop import load_invariant

        once = load_invariant(k, op)   # copied once by TMA before the loop that reads it
        if once is not None:
            k.set(op.results[0], once)
            k.set(op.results[1], TokenVal())
            return
        shared = load_to_shared(k, op, view, rtype)
        vec = chunk_elements(op, view, rtype)
        if shared is not None and vec:
            k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op, Instruction="Ldgsts instruction (cp.async to shared memory)", Width=f"{8 * storage_bytes(elem) * vec} bits")
        elif shared is not None:
            k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op,
                     Instruction="Global-memory load instruction, each element stored to shared memory at once",
                     Width=f"{8 * storage_bytes(elem)} bits")
        if shared is not None:
            k.set(op.results[0], shared)
            k.set(op.results[1], TokenVal())
            return
        k.remark("missed", "memory", "RemarkMemoryAsyncCopyMissed", "Could not load a tensor-core operand with cp.async", op, Reason="the view's facts do not prove each 4-, 8- or 16-byte chunk aligned and wholly inside or outside the tensor")
    if ordering == "weak":
        from . import row_tma

        regs = row_tma.load(k, op)     # a row kernel's tile, copied by TMA through shared memory
        if regs is not None:
            k.set(op.results[0], regs)
            k.set(op.results[1], TokenVal())
            return
    pad = padding_literal(view.padding, elem)
    layout = k.layout_of(op.results[0])
    if elem.bitwidth == 4 and ordering == "weak" and view.sparse_dim is None:
        packed = _load_nibble_runs(k, op, view, rtype, layout, pad)
        if packed is not None:
            k.set(op.results[0], TileRegs(rtype, packed))
            k.set(op.results[1], TokenVal())
            return
    vec, why = view_access(op, view, rtype, layout, ordering)
    k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op, Instruction="Global-memory load instruction", Width=f"{8 * storage_bytes(elem) * vec} bits", Loads=f"{k.slots(rtype, layout) // vec} per thread")
    if vec == 1:
        k.remark("missed", "memory", "RemarkMemoryVectorizedLoadMissed", "Load not vectorized: one element per access", op, Reason=why)
    slots = []
    if vec > 1:
        vty = f"<{vec} x {lty}>"
        pads = f"<{', '.join([f'{lty} {pad}'] * vec)}>"
        for ptr, ok in _vector_addresses(k, op, view, rtype, layout, vec):
            v = k.guarded(ok, lambda: k.b.op(f"load {vty}, ptr {ptr}, align {vec * _align(elem)}", "ld"), pads, vty)
            slots += [from_storage(k, k.b.op(f"extractelement {vty} {v}, i32 {i}", "ld"), elem) for i in range(vec)]
    else:
        for ptr, ok in _view_addresses(k, op, view, rtype, layout):
            if elem.bitwidth == 4:     # two to a byte in memory: the addresses count elements (`_nibble`)
                v = k.guarded(ok, lambda: _nibble(k, view.tensor.base, ptr, ordering, scope), pad, lty)
            else:
                v = k.guarded(ok, lambda: _load(k, ptr, lty, ordering, scope, _align(elem)), pad, lty)
            slots.append(from_storage(k, v, elem))
    k.set(op.results[0], TileRegs(rtype, slots))


def restore_padding(k: KernelLowering, op: Operation, view: PartitionViewVal, rtype: TileType, layout: Layout,
                    slots: list[str]) -> list[str]:
    """A tile copied with zeros outside the tensor (TMA, cp.async) read into registers: each slot outside
    the tensor takes the view's padding value instead, where that is not zero (a softmax's -inf)."""
    if view.padding in (None, "zero"):
        return slots
    elem = rtype.element
    assert isinstance(elem, ScalarType)
    ty, pad = llvm_type(elem), from_storage(k, padding_literal(view.padding, elem), elem)

    def restored() -> list[str]:
        oks = [ok for _, ok in _view_addresses(k, op, view, rtype, layout)]
        return [v if ok is None else k.b.op(f"select i1 {ok}, {ty} {v}, {ty} {pad}", "pad") for ok, v in zip(oks, slots)]
    if view.sparse_dim is not None:
        return restored()
    # a tile wholly inside the tensor (its last element is: every iteration's but the last) skips the selects
    _, inside = element_address(k, op, view, view_index(k, op, view), [str(d - 1) for d in view.tile_shape])
    if inside is None:
        return slots
    return k.guarded_values(k.b.op(f"xor i1 {inside}, true", "pad"), restored, slots, ty, "pad")


def _load_nibble_runs(k: KernelLowering, op: Operation, view: PartitionViewVal, rtype: TileType, layout: Layout,
                      pad: str) -> "list[str] | None":
    """A weak load of 4-bit elements a run of `vec` (16, 8 or 4, the view's facts proving it aligned
    and wholly inside or outside the tensor, counted in elements) at a time: vec / 2 bytes, two
    elements each, the first in the low nibble. None where no run is provable."""

    run = layout.run(rtype.num_elements)
    vec = vector_elements(op, view, rtype.shape, 1, run) if run >= 2 else 1
    if vec < 2:
        return None
    n = vec // 2
    k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op,
             Instruction="Global-memory load instruction", Width=f"{4 * vec} bits",
             Loads=f"{k.slots(rtype, layout) // vec} per thread")
    byte_pad = (int(pad) & 15) * 17 if pad.lstrip("-").isdigit() else 0
    vty = f"<{n} x i8>"
    pads = f"<{', '.join([f'i8 {byte_pad}'] * n)}>"
    slots = []
    for at, ok in _vector_addresses(k, op, view, rtype, layout, vec):
        def load() -> str:
            off = k.b.op(f"sub i64 {k.b.op(f'ptrtoint ptr {at} to i64', 'nb')}, "
                         f"{k.b.op(f'ptrtoint ptr {view.tensor.base} to i64', 'nb')}", "nb")
            ptr = k.b.op(f"getelementptr i8, ptr {view.tensor.base}, i64 {k.b.op(f'lshr i64 {off}, 1', 'nb')}", "nb")
            return k.b.op(f"load {vty}, ptr {ptr}, align {n}", "ld")
        v = k.guarded(ok, load, pads, vty)
        for i in range(n):
            byte = k.b.op(f"extractelement {vty} {v}, i32 {i}", "ld")
            slots += [k.b.op(f"and i8 {byte}, 15", "nb"), k.b.op(f"lshr i8 {byte}, 4", "nb")]
    return slots


def _nibble(k: KernelLowering, base: str, at: str, ordering: str, scope: str) -> str:
    """The 4-bit element (as i8) whose element offset from `base` is `at`'s byte offset (4-bit
    views address as if each element were a byte): byte offset / 2 holds it, the first of a pair
    in the low nibble."""
    op = k.b.op
    off = op(f"sub i64 {op(f'ptrtoint ptr {at} to i64', 'nb')}, {op(f'ptrtoint ptr {base} to i64', 'nb')}", "nb")
    half = op(f"lshr i64 {off}, 1", "nb")
    byte = _load(k, op(f"getelementptr i8, ptr {base}, i64 {half}", "nb"), "i8", ordering, scope, 1)
    odd = op(f"and i64 {off}, 1", "nb")
    shift = op(f"trunc i64 {op(f'shl i64 {odd}, 2', 'nb')} to i8", "nb")
    return op(f"and i8 {op(f'lshr i8 {byte}, {shift}', 'nb')}, 15", "nb")
    k.set(op.results[1], TokenVal())


def _vector_addresses(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileType, layout: Layout,
                      vec: int) -> list[tuple[str, "str | None"]]:
    """Per run of `vec` slots: (pointer, in-bounds i1 or None) of its first element."""
    return _slot_addresses(k, op, view, layout, range(0, k.slots(tile, layout), vec))


def _store_view(k: KernelLowering, op: Operation) -> None:
    emit_wait(k, op)
    view = k.get(op.operand("view"))  # type: ignore[arg-type]
    tile = k.tile(op.operand("tile"))  # type: ignore[arg-type]
    if not isinstance(view, PartitionViewVal):
        raise op_error(op, "stores to this kind of view are not supported yet")
    elem = tile.type.element
    assert isinstance(elem, ScalarType)
    lty = storage_type(elem)
    ordering, scope = _ordering(op)
    if elem.bitwidth == 4:      # two to a byte in memory: the addresses count elements (`_nibble`)
        _store_nibbles(k, op, view, tile, ordering, scope)
        k.set(op.results[0], TokenVal())
        return
    if ordering == "weak" and _tma_store(k, op, tile, view):
        return
    if ordering == "weak":
        from . import row_tma

        if row_tma.store(k, op, tile):
            k.set(op.results[0], TokenVal())
            return
    masked = False
    vec, why = view_access(op, view, tile.type, tile.layout, ordering)
    if ordering == "weak":
        from .epilogue import decided, restage

        staged = decided(k, op, tile)    # (not by TMA: tma_store did not take it)
        if staged is not None:
            tile = restage(k, tile, staged)   # mma fragments: wider stores through the freed buffers
            vec, why = view_access(op, view, tile.type, tile.layout, ordering)
    k.remark("passed", "memory", "RemarkMemoryStoreInstructionSelected", "Store instruction selected", op, Instruction="Global-memory store instruction", Width=f"{8 * storage_bytes(elem) * vec} bits", Stores=f"{len(tile.slots) // vec} per thread")
    if vec == 1:
        k.remark("missed", "memory", "RemarkMemoryVectorizedStoreMissed", "Store not vectorized: one element per access", op, Reason=why)
    if vec > 1:
        vty = f"<{vec} x {lty}>"
        for i, (ptr, ok) in enumerate(_vector_addresses(k, op, view, tile.type, tile.layout, vec)):
            cond = _write_guard(k, tile.type.num_elements, i * vec, ok, tile.layout)
            packed = _pack(k, tile.slots[i * vec:(i + 1) * vec], elem, "st")
            k.guarded(cond, lambda: k.b.emit(f"store {vty} {packed}, ptr {ptr}, align {vec * _align(elem)}"), None, vty)
            masked = masked or cond is not None
        _reconverge(k, op, masked)
        k.set(op.results[0], TokenVal())
        return
    for slot, (ptr, ok) in enumerate(_view_addresses(k, op, view, tile.type, tile.layout)):
        cond = _write_guard(k, tile.type.num_elements, slot, ok, tile.layout)
        value = to_storage(k, tile.slots[slot], elem)
        k.guarded(cond, lambda: _store(k, ptr, lty, value, ordering, scope, _align(elem)), None, lty)
        masked = masked or cond is not None
    _reconverge(k, op, masked)
    k.set(op.results[0], TokenVal())


def _reconverge(k: KernelLowering, op: Operation, masked: bool) -> None:
    """After per-thread guarded stores inside a loop: the warp reconverges (bar.warp.sync) before the
    loop's next warp-collective `.aligned` instructions (ldmatrix, mma, tcgen05.ld, ...), which need
    all its lanes together; PTX does not promise convergence at the branches' join. (A persistent
    split matmul's CTA whose last tile is partly outside C deadlocked in the emulator without it.)"""
    from ..tileas.epilogue_forms import outermost_loop

    if not masked or outermost_loop(op) is None:
        return
    k.b.declare("declare void @llvm.nvvm.bar.warp.sync(i32)")
    k.b.emit("call void @llvm.nvvm.bar.warp.sync(i32 -1)")


def _store_nibbles(k: KernelLowering, op: Operation, view: PartitionViewVal, tile: TileRegs, ordering: str,
                   scope: str) -> None:
    """4-bit elements, two to a byte, the first in the low nibble. A weak store of runs of `vec` (16, 8
    or 4 elements the view's facts prove aligned and wholly inside or outside the tensor) writes whole
    bytes; any other element may share its byte with another thread's, so it clears and sets its own
    nibble of the aligned 32-bit word holding it with two atomics (each touches only its own bits)."""

    run = tile.layout.run(tile.type.num_elements)
    vec = vector_elements(op, view, tile.type.shape, 1, run) if run >= 2 and ordering == "weak" else 1
    k.remark("passed", "memory", "RemarkMemoryStoreInstructionSelected", "Store instruction selected", op,
             Instruction="Global-memory store instruction" if vec > 1 else "Global-memory atomic and/or per nibble",
             Width=f"{4 * vec} bits" if vec > 1 else "4 bits", Stores=f"{len(tile.slots) // vec} per thread")
    op_ = k.b.op
    base = view.tensor.base

    def byte_address(at: str) -> tuple[str, str]:
        """(pointer to the byte holding the element at element offset `at` - base, i64 offset)."""
        off = op_(f"sub i64 {op_(f'ptrtoint ptr {at} to i64', 'nb')}, {op_(f'ptrtoint ptr {base} to i64', 'nb')}", "nb")
        return op_(f"getelementptr i8, ptr {base}, i64 {op_(f'lshr i64 {off}, 1', 'nb')}", "nb"), off

    if vec > 1:
        n = vec // 2
        vty = f"<{n} x i8>"
        for i, (at, ok) in enumerate(_vector_addresses(k, op, view, tile.type, tile.layout, vec)):
            cond = _write_guard(k, tile.type.num_elements, i * vec, ok, tile.layout)
            packed = "undef"
            for j in range(n):
                lo, hi = (op_(f"and i8 {tile.slots[i * vec + 2 * j + h]}, 15", "nb") for h in (0, 1))
                byte = op_(f"or i8 {lo}, {op_(f'shl i8 {hi}, 4', 'nb')}", "nb")
                packed = op_(f"insertelement {vty} {packed}, i8 {byte}, i32 {j}", "nb")

            def store(at: str = at, packed: str = packed) -> None:
                k.b.emit(f"store {vty} {packed}, ptr {byte_address(at)[0]}, align {n}")
            k.guarded(cond, store, None, vty)
        return
    k.remark("missed", "memory", "RemarkMemoryVectorizedStoreMissed", "Store not vectorized: one element per access",
             op, Reason="4-bit elements whose runs the view's facts do not prove aligned: one nibble at a time")
    for slot, (at, ok) in enumerate(_view_addresses(k, op, view, tile.type, tile.layout)):
        cond = _write_guard(k, tile.type.num_elements, slot, ok, tile.layout)

        def store(at: str = at, value: str = tile.slots[slot]) -> None:
            ptr, off = byte_address(at)
            addr = op_(f"ptrtoint ptr {ptr} to i64", "nb")
            word = op_(f"inttoptr i64 {op_(f'and i64 {addr}, -4', 'nb')} to ptr", "nb")
            byte_bit = op_(f"shl i64 {op_(f'and i64 {addr}, 3', 'nb')}, 3", "nb")
            nibble_bit = op_(f"shl i64 {op_(f'and i64 {off}, 1', 'nb')}, 2", "nb")
            shift = op_(f"trunc i64 {op_(f'or i64 {byte_bit}, {nibble_bit}', 'nb')} to i32", "nb")
            keep = op_(f"xor i32 {op_(f'shl i32 15, {shift}', 'nb')}, -1", "nb")
            nibble = op_(f"zext i8 {op_(f'and i8 {value}, 15', 'nb')} to i32", "nb")
            bits = op_(f"shl i32 {nibble}, {shift}", "nb")
            order = f"{_SCOPE.get(scope, '')} {_ORDERING.get(ordering, 'monotonic')}"
            op_(f"atomicrmw and ptr {word}, i32 {keep}{order}, align 4", "nb")
            op_(f"atomicrmw or ptr {word}, i32 {bits}{order}, align 4", "nb")
        k.guarded(cond, store, None, "i8")


def _tma_store(k: KernelLowering, op: Operation, tile: TileRegs, view: PartitionViewVal) -> bool:
    """An mma accumulator stored by TMA through the freed buffers (epilogue.tma_store), remarked."""
    from .epilogue import tma_store

    if not tma_store(k, op, tile, view):
        return False
    k.remark("passed", "memory", "RemarkMemoryStoreInstructionSelected", "Store instruction selected", op,
             Instruction="TMA store (cp.async.bulk.tensor from shared memory)",
             Boxes=f"tensor map {len(k.tma_params) - 1}, by one thread through a swizzled buffer")
    k.set(op.results[0], TokenVal())
    return True


def _offset(k: KernelLowering, op: Operation) -> None:
    ptrs = k.tile(op.operands[0])
    offs = k.tile(op.operands[1])
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    pointee = rtype.element.pointee  # type: ignore[attr-defined]
    lty = storage_type(pointee)
    oty = llvm_type(element_of(op.operands[1].type))
    out = [k.b.op(f"getelementptr {lty}, ptr {p}, {oty} {o}", "g")
           for p, o in zip(ptrs.slots, offs.slots)]
    k.set(op.results[0], TileRegs(rtype, out))


def _pack(k: KernelLowering, values: list, elem, tag: str) -> str:
    """One vector register of `values` in their storage type (a wide store's data, a wide load's padding)."""
    lty = storage_type(elem)
    vty = f"<{len(values)} x {lty}>"
    packed = "undef"
    for j, value in enumerate(values):
        packed = k.b.op(f"insertelement {vty} {packed}, {lty} {to_storage(k, value, elem)}, i32 {j}", tag)
    return packed


def _load_ptr(k: KernelLowering, op: Operation) -> None:
    emit_wait(k, op)
    ptrs = k.tile(op.operand("source"))  # type: ignore[arg-type]
    mask_v, pad_v = op.operand("mask"), op.operand("paddingValue")
    mask = k.tile(mask_v) if mask_v is not None else None
    pad = k.tile(pad_v) if pad_v is not None else None
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    elem = rtype.element
    if isinstance(elem, ScalarType) and elem.bitwidth == 4:     # two to a byte: pointers would need nibble offsets
        raise op_error(op, "pointer tiles of 4-bit elements are not supported yet; use a tensor view")
    lty = storage_type(elem)
    ordering, scope = _ordering(op)
    slots = []
    vec, why = pointer_access(op.operand("source"), mask_v, rtype, ptrs.layout, ordering)  # type: ignore[arg-type]
    k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", op, Instruction="Global-memory load instruction (gather through a tile of pointers)", Width=f"{8 * storage_bytes(elem) * vec} bits", Loads=f"{len(ptrs.slots) // vec} per thread")
    if vec == 1:
        k.remark("missed", "memory", "RemarkMemoryVectorizedLoadMissed", "Load not vectorized: one element per access", op, Reason=why)
    if vec > 1:
        vty = f"<{vec} x {lty}>"
        for i in range(0, len(ptrs.slots), vec):
            default = f"<{', '.join([f'{lty} {padding_literal(None, elem)}'] * vec)}>"   # type: ignore[arg-type]
            if pad is not None:
                default = _pack(k, pad.slots[i:i + vec], elem, "ld")
            p = ptrs.slots[i]
            v = k.guarded(mask.slots[i] if mask else None,
                          lambda: k.b.op(f"load {vty}, ptr {p}, align {vec * _align(elem)}", "ld"), default, vty)
            slots += [from_storage(k, k.b.op(f"extractelement {vty} {v}, i32 {j}", "ld"), elem) for j in range(vec)]
        k.set(op.results[0], TileRegs(rtype, slots))
        k.set(op.results[1], TokenVal())
        return
    for i, p in enumerate(ptrs.slots):
        default = pad.slots[i] if pad is not None else padding_literal(None, elem)  # type: ignore[arg-type]
        if pad is not None:
            default = to_storage(k, default, elem)
        v = k.guarded(mask.slots[i] if mask else None,
                     lambda: _load(k, p, lty, ordering, scope, _align(elem)), default, lty)  # type: ignore[arg-type]
        slots.append(from_storage(k, v, elem))
    k.set(op.results[0], TileRegs(rtype, slots))
    k.set(op.results[1], TokenVal())


def _store_ptr(k: KernelLowering, op: Operation) -> None:
    emit_wait(k, op)
    ptrs = k.tile(op.operand("destination"))  # type: ignore[arg-type]
    vals = k.tile(op.operand("value"))  # type: ignore[arg-type]
    mask_v = op.operand("mask")
    mask = k.tile(mask_v) if mask_v is not None else None
    if vals.layout != ptrs.layout:   # mma fragments, their pointers in 16-byte runs (assign_layouts)
        from .epilogue import decided, restage

        staged = decided(k, op, vals)
        vals = restage(k, vals, staged) if staged is not None else k.convert(vals, ptrs.layout, role="store-conversion")
    elem = vals.type.element
    if isinstance(elem, ScalarType) and elem.bitwidth == 4:     # two to a byte: pointers would need nibble offsets
        raise op_error(op, "pointer tiles of 4-bit elements are not supported yet; use a tensor view")
    lty = storage_type(elem)
    ordering, scope = _ordering(op)
    vec, why = pointer_access(op.operand("destination"), mask_v, vals.type, vals.layout, ordering)  # type: ignore[arg-type]
    k.remark("passed", "memory", "RemarkMemoryStoreInstructionSelected", "Store instruction selected", op, Instruction="Global-memory store instruction (scatter through a tile of pointers)", Width=f"{8 * storage_bytes(elem) * vec} bits", Stores=f"{len(ptrs.slots) // vec} per thread")
    if vec == 1:
        k.remark("missed", "memory", "RemarkMemoryVectorizedStoreMissed", "Store not vectorized: one element per access", op, Reason=why)
    if vec > 1:
        vty = f"<{vec} x {lty}>"
        for i in range(0, len(ptrs.slots), vec):
            cond = _write_guard(k, vals.type.num_elements, i, mask.slots[i] if mask else None, vals.layout)
            packed = _pack(k, vals.slots[i:i + vec], elem, "st")
            p = ptrs.slots[i]
            k.guarded(cond, lambda: k.b.emit(f"store {vty} {packed}, ptr {p}, align {vec * _align(elem)}"), None, vty)
        k.set(op.results[0], TokenVal())
        return
    for i, p in enumerate(ptrs.slots):
        cond = _write_guard(k, vals.type.num_elements, i, mask.slots[i] if mask else None, vals.layout)
        value = to_storage(k, vals.slots[i], elem)
        k.guarded(cond, lambda: _store(k, p, lty, value, ordering, scope, _align(elem)), None, lty)  # type: ignore[arg-type]
    k.set(op.results[0], TokenVal())


# atomic_rmw mode -> LLVM atomicrmw operation (float add uses fadd)
_RMW = {"and": "and", "or": "or", "xor": "xor", "add": "add", "addf": "fadd", "max": "max", "min": "min",
        "umax": "umax", "umin": "umin", "xchg": "xchg"}


def _rmw_operation(op: Operation, elem: object) -> str:
    """The LLVM atomicrmw operation of an op's `mode` (max/min of floats are fmax/fmin)."""
    mode = _RMW[str(op.attributes["mode"])]
    if mode in ("max", "min") and llvm_type(elem) in ("half", "bfloat", "float", "double"):  # type: ignore[arg-type]
        mode = "f" + mode
    return mode


def _atomic_rmw(k: KernelLowering, op: Operation) -> None:
    emit_wait(k, op)
    ptrs = k.tile(op.operand("pointers"))  # type: ignore[arg-type]
    args = k.tile(op.operand("arg"))  # type: ignore[arg-type]
    mask_v = op.operand("mask")
    mask = k.tile(mask_v) if mask_v is not None else None
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    lty = storage_type(rtype.element)
    mode = _rmw_operation(op, rtype.element)
    ordering, scope = _ordering(op)
    llvm_order = _ORDERING.get(ordering, "monotonic")
    out = []
    for i, p in enumerate(ptrs.slots):
        cond = _write_guard(k, rtype.num_elements, i, mask.slots[i] if mask else None, args.layout)
        arg = args.slots[i]
        out.append(k.guarded(cond, lambda: k.b.op(
            f"atomicrmw {mode} ptr {p}, {lty} {arg}{_SCOPE.get(scope, '')} {llvm_order}, "
            f"align {_align(rtype.element)}", "at"), "undef" if lty != "i1" else "false", lty))  # type: ignore[arg-type]
    k.set(op.results[0], TileRegs(rtype, out, args.layout))
    k.set(op.results[1], TokenVal())


def _atomic_cas(k: KernelLowering, op: Operation) -> None:
    emit_wait(k, op)
    ptrs = k.tile(op.operand("pointers"))  # type: ignore[arg-type]
    cmp = k.tile(op.operand("cmp"))  # type: ignore[arg-type]
    val = k.tile(op.operand("val"))  # type: ignore[arg-type]
    mask_v = op.operand("mask")
    mask = k.tile(mask_v) if mask_v is not None else None
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    lty = storage_type(rtype.element)
    is_float = lty in ("half", "bfloat", "float", "double")
    ity = {"half": "i16", "bfloat": "i16", "float": "i32", "double": "i64"}.get(lty, lty)
    ordering, scope = _ordering(op)
    llvm_order = _ORDERING.get(ordering, "monotonic")
    failure = {"acq_rel": "acquire", "release": "monotonic"}.get(llvm_order, llvm_order)
    out = []
    for i, p in enumerate(ptrs.slots):
        cond = _write_guard(k, rtype.num_elements, i, mask.slots[i] if mask else None, val.layout)
        c, v = cmp.slots[i], val.slots[i]

        def body(p: str = p, c: str = c, v: str = v) -> str:
            if is_float:
                c = k.b.op(f"bitcast {lty} {c} to {ity}", "bc")
                v = k.b.op(f"bitcast {lty} {v} to {ity}", "bc")
            pair = k.b.op(f"cmpxchg ptr {p}, {ity} {c}, {ity} {v}{_SCOPE.get(scope, '')} "
                          f"{llvm_order} {failure}, align {_align(rtype.element)}", "cas")
            old = k.b.op(f"extractvalue {{ {ity}, i1 }} {pair}, 0", "cas")
            return k.b.op(f"bitcast {ity} {old} to {lty}", "bc") if is_float else old
        out.append(k.guarded(cond, body, "undef", lty))
    k.set(op.results[0], TileRegs(rtype, out, val.layout))
    k.set(op.results[1], TokenVal())


def _atomic_red_view(k: KernelLowering, op: Operation) -> None:
    """Atomically combine a tile into a view's tile: one atomicrmw per in-bounds element."""
    emit_wait(k, op)
    view = k.get(op.operand("view"))  # type: ignore[arg-type]
    tile = k.tile(op.operand("value"))  # type: ignore[arg-type]
    if not isinstance(view, PartitionViewVal):
        raise op_error(op, "reductions into this kind of view are not supported")
    elem = tile.type.element
    lty = storage_type(elem)
    mode = _rmw_operation(op, elem)
    if mode == "fadd" and llvm_type(elem) == "bfloat":
        from .features import require

        require(op, "bf16_atomic_add", k.sm, k.gpu)
    ordering, scope = _ordering(op)
    llvm_order = _ORDERING.get(ordering, "monotonic")
    for slot, (ptr, ok) in enumerate(_view_addresses(k, op, view, tile.type, tile.layout)):
        cond = _write_guard(k, tile.type.num_elements, slot, ok, tile.layout)
        value = tile.slots[slot]
        k.guarded(cond, lambda: k.b.emit(
            f"atomicrmw {mode} ptr {ptr}, {lty} {value}{_SCOPE.get(scope, '')} {llvm_order}, "
            f"align {_align(elem)}"), None, lty)  # type: ignore[arg-type]
    k.set(op.results[0], TokenVal())


def _alloca(k: KernelLowering, op: Operation) -> None:
    """Tile-block-local memory: a static shared-memory buffer per alloca op.

    Shared memory is visible to every thread of the CTA, which is what a tile
    block (the "tile thread" of the dialect) is here; its lifetime is the
    kernel's, which covers the block the alloca resides in.
    """
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    size, align = alloca_size(op)
    name = f"@__tileir_alloca{len(k.globals)}_{k.entry.attributes.get('sym_name', 'k')}"
    k.static_smem_bytes += alloca_bytes(op)
    k.globals.append(f"{name} = internal addrspace(3) global [{max(size, 1)} x i8] undef, align {align}")
    k.set(op.results[0], k.splat(rtype, f"addrspacecast (ptr addrspace(3) {name} to ptr)"))


def _get_tensor_shape(k: KernelLowering, op: Operation) -> None:
    view = k.get(op.operands[0])
    tensor = view.tensor if isinstance(view, PartitionViewVal) else view
    for i, result in enumerate(op.results):
        ty = llvm_type(element_of(result.type))
        v = tensor.shape[i]
        if ty != "i64":
            v = str(int(v)) if v.lstrip("-").isdigit() else k.b.op(f"trunc i64 {v} to {ty}", "sh")
        k.set(result, k.splat(result.type, v))  # type: ignore[arg-type]


def _get_index_space_shape(k: KernelLowering, op: Operation) -> None:
    view = k.get(op.operands[0])
    assert isinstance(view, PartitionViewVal)
    for i, result in enumerate(op.results):
        ty = llvm_type(element_of(result.type))
        # tiles along index dimension i: ceil(tensor extent along dim_map[i] / tile[i])
        tile = view.tile_shape[i]
        n = view.tensor.shape[view.dim_map[i]]
        if n.lstrip("-").isdigit():
            v = str(-(-int(n) // tile))
        else:
            bumped = k.b.op(f"add i64 {n}, {tile - 1}", "is")
            v = k.b.op(f"udiv i64 {bumped}, {tile}", "is")
            if ty != "i64":
                v = k.b.op(f"trunc i64 {v} to {ty}", "is")
        k.set(result, k.splat(result.type, v))  # type: ignore[arg-type]


LOWERINGS = {
    "cuda_tile.make_token": _make_token, "cuda_tile.join_tokens": _make_token,
    "cuda_tile.assume": _assume,
    "cuda_tile.get_tile_block_id": _block_ids("ctaid"), "cuda_tile.get_num_tile_blocks": _block_ids("nctaid"),
    "cuda_tile.make_tensor_view": _make_tensor_view,
    "cuda_tile.make_partition_view": _make_partition_view, "cuda_tile.make_strided_view": _make_partition_view,
    "cuda_tile.load_view_tko": _load_view, "cuda_tile.store_view_tko": _store_view,
    "cuda_tile.offset": _offset, "cuda_tile.load_ptr_tko": _load_ptr, "cuda_tile.store_ptr_tko": _store_ptr,
    "cuda_tile.atomic_rmw_tko": _atomic_rmw, "cuda_tile.atomic_cas_tko": _atomic_cas,
    "cuda_tile.atomic_red_view_tko": _atomic_red_view, "cuda_tile.alloca": _alloca,
    "cuda_tile.make_gather_scatter_view": _make_gather_scatter_view,
    "cuda_tile.get_tensor_shape": _get_tensor_shape, "cuda_tile.get_index_space_shape": _get_index_space_shape,
}
