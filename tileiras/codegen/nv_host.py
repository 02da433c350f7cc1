"""The `.nv.host` object: x86-64 code the CUDA driver runs at launch to fill TMA descriptors.

A kernel that copies with TMA takes its tensor maps as hidden parameters after the user's
(`.hidden .param .align 64 .b8 NAME[128]`, `codegen/tma_params.py`). The launcher passes only
the user's arguments; ptxas embeds the relocatable object given with `--nv-host=FILE` as the
cubin's `.nv.host` section, and the driver links it, calls `__CUDA_TILEIR_ON_PRE_LOAD` when it
loads the module and, when a kernel's arguments change, that kernel's
`__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_<n>`, which writes the descriptors into the parameter
buffer from the user's values. This is the interface NVIDIA's tileiras uses; what follows is
what its objects hold (learned from them, tests/test_nv_host.py compares ours with them):

    __CUDA_TILEIR_CALLBACKS (global, .data.rel.ro, 9 x i64):
        2, 0, 0, 0, 64 (bytes per kernel entry), &__CUDA_TILEIR_FUNC_CALLBACKS, kernels, 2,
        &__CUDA_TILEIR_ON_PRE_LOAD
    __CUDA_TILEIR_FUNC_CALLBACKS (local, .data.rel.ro): one 64-byte entry per kernel, in module
        order: &__CUDA_TILEIR_FUNC_NAME_<n> (the kernel's name, NUL-terminated, .lrodata), 0, 0, 0,
        0, &__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_<n>, 0, 0
    __CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD (local, .lbss, 72 bytes): where ON_PRE_LOAD copies the table
    i32 __CUDA_TILEIR_ON_PRE_LOAD(ptr api, ptr handle, i32 mode, ptr *out) (global): mode 0 returns
        1; mode < 2 first calls the driver's function at api + 0x30 as f(handle, 16, &scratch)
        and ignores what it gives; then the table is copied to ON_PRE_LOAD with slot 2 zeroed, its
        address stored to *out, and 0 returned
    i32 __CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_<n>(ptr, ptr launch, ptr, ptr params) (local): `params` is
        the kernel's parameter buffer; a parameter at constant-bank offset `o` is at params +
        o - base, base being where the target's constant bank puts parameters as far as their
        alignment goes (`PARAM_BASE`). Reads the user's values, writes the first 64 bytes of each
        hidden parameter (`codegen/tensormap.py`'s layout; the other 64 are left alone), returns 0.

A kernel that makes tensor maps itself (lowering/kernel_maps.py: a grouped GEMM's arrays, read from
a list) needs global memory to put them in. Newer drivers give each CTA its own (`%perctamemoryoffset`,
as much as the kernel's `.minperctamemory` asks); older ones a workspace whose address the kernel
takes as one more hidden parameter (`.hidden .param .u64`, after the tensor maps), written by its
callback from the driver's second argument (`launch + 8`). Its size is slot 2 of the table the driver
is handed: ON_PRE_LOAD in mode 1 sets it to the SM count (the driver's attribute 16, which it queries)
times the largest workspace a kernel of the module takes per SM; in mode 2 to 0 (per-CTA memory
instead); the static table holds it for `STATIC_SMS` SMs. As NVIDIA's objects do.

Compiled with our LLVM for x86-64 Linux, PIC, large code model, as NVIDIA's is, so the relocation
types are the ones the driver's linker handles for NVIDIA's objects (R_X86_64_64, GOTPC64, GOT64,
GOTOFF64, PC64 in .eh_frame).

    obj = host_object([("mm", ["u64", "u32", ...], [TmaParam(...), ...])], sm=90)
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence, Union

from tileiras.errors import CompileError
from tileiras.ir.record import record
from tileiras.target import ROWS, caps
from .llvm_string import c_string
from tileiras.codegen import tensormap
from tileiras.codegen.tma_params import Field, TmaParam
from tileiras.codegen.tensormap_ir import M64, I64, Value, words

TRIPLE = "x86_64-unknown-linux-gnu"
ENTRY_BYTES = 64
HIDDEN_ALIGN = 64
HIDDEN_BYTES = tensormap.SIZE
API_QUERY_SLOT = 0x30 // 8          # the driver function ON_PRE_LOAD calls in mode 1
TABLE_SLOTS = 9                     # __CUDA_TILEIR_CALLBACKS, i64 each
CLEARED_SLOT = 2                    # the slot ON_PRE_LOAD zeroes in its copy: the workspace's bytes
STATIC_SMS = 224                    # SMs the static table's workspace size is for (NVIDIA's value)
WORKSPACE_SLOT = 8                  # the workspace's address: at launch + 8 (the callback's 2nd argument)


def param_base(sm: int) -> int:
    """Constant-bank offset of a kernel's first parameter, modulo the 64-byte alignment of hidden
    parameters (`Caps.param_base`): 0x210 on sm_90; sm_100 and later start at 0x380, which is 64-aligned."""
    base = caps(sm).param_base
    if base < 0:
        first = next(row.name for row in ROWS if row.param_base >= 0)
        raise CompileError(f"error: TMA descriptors need {first} or later, not sm_{sm}")
    return base


_SLOT = re.compile(r"(?:\.?align\s+(\d+)\s+)?\.?([busf])(8|16|32|64)(?:\[(\d+)\])?")


@record
class Slot:
    size: int
    align: int
    scalar: bool


def slot(ptx_type: str) -> Slot:
    """Size and alignment of a parameter of PTX type `ptx_type` ("u64", "f32", "align 8 b8[16]")."""
    m = _SLOT.fullmatch(ptx_type.strip())
    if m is None:
        raise CompileError(f"error: unknown kernel parameter type '{ptx_type}'")
    width = int(m.group(3)) // 8
    count = int(m.group(4)) if m.group(4) else 1
    return Slot(width * count, int(m.group(1)) if m.group(1) else width, m.group(4) is None)


def param_offsets(params: Sequence[str], hidden: int, sm: int, workspace: bool = False) -> tuple[list[int], list[int]]:
    """Offsets in the parameter buffer of the user's parameters and of `hidden` tensor maps after them
    (and with `workspace`, the workspace's address after those, as the last of the maps' list)."""
    base = param_base(sm)
    at, user, maps = base, [], []
    for t in params:
        s = slot(t)
        at = -(-at // s.align) * s.align
        user.append(at - base)
        at += s.size
    for _ in range(hidden):
        at = -(-at // HIDDEN_ALIGN) * HIDDEN_ALIGN
        maps.append(at - base)
        at += HIDDEN_BYTES
    if workspace:
        maps.append(-(-at // 8) * 8 - base)
    return user, maps


@record
class HostKernel:
    """One kernel of the module: its name, the PTX types of its user parameters, its hidden ones."""

    name: str
    params: tuple[str, ...]
    hidden: tuple[TmaParam, ...] = ()
    workspace: int = 0      # bytes per SM of the workspace for the maps it makes itself (0: none)


KernelSpec = Union[HostKernel, tuple]   # or (name, params, hidden)

class _Callback(I64):
    """The body of one ON_ARGUMENTS_CHANGE: i64 arithmetic, constants folded."""

    def __init__(self, kernel: HostKernel, sm: int) -> None:
        self.kernel = kernel
        self.offsets, self.maps = param_offsets(kernel.params, len(kernel.hidden), sm, kernel.workspace > 0)
        self.lines: list[str] = []
        self.loaded: dict[int, str] = {}
        self.n = 0
        super().__init__(self._name, self.lines.append)

    def _name(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def param(self, index: int, what: str) -> Value:
        """User parameter `index` as an i64 (integers narrower than 64 bits zero-extended)."""
        params = self.kernel.params
        if not 0 <= index < len(params):
            raise CompileError(f"error: kernel '{self.kernel.name}': the {what} of a tensor map names parameter "
                               f"{index}, but the kernel has {len(params)}")
        s = slot(params[index])
        if not s.scalar or s.size not in (2, 4, 8) or params[index].lstrip(".").startswith("f"):
            raise CompileError(f"error: kernel '{self.kernel.name}': the {what} of a tensor map is parameter "
                               f"{index} of type '{params[index]}', not an integer")
        if index not in self.loaded:
            ptr, raw = self._name(), self._name()
            self.lines += [f"{ptr} = getelementptr i8, ptr %params, i64 {self.offsets[index]}",
                           f"{raw} = load i{8 * s.size}, ptr {ptr}, align 1"]
            if s.size == 8:
                self.loaded[index] = raw
            else:
                wide = self._name()
                self.lines.append(f"{wide} = zext i{8 * s.size} {raw} to i64")
                self.loaded[index] = wide
        return self.loaded[index]

    def field(self, f: Field, what: str) -> Value:
        return self.param(f.param, what) if f.param >= 0 else f.const & M64

    def descriptor(self, spec: TmaParam, offset: int) -> None:
        """Store the 64 bytes `tensormap.encode` makes for `spec` at `offset`."""
        address = self.param(spec.address, "address")
        dims = [self.field(f, "global dim") for f in spec.dims]
        strides = [self.field(f, "global stride") for f in spec.strides]
        for i, word in enumerate(words(self, spec, address, dims, strides, self.kernel.name)):
            ptr = self._name()
            self.lines += [f"{ptr} = getelementptr i8, ptr %params, i64 {offset + 8 * i}",
                           f"store i64 {self.lit(word)}, ptr {ptr}, align 1"]

    def ir(self, index: int) -> str:
        for spec, offset in zip(self.kernel.hidden, self.maps):
            self.descriptor(spec, offset)
        if self.kernel.workspace:   # the workspace's address, from the driver's second argument
            at, ptr, value = self._name(), self._name(), self._name()
            self.lines += [f"{at} = getelementptr i8, ptr %1, i64 {WORKSPACE_SLOT}",
                           f"{value} = load i64, ptr {at}, align 8",
                           f"{ptr} = getelementptr i8, ptr %params, i64 {self.maps[-1]}",
                           f"store i64 {value}, ptr {ptr}, align 1"]
        body = "\n".join("  " + line for line in self.lines)
        return (f"define internal i32 @__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_{index}"
                f"(ptr %0, ptr %1, ptr %2, ptr %params) uwtable {{\n{body}\n  ret i32 0\n}}\n")


_PRE_LOAD = """\
define i32 @__CUDA_TILEIR_ON_PRE_LOAD(ptr %api, ptr %handle, i32 %mode, ptr %out) uwtable {
entry:
  %scratch = alloca i32, align 4
  %none = icmp eq i32 %mode, 0
  br i1 %none, label %refuse, label %known
refuse:
  ret i32 1
known:
  %old = icmp slt i32 %mode, 2
  br i1 %old, label %query, label %copy
query:
  %slot = getelementptr ptr, ptr %api, i64 @QUERY@
  %fn = load ptr, ptr %slot, align 8
  %ignored = call i32 %fn(ptr %handle, i32 16, ptr %scratch)
  %sms = load i32, ptr %scratch, align 4
  %sms64 = sext i32 %sms to i64
  %queried = mul i64 %sms64, @PER_SM@
  br label %copy
copy:
  %workspace = phi i64 [ %queried, %query ], [ 0, %known ]
@COPY@
  store ptr @__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD, ptr %out, align 8
  ret i32 0
}
"""


def _normalize(kernel: KernelSpec) -> HostKernel:
    if isinstance(kernel, HostKernel):
        return kernel
    name, params, hidden = kernel
    return HostKernel(str(name), tuple(params), tuple(hidden))


def host_ir(kernels: Sequence[KernelSpec], sm: int) -> str:
    """The LLVM IR of the `.nv.host` object for a module's kernels (in the module's order)."""
    ks = [_normalize(k) for k in kernels]
    if not ks:
        raise CompileError("error: an .nv.host object needs at least one kernel")
    param_base(sm)
    parts = ['source_filename = "LLVMDialectModule"', f'target triple = "{TRIPLE}"', ""]
    for i, k in enumerate(ks):
        data = k.name.encode("utf-8")
        parts.append(f'@__CUDA_TILEIR_FUNC_NAME_{i} = internal constant [{len(data) + 1} x i8] c"{c_string(data)}\\00"')
    entries = ", ".join(f"[8 x ptr] [ptr @__CUDA_TILEIR_FUNC_NAME_{i}, ptr null, ptr null, ptr null, ptr null, "
                        f"ptr @__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_{i}, ptr null, ptr null]" for i in range(len(ks)))
    parts.append(f"@__CUDA_TILEIR_FUNC_CALLBACKS = internal constant [{len(ks)} x [8 x ptr]] [{entries}], "
                 'section ".data.rel.ro", align 16')
    # 2, 0, 0, 0, bytes per kernel entry, the entries, how many, 2, ON_PRE_LOAD (values as NVIDIA's)
    per_sm = max(k.workspace for k in ks)
    slots = ["i64 2", "i64 0", f"i64 {STATIC_SMS * per_sm}", "i64 0", f"i64 {ENTRY_BYTES}", "ptr @__CUDA_TILEIR_FUNC_CALLBACKS",
             f"i64 {len(ks)}", "i64 2", "ptr @__CUDA_TILEIR_ON_PRE_LOAD"]
    assert len(slots) == TABLE_SLOTS
    types = ", ".join(value.split()[0] for value in slots)
    parts.append(f"@__CUDA_TILEIR_CALLBACKS = constant {{ {types} }} {{ {', '.join(slots)} }}, "
                 'section ".data.rel.ro", align 16')
    parts.append(f"@__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD = internal global [{TABLE_SLOTS} x i64] zeroinitializer, "
                 "align 16")
    parts.append("")
    copy = []
    for i in range(TABLE_SLOTS):
        src, dst, v = f"%src{i}", f"%dst{i}", f"%word{i}"
        copy.append(f"  {src} = getelementptr i64, ptr @__CUDA_TILEIR_CALLBACKS, i64 {i}")
        copy.append(f"  {dst} = getelementptr i64, ptr @__CUDA_TILEIR_CALLBACKS_ON_PRE_LOAD, i64 {i}")
        if i == CLEARED_SLOT:
            copy.append(f"  store i64 %workspace, ptr {dst}, align 8")
        else:
            copy += [f"  {v} = load volatile i64, ptr {src}, align 8", f"  store i64 {v}, ptr {dst}, align 8"]
    parts.append(_PRE_LOAD.replace("@QUERY@", str(API_QUERY_SLOT)).replace("@PER_SM@", str(per_sm))
                 .replace("@COPY@", "\n".join(copy)))
    for i, k in enumerate(ks):
        parts.append(_Callback(k, sm).ir(i))
    return "\n".join(parts)


_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)", re.S)
_TYPE = re.compile(r"\.[busf](8|16|32|64)")


def ptx_params(ptx: str) -> dict[str, list[str]]:
    """Kernel name -> the PTX types of its parameters ("u64", "u32", "align 64 b8[128]"), in order."""
    kernels: dict[str, list[str]] = {}
    for name, body in _ENTRY.findall(ptx):
        types = []
        for decl in (d.strip() for d in body.split(",")):
            if not decl:
                continue
            words = decl.split()
            kind = next((w for w in words if _TYPE.fullmatch(w)), None)
            if kind is None:
                raise CompileError(f"error: kernel '{name}': cannot read the type of parameter '{decl}'")
            array = re.search(r"\[(\d+)\]$", words[-1])
            # `.align` before the type aligns the parameter; after `.ptr` it describes the pointee
            at = words.index(".align") if ".align" in words else len(words)
            align = words[at + 1] if at < words.index(kind) else ""
            text = kind[1:] + (f"[{array.group(1)}]" if array else "")
            types.append(f"align {align} {text}" if align else text)
        kernels[name] = types
    return kernels


def for_ptx(ptx: str, hidden: dict[str, Sequence[TmaParam]], sm: int, worker: Any = None,
            workspace: Optional[dict[str, int]] = None) -> bytes | None:
    """The `.nv.host` object for a module's PTX, or None when no kernel has hidden parameters.
    `hidden`: kernel name -> its tensor maps, which are the kernel's last parameters in the PTX
    (each `.align 64 .b8 [128]`, in this order) but for the workspace's address (a u64 after them)
    where `workspace` gives the kernel's bytes per SM; the parameters before them are the user's.
    `worker`: an open codegen.worker.LLVMWorker to compile the object in, if any."""
    workspace = {name: n for name, n in (workspace or {}).items() if n}
    if not any(hidden.values()) and not workspace:
        return None
    kernels = []
    entries = ptx_params(ptx)
    unknown = sorted((set(hidden) | set(workspace)) - set(entries))
    if unknown:
        raise CompileError(f"error: tensor maps given for '{unknown[0]}', which the PTX does not define")
    for name, types in entries.items():
        maps = tuple(hidden.get(name, ()))
        ws = workspace.get(name, 0)
        if ws:
            if not types or slot(types[-1]).size != 8 or not slot(types[-1]).scalar:
                raise CompileError(f"error: kernel '{name}': its last parameter is not the u64 workspace address "
                                   "its metadata names")
            types = types[:-1]
        user, tail = types[:len(types) - len(maps)], types[len(types) - len(maps):]
        if any(slot(t).size != HIDDEN_BYTES or slot(t).align < HIDDEN_ALIGN for t in tail):
            raise CompileError(f"error: kernel '{name}': its last {len(maps)} parameters are not the "
                               f".align {HIDDEN_ALIGN} .b8 [{HIDDEN_BYTES}] tensor maps its metadata names")
        kernels.append(HostKernel(name, tuple(user), maps, ws))
    return host_object(kernels, sm, worker)


def host_object(kernels: Sequence[KernelSpec], sm: int, worker: Any = None) -> bytes:
    """The x86-64 ELF relocatable object ptxas embeds as `.nv.host` (`ptxas --nv-host=FILE`),
    compiled in `worker` (an open LLVMWorker) when given, else in a forked child."""
    ir = host_ir(kernels, sm)
    if worker is not None:
        return worker.host_object(ir)
    from . import llvm_capi
    from .isolate import run_isolated

    llvm_capi.load()  # in the parent, so a forked child starts with LLVM loaded
    return run_isolated(".nv.host code generation", lambda: compile_host_ir(ir))


def compile_host_ir(ir: str) -> bytes:
    """host_ir's text -> the object: x86-64, PIC, large code model, as NVIDIA's is."""
    from . import llvm_capi

    try:
        return llvm_capi.compile_ir(ir, TRIPLE, "x86-64", "", 2, object_file=True, reloc="pic",
                                    code_model="large")
    except CompileError as exc:  # a bug in this module, not in the user's input
        raise CompileError("error: internal error building the .nv.host object: "
                           + exc.message.removeprefix("error: ")) from None
