# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/mla.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import math
import cuda.tile as ct
from cuda.tile import RoundingMode as RMd


ConstInt = ct.Constant[int]


INV_LOG_2 = 1.0 / math.log(2)


@ct.kernel
def _prefill_mla_kernel(
    Q,
    QPE,
    K,
    KPE,
    V,
    Out,
    qk_scale: float,
    TILE_D: ConstInt,  # TILE_D = hidden_size
    TILE_KPE: ConstInt,  # TILE_KPE = position embedding size
    H: int,
    TILE_M: ConstInt,
    TILE_N: ConstInt,
    QUERY_GROUP_SIZE: ConstInt,
):
    bid_x = ct.bid(0)
    bid_y = ct.bid(1)
    batch_idx = bid_y // H
    head_idx = bid_y % H
    if QUERY_GROUP_SIZE > 0:
        off_kv_h = head_idx // QUERY_GROUP_SIZE
    else:
        off_kv_h = head_idx
    qk_scale = qk_scale * INV_LOG_2

    # Initialize offsets
    offs_m = bid_x * TILE_M + ct.arange(TILE_M, dtype=ct.int32)
    offs_m = ct.expand_dims(offs_m, 1)
    offs_n = ct.arange(TILE_N, dtype=ct.int32)
    offs_n = ct.expand_dims(offs_n, 0)

    # Initialize m, l, acc
    m_i = ct.full((TILE_M,), -math.inf, dtype=ct.float32)
    l_i = ct.full((TILE_M,), 1.0, dtype=ct.float32)
    acc = ct.full((TILE_M, TILE_D), 0.0, dtype=ct.float32)

    # Load q
    q = ct.load(
        Q,
        index=(batch_idx, head_idx, bid_x, 0),
        shape=(1, 1, TILE_M, TILE_D),
    )
    q = ct.reshape(q, (TILE_M, TILE_D))

    # Load qpe
    qpe = ct.load(
        QPE,
        index=(batch_idx, head_idx, bid_x, 0),
        shape=(1, 1, TILE_M, TILE_KPE),
    )
    qpe = ct.reshape(qpe, (TILE_M, TILE_KPE))

    # Stage 1 inline:
    start_m = bid_x
    mask_start = start_m * TILE_M
    hi = (start_m + 1) * TILE_M
    mask_start = mask_start // TILE_N
    hi = ct.cdiv(hi, TILE_N)
    for j in range(0, hi):
        curr_n = j * TILE_N
        # Compute qk
        k = ct.load(
            K,
            index=(batch_idx, off_kv_h, 0, j),
            shape=(1, 1, TILE_D, TILE_N),
            order=(0, 1, 3, 2),
        )
        k = ct.reshape(k, (TILE_D, TILE_N))
        qk = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)
        qk = ct.mma(q, k, qk)

        # Add position embedding contribution
        kpe = ct.load(
            KPE,
            index=(batch_idx, 0, 0, j),
            shape=(1, 1, TILE_KPE, TILE_N),
            order=(0, 1, 3, 2),
        )
        kpe = ct.reshape(kpe, (TILE_KPE, TILE_N))
        qk = ct.mma(qpe, kpe, qk)

        # Apply mask
        if j >= mask_start:
            mask = offs_m >= (curr_n + offs_n)
            qk = ct.where(mask, qk, -1.0e6)

        # Stage 1 special handling
        m_ij = ct.maximum(m_i, ct.max(qk, axis=-1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]

        p = ct.exp2(qk, flush_to_zero=True)
        l_ij = ct.sum(p, axis=-1)
        alpha = ct.exp2(m_i - m_ij, flush_to_zero=True)

        # Update m_i and l_i
        l_i = l_i * alpha + l_ij
        # Scale acc
        acc = acc * alpha[:, None]

        # Compute pv
        v = ct.load(
            V,
            index=(batch_idx, off_kv_h, j, 0),
            shape=(1, 1, TILE_N, TILE_D),
        )
        v = ct.reshape(v, (TILE_N, TILE_D))
        p = ct.astype(p, Q.dtype)
        acc = ct.mma(p, v, acc)
        m_i = m_ij

    acc = ct.truediv(acc, l_i[:, None], flush_to_zero=True, rounding_mode=RMd.APPROX)
    acc = ct.reshape(acc, (1, 1, TILE_M, TILE_D))
    acc = ct.astype(acc, Q.dtype)
    ct.store(Out, index=(batch_idx, head_idx, bid_x, 0), tile=acc)
