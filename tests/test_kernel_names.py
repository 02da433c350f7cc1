"""Kernel and global names: what PTX cannot hold is refused in one line; the rest keeps its name
in the PTX entry, the metadata, the header and the host object.

A kernel's PTX entry is its TileIR name unchanged, so that name must be a PTX identifier (a letter
then letters, digits, '_' and '$'; or '_' or '$' and at least one of those). NVIDIA's tileiras
refuses other names too (exit 5); before the check, ours died in LLVM ("Symbol name with unsupported
characters"), in the LLVM IR parser or in ptxas. A global's name is internal: LLVM renames it, so any
name is accepted once the LLVM IR quotes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.driver.tileiras_main import main

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NVIDIA = fs.oracle("tileiras")

REFUSED = ["my-kernel", "a.b", "k w", "k@x", "%k", "1abc", "_", "$", "k.", "é", "ﬁ", "tab\there"]
ACCEPTED = ["k$1", "k_1", "$$", "_k", "__", "tile$main", "K9"]


def module(*kernels: str, global_name: str = "lut") -> str:
    quoted = lambda name: name.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")  # noqa: E731
    entries = "".join(f'  cuda_tile.entry @"{quoted(name)}"(%p: !cuda_tile.tile<!cuda_tile.ptr<f32>>, '
                      f'%n: !cuda_tile.tile<i32>) {{\n'
                      f'    %g = cuda_tile.get_global @"{quoted(global_name)}" : '
                      f'!cuda_tile.tile<!cuda_tile.ptr<f32>>\n'
                      f'    cuda_tile.return\n  }}\n' for name in kernels)
    return (f'cuda_tile.module @m {{\n  cuda_tile.global private constant @"{quoted(global_name)}" alignment = 16 '
            f'<f32: [1.0, 2.0, 3.0, 4.0]> : !cuda_tile.tile<4xf32>\n{entries}}}\n')


@pytest.mark.parametrize("name", REFUSED)
def test_a_kernel_name_ptx_cannot_hold_is_refused_in_one_line(tmp_path: Path, name: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "k.mlir"
    source.write_text(module(name))
    out = tmp_path / "k.ll"
    assert main(["--gpu-name", "sm_90", str(source), "-o", str(out), "--emit=llvm", "--no-cache"]) == 5
    # the refusal, then the line naming the input every failed compile ends with (as NVIDIA's)
    line, last = capsys.readouterr().err.splitlines()
    assert last == f"error: failed to compile Tile IR program '{source}'"
    assert line.startswith("error: kernel name '")
    assert "is not a PTX identifier" in line and not out.exists()


def test_accepted_names_are_the_ptx_entry_the_metadata_and_the_launchers(tmp_path: Path) -> None:
    source = tmp_path / "k.mlir"
    source.write_text(module(*ACCEPTED))
    ptx = tmp_path / "k.ptx"
    assert main(["--gpu-name", "sm_90", str(source), "-o", str(ptx), "--emit=ptx", "--no-cache"]) == 0
    lines = ptx.read_text().splitlines()
    entries = [line.split()[2].rstrip("(") for line in lines if line.startswith(".visible .entry")]
    assert entries == ACCEPTED
    obj, header = tmp_path / "k.o", tmp_path / "k.h"
    assert main(["--gpu-name", "sm_90", str(source), "-o", str(obj), "--emit=obj", "--header", str(header),
                 "--emit-metadata", "--no-cache"]) == 0
    from tileiras.codegen.cabi import launcher_names
    from tileiras.codegen.metadata import ModuleMetadata

    meta = ModuleMetadata.from_json(Path(f"{obj}.json").read_text())
    assert [kernel.name for kernel in meta.kernels] == ACCEPTED
    launchers = launcher_names(ACCEPTED)
    assert len(set(launchers.values())) == len(ACCEPTED)  # k$1 and k_1 do not collide
    text, binary = header.read_text(), obj.read_bytes()
    for name, launcher in launchers.items():
        assert f"int {launcher}(CUstream stream" in text
        assert launcher.encode() + b"\0" in binary and name.encode() + b"\0" in binary  # looked up by its PTX name


@pytest.mark.parametrize("name", ["é", "lut-1", "a.b", "1x", 'q"uote', "back\\slash"])
def test_any_global_name_is_quoted_for_llvm(tmp_path: Path, name: str) -> None:
    source = tmp_path / "k.mlir"
    source.write_text(module("kern", global_name=name))
    ptx = tmp_path / "k.ptx"
    assert main(["--gpu-name", "sm_90", str(source), "-o", str(ptx), "--emit=ptx", "--no-cache"]) == 0
    assert ".visible .entry kern(" in ptx.read_text()


@pytest.mark.skipif(NVIDIA is None, reason="NVIDIA's tileiras (nvidia-cuda-tileiras) is not installed")
@pytest.mark.parametrize("name", ["my-kernel", "_", "$$"])
def test_nvidia_refuses_the_same_names(tmp_path: Path, name: str) -> None:
    source = tmp_path / "k.mlir"
    source.write_text(module(name))
    bytecode = tmp_path / "k.tileirbc"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "asm", str(source), "-o", str(bytecode)],
                   env=env, check=True)
    theirs = subprocess.run([NVIDIA, str(bytecode), "--gpu-name", "sm_90", "-o", str(tmp_path / "nv.cubin")],
                            capture_output=True, text=True, timeout=300)
    ours = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", str(bytecode), "--gpu-name", "sm_90",
                           "-o", str(tmp_path / "k.cubin"), "--no-cache"], env=env, capture_output=True, text=True)
    assert theirs.returncode == ours.returncode == (0 if name in ACCEPTED else 5), theirs.stderr + ours.stderr
