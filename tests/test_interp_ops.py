"""The reference interpreter against plain numpy / exact arithmetic, one test per op family.

Kernels are written in TileIR text, parsed with our front end and run with
`tileiras.runtime.run_arrays` (cuTile's argument convention). Arrays are
ragged on purpose (not a multiple of the tile), so padding and masking are
exercised everywhere.
"""

from __future__ import annotations

import io
import math
from fractions import Fraction

import ml_dtypes as md
import numpy as np
import pytest

from tileiras.frontend import load_module
from tileiras.runtime import run_arrays

RNG = np.random.default_rng(1234)


def run(src: str, arrays: list, grid=(1,), kernel: str = "k", stdout=None) -> list:
    module = load_module(src.encode(), "test.mlir")
    return run_arrays(module, kernel, grid, arrays, stdout=stdout)


def elementwise(body: str, inputs: list[str], outputs: list[str], tile: int) -> str:
    """A kernel loading 1-D tiles %x0, %x1, ... and storing %r0, %r1, ...; `body` defines the %r's.

    In `body`, `T{i}` expands to the tile type of input i and `R{j}` to that of output j.
    """
    params, lines = [], []
    for i, t in enumerate(inputs + outputs):
        params.append(f"%p{i}: tile<ptr<{t}>>, %n{i}: tile<i32>, %s{i}: tile<i32>")
        tv = f"tensor_view<?x{t}, strides=[?]>"
        lines.append(f"%tv{i} = make_tensor_view %p{i}, shape = [%n{i}], strides = [%s{i}] : tile<i32> -> {tv}")
        lines.append(f"%pv{i} = make_partition_view %tv{i} : partition_view<tile=({tile}), {tv}>")
    lines.append("%bx, %by, %bz = get_tile_block_id : tile<i32>")
    for i, t in enumerate(inputs):
        pv = f"partition_view<tile=({tile}), tensor_view<?x{t}, strides=[?]>>"
        lines.append(f"%x{i}, %tk{i} = load_view_tko weak %pv{i}[%bx] : {pv}, tile<i32> -> tile<{tile}x{t}>, token")
    for i, t in reversed(list(enumerate(inputs))):          # T12 before T1
        body = body.replace(f"T{i}", f"tile<{tile}x{t}>")
    for j, t in reversed(list(enumerate(outputs))):
        body = body.replace(f"R{j}", f"tile<{tile}x{t}>")
    lines.append(body.strip())
    for j, t in enumerate(outputs):
        k = len(inputs) + j
        pv = f"partition_view<tile=({tile}), tensor_view<?x{t}, strides=[?]>>"
        lines.append(f"%st{j} = store_view_tko weak %r{j}, %pv{k}[%bx] : tile<{tile}x{t}>, {pv}, tile<i32> -> token")
    lines.append("return")
    return "entry @k(" + ", ".join(params) + ") {\n  " + "\n  ".join(lines) + "\n}\n"


