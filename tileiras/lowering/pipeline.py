"""cuda_tile module -> LLVM IR text (NVPTX) and the launch metadata of each kernel."""

from __future__ import annotations

import sys
from typing import Optional

from ..driver.errors import CompileError
from ..ir.core import Operation
from ..ir.types import PointerType, ScalarType, TileType
from .assign_layouts import LayoutAssignment
from .kernel import KernelLowering
from .layout import choose_threads
from .llvm_text import llvm_type
from .debuginfo import DebugInfo, entry_location
from .ops_globals import define_global

DATALAYOUT = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"


def _param(arg_type: object, index: int) -> tuple[str, str]:
    """(LLVM type, TileIR type spelling) of one entry parameter (a 0-d tile)."""
    elem = arg_type.element if isinstance(arg_type, TileType) else arg_type
    if isinstance(arg_type, TileType) and arg_type.shape:
        raise CompileError(f"error: entry parameter {index} has non-scalar type {arg_type}")
    if isinstance(elem, PointerType):
        return "ptr", str(elem)
    assert isinstance(elem, ScalarType)
    return llvm_type(elem), str(elem)


def lower_entry(entry: Operation, gpu: str, debug: "DebugInfo | None" = None,
                assignment: Optional[LayoutAssignment] = None) -> tuple[str, list[str], object]:
    from ..codegen.metadata import KernelInfo, KernelParam

    name = str(entry.attributes["sym_name"])
    block = entry.regions[0].block
    threads = choose_threads(0)
    k = KernelLowering(entry, gpu, threads, debug, assignment or LayoutAssignment(entry, threads))
    dbg_attachment = ""
    if debug is not None:
        where = entry_location(entry)
        k.subprogram = debug.subprogram(name, where)
        k.sub_file = getattr(where, "file", "") or "<unknown>"
        dbg_attachment = f" !dbg !{k.subprogram}"
    params, infos = [], []
    for i, arg in enumerate(block.arguments):
        lty, spelling = _param(arg.type, i)
        pname = f"%arg{i}"
        params.append(f"{lty} {pname}")
        infos.append(KernelParam(name=f"arg{i}", type=spelling))
        k.set(arg, k.splat(arg.type, pname) if isinstance(arg.type, TileType) else pname)
    k.lower_block(block)
    if not k.b.lines or not k.b.lines[-1].strip().startswith(("ret", "br", "unreachable")):
        k.b.emit("ret void")
    text = [f'define ptx_kernel void {_symbol(name)}({", ".join(params)}) #0{dbg_attachment} {{', k.b.body(), "}"]
    defs = list(k.globals)
    if k.smem_bytes:
        defs.append(f"@__tileir_scratch = internal addrspace(3) global [{k.smem_bytes} x i8] undef, align 16")
    info = KernelInfo(name=name, params=tuple(infos), block=(threads, 1, 1), dynamic_smem=0, cluster=(1, 1, 1))
    return "\n".join(text), defs + sorted(k.b.declarations), info


def _print_layouts(module: Operation, entries: list[Operation], assignments: list[LayoutAssignment]) -> None:
    """The module after layout assignment: its text, then each kernel's tile layouts and conversions."""
    from ..text.printer import Printer

    printer = Printer()
    lines = ["// -----// IR Dump After assign-layouts //----- //", printer.print_module(module).rstrip("\n")]
    for entry, assignment in zip(entries, assignments):
        lines.append(f"// layouts of @{entry.attributes['sym_name']}:")
        lines += assignment.describe(printer.ref)
    print("\n".join(lines), file=sys.stderr)


def _symbol(name: str) -> str:
    return f"@{name}" if name.replace("_", "a").isalnum() else f'@"{name}"'


def lower_module(module: Operation, gpu: str, opt_level: int = 3, lineinfo: bool = False, debug: bool = False,
                 print_ir_after_all: bool = False) -> tuple[str, object]:
    from ..codegen.metadata import ModuleMetadata

    debug_info = DebugInfo(full=debug) if (lineinfo or debug) else None
    functions, decls, kernels = [], [], []
    globals_ = []
    body = module.regions[0].block.operations if module.regions else []
    for op in body:
        if op.name == "cuda_tile.global":
            globals_.append(define_global(op))
    entries = [op for op in body if op.name == "cuda_tile.entry"]
    assignments = [LayoutAssignment(op, choose_threads(0)) for op in entries]
    if print_ir_after_all:
        _print_layouts(module, entries, assignments)
    for op, assignment in zip(entries, assignments):
        text, entry_decls, info = lower_entry(op, gpu, debug_info, assignment)
        functions.append(text)
        decls.extend(entry_decls)
        kernels.append(info)
    unique_decls = []
    for d in decls:
        if d.startswith("@__tileir_scratch"):
            # one scratch buffer per module, as big as the largest kernel's need
            continue
        if d not in unique_decls:
            unique_decls.append(d)
    scratch = [d for d in decls if d.startswith("@__tileir_scratch")]
    if scratch:
        biggest = max(int(d.split("[", 1)[1].split(" x", 1)[0]) for d in scratch)
        unique_decls.insert(0, f"@__tileir_scratch = internal addrspace(3) global [{biggest} x i8] undef, align 16")
    ir = "\n".join([
        f'target datalayout = "{DATALAYOUT}"',
        'target triple = "nvptx64-nvidia-cuda"',
        "",
        *globals_,
        *unique_decls,
        "",
        *functions,
        "",
        'attributes #0 = { "nvvm.reqntid"="' + str(kernels[0].block[0] if kernels else 128) + ',1,1" }',
        *(debug_info.module_lines() if debug_info is not None else []),
        "",
    ])
    if print_ir_after_all:
        print("// -----// IR Dump After lower-to-llvm //----- //", file=sys.stderr)
        print(ir, file=sys.stderr)
    return ir, ModuleMetadata(kernels=tuple(kernels), gpu=gpu)
