"""The host relocatable object: the fatbin plus one C-ABI launcher per kernel.

Written as LLVM IR for the host and compiled by llvmlite's x86_64/AArch64
backends into ELF (Linux) or COFF (Windows): no C compiler is involved.

What the object contains (all internal except the launchers):
  * the fatbin, in section `.nv_fatbin`, 8-byte aligned;
  * the driver entry points, looked up on first use with dlopen/dlsym
    (LoadLibraryA/GetProcAddress on Windows), so nothing CUDA is linked;
  * a table of up to 64 contexts, each with its loaded module, the CUfunction of
    every kernel and the index of the launch configuration for its GPU; a mutex
    (pthread mutex / SRW lock) guards initialisation and the table;
  * a constant table of launch configurations, one row per compiled target,
    chosen at module load from the device's compute capability the way the
    driver picks a cubin: exact `a` match, same-family `f`, else the newest
    plain target not newer than the device.
"""

from __future__ import annotations

from typing import Sequence

from tileiras.errors import CompileError, ExitCode, TileirasError
from tileiras.ir.record import record
from .llvm_string import c_string

from . import cabi
from .metadata import ModuleMetadata, sm_number


@record
class HostPlatform:
    triple: str
    os: str


HOSTS: dict[tuple[str, str], HostPlatform] = {
    ("x86_64", "linux"): HostPlatform("x86_64-unknown-linux-gnu", "linux"),
    ("aarch64", "linux"): HostPlatform("aarch64-unknown-linux-gnu", "linux"),
    ("x86_64", "windows"): HostPlatform("x86_64-pc-windows-msvc", "windows"),
    ("aarch64", "windows"): HostPlatform("aarch64-pc-windows-msvc", "windows"),
}

# CUDA driver entry points: (name, required, LLVM function type).
DRIVER_API: tuple[tuple[str, bool, str], ...] = (
    ("cuInit", True, "i32 (i32)"),
    ("cuCtxGetCurrent", True, "i32 (ptr)"),
    ("cuCtxSetCurrent", True, "i32 (ptr)"),
    ("cuDeviceGet", True, "i32 (ptr, i32)"),
    ("cuDevicePrimaryCtxRetain", True, "i32 (ptr, i32)"),
    ("cuCtxGetDevice", True, "i32 (ptr)"),
    ("cuDeviceGetAttribute", True, "i32 (ptr, i32, i32)"),
    ("cuModuleLoadData", True, "i32 (ptr, ptr)"),
    ("cuModuleGetFunction", True, "i32 (ptr, ptr, ptr)"),
    ("cuFuncSetAttribute", True, "i32 (ptr, i32, i32)"),
    ("cuLaunchKernel", True, "i32 (ptr, i32, i32, i32, i32, i32, i32, i32, ptr, ptr, ptr)"),
    ("cuLaunchKernelEx", False, "i32 (ptr, ptr, ptr, ptr)"),   # CUDA 12.0+: cluster launches
    ("cuCtxGetId", False, "i32 (ptr, ptr)"),                   # CUDA 12.0+: context identity
)
API = {name: index for index, (name, _, _) in enumerate(DRIVER_API)}
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_NOT_SUPPORTED = 801
ATTR_CC_MAJOR, ATTR_CC_MINOR = 75, 76
FUNC_ATTR_MAX_DYNAMIC_SHARED = 8
LAUNCH_ATTR_CLUSTER_DIMENSION = 4
DRIVER_LIBRARY = {"linux": "libcuda.so.1", "windows": "nvcuda.dll"}
RTLD_NOW = 2

