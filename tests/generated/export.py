#!/usr/bin/env python3
"""Export generated variants to TileIR bytecode, cached.

    python tests/generated/export.py --count 50 --seed 0          # fill the cache, print the paths
    bytecode(variant, gpu="sm_90")  -> Path                       # from tests and benchmarks

The cache folder ($TILEIRAS_GENERATED_CACHE, default ~/.cache/tileiras-generated) is keyed by
cuTile's version and a digest of the template sources (kernels.py, launch.py), then the variant's
name (which carries its bytecode version and facts). Bytecode 13.3 and later is target-independent;
cuTile writes 13.1 and 13.2 only for one target, so those are exported per target. Exporting is
deterministic (the kernel file is compiled under its relative name, cuTile's own stubs are named
relative to site-packages), so a cache entry never goes stale.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from grammar import Variant, sample  # noqa: E402
from launch import ITEMSIZE, Arr, ArrList, Launch, Scalar, launch  # noqa: E402

BASE_ALIGN = 16          # bytes: what cuTile's launcher assumes of a tensor's data pointer
DIVISOR = 16             # the divisibility cuTile's launcher tests shapes and byte strides for
TARGET_INDEPENDENT = "13.3"


def stable_hashes(script: str) -> None:
    """Run `script` again with PYTHONHASHSEED=0 unless it already is: cuTile walks sets of strings,
    so an export is reproducible only with a fixed hash seed."""
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable, script, *sys.argv[1:]], dict(os.environ, PYTHONHASHSEED="0"))


class ExportError(RuntimeError):
    """cuTile rejected a variant: a mistake of the grammar or of a template."""


def _kernels() -> Any:
    """kernels.py compiled under its relative name (the debug info names it so)."""
    key = "generated_kernels"
    if key not in sys.modules:
        import linecache

        text = (HERE / "kernels.py").read_text()
        # cuTile reads the kernel's source through inspect: linecache serves it under the relative name
        # (an entry without mtime is never checked against the file system)
        linecache.cache["kernels.py"] = (len(text), None, text.splitlines(True), "kernels.py")
        module = types.ModuleType(key)
        module.__file__ = "kernels.py"
        sys.modules[key] = module
        exec(compile(text, "kernels.py", "exec"), module.__dict__)
    return sys.modules[key]


def _relative_stubs() -> None:
    """cuTile's stubs named relative to site-packages (tests/tilegym/generate.py does the same)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tilegym_generate", HERE.parent / "tilegym" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._relative_stub_paths()


def _strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def array_constraint(arrays: list[Arr], facts: bool) -> Any:
    """What cuTile's launcher derives from contiguous, 16-byte aligned tensors (the facts all of
    `arrays` share), or, without facts, only dtype and rank."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    first = arrays[0]
    ndim = len(first.shape)
    common = dict(index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(), may_alias_internally=False)
    if not facts:
        return ArrayConstraint(getattr(ct, first.dtype), ndim, **common)
    per_16b = max(1, int(DIVISOR // ITEMSIZE[first.dtype]))
    stride_div = [min(per_16b if s != 1 and s % per_16b == 0 else 1 for s in (_strides(a.shape)[i] for a in arrays))
                  for i in range(ndim)]
    shape_div = [min(DIVISOR if a.shape[i] % DIVISOR == 0 else 1 for a in arrays) for i in range(ndim)]
    return ArrayConstraint(getattr(ct, first.dtype), ndim, **common,
                           stride_constant=tuple(1 if i == ndim - 1 else None for i in range(ndim)),
                           stride_divisible_by=tuple(stride_div), shape_divisible_by=tuple(shape_div),
                           base_addr_divisible_by=BASE_ALIGN)


def signature(v: Variant, spec: Launch) -> Any:
    import cuda.tile as ct
    from cuda.tile.compilation import (CallingConvention, ConstantConstraint, KernelSignature, ListConstraint,
                                       ScalarConstraint)

    facts = v["facts"] != "none"
    params = []
    for p in spec.params:
        if isinstance(p, Arr):
            params.append(array_constraint([p], facts))
        elif isinstance(p, ArrList):
            params.append(ListConstraint(array_constraint(list(p.arrays), facts), alias_groups=(),
                                         elements_may_alias=False))
        elif isinstance(p, Scalar):
            params.append(ScalarConstraint(getattr(ct, p.dtype)))
        else:
            params.append(ConstantConstraint(p))
    return KernelSignature(parameters=params, calling_convention=CallingConvention.cutile_python_v1(),
                           symbol=v.name)


def export_bytes(v: Variant, gpu: str | None = None) -> bytes:
    """The variant's bytecode (for `gpu` where its version is target-specific)."""
    import cuda.tile as ct
    from cuda.tile.compilation import export_kernel

    _prepare()
    spec = launch(v)
    kernel = getattr(_kernels(), spec.kernel)
    if spec.hints:
        hints = dict(spec.hints)
        if "num_ctas" in hints:      # Blackwell pairs CTAs; other targets run one
            hints["num_ctas"] = ct.ByTarget(sm_100=hints["num_ctas"])
        kernel = kernel.replace_hints(**hints)
    buf = io.BytesIO()
    try:
        export_kernel(kernel, [signature(v, spec)], buf, output_format="tileir_bytecode",
                      gpu_code=gpu if v["version"] < TARGET_INDEPENDENT else None, bytecode_version=v["version"])
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        raise ExportError(f"{v.name}: {type(exc).__name__}: {' | '.join(lines[:4])}") from None
    return buf.getvalue()


_PREPARED = False


def _prepare() -> None:
    global _PREPARED
    if not _PREPARED:
        sys.dont_write_bytecode = True
        _relative_stubs()
        _PREPARED = True


def cache_dir() -> Path:
    import cuda.tile as ct

    root = Path(os.environ.get("TILEIRAS_GENERATED_CACHE", Path.home() / ".cache" / "tileiras-generated"))
    digest = hashlib.sha256(b"".join((HERE / f).read_bytes() for f in ("kernels.py", "launch.py", "export.py")))
    return root / f"cutile-{ct.__version__}-{digest.hexdigest()[:12]}"


def bytecode(v: Variant, gpu: str = "sm_90") -> Path:
    """The cached bytecode file of `v` (exported on first use); raises ExportError."""
    specific = v["version"] < TARGET_INDEPENDENT
    path = cache_dir() / (f"{v.name}.{gpu}.tileirbc" if specific else f"{v.name}.tileirbc")
    if not path.exists():
        data = export_bytes(v, gpu if specific else None)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpu-name", default="sm_90", help="target of 13.1/13.2 bytecode")
    args = parser.parse_args(argv)
    failed = 0
    for v in sample(args.seed, args.count):
        try:
            print(bytecode(v, args.gpu_name))
        except ExportError as exc:
            failed += 1
            print(f"error: {exc}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    stable_hashes(str(Path(__file__).resolve()))
    sys.exit(main())
