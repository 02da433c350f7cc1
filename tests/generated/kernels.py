"""cuTile templates of the generated variants, written as TileGym and cuTile's samples write
kernels: every choice of a variant is a compile-time constant (``ct.Constant``) of one template,
as real kernels take TRANSPOSE_B, CAUSAL or the tile sizes. ``launch.py`` binds a Variant to a
template's parameters; ``variant_reference.py`` says in numpy what each computes.
"""

import cuda.tile as ct

ConstInt = ct.Constant[int]
ConstBool = ct.Constant[bool]
ZERO = ct.PaddingMode.ZERO
LOG2E = 1.4426950408889634

# epilogue codes of gemm (launch.EPILOGUES names them)
EPI_NONE, EPI_BIAS, EPI_RELU, EPI_GELU, EPI_SCALE, EPI_RESIDUAL, EPI_ALPHABETA, EPI_SUBTILE = range(8)
# schedules of gemm
TILES, PERSISTENT, SPLITK, SPLITR = range(4)


def _load(arr, index, shape, PAD: ConstBool, LAT: ConstInt):
    """ct.load with the variant's padding and latency hint (latency=None is not accepted)."""
    if PAD:
        if LAT > 0:
            t = ct.load(arr, index=index, shape=shape, padding_mode=ZERO, latency=LAT)
        else:
            t = ct.load(arr, index=index, shape=shape, padding_mode=ZERO)
    else:
        if LAT > 0:
            t = ct.load(arr, index=index, shape=shape, latency=LAT)
        else:
            t = ct.load(arr, index=index, shape=shape)
    return t


