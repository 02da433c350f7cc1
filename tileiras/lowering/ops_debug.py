"""print_tko and assert: device printf (vprintf) and __assertfail.

A tile argument prints once per element, by the thread holding the first
copy of that element; a 0-d (uniform) argument prints once, from thread 0.
Float arguments are passed as doubles, as C's variadic promotion requires.
"""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import PointerType, ScalarType
from .kernel import KernelLowering
from ..codegen.llvm_string import c_string
from .llvm_text import llvm_type
from .values import TokenVal


def _string_global(k: KernelLowering, text: str) -> str:
    data = text.encode("utf-8") + b"\0"
    name = f"@__tileir_str{len(k.globals)}_{k.entry.attributes.get('sym_name', 'k')}"
    k.globals.append(f"{name} = private unnamed_addr addrspace(1) constant [{len(data)} x i8] c\"{c_string(data)}\", align 1")
    return k.b.op(f"addrspacecast ptr addrspace(1) {name} to ptr", "str")


def _vprintf(k: KernelLowering, fmt: str, args: list[tuple[str, str]]) -> None:
    """Call vprintf with `args` packed into a local buffer (each field aligned to its size)."""
    k.b.declare("declare i32 @vprintf(ptr, ptr)")
    if not args:
        k.b.op(f"call i32 @vprintf(ptr {fmt}, ptr null)", "pf")
        return
    fields = ", ".join(t for t, _ in args)
    buf = k.b.pre(f"alloca {{ {fields} }}, align 8", "pbuf")
    for i, (t, v) in enumerate(args):
        p = k.b.op(f"getelementptr {{ {fields} }}, ptr {buf}, i32 0, i32 {i}", "pa")
        k.b.emit(f"store {t} {v}, ptr {p}, align 8")
    k.b.op(f"call i32 @vprintf(ptr {fmt}, ptr {buf})", "pf")


def _promote(k: KernelLowering, v: str, elem: object) -> tuple[str, str]:
    if isinstance(elem, PointerType):
        return "ptr", v
    lty = llvm_type(elem)  # type: ignore[arg-type]
    if lty in ("half", "bfloat", "float"):
        return "double", k.b.op(f"fpext {lty} {v} to double", "pp")
    if lty == "double":
        return "double", v
    if lty in ("i1", "i8", "i16"):
        signed = not (isinstance(elem, ScalarType) and elem.name == "i1")
        return "i32", k.b.op(f"{'sext' if signed else 'zext'} {lty} {v} to i32", "pp")
    return lty, v


def _guard_block(k: KernelLowering, cond: str | None):
    """Open a block that runs only where `cond` holds; returns the join label (or None)."""
    if cond is None:
        return None
    body, join = k.b.label("pr"), k.b.label("prj")
    k.b.cond_br(cond, body, join)
    k.b.start_block(body)
    return join


def _print(k: KernelLowering, op: Operation) -> None:
    fmt = _string_global(k, str(op.attributes.get("str", "")))
    args = op.operand_group("args")
    tiles = [k.tile(v) for v in args]
    widest = max((t.type.num_elements for t in tiles), default=1)
    shape_of = max((t.type for t in tiles), key=lambda t: t.num_elements, default=None)
    slots = k.slots(shape_of) if shape_of is not None else 1
    for s in range(slots):
        if widest == 1:
            first = k.b.pre(f"icmp eq i32 {k.tid}, 0", "t0") if s == 0 else None
        else:
            first = k.slot_valid(widest, s)
        join = _guard_block(k, first)
        packed = [_promote(k, t.slots[min(s, len(t.slots) - 1)], t.type.element) for t in tiles]
        _vprintf(k, fmt, packed)
        if join:
            k.b.br(join)
            k.b.start_block(join)
    for r in op.results:
        k.set(r, TokenVal())


def _assert(k: KernelLowering, op: Operation) -> None:
    cond = k.tile(op.operand("condition"))  # type: ignore[arg-type]
    message = str(op.attributes.get("message", "assertion failed"))
    msg = _string_global(k, message)
    where = _string_global(k, f"{message} (element %d)\n")
    file = _string_global(k, "tileir")
    func = _string_global(k, str(k.entry.attributes.get("sym_name", "kernel")))
    k.b.declare("declare void @__assertfail(ptr, ptr, i32, ptr, i64)")
    n = cond.type.num_elements
    for s, c in enumerate(cond.slots):
        failed = k.b.op(f"xor i1 {c}, true", "af")
        first = k.slot_valid(n, s)
        if first is not None:
            failed = k.b.op(f"and i1 {failed}, {first}", "af")
        join = _guard_block(k, failed)
        _vprintf(k, where, [("i32", k.elem_index(n, s))])
        k.b.emit(f"call void @__assertfail(ptr {msg}, ptr {file}, i32 0, ptr {func}, i64 1)")
        k.b.br(join)  # type: ignore[arg-type]
        k.b.start_block(join)  # type: ignore[arg-type]


def _grid_dependency(kind: str):
    """gdc_wait / gdc_launch_dependents: programmatic dependent launch (sm_90+); order-only before."""
    def lower(k: KernelLowering, op: Operation) -> None:
        if k.caps.has("griddepcontrol"):
            k.b.emit(f'call void asm sideeffect "griddepcontrol.{kind};", ""()')
        for r in op.results:
            k.set(r, TokenVal())
    return lower


def _fence(k: KernelLowering, op: Operation) -> None:
    k.b.declare("declare void @llvm.nvvm.membar.gl()")
    k.b.emit("call void @llvm.nvvm.membar.gl()")
    for r in op.results:
        k.set(r, TokenVal())


LOWERINGS = {
    "cuda_tile.print_tko": _print, "cuda_tile.print": _print, "cuda_tile.assert": _assert,
    "cuda_tile.gdc_wait_tko": _grid_dependency("wait"),
    "cuda_tile.gdc_launch_dependents_tko": _grid_dependency("launch_dependents"),
    "cuda_tile.memory_fence_alias_tko": _fence,
}
