"""numpy reference implementations of the corpus kernels, and the input recipes.

Typical use (the interpreter, emulator and GPU suites all do this)::

    import reference
    manifest = reference.load_manifest()
    for kernel, entry, case in reference.iter_cases(manifest):
        args = reference.make_args(kernel, entry, case)      # name -> array / scalar / list
        want = reference.expected(entry, case, args)         # output name -> array
        ... run kernel["files"][version], entry["symbol"], grid=case["grid"], on copies of args
        problems = reference.compare(entry, got, want)       # [] when everything matches

``args`` holds the initial contents of every array (outputs too: a kernel leaves
the elements it does not write unchanged, and ``expected`` starts from them).
Arrays are passed to a kernel in cuTile's ABI: ``ptr, shape..., strides...`` per
array (strides in elements), scalars as themselves, constants not at all.

Each reference function takes a :class:`Call` and returns the expected final
contents of the entry's outputs.  Print kernels also return ``"__stdout__"``: the
lines the kernel prints, as a list whose order across blocks is unspecified.
"""

from __future__ import annotations

import json
import math
import zlib
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import numpy as np

HERE = Path(__file__).resolve().parent
STDOUT = "__stdout__"


# --------------------------------------------------------------------------- manifest

def load_manifest(path: str | Path | None = None) -> dict[str, Any]:
    return json.loads(Path(path or HERE / "manifest.json").read_text())


def iter_cases(manifest: dict[str, Any]) -> Iterator[tuple[dict, dict, dict]]:
    """(kernel, entry, case) for every launch the manifest describes."""
    for kernel in manifest["kernels"]:
        for entry in kernel["entries"]:
            for case in entry["cases"]:
                yield kernel, entry, case


def numpy_dtype(name: str) -> np.dtype:
    if name == "bool":
        return np.dtype(np.bool_)
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu",
                "float4_e2m1fn"):
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


# --------------------------------------------------------------------------- inputs

def _seed(*parts: str) -> int:
    return zlib.crc32("/".join(parts).encode())


def _special(v: Any) -> float | int:
    return float(v) if isinstance(v, str) else v


