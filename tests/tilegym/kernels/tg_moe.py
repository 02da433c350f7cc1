# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/moe.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct


@ct.kernel
def _fused_moe_kernel(
    # Pointers to matrices
    a_ptr,
    b_ptr,
    c_ptr,
    a_scale_ptr,
    b_scale_ptr,
    topk_weights_ptr,
    sorted_token_ids_ptr,
    expert_ids_ptr,
    num_tokens_post_padded_ptr,
    # Matrix dimensions
    N: ct.Constant[int],
    K: ct.Constant[int],
    EM: int,
    num_valid_tokens: int,
    GROUP_N: ct.Constant[int],
    GROUP_K: ct.Constant[int],
    # Tile sizes and configuration (Meta-parameters)
    TILE_SIZE_M: ct.Constant[int],
    TILE_SIZE_N: ct.Constant[int],
    TILE_SIZE_K: ct.Constant[int],
    GROUP_SIZE_M: ct.Constant[int],
    MUL_ROUTED_WEIGHT: ct.Constant[int],
    TOP_K: ct.Constant[int],
    USE_FP8_W8A8: ct.Constant[int],
    USE_INT8_W8A16: ct.Constant[int],
    EVEN_KS: ct.Constant[int],
    A_STRIDE_1: ct.Constant[int],  # Original A shape[1] before flatten
):
    """
    Implements the fused computation for a Mixture of Experts (MOE) using
    token and expert matrices.

    Key Parameters:
    - A: The input tensor representing tokens with shape (*, K), where '*' can
        be any shape representing batches and K is the feature dimension of
        each token.
    - B: The stacked MOE weight tensor with shape (E, N, K), where E is
        the number of experts, K is the input feature dimension, and N is
        the output feature dimension.
    - C: The output cache tensor with shape (M, topk, N), where M is the
        total number of tokens post padding, topk is the number of times
        each token is repeated, and N is the output feature dimension.
    - sorted_token_ids: A tensor containing the sorted indices of tokens,
        repeated topk times and arranged by the expert index they are
        assigned to.
    - expert_ids: A tensor containing the indices of the expert for each
        tile. It determines which expert matrix from B should be used for
        each tile in A.
    This kernel performs the multiplication of a token by its corresponding
    expert matrix as determined by `expert_ids`. The sorting of
    `sorted_token_ids` by expert index and padding ensures divisibility by
    TILE_SIZE_M, which is necessary to maintain consistency in tile matrix
    multiplication across different tiles processed by the same expert.
    """
    # Map program ids `bid` to the tile of C it should compute.
    # This is done in a grouped ordering to promote L2 data reuse.
    bid = ct.bid(axis=0)
    num_bid_m = ct.cdiv(EM, TILE_SIZE_M)
    num_bid_n = ct.cdiv(N, TILE_SIZE_N)
    num_bid_in_group = GROUP_SIZE_M * num_bid_n
    group_id = bid // num_bid_in_group
    first_bid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_bid_m - first_bid_m, GROUP_SIZE_M)
    bid_m = first_bid_m + ((bid % num_bid_in_group) % group_size_m)
    bid_n = (bid % num_bid_in_group) // group_size_m

    num_tokens_post_padded = ct.gather(num_tokens_post_padded_ptr, 0, padding_value=0)
    if bid_m * TILE_SIZE_M < num_tokens_post_padded:
        # Create offsets for the first tiles of A and B.
        # We will advance these offsets along the K dimension
        # and accumulate.
        offs_token_id = bid_m * TILE_SIZE_M + ct.arange(TILE_SIZE_M, dtype=ct.int32)
        offs_token = ct.gather(sorted_token_ids_ptr, offs_token_id, padding_value=0)
        off_experts = ct.load(expert_ids_ptr, index=(bid_m,), shape=(1,))
        off_experts = off_experts.item()
        row_indices = offs_token // TOP_K
        a_row_offset = row_indices[:, None] * A_STRIDE_1
        # Iterate to compute a tile of the C matrix.
        # We accumulate into a `[TILE_SIZE_M, TILE_SIZE_N]` tile.
        accumulator = ct.full((TILE_SIZE_M, TILE_SIZE_N), 0.0, dtype=ct.float32)
        for k in range(0, ct.cdiv(K, TILE_SIZE_K)):
            # Load the next tile of A and B
            col_indices = k * TILE_SIZE_K + ct.arange(TILE_SIZE_K, dtype=ct.int32)
            a_indices = a_row_offset + col_indices[None, :]
            a = ct.gather(a_ptr, a_indices, padding_value=0)
            b = ct.load(
                b_ptr,
                index=(off_experts, k, bid_n),
                shape=(1, TILE_SIZE_K, TILE_SIZE_N),
                order=(0, 2, 1),
            )
            b = ct.reshape(b, (TILE_SIZE_K, TILE_SIZE_N))

            accumulator = ct.mma(a, b, accumulator)
        if MUL_ROUTED_WEIGHT:
            moe_weight = ct.gather(topk_weights_ptr, offs_token, padding_value=0)
            moe_weight = ct.expand_dims(moe_weight, axis=1)
            accumulator = accumulator * moe_weight
        # Write back the tile of the output.
        # Use 2D indexing so cuTile bounds-checks the N dimension. Otherwise,
        # with TILE_SIZE_N > N (e.g. down-projection GEMM where N=hidden_size),
        # out-of-range column offsets silently alias into the next row of a
        # flattened C buffer and corrupt neighbouring outputs.
        offs_cn = bid_n * TILE_SIZE_N + ct.arange(TILE_SIZE_N, dtype=ct.int32)
        accumulator = ct.astype(accumulator, c_ptr.dtype)
        ct.scatter(
            c_ptr,
            (offs_token[:, None], offs_cn[None, :]),
            accumulator,
            check_bounds=True,
        )
