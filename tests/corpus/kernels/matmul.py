"""Tensor-core work: mmaf/mmai for every input type, tf32, batched matmul, flash attention,
block-scaled mma."""

import cuda.tile as ct

from corpus_spec import ZEROS, Arr, Const, Entry, Kernel, Scalar, case, randint, tol, uniform


@ct.kernel
def matmul(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """C[i, j] tile = sum over k of A[i, k] @ B[k, j]; the accumulator type is C's."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=c.dtype)
    for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
        x = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(i, j), tile=acc)


@ct.kernel
def matmul_tf32(a, b, c):
    """f32 inputs rounded to tf32, f32 accumulate; 32x32x32 tiles, K loop of 2."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.zeros((32, 32), dtype=ct.float32)
    for k in range(2):
        x = ct.astype(ct.load(a, index=(i, k), shape=(32, 32)), ct.tfloat32)
        y = ct.astype(ct.load(b, index=(k, j), shape=(32, 32)), ct.tfloat32)
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(i, j), tile=acc)


@ct.kernel
def matmul_operator(a, b, c):
    """`x @ y` (ct.matmul): result in the promoted input type, no accumulator."""
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0), shape=(16, 32))
    y = ct.load(b, index=(0, 0), shape=(32, 16))
    ct.store(c, index=(i, 0), tile=x @ y)


@ct.kernel
def bmm(a, b, c):
    """Batched: (B, 16, 32) @ (B, 32, 16) per block of 2 batches, 3-D tiles."""
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0, 0), shape=(2, 16, 32))
    y = ct.load(b, index=(i, 0, 0), shape=(2, 32, 16))
    acc = ct.zeros((2, 16, 16), dtype=ct.float32)
    ct.store(c, index=(i, 0, 0), tile=ct.mma(x, y, acc))


@ct.kernel
def attention(q, k, v, o, scale, S: ct.Constant[int], D: ct.Constant[int],
              BQ: ct.Constant[int], BK: ct.Constant[int]):
    """Flash attention (online softmax), one (head, query block) per tile block:
    o[h] = softmax(q[h] k[h]^T * scale) v[h]."""
    qb = ct.bid(0)
    h = ct.bid(1)
    qt = ct.reshape(ct.load(q, index=(h, qb, 0), shape=(1, BQ, D)), (BQ, D))
    m = ct.full((BQ, 1), -1e30, ct.float32)
    l = ct.zeros((BQ, 1), ct.float32)
    acc = ct.zeros((BQ, D), ct.float32)
    for kb in range(S // BK):
        kt = ct.reshape(ct.load(k, index=(h, kb, 0), shape=(1, BK, D)), (BK, D))
        vt = ct.reshape(ct.load(v, index=(h, kb, 0), shape=(1, BK, D)), (BK, D))
        s = ct.mma(qt, ct.transpose(kt), ct.zeros((BQ, BK), ct.float32)) * scale
        m_new = ct.maximum(m, ct.max(s, axis=1, keepdims=True))
        p = ct.exp(s - m_new)
        alpha = ct.exp(m - m_new)
        l = l * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, vt.dtype), vt, acc * alpha)
        m = m_new
    out = acc / l
    ct.store(o, index=(h, qb, 0), tile=ct.reshape(ct.astype(out, o.dtype), (1, BQ, D)))


@ct.kernel
def mma_scaled(a, sa, b, sb, c):
    """Block-scaled f8 mma (mmaf_scaled): scales per 32 elements of K, sm_100, 13.3."""
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0), shape=(16, 64))
    xs = ct.load(sa, index=(i, 0), shape=(16, 2))
    y = ct.load(b, index=(0, 0), shape=(64, 16))
    ys = ct.load(sb, index=(0, 0), shape=(2, 16))
    ct.store(c, index=(i, 0), tile=ct.mma_scaled(x, xs, y, ys, ct.zeros((16, 16), ct.float32)))


# (input dtype, accumulator dtype, tolerance, input recipe)
_TYPES = (
    ("float16", "float32", tol(1e-3), uniform(-1, 1)),
    ("bfloat16", "float32", tol(1e-2), uniform(-1, 1)),
    ("float32", "float32", tol(1e-4), uniform(-1, 1)),
    ("float64", "float64", tol(1e-12), uniform(-1, 1)),
    ("int8", "int32", "exact", ["bits"]),
    ("uint8", "int32", "exact", ["bits"]),
    ("float8_e4m3fn", "float32", tol(1e-3), uniform(-2, 2)),
    ("float8_e5m2", "float16", {"rtol": 1e-2, "atol": 0.25}, uniform(-2, 2)),
    ("float16", "float16", {"rtol": 1e-2, "atol": 0.1}, uniform(-1, 1)),
)


