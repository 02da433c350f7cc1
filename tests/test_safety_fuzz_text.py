"""The text-form mutation fuzzer (tests/fuzz_text.py) at a small, fixed budget, and the inputs it
and issue 37 found: valid kernels NVIDIA's tileiras compiles that ours did not, and a pointer
constant that was an internal compiler error (tileiras) or a traceback (tileir asm). Every mutant
must end in a diagnostic or succeed: no internal compiler error, invalid LLVM IR, hang or crash.

TILEIRAS_FUZZ_SECONDS=600 runs the fuzzer for ten minutes instead (or: benchmarks/fuzz_text.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import fuzz_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "fuzz_text"
SEED = 20261125
INPUTS = 400           # about 40 s on one core
FULL_EVERY = 50        # of the ~150 mutants that lower, 3 go through LLVM and ptxas


def test_mutated_text_never_escapes_as_an_internal_error_hang_or_crash(tmp_path: Path) -> None:
    seconds = float(os.environ.get("TILEIRAS_FUZZ_SECONDS", "0") or 0)
    seeds = None if seconds else fuzz_text.corpus(realistic=False)  # CI: the small kernels only
    report = fuzz_text.fuzz(seconds or 3600.0, SEED, max_inputs=None if seconds else INPUTS,
                            full_every=FULL_EVERY, workdir=tmp_path, seeds=seeds)
    print(report.summary())
    assert report.inputs >= (1 if seconds else INPUTS)
    assert report.outcomes.get("lowered", 0) > 0 and report.outcomes.get("rejected", 0) > 0  # both sides reached
    assert not report.failures, "\n\n".join(detail for _, detail in report.failures)


def _driver(*args: str, cwd: Path, module: str = "tileiras.driver.tileiras_main",
            **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.mark.parametrize("kernel,gpu", [
    ("cga2_scalar_reshape", "sm_90"), ("cga2_scalar_reshape", "sm_100"), ("cga2_scalar_reshape", "sm_120"),
    ("copy_i1_256", "sm_80"), ("copy_i1_256", "sm_90"), ("copy_i1_256", "sm_100"), ("copy_i1_65536", "sm_90"),
    ("attention_m64_unpipelined", "sm_100"),
])
def test_valid_kernels_the_fuzzer_found_compile(tmp_path: Path, kernel: str, gpu: str) -> None:
    source = tmp_path / f"{kernel}.mlir"
    if kernel == "copy_i1_65536":  # the same copy at 65536 elements (NVIDIA's compiles it too)
        source.write_text((DATA / "copy_i1_256.mlir").read_text().replace("256", "65536"))
    else:
        source.write_text((DATA / f"{kernel}.mlir").read_text())
    done = _driver("--gpu-name", gpu, str(source), "-o", "k.cubin", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.cubin").read_bytes().startswith(b"\x7fELF")


@pytest.mark.parametrize("kernel", ["cga2_scalar_reshape", "copy_i1_256"])
def test_the_found_kernels_run_as_the_interpreter_says(tmp_path: Path, kernel: str) -> None:
    """The emulator runs the PTX we emit and agrees with the reference interpreter (a padded last tile too)."""
    import numpy as np

    rng = np.random.default_rng(37)
    arrays = ({"0": np.zeros(3, np.float32)} if kernel == "cga2_scalar_reshape" else
              {"0": rng.random(300) > 0.5, "1": np.zeros(300, bool)})
    np.savez(tmp_path / "in.npz", **arrays)
    results = {}
    for backend in ("interpreter", "emulator"):
        done = _driver("run", str(DATA / f"{kernel}.mlir"), "--kernel", "k", "--grid", "2", "--args", "in.npz",
                       "--out", f"{backend}.npz", "--backend", backend, "--gpu-name", "sm_90", cwd=tmp_path,
                       module="tileiras.driver.tileir_main")
        assert done.returncode == 0, done.stderr
        results[backend] = dict(np.load(tmp_path / f"{backend}.npz"))
    for key in arrays:
        assert np.array_equal(results["interpreter"][key], results["emulator"][key]), key
    if kernel == "copy_i1_256":
        assert np.array_equal(results["emulator"]["1"], arrays["0"])


POINTER_CONSTANT = "entry @k() {\n  %c = constant <ptr<i1>: 0> : tile<ptr<i1>>\n  return\n}\n"
REFUSAL = "k.mlir:2:26: error: custom op 'cuda_tile.constant' expected an integer or floating point element type " \
          "for the constant, got 'ptr<i1>'"


@pytest.mark.parametrize("command", ["tileiras", "tileir asm"])
def test_a_pointer_constant_is_a_diagnostic(tmp_path: Path, command: str) -> None:
    (tmp_path / "k.mlir").write_text(POINTER_CONSTANT)
    if command == "tileiras":
        done = _driver("--gpu-name", "sm_90", "k.mlir", "-o", "k.cubin", cwd=tmp_path)
    else:
        done = _driver("asm", "k.mlir", "-o", "k.tileirbc", cwd=tmp_path, module="tileiras.driver.tileir_main")
    assert done.returncode == 5
    assert done.stderr.splitlines()[0] == REFUSAL
    assert "Traceback" not in done.stderr and "internal" not in done.stderr


def test_tileir_reports_a_bug_of_any_subcommand_in_one_line(monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from tileiras.driver import cmd_cmake_dir, tileir_main

    monkeypatch.delenv("TILEIRAS_DEBUG", raising=False)
    monkeypatch.setattr(cmd_cmake_dir, "main", lambda argv: [][0])
    assert tileir_main.main(["cmake-dir"]) == 5
    err = capsys.readouterr().err
    assert err.startswith("error: internal compiler error: IndexError") and len(err.splitlines()) == 1
