"""The canonical form's constant folds agree with numpy's arithmetic in the element type (round to
nearest even), and read and write splat constants without importing numpy themselves."""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np
import pytest

from tileiras.frontend import load_module
from tileiras.transforms.canonicalize import canonicalize
from tileiras.transforms.constants import splat_float

DTYPES = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


def _folded(elem: str, a: str, b: str) -> float:
    text = (f"entry @k(%arg0: tile<ptr<{elem}>>) {{\n  %0 = make_token : token\n"
            f"  %a = constant <{elem}: {a}> : tile<{elem}>\n  %b = constant <{elem}: {b}> : tile<{elem}>\n"
            f"  %s = addf %a, %b : tile<{elem}>\n"
            f"  %t = store_ptr_tko weak %arg0, %s token=%0 : tile<ptr<{elem}>>, tile<{elem}> -> token\n  return\n}}\n")
    module = load_module(text.encode(), "k.mlir")
    entry = module.regions[0].block.operations[0]
    canonicalize(entry)
    store = next(op for op in entry.walk() if op.name == "cuda_tile.store_ptr_tko")
    assert store.operands[1].owner.name == "cuda_tile.constant", "the addf was not folded"
    value = splat_float(store.operands[1])
    assert value is not None
    return value


@pytest.mark.parametrize("elem", sorted(DTYPES))
def test_addf_fold_rounds_as_the_element_type(elem: str) -> None:
    rng = random.Random(7)
    dtype = DTYPES[elem]
    for _ in range(12):
        a, b = (dtype(rng.uniform(-1, 1) * 2.0 ** rng.randint(-12, 12)) for _ in range(2))
        want = float(np.asarray(a, dtype) + np.asarray(b, dtype))
        assert _folded(elem, repr(float(a)), repr(float(b))) == want, (elem, a, b)


def test_addf_does_not_fold_past_the_largest_value() -> None:
    text = ("entry @k(%arg0: tile<ptr<f16>>) {\n  %0 = make_token : token\n"
            "  %a = constant <f16: 60000.0> : tile<f16>\n  %s = addf %a, %a : tile<f16>\n"
            "  %t = store_ptr_tko weak %arg0, %s token=%0 : tile<ptr<f16>>, tile<f16> -> token\n  return\n}\n")
    entry = load_module(text.encode(), "k.mlir").regions[0].block.operations[0]
    canonicalize(entry)
    assert any(op.name == "cuda_tile.addf" for op in entry.walk())


_ATOMICS = """entry @k(%arg0: tile<ptr<i32>>, %n0: tile<i32>, %s0: tile<i32>, %arg1: tile<ptr<i32>>, %n1: tile<i32>,
         %s1: tile<i32>, %arg2: tile<i32>) {
  %0 = make_token : token
  %n = constant <i32: 64> : tile<i32>
  %nb = reshape %n : tile<i32> -> tile<1xi32>
  %limit = reshape %arg2 : tile<i32> -> tile<1xi32>
  %base = reshape %arg0 : tile<ptr<i32>> -> tile<1xptr<i32>>
  %b = broadcast %base : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %out = reshape %arg1 : tile<ptr<i32>> -> tile<1xptr<i32>>
  %o = broadcast %out : tile<1xptr<i32>> -> tile<64xptr<i32>>
  %i = iota : tile<64xi32>
  %p = offset %b, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %q = offset %o, %i : tile<64xptr<i32>>, tile<64xi32> -> tile<64xptr<i32>>
  %lb = broadcast %limit : tile<1xi32> -> tile<64xi32>
  %m = cmpi less_than %i, %lb, signed : tile<64xi32> -> tile<64xi1>
  %z = constant <i32: 0> : tile<64xi32>
  %r, %t = atomic_rmw_tko acquire device %p, add, %z, %m token=%0 : tile<64xptr<i32>>, tile<64xi32>, tile<64xi1> -> tile<64xi32>, token
  %t2 = store_ptr_tko weak %q, %r, %m token=%t : tile<64xptr<i32>>, tile<64xi32>, tile<64xi1> -> token
  return
}
"""


