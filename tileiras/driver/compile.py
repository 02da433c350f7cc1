"""The compile pipeline: a visible list of stages, each from one artifact to the next.

    input bytes -> cuda_tile module -> LLVM IR -> PTX -> cubin -> fatbin -> host object

The driver only orchestrates: each arrow is one function in its own module.
PTX and cubins go through the content-addressed cache, keyed on everything
that can change them (see `tileiras.cache`).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager

from ..errors import ExitCode, TileirasError
from .options import Options

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Callable, Iterator, Optional

TILEIR_MAGIC = b"\x7fTileIR\x00"


class Metadata(dict):
    """gpu -> ModuleMetadata. A cached PTX's metadata is kept as its JSON and parsed when first asked
    for: a cubin needs none, and parsing it would cost a cache hit the json module's import."""

    def __getitem__(self, gpu: str) -> object:
        value = dict.__getitem__(self, gpu)
        if isinstance(value, bytes):
            from ..codegen.metadata import ModuleMetadata

            value = ModuleMetadata.from_json(value)
            self[gpu] = value
        return value


class Artifacts:
    """What one compile produced, per target."""

    def __init__(self, inputs_read: list[str]) -> None:
        self.llvm: dict[str, str] = {}
        self.ptx: dict[str, str] = {}
        self.cubin: dict[str, bytes] = {}
        self.metadata: dict[str, object] = Metadata()   # gpu -> ModuleMetadata
        self.inputs_read = inputs_read
        self.cache: object = None               # the Cache this compile used; None with --no-cache
        self.remarks: dict[str, list] = {}      # gpu -> Remarks (tileiras/remarks.py), when asked for


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


def lower_to_llvm(module: object, gpu: str, opts: Options, timer: Optional[StageTimer] = None) -> tuple[str, object]:
    from ..codegen.param_names import name_params
    from ..lowering.pipeline import lower_module

    llvm_ir, meta = lower_module(module, gpu=gpu, opt_level=opts.opt_level, lineinfo=opts.lineinfo or
                                 opts.device_debug, debug=opts.device_debug,
                                 print_ir_after_all=opts.print_ir_after_all, timer=timer)
    return llvm_ir, name_params(meta, module)  # the launchers' parameters, named as the kernel uses them


def compile_input(data: bytes, path: str, opts: Options, timer: StageTimer) -> Artifacts:
    """Run every stage the requested output needs, for every requested target."""
    arts = Artifacts(inputs_read=[path, *opts.libraries])
    kind = input_kind(data, path)
    want = opts.emit_kind
    gpus = list(dict.fromkeys(opts.gpu_names))  # keep order, drop repeats
    # keys cost a version probe of LLVM and ptxas: skip them when off; an IR dump asks for the
    # passes to run, so a cached result would print nothing
    caching = not opts.no_cache and not opts.print_ir_after_all
    # The LLVM worker first, before the cache is imported or looked at: LLVM loading on the other core
    # is the longest stage of a miss, so nothing the cache does may delay its start (a hit discards it).
    # It is kept to build the TMA kernels' .nv.host objects.
    worker = _start_worker(caching) if kind != "ptx" and want != "llvm" else None
    try:
        cache = None
        if caching:  # --no-cache skips the cache module altogether (it is not free to import)
            from ..cache.store import open_cache

            # keys are made while the compile waits, entries written after the output (run() flushes)
            cache = arts.cache = open_cache(opts.cache_dir, defer_writes=True)
        worker = _compile_or_read(data, path, kind, gpus, want, opts, cache, arts, timer, worker)
        if want in ("cubin", "fatbin", "obj"):
            _assemble_all(gpus, opts, cache, arts, timer, worker)
    finally:
        if worker is not None:
            worker.close()
    return arts


