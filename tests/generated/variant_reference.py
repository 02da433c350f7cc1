"""What each generated variant computes, in numpy (float64 from the inputs as stored), its random
inputs, and the comparison of a launch's arrays with the reference.

    args = inputs(v, spec)                 # one numpy array per runtime argument of launch(v)
    want = expected(v, spec, args)         # the arrays after the launch (None where unsupported)
    problems = compare(v, spec, got, want) # [] when every array matches within its tolerance

A template without a reference here (the grouped GEMM's lists of arrays) has `supported(v) == False`;
the emulator checks sample the others.
"""

from __future__ import annotations

import sys
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from grammar import Variant
from launch import SPLIT_K, Arr, ArrList, Launch, Scalar

if str(Path(__file__).resolve().parent.parent) not in sys.path:    # tests/: accumulation.py (appended: no shadowing)
    sys.path.append(str(Path(__file__).resolve().parent.parent))

LOG2E = 1.4426950408889634


def np_dtype(name: str) -> np.dtype:
    import ml_dtypes

    return np.dtype({"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
                     "int8": np.int8, "int32": np.int32, "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
                     "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "float4_e2m1fn": ml_dtypes.float4_e2m1fn}[name])


def supported(v: Variant) -> bool:
    return v.template in EXPECTED


def _array(rng: np.random.Generator, a: Arr) -> np.ndarray:
    if a.fill.startswith("ids:"):
        return rng.integers(0, int(a.fill[4:]), a.shape).astype(np.int32)
    if a.fill == "perm":
        return rng.permutation(a.shape[0]).astype(np.int32)
    if a.fill == "scale":                                 # block scales: powers of two 1/4 .. 4
        return (2.0 ** rng.integers(-2, 3, a.shape)).astype(np.float32).astype(np_dtype(a.dtype))
    if a.fill == "lse":                                   # a forward's log2-sum-exp: keeps P below 1
        return (5.0 + rng.standard_normal(a.shape)).astype(np.float32)
    if a.dtype in ("int8", "int32"):
        return rng.integers(-128, 128, a.shape).astype(np_dtype(a.dtype))
    return rng.standard_normal(a.shape).astype(np.float32).astype(np_dtype(a.dtype))


def inputs(v: Variant, spec: Launch) -> list[np.ndarray]:
    rng = np.random.default_rng(zlib.crc32(v.name.encode()))
    out = []
    for p in spec.runtime_args:
        if isinstance(p, Scalar):
            out.append(np.array(p.value, dtype=np_dtype(p.dtype)))
        elif isinstance(p, ArrList):     # passed as a list (the runtime uploads its table of pointers)
            out.append([_array(rng, a) for a in p.arrays])
        else:
            out.append(_array(rng, p))
    return out


def _f(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def _tf32(x: np.ndarray) -> np.ndarray:
    """f32 rounded to tf32 (10-bit significand, ties away from zero: cvt.rna.tf32.f32)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def _round(x: np.ndarray, dtype: str) -> np.ndarray:
    """Values rounded to `dtype` and back (an operand the kernel casts before an mma)."""
    return _f(np.asarray(x, np.float32).astype(np_dtype(dtype)))


# ------------------------------------------------------------------------------ references
# each: (variant, launch, input arrays) -> {runtime argument position: expected array}

def _gemm(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    if v["dtype"] in ("mxfp8", "nvfp4"):
        a, sa, b, sb, c0 = (_f(x) for x in args[:5])
        sbs = spec.params[9]
        acc = (a * np.repeat(sa, sbs, axis=1)) @ (b * np.repeat(sb, sbs, axis=0))
        if v["epilogue"] == "scale":
            acc = acc * _f(args[5])[:, None]
        return {4: acc}
    a, b, c0, bias, scale, res, alpha, beta = args
    if v["major"][0] == "c":
        a = a.T
    if v["major"][1] == "c":
        b = b.T
    x, y = (_tf32(a), _tf32(b)) if v["dtype"] == "tf32" else (_f(a), _f(b))
    acc = x @ y
    epi = v["epilogue"]
    if epi in ("bias", "relu", "gelu"):
        acc = acc + _f(bias)[None, :]
        acc = np.maximum(acc, 0) if epi == "relu" else _gelu(acc) if epi == "gelu" else acc
    elif epi == "scale":
        acc = acc * _f(scale)[:, None]
    elif epi == "residual":
        acc = acc + _f(res)
    elif epi == "alphabeta":
        acc = float(alpha) * acc + float(beta) * _f(c0)
    if v["schedule"] in SPLIT_K:
        acc = acc + _f(c0)
    return {2: acc}


def _bmm(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    a, b, c0, scale = args
    if v["major"][1] == "c":
        b = np.swapaxes(b, 1, 2)
    x, y = (_tf32(a), _tf32(b)) if v["dtype"] == "tf32" else (_f(a), _f(b))
    acc = x @ y
    if v["epilogue"] == "scale":
        acc = acc * _f(scale)[:, None, None]
    return {2: acc}


def _group_gemm(v: Variant, spec: Launch, args: list) -> dict[int, list[np.ndarray]]:
    """Each problem of the lists on its own: C_g = A_g B_g."""
    return {2: [x @ y for x, y in _group_operands(v, args)]}


def _group_operands(v: Variant, args: list) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(_f(a), _f(b.T if v["major"][1] == "c" else b)) for a, b in zip(args[0], args[1])]


def _softmax_pv(s: np.ndarray, vv: np.ndarray, p_dtype: str) -> np.ndarray:
    """softmax(s) @ v as flash attention computes it: exp2 of base-2 scores, P rounded to V's type."""
    m = s.max(axis=-1, keepdims=True)
    p = np.exp2(s - m)
    return (_round(p, p_dtype) @ vv) / p.sum(axis=-1, keepdims=True)


def _masked(s: np.ndarray, rows: np.ndarray, cols: np.ndarray, causal: bool, window: int) -> np.ndarray:
    keep = np.ones(s.shape[-2:], bool)
    if causal:
        keep &= rows[:, None] >= cols[None, :]
    if window:
        keep &= rows[:, None] - cols[None, :] < window
    return np.where(keep, s, -np.inf)


def _attn_fwd(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    q, k, vv, o0, scale = args
    g, window = spec.params[8], spec.params[10]
    kq, vq = np.repeat(_f(k), g, axis=0), np.repeat(_f(vv), g, axis=0)
    s = _f(q) @ np.swapaxes(kq, 1, 2) * float(scale) * LOG2E
    idx = np.arange(q.shape[1])
    s = _masked(s, idx, idx, v["mask"] != "full", window)
    return {3: _softmax_pv(s, vq, spec.params[0].dtype)}


def _attn_decode(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    q, k, vv, o0, scale = args
    window, seq = spec.params[8], k.shape[1]
    s = _f(q) @ np.swapaxes(_f(k), 1, 2) * float(scale) * LOG2E
    if window:
        s = np.where(np.arange(seq)[None, None, :] >= seq - window, s, -np.inf)
    return {3: _softmax_pv(s, _f(vv), spec.params[0].dtype)}


def _mla_decode(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    qn, qp, ckv, kpe, o0, scale = args
    s = (_f(qn) @ np.swapaxes(_f(ckv), 1, 2) + _f(qp) @ np.swapaxes(_f(kpe), 1, 2)) * float(scale) * LOG2E
    return {4: _softmax_pv(s, _f(ckv), spec.params[0].dtype)}


def _attn_bwd_dq(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    q, k, vv, do, lse, delta, dq0, scale = args
    s = _f(q) @ np.swapaxes(_f(k), 1, 2) * float(scale) * LOG2E
    idx = np.arange(q.shape[1])
    s = _masked(s, idx, idx, v["mask"] == "causal", 0)
    p = np.exp2(s - _f(lse)[:, :, None])
    ds = p * (_f(do) @ np.swapaxes(_f(vv), 1, 2) - _f(delta)[:, :, None])
    return {6: _round(ds, spec.params[0].dtype) @ _f(k) * float(scale)}


def _row(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    op = v["op"]
    x = _f(args[0])
    if op == "layernorm":
        d = x - x.mean(axis=1, keepdims=True)
        return {3: d / np.sqrt((d * d).mean(axis=1, keepdims=True) + 1e-5) * _f(args[1]) + _f(args[2])}
    if op == "rmsnorm":
        return {2: x / np.sqrt((x * x).mean(axis=1, keepdims=True) + 1e-5) * _f(args[1])}
    m = x.max(axis=1, keepdims=True)
    lse = (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True)))[:, 0]
    if op == "softmax":
        e = np.exp(x - m)
        return {1: e / e.sum(axis=1, keepdims=True)}
    if op == "logsumexp":
        return {1: lse}
    if op in ("sum", "max"):
        return {1: x.sum(axis=1) if op == "sum" else x.max(axis=1)}
    if op == "cumsum":
        return {1: np.cumsum(x, axis=1)}
    labels = args[1]
    return {2: lse - x[np.arange(x.shape[0]), labels]}


def _rope(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    x, cos, sin = (_f(a) for a in args[:3])
    half = x.shape[2] // 2
    x1, x2, c, n = x[..., :half], x[..., half:], cos[:, None, :], sin[:, None, :]
    return {3: np.concatenate([x1 * c - x2 * n, x2 * c + x1 * n], axis=2)}


def _eltwise(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    a, b = _f(args[0]), _f(args[1])
    op = v["op"]
    out = {"add": lambda: a + b, "swiglu": lambda: a / (1 + np.exp(-a)) * b,
           "gelu_bias": lambda: _gelu(a + (b[None, :] if b.ndim < a.ndim else b)),
           "scale_cast": lambda: a * float(args[3])}[op]()
    return {2: out}


def _gather(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    src, idx, out0 = args
    if v["op"] == "embedding":
        return {2: _f(src)[idx]}
    if v["op"] == "index_add":
        out = _f(out0).copy()
        np.add.at(out, idx, _f(src))
        return {2: out}
    out = _f(out0).copy()
    out[idx] = _f(src)
    return {2: out}


def _moe_route(v: Variant, spec: Launch, args: list) -> dict[int, np.ndarray]:
    x = _f(args[0])
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ids = np.argsort(-p, axis=1, kind="stable")[:, :v["topk"]]
    return {1: np.take_along_axis(p, ids, axis=1), 2: ids.astype(np.int32)}


# ------------------------------------------------------------------------ accumulation bounds
# For the matmuls, the comparison's tolerance comes from the length of the accumulation (tests/accumulation.py):
# each reference's terms give, per output, the magnitudes the error is proportional to (|x| @ |y|, carried
# through the epilogue's operations), the number of terms K, the operands' rounding inside the kernel, and an
# absolute allowance for approximated functions (GELU's tanh).
Terms = dict[int, tuple[np.ndarray, int, str, np.ndarray]]
GELU_SLOPE = 1.13       # max |d gelu / dx|: an error before the activation grows by at most this much
APPROX = 2.0 ** -10     # relative error allowed for tanh.approx.f32 (the GELU of the epilogue)


def _gemm_terms(v: Variant, spec: Launch, args: list) -> Terms:
    if v["dtype"] in ("mxfp8", "nvfp4"):
        a, sa, b, sb = (_f(x) for x in args[:4])
        sbs = spec.params[9]
        mag = np.abs(a * np.repeat(sa, sbs, axis=1)) @ np.abs(b * np.repeat(sb, sbs, axis=0))
        if v["epilogue"] == "scale":
            mag = mag * np.abs(_f(args[5]))[:, None]
        return {4: (mag, a.shape[1], "", np.zeros_like(mag))}
    a, b, c0, bias, scale, res, alpha, beta = args
    a, b = (a.T if v["major"][0] == "c" else a), (b.T if v["major"][1] == "c" else b)
    x, y = (_tf32(a), _tf32(b)) if v["dtype"] == "tf32" else (_f(a), _f(b))
    mag, extra = np.abs(x) @ np.abs(y), np.zeros(1)
    epi = v["epilogue"]
    if epi in ("bias", "relu", "gelu"):
        mag = mag + np.abs(_f(bias))[None, :]
        if epi == "gelu":
            extra = APPROX * np.abs(x @ y + _f(bias)[None, :])
            mag = GELU_SLOPE * mag
    elif epi == "scale":
        mag = mag * np.abs(_f(scale))[:, None]
    elif epi == "residual":
        mag = mag + np.abs(_f(res))
    elif epi == "alphabeta":
        mag = abs(float(alpha)) * mag + abs(float(beta)) * np.abs(_f(c0))
    if v["schedule"] in SPLIT_K:
        mag = mag + np.abs(_f(c0))
    return {2: (mag, x.shape[1] + 2, "tf32" if v["dtype"] == "tf32" else "", extra)}   # + the epilogue's adds


def _bmm_terms(v: Variant, spec: Launch, args: list) -> Terms:
    a, b, c0, scale = args
    b = np.swapaxes(b, 1, 2) if v["major"][1] == "c" else b
    x, y = (_tf32(a), _tf32(b)) if v["dtype"] == "tf32" else (_f(a), _f(b))
    mag = np.abs(x) @ np.abs(y)
    if v["epilogue"] == "scale":
        mag = mag * np.abs(_f(scale))[:, None, None]
    return {2: (mag, x.shape[2] + 1, "tf32" if v["dtype"] == "tf32" else "", np.zeros(1))}


def _group_gemm_terms(v: Variant, spec: Launch, args: list) -> Terms:
    """Per problem of the list (compare's `j`): its K-term sums, as a matmul's."""
    return {2: [(np.abs(x) @ np.abs(y), x.shape[1] + 1, "", np.zeros(1)) for x, y in _group_operands(v, args)]}


def _row_terms(v: Variant, spec: Launch, args: list) -> Terms:
    """A row sum or prefix sum: N f32 terms (the rows are converted to f32 first), |x| summed alike."""
    if v["op"] not in ("sum", "cumsum"):
        return {}
    x = np.abs(_f(args[0]))
    mag = x.sum(axis=1) if v["op"] == "sum" else np.cumsum(x, axis=1)
    return {1: (mag, x.shape[1], "", np.zeros(1))}


ACCUMULATED: dict[str, Callable[[Variant, Launch, list], Terms]] = {"gemm": _gemm_terms, "bmm": _bmm_terms,
                                                                  "group_gemm": _group_gemm_terms, "row": _row_terms}
# For attention and the norms, the tolerance is the first-order bound derived from the inputs (tests/derived_bounds.py:
# each score's D-term sum, the exp2 and rescalings, P rounded to V's type, the row sums, the approximate
# rsqrt/division), the same analysis the realistic kernels' comparisons use: a planted error of a part in a
# thousand (a key left out of a long row, an exp a few bits short) is reported where the fixed tolerance (a few
# units of the output type, of the largest output) lets it pass. fp8 attention keeps the fixed tolerance (its
# scores are not an f32 sum on every target).
def _attention_bound(s: np.ndarray, e_s: np.ndarray, keep: np.ndarray, vv: np.ndarray, blocks: np.ndarray,
                     v_dtype: str) -> np.ndarray:
    from derived_bounds import OUT_UNIT, attention_head

    return attention_head(s, e_s, keep, vv, blocks, OUT_UNIT[v_dtype][0])


def _scores(q: np.ndarray, k: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Base-2 scores q k^T * scale * log2(e) and their error bound (derived_bounds.scores)."""
    from derived_bounds import scores

    return scores(q, k, scale * LOG2E)


def _attn_fwd_derived(v: Variant, spec: Launch, args: list) -> dict:
    from derived_bounds import Derived

    if v["dtype"] not in ("f16", "bf16"):
        return {}
    q, k, vv = (_f(a) for a in args[:3])
    scale, bq, bk, g, window = float(args[4]), spec.params[5], spec.params[6], spec.params[8], spec.params[10]
    causal = v["mask"] != "full"
    seq = k.shape[1]
    rows, cols = np.arange(q.shape[1])[:, None], np.arange(seq)[None, :]
    keep = (rows >= cols) if causal else np.ones((rows.size, seq), bool)
    keep = keep & (rows - cols < window) if window else keep
    qb = rows // bq         # the key blocks each query's block runs over (the kernel's loop bounds)
    end = np.minimum(-(-((qb + 1) * bq) // bk), -(-seq // bk)) if causal else np.full_like(qb, -(-seq // bk))
    start = np.maximum(qb * bq - window + 1, 0) // bk if window else np.zeros_like(qb)
    out = np.zeros_like(q)
    for h in range(q.shape[0]):
        s, e_s = _scores(q[h], k[h // g], scale)
        out[h] = _attention_bound(s, e_s, keep, vv[h // g], end - start, spec.params[2].dtype)
    return {3: Derived(out, f"an attention over {seq} keys")}


def _attn_decode_derived(v: Variant, spec: Launch, args: list) -> dict:
    from derived_bounds import Derived

    q, k, vv = (_f(a) for a in args[:3])
    scale, bk, window = float(args[4]), spec.params[6], spec.params[8]
    seq = k.shape[1]
    keep = np.broadcast_to(np.arange(seq)[None, :] >= (seq - window if window else 0), (q.shape[1], seq))
    blocks = np.full((q.shape[1], 1), -(-seq // bk) - (max(seq - window, 0) // bk if window else 0))
    out = np.zeros_like(q)
    for h in range(q.shape[0]):
        s, e_s = _scores(q[h], k[h], scale)
        out[h] = _attention_bound(s, e_s, keep, vv[h], blocks, spec.params[2].dtype)
    return {3: Derived(out, f"a decode attention over {seq} keys")}


def _mla_decode_derived(v: Variant, spec: Launch, args: list) -> dict:
    from derived_bounds import Derived

    qn, qp, ckv, kpe = (_f(a) for a in args[:4])
    scale, bk = float(args[5]), spec.params[7]
    seq = ckv.shape[1]
    keep = np.ones((qn.shape[1], seq), bool)
    blocks = np.full((qn.shape[1], 1), -(-seq // bk))
    out = np.zeros_like(qn)
    for b in range(qn.shape[0]):      # the latent and rotary parts: one sum of DL + DR terms per score
        s, e_s = _scores(np.concatenate([qn[b], qp[b]], axis=1), np.concatenate([ckv[b], kpe[b]], axis=1), scale)
        out[b] = _attention_bound(s, e_s, keep, ckv[b], blocks, spec.params[2].dtype)
    return {4: Derived(out, f"an MLA decode over {seq} keys")}


def _row_derived(v: Variant, spec: Launch, args: list) -> dict:
    import derived_bounds

    op, chunk, x = v["op"], v["chunk"], args[0]
    if op == "layernorm":
        return {3: derived_bounds.layernorm(x, args[1], args[2], float(args[4]))}
    if op == "rmsnorm":
        return {2: derived_bounds.rmsnorm(x, args[1], float(args[3]))}
    if op == "softmax":
        return {1: derived_bounds.softmax(x, x.shape[1] // chunk if chunk else 1)}
    return {}


DERIVED: dict[str, Callable[[Variant, Launch, list], dict]] = {
    "attn_fwd": _attn_fwd_derived, "attn_decode": _attn_decode_derived, "mla_decode": _mla_decode_derived,
    "row": _row_derived}
# output dtype -> its name in tests/accumulation.py
UNIT_NAME = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3"}


EXPECTED: dict[str, Callable[[Variant, Launch, list], dict[int, np.ndarray]]] = {
    "gemm": _gemm, "bmm": _bmm, "group_gemm": _group_gemm, "attn_fwd": _attn_fwd, "attn_decode": _attn_decode, "mla_decode": _mla_decode,
    "attn_bwd_dq": _attn_bwd_dq, "row": _row, "rope": _rope, "eltwise": _eltwise, "gather": _gather,
    "moe_route": _moe_route,
}


def expected(v: Variant, spec: Launch, args: list) -> list[np.ndarray]:
    """Every runtime argument after the launch: the outputs from the reference, cast to their
    dtype; inputs (and scalars) unchanged."""
    outs = EXPECTED[v.template](v, spec, args)
    result = []
    def cast(out: np.ndarray, a: np.ndarray) -> np.ndarray:
        return out.astype(a.dtype) if a.dtype.kind in "iu" else out.astype(np.float32).astype(a.dtype)

    for i, (p, a) in enumerate(zip(spec.runtime_args, args)):
        if i in outs:
            result.append([cast(o, x) for o, x in zip(outs[i], a)] if isinstance(a, list) else cast(outs[i], a))
        else:
            result.append(a)
    return result


# ------------------------------------------------------------------------------- comparison
# |got - want| <= rtol * |want| + atol_of_max * max|want| per output dtype: one unit in the last
# place of the output type for the rounding of an f32 result computed in another order, more where
# operands are rounded inside the kernel (tf32, P in fp8/bf16) or the hardware's ex2/rcp differ.
TOLERANCE: dict[str, tuple[float, float]] = {
    "int32": (0.0, 0.0), "int8": (0.0, 0.0),
    "float32": (2.0 ** -14, 2.0 ** -14), "float16": (2.0 ** -10, 2.0 ** -9),
    "bfloat16": (2.0 ** -7, 2.0 ** -6), "float8_e4m3fn": (2.0 ** -3, 2.0 ** -3),
}
SLACK: dict[str, float] = {"tf32": 2.0 ** 6, "e4m3": 2.0 ** 5, "attention": 4.0}


def _slack(v: Variant) -> float:
    s = SLACK.get(v.c.get("dtype", ""), 1.0)
    return s * (SLACK["attention"] if v.family == "attention" else 1.0)


def compare(v: Variant, spec: Launch, got: list, want: list, args: list | None = None, gpu: str = "") -> list[str]:
    """The arrays that differ from the reference beyond their tolerance: given the inputs `args`, a matmul's the
    bound of its K-term accumulation, an attention's or a norm's the bound derived from its inputs (DERIVED); other
    outputs (or without `args`) a few units in the last place of their type."""
    terms = ACCUMULATED[v.template](v, spec, args) if args is not None and v.template in ACCUMULATED else {}
    derived = DERIVED[v.template](v, spec, args) if args is not None and v.template in DERIVED else {}
    problems = []
    for i, (p, g, w) in enumerate(zip(spec.runtime_args, got, want)):
        if isinstance(p, ArrList):   # a list of arrays: each compared as an argument of its own
            parts = terms.get(i, [None] * len(p.arrays))
            for j, (pj, gj, wj, tj) in enumerate(zip(p.arrays, g, w, parts)):
                problems += [f"list {i}, {x}" for x in compare_one(v, pj, gj, wj, tj, None, gpu)]
            continue
        if not isinstance(p, Arr):
            continue
        problems += [f"argument {i} {x}" for x in compare_one(v, p, g, w, terms.get(i), derived.get(i), gpu)]
    return problems


def compare_one(v: Variant, p: Arr, g: Any, w: Any, term: Any, derived: Any, gpu: str) -> list[str]:
    """compare's check of one array `p`: got `g`, reference `w`, its accumulation terms or derived bound."""
    from accumulation import accumulator, limit

    from derived_bounds import OUT_UNIT

    problems = []
    g = np.asarray(g)
    if not p.output:
        if g.tobytes() != np.asarray(w).tobytes():
            problems.append("(input) was written")
        return problems
    gf, wf = g.astype(np.float64), np.asarray(w).astype(np.float64)
    finite = np.where(np.isfinite(wf), np.abs(wf), 0.0)
    if derived is not None and p.dtype in OUT_UNIT:
        bound = derived.apart(finite, p.dtype)
    elif term is not None and p.dtype in UNIT_NAME:
        mag, k, aty, extra = term
        # got and the reference are each rounded to the output type once: two roundings apart
        acc = accumulator("f32", v.c.get("dtype", ""), gpu)     # fp8 on sm_90: narrower than f32
        bound = limit(finite, mag, k, acc, aty, UNIT_NAME[p.dtype], roundings=2) + extra
    else:
        rtol, atol = (t * _slack(v) for t in TOLERANCE[p.dtype])
        bound = rtol * finite + atol * (finite.max() if finite.size else 0.0)
    with np.errstate(invalid="ignore"):
        bad = ~((np.abs(gf - wf) <= bound) | (gf == wf))
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        problems.append(f"({p.dtype}): {int(bad.sum())} of {bad.size} differ, first at {first}: "
                        f"got {gf[first]!r}, numpy {wf[first]!r}")
    return problems


def copies(args: list) -> list:
    """Fresh copies of a launch's arguments (a list of arrays, a grouped GEMM's, copied array by array)."""
    return [[np.copy(x) for x in a] if isinstance(a, list) else np.copy(a) for a in args]


def emulate(v: Variant, spec: Launch, bytecode: bytes, gpu: str) -> list[str]:
    """Launch `v` on the PTX emulator (race checker on) and compare with numpy: the problems found."""
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    args = inputs(v, spec)
    want = expected(v, spec, args)
    module = load_module(bytecode, f"{v.name}.tileirbc")
    got = run_arrays(module, v.name, spec.grid, copies(args), backend="emulator", gpu_name=gpu,
                     source=bytecode, filename=f"{v.name}.tileirbc", check_races=True)
    return compare(v, spec, got, want, args, gpu)


def cost(spec: Launch) -> int:
    """A rough emulator cost: the elements every CTA touches (to pick cheap variants to emulate)."""
    arrays = [a for p in spec.params for a in (p.arrays if isinstance(p, ArrList) else (p,)) if isinstance(a, Arr)]
    return sum(int(np.prod(a.shape)) for a in arrays)

