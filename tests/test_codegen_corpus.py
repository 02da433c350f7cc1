"""Every corpus kernel compiles for every target, and ptxas accepts the result.

This is issue 3's acceptance test: the whole path bytecode -> cuda_tile IR ->
LLVM IR -> PTX (llvmlite NVPTX) -> cubin (ptxas) for sm_80 .. sm_121, with no
register spills reported by `ptxas -v`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tileiras.driver.options import GPU_NAMES

CORPUS = Path(__file__).parent / "corpus"


def _corpus_files() -> list[tuple[str, Path]]:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    out = []
    for kernel in manifest["kernels"]:
        files = kernel["files"]
        newest = max(files, key=lambda v: tuple(int(p) for p in v.split(".")))
        out.append((kernel["name"], CORPUS / files[newest]))
    return out


CORPUS_FILES = _corpus_files()


def _lower(path: Path, gpu: str) -> tuple[str, object]:
    from tileiras.bytecode.reader import read_module
    from tileiras.lowering.pipeline import lower_module

    module = read_module(path.read_bytes(), str(path))
    return lower_module(module, gpu)


@pytest.mark.parametrize("name,path", CORPUS_FILES, ids=[n for n, _ in CORPUS_FILES])
def test_corpus_kernel_compiles_for_every_target(name: str, path: Path) -> None:
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.codegen.ptxas import assemble, resource_usage

    failures = []
    for gpu in GPU_NAMES:
        llvm_ir, meta = _lower(path, gpu)
        ptx = llvm_to_ptx(llvm_ir, gpu, 3)
        cubin = assemble(ptx, gpu, 3)
        assert cubin[:4] == b"\x7fELF", f"{name} on {gpu}: ptxas output is not an ELF cubin"
        assert meta.kernels, f"{name}: no kernel metadata"
        if gpu in ("sm_80", "sm_90", "sm_100"):
            usage = resource_usage(ptx, gpu)
            for kernel, facts in usage.items():
                if facts.get("spill_stores", 0) or facts.get("spill_loads", 0):
                    failures.append(f"{gpu} {kernel}: spills {facts}")
    assert not failures, "\n".join(failures)


def test_entry_abi_flattens_arrays_like_nvidia() -> None:
    """cuTile arrays arrive as (ptr, shape..., strides...): one .param each, in order."""
    from tileiras.codegen.nvptx import llvm_to_ptx

    name, path = next((n, p) for n, p in CORPUS_FILES if n == "ew_float")
    llvm_ir, meta = _lower(path, "sm_90")
    kernel = meta.kernels[0]
    types = [p.type for p in kernel.params]
    assert types[:3] == ["ptr<f32>", "i32", "i32"], types
    ptx = llvm_to_ptx(llvm_ir, "sm_90", 3)
    entry = ptx.split(f".entry {kernel.name}(")[1].split(")")[0]
    params = [line.strip() for line in entry.strip().splitlines()]
    assert len(params) == len(kernel.params)
    assert params[0].startswith(".param .u64") and params[1].startswith(".param .u32")
    assert f".reqntid {kernel.block[0]}, 1, 1" in ptx