_OS_RUNTIME = {
    "linux": """\
@tileir.lock = internal global [64 x i8] zeroinitializer, align 16
declare ptr @dlopen(ptr, i32)
declare ptr @dlsym(ptr, ptr)
declare i32 @pthread_mutex_lock(ptr)
declare i32 @pthread_mutex_unlock(ptr)

define internal ptr @tileir.open_driver() {
  %h = call ptr @dlopen(ptr @tileir.libname, i32 @RTLD_NOW@)
  ret ptr %h
}

define internal ptr @tileir.symbol(ptr %h, ptr %name) {
  %p = call ptr @dlsym(ptr %h, ptr %name)
  ret ptr %p
}

define internal void @tileir.lock_acquire() {
  %r = call i32 @pthread_mutex_lock(ptr @tileir.lock)
  ret void
}

define internal void @tileir.lock_release() {
  %r = call i32 @pthread_mutex_unlock(ptr @tileir.lock)
  ret void
}
""",
    "windows": """\
@tileir.lock = internal global ptr null, align 8
declare dllimport ptr @LoadLibraryA(ptr)
declare dllimport ptr @GetProcAddress(ptr, ptr)
declare dllimport void @AcquireSRWLockExclusive(ptr)
declare dllimport void @ReleaseSRWLockExclusive(ptr)

define internal ptr @tileir.open_driver() {
  %h = call ptr @LoadLibraryA(ptr @tileir.libname)
  ret ptr %h
}

define internal ptr @tileir.symbol(ptr %h, ptr %name) {
  %p = call ptr @GetProcAddress(ptr %h, ptr %name)
  ret ptr %p
}

define internal void @tileir.lock_acquire() {
  call void @AcquireSRWLockExclusive(ptr @tileir.lock)
  ret void
}

define internal void @tileir.lock_release() {
  call void @ReleaseSRWLockExclusive(ptr @tileir.lock)
  ret void
}
""",
}


class _Body:
    """A function body under construction: fresh value and label names, error checks."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def emit(self, line: str) -> None:
        self.lines.append(line if line.endswith(":") else "  " + line)

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")

    def call_api(self, name: str, args: str) -> str:
        """Call a driver entry point; returns the i32 result's name."""
        slot, fn, rc = self.fresh("%api.slot"), self.fresh("%api.fn"), self.fresh("%rc")
        index = API[name]
        self.emit(f"{slot} = getelementptr inbounds [{len(DRIVER_API)} x ptr], ptr @tileir.api, i64 0, i64 {index}")
        self.emit(f"{fn} = load ptr, ptr {slot}, align 8")
        self.emit(f"{rc} = call i32 {fn}({args})")
        return rc

    def check(self, rc: str) -> str:
        """Return `rc` from the function unless it is 0; returns the label of the block that goes on."""
        bad, fail, ok = self.fresh("%bad"), self.fresh("fail"), self.fresh("ok")
        self.emit(f"{bad} = icmp ne i32 {rc}, 0")
        self.emit(f"br i1 {bad}, label %{fail}, label %{ok}")
        self.label(fail)
        self.emit(f"ret i32 {rc}")
        self.label(ok)
        return ok

    def checked_api(self, name: str, args: str) -> None:
        self.check(self.call_api(name, args))


def _selection(body: _Body, cc: str, gpus: Sequence[str]) -> str:
    """The index of the launch configuration for a device of compute capability `cc`.

    Rows are sorted by SM; later matching rows win, so the newest usable one is picked.
    """
    current = "0"
    for index, gpu in enumerate(gpus):
        sm = sm_number(gpu)
        suffix = gpu[len(f"sm_{sm}"):]
        if suffix == "a":
            cond = body.fresh("%sel.ok")
            body.emit(f"{cond} = icmp eq i32 {cc}, {sm}")
        else:
            cond = body.fresh("%sel.ok")
            body.emit(f"{cond} = icmp uge i32 {cc}, {sm}")
            if suffix == "f":
                family, same = body.fresh("%sel.fam"), body.fresh("%sel.same")
                body.emit(f"{family} = udiv i32 {cc}, 10")
                body.emit(f"{same} = icmp eq i32 {family}, {sm // 10}")
                both = body.fresh("%sel.ok")
                body.emit(f"{both} = and i1 {cond}, {same}")
                cond = both
        chosen = body.fresh("%sel")
        body.emit(f"{chosen} = select i1 {cond}, i32 {index}, i32 {current}")
        current = chosen
    return current


