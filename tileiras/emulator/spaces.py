"""Resolve the addresses of one memory instruction to (buffer, byte offsets), with faults.

State spaces: `global`/`const` (the device heap), `shared` (the CTA's), `local`
(one frame per thread), `kparam` (kernel parameters), `cparam` (per-thread
call parameters), and `generic`, split per lane by the address windows of
`memory.py`. Accesses must be naturally aligned (to the whole vector), as on
hardware; a misaligned or out-of-bounds access is a `DeviceFault`.
"""

from __future__ import annotations

from typing import Any

from .memory import (CTA_OFFSET_MASK, CTA_RANK_SHIFT, AccessFault, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_SIZE, gather,
                     scatter)
from . import banks
from .errors import DeviceFault
from .races import Site

SPACE_ALIASES = {
    "global": "global", "const": "global", "shared": "shared", "shared::cta": "shared",
    "shared::cluster": "shared", "local": "local", "param": "param", "param::entry": "kparam",
    "param::func": "cparam",
}


def _fault(kind: str, space: str, addrs: Any, lanes: Any, i: int, nbytes: int) -> DeviceFault:
    addr = int(addrs[i])
    return DeviceFault(f"{kind} {space} access of {nbytes} bytes at address 0x{addr:x}", int(lanes[i]))


def resolve(st: Any, space: str, addrs: Any, lanes: Any, nbytes: int, align: int) -> list:
    """[(selection or None, buffer, views, byte offsets)] for the lanes' addresses (uint64 array)."""
    import numpy as np

    if align > 1:
        mis = (addrs & np.uint64(align - 1)) != 0
        if mis.any():
            raise _fault("misaligned", space, addrs, lanes, int(np.argmax(mis)), nbytes)
    if space == "generic":
        return _generic(st, addrs, lanes, nbytes)
    return [(None, *_one(st, space, addrs, lanes, nbytes))]


def _one(st: Any, space: str, addrs: Any, lanes: Any, nbytes: int) -> tuple:
    import numpy as np

    if space == "global":
        try:
            offs = st.mem.offsets(addrs, nbytes)
        except AccessFault as f:
            raise _fault("out-of-bounds", "global", addrs, lanes, f.index, nbytes) from None
        return st.mem.buf, st.mem._views, offs
    if space == "shared":
        if st.rank_bits is None:        # one CTA: its shared addresses are offsets in `shared`
            bad = addrs + np.uint64(nbytes) > np.uint64(st.smem_size)
            if bad.any():
                raise _fault("out-of-bounds", "shared", addrs, lanes, int(np.argmax(bad)), nbytes)
            return st.shared, st.shared_views, addrs.astype(np.int64)
        bad = shared_outside(st, addrs, nbytes)
        if bad.any():
            raise _fault("out-of-bounds", "shared", addrs, lanes, int(np.argmax(bad)), nbytes)
        return st.shared, st.shared_views, shared_index(st, addrs)
    if space == "local":
        bad = addrs + np.uint64(nbytes) > np.uint64(st.lsize)
        if bad.any():
            raise _fault("out-of-bounds", "local", addrs, lanes, int(np.argmax(bad)), nbytes)
        return st.local, st.local_views, lanes.astype(np.int64) * st.lsize + addrs.astype(np.int64)
    if space == "kparam":
        bad = addrs + np.uint64(nbytes) > np.uint64(st.kparam.size)
        if bad.any():
            raise _fault("out-of-bounds", "param", addrs, lanes, int(np.argmax(bad)), nbytes)
        return st.kparam, st.kparam_views, addrs.astype(np.int64)
    if space == "cparam":
        bad = addrs + np.uint64(nbytes) > np.uint64(st.csize)
        if bad.any():
            raise _fault("out-of-bounds", "param", addrs, lanes, int(np.argmax(bad)), nbytes)
        return st.cparam, st.cparam_views, lanes.astype(np.int64) * st.csize + addrs.astype(np.int64)
    raise DeviceFault(f"unsupported state space .{space}")


