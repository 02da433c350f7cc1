"""vecops: vector kernels compiled from TileIR by tileiras, launched from Python.

    import numpy as np, vecops
    if vecops.gpu_available():
        c = vecops.vadd(np.ones(1000, np.float32), np.arange(1000, dtype=np.float32))
        y = vecops.vscale(c, 2.0)

Without a CUDA driver or GPU, gpu_available() is False and the kernels raise NoGPUError.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

__all__ = ["NoGPUError", "gpu_available", "vadd", "vscale"]

TILE = 256  # elements per block, fixed when the kernels were exported


class NoGPUError(RuntimeError):
    """No CUDA driver or no GPU: the kernels cannot run here."""


def _load_library() -> ctypes.CDLL:
    here = Path(__file__).resolve().parent
    for pattern in ("_vecops*.so", "_vecops*.dylib", "_vecops*.dll", "_vecops*.pyd"):
        for path in sorted(here.glob(pattern)):
            return ctypes.CDLL(str(path))
    raise ImportError(f"vecops: the compiled kernel library is missing from {here}")


_lib = _load_library()
_lib.vecops_vadd.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32]
_lib.vecops_vscale.argtypes = [ctypes.c_uint32, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32, ctypes.c_float]
_NO_GPU = {_lib.vecops_error_no_driver(): "no CUDA driver", _lib.vecops_error_no_device(): "no CUDA device"}
_driver = None


def _check(rc: int, what: str) -> None:
    if rc in _NO_GPU:
        raise NoGPUError(f"{what}: {_NO_GPU[rc]}")
    if rc != 0:
        raise RuntimeError(f"{what} failed with {rc}")


def gpu_available() -> bool:
    """True when the kernels can run: a launch over empty arrays succeeds."""
    rc = _lib.vecops_vadd(1, 0, 0, 0, 0)
    if rc in _NO_GPU:
        return False
    _check(rc, "vadd probe")
    return True


def _cuda():
    global _driver
    if _driver is None:
        _check(_lib.vecops_vadd(1, 0, 0, 0, 0), "vadd probe")  # loads the driver, makes a context current
        from ._driver import Driver

        _driver = Driver()
    return _driver


def _as_f32(values: object, name: str) -> np.ndarray:
    array = np.ascontiguousarray(values, dtype=np.float32)
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}")
    if array.size >= 2**31:
        raise ValueError(f"{name} is too long for the kernels' 32-bit indices")
    return array


def _run(inputs: list[np.ndarray], launch) -> np.ndarray:
    cuda = _cuda()
    n = inputs[0].size
    out = np.empty(n, dtype=np.float32)
    buffers = [cuda.alloc(a.nbytes) for a in inputs] + [cuda.alloc(out.nbytes)]
    try:
        for buffer, array in zip(buffers, inputs):
            cuda.to_device(buffer, array.ctypes.data, array.nbytes)
        blocks = max(1, (n + TILE - 1) // TILE)
        launch(blocks, buffers, n)
        cuda.synchronize()
        cuda.to_host(out.ctypes.data, buffers[-1], out.nbytes)
    finally:
        for buffer in buffers:
            cuda.free(buffer)
    return out


def vadd(a: object, b: object) -> np.ndarray:
    """a + b, element-wise, on the GPU (float32)."""
    x, y = _as_f32(a, "a"), _as_f32(b, "b")
    if x.size != y.size:
        raise ValueError(f"a and b differ in length: {x.size} vs {y.size}")
    return _run([x, y], lambda blocks, p, n: _check(_lib.vecops_vadd(blocks, p[0], p[1], p[2], n), "vadd"))


def vscale(x: object, alpha: float) -> np.ndarray:
    """alpha * x, element-wise, on the GPU (float32)."""
    v = _as_f32(x, "x")
    return _run([v], lambda blocks, p, n: _check(_lib.vecops_vscale(blocks, p[0], p[1], n, float(alpha)), "vscale"))
