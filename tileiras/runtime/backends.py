"""The three ways to run a kernel: reference interpreter, PTX emulator, CUDA GPU.

Each backend takes a `RunRequest` (module, kernel, grid, bound arguments)
and returns every argument array as it is after the run. The emulator and
GPU backends compile the module with our own compiler first (PTX for the
emulator, a cubin for the GPU) and launch with the block size and dynamic
shared memory from the compile's launch metadata.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TextIO

import numpy as np

from ..errors import ExitCode, TileirasError
from .marshal import Binding


@dataclass
class RunRequest:
    module: Any                       # the module op (already read and verified)
    source: bytes                     # the module's file contents, for compiling
    filename: str
    kernel: str
    grid: tuple[int, int, int]
    binding: Binding
    gpu_name: Optional[str] = None
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    check_races: Optional[bool] = None   # emulator: report data races (None: TILEIRAS_EMULATOR_CHECK_RACES)
    ptx: Optional[str] = None            # emulator: run this PTX instead of ours (same calling convention)
    per_cta_memory: bool = False         # emulator: the driver gives CTAs their own memory (.minperctamemory)


def run_failure(message: str) -> TileirasError:
    return TileirasError(message if message.startswith("error:") else "error: " + message,
                         ExitCode.COMPILE_FAILED)


# -- interpreter ------------------------------------------------------------------------
def run_interpreter(req: RunRequest) -> list[np.ndarray]:
    from ..interp.machine import Machine

    machine = Machine(req.module, stdout=req.stdout)
    params = req.binding.upload(machine.memory)
    with np.errstate(all="ignore"):
        machine.launch(req.kernel, req.grid, params)
    return req.binding.download(machine.memory)


# -- compiling with our compiler ----------------------------------------------------------------
def compile_module(req: RunRequest, emit: str, gpu: str) -> tuple[bytes, Any]:
    """(PTX text or cubin bytes, ModuleMetadata) of the request's module for `gpu`."""
    from ..codegen.metadata import ModuleMetadata
    from ..driver.tileiras_main import main as tileiras

    from ..scratch import TempDir

    with TempDir(prefix="run-") as tmp:  # in the process's scratch folder: reclaimed after a kill
        src = os.path.join(tmp, os.path.basename(req.filename) or "kernel.tileirbc")
        with open(src, "wb") as handle:
            handle.write(req.source)
        out = os.path.join(tmp, f"kernel.{emit}")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = tileiras([f"--emit={emit}", "--gpu-name", gpu, "--emit-metadata", src, "-o", out])
        if code != 0:
            detail = err.getvalue().strip().replace(src, req.filename)
            raise run_failure(f"compiling '{req.filename}' for {gpu} failed: {detail or f'exit code {code}'}")
        with open(out, "rb") as handle:
            payload = handle.read()
        with open(out + ".json", "rb") as handle:
            meta = ModuleMetadata.from_json(handle.read())
    return payload, meta


def kernel_info(meta: Any, kernel: str) -> Any:
    for k in meta.kernels:
        if k.name == kernel:
            return k
    raise run_failure(f"the compiled module has no kernel '{kernel}'")


# -- PTX emulator -------------------------------------------------------------------------------
def tma_hidden_params(info: Any, params: list) -> list[bytes]:
    """The tensor maps a TMA kernel takes after the user's parameters, made from those (on a GPU
    the driver fills them through the cubin's `.nv.host` callback); a clear error when an
    argument breaks a TMA rule (a base not 16-byte aligned, a stride not a multiple of 16 bytes)."""
    from ..codegen.tensormap import TensorMapError
    from ..codegen.tma_params import hidden_params

    try:
        return hidden_params(info.tma, params)
    except TensorMapError as err:
        raise run_failure(f"kernel '{info.name}': its arguments make no valid TMA descriptor: {err}") from None


def run_emulator(req: RunRequest) -> list[np.ndarray]:
    ptx, meta = compile_module(req, "ptx", req.gpu_name or "sm_80")
    return run_compiled(req, ptx.decode(), meta)


def run_compiled(req: RunRequest, ptx: str, meta: Any, max_warp_instructions: Optional[int] = None) \
        -> list[np.ndarray]:
    """The emulator's run of `ptx` (req.ptx instead when given) with the launch of `meta` (the compile's
    metadata: block, dynamic shared memory, tensor maps)."""
    try:
        from ..emulator import Memory, run_ptx
    except (ImportError, AttributeError):
        raise run_failure("the PTX emulator is not available in this build (tileiras.emulator)") from None
    info = kernel_info(meta, req.kernel)
    memory = Memory()
    params = req.binding.upload(memory)
    params = [*params, *tma_hidden_params(info, params)]
    if info.workspace:      # the maps it makes itself: a workspace for the SMs it runs on (the emulator:
        import math         # each of the grid's CTAs or clusters its own, %nsmid of them)

        params.append(memory.alloc(math.prod(req.grid) * info.workspace, 128))
    text, block = ptx, tuple(info.block)
    if req.ptx is not None:     # another PTX of the kernel: our launch, unless it names its own block
        from ..emulator import load_program

        text = req.ptx
        block = load_program(text, req.kernel).reqntid or block
    limit = {} if max_warp_instructions is None else {"max_warp_instructions": max_warp_instructions}
    run_ptx(text, req.kernel, req.grid, block, params, memory,
            dynamic_smem=int(info.dynamic_smem), stdout=req.stdout, check_races=req.check_races,
            per_cta_memory=req.per_cta_memory, **limit)
    return req.binding.download(memory)


