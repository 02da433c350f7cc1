"""Transcendental and rounding math: unary ops, binary float ops, rounding-mode variants."""

import cuda.tile as ct

from corpus_spec import ZEROS, Arr, Const, Entry, Kernel, case, choice, tol, uniform

UNARY_OPS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh",
             "sinh", "cosh", "floor", "ceil")


@ct.kernel
def math_unary(x, out, T: ct.Constant[int]):
    """Row k of `out` holds UNARY_OPS[k] applied to `x` (out has shape (16, N))."""
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(T,))
    ct.store(out, index=(0, i), tile=ct.expand_dims(ct.exp(t), 0))
    ct.store(out, index=(1, i), tile=ct.expand_dims(ct.exp2(t), 0))
    ct.store(out, index=(2, i), tile=ct.expand_dims(ct.log(t), 0))
    ct.store(out, index=(3, i), tile=ct.expand_dims(ct.log2(t), 0))
    ct.store(out, index=(4, i), tile=ct.expand_dims(ct.sqrt(t), 0))
    ct.store(out, index=(5, i), tile=ct.expand_dims(ct.rsqrt(t), 0))
    ct.store(out, index=(6, i), tile=ct.expand_dims(ct.sin(t), 0))
    ct.store(out, index=(7, i), tile=ct.expand_dims(ct.cos(t), 0))
    ct.store(out, index=(8, i), tile=ct.expand_dims(ct.tan(t), 0))
    ct.store(out, index=(9, i), tile=ct.expand_dims(ct.tanh(t), 0))
    ct.store(out, index=(10, i), tile=ct.expand_dims(ct.sinh(t), 0))
    ct.store(out, index=(11, i), tile=ct.expand_dims(ct.cosh(t), 0))
    ct.store(out, index=(12, i), tile=ct.expand_dims(ct.floor(t * 3.0), 0))
    ct.store(out, index=(13, i), tile=ct.expand_dims(ct.ceil(t * 3.0), 0))


def _unary_entry(dtype: str, rel: float) -> Entry:
    params = {"x": Arr(dtype, 1), "out": Arr(dtype, 2), "T": Const(64)}
    return Entry(
        symbol=f"math_unary_{dtype}", params=params, reference="math_unary", outputs=("out",),
        tolerance=tol(rel), options={"ops": list(UNARY_OPS)},
        cases=[case((2,), x=((128,), uniform(0.1, 1.4)), out=((16, 128), ZEROS)),
               case((2,), "ragged", x=((100,), uniform(0.1, 1.4)), out=((16, 100), ZEROS))])


