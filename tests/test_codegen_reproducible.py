"""Same inputs, same bytes: PTX, cubin, fatbin and object from any directory, user setup or time."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data" / "llvm"
ROOT = Path(__file__).parent.parent

CHAIN = r"""
import hashlib, json, sys
from pathlib import Path
from tileiras.codegen.fatbin import make_fatbin
from tileiras.codegen.header import make_header
from tileiras.codegen.host_object import make_host_object
from tileiras.codegen.metadata import ModuleMetadata
from tileiras.codegen.nvptx import llvm_to_ptx
from tileiras.codegen.ptxas import assemble

data = Path(sys.argv[1])
ir = (data / "scalars.ll").read_text()
meta = ModuleMetadata.from_json((data / "scalars.meta.json").read_text())
ptx = {gpu: llvm_to_ptx(ir, gpu) for gpu in ("sm_80", "sm_100", "sm_107")}
cubins = {gpu: assemble(text, gpu, lineinfo=True) for gpu, text in ptx.items()}
fatbin = make_fatbin(cubins, {"sm_107": ptx["sm_107"]})
metas = [ModuleMetadata(meta.kernels, gpu) for gpu in ptx]
digest = lambda b: hashlib.sha256(b if isinstance(b, bytes) else b.encode()).hexdigest()
out = {f"ptx {g}": digest(t) for g, t in ptx.items()}
out.update({f"cubin {g}": digest(c) for g, c in cubins.items()})
out["fatbin"] = digest(fatbin)
for host in (("x86_64", "linux"), ("aarch64", "linux"), ("x86_64", "windows")):
    out["object " + "-".join(host)] = digest(make_host_object(fatbin, metas, *host))
out["header"] = digest(make_header(metas, "K_H"))
print(json.dumps(out, sort_keys=True))
"""


def run_chain(cwd: Path, **env: str) -> dict[str, str]:
    environment = dict(os.environ, PYTHONPATH=str(ROOT), **env)
    done = subprocess.run([sys.executable, "-c", CHAIN, str(DATA)], cwd=cwd, env=environment, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)


def test_byte_identical_from_different_places(tmp_path: Path) -> None:
    first_dir, second_dir = tmp_path / "first", tmp_path / "second dir" / "nested"
    for directory in (first_dir, second_dir):
        (directory / "tmp").mkdir(parents=True)
    first = run_chain(first_dir, TMPDIR=str(first_dir / "tmp"), HOME=str(first_dir), PYTHONHASHSEED="1",
                      TZ="UTC", LC_ALL="C")
    second = run_chain(second_dir, TMPDIR=str(second_dir / "tmp"), HOME=str(second_dir), PYTHONHASHSEED="2",
                       TZ="Asia/Tokyo", SOURCE_DATE_EPOCH="0")
    assert first == second
    assert len(first) == 11 and len(set(first.values())) == 11
    assert hashlib.sha256(b"").hexdigest() not in first.values()


def test_the_same_module_lowers_to_the_same_llvm_ir_in_one_process() -> None:
    """A warp-specialized kernel's rolled loops carry loop metadata: its numbers start again with each
    module, so lowering another kernel or target first changes nothing (a compile with several
    targets, or a worker compiling one module after another)."""
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    source = Path(__file__).parent / "realistic" / "bytecode" / "mm_f16_128x128x64.tileirbc"
    first, _ = lower_module(load_module(source.read_bytes(), source.name), "sm_90")
    assert "llvm.loop.unroll.disable" in first
    lower_module(load_module(source.read_bytes(), source.name), "sm_100")
    again, _ = lower_module(load_module(source.read_bytes(), source.name), "sm_90")
    assert again == first
