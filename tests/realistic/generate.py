#!/usr/bin/env python3
"""Export the realistic cuTile kernels (``configs.py``) to TileIR bytecode.

    python tests/realistic/generate.py                 # rewrite bytecode/ and manifest.json
    python tests/realistic/generate.py --check         # regenerate in memory, report differences
    python tests/realistic/generate.py --out DIR       # write somewhere else (a cache folder)
    python tests/realistic/generate.py --only mm_f16_128x128x64 --only fa_

Arrays are specialized as cuTile's launcher specializes real tensors: C-contiguous (last
stride the constant 1), base address divisible by 16 bytes, a stride divisible by 16 bytes
where it is, and a dimension divisible by 16 where it is; arrays do not alias. The bytecode is
target-independent (one module compiles for every target). Output is deterministic: fixed hash
seed, and the kernel file compiled under its relative name so the debug info does not depend
on the checkout's location.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = "manifest.json"
GPU_CODE = "sm_90"   # the target of an export before 13.3 (--gpu-code)
BASE_ALIGN = 16          # bytes: what cuTile's launcher assumes of a tensor's data pointer
DIVISOR = 16             # the divisibility cuTile's launcher tests shapes and byte strides for


def _load(name: str) -> Any:
    """Import ``tests/realistic/<name>.py`` under its relative file name."""
    key = f"realistic_{name}"
    if key in sys.modules:
        return sys.modules[key]
    module = types.ModuleType(key)
    module.__file__ = f"{name}.py"
    sys.modules[key] = module
    exec(compile((HERE / f"{name}.py").read_text(), f"{name}.py", "exec"), module.__dict__)
    return module


def array_constraint(arr: Any) -> Any:
    """The ArrayConstraint cuTile's launcher derives from a contiguous, aligned tensor."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    configs = _load("configs")
    itemsize = configs.ITEMSIZE[arr.dtype]
    elems_16b = DIVISOR // itemsize
    strides = arr.strides
    return ArrayConstraint(
        getattr(ct, arr.dtype), len(arr.shape), index_dtype=ct.int32, stride_lower_bound_incl=0,
        alias_groups=(), may_alias_internally=False,
        stride_constant=tuple(1 if s == 1 else None for s in strides),
        stride_divisible_by=tuple(elems_16b if s != 1 and s % elems_16b == 0 else 1
                                  for s in strides),
        shape_divisible_by=tuple(DIVISOR if n % DIVISOR == 0 else 1 for n in arr.shape),
        base_addr_divisible_by=BASE_ALIGN)


def signature(config: Any) -> Any:
    import cuda.tile as ct
    from cuda.tile.compilation import (CallingConvention, ConstantConstraint, KernelSignature,
                                       ScalarConstraint)

    configs = _load("configs")
    params = []
    for p in config.params:
        if isinstance(p, configs.Arr):
            params.append(array_constraint(p))
        elif isinstance(p, configs.Scalar):
            params.append(ScalarConstraint(getattr(ct, p.dtype)))
        else:
            params.append(ConstantConstraint(p.value))
    return KernelSignature(parameters=params,
                           calling_convention=CallingConvention.cutile_python_v1(),
                           symbol=config.name)


def _gpu_code() -> str | None:
    """cuTile writes target-independent bytecode from 13.3 on; before, it needs a target (GPU_CODE)."""
    version = tuple(int(p) for p in _load("configs").BYTECODE_VERSION.split("."))
    return None if version >= (13, 3) else GPU_CODE


def export(config: Any) -> bytes:
    from cuda.tile.compilation import export_kernel

    kernels = _load("kernels")
    buf = io.BytesIO()
    export_kernel(getattr(kernels, config.kernel), [signature(config)], buf,
                  output_format="tileir_bytecode", gpu_code=_gpu_code(),
                  bytecode_version=_load("configs").BYTECODE_VERSION)
    return buf.getvalue()


def build(only: list[str] | None) -> tuple[dict[str, bytes], dict[str, Any], list[str]]:
    """(relative path -> bytecode, manifest, errors) for the selected configurations."""
    import cuda.tile as ct

    sys.dont_write_bytecode = True
    configs = _load("configs")
    files: dict[str, bytes] = {}
    records, errors = [], []
    for config in configs.all_configs():
        if only and not any(config.name.startswith(o) for o in only):
            continue
        try:
            data = export(config)
        except Exception as exc:    # a kernel cuTile rejects is a bug in kernels.py: say which
            errors.append(f"{config.name}: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}")
            continue
        if b"site-packages" in data:
            errors.append(f"{config.name}: debug info names a site-packages path")
        files[f"bytecode/{config.name}.tileirbc"] = data
        records.append(config.to_json())
    manifest = {"format": 1, "generator": "tests/realistic/generate.py",
                "cutile_version": ct.__version__, "bytecode_version": configs.BYTECODE_VERSION,
                "targets": list(configs.TARGETS),
                "specialization": {"contiguous": True, "base_addr_divisible_by": BASE_ALIGN,
                                   "divisor": DIVISOR, "index_dtype": "int32",
                                   "calling_convention": "cutile_python_v1"},
                "configs": records}
    return files, manifest, errors


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    lines = ["{"]
    head = {k: v for k, v in manifest.items() if k != "configs"}
    for k, v in head.items():
        lines.append(f" {json.dumps(k)}: {json.dumps(v)},")
    lines.append(' "configs": [')
    rows = [f"  {json.dumps(c)}" for c in manifest["configs"]]
    lines.append(",\n".join(rows))
    lines += [" ]", "}", ""]
    return "\n".join(lines).encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory and compare with the files in the output folder")
    parser.add_argument("--only", action="append", default=None, metavar="PREFIX",
                        help="only configurations whose name starts with PREFIX (repeatable)")
    parser.add_argument("--out", type=Path, default=HERE, help="output folder (default: this one)")
    parser.add_argument("--bytecode-version", metavar="V",
                        help="export at this bytecode version (13.1..13.5) instead of configs.BYTECODE_VERSION")
    parser.add_argument("--gpu-code", default="sm_90", metavar="SM",
                        help="the target cuTile needs to export before 13.3 (default sm_90)")
    args = parser.parse_args(argv)
    if args.bytecode_version:   # the same kernels in another form: the canonicalizer's invariance tests
        global GPU_CODE
        GPU_CODE = args.gpu_code
        _load("configs").BYTECODE_VERSION = args.bytecode_version
    files, manifest, errors = build(args.only)
    for err in errors:
        print(f"error: {err}", file=sys.stderr)
    out: Path = args.out
    wanted = {**files, MANIFEST: manifest_bytes(manifest)} if not args.only else files
    if args.check:
        diffs = [rel for rel, data in sorted(wanted.items())
                 if not (out / rel).exists() or (out / rel).read_bytes() != data]
        if not args.only:
            present = {str(p.relative_to(out)) for p in (out / "bytecode").glob("*.tileirbc")}
            diffs += sorted(present - set(files))
        for rel in diffs:
            print(f"differs: {rel}")
        return 1 if diffs or errors else 0
    (out / "bytecode").mkdir(parents=True, exist_ok=True)
    for rel, data in sorted(wanted.items()):
        path = out / rel
        if not path.exists() or path.read_bytes() != data:
            tmp = path.with_suffix(path.suffix + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
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
    sys.exit(main())
