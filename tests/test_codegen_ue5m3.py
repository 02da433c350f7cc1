"""fnv8E5M3FNU (PTX ue5m3) conversions: compiled for sm_107, run by the emulator, checked against
hand-derived values and the interpreter; other targets get a diagnostic naming op, type and target.

The values follow what NVIDIA's tileiras emits (`cvt.rn.satfinite.ue5m3x2.f32`; f64 inputs first
rounded to odd in f32) and what cuda_fp8.h documents for that instruction: the sign of the input is
discarded, NaN -> NaN (0xFF), infinities and overflow -> 114688 (0xFE), round to nearest even.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from tileiras.errors import CompileError

SPECIALS = [np.nan, np.inf, -np.inf, 1e9, 118784.0, 2.0**-18, 3 * 2.0**-18, -0.0,
            1.0625 + 2.0**-40, 1.0625, -3.3, 2.0**-20, 118783.0, 1.1875, 7.6e-6]
# 118784 is the tie between 0xFE and the NaN code, so it rounds to even (0xFE). In f64,
# 1.0625 + 2**-40 lies above the tie 1.0625 and must not be rounded twice (f64 -> f32 -> e5m3);
# in f32 it is the tie itself.
EXPECTED_F64 = [np.nan, 114688.0, 114688.0, 114688.0, 114688.0, 0.0, 2.0**-16, 0.0,
            1.125, 1.0, 3.25, 0.0, 114688.0, 1.25, 2.0**-17]


def _round_trip_module(ty: str) -> str:
    view = f"tensor_view<?x{ty}, strides=[?]>"
    part = f"partition_view<tile=(64), {view}>"
    return f"""cuda_tile.module @k {{
entry @rt(%x: tile<ptr<{ty}>>, %xn: tile<i32>, %xs: tile<i32>, %o: tile<ptr<{ty}>>, %on: tile<i32>, %os: tile<i32>) {{
  %tok = make_token : token
  %xv = make_tensor_view %x, shape = [%xn], strides = [%xs] : tile<i32> -> {view}
  %ov = make_tensor_view %o, shape = [%on], strides = [%os] : tile<i32> -> {view}
  %xp = make_partition_view %xv : {part}
  %op = make_partition_view %ov : {part}
  %c0 = constant <i32: 0> : tile<i32>
  %t, %t1 = load_view_tko weak %xp[%c0] token = %tok : {part}, tile<i32> -> tile<64x{ty}>, token
  {_convert(ty)}
  %t2 = store_view_tko weak %w, %op[%c0] token = %tok : tile<64x{ty}>, {part}, tile<i32> -> token
  return
}}
}}
"""


def _convert(ty: str) -> str:
    if ty.startswith("i"):
        return (f"%n = itof %t signed : tile<64x{ty}> -> tile<64xfnv8E5M3FNU>\n"
                f"  %w = ftoi %n signed : tile<64xfnv8E5M3FNU> -> tile<64x{ty}>")
    return (f"%n = ftof %t : tile<64x{ty}> -> tile<64xfnv8E5M3FNU>\n"
            f"  %w = ftof %n : tile<64xfnv8E5M3FNU> -> tile<64x{ty}>")


def _run(ty: str, x: np.ndarray, backend: str) -> np.ndarray:
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    text = _round_trip_module(ty).encode()
    out = run_arrays(load_module(text, "rt.mlir"), "rt", (1, 1, 1), [x.copy(), np.zeros_like(x)],
                     backend=backend, gpu_name="sm_107", stdout=io.StringIO(), source=text, filename="rt.mlir")
    return np.asarray(out[1])


def _inputs(dtype: type) -> np.ndarray:
    x = np.linspace(-40.0, 40.0, 64)
    x[:len(SPECIALS)] = SPECIALS
    with np.errstate(over="ignore"):  # 1e9 is inf in f16
        return x.astype(dtype)


@pytest.mark.parametrize("ty,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_round_trip_rounds_once_and_saturates(ty: str, dtype: type) -> None:
    x = _inputs(dtype)
    want = list(EXPECTED_F64)
    if ty == "f32":
        want[8] = 1.0
    got = _run(ty, x, "emulator")
    np.testing.assert_array_equal(got[:len(want)], np.array(want, dtype))
    np.testing.assert_array_equal(got, _run(ty, x, "interpreter"))


@pytest.mark.parametrize("ty,dtype", [("f16", np.float16), ("bf16", None), ("i32", np.int32)])
def test_other_sources_agree_with_the_interpreter(ty: str, dtype: type) -> None:
    import ml_dtypes

    if ty == "i32":
        x = np.arange(-32, 32, dtype=np.int32) * 4099  # negatives lose their sign; the top saturates
    else:
        x = _inputs(dtype or ml_dtypes.bfloat16)
    got = _run(ty, x, "emulator")
    np.testing.assert_array_equal(got.astype(np.float64), _run(ty, x, "interpreter").astype(np.float64))
    if ty == "i32":
        assert got[0] == 114688 and got[-1] == 114688 and got[32] == 0


def test_sm_107_gets_the_arch_specific_cvt() -> None:
    from tileiras.codegen.nvptx import llvm_to_ptx
    from tileiras.codegen.ptxas import assemble
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    module = load_module(_round_trip_module("f32").encode(), "rt.mlir")
    llvm_ir, _ = lower_module(module, "sm_107")
    ptx = llvm_to_ptx(llvm_ir, "sm_107", 3)
    assert ".target sm_107a" in ptx and ".version 9.4" in ptx
    assert "cvt.rn.satfinite.ue5m3x2.f32" in ptx and "cvt.rn.bf16x2.ue5m3x2" in ptx
    assert assemble(ptx, "sm_107", 3)[:4] == b"\x7fELF"


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", "sm_110", "sm_120"])
def test_other_targets_are_told_which_op_type_and_target(gpu: str) -> None:
    from tileiras.frontend import load_module
    from tileiras.lowering.pipeline import lower_module

    module = load_module(_round_trip_module("f32").encode(), "rt.mlir")
    with pytest.raises(CompileError) as info:
        lower_module(module, gpu)
    message = info.value.message
    assert "'cuda_tile.ftof'" in message and "fnv8E5M3FNU" in message and "sm_107" in message
    assert message.endswith(f"the target is {gpu}")


def test_a_constant_of_the_type_reads_back() -> None:
    """Constants are stored as their byte codes: 3.25 is 0x85 (exponent 16, mantissa 5)."""
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    part = "partition_view<tile=(4), tensor_view<?xf32, strides=[?]>>"
    text = f"""cuda_tile.module @k {{
entry @c(%o: tile<ptr<f32>>, %on: tile<i32>, %os: tile<i32>) {{
  %tok = make_token : token
  %ov = make_tensor_view %o, shape = [%on], strides = [%os] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %op = make_partition_view %ov : {part}
  %c0 = constant <i32: 0> : tile<i32>
  %n = constant <fnv8E5M3FNU: 3.25> : tile<4xfnv8E5M3FNU>
  %w = ftof %n : tile<4xfnv8E5M3FNU> -> tile<4xf32>
  %t2 = store_view_tko weak %w, %op[%c0] token = %tok : tile<4xf32>, {part}, tile<i32> -> token
  return
}}
}}
""".encode()
    for backend in ("interpreter", "emulator"):
        out = run_arrays(load_module(text, "c.mlir"), "c", (1, 1, 1), [np.zeros(4, np.float32)], backend=backend,
                         gpu_name="sm_107", stdout=io.StringIO(), source=text, filename="c.mlir")
        np.testing.assert_array_equal(np.asarray(out[0]), np.full(4, 3.25, np.float32), err_msg=backend)