def _grouped(tile_id, M, N, TM, TN):
    """Tile id -> (row tile, column tile), 8 row tiles at a time (TileGym's swizzle for L2 reuse)."""
    tiles_m = ct.cdiv(M, TM)
    per_group = 8 * ct.cdiv(N, TN)
    first = (tile_id // per_group) * 8
    rows = ct.minimum(tiles_m - first, 8)
    return first + (tile_id % per_group) % rows, (tile_id % per_group) // rows


def _gelu(x):
    return 0.5 * x * (1.0 + ct.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


# ------------------------------------------------------------------------------- matmul family

def _k_step(A, B, bm, bn, k, acc, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT):
    """acc plus A's (bm, k) tile times B's (k, bn) tile."""
    if A_COL:
        x = ct.transpose(_load(A, (k, bm), (TK, TM), PAD, LAT))
    else:
        x = _load(A, (bm, k), (TM, TK), PAD, LAT)
    if B_COL:
        y = ct.transpose(_load(B, (bn, k), (TN, TK), PAD, LAT))
    else:
        y = _load(B, (k, bn), (TK, TN), PAD, LAT)
    if TF32:
        x = ct.astype(x, ct.tfloat32)
        y = ct.astype(y, ct.tfloat32)
    return ct.mma(x, y, acc)


def _mainloop(A, B, bm, bn, k0, k_step, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT):
    acc = ct.zeros((TM, TN), dtype=ct.int32 if A.dtype == ct.int8 else ct.float32)
    k_tiles = ct.cdiv(A.shape[0] if A_COL else A.shape[1], TK)
    for k in range(k0, k_tiles, k_step):
        acc = _k_step(A, B, bm, bn, k, acc, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT)
    return acc


def _mainloop_range(A, B, bm, bn, split, SPLIT, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT):
    """The K tiles of one split-K range: split `split` of SPLIT takes a contiguous run of K tiles, each
    indexed `first + kk` (as split-K kernels write it, the tile index computed in the loop)."""
    acc = ct.zeros((TM, TN), dtype=ct.int32 if A.dtype == ct.int8 else ct.float32)
    k_tiles = ct.cdiv(A.shape[0] if A_COL else A.shape[1], TK)
    per = ct.cdiv(k_tiles, SPLIT)
    first = split * per
    for kk in range(ct.minimum(per, k_tiles - first)):
        acc = _k_step(A, B, bm, bn, first + kk, acc, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT)
    return acc


def _epilogue(acc, C, Bias, Scale, R, alpha, beta, bm, bn, TM, TN, EPI):
    if EPI == EPI_BIAS or EPI == EPI_RELU or EPI == EPI_GELU:
        out = acc + ct.reshape(ct.astype(ct.load(Bias, index=(bn,), shape=(TN,), padding_mode=ZERO),
                                         ct.float32), (1, TN))
        if EPI == EPI_RELU:
            out = ct.maximum(out, 0.0)
        if EPI == EPI_GELU:
            out = _gelu(out)
    elif EPI == EPI_SCALE:
        s = ct.load(Scale, index=(bm,), shape=(TM,), padding_mode=ZERO)
        out = ct.astype(acc, ct.float32) * ct.reshape(s, (TM, 1))
    elif EPI == EPI_RESIDUAL:
        out = acc + ct.astype(ct.load(R, index=(bm, bn), shape=(TM, TN), padding_mode=ZERO), ct.float32)
    elif EPI == EPI_ALPHABETA:
        out = alpha * acc + beta * ct.astype(ct.load(C, index=(bm, bn), shape=(TM, TN), padding_mode=ZERO),
                                             ct.float32)
    else:
        out = acc
    if EPI == EPI_SUBTILE:      # the store in two column halves, as CUTLASS-style epilogues sub-tile it
        half = TN // 2
        for j in range(2):
            ct.store(C, index=(bm, 2 * bn + j), tile=ct.astype(ct.extract(out, (0, j), (TM, half)), C.dtype))
    else:
        ct.store(C, index=(bm, bn), tile=ct.astype(out, C.dtype))


@ct.kernel
def gemm(A, B, C, Bias, Scale, R, alpha, beta, TM: ConstInt, TN: ConstInt, TK: ConstInt,
         A_COL: ConstBool, B_COL: ConstBool, TF32: ConstBool, PAD: ConstBool, LAT: ConstInt,
         SCHEDULE: ConstInt, SPLIT: ConstInt, EPI: ConstInt):
    """C = epilogue(A @ B) on a grouped 1-D grid of output tiles (TILES), a persistent loop over
    them (PERSISTENT), or split-K (SPLITK: bid(1) takes every SPLIT-th K tile; SPLITR: bid(1) takes the
    SPLIT-th part of the K tiles, a contiguous range; partial sums are added into C with atomics). A is
    (M, K) or, column-major, (K, M); B is (K, N) or (N, K)."""
    M = C.shape[0]
    N = C.shape[1]
    if SCHEDULE == PERSISTENT:
        for t in range(ct.bid(0), ct.cdiv(M, TM) * ct.cdiv(N, TN), ct.num_blocks(0)):
            bm, bn = _grouped(t, M, N, TM, TN)
            acc = _mainloop(A, B, bm, bn, 0, 1, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT)
            _epilogue(acc, C, Bias, Scale, R, alpha, beta, bm, bn, TM, TN, EPI)
    elif SCHEDULE == SPLITK or SCHEDULE == SPLITR:
        bm, bn = _grouped(ct.bid(0), M, N, TM, TN)
        if SCHEDULE == SPLITK:
            acc = _mainloop(A, B, bm, bn, ct.bid(1), SPLIT, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT)
        else:
            acc = _mainloop_range(A, B, bm, bn, ct.bid(1), SPLIT, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT)
        rows = bm * TM + ct.arange(TM, dtype=ct.int32)
        cols = bn * TN + ct.arange(TN, dtype=ct.int32)
        ct.atomic_add(C, (ct.expand_dims(rows, 1), ct.expand_dims(cols, 0)), ct.astype(acc, C.dtype))
    else:
        bm, bn = _grouped(ct.bid(0), M, N, TM, TN)
        acc = _mainloop(A, B, bm, bn, 0, 1, TM, TN, TK, A_COL, B_COL, TF32, PAD, LAT)
        _epilogue(acc, C, Bias, Scale, R, alpha, beta, bm, bn, TM, TN, EPI)


@ct.kernel
def gemm_scaled(A, A_scale, B, B_scale, C, Scale, TM: ConstInt, TN: ConstInt, TK: ConstInt,
                SBS: ConstInt, LAT: ConstInt, EPI: ConstInt):
    """Block-scaled C = (A * A_scale) @ (B * B_scale) (MXFP8: e8m0 scales per 32; NVFP4: e4m3
    scales per 16), 2-D scale tiles as cuTile's block-scaled sample loads them."""
    M = C.shape[0]
    N = C.shape[1]
    bm, bn = _grouped(ct.bid(0), M, N, TM, TN)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[1], TK)):
        a = _load(A, (bm, k), (TM, TK), True, LAT)
        sa = ct.load(A_scale, index=(bm, k), shape=(TM, TK // SBS), padding_mode=ZERO)
        b = _load(B, (k, bn), (TK, TN), True, LAT)
        sb = ct.load(B_scale, index=(k, bn), shape=(TK // SBS, TN), padding_mode=ZERO)
        acc = ct.mma_scaled(a, sa, b, sb, acc)
    if EPI == EPI_SCALE:
        acc = acc * ct.reshape(ct.load(Scale, index=(bm,), shape=(TM,), padding_mode=ZERO), (TM, 1))
    ct.store(C, index=(bm, bn), tile=ct.astype(acc, C.dtype))


@ct.kernel
def bmm(A, B, C, Scale, TM: ConstInt, TN: ConstInt, TK: ConstInt, B_COL: ConstBool, TF32: ConstBool,
        LAT: ConstInt, EPI: ConstInt):
    """Batched C[z] = A[z] @ B[z] (B[z] stored (N, K) when B_COL); grid (M tiles, N tiles, batch)."""
    bm = ct.bid(0)
    bn = ct.bid(1)
    z = ct.bid(2)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.cdiv(A.shape[2], TK)):
        x = ct.reshape(_load(A, (z, bm, k), (1, TM, TK), True, LAT), (TM, TK))
        if B_COL:
            y = ct.transpose(ct.reshape(_load(B, (z, bn, k), (1, TN, TK), True, LAT), (TN, TK)))
        else:
            y = ct.reshape(_load(B, (z, k, bn), (1, TK, TN), True, LAT), (TK, TN))
        if TF32:
            x = ct.astype(x, ct.tfloat32)
            y = ct.astype(y, ct.tfloat32)
        acc = ct.mma(x, y, acc)
    if EPI == EPI_SCALE:
        acc = acc * ct.load(Scale, index=(z,), shape=(1,)).reshape((1, 1))
    ct.store(C, index=(z, bm, bn), tile=ct.reshape(ct.astype(acc, C.dtype), (1, TM, TN)))


@ct.kernel
def group_gemm(As, Bs, Cs, TM: ConstInt, TN: ConstInt, TK: ConstInt, B_COL: ConstBool, LAT: ConstInt):
    """TileGym's group GEMM: one persistent grid walks the tiles of every problem of the lists."""
    tile = ct.bid(0)
    end = 0
    for g in range(len(As)):
        A = As[g]
        B = Bs[g]
        C = Cs[g]
        tiles_n = ct.num_tiles(C, 1, (TM, TN))
        tiles = ct.num_tiles(C, 0, (TM, TN)) * tiles_n
        while tile >= end and tile < end + tiles:
            bm = (tile - end) // tiles_n
            bn = (tile - end) % tiles_n
            acc = _mainloop(A, B, bm, bn, 0, 1, TM, TN, TK, False, B_COL, False, True, LAT)
            ct.store(C, index=(bm, bn), tile=ct.astype(acc, C.dtype))
            tile += ct.num_blocks(0)
        end += tiles


# ---------------------------------------------------------------------------- attention family

def _mask_scores(s, rows, kb, BK, CAUSAL, WINDOW, seq):
    cols = kb * BK + ct.arange(BK, dtype=ct.int32)
    keep = ct.expand_dims(cols, 0) < seq
    if CAUSAL:
        keep = keep & (ct.expand_dims(rows, 1) >= ct.expand_dims(cols, 0))
    if WINDOW > 0:
        keep = keep & (ct.expand_dims(rows, 1) - ct.expand_dims(cols, 0) < WINDOW)
    return ct.where(keep, s, -1.0e30)


@ct.kernel
def attn_fwd(Q, K, V, O, qk_scale, BQ: ConstInt, BK: ConstInt, D: ConstInt, GQA: ConstInt,
             CAUSAL: ConstBool, WINDOW: ConstInt, LAT: ConstInt):
    """Flash attention forward, (batch*heads, seq, D) tensors, GQA heads sharing a K/V head; online
    softmax in base 2; causal and sliding-window blocks skip what the mask removes."""
    qb = ct.bid(0)
    bh = ct.bid(1)
    kvh = bh // GQA
    seq = K.shape[1]
    q = ct.reshape(ct.load(Q, index=(bh, qb, 0), shape=(1, BQ, D), padding_mode=ZERO), (BQ, D))
    m_i = ct.full((BQ, 1), -1.0e30, ct.float32)
    l_i = ct.zeros((BQ, 1), ct.float32)
    acc = ct.zeros((BQ, D), ct.float32)
    scale = qk_scale * LOG2E
    rows = qb * BQ + ct.arange(BQ, dtype=ct.int32)
    end = ct.minimum(ct.cdiv((qb + 1) * BQ, BK), ct.cdiv(seq, BK)) if CAUSAL else ct.cdiv(seq, BK)
    start = ct.maximum(qb * BQ - WINDOW + 1, 0) // BK if WINDOW > 0 else 0
    for kb in range(start, end):
        k = ct.reshape(_load(K, (kvh, kb, 0), (1, BK, D), True, LAT), (BK, D))
        v = ct.reshape(_load(V, (kvh, kb, 0), (1, BK, D), True, LAT), (BK, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BQ, BK), ct.float32)) * scale
        s = _mask_scores(s, rows, kb, BK, CAUSAL, WINDOW, seq)
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, v.dtype), v, acc * alpha)
        m_i = m_new
    ct.store(O, index=(bh, qb, 0), tile=ct.reshape(ct.astype(acc / l_i, O.dtype), (1, BQ, D)))


