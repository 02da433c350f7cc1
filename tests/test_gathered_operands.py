"""A tensor-core operand gathered by rows (cuTile's `load_advanced_indexing`, a gather_scatter_view): MoE's
expert GEMM reads the A rows of its tokens through a tile of row indices, K a slice at a time.

Each gathered row is a run of the array's contiguous dimension, so the view's facts prove 16-byte accesses
as a partition view's do (tileaa/access_width.py): the element offset along that dimension (`k * TK`)
divides by the run, the rows' stride and base are aligned. Before, a gather view was never widened: the
128 x 64 f16 A tile was loaded one f16 at a time, 64 loads a thread, in the hot loop of every target.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest

ct = pytest.importorskip("cuda.tile")

ConstInt = ct.Constant[int]
TM, TN, TK = 128, 128, 64


@ct.kernel
def moe_gemm(A, B, C, ids, TM: ConstInt, TN: ConstInt, TK: ConstInt):  # type: ignore[no-untyped-def]
    bm = ct.bid(0)
    bn = ct.bid(1)
    rows = ct.load(ids, index=(bm,), shape=(TM,))
    acc = ct.zeros((TM, TN), ct.float32)
    for k in range(ct.cdiv(A.shape[1], TK)):
        a = ct.load_advanced_indexing(A, (rows, ct.Slice(k * TK, TK)), padding_mode=ct.PaddingMode.ZERO)
        b = ct.load(B, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(bm, bn), tile=ct.astype(acc, C.dtype))


def _array(dtype, ndim: int):  # type: ignore[no-untyped-def]
    """What cuTile's launcher derives from contiguous, 16-byte aligned arrays whose extents divide by 16."""
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False,
                           stride_constant=tuple(1 if i == ndim - 1 else None for i in range(ndim)),
                           stride_divisible_by=tuple(8 if i < ndim - 1 else 1 for i in range(ndim)),
                           shape_divisible_by=(16,) * ndim, base_addr_divisible_by=16)


@pytest.fixture(scope="module")
def bytecode(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from cuda.tile.compilation import CallingConvention, ConstantConstraint, KernelSignature, export_kernel

    sig = KernelSignature(parameters=[_array(ct.float16, 2), _array(ct.float16, 2), _array(ct.float16, 2),
                                      _array(ct.int32, 1), ConstantConstraint(TM), ConstantConstraint(TN),
                                      ConstantConstraint(TK)],
                          calling_convention=CallingConvention.cutile_python_v1(), symbol="moe_gemm")
    buf = io.BytesIO()
    export_kernel(moe_gemm, [sig], buf, output_format="tileir_bytecode", bytecode_version="13.4")
    path = tmp_path_factory.mktemp("moe") / "moe_gemm.tileirbc"
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_gathered_rows_are_copied_16_bytes_at_a_time_and_planned(monkeypatch: pytest.MonkeyPatch, bytecode: Path,
                                                                 gpu: str) -> None:
    """The gathered A goes to shared memory by 16-byte cp.async copies (no element-by-element loads), and the
    shared-memory plan predicts every buffer, the row indices' scratch included, the check strict."""
    from shared_plan_support import lower

    ir, dump, checks = lower(monkeypatch, bytecode, gpu)
    assert checks and all(c.complete and not c.mismatches and not c.unplanned for c in checks), \
        [c.summary() for c in checks]
    assert not re.search(r"= load (half|i16), ptr (?!addrspace\(3\))", ir), "A loaded from global memory one element at a time"
    assert re.search(r"cp\.async\.c[ga]\.shared\.global(\.L2::\w+)? \[[^\]]*\], \[[^\]]*\], 16", ir), \
        "no 16-byte cp.async copy"


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_a_gathered_moe_gemm_matches_numpy_on_the_emulator(bytecode: Path, gpu: str) -> None:
    """Rows gathered in any order, repeated, K over several steps: the emulator's run (races checked) matches
    numpy within an f16 output's rounding."""
    from tileiras.bytecode.reader import read_module
    from tileiras.runtime import run_arrays

    src = bytecode.read_bytes()
    rng = np.random.default_rng(7)
    rows, k, n, m = 300, 4 * TK, 2 * TN, 2 * TM
    a = rng.standard_normal((rows, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    ids = rng.integers(0, rows, size=m).astype(np.int32)
    out = run_arrays(read_module(src, str(bytecode)), "moe_gemm", (m // TM, n // TN, 1),
                     [a, b, np.zeros((m, n), np.float16), ids], backend="emulator", gpu_name=gpu, source=src,
                     check_races=True)
    ref = a[ids].astype(np.float32) @ b.astype(np.float32)
    got = np.asarray(out[2]).astype(np.float32)
    assert np.abs(got - ref).max() <= 2.0 ** -10 * np.abs(ref).max() + 1e-3
