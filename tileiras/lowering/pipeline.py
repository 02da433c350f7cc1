"""cuda_tile module -> LLVM IR text (NVPTX) and the launch metadata of each kernel."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional

from ..errors import CompileError
from ..ir.core import Operation
from ..ir.types import PointerType, ScalarType, TileType
from ..transforms.passes import CANONICAL_PASSES, rounds, to_canonical
from ..transforms.token_order import TokenOrder
from ..tileas.assign_layouts import LayoutAssignment
from .kernel import KernelLowering
from . import warp_specialize
from .llvm_text import llvm_type
from .debuginfo import DebugInfo, entry_location
from .ops_globals import define_global
from .smem import place
from ..tileaa.clusters import CLUSTER_ATTR, split_entry_over_cluster
from ..tileaa.passes import PASSES as TILEAA_PASSES, to_tileaa
from ..tileas.passes import to_tileas
from ..tileas.plan import plan_lines, plan_of
from ..tileas.shared_plan import Assumptions, shared_plan_lines, shared_plan_of

if TYPE_CHECKING:
    from ..schedule.pipeline import PipelinePlan

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
                assignment: Optional[LayoutAssignment] = None,
                order: Optional[TokenOrder] = None, notes: Optional[list[str]] = None) -> tuple[str, list[str], object]:
    """One kernel as LLVM IR text; `notes` collects the schedule it chose (--print-ir-after-all).
    Given its `assignment`, the entry must be at the nv_tileas level (`tileaa.passes.to_tileaa`, then
    `tileas.passes.to_tileas`); without one, it is brought there first."""
    if assignment is None:
        to_canonical(entry)
        to_tileaa(entry)
        assignment = to_tileas([entry], gpu)[0]
    # The loops' schedules, the warp roles and how the kernel stages its tiles (padded or not, room
    # reserved, loads deferred: tileas/shared_choice.py) were planned at the nv_tileas level: the
    # kernel is lowered once, under the assumptions of its shared-memory plan.
    shared = shared_plan_of(assignment)
    text, decls, info, kernel_notes = _lower_entry(entry, gpu, debug, assignment, order, plan_of(assignment).pipelines,
                                                   shared.assumes if shared is not None else Assumptions())
    if notes is not None:
        notes.extend(kernel_notes)
    return text, decls, info


def release_tensor_memory(k: KernelLowering) -> None:
    from .tmem import release

    release(k)


def _lower_entry(entry: Operation, gpu: str, debug: "DebugInfo | None", assignment: LayoutAssignment,
                 order: Optional[TokenOrder], plans: dict[Operation, PipelinePlan],
                 assumes: Assumptions) -> tuple[str, list[str], object, list[str]]:
    from ..codegen.metadata import KernelInfo, KernelParam

    name = str(entry.attributes["sym_name"])
    block = entry.regions[0].block
    threads = assignment.threads
    k = KernelLowering(entry, gpu, threads, debug, assignment, order or _token_order(entry))
    k.pad_buffers = assumes.padded
    k.pipelines = plans
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
    warp_specialize.begin(k)
    k.lower_block(block)
    if not k.b.lines or not k.b.lines[-1].strip().startswith(("ret", "br", "unreachable")):
        k.b.emit("ret void")
    release_tensor_memory(k)
    warp_specialize.end(k)
    threads += k.extra_threads   # the launch: a warp-specialized pipeline's producer warpgroup too
    if k.tma_params:   # TMA's hidden tensor maps, after the user's parameters
        from .tma_copy import signature

        params += signature(k)
    if k.kernel_maps:  # the workspace for the maps it makes itself, after those (kernel_maps.py)
        from .kernel_maps import signature as workspace

        params += workspace(k)
    # minctasm: ptxas then knows a thread's registers at entry (setmaxnreg is ignored otherwise); more
    # than one where a warp-specialized attention keeps the occupancy its hint asks for (warp_specialize.py)
    ctas_per_sm = k.warp_split.min_ctas if k.warp_split is not None and k.extra_threads else 1
    launch = f'"nvvm.reqntid"="{threads},1,1" "nvvm.minctasm"="{ctas_per_sm}"'
    text = "\n".join([f'define ptx_kernel void {_symbol(name)}({", ".join(params)}) {launch}{dbg_attachment} {{',
                      k.b.body(), "}"])
    text, smem_defs, dynamic = place(k, text, name)
    k.schedule_notes += [f"//   {line}" for line in
                         [*k.planned.finish(), k.planned.summary()]]
    defs = list(k.globals) + smem_defs
    ctas = entry.attributes.get(CLUSTER_ATTR, (1,))[0]   # each launched block a cluster of `ctas` CTAs
    info = KernelInfo(name=name, params=tuple(infos), block=(threads, 1, 1), dynamic_smem=dynamic, cluster=(1, 1, 1),
                      tma=tuple(k.tma_params), cta_cluster=(ctas, 1, 1), kernel_maps=len(k.kernel_maps))
    notes = [f"// @{name}: {threads} threads, {info.dynamic_smem} bytes of dynamic shared memory, "
             f"staged tiles {'padded' if assumes.padded else 'unpadded'}", *k.schedule_notes]
    return text, defs + sorted(k.b.declarations), info, notes


def _token_order(entry: Operation) -> TokenOrder:
    from .token_waits import thread_local

    return TokenOrder(entry, thread_local())


def _print_passes(module: Operation, entries: list[Operation], assignments: list[LayoutAssignment],
                  orders: list[TokenOrder]) -> None:
    """The module once lowered through nv_tileaa and nv_tileas (its text, conversions as ops), then per
    kernel the facts proved, its tile layouts, and the waits of its token-ordered ops."""
    from ..tileaa.dump import fact_lines
    from ..tileas.dump import layout_lines
    from ..text.printer import Printer

    printer = Printer()
    lines = ["// -----// IR Dump After infer-facts (nv_tileaa) //----- //", printer.print_module(module).rstrip("\n")]
    for entry in entries:
        lines.append(f"// facts of @{entry.attributes['sym_name']}:")
        lines += fact_lines(entry, printer.ref)
    printer = Printer(layouts=True)   # nv_tileas: each tile's layout on its type (the same value names)
    text = printer.print_module(module).rstrip("\n")
    lines += ["// -----// IR Dump After assign-layouts, materialize-layouts, fuse-conversions (nv_tileas) //----- //",
             text]
    for entry, assignment in zip(entries, assignments):
        lines.append(f"// layouts of @{entry.attributes['sym_name']}:")
        lines += layout_lines(entry, assignment, printer.ref)
    lines.append("// -----// IR Dump After plan-pipelines, plan-warp-roles (nv_tileas) //----- //")
    for entry, assignment in zip(entries, assignments):
        lines.append(f"// schedule of @{entry.attributes['sym_name']}:")
        lines += plan_lines(entry, assignment, printer.ref)
    lines.append("// -----// IR Dump After plan-shared-memory (nv_tileas) //----- //")
    for entry, assignment in zip(entries, assignments):
        lines.append(f"// shared-memory plan of @{entry.attributes['sym_name']}:")
        lines += shared_plan_lines(entry, assignment, printer.ref)
    lines += ["// -----// IR Dump After token-order //----- //", text]
    for entry, order in zip(entries, orders):
        lines.append(f"// token waits of @{entry.attributes['sym_name']}:")
        lines += order.describe(printer.ref)
    print("\n".join(lines), file=sys.stderr)


def _canonical_form(module: Operation, entries: list[Operation], stage: Any, dump: bool) -> None:
    """The canonical form's passes on cuda_tile, each timed and (first round) dumped, to a fixed point:
    every decision below sees one form of each kernel, whatever form it was written in. Each pass that
    changed the IR is followed by the verifier where the IR is dumped or TILEIRAS_VERIFY_EACH_PASS is set
    (the test suite, every kernel of it); a plain compile trusts the tested passes (the verifier costs
    more than all of them together)."""
    import os

    each = dump or bool(os.environ.get("TILEIRAS_VERIFY_EACH_PASS"))

    def apply(name: str, run: Any, round_: int) -> bool:
        with stage(name):
            changed = any([run(op) for op in entries])
            if changed and each:
                from ..dialects.verifier import verify_module

                verify_module(module)
        if dump and (round_ == 0 or changed):
            from ..text.printer import print_module

            print(f"// -----// IR Dump After {name} (cuda_tile) //----- //", file=sys.stderr)
            print(print_module(module), file=sys.stderr)
        return changed

    rounds(CANONICAL_PASSES, apply)


_PTX_FOLLOW = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


def _symbol(name: str) -> str:
    """The kernel's LLVM name: its TileIR name unchanged (the PTX entry, the launcher, the header and the
    metadata all use it), so it must be a PTX identifier: a letter then letters, digits, '_' and '$', or
    '_' or '$' then at least one of those. NVIDIA's tileiras refuses other names as well (exit 5)."""
    if not (_PTX_FOLLOW.issuperset(name) and name and (name[0].isalpha() or len(name) > 1 and name[0] in "_$")):
        shown = name if name.isprintable() else ascii(name)[1:-1]
        raise CompileError(f"error: kernel name '{shown}' is not a PTX identifier (a letter, then letters, "
                           f"digits, '_' and '$'; or '_' or '$' and at least one of those)")
    return f"@{name}"