@ct.kernel
def attn_decode(Q, K, V, O, qk_scale, G: ConstInt, BK: ConstInt, D: ConstInt, WINDOW: ConstInt,
                LAT: ConstInt):
    """Decode attention: the G query heads sharing one K/V head (GQA) read the whole cache, one
    token each; the head group is padded to 16 rows for the tensor cores (flash-decoding style)."""
    kvh = ct.bid(0)
    seq = K.shape[1]
    GP = 16 if G < 16 else G
    q = ct.reshape(ct.load(Q, index=(kvh, 0, 0), shape=(1, GP, D), padding_mode=ZERO), (GP, D))
    m_i = ct.full((GP, 1), -1.0e30, ct.float32)
    l_i = ct.zeros((GP, 1), ct.float32)
    acc = ct.zeros((GP, D), ct.float32)
    scale = qk_scale * LOG2E
    start = ct.maximum(seq - WINDOW, 0) // BK if WINDOW > 0 else 0
    for kb in range(start, ct.cdiv(seq, BK)):
        k = ct.reshape(_load(K, (kvh, kb, 0), (1, BK, D), True, LAT), (BK, D))
        v = ct.reshape(_load(V, (kvh, kb, 0), (1, BK, D), True, LAT), (BK, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((GP, BK), ct.float32)) * scale
        cols = kb * BK + ct.arange(BK, dtype=ct.int32)
        keep = cols < seq
        if WINDOW > 0:
            keep = keep & (cols >= seq - WINDOW)
        s = ct.where(ct.expand_dims(keep, 0), s, -1.0e30)
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, v.dtype), v, acc * alpha)
        m_i = m_new
    ct.store(O, index=(kvh, 0, 0), tile=ct.reshape(ct.astype(acc / l_i, O.dtype), (1, GP, D)))