def shared_outside(st: Any, addrs: Any, nbytes: int) -> Any:
    """Which shared (shared::cluster) addresses `addrs` (uint64) leave their CTA's shared memory for an
    access of `nbytes`, or name a CTA the cluster does not have."""
    import numpy as np

    if st.rank_bits is None:
        return addrs + np.uint64(nbytes) > np.uint64(st.smem_size)
    local = addrs & np.uint64(CTA_OFFSET_MASK)
    return (local + np.uint64(nbytes) > np.uint64(st.smem_size)) | \
        ((addrs >> np.uint64(CTA_RANK_SHIFT)) >= np.uint64(st.ncta))


def shared_index(st: Any, addrs: Any) -> Any:
    """Offsets (int64) in the state's shared buffer of shared::cluster addresses: a cluster's CTAs keep
    their shared memories `smem_stride` bytes apart there."""
    import numpy as np

    if st.rank_bits is None:
        return np.asarray(addrs).astype(np.int64)
    addrs = np.asarray(addrs).astype(np.uint64)
    return ((addrs >> np.uint64(CTA_RANK_SHIFT)).astype(np.int64) * st.smem_stride
            + (addrs & np.uint64(CTA_OFFSET_MASK)).astype(np.int64))


def smem_base(st: Any, thread: int) -> int:
    """Where thread `thread`'s CTA's shared memory starts in the state's buffer (what the 14-bit
    addresses of wgmma/tcgen05 descriptors are relative to)."""
    return 0 if st.rank_bits is None else int(st.rank_of[thread]) * st.smem_stride


def _generic(st: Any, addrs: Any, lanes: Any, nbytes: int) -> list:
    import numpy as np

    out = []
    rest = np.ones(addrs.shape, dtype=bool)
    for space, base in (("shared", SHARED_WINDOW), ("local", LOCAL_WINDOW), ("kparam", PARAM_WINDOW)):
        inside = (addrs >= np.uint64(base)) & (addrs < np.uint64(base + WINDOW_SIZE))
        if inside.any():
            sel = np.flatnonzero(inside)
            out.append((sel, *_one(st, space, addrs[sel] - np.uint64(base), lanes[sel], nbytes)))
            rest &= ~inside
    if rest.all():
        return [(None, *_one(st, "global", addrs, lanes, nbytes))]
    if rest.any():
        sel = np.flatnonzero(rest)
        out.append((sel, *_one(st, "global", addrs[sel], lanes[sel], nbytes)))
    return out


def _count_banks(st: Any, site: Site, parts: list, lanes: Any, nbytes: int) -> None:
    """Bank conflicts of the shared-memory part of an access (banks.collecting)."""
    for sel, buf, _, offs in parts:
        if buf is st.shared:
            banks.record(site.line, offs, lanes if sel is None else lanes[sel], nbytes)


def load(st: Any, space: str, addrs: Any, lanes: Any, dtype: Any, nelem: int, site: Site) -> Any:
    """Values (lanes, nelem) of `dtype` read at each lane's address by the instruction `site`."""
    import numpy as np

    nbytes = dtype.itemsize * nelem
    parts = resolve(st, space, addrs, lanes, nbytes, nbytes)
    if st.races is not None:
        st.races.check(st, site, parts, lanes, nbytes)
    if banks.active():
        _count_banks(st, site, parts, lanes, nbytes)
    if len(parts) == 1 and parts[0][0] is None:
        _, buf, views, offs = parts[0]
        return gather(buf, views, offs, dtype, nelem)
    out = np.zeros((addrs.size, nelem), dtype=dtype)
    for sel, buf, views, offs in parts:
        out[sel] = gather(buf, views, offs, dtype, nelem)
    return out


def store(st: Any, space: str, addrs: Any, lanes: Any, dtype: Any, values: Any, site: Site) -> None:
    """Write values (lanes, nelem) of `dtype` at each lane's address by the instruction `site`."""
    nelem = values.shape[1]
    nbytes = dtype.itemsize * nelem
    parts = resolve(st, space, addrs, lanes, nbytes, nbytes)
    if st.races is not None:
        st.races.check(st, site, parts, lanes, nbytes)
    if banks.active():
        _count_banks(st, site, parts, lanes, nbytes)
    for sel, buf, views, offs in parts:
        scatter(buf, views, offs, dtype, values if sel is None else values[sel])
