"""Reductions over axes, argmax/argmin, custom reduce bodies, scans, softmax, layer norm."""

import cuda.tile as ct

from corpus_spec import (ZEROS, Arr, Const, Entry, Kernel, Scalar, case, choice, randint, tol,
                         uniform)


@ct.kernel
def reduce_axes(x, o_sum0, o_sum1, o_max0, o_min1, o_prod0, o_all):
    """x tile (16, 32) per block row; reduce over each axis and over everything."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 32))
    ct.store(o_sum0, index=(i, 0), tile=ct.sum(t, axis=0, keepdims=True))
    ct.store(o_sum1, index=(i,), tile=ct.sum(t, axis=1))
    ct.store(o_max0, index=(i, 0), tile=ct.max(t, axis=0, keepdims=True))
    ct.store(o_min1, index=(i,), tile=ct.min(t, axis=1))
    ct.store(o_prod0, index=(i, 0), tile=ct.prod(t, axis=0, keepdims=True))
    ct.store(o_all, index=(i,), tile=ct.sum(t))


@ct.kernel
def reduce_int(x, o_sum, o_max, o_min, o_custom):
    """Integer reductions (wrapping sum, signed/unsigned max/min) and a custom body."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(8, 64))
    ct.store(o_sum, index=(i,), tile=ct.sum(t, axis=1))
    ct.store(o_max, index=(i,), tile=ct.max(t, axis=1))
    ct.store(o_min, index=(i,), tile=ct.min(t, axis=1))
    ct.store(o_custom, index=(i,), tile=ct.reduce(t, 1, lambda a, b: a ^ b, 0))