@ct.kernel
def mla_decode(QN, QP, CKV, KPE, O, qk_scale, HB: ConstInt, BK: ConstInt, DL: ConstInt, DR: ConstInt,
               LAT: ConstInt):
    """DeepSeek MLA decode: HB heads of one sequence per CTA against the shared latent cache
    (DL columns, also the values) and its rotary part (DR columns)."""
    b = ct.bid(0)
    hb = ct.bid(1)
    seq = CKV.shape[1]
    qn = ct.reshape(ct.load(QN, index=(b, hb, 0), shape=(1, HB, DL)), (HB, DL))
    qp = ct.reshape(ct.load(QP, index=(b, hb, 0), shape=(1, HB, DR)), (HB, DR))
    m_i = ct.full((HB, 1), -1.0e30, ct.float32)
    l_i = ct.zeros((HB, 1), ct.float32)
    acc = ct.zeros((HB, DL), ct.float32)
    scale = qk_scale * LOG2E
    for kb in range(ct.cdiv(seq, BK)):
        kv = ct.reshape(_load(CKV, (b, kb, 0), (1, BK, DL), True, LAT), (BK, DL))
        kp = ct.reshape(_load(KPE, (b, kb, 0), (1, BK, DR), True, LAT), (BK, DR))
        s = ct.mma(qn, ct.transpose(kv), ct.zeros((HB, BK), ct.float32))
        s = ct.mma(qp, ct.transpose(kp), s) * scale
        cols = kb * BK + ct.arange(BK, dtype=ct.int32)
        s = ct.where(ct.expand_dims(cols < seq, 0), s, -1.0e30)
        m_new = ct.maximum(m_i, ct.max(s, axis=1, keepdims=True))
        p = ct.exp2(s - m_new)
        alpha = ct.exp2(m_i - m_new)
        l_i = l_i * alpha + ct.sum(p, axis=1, keepdims=True)
        acc = ct.mma(ct.astype(p, kv.dtype), kv, acc * alpha)
        m_i = m_new
    ct.store(O, index=(b, hb, 0), tile=ct.reshape(ct.astype(acc / l_i, O.dtype), (1, HB, DL)))


