"""cuTile kernels written the way real ones are (TileGym, cutile-python samples): tile sizes,
loops and epilogues of production kernels, every size a compile-time constant.

``configs.py`` instantiates them; ``generate.py`` exports one bytecode module per configuration.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]


@ct.function
def _grouped_tile(pid, M, N, TM: ConstInt, TN: ConstInt, GROUP: ConstInt):
    """Block id -> (row tile, column tile), GROUP row tiles at a time (L2 reuse of B),
    as TileGym's and Triton's GEMMs order their grids."""
    tiles_m = ct.cdiv(M, TM)
    tiles_n = ct.cdiv(N, TN)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows = min(tiles_m - first_m, GROUP)
    bm = first_m + (pid % per_group) % rows
    bn = (pid % per_group) // rows
    return bm, bn


@ct.kernel
def matmul(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt, GROUP: ConstInt, TF32: ConstBool):
    """C = A @ B on a 1-D grid of output tiles; f32 (i32 for int8) accumulation in the K loop,
    converted to C's type once at the end. TF32 rounds f32 inputs to tf32 before the mma."""
    bm, bn = _grouped_tile(ct.bid(0), a.shape[0], b.shape[1], TM, TN, GROUP)
    acc_type = ct.int32 if a.dtype == ct.int8 else ct.float32
    acc = ct.zeros((TM, TN), dtype=acc_type)
    for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
        x = ct.load(a, index=(bm, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        if TF32:
            x = ct.astype(x, ct.tfloat32)
            y = ct.astype(y, ct.tfloat32)
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(bm, bn), tile=ct.astype(acc, c.dtype))


@ct.kernel
def bmm(a, b, c, TM: ConstInt, TN: ConstInt, TK: ConstInt):
    """Batched C[z] = A[z] @ B[z]; grid (M tiles, N tiles, batch)."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    z = ct.bid(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(a, 2, shape=(1, TM, TK))):
        x = ct.reshape(ct.load(a, index=(z, bm, k), shape=(1, TM, TK),
                               padding_mode=ct.PaddingMode.ZERO), (TM, TK))
        y = ct.reshape(ct.load(b, index=(z, k, bn), shape=(1, TK, TN),
                               padding_mode=ct.PaddingMode.ZERO), (TK, TN))
        acc = ct.mma(x, y, acc)
    ct.store(c, index=(z, bm, bn), tile=ct.reshape(ct.astype(acc, c.dtype), (1, TM, TN)))


@ct.kernel
def splitk_matmul(a, b, partial, TM: ConstInt, TN: ConstInt, TK: ConstInt, SPLIT: ConstInt):
    """Split-K: block (m, n, s) sums K tiles s, s + SPLIT, ... into partial[s] (f32);
    a second pass (row_sum over the split axis) adds the partials."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    s = ct.bid(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(s, ct.num_tiles(a, 1, shape=(TM, TK)), SPLIT):
        x = ct.load(a, index=(bm, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k, bn), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(x, y, acc)
    ct.store(partial, index=(s, bm, bn), tile=ct.reshape(acc, (1, TM, TN)))


@ct.kernel
def attention_fwd(q, k, v, o, qk_scale, BQ: ConstInt, BK: ConstInt, D: ConstInt,
                  CAUSAL: ConstBool):
    """Flash attention forward over (batch*heads, seq, D) tensors: online softmax in base 2,
    f32 statistics and accumulator; causal blocks stop at the diagonal and mask it."""
    qb = ct.bid(0)
    bh = ct.bid(1)
    seq = k.shape[1]
    qt = ct.reshape(ct.load(q, index=(bh, qb, 0), shape=(1, BQ, D)), (BQ, D))
    m_i = ct.full((BQ, 1), -1e30, ct.float32)
    l_i = ct.zeros((BQ, 1), ct.float32)
    acc = ct.zeros((BQ, D), ct.float32)
    scale = qk_scale * 1.4426950408889634
    end = ct.cdiv((qb + 1) * BQ, BK) if CAUSAL else ct.cdiv(seq, BK)
    rows = qb * BQ + ct.arange(BQ, dtype=ct.int32)
    for kb in range(end):
        kt = ct.reshape(ct.load(k, index=(bh, kb, 0), shape=(1, BK, D)), (BK, D))
        vt = ct.reshape(ct.load(v, index=(bh, kb, 0), shape=(1, BK, D)), (BK, D))
        s = ct.mma(qt, ct.transpose(kt), ct.zeros((BQ, BK), ct.float32)) * scale
        if CAUSAL:
            cols = kb * BK + ct.arange(BK, dtype=ct.int32)
            keep = ct.expand_dims(rows, 1) >= ct.expand_dims(cols, 0)
            s = ct.where(keep, s, -1e30)
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, vt.dtype), vt, acc * alpha)
        m_i = m_new
    out = acc / l_i
    ct.store(o, index=(bh, qb, 0), tile=ct.reshape(ct.astype(out, o.dtype), (1, BQ, D)))


