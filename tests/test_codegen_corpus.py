"""Every corpus kernel compiles for every target, and ptxas accepts the result.

This is issue 3's acceptance test: the whole path bytecode -> cuda_tile IR ->
LLVM IR -> PTX (llvmlite NVPTX) -> cubin (ptxas) for sm_80 .. sm_121, with no
register spills reported by `ptxas -v`. By default each kernel runs on the four
families' targets (sm_80, sm_90, sm_100, sm_120), the GPU it was written for and
one more target in turn, so that the corpus covers every target; `-m sweep` runs
every kernel on every target.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tileiras.driver.options import GPU_NAMES

CORPUS = Path(__file__).parent / "corpus"


def _corpus_files() -> list[tuple[str, Path, str]]:
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    out = []
    for kernel in manifest["kernels"]:
        files = kernel["files"]
        newest = max(files, key=lambda v: tuple(int(p) for p in v.split(".")))
        out.append((kernel["name"], CORPUS / files[newest], kernel.get("gpu_code") or "sm_90"))
    return out


CORPUS_ENTRIES = _corpus_files()
CORPUS_FILES = [(name, path) for name, path, _ in CORPUS_ENTRIES]


def _lower(path: Path, gpu: str) -> tuple[str, object]:
    from tileiras.bytecode.reader import read_module
    from tileiras.lowering.pipeline import lower_module

    module = read_module(path.read_bytes(), str(path))
    return lower_module(module, gpu)


FEATURE_MESSAGE = re.compile(r"error: '(cuda_tile\.\w+)' op (.+) requires sm_(\d+) or newer; the target is (sm_\d+)")
FAMILY_MESSAGE = re.compile(r"error: '(cuda_tile\.\w+)' op (.+) requires (sm_\d+) \(no other family has it\); "
                            r"the target is (sm_\d+)")


def _diagnosed_as_missing(message: str, gpu: str) -> bool:
    """The diagnostic names op, type and target, and the target indeed lacks the feature."""
    found = FEATURE_MESSAGE.search(message)
    if found:
        return found.group(4) == gpu and int(gpu[3:]) < int(found.group(3))
    found = FAMILY_MESSAGE.search(message)
    return bool(found) and found.group(4) == gpu and found.group(3) != gpu


FAMILIES = ("sm_80", "sm_90", "sm_100", "sm_120")


def _sampled(index: int, exported_for: str) -> tuple[str, ...]:
    """The families' targets, the kernel's own and the `index`-th of the others in turn."""
    others = [gpu for gpu in GPU_NAMES if gpu not in FAMILIES]
    return tuple(gpu for gpu in GPU_NAMES if gpu in {*FAMILIES, exported_for, others[index % len(others)]})


def _compiles_for(name: str, path: Path, exported_for: str, targets: tuple[str, ...]) -> None:
    """Every target of `targets` either gets a cubin ptxas accepts, or a diagnostic naming op, type and target."""
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.codegen.ptxas import assemble, resource_usage
    from tileiras.errors import CompileError

    failures, compiled = [], []
    for gpu in targets:
        try:
            llvm_ir, meta = _lower(path, gpu)
        except CompileError as exc:
            assert _diagnosed_as_missing(exc.message, gpu), f"{name} on {gpu}: {exc.message}"
            continue
        ptx = llvm_to_ptx(llvm_ir, gpu, 3)
        cubin = assemble(ptx, gpu, 3)
        assert cubin[:4] == b"\x7fELF", f"{name} on {gpu}: ptxas output is not an ELF cubin"
        assert meta.kernels, f"{name}: no kernel metadata"
        compiled.append(gpu)
        if gpu in ("sm_80", "sm_90", "sm_100"):
            usage = resource_usage(ptx, gpu)
            for kernel, facts in usage.items():
                if facts.get("spill_stores", 0) or facts.get("spill_loads", 0):
                    failures.append(f"{gpu} {kernel}: spills {facts}")
    if exported_for == "sm_90":
        blackwell = [gpu for gpu in ("sm_100", "sm_121") if gpu in targets]
        assert all(gpu in compiled for gpu in blackwell), f"{name} compiles for no Blackwell target"
    else:  # a kernel written for one GPU (fnv8E5M3FNU: sm_107 only) compiles at least there
        assert exported_for in compiled, f"{name} does not compile for {exported_for}, the GPU it was written for"
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("index,name,path,exported_for", [(i, *e) for i, e in enumerate(CORPUS_ENTRIES)],
                         ids=[n for n, _, _ in CORPUS_ENTRIES])
def test_corpus_kernel_compiles_for_a_sample_of_targets(index: int, name: str, path: Path, exported_for: str) -> None:
    _compiles_for(name, path, exported_for, _sampled(index, exported_for))


def test_the_sample_covers_every_target() -> None:
    covered = set().union(*(_sampled(i, e) for i, (_, _, e) in enumerate(CORPUS_ENTRIES)))
    assert covered == set(GPU_NAMES)


@pytest.mark.sweep
@pytest.mark.parametrize("name,path,exported_for", CORPUS_ENTRIES, ids=[n for n, _, _ in CORPUS_ENTRIES])
def test_corpus_kernel_compiles_for_every_target(name: str, path: Path, exported_for: str) -> None:
    _compiles_for(name, path, exported_for, tuple(GPU_NAMES))


@pytest.mark.parametrize("kernel,gpu,what,lowest", [
    ("cast_f8", "sm_80", "element type f8E4M3FN", 89),
    ("cast_f8", "sm_86", "element type f8E4M3FN", 89),
    ("cast_f4", "sm_90", "element type f4E2M1FN", 100),
])
def test_unsupported_feature_is_diagnosed(kernel: str, gpu: str, what: str, lowest: int) -> None:
    from tileiras.errors import CompileError

    path = dict(CORPUS_FILES)[kernel]
    with pytest.raises(CompileError) as info:
        _lower(path, gpu)
    found = FEATURE_MESSAGE.search(info.value.message)
    assert found, info.value.message
    assert (found.group(1), found.group(2), int(found.group(3)), found.group(4)) == \
        ("cuda_tile.ftof", what, lowest, gpu)


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
