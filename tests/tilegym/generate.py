#!/usr/bin/env python3
"""Export the TileGym / cutile-python kernels (``configs.py``) to TileIR bytecode.

    python tests/tilegym/generate.py                 # rewrite bytecode/ and manifest.json
    python tests/tilegym/generate.py --check         # regenerate in memory, report differences
    python tests/tilegym/generate.py --only tg_fmha --out DIR

Arrays are specialized as cuTile's launcher specializes real tensors (the same rule as
tests/realistic/generate.py): C-contiguous, 16-byte aligned base, 16-byte divisible strides and
16-divisible dimensions where the shape has them, no aliasing. A list of arrays gets the facts
all its elements share. The bytecode is target-independent. ``nvidia_targets`` of the manifest
(the targets NVIDIA's tileiras compiles a row for) is kept from the existing manifest; the
benchmark (benchmarks/tilegym.py --record) fills it in.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = "manifest.json"
GPU_CODE = "sm_90"   # the target of an export before 13.3 (--gpu-code)
BASE_ALIGN = 16
DIVISOR = 16


def array_constraint(arrays: list[Any]) -> Any:
    """The ArrayConstraint cuTile's launcher derives from contiguous, aligned tensors (the facts
    every one of ``arrays`` has, for a list)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint
    import configs

    first = arrays[0]
    elems_16b = max(1, int(DIVISOR // configs.ITEMSIZE[first.dtype]))
    ndim = len(first.shape)

    def strides(shape: tuple[int, ...]) -> tuple[int, ...]:
        out, step = [], 1
        for n in reversed(shape):
            out.append(step)
            step *= n
        return tuple(reversed(out))

    stride_div = [min((elems_16b if s != 1 and s % elems_16b == 0 else 1)
                      for s in (strides(a.shape)[i] for a in arrays)) for i in range(ndim)]
    shape_div = [min((DIVISOR if a.shape[i] % DIVISOR == 0 else 1) for a in arrays) for i in range(ndim)]
    return ArrayConstraint(
        getattr(ct, first.dtype), ndim, index_dtype=ct.int32, stride_lower_bound_incl=0,
        alias_groups=(), may_alias_internally=False,
        stride_constant=tuple(1 if i == ndim - 1 else None for i in range(ndim)),
        stride_divisible_by=tuple(stride_div), shape_divisible_by=tuple(shape_div),
        base_addr_divisible_by=BASE_ALIGN)


def signature(config: Any) -> Any:
    import cuda.tile as ct
    from cuda.tile.compilation import (CallingConvention, ConstantConstraint, KernelSignature,
                                       ListConstraint, ScalarConstraint)
    import configs

    params = []
    for p in config.params:
        if isinstance(p, configs.Arr):
            params.append(array_constraint([p]))
        elif isinstance(p, configs.ArrList):
            params.append(ListConstraint(array_constraint(list(p.arrays)), alias_groups=(),
                                         elements_may_alias=False))
        elif isinstance(p, configs.Scalar):
            params.append(ScalarConstraint(getattr(ct, p.dtype)))
        else:
            params.append(ConstantConstraint(p))
    return KernelSignature(parameters=params, calling_convention=CallingConvention.cutile_python_v1(),
                           symbol=config.name)


def load_module(name: str) -> Any:
    """kernels/<name>.py, compiled under its relative name (the debug info names it so)."""
    import types

    key = f"tilegym_kernels_{name}"
    if key in sys.modules:
        return sys.modules[key]
    module = types.ModuleType(key)
    rel = f"kernels/{name}.py"
    module.__file__ = rel
    sys.modules[key] = module
    exec(compile((HERE / rel).read_text(), rel, "exec"), module.__dict__)
    return module


def _relative_stub_paths() -> None:
    """Name cuTile's own Python stubs (``Tile.astype`` and friends, traced like kernel code) by
    their path inside site-packages, so that the debug info does not depend on where cuTile is
    installed. inspect/linecache still find the source through the module's loader."""
    import types
    import cuda.tile._stub as stub

    root = Path(stub.__file__).resolve().parents[2]
    seen: set[int] = set()

    def fix(obj: Any) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, types.FunctionType):
            name = obj.__code__.co_filename
            if Path(name).is_absolute() and Path(name).resolve().is_relative_to(root):
                obj.__code__ = obj.__code__.replace(co_filename=str(Path(name).resolve().relative_to(root)))
            return
        for value in getattr(obj, "__dict__", {}).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                for f in (value.fget, value.fset):
                    if f is not None:
                        fix(f)
                continue
            if isinstance(value, (types.FunctionType, type)) and \
                    getattr(value, "__module__", "") == stub.__name__:
                fix(value)
            elif hasattr(value, "__wrapped__") and getattr(value, "__module__", "") == stub.__name__:
                fix(value.__wrapped__)

    fix(stub)


def _gpu_code() -> str | None:
    """cuTile writes target-independent bytecode from 13.3 on; before, it needs a target (GPU_CODE)."""
    version = tuple(int(p) for p in sys.modules['configs'].BYTECODE_VERSION.split("."))
    return None if version >= (13, 3) else GPU_CODE


def export(config: Any) -> bytes:
    from cuda.tile.compilation import export_kernel
    import configs

    kernel = getattr(load_module(config.module), config.kernel)
    if config.hints:
        kernel = kernel.replace_hints(**config.hints)
    buf = io.BytesIO()
    export_kernel(kernel, [signature(config)], buf, output_format="tileir_bytecode", gpu_code=_gpu_code(),
                  bytecode_version=configs.BYTECODE_VERSION)
    return buf.getvalue()


def build(only: list[str] | None, previous: dict[str, Any]) -> tuple[dict[str, bytes], dict[str, Any], list[str]]:
    import cuda.tile as ct
    import configs

    sys.dont_write_bytecode = True
    _relative_stub_paths()
    known = {c["name"]: c.get("nvidia_targets") for c in previous.get("configs", [])}
    files: dict[str, bytes] = {}
    records, errors = [], []
    for config in configs.all_configs():
        if only and not any(config.name.startswith(o) for o in only):
            continue
        try:
            data = export(config)
        except Exception as exc:    # cuTile rejected the row: a mistake in configs.py, say which
            errors.append(f"{config.name}: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}")
            continue
        if b"site-packages" in data:
            errors.append(f"{config.name}: debug info names a site-packages path")
        files[f"bytecode/{config.name}.tileirbc"] = data
        record = config.to_json()
        if known.get(config.name) is not None:
            record["nvidia_targets"] = known[config.name]
        records.append(record)
    manifest = {"format": 1, "generator": "tests/tilegym/generate.py", "cutile_version": ct.__version__,
                "bytecode_version": configs.BYTECODE_VERSION, "targets": list(configs.TARGETS),
                "specialization": {"contiguous": True, "base_addr_divisible_by": BASE_ALIGN,
                                   "divisor": DIVISOR, "index_dtype": "int32",
                                   "calling_convention": "cutile_python_v1"},
                "configs": records}
    return files, manifest, errors


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    head = [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in manifest.items() if k != "configs"]
    rows = ",\n".join(f"  {json.dumps(c)}" for c in manifest["configs"])
    return "\n".join(["{", *head, ' "configs": [', rows, " ]", "}", ""]).encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--check", action="store_true", help="compare with the files in the output folder")
    parser.add_argument("--only", action="append", metavar="PREFIX", help="rows whose name starts with PREFIX")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: this one)")
    parser.add_argument("--bytecode-version", metavar="V",
                        help="export at this bytecode version (13.1..13.5) instead of configs.BYTECODE_VERSION")
    parser.add_argument("--gpu-code", default="sm_90", metavar="SM",
                        help="the target cuTile needs to export before 13.3 (default sm_90)")
    args = parser.parse_args(argv)
    import configs
    if args.bytecode_version:   # the same kernels in another form: the canonicalizer's invariance tests
        global GPU_CODE
        GPU_CODE = args.gpu_code
        configs.BYTECODE_VERSION = args.bytecode_version
    out: Path = args.out
    previous = json.loads((HERE / MANIFEST).read_text()) if (HERE / MANIFEST).exists() else {}
    files, manifest, errors = build(args.only, previous)
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    wanted = {**files, MANIFEST: manifest_bytes(manifest)} if not args.only else files
    if args.check:
        diffs = [rel for rel, data in sorted(wanted.items())
                 if not (out / rel).exists() or (out / rel).read_bytes() != data]
        for rel in diffs:
            print(f"differs: {rel}")
        return 1 if diffs or errors else 0
    (out / "bytecode").mkdir(parents=True, exist_ok=True)
    for rel, data in sorted(wanted.items()):
        (out / rel).write_bytes(data)
    if not args.only:
        for path in (out / "bytecode").glob("*.tileirbc"):
            if f"bytecode/{path.name}" not in files:
                path.unlink()
    size = sum(len(d) for d in files.values())
    print(f"{len(files)} configurations, {size / 1024:.0f} KiB of bytecode in {out}"
          + (f", {len(errors)} errors" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    if os.environ.get("PYTHONHASHSEED") != "0":     # cuTile walks sets of strings
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]],
                  dict(os.environ, PYTHONHASHSEED="0"))
    os.chdir(HERE)
    sys.path.insert(0, str(HERE))
    sys.exit(main())
