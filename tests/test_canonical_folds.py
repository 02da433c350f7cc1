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