def _acquire(kernels: Sequence[cabi.LaunchFacts], gpus: Sequence[str]) -> str:
    """@tileir.acquire_locked(ptr %out): the slot of the current context, loading on first use."""
    nk = max(1, len(kernels))
    body = _Body()
    emit = body.emit
    emit("%ctx.addr = alloca ptr, align 8")
    emit("%dev.addr = alloca i32, align 4")
    emit("%id.addr = alloca i64, align 8")
    emit("%mod.addr = alloca ptr, align 8")
    emit("%fn.addr = alloca ptr, align 8")
    emit("%major.addr = alloca i32, align 4")
    emit("%minor.addr = alloca i32, align 4")
    emit("%inited = load i8, ptr @tileir.inited, align 1")
    emit("%first = icmp eq i8 %inited, 0")
    emit("br i1 %first, label %init, label %init.done")
    body.label("init")
    emit("%init.rc = call i32 @tileir.init()")
    emit("store i32 %init.rc, ptr @tileir.init_rc, align 4")
    emit("store i8 1, ptr @tileir.inited, align 1")
    emit("br label %init.done")
    body.label("init.done")
    emit("%saved.rc = load i32, ptr @tileir.init_rc, align 4")
    body.check("%saved.rc")
    emit("store ptr null, ptr %ctx.addr, align 8")
    body.checked_api("cuCtxGetCurrent", "ptr %ctx.addr")
    emit("%ctx0 = load ptr, ptr %ctx.addr, align 8")
    emit("%noctx = icmp eq ptr %ctx0, null")
    emit("br i1 %noctx, label %retain, label %have.ctx")
    body.label("retain")
    body.checked_api("cuDeviceGet", "ptr %dev.addr, i32 0")
    emit("%dev0 = load i32, ptr %dev.addr, align 4")
    body.checked_api("cuDevicePrimaryCtxRetain", "ptr %ctx.addr, i32 %dev0")
    emit("%ctx1 = load ptr, ptr %ctx.addr, align 8")
    body.checked_api("cuCtxSetCurrent", "ptr %ctx1")
    emit("br label %have.ctx")
    body.label("have.ctx")
    emit("%ctx = load ptr, ptr %ctx.addr, align 8")
    emit(f"%getid.slot = getelementptr inbounds [{len(DRIVER_API)} x ptr], ptr @tileir.api, i64 0, i64 {API['cuCtxGetId']}")
    emit("%getid = load ptr, ptr %getid.slot, align 8")
    emit("%hasid = icmp ne ptr %getid, null")
    emit("br i1 %hasid, label %by.id, label %by.ptr")
    body.label("by.id")
    emit("%id.rc = call i32 %getid(ptr %ctx, ptr %id.addr)")
    id_pred = body.check("%id.rc")
    emit("%id = load i64, ptr %id.addr, align 8")
    emit("br label %keyed")
    body.label("by.ptr")
    emit("%ptrkey = ptrtoint ptr %ctx to i64")
    emit("br label %keyed")
    body.label("keyed")
    emit(f"%key = phi i64 [ %id, %{id_pred} ], [ %ptrkey, %by.ptr ]")
    emit("%n = load i32, ptr @tileir.nslots, align 4")
    emit("br label %scan")
    body.label("scan")
    emit("%i = phi i32 [ 0, %keyed ], [ %i.next, %scan.next ]")
    emit("%scan.end = icmp uge i32 %i, %n")
    emit("br i1 %scan.end, label %miss, label %scan.body")
    body.label("scan.body")
    emit(f"%slot.i = getelementptr inbounds [{cabi.MAX_CONTEXTS} x %tileir.slot], ptr @tileir.slots, i64 0, i32 %i")
    emit("%slot.key = load i64, ptr %slot.i, align 8")
    emit("%hit = icmp eq i64 %slot.key, %key")
    emit("br i1 %hit, label %found, label %scan.next")
    body.label("scan.next")
    emit("%i.next = add i32 %i, 1")
    emit("br label %scan")
    body.label("found")
    emit("store ptr %slot.i, ptr %out, align 8")
    emit("ret i32 0")
    body.label("miss")
    emit(f"%full = icmp uge i32 %n, {cabi.MAX_CONTEXTS}")
    emit("br i1 %full, label %table.full, label %load")
    body.label("table.full")
    emit(f"ret i32 {cabi.ERROR_TOO_MANY_CONTEXTS}")
    body.label("load")
    body.checked_api("cuModuleLoadData", "ptr %mod.addr, ptr @tileir.fatbin")
    emit("%mod = load ptr, ptr %mod.addr, align 8")
    body.checked_api("cuCtxGetDevice", "ptr %dev.addr")
    emit("%dev = load i32, ptr %dev.addr, align 4")
    body.checked_api("cuDeviceGetAttribute", f"ptr %major.addr, i32 {ATTR_CC_MAJOR}, i32 %dev")
    body.checked_api("cuDeviceGetAttribute", f"ptr %minor.addr, i32 {ATTR_CC_MINOR}, i32 %dev")
    emit("%major = load i32, ptr %major.addr, align 4")
    emit("%minor = load i32, ptr %minor.addr, align 4")
    emit("%major10 = mul i32 %major, 10")
    emit("%cc = add i32 %major10, %minor")
    selected = _selection(body, "%cc", gpus)
    emit(f"%slot = getelementptr inbounds [{cabi.MAX_CONTEXTS} x %tileir.slot], ptr @tileir.slots, i64 0, i32 %n")
    for k in range(len(kernels)):
        body.checked_api("cuModuleGetFunction", f"ptr %fn.addr, ptr %mod, ptr @tileir.name.{k}")
        fn, fslot = body.fresh("%fn"), body.fresh("%fslot")
        emit(f"{fn} = load ptr, ptr %fn.addr, align 8")
        emit(f"{fslot} = getelementptr inbounds %tileir.slot, ptr %slot, i32 0, i32 3, i32 {k}")
        emit(f"store ptr {fn}, ptr {fslot}, align 8")
        smem_p, smem, big = body.fresh("%smem.p"), body.fresh("%smem"), body.fresh("%smem.any")
        emit(f"{smem_p} = getelementptr inbounds [{len(gpus)} x [{nk} x [7 x i32]]], ptr @tileir.config, "
             f"i32 0, i32 {selected}, i32 {k}, i32 3")
        emit(f"{smem} = load i32, ptr {smem_p}, align 4")
        emit(f"{big} = icmp ne i32 {smem}, 0")
        set_label, next_label = body.fresh("set.smem"), body.fresh("smem.done")
        emit(f"br i1 {big}, label %{set_label}, label %{next_label}")
        body.label(set_label)
        body.checked_api("cuFuncSetAttribute", f"ptr {fn}, i32 {FUNC_ATTR_MAX_DYNAMIC_SHARED}, i32 {smem}")
        emit(f"br label %{next_label}")
        body.label(next_label)
    emit("%slot.mod = getelementptr inbounds %tileir.slot, ptr %slot, i32 0, i32 1")
    emit("store ptr %mod, ptr %slot.mod, align 8")
    emit("%slot.sel = getelementptr inbounds %tileir.slot, ptr %slot, i32 0, i32 2")
    emit(f"store i32 {selected}, ptr %slot.sel, align 4")
    emit("store i64 %key, ptr %slot, align 8")
    emit("%n.next = add i32 %n, 1")
    emit("store i32 %n.next, ptr @tileir.nslots, align 4")
    emit("store ptr %slot, ptr %out, align 8")
    emit("ret i32 0")
    return "define internal i32 @tileir.acquire_locked(ptr %out) {\nentry:\n" + "\n".join(body.lines) + "\n}\n"


