"""Elementwise arithmetic: float, integer (signed and unsigned), bitwise, scalar operands."""

import cuda.tile as ct

from corpus_spec import (Arr, Const, Entry, Kernel, Scalar, choice, elementwise_case, randint,
                         uniform)

FLOATS = ("float32", "float16", "bfloat16", "float64")
INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@ct.kernel
def ew_float(a, b, c, o_add, o_sub, o_mul, o_div, o_fma, o_neg, o_abs, T: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(T,))
    y = ct.load(b, index=(i,), shape=(T,))
    z = ct.load(c, index=(i,), shape=(T,))
    ct.store(o_add, index=(i,), tile=x + y)
    ct.store(o_sub, index=(i,), tile=x - y)
    ct.store(o_mul, index=(i,), tile=x * y)
    ct.store(o_div, index=(i,), tile=x / y)
    ct.store(o_fma, index=(i,), tile=x * y + z)
    ct.store(o_neg, index=(i,), tile=-x)
    ct.store(o_abs, index=(i,), tile=ct.abs(x))


def _float_entry(dtype: str) -> Entry:
    names = ("a", "b", "c", "o_add", "o_sub", "o_mul", "o_div", "o_fma", "o_neg", "o_abs")
    params = {n: Arr(dtype, 1) for n in names} | {"T": Const(64)}
    inits = {"a": uniform(-4, 4), "b": choice([-3.5, -2, -1.25, -0.5, 0.5, 0.75, 1, 2.5, 3]),
             "c": uniform(-4, 4)}
    tol = {"float32": 1e-6, "float64": 1e-12, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    return Entry(
        symbol=f"ew_float_{dtype}", params=params, reference="ew_float",
        outputs=names[3:], tolerance={"rtol": tol, "atol": tol},
        cases=[elementwise_case(params, (256,), (4,), inits, default=uniform(-1, 1)),
               elementwise_case(params, (200,), (4,), inits, default=uniform(-1, 1),
                                name="ragged")])


@ct.kernel
def ew_int(a, b, o_add, o_sub, o_mul, o_cdiv, o_mod, o_max, o_min):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(128,))
    y = ct.load(b, index=(i,), shape=(128,))
    ct.store(o_add, index=(i,), tile=x + y)
    ct.store(o_sub, index=(i,), tile=x - y)
    ct.store(o_mul, index=(i,), tile=x * y)
    ct.store(o_cdiv, index=(i,), tile=ct.cdiv(x, y))
    ct.store(o_mod, index=(i,), tile=x % y)
    ct.store(o_max, index=(i,), tile=ct.maximum(x, y))
    ct.store(o_min, index=(i,), tile=ct.minimum(x, y))


def _int_entry(dtype: str) -> Entry:
    names = ("a", "b", "o_add", "o_sub", "o_mul", "o_cdiv", "o_mod", "o_max", "o_min")
    params = {n: Arr(dtype, 1) for n in names}
    divisors = [2, 3, 5, 7, 9] if dtype.startswith("u") else [-9, -7, -3, -2, 2, 3, 5, 7]
    inits = {"a": ["bits"], "b": choice(divisors)}
    return Entry(
        symbol=f"ew_int_{dtype}", params=params, reference="ew_int", outputs=names[2:],
        cases=[elementwise_case(params, (256,), (2,), inits, default=["full", 0]),
               elementwise_case(params, (300,), (3,), inits, default=["full", 0],
                                name="ragged")])


