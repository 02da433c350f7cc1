"""Device memory: the global heap (`Memory`), address windows, and typed gathers/scatters.

Global (and `.const`) data lives in one growable byte buffer at device
addresses from `GLOBAL_BASE` up. Every allocation is followed by a guard gap,
so an access one element past the end of a buffer faults instead of silently
touching the next buffer. Shared and local memory belong to a CTA (see
`executor.py`); generic addresses reach them through fixed windows, the way
`cvta` maps them on hardware.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from .errors import EmulatorError

GLOBAL_BASE = 0x7000_0000_0000
PARAM_WINDOW = 0x4000_0000_0000     # generic addresses of kernel parameters (cvta.param)
SHARED_WINDOW = 0x5000_0000_0000    # generic addresses of the CTA's shared memory
LOCAL_WINDOW = 0x6000_0000_0000     # generic addresses of the thread's local memory
WINDOW_SIZE = 1 << 32
# shared::cluster addresses: the CTA's rank in the cluster from this bit up, its offset below, as on the GPU
# (a CTA's own shared addresses carry its rank too: CUTLASS's peer-bit mask 0xFEFFFFFF turns an odd CTA's
# mbarrier address into the same mbarrier of the even CTA of its pair)
CTA_RANK_SHIFT = 24
CTA_OFFSET_MASK = (1 << CTA_RANK_SHIFT) - 1
GUARD_BYTES = 256                   # unmapped gap after every allocation


class Memory:
    """The device's global memory.

    `alloc(nbytes, align)` returns a device address; `write`/`read` copy bytes
    in and out and must stay inside one allocation.
    """

    def __init__(self, capacity: int = 1 << 16) -> None:
        import numpy as np

        self._np = np
        self.buf = np.zeros(max(capacity, 1 << 12), dtype=np.uint8)
        self._top = GLOBAL_BASE
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._arrays: tuple[Any, Any] | None = None
        self._views: dict[Any, Any] = {}
        self.host_written: list[tuple[int, int]] = []   # (start, end) of each host write: its data, not a kernel's

    # -- host interface --------------------------------------------------
    def alloc(self, nbytes: int, align: int = 256) -> int:
        if nbytes < 0:
            raise EmulatorError(f"cannot allocate {nbytes} bytes")
        if align <= 0 or align & (align - 1):
            raise EmulatorError(f"allocation alignment {align} is not a power of two")
        align = max(align, 16)
        start = (self._top + align - 1) & ~(align - 1)
        end = start + nbytes
        self._ensure(end - GLOBAL_BASE + GUARD_BYTES)
        self._starts.append(start)
        self._ends.append(end)
        self._arrays = None
        self._top = end + GUARD_BYTES
        return start

    def write(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        self._check_host(addr, len(data), "write")
        off = addr - GLOBAL_BASE
        self.buf[off:off + len(data)] = self._np.frombuffer(data, dtype=self._np.uint8)
        self.host_written.append((addr, addr + len(data)))

    def from_host(self, addr: int, n: int) -> bool:
        """Whether the host wrote bytes addr .. addr + n (a tensor map it made, which needs no proxy fence)."""
        return any(a <= addr and addr + n <= b for a, b in self.host_written)

    def read(self, addr: int, n: int) -> bytes:
        self._check_host(addr, n, "read")
        off = addr - GLOBAL_BASE
        return self.buf[off:off + n].tobytes()

    def allocations(self) -> list[tuple[int, int]]:
        """(start, size) of every allocation, in address order."""
        return [(s, e - s) for s, e in zip(self._starts, self._ends)]

    # -- device side -------------------------------------------------------
    def _ensure(self, nbytes: int) -> None:
        if nbytes <= self.buf.size:
            return
        size = self.buf.size
        while size < nbytes:
            size *= 2
        size = (size + 15) & ~15
        grown = self._np.zeros(size, dtype=self._np.uint8)
        grown[:self.buf.size] = self.buf
        self.buf = grown
        self._views = {}

    def _check_host(self, addr: int, n: int, what: str) -> None:
        i = bisect_right(self._starts, addr) - 1
        if n < 0 or i < 0 or addr + n > self._ends[i]:
            raise EmulatorError(f"host {what} of {n} bytes at 0x{addr:x} is outside every allocation")

    def view(self, dtype: Any) -> Any:
        v = self._views.get(dtype)
        if v is None:
            v = self._views[dtype] = self.buf.view(dtype)
        return v

    def offsets(self, addrs: Any, size: int) -> Any:
        """Byte offsets into `buf` of `addrs` (uint64), or the index of the first bad lane (as an error)."""
        np = self._np
        if self._arrays is None:
            self._arrays = (np.array(self._starts, dtype=np.uint64), np.array(self._ends, dtype=np.uint64))
        starts, ends = self._arrays
        if starts.size == 0:
            raise AccessFault(0)
        idx = np.searchsorted(starts, addrs, side="right") - 1
        ok = (idx >= 0) & (addrs + np.uint64(size) <= ends[np.maximum(idx, 0)])
        if not ok.all():
            raise AccessFault(int(np.argmin(ok)))
        return (addrs - np.uint64(GLOBAL_BASE)).astype(np.int64)


class AccessFault(Exception):
    """Raised by the bounds checks with the index (into the access's lanes) of the first bad lane."""

    def __init__(self, index: int, kind: str = "out-of-bounds") -> None:
        super().__init__(index)
        self.index = index
        self.kind = kind


def gather(buf: Any, views: dict, byte_off: Any, dtype: Any, nelem: int) -> Any:
    """Read `nelem` consecutive `dtype` values at each (aligned) byte offset: shape (lanes, nelem)."""
    import numpy as np

    typed = views.get(dtype)
    if typed is None:
        typed = views[dtype] = buf.view(dtype)
    idx = byte_off // dtype.itemsize
    if nelem == 1:
        return typed[idx][:, None]
    return typed[idx[:, None] + np.arange(nelem)]


def scatter(buf: Any, views: dict, byte_off: Any, dtype: Any, values: Any) -> None:
    """Write values (lanes, nelem) of `dtype` at each byte offset; the highest lane wins a conflict."""
    import numpy as np

    typed = views.get(dtype)
    if typed is None:
        typed = views[dtype] = buf.view(dtype)
    idx = byte_off // dtype.itemsize
    nelem = values.shape[1]
    if nelem == 1:
        typed[idx] = values[:, 0]
    else:
        typed[idx[:, None] + np.arange(nelem)] = values