def _compile_or_read(data: bytes, path: str, kind: str, gpus: list[str], want: str, opts: Options, cache: object,
                     arts: Artifacts, timer: StageTimer, worker: object) -> object:
    """PTX per target, from a PTX input or the module; the LLVM worker if it is still needed."""
    if kind == "ptx":
        if want in ("llvm",):
            raise TileirasError("error: a PTX input can only be assembled (--emit=cubin, fatbin or obj)",
                                ExitCode.INVALID_OPTIONS)
        text = data.decode("utf-8", errors="replace")
        for gpu in gpus:
            arts.ptx[gpu] = text
        meta_path = path + ".json"
        arts.metadata = _read_sidecar_metadata(meta_path, gpus, arts)
        return None
    return _compile_module(data, path, kind, gpus, want, opts, cache, arts, timer, worker)


def _assemble_all(gpus: list[str], opts: Options, cache: object, arts: Artifacts, timer: StageTimer,
                  worker: object = None) -> None:
    """A cubin per target: cached, or from ptxas, several targets' ptxas running at once."""
    from collections import deque

    from ..codegen.ptxas import PendingCubin, parallel_runs

    cubins: dict[str, bytes] = {}
    keys: dict[str, object] = {}  # gpu -> cache.keys.Key
    maps = {gpu: _tensor_maps(arts, gpu) for gpu in gpus}
    if cache is not None:
        from ..cache.keys import Key, cubin_key

        for gpu in gpus:
            keys[gpu] = Key(cubin_key, arts.ptx[gpu], gpu, opts, (), maps[gpu])
            hit = cache.get_blob(keys[gpu])  # type: ignore[attr-defined]
            if hit is not None:
                cubins[gpu] = hit
    if opts.remarks_enabled and cache is not None:  # ptxas's report of a cached cubin is cached beside it
        from ..cache.remarks import cached

        reports = {g: cached(cache, keys[g]) for g in cubins}
        cubins = {g: c for g, c in cubins.items() if reports[g] is not None}
        for gpu in cubins:
            arts.remarks.setdefault(gpu, []).extend(reports[gpu] or [])
    for gpu in cubins:   # a cached cubin's ptxas warnings, as the compile that made it printed them
        warned = cache.peek(_warnings_key(keys[gpu]))  # type: ignore[attr-defined]
        if warned:
            print(warned.decode("utf-8", errors="replace"), file=sys.stderr)
    todo = [g for g in gpus if g not in cubins]
    verbose = ("-v",) if opts.remarks_enabled else ()
    if todo:
        window = parallel_runs()
        running: deque[tuple[str, PendingCubin]] = deque()
        with timer.stage(f"ptxas ({', '.join(todo)})"):
            try:
                for gpu in todo:
                    if len(running) >= window:
                        _finish(*running.popleft(), cubins, opts, cache, keys, arts)
                    running.append((gpu, PendingCubin(arts.ptx[gpu], gpu, opts.opt_level, lineinfo=opts.lineinfo,
                                                      debug=opts.device_debug, extra=verbose,
                                                      nv_host=_nv_host(arts.ptx[gpu], gpu, maps[gpu], worker,
                                                                       arts.metadata.get(gpu)))))
                if cache is not None:
                    cache.idle()  # type: ignore[attr-defined]  # the keys of the misses, while ptxas runs
                while running:
                    _finish(*running.popleft(), cubins, opts, cache, keys, arts)
            finally:
                for _, run in running:  # after a failure: stop the others
                    run.cancel()
        if cache is not None:
            for gpu in todo:
                cache.put_blob(keys[gpu], cubins[gpu])  # type: ignore[attr-defined]
    for gpu in gpus:  # target order, as the fatbin and the object list them
        arts.cubin[gpu] = cubins[gpu]


def _warnings_key(key: object) -> object:
    """The cache key of ptxas's warnings about the cubin stored under `key` (kept only where there were
    any, and looked up locally only: a hit costs no remote request for them)."""
    from ..cache.keys import Key, make_key

    return Key(lambda of: make_key(stage="ptxas-warnings", of=of), key)


def _tensor_maps(arts: Artifacts, gpu: str) -> Optional[dict[str, list]]:
    """kernel -> its hidden tensor maps (codegen.tma_params.TmaParam), when the target's PTX has
    any; None otherwise (most PTX: its metadata then stays unparsed, as a cache hit wants)."""
    if ".hidden" not in arts.ptx[gpu]:
        return None
    if gpu not in arts.metadata:
        raise TileirasError("error: the PTX has hidden tensor-map parameters: assembling it needs its launch "
                            "metadata (the .json that --emit-metadata wrote beside it)", ExitCode.COMPILE_FAILED)
    kernels = arts.metadata[gpu].kernels  # type: ignore[attr-defined]
    maps = {k.name: list(k.tma) for k in kernels if k.tma or k.workspace}   # (the workspace: its PTX says)
    return maps or None


