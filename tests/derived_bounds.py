"""Error bounds of the realistic kernels that are not one K-term sum: norms, softmax, flash attention.

Each backend (the emulator running our PTX, the interpreter) computes the kernel's f32 arithmetic in its own
order; each result lies within a first-order rounding-error bound of the exact value, derived here from the
inputs by the standard analysis: an n-term sum in any order within gamma(n) = n u / (1 - n u) of the sum of
its terms' magnitudes, one rounding u = 2^-24 per f32 operation, and the hardware's approximate ex2, rsqrt and
rcp/div within 2 ulp (4 u relative). Two backends differ by at most the sum of their bounds, and each rounds
to the output type once (`apart`). Second-order terms (products of two of these relative errors, below 2^-20
of the first-order ones at the launches' sizes) are covered by SLACK.

Flash attention (`attention`) is bounded against the exact softmax(q k^T scale) v the same way; its P is
rounded to the type of v before P@V, one rounding of that type per weight in each backend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U = 2.0 ** -24          # f32 unit roundoff
APPROX = 4 * U          # ex2.approx, rsqrt.approx, rcp/div.approx: 2 ulp of f32
SLACK = 1.0 + 2.0 ** -10
# unit roundoff and smallest subnormal spacing of the output types
OUT_UNIT = {"float32": (U, 2.0 ** -149), "float16": (2.0 ** -11, 2.0 ** -24), "bfloat16": (2.0 ** -8, 2.0 ** -133)}


def gamma(n: int) -> float:
    return n * U / (1 - n * U)


@dataclass(frozen=True)
class Derived:
    """One backend's bound on |its f32 result - the exact one| per output element, and what it was derived for."""

    error: np.ndarray
    what: str

    def apart(self, want: np.ndarray, dtype: str) -> np.ndarray:
        """How far two backends' outputs of type `dtype` may be apart: both f32 results within `error` of the
        exact one, each rounded once to `dtype` (at most half a spacing of the values near `want`, |want| being
        the reference's magnitude)."""
        unit, tiny = OUT_UNIT[dtype]
        spread = 2 * SLACK * self.error
        return spread + 2 * unit * (np.abs(want) * (1 + 2 * unit) + spread) + tiny


def _rows(x: np.ndarray) -> np.ndarray:
    return np.abs(x).astype(np.float64)


