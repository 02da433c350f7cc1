"""Linking NVIDIA's libdevice (the `__nv_*` math library) into a kernel module.

The bitcode ships in the `nvidia-nvvm` wheel that `nvidia-cuda-nvcc` depends
on (nvidia/cu13/nvvm/libdevice/libdevice.10.bc); `CUDA_ROOT`/`CUDA_HOME`/
`CUDA_PATH` point at a toolkit's copy instead. Only modules that call an
`__nv_*` function pay for the link; every libdevice function is made
internal afterwards so the optimizer drops the ones not called.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from tileiras.driver.errors import CompileError

_RELATIVE = ("nvvm/libdevice/libdevice.10.bc",)


def needs_libdevice(llvm_ir: str) -> bool:
    return "@__nv_" in llvm_ir


@lru_cache(maxsize=1)
def find_libdevice() -> Path:
    for var in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            for rel in _RELATIVE:
                if (Path(root) / rel).is_file():
                    return Path(root) / rel
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cuda_nvcc", "cu12"):
            for rel in _RELATIVE:
                candidate = Path(base) / sub / rel
                if candidate.is_file():
                    return candidate
    raise CompileError("error: could not find libdevice (install the nvidia-cuda-nvcc wheel or set CUDA_ROOT)")


def link_libdevice(llvm: Any, module: Any) -> None:
    """Link libdevice into `module` (an llvmlite ModuleRef) and internalize its functions."""
    lib = llvm.parse_bitcode(find_libdevice().read_bytes())
    lib.triple = module.triple
    lib.data_layout = module.data_layout
    module.link_in(lib)
    for fn in module.functions:
        if fn.name.startswith("__nv_") and not fn.is_declaration:
            fn.linkage = "internal"