# -- CUDA GPU ------------------------------------------------------------------------------------
def _cuda() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError:
        raise run_failure("no GPU is present: the gpu backend needs cuda-bindings and a CUDA driver "
                          "(pip install cuda-bindings)") from None
    return driver


def _check(driver: Any, result: Any, what: str) -> Any:
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise run_failure(f"{what} failed: {err.name if hasattr(err, 'name') else err}")
    return rest[0] if len(rest) == 1 else rest


def gpu_present() -> bool:
    """Whether a CUDA GPU can be used (cuda-bindings installed, a driver and a device)."""
    try:
        from cuda.bindings import driver
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:
        return False


class CudaMemory:
    """Device memory through the CUDA driver API, with the backend memory protocol."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.allocations: list[Any] = []

    def alloc(self, nbytes: int) -> int:
        ptr = _check(self.driver, self.driver.cuMemAlloc(max(1, nbytes)), "cuMemAlloc")
        self.allocations.append(ptr)
        return int(ptr)

    def write(self, address: int, data: bytes) -> None:
        buf = np.frombuffer(bytes(data), np.uint8)
        _check(self.driver, self.driver.cuMemcpyHtoD(address, buf.ctypes.data, buf.size), "cuMemcpyHtoD")

    def read(self, address: int, n: int) -> bytes:
        buf = np.empty(n, np.uint8)
        if n:
            _check(self.driver, self.driver.cuMemcpyDtoH(buf.ctypes.data, address, n), "cuMemcpyDtoH")
        return buf.tobytes()

    def free(self) -> None:
        for ptr in self.allocations:
            self.driver.cuMemFree(ptr)
        self.allocations.clear()


def _c_arg(value: Any, type_name: str) -> Any:
    import ctypes

    if isinstance(value, (bytes, bytearray)):
        value = int.from_bytes(bytes(value), "little")
    if type_name.startswith("ptr<"):
        return ctypes.c_uint64(int(value))
    table: dict[str, Callable[[Any], Any]] = {
        "i1": ctypes.c_uint8, "i8": ctypes.c_int8, "i16": ctypes.c_int16, "i32": ctypes.c_int32,
        "i64": ctypes.c_int64, "f16": ctypes.c_uint16, "bf16": ctypes.c_uint16,
        "f32": ctypes.c_float, "f64": ctypes.c_double,
    }
    if type_name not in table:
        raise run_failure(f"kernel parameters of type {type_name} cannot be passed to a GPU launch")
    ctor = table[type_name]
    if type_name in ("f32", "f64"):
        return ctor(float(value))
    bits = ctypes.sizeof(ctor) * 8
    raw = int(value) & ((1 << bits) - 1)
    if type_name in ("i8", "i16", "i32", "i64") and raw >> (bits - 1):
        raw -= 1 << bits
    return ctor(raw)


def run_gpu(req: RunRequest) -> list[np.ndarray]:
    import ctypes

    driver = _cuda()
    try:
        err, = driver.cuInit(0)
    except Exception as exc:           # no driver library at all
        raise run_failure(f"no GPU is present ({exc})") from None
    if err != driver.CUresult.CUDA_SUCCESS:
        raise run_failure(f"no GPU is present (cuInit: {getattr(err, 'name', err)})")
    count = _check(driver, driver.cuDeviceGetCount(), "cuDeviceGetCount")
    if count == 0:
        raise run_failure("no GPU is present (no CUDA device found)")
    device = _check(driver, driver.cuDeviceGet(0), "cuDeviceGet")
    attr = driver.CUdevice_attribute
    major = _check(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
                   "cuDeviceGetAttribute")
    minor = _check(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
                   "cuDeviceGetAttribute")
    gpu = req.gpu_name or f"sm_{major}{minor}"
    cubin, meta = compile_module(req, "cubin", gpu)
    info = kernel_info(meta, req.kernel)
    if tuple(info.cluster) != (1, 1, 1):
        raise run_failure(f"kernel '{req.kernel}' needs a cluster launch {tuple(info.cluster)}, "
                          "which tileir run does not do yet")
    context = _check(driver, driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
    _check(driver, driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    memory = CudaMemory(driver)
    try:
        image = np.frombuffer(cubin, np.uint8)
        module = _check(driver, driver.cuModuleLoadData(image.ctypes.data), "cuModuleLoadData")
        func = _check(driver, driver.cuModuleGetFunction(module, req.kernel.encode()), "cuModuleGetFunction")
        params = req.binding.upload(memory)
        types = [p.type for p in info.params]
        if len(types) != len(params):
            raise run_failure(f"kernel '{req.kernel}' has {len(types)} compiled parameters, {len(params)} given")
        cargs = [_c_arg(v, t) for v, t in zip(params, types)]
        pointers = (ctypes.c_void_p * max(1, len(cargs)))(*[ctypes.addressof(a) for a in cargs])
        smem = int(info.dynamic_smem)
        if smem > 48 * 1024:
            _check(driver, driver.cuFuncSetAttribute(
                func, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem),
                "cuFuncSetAttribute")
        bx, by, bz = info.block
        _check(driver, driver.cuLaunchKernel(func, *req.grid, bx, by, bz, smem, 0,
                                             ctypes.addressof(pointers), 0), "cuLaunchKernel")
        _check(driver, driver.cuCtxSynchronize(), "kernel execution")
        out = req.binding.download(memory)
        driver.cuModuleUnload(module)
        return out
    finally:
        memory.free()


BACKENDS: dict[str, Callable[[RunRequest], list[np.ndarray]]] = {
    "interpreter": run_interpreter,
    "emulator": run_emulator,
    "gpu": run_gpu,
}
