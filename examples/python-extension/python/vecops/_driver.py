"""The CUDA driver calls vecops needs to move data, through ctypes (no CUDA at build time)."""

from __future__ import annotations

import ctypes
import sys

_LIBRARY = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


class Driver:
    """Device memory in the context the launchers made current."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(_LIBRARY)
        self._alloc = lib.cuMemAlloc_v2
        self._alloc.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self._free = lib.cuMemFree_v2
        self._free.argtypes = [ctypes.c_uint64]
        self._htod = lib.cuMemcpyHtoD_v2
        self._htod.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
        self._dtoh = lib.cuMemcpyDtoH_v2
        self._dtoh.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
        self._sync = lib.cuCtxSynchronize
        self._sync.argtypes = []

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"{what} failed with CUresult {rc}")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64(0)
        self._check(self._alloc(ctypes.byref(ptr), max(nbytes, 1)), "cuMemAlloc")
        return ptr.value

    def free(self, ptr: int) -> None:
        self._check(self._free(ptr), "cuMemFree")

    def to_device(self, ptr: int, host: object, nbytes: int) -> None:
        self._check(self._htod(ptr, host, nbytes), "cuMemcpyHtoD")

    def to_host(self, host: object, ptr: int, nbytes: int) -> None:
        self._check(self._dtoh(host, ptr, nbytes), "cuMemcpyDtoH")

    def synchronize(self) -> None:
        self._check(self._sync(), "cuCtxSynchronize")