def _init() -> str:
    """@tileir.init(): load the driver, resolve the entry points, cuInit."""
    body = _Body()
    emit = body.emit
    emit("%h = call ptr @tileir.open_driver()")
    emit("%noh = icmp eq ptr %h, null")
    emit("br i1 %noh, label %no.driver, label %resolve")
    body.label("no.driver")
    emit(f"ret i32 {cabi.ERROR_NO_DRIVER}")
    body.label("resolve")
    for index, (name, required, _) in enumerate(DRIVER_API):
        p, slot = body.fresh("%sym"), body.fresh("%slot")
        emit(f"{p} = call ptr @tileir.symbol(ptr %h, ptr @tileir.sym.{index})")
        emit(f"{slot} = getelementptr inbounds [{len(DRIVER_API)} x ptr], ptr @tileir.api, i64 0, i64 {index}")
        emit(f"store ptr {p}, ptr {slot}, align 8")
        if required:
            missing, next_label = body.fresh("%missing"), body.fresh("have")
            emit(f"{missing} = icmp eq ptr {p}, null")
            emit(f"br i1 {missing}, label %no.driver, label %{next_label}")
            body.label(next_label)
    rc = body.call_api("cuInit", "i32 0")
    emit(f"%nodev = icmp eq i32 {rc}, {CUDA_ERROR_NO_DEVICE}")
    emit(f"%result = select i1 %nodev, i32 {cabi.ERROR_NO_DEVICE}, i32 {rc}")
    emit("ret i32 %result")
    return "define internal i32 @tileir.init() {\nentry:\n" + "\n".join(body.lines) + "\n}\n"


