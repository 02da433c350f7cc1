"""Malformed bytecode and text: one diagnostic, exit code 3 or 5, no traceback,
no hang, memory bounded by the input (a length field claiming 4 GB allocates nothing).

The bytecode cases live in tests/data/bad_bytecode (see generate.py there);
MANIFEST.json maps each file to the text its diagnostic must contain.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tracemalloc

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

from tileiras.bytecode.reader import read_module  # noqa: E402
from tileiras.dialects.verifier import verify_module  # noqa: E402
from tileiras.errors import BytecodeError, CompileError, TileirasError  # noqa: E402
from tileiras.frontend import load_module  # noqa: E402
from tileiras.text.parser import parse_module  # noqa: E402
from tileiras.text.printer import print_module  # noqa: E402

BAD = os.path.join(os.path.dirname(__file__), "data", "bad_bytecode")
MANIFEST = json.load(open(os.path.join(BAD, "MANIFEST.json")))
CASES = sorted(k for k, v in MANIFEST.items() if v)


def _data(name: str) -> bytes:
    return open(os.path.join(BAD, f"{name}.tileirbc"), "rb").read()


def test_the_unbroken_module_reads() -> None:
    module = read_module(_data("valid"), "valid")
    verify_module(module)
    assert "entry @k()" in print_module(module)


@pytest.mark.parametrize("name", CASES)
def test_bad_bytecode_is_diagnosed(name: str) -> None:
    with pytest.raises(BytecodeError) as info:
        read_module(_data(name), name)
    err = info.value
    assert int(err.code) == 3
    assert MANIFEST[name] in err.message
    assert all(line.startswith("error: ") for line in err.message.splitlines())


@pytest.mark.parametrize("name", [n for n in CASES if "4gb" in n or "2pow63" in n or "too_long" in n])
def test_huge_length_claims_allocate_nothing(name: str) -> None:
    data = _data(name)
    tracemalloc.start()
    try:
        with pytest.raises(BytecodeError):
            read_module(data, name)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{name}: reading {len(data)} bytes peaked at {peak} bytes"


@pytest.mark.parametrize("name", ["wrong_magic", "section_length_4gb", "cyclic_type", "operand_index_out_of_range",
                                  "unknown_version_12_4", "truncated_section"])
def test_disassembler_cli_reports_without_traceback(name: str) -> None:
    res = subprocess.run([sys.executable, "-m", "tileiras.driver.disasm_main", os.path.join(BAD, f"{name}.tileirbc")],
                         capture_output=True, text=True, timeout=60, cwd=fs.REPO)
    assert res.returncode == 3
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert res.stderr.startswith("error: ")


def test_mlir_bytecode_gets_the_hint() -> None:
    with pytest.raises(BytecodeError) as info:
        load_module(b"ML\xefR\x06\x00\x00\x00", "x.mlirbc")
    assert info.value.message == ("error: input does not correspond to Tile IR bytecode "
                                  "(it looks like MLIR bytecode instead)")
    assert int(info.value.code) == 3


def test_binary_garbage_is_not_tileir() -> None:
    with pytest.raises(BytecodeError, match="input does not correspond to Tile IR bytecode$"):
        load_module(b"\x00\x01\x02garbage", "x.bin")


def test_missing_input_exit_code_1_unreadable_4(tmp_path) -> None:
    """NVIDIA's codes: a missing input exits 1; one that exists but cannot be read (here an I/O error:
    the tests may run as root, whom permissions do not stop) exits 4."""
    with pytest.raises(TileirasError) as info:
        load_module(str(tmp_path / "missing.tileirbc"))
    assert int(info.value.code) == 1 and "unable to read input file" in info.value.message
    with pytest.raises(TileirasError) as info:
        load_module("/proc/self/mem")
    assert int(info.value.code) == 4 and "unable to read input file '/proc/self/mem'" in info.value.message


@pytest.mark.parametrize("text,message", [
    ("entry @k() {\n  %0 = addf %x, %y : tile<f32>\n}", "t.mlir:2:13: error: use of undeclared SSA value name"),
    ("entry @k() {\n  %0 = nosuchop : tile<f32>\n}", "t.mlir:2:8: error: custom op 'nosuchop' is unknown"),
    ("entry @k() {\n  %0 = constant <f32: 1.0> : tile<3xf32>\n}", "all dimensions must be powers of two, got 3"),
    ("entry @k( {", "t.mlir:1:11: error: custom op 'cuda_tile.entry' expected SSA identifier"),
    ("entry @k() {\n  %0 = constant <i8: 300> : tile<i8>\n}", "integer constant out of range for type"),
    ("entry @k() {\n  %a = make_token : token\n  %b = make_token : token\n  %c = join_tokens %a, %b : token\n"
     "  %d = addi %c, %c : tile<i32>\n}", "use of value '%c' expects different type than prior uses: "
                                          "'!cuda_tile.tile<i32>' vs '!cuda_tile.token'"),
    ('entry @k(%x: tile<i1>) {\n  assert %x, "unterminated', "unterminated string literal"),
    ("entry @k() {\n  %0 = constant <f32: 1.0e+99999999999999999999> : tile<f32>\n}", None),
])
def test_malformed_text_is_diagnosed(text: str, message) -> None:
    if message is None:  # absurd literals must parse (to infinity) quickly, not hang
        module = parse_module(text, "t.mlir")
        assert "0x7F800000" in print_module(module)
        return
    with pytest.raises(CompileError) as info:
        verify_module(parse_module(text, "t.mlir"))
    assert message in info.value.message
    assert int(info.value.code) == 5


def test_deep_nesting_is_diagnosed_not_crashing() -> None:
    depth = 3000
    text = "entry @k() {\n" + "  %c = constant <i1: true> : tile<i1>\n" + "if %c {\n" * depth + "}\n" * depth + "}"
    with pytest.raises(CompileError):
        verify_module(parse_module(text, "deep.mlir"))


def _mutate(rnd: random.Random, data: bytes) -> bytes:
    d = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        i = rnd.randrange(len(d))
        r = rnd.random()
        if r < 0.6:
            d[i] = rnd.randrange(256)
        elif r < 0.8:
            del d[i:i + rnd.randint(1, 8)]
        else:
            d[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 5)))
    return bytes(d)


def test_random_corruptions_never_escape_as_python_errors() -> None:
    rnd = random.Random(20260601)
    seeds = list(fs.sample_bytes("13.4").values()) + list(fs.sample_bytes("13.1").values())
    for _ in range(600):
        data = _mutate(rnd, rnd.choice(seeds))
        try:
            module = read_module(data, "fuzz")
            verify_module(module)
            print_module(module, debug_info=True)
        except TileirasError:
            pass
