"""`tileir package` and `tileir header`: outputs, and clear errors with documented exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.codegen.fatbin import parse_fatbin
from tileiras.codegen.nvptx import llvm_to_ptx
from tileiras.codegen.ptxas import assemble

DATA = Path(__file__).parent / "data" / "llvm"
ROOT = Path(__file__).parent.parent


def tileir(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", *args], cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pkg")
    ptx = llvm_to_ptx((DATA / "vadd.ll").read_text(), "sm_90")
    (root / "k.ptx").write_text(ptx)
    (root / "k.cubin").write_bytes(assemble(ptx, "sm_90"))
    (root / "k.json").write_text((DATA / "vadd.meta.json").read_text())
    return root


def test_package_writes_object_fatbin_and_header(work: Path) -> None:
    (work / "out").mkdir()
    done = tileir("package", "--metadata", "k.json", "--cubin", "sm_90=k.cubin", "--ptx", "sm_90=k.ptx",
                  "-o", "out/k.o", "--fatbin-out", "k.fatbin", "--header", "k.h", "--host-arch", "aarch64",
                  cwd=work)
    assert done.returncode == 0, done.stderr
    assert (work / "out" / "k.o").read_bytes()[:4] == b"\x7fELF"
    assert [(e.kind, e.gpu) for e in parse_fatbin((work / "k.fatbin").read_bytes())] == [("elf", "sm_90"),
                                                                                        ("ptx", "sm_90")]
    assert "int vadd_launch(" in (work / "k.h").read_text()
    header = tileir("header", "--metadata", "k.json", "-o", "k2.h", cwd=work)
    assert header.returncode == 0 and (work / "k2.h").read_text() == (work / "k.h").read_text().replace(
        "TILEIR_K_H", "TILEIR_K2_H")


@pytest.mark.parametrize("args, code, message", [
    (["--metadata", "k.json", "-o", "x.o"], 2, "give at least one --cubin"),
    (["--metadata", "k.json", "--cubin", "k.cubin", "-o", "x.o"], 2, "expected GPU=FILE"),
    (["--metadata", "missing.json", "--cubin", "sm_90=k.cubin", "-o", "x.o"], 4, "cannot read metadata"),
    (["--metadata", "k.json", "--cubin", "sm_90=missing.cubin", "-o", "x.o"], 4, "cannot read cubin"),
    (["--metadata", "k.ptx", "--cubin", "sm_90=k.cubin", "-o", "x.o"], 5, "malformed kernel metadata"),
    (["--metadata", "k.json", "--cubin", "sm_90=k.ptx", "-o", "x.o"], 5, "not a 64-bit"),
    (["--metadata", "k.json", "--cubin", "sm_80=k.cubin", "-o", "x.o"], 5, "built for sm_90"),
    (["--metadata", "k.json", "--cubin", "sm_90=k.cubin", "--cubin", "sm_90=k.cubin", "-o", "x.o"], 2, "twice"),
    (["--metadata", "k.json", "--cubin", "sm_90=k.cubin", "-o", "x.o", "--host-os", "beos"], 2, "invalid choice"),
    (["--cubin", "sm_90=k.cubin", "-o", "x.o"], 2, "--metadata"),
])
def test_package_errors(work: Path, args: list[str], code: int, message: str) -> None:
    done = tileir("package", *args, cwd=work)
    assert done.returncode == code
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert not (work / "x.o").exists()


def test_header_errors(work: Path) -> None:
    done = tileir("header", "--metadata", "k.cubin", "-o", "bad.h", cwd=work)
    assert done.returncode == 5 and "malformed" in done.stderr and not (work / "bad.h").exists()
    assert tileir("header", "-o", "bad.h", cwd=work).returncode == 2


def test_help(work: Path) -> None:
    for command in ("package", "header", "cache"):
        done = tileir(command, "--help", cwd=work)
        assert done.returncode == 0 and "usage: tileir" in done.stdout
