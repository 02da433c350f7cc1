"""LLVM through llvmlite's shared library, called directly with ctypes.

`import llvmlite.binding` runs ~60 Python modules that declare ctypes
prototypes for all of llvmlite's ~300 C functions, and that costs several
times what loading the library itself does (about 50 ms against 10 ms on a
small machine): most of a tiny kernel's compile. Code generation needs about
thirty of those functions, so this module loads `libllvmlite` (the same file,
the same LLVM) and declares just those, with the signatures of llvmlite's C
layer (`LLVMPY_*`, stable across the llvmlite releases we support).

Handles are plain integers; each wrapper disposes of what it creates.
"""

from __future__ import annotations

import ctypes
import os
import sys
from ctypes import POINTER, byref, c_char_p, c_int, c_size_t, c_uint, c_void_p
from functools import lru_cache
from typing import Any, Optional

from tileiras.errors import CompileError

_LIBRARY_NAMES = {"win32": "llvmlite.dll", "darwin": "libllvmlite.dylib"}
_LINKAGE_INTERNAL = 8  # LLVMLinkage: LLVMInternalLinkage

# name -> (result type, argument types)
_PROTOTYPES: dict[str, tuple[Any, list[Any]]] = {
    "LLVMPY_InitializeAllTargetInfos": (None, []),
    "LLVMPY_InitializeAllTargets": (None, []),
    "LLVMPY_InitializeAllTargetMCs": (None, []),
    "LLVMPY_InitializeAllAsmPrinters": (None, []),
    "LLVMPY_GetVersionInfo": (c_uint, []),
    "LLVMPY_DisposeString": (None, [c_char_p]),
    "LLVMPY_GetGlobalContext": (c_void_p, []),
    "LLVMPY_ParseAssembly": (c_void_p, [c_void_p, c_char_p, POINTER(c_char_p)]),
    "LLVMPY_ParseBitcode": (c_void_p, [c_void_p, c_char_p, c_size_t, POINTER(c_char_p)]),
    "LLVMPY_VerifyModule": (c_int, [c_void_p, POINTER(c_char_p)]),
    "LLVMPY_DisposeModule": (None, [c_void_p]),
    "LLVMPY_SetTarget": (None, [c_void_p, c_char_p]),
    "LLVMPY_SetDataLayout": (None, [c_void_p, c_char_p]),
    "LLVMPY_LinkModules": (c_int, [c_void_p, c_void_p, POINTER(c_char_p)]),
    "LLVMPY_ModuleFunctionsIter": (c_void_p, [c_void_p]),
    "LLVMPY_FunctionsIterNext": (c_void_p, [c_void_p]),
    "LLVMPY_DisposeFunctionsIter": (None, [c_void_p]),
    "LLVMPY_GetValueName": (c_char_p, [c_void_p]),
    "LLVMPY_IsDeclaration": (c_int, [c_void_p]),
    "LLVMPY_SetLinkage": (None, [c_void_p, c_int]),
    "LLVMPY_GetTargetFromTriple": (c_void_p, [c_char_p, POINTER(c_char_p)]),
    "LLVMPY_CreateTargetMachine": (c_void_p, [c_void_p, c_char_p, c_char_p, c_char_p, c_int, c_char_p,
                                              c_char_p, c_int, c_int, c_char_p]),
    "LLVMPY_DisposeTargetMachine": (None, [c_void_p]),
    "LLVMPY_CreateTargetMachineData": (c_void_p, [c_void_p]),
    "LLVMPY_CopyStringRepOfTargetData": (None, [c_void_p, POINTER(c_char_p)]),
    "LLVMPY_DisposeTargetData": (None, [c_void_p]),
    "LLVMPY_CreatePipelineTuningOptions": (c_void_p, []),
    "LLVMPY_DisposePipelineTuningOptions": (None, [c_void_p]),
    "LLVMPY_CreatePassBuilder": (c_void_p, [c_void_p, c_void_p]),
    "LLVMPY_DisposePassBuilder": (None, [c_void_p]),
    "LLVMPY_buildPerModuleDefaultPipeline": (c_void_p, [c_void_p, c_int]),
    "LLVMPY_CreateNewModulePassManager": (c_void_p, []),
    "LLVMPY_module_AddGlobalDCEPass": (None, [c_void_p]),
    "LLVMPY_RunNewModulePassManager": (None, [c_void_p, c_void_p, c_void_p]),
    "LLVMPY_DisposeNewModulePassManger": (None, [c_void_p]),  # sic: llvmlite's spelling
    "LLVMPY_TargetMachineEmitToMemory": (c_void_p, [c_void_p, c_void_p, c_int, POINTER(c_char_p)]),
    "LLVMPY_GetBufferStart": (c_void_p, [c_void_p]),
    "LLVMPY_GetBufferSize": (c_size_t, [c_void_p]),
    "LLVMPY_DisposeMemoryBuffer": (None, [c_void_p]),
}


