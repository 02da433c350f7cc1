"""The inline f32 exp (lowering/exp_f32.py, in place of libdevice's __nv_expf) against numpy, on
the PTX emulator: within 1.5 ulp from subnormal results to overflow, exact at 0, the infinities
and NaN, flushed where the op asks. The emulator's ex2.approx rounds the exact power, so this
bounds the range reduction and scaling; the hardware's ex2.approx adds its own error."""

from __future__ import annotations

import numpy as np

from tileiras.emulator.host import emulate
from tileiras.lowering.exp_f32 import exp_f32
from tileiras.lowering.llvm_text import FunctionBuilder

THREADS = 256


def _ptx() -> str:
    import llvmlite.binding as llvm

    b = FunctionBuilder()
    i = b.call("i32", "llvm.nvvm.read.ptx.sreg.tid.x", [])
    block = b.call("i32", "llvm.nvvm.read.ptx.sreg.ctaid.x", [])
    i = b.op(f"add i32 {b.op(f'mul i32 {block}, {THREADS}')}, {i}")
    x = b.op(f"load float, ptr {b.op(f'getelementptr float, ptr %x, i32 {i}')}")
    for out, ftz in (("%y", False), ("%z", True)):
        b.emit(f"store float {exp_f32(b, x, ftz)}, ptr {b.op(f'getelementptr float, ptr {out}, i32 {i}')}")
    b.emit("ret void")
    text = "\n".join(['target triple = "nvptx64-nvidia-cuda"', *sorted(b.declarations),
                      "define ptx_kernel void @expk(ptr %x, ptr %y, ptr %z) {", b.body(), "}"])
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(cpu="sm_80", features="+ptx80",
                                                                                   opt=3)
    return machine.emit_assembly(llvm.parse_assembly(text))


def _ulps(got: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|got - exp(x)| in units of the f32 spacing at exp(x) (2^-149 below the normal range)."""
    want = np.exp(x.astype(np.float64))
    spacing = np.spacing(np.minimum(want, np.finfo(np.float32).max).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_exp_f32_is_accurate_from_subnormals_to_overflow() -> None:
    rng = np.random.default_rng(5)
    specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 88.72283, 88.72284, 89.0,
                         -87.33654, -87.5, -100.0, -103.27893, -103.97208, -104.0, -1e30, 1e30], np.float32)
    halves = (np.arange(-150, 128) + 0.5) / np.log2(np.e)   # t = x log2 e near a rounding tie of k
    x = np.concatenate([specials, halves.astype(np.float32), rng.uniform(-105, 90, 3 * THREADS * 8),
                        rng.uniform(-1, 1, THREADS * 4)]).astype(np.float32)
    x = np.concatenate([x, np.zeros(-len(x) % THREADS, np.float32)])
    (_, y, z), _ = emulate(_ptx(), "expk", (len(x) // THREADS, 1, 1), (THREADS, 1, 1),
                           [x, np.zeros_like(x), np.zeros_like(x)])
    with np.errstate(over="ignore"):
        want = np.exp(x)
    finite = np.isfinite(want) & np.isfinite(x)
    ulps = _ulps(y[finite], x[finite])
    assert ulps.max() <= 1.5
    assert np.array_equal(np.isnan(y), np.isnan(x)) and (y[~finite & ~np.isnan(x)] == want[~finite & ~np.isnan(x)]).all()
    assert (y[x == 0] == 1).all() and (y[x >= 88.72284] == np.inf).all() and (y[x <= -104] == 0).all()
    normal = want >= np.finfo(np.float32).tiny
    assert np.array_equal(z[normal], y[normal]) and (z[~normal & ~np.isnan(x)] == 0).all()
    assert ((y > 0) & (y < np.finfo(np.float32).tiny)).sum() > 20   # subnormal results were exercised


def test_a_kernel_whose_only_math_is_exp_links_no_libdevice() -> None:
    """SiLU's exp (cp_moe_silu_and_mul): parsing libdevice was 0.05-0.07 s of its 0.3 s compile."""
    import random_programs as rp

    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    k = rp.KernelText((64,))
    x = k.load("f32", 1)
    k.store(k.op(f"exp {x} : {k.t('f32')}"), "f32", 1)
    llvm_ir = lower_module(load_module(k.text().encode(), "exp.mlir"), "sm_90")[0]
    assert "@__nv_" not in llvm_ir and "@llvm.nvvm.ex2.approx.ftz.f(" in llvm_ir
