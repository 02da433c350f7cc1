"""The cuTile kernels of `tile_scaling.py` (no `from __future__ import annotations`: cuTile reads
the annotations of a kernel's constants when it is defined)."""

import cuda.tile as ct

ConstInt = ct.Constant[int]


@ct.kernel
def vector_add(a, b, c, T: ConstInt):
    i = ct.bid(0)
    ct.store(c, index=(i,), tile=ct.load(a, index=(i,), shape=(T,)) + ct.load(b, index=(i,), shape=(T,)))


@ct.kernel
def saxpy(alpha, x, y, T: ConstInt):
    i = ct.bid(0)
    ct.store(y, index=(i,), tile=alpha * ct.load(x, index=(i,), shape=(T,)) + ct.load(y, index=(i,), shape=(T,)))


@ct.kernel
def row_reduce(x, y, TM: ConstInt, TN: ConstInt):
    r = ct.bid(0)
    acc = ct.zeros((TM, TN), ct.float32)
    for c in range(ct.num_tiles(x, 1, shape=(TM, TN))):
        acc += ct.load(x, index=(r, c), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(r,), tile=ct.sum(acc, axis=1))


@ct.kernel
def softmax(x, y, N: ConstInt):
    r = ct.bid(0)
    t = ct.load(x, index=(r, 0), shape=(1, N), padding_mode=ct.PaddingMode.NEG_INF)
    e = ct.exp(t - ct.max(t, axis=1, keepdims=True))
    ct.store(y, index=(r, 0), tile=e / ct.sum(e, axis=1, keepdims=True))


@ct.kernel
def cast_chain(x, y, T: ConstInt):
    i = ct.bid(0)
    h = ct.astype(ct.load(x, index=(i,), shape=(T,)), ct.float16)
    b = ct.astype(ct.astype(h, ct.float32) * 2.0, ct.bfloat16)
    ct.store(y, index=(i,), tile=ct.astype(b, ct.float32))


@ct.kernel
def transpose(x, y, TM: ConstInt, TN: ConstInt):
    i = ct.bid(0)
    j = ct.bid(1)
    ct.store(y, index=(j, i), tile=ct.transpose(ct.load(x, index=(i, j), shape=(TM, TN))))


@ct.kernel
def gather(x, y, T: ConstInt):
    i = ct.bid(0)
    idx = ct.arange(T, dtype=ct.int32) + i * T
    ct.scatter(y, idx, ct.gather(x, idx, check_bounds=True) * 2.0, check_bounds=True)


@ct.kernel
def rms_norm(x, w, y, TM: ConstInt, TN: ConstInt):
    r = ct.bid(0)
    t = ct.load(x, index=(r, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ms = ct.sum(t * t, axis=1, keepdims=True) * (1.0 / TN)
    wt = ct.load(w, index=(0,), shape=(TN,), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(r, 0), tile=t * ct.rsqrt(ms + 1e-6) * wt)


@ct.kernel
def cumsum(x, y, N: ConstInt):
    r = ct.bid(0)
    t = ct.load(x, index=(r, 0), shape=(1, N), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(r, 0), tile=ct.cumsum(t, axis=1))


@ct.kernel   # one warp: the hint is added to the export (tile_scaling_kernels.ONE_WARP)
def sum_rows(x, y, TM: ConstInt, TN: ConstInt):
    r = ct.bid(0)
    t = ct.load(x, index=(r, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(r,), tile=ct.sum(t, axis=1))


@ct.kernel   # one warp: the hint is added to the export (tile_scaling_kernels.ONE_WARP)
def max_cols(x, y, TM: ConstInt, TN: ConstInt):
    c = ct.bid(0)
    t = ct.load(x, index=(0, c), shape=(TM, TN), padding_mode=ct.PaddingMode.NEG_INF)
    ct.store(y, index=(c,), tile=ct.max(t, axis=0))


@ct.kernel   # one warp: the hint is added to the export (tile_scaling_kernels.ONE_WARP)
def sum_and_max(x, y, z, TM: ConstInt, TN: ConstInt):
    b = ct.bid(0)
    t = ct.load(x, index=(b, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    ct.store(y, index=(b,), tile=ct.sum(t, axis=1))
    ct.store(z, index=(b,), tile=ct.max(t, axis=0))


@ct.kernel   # one warp: the hint is added to the export (tile_scaling_kernels.ONE_WARP)
def center_both(x, y, TM: ConstInt, TN: ConstInt):
    b = ct.bid(0)
    t = ct.load(x, index=(b, 0), shape=(TM, TN), padding_mode=ct.PaddingMode.ZERO)
    d = t - ct.sum(t, axis=1, keepdims=True) * (1.0 / TN)
    ct.store(y, index=(b, 0), tile=d - ct.sum(d, axis=0, keepdims=True) * (1.0 / TM))
