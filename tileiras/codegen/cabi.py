"""The C ABI of the launchers: C names, C types, LLVM types, and launch tables.

Shared by the header writer and the host-object writer, so the declaration a
user compiles against and the definition the object carries cannot drift.

Launcher signature:
    int NAME_launch(CUstream stream, uint32_t grid_x, uint32_t grid_y, uint32_t grid_z, <params>);
Each kernel parameter of the PTX entry is one C parameter, in order.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Sequence

from tileiras.errors import CompileError

from .metadata import KernelInfo, KernelParam, ModuleMetadata, sm_number

# Return codes besides 0 (success) and CUresult values (positive), as #defines in the header.
ERROR_CODES: tuple[tuple[str, int, str], ...] = (
    ("TILEIR_SUCCESS", 0, "the kernel was launched"),
    ("TILEIR_ERROR_NO_DRIVER", -1,
     "the CUDA driver library (libcuda.so.1 / nvcuda.dll) could not be loaded or lacks an entry point"),
    ("TILEIR_ERROR_NO_DEVICE", -2, "the CUDA driver found no GPU (cuInit returned CUDA_ERROR_NO_DEVICE)"),
    ("TILEIR_ERROR_TOO_MANY_CONTEXTS", -3, "kernels of one object were launched from more than 64 contexts"),
)
ERROR_NO_DRIVER = -1
ERROR_NO_DEVICE = -2
ERROR_TOO_MANY_CONTEXTS = -3
MAX_CONTEXTS = 64

# TileIR scalar type -> (C type, LLVM IR type of the launcher argument, bytes of the kernel parameter).
SCALARS: dict[str, tuple[str, str, int]] = {
    "i1": ("uint8_t", "i8", 1),      # bool as 0/1
    "i8": ("int8_t", "i8", 1),
    "i16": ("int16_t", "i16", 2),
    "i32": ("int32_t", "i32", 4),
    "i64": ("int64_t", "i64", 8),
    "f16": ("uint16_t", "i16", 2),   # IEEE binary16 bit pattern
    "bf16": ("uint16_t", "i16", 2),  # bfloat16 bit pattern
    "f32": ("float", "float", 4),
    "f64": ("double", "double", 8),
}
# Pointee element type -> C pointer type; anything else is void*.
POINTEES: dict[str, str] = {
    "f32": "float*", "f64": "double*",
    "i8": "int8_t*", "i16": "int16_t*", "i32": "int32_t*", "i64": "int64_t*",
}

# C and C++ keywords, and the launcher's own leading parameter names.
RESERVED_NAMES: frozenset[str] = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t char32_t
    class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield
    decltype default delete do double dynamic_cast else enum explicit export extern false float for friend
    goto if inline int long mutable namespace new noexcept not not_eq nullptr operator or or_eq private
    protected public register reinterpret_cast requires restrict return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
    stream grid_x grid_y grid_z
""".split())


def c_type(spelling: str) -> str:
    if spelling.startswith("ptr<"):
        return POINTEES.get(spelling[4:-1], "void*")
    return SCALARS[spelling][0]


def llvm_type(spelling: str) -> str:
    return "ptr" if spelling.startswith("ptr<") else SCALARS[spelling][1]


def _identifier(text: str) -> str:
    ident = re.sub(r"[^A-Za-z0-9_]", "_", text)
    if not ident or ident[0].isdigit():
        ident = "_" + ident
    return ident


def launcher_names(kernel_names: Sequence[str]) -> dict[str, str]:
    """Kernel name -> C launcher name (`NAME_launch`), sanitised deterministically.

    Characters outside [A-Za-z0-9_] become '_' and a leading digit gets a '_'
    prefix; when two kernels would then collide, each changed name also gets
    the first 8 hex digits of the SHA-256 of its original name.
    """
    base = {name: _identifier(name) for name in kernel_names}
    counts: dict[str, int] = {}
    for ident in base.values():
        counts[ident] = counts.get(ident, 0) + 1
    result: dict[str, str] = {}
    for name, ident in base.items():
        if counts[ident] > 1 and ident != name:
            ident += "_" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
        result[name] = ident + "_launch"
    if len(set(result.values())) != len(result):
        raise CompileError("error: kernel names collide after sanitising them into C identifiers")
    return result


def param_names(params: Sequence[KernelParam]) -> list[str]:
    """C parameter names: the kernel's own where usable, else argN."""
    used: set[str] = set()
    names: list[str] = []
    for index, param in enumerate(params):
        ident = _identifier(param.name) if param.name else ""
        if not param.name or ident != param.name or ident in RESERVED_NAMES or ident in used:
            ident = f"arg{index}"
        while ident in used:
            ident += "_"
        used.add(ident)
        names.append(ident)
    return names


@dataclass(frozen=True)
class LaunchFacts:
    """One kernel across every target compiled: its signature and per-target launch shape."""

    name: str
    launcher: str
    params: tuple[KernelParam, ...]
    configs: tuple[tuple[int, int, int, int, int, int, int], ...]  # per target: block xyz, smem, cluster xyz

    @property
    def uses_clusters(self) -> bool:
        return any(cfg[4:] != (1, 1, 1) for cfg in self.configs)


def merge_metadata(metas: Sequence[ModuleMetadata] | ModuleMetadata) -> tuple[list[ModuleMetadata], list[LaunchFacts]]:
    """Check that every target exports the same kernels with the same parameters.

    Returns the metadata sorted by target (the order of the runtime selection
    table) and the facts of each kernel, in the first module's kernel order.
    """
    items = [metas] if isinstance(metas, ModuleMetadata) else list(metas)
    if not items:
        raise CompileError("error: no kernel metadata given")
    ordered = sorted(items, key=lambda m: (sm_number(m.gpu), m.gpu))
    gpus = [m.gpu for m in ordered]
    if len(set(gpus)) != len(gpus):
        raise CompileError("error: kernel metadata given twice for one target")
    first = items[0]
    expected = {k.name: k.params for k in first.kernels}
    for meta in ordered:
        found = {k.name: k.params for k in meta.kernels}
        if set(found) != set(expected):
            raise CompileError(f"error: the kernels of {meta.gpu} differ from those of {first.gpu}")
        for name, params in found.items():
            if [p.type for p in params] != [p.type for p in expected[name]]:
                raise CompileError(f"error: kernel '{name}' has different parameters on {meta.gpu} and {first.gpu}")
    names = launcher_names([k.name for k in first.kernels])
    facts: list[LaunchFacts] = []
    for kernel in first.kernels:
        per_target = [_find(meta, kernel.name) for meta in ordered]
        facts.append(LaunchFacts(
            name=kernel.name, launcher=names[kernel.name], params=kernel.params,
            configs=tuple((*k.block, k.dynamic_smem, *k.cluster) for k in per_target)))
    return ordered, facts


def _find(meta: ModuleMetadata, name: str) -> KernelInfo:
    return next(k for k in meta.kernels if k.name == name)