def run_ew(body: str, ins: list[np.ndarray], in_types: list[str], out_types: list[str], out_dtypes: list,
           tile: int = 16) -> list[np.ndarray]:
    n = len(ins[0])
    outs = [np.zeros(n, dt) for dt in out_dtypes]
    res = run(elementwise(body, in_types, out_types, tile), list(ins) + outs, grid=(-(-n // tile),))
    return res[len(ins):]


# -- integers ------------------------------------------------------------------------------
INT_TYPES = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def unsigned(v: int, bits: int) -> int:
    return v & ((1 << bits) - 1)


def edge_ints(bits: int, n: int) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    special = [lo, hi, -1, 0, 1, lo + 1, hi - 1, 2, -2]
    rand = RNG.integers(lo, hi, n - len(special), endpoint=True, dtype=np.int64)
    return np.concatenate([np.array(special, np.int64), rand]).astype(INT_TYPES[bits])


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _sdiv(a, b, bits, mode="zero"):
    if b == 0:
        return None
    if mode == "zero":
        return wrap(_trunc_div(a, b), bits)
    if mode == "negative_inf":
        return wrap(a // b, bits)
    return wrap(-((-a) // b), bits)


INT_BINARY = {
    # op text: reference on Python ints (signed operands), None = lane not checked
    "addi %x0, %x1": lambda a, b, n: wrap(a + b, n),
    "subi %x0, %x1": lambda a, b, n: wrap(a - b, n),
    "muli %x0, %x1": lambda a, b, n: wrap(a * b, n),
    "andi %x0, %x1": lambda a, b, n: wrap(a & b, n),
    "ori %x0, %x1": lambda a, b, n: wrap(a | b, n),
    "xori %x0, %x1": lambda a, b, n: wrap(a ^ b, n),
    "maxi %x0, %x1 signed": lambda a, b, n: max(a, b),
    "mini %x0, %x1 signed": lambda a, b, n: min(a, b),
    "maxi %x0, %x1 unsigned": lambda a, b, n: wrap(max(unsigned(a, n), unsigned(b, n)), n),
    "mini %x0, %x1 unsigned": lambda a, b, n: wrap(min(unsigned(a, n), unsigned(b, n)), n),
    "divi %x0, %x1 signed": lambda a, b, n: _sdiv(a, b, n),
    "divi %x0, %x1 signed rounding<negative_inf>": lambda a, b, n: _sdiv(a, b, n, "negative_inf"),
    "divi %x0, %x1 signed rounding<positive_inf>": lambda a, b, n: _sdiv(a, b, n, "positive_inf"),
    "divi %x0, %x1 unsigned": lambda a, b, n: None if b == 0 else wrap(unsigned(a, n) // unsigned(b, n), n),
    "divi %x0, %x1 unsigned rounding<positive_inf>":
        lambda a, b, n: None if b == 0 else wrap(-(-unsigned(a, n) // unsigned(b, n)), n),
    "remi %x0, %x1 signed": lambda a, b, n: None if b == 0 else wrap(a - _trunc_div(a, b) * b, n),
    "remi %x0, %x1 unsigned": lambda a, b, n: None if b == 0 else wrap(unsigned(a, n) % unsigned(b, n), n),
    "mulhii %x0, %x1": lambda a, b, n: wrap((unsigned(a, n) * unsigned(b, n)) >> n, n),
}


@pytest.mark.parametrize("bits", [8, 16, 32, 64])
def test_integer_binary_ops_wrap_and_signedness(bits):
    n = 40
    a, b = edge_ints(bits, n), edge_ints(bits, n)[::-1].copy()
    b[5] = 0      # division by zero: undefined, must not fail the run
    t = f"i{bits}"
    ops = list(INT_BINARY)
    body = "\n".join(f"%r{j} = {op} : T0" for j, op in enumerate(ops))
    outs = run_ew(body, [a, b], [t, t], [t] * len(ops), [INT_TYPES[bits]] * len(ops))
    for op, got in zip(ops, outs):
        for i in range(n):
            want = INT_BINARY[op](int(a[i]), int(b[i]), bits)
            if want is not None:
                assert int(got[i]) == want, f"{op} on i{bits}: {a[i]}, {b[i]} -> {got[i]}, expected {want}"


@pytest.mark.parametrize("bits", [8, 32, 64])
def test_shifts_clamp_and_fill(bits):
    n = 24
    a = edge_ints(bits, n)
    s = RNG.integers(0, bits + 4, n).astype(INT_TYPES[bits])
    t = f"i{bits}"
    body = ("%r0 = shli %x0, %x1 : T0\n%r1 = shri %x0, %x1 signed : T0\n"
            "%r2 = shri %x0, %x1 unsigned : T0")
    shl, shr_s, shr_u = run_ew(body, [a, s], [t, t], [t] * 3, [INT_TYPES[bits]] * 3)
    for i in range(n):
        x, k = int(a[i]), int(s[i])
        assert int(shl[i]) == (wrap(x << k, bits) if k < bits else 0)
        assert int(shr_s[i]) == (x >> min(k, bits - 1))
        assert int(shr_u[i]) == (wrap(unsigned(x, bits) >> k, bits) if k < bits else 0)


def test_integer_unary_compare_and_width_changes():
    a, b = edge_ints(32, 30), edge_ints(32, 30)[::-1].copy()
    preds = ["equal", "not_equal", "less_than", "less_than_or_equal", "greater_than", "greater_than_or_equal"]
    body = ["%r0 = absi %x0 : T0", "%r1 = negi %x0 : T0",
            "%r2 = exti %x1 signed : tile<16xi8> -> tile<16xi64>",
            "%r3 = exti %x1 unsigned : tile<16xi8> -> tile<16xi64>",
            "%r4 = trunci %x0 : tile<16xi32> -> tile<16xi16>"]
    k = 5
    for p in preds:
        for sgn in ("signed", "unsigned"):
            body.append(f"%r{k} = cmpi {p} %x0, %x2, {sgn} : tile<16xi32> -> tile<16xi1>")
            k += 1
    small = a.astype(np.int8)
    out_types = ["i32", "i32", "i64", "i64", "i16"] + ["i1"] * (k - 5)
    out_dt = [np.int32, np.int32, np.int64, np.int64, np.int16] + [np.bool_] * (k - 5)
    outs = run_ew("\n".join(body), [a, small, b], ["i32", "i8", "i32"], out_types, out_dt)
    np.testing.assert_array_equal(outs[0], [wrap(abs(int(x)), 32) for x in a])
    np.testing.assert_array_equal(outs[1], [wrap(-int(x), 32) for x in a])
    np.testing.assert_array_equal(outs[2], small.astype(np.int64))
    np.testing.assert_array_equal(outs[3], small.view(np.uint8).astype(np.int64))
    np.testing.assert_array_equal(outs[4], a.astype(np.int16))
    fns = [np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal]
    k = 5
    for fn in fns:
        np.testing.assert_array_equal(outs[k], fn(a, b))
        np.testing.assert_array_equal(outs[k + 1], fn(a.view(np.uint32), b.view(np.uint32)))
        k += 2


# -- floats ----------------------------------------------------------------------------------
FLOAT_DT = {"f16": np.float16, "bf16": md.bfloat16, "f32": np.float32, "f64": np.float64}


def round_exact(x: Fraction, dt, mode: str) -> float:
    """Round an exact rational into dtype `dt` by mode (independent of the interpreter)."""
    c = np.array(float(x)).astype(dt)           # near x, maybe off by an ulp (double rounding)
    up, down = (lambda v: _step(v, dt, 1)), (lambda v: _step(v, dt, -1))
    # bracket x between lo <= x <= hi, adjacent representable values
    lo = c
    while Fraction(float(lo)) > x:
        lo = down(lo)
    while Fraction(float(up(lo))) <= x:
        lo = up(lo)
    hi = lo if Fraction(float(lo)) == x else up(lo)
    if Fraction(float(lo)) == x:
        return float(lo)
    if mode == "zero":
        return float(lo if x > 0 else hi)
    if mode == "positive_inf":
        return float(hi)
    if mode == "negative_inf":
        return float(lo)
    dl, dh = x - Fraction(float(lo)), Fraction(float(hi)) - x
    if dl != dh:
        return float(lo if dl < dh else hi)
    bits = np.array(lo).astype(dt).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize])
    return float(lo if int(bits) % 2 == 0 else hi)


def _step(v, dt, direction: int):
    """The neighbour of a finite value of `dt` toward +inf (1) or -inf (-1), through its bits."""
    utype = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize]
    x = np.array(v).astype(dt)
    if float(x) == 0:
        tiny = np.array(1, utype).view(dt)
        return tiny if direction > 0 else -tiny
    b = int(x.view(utype))
    toward_bigger_magnitude = (direction > 0) == (float(x) > 0)
    return np.array(b + 1 if toward_bigger_magnitude else b - 1, utype).view(dt)


def fsqrt(x: Fraction) -> Fraction:
    """sqrt to ~120 bits, enough to round a double correctly unless it is exact."""
    if x == 0:
        return Fraction(0)
    s = Fraction(math.isqrt(int(x * 2**240)), 2**120)
    return s if s * s == x else s + Fraction(1, 2**122)


@pytest.mark.parametrize("ty", ["f16", "bf16", "f32", "f64"])
@pytest.mark.parametrize("mode", ["nearest_even", "zero", "positive_inf", "negative_inf"])
def test_float_arithmetic_rounds_once_in_every_mode(ty, mode):
    dt = FLOAT_DT[ty]
    n = 20
    a = RNG.uniform(-10, 10, n).astype(np.float64).astype(dt)
    b = RNG.uniform(-10, 10, n).astype(np.float64).astype(dt)
    c = RNG.uniform(-10, 10, n).astype(np.float64).astype(dt)
    a[0], b[0] = dt(1.0), dt(3.0)                    # 1/3: inexact in every type
    rm = "" if mode == "nearest_even" else f" rounding<{mode}>"
    body = (f"%r0 = addf %x0, %x1{rm} : T0\n%r1 = subf %x0, %x1{rm} : T0\n%r2 = mulf %x0, %x1{rm} : T0\n"
            f"%r3 = divf %x0, %x1{rm} : T0\n%r4 = fma %x0, %x1, %x2{rm} : T0\n")
    ops = [lambda p, q, r: p + q, lambda p, q, r: p - q, lambda p, q, r: p * q, lambda p, q, r: p / q,
           lambda p, q, r: p * q + r]
    n_out = 5
    if ty in ("f32", "f64"):
        body += f"%r5 = sqrt %x2{rm} : T0\n"
        ops.append(None)
        n_out = 6
        c = np.abs(c)
    outs = run_ew(body, [a, b, c], [ty] * 3, [ty] * n_out, [dt] * n_out)
    for k, got in enumerate(outs):
        for i in range(n):
            fa, fb, fc = (Fraction(float(v[i])) for v in (a, b, c))
            exact = fsqrt(fc) if ops[k] is None else ops[k](fa, fb, fc)
            want = round_exact(exact, dt, mode)
            assert float(got[i]) == want, f"op {k} {ty} {mode}: {a[i]}, {b[i]}, {c[i]} -> {got[i]}, expected {want}"


def test_float_min_max_compare_and_exact_ops():
    nan = np.nan
    a = np.array([1.0, -0.0, 0.0, nan, nan, 3.5, -2.25, np.inf, -1e-40, 2.0], np.float32)
    b = np.array([2.0, 0.0, -0.0, 1.0, nan, nan, -2.25, 1.0, 1.0, -np.inf], np.float32)
    body = ("%r0 = maxf %x0, %x1 : T0\n%r1 = minf %x0, %x1 : T0\n"
            "%r2 = maxf %x0, %x1 propagate_nan : T0\n%r3 = minf %x0, %x1 propagate_nan : T0\n"
            "%r4 = negf %x0 : T0\n%r5 = absf %x0 : T0\n%r6 = floor %x0 : T0\n%r7 = ceil %x0 : T0\n"
            "%r8 = addf %x0, %x1 flush_to_zero : T0\n"
            "%r9 = cmpf less_than ordered %x0, %x1 : T0 -> R9\n"
            "%r10 = cmpf less_than unordered %x0, %x1 : T0 -> R10\n"
            "%r11 = cmpf not_equal ordered %x0, %x1 : T0 -> R11\n"
            "%r12 = cmpf equal unordered %x0, %x1 : T0 -> R12\n")
    outs = run_ew(body, [a, b], ["f32", "f32"], ["f32"] * 9 + ["i1"] * 4, [np.float32] * 9 + [bool] * 4)
    bits = lambda v: np.asarray(v, np.float32).view(np.uint32)
    want_max = np.array([2.0, 0.0, 0.0, 1.0, nan, 3.5, -2.25, np.inf, 1.0, 2.0], np.float32)
    want_min = np.array([1.0, -0.0, -0.0, 1.0, nan, 3.5, -2.25, 1.0, -1e-40, -np.inf], np.float32)
    np.testing.assert_array_equal(bits(outs[0]), bits(want_max))    # +0 > -0, NaN ignored
    np.testing.assert_array_equal(bits(outs[1]), bits(want_min))
    assert np.isnan(outs[2][[3, 4, 5]]).all() and np.isnan(outs[3][[3, 4, 5]]).all()
    np.testing.assert_array_equal(outs[2][[0, 1, 2, 6]], [2.0, 0.0, 0.0, -2.25])
    np.testing.assert_array_equal(bits(outs[4]), bits(-a))
    np.testing.assert_array_equal(bits(outs[5]), bits(np.abs(a)))
    np.testing.assert_array_equal(outs[6], np.floor(a))
    np.testing.assert_array_equal(outs[7], np.ceil(a))
    assert outs[8][8] == 1.0 and bits(np.float32(-1e-40) + np.float32(0.0)) != 0   # the subnormal was flushed
    with np.errstate(invalid="ignore"):
        nan_mask = np.isnan(a) | np.isnan(b)
        np.testing.assert_array_equal(outs[9], a < b)
        np.testing.assert_array_equal(outs[10], (a < b) | nan_mask)
        np.testing.assert_array_equal(outs[11], (a != b) & ~nan_mask)
        np.testing.assert_array_equal(outs[12], (a == b) | nan_mask)


@pytest.mark.parametrize("ty", ["f16", "bf16", "f32", "f64"])
def test_math_functions_are_correctly_rounded(ty):
    dt = FLOAT_DT[ty]
    x = RNG.uniform(0.1, 3.0, 24).astype(dt)
    y = RNG.uniform(-2.0, 2.0, 24).astype(dt)
    fns = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sin": np.sin, "cos": np.cos,
           "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "rsqrt": lambda v: 1 / np.sqrt(v)}
    body = "\n".join(f"%r{j} = {name} %x0 : T0" for j, name in enumerate(fns))
    k = len(fns)
    body += (f"\n%r{k} = pow %x0, %x1 : T0\n%r{k + 1} = remf %x1, %x0 : T0\n%r{k + 2} = atan2 %x1, %x0 : T0\n"
             f"%r{k + 3} = exp %x0 rounding<approx> : T0" if ty == "f32" else
             f"\n%r{k} = pow %x0, %x1 : T0\n%r{k + 1} = remf %x1, %x0 : T0\n%r{k + 2} = atan2 %x1, %x0 : T0")
    unary = lambda f: (lambda p, q: f(p))
    refs = [unary(f) for f in fns.values()] + [lambda p, q: np.power(p, q), lambda p, q: np.fmod(q, p),
                                               lambda p, q: np.arctan2(q, p)]
    refs += [unary(np.exp)] if ty == "f32" else []
    outs = run_ew(body, [x, y], [ty, ty], [ty] * len(refs), [dt] * len(refs))
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    for got, ref in zip(outs, refs):
        want = ref(x64, y64).astype(dt)
        np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_fpowi_and_integer_exponents():
    x = np.array([2.0, -3.0, 0.5, 10.0, 1.5], np.float32)
    e = np.array([3, 2, -2, 0, 5], np.int32)
    (r,) = run_ew("%r0 = fpowi %x0, %x1 : T0, T1", [x, e], ["f32", "i32"], ["f32"], [np.float32], tile=8)
    np.testing.assert_array_equal(r, (x.astype(np.float64) ** e).astype(np.float32))


# -- conversions --------------------------------------------------------------------------------
def test_float_to_float_conversions_round_and_saturate():
    x = np.concatenate([np.array([1e6, -1e6, np.inf, -np.inf, np.nan, 449.0, 464.0, 470.0, 0.3, -0.0,
                                  1e-9, 65519.0, 65520.0], np.float32),
                        RNG.uniform(-500, 500, 19).astype(np.float32)])
    targets = [("f16", np.float16), ("bf16", md.bfloat16), ("f8E4M3FN", md.float8_e4m3fn),
               ("f8E5M2", md.float8_e5m2), ("f4E2M1FN", md.float4_e2m1fn)]
    body = "\n".join(f"%c{j} = ftof %x0 : T0 -> tile<16x{t}>\n%r{j} = ftof %c{j} : tile<16x{t}> -> R{j}"
                     for j, (t, _) in enumerate(targets))
    body += (f"\n%c9 = ftof %x0 : T0 -> tile<16xtf32>\n%r{len(targets)} = ftof %c9 : tile<16xtf32> -> "
             f"R{len(targets)}")
    outs = run_ew(body, [x], ["f32"], ["f32"] * (len(targets) + 1), [np.float32] * (len(targets) + 1))
    for (name, dt), got in zip(targets, outs):
        if name.startswith("f8") or name.startswith("f4"):
            fmax = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0, "f4E2M1FN": 6.0}[name]
            want = np.clip(x, -fmax, fmax).astype(dt).astype(np.float32)     # .satfinite
            want[np.isnan(x)] = np.nan if name != "f4E2M1FN" else got[np.isnan(x)]
        else:
            with np.errstate(over="ignore"):
                want = x.astype(dt).astype(np.float32)
        np.testing.assert_array_equal(got, want, err_msg=name)
    bits = x.view(np.uint32).astype(np.uint64)
    tf32 = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32).view(np.float32)
    finite = np.isfinite(x)
    np.testing.assert_array_equal(outs[-1][finite], tf32[finite])


def test_conversion_into_bf16_from_f64_rounds_once():
    x = np.array([1 + 2**-8 + 2**-30, 1 + 2**-8, 1 + 3 * 2**-8], np.float64)
    (r,) = run_ew("%r0 = ftof %x0 : T0 -> R0", [x], ["f64"], ["bf16"], [md.bfloat16], tile=4)
    np.testing.assert_array_equal(r.astype(np.float64), [1 + 2**-7, 1.0, 1 + 2**-6])


def test_e8m0_conversion_modes():
    x = np.array([0.3, 3.0, 4.0, 5.0, 1e-40, 1e30, 0.75, 1.0], np.float32)
    body = ("%c0 = ftof %x0 rounding<zero> : T0 -> tile<8xf8E8M0FNU>\n%r0 = ftof %c0 : tile<8xf8E8M0FNU> -> R0\n"
            "%c1 = ftof %x0 rounding<positive_inf> : T0 -> tile<8xf8E8M0FNU>\n"
            "%r1 = ftof %c1 : tile<8xf8E8M0FNU> -> R1")
    rz, rp = run_ew(body, [x], ["f32"], ["f32", "f32"], [np.float32] * 2, tile=8)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(rz, np.maximum(2.0 ** np.floor(np.log2(x64)), 2.0**-127).astype(np.float32))
    np.testing.assert_array_equal(rp, np.maximum(2.0 ** np.ceil(np.log2(x64)), 2.0**-127).astype(np.float32))


def test_float_int_conversions_saturate_and_round():
    f = np.array([1.9, -1.9, 3e9, -3e9, np.nan, 2147483520.0, -2147483648.0, 0.5, -0.5, 1e20], np.float32)
    i = np.array([2**62 + 1, -(2**62) - 1, 2**53 + 1, -1, 0, 3, 16777217, -16777217, 2**63 - 1, -(2**63)],
                 np.int64)
    body = ("%r0 = ftoi %x0 signed : tile<16xf32> -> tile<16xi32>\n"
            "%r1 = ftoi %x0 unsigned : tile<16xf32> -> tile<16xi32>\n"
            "%r2 = itof %x1 signed : tile<16xi64> -> tile<16xf32>\n"
            "%r3 = itof %x1 unsigned : tile<16xi64> -> tile<16xf32>\n"
            "%r4 = itof %x1 signed : tile<16xi64> -> tile<16xbf16>\n"
            "%r5 = itof %x1 unsigned : tile<16xi64> -> tile<16xf64>")
    outs = run_ew(body, [f, i], ["f32", "i64"], ["i32", "i32", "f32", "f32", "bf16", "f64"],
                  [np.int32, np.int32, np.float32, np.float32, md.bfloat16, np.float64])
    with np.errstate(invalid="ignore"):
        t = np.trunc(f.astype(np.float64))
        sat_s = np.where(np.isnan(t), 0, np.clip(t, -2**31, 2**31 - 1))
        sat_u = np.where(np.isnan(t), 0, np.clip(t, 0, 2**32 - 1))
    np.testing.assert_array_equal(outs[0], sat_s.astype(np.int64).astype(np.int32))
    np.testing.assert_array_equal(outs[1].view(np.uint32), sat_u.astype(np.uint64).astype(np.uint32))
    for k, (signed, dt) in zip(range(2, 6), [(True, np.float32), (False, np.float32), (True, md.bfloat16),
                                             (False, np.float64)]):
        for j, v in enumerate(i):
            val = int(v) if signed else int(v) & (2**64 - 1)
            assert float(outs[k][j]) == round_exact(Fraction(val), dt, "nearest_even"), (k, v)


@pytest.mark.parametrize("mode", ["nearest_even", "zero", "positive_inf", "negative_inf", "nearest_away"])
def test_integer_to_float_rounding_modes_of_the_numeric_core(mode):
    from tileiras.interp.floats import float_format, quantize
    from tileiras.interp.ops_convert import int_as_pair

    vals = [2**62 + 1, -(2**62) - 1, 2**53 + 1, -1, 3, 16777217, -16777217, 2**63 - 1, -(2**63), 2**24 + 3]
    x = np.array(vals, np.int64)
    for name, dt in (("f32", np.float32), ("f64", np.float64), ("bf16", md.bfloat16)):
        if mode == "nearest_away" and name == "f64":
            continue
        got = quantize(*int_as_pair(x, True), float_format(name), mode)
        for g, v in zip(got, vals):
            if mode == "nearest_away":
                lo = round_exact(Fraction(v), dt, "negative_inf")
                hi = round_exact(Fraction(v), dt, "positive_inf")
                d_lo, d_hi = abs(Fraction(v) - Fraction(lo)), abs(Fraction(hi) - Fraction(v))
                want = lo if d_lo < d_hi else hi if d_hi < d_lo else (hi if v > 0 else lo)
            else:
                want = round_exact(Fraction(v), dt, mode)
            assert float(g) == want, (name, mode, v)


def test_bitcast_pack_unpack():
    x = RNG.uniform(-10, 10, 16).astype(np.float32)
    body = ("%r0 = bitcast %x0 : T0 -> tile<16xi32>\n"
            "%c1 = ftof %x0 : T0 -> tile<16xf16>\n%b1 = bitcast %c1 : tile<16xf16> -> tile<16xi16>\n"
            "%r1 = exti %b1 unsigned : tile<16xi16> -> tile<16xi32>\n"
            "%p2 = pack %x0 : T0 -> tile<64xi8>\n%u2 = unpack %p2 : tile<64xi8> -> tile<32xf16>\n"
            "%q2 = pack %u2 : tile<32xf16> -> tile<64xi8>\n%r2 = unpack %q2 : tile<64xi8> -> T0")
    outs = run_ew(body, [x], ["f32"], ["i32", "i32", "f32"], [np.int32, np.int32, np.float32])
    np.testing.assert_array_equal(outs[0], x.view(np.int32))
    np.testing.assert_array_equal(outs[1], x.astype(np.float16).view(np.uint16).astype(np.int32))
    np.testing.assert_array_equal(outs[2].view(np.uint32), x.view(np.uint32))


# -- shapes -----------------------------------------------------------------------------------------
def test_shape_ops_match_numpy():
    src = """
entry @k(%p: tile<ptr<i32>>, %n: tile<i32>, %s: tile<i32>, %q: tile<ptr<i32>>, %m: tile<i32>, %t: tile<i32>) {
  %tv = make_tensor_view %p, shape = [%n], strides = [%s] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pv = make_partition_view %tv : partition_view<tile=(8), tensor_view<?xi32, strides=[?]>>
  %ov = make_tensor_view %q, shape = [%m], strides = [%t] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %po = make_partition_view %ov : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %x, %tk = load_view_tko weak %pv[%c0] : partition_view<tile=(8), tensor_view<?xi32, strides=[?]>>, tile<i32> -> tile<8xi32>, token
  %io = iota : tile<8xi32>
  %a = addi %x, %io : tile<8xi32>
  %r = reshape %a : tile<8xi32> -> tile<2x4xi32>
  %pt = permute %r [1, 0] : tile<2x4xi32> -> tile<4x2xi32>
  %b1 = reshape %pt : tile<4x2xi32> -> tile<4x2x1xi32>
  %bc = broadcast %b1 : tile<4x2x1xi32> -> tile<4x2x2xi32>
  %flat = reshape %bc : tile<4x2x2xi32> -> tile<16xi32>
  %cat = cat %flat, %flat dim = 0 : tile<16xi32>, tile<16xi32> -> tile<32xi32>
  %ex = extract %cat[%c1] : tile<32xi32> -> tile<8xi32>
  %dense = constant <i32: [10, 20, 30, 40, 50, 60, 70, 80]> : tile<8xi32>
  %ins = insert %dense, %cat[%c1] : tile<8xi32>, tile<32xi32>
  %seven = constant <i32: 7> : tile<8xi32>
  %gt = cmpi greater_than %ex, %seven, signed : tile<8xi32> -> tile<8xi1>
  %sel = select %gt, %ex, %dense : tile<8xi1>, tile<8xi32>
  %all = cat %ins, %cat dim = 0 : tile<32xi32>, tile<32xi32> -> tile<64xi32>
  %s1 = reshape %all : tile<64xi32> -> tile<8x8xi32>
  %s5 = extract %s1[%c1, %c0] : tile<8x8xi32> -> tile<2x8xi32>
  %s6 = reshape %s5 : tile<2x8xi32> -> tile<16xi32>
  %s7 = cat %ex, %sel dim = 0 : tile<8xi32>, tile<8xi32> -> tile<16xi32>
  %s8 = cat %s6, %s7 dim = 0 : tile<16xi32>, tile<16xi32> -> tile<32xi32>
  %s9 = cat %s8, %ins dim = 0 : tile<32xi32>, tile<32xi32> -> tile<64xi32>
  %st = store_view_tko weak %s9, %po[%c0] : tile<64xi32>, partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  return
}
"""
    x = np.arange(8, dtype=np.int32) * 3
    _, out = run(src, [x, np.zeros(64, np.int32)])
    a = x + np.arange(8)
    bc = np.broadcast_to(a.reshape(2, 4).T.reshape(4, 2, 1), (4, 2, 2)).reshape(16)
    cat = np.concatenate([bc, bc])
    ex = cat[8:16]
    ins = cat.copy()
    ins[8:16] = [10, 20, 30, 40, 50, 60, 70, 80]
    sel = np.where(ex > 7, ex, ins[8:16])
    s6 = np.concatenate([ins, cat]).reshape(8, 8)[2:4].reshape(-1)
    np.testing.assert_array_equal(out, np.concatenate([s6, ex, sel, ins]))


# -- memory: views, pointers, atomics -----------------------------------------------------------------
VIEW2D = "tensor_view<?x?xf32, strides=[?,?]>"


def view2d_kernel(view_type: str, make: str, tile: str, index: str, grid_index: bool = True) -> str:
    return f"""
entry @k(%p: tile<ptr<f32>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>, %s1: tile<i32>,
         %q: tile<ptr<f32>>, %m0: tile<i32>, %m1: tile<i32>, %t0: tile<i32>, %t1: tile<i32>) {{
  %tv = make_tensor_view %p, shape = [%n0, %n1], strides = [%s0, %s1] : tile<i32> -> {VIEW2D}
  %v = {make} %tv : {view_type}
  %ov = make_tensor_view %q, shape = [%m0, %m1], strides = [%t0, %t1] : tile<i32> -> {VIEW2D}
  %o = make_partition_view %ov : partition_view<tile=({tile}), {VIEW2D}>
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %x, %tk = load_view_tko weak %v[{index}] : {view_type}, tile<i32> -> tile<{tile}xf32>, token
  %st = store_view_tko weak %x, %o[%bx, %by] : tile<{tile}xf32>, partition_view<tile=({tile}), {VIEW2D}>, tile<i32> -> token
  return
}}
"""


@pytest.mark.parametrize("padding,pad", [("zero", 0.0), ("nan", np.nan), ("neg_inf", -np.inf)])
def test_partition_view_loads_pad_ragged_edges(padding, pad):
    a = RNG.uniform(-1, 1, (10, 13)).astype(np.float32)
    vt = f"partition_view<tile=(4x8), padding_value = {padding}, {VIEW2D}>"
    out = np.zeros((12, 16), np.float32)
    _, got = run(view2d_kernel(vt, "make_partition_view", "4x8", "%bx, %by"), [a, out], grid=(3, 2))
    want = np.full((12, 16), pad, np.float32)
    want[:10, :13] = a
    np.testing.assert_array_equal(got, want)


def test_partition_view_dim_map_and_column_major_arrays():
    a = np.asfortranarray(RNG.uniform(-1, 1, (8, 12)).astype(np.float32))
    vt = f"partition_view<tile=(4x2), {VIEW2D}, dim_map=[1, 0]>"
    out = np.zeros((4 * 3, 2 * 4), np.float32)
    _, got = run(view2d_kernel(vt, "make_partition_view", "4x2", "%bx, %by"), [a, out], grid=(3, 4))
    # tile (bx, by) holds t[i, j] = a[by*2 + j, bx*4 + i]: the transposed blocks of `a`
    np.testing.assert_array_equal(got, a.T)


def test_strided_view_overlapping_windows():
    a = RNG.uniform(-1, 1, (6, 20)).astype(np.float32)
    vt = f"strided_view<tile=(2x8), traversal_strides=[1,5], padding_value = zero, {VIEW2D}>"
    out = np.zeros((2 * 5, 8 * 4), np.float32)
    _, got = run(view2d_kernel(vt, "make_strided_view", "2x8", "%bx, %by"), [a, out], grid=(5, 4))
    padded = np.zeros((8, 40), np.float32)
    padded[:6, :20] = a
    for bx in range(5):
        for by in range(4):
            np.testing.assert_array_equal(got[bx * 2:bx * 2 + 2, by * 8:by * 8 + 8],
                                          padded[bx:bx + 2, by * 5:by * 5 + 8])


def test_gather_scatter_view_load_and_store():
    src = f"""
entry @k(%p: tile<ptr<f32>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>, %s1: tile<i32>,
         %ip: tile<ptr<i32>>, %in: tile<i32>, %is: tile<i32>,
         %q: tile<ptr<f32>>, %m0: tile<i32>, %m1: tile<i32>, %t0: tile<i32>, %t1: tile<i32>, %col: tile<i32>) {{
  %tv = make_tensor_view %p, shape = [%n0, %n1], strides = [%s0, %s1] : tile<i32> -> {VIEW2D}
  %g = make_gather_scatter_view %tv : gather_scatter_view<tile=(4x8), padding_value = neg_zero, {VIEW2D}, sparse_dim=0>
  %itv = make_tensor_view %ip, shape = [%in], strides = [%is] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %ipv = make_partition_view %itv : partition_view<tile=(4), tensor_view<?xi32, strides=[?]>>
  %c0 = constant <i32: 0> : tile<i32>
  %idx, %t = load_view_tko weak %ipv[%c0] : partition_view<tile=(4), tensor_view<?xi32, strides=[?]>>, tile<i32> -> tile<4xi32>, token
  %x, %t2 = load_view_tko weak %g[%idx, %col] : gather_scatter_view<tile=(4x8), padding_value = neg_zero, {VIEW2D}, sparse_dim=0>, tile<4xi32>, tile<i32> -> tile<4x8xf32>, token
  %ov = make_tensor_view %q, shape = [%m0, %m1], strides = [%t0, %t1] : tile<i32> -> {VIEW2D}
  %s = make_gather_scatter_view %ov : gather_scatter_view<tile=(4x8), {VIEW2D}, sparse_dim=0>
  %st = store_view_tko weak %x, %s[%idx, %c0] : tile<4x8xf32>, gather_scatter_view<tile=(4x8), {VIEW2D}, sparse_dim=0>, tile<4xi32>, tile<i32> -> token
  return
}}
"""
    a = RNG.uniform(-1, 1, (9, 12)).astype(np.float32)
    idx = np.array([7, -1, 2, 9], np.int32)          # -1 and 9 lie outside: padded, not stored
    out = np.full((9, 8), 5.0, np.float32)
    res = run(src, [a, idx, out, np.int32(6)])
    got = res[2]
    want = np.full((9, 8), 5.0, np.float32)
    want[7, :6] = a[7, 6:12]
    want[7, 6:] = -0.0
    want[2, :6] = a[2, 6:12]
    want[2, 6:] = -0.0
    np.testing.assert_array_equal(got, want)
    assert np.signbit(got[7, 7])


def test_pointer_tiles_offset_mask_padding_and_int_casts():
    src = """
entry @k(%p: tile<ptr<i16>>, %n: tile<i32>, %s: tile<i32>, %q: tile<ptr<i64>>, %m: tile<i32>, %t: tile<i32>,
         %u: tile<ptr<i64>>, %un: tile<i32>, %us: tile<i32>) {
  %p1 = reshape %p : tile<ptr<i16>> -> tile<1xptr<i16>>
  %pb = broadcast %p1 : tile<1xptr<i16>> -> tile<8xptr<i16>>
  %io = iota : tile<8xi32>
  %two = constant <i32: 2> : tile<8xi32>
  %off = muli %io, %two : tile<8xi32>
  %ptrs = offset %pb, %off : tile<8xptr<i16>>, tile<8xi32> -> tile<8xptr<i16>>
  %lim = constant <i32: 5> : tile<8xi32>
  %mask = cmpi less_than %io, %lim, signed : tile<8xi32> -> tile<8xi1>
  %pad = constant <i16: -7> : tile<8xi16>
  %v, %tk = load_ptr_tko weak %ptrs, %mask, %pad : tile<8xptr<i16>>, tile<8xi1>, tile<8xi16> -> tile<8xi16>, token
  %one = constant <i16: 1> : tile<8xi16>
  %w = addi %v, %one : tile<8xi16>
  %tk2 = store_ptr_tko weak %ptrs, %w, %mask : tile<8xptr<i16>>, tile<8xi16>, tile<8xi1> -> token
  %ints = ptr_to_int %ptrs : tile<8xptr<i16>> -> tile<8xi64>
  %base = ptr_to_int %pb : tile<8xptr<i16>> -> tile<8xi64>
  %diff = subi %ints, %base : tile<8xi64>
  %back = int_to_ptr %ints : tile<8xi64> -> tile<8xptr<i16>>
  %same = ptr_to_ptr %back : tile<8xptr<i16>> -> tile<8xptr<i16>>
  %v2, %tk3 = load_ptr_tko weak %same, %mask : tile<8xptr<i16>>, tile<8xi1> -> tile<8xi16>, token
  %v3 = exti %v2 signed : tile<8xi16> -> tile<8xi64>
  %v4 = exti %v signed : tile<8xi16> -> tile<8xi64>
  %r = cat %diff, %v3 dim = 0 : tile<8xi64>, tile<8xi64> -> tile<16xi64>
  %r2 = cat %r, %r dim = 0 : tile<16xi64>, tile<16xi64> -> tile<32xi64>
  %q1 = reshape %q : tile<ptr<i64>> -> tile<1xptr<i64>>
  %qb = broadcast %q1 : tile<1xptr<i64>> -> tile<16xptr<i64>>
  %io16 = iota : tile<16xi64>
  %qp = offset %qb, %io16 : tile<16xptr<i64>>, tile<16xi64> -> tile<16xptr<i64>>
  %tk4 = store_ptr_tko weak %qp, %r : tile<16xptr<i64>>, tile<16xi64> -> token
  %u1 = reshape %u : tile<ptr<i64>> -> tile<1xptr<i64>>
  %ub = broadcast %u1 : tile<1xptr<i64>> -> tile<8xptr<i64>>
  %io8 = iota : tile<8xi64>
  %up = offset %ub, %io8 : tile<8xptr<i64>>, tile<8xi64> -> tile<8xptr<i64>>
  %tk5 = store_ptr_tko weak %up, %v4 : tile<8xptr<i64>>, tile<8xi64> -> token
  return
}
"""
    a = np.arange(20, dtype=np.int16) * 10
    r = run(src, [a, np.zeros(16, np.int64), np.zeros(8, np.int64)])
    want_a = a.copy()
    want_a[0:10:2] += 1
    np.testing.assert_array_equal(r[0], want_a)
    np.testing.assert_array_equal(r[1][:8], np.arange(8) * 4)          # byte distances: 2 i16 apart
    np.testing.assert_array_equal(r[1][8:13], want_a[0:10:2])
    # masked-off lanes read nothing and give the padding (or, with no padding, zero)
    np.testing.assert_array_equal(r[1][13:], 0)
    np.testing.assert_array_equal(r[2], list(a[0:10:2]) + [-7, -7, -7])


def test_out_of_bounds_pointer_access_is_a_memory_fault():
    src = """
entry @k(%p: tile<ptr<f32>>, %n: tile<i32>, %s: tile<i32>) {
  %c = constant <i64: 1000000> : tile<i64>
  %q = offset %p, %c : tile<ptr<f32>>, tile<i64> -> tile<ptr<f32>>
  %v, %t = load_ptr_tko weak %q : tile<ptr<f32>> -> tile<f32>, token
  return
}
"""
    from tileiras.interp import MemoryFault

    with pytest.raises(MemoryFault, match="invalid memory access of 4 bytes"):
        run(src, [np.zeros(4, np.float32)])


ATOMIC_MODES = {
    "add": lambda o, a: wrap(o + a, 32), "and": lambda o, a: o & a, "or": lambda o, a: o | a,
    "xor": lambda o, a: o ^ a, "max": max, "min": min,
    "umax": lambda o, a: wrap(max(unsigned(o, 32), unsigned(a, 32)), 32),
    "umin": lambda o, a: wrap(min(unsigned(o, 32), unsigned(a, 32)), 32), "xchg": lambda o, a: a,
}


@pytest.mark.parametrize("mode", sorted(ATOMIC_MODES))
def test_atomic_rmw_applies_duplicates_in_tile_order(mode):
    src = f"""
entry @k(%p: tile<ptr<i32>>, %n: tile<i32>, %s: tile<i32>, %ip: tile<ptr<i32>>, %in: tile<i32>, %is: tile<i32>,
         %vp: tile<ptr<i32>>, %vn: tile<i32>, %vs: tile<i32>, %op: tile<ptr<i32>>, %on: tile<i32>, %os: tile<i32>) {{
  %c0 = constant <i32: 0> : tile<i32>
  %itv = make_tensor_view %ip, shape = [%in], strides = [%is] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %ipv = make_partition_view %itv : partition_view<tile=(16), tensor_view<?xi32, strides=[?]>>
  %idx, %t0 = load_view_tko weak %ipv[%c0] : partition_view<tile=(16), tensor_view<?xi32, strides=[?]>>, tile<i32> -> tile<16xi32>, token
  %vtv = make_tensor_view %vp, shape = [%vn], strides = [%vs] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %vpv = make_partition_view %vtv : partition_view<tile=(16), tensor_view<?xi32, strides=[?]>>
  %val, %t1 = load_view_tko weak %vpv[%c0] : partition_view<tile=(16), tensor_view<?xi32, strides=[?]>>, tile<i32> -> tile<16xi32>, token
  %p1 = reshape %p : tile<ptr<i32>> -> tile<1xptr<i32>>
  %pb = broadcast %p1 : tile<1xptr<i32>> -> tile<16xptr<i32>>
  %ptrs = offset %pb, %idx : tile<16xptr<i32>>, tile<16xi32> -> tile<16xptr<i32>>
  %io = iota : tile<16xi32>
  %lim = constant <i32: 14> : tile<16xi32>
  %mask = cmpi less_than %io, %lim, signed : tile<16xi32> -> tile<16xi1>
  %old, %t2 = atomic_rmw_tko relaxed device %ptrs, {mode}, %val, %mask : tile<16xptr<i32>>, tile<16xi32>, tile<16xi1> -> tile<16xi32>, token
  %otv = make_tensor_view %op, shape = [%on], strides = [%os] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %opv = make_partition_view %otv : partition_view<tile=(16), tensor_view<?xi32, strides=[?]>>
  %t3 = store_view_tko weak %old, %opv[%c0] : tile<16xi32>, partition_view<tile=(16), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  return
}}
"""
    mem = RNG.integers(-2**31, 2**31, 5).astype(np.int32)
    idx = RNG.integers(0, 5, 16).astype(np.int32)
    val = RNG.integers(-2**31, 2**31, 16).astype(np.int32)
    r = run(src, [mem, idx, val, np.zeros(16, np.int32)])
    want = [int(v) for v in mem]
    olds = []
    for i in range(14):
        olds.append(want[idx[i]])
        want[idx[i]] = ATOMIC_MODES[mode](want[idx[i]], int(val[i]))
    np.testing.assert_array_equal(r[0], want)
    np.testing.assert_array_equal(r[3][:14], olds)


def test_atomic_cas_float_bitwise_and_atomic_reduction_view():
    src = """
entry @k(%p: tile<ptr<f32>>, %n: tile<i32>, %s: tile<i32>, %op: tile<ptr<f32>>, %on: tile<i32>, %os: tile<i32>,
         %hp: tile<ptr<f32>>, %hn: tile<i32>, %hs: tile<i32>) {
  %p1 = reshape %p : tile<ptr<f32>> -> tile<1xptr<f32>>
  %pb = broadcast %p1 : tile<1xptr<f32>> -> tile<4xptr<f32>>
  %idx = constant <i32: [0, 1, 1, 2]> : tile<4xi32>
  %ptrs = offset %pb, %idx : tile<4xptr<f32>>, tile<4xi32> -> tile<4xptr<f32>>
  %cmp = constant <f32: [1.0, 2.0, 7.0, -0.0]> : tile<4xf32>
  %val = constant <f32: [10.0, 7.0, 9.0, 5.0]> : tile<4xf32>
  %old, %t = atomic_cas_tko relaxed device %ptrs, %cmp, %val : tile<4xptr<f32>>, tile<4xf32> -> tile<4xf32>, token
  %ov = make_tensor_view %op, shape = [%on], strides = [%os] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %opv = make_partition_view %ov : partition_view<tile=(4), tensor_view<?xf32, strides=[?]>>
  %c0 = constant <i32: 0> : tile<i32>
  %t2 = store_view_tko weak %old, %opv[%c0] : tile<4xf32>, partition_view<tile=(4), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  %hv = make_tensor_view %hp, shape = [%hn], strides = [%hs] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %hpv = make_partition_view %hv : partition_view<tile=(4), tensor_view<?xf32, strides=[?]>>
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %one = constant <f32: 1.5> : tile<4xf32>
  %t3 = atomic_red_view_tko relaxed device %hpv[%c0], addf, %one : tile<4xf32>, partition_view<tile=(4), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  return
}
"""
    mem = np.array([1.0, 2.0, 0.0], np.float32)
    r = run(src, [mem, np.zeros(4, np.float32), np.zeros(3, np.float32)], grid=(3,))
    # three blocks: the second and third find the values already swapped
    np.testing.assert_array_equal(r[0], [10.0, 9.0, 0.0])   # 2->7, then 7->9; +0.0 != -0.0 bitwise
    np.testing.assert_array_equal(r[1], [10.0, 9.0, 9.0, 0.0])
    np.testing.assert_array_equal(r[2], [4.5, 4.5, 4.5])     # 3 blocks x 1.5, the 4th lane is outside


def test_globals_alloca_and_tensor_shape_queries():
    src = """
cuda_tile.module @kernels {
  global @table <i32: [5, 6, 7, 8]> : tile<4xi32>
  entry @k(%q: tile<ptr<i32>>, %m0: tile<i32>, %m1: tile<i32>, %t0: tile<i32>, %t1: tile<i32>) {
    %g = get_global @table : tile<ptr<i32>>
    %g1 = reshape %g : tile<ptr<i32>> -> tile<1xptr<i32>>
    %gb = broadcast %g1 : tile<1xptr<i32>> -> tile<4xptr<i32>>
    %io = iota : tile<4xi32>
    %gp = offset %gb, %io : tile<4xptr<i32>>, tile<4xi32> -> tile<4xptr<i32>>
    %v, %tk = load_ptr_tko weak %gp : tile<4xptr<i32>> -> tile<4xi32>, token
    %w = muli %v, %v : tile<4xi32>
    %tk2 = store_ptr_tko weak %gp, %w : tile<4xptr<i32>>, tile<4xi32> -> token
    %a = alloca num_elem = 4, alignment = 16 : tile<ptr<i32>>
    %a1 = reshape %a : tile<ptr<i32>> -> tile<1xptr<i32>>
    %ab = broadcast %a1 : tile<1xptr<i32>> -> tile<4xptr<i32>>
    %ap = offset %ab, %io : tile<4xptr<i32>>, tile<4xi32> -> tile<4xptr<i32>>
    %tk3 = store_ptr_tko weak %ap, %w : tile<4xptr<i32>>, tile<4xi32> -> token
    %x, %tk4 = load_ptr_tko weak %ap : tile<4xptr<i32>> -> tile<4xi32>, token
    %ov = make_tensor_view %q, shape = [%m0, %m1], strides = [%t0, %t1] : tile<i32> -> tensor_view<?x?xi32, strides=[?,?]>
    %d0, %d1 = get_tensor_shape %ov : tensor_view<?x?xi32, strides=[?,?]> -> tile<i32>
    %pv = make_partition_view %ov : partition_view<tile=(1x4), tensor_view<?x?xi32, strides=[?,?]>>
    %i0, %i1 = get_index_space_shape %pv : partition_view<tile=(1x4), tensor_view<?x?xi32, strides=[?,?]>> -> tile<i64>
    %j0 = trunci %i0 : tile<i64> -> tile<i32>
    %j1 = trunci %i1 : tile<i64> -> tile<i32>
    %s0 = reshape %d0 : tile<i32> -> tile<1xi32>
    %s1 = reshape %d1 : tile<i32> -> tile<1xi32>
    %s2 = reshape %j0 : tile<i32> -> tile<1xi32>
    %s3 = reshape %j1 : tile<i32> -> tile<1xi32>
    %c01 = cat %s0, %s1 dim = 0 : tile<1xi32>, tile<1xi32> -> tile<2xi32>
    %c23 = cat %s2, %s3 dim = 0 : tile<1xi32>, tile<1xi32> -> tile<2xi32>
    %sh = cat %c01, %c23 dim = 0 : tile<2xi32>, tile<2xi32> -> tile<4xi32>
    %row = reshape %x : tile<4xi32> -> tile<1x4xi32>
    %row2 = reshape %sh : tile<4xi32> -> tile<1x4xi32>
    %c0 = constant <i32: 0> : tile<i32>
    %c1 = constant <i32: 1> : tile<i32>
    %st = store_view_tko weak %row, %pv[%c0, %c0] : tile<1x4xi32>, partition_view<tile=(1x4), tensor_view<?x?xi32, strides=[?,?]>>, tile<i32> -> token
    %st2 = store_view_tko weak %row2, %pv[%c1, %c0] : tile<1x4xi32>, partition_view<tile=(1x4), tensor_view<?x?xi32, strides=[?,?]>>, tile<i32> -> token
    return
  }
}
"""
    (out,) = run(src, [np.zeros((3, 5), np.int32)], grid=(2,))
    # block 0 squares the global, block 1 squares it again: the global is shared by every block
    np.testing.assert_array_equal(out[0, :4], np.array([5, 6, 7, 8]) ** 4)
    np.testing.assert_array_equal(out[1, :4], [3, 5, 3, 2])


# -- control flow, reductions, scans, MMA ----------------------------------------------------------------
def test_for_loop_if_and_loop_with_break_and_continue():
    src = """
entry @k(%q: tile<ptr<i32>>, %m: tile<i32>, %t: tile<i32>, %n: tile<i32>) {
  %c0 = constant <i32: 0> : tile<i32>
  %c1 = constant <i32: 1> : tile<i32>
  %c3 = constant <i32: 3> : tile<i32>
  %sum, %cnt = for %i in (%c0 to %n, step %c1) : tile<i32> iter_values(%acc = %c0, %k = %c0) -> (tile<i32>, tile<i32>) {
    %r = remi %i, %c3 signed : tile<i32>
    %z = cmpi equal %r, %c0, signed : tile<i32> -> tile<i1>
    %a2, %k2 = if %z -> (tile<i32>, tile<i32>) {
      %k1 = addi %k, %c1 : tile<i32>
      yield %acc, %k1 : tile<i32>, tile<i32>
    } else {
      %a1 = addi %acc, %i : tile<i32>
      yield %a1, %k : tile<i32>, tile<i32>
    }
    continue %a2, %k2 : tile<i32>, tile<i32>
  }
  %big = constant <i32: 100> : tile<i32>
  %l, %steps = loop iter_values(%x = %c1, %s = %c0) : tile<i32>, tile<i32> -> tile<i32>, tile<i32> {
    %done = cmpi greater_than %x, %big, signed : tile<i32> -> tile<i1>
    if %done {
      break %x, %s : tile<i32>, tile<i32>
    }
    %x2 = muli %x, %c3 : tile<i32>
    %s2 = addi %s, %c1 : tile<i32>
    continue %x2, %s2 : tile<i32>, tile<i32>
  }
  %r0 = reshape %sum : tile<i32> -> tile<1xi32>
  %r1 = reshape %cnt : tile<i32> -> tile<1xi32>
  %r2 = reshape %l : tile<i32> -> tile<1xi32>
  %r3 = reshape %steps : tile<i32> -> tile<1xi32>
  %a = cat %r0, %r1 dim = 0 : tile<1xi32>, tile<1xi32> -> tile<2xi32>
  %b = cat %r2, %r3 dim = 0 : tile<1xi32>, tile<1xi32> -> tile<2xi32>
  %all = cat %a, %b dim = 0 : tile<2xi32>, tile<2xi32> -> tile<4xi32>
  %ov = make_tensor_view %q, shape = [%m], strides = [%t] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %pv = make_partition_view %ov : partition_view<tile=(4), tensor_view<?xi32, strides=[?]>>
  %neg = cmpi less_than %n, %c0, signed : tile<i32> -> tile<i1>
  if %neg {
    return
  }
  %st = store_view_tko weak %all, %pv[%c0] : tile<4xi32>, partition_view<tile=(4), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  return
}
"""
    (out, _) = run(src, [np.zeros(4, np.int32), np.int32(20)])
    assert list(out) == [sum(i for i in range(20) if i % 3), len(range(0, 20, 3)), 243, 5]
    (out, _) = run(src, [np.zeros(4, np.int32), np.int32(-5)])        # early return: nothing stored
    assert list(out) == [0, 0, 0, 0]


def test_reduce_and_scan_with_bodies():
    src = """
entry @k(%p: tile<ptr<f32>>, %n0: tile<i32>, %n1: tile<i32>, %s0: tile<i32>, %s1: tile<i32>,
         %q: tile<ptr<f32>>, %m0: tile<i32>, %m1: tile<i32>, %t0: tile<i32>, %t1: tile<i32>) {
  %tv = make_tensor_view %p, shape = [%n0, %n1], strides = [%s0, %s1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
  %pv = make_partition_view %tv : partition_view<tile=(4x8), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,?]>>
  %c0 = constant <i32: 0> : tile<i32>
  %x, %tk = load_view_tko weak %pv[%c0, %c0] : partition_view<tile=(4x8), padding_value = neg_inf, tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> tile<4x8xf32>, token
  %io = iota : tile<8xi32>
  %i1 = reshape %io : tile<8xi32> -> tile<1x8xi32>
  %ix = broadcast %i1 : tile<1x8xi32> -> tile<4x8xi32>
  %mx, %am = reduce %x, %ix dim=1 identities=[0xFF800000 : f32, 0 : i32] : tile<4x8xf32>, tile<4x8xi32> -> tile<4xf32>, tile<4xi32>
  (%v: tile<f32>, %va: tile<f32>, %j: tile<i32>, %ja: tile<i32>) {
    %gt = cmpf greater_than_or_equal ordered %v, %va : tile<f32> -> tile<i1>
    %m = select %gt, %v, %va : tile<i1>, tile<f32>
    %k = select %gt, %j, %ja : tile<i1>, tile<i32>
    yield %m, %k : tile<f32>, tile<i32>
  }
  %cs = scan %x dim=1 reverse=false identities=[0.0 : f32] : tile<4x8xf32> -> tile<4x8xf32>
  (%e: tile<f32>, %acc: tile<f32>) {
    %s = maxf %e, %acc : tile<f32>
    yield %s : tile<f32>
  }
  %rs = scan %x dim=0 reverse=true identities=[0.0 : f32] : tile<4x8xf32> -> tile<4x8xf32>
  (%e2: tile<f32>, %acc2: tile<f32>) {
    %s2 = addf %e2, %acc2 : tile<f32>
    yield %s2 : tile<f32>
  }
  %amf = itof %am signed : tile<4xi32> -> tile<4xf32>
  %mm1 = reshape %mx : tile<4xf32> -> tile<4x1xf32>
  %a1 = reshape %amf : tile<4xf32> -> tile<4x1xf32>
  %ma = cat %mm1, %a1 dim = 1 : tile<4x1xf32>, tile<4x1xf32> -> tile<4x2xf32>
  %ma2 = cat %ma, %ma dim = 1 : tile<4x2xf32>, tile<4x2xf32> -> tile<4x4xf32>
  %ma3 = cat %ma2, %ma2 dim = 1 : tile<4x4xf32>, tile<4x4xf32> -> tile<4x8xf32>
  %o1 = cat %ma3, %cs dim = 0 : tile<4x8xf32>, tile<4x8xf32> -> tile<8x8xf32>
  %o2 = cat %rs, %rs dim = 0 : tile<4x8xf32>, tile<4x8xf32> -> tile<8x8xf32>
  %o = cat %o1, %o2 dim = 0 : tile<8x8xf32>, tile<8x8xf32> -> tile<16x8xf32>
  %ov = make_tensor_view %q, shape = [%m0, %m1], strides = [%t0, %t1] : tile<i32> -> tensor_view<?x?xf32, strides=[?,?]>
  %opv = make_partition_view %ov : partition_view<tile=(16x8), tensor_view<?x?xf32, strides=[?,?]>>
  %st = store_view_tko weak %o, %opv[%c0, %c0] : tile<16x8xf32>, partition_view<tile=(16x8), tensor_view<?x?xf32, strides=[?,?]>>, tile<i32> -> token
  return
}
"""
    a = RNG.integers(-3, 4, (4, 6)).astype(np.float32)        # ties on purpose; 2 padded columns
    _, out = run(src, [a, np.zeros((16, 8), np.float32)])
    x = np.full((4, 8), -np.inf, np.float32)
    x[:, :6] = a
    np.testing.assert_array_equal(out[:4, 0], x.max(axis=1))
    # ties: the sequential fold acc = f(x[j], acc) with >= keeps the last maximum
    np.testing.assert_array_equal(out[:4, 1], [7 - np.argmax(row[::-1]) for row in x])
    np.testing.assert_array_equal(out[4:8], np.maximum.accumulate(x, axis=1))
    np.testing.assert_allclose(out[8:12], np.cumsum(x[::-1], axis=0)[::-1])


def test_mma_float_integer_and_scaled():
    src = """
entry @k(%a: tile<ptr<f16>>, %an: tile<i32>, %as: tile<i32>, %b: tile<ptr<i8>>, %bn: tile<i32>, %bs: tile<i32>,
         %o: tile<ptr<f32>>, %on: tile<i32>, %os: tile<i32>, %oi: tile<ptr<i32>>, %oin: tile<i32>, %ois: tile<i32>) {
  %c0 = constant <i32: 0> : tile<i32>
  %atv = make_tensor_view %a, shape = [%an], strides = [%as] : tile<i32> -> tensor_view<?xf16, strides=[?]>
  %apv = make_partition_view %atv : partition_view<tile=(128), tensor_view<?xf16, strides=[?]>>
  %af, %t0 = load_view_tko weak %apv[%c0] : partition_view<tile=(128), tensor_view<?xf16, strides=[?]>>, tile<i32> -> tile<128xf16>, token
  %btv = make_tensor_view %b, shape = [%bn], strides = [%bs] : tile<i32> -> tensor_view<?xi8, strides=[?]>
  %bpv = make_partition_view %btv : partition_view<tile=(128), tensor_view<?xi8, strides=[?]>>
  %bi, %t1 = load_view_tko weak %bpv[%c0] : partition_view<tile=(128), tensor_view<?xi8, strides=[?]>>, tile<i32> -> tile<128xi8>, token
  %A = reshape %af : tile<128xf16> -> tile<2x4x16xf16>
  %AT = extract %A[%c0, %c0, %c0] : tile<2x4x16xf16> -> tile<2x4x16xf16>
  %B = reshape %af : tile<128xf16> -> tile<2x16x4xf16>
  %acc = constant <f32: 0.5> : tile<2x4x4xf32>
  %D = mmaf %AT, %B, %acc : tile<2x4x16xf16>, tile<2x16x4xf16>, tile<2x4x4xf32>
  %Ai = reshape %bi : tile<128xi8> -> tile<8x16xi8>
  %Bi = reshape %bi : tile<128xi8> -> tile<16x8xi8>
  %acci = constant <i32: 7> : tile<8x8xi32>
  %Di = mmai %Ai, %Bi, %acci signed unsigned : tile<8x16xi8>, tile<16x8xi8>, tile<8x8xi32>
  %A2 = reshape %af : tile<128xf16> -> tile<4x32xf16>
  %B2 = reshape %af : tile<128xf16> -> tile<32x4xf16>
  %A8 = ftof %A2 : tile<4x32xf16> -> tile<4x32xf8E4M3FN>
  %B8 = ftof %B2 : tile<32x4xf16> -> tile<32x4xf8E4M3FN>
  %sa = constant <f32: [[0.5], [1.0], [2.0], [8.0]]> : tile<4x1xf32>
  %sa8 = ftof %sa rounding<zero> : tile<4x1xf32> -> tile<4x1xf8E8M0FNU>
  %sb = constant <f32: [[2.0, 0.25, 1.0, 4.0]]> : tile<1x4xf32>
  %sb8 = ftof %sb rounding<zero> : tile<1x4xf32> -> tile<1x4xf8E8M0FNU>
  %zero = constant <f32: 0.0> : tile<4x4xf32>
  %S = mmaf_scaled %A8, %B8, %zero, %sa8, %sb8 : tile<4x32xf8E4M3FN>, tile<32x4xf8E4M3FN>, tile<4x4xf32>, tile<4x1xf8E8M0FNU>, tile<1x4xf8E8M0FNU>
  %Df = reshape %D : tile<2x4x4xf32> -> tile<32xf32>
  %Sf = reshape %S : tile<4x4xf32> -> tile<16xf32>
  %S2 = cat %Sf, %Sf dim = 0 : tile<16xf32>, tile<16xf32> -> tile<32xf32>
  %DS = cat %Df, %S2 dim = 0 : tile<32xf32>, tile<32xf32> -> tile<64xf32>
  %otv = make_tensor_view %o, shape = [%on], strides = [%os] : tile<i32> -> tensor_view<?xf32, strides=[?]>
  %opv = make_partition_view %otv : partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>
  %t2 = store_view_tko weak %DS, %opv[%c0] : tile<64xf32>, partition_view<tile=(64), tensor_view<?xf32, strides=[?]>>, tile<i32> -> token
  %Dif = reshape %Di : tile<8x8xi32> -> tile<64xi32>
  %oitv = make_tensor_view %oi, shape = [%oin], strides = [%ois] : tile<i32> -> tensor_view<?xi32, strides=[?]>
  %oipv = make_partition_view %oitv : partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>
  %t3 = store_view_tko weak %Dif, %oipv[%c0] : tile<64xi32>, partition_view<tile=(64), tensor_view<?xi32, strides=[?]>>, tile<i32> -> token
  return
}
"""
    a = RNG.uniform(-2, 2, 128).astype(np.float16)
    b = RNG.integers(-128, 128, 128).astype(np.int8)
    r = run(src, [a, b, np.zeros(64, np.float32), np.zeros(64, np.int32)])
    A, B = a.astype(np.float64).reshape(2, 4, 16), a.astype(np.float64).reshape(2, 16, 4)
    np.testing.assert_array_equal(r[2][:32], (A @ B + 0.5).astype(np.float32).reshape(-1))
    A8 = a.astype(np.float32).astype(md.float8_e4m3fn).astype(np.float64).reshape(4, 32)
    B8 = a.astype(np.float32).astype(md.float8_e4m3fn).astype(np.float64).reshape(32, 4)
    sa = np.array([0.5, 1, 2, 8]).reshape(4, 1)
    sb = np.array([2.0, 0.25, 1.0, 4.0]).reshape(1, 4)
    scaled = ((A8 * sa) @ (B8 * sb)).astype(np.float32).reshape(-1)
    np.testing.assert_array_equal(r[2][32:], np.concatenate([scaled, scaled]))
    Ai = b.astype(np.int64).reshape(8, 16)
    Bi = b.view(np.uint8).astype(np.int64).reshape(16, 8)
    np.testing.assert_array_equal(r[3], (Ai @ Bi + 7).astype(np.int32).reshape(-1))


# -- print, assert and errors ------------------------------------------------------------------------------
def test_print_formats_tiles_and_assert_names_its_message():
    src = """
entry @k(%p: tile<ptr<i32>>, %n: tile<i32>, %s: tile<i32>) {
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %v = constant <i32: [1, -2, 255, 0]> : tile<4xi32>
  %f = constant <f32: [[0.5, 1.25], [-3.0, 8.0]]> : tile<2x2xf32>
  %t = print_tko "block %d: %d hex %x %.2f|%5.1e|100%%\\n", %bx, %v, %v, %f, %f : tile<i32>, tile<4xi32>, tile<4xi32>, tile<2x2xf32>, tile<2x2xf32> -> token
  %lim = constant <i32: 1> : tile<i32>
  %ok = cmpi less_than %bx, %lim, signed : tile<i32> -> tile<i1>
  assert %ok, "block id too large" : tile<i1>
  return
}
"""
    from tileiras.interp import KernelAssertion

    out = io.StringIO()
    run(src, [np.zeros(1, np.int32)], grid=(1,), stdout=out)
    assert out.getvalue() == ("block 0: [1, -2, 255, 0] hex [1, fffffffe, ff, 0] [[0.50, 1.25], [-3.00, 8.00]]|"
                              "[[5.0e-01, 1.2e+00], [-3.0e+00, 8.0e+00]]|100%\n")
    out = io.StringIO()
    with pytest.raises(KernelAssertion, match=r"assertion failed: block id too large .*tile block \(1, 0, 0\)"):
        run(src, [np.zeros(1, np.int32)], grid=(2,), stdout=out)
    assert out.getvalue().count("block") == 2          # block 0 passed, block 1 printed then failed


def test_unknown_op_and_bad_arguments_are_clear_errors():
    from tileiras.errors import TileirasError
    from tileiras.interp import InterpError
    from tileiras.interp.machine import Machine
    from tileiras.ir.core import Operation

    module = load_module(b"entry @k(%n: tile<i32>) {\n  return\n}\n", "t.mlir")
    body = [op for op in module.walk() if op.name == "cuda_tile.entry"][0].regions[0].block
    body.operations.insert(0, Operation("cuda_tile.frobnicate", [], []))
    with pytest.raises(InterpError, match="no semantics for 'cuda_tile.frobnicate'"):
        Machine(module).launch("k", (1, 1, 1), [3])
    with pytest.raises(InterpError, match="no kernel named 'nope'.*kernels: k"):
        Machine(module).launch("nope", (1, 1, 1), [3])
    body.operations[0] = Operation("cuda_tile.multimem_store_view_tko", [], [])
    with pytest.raises(InterpError, match="needs multicast memory across GPUs"):
        Machine(module).launch("k", (1, 1, 1), [3])
    with pytest.raises(TileirasError, match="argument 0 is an array, but parameter 0 of 'k' is tile<i32>"):
        run_arrays(module, "k", (1,), [np.zeros(3, np.int32)])
    with pytest.raises(TileirasError, match="argument 0 is a int64 scalar, the kernel parameter is i32"):
        run_arrays(module, "k", (1,), [np.int64(3)])


def test_nonterminating_loop_hits_the_iteration_limit():
    from tileiras.interp import InterpError
    from tileiras.interp.machine import Machine

    module = load_module(b"entry @k() {\n  loop {\n    continue\n  }\n  return\n}\n", "t.mlir")
    with pytest.raises(InterpError, match="loop iteration limit"):
        Machine(module, max_loop_iterations=1000).launch("k", (1, 1, 1), [])


def test_broken_assumptions_are_reported():
    from tileiras.interp import InterpError

    src = """
entry @k(%n: tile<i32>) {
  %a = assume bounded<0, 100>, %n : tile<i32>
  %b = assume div_by<8>, %n : tile<i32>
  %io = iota : tile<8xi32>
  %c = assume div_by<4, every 4 along 0>, %io : tile<8xi32>
  %n1 = reshape %n : tile<i32> -> tile<1xi32>
  %nb = broadcast %n1 : tile<1xi32> -> tile<8xi32>
  %s = addi %nb, %io : tile<8xi32>
  %d = assume same_elements<[4]>, %s : tile<8xi32>
  return
}
"""
    module = load_module(src.encode(), "t.mlir")
    from tileiras.interp.machine import Machine

    with pytest.raises(InterpError, match=r"assumption broken: bounded<0, 100>: value 101"):
        Machine(module).launch("k", (1,), [101])
    with pytest.raises(InterpError, match=r"assumption broken: div_by<8> does not hold"):
        Machine(module).launch("k", (1,), [12])
    with pytest.raises(InterpError, match=r"same_elements<\[4\]> does not hold along dimension 0"):
        Machine(module).launch("k", (1,), [16])      # bounded, div_by and every-4 hold; same_elements not


@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("rm", ["", " rounding<zero>", " rounding<negative_inf>", " rounding<positive_inf>"])
def test_exact_zero_results_have_the_ieee_sign(ty, rm):
    """sqrt(-0) = -0, fma(0, -1, -0) = -0, and x + (-x) is +0 except rounding toward -inf (-0).
    Found by the random differential programs: f64 sqrt and fma gave +0, and so did every mode."""
    dt = FLOAT_DT[ty]
    a = np.array([-0.0, 1.5, 0.0, -0.0], dt)
    b = np.array([0.0, -1.5, -1.0, -0.0], dt)
    c = np.array([-0.0, 2.25, -0.0, -0.0], dt)
    body = f"%r0 = sqrt %x0{rm} : T0\n%r1 = addf %x0, %x1{rm} : T0\n%r2 = fma %x0, %x1, %x2{rm} : T0"
    root, add, fma = run_ew(body, [a, b, c], [ty] * 3, [ty] * 3, [dt] * 3, tile=4)
    cancel = "-0.0" if "negative_inf" in rm else "0.0"
    assert [str(v) for v in root.tolist()][::2] == ["-0.0", "0.0"]
    assert [str(v) for v in add.tolist()] == [cancel, cancel, "-1.0", "-0.0"]
    assert [str(v) for v in fma.tolist()] == ["-0.0", cancel, "-0.0", cancel]


def test_a_list_of_arrays_is_passed_as_a_descriptor_table():
    """A Python list binds to `ptr<i64>, i32`: rows of (data pointer, shape..., strides...) and the count;
    the arrays come back as a list after the run."""
    from tileiras.errors import TileirasError

    src = """
entry @k(%t: tile<ptr<i64>>, %n: tile<i32>, %p: tile<ptr<i64>>, %m: tile<i32>, %s: tile<i32>) {
  %tv = make_tensor_view %t, shape = [%n, 3], strides = [3, 1] : tile<i32> -> tensor_view<?x3xi64, strides=[3,1]>
  %pv = make_partition_view %tv : partition_view<tile=(2x4), tensor_view<?x3xi64, strides=[3,1]>>
  %c0 = constant <i32: 0> : tile<i32>
  %rows, %tk = load_view_tko weak %pv[%c0, %c0] : partition_view<tile=(2x4), tensor_view<?x3xi64, strides=[3,1]>>, tile<i32> -> tile<2x4xi64>, token
  %flat = reshape %rows : tile<2x4xi64> -> tile<8xi64>
  %ov = make_tensor_view %p, shape = [%m], strides = [%s] : tile<i32> -> tensor_view<?xi64, strides=[?]>
  %opv = make_partition_view %ov : partition_view<tile=(8), tensor_view<?xi64, strides=[?]>>
  %st = store_view_tko weak %flat, %opv[%c0] : tile<8xi64>, partition_view<tile=(8), tensor_view<?xi64, strides=[?]>>, tile<i32> -> token
  return
}
"""
    module = load_module(src.encode(), "t.mlir")
    arrays = [np.arange(5, dtype=np.float32), np.arange(7, dtype=np.int16)]
    got = run_arrays(module, "k", (1,), [arrays, np.zeros(8, np.int64)])
    assert isinstance(got[0], list) and [a.tolist() for a in got[0]] == [a.tolist() for a in arrays]
    table = got[1].reshape(2, 4)[:, :3]                   # padded column dropped
    assert table[:, 1:].tolist() == [[5, 1], [7, 1]] and table[0, 0] != table[1, 0] != 0
    with pytest.raises(TileirasError, match="same ndim"):
        run_arrays(module, "k", (1,), [[np.zeros(2), np.zeros((2, 2))], np.zeros(8, np.int64)])
    scalar_only = load_module(b"entry @k(%n: tile<i32>, %m: tile<i32>) {\n  return\n}\n", "t.mlir")
    with pytest.raises(TileirasError, match="argument 0 is a list of arrays, but parameters 0, 1 of 'k' are not"):
        run_arrays(scalar_only, "k", (1,), [arrays])
