"""`.hidden` on the tensor-map parameters of a kernel's PTX (what LLVM's NVPTX cannot say).

TMA kernels take one `.param .align 64 .b8 [128]` per tensor map after the user's parameters
(lowering/tma_copy.py); the CUDA driver fills them (through the `.nv.host` callback), the
launcher never passes them. Marked `.hidden`, ptxas leaves them out of the kernel's
`EIATTR_KPARAM_INFO` records in `.nv.info` (which then lists exactly the user's parameters, as
in NVIDIA's cubins), while the parameter bank keeps their room (`EIATTR_CBANK_PARAM_SIZE`).
"""

from __future__ import annotations

import re
from typing import Any


KERNEL_MAPS_PTX = (9, 4)   # `.minperctamemory` and `%perctamemoryoffset` (lowering/kernel_maps.py)


def hide_tensor_maps(ptx: str, meta: Any) -> str:
    """`ptx` with each kernel's last `len(info.tma)` parameters marked `.hidden`, and the workspace's
    address after them where the kernel makes maps itself (`meta`: the module's ModuleMetadata)."""
    for info in getattr(meta, "kernels", ()):
        first = len(info.params)
        for slot in range(first, first + len(info.tma)):
            ptx, n = re.subn(rf"^(\s*)\.param (\.align 64 \.b8 {re.escape(info.name)}_param_{slot}\[128\])",
                             r"\1.hidden\t.param \2", ptx, count=1, flags=re.MULTILINE)
            if n != 1:
                from ..errors import CompileError

                raise CompileError(f"error: internal: no tensor-map parameter {slot} in the PTX of '{info.name}'")
        if getattr(info, "kernel_maps", 0):   # the workspace's address, after the maps
            slot = first + len(info.tma)
            ptx, n = re.subn(rf"^(\s*)\.param (\.u64 {re.escape(info.name)}_param_{slot})\b",
                             r"\1.hidden\t.param \2", ptx, count=1, flags=re.MULTILINE)
            if n != 1:
                from ..errors import CompileError

                raise CompileError(f"error: internal: no workspace parameter {slot} in the PTX of '{info.name}'")
    return ptx


def declare_per_cta_memory(ptx: str, meta: Any) -> str:
    """`ptx` with `.minperctamemory` (128 bytes per map) on each kernel of `meta` that makes tensor maps
    itself (`KernelInfo.kernel_maps`), and the PTX ISA version that has it (9.4)."""
    from .clusters import at_least_version, kernel_header_end

    making = [k for k in getattr(meta, "kernels", ()) if getattr(k, "kernel_maps", 0)]
    for info in making:
        cut = kernel_header_end(ptx, info.name)
        ptx = ptx[:cut] + f".minperctamemory {128 * info.kernel_maps}\n" + ptx[cut:]
    return at_least_version(ptx, KERNEL_MAPS_PTX) if making else ptx