def _launcher(index: int, facts: cabi.LaunchFacts, ngpus: int, nk: int) -> str:
    body = _Body()
    emit = body.emit
    args = [f"{cabi.llvm_type(p.type)} %p{i}" for i, p in enumerate(facts.params)]
    signature = ", ".join(["ptr %stream", "i32 %gx", "i32 %gy", "i32 %gz", *args])
    nparams = max(1, len(facts.params))
    emit("%slot.addr = alloca ptr, align 8")
    emit(f"%params = alloca [{nparams} x ptr], align 8")
    if facts.uses_clusters:
        # CUlaunchConfig (56 bytes) and one CUlaunchAttribute (72 bytes), laid out as in cuda.h.
        emit("%cfg = alloca %tileir.launch_config, align 8")
        emit("%attr = alloca %tileir.launch_attribute, align 8")
    for i, p in enumerate(facts.params):
        ty = cabi.llvm_type(p.type)
        emit(f"%a{i} = alloca {ty}, align 8")
        emit(f"store {ty} %p{i}, ptr %a{i}, align 8")
        emit(f"%pp{i} = getelementptr inbounds [{nparams} x ptr], ptr %params, i64 0, i64 {i}")
        emit(f"store ptr %a{i}, ptr %pp{i}, align 8")
    emit("call void @tileir.lock_acquire()")
    emit("%rc = call i32 @tileir.acquire_locked(ptr %slot.addr)")
    emit("call void @tileir.lock_release()")
    body.check("%rc")
    emit("%slot = load ptr, ptr %slot.addr, align 8")
    emit(f"%fslot = getelementptr inbounds %tileir.slot, ptr %slot, i32 0, i32 3, i32 {index}")
    emit("%f = load ptr, ptr %fslot, align 8")
    emit("%sel.p = getelementptr inbounds %tileir.slot, ptr %slot, i32 0, i32 2")
    emit("%sel = load i32, ptr %sel.p, align 4")
    for j, field in enumerate(("bx", "by", "bz", "smem", "cx", "cy", "cz")):
        emit(f"%{field}.p = getelementptr inbounds [{ngpus} x [{nk} x [7 x i32]]], ptr @tileir.config, "
             f"i32 0, i32 %sel, i32 {index}, i32 {j}")
        emit(f"%{field} = load i32, ptr %{field}.p, align 4")
    launch_args = "ptr %f, i32 %gx, i32 %gy, i32 %gz, i32 %bx, i32 %by, i32 %bz, i32 %smem, ptr %stream, ptr %params, ptr null"
    if facts.uses_clusters:
        emit("%cxy = mul i32 %cx, %cy")
        emit("%cxyz = mul i32 %cxy, %cz")
        emit("%cluster = icmp ne i32 %cxyz, 1")
        emit("br i1 %cluster, label %launch.ex, label %launch")
        body.label("launch.ex")
        emit(f"%ex.slot = getelementptr inbounds [{len(DRIVER_API)} x ptr], ptr @tileir.api, i64 0, i64 {API['cuLaunchKernelEx']}")
        emit("%ex = load ptr, ptr %ex.slot, align 8")
        emit("%noex = icmp eq ptr %ex, null")
        emit("br i1 %noex, label %unsupported, label %have.ex")
        body.label("unsupported")
        emit(f"ret i32 {CUDA_ERROR_NOT_SUPPORTED}")
        body.label("have.ex")
        for j, value in enumerate(("%gx", "%gy", "%gz", "%bx", "%by", "%bz", "%smem")):
            emit(f"%cfg.{j} = getelementptr inbounds %tileir.launch_config, ptr %cfg, i32 0, i32 {j}")
            emit(f"store i32 {value}, ptr %cfg.{j}, align 4")
        for j, (ty, value) in enumerate((("ptr", "%stream"), ("ptr", "%attr"), ("i32", "1")), start=7):
            emit(f"%cfg.{j} = getelementptr inbounds %tileir.launch_config, ptr %cfg, i32 0, i32 {j}")
            emit(f"store {ty} {value}, ptr %cfg.{j}, align 8")
        emit("call void @llvm.memset.p0.i64(ptr align 8 %attr, i8 0, i64 72, i1 false)")
        emit(f"store i32 {LAUNCH_ATTR_CLUSTER_DIMENSION}, ptr %attr, align 8")
        for j, value in enumerate(("%cx", "%cy", "%cz")):
            emit(f"%dim.{j} = getelementptr inbounds %tileir.launch_attribute, ptr %attr, i32 0, i32 2, i32 {j}")
            emit(f"store i32 {value}, ptr %dim.{j}, align 4")
        emit("%ex.rc = call i32 %ex(ptr %cfg, ptr %f, ptr %params, ptr null)")
        emit("ret i32 %ex.rc")
        body.label("launch")
    rc = body.call_api("cuLaunchKernel", launch_args)
    emit(f"ret i32 {rc}")
    return (f"define i32 @{facts.launcher}({signature}) {{\nentry:\n"
            + "\n".join(body.lines) + "\n}\n")


