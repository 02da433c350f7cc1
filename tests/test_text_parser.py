"""Text parser: tileirdisasm output and the full `cuda_tile.module` form.

Printing what we parse reproduces NVIDIA's text exactly; writing it gives
bytecode NVIDIA's tool prints identically; `tileir asm` does it end to end.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import frontend_samples as fs  # noqa: E402

from tileiras.bytecode.reader import read_module  # noqa: E402
from tileiras.bytecode.writer import write_module  # noqa: E402
from tileiras.dialects.verifier import verify_module  # noqa: E402
from tileiras.errors import CompileError  # noqa: E402
from tileiras.frontend import load_module  # noqa: E402
from tileiras.ir import attributes as A  # noqa: E402
from tileiras.text.parser import parse_module  # noqa: E402
from tileiras.text.printer import print_module  # noqa: E402

needs_oracle = pytest.mark.skipif(fs.oracle() is None, reason="NVIDIA's tileirdisasm is not installed")


@pytest.mark.parametrize("version", fs.VERSIONS)
def test_parse_of_printed_text_prints_the_same(version: str) -> None:
    for name, data in fs.sample_bytes(version).items():
        for debug in (False, True):
            text = print_module(read_module(data, name), debug_info=debug)
            module = parse_module(text, f"{name}.mlir")
            verify_module(module)
            assert print_module(module, debug_info=debug) == text, f"{name} (debug={debug})"


@needs_oracle
def test_nvidia_text_roundtrips_through_our_bytecode(tmp_path) -> None:
    files = fs.corpus_files()[::4] or []
    for v in ("13.1", "13.4"):
        for name, data in fs.sample_bytes(v).items():
            p = tmp_path / f"{name}_{v}.tileirbc"
            p.write_bytes(data)
            files.append(str(p))
    for path in files:
        ref = fs.run_oracle(["-g", path])
        if ref.returncode != 0:
            continue
        module = parse_module(ref.stdout, "nv.mlir")
        out = tmp_path / "out.tileirbc"
        out.write_bytes(write_module(module, fs.file_version(open(path, "rb").read())))
        got = fs.run_oracle(["-g", str(out)])
        assert got.returncode == 0 and got.stdout == ref.stdout, path


FULL_FORM = """
// The full form: module wrapper, dialect prefixes, qualified types and attributes.
!f32t = !cuda_tile.tile<4xf32>
cuda_tile.module @demo {
  cuda_tile.global private constant @lut alignment = 16 <f32: [1.0, 2.0, 3.0, 4.0]> : !cuda_tile.tile<4xf32>
  cuda_tile.entry @kern(%p: !cuda_tile.tile<!cuda_tile.ptr<f32>>, %n: !cuda_tile.tile<i32>) attributes {} {
    %c = cuda_tile.constant <f32: [1.5, 1.5, 1.5, 1.5]> : !f32t
    %d = cuda_tile.addf %c, %c rounding<zero> : !cuda_tile.tile<4xf32>
    %a = cuda_tile.assume #cuda_tile.div_by<16>, %n : !cuda_tile.tile<i32>
    %b = assume bounded<0, ?>, %a : tile<i32>
    %x = cuda_tile.cmpi less_than %a, %b, signed : tile<i32> -> tile<i1>
    %r = cuda_tile.if %x -> (!cuda_tile.tile<4xf32>) {
      cuda_tile.yield %d : !cuda_tile.tile<4xf32>
    } else {
      yield %c : tile<4xf32>
    }
    %g = get_global @lut : tile<ptr<f32>>
    %s = cuda_tile.reduce %r dim=0 identities=[0.000000e+00 : f32] : tile<4xf32> -> tile<f32>
    (%l: tile<f32>, %rr: tile<f32>) {
      %t = addf %l, %rr : tile<f32>
      yield %t : tile<f32>
    }
    %0 = cuda_tile.make_token : !cuda_tile.token
    cuda_tile.for %i in (%n to %n, step %n) : tile<i32> {
      cuda_tile.print_tko "i=%d\\n", %i token=%0 : tile<i32> -> token
    }
  }
}
"""


def test_full_form_parses_and_prints_short_form() -> None:
    module = parse_module(FULL_FORM, "full.mlir")
    verify_module(module)
    assert module.attributes["sym_name"] == "demo"
    text = print_module(module)
    assert text.startswith("global private  constant @lut alignment = 16 <f32: [1.000000e+00, 2.000000e+00, "
                           "3.000000e+00, 4.000000e+00]> : tile<4xf32>\n")
    assert "%cst_f32 = constant <f32: 1.500000e+00> : tile<4xf32>" in text  # uniform literal -> splat
    assert "%0 = addf %cst_f32, %cst_f32 rounding<zero> : tile<4xf32>" in text
    assert "%assume = assume div_by<16>, %arg1 : tile<i32>" in text
    assert "  } else {\n" in text and "reduce_lhs" in text
    assert '= print_tko "i=%d\\0A", %loopIdx token=%' in text
    entry = module.regions[0].blocks[0].operations[1]
    assert entry.regions[0].blocks[0].operations[-1].name == "cuda_tile.return"  # implicit terminator


def test_generic_op_form() -> None:
    text = ('"cuda_tile.module"() <{sym_name = "g"}> ({\n'
            '  "cuda_tile.entry"() <{function_type = (!cuda_tile.tile<f32>) -> (), sym_name = "k"}> ({\n'
            '  ^bb0(%arg0: !cuda_tile.tile<f32>):\n'
            '    %0 = "cuda_tile.addf"(%arg0, %arg0) <{rounding_mode = #cuda_tile.rounding<zero>}> : '
            '(!cuda_tile.tile<f32>, !cuda_tile.tile<f32>) -> !cuda_tile.tile<f32>\n'
            '    "cuda_tile.return"() : () -> ()\n'
            '  }) : () -> ()\n'
            '}) : () -> ()\n')
    module = parse_module(text, "generic.mlir")
    verify_module(module)
    assert print_module(module) == "entry @k(%arg0: tile<f32>) {\n  %0 = addf %arg0, %arg0 rounding<zero> : " \
                                   "tile<f32>\n  return\n}\n"


@pytest.mark.parametrize("text, message", [
    ("entry @k(%a: tile<i32>) optimization_hints=<sm_100=2> {\n}\n",
     "k.mlir:1:53: error: custom op 'cuda_tile.entry' expected dictionary attribute for optimization_hints entry "
     "`sm_100` got value=2 : i64"),
    ("entry @k(%a: tile<i32>) optimization_hints=<2> {\n}\n",
     "k.mlir:1:45: error: custom op 'cuda_tile.entry' expected valid keyword or string"),
    ('entry @k(%a: tile<i32>) {\n  %0 = "cuda_tile.exti"(%a) <{signedness = 5 : i32}> : (tile<i32>) -> tile<i64>\n}\n',
     "loc(\"k.mlir\":2:3): error: 'cuda_tile.exti' op attribute 'signedness' has invalid value '5 : i32'"),
    ("entry @k(%a: tile<i32>) {\n  %0 = cuda_tile.negi %a overflow<bad> : tile<i32>\n}\n",
     "expected string or keyword containing one of the following enum values for attribute 'overflow' "
     "[none, no_signed_wrap, no_unsigned_wrap, no_wrap]"),
])
def test_parse_errors_use_mlir_wording(text: str, message: str) -> None:
    with pytest.raises(CompileError) as info:
        verify_module(parse_module(text, "k.mlir"))
    assert message in info.value.message


def test_generic_enum_given_as_its_integer_value() -> None:
    text = ('entry @k(%a: tile<i32>) {\n  %0 = "cuda_tile.exti"(%a) <{signedness = 1 : i32}> : (tile<i32>) -> '
            'tile<i64>\n}\n')
    module = parse_module(text, "k.mlir")
    verify_module(module)
    assert "exti %arg0 signed : tile<i32> -> tile<i64>" in print_module(module)


def test_text_locations_feed_diagnostics() -> None:
    text = "entry @k(%a: tile<f16>) {\n  %0 = addf %a, %a flush_to_zero : tile<f16>\n}\n"
    with pytest.raises(CompileError) as info:
        verify_module(parse_module(text, "k.mlir"))
    assert info.value.message == ("loc(\"k.mlir\":2:3): error: 'cuda_tile.addf' op flush_to_zero modifier only supported "
                                  "for f32 data type, but got: 'f16'")


def test_debug_locations_survive_text(tmp_path) -> None:
    data = open(fs.corpus_files()[0], "rb").read() if fs.corpus_files() else fs.sample_bytes("13.4")["misc"]
    module = read_module(data, "x")
    text = print_module(module, debug_info=True)
    again = parse_module(text, "x.mlir")
    locs = [op.location for op in again.walk() if op.location is not None]
    assert print_module(again, debug_info=True) == text
    if "#di_subprogram" in text:
        assert any(getattr(loc, "scope", None) is not None or isinstance(loc, A.CallSiteLoc) for loc in locs)


def _asm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileir_main", "asm", *args], capture_output=True,
                          text=True, timeout=120, cwd=fs.REPO)


@pytest.mark.parametrize("version", ["13.1", "13.3", "13.4"])
def test_tileir_asm_cli(tmp_path, version: str) -> None:
    src = tmp_path / "k.mlir"
    src.write_text(print_module(read_module(fs.sample_bytes("13.1")["control_flow"], "x")))
    out = tmp_path / "k.tileirbc"
    res = _asm(str(src), "-o", str(out), "--bytecode-version", version)
    assert res.returncode == 0, res.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x7fTileIR\x00" and fs.file_version(data) == version
    assert print_module(load_module(data)) == src.read_text()


def test_tileir_asm_failures_leave_no_output(tmp_path) -> None:
    src = tmp_path / "bad.mlir"
    src.write_text("entry @k() {\n  %0 = addf %nope, %nope : tile<f32>\n}\n")
    out = tmp_path / "bad.tileirbc"
    res = _asm(str(src), "-o", str(out))
    assert res.returncode == 5 and "use of undeclared SSA value name" in res.stderr and "Traceback" not in res.stderr
    assert not out.exists() and not list(tmp_path.glob(".bad.tileirbc.*"))
    res = _asm(str(src), "-o", str(out), "--bytecode-version", "12.0")
    assert res.returncode == 2 and "unsupported bytecode version" in res.stderr
    res = _asm()
    assert res.returncode == 1 and "no input file" in res.stderr
    res = _asm(str(tmp_path / "missing.mlir"), "-o", str(out))
    assert res.returncode == 1   # a missing input: exit 1, as NVIDIA's tileiras (README)
    ok = tmp_path / "ok.mlir"
    ok.write_text(print_module(read_module(fs.sample_bytes("13.4")["tokens_13_4"], "x")))
    res = _asm(str(ok), "-o", str(out), "--bytecode-version", "13.3")  # gdc ops need 13.4
    assert res.returncode == 5 and "not available in bytecode version 13.3" in res.stderr and not out.exists()


@needs_oracle
def test_tileir_asm_output_is_accepted_by_nvidia(tmp_path) -> None:
    src = tmp_path / "k.mlir"
    src.write_text(FULL_FORM)
    out = tmp_path / "k.tileirbc"
    assert _asm(str(src), "-o", str(out), "--bytecode-version", "13.3").returncode == 0
    res = fs.run_oracle([str(out)])
    assert res.returncode == 0 and res.stdout == print_module(parse_module(FULL_FORM, "x"))
