"""Cluster directives in a kernel's PTX (what LLVM's NVPTX of LLVM 20 cannot say).

A kernel split over a cluster (tileaa/clusters.py) is launched as NVIDIA's are: one block per tile
block, each block becoming a cluster of CTAs. The PTX says so after `.minnctapersm`:
`.reqnctapercluster X, Y, Z` and `.blocksareclusters` (PTX ISA 9.0; ptxas then writes
`EIATTR_CTA_PER_CLUSTER` and `EIATTR_BLOCKS_ARE_CLUSTERS` into `.nv.info`, and the driver makes
each block of the launch grid a cluster).
"""

from __future__ import annotations

import re
from typing import Any

_VERSION = re.compile(r"^\.version ([0-9]+)\.([0-9]+)$", re.MULTILINE)


def declare_clusters(ptx: str, meta: Any) -> str:
    """`ptx` with the cluster directives of each kernel of `meta` (ModuleMetadata) that has one."""
    clustered = [k for k in getattr(meta, "kernels", ()) if tuple(getattr(k, "cta_cluster", (1, 1, 1))) != (1, 1, 1)]
    if not clustered:
        return ptx
    from ..errors import CompileError

    for info in clustered:
        x, y, z = info.cta_cluster
        entry = re.search(rf"^\.visible \.entry {re.escape(info.name)}\(", ptx, re.MULTILINE)
        body = ptx.find("\n{", entry.end()) if entry else -1
        header = ptx[entry.end():body] if entry and body > 0 else ""
        where = header.rfind(".minnctapersm")
        if where < 0:
            raise CompileError(f"error: internal: no kernel header for '{info.name}' in the PTX")
        cut = ptx.index("\n", entry.end() + where) + 1   # type: ignore[union-attr]
        ptx = ptx[:cut] + f".reqnctapercluster {x}, {y}, {z}\n.blocksareclusters\n" + ptx[cut:]
    found = _VERSION.search(ptx)
    if found and (int(found.group(1)), int(found.group(2))) < (9, 0):
        ptx = ptx[:found.start()] + ".version 9.0" + ptx[found.end():]
    return ptx