@ct.kernel
def layernorm(x, w, b, y, eps, N: ConstInt):
    """One row per block, the whole row in one tile: mean, variance, scale and shift in f32."""
    r = ct.bid(0)
    row = ct.astype(ct.load(x, index=(r, 0), shape=(1, N)), ct.float32)
    mean = ct.sum(row, axis=1, keepdims=True) / N
    d = row - mean
    var = ct.sum(d * d, axis=1, keepdims=True) / N
    wt = ct.astype(ct.load(w, index=(0,), shape=(N,)), ct.float32)
    bt = ct.astype(ct.load(b, index=(0,), shape=(N,)), ct.float32)
    out = d * ct.rsqrt(var + eps) * ct.reshape(wt, (1, N)) + ct.reshape(bt, (1, N))
    ct.store(y, index=(r, 0), tile=ct.astype(out, y.dtype))


@ct.kernel
def layernorm_chunked(x, w, b, y, eps, N: ConstInt, TN: ConstInt):
    """Long rows in TN-column chunks (TileGym's layer norm): a sum pass, a variance pass
    and a normalize pass over the row, each a loop."""
    r = ct.bid(0)
    chunks = N // TN
    total = ct.zeros((1, TN), ct.float32)
    for c in range(chunks):
        total += ct.astype(ct.load(x, index=(r, c), shape=(1, TN)), ct.float32)
    mean = ct.sum(total, axis=1, keepdims=True) / N
    sq = ct.zeros((1, TN), ct.float32)
    for c in range(chunks):
        d = ct.astype(ct.load(x, index=(r, c), shape=(1, TN)), ct.float32) - mean
        sq += d * d
    rstd = ct.rsqrt(ct.sum(sq, axis=1, keepdims=True) / N + eps)
    for c in range(chunks):
        d = ct.astype(ct.load(x, index=(r, c), shape=(1, TN)), ct.float32) - mean
        wt = ct.reshape(ct.astype(ct.load(w, index=(c,), shape=(TN,)), ct.float32), (1, TN))
        bt = ct.reshape(ct.astype(ct.load(b, index=(c,), shape=(TN,)), ct.float32), (1, TN))
        ct.store(y, index=(r, c), tile=ct.astype(d * rstd * wt + bt, y.dtype))


@ct.kernel
def rmsnorm(x, w, y, eps, N: ConstInt):
    """RMSNorm of one row per block: x * rsqrt(mean(x^2) + eps) * w."""
    r = ct.bid(0)
    row = ct.astype(ct.load(x, index=(r, 0), shape=(1, N)), ct.float32)
    rstd = ct.rsqrt(ct.sum(row * row, axis=1, keepdims=True) / N + eps)
    wt = ct.reshape(ct.astype(ct.load(w, index=(0,), shape=(N,)), ct.float32), (1, N))
    ct.store(y, index=(r, 0), tile=ct.astype(row * rstd * wt, y.dtype))


