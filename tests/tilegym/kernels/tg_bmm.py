# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/bmm.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct


@ct.kernel
def _bmm_kernel(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """CuTile kernel for batch matrix multiplication
    A has shape (Q, M, K), B has shape (Q, K, N) and C has shape (Q, M, N)
    where Q is the batch size (number of independent matrix multiplications)
    """
    bidx = ct.bid(0)  # M dimension
    bidy = ct.bid(1)  # N dimension
    bidz = ct.bid(2)  # Q (batch) dimension

    # Calculate number of K tiles using ct.num_tiles
    num_k_tiles = ct.num_tiles(A, axis=2, shape=(1, TM, TK))

    # Initialize accumulator
    sum = ct.full((TM, TN), 0.0, dtype=ct.float32)

    zero_pad = ct.PaddingMode.ZERO

    # K-dimension loop
    for k in range(num_k_tiles):
        # Load tiles with 3D index and 3D shape
        a = ct.load(A, index=(bidz, bidx, k), shape=(1, TM, TK), padding_mode=zero_pad)
        a = ct.reshape(a, (TM, TK))  # Reshape to 2D

        b = ct.load(B, index=(bidz, k, bidy), shape=(1, TK, TN), padding_mode=zero_pad)
        b = ct.reshape(b, (TK, TN))  # Reshape to 2D

        sum = ct.mma(a, b, acc=sum)

    # Convert to output dtype and store
    result = ct.astype(sum, C.dtype)
    # Store with 3D index and 3D shape
    result_3d = ct.reshape(result, (1, TM, TN))
    ct.store(C, index=(bidz, bidx, bidy), tile=result_3d)


@ct.kernel
def _static_persistent_bmm_kernel(
    A,
    B,
    C,
    Batch,
    M: ct.Constant[int],
    N: ct.Constant[int],
    K: ct.Constant[int],
    TILE_M: ct.Constant[int],
    TILE_N: ct.Constant[int],
    TILE_K: ct.Constant[int],
    GROUP_SIZE_M: ct.Constant[int],
    TRANSPOSE_A: ct.Constant[bool],
    TRANSPOSE_B: ct.Constant[bool],
):
    """CuTile static persistent GEMM kernel: C = A @ B with static scheduling

    - Uses 2D accumulator to avoid reshape overhead
    - Proper handling of transposed inputs via order parameter
    - Static persistent scheduling with proper grid calculation
    """
    bid = ct.bid(0)

    # Calculate total number of tiles
    num_tiles_m = ct.cdiv(M, TILE_M)
    num_tiles_n = ct.cdiv(N, TILE_N)
    total_tiles = num_tiles_m * num_tiles_n * Batch

    # Static persistent scheduling loop
    num_programs = ct.num_blocks(0)
    for current_bid in range(bid, total_tiles, num_programs):
        # Inline bmm_calculate_bid logic directly in kernel
        num_bid_m = ct.cdiv(M, TILE_M)
        num_bid_n = ct.cdiv(N, TILE_N)
        bid_q = current_bid // (num_bid_m * num_bid_n)
        num_bid_in_group = GROUP_SIZE_M * num_bid_n

        current_bid_2d = current_bid % (num_bid_m * num_bid_n)
        group_id = current_bid_2d // num_bid_in_group
        first_bid_m = group_id * GROUP_SIZE_M
        group_size_m_temp = num_bid_m - first_bid_m
        group_size_m = ct.minimum(group_size_m_temp, GROUP_SIZE_M)
        bid_m = first_bid_m + (current_bid_2d % group_size_m)
        bid_n = (current_bid_2d % num_bid_in_group) // group_size_m

        # Initialize 2D accumulator (avoid 3D reshape overhead)
        accumulator = ct.full((TILE_M, TILE_N), 0.0, dtype=ct.float32)

        zero_pad = ct.PaddingMode.ZERO

        # K-dimension loop
        num_k_tiles = ct.cdiv(K, TILE_K)
        for k_tile in range(num_k_tiles):
            # Load A tile
            if TRANSPOSE_A:
                # A is transposed: physical layout (Q, K, M), load as (TILE_M, TILE_K)
                # Use order=(0, 2, 1) to read transposed
                a_tile_3d = ct.load(
                    A,
                    index=(bid_q, k_tile, bid_m),
                    shape=(1, TILE_K, TILE_M),
                    order=(0, 1, 2),
                    padding_mode=zero_pad,
                    latency=3,
                )
                # Transpose to get (1, TILE_M, TILE_K)
                a_tile_3d = ct.permute(a_tile_3d, (0, 2, 1))
            else:
                # A is normal: physical layout (Q, M, K)
                a_tile_3d = ct.load(
                    A,
                    index=(bid_q, bid_m, k_tile),
                    shape=(1, TILE_M, TILE_K),
                    order=(0, 1, 2),
                    padding_mode=zero_pad,
                    latency=3,
                )
            # Reshape to 2D for MMA
            a_tile = ct.reshape(a_tile_3d, (TILE_M, TILE_K))

            # Load B tile
            if TRANSPOSE_B:
                # B is transposed: physical layout (Q, N, K), load and transpose
                b_tile_3d = ct.load(
                    B,
                    index=(bid_q, bid_n, k_tile),
                    shape=(1, TILE_N, TILE_K),
                    order=(0, 1, 2),
                    padding_mode=zero_pad,
                    latency=3,
                )
                # Transpose to get (1, TILE_K, TILE_N)
                b_tile_3d = ct.permute(b_tile_3d, (0, 2, 1))
            else:
                # B is normal: physical layout (Q, K, N)
                b_tile_3d = ct.load(
                    B,
                    index=(bid_q, k_tile, bid_n),
                    shape=(1, TILE_K, TILE_N),
                    order=(0, 1, 2),
                    padding_mode=zero_pad,
                    latency=3,
                )
            # Reshape to 2D for MMA
            b_tile = ct.reshape(b_tile_3d, (TILE_K, TILE_N))

            # Matrix multiplication and accumulation (2D MMA)
            accumulator = ct.mma(a_tile, b_tile, acc=accumulator)

        # Convert to output dtype
        result = ct.astype(accumulator, C.dtype)
        # Reshape to 3D for store
        result_3d = ct.reshape(result, (1, TILE_M, TILE_N))
        ct.store(C, index=(bid_q, bid_m, bid_n), tile=result_3d, order=(0, 1, 2), latency=3)