def library_path() -> str:
    """llvmlite's shared library, found without importing llvmlite."""
    import importlib.util

    spec = importlib.util.find_spec("llvmlite")
    if spec is None or not spec.submodule_search_locations:
        raise CompileError("error: llvmlite is not installed (pip install llvmlite)")
    name = _LIBRARY_NAMES.get(sys.platform, "libllvmlite.so")
    return os.path.join(list(spec.submodule_search_locations)[0], "binding", name)


class Library:
    """The loaded library: one attribute per declared `LLVMPY_*` function."""

    def __init__(self, path: str) -> None:
        try:
            dll = ctypes.CDLL(path)
        except OSError as exc:
            raise CompileError(f"error: cannot load LLVM ({path}): {exc}") from None
        for name, (restype, argtypes) in _PROTOTYPES.items():
            try:
                fn = getattr(dll, name)
            except AttributeError:
                raise CompileError(f"error: {path} lacks {name}: this llvmlite is too old or too new") from None
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name[len("LLVMPY_"):], fn)
        for init in ("InitializeAllTargetInfos", "InitializeAllTargets", "InitializeAllTargetMCs",
                     "InitializeAllAsmPrinters"):
            getattr(self, init)()
        self.context = self.GetGlobalContext()

    def take_message(self, out: c_char_p) -> str:
        """The text of an LLVM-allocated message, which is then freed."""
        text = (out.value or b"").decode("utf-8", errors="replace").strip()
        if out.value is not None:
            self.DisposeString(out)
        return text

    def version(self) -> tuple[int, int, int]:
        v = self.GetVersionInfo()
        return (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF


@lru_cache(maxsize=1)
def load() -> Library:
    """The library, loaded and its targets initialised once per process (~10 ms)."""
    return Library(library_path())


class Module:
    """An LLVM module parsed from IR text or bitcode; owned until linked into another or closed."""

    def __init__(self, lib: Library, handle: int) -> None:
        self.lib, self.handle = lib, handle

    @classmethod
    def parse_ir(cls, lib: Library, text: str) -> "Module":
        err = c_char_p()
        handle = lib.ParseAssembly(lib.context, text.encode("utf-8"), byref(err))
        message = lib.take_message(err)
        if not handle or message:
            if handle:
                lib.DisposeModule(handle)
            raise CompileError(f"error: invalid LLVM IR: {message}")
        return cls(lib, handle)

    @classmethod
    def parse_bitcode(cls, lib: Library, data: bytes) -> "Module":
        err = c_char_p()
        handle = lib.ParseBitcode(lib.context, data, len(data), byref(err))
        message = lib.take_message(err)
        if not handle or message:
            if handle:
                lib.DisposeModule(handle)
            raise CompileError(f"error: invalid LLVM bitcode: {message}")
        return cls(lib, handle)

    def verify(self) -> None:
        err = c_char_p()
        failed = self.lib.VerifyModule(self.handle, byref(err))
        message = self.lib.take_message(err)
        if failed:
            raise CompileError(f"error: invalid LLVM IR: {message}")

    def set_target(self, triple: str, data_layout: str) -> None:
        self.lib.SetTarget(self.handle, triple.encode())
        self.lib.SetDataLayout(self.handle, data_layout.encode())

    def link_in(self, other: "Module") -> None:
        """Link `other` into this module; `other` is consumed."""
        err = c_char_p()
        failed = self.lib.LinkModules(self.handle, other.handle, byref(err))
        other.handle = 0
        message = self.lib.take_message(err)
        if failed:
            raise CompileError(f"error: linking LLVM modules failed: {message}")

    def internalize_definitions(self, prefix: str) -> None:
        """Give every function defined here whose name starts with `prefix` internal linkage."""
        lib, wanted = self.lib, prefix.encode()
        it = lib.ModuleFunctionsIter(self.handle)
        try:
            while fn := lib.FunctionsIterNext(it):
                if (lib.GetValueName(fn) or b"").startswith(wanted) and not lib.IsDeclaration(fn):
                    lib.SetLinkage(fn, _LINKAGE_INTERNAL)
        finally:
            lib.DisposeFunctionsIter(it)

    def close(self) -> None:
        if self.handle:
            self.lib.DisposeModule(self.handle)
            self.handle = 0

    def __enter__(self) -> "Module":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TargetMachine:
    """An LLVM target machine: optimises modules with the standard pipeline and emits code."""

    def __init__(self, lib: Library, triple: str, cpu: str, features: str, opt_level: int,
                 reloc: str = "default", code_model: str = "default") -> None:
        err = c_char_p()
        target = lib.GetTargetFromTriple(triple.encode(), byref(err))
        message = lib.take_message(err)
        if not target:
            raise CompileError(f"error: LLVM has no target for '{triple}': {message}")
        self.lib, self.triple = lib, triple
        self.handle = lib.CreateTargetMachine(target, triple.encode(), cpu.encode(), features.encode(), opt_level,
                                              reloc.encode(), code_model.encode(), 0, 0, b"")
        if not self.handle:
            raise CompileError(f"error: LLVM cannot create a target machine for {triple} {cpu}")

    def data_layout(self) -> str:
        data = self.lib.CreateTargetMachineData(self.handle)
        out = c_char_p()
        try:
            self.lib.CopyStringRepOfTargetData(data, byref(out))
            return self.lib.take_message(out)
        finally:
            self.lib.DisposeTargetData(data)

    def optimize(self, module: Module, level: int) -> None:
        """Run LLVM's default new-pass-manager pipeline for -O`level`."""
        self._run(module, lambda lib, builder: lib.buildPerModuleDefaultPipeline(builder, level))

    def drop_unused(self, module: Module) -> None:
        """Delete unreferenced internal definitions (GlobalDCE): a linked library's unused functions
        would otherwise go through the early passes of the -O pipeline, at several times the cost."""
        def build(lib: Library, builder: int) -> int:
            passes = lib.CreateNewModulePassManager()
            lib.module_AddGlobalDCEPass(passes)
            return passes
        self._run(module, build)

    def _run(self, module: Module, build: Any) -> None:
        lib = self.lib
        tuning = lib.CreatePipelineTuningOptions()
        builder = lib.CreatePassBuilder(self.handle, tuning)
        passes = build(lib, builder)
        try:
            lib.RunNewModulePassManager(passes, module.handle, builder)
        finally:
            lib.DisposeNewModulePassManger(passes)
            lib.DisposePassBuilder(builder)
            lib.DisposePipelineTuningOptions(tuning)

    def emit(self, module: Module, object_file: bool = False) -> bytes:
        """Assembly text (PTX for NVPTX), or an object file, as bytes."""
        err = c_char_p()
        buffer = self.lib.TargetMachineEmitToMemory(self.handle, module.handle, int(object_file), byref(err))
        message = self.lib.take_message(err)
        if not buffer:
            raise CompileError(f"error: LLVM code generation failed: {message}")
        try:
            return ctypes.string_at(self.lib.GetBufferStart(buffer), self.lib.GetBufferSize(buffer))
        finally:
            self.lib.DisposeMemoryBuffer(buffer)

    def close(self) -> None:
        if self.handle:
            self.lib.DisposeTargetMachine(self.handle)
            self.handle = 0

    def __enter__(self) -> "TargetMachine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def compile_ir(ir: str, triple: str, cpu: str, features: str, opt_level: int, *, object_file: bool = False,
               reloc: str = "default", optimize: bool = True, link: Optional[bytes] = None,
               internalize: str = "", code_model: str = "default") -> bytes:
    """IR text -> assembly or object bytes: parse, verify, set the target, link `link` (bitcode, its
    `internalize`-prefixed definitions made internal), run the -O pipeline, emit. `code_model`:
    LLVM's ("default", "small", "large", ...)."""
    lib = load()
    with Module.parse_ir(lib, ir) as module, \
            TargetMachine(lib, triple, cpu, features, opt_level, reloc, code_model) as machine:
        module.verify()
        layout = machine.data_layout()
        module.set_target(triple, layout)
        if link is not None:
            other = Module.parse_bitcode(lib, link)
            other.set_target(triple, layout)
            module.link_in(other)
            if internalize:
                module.internalize_definitions(internalize)
                machine.drop_unused(module)
        if optimize:
            machine.optimize(module, opt_level)
        return machine.emit(module, object_file)
