"""cubins + PTX + launch metadata -> fatbin -> host object, through the cache.

The driver's object output and `tileir package` both come here, so a fresh
build directory with a warm cache never runs LLVM for the launchers again.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..codegen.metadata import ModuleMetadata


def package_object(cubins: Mapping[str, bytes], ptx: Mapping[str, str], metas: Sequence[ModuleMetadata],
                   host_arch: str, host_os: str, cache: Any = None) -> tuple[bytes, bytes]:
    """(fatbin, host object); `cache` is a `tileiras.cache.store.Cache` or None."""
    from ..codegen.fatbin import make_fatbin

    fatbin = make_fatbin(cubins, ptx)
    key = None
    from ..cache.store import NullCache

    if cache is not None and not isinstance(cache, NullCache):
        from ..cache.keys import Key, object_key

        key = Key(object_key, fatbin, list(metas), host_arch, host_os, cache.root)
        hit = cache.get(key)
        if hit is not None:
            return fatbin, hit
    from ..codegen.host_object import make_host_object

    obj = make_host_object(fatbin, list(metas), host_arch, host_os)
    if key is not None:
        cache.put(key, obj)
    return fatbin, obj