@ct.kernel
def attn_bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, qk_scale, BQ: ConstInt, BK: ConstInt, D: ConstInt,
                CAUSAL: ConstBool, LAT: ConstInt):
    """Flash attention backward, the dQ kernel: P rebuilt from the forward's log-sum-exp (base 2),
    dS = P * (dO V^T - delta), dQ = scale * dS K."""
    qb = ct.bid(0)
    bh = ct.bid(1)
    seq = K.shape[1]
    q = ct.reshape(ct.load(Q, index=(bh, qb, 0), shape=(1, BQ, D), padding_mode=ZERO), (BQ, D))
    do = ct.reshape(ct.load(DO, index=(bh, qb, 0), shape=(1, BQ, D), padding_mode=ZERO), (BQ, D))
    lse = ct.reshape(ct.load(LSE, index=(bh, qb), shape=(1, BQ), padding_mode=ZERO), (BQ, 1))
    delta = ct.reshape(ct.load(DELTA, index=(bh, qb), shape=(1, BQ), padding_mode=ZERO), (BQ, 1))
    dq = ct.zeros((BQ, D), ct.float32)
    scale = qk_scale * LOG2E
    rows = qb * BQ + ct.arange(BQ, dtype=ct.int32)
    end = ct.minimum(ct.cdiv((qb + 1) * BQ, BK), ct.cdiv(seq, BK)) if CAUSAL else ct.cdiv(seq, BK)
    for kb in range(end):
        k = ct.reshape(_load(K, (bh, kb, 0), (1, BK, D), True, LAT), (BK, D))
        v = ct.reshape(_load(V, (bh, kb, 0), (1, BK, D), True, LAT), (BK, D))
        s = ct.mma(q, ct.transpose(k), ct.zeros((BQ, BK), ct.float32)) * scale
        s = _mask_scores(s, rows, kb, BK, CAUSAL, 0, seq)
        p = ct.exp2(s - lse)
        dp = ct.mma(do, ct.transpose(v), ct.zeros((BQ, BK), ct.float32))
        ds = p * (dp - delta)
        dq = ct.mma(ct.astype(ds, k.dtype), k, dq)
    ct.store(DQ, index=(bh, qb, 0), tile=ct.reshape(ct.astype(dq * qk_scale, DQ.dtype), (1, BQ, D)))


# -------------------------------------------------------------------------------- row kernels
# One template per op; ROWS rows per CTA; the whole row in one tile (CHUNK == 0) or CHUNK-column
# chunks; PERSIST: a grid of about one CTA per SM loops over the row blocks.

def _rows(x, r, ROWS, N):
    return ct.astype(ct.load(x, index=(r, 0), shape=(ROWS, N), padding_mode=ZERO), ct.float32)


def _chunk(x, r, c, ROWS, CHUNK):
    return ct.astype(ct.load(x, index=(r, c), shape=(ROWS, CHUNK), padding_mode=ZERO), ct.float32)


def _vec(w, c, n):
    return ct.reshape(ct.astype(ct.load(w, index=(c,), shape=(n,)), ct.float32), (1, n))


