"""A kernel that returns early (`if bid * TM >= M: return`, as cuTile writes a guard) has one exit in
the canonical form (MoveTerminatorToParent: what follows the guard moves into its other branch), and
its K loop, now inside an `if`, keeps its hardware paths: warp specialization on sm_90 and sm_120 (every
role takes the CTA-uniform branch: the producer too, else it would wait at the loop's barrier for
consumers that left), tcgen05 on sm_100. The CTAs past M exit; the others match numpy on the emulator
with the race checker."""

from __future__ import annotations

import io
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import cuda.tile as ct

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import entry  # noqa: E402


@ct.kernel
def guarded_matmul(a, b, c, M: int, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    i = ct.bid(0)
    j = ct.bid(1)
    if i * TM >= M:
        return
    acc = ct.zeros((TM, TN), dtype=c.dtype)
    for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
        x = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(i, j), tile=acc)


def _array(dtype):
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(dtype=dtype, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                           may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=16,
                           stride_divisible_by=(8, 1), base_addr_divisible_by=16)


@lru_cache(maxsize=None)
def _bytecode(tm: int, tn: int, tk: int) -> bytes:
    from cuda.tile.compilation import (CallingConvention, ConstantConstraint, KernelSignature, ScalarConstraint,
                                       export_kernel)

    params = [_array(ct.float16), _array(ct.float16), _array(ct.float32), ScalarConstraint(ct.int32),
              ConstantConstraint(tm), ConstantConstraint(tn), ConstantConstraint(tk)]
    buf = io.BytesIO()
    export_kernel(guarded_matmul, [KernelSignature(parameters=params,
                                                   calling_convention=CallingConvention.cutile_python_v1())],
                  buf, output_format="tileir_bytecode", bytecode_version="13.4")
    return buf.getvalue()


def _compile(data: bytes, gpu: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    src = tmp_path / "k.tileirbc"
    src.write_bytes(data)
    return subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", gpu,
                           *extra, str(src), "-o", str(tmp_path / f"k_{gpu}.ptx")],
                          capture_output=True, text=True, cwd=ROOT)


def test_the_guard_leaves_one_exit(tmp_path: Path) -> None:
    done = _compile(_bytecode(64, 64, 32), "sm_90", tmp_path, "--print-ir-after-all")
    assert done.returncode == 0, done.stderr
    dump = done.stderr.split("IR Dump After ")
    before = next(d for d in dump if d.startswith("canonicalize "))
    assert before.count("return") == 1, before     # the entry's own return; none in a branch


@pytest.mark.parametrize("gpu,marks", [
    ("sm_90", ("setmaxnreg.dec", "wgmma.mma_async", "cp.async.bulk.tensor")),
    ("sm_100", ("tcgen05.mma", "cp.async.bulk.tensor")),
    ("sm_120", ("setmaxnreg.dec", "mma.sync", "cp.async.bulk.tensor")),
])
def test_a_guarded_kernel_keeps_its_paths_and_its_result(gpu: str, marks: tuple, tmp_path: Path) -> None:
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    data = _bytecode(64, 64, 32)
    done = _compile(data, gpu, tmp_path)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / f"k_{gpu}.ptx").read_text()
    for mark in marks:
        assert mark in ptx, mark
    rng = np.random.default_rng(11)
    a = rng.standard_normal((64, 96)).astype(np.float16)     # 3 iterations; CTA 1 is past M and exits
    b = rng.standard_normal((96, 64)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    module = load_module(data, "k.tileirbc")
    out = run_arrays(module, entry(module), (2, 1, 1), [a, b, c, np.array(64, np.int32)], backend="emulator",
                     gpu_name=gpu, check_races=True)[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 1e-3 * max(1.0, np.abs(ref).max())