@ct.kernel
def ew_int_floordiv(a, b, o_floordiv, o_floordiv_scalar):
    """Floor division of signed integers (cuTile emits divi rounding<negative_inf>, which
    the verifier rejects for unsigned operands, so there is no unsigned entry)."""
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(128,))
    y = ct.load(b, index=(i,), shape=(128,))
    ct.store(o_floordiv, index=(i,), tile=x // y)
    ct.store(o_floordiv_scalar, index=(i,), tile=x // -4)


def _floordiv_entry(dtype: str) -> Entry:
    params = {n: Arr(dtype, 1) for n in ("a", "b", "o_floordiv", "o_floordiv_scalar")}
    inits = {"a": ["bits"], "b": choice([-9, -7, -3, -2, 2, 3, 5, 7])}
    return Entry(symbol=f"ew_int_floordiv_{dtype}", params=params, reference="ew_int_floordiv",
                 outputs=("o_floordiv", "o_floordiv_scalar"),
                 cases=[elementwise_case(params, (256,), (2,), inits, default=["full", 0])])


@ct.kernel
def ew_int_unary(a, o_neg, o_abs, o_not):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(64,))
    ct.store(o_neg, index=(i,), tile=-x)
    ct.store(o_abs, index=(i,), tile=ct.abs(x))
    ct.store(o_not, index=(i,), tile=~x)


def _int_unary_entry(dtype: str) -> Entry:
    params = {n: Arr(dtype, 1) for n in ("a", "o_neg", "o_abs", "o_not")}
    return Entry(symbol=f"ew_int_unary_{dtype}", params=params, reference="ew_int_unary",
                 outputs=("o_neg", "o_abs", "o_not"),
                 cases=[elementwise_case(params, (128,), (2,), {"a": ["bits"]},
                                         default=["full", 0])])


@ct.kernel
def ew_bitwise(a, b, o_and, o_or, o_xor, o_shl, o_shr):
    i = ct.bid(0)
    x = ct.load(a, index=(i,), shape=(128,))
    s = ct.load(b, index=(i,), shape=(128,))
    ct.store(o_and, index=(i,), tile=x & s)
    ct.store(o_or, index=(i,), tile=x | s)
    ct.store(o_xor, index=(i,), tile=x ^ s)
    ct.store(o_shl, index=(i,), tile=x << s)
    ct.store(o_shr, index=(i,), tile=x >> s)


def _bitwise_entry(dtype: str, bits: int) -> Entry:
    names = ("a", "b", "o_and", "o_or", "o_xor", "o_shl", "o_shr")
    params = {n: Arr(dtype, 1) for n in names}
    return Entry(symbol=f"ew_bitwise_{dtype}", params=params, reference="ew_bitwise",
                 outputs=names[2:],
                 cases=[elementwise_case(params, (256,), (2,),
                                         {"a": ["bits"], "b": randint(0, bits)},
                                         default=["full", 0])])


@ct.kernel
def ew_scalar(x, out, alpha, beta, flag):
    """out = alpha * x + beta when flag, else x - beta: scalar entry parameters."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(64,))
    if flag:
        r = alpha * t + beta
    else:
        r = t - beta
    ct.store(out, index=(i,), tile=r)


def _scalar_entry(dtype: str, scalar_dtype: str, alpha, beta, tol) -> Entry:
    params = {"x": Arr(dtype, 1), "out": Arr(dtype, 1), "alpha": Scalar(scalar_dtype),
              "beta": Scalar(scalar_dtype), "flag": Scalar("bool")}
    init = randint(-100, 100) if "int" in dtype else uniform(-2, 2)
    return Entry(
        symbol=f"ew_scalar_{dtype}", params=params, reference="ew_scalar", outputs=("out",),
        tolerance=tol,
        cases=[elementwise_case(params, (128,), (2,), {"x": init}, default=["full", 0],
                                scalars={"alpha": alpha, "beta": beta, "flag": True}),
               elementwise_case(params, (100,), (2,), {"x": init}, default=["full", 0],
                                scalars={"alpha": alpha, "beta": beta, "flag": False},
                                name="ragged_noflag")])


KERNELS = [
    Kernel("ew_float", ew_float, [_float_entry(d) for d in FLOATS],
           "add/sub/mul/div/fma/neg/abs on f32, f16, bf16, f64; one entry per type"),
    Kernel("ew_int", ew_int, [_int_entry(d) for d in INTS],
           "wrapping add/sub/mul, ceil division, python modulo, min/max on signed and "
           "unsigned integers of every width"),
    Kernel("ew_int_floordiv", ew_int_floordiv,
           [_floordiv_entry(d) for d in ("int8", "int16", "int32", "int64")],
           "signed floor division by a tile and by a negative constant"),
    Kernel("ew_int_unary", ew_int_unary,
           [_int_unary_entry(d) for d in ("int8", "int16", "int32", "int64")],
           "integer negation, abs and bitwise not"),
    Kernel("ew_bitwise", ew_bitwise,
           [_bitwise_entry(d, b) for d, b in (("int32", 32), ("uint32", 32), ("int64", 64),
                                              ("uint8", 8))],
           "and/or/xor and shifts (arithmetic for signed, logical for unsigned)"),
    Kernel("ew_scalar", ew_scalar,
           [_scalar_entry("float32", "float32", 1.5, -0.25, {"rtol": 1e-6, "atol": 1e-6}),
            _scalar_entry("float16", "float16", 0.5, 2.0, {"rtol": 2e-3, "atol": 2e-3}),
            _scalar_entry("int64", "int64", 3, 7, "exact")],
           "runtime scalar parameters (f32, f16, i64 and an i1 flag) broadcast into tiles"),
]