def _globals(fatbin: bytes, kernels: Sequence[cabi.LaunchFacts], gpus: Sequence[str], os_name: str) -> str:
    nk = max(1, len(kernels))
    out = [
        f"%tileir.slot = type {{ i64, ptr, i32, [{nk} x ptr] }}",
        "%tileir.launch_config = type { i32, i32, i32, i32, i32, i32, i32, ptr, ptr, i32 }",
        "%tileir.launch_attribute = type { i32, i32, [3 x i32], [52 x i8] }",
        f'@tileir.fatbin = private constant [{len(fatbin)} x i8] c"{c_string(fatbin)}", section ".nv_fatbin", align 8',
        f"@tileir.api = internal global [{len(DRIVER_API)} x ptr] zeroinitializer, align 8",
        "@tileir.inited = internal global i8 0, align 1",
        "@tileir.init_rc = internal global i32 0, align 4",
        "@tileir.nslots = internal global i32 0, align 4",
        f"@tileir.slots = internal global [{cabi.MAX_CONTEXTS} x %tileir.slot] zeroinitializer, align 8",
    ]
    library = DRIVER_LIBRARY[os_name].encode() + b"\0"
    out.append(f'@tileir.libname = private unnamed_addr constant [{len(library)} x i8] c"{c_string(library)}", align 1')
    for index, (name, _, _) in enumerate(DRIVER_API):
        text = name.encode() + b"\0"
        out.append(f'@tileir.sym.{index} = private unnamed_addr constant [{len(text)} x i8] c"{c_string(text)}", align 1')
    for index, facts in enumerate(kernels):
        text = facts.name.encode("utf-8") + b"\0"
        out.append(f'@tileir.name.{index} = private unnamed_addr constant [{len(text)} x i8] c"{c_string(text)}", align 1')
    placeholder = (1, 1, 1, 0, 1, 1, 1)  # keeps the table well-formed for a module without kernels
    rows = []
    for g in range(len(gpus)):
        configs = [facts.configs[g] for facts in kernels] or [placeholder]
        cells = ["[7 x i32] [" + ", ".join(f"i32 {v}" for v in cfg) + "]" for cfg in configs]
        rows.append(f"[{nk} x [7 x i32]] [" + ", ".join(cells) + "]")
    out.append(f"@tileir.config = internal constant [{len(gpus)} x [{nk} x [7 x i32]]] [" + ", ".join(rows) + "], align 4")
    out.append("declare void @llvm.memset.p0.i64(ptr, i8, i64, i1)")
    return "\n".join(out) + "\n"


