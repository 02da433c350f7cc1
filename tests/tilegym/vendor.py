#!/usr/bin/env python3
"""Copy the cuTile kernels of NVIDIA's TileGym and cutile-python into ``kernels/``.

    python tests/tilegym/vendor.py --tilegym GIT_DIR --cutile GIT_DIR [--check]

GIT_DIR is a bare clone (``git --git-dir=GIT_DIR show HEAD:path`` must work). Each listed
source file becomes ``kernels/<name>.py`` holding, verbatim, only what its ``@ct.kernel``
functions need: the ``cuda.tile``/``math``/``numpy`` imports, the top-level helper functions
and constants the kernels reach (transitively), and the kernels themselves. Host code (torch
launchers, autotuning, registration) is left out, and so are decorators that are not cuTile's
(TileGym's ``experimental_kernel`` only marks a kernel as experimental). The file keeps the
source's SPDX header and names the commit it came from. See README.md for the licenses.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "kernels"

# local module name -> (repository, path inside it)
SOURCES: dict[str, tuple[str, str]] = {
    **{f"tg_{name.replace('/', '_')}": ("NVIDIA/TileGym", f"src/tilegym/ops/cutile/{name}.py") for name in (
        "matmul", "bmm", "group_gemm", "splitk_reduce", "moe", "attention", "mla", "mla_decoding",
        "rms_norm", "rope", "swiglu", "silu_and_mul", "softmax", "layer_norm_legacy")},
    **{f"cp_{name}": ("NVIDIA/cutile-python", f"samples/{name}.py") for name in (
        "MatMul", "BatchMatMul", "AttentionFMHA", "BlockScaledMatMul", "MoE", "LayerNorm",
        "Transpose", "VectorAddition")},
}
KEEP_MODULES = ("cuda.tile", "math", "numpy", "functools")   # what kernel code may import


# Added where kernel code names torch's dtypes: torch is not installed here, and those names
# mean the cuTile dtypes of the same name.
TORCH_SHIM = """
# (vendor.py) torch is not needed to export these kernels: its dtype names used in kernel code
# stand for the cuTile dtypes of the same name.
import types as _types
torch = _types.ModuleType("torch")
torch.__dict__.update(dict({}))"""


def _is_ct_decorator(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text.startswith("ct.") or text.startswith("cuda.tile.")


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _defined(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return set()


def _kept_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return all(a.name.startswith(KEEP_MODULES) for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return (node.module or "").startswith(KEEP_MODULES) and node.level == 0
    return False


def extract(source: str) -> str:
    """The statements of ``source`` the cuTile kernels need, verbatim, in their order."""
    tree = ast.parse(source)
    lines = source.splitlines()
    body = tree.body
    kernels = [n for n in body if isinstance(n, ast.FunctionDef)
               and any(ast.unparse(d).startswith("ct.kernel") for d in n.decorator_list)]
    if not kernels:
        raise ValueError("no @ct.kernel function")
    providers: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.Assign, ast.AnnAssign)) or _kept_import(node):
            for name in _defined(node):
                providers[name] = node
    wanted: list[ast.stmt] = []
    todo = list(kernels)
    while todo:
        node = todo.pop()
        if any(node is w for w in wanted):
            continue
        wanted.append(node)
        todo += [providers[n] for n in _names(node) if n in providers]
    wanted.sort(key=lambda n: n.lineno)
    chunks = []
    for node in wanted:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        drop: set[int] = set()
        for d in getattr(node, "decorator_list", []):
            if not _is_ct_decorator(d):
                drop |= set(range(d.lineno, d.end_lineno + 1))
        text = [ln for i, ln in enumerate(lines[start - 1:node.end_lineno], start) if i not in drop]
        chunks.append("\n".join(text))
    imports = [c for c, n in zip(chunks, wanted) if isinstance(n, (ast.Import, ast.ImportFrom))]
    rest = [c for c, n in zip(chunks, wanted) if not isinstance(n, (ast.Import, ast.ImportFrom))]
    torch_dtypes = sorted({n.attr for w in wanted for n in ast.walk(w) if isinstance(n, ast.Attribute)
                           and isinstance(n.value, ast.Name) and n.value.id == "torch"})
    if torch_dtypes:       # kernel code naming torch's dtypes, which cuTile maps to its own
        imports.append(TORCH_SHIM.format(", ".join(f"{d}=ct.{d}" for d in torch_dtypes)))
    return "\n".join(imports) + "\n\n\n" + "\n\n\n".join(rest) + "\n"


def header(source: str, repo: str, path: str, commit: str) -> str:
    spdx = [ln for ln in source.splitlines()[:6] if ln.startswith("#") and "SPDX" in ln]
    return "\n".join(spdx + [
        "#",
        f"# From {repo} at commit {commit}, {path}.",
        "# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is",
        "# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.",
    ]) + "\n\n"


def git_show(git_dir: Path, rev_path: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", rev_path], check=True,
                          capture_output=True, text=True).stdout


def build(dirs: dict[str, Path]) -> dict[str, str]:
    out = {}
    for name, (repo, path) in SOURCES.items():
        git_dir = dirs[repo]
        commit = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        source = git_show(git_dir, f"HEAD:{path}")
        out[f"{name}.py"] = header(source, repo, path, commit) + extract(source)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--tilegym", type=Path, required=True, help="bare git dir of NVIDIA/TileGym")
    parser.add_argument("--cutile", type=Path, required=True, help="bare git dir of NVIDIA/cutile-python")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    files = build({"NVIDIA/TileGym": args.tilegym, "NVIDIA/cutile-python": args.cutile})
    if args.check:
        diffs = [n for n, t in files.items() if not (OUT / n).exists() or (OUT / n).read_text() != t]
        for n in diffs:
            print(f"differs: kernels/{n}")
        return 1 if diffs else 0
    OUT.mkdir(exist_ok=True)
    for stale in set(p.name for p in OUT.glob("*.py")) - set(files):
        (OUT / stale).unlink()
    for name, text in files.items():
        (OUT / name).write_text(text)
    print(f"{len(files)} kernel files in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
