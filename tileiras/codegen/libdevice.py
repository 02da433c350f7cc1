"""Linking NVIDIA's libdevice (the `__nv_*` math library) into a kernel module.

The bitcode ships in the `nvidia-nvvm` wheel that `nvidia-cuda-nvcc` depends
on (nvidia/cu13/nvvm/libdevice/libdevice.10.bc); `CUDA_ROOT`/`CUDA_HOME`/
`CUDA_PATH` point at a toolkit's copy instead. Only modules that call an
`__nv_*` function pay for the link (`llvm_capi.compile_ir`); every libdevice
function is made internal afterwards so the optimizer drops the ones not called.
"""

from __future__ import annotations

import os
from functools import lru_cache

from tileiras.errors import CompileError

_RELATIVE = ("nvvm/libdevice/libdevice.10.bc",)


def needs_libdevice(llvm_ir: str) -> bool:
    return "@__nv_" in llvm_ir


@lru_cache(maxsize=1)
def find_libdevice() -> str:
    """The path of libdevice.10.bc (os.path, not pathlib: this runs on the compile path)."""
    for var in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            for rel in _RELATIVE:
                if os.path.isfile(os.path.join(root, rel)):
                    return os.path.join(root, rel)
    import importlib.util

    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13", "cuda_nvcc", "cu12"):
            for rel in _RELATIVE:
                candidate = os.path.join(base, sub, rel)
                if os.path.isfile(candidate):
                    return candidate
    raise CompileError("error: could not find libdevice (install the nvidia-cuda-nvcc wheel or set CUDA_ROOT)")


def read_libdevice() -> bytes:
    with open(find_libdevice(), "rb") as handle:
        return handle.read()