def layernorm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> Derived:
    """y = (x - mean) * rsqrt(var + eps) * w + b per row, mean and (two-pass) variance summed in f32."""
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    n = x64.shape[1]
    mean = x64.mean(axis=1, keepdims=True)
    d = x64 - mean
    var = (d * d).mean(axis=1, keepdims=True)
    e_mean = gamma(n) * _rows(x64).mean(axis=1, keepdims=True) + 2 * U * np.abs(mean)     # sum, then / N
    e_d = e_mean + U * np.abs(d)
    # the squares' sum in any order, the square and / N roundings, the deviations' errors squared in
    e_var = (gamma(n) + 6 * U) * var + 2 * np.abs(d).mean(axis=1, keepdims=True) * e_mean
    s = var + eps
    r = 1 / np.sqrt(s)
    rel_r = 0.5 * (e_var + U * s) / s + APPROX
    e_y = np.abs(w64) * r * (e_d + np.abs(d) * rel_r) + 3 * U * (np.abs(d * r * w64) + np.abs(b64))
    return Derived(e_y, f"a layer norm of {n}-term rows")


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> Derived:
    """y = x * rsqrt(mean(x^2) + eps) * w per row."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    n = x64.shape[1]
    ms = (x64 * x64).mean(axis=1, keepdims=True)
    s = ms + eps
    rel_r = 0.5 * ((gamma(n) + 2 * U) * ms + U * s) / s + APPROX
    return Derived(np.abs(x64 * w64) / np.sqrt(s) * (rel_r + 2 * U), f"an RMS norm of {n}-term rows")


def softmax(x: np.ndarray, chunks: int = 1) -> Derived:
    """y = exp(x - max) / sum(exp(x - max)) per row, exp through ex2 of (x - max) * log2(e). With `chunks` > 1 the
    sum is an online one over that many column chunks: each term taken against the running maximum of its chunk
    (an exp argument within the row's range) and the partial sum rescaled by exp(m_old - m_new) once a chunk,
    2 ulp and a product's rounding each, on top of the single pass's errors."""
    x64 = x.astype(np.float64)
    n = x64.shape[1]
    z = x64 - x64.max(axis=1, keepdims=True)
    e = np.exp(z)
    l = e.sum(axis=1, keepdims=True)
    rel_e = 3 * U * np.abs(z) + APPROX          # the subtraction, the log2(e) product and its constant, ex2
    rel_l = ((e * rel_e).sum(axis=1, keepdims=True) + gamma(n) * l) / l
    if chunks > 1:
        span = x64.max(axis=1, keepdims=True) - x64.min(axis=1, keepdims=True)
        rel_l = rel_l + chunks * (APPROX + U) + 6 * U * span
    y = e / l
    return Derived(y * (rel_e + rel_l + APPROX), f"a softmax of {n}-term rows" + (f" in {chunks} chunks"
                                                                                  if chunks > 1 else ""))


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, qk_scale: float, bq: int, bk: int, causal: bool,
              v_unit: float) -> Derived:
    """o = softmax(q k^T * scale) v per (head, query) row, as the flash-attention kernel computes it: scores from
    D f16 products summed in f32, times scale = qk_scale * log2(e), weights p = ex2(s - m) against a running
    maximum m, rescaled by ex2(m_old - m_new) at each key block, rounded to v's type (unit roundoff `v_unit`)
    before P@V, sums l of p and acc of P@V over the row's keys, out = acc / l.

    A weight's relative error rho (against the exact 2^(s - max), the running maxima cancelling between acc and
    l) is ln2 times its score's error plus the exp2 arguments' roundings (each within the row's score range R),
    and per exp2 and rescaling 2 ulp and a product's rounding; then |o - exact| <= sum_j p_j rho_j (|v_j| + |o|)
    / L + v_unit sum_j p_j |v_j| / L (+ its subnormal floor) + gamma(n) (sum_j p_j |v_j| / L + |o|) + 2 ulp of the
    division."""
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    heads, seq, d = q64.shape
    keys = k64.shape[1]
    if keys == 0:       # no key block runs: o is acc / l of their initial values, exactly
        return Derived(np.zeros_like(q64), "an attention over no keys")
    scale = qk_scale * np.log2(np.e)
    rows = np.arange(seq)[:, None]
    cols = np.arange(keys)[None, :]
    # the keys a query block runs over: its causal blocks up to the diagonal's (masked past it), else all
    blocks = (-(-((rows // bq + 1) * bq) // bk) if causal else np.full_like(rows, -(-keys // bk)))
    keep = (cols < blocks * bk) & ((rows >= cols) if causal else True)
    out = np.zeros_like(q64)
    for h in range(heads):
        s, e_s = scores(q64[h], k64[h], scale)
        out[h] = attention_head(s, e_s, keep, v64[h], blocks, v_unit)
    return Derived(out, f"an attention over {keys} keys")


def scores(q: np.ndarray, k: np.ndarray, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Base-2 scores q k^T * `scale` (queries x keys; `scale` includes log2(e)) and their error bound: a D-term f32
    sum in any order, then the scale's product."""
    s = q @ k.T * scale
    return s, abs(scale) * gamma(q.shape[1]) * (np.abs(q) @ np.abs(k).T) + 2 * U * np.abs(s)


def attention_head(s: np.ndarray, e_s: np.ndarray, keep: np.ndarray, v: np.ndarray, blocks: np.ndarray | int,
                   v_unit: float) -> np.ndarray:
    """One head of `attention`'s bound, from its base-2 scores `s` (queries x keys, the scale applied) and their
    error bound `e_s`, the keys each query keeps (`keep`), the values `v` (keys x D), the key blocks each query
    runs over (`blocks`: its running maximum's rescalings) and v's unit roundoff."""
    s = np.where(keep, s, -np.inf)
    top = s.max(axis=1, keepdims=True)
    span = top - np.where(keep, s, np.inf).min(axis=1, keepdims=True)
    p = np.where(keep, np.exp2(s - top), 0.0)
    lsum = p.sum(axis=1, keepdims=True)
    o = p @ v / lsum
    rho = np.log(2) * (e_s + 2 * U * span) + (blocks + 1) * APPROX + 2 * blocks * U
    pv = p @ np.abs(v) / lsum
    weighted = p * np.where(keep, rho, 0.0)
    return ((weighted @ np.abs(v) + weighted.sum(axis=1, keepdims=True) * np.abs(o)) / lsum
            + v_unit * pv + 2.0 ** -25 * (keep @ np.abs(v)) / lsum
            + gamma(int(keep.sum(axis=1).max())) * (pv + np.abs(o)) + APPROX * np.abs(o))
