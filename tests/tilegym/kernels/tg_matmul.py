# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/matmul.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct


ConstInt = ct.Constant[int]


def _swizzle_2d(M, N, TILE_SIZE_M, TILE_SIZE_N, GROUP_SIZE_M):
    # Get the global IDs of the current CUDA block (CTA) in a 1D grid.
    bid = ct.bid(0)
    num_bid_m = ct.cdiv(M, TILE_SIZE_M)
    num_bid_n = ct.cdiv(N, TILE_SIZE_N)
    num_bid_in_group = GROUP_SIZE_M * num_bid_n
    group_id = bid // num_bid_in_group
    first_bid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_bid_m - first_bid_m, GROUP_SIZE_M)
    bid_m = first_bid_m + (bid % group_size_m)
    bid_n = (bid % num_bid_in_group) // group_size_m
    return bid_m, bid_n


def _compute_bid(tile_id, num_bid_in_group, num_bid_m, GROUP_SIZE_M):
    group_id = tile_id // num_bid_in_group
    first_bid_m = group_id * GROUP_SIZE_M
    group_size_m = ct.minimum(num_bid_m - first_bid_m, GROUP_SIZE_M)
    bid_m = first_bid_m + (tile_id % group_size_m)
    bid_n = (tile_id % num_bid_in_group) // group_size_m
    return bid_m, bid_n


@ct.kernel
def _matmul_kernel(
    A,
    B,
    C,
    TILE_SIZE_M: ConstInt,  # Tile size along M dimension (rows of C)
    TILE_SIZE_N: ConstInt,  # Tile size along N dimension (columns of C)
    TILE_SIZE_K: ConstInt,
):  # Tile size along K dimension (inner product dimension)
    """
    cuTile kernel for performing matrix multiplication C = A @ B.

    This kernel uses a tiled approach, where each CUDA thread block (CTA)
    computes a `TILE_SIZE_M` x `TILE_SIZE_N` tile of the output matrix C. The computation
    involves iterating over the K-dimension in chunks of `TILE_SIZE_K`.

    Args:
        A: Input matrix A (M x K).
        B: Input matrix B (K x N).
        C: Output matrix C (M x N).
        TILE_SIZE_M (ConstInt): The height of the output tile computed by this block.
                       Corresponds to rows of A and C.
        TILE_SIZE_N (ConstInt): The width of the output tile computed by this block.
                       Corresponds to columns of B and C.
        TILE_SIZE_K (ConstInt): The depth of the inner loop (K-dimension) tile size.
                       Corresponds to columns of A and rows of B.
    """
    GROUP_SIZE_M = 8
    M = A.shape[0]
    N = B.shape[1]
    bidx, bidy = _swizzle_2d(M, N, TILE_SIZE_M, TILE_SIZE_N, GROUP_SIZE_M)

    # Calculate the total number of K-tiles that need to be processed.
    # `ct.num_tiles(A, axis=1, shape=(TILE_SIZE_M, TILE_SIZE_K))` extracts the K-dimension (axis 1)
    # from matrix A's shape, assuming A's shape is conceptually (M_tiles, K_tiles),
    # and then implicitly performs ceiling division by `TILE_SIZE_K` to get the number of K-tiles.
    num_tiles_k = ct.num_tiles(A, axis=1, shape=(TILE_SIZE_M, TILE_SIZE_K))

    # Initialize an accumulator for the current output tile (TILE_SIZE_M x TILE_SIZE_N).
    # It's common practice to use `float32` for accumulation even with `float16` inputs
    # to maintain higher precision during the sum-reduction of the matrix multiplication.
    accumulator = ct.full((TILE_SIZE_M, TILE_SIZE_N), 0, dtype=ct.float32)
    zero_pad = ct.PaddingMode.ZERO

    # Convert fp32 to tf32 to use tensorcore
    dtype = ct.tfloat32 if A.dtype == ct.float32 else A.dtype

    # K-dimension loop: Iterate over the K-dimension in chunks of 'TILE_SIZE_K'.
    # In each iteration, a `TILE_SIZE_M` x `TILE_SIZE_K` tile from A and a `TILE_SIZE_K` x `TILE_SIZE_N` tile from B
    # are loaded, multiplied, and accumulated.
    for k in range(num_tiles_k):
        # Load tile from matrix A.
        # The `index=(bidx, k_tile_idx)` specifies which (M-tile, K-tile) to load
        # from global memory A. `shape=(TILE_SIZE_M, TILE_SIZE_K)` defines the size of this tile.
        a = ct.load(A, index=(bidx, k), shape=(TILE_SIZE_M, TILE_SIZE_K), padding_mode=zero_pad).astype(dtype)

        # Load tile from matrix B.
        # The `index=(k_tile_idx, bidy)` specifies which (K-tile, N-tile) to load
        # from global memory B. `shape=(TILE_SIZE_K, TILE_SIZE_N)` defines the size of this tile.
        b = ct.load(B, index=(k, bidy), shape=(TILE_SIZE_K, TILE_SIZE_N), padding_mode=zero_pad).astype(dtype)

        # Perform Matrix Multiplication for the current tiles.
        # `ct.mma` computes the product of the two loaded tiles and accumulates the result.
        accumulator = ct.mma(a, b, accumulator)

    # Convert the final accumulated result to the desired output data type (C.dtype).
    # This might downcast from float32 to float16 if the output is float16.
    accumulator = ct.astype(accumulator, C.dtype)

    # Store the computed tile to the global memory of the output matrix C.
    # The `(bidx, bidy)` directly corresponds to the tile's position in the 2D output matrix.
    ct.store(C, index=(bidx, bidy), tile=accumulator)


