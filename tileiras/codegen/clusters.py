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
    for info in clustered:
        x, y, z = info.cta_cluster
        cut = kernel_header_end(ptx, info.name)
        ptx = ptx[:cut] + f".reqnctapercluster {x}, {y}, {z}\n.blocksareclusters\n" + ptx[cut:]
    return at_least_version(ptx, (9, 0))


def kernel_header_end(ptx: str, name: str) -> int:
    """Where a directive may go in kernel `name`'s header: after its `.minnctapersm` line."""
    from ..errors import CompileError

    entry = re.search(rf"^\.visible \.entry {re.escape(name)}\(", ptx, re.MULTILINE)
    body = ptx.find("\n{", entry.end()) if entry else -1
    header = ptx[entry.end():body] if entry and body > 0 else ""
    where = header.rfind(".minnctapersm")
    if where < 0:
        raise CompileError(f"error: internal: no kernel header for '{name}' in the PTX")
    return ptx.index("\n", entry.end() + where) + 1   # type: ignore[union-attr]


def at_least_version(ptx: str, version: tuple[int, int]) -> str:
    """`ptx` declaring PTX ISA `version` where it declares an older one."""
    found = _VERSION.search(ptx)
    if found and (int(found.group(1)), int(found.group(2))) < version:
        ptx = ptx[:found.start()] + f".version {version[0]}.{version[1]}" + ptx[found.end():]
    return ptx