@ct.kernel
def math_binary(x, y, out):
    """pow, float modulo, floor division, min/max (plain and NaN-propagating)."""
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    b = ct.load(y, index=(i,), shape=(64,))
    ct.store(out, index=(0, i), tile=ct.expand_dims(a ** b, 0))
    ct.store(out, index=(1, i), tile=ct.expand_dims(a % b, 0))
    ct.store(out, index=(2, i), tile=ct.expand_dims(a // b, 0))
    ct.store(out, index=(3, i), tile=ct.expand_dims(ct.minimum(a, b), 0))
    ct.store(out, index=(4, i), tile=ct.expand_dims(ct.maximum(a, b), 0))
    ct.store(out, index=(5, i), tile=ct.expand_dims(ct.minimum(a, b, propagate_nan=True), 0))
    ct.store(out, index=(6, i), tile=ct.expand_dims(ct.maximum(a, b, propagate_nan=True), 0))
    ct.store(out, index=(7, i), tile=ct.expand_dims(ct.pow(b, 2.0), 0))


def _binary_entry(dtype: str, rel: float) -> Entry:
    params = {"x": Arr(dtype, 1), "y": Arr(dtype, 1), "out": Arr(dtype, 2)}
    divisors = choice([-2.5, -1.5, -0.75, 0.5, 1.25, 3.0, "nan"])
    return Entry(symbol=f"math_binary_{dtype}", params=params, reference="math_binary",
                 outputs=("out",), tolerance=tol(rel),
                 cases=[case((2,), x=((128,), uniform(0.25, 4.0)), y=((128,), divisors),
                             out=((8, 128), ZEROS))])


@ct.kernel
def math_atan2(y, x, out):
    i = ct.bid(0)
    a = ct.load(y, index=(i,), shape=(64,))
    b = ct.load(x, index=(i,), shape=(64,))
    ct.store(out, index=(i,), tile=ct.atan2(a, b))


@ct.kernel
def math_fpowi(x, out):
    """Float base, integer exponent (cuTile 13.4 emits fpowi for `x ** int`)."""
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    ct.store(out, index=(0, i), tile=ct.expand_dims(a ** 3, 0))
    ct.store(out, index=(1, i), tile=ct.expand_dims(a ** -2, 0))


@ct.kernel
def math_approx(x, out):
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    approx = ct.RoundingMode.APPROX
    ct.store(out, index=(0, i), tile=ct.expand_dims(ct.exp(a, rounding_mode=approx), 0))
    ct.store(out, index=(1, i), tile=ct.expand_dims(ct.tanh(a, rounding_mode=approx), 0))


@ct.kernel
def math_rounding(x, y, exact, approx):
    """Explicit rounding modes and flush-to-zero.  `exact` rows are correctly rounded
    results (checked bit for bit): add rz, sub rm, mul rp, div rz, sqrt rp, sub rp, and
    ftz add/mul/max/min (inputs are normal numbers, so ftz changes nothing).  `approx`
    rows: div approx, div full, sqrt approx, exp2 ftz, rsqrt ftz, sqrt ftz."""
    i = ct.bid(0)
    a = ct.load(x, index=(i,), shape=(64,))
    b = ct.load(y, index=(i,), shape=(64,))
    rz, rm, rp = ct.RoundingMode.RZ, ct.RoundingMode.RM, ct.RoundingMode.RP
    ct.store(exact, index=(0, i), tile=ct.expand_dims(ct.add(a, b, rounding_mode=rz), 0))
    ct.store(exact, index=(1, i), tile=ct.expand_dims(ct.sub(a, b, rounding_mode=rm), 0))
    ct.store(exact, index=(2, i), tile=ct.expand_dims(ct.mul(a, b, rounding_mode=rp), 0))
    ct.store(exact, index=(3, i), tile=ct.expand_dims(ct.truediv(a, b, rounding_mode=rz), 0))
    ct.store(exact, index=(4, i), tile=ct.expand_dims(ct.sqrt(a, rounding_mode=rp), 0))
    ct.store(exact, index=(5, i), tile=ct.expand_dims(ct.sub(a, b, rounding_mode=rp), 0))
    ct.store(exact, index=(6, i), tile=ct.expand_dims(ct.add(a, b, flush_to_zero=True), 0))
    ct.store(exact, index=(7, i), tile=ct.expand_dims(ct.mul(a, b, flush_to_zero=True), 0))
    ct.store(exact, index=(8, i), tile=ct.expand_dims(ct.maximum(a, b, flush_to_zero=True), 0))
    ct.store(exact, index=(9, i), tile=ct.expand_dims(ct.minimum(a, b, flush_to_zero=True), 0))
    approx_mode, full_mode = ct.RoundingMode.APPROX, ct.RoundingMode.FULL
    ct.store(approx, index=(0, i), tile=ct.expand_dims(
        ct.truediv(a, b, rounding_mode=approx_mode), 0))
    ct.store(approx, index=(1, i), tile=ct.expand_dims(
        ct.truediv(a, b, rounding_mode=full_mode), 0))
    ct.store(approx, index=(2, i), tile=ct.expand_dims(ct.sqrt(a, rounding_mode=approx_mode), 0))
    ct.store(approx, index=(3, i), tile=ct.expand_dims(ct.exp2(a, flush_to_zero=True), 0))
    ct.store(approx, index=(4, i), tile=ct.expand_dims(ct.rsqrt(a, flush_to_zero=True), 0))
    ct.store(approx, index=(5, i), tile=ct.expand_dims(ct.sqrt(a, flush_to_zero=True), 0))


def _f32(names: tuple[str, ...], twod: str | None = None) -> dict[str, Arr]:
    return {n: Arr("float32", 2 if n == twod else 1) for n in names}


KERNELS = [
    Kernel("math_unary", math_unary,
           [_unary_entry("float32", 2e-6), _unary_entry("float16", 4e-3),
            _unary_entry("bfloat16", 3e-2), _unary_entry("float64", 1e-12)],
           "exp, exp2, log, log2, sqrt, rsqrt, sin, cos, tan, tanh, sinh, cosh, floor, ceil"),
    Kernel("math_binary", math_binary,
           [_binary_entry("float32", 2e-6), _binary_entry("float16", 4e-3)],
           "pow, float modulo (remf), floor division, minf/maxf with and without NaN "
           "propagation"),
    Kernel("math_atan2", math_atan2,
           [Entry(symbol="math_atan2_float32", params=_f32(("y", "x", "out")),
                  reference="math_atan2", outputs=("out",), tolerance=tol(2e-6),
                  cases=[case((2,), y=((128,), uniform(-3, 3)), x=((128,), uniform(-3, 3)),
                              out=((128,), ZEROS))])],
           "atan2 (new in bytecode 13.2)",
           skip={"13.1": "atan2 needs 13.2"}),
    Kernel("math_fpowi", math_fpowi,
           [Entry(symbol="math_fpowi_float32", params=_f32(("x", "out"), twod="out"),
                  reference="math_fpowi", outputs=("out",), tolerance=tol(2e-6),
                  cases=[case((2,), x=((128,), uniform(0.5, 2.0)), out=((2, 128), ZEROS))])],
           "float raised to a constant integer power (fpowi from 13.4; before that cuTile "
           "emits fpowf with a float exponent)"),
    Kernel("math_approx", math_approx,
           [Entry(symbol="math_approx_float32", params=_f32(("x", "out"), twod="out"),
                  reference="math_approx", outputs=("out",), tolerance=tol(2e-3),
                  cases=[case((2,), x=((128,), uniform(-4.0, 4.0)), out=((2, 128), ZEROS))])],
           "exp and tanh with rounding<approx> (cuTile allows exp's from 13.3, tanh's "
           "from 13.2)",
           skip={v: "exp rounding_mode=approx needs 13.3" for v in ("13.1", "13.2")}),
    Kernel("math_rounding", math_rounding,
           [Entry(symbol="math_rounding_float32",
                  params={"x": Arr("float32", 1), "y": Arr("float32", 1),
                          "exact": Arr("float32", 2), "approx": Arr("float32", 2)},
                  reference="math_rounding", outputs=("exact", "approx"),
                  tolerance={"outputs": {"exact": "exact", "approx": tol(2e-6)}},
                  cases=[case((2,), x=((128,), uniform(0.25, 4.0)), y=((128,), uniform(0.5, 3.0)),
                              exact=((10, 128), ZEROS), approx=((6, 128), ZEROS))])],
           "rounding<zero/negative_inf/positive_inf/approx/full> and flush_to_zero"),
]