def _mm_entry(ti: str, to: str, tolerance, init) -> Entry:
    suffix = ti if to in ("float32", "int32", "float64") or ti == "float8_e5m2" else f"{ti}_{to}"
    params = {"a": Arr(ti, 2), "b": Arr(ti, 2), "c": Arr(to, 2),
              "TM": Const(32), "TN": Const(32), "TK": Const(32)}
    return Entry(f"matmul_{suffix}", params,
                 [case((2, 2), a=((64, 64), init), b=((64, 64), init), c=((64, 64), ZEROS)),
                  case((2, 2), "ragged", a=((50, 40), init), b=((40, 60), init),
                       c=((50, 60), ZEROS))],
                 "matmul", ("c",), tolerance=tolerance)


KERNELS = [
    Kernel("matmul", matmul, [_mm_entry(*t) for t in _TYPES],
           "32x32x32 tiled matmul with a K loop: f16/bf16/f32/f64/f8 mmaf, i8/u8 mmai, "
           "f16 accumulation; zero padding on ragged edges"),
    Kernel("matmul_tf32", matmul_tf32,
           [Entry("matmul_tf32", {"a": Arr("float32", 2), "b": Arr("float32", 2),
                                  "c": Arr("float32", 2)},
                  [case((2, 2), a=((64, 64), uniform(-1, 1)), b=((64, 64), uniform(-1, 1)),
                        c=((64, 64), ZEROS))],
                  "matmul_tf32", ("c",), tolerance=tol(1e-3))],
           "tf32 mmaf"),
    Kernel("matmul_operator", matmul_operator,
           [Entry(f"matmul_operator_{d}", {"a": Arr(d, 2), "b": Arr(d, 2), "c": Arr(d, 2)},
                  [case((2,), a=((32, 32), init), b=((32, 16), init), c=((32, 16), ZEROS))],
                  "matmul_operator", ("c",), tolerance=t)
            for d, init, t in (("float32", uniform(-1, 1), tol(1e-4)),
                               ("int8", randint(-3, 4), "exact"))],
           "the @ operator (mma into a zero accumulator of the input type)"),
    Kernel("bmm", bmm,
           [Entry("bmm_f16", {"a": Arr("float16", 3), "b": Arr("float16", 3),
                              "c": Arr("float32", 3)},
                  [case((2,), a=((4, 16, 32), uniform(-1, 1)), b=((4, 32, 16), uniform(-1, 1)),
                        c=((4, 16, 16), ZEROS))],
                  "bmm", ("c",), tolerance=tol(1e-3))],
           "batched 3-D mmaf"),
    Kernel("attention", attention,
           [Entry("attention_f16",
                  {"q": Arr("float16", 3), "k": Arr("float16", 3), "v": Arr("float16", 3),
                   "o": Arr("float16", 3), "scale": Scalar("float32"), "S": Const(64),
                   "D": Const(32), "BQ": Const(16), "BK": Const(16)},
                  [case((4, 2), q=((2, 64, 32), uniform(-1, 1)), k=((2, 64, 32), uniform(-1, 1)),
                        v=((2, 64, 32), uniform(-1, 1)), o=((2, 64, 32), ZEROS),
                        scalars={"scale": 0.17677669529663687})],
                  "attention", ("o",), tolerance=tol(5e-3))],
           "flash attention: a K/V loop carrying running max, sum and accumulator"),
    Kernel("mma_scaled", mma_scaled,
           [Entry("mma_scaled_e4m3",
                  {"a": Arr("float8_e4m3fn", 2), "sa": Arr("float8_e8m0fnu", 2),
                   "b": Arr("float8_e4m3fn", 2), "sb": Arr("float8_e8m0fnu", 2),
                   "c": Arr("float32", 2)},
                  [case((2,), a=((32, 64), uniform(-2, 2)), sa=((32, 2), ["choice", [0.5, 1, 2, 4]]),
                        b=((64, 16), uniform(-2, 2)), sb=((2, 16), ["choice", [0.25, 1, 2]]),
                        c=((32, 16), ZEROS))],
                  "mma_scaled", ("c",), tolerance=tol(1e-3))],
           "block-scaled mma (mmaf_scaled), f8E4M3FN data, f8E8M0FNU scales, sm_100",
           gpu_code="sm_100",
           skip={v: "mma_scaled needs 13.3" for v in ("13.1", "13.2")}),
]
