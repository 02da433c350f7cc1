"""The compile pipeline: a visible list of stages, each from one artifact to the next.

    input bytes -> cuda_tile module -> LLVM IR -> PTX -> cubin -> fatbin -> host object

The driver only orchestrates: each arrow is one function in its own module.
PTX and cubins go through the content-addressed cache, keyed on everything
that can change them (see `tileiras.cache`).
"""

from __future__ import annotations

import hashlib
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Optional

from .errors import ExitCode, TileirasError
from .options import Options

TILEIR_MAGIC = b"\x7fTileIR\x00"


@dataclass
class Artifacts:
    """What one compile produced, per target."""

    llvm: dict[str, str] = field(default_factory=dict)
    ptx: dict[str, str] = field(default_factory=dict)
    cubin: dict[str, bytes] = field(default_factory=dict)
    metadata: dict[str, object] = field(default_factory=dict)   # gpu -> ModuleMetadata
    inputs_read: list[str] = field(default_factory=list)


class StageTimer:
    """`--time-passes`: wall time of each stage, printed to stderr at the end."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.rows: list[tuple[str, float]] = []

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.enabled:
                self.rows.append((name, time.perf_counter() - start))

    def report(self) -> None:
        if not self.enabled or not self.rows:
            return
        total = sum(t for _, t in self.rows)
        print("===-------------------------------------------------------------------------===", file=sys.stderr)
        print("                          tileiras stage timing report", file=sys.stderr)
        print(f"  Total Execution Time: {total:.4f} seconds", file=sys.stderr)
        for name, seconds in self.rows:
            print(f"  {seconds:9.4f}s  {name}", file=sys.stderr)


def input_kind(data: bytes, path: str) -> str:
    """'bytecode', 'ptx' or 'text' (MLIR bytecode and junk are rejected by the front end)."""
    if data.startswith(TILEIR_MAGIC):
        return "bytecode"
    if path.endswith(".ptx"):
        return "ptx"
    if path.endswith(".mlir"):
        return "text"
    head = data[:4096]
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return "bytecode"  # let the bytecode reader give the precise diagnostic
    stripped = text.lstrip()
    if stripped.startswith((".version", "//")) and ".target" in text:
        return "ptx"
    if stripped.startswith(("cuda_tile.", "module", "entry", "global", "#", "//", "!", "func", "\"")) or not stripped:
        return "text" if stripped else "bytecode"
    return "bytecode"


def lower_to_llvm(module: object, gpu: str, opts: Options) -> tuple[str, object]:
    from ..lowering.pipeline import lower_module

    return lower_module(module, gpu=gpu, opt_level=opts.opt_level, lineinfo=opts.lineinfo or opts.device_debug,
                        debug=opts.device_debug, print_ir_after_all=opts.print_ir_after_all)


def compile_input(data: bytes, path: str, opts: Options, timer: StageTimer) -> Artifacts:
    """Run every stage the requested output needs, for every requested target."""
    arts = Artifacts(inputs_read=[path, *opts.libraries])
    kind = input_kind(data, path)
    want = opts.emit_kind
    gpus = list(dict.fromkeys(opts.gpu_names))  # keep order, drop repeats
    cache = CompileCache.open(opts)

    if kind == "ptx":
        if want in ("llvm",):
            raise TileirasError("error: a PTX input can only be assembled (--emit=cubin, fatbin or obj)",
                                ExitCode.INVALID_OPTIONS)
        text = data.decode("utf-8", errors="replace")
        for gpu in gpus:
            arts.ptx[gpu] = text
        meta_path = path + ".json"
        arts.metadata = _read_sidecar_metadata(meta_path, gpus, arts)
    else:
        from ..frontend import load_module

        with timer.stage("read + verify"):
            module = load_module(data, path)
        source_digest = hashlib.sha256(data).hexdigest()
        for gpu in gpus:
            key = cache.ptx_key(source_digest, gpu, opts)
            cached = cache.get_ptx(key) if want != "llvm" else None
            if cached is not None:
                arts.ptx[gpu], arts.metadata[gpu] = cached
                continue
            with timer.stage(f"lower to LLVM IR ({gpu})"):
                llvm_ir, meta = lower_to_llvm(module, gpu, opts)
            arts.llvm[gpu] = llvm_ir
            arts.metadata[gpu] = meta
            if want == "llvm":
                continue
            from ..codegen.nvptx import llvm_to_ptx

            with timer.stage(f"LLVM -> PTX ({gpu})"):
                arts.ptx[gpu] = llvm_to_ptx(llvm_ir, gpu, opts.opt_level, debug=opts.device_debug)
            cache.put_ptx(key, arts.ptx[gpu], meta)

    if want in ("cubin", "fatbin", "obj"):
        from ..codegen.ptxas import assemble

        for gpu in gpus:
            key = cache.cubin_key(arts.ptx[gpu], gpu, opts)
            cubin = cache.get_blob(key)
            if cubin is None:
                with timer.stage(f"ptxas ({gpu})"):
                    cubin = assemble(arts.ptx[gpu], gpu, opts.opt_level, lineinfo=opts.lineinfo,
                                     debug=opts.device_debug)
                cache.put_blob(key, cubin)
            arts.cubin[gpu] = cubin
    return arts


class CompileCache:
    """The driver's view of the content-addressed cache: PTX (+ metadata) and cubins.

    The PTX key covers the module bytes and every option that changes the
    PTX; the cubin key covers the PTX text and the ptxas-level options, so a
    ptxas-only change reuses the cached PTX.
    """

    def __init__(self, store: object | None) -> None:
        self.store = store

    @classmethod
    def open(cls, opts: Options) -> "CompileCache":
        if opts.no_cache:
            return cls(None)
        import os
        from pathlib import Path

        from ..cache import Cache, default_cache_dir

        root = Path(opts.cache_dir) if opts.cache_dir else default_cache_dir()
        max_bytes = int(os.environ.get("TILEIRAS_CACHE_MAX_BYTES", str(2 << 30)))
        return cls(Cache(root, max_bytes))

    def ptx_key(self, source_digest: str, gpu: str, opts: Options) -> str:
        from .. import __version__
        from ..cache import make_key

        return make_key(kind="ptx", source=source_digest, gpu=gpu, opt_level=opts.opt_level,
                        lineinfo=opts.lineinfo, debug=opts.device_debug, sanitize=opts.sanitize or "",
                        tileiras=__version__, llvm=_llvm_version())

    def cubin_key(self, ptx: str, gpu: str, opts: Options) -> str:
        from ..cache import make_key
        from ..codegen.ptxas import ptxas_version

        return make_key(kind="cubin", ptx=hashlib.sha256(ptx.encode()).hexdigest(), gpu=gpu,
                        opt_level=opts.opt_level, lineinfo=opts.lineinfo, debug=opts.device_debug,
                        ptxas=ptxas_version())

    def get_ptx(self, key: str) -> tuple[str, object] | None:
        blob = self.get_blob(key)
        if blob is None:
            return None
        import json

        from ..codegen.metadata import ModuleMetadata

        try:
            entry = json.loads(blob)
            return entry["ptx"], ModuleMetadata.from_json(entry["metadata"])
        except (ValueError, KeyError, TypeError, TileirasError):
            return None  # an unreadable entry is a miss; the compile rewrites it

    def put_ptx(self, key: str, ptx: str, meta: object) -> None:
        import json

        self.put_blob(key, json.dumps({"ptx": ptx, "metadata": meta.to_json()}, sort_keys=True).encode())  # type: ignore[attr-defined]

    def get_blob(self, key: str) -> bytes | None:
        return self.store.get(key) if self.store is not None else None  # type: ignore[attr-defined]

    def put_blob(self, key: str, data: bytes) -> None:
        if self.store is not None:
            self.store.put(key, data)  # type: ignore[attr-defined]


def _llvm_version() -> str:
    """The llvmlite release (it pins one LLVM), read without importing llvmlite."""
    from importlib.metadata import version

    return "llvmlite-" + version("llvmlite")


def _read_sidecar_metadata(meta_path: str, gpus: list[str], arts: Artifacts) -> dict[str, object]:
    """A PTX input's launch metadata, from the `.json` the PTX compile wrote beside it."""
    import os

    if not os.path.exists(meta_path):
        return {}
    from ..codegen.metadata import ModuleMetadata

    with open(meta_path, encoding="utf-8") as handle:
        meta = ModuleMetadata.from_json(handle.read())
    arts.inputs_read.append(meta_path)
    return {gpu: meta for gpu in gpus}


def newest_gpu(gpus: list[str]) -> str:
    return max(gpus, key=lambda g: int(g.split("_")[1]))


def render_output(arts: Artifacts, opts: Options) -> bytes | str:
    """The bytes of the requested output kind."""
    kind = opts.emit_kind
    gpus = list(dict.fromkeys(opts.gpu_names))
    if kind == "llvm":
        return arts.llvm[gpus[0]]
    if kind == "ptx":
        return arts.ptx[gpus[0]]
    if kind == "cubin":
        return arts.cubin[gpus[0]]
    from ..codegen.fatbin import make_fatbin

    newest = newest_gpu(gpus)
    fatbin = make_fatbin(arts.cubin, {newest: arts.ptx[newest]})
    if kind == "fatbin":
        return fatbin
    from ..codegen.host_object import make_host_object

    if not arts.metadata:
        raise TileirasError("error: an object needs launch metadata: compile from TileIR, or keep the PTX's "
                            ".json beside it", ExitCode.COMPILE_FAILED)
    return make_host_object(fatbin, arts.metadata[newest], opts.host_arch, opts.host_os)
