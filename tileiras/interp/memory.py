"""The interpreter's global memory: a flat 64-bit byte address space.

Allocations are numpy byte buffers placed at increasing, 256-byte aligned
addresses with unmapped gaps between them, so a pointer is a plain integer:
pointer arithmetic, `ptr_to_int`/`int_to_ptr`, strided views, gathers and
aliasing behave as on a GPU, and an access outside every allocation is a
`MemoryFault` naming the address instead of silent corruption.

The protocol `alloc(nbytes) -> address`, `write(address, bytes)`,
`read(address, n) -> bytes` is the one every backend's memory offers (see
`tileiras.runtime`), so argument marshalling is shared.
"""

from __future__ import annotations

import bisect
from typing import Optional

import numpy as np

from .errors import MemoryFault

BASE_ADDRESS = 1 << 32        # above 4 GiB: a pointer truncated to 32 bits faults
GUARD = 1 << 12               # unmapped bytes between allocations
ALIGN = 256                   # cudaMalloc's alignment


class Memory:
    def __init__(self) -> None:
        self._bases: list[int] = []
        self._bufs: list[np.ndarray] = []
        self._next = BASE_ADDRESS

    # -- the backend protocol ----------------------------------------------------
    def alloc(self, nbytes: int, align: int = ALIGN) -> int:
        align = max(ALIGN, int(align))
        base = (self._next + align - 1) // align * align
        self._bases.append(base)
        self._bufs.append(np.zeros(max(0, int(nbytes)), np.uint8))
        self._next = base + max(1, int(nbytes)) + GUARD
        return base

    def free(self, address: int) -> None:
        i = bisect.bisect_left(self._bases, address)
        if i < len(self._bases) and self._bases[i] == address:
            del self._bases[i]
            del self._bufs[i]

    def write(self, address: int, data: bytes) -> None:
        buf, off = self._span(address, len(data))
        buf[off:off + len(data)] = np.frombuffer(bytes(data), np.uint8)

    def read(self, address: int, n: int) -> bytes:
        buf, off = self._span(address, n)
        return buf[off:off + n].tobytes()

    # -- vectorised access -----------------------------------------------------------
    def _span(self, address: int, n: int) -> tuple[np.ndarray, int]:
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0:
            off = address - self._bases[i]
            if off + n <= self._bufs[i].size:
                return self._bufs[i], off
        raise MemoryFault(f"invalid memory access of {n} bytes at address {address:#x}")

    def _locate(self, addrs: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Allocation index and byte offset of each address; faults on any bad one."""
        bases = np.asarray(self._bases, np.uint64)
        idx = np.searchsorted(bases, addrs, side="right").astype(np.int64) - 1
        ok = idx >= 0
        safe = np.where(ok, idx, 0)
        offs = (addrs - bases[safe]).astype(np.int64) if len(bases) else np.zeros(addrs.shape, np.int64)
        sizes = np.asarray([b.size for b in self._bufs], np.int64)
        if len(sizes):
            ok &= offs + size <= sizes[safe]
        if not ok.all():
            bad = int(addrs[~ok][0])
            raise MemoryFault(f"invalid memory access of {size} bytes at address {bad:#x} "
                              f"({int((~ok).sum())} of {addrs.size} elements out of bounds)")
        return safe, offs

    def load(self, addrs: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Elements of `dtype` at each address (a flat uint64 array)."""
        addrs = np.asarray(addrs, np.uint64).reshape(-1)
        dtype = np.dtype(dtype)
        size = dtype.itemsize
        if addrs.size == 0:
            return np.zeros(0, dtype)
        which, offs = self._locate(addrs, size)
        out = np.empty(addrs.size, dtype)
        for i in np.unique(which):
            sel = which == i
            out[sel] = self._gather(self._bufs[int(i)], offs[sel], dtype)
        return out

    def store(self, addrs: np.ndarray, values: np.ndarray) -> None:
        """Store values (in order: a later duplicate address wins)."""
        addrs = np.asarray(addrs, np.uint64).reshape(-1)
        values = np.ascontiguousarray(np.asarray(values).reshape(-1))
        if addrs.size == 0:
            return
        size = values.dtype.itemsize
        which, offs = self._locate(addrs, size)
        raw = values.view(np.uint8).reshape(-1, size)
        for i in np.unique(which):
            sel = which == i
            buf = self._bufs[int(i)]
            o = offs[sel]
            if size > 1 and (o % size == 0).all() and buf.size >= size:
                typed = buf[: buf.size // size * size].view(values.dtype)
                typed[o // size] = values[sel]
            else:
                buf[(o[:, None] + np.arange(size)).reshape(-1)] = raw[sel].reshape(-1)

    @staticmethod
    def _gather(buf: np.ndarray, offs: np.ndarray, dtype: np.dtype) -> np.ndarray:
        size = dtype.itemsize
        if size == 1:
            return buf[offs].view(dtype)
        if (offs % size == 0).all():
            typed = buf[: buf.size // size * size].view(dtype)
            return typed[offs // size]
        raw = buf[(offs[:, None] + np.arange(size)).reshape(-1)]
        return raw.view(dtype)

    def load_bytes(self, addrs: np.ndarray) -> np.ndarray:
        return self.load(addrs, np.dtype(np.uint8))

    def store_bytes(self, addrs: np.ndarray, values: np.ndarray) -> None:
        self.store(addrs, np.asarray(values, np.uint8))

    def allocation_of(self, address: int) -> Optional[tuple[int, int]]:
        """(base, size) of the allocation holding `address`, or None."""
        i = bisect.bisect_right(self._bases, address) - 1
        if i >= 0 and address - self._bases[i] < max(1, self._bufs[i].size):
            return self._bases[i], self._bufs[i].size
        return None
