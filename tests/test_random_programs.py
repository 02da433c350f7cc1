"""Differential tests on random programs: the PTX we compile for sm_80 and sm_90, run by the
SIMT emulator, against the reference interpreter (see `random_programs.py` for the programs
and the accuracy contract). A deliberately wrong lowering must be caught.

The hypothesis profile is fixed (derandomized, no deadline, no example database), so every
run checks the same programs; `TILEIRAS_RANDOM_EXAMPLES` raises the count for a longer hunt.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

import random_programs as rp

TARGETS = ("sm_80", "sm_90")
EXAMPLES = int(os.environ.get("TILEIRAS_RANDOM_EXAMPLES", "100"))
PROFILE = settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _assert_agrees(program: rp.Program) -> None:
    with np.errstate(all="ignore"):
        want = rp.run(program, "interpreter")
    for gpu in TARGETS:
        problems = rp.differences(program, rp.run(program, "emulator", gpu), want)
        assert not problems, f"{gpu}:\n" + "\n".join(problems)


@PROFILE
@given(rp.elementwise_programs())
def test_random_elementwise_programs(program: rp.Program) -> None:
    _assert_agrees(program)


@PROFILE
@given(rp.reduction_programs())
def test_random_reductions_and_scans(program: rp.Program) -> None:
    _assert_agrees(program)


def _finds_a_difference(strategy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> rp.Program:
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path))    # compile afresh with the broken lowering
    search = settings(PROFILE, max_examples=EXAMPLES, phases=[Phase.generate])   # no shrinking: keep it quick
    return find(strategy, lambda p: bool(rp.check(p, "sm_80")), settings=search)


def test_a_wrong_integer_compare_is_caught(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Lower `cmpi less_than` as less-or-equal: the random programs must notice."""
    from tileiras.lowering import ops_arith

    monkeypatch.setitem(ops_arith._CMPI, "less_than", "le")
    found = _finds_a_difference(rp.elementwise_programs(), tmp_path, monkeypatch)
    assert "cmpi less_than " in found.text