def host_ir(fatbin: bytes, meta: Sequence[ModuleMetadata] | ModuleMetadata, host_arch: str = "x86_64",
            host_os: str = "linux") -> str:
    """The LLVM IR of the host object (exposed for tests and `--emit` debugging)."""
    platform = _platform(host_arch, host_os)
    ordered, kernels = cabi.merge_metadata(meta)
    for facts in kernels:
        for cfg in facts.configs:
            if min(cfg[:3]) < 1 or min(cfg[4:]) < 1 or cfg[3] < 0 or cfg[3] >= 2**31:
                raise CompileError(f"error: kernel '{facts.name}' has an invalid launch configuration {cfg}")
    gpus = [m.gpu for m in ordered]
    nk = max(1, len(kernels))
    parts = [
        f'target triple = "{platform.triple}"',
        "",
        _globals(fatbin, kernels, gpus, platform.os),
        _OS_RUNTIME[platform.os].replace("@RTLD_NOW@", str(RTLD_NOW)),
        _init(),
        _acquire(kernels, gpus),
    ]
    for index, facts in enumerate(kernels):
        parts.append(_launcher(index, facts, len(gpus), nk))
    return "\n".join(parts)


def _platform(host_arch: str, host_os: str) -> HostPlatform:
    platform = HOSTS.get((host_arch, host_os))
    if platform is None:
        arches = sorted({a for a, _ in HOSTS})
        oses = sorted({o for _, o in HOSTS})
        raise TileirasError(f"error: unsupported host '{host_arch}-{host_os}' (arch: {', '.join(arches)}; "
                            f"os: {', '.join(oses)})", ExitCode.INVALID_OPTIONS)
    return platform


def make_host_object(fatbin: bytes, meta: Sequence[ModuleMetadata] | ModuleMetadata, host_arch: str = "x86_64",
                     host_os: str = "linux") -> bytes:
    """A relocatable object (ELF or COFF) holding `fatbin` and the launchers of `meta`'s kernels."""
    platform = _platform(host_arch, host_os)
    ir = host_ir(fatbin, meta, host_arch, host_os)
    from . import llvm_capi
    from .isolate import run_isolated

    llvm_capi.load()  # in the parent, so a forked child starts with LLVM loaded

    def compile_object() -> bytes:
        try:
            return llvm_capi.compile_ir(ir, platform.triple, "generic", "", 2, object_file=True,
                                        reloc="pic" if platform.os == "linux" else "default", optimize=False)
        except CompileError as exc:  # a bug in this module, not in the user's input
            raise CompileError("error: internal error building the host object: "
                               + exc.message.removeprefix("error: ")) from None

    return run_isolated("host object code generation", compile_object)
