"""Pointers made from integers (`int_to_ptr`) are global where the kernel has no `alloca`
(lowering/ops_arith.py): TileGym's group GEMM reads its A/B/C pointers from tables, and every
access through them was a generic one (SASS ST.E; NVIDIA's: STG.E.128)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"
GROUP_GEMM = "tg_group_gemm_f16_64x128x128"
GENERIC = re.compile(r"\b(?:ld|st)(?:\.v\d)?\.[bfsu]\d+\s")     # no state space: a generic access


def _ptx(path: Path, gpu: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.ptx"
        done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit=ptx",
                               "--gpu-name", gpu, str(path), "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        return out.read_text()


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_group_gemm_accesses_its_tables_pointers_as_global(gpu: str) -> None:
    """Global accesses only; C restaged in its tile loop for 16-byte stores (64x128 f16, 128
    threads: 8 a thread) where shared memory has the bytes (not sm_120's 99 KB: its stages fill it), and
    stored by TMA through a map the kernel makes where TMA stores (sm_90, sm_100: lowering/kernel_maps.py)."""
    from tileiras.codegen.hidden_params import KERNEL_MAPS_PTX
    from tileiras.codegen.ptxas import ptx_isa_unsupported

    ptx = _ptx(TILEGYM / f"{GROUP_GEMM}.tileirbc", gpu)
    assert not GENERIC.findall(ptx), GENERIC.findall(ptx)[:4]
    by_tma = gpu in ("sm_90", "sm_100") and not ptx_isa_unsupported(KERNEL_MAPS_PTX)
    assert ("cp.async.bulk.tensor.2d.global.shared::cta" in ptx) == by_tma
    assert ptx.count("st.global.v4.b32") == (0 if gpu == "sm_120" or by_tma else 8)


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_group_gemm_matches_the_interpreter(gpu: str) -> None:
    """Two groups of different sizes (2 and 4 tiles) over the kernel's 84 persistent CTAs (its
    NUM_SMS constant: CTA i takes tiles i, i + 84, ...), race checker on."""
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    path = TILEGYM / f"{GROUP_GEMM}.tileirbc"
    module = load_module(path.read_bytes(), path.name)
    rng = np.random.default_rng(3)
    shapes = [(64, 256, 128), (128, 256, 256)]      # (M, N, K) per group
    a = [(rng.standard_normal((m, k)) / 4).astype(np.float16) for m, n, k in shapes]
    b = [(rng.standard_normal((k, n)) / 4).astype(np.float16) for m, n, k in shapes]

    def run(backend: str, **extra) -> list[np.ndarray]:
        c = [np.full((m, n), -7, np.float16) for m, n, k in shapes]
        return [np.asarray(x).astype(np.float64)
                for x in run_arrays(module, GROUP_GEMM, (84,), [a, b, c], backend=backend, **extra)[2]]

    got = run("emulator", gpu_name=gpu, source=None, filename=path.name, check_races=True)
    want = run("interpreter")
    for g, w, x, y in zip(got, want, a, b):
        assert not (w == -7).any()
        exact = x.astype(np.float64) @ y.astype(np.float64)
        assert np.abs(w - exact).max() <= 2.0 ** -9 * np.abs(exact).max()
        assert np.abs(g - w).max() <= 2.0 ** -9 * np.abs(w).max()


ALLOCA = """
cuda_tile.module @kernels {
  entry @k(%q: tile<ptr<i32>>, %n: tile<i32>, %s: tile<i32>) {
    %a = alloca num_elem = 4, alignment = 16 : tile<ptr<i32>>
    %ai = ptr_to_int %a : tile<ptr<i32>> -> tile<i64>
    %b = int_to_ptr %ai : tile<i64> -> tile<ptr<i32>>
    %five = constant <i32: 5> : tile<i32>
    %t1 = store_ptr_tko weak %b, %five : tile<ptr<i32>>, tile<i32> -> token
    %v, %t2 = load_ptr_tko weak %a token=%t1 : tile<ptr<i32>> -> tile<i32>, token
    %t3 = store_ptr_tko weak %q, %v : tile<ptr<i32>>, tile<i32> -> token
    return
  }
}
"""


def test_a_kernel_with_an_alloca_keeps_its_integer_pointers_generic(tmp_path: Path) -> None:
    """The alloca's shared address comes back through an integer: the store through it must stay
    generic (a global one would write elsewhere); the emulator agrees with the interpreter."""
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    src = tmp_path / "alloca.mlir"
    src.write_text(ALLOCA)
    ptx = _ptx(src, "sm_80")
    assert ptx.count("st.global") == 1     # q's: the alloca's store is not made a global one
    module = load_module(ALLOCA.encode(), "alloca.mlir")
    got = run_arrays(module, "k", (1,), [np.zeros(1, np.int32)], backend="emulator", gpu_name="sm_80",
                     source=None, filename="alloca.mlir", check_races=True)
    want = run_arrays(module, "k", (1,), [np.zeros(1, np.int32)], backend="interpreter")
    assert np.asarray(got[0])[0] == np.asarray(want[0])[0] == 5
