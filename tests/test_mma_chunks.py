"""An mma whose operands are staged whole would not fit in shared memory: K in slices.

The operands go through shared memory a K slice at a time (each slice's buffer reuses the
previous slice's bytes after a CTA barrier), accumulating into the same registers in the same
order: mma.sync (`ops_mma.k_slices`) and the exact FMA path (`ops_reduce._slices`). The TileGym
kernel that needed it compiles (ptxas), and a scaled kernel with the slicing forced (a budget of
a quarter of the operands) runs on the emulator, race checker on, and matches the interpreter.
"""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cuda.tile as ct

ROOT = Path(__file__).resolve().parents[1]
TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"
PTXAS = Path(sys.prefix) / "lib" / "python3.11" / "site-packages" / "nvidia" / "cu13" / "bin" / "ptxas"


@pytest.mark.sweep   # about 30 s each (a large exact-f32 FMA kernel); the forced slicing below runs by default
@pytest.mark.parametrize("gpu", ["sm_80", "sm_120"])
def test_tilegym_bmm_f32_fits_with_k_slices(gpu: str, tmp_path: Path) -> None:
    """cp_bmm f32 128x256x128: A 128x128 + B 128x256 f32 (192 KB) staged for one FMA mma; in two
    K slices (96 KB) it fits sm_80 and sm_120, and ptxas takes the PTX."""
    ptx = tmp_path / "bmm.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras", str(TILEGYM / "cp_bmm_f32_128x256x128.tileirbc"),
                           "--gpu-name", gpu, "--emit=ptx", "-o", str(ptx), "--no-cache"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert ".extern .shared" in text    # 96 KB: dynamic shared memory
    done = subprocess.run([str(PTXAS), "-arch", gpu, str(ptx), "-o", str(tmp_path / "bmm.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@ct.kernel
def _doubled_mm(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """One mma of operands computed in registers (so the mma stages them itself)."""
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0), shape=(TM, TK))
    y = ct.load(b, index=(0, 0), shape=(TK, TN))
    acc = ct.mma(x + x, y + y, ct.zeros((TM, TN), dtype=ct.float32))
    ct.store(c, index=(i, 0), tile=acc)


@ct.kernel
def _doubled_mm_tf32(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0), shape=(TM, TK))
    y = ct.load(b, index=(0, 0), shape=(TK, TN))
    acc = ct.mma(ct.astype(x + x, ct.tfloat32), ct.astype(y + y, ct.tfloat32), ct.zeros((TM, TN), dtype=ct.float32))
    ct.store(c, index=(i, 0), tile=acc)


def _export(kernel, dtype, tm: int, tn: int, tk: int) -> bytes:
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       export_kernel)

    def array(d):
        return ArrayConstraint(dtype=d, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=16,
                               stride_divisible_by=(8, 1), base_addr_divisible_by=16)
    buf = io.BytesIO()
    params = [array(dtype), array(dtype), array(ct.float32), ConstantConstraint(tm), ConstantConstraint(tn),
              ConstantConstraint(tk)]
    export_kernel(kernel, [KernelSignature(parameters=params, calling_convention=CallingConvention.cutile_python_v1())],
                  buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code="sm_80")
    return buf.getvalue()


# (kernel, operand dtype, which chooser the forced budget goes through, K slices it must pick)
CASES = {
    "f16": (_doubled_mm, np.float16, "mma", 4),         # mma.sync m16n8k16: slices of 16
    "tf32": (_doubled_mm_tf32, np.float32, "mma", 4),   # mma.sync m16n8k8: slices of 16
    "f32": (_doubled_mm, np.float32, "fma", 4),         # the exact FMA path: slices of 16
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_forced_k_slices_match_the_interpreter(case: str, monkeypatch, tmp_path: Path) -> None:
    from tileiras.frontend import load_module
    from tileiras.lowering import ops_mma, ops_reduce
    from tileiras.runtime import run_arrays

    kernel, dtype, path, want = CASES[case]
    tm, tn, tk = (32, 64, 64) if path == "fma" else (64, 64, 64)
    module = load_module(_export(kernel, {np.float16: ct.float16, np.float32: ct.float32}[dtype], tm, tn, tk),
                         "mm.tileirbc")
    name = next(str(op.attributes["sym_name"]) for op in module.regions[0].block.operations
                if op.name == "cuda_tile.entry")
    rng = np.random.default_rng(3)
    a = rng.standard_normal((tm, tk)).astype(dtype)
    b = rng.standard_normal((tk, tn)).astype(dtype)

    def run(backend: str, gpu: str | None = None) -> np.ndarray:
        return run_arrays(module, name, (1, 1, 1), [a, b, np.zeros((tm, tn), np.float32)], backend=backend,
                          gpu_name=gpu, check_races=backend == "emulator")[2]

    ref = run("interpreter")
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    chosen: list[int] = []
    operand_bytes = (tm * tk + tk * tn) * np.dtype(dtype).itemsize
    if path == "mma":
        def sliced(k, staged, kdim, kstep):   # the real choice, against a quarter of the operands
            chosen.append(ops_mma.k_slices(k, staged, kdim, kstep, operand_bytes // want))
            return chosen[-1]
        monkeypatch.setattr(ops_mma, "k_chunks", sliced)
    else:
        def sliced(k, srcs, n):
            chosen.append(ops_reduce._slices(k, srcs, n, operand_bytes // want))
            return chosen[-1]
        monkeypatch.setattr(ops_reduce, "_chunks", sliced)
    got = run("emulator", "sm_80")
    assert chosen and max(chosen) == want, chosen
    assert np.abs(ref).max() > 1.0
    # the same products summed in the same order: equal up to the accumulation's rounding
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4 * np.abs(ref).max())
