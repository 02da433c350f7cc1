# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/attention.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import math
import cuda.tile as ct
from cuda.tile import RoundingMode as RMd


INV_LOG_2 = 1.0 / math.log(2)


ConstInt = ct.Constant[int]


ConstBool = ct.Constant[bool]


def fmha_kernel_impl(
    Q,
    K,
    V,
    Out,
    qk_scale: float,
    input_pos: int,
    TILE_D: ConstInt,  # TILE_D = hidden_size
    H: ConstInt,
    TILE_M: ConstInt,
    TILE_N: ConstInt,
    QUERY_GROUP_SIZE: ConstInt,
    CAUSAL: ConstBool,
    EVEN_K: ConstBool,
    bid_x: int,
    bid_y: int,
):
    """
    cuTile device function for Fused Multi-Head Attention (FMHA).
    Computes attention output for a specific batch item and head, using tiling and online softmax.

    Args:
        bid_x: Block ID in X dimension
        bid_y: Block ID in Y dimension
    """
    # Map block IDs to batch and head indices
    batch_idx = bid_y // H
    head_idx = bid_y % H
    off_kv_h = head_idx // QUERY_GROUP_SIZE

    # Adjust qk_scale for exp2
    qk_scale = qk_scale * INV_LOG_2

    # Initialize offsets for current query tile (M-dimension)
    offs_m = bid_x * TILE_M + ct.arange(TILE_M, dtype=ct.int32)  # [TILE_M]
    offs_m += input_pos
    offs_m = offs_m[:, None]  # [TILE_M, 1]

    # Initialize local offsets for key/value tile (N-dimension)
    offs_n_tile = ct.arange(TILE_N, dtype=ct.int32)  # [TILE_N]
    offs_n_tile = offs_n_tile[None, :]  # [1, TILE_N]

    # Initialize online softmax accumulators in float32 for stability
    m_i = ct.full((TILE_M, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((TILE_M, 1), 0.0, dtype=ct.float32)
    acc = ct.full((TILE_M, TILE_D), 0.0, dtype=ct.float32)

    # Load query tile for this batch, head, and M-chunk.
    # PaddingMode.ZERO ensures OOB rows (when TILE_M > q_len) read as
    # zeros rather than stale memory, preventing NaN from softmax on
    # recycled allocations.
    q = ct.load(
        Q,
        index=(batch_idx, head_idx, bid_x, 0),
        shape=(1, 1, TILE_M, TILE_D),
        padding_mode=ct.PaddingMode.ZERO,
    ).reshape((TILE_M, TILE_D))  # [TILE_M, TILE_D]

    # Loop over k, v and update accumulator
    m_end = input_pos + (bid_x + 1) * TILE_M
    k_seqlen = K.shape[2]
    if CAUSAL:
        # When kv pos could exceed q pos
        mask_start = (input_pos + bid_x * TILE_M) // TILE_N
        # When kv pos could exceed k_seqlen
        mask_start = min(mask_start, k_seqlen // TILE_N)
        Tc = ct.cdiv(min(m_end, k_seqlen), TILE_N)
    else:
        Tc = ct.cdiv(k_seqlen, TILE_N)
        mask_start = k_seqlen // TILE_N

    # Loop over K, V blocks (N-dimension chunks)
    for j in range(0, Tc):
        k = ct.load(
            K,
            index=(batch_idx, off_kv_h, 0, j),
            shape=(1, 1, TILE_D, TILE_N),
            order=(0, 1, 3, 2),
            latency=2,
        )
        k = k.reshape((TILE_D, TILE_N))  # [TILE_D, TILE_N]
        qk = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        qk = ct.mma(q, k, qk)  # [TILE_M, TILE_N]

        if (CAUSAL or not EVEN_K) and j >= mask_start:
            offs_n = j * TILE_N + offs_n_tile
            mask = ct.full((TILE_M, TILE_N), True, dtype=ct.bool_)
            # Out of bound mask
            if not EVEN_K:
                mask = mask & (offs_n < k_seqlen)
            # Causal mask
            if CAUSAL:
                mask = mask & (offs_m >= offs_n)  # [TILE_M, TILE_N]
            mask = ct.where(mask, 0.0, -math.inf)  # [TILE_M, TILE_N]
            qk += mask

        # Moving qk_scale multiplication after reduce_max is to improve performance.
        m_ij = max(m_i, ct.max(qk, axis=-1, keepdims=True) * qk_scale)
        qk = qk * qk_scale - m_ij  # [TILE_M, TILE_N]

        # Attention weights
        p = ct.exp2(qk, flush_to_zero=True)  # [TILE_M, TILE_N]
        l_ij = ct.sum(p, axis=-1, keepdims=True)  # [TILE_M, 1]
        alpha = ct.exp2(m_i - m_ij, flush_to_zero=True)  # [TILE_M, 1]
        # Update m_i and l_i
        l_i = l_i * alpha + l_ij  # [TILE_M, 1]
        # Scale acc
        acc = acc * alpha  # [TILE_M, TILE_N]

        v = ct.load(
            V,
            index=(batch_idx, off_kv_h, j, 0),
            shape=(1, 1, TILE_N, TILE_D),
            latency=4,
        ).reshape((TILE_N, TILE_D))  # [TILE_N, TILE_D]
        p = p.astype(Q.dtype)
        acc = ct.mma(p, v, acc)  # [TILE_M, TILE_N]
        m_i = m_ij  # [TILE_M, 1]

    acc = ct.truediv(acc, l_i, flush_to_zero=True, rounding_mode=RMd.APPROX)
    acc = acc.reshape((1, 1, TILE_M, TILE_D)).astype(Out.dtype)
    ct.store(Out, index=(batch_idx, head_idx, bid_x, 0), tile=acc)


@ct.kernel
def _fmha_fwd_kernel_with_lse(
    Q,
    K,
    V,
    Out,
    LSE,  # Log-Sum-Exp output: flattened to 1D [batch * num_heads * seq_len]
    qk_scale: float,
    input_pos: int,
    TILE_D: ConstInt,
    H: ConstInt,
    B: ConstInt,  # Batch size
    SEQ_LEN: ConstInt,  # Sequence length
    TILE_M: ConstInt,
    TILE_N: ConstInt,
    QUERY_GROUP_SIZE: ConstInt,
    CAUSAL: ConstBool,
    EVEN_K: ConstBool,
):
    """
    FMHA forward kernel that also saves the log-sum-exp (LSE) for backward pass.
    LSE = m + log2(l) where m is the running max and l is the running sum of exp.
    """
    bid_x = ct.bid(0)
    bid_y = ct.bid(1)
    batch_idx = bid_y // H
    head_idx = bid_y % H
    off_kv_h = head_idx // QUERY_GROUP_SIZE

    qk_scale = qk_scale * INV_LOG_2

    offs_m = bid_x * TILE_M + ct.arange(TILE_M, dtype=ct.int32)
    offs_m += input_pos
    offs_m = offs_m[:, None]

    offs_n_tile = ct.arange(TILE_N, dtype=ct.int32)
    offs_n_tile = offs_n_tile[None, :]

    m_i = ct.full((TILE_M, 1), -math.inf, dtype=ct.float32)
    l_i = ct.full((TILE_M, 1), 0.0, dtype=ct.float32)
    acc = ct.full((TILE_M, TILE_D), 0.0, dtype=ct.float32)

    q = ct.load(Q, index=(batch_idx, head_idx, bid_x, 0), shape=(1, 1, TILE_M, TILE_D)).reshape((TILE_M, TILE_D))

    m_end = input_pos + (bid_x + 1) * TILE_M
    k_seqlen = K.shape[2]
    if CAUSAL:
        mask_start = (input_pos + bid_x * TILE_M) // TILE_N
        mask_start = min(mask_start, k_seqlen // TILE_N)
        Tc = ct.cdiv(min(m_end, k_seqlen), TILE_N)
    else:
        Tc = ct.cdiv(k_seqlen, TILE_N)
        mask_start = k_seqlen // TILE_N

    for j in range(0, Tc):
        k = ct.load(
            K,
            index=(batch_idx, off_kv_h, 0, j),
            shape=(1, 1, TILE_D, TILE_N),
            order=(0, 1, 3, 2),
            latency=2,
        )
        k = k.reshape((TILE_D, TILE_N))
        qk = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        qk = ct.mma(q, k, qk)

        if (CAUSAL or not EVEN_K) and j >= mask_start:
            offs_n = j * TILE_N + offs_n_tile
            mask = ct.full((TILE_M, TILE_N), True, dtype=ct.bool_)
            if not EVEN_K:
                mask = mask & (offs_n < k_seqlen)
            if CAUSAL:
                mask = mask & (offs_m >= offs_n)
            mask = ct.where(mask, 0.0, -math.inf)
            qk += mask

        m_ij = max(m_i, ct.max(qk, axis=-1, keepdims=True) * qk_scale)
        qk = qk * qk_scale - m_ij

        p = ct.exp2(qk, flush_to_zero=True)
        l_ij = ct.sum(p, axis=-1, keepdims=True)
        alpha = ct.exp2(m_i - m_ij, flush_to_zero=True)

        l_i = l_i * alpha + l_ij
        acc = acc * alpha

        v = ct.load(
            V,
            index=(batch_idx, off_kv_h, j, 0),
            shape=(1, 1, TILE_N, TILE_D),
            latency=4,
        ).reshape((TILE_N, TILE_D))
        p = p.astype(Q.dtype)
        acc = ct.mma(p, v, acc)
        m_i = m_ij

    # Final normalization
    acc = ct.truediv(acc, l_i, flush_to_zero=True, rounding_mode=RMd.APPROX)
    acc = acc.reshape((1, 1, TILE_M, TILE_D)).astype(Out.dtype)
    ct.store(Out, index=(batch_idx, head_idx, bid_x, 0), tile=acc)

    # Store LSE = m + log2(l) for backward pass
    # This is used to reconstruct softmax probabilities in backward
    lse_tile = m_i + ct.log2(l_i)  # [TILE_M, 1]
    lse_tile = lse_tile.reshape((TILE_M,))  # [TILE_M]

    # Use scatter for 1D-like storage since ct.store with tile indexing doesn't work for 3D tensors
    # LSE is passed as 1D flattened array [batch * heads * seq_len]
    # Compute linear index for this batch/head/tile
    lse_offsets = ct.arange(TILE_M, dtype=ct.int32)
    lse_indices = batch_idx * (H * SEQ_LEN) + head_idx * SEQ_LEN + bid_x * TILE_M + lse_offsets
    ct.scatter(LSE, lse_indices, lse_tile)


@ct.kernel(occupancy=2)
def _fmha_bwd_preprocess_kernel(
    O,
    dO,
    Delta,  # Output: row-wise dot product of O and dO (flattened 1D)
    TILE_M: ConstInt,
    TILE_D: ConstInt,
    H: ConstInt,
    SEQ_LEN: ConstInt,
):
    """
    Preprocess for backward: compute Delta[i] = sum(O[i] * dO[i]) for each query position.
    This is needed for the backward pass gradient computation.
    """
    bid_m = ct.bid(0)
    bid_hz = ct.bid(1)
    batch_idx = bid_hz // H
    head_idx = bid_hz % H

    # Load O and dO tiles using tile-based indexing (bid_m is tile index)
    o_tile = ct.load(
        O, index=(batch_idx, head_idx, bid_m, 0), shape=(1, 1, TILE_M, TILE_D), padding_mode=ct.PaddingMode.ZERO
    )
    o_tile = o_tile.reshape((TILE_M, TILE_D)).astype(ct.float32)

    do_tile = ct.load(
        dO, index=(batch_idx, head_idx, bid_m, 0), shape=(1, 1, TILE_M, TILE_D), padding_mode=ct.PaddingMode.ZERO
    )
    do_tile = do_tile.reshape((TILE_M, TILE_D)).astype(ct.float32)

    # Compute row-wise dot product: Delta[i] = sum_d(O[i,d] * dO[i,d])
    delta = ct.sum(o_tile * do_tile, axis=-1, keepdims=False)  # [TILE_M]

    # Store Delta using scatter (Delta is passed as 1D flattened)
    delta_offsets = ct.arange(TILE_M, dtype=ct.int32)
    delta_indices = batch_idx * (H * SEQ_LEN) + head_idx * SEQ_LEN + bid_m * TILE_M + delta_offsets
    ct.scatter(Delta, delta_indices, delta)


@ct.kernel
def _fmha_bwd_dkdv_kernel(
    Q,
    K,
    V,
    dO,
    dK,
    dV,
    LSE,  # Passed as 1D flattened
    Delta,  # Passed as 1D flattened
    qk_scale: float,
    TILE_D: ConstInt,
    H_Q: ConstInt,  # Number of query heads
    H_KV: ConstInt,  # Number of KV heads
    SEQ_LEN: ConstInt,
    TILE_M: ConstInt,  # Query tile size for inner loop
    TILE_N: ConstInt,  # K/V tile size (this block's tile)
    QUERY_GROUP_SIZE: ConstInt,
    CAUSAL: ConstBool,
):
    """
    Compute dK and dV gradients.
    Each block handles one K/V tile for one KV head and iterates over all Q tiles
    from all query heads that share this KV head.

    For GQA (Grouped Query Attention), multiple query heads share the same KV head.
    This kernel accumulates gradients from all query heads in the group.
    """
    bid_n = ct.bid(0)  # K/V tile index
    bid_hz = ct.bid(1)  # batch_idx * H_KV + kv_head_idx
    batch_idx = bid_hz // H_KV
    kv_head_idx = bid_hz % H_KV

    q_seqlen = Q.shape[2]

    # Scale for exp2
    qk_scale_log2 = qk_scale * INV_LOG_2

    # Initialize accumulators for dK and dV
    dk_acc = ct.full((TILE_N, TILE_D), 0.0, dtype=ct.float32)
    dv_acc = ct.full((TILE_N, TILE_D), 0.0, dtype=ct.float32)

    # Load K and V for this block (same for all query heads in the group)
    # Use latency hint for TMA optimization
    k = ct.load(
        K,
        index=(batch_idx, kv_head_idx, bid_n, 0),
        shape=(1, 1, TILE_N, TILE_D),
        padding_mode=ct.PaddingMode.ZERO,
        latency=2,
    )
    k = k.reshape((TILE_N, TILE_D))
    v = ct.load(
        V,
        index=(batch_idx, kv_head_idx, bid_n, 0),
        shape=(1, 1, TILE_N, TILE_D),
        padding_mode=ct.PaddingMode.ZERO,
        latency=2,
    )
    v = v.reshape((TILE_N, TILE_D))

    # Offsets for this K/V tile
    offs_n = bid_n * TILE_N + ct.arange(TILE_N, dtype=ct.int32)
    offs_n = offs_n[:, None]  # [TILE_N, 1]

    # Determine loop bounds based on causal masking
    if CAUSAL:
        start_m = bid_n * TILE_N // TILE_M
    else:
        start_m = 0
    num_m_tiles = ct.cdiv(q_seqlen, TILE_M)

    lse_delta_offsets = ct.arange(TILE_M, dtype=ct.int32)

    # Loop over all query heads that share this KV head
    for qh_offset in range(QUERY_GROUP_SIZE):
        q_head_idx = kv_head_idx * QUERY_GROUP_SIZE + qh_offset

        # Precompute base index for LSE/Delta gather for this query head
        lse_delta_base = batch_idx * (H_Q * SEQ_LEN) + q_head_idx * SEQ_LEN

        # Loop over Q tiles for this query head
        for m_idx in range(start_m, num_m_tiles):
            offs_m = m_idx * TILE_M + ct.arange(TILE_M, dtype=ct.int32)
            offs_m = offs_m[None, :]  # [1, TILE_M]

            # Load Q tile for this query head (with TMA latency hints)
            q = ct.load(
                Q,
                index=(batch_idx, q_head_idx, m_idx, 0),
                shape=(1, 1, TILE_M, TILE_D),
                padding_mode=ct.PaddingMode.ZERO,
                latency=2,
            )
            q = q.reshape((TILE_M, TILE_D))

            # Load dO tile for this query head
            do = ct.load(
                dO,
                index=(batch_idx, q_head_idx, m_idx, 0),
                shape=(1, 1, TILE_M, TILE_D),
                padding_mode=ct.PaddingMode.ZERO,
                latency=3,
            )
            do = do.reshape((TILE_M, TILE_D))

            # Load LSE and Delta for this query head
            lse_indices = lse_delta_base + m_idx * TILE_M + lse_delta_offsets
            lse = ct.gather(LSE, lse_indices)  # [TILE_M]
            delta = ct.gather(Delta, lse_indices)  # [TILE_M]

            # Compute K @ Q^T: [TILE_N, TILE_M]
            qk = ct.full((TILE_N, TILE_M), 0.0, dtype=ct.float32)
            q_t = q.permute((1, 0))  # [TILE_D, TILE_M]
            qk = ct.mma(k, q_t, qk)  # [TILE_N, TILE_M]

            # Compute P = softmax(QK^T) = exp2(QK * scale - LSE)
            lse_broadcast = lse[None, :]  # [1, TILE_M]
            p_t = ct.exp2(qk * qk_scale_log2 - lse_broadcast, flush_to_zero=True)  # [TILE_N, TILE_M]

            # Apply causal mask
            if CAUSAL:
                mask = offs_n <= offs_m  # [TILE_N, TILE_M]: k_pos <= q_pos
                p_t = ct.where(mask, p_t, 0.0)

            # Compute dV += P^T @ dO
            p_t_cast = p_t.astype(Q.dtype)
            dv_acc = ct.mma(p_t_cast, do, dv_acc)  # [TILE_N, TILE_D]

            # Compute dP = dO @ V^T: we need dP^T = V @ dO^T
            do_t = do.permute((1, 0))  # [TILE_D, TILE_M]
            dp_t = ct.full((TILE_N, TILE_M), 0.0, dtype=ct.float32)
            dp_t = ct.mma(v, do_t, dp_t)  # [TILE_N, TILE_M]

            # Compute dS = P * (dP - Delta)
            delta_broadcast = delta[None, :]  # [1, TILE_M]
            ds_t = p_t * (dp_t - delta_broadcast)  # [TILE_N, TILE_M]

            # Compute dK += dS^T @ Q
            ds_t_cast = ds_t.astype(Q.dtype)
            dk_acc = ct.mma(ds_t_cast, q, dk_acc)  # [TILE_N, TILE_D]

    # Apply scale to dK
    dk_acc = dk_acc * qk_scale

    # Store dK and dV (now properly accumulated from all query heads in the group)
    dk_store = dk_acc.reshape((1, 1, TILE_N, TILE_D)).astype(dK.dtype)
    dv_store = dv_acc.reshape((1, 1, TILE_N, TILE_D)).astype(dV.dtype)
    ct.store(dK, index=(batch_idx, kv_head_idx, bid_n, 0), tile=dk_store)
    ct.store(dV, index=(batch_idx, kv_head_idx, bid_n, 0), tile=dv_store)


@ct.kernel
def _fmha_bwd_dq_kernel(
    Q,
    K,
    V,
    dO,
    dQ,
    LSE,  # Passed as 1D flattened
    Delta,  # Passed as 1D flattened
    qk_scale: float,
    TILE_D: ConstInt,
    H: ConstInt,
    SEQ_LEN: ConstInt,
    TILE_M: ConstInt,  # Q tile size (this block's tile)
    TILE_N: ConstInt,  # K/V tile size for inner loop
    QUERY_GROUP_SIZE: ConstInt,
    CAUSAL: ConstBool,
):
    """
    Compute dQ gradient.
    Each block handles one Q tile and iterates over all K/V tiles.
    """
    bid_m = ct.bid(0)  # Q tile index
    bid_hz = ct.bid(1)
    batch_idx = bid_hz // H
    head_idx = bid_hz % H
    off_kv_h = head_idx // QUERY_GROUP_SIZE

    k_seqlen = K.shape[2]

    # Scale for exp2
    qk_scale_log2 = qk_scale * INV_LOG_2

    # Initialize accumulator for dQ
    dq_acc = ct.full((TILE_M, TILE_D), 0.0, dtype=ct.float32)

    # Load Q, dO for this block using tile-based indexing (with TMA latency hints)
    q = ct.load(
        Q,
        index=(batch_idx, head_idx, bid_m, 0),
        shape=(1, 1, TILE_M, TILE_D),
        padding_mode=ct.PaddingMode.ZERO,
        latency=2,
    )
    q = q.reshape((TILE_M, TILE_D))
    do = ct.load(
        dO,
        index=(batch_idx, head_idx, bid_m, 0),
        shape=(1, 1, TILE_M, TILE_D),
        padding_mode=ct.PaddingMode.ZERO,
        latency=2,
    )
    do = do.reshape((TILE_M, TILE_D))

    # Load LSE and Delta using gather (they're 1D flattened)
    lse_delta_indices = (
        batch_idx * (H * SEQ_LEN) + head_idx * SEQ_LEN + bid_m * TILE_M + ct.arange(TILE_M, dtype=ct.int32)
    )
    lse = ct.gather(LSE, lse_delta_indices).reshape((TILE_M, 1))  # [TILE_M, 1]
    delta = ct.gather(Delta, lse_delta_indices).reshape((TILE_M, 1))  # [TILE_M, 1]

    # Offsets for this Q tile
    offs_m = bid_m * TILE_M + ct.arange(TILE_M, dtype=ct.int32)
    offs_m = offs_m[:, None]  # [TILE_M, 1]

    # Determine loop bounds based on causal masking
    if CAUSAL:
        # Only process K/V tiles where k_pos <= q_pos (at least partially)
        end_n = ct.cdiv((bid_m + 1) * TILE_M, TILE_N)
        end_n = min(end_n, ct.cdiv(k_seqlen, TILE_N))
    else:
        end_n = ct.cdiv(k_seqlen, TILE_N)

    # Loop over K/V tiles
    for n_idx in range(0, end_n):
        offs_n = n_idx * TILE_N + ct.arange(TILE_N, dtype=ct.int32)
        offs_n = offs_n[None, :]  # [1, TILE_N]

        # Load K and V tiles using tile-based indexing (with TMA latency hints)
        k = ct.load(
            K,
            index=(batch_idx, off_kv_h, n_idx, 0),
            shape=(1, 1, TILE_N, TILE_D),
            padding_mode=ct.PaddingMode.ZERO,
            latency=2,
        )
        k = k.reshape((TILE_N, TILE_D))
        v = ct.load(
            V,
            index=(batch_idx, off_kv_h, n_idx, 0),
            shape=(1, 1, TILE_N, TILE_D),
            padding_mode=ct.PaddingMode.ZERO,
            latency=4,
        )
        v = v.reshape((TILE_N, TILE_D))

        # Compute Q @ K^T: [TILE_M, TILE_N]
        k_t = k.permute((1, 0))  # [TILE_D, TILE_N]
        qk = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        qk = ct.mma(q, k_t, qk)  # [TILE_M, TILE_N]

        # Compute P = softmax(QK^T * scale)
        p = ct.exp2(qk * qk_scale_log2 - lse, flush_to_zero=True)  # [TILE_M, TILE_N]

        # Apply causal mask
        if CAUSAL:
            mask = offs_m >= offs_n  # [TILE_M, TILE_N]: q_pos >= k_pos
            p = ct.where(mask, p, 0.0)

        # Compute dP = dO @ V^T: [TILE_M, TILE_N]
        v_t = v.permute((1, 0))  # [TILE_D, TILE_N]
        dp = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        dp = ct.mma(do, v_t, dp)  # [TILE_M, TILE_N]

        # Compute dS = P * (dP - Delta)
        ds = p * (dp - delta)  # [TILE_M, TILE_N]

        # Compute dQ += dS @ K
        ds_cast = ds.astype(Q.dtype)
        dq_acc = ct.mma(ds_cast, k, dq_acc)  # [TILE_M, TILE_D]

    # Apply scale to dQ
    dq_acc = dq_acc * qk_scale

    # Store dQ using tile-based indexing
    dq_store = dq_acc.reshape((1, 1, TILE_M, TILE_D)).astype(dQ.dtype)
    ct.store(dQ, index=(batch_idx, head_idx, bid_m, 0), tile=dq_store)


@ct.kernel
def _fmha_kernel(
    Q,
    K,
    V,
    Out,
    qk_scale: float,
    input_pos: int,
    TILE_D: ConstInt,
    H: ConstInt,
    TILE_M: ConstInt,
    TILE_N: ConstInt,
    QUERY_GROUP_SIZE: ConstInt,
    CAUSAL: ConstBool,
    EVEN_K: ConstBool,
):
    """
    cuTile kernel wrapper for Fused Multi-Head Attention (FMHA).
    This wrapper calls the impl function fmha_kernel_impl.
    """
    bid_x = ct.bid(0)
    bid_y = ct.bid(1)

    fmha_kernel_impl(
        Q,
        K,
        V,
        Out,
        qk_scale,
        input_pos,
        TILE_D,
        H,
        TILE_M,
        TILE_N,
        QUERY_GROUP_SIZE,
        CAUSAL,
        EVEN_K,
        bid_x,
        bid_y,
    )
