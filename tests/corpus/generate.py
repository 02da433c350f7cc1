#!/usr/bin/env python3
"""Rebuild the TileIR test corpus from the cuTile kernels in ``kernels/``.

    python tests/corpus/generate.py            # rewrite bytecode/, manifest.json, COVERAGE.md
    python tests/corpus/generate.py --check    # regenerate in memory, report any difference
    python tests/corpus/generate.py --only ew_float --only softmax

The output is deterministic: the generator runs from this directory with a
fixed hash seed and imports kernel files by their relative path
(``kernels/x.py``), so the debug info cuTile embeds names ``x.py`` in
``kernels`` whatever the checkout location.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MANIFEST = "manifest.json"
COVERAGE = "COVERAGE.md"
VERSIONS: tuple[str, ...] = ("13.1", "13.2", "13.3", "13.4")   # oldest first


def sibling(name: str):
    """Import ``tests/corpus/<name>.py`` under a private module name (``corpus_<name>``)
    so that other test helpers with generic module names cannot shadow it."""
    import importlib.util
    key = f"corpus_{name}" if not name.startswith("corpus_") else name
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    spec.loader.exec_module(module)
    return module


def _reexec_with_fixed_hash_seed() -> None:
    # cuTile walks dicts and sets while building IR; a fixed seed keeps any
    # set-ordering of strings identical from run to run.
    if os.environ.get("PYTHONHASHSEED") != "0":
        env = dict(os.environ, PYTHONHASHSEED="0")
        os.execve(sys.executable, [sys.executable, str(Path(__file__).resolve()), *sys.argv[1:]],
                  env)


def load_kernel_files() -> list[tuple[str, Any]]:
    """Import ``kernels/*.py`` under their relative path; returns (relative path, module).

    The code is compiled with the relative file name so that cuTile's debug info
    (it records ``co_filename``) does not depend on where the checkout lives;
    importlib would turn the path absolute.
    """
    import types
    sys.dont_write_bytecode = True
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    modules = []
    for path in sorted((HERE / "kernels").glob("*.py")):
        if path.name.startswith("_"):
            continue
        rel = f"kernels/{path.name}"
        module = types.ModuleType(f"corpus_kernels_{path.stem}")
        module.__file__ = rel
        sys.modules[module.__name__] = module
        exec(compile(path.read_text(), rel, "exec"), module.__dict__)
        modules.append((rel, module))
    return modules


def _constraint(p):
    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, ConstantConstraint, ListConstraint,
                                       ScalarConstraint)
    from corpus_spec import Arr, ArrList, Const, Scalar

    def dtype(name: str):
        return ct.bool_ if name == "bool" else getattr(ct, name)

    if isinstance(p, Arr):
        return ArrayConstraint(
            dtype=dtype(p.dtype), ndim=p.ndim, index_dtype=dtype(p.index_dtype),
            stride_lower_bound_incl=0, alias_groups=p.alias_groups,
            may_alias_internally=p.may_alias_internally, stride_constant=p.stride_constant,
            shape_divisible_by=p.shape_divisible_by, stride_divisible_by=p.stride_divisible_by,
            base_addr_divisible_by=p.base_addr_divisible_by)
    if isinstance(p, ArrList):
        return ListConstraint(_constraint(p.element), alias_groups=(),
                              elements_may_alias=p.elements_may_alias)
    if isinstance(p, Scalar):
        return ScalarConstraint(dtype(p.dtype))
    if isinstance(p, Const):
        return ConstantConstraint(p.value)
    raise TypeError(f"unknown parameter spec {p!r}")


def signatures(kernel) -> list:
    from cuda.tile.compilation import KernelSignature, CallingConvention
    return [KernelSignature(parameters=[_constraint(p) for p in e.params.values()],
                            calling_convention=CallingConvention.cutile_python_v1(),
                            symbol=e.symbol)
            for e in kernel.entries]


def export(kernel, version: str) -> bytes | str:
    """Bytecode for one version, or cuTile's refusal message (a str)."""
    import cuda.tile as ct
    from cuda.tile.compilation import export_kernel
    buf = io.BytesIO()
    try:
        export_kernel(kernel.function, signatures(kernel), buf, output_format="tileir_bytecode",
                      bytecode_version=version, gpu_code=kernel.gpu_code)
    except ct.TileUnsupportedFeatureError as e:
        return str(e).splitlines()[0].strip()
    except Exception as e:  # any other cuTile error is a bug in the kernel: report it
        raise ExportError(f"{type(e).__name__}: {str(e).strip()}") from None
    return buf.getvalue()


class ExportError(Exception):
    pass


def kernel_record(kernel, family: str, source: str, skipped: dict[str, str]) -> dict[str, Any]:
    is_text = family == "text"
    versions = [v for v in VERSIONS if v not in skipped]
    entries = []
    for e in kernel.entries:
        params = [{"name": n, **p.to_json()} for n, p in e.params.items()]
        entries.append({
            "symbol": e.symbol,
            "params": params,
            "abi": e.abi(),
            "outputs": list(e.outputs),
            "reference": e.reference,
            "tolerance": e.tolerance if isinstance(e.tolerance, str) else dict(e.tolerance),
            "options": dict(e.options),
            "cases": [c.to_json(e.params) for c in e.cases],
        })
    return {
        "name": kernel.name,
        "family": family,
        "source": source,
        "kind": "text" if is_text else "cutile",
        "function": None if is_text else kernel.function._annotated_function.pyfunc.__name__,
        "description": kernel.description,
        "gpu_code": kernel.gpu_code,
        "versions": versions,
        "skipped": dict(sorted(skipped.items())),
        "files": {v: f"bytecode/{kernel.name}/{v}.tileirbc" for v in versions},
        "prints": getattr(kernel, "prints", False),
        "entries": entries,
    }


def build(only: set[str] | None = None) -> tuple[dict[str, bytes], dict[str, Any], list[str]]:
    """Export every kernel; returns (relative path -> bytes, manifest, errors)."""
    reference = sibling("reference")
    modules = load_kernel_files()
    files: dict[str, bytes] = {}
    records: list[dict[str, Any]] = []
    errors: list[str] = []
    seen: set[str] = set()
    for source, module in modules:
        family = Path(source).stem
        for kernel in getattr(module, "KERNELS", []):
            if kernel.name in seen:
                errors.append(f"{kernel.name}: defined twice")
            seen.add(kernel.name)
            for e in kernel.entries:
                if not hasattr(reference, e.reference):
                    errors.append(f"{kernel.name}/{e.symbol}: no reference.{e.reference}")
            if only and kernel.name not in only:
                continue
            skipped: dict[str, str] = {}
            for v in VERSIONS:
                try:
                    out = export(kernel, v)
                except ExportError as e:
                    errors.append(f"{kernel.name} {v}: {e}")
                    continue
                if isinstance(out, str):
                    skipped[v] = out
                    if v not in kernel.skip:
                        errors.append(f"{kernel.name} {v}: cuTile refused unexpectedly: {out}")
                    continue
                if v in kernel.skip:
                    errors.append(f"{kernel.name} {v}: expected cuTile to refuse "
                                  f"({kernel.skip[v]}) but it exported")
                if b"site-packages" in out:
                    errors.append(f"{kernel.name} {v}: debug info names a site-packages path "
                                  "(inlined cuTile helper); the file would not be portable")
                files[f"bytecode/{kernel.name}/{v}.tileirbc"] = out
            records.append(kernel_record(kernel, family, source, skipped))
    for kernel in load_text_kernels():
        if kernel.name in seen:
            errors.append(f"{kernel.name}: defined twice")
        seen.add(kernel.name)
        if only and kernel.name not in only:
            continue
        skipped = {v: f"{kernel.name} uses ops or types new in {kernel.min_version}"
                   for v in VERSIONS if _vkey(v) < _vkey(kernel.min_version)}
        for v in VERSIONS:
            if v not in skipped:
                files[f"bytecode/{kernel.name}/{v}.tileirbc"] = kernel.build(v)
        records.append(kernel_record(kernel, "text", f"text/{kernel.name}.mlir", skipped))
    import cuda.tile as ct
    manifest = {
        "format": 1,
        "generator": "tests/corpus/generate.py",
        "cutile_version": ct.__version__,
        "versions": list(VERSIONS),
        "kernels": records,
    }
    return files, manifest, errors


def load_text_kernels() -> list:
    """The hand-written text kernels and their bytecode builders (text/builders.py)."""
    import types
    path = HERE / "text" / "builders.py"
    module = types.ModuleType("corpus_text_builders")
    module.__file__ = "text/builders.py"
    sys.modules[module.__name__] = module
    exec(compile(path.read_text(), "text/builders.py", "exec"), module.__dict__)
    return list(module.TEXT_KERNELS)


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def strip_text_header(text: str) -> str:
    """A hand-written .mlir file without its leading // comment lines."""
    lines = text.splitlines(keepends=True)
    while lines and lines[0].startswith("//"):
        lines.pop(0)
    return "".join(lines)


def text_header(text: str) -> dict[str, str]:
    header = {}
    for line in text.splitlines():
        if not line.startswith("//"):
            break
        key, sep, value = line[2:].strip().partition(":")
        if sep and " " not in key.strip():
            header[key.strip()] = value.strip()
    return header


def check_text(root: Path) -> list[str]:
    """Each hand-written .mlir must equal NVIDIA's disassembly of its bytecode (newest
    version) and declare the kernel's first version."""
    oracle = sibling("oracle")
    errors = []
    for kernel in load_text_kernels():
        path = root / "text" / f"{kernel.name}.mlir"
        if not path.exists():
            errors.append(f"text/{kernel.name}.mlir is missing")
            continue
        text = path.read_text()
        if text_header(text).get("min-version") != kernel.min_version:
            errors.append(f"text/{kernel.name}.mlir: min-version header is not "
                          f"{kernel.min_version}")
        proc = oracle.disasm(root / "bytecode" / kernel.name / f"{VERSIONS[-1]}.tileirbc")
        if proc.stdout != strip_text_header(text):
            errors.append(f"text/{kernel.name}.mlir differs from tileirdisasm of its bytecode")
    return errors


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    return (_dump_json(manifest, 0) + "\n").encode()


def _dump_json(obj: Any, indent: int, width: int = 120) -> str:
    """JSON with each value on one line when it fits in ``width`` columns: far shorter
    than indent=1 output and still diff-friendly."""
    flat = json.dumps(obj, separators=(", ", ": "))
    if len(flat) + indent <= width or not isinstance(obj, (dict, list)) or not obj:
        return flat
    pad = " " * (indent + 1)
    if isinstance(obj, dict):
        items = [f"{pad}{json.dumps(k)}: {_dump_json(v, indent + 1, width)}"
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + _dump_json(v, indent + 1, width) for v in obj]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


# --------------------------------------------------------------------------- coverage

def coverage(files: dict[str, bytes], root: Path) -> dict[str, Any]:
    """Ops and element types per file, from the oracle's disassembly of ``root/<path>``."""
    oracle = sibling("oracle")

    def one(rel: str) -> tuple[str, set[str], set[str], str]:
        proc = oracle.disasm(root / rel)
        if proc.returncode != 0:
            return rel, set(), set(), proc.stderr.strip() or f"exit {proc.returncode}"
        return rel, oracle.ops_in(proc.stdout), oracle.element_types_in(proc.stdout), ""

    ops: dict[str, set[str]] = {}
    types: dict[str, set[str]] = {}
    failures: dict[str, str] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for rel, o, t, err in pool.map(one, sorted(files)):
            if err:
                failures[rel] = err
            ops[rel], types[rel] = o, t
    return {"ops": ops, "types": types, "failures": failures}


def coverage_markdown(cov: dict[str, Any]) -> str:
    oracle = sibling("oracle")

    def users(table: dict[str, set[str]], name: str) -> list[str]:
        return sorted({_kernel_of(rel) for rel, names in table.items() if name in names})

    op_rows, type_rows = [], []
    uncovered_ops, uncovered_types = [], []
    for op, since in sorted(oracle.OP_ROSTER.items()):
        who = users(cov["ops"], op)
        if op in oracle.IMPLICIT_OPS:
            who = ["(every file: the disassembler prints no module line)"]
        if not who:
            uncovered_ops.append(op)
        op_rows.append(f"| `{op}` | {since} | {_names(who) if who else '**uncovered**'} |")
    for ty, since in sorted(oracle.TYPE_ROSTER.items()):
        who = users(cov["types"], ty)
        if not who:
            uncovered_types.append(ty)
        type_rows.append(f"| `{ty}` | {since} | {_names(who) if who else '**uncovered**'} |")
    extra = sorted(set().union(*cov["ops"].values()) - set(oracle.OP_ROSTER))
    lines = [
        "# Corpus coverage",
        "",
        "Generated by `generate.py` from NVIDIA's `tileirdisasm` output of every bytecode",
        "file (the hand-written `text/*.mlir` kernels included, through their bytecode);",
        "`tests/test_corpus.py` recomputes it and checks that the lists below are current.",
        "",
        "## Uncovered",
        "",
        "Ops: " + (", ".join(f"`{o}`" for o in uncovered_ops) if uncovered_ops else "none"),
        "",
        "Element types: " + (", ".join(f"`{t}`" for t in uncovered_types)
                             if uncovered_types else "none"),
        "",
    ]
    if extra:
        lines += ["Ops seen that are not in the roster: " + ", ".join(f"`{o}`" for o in extra), ""]
    lines += ["## Ops", "", "| op | since | kernels |", "| --- | --- | --- |", *op_rows, "",
              "## Element types", "", "| type | since | kernels |", "| --- | --- | --- |",
              *type_rows, ""]
    return "\n".join(lines)


def _names(kernels: list[str], limit: int = 8) -> str:
    if len(kernels) <= limit:
        return ", ".join(kernels)
    return ", ".join(kernels[:limit]) + f" and {len(kernels) - limit} more"


def _kernel_of(rel: str) -> str:
    parts = rel.split("/")
    return parts[1] if parts[0] == "bytecode" else rel


def parse_uncovered(markdown: str) -> tuple[set[str], set[str]]:
    """The uncovered op and type lists of a COVERAGE.md."""
    ops: set[str] = set()
    types: set[str] = set()
    for line in markdown.splitlines():
        for prefix, bucket in (("Ops: ", ops), ("Element types: ", types)):
            if line.startswith(prefix):
                body = line[len(prefix):]
                if body != "none":
                    bucket.update(x.strip().strip("`") for x in body.split(","))
    return ops, types


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory and compare with the committed files")
    parser.add_argument("--only", action="append", default=None,
                        help="export only these kernels (implies no manifest/coverage rewrite)")
    parser.add_argument("--no-coverage", action="store_true", help="skip COVERAGE.md")
    args = parser.parse_args(argv)

    files, manifest, errors = build(set(args.only) if args.only else None)
    for err in errors:
        print(f"error: {err}", file=sys.stderr)

    if args.check:
        diffs = []
        for rel, data in sorted(files.items()):
            path = HERE / rel
            if not path.exists() or path.read_bytes() != data:
                diffs.append(rel)
        if not args.only:
            committed = {str(p.relative_to(HERE)) for p in (HERE / "bytecode").rglob("*.tileirbc")}
            diffs += sorted(committed - set(files))
            mpath = HERE / MANIFEST
            if not mpath.exists() or mpath.read_bytes() != manifest_bytes(manifest):
                diffs.append(MANIFEST)
        for rel in diffs:
            print(f"differs: {rel}")
        return 1 if diffs or errors else 0

    for rel, data in sorted(files.items()):
        path = HERE / rel
        if not path.exists() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    if not args.only:
        for path in sorted((HERE / "bytecode").rglob("*.tileirbc")):
            if str(path.relative_to(HERE)) not in files:
                path.unlink()
        for d in sorted((HERE / "bytecode").glob("*"), reverse=True):
            if d.is_dir() and not any(d.iterdir()):
                d.rmdir()
        (HERE / MANIFEST).write_bytes(manifest_bytes(manifest))
        if not args.no_coverage:
            cov = coverage(files, HERE)
            for rel, err in sorted(cov["failures"].items()):
                errors.append(f"tileirdisasm rejects {rel}: {err}")
                print(f"error: tileirdisasm rejects {rel}: {err}", file=sys.stderr)
            (HERE / COVERAGE).write_text(coverage_markdown(cov))
            for err in check_text(HERE):
                errors.append(err)
                print(f"error: {err}", file=sys.stderr)
    print(f"{len(files)} bytecode files, {len(manifest['kernels'])} kernels"
          + (f", {len(errors)} errors" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    _reexec_with_fixed_hash_seed()
    os.chdir(HERE)
    sys.path.insert(0, str(HERE))
    sys.exit(main())