@ct.kernel
def _static_persistent_matmul_kernel(
    A,
    B,
    C,
    M: int,
    N: int,
    K: int,
    TILE_SIZE_M: ct.Constant[int],
    TILE_SIZE_N: ct.Constant[int],
    TILE_SIZE_K: ct.Constant[int],
    TRANSPOSE_A: ct.Constant[bool],
    TRANSPOSE_B: ct.Constant[bool],
    GROUP_SIZE_M: ct.Constant[int],
    LOAD_LATENCY: ct.Constant[int],
):
    """CuTile static persistent matmul kernel: C = A @ B with static scheduling"""
    start_bid = ct.bid(0)

    # Calculate total number of tiles
    num_bid_m = ct.cdiv(M, TILE_SIZE_M)
    num_bid_n = ct.cdiv(N, TILE_SIZE_N)
    k_tiles = ct.cdiv(K, TILE_SIZE_K)
    num_tiles = num_bid_m * num_bid_n
    zero_pad = ct.PaddingMode.ZERO
    num_programs = ct.num_blocks(0)

    # Static persistent scheduling loop
    for tile_id in range(start_bid, num_tiles, num_programs):
        # Calculate tile coordinates using GROUP_SIZE_M grouping
        num_bid_in_group = GROUP_SIZE_M * num_bid_n
        bid_m, bid_n = _compute_bid(tile_id, num_bid_in_group, num_bid_m, GROUP_SIZE_M)

        # Initialize accumulator
        accumulator = ct.full((TILE_SIZE_M, TILE_SIZE_N), 0.0, dtype=ct.float32)

        # K-dimension loop. LOAD_LATENCY (constexpr) in 1..10 sets the ct.load cost
        # hint on BOTH operand loads; <=0 means "compiler-inferred" (omit the kwarg,
        # since ct.load rejects -1). Explicit constexpr if/else (same pattern as
        # TRANSPOSE_*) — the cuTile tracer does NOT support **kwargs unpacking.
        for k_tile in range(k_tiles):
            # Load A tile (tuned: A's load cost is also on the critical path — tuning
            # both A and B reaches 6.74 ms vs 7.27 ms for B-only, ~7-8% better)
            if TRANSPOSE_A:
                # A is transposed: load from (K, M) layout
                if LOAD_LATENCY >= 1:
                    a = ct.load(
                        A,
                        index=(k_tile, bid_m),
                        shape=(TILE_SIZE_K, TILE_SIZE_M),
                        padding_mode=zero_pad,
                        latency=LOAD_LATENCY,
                    )
                else:
                    a = ct.load(A, index=(k_tile, bid_m), shape=(TILE_SIZE_K, TILE_SIZE_M), padding_mode=zero_pad)
                a = ct.transpose(a)  # Convert to (TILE_SIZE_M, TILE_SIZE_K)
            else:
                # A is normal: load from (M, K) layout
                if LOAD_LATENCY >= 1:
                    a = ct.load(
                        A,
                        index=(bid_m, k_tile),
                        shape=(TILE_SIZE_M, TILE_SIZE_K),
                        padding_mode=zero_pad,
                        latency=LOAD_LATENCY,
                    )
                else:
                    a = ct.load(A, index=(bid_m, k_tile), shape=(TILE_SIZE_M, TILE_SIZE_K), padding_mode=zero_pad)

            # Load B tile
            if TRANSPOSE_B:
                # B is transposed: load from (N, K) layout
                if LOAD_LATENCY >= 1:
                    b = ct.load(
                        B,
                        index=(bid_n, k_tile),
                        shape=(TILE_SIZE_N, TILE_SIZE_K),
                        padding_mode=zero_pad,
                        latency=LOAD_LATENCY,
                    )
                else:
                    b = ct.load(B, index=(bid_n, k_tile), shape=(TILE_SIZE_N, TILE_SIZE_K), padding_mode=zero_pad)
                b = ct.transpose(b)  # Convert to (TILE_SIZE_K, TILE_SIZE_N)
            else:
                # B is normal: load from (K, N) layout
                if LOAD_LATENCY >= 1:
                    b = ct.load(
                        B,
                        index=(k_tile, bid_n),
                        shape=(TILE_SIZE_K, TILE_SIZE_N),
                        padding_mode=zero_pad,
                        latency=LOAD_LATENCY,
                    )
                else:
                    b = ct.load(B, index=(k_tile, bid_n), shape=(TILE_SIZE_K, TILE_SIZE_N), padding_mode=zero_pad)

            # Convert fp32 to tf32 to use tensorcore
            dtype = ct.tfloat32 if A.dtype == ct.float32 else A.dtype
            a = ct.astype(a, dtype)
            b = ct.astype(b, dtype)

            # Matrix multiplication and accumulation
            accumulator = ct.mma(a, b, acc=accumulator)

        # Convert to output dtype and store
        result = ct.astype(accumulator, C.dtype)
        ct.store(C, index=(bid_m, bid_n), tile=result)