def _layernorm_block(x, w, b, y, eps, r, ROWS, N, CHUNK):
    if CHUNK == 0:
        t = _rows(x, r, ROWS, N)
        mean = ct.sum(t, axis=1, keepdims=True) / N
        d = t - mean
        rstd = ct.rsqrt(ct.sum(d * d, axis=1, keepdims=True) / N + eps)
        ct.store(y, index=(r, 0), tile=ct.astype(d * rstd * _vec(w, 0, N) + _vec(b, 0, N), y.dtype))
    else:
        total = ct.zeros((ROWS, CHUNK), ct.float32)
        for c in range(N // CHUNK):
            total += _chunk(x, r, c, ROWS, CHUNK)
        mean = ct.sum(total, axis=1, keepdims=True) / N
        sq = ct.zeros((ROWS, CHUNK), ct.float32)
        for c in range(N // CHUNK):
            d = _chunk(x, r, c, ROWS, CHUNK) - mean
            sq += d * d
        rstd = ct.rsqrt(ct.sum(sq, axis=1, keepdims=True) / N + eps)
        for c in range(N // CHUNK):
            d = _chunk(x, r, c, ROWS, CHUNK) - mean
            ct.store(y, index=(r, c), tile=ct.astype(d * rstd * _vec(w, c, CHUNK) + _vec(b, c, CHUNK), y.dtype))


def _rmsnorm_block(x, w, y, eps, r, ROWS, N, CHUNK):
    if CHUNK == 0:
        t = _rows(x, r, ROWS, N)
        rstd = ct.rsqrt(ct.sum(t * t, axis=1, keepdims=True) / N + eps)
        ct.store(y, index=(r, 0), tile=ct.astype(t * rstd * _vec(w, 0, N), y.dtype))
    else:
        sq = ct.zeros((ROWS, CHUNK), ct.float32)
        for c in range(N // CHUNK):
            t = _chunk(x, r, c, ROWS, CHUNK)
            sq += t * t
        rstd = ct.rsqrt(ct.sum(sq, axis=1, keepdims=True) / N + eps)
        for c in range(N // CHUNK):
            ct.store(y, index=(r, c), tile=ct.astype(_chunk(x, r, c, ROWS, CHUNK) * rstd * _vec(w, c, CHUNK),
                                                     y.dtype))


def _online_lse(x, r, ROWS, N, CHUNK):
    """(row max, row sum of exp(x - max)) over chunks: the online softmax's statistics."""
    m = ct.full((ROWS, 1), -1.0e30, ct.float32)
    s = ct.zeros((ROWS, 1), ct.float32)
    for c in range(N // CHUNK):
        t = _chunk(x, r, c, ROWS, CHUNK)
        m_new = ct.maximum(m, ct.max(t, axis=1, keepdims=True))
        s = s * ct.exp(m - m_new) + ct.sum(ct.exp(t - m_new), axis=1, keepdims=True)
        m = m_new
    return m, s


def _softmax_block(x, y, r, ROWS, N, CHUNK):
    if CHUNK == 0:
        t = _rows(x, r, ROWS, N)
        e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
        ct.store(y, index=(r, 0), tile=ct.astype(e / ct.sum(e, axis=1, keepdims=True), y.dtype))
    else:
        m, s = _online_lse(x, r, ROWS, N, CHUNK)
        for c in range(N // CHUNK):
            ct.store(y, index=(r, c), tile=ct.astype(ct.exp(_chunk(x, r, c, ROWS, CHUNK) - m) / s, y.dtype))


def _logsumexp_block(x, y, r, ROWS, N, CHUNK):
    if CHUNK == 0:
        t = _rows(x, r, ROWS, N)
        m = ct.max(t, axis=1, keepdims=True)
        s = ct.sum(ct.exp(t - m), axis=1, keepdims=True)
    else:
        m, s = _online_lse(x, r, ROWS, N, CHUNK)
    ct.store(y, index=(r,), tile=ct.reshape(m + ct.log(s), (ROWS,)))


def _reduce_block(x, y, r, ROWS, N, CHUNK, MAX):
    if CHUNK == 0:
        t = _rows(x, r, ROWS, N)
        out = ct.max(t, axis=1) if MAX else ct.sum(t, axis=1)
    else:
        acc = ct.full((ROWS, CHUNK), -3.0e38 if MAX else 0.0, ct.float32)
        for c in range(N // CHUNK):
            t = _chunk(x, r, c, ROWS, CHUNK)
            acc = ct.maximum(acc, t) if MAX else acc + t
        out = ct.max(acc, axis=1) if MAX else ct.sum(acc, axis=1)
    ct.store(y, index=(r,), tile=ct.astype(out, y.dtype))


def _cumsum_block(x, y, r, ROWS, N, CHUNK):
    if CHUNK == 0:
        ct.store(y, index=(r, 0), tile=ct.astype(ct.cumsum(_rows(x, r, ROWS, N), axis=1), y.dtype))
    else:
        carry = ct.zeros((ROWS, 1), ct.float32)
        for c in range(N // CHUNK):
            t = _chunk(x, r, c, ROWS, CHUNK)
            ct.store(y, index=(r, c), tile=ct.astype(ct.cumsum(t, axis=1) + carry, y.dtype))
            carry += ct.sum(t, axis=1, keepdims=True)


def _cross_entropy_block(x, labels, loss, r, N, CHUNK):
    """loss[r] = logsumexp(x[r]) - x[r, labels[r]] (one row per CTA; the target logit gathered)."""
    if CHUNK == 0:
        t = _rows(x, r, 1, N)
        m = ct.max(t, axis=1, keepdims=True)
        s = ct.sum(ct.exp(t - m), axis=1, keepdims=True)
    else:
        m, s = _online_lse(x, r, 1, N, CHUNK)
    label = ct.load(labels, index=(r,), shape=(1,))
    target = ct.astype(ct.gather(x, (r + ct.zeros((1,), ct.int32), label)), ct.float32)
    ct.store(loss, index=(r,), tile=ct.reshape(m + ct.log(s), (1,)) - target)


@ct.kernel
def layernorm(x, w, b, y, eps, ROWS: ConstInt, N: ConstInt, CHUNK: ConstInt, PERSIST: ConstBool):
    if PERSIST:   # about one CTA per SM walks every num_blocks-th row block
        for r in range(ct.bid(0), ct.cdiv(x.shape[0], ROWS), ct.num_blocks(0)):
            _layernorm_block(x, w, b, y, eps, r, ROWS, N, CHUNK)
    else:
        r = ct.bid(0)
        _layernorm_block(x, w, b, y, eps, r, ROWS, N, CHUNK)


@ct.kernel
def rmsnorm(x, w, y, eps, ROWS: ConstInt, N: ConstInt, CHUNK: ConstInt, PERSIST: ConstBool):
    if PERSIST:   # about one CTA per SM walks every num_blocks-th row block
        for r in range(ct.bid(0), ct.cdiv(x.shape[0], ROWS), ct.num_blocks(0)):
            _rmsnorm_block(x, w, y, eps, r, ROWS, N, CHUNK)
    else:
        r = ct.bid(0)
        _rmsnorm_block(x, w, y, eps, r, ROWS, N, CHUNK)


@ct.kernel
def softmax(x, y, ROWS: ConstInt, N: ConstInt, CHUNK: ConstInt, PERSIST: ConstBool):
    if PERSIST:   # about one CTA per SM walks every num_blocks-th row block
        for r in range(ct.bid(0), ct.cdiv(x.shape[0], ROWS), ct.num_blocks(0)):
            _softmax_block(x, y, r, ROWS, N, CHUNK)
    else:
        r = ct.bid(0)
        _softmax_block(x, y, r, ROWS, N, CHUNK)


@ct.kernel
def logsumexp(x, y, ROWS: ConstInt, N: ConstInt, CHUNK: ConstInt, PERSIST: ConstBool):
    if PERSIST:   # about one CTA per SM walks every num_blocks-th row block
        for r in range(ct.bid(0), ct.cdiv(x.shape[0], ROWS), ct.num_blocks(0)):
            _logsumexp_block(x, y, r, ROWS, N, CHUNK)
    else:
        r = ct.bid(0)
        _logsumexp_block(x, y, r, ROWS, N, CHUNK)


@ct.kernel
def row_reduce(x, y, ROWS: ConstInt, N: ConstInt, CHUNK: ConstInt, PERSIST: ConstBool, MAX: ConstBool):
    if PERSIST:   # about one CTA per SM walks every num_blocks-th row block
        for r in range(ct.bid(0), ct.cdiv(x.shape[0], ROWS), ct.num_blocks(0)):
            _reduce_block(x, y, r, ROWS, N, CHUNK, MAX)
    else:
        r = ct.bid(0)
        _reduce_block(x, y, r, ROWS, N, CHUNK, MAX)


@ct.kernel
def cumsum(x, y, ROWS: ConstInt, N: ConstInt, CHUNK: ConstInt, PERSIST: ConstBool):
    if PERSIST:   # about one CTA per SM walks every num_blocks-th row block
        for r in range(ct.bid(0), ct.cdiv(x.shape[0], ROWS), ct.num_blocks(0)):
            _cumsum_block(x, y, r, ROWS, N, CHUNK)
    else:
        r = ct.bid(0)
        _cumsum_block(x, y, r, ROWS, N, CHUNK)


@ct.kernel
def cross_entropy(x, labels, loss, N: ConstInt, CHUNK: ConstInt, PERSIST: ConstBool):
    if PERSIST:   # about one CTA per SM walks every num_blocks-th row block
        for r in range(ct.bid(0), ct.cdiv(x.shape[0], 1), ct.num_blocks(0)):
            _cross_entropy_block(x, labels, loss, r, N, CHUNK)
    else:
        r = ct.bid(0)
        _cross_entropy_block(x, labels, loss, r, N, CHUNK)


@ct.kernel
def rope(x, cos, sin, y, TS: ConstInt, H: ConstInt, D: ConstInt):
    """Rotary embedding (rotate-half) of (seq, heads, D) activations, TS positions per CTA."""
    s = ct.bid(0)
    half = D // 2
    x1 = ct.astype(ct.load(x, index=(s, 0, 0), shape=(TS, H, half), padding_mode=ZERO), ct.float32)
    x2 = ct.astype(ct.load(x, index=(s, 0, 1), shape=(TS, H, half), padding_mode=ZERO), ct.float32)
    c = ct.reshape(ct.astype(ct.load(cos, index=(s, 0), shape=(TS, half), padding_mode=ZERO), ct.float32),
                   (TS, 1, half))
    n = ct.reshape(ct.astype(ct.load(sin, index=(s, 0), shape=(TS, half), padding_mode=ZERO), ct.float32),
                   (TS, 1, half))
    ct.store(y, index=(s, 0, 0), tile=ct.astype(x1 * c - x2 * n, y.dtype))
    ct.store(y, index=(s, 0, 1), tile=ct.astype(x2 * c + x1 * n, y.dtype))


# ------------------------------------------------------------- elementwise, gather/scatter, MoE
# OP codes of eltwise
ADD, SWIGLU, GELU_BIAS, SCALE_CAST = range(4)


@ct.kernel
def eltwise(a, b, out, scale, T0: ConstInt, T1: ConstInt, OP: ConstInt):
    """1-D (T1 == 0) or 2-D tiles: a + b; silu(a) * b (SwiGLU); gelu(a + bias) with a bias row;
    a * scale cast to out's type (an fp8 or bf16 quantization)."""
    if T1 == 0:
        shape = (T0,)
        index = (ct.bid(0),)
    else:
        shape = (T0, T1)
        index = (ct.bid(0), ct.bid(1))
    x = ct.astype(ct.load(a, index=index, shape=shape), ct.float32)
    if OP == ADD:
        out_t = x + ct.astype(ct.load(b, index=index, shape=shape), ct.float32)
    elif OP == SWIGLU:
        out_t = x / (1.0 + ct.exp(-x)) * ct.astype(ct.load(b, index=index, shape=shape), ct.float32)
    elif OP == GELU_BIAS:
        if T1 == 0:
            bias = ct.astype(ct.load(b, index=index, shape=shape), ct.float32)
        else:
            bias = ct.reshape(ct.astype(ct.load(b, index=(ct.bid(1),), shape=(T1,)), ct.float32), (1, T1))
        out_t = _gelu(x + bias)
    else:
        out_t = x * scale
    ct.store(out, index=index, tile=ct.astype(out_t, out.dtype))


@ct.kernel
def embedding(table, ids, out, R: ConstInt, N: ConstInt):
    """out[i, :] = table[ids[i], :] for R token ids per CTA (an embedding lookup / MoE permute)."""
    i = ct.bid(0)
    rows = ct.load(ids, index=(i,), shape=(R,), padding_mode=ZERO)
    cols = ct.arange(N, dtype=ct.int32)
    t = ct.gather(table, (ct.expand_dims(rows, 1), ct.expand_dims(cols, 0)))
    ct.store(out, index=(i, 0), tile=t)


@ct.kernel
def index_add(src, idx, out, R: ConstInt, N: ConstInt):
    """out[idx[i], :] += src[i, :] with atomics (an embedding backward / MoE combine into f32)."""
    i = ct.bid(0)
    rows = ct.load(idx, index=(i,), shape=(R,), padding_mode=ZERO)
    cols = ct.arange(N, dtype=ct.int32)
    t = ct.astype(ct.load(src, index=(i, 0), shape=(R, N), padding_mode=ZERO), ct.float32)
    ct.atomic_add(out, (ct.expand_dims(rows, 1), ct.expand_dims(cols, 0)), t)


@ct.kernel
def scatter_rows(src, perm, out, R: ConstInt, N: ConstInt):
    """out[perm[i], :] = src[i, :] (MoE un-permute: expert-sorted rows back to token order)."""
    i = ct.bid(0)
    rows = ct.load(perm, index=(i,), shape=(R,), padding_mode=ZERO)
    cols = ct.arange(N, dtype=ct.int32)
    t = ct.load(src, index=(i, 0), shape=(R, N), padding_mode=ZERO)
    valid = ct.expand_dims(i * R + ct.arange(R, dtype=ct.int32) < src.shape[0], 1)   # the last block's tail
    ct.scatter(out, (ct.expand_dims(rows, 1), ct.expand_dims(cols, 0)), t,
               mask=ct.broadcast_to(valid, (R, N)))


@ct.kernel
def moe_route(logits, weights, ids, TT: ConstInt, E: ConstInt, K: ConstInt):
    """MoE router: softmax over E experts of TT tokens, the top K by repeated argmax with their
    softmax weights (DeepSeek-V2's routing without renormalization)."""
    t = ct.bid(0)
    x = ct.astype(ct.load(logits, index=(t, 0), shape=(TT, E), padding_mode=ct.PaddingMode.NEG_INF), ct.float32)
    p = ct.exp(x - ct.max(x, axis=1, keepdims=True))
    p = p / ct.sum(p, axis=1, keepdims=True)
    cols = ct.expand_dims(ct.arange(E, dtype=ct.int32), 0)
    for j in range(K):
        best = ct.astype(ct.argmax(p, axis=1, keepdims=True), ct.int32)
        ct.store(weights, index=(t, j), tile=ct.max(p, axis=1, keepdims=True))
        ct.store(ids, index=(t, j), tile=best)
        p = ct.where(cols == best, -1.0, p)