def lower_module(module: Operation, gpu: str, opt_level: int = 3, lineinfo: bool = False, debug: bool = False,
                 print_ir_after_all: bool = False, timer: Any = None) -> tuple[str, object]:
    """The passes in order: assign-layouts, token-order, then LLVM IR emission; `timer` (the
    driver's StageTimer, for --time-passes) times each."""
    from contextlib import nullcontext

    from ..codegen.metadata import ModuleMetadata

    def stage(name: str) -> Any:
        return timer.stage(f"{name} ({gpu})") if timer is not None else nullcontext()

    debug_info = DebugInfo(full=debug) if (lineinfo or debug) else None
    warp_specialize.restart_loop_ids()
    module = module.clone()   # the nv_tileas level is per target: the caller's module stays cuda_tile
    functions, decls, kernels = [], [], []
    globals_ = []
    body = module.regions[0].block.operations if module.regions else []
    for op in body:
        if op.name == "cuda_tile.global":
            globals_.append(define_global(op))
    entries = [op for op in body if op.name == "cuda_tile.entry"]
    for op in entries:   # a name the PTX cannot hold fails before any work
        _symbol(str(op.attributes["sym_name"]))
    _canonical_form(module, entries, stage, print_ir_after_all)
    with stage("split-over-cluster"):
        for op in entries:
            split_entry_over_cluster(op, gpu)
    for name, run_aa in TILEAA_PASSES:
        with stage(name):
            for op in entries:
                run_aa(op)
    assignments = to_tileas(entries, gpu, stage)
    with stage("token-order"):
        orders = [_token_order(op) for op in entries]
    if print_ir_after_all:
        _print_passes(module, entries, assignments, orders)
    notes: list[str] = []
    with stage("lower to LLVM IR"):
        for op, assignment, order in zip(entries, assignments, orders):
            text, entry_decls, info = lower_entry(op, gpu, debug_info, assignment, order, notes)
            functions.append(text)
            decls.extend(entry_decls)
            kernels.append(info)
    if print_ir_after_all:
        print("// -----// IR Dump After schedule (pipelines, buffers, warps) //----- //", file=sys.stderr)
        print("\n".join(notes), file=sys.stderr)
    unique_decls = list(dict.fromkeys(decls))
    ir = "\n".join([
        f'target datalayout = "{DATALAYOUT}"',
        'target triple = "nvptx64-nvidia-cuda"',
        "",
        *globals_,
        *unique_decls,
        "",
        *functions,
        "",
        *(debug_info.module_lines() if debug_info is not None else []),
        "",
    ])
    if print_ir_after_all:
        print("// -----// IR Dump After lower-to-llvm //----- //", file=sys.stderr)
        print(ir, file=sys.stderr)
    return ir, ModuleMetadata(kernels=tuple(kernels), gpu=gpu)