@ct.kernel
def reduce_custom(x, y, o_sumsq, o_pair):
    """ct.reduce with user bodies (associative and commutative, so the combining order does
    not matter): a sum of squares and a two-operand (value, weight) max-by-value."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 32))
    w = ct.load(y, index=(i, 0), shape=(16, 32))
    ct.store(o_sumsq, index=(i,), tile=ct.reduce(t * t, 1, lambda a, b: a + b, 0.0))
    best, weight = ct.reduce((t, w), 1, _keep_larger, (-1e30, 0.0))
    ct.store(o_pair, index=(i,), tile=best * weight)


@ct.function
def _keep_larger(av, aw, bv, bw):
    take_a = av >= bv
    return ct.where(take_a, av, bv), ct.where(take_a, aw, bw)


@ct.kernel
def argmax_argmin(x, o_argmax0, o_argmin1, o_argmax_all):
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(16, 32))
    ct.store(o_argmax0, index=(i, 0), tile=ct.argmax(t, axis=0, keepdims=True))
    ct.store(o_argmin1, index=(i,), tile=ct.argmin(t, axis=1))
    ct.store(o_argmax_all, index=(i,), tile=ct.argmax(t))


@ct.kernel
def scan(x, o_cumsum1, o_cumprod0, o_rev, o_max):
    """Scans along both axes, reversed, and with a custom body (running max)."""
    i = ct.bid(0)
    t = ct.load(x, index=(i, 0), shape=(8, 32))
    ct.store(o_cumsum1, index=(i, 0), tile=ct.cumsum(t, axis=1))
    ct.store(o_cumprod0, index=(i, 0), tile=ct.cumprod(t, axis=0))
    ct.store(o_rev, index=(i, 0), tile=ct.cumsum(t, axis=1, reverse=True))
    ct.store(o_max, index=(i, 0), tile=ct.scan(t, 1, lambda a, b: ct.maximum(a, b), -1e30))


@ct.kernel
def scan_int(x, o_cumsum, o_cumprod):
    i = ct.bid(0)
    t = ct.load(x, index=(i,), shape=(128,))
    ct.store(o_cumsum, index=(i,), tile=ct.cumsum(t, axis=0))
    ct.store(o_cumprod, index=(i,), tile=ct.cumprod(t, axis=0))


@ct.kernel
def softmax(x, y, N: ct.Constant[int]):
    """Row softmax of a (R, N) array, one 16-row tile per block; padding -inf keeps ragged
    rows exact."""
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(16, N), padding_mode=ct.PaddingMode.NEG_INF),
                  ct.float32)
    m = ct.max(t, axis=1, keepdims=True)
    e = ct.exp(t - m)
    s = ct.sum(e, axis=1, keepdims=True)
    ct.store(y, index=(i, 0), tile=ct.astype(e / s, y.dtype))


@ct.kernel
def layernorm(x, w, b, y, eps, N: ct.Constant[int]):
    """y = (x - mean) / sqrt(var + eps) * w + b over rows of 64."""
    i = ct.bid(0)
    t = ct.astype(ct.load(x, index=(i, 0), shape=(16, N)), ct.float32)
    mean = ct.sum(t, axis=1, keepdims=True) / N
    d = t - mean
    var = ct.sum(d * d, axis=1, keepdims=True) / N
    inv = ct.rsqrt(var + eps)
    g = ct.astype(ct.load(w, index=(0,), shape=(N,)), ct.float32)
    h = ct.astype(ct.load(b, index=(0,), shape=(N,)), ct.float32)
    ct.store(y, index=(i, 0), tile=ct.astype(d * inv * g + h, y.dtype))


def _a(dtype, ndim=2):
    return Arr(dtype, ndim)


KERNELS = [
    Kernel("reduce_axes", reduce_axes,
           [Entry(f"reduce_axes_{d}",
                  {"x": _a(d), "o_sum0": _a(d), "o_sum1": _a(d, 1), "o_max0": _a(d),
                   "o_min1": _a(d, 1), "o_prod0": _a(d), "o_all": _a(d, 1)},
                  [case((2,), x=((32, 32), uniform(0.5, 1.5)), o_sum0=((2, 32), ZEROS),
                        o_sum1=((32,), ZEROS), o_max0=((2, 32), ZEROS), o_min1=((32,), ZEROS),
                        o_prod0=((2, 32), ZEROS), o_all=((2,), ZEROS))],
                  "reduce_axes", ("o_sum0", "o_sum1", "o_max0", "o_min1", "o_prod0", "o_all"),
                  tolerance=tol(t))
            for d, t in (("float32", 1e-5), ("float16", 1e-2), ("float64", 1e-12))],
           "sum/max/min/prod over axis 0, axis 1 and all axes (f32, f16, f64)"),
    Kernel("reduce_int", reduce_int,
           [Entry(f"reduce_int_{d}",
                  {"x": _a(d), "o_sum": _a(d, 1), "o_max": _a(d, 1), "o_min": _a(d, 1),
                   "o_custom": _a(d, 1)},
                  [case((2,), x=((16, 64), ["bits"]), o_sum=((16,), ZEROS),
                        o_max=((16,), ZEROS), o_min=((16,), ZEROS), o_custom=((16,), ZEROS))],
                  "reduce_int", ("o_sum", "o_max", "o_min", "o_custom"))
            for d in ("int32", "uint32", "int64", "int8")],
           "integer sum/max/min with wrap-around and signedness, custom xor body"),
    Kernel("reduce_custom", reduce_custom,
           [Entry("reduce_custom",
                  {"x": _a("float32"), "y": _a("float32"), "o_sumsq": _a("float32", 1),
                   "o_pair": _a("float32", 1)},
                  [case((2,), x=((32, 32), uniform(-2, 2)),
                        y=((32, 32), uniform(0, 1)), o_sumsq=((32,), ZEROS),
                        o_pair=((32,), ZEROS))],
                  "reduce_custom", ("o_sumsq", "o_pair"), tolerance=tol(1e-5))],
           "reduce with user-defined bodies, including a two-operand reduce"),
    Kernel("argmax_argmin", argmax_argmin,
           [Entry("argmax_argmin",
                  {"x": _a("float32"), "o_argmax0": _a("int32"), "o_argmin1": _a("int32", 1),
                   "o_argmax_all": _a("int32", 1)},
                  [case((2,), x=((32, 32), uniform(-10, 10)), o_argmax0=((2, 32), ZEROS),
                        o_argmin1=((32,), ZEROS), o_argmax_all=((2,), ZEROS)),
                   case((2,), "ties", x=((32, 32), choice([0.0, 1.0, 2.0])),
                        o_argmax0=((2, 32), ZEROS), o_argmin1=((32,), ZEROS),
                        o_argmax_all=((2,), ZEROS))],
                  "argmax_argmin", ("o_argmax0", "o_argmin1", "o_argmax_all"))],
           "argmax/argmin over an axis and over the flattened tile (first index wins ties)"),
    Kernel("scan", scan,
           [Entry("scan_float32",
                  {"x": _a("float32"), "o_cumsum1": _a("float32"), "o_cumprod0": _a("float32"),
                   "o_rev": _a("float32"), "o_max": _a("float32")},
                  [case((2,), x=((16, 32), uniform(0.5, 1.5)), o_cumsum1=((16, 32), ZEROS),
                        o_cumprod0=((16, 32), ZEROS), o_rev=((16, 32), ZEROS),
                        o_max=((16, 32), ZEROS))],
                  "scan", ("o_cumsum1", "o_cumprod0", "o_rev", "o_max"), tolerance=tol(1e-5))],
           "cumsum/cumprod along both axes, reverse scan, custom scan body"),
    Kernel("scan_int", scan_int,
           [Entry(f"scan_int_{d}", {"x": _a(d, 1), "o_cumsum": _a(d, 1), "o_cumprod": _a(d, 1)},
                  [case((2,), x=((256,), randint(-3, 4)), o_cumsum=((256,), ZEROS),
                        o_cumprod=((256,), ZEROS))],
                  "scan_int", ("o_cumsum", "o_cumprod"))
            for d in ("int32", "int64")],
           "integer cumsum/cumprod (wrapping)"),
    Kernel("softmax", softmax,
           [Entry(f"softmax_{d}", {"x": _a(d), "y": _a(d), "N": Const(64)},
                  [case((2,), x=((32, 64), uniform(-4, 4)), y=((32, 64), ZEROS)),
                   case((3,), "ragged_rows", x=((40, 64), uniform(-4, 4)), y=((40, 64), ZEROS))],
                  "softmax", ("y",), tolerance=tol(t))
            for d, t in (("float32", 1e-5), ("float16", 2e-3), ("bfloat16", 1e-2))],
           "row softmax (max, exp, sum, divide) with -inf padding"),
    Kernel("layernorm", layernorm,
           [Entry(f"layernorm_{d}",
                  {"x": _a(d), "w": _a(d, 1), "b": _a(d, 1), "y": _a(d),
                   "eps": Scalar("float32"), "N": Const(64)},
                  [case((2,), x=((32, 64), uniform(-3, 3)), w=((64,), uniform(0.5, 1.5)),
                        b=((64,), uniform(-0.5, 0.5)), y=((32, 64), ZEROS),
                        scalars={"eps": 1e-5})],
                  "layernorm", ("y",), tolerance=tol(t))
            for d, t in (("float32", 1e-4), ("float16", 4e-3))],
           "layer norm over rows with weight, bias and a runtime epsilon"),
]
