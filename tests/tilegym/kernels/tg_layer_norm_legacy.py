# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/layer_norm_legacy.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct


PAD_ZERO = ct.PaddingMode.ZERO


@ct.kernel
def _layer_norm_fwd_kernel(
    X,
    Y,
    W,
    B,
    Mean,
    Rstd,
    N: ct.Constant[int],
    EPS: ct.Constant[float],
    WEIGHT_SHIFT: ct.Constant[float],
    BLOCK_SIZE: ct.Constant[int],
):
    # X, Y are 2D (M, N); row index from grid. Bounds (row < M, cols < N) mask partial block.
    row = ct.bid(0)
    row_tile = ct.full((BLOCK_SIZE,), row, dtype=ct.int32)

    # Compute mean
    _mean = ct.zeros((BLOCK_SIZE,), dtype=ct.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ct.arange(BLOCK_SIZE, dtype=ct.int32)
        a = ct.gather(X, (row_tile, cols), padding_value=0)
        a = ct.astype(a, ct.float32)
        _mean = _mean + a
    mean = ct.sum(_mean, axis=0) / N

    # Compute variance
    _var = ct.zeros((BLOCK_SIZE,), dtype=ct.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ct.arange(BLOCK_SIZE, dtype=ct.int32)
        x = ct.gather(X, (row_tile, cols), padding_value=0)
        x = ct.astype(x, ct.float32)
        mask = cols < N
        x = ct.where(mask, x - mean, ct.zeros((BLOCK_SIZE,), dtype=ct.float32))
        _var = _var + x * x
    var = ct.sum(_var, axis=0) / N
    rstd = ct.rsqrt(var + EPS)

    # Write mean / rstd (1D arrays)
    mean_offset = ct.full((1,), row, dtype=ct.int32)
    mean_val_reshaped = ct.reshape(mean, (1,))
    ct.scatter(Mean, mean_offset, mean_val_reshaped)

    rstd_offset = ct.full((1,), row, dtype=ct.int32)
    rstd_val_reshaped = ct.reshape(rstd, (1,))
    ct.scatter(Rstd, rstd_offset, rstd_val_reshaped)

    # Normalize and apply linear transformation; scatter to 2D Y so cols < N masks partial block
    for off in range(0, N, BLOCK_SIZE):
        cols = off + ct.arange(BLOCK_SIZE, dtype=ct.int32)
        w = ct.gather(W, cols, padding_value=0)
        w = w + WEIGHT_SHIFT
        b = ct.gather(B, cols, padding_value=0)
        x = ct.gather(X, (row_tile, cols), padding_value=0)
        x = ct.astype(x, ct.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        y = ct.astype(y, X.dtype)
        ct.scatter(Y, (row_tile, cols), y)


@ct.kernel
def _persistent_layer_norm_fwd_kernel(
    X,
    Y,
    W,
    B,
    Mean,
    Rstd,
    N: ct.Constant[int],
    D: ct.Constant[int],
    EPS: ct.Constant[float],
    STRIDE_X: ct.Constant[int],
    STRIDE_Y: ct.Constant[int],
    IS_SWISH: ct.Constant[int],
    TRAINING: ct.Constant[int],
    BLOCK_N: ct.Constant[int],
    BLOCK_D: ct.Constant[int],
    COMPUTE_MEAN_AND_RSTD: ct.Constant[int],
    NUM_SMS: ct.Constant[int],
):
    """Persistent layer norm forward kernel with cuTile."""
    pid = ct.bid(0)
    upper_bound = ct.cdiv(N, BLOCK_N)

    # TMA handles padding (defaults to 0) automatically when BLOCK_D > D
    w = ct.load(W, index=(0,), shape=(BLOCK_D,), padding_mode=PAD_ZERO)
    b = ct.load(B, index=(0,), shape=(BLOCK_D,), padding_mode=PAD_ZERO)

    w = ct.astype(w, ct.float32)
    b = ct.astype(b, ct.float32)

    for current_pid in range(pid, upper_bound, NUM_SMS):
        row_offset = current_pid * BLOCK_N
        rows = row_offset + ct.arange(BLOCK_N, dtype=ct.int32)

        x_tile = ct.load(X, index=(current_pid, 0), shape=(BLOCK_N, BLOCK_D), padding_mode=PAD_ZERO, latency=4)
        x = ct.astype(x_tile, ct.float32)

        if COMPUTE_MEAN_AND_RSTD:
            x_squared = x * x
            avg_square = ct.sum(x_squared, axis=1) / D
            mean = ct.sum(x, axis=1) / D
            var = avg_square - mean * mean
            rstd = ct.rsqrt(var + EPS)
            if TRAINING:
                ct.store(Mean, index=(current_pid,), tile=mean, allow_tma=False)
                ct.store(Rstd, index=(current_pid,), tile=rstd, allow_tma=False)
        else:
            mean = ct.gather(Mean, rows)
            rstd = ct.gather(Rstd, rows)

        if BLOCK_N != 1:
            mean = mean[:, None]
            rstd = rstd[:, None]

        # Normalize and apply linear transformation
        x_hat = (x - mean) * rstd
        w_broadcasted = w[None, :]
        b_broadcasted = b[None, :]
        y = x_hat * w_broadcasted + b_broadcasted

        if IS_SWISH:
            y = ct.sigmoid(y) * x
        y = ct.astype(y, ct.bfloat16)
        ct.store(Y, index=(current_pid, 0), tile=y, allow_tma=False)
