"""`tileirdisasm` command line: options, messages and exit codes like NVIDIA's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

from tileiras.driver import disasm_main  # noqa: E402

needs_oracle = pytest.mark.skipif(fs.oracle() is None, reason="NVIDIA's tileirdisasm is not installed")


def _run(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.disasm_main", *args], capture_output=True,
                          timeout=60, cwd=fs.REPO, input=stdin)


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("cli") / "misc.tileirbc"
    p.write_bytes(fs.sample_bytes("13.4")["misc"])
    return str(p)


def test_prints_the_module(sample: str) -> None:
    res = _run(sample)
    assert res.returncode == 0 and res.stderr == b""
    assert res.stdout.decode().startswith("entry @k(")


@needs_oracle
@pytest.mark.parametrize("flags", [[], ["-g"], ["--print-debug-info"], ["-g=false"], ["--print-debug-info=1"],
                                   ["--preview=simt"]])
def test_output_and_flags_match_nvidia(sample: str, flags: list) -> None:
    ours = _run(*flags, sample)
    ref = fs.run_oracle(flags + [sample])
    assert ours.returncode == ref.returncode == 0
    assert ours.stdout.decode() == ref.stdout


def test_no_input() -> None:
    res = _run()
    assert res.returncode == 2
    assert res.stderr == b"error: no input file provided\n\n"
    assert res.stdout.decode().startswith("OVERVIEW: tileirdisasm: NVIDIA (R) Cuda Tile IR disassembler\n\nUSAGE: ")


def test_missing_file(tmp_path) -> None:
    path = str(tmp_path / "nope.tileirbc")
    res = _run(path)
    assert res.returncode == 2
    assert res.stderr.decode() == f"error: error: unable to read input file '{path}': No such file or directory\n\n"


def test_directory_input(tmp_path) -> None:
    res = _run(str(tmp_path))
    assert res.returncode == 2 and b"Is a directory" in res.stderr


def test_not_bytecode(tmp_path) -> None:
    p = tmp_path / "text.txt"
    p.write_text("hello")
    res = _run(str(p))
    assert res.returncode == 3 and res.stderr == b"error: input does not correspond to Tile IR bytecode\n"
    p.write_bytes(b"ML\xefR\x06rest")
    res = _run(str(p))
    assert res.returncode == 3
    assert res.stderr == b"error: input does not correspond to Tile IR bytecode (it looks like MLIR bytecode instead)\n"


def test_command_line_errors(sample: str) -> None:
    res = _run(sample, sample)
    assert res.returncode == 1 and b"Too many positional arguments specified!" in res.stderr
    res = _run("-q", sample)
    assert res.returncode == 1 and b"Unknown command line argument '-q'" in res.stderr
    assert b"Did you mean '-g'?" in res.stderr
    res = _run("--preview=foo", sample)
    assert res.returncode == 1
    assert res.stderr == b"tileirdisasm: for the --preview option: unknown preview feature 'foo'; supported features: simt\n"


def test_help_and_version() -> None:
    res = _run("--help")
    assert res.returncode == 0 and b"TileIR Disassembler Options:" in res.stdout and b"--print-debug-info" in res.stdout
    res = _run("--help-list")
    assert res.returncode == 0 and b"Generic Options" not in res.stdout and b"-g " in res.stdout
    res = _run("--version")
    assert res.returncode == 0 and res.stdout.startswith(b"tileirdisasm: ")


def test_verification_failures_are_exit_3(tmp_path) -> None:
    from tileiras.bytecode.reader import read_module
    from tileiras.bytecode.writer import write_module

    module = read_module(fs.sample_bytes("13.4")["float_arith"], "x")
    for op in module.walk():
        if op.name == "cuda_tile.addf":
            op.attributes["rounding_mode"] = "approx"  # encodable, but invalid for addf
            break
    p = tmp_path / "invalid.tileirbc"
    p.write_bytes(write_module(module, "13.4"))
    res = _run(str(p))
    assert res.returncode == 3
    assert res.stderr.decode().splitlines() == [
        "error: 'cuda_tile.addf' op invalid rounding mode specified, expect one of [nearest_even, zero, "
        "negative_inf, positive_inf]",
        "error: verification failed for deserialized cuda_tile::ModuleOp",
        "error: failed to read provided Tile IR bytecode"]
    if fs.oracle():
        ref = fs.run_oracle([str(p)])
        assert ref.returncode == 3 and ref.stderr == res.stderr.decode()


def test_main_is_callable_in_process(sample: str, capsys) -> None:
    assert disasm_main.main([sample]) == 0
    assert capsys.readouterr().out.startswith("entry @k(")
    assert disasm_main.main(["--bogus"]) == 1