@ct.kernel
def softmax(x, y, TM: ConstInt, N: ConstInt):
    """Row softmax of TM whole rows per block (TileGym's tile = next power of two of the row)."""
    r = ct.bid(0)
    t = ct.astype(ct.load(x, index=(r, 0), shape=(TM, N), padding_mode=ct.PaddingMode.NEG_INF),
                  ct.float32)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    out = e / ct.sum(e, axis=1, keepdims=True)
    ct.store(y, index=(r, 0), tile=ct.astype(out, y.dtype))


@ct.kernel
def row_sum(x, y, TM: ConstInt, TN: ConstInt):
    """y[i] = sum_j x[i, j] (f32 accumulation) over TN-column chunks of TM rows."""
    r = ct.bid(0)
    acc = ct.zeros((TM, TN), ct.float32)
    for c in range(ct.num_tiles(x, 1, shape=(TM, TN))):
        acc += ct.astype(ct.load(x, index=(r, c), shape=(TM, TN),
                                 padding_mode=ct.PaddingMode.ZERO), ct.float32)
    ct.store(y, index=(r,), tile=ct.astype(ct.sum(acc, axis=1), y.dtype))


@ct.kernel
def row_max(x, y, TM: ConstInt, TN: ConstInt):
    """y[i] = max_j x[i, j] over TN-column chunks of TM rows."""
    r = ct.bid(0)
    acc = ct.full((TM, TN), -3.0e38, ct.float32)
    for c in range(ct.num_tiles(x, 1, shape=(TM, TN))):
        t = ct.load(x, index=(r, c), shape=(TM, TN), padding_mode=ct.PaddingMode.NEG_INF)
        acc = ct.maximum(acc, ct.astype(t, ct.float32))
    ct.store(y, index=(r,), tile=ct.astype(ct.max(acc, axis=1), y.dtype))


@ct.kernel
def vector_add(a, b, c, T: ConstInt):
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) + ct.load(b, index=(i,), shape=(T,)))


@ct.kernel
def transpose(x, y, TM: ConstInt, TN: ConstInt):
    """y = x^T, one TM x TN tile per block."""
    i = ct.bid(0)
    j = ct.bid(1)
    t = ct.load(x, index=(i, j), shape=(TM, TN))
    ct.store(y, index=(j, i), tile=ct.transpose(t))


@ct.kernel
def rope(x, cos, sin, y, TS: ConstInt, H: ConstInt, D: ConstInt):
    """Rotary embedding (rotate-half form) of (seq, heads, D) activations; cos/sin (seq, D/2)
    tables; TS positions of all heads per block."""
    s = ct.bid(0)
    half = D // 2
    x1 = ct.astype(ct.load(x, index=(s, 0, 0), shape=(TS, H, half)), ct.float32)
    x2 = ct.astype(ct.load(x, index=(s, 0, 1), shape=(TS, H, half)), ct.float32)
    c = ct.reshape(ct.astype(ct.load(cos, index=(s, 0), shape=(TS, half)), ct.float32), (TS, 1, half))
    n = ct.reshape(ct.astype(ct.load(sin, index=(s, 0), shape=(TS, half)), ct.float32), (TS, 1, half))
    ct.store(y, index=(s, 0, 0), tile=ct.astype(x1 * c - x2 * n, y.dtype))
    ct.store(y, index=(s, 0, 1), tile=ct.astype(x2 * c + x1 * n, y.dtype))


@ct.kernel
def swiglu(gate, up, out, TM: ConstInt, TN: ConstInt):
    """out = silu(gate) * up on (rows, hidden) activations, TM x TN tiles."""
    i = ct.bid(0)
    j = ct.bid(1)
    g = ct.astype(ct.load(gate, index=(i, j), shape=(TM, TN)), ct.float32)
    u = ct.astype(ct.load(up, index=(i, j), shape=(TM, TN)), ct.float32)
    silu = g / (1.0 + ct.exp(-g))
    ct.store(out, index=(i, j), tile=ct.astype(silu * u, out.dtype))
