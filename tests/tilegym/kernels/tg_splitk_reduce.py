# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/splitk_reduce.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import math
import cuda.tile as ct


ConstInt = ct.Constant[int]


ConstBool = ct.Constant[bool]


@ct.kernel(occupancy=ct.ByTarget(sm_80=2, default=4))
def _splitk_reduce_kernel(
    attn_splitk_out,
    lse_splitk_out,
    attn_out,
    B: ConstInt,
    S_KV: ConstInt,
    NUM_HEADS: ConstInt,
    HEAD_DIM: ConstInt,
    NUM_KV_SPLITS: ConstInt,
    NUM_KV_SPLITS_POW2: ConstInt,
    TILE_D: ConstInt,
    USE_DOT: ConstBool,
):
    # Get program IDs
    batch_id = ct.bid(0)  # batch index
    head_id = ct.bid(1)  # head index
    tile_id = ct.bid(2)  # tile index

    # Get data type
    dtype = attn_out.dtype

    # Load intermediate attention results with latency hint
    out_splitk = ct.load(
        attn_splitk_out,
        (batch_id, head_id, 0, tile_id),
        shape=(1, 1, NUM_KV_SPLITS_POW2, TILE_D),
        order=(0, 1, 2, 3),
        allow_tma=True,
        latency=2,
        padding_mode=ct.PaddingMode.ZERO,
    )
    out_splitk = ct.reshape(out_splitk, (NUM_KV_SPLITS_POW2, TILE_D))

    # Load and process lse results
    offs_lse = ct.arange(NUM_KV_SPLITS_POW2, dtype=ct.int32)
    lse_splitk = ct.gather(
        lse_splitk_out,
        (batch_id, head_id, offs_lse),
        padding_value=-math.inf,
    )

    # Compute lse_max
    lse_max = ct.max(lse_splitk)

    # Compute sumexp_normalized_splitk
    sumexp_normalized_splitk = ct.exp2(lse_splitk - lse_max)
    sumexp_normalized_splitk = ct.astype(sumexp_normalized_splitk, ct.float32)

    # Compute sumexp_normalized
    sumexp_normalized = ct.sum(sumexp_normalized_splitk)

    # Compute numerator_normalized
    if USE_DOT:
        mma_result = ct.mma(
            sumexp_normalized_splitk[None, :],
            ct.astype(out_splitk, ct.float32),
            ct.zeros((1, TILE_D), dtype=ct.float32),
        )
        numerator_normalized = ct.extract(mma_result, (0, 0), shape=(1, TILE_D))
    else:
        numerator_normalized = ct.sum(
            out_splitk * ct.reshape(sumexp_normalized_splitk, (NUM_KV_SPLITS_POW2, 1)),
            axis=0,
        )

    # Compute final accumulator
    acc = numerator_normalized / sumexp_normalized

    # Cast to output dtype before storing
    acc = ct.astype(acc, dtype)

    # Store final result with latency hint
    ct.store(
        attn_out,
        index=(batch_id, head_id, tile_id),
        tile=ct.reshape(acc, (1, 1, TILE_D)),
        order=(0, 1, 2),
        allow_tma=True,
        latency=2,
    )
