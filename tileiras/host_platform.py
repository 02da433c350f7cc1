"""The machine this compiler runs on, as far as its outputs depend on it.

A TMA kernel's cubin carries `.nv.host`: host code the CUDA driver runs at launch to fill the
kernel's tensor maps (codegen/nv_host.py). We make it for x86-64 Linux only (the object format and
calling convention NVIDIA's objects were checked against), and NVIDIA's compiler makes it for the
host it runs on, so elsewhere (aarch64 Grace machines, Windows) kernels keep cp.async. The PTX thus
depends on the host, and the compile cache's keys name it. Light on purpose: a cache hit imports it.
"""

from __future__ import annotations

import os
import sys


def host_tag() -> str:
    """e.g. 'linux-x86_64'."""
    machine = os.uname().machine if hasattr(os, "uname") else os.environ.get("PROCESSOR_ARCHITECTURE", "")
    return f"{sys.platform}-{machine.lower() or 'unknown'}"


def tma_callback_unsupported() -> str:
    """Why cubins made here cannot carry the TMA callback ("" when they can)."""
    tag = host_tag()
    if tag == "linux-x86_64":
        return ""
    return f"the .nv.host callback that fills tensor maps is made for x86-64 Linux hosts only, not {tag}"