def _nv_host(ptx: str, gpu: str, maps: Optional[dict[str, list]], worker: object, meta: object) -> Optional[bytes]:
    """The `.nv.host` object ptxas embeds, through which the driver fills the tensor maps at launch
    and gives the kernels that make their own a workspace (compiled by the LLVM worker when there is
    one: LLVM is loaded there already)."""
    if maps is None:
        return None
    from ..codegen.metadata import sm_number
    from ..codegen.nv_host import for_ptx

    workspace = {k.name: k.workspace for k in meta.kernels}  # type: ignore[attr-defined]
    return for_ptx(ptx, maps, sm_number(gpu), worker, workspace)


def _finish(gpu: str, run: object, cubins: dict[str, bytes], opts: Options, cache: object, keys: dict[str, str],
            arts: Artifacts) -> None:
    """One ptxas run's cubin; with remarks on, its resource report too (kept in the cache)."""
    cubins[gpu] = run.result()  # type: ignore[attr-defined]
    if cache is not None and run.warnings:  # type: ignore[attr-defined]
        cache.put_blob(_warnings_key(keys[gpu]), run.warnings.encode("utf-8"))  # type: ignore[attr-defined]
    if opts.remarks_enabled:
        from ..cache.remarks import keep
        from ..remarks import from_ptxas_log

        found = from_ptxas_log(run.info)  # type: ignore[attr-defined]
        arts.remarks.setdefault(gpu, []).extend(found)
        if cache is not None:
            keep(cache, keys[gpu], found)


def _source_digest(data: bytes, kind: str, opts: Options) -> str:
    """What the PTX depends on in the input: locations count only with line info or -g."""
    keep_locations = opts.lineinfo or opts.device_debug
    if kind == "bytecode":
        from ..bytecode.sections import content_digest

        return content_digest(data, keep_locations)
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _start_worker(caching: bool) -> object:
    """The LLVM worker, forked now; None in the cache server's lookup-only workers, which never
    compile (they stop at the first miss, and may not import the compiling modules)."""
    if caching:
        store = sys.modules.get("tileiras.cache.store")  # not imported yet: not such a worker
        if store is not None and store.lookup_only():
            return None
    from ..codegen.worker import LLVMWorker

    return LLVMWorker()


def _compile_module(data: bytes, path: str, kind: str, gpus: list[str], want: str, opts: Options,
                    cache: object, arts: Artifacts, timer: StageTimer, worker: object) -> object:
    """Source -> PTX per target; cached PTX is used without reading the module at all. The LLVM
    worker (started before the lookup) loads LLVM meanwhile; returned when it is still needed (the
    caller closes it), discarded when every target hits."""
    keys: dict[str, object] = {}  # gpu -> cache.keys.Key
    if cache is not None and want != "llvm":
        from ..cache.keys import Key, module_key

        with timer.stage("cache lookup"):
            digest = Key(_source_digest, data, kind, opts)  # made with the first key that is needed
            for gpu in gpus:
                keys[gpu] = Key(module_key, digest, gpu, opts)
                hit = cache.get_ptx(keys[gpu], parse=False)  # type: ignore[attr-defined]  # Metadata parses it
                found = None
                if opts.remarks_enabled and hit is not None:
                    from ..cache.remarks import cached

                    found = cached(cache, keys[gpu])
                if hit is not None and hit[1] is not None and (found is not None or not opts.remarks_enabled):
                    arts.ptx[gpu], arts.metadata[gpu] = hit
                    if found is not None:
                        arts.remarks[gpu] = found
    missing = [g for g in gpus if g not in arts.ptx]
    if not missing:
        if worker is not None:
            worker.discard()  # type: ignore[attr-defined]  # every target hit: LLVM is not needed
        return None
    _lower_and_emit(data, path, missing, want, opts, cache, keys, arts, timer, worker)
    return worker