def test_a_wrong_reduction_is_caught(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Let reductions over 3 or more elements skip their second one: the random programs must notice."""
    from tileiras.lowering import ops_reduce

    original = ops_reduce.counted_loop

    def skip_one(k, start, stop, step, carried, body):
        longer = stop.isdigit() and int(stop) > 2          # a reduction over 3 or more elements
        return original(k, "2" if start == "1" and longer else start, stop, step, carried, body)

    monkeypatch.setattr(ops_reduce, "counted_loop", skip_one)
    found = _finds_a_difference(rp.reduction_programs(), tmp_path, monkeypatch)
    assert "reduce" in found.text


# -- regressions the random programs found ------------------------------------------------------
@pytest.mark.parametrize("ty", rp.INTS)
def test_shifts_by_the_width_or_more_clamp(ty: str) -> None:
    """shli/shri by >= the bit width give 0 (shri signed: the sign) like PTX; the lowering used plain
    LLVM shifts, which are poison there (i64 shifts took the amount modulo 2**32)."""
    k = rp.KernelText((8,))
    x, s = k.load(ty, 1), k.load(ty, 1)
    t = k.t(ty)
    for text in (f"shli {x}, {s} : {t}", f"shri {x}, {s} signed : {t}", f"shri {x}, {s} unsigned : {t}"):
        k.store(k.op(text), ty, 1)
    bits = rp.BITS[ty]
    dt = rp.DTYPE[ty]
    x_vals = np.array([-5, 7, -1, 3, 100, -100, 1, -2], dt)
    amounts = np.array([bits, bits + 1, -1, 2 * bits - 1, bits - 1, 0, 1, -bits], np.int64).astype(dt)
    if bits == 64:
        amounts[0] = 1 << 32 | 1                 # taken modulo 2**32 this is a shift by 1
    program = rp.Program(k.text(), (1,), (x_vals, amounts, *(np.zeros(8, dt),) * 3), (0, 0, 0))
    _assert_agrees(program)
    shl, sra, srl = rp.run(program, "interpreter")
    big = (amounts.astype(np.int64).view(np.uint64) & np.uint64((1 << bits) - 1)) >= bits
    assert big.sum() == 5
    assert (shl[big] == 0).all() and (srl[big] == 0).all() and (sra[big] == np.where(x_vals[big] < 0, -1, 0)).all()


@pytest.mark.parametrize("op", ["maxf", "minf", "maxf propagate_nan", "minf propagate_nan"])
def test_float_min_max_flush_subnormals_to_zero(op: str) -> None:
    """maxf/minf with flush_to_zero (f32) flush subnormal inputs and results, keeping the sign; the
    lowering used LLVM's maxnum/minnum, which drop the flag."""
    k = rp.KernelText((8,))
    x, y = k.load("f32", 1), k.load("f32", 1)
    mnemonic, _, attrs = op.partition(" ")
    k.store(k.op(f"{mnemonic} {x}, {y} {attrs} flush_to_zero : {k.t('f32')}".replace("  ", " ")), "f32", 1)
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    a = np.array([tiny, -tiny, tiny, 1e-40, -1e-40, np.nan, 2.0, -tiny], np.float32)
    b = np.array([tiny, 0.0, -1.0, 3e-40, -0.0, 1e-40, 1e-39, np.nan], np.float32)
    program = rp.Program(k.text(), (1,), (a, b, np.ones(8, np.float32)), (0,))
    _assert_agrees(program)
    (got,) = rp.run(program, "interpreter")
    finite = got[np.isfinite(got)]
    assert not ((finite != 0) & (np.abs(finite) < np.finfo(np.float32).tiny)).any(), got


def test_approximate_division_flushing_subnormals_stays_approximate() -> None:
    """divf rounding<approx> flush_to_zero is PTX's div.approx.ftz.f32 (as NVIDIA's emits for
    attention's 1/l): it was lowered to div.rn.ftz, whose Newton refinement and slow path doubled
    ptxas's time on the d128 attentions. The emulator agrees with the interpreter within 2 ulps."""
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    k = rp.KernelText((8,))
    x, y = k.load("f32", 1), k.load("f32", 1)
    k.store(k.op(f"divf {x}, {y} rounding<approx> flush_to_zero : {k.t('f32')}"), "f32", 1)
    llvm_ir = lower_module(load_module(k.text().encode(), "div.mlir"), "sm_90")[0]
    assert "@llvm.nvvm.div.approx.ftz.f(" in llvm_ir and "div.rn" not in llvm_ir
    a = np.array([1.0, -3.0, 7.5, 1e-40, 2.0, 1e30, -0.0, 5.0], np.float32)
    b = np.array([3.0, 7.0, -0.5, 2.0, 1e-40, 3e-7, 4.0, 1e-3], np.float32)
    _assert_agrees(rp.Program(k.text(), (1,), (a, b, np.ones(8, np.float32)), (2,)))


@pytest.mark.parametrize("fn,instr", [("exp2", "ex2"), ("rsqrt", "rsqrt")])
@pytest.mark.parametrize("ftz", [False, True])
def test_one_instruction_math_needs_no_libdevice(fn: str, instr: str, ftz: bool) -> None:
    """f32 exp2 and rsqrt are the approximate instructions libdevice wraps (.ftz when asked):
    attention and rmsnorm kernels, whose only math functions they are, no longer link libdevice."""
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    k = rp.KernelText((64,))
    x = k.load("f32", 1)
    k.store(k.op(f"{fn} {x}{' flush_to_zero' if ftz else ''} : {k.t('f32')}"), "f32", 1)
    llvm_ir = lower_module(load_module(k.text().encode(), "math.mlir"), "sm_90")[0]
    assert "@__nv_" not in llvm_ir
    assert f"@llvm.nvvm.{instr}.approx{'.ftz' if ftz else ''}.f(" in llvm_ir


def test_approximate_exp_is_ex2_of_a_product() -> None:
    """exp rounding<approx> is ex2.approx(x * log2 e), NVIDIA's form (softmax's exp), not
    libdevice's __nv_expf; the emulator agrees with the interpreter within 8 ulps on [-8, 8]."""
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    k = rp.KernelText((64,))
    x = k.load("f32", 1)
    k.store(k.op(f"exp {x} rounding<approx> : {k.t('f32')}"), "f32", 1)
    llvm_ir = lower_module(load_module(k.text().encode(), "exp.mlir"), "sm_90")[0]
    assert "@__nv_" not in llvm_ir and "@llvm.nvvm.ex2.approx.f(" in llvm_ir
    a = np.linspace(-8.0, 8.0, 64, dtype=np.float32)
    _assert_agrees(rp.Program(k.text(), (1,), (a, np.ones(64, np.float32)), (8,)))


@pytest.mark.parametrize("fmt,intrinsic", [("f8E5M2", "e5m2x2"), ("f8E4M3FN", "e4m3x2"), ("f4E2M1FN", "")])
def test_conversions_into_fp8_go_two_per_cvt(fmt: str, intrinsic: str) -> None:
    """f32 -> fp8 converts two elements per cvt (the x2 form, as NVIDIA's; attention's P had one
    per element, padded with 0.0), bit exact against the interpreter; fp4, whose pair is two
    nibbles of one byte, stays one element per cvt."""
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    k = rp.KernelText((64,))
    x = k.load("f32", 1)
    narrow = k.op(f"ftof {x} : {k.t('f32')} -> {k.t(fmt)}")
    k.store(k.op(f"ftof {narrow} : {k.t(fmt)} -> {k.t('f32')}"), "f32", 1)
    gpu = "sm_100" if fmt == "f4E2M1FN" else "sm_90"   # fp8 needs sm_89+, fp4 sm_100+
    llvm_ir = lower_module(load_module(k.text().encode(), "fp8.mlir"), gpu)[0]
    calls = [ln for ln in llvm_ir.splitlines() if "@llvm.nvvm.ff.to." in ln and "call" in ln]
    padded = [ln for ln in calls if "float 0.0," in ln]
    assert calls and (padded == calls if not intrinsic else not padded and f".{intrinsic}.rn(" in calls[0])
    a = (np.random.default_rng(1).standard_normal(64) * 30).astype(np.float32)
    program = rp.Program(k.text(), (1,), (a, np.ones(64, np.float32)), (0,))
    assert not rp.check(program, gpu)
