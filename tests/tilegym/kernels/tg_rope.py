# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/rope.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct


ConstInt = ct.Constant[int]


PAD_ZERO = ct.PaddingMode.ZERO


@ct.kernel
def _rope_kernel(
    q,
    k,
    cos,
    sin,
    COS_BS: ConstInt,
    SEQ_LEN: ConstInt,
    TILE_QH: ConstInt,
    TILE_KH: ConstInt,
    TILE_RD: ConstInt,
):
    """
    Unified RoPE kernel operating in-place on 4-D Q/K tensors.

    Works for both full RoPE (TILE_RD = head_dim // 2) and partial RoPE
    (TILE_RD = rope_dim // 2 < head_dim // 2).  Tile-space index
    ``dim_tile=0`` selects ``[0 : TILE_RD]`` and ``dim_tile=1`` selects
    ``[TILE_RD : 2*TILE_RD]``, so only the first ``2*TILE_RD`` elements
    of head_dim are rotated; the rest pass through unchanged.

    q shape: (bsz, num_q_heads, seq_len, head_dim)  — in-place
    k shape: (bsz, num_kv_heads, seq_len, head_dim)  — in-place
    cos shape: (cos_bs, seq_len, rope_dim)            — 3-D
    sin shape: (cos_bs, seq_len, rope_dim)            — 3-D
    """
    bid = ct.bid(0)
    batch_idx = bid // SEQ_LEN
    row_idx = bid % SEQ_LEN
    cos_batch_idx = 0 if COS_BS == 1 else batch_idx

    # ####################################################################
    # Load cos and sin values — first half of rope_dim
    # ####################################################################
    cos_row = ct.load(cos, index=(cos_batch_idx, row_idx, 0), shape=(1, 1, TILE_RD), padding_mode=PAD_ZERO).reshape(
        (1, TILE_RD)
    )
    sin_row = ct.load(sin, index=(cos_batch_idx, row_idx, 0), shape=(1, 1, TILE_RD), padding_mode=PAD_ZERO).reshape(
        (1, TILE_RD)
    )

    # ####################################################################
    # Process Q tensor — first half [0:rope_dim//2] and second half
    # [rope_dim//2:rope_dim] via tile-space dim_tile indexing
    # ####################################################################
    q_tile_1 = ct.load(
        q,
        index=(batch_idx, 0, row_idx, 0),
        shape=(1, TILE_QH, 1, TILE_RD),
        padding_mode=PAD_ZERO,
    ).reshape((TILE_QH, TILE_RD))
    q_tile_2 = ct.load(
        q,
        index=(batch_idx, 0, row_idx, 1),
        shape=(1, TILE_QH, 1, TILE_RD),
        padding_mode=PAD_ZERO,
    ).reshape((TILE_QH, TILE_RD))
    # y = [x1, x2] * [cos, cos] + [-x2, x1] * [sin, sin]
    new_q_tile_1 = q_tile_1 * cos_row - q_tile_2 * sin_row
    new_q_tile_2 = q_tile_2 * cos_row + q_tile_1 * sin_row
    ct.store(
        q,
        index=(batch_idx, 0, row_idx, 0),
        tile=new_q_tile_1.reshape((1, TILE_QH, 1, TILE_RD)).astype(q.dtype),
    )
    ct.store(
        q,
        index=(batch_idx, 0, row_idx, 1),
        tile=new_q_tile_2.reshape((1, TILE_QH, 1, TILE_RD)).astype(q.dtype),
    )

    # ####################################################################
    # Process K tensor — same pattern
    # ####################################################################
    k_tile_1 = ct.load(
        k,
        index=(batch_idx, 0, row_idx, 0),
        shape=(1, TILE_KH, 1, TILE_RD),
        padding_mode=PAD_ZERO,
    ).reshape((TILE_KH, TILE_RD))
    k_tile_2 = ct.load(
        k,
        index=(batch_idx, 0, row_idx, 1),
        shape=(1, TILE_KH, 1, TILE_RD),
        padding_mode=PAD_ZERO,
    ).reshape((TILE_KH, TILE_RD))
    # y = [x1, x2] * [cos, cos] + [-x2, x1] * [sin, sin]
    new_k_tile_1 = k_tile_1 * cos_row - k_tile_2 * sin_row
    new_k_tile_2 = k_tile_2 * cos_row + k_tile_1 * sin_row
    ct.store(
        k,
        index=(batch_idx, 0, row_idx, 0),
        tile=new_k_tile_1.reshape((1, TILE_KH, 1, TILE_RD)).astype(k.dtype),
    )
    ct.store(
        k,
        index=(batch_idx, 0, row_idx, 1),
        tile=new_k_tile_2.reshape((1, TILE_KH, 1, TILE_RD)).astype(k.dtype),
    )