def _lower_and_emit(data: bytes, path: str, missing: list[str], want: str, opts: Options, cache: object,
                    keys: dict[str, object], arts: Artifacts, timer: StageTimer, worker: object) -> None:
    """Lower each target and hand it to the LLVM worker; while the worker turns target N into PTX,
    this process lowers target N+1 (or, after the last, gets ptxas ready)."""
    from ..frontend import load_module

    with timer.stage("read + verify"):
        module = load_module(data, path)
        from ..tileaa.limits import check_module

        check_module(module)  # refuse within seconds what could not compile in bounded time and memory
    if opts.print_ir_after_all:
        from ..text.printer import print_module

        print("// -----// IR Dump After read-and-verify (cuda_tile) //----- //", file=sys.stderr)
        print(print_module(module), file=sys.stderr)
    from contextlib import nullcontext

    from ..remarks import collecting

    pending: Optional[tuple[str, Callable[[], str]]] = None
    for gpu in missing:
        with collecting() if opts.remarks_enabled else nullcontext([]) as found:
            llvm_ir, meta = lower_to_llvm(module, gpu, opts, timer)  # times each of its passes
        if opts.remarks_enabled:
            arts.remarks[gpu] = found
        arts.llvm[gpu] = llvm_ir
        arts.metadata[gpu] = meta
        if want == "llvm":
            continue
        if pending is not None:
            _collect(pending, cache, keys, arts, timer)
        from ..codegen.nvptx import emit_later

        pending = gpu, emit_later(llvm_ir, gpu, opts.opt_level, debug=opts.device_debug, worker=worker)
    if pending is not None:
        if want in ("cubin", "fatbin", "obj"):
            from ..codegen.ptxas import prepare

            prepare()  # its imports and the tool lookup overlap the last LLVM run
        _collect(pending, cache, keys, arts, timer)


def _collect(pending: tuple[str, Callable[[], str]], cache: object, keys: dict[str, object], arts: Artifacts,
             timer: StageTimer) -> None:
    gpu, result = pending
    if gpu in keys:
        cache.idle()  # type: ignore[attr-defined]  # the keys of the misses, while LLVM runs
    with timer.stage(f"LLVM -> PTX ({gpu}, waiting for the worker)"):
        from ..codegen.clusters import declare_clusters
        from ..codegen.hidden_params import declare_per_cta_memory, hide_tensor_maps

        meta = arts.metadata[gpu]
        arts.ptx[gpu] = declare_per_cta_memory(declare_clusters(hide_tensor_maps(result(), meta), meta), meta)
    if gpu in keys:
        cache.put_ptx(keys[gpu], arts.ptx[gpu], arts.metadata[gpu])  # type: ignore[attr-defined]
        if gpu in arts.remarks:
            from ..cache.remarks import keep

            keep(cache, keys[gpu], arts.remarks[gpu])


def _read_sidecar_metadata(meta_path: str, gpus: list[str], arts: Artifacts) -> dict[str, object]:
    """A PTX input's launch metadata, from the `.json` the PTX compile wrote beside it."""
    import os

    if not os.path.exists(meta_path):
        return {}
    from ..codegen.metadata import ModuleMetadata

    from ..input_file import read_regular

    meta = ModuleMetadata.from_json(read_regular(meta_path, "metadata").decode("utf-8", "replace"))
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
    from .package import package_object

    newest = newest_gpu(gpus)
    if kind == "fatbin":
        from ..codegen.fatbin import make_fatbin

        return make_fatbin(arts.cubin, {newest: arts.ptx[newest]})
    if not arts.metadata:
        raise TileirasError("error: an object needs launch metadata: compile from TileIR, or keep the PTX's "
                            ".json beside it", ExitCode.COMPILE_FAILED)
    # every target's facts: the launcher picks block size and shared memory per device
    _, obj = package_object(arts.cubin, {newest: arts.ptx[newest]}, [arts.metadata[g] for g in gpus],
                            opts.host_arch, opts.host_os, arts.cache)
    return obj