def test_an_identity_atomic_is_an_atomic_load(tmp_path) -> None:
    """`atomic_add(p, 0)` (acquire, masked) is an acquire load in the PTX, and reads what it read."""
    import subprocess
    import sys
    from pathlib import Path

    from tileiras.runtime import run_arrays

    src = tmp_path / "k.mlir"
    src.write_text(_ATOMICS)
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", "sm_90",
                           str(src), "-o", str(tmp_path / "k.ptx")], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert "atom." not in ptx and "ld.acquire.gpu" in ptx
    module = load_module(_ATOMICS.encode(), "k.mlir")
    x = np.arange(64, dtype=np.int32) * 3
    out = run_arrays(module, "k", (1, 1, 1), [x, np.zeros(64, np.int32), np.array(40, np.int32)],
                     backend="emulator", gpu_name="sm_90", check_races=True)
    assert np.array_equal(out[1][:40], x[:40]) and not out[1][40:].any() and np.array_equal(out[0], x)


_EXTRACT = """entry @k(%arg0: tile<ptr<f32>>, %n0: tile<i32>, %s0: tile<i32>, %arg1: tile<ptr<f32>>, %n1: tile<i32>,
         %s1: tile<i32>, %which: tile<i32>) {
  %0 = make_token : token
  %base = reshape %arg0 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %b = broadcast %base : tile<1xptr<f32>> -> tile<64xptr<f32>>
  %i = iota : tile<64xi32>
  %p = offset %b, %i : tile<64xptr<f32>>, tile<64xi32> -> tile<64xptr<f32>>
  %x, %t = load_ptr_tko weak %p token=%0 : tile<64xptr<f32>> -> tile<64xf32>, token
  %f = itof %i signed : tile<64xi32> -> tile<64xf32>
  %s = addf %x, %f : tile<64xf32>
  %e = exp %s : tile<64xf32>
  %c = constant <f32: 0.5> : tile<64xf32>
  %m = mulf %e, %c : tile<64xf32>
  %part = extract %m[%which] : tile<64xf32> -> tile<16xf32>
  %out = reshape %arg1 : tile<ptr<f32>> -> tile<1xptr<f32>>
  %o = broadcast %out : tile<1xptr<f32>> -> tile<16xptr<f32>>
  %j = iota : tile<16xi32>
  %q = offset %o, %j : tile<16xptr<f32>>, tile<16xi32> -> tile<16xptr<f32>>
  %t2 = store_ptr_tko weak %q, %part token=%t : tile<16xptr<f32>>, tile<16xf32> -> token
  return
}
"""


def test_extract_motion_computes_the_part_it_extracts() -> None:
    """The extract moves through mulf, exp, addf and itof to the load and the iota: the kernel computes 16
    elements, not 64, and stores what the interpreter (reading the IR as written) stores."""
    from tileiras.runtime import run_arrays

    module = load_module(_EXTRACT.encode(), "k.mlir")
    entry = module.regions[0].block.operations[0]
    canonicalize(entry)
    assert [op.name for op in entry.walk() if op.name == "cuda_tile.exp"] == ["cuda_tile.exp"]
    assert str(next(op for op in entry.walk() if op.name == "cuda_tile.exp").result.type) == "tile<16xf32>"
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    args = [x, np.zeros(16, np.float32), np.array(2, np.int32)]
    want = run_arrays(load_module(_EXTRACT.encode(), "k.mlir"), "k", (1, 1, 1), args, backend="interpreter")[1]
    got = run_arrays(load_module(_EXTRACT.encode(), "k.mlir"), "k", (1, 1, 1), args, backend="emulator",
                     gpu_name="sm_90", check_races=True)[1]
    assert np.allclose(got, np.exp(x[32:48] + np.arange(32, 48)) * 0.5, rtol=1e-5) and np.allclose(got, want, rtol=1e-6)