def make_array(spec: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """One array from its recipe (see README: uniform, randint, normal, full, choice,
    values, arange, bits, nonzero_bits, permutation)."""
    shape = tuple(spec["shape"])
    dtype = numpy_dtype(spec["dtype"])
    kind, *a = spec["init"]
    size = int(np.prod(shape, dtype=np.int64))
    if kind == "uniform":
        data = rng.uniform(a[0], a[1], size)
    elif kind == "normal":
        data = rng.normal(a[0], a[1], size)
    elif kind == "randint":
        data = rng.integers(a[0], a[1], size, dtype=np.int64)
    elif kind == "full":
        data = np.full(size, _special(a[0]))
    elif kind == "choice":
        data = np.array([_special(v) for v in a[0]])[rng.integers(0, len(a[0]), size)]
    elif kind == "values":
        data = np.array([_special(v) for v in a[0]])
        if data.size != size:
            raise ValueError(f"'values' recipe has {data.size} values for shape {shape}")
    elif kind == "arange":
        start, step = (a + [0, 1])[:2]
        data = start + step * np.arange(size)
    elif kind in ("bits", "nonzero_bits"):
        raw = rng.integers(0, 256, size * dtype.itemsize, dtype=np.uint8)
        data = raw.view(dtype).copy()
        if kind == "nonzero_bits":
            # no zero divisors and no -1 (INT_MIN / -1 overflows)
            data[(data == 0) | (data == np.array(-1).astype(dtype))] = 7
        return data.reshape(shape)
    elif kind == "permutation":
        data = rng.permutation(a[0])[:size]
    else:
        raise ValueError(f"unknown init recipe {spec['init']!r}")
    if dtype.kind in "iu" and data.dtype.kind == "f":
        raise ValueError(f"float recipe {kind!r} for integer array")
    if dtype.kind in "iu":
        data = np.asarray(data, dtype=np.int64).astype(dtype)   # wraps, like C
    else:
        data = np.asarray(data, dtype=np.float64).astype(dtype)
    return data.reshape(shape)


def make_args(kernel: dict[str, Any], entry: dict[str, Any],
              case: dict[str, Any]) -> dict[str, Any]:
    """Every non-constant parameter of ``entry`` for ``case``, in parameter order."""
    args: dict[str, Any] = {}
    for p in entry["params"]:
        name = p["name"]
        if p["kind"] == "array":
            rng = np.random.default_rng(_seed(kernel["name"], entry["symbol"], case["name"], name))
            args[name] = make_array(case["arrays"][name], rng)
        elif p["kind"] == "list":
            args[name] = [
                make_array(spec, np.random.default_rng(
                    _seed(kernel["name"], entry["symbol"], case["name"], name, str(k))))
                for k, spec in enumerate(case["arrays"][name])]
        elif p["kind"] == "scalar":
            s = case["scalars"][name]
            args[name] = numpy_dtype(s["dtype"]).type(s["value"])
    return args


# --------------------------------------------------------------------------- checking

class Call:
    """What a reference sees: arguments, constants, grid, entry options."""

    def __init__(self, entry: dict[str, Any], case: dict[str, Any], args: dict[str, Any]):
        self.entry = entry
        self.case = case
        self.args = args
        self.grid = tuple(case["grid"])
        self.options = entry.get("options", {})
        self._params = {p["name"]: p for p in entry["params"]}

    def __getitem__(self, name: str) -> Any:
        return self.args[name]

    def const(self, name: str) -> Any:
        return self._params[name]["value"]

    def dtype(self, name: str) -> np.dtype:
        return numpy_dtype(self._params[name]["dtype"])

    def out(self, name: str) -> np.ndarray:
        """A copy of the initial contents of output ``name``."""
        return np.array(self.args[name], copy=True)

    def f64(self, name: str) -> np.ndarray:
        return np.asarray(self.args[name]).astype(np.float64)

    def ints(self, name: str) -> np.ndarray:
        """Exact Python integers (object array) for wrap-around arithmetic."""
        return np.asarray(self.args[name]).astype(object)


def expected(entry: dict[str, Any], case: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    fn = globals()[entry["reference"]]
    with np.errstate(all="ignore"):
        return fn(Call(entry, case, args))


def _tolerance_for(entry: dict[str, Any], name: str) -> str | dict[str, float]:
    tol = entry["tolerance"]
    if isinstance(tol, dict) and "outputs" in tol:
        return tol["outputs"][name]
    return tol


def compare(entry: dict[str, Any], got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """Differences between ``got`` and ``want`` (empty when they agree).  NaN matches
    NaN; -0.0 matches +0.0; "exact" tolerance means equal values."""
    problems = []
    for name, w in want.items():
        if name == STDOUT:
            if sorted(got.get(STDOUT, [])) != sorted(w):
                problems.append(f"stdout: got {got.get(STDOUT)!r}, want {w!r}")
            continue
        g = np.asarray(got[name])
        w = np.asarray(w)
        if g.shape != w.shape:
            problems.append(f"{name}: shape {g.shape} != {w.shape}")
            continue
        tol = _tolerance_for(entry, name)
        if w.dtype.kind in "iub":
            bad = g.astype(w.dtype) != w
        else:
            gf, wf = g.astype(np.float64), w.astype(np.float64)
            both_nan = np.isnan(gf) & np.isnan(wf)
            if tol == "exact":
                bad = ~((gf == wf) | both_nan)
            else:
                close = np.isclose(gf, wf, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True)
                bad = ~(close | both_nan | (gf == wf))
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            problems.append(f"{name}: {int(bad.sum())} of {bad.size} differ; first at {idx}: "
                            f"got {g[idx]!r}, want {w[idx]!r}")
    return problems


# --------------------------------------------------------------------------- helpers

def _wrap(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Python integers -> dtype with two's-complement wrap-around."""
    bits = dtype.itemsize * 8
    flat = [int(v) % (1 << bits) for v in np.asarray(values, dtype=object).ravel()]
    if dtype.kind == "i":
        flat = [v - (1 << bits) if v >= (1 << (bits - 1)) else v for v in flat]
    return np.array(flat, dtype=dtype).reshape(np.shape(values))


def _as(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return np.asarray(values).astype(dtype)


def _rows(n_rows: int, *rows: np.ndarray) -> np.ndarray:
    return np.stack(rows[:n_rows])


def _floor_div(a: Any, b: Any) -> Any:
    return a // b            # Python semantics on object arrays


def _ceil_div(a: Any, b: Any) -> Any:
    return -((-a) // b)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _round_float(value: Fraction | float, dtype: np.dtype, mode: str) -> float:
    """Round an exact value to ``dtype`` with IEEE rounding ``mode`` (rn, rz, rm, rp)."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return float(np.asarray(value).astype(dtype))
    exact = Fraction(value)
    rn = np.asarray(float(exact)).astype(dtype)    # f64 rounding first: exact enough
    # Correct the candidate so it is the true nearest-even result.
    cand = rn
    if mode == "rn":
        return float(cand)
    lo = hi = cand
    c = Fraction(float(cand)) if np.isfinite(cand) else None
    if c is None or c > exact:
        hi = cand
        lo = np.nextafter(cand, np.asarray(-np.inf, dtype))
    elif c < exact:
        lo = cand
        hi = np.nextafter(cand, np.asarray(np.inf, dtype))
    else:
        return float(cand)
    if mode == "rz":
        return float(lo if exact > 0 else hi)
    if mode == "rm":
        return float(lo)
    if mode == "rp":
        return float(hi)
    raise ValueError(mode)


def _round_array(values: list, dtype: np.dtype, mode: str) -> np.ndarray:
    return np.array([_round_float(v, dtype, mode) for v in values], dtype=dtype)


def _sqrt_fraction(x: float) -> Fraction:
    """sqrt(x) to well beyond double precision, as a Fraction."""
    f = Fraction(x)
    scale = 1 << 120
    r = math.isqrt(f.numerator * scale * scale // f.denominator)
    return Fraction(r, scale)


def _minifloat(x: np.ndarray, man_bits: int, min_exp: int) -> np.ndarray:
    """Round positive normal values to a binary float with ``man_bits`` stored mantissa
    bits (nearest-even); values below 2**min_exp are not expected here."""
    x = np.asarray(x, dtype=np.float64)
    e = np.floor(np.log2(x))
    e = np.maximum(e, min_exp)
    q = np.ldexp(x, -(e - man_bits).astype(int))
    return np.ldexp(np.rint(q), (e - man_bits).astype(int))


def _tf32(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """f32 -> tf32 (10 stored mantissa bits) -> f32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    low = bits & 0x1FFF
    if mode == "rn":
        bits = bits + 0xFFF + ((bits >> 13) & 1)
    elif mode == "ra":
        bits = bits + 0x1000
    elif mode != "rz":
        raise ValueError(mode)
    out = (bits & 0xFFFFE000).astype(np.uint32).view(np.float32)
    del low
    special = ~np.isfinite(np.asarray(x, dtype=np.float32))
    return np.where(special, np.asarray(x, dtype=np.float32), out)


# =========================================================================== elementwise

def ew_float(c: Call) -> dict:
    dt = c.dtype("a")
    a, b, z = c.f64("a"), c.f64("b"), c.f64("c")
    return {"o_add": _as(a + b, dt), "o_sub": _as(a - b, dt), "o_mul": _as(a * b, dt),
            "o_div": _as(a / b, dt), "o_fma": _as(a * b + z, dt), "o_neg": _as(-a, dt),
            "o_abs": _as(np.abs(a), dt)}


def ew_int(c: Call) -> dict:
    dt = c.dtype("a")
    a, b = c.ints("a"), c.ints("b")
    return {"o_add": _wrap(a + b, dt), "o_sub": _wrap(a - b, dt), "o_mul": _wrap(a * b, dt),
            "o_cdiv": _wrap(_ceil_div(a, b), dt), "o_mod": _wrap(a % b, dt),
            "o_max": _wrap(np.maximum(a, b), dt), "o_min": _wrap(np.minimum(a, b), dt)}


def ew_int_floordiv(c: Call) -> dict:
    dt = c.dtype("a")
    a, b = c.ints("a"), c.ints("b")
    return {"o_floordiv": _wrap(_floor_div(a, b), dt), "o_floordiv_scalar": _wrap(a // -4, dt)}


def ew_int_unary(c: Call) -> dict:
    dt = c.dtype("a")
    a = c.ints("a")
    return {"o_neg": _wrap(-a, dt), "o_abs": _wrap(np.abs(a), dt), "o_not": _wrap(~a, dt)}


def ew_bitwise(c: Call) -> dict:
    dt = c.dtype("a")
    a, s = c.ints("a"), c.ints("b")
    return {"o_and": _wrap(a & s, dt), "o_or": _wrap(a | s, dt), "o_xor": _wrap(a ^ s, dt),
            "o_shl": _wrap(a << s, dt), "o_shr": _wrap(a >> s, dt)}


def ew_scalar(c: Call) -> dict:
    dt = c.dtype("x")
    if dt.kind == "i":
        x = c.ints("x")
        alpha, beta = int(c["alpha"]), int(c["beta"])
        r = alpha * x + beta if c["flag"] else x - beta
        return {"out": _wrap(r, dt)}
    x = c.f64("x")
    alpha, beta = float(c["alpha"]), float(c["beta"])
    return {"out": _as(alpha * x + beta if c["flag"] else x - beta, dt)}


# =========================================================================== math

_UNARY = {
    "exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "sqrt": np.sqrt,
    "rsqrt": lambda v: 1.0 / np.sqrt(v), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh,
}


def math_unary(c: Call) -> dict:
    dt = c.dtype("x")
    x = c.f64("x")
    out = c.out("out")
    n = x.shape[0]
    for k, op in enumerate(c.options["ops"]):
        if op in ("floor", "ceil"):
            x3 = _as(x * 3.0, dt).astype(np.float64)      # the multiply rounds first
            val = np.floor(x3) if op == "floor" else np.ceil(x3)
        else:
            val = _UNARY[op](x)
        out[k, :n] = _as(val, dt)
    return {"out": out}


def math_binary(c: Call) -> dict:
    dt = c.dtype("x")
    a, b = c.f64("x"), c.f64("y")
    q = _as(a / b, dt).astype(np.float64)
    rows = [np.power(a, b), np.mod(a, b), np.floor(q), np.fmin(a, b), np.fmax(a, b),
            np.minimum(a, b), np.maximum(a, b), b * b]
    return {"out": _as(np.stack(rows), dt)}


def math_atan2(c: Call) -> dict:
    return {"out": _as(np.arctan2(c.f64("y"), c.f64("x")), c.dtype("out"))}


def math_fpowi(c: Call) -> dict:
    x = c.f64("x")
    return {"out": _as(np.stack([x ** 3, x ** -2.0]), np.float32)}


def math_approx(c: Call) -> dict:
    x = c.f64("x")
    return {"out": _as(np.stack([np.exp(x), np.tanh(x)]), np.float32)}


def math_rounding(c: Call) -> dict:
    f32 = np.dtype(np.float32)
    a = [float(v) for v in c["x"]]
    b = [float(v) for v in c["y"]]
    fa, fb = [Fraction(v) for v in a], [Fraction(v) for v in b]
    exact = np.stack([
        _round_array([x + y for x, y in zip(fa, fb)], f32, "rz"),
        _round_array([x - y for x, y in zip(fa, fb)], f32, "rm"),
        _round_array([x * y for x, y in zip(fa, fb)], f32, "rp"),
        _round_array([x / y for x, y in zip(fa, fb)], f32, "rz"),
        _round_array([_sqrt_fraction(x) for x in a], f32, "rp"),
        _round_array([x - y for x, y in zip(fa, fb)], f32, "rp"),
        _round_array([x + y for x, y in zip(fa, fb)], f32, "rn"),
        _round_array([x * y for x, y in zip(fa, fb)], f32, "rn"),
        np.maximum(c["x"], c["y"]), np.minimum(c["x"], c["y"]),
    ])
    x, y = c.f64("x"), c.f64("y")
    approx = _as(np.stack([x / y, x / y, np.sqrt(x), np.exp2(x), 1 / np.sqrt(x), np.sqrt(x)]),
                 f32)
    return {"exact": exact, "approx": approx}


# =========================================================================== compare

def cmp_float(c: Call) -> dict:
    a, b = c["x"], c["y"]
    flags = np.stack([a < b, a <= b, a > b, a >= b, a == b, a != b, np.isnan(a),
                      (a < b) | np.isnan(b)]).astype(np.int8)
    sel = np.stack([np.where(a > b, a, b), np.where(np.isnan(a), 0, a)]).astype(c.dtype("sel"))
    return {"flags": flags, "sel": sel}


def cmp_int(c: Call) -> dict:
    dt = c.dtype("x")
    a, b = c.ints("x"), c.ints("y")
    flags = np.stack([a < b, a <= b, a > b, a >= b, a == b, a != b]).astype(np.int8)
    sel = np.stack([_wrap(np.where(a < b, b - a, a - b), dt), _wrap(np.where(a == b, a, 0), dt)])
    return {"flags": flags, "sel": sel}


# =========================================================================== casts

def cast_int_float(c: Call) -> dict:
    x = c["x"].astype(np.float64)
    xi = c.ints("xi")
    x1000 = (c["x"] * np.float32(1000.0)).astype(np.float64)      # f32 multiply
    return {
        "o_f2i": np.trunc(x).astype(np.int32),
        "o_f2u": np.trunc(np.abs(x)).astype(np.uint8),
        "o_f2l": np.trunc(x1000).astype(np.int64),
        "o_i2f": c["xi"].astype(np.float32),
        "o_u2f": c["xu"].astype(np.float32),
        "o_i2h": np.array([float(v // 65536) for v in xi]).astype(np.float16),
        "o_l2d": c["xi"].astype(np.int64).astype(np.float64),
    }


def cast_int_width(c: Call) -> dict:
    return {
        "o_b2i": c["b"].astype(np.int32),
        "o_ub2i": c["ub"].astype(np.uint32),
        "o_b2l": c["b"].astype(np.int64),
        "o_l2s": c["l"].astype(np.int16),
        "o_l2b": c["l"].astype(np.int8),
        "o_ui2ul": c["ub"].astype(np.uint64),
    }


def cast_float_width(c: Call) -> dict:
    bf16 = numpy_dtype("bfloat16")
    return {
        "o_f2h": c["x"].astype(np.float16),
        "o_f2bf": c["x"].astype(bf16),
        "o_h2f": c["h"].astype(np.float32),
        "o_bf2f": c["bh"].astype(np.float32),
        "o_d2f": c["d"].astype(np.float32),
        "o_f2d": c["x"].astype(np.float64),
        "o_bf2h": c["bh"].astype(np.float32).astype(np.float16),
    }


def cast_rounding(c: Call) -> dict:
    f16, f32 = np.dtype(np.float16), np.dtype(np.float32)
    x = [float(v) for v in c["x"]]
    d = [float(v) for v in c["d"]]
    return {
        "o_f2h": np.stack([_round_array(x, f16, "rn"), _round_array(x, f16, "rz")]),
        "o_d2f": _round_array(d, f32, "rz"),
        "o_f2tf": np.stack([_tf32(c["x"], "rz"), _tf32(c["x"], "ra")]),
    }


def cast_f8(c: Call) -> dict:
    e4, e5 = numpy_dtype("float8_e4m3fn"), numpy_dtype("float8_e5m2")
    x = c["x"]
    return {
        "o_rt4": x.astype(e4).astype(np.float32),
        "o_rt5": x.astype(e5).astype(np.float32),
        "o_q4": x.astype(e4),
        "o_q5": x.astype(np.float16).astype(e5),
        "o_from4": c["q4"].astype(np.float32),
        "o_from5": c["q5"].astype(np.float16),
    }


def cast_e8m0(c: Call) -> dict:
    return {"o_from": c["s"].astype(np.float32), "o_copy": c.out("s")}


def cast_e8m0_round(c: Call) -> dict:
    e = np.log2(c.f64("x"))
    return {"o_rz": np.exp2(np.floor(e)).astype(np.float32),
            "o_rp": np.exp2(np.ceil(e)).astype(np.float32)}


def cast_f4(c: Call) -> dict:
    f4 = numpy_dtype("float4_e2m1fn")
    return {"o_rt": c["x"].astype(f4).astype(np.float32)}


def cast_e5m3(c: Call) -> dict:
    return {"o_rt": _minifloat(c.f64("x"), 3, -14).astype(np.float32)}


def cast_tf32(c: Call) -> dict:
    return {"o_rt": _tf32(c["x"], "rn")}


def bitcast(c: Call) -> dict:
    x = c["x"]
    bits = x.view(np.int32)
    return {
        "o_f2i": bits.copy(),
        "o_i2f": (bits ^ np.int32(-2147483648)).view(np.float32),
        "o_h2s": c["h"].view(np.int16).copy(),
        "o_d2l": c["d"].view(np.int64).copy(),
        "o_u2f": (x.view(np.uint32) & np.uint32(0x7FFFFFFF)).view(np.float32),
    }


def pack_bytes(c: Call) -> dict:
    x = np.ascontiguousarray(c["x"]).astype("<f4")
    return {"o_bytes": x.view(np.uint8).copy(), "o_back": x.view("<i4").astype(np.int32)}


# =========================================================================== shape

def shape_const(c: Call) -> dict:
    blocks = c.grid[0]
    k = np.arange(64 * blocks)
    dense = np.array([[1.5, -2.0, 3.25, 0.0], [4.0, -0.5, 6.0, 7.75]], dtype=np.float32)
    return {
        "o_iota": k.astype(np.int32),
        "o_step": np.tile(100 - 3 * np.arange(64), blocks).astype(np.int64),
        "o_full": np.full(64 * blocks, 2.5, np.float32),
        "o_ones": np.ones(64 * blocks, np.float16),
        "o_dense": np.concatenate([dense] * blocks),
        "o_bool": np.tile(np.arange(64) % 3 == 0, blocks).astype(np.int8),
    }


def shape_reshape(c: Call) -> dict:
    x = c["x"]
    o_t, o_perm, o_bcast = c.out("o_t"), c.out("o_perm"), c.out("o_bcast")
    o_flat, o_expand = c.out("o_flat"), c.out("o_expand")
    for i in range(c.grid[0]):
        t = x[16 * i:16 * i + 16]
        o_t[:, 16 * i:16 * i + 16] = t.T
        o_perm[16 * i:16 * i + 16] = t.reshape(4, 4, 16).transpose(2, 0, 1).reshape(16, 16)
        o_bcast[16 * i:16 * i + 16] = x[i:i + 1] * t  # a (1, 16) tile at tile index i is row i
        o_flat[256 * i:256 * i + 256] = t.ravel()
        o_expand[16 * i:16 * i + 16] = t.sum(axis=1, dtype=np.float32)[:, None] + t
    return {"o_t": o_t, "o_perm": o_perm, "o_bcast": o_bcast, "o_flat": o_flat,
            "o_expand": o_expand}


def shape_extract_cat(c: Call) -> dict:
    x = c["x"]
    o0, o1, oe = c.out("o_cat0"), c.out("o_cat1"), c.out("o_ext")
    for i in range(c.grid[0]):
        t = x[16 * i:16 * i + 16]
        left, right = t[:, :16], t[:, 16:]
        o0[32 * i:32 * i + 32] = np.concatenate([right, left], axis=0)
        o1[16 * i:16 * i + 16] = np.concatenate([right, left], axis=1)
        oe[8 * i:8 * i + 8] = t[8:16]
    return {"o_cat0": o0, "o_cat1": o1, "o_ext": oe}


def shape_insert(c: Call) -> dict:
    x = c["x"]
    out = c.out("out")
    for i in range(c.grid[0]):
        z = np.full(64, -1.0, np.float32)
        z[16:32] = x[16 * i:16 * i + 16]
        out[64 * i:64 * i + 64] = z
    return {"out": out}


def transpose(c: Call) -> dict:
    return {"y": np.ascontiguousarray(c["x"].T)}


# =========================================================================== reduce

def reduce_axes(c: Call) -> dict:
    dt = c.dtype("x")
    x = c.f64("x")
    outs = {n: c.out(n) for n in ("o_sum0", "o_sum1", "o_max0", "o_min1", "o_prod0", "o_all")}
    for i in range(c.grid[0]):
        t = x[16 * i:16 * i + 16]
        outs["o_sum0"][i] = t.sum(axis=0)
        outs["o_sum1"][16 * i:16 * i + 16] = t.sum(axis=1)
        outs["o_max0"][i] = t.max(axis=0)
        outs["o_min1"][16 * i:16 * i + 16] = t.min(axis=1)
        outs["o_prod0"][i] = t.prod(axis=0)
        outs["o_all"][i] = t.sum()
    return {k: _as(v, dt) for k, v in outs.items()}


def reduce_int(c: Call) -> dict:
    dt = c.dtype("x")
    x = c.ints("x")
    res = {n: c.out(n) for n in ("o_sum", "o_max", "o_min", "o_custom")}
    for i in range(c.grid[0]):
        t = x[8 * i:8 * i + 8]
        res["o_sum"][8 * i:8 * i + 8] = _wrap(t.sum(axis=1), dt)
        res["o_max"][8 * i:8 * i + 8] = _wrap(t.max(axis=1), dt)
        res["o_min"][8 * i:8 * i + 8] = _wrap(t.min(axis=1), dt)
        xor = np.zeros(8, dtype=object)
        for col in range(t.shape[1]):
            xor = xor ^ t[:, col]
        res["o_custom"][8 * i:8 * i + 8] = _wrap(xor, dt)
    return res


def reduce_custom(c: Call) -> dict:
    x, w = c["x"].astype(np.float64), c["y"].astype(np.float64)
    sumsq, pair = c.out("o_sumsq"), c.out("o_pair")
    for i in range(c.grid[0]):
        t, u = x[16 * i:16 * i + 16], w[16 * i:16 * i + 16]
        sumsq[16 * i:16 * i + 16] = (t.astype(np.float32) ** 2).astype(np.float64).sum(axis=1)
        best = t.argmax(axis=1)
        rows = np.arange(16)
        pair[16 * i:16 * i + 16] = t[rows, best] * u[rows, best]
    return {"o_sumsq": sumsq.astype(np.float32), "o_pair": pair.astype(np.float32)}


def argmax_argmin(c: Call) -> dict:
    x = c["x"]
    amax0, amin1, aall = c.out("o_argmax0"), c.out("o_argmin1"), c.out("o_argmax_all")
    for i in range(c.grid[0]):
        t = x[16 * i:16 * i + 16]
        amax0[i] = t.argmax(axis=0)
        amin1[16 * i:16 * i + 16] = t.argmin(axis=1)
        aall[i] = t.argmax()
    return {"o_argmax0": amax0, "o_argmin1": amin1, "o_argmax_all": aall}


def scan(c: Call) -> dict:
    x = c.f64("x")
    outs = {n: c.out(n) for n in ("o_cumsum1", "o_cumprod0", "o_rev", "o_max")}
    for i in range(c.grid[0]):
        t = x[8 * i:8 * i + 8]
        sl = slice(8 * i, 8 * i + 8)
        outs["o_cumsum1"][sl] = np.cumsum(t, axis=1)
        outs["o_cumprod0"][sl] = np.cumprod(t, axis=0)
        outs["o_rev"][sl] = np.flip(np.cumsum(np.flip(t, axis=1), axis=1), axis=1)
        outs["o_max"][sl] = np.maximum.accumulate(t, axis=1)
    return {k: v.astype(np.float32) for k, v in outs.items()}


def scan_int(c: Call) -> dict:
    dt = c.dtype("x")
    x = c["x"]
    cs, cp = c.out("o_cumsum"), c.out("o_cumprod")
    for i in range(c.grid[0]):
        t = x[128 * i:128 * i + 128]
        cs[128 * i:128 * i + 128] = np.cumsum(t, dtype=dt)
        cp[128 * i:128 * i + 128] = np.cumprod(t, dtype=dt)
    return {"o_cumsum": cs, "o_cumprod": cp}


def softmax(c: Call) -> dict:
    x = c.f64("x")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"y": _as(e / e.sum(axis=1, keepdims=True), c.dtype("y"))}


def layernorm(c: Call) -> dict:
    x = c.f64("x")
    eps = float(c["eps"])
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps) * c.f64("w") + c.f64("b")
    out = c.out("y")
    rows = min(x.shape[0], 16 * c.grid[0])
    out[:rows] = _as(y[:rows], c.dtype("y"))
    return {"y": out}


# =========================================================================== matmul

def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return a.astype(np.int64) @ b.astype(np.int64)
    return a.astype(np.float64) @ b.astype(np.float64)


def matmul(c: Call) -> dict:
    return {"c": _as(_mm(c["a"], c["b"]), c.dtype("c"))}


def matmul_tf32(c: Call) -> dict:
    a, b = _tf32(c["a"]), _tf32(c["b"])
    return {"c": _as(_mm(a, b), np.float32)}


def matmul_operator(c: Call) -> dict:
    dt = c.dtype("c")
    out = c.out("c")
    a, b = c["a"], c["b"]
    for i in range(c.grid[0]):
        r = _mm(a[16 * i:16 * i + 16], b[:32])
        out[16 * i:16 * i + 16] = _wrap(r, dt) if dt.kind in "iu" else _as(r, dt)
    return {"c": out}


def bmm(c: Call) -> dict:
    a, b = c.f64("a"), c.f64("b")
    return {"c": _as(np.matmul(a, b), np.float32)}


def attention(c: Call) -> dict:
    q, k, v = c.f64("q"), c.f64("k"), c.f64("v")
    s = np.matmul(q, np.swapaxes(k, 1, 2)) * float(c["scale"])
    p = np.exp(s - s.max(axis=2, keepdims=True))
    p = p / p.sum(axis=2, keepdims=True)
    return {"o": _as(np.matmul(p, v), c.dtype("o"))}


def mma_scaled(c: Call) -> dict:
    a, b = c.f64("a"), c.f64("b")
    sa, sb = c.f64("sa"), c.f64("sb")
    a = a * np.repeat(sa, 32, axis=1)
    b = b * np.repeat(sb, 32, axis=0)
    return {"c": _as(a @ b, np.float32)}


# =========================================================================== memory

def gather_scatter(c: Call) -> dict:
    x, idx = c["x"], c["idx"]
    n = x.shape[0]
    inb = (idx >= 0) & (idx < n)
    g = np.where(inb & (idx % 5 != 0), x[np.clip(idx, 0, n - 1)], np.float32(-7.0))
    g = g.astype(np.float32)
    sc = c.out("o_scatter")
    for k in range(idx.shape[0]):
        if idx[k] >= 3 and idx[k] < sc.shape[0]:
            sc[idx[k]] = g[k] * np.float32(2.0)
    return {"o_gather": g, "o_scatter": sc}


def gather_2d(c: Call) -> dict:
    x, rows, cols = c["x"], c["rows"], c["cols"]
    out = c.out("out")
    for i in range(c.grid[0]):
        r = rows[16 * i:16 * i + 16]
        out[16 * i:16 * i + 16] = x[r[:, None], cols[None, :32]]
    return {"out": out}


def raw_offsets(c: Call) -> dict:
    x = c["x"]
    return {"out": (x[::-1] + np.float32(1.0)).astype(np.float32)}


def gather_view(c: Call) -> dict:
    x, rows = c["x"], c["rows"]
    start = int(c["col_start"])
    out = c.out("out")
    for i in range(c.grid[0]):
        r = rows[8 * i:8 * i + 8]
        cols = np.arange(start, start + 16)
        ok = cols < x.shape[1]
        for rr in r:
            out[rr, cols[ok]] = x[rr, cols[ok]] * np.float32(3.0)
    return {"out": out}


def tiled_view(c: Call) -> dict:
    x = c["x"]
    n = x.shape[0]
    counts = c.out("counts")
    for i in range(c.grid[0]):
        counts[2 * i:2 * i + 2] = [-(-n // 16), -(-n // 32)]
    return {"out": np.minimum(x, np.float32(100.0)), "counts": counts}


def strided_view(c: Call) -> dict:
    x = c["x"]
    out = c.out("out")
    padded = np.concatenate([x, np.zeros(8 * c.grid[0] + 16, np.float32)])
    for i in range(c.grid[0]):
        out[16 * i:16 * i + 16] = padded[8 * i:8 * i + 16]
    return {"out": out}


def padding(c: Call) -> dict:
    x = c["x"]
    out = c.out("out")
    rows, cols = 16 * c.grid[0], 16 * c.grid[1]
    for k, pad in enumerate((0.0, -0.0, np.nan, np.inf, -np.inf)):
        out[k, :rows, :cols] = pad
        out[k, :x.shape[0], :x.shape[1]] = x
    return {"out": out}


def memory_order(c: Call) -> dict:
    x = c["x"]
    return {"out": np.stack([x + x, x])}


def unchecked(c: Call) -> dict:
    return {"out": c["x"] * c["x"]}


# =========================================================================== atomics

def histogram(c: Call) -> dict:
    nb = c.const("NB")
    return {"bins": c.out("bins") + np.bincount(c["data"] % nb, minlength=nb).astype(np.int32)}


def atomics_int(c: Call) -> dict:
    dt = c.dtype("acc")
    acc = c.ints("acc")
    x = c.ints("x")
    folded = [acc[0] + x.sum(), max(acc[1], x.max()), min(acc[2], x.min()), acc[3], acc[4],
              acc[5]]
    for v in x:
        folded[3] &= v
        folded[4] |= v
        folded[5] ^= v
    slots = c.ints("slots")
    old_cas = slots[:128].copy()
    old_xchg = slots[128:256].copy()
    new = slots.copy()
    for k, v in enumerate(x):
        if new[k] == v % 2:
            new[k] = v
        new[128 + k] = v
    return {"acc": _wrap(np.array(folded, dtype=object), dt), "slots": _wrap(new, dt),
            "old_cas": _wrap(old_cas, dt), "old_xchg": _wrap(old_xchg, dt)}


def atomics_float(c: Call) -> dict:
    x = c["x"].astype(np.float64)
    acc = c.out("acc").astype(np.float64)
    for k, v in enumerate(x):
        acc[(k % 64) % 4] += v
    old = acc[4:4 + x.shape[0]].copy()
    acc[4:4 + x.shape[0]] = x
    return {"acc": acc.astype(np.float32), "old": old.astype(np.float32)}


def atomic_views(c: Call) -> dict:
    x = c["x"].astype(np.float64).reshape(-1, 32)
    y = c.ints("y").reshape(-1, 32)
    acc_f = c.out("acc_f").astype(np.float64) + x.sum(axis=0)
    acc = c.ints("acc_i").reshape(-1, 32)
    acc[0] = np.maximum(acc[0], y.max(axis=0))
    acc[1] = np.minimum(acc[1], y.min(axis=0))
    for row in y:
        acc[2] = acc[2] & row
        acc[3] = acc[3] | row
        acc[4] = acc[4] ^ row
    acc[5] = acc[5] + y.sum(axis=0)
    return {"acc_f": acc_f.astype(np.float32), "acc_i": _wrap(acc.ravel(), np.dtype(np.int32))}


# =========================================================================== control

def loop_carried(c: Call) -> dict:
    x = c["x"]
    tiles = c.const("TILES")
    o_sum, o_max, o_count = c.out("o_sum"), c.out("o_max"), c.out("o_count")
    count = sum(r + 1 for j in range(tiles) for r in range(0, j, 2))
    for i in range(c.grid[0]):
        t = x[8 * i:8 * i + 8, :32 * tiles].reshape(8, tiles, 32)
        o_sum[8 * i:8 * i + 8] = t.astype(np.float64).sum(axis=1)
        o_max[8 * i:8 * i + 8] = t.max(axis=1)
        o_count[i] = count
    return {"o_sum": o_sum, "o_max": o_max, "o_count": o_count}


def while_break(c: Call) -> dict:
    x = c["x"].astype(np.float64)
    limit = float(c["limit"])
    blocks = c.grid[0]
    ntiles = -(-x.shape[0] // 16)
    out = c.out("out")
    for i in range(blocks):
        k, total, used = i, 0.0, 0
        while k < ntiles:
            t = x[16 * k:16 * k + 16]
            k += blocks
            if np.abs(t).min() == 0.0:
                break
            if t[0] < 0.0:
                continue
            total += t.sum()
            used += 1
            if total >= limit:
                break
        out[i] = [used, total]
    return {"out": out}


def if_else(c: Call) -> dict:
    x = c["x"]
    mode = int(c["mode"])
    out = c.out("out")
    for i in range(c.grid[0]):
        t = x[64 * i:64 * i + 64].astype(np.float64)
        s = t.sum()
        if s > 0.0:
            r = t * 2.0 if mode == 1 else t + 1.0
        elif s < -10.0:
            r = -t
        else:
            r = np.zeros_like(t)
        if i % 2 == 1:
            r = r + 100.0
        out[64 * i:64 * i + 64] = r
    return {"out": out.astype(np.float32)}


def print_assert(c: Call) -> dict:
    x = c["x"]
    lines = []
    for i in range(c.grid[0]):
        t = x[8 * i:8 * i + 8].astype(np.int64)
        lines.append(f"block {i} sum {int(t.sum())}")
        lines.append(f"block {i} first {int(t[0])}")
    return {"out": (x + 1).astype(np.int32), STDOUT: lines}


def grid3d(c: Call) -> dict:
    nx, ny, nz = c.grid
    out = c.out("out")
    for z in range(nz):
        for y in range(ny):
            for x in range(nx):
                out[z, y, x] = [x, y, z, nx, ny, nz, (z * ny + y) * nx + x, 0]
    return {"out": out}


def hints(c: Call) -> dict:
    scale = np.float32(int(c["n"]) // 64)
    return {"out": (c["x"] * scale + c["y"]).astype(np.float32)}


def gdc(c: Call) -> dict:
    return {"out": (c["x"] * np.float32(3.0)).astype(np.float32)}


def list_sum(c: Call) -> dict:
    out = c.out("out")
    n = min(out.shape[0], 32 * c.grid[0])
    total = np.zeros(n, np.float64)
    for arr in c["arrs"]:
        total += arr[:n]
    out[:n] = total
    return {"out": out}


# =========================================================================== text kernels

def mulhi_divi(c: Call) -> dict:
    a, b = c.ints("a"), c.ints("b")
    ua, ub = a % (1 << 32), b % (1 << 32)
    i32 = np.dtype(np.int32)
    return {"hi": _wrap((ua * ub) >> 32, i32),
            "q": _wrap(np.array([_trunc_div(int(p), int(q)) for p, q in zip(a, b)],
                                dtype=object), i32),
            "qu": _wrap(ua // ub, i32)}


def ptr_casts(c: Call) -> dict:
    n = c.out("n")
    n[:c.grid[0]] = c["x"].shape[0]
    return {"o": c["x"].view(np.int32).copy(), "n": n}


def alloca(c: Call) -> dict:
    return {"o": (c["x"] + np.float32(1.0)).astype(np.float32)}


def memory_fence(c: Call) -> dict:
    x = c["x"]
    return {"m": x.copy(), "o": (x + x).astype(np.float32)}


def int4(c: Call) -> dict:
    low = c["x"].astype(np.int64) & 0xF
    return {"s": np.where(low >= 8, low - 16, low).astype(np.int8), "u": low.astype(np.int8)}
