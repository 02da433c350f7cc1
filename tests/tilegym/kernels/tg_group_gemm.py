# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/group_gemm.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct


ConstInt = ct.Constant[int]


ConstBool = ct.Constant[bool]


@ct.kernel
def _group_gemm_kernel(
    As,  # List of A matrices
    Bs,  # List of B matrices
    Cs,  # List of C matrices
    TILE_M: ConstInt,
    TILE_N: ConstInt,
    TILE_K: ConstInt,
    NUM_SM: ConstInt,
    TRANSPOSE_B: ConstBool,
):
    tile_idx = ct.bid(0)
    last_problem_end = 0
    group_size = len(As)
    zero_pad = ct.PaddingMode.ZERO

    for g in range(group_size):
        Ai = As[g]
        Bi = Bs[g]
        Ci = Cs[g]

        # Get dimensions dynamically for each group
        # A: (M, K), B: (K, N) or (N, K) if transpose_b, C: (M, N)
        num_m_tiles = ct.num_tiles(Ai, 0, (TILE_M, TILE_K))
        num_k_tiles = ct.num_tiles(Ai, 1, (TILE_M, TILE_K))
        if TRANSPOSE_B:
            num_n_tiles = ct.num_tiles(Bi, 0, (TILE_N, TILE_K))
        else:
            num_n_tiles = ct.num_tiles(Bi, 1, (TILE_K, TILE_N))

        num_tiles = num_m_tiles * num_n_tiles

        # Process tiles for this group using persistent scheduling
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles

            # Initialize accumulator
            acc = ct.zeros((TILE_M, TILE_N), dtype=ct.float32)

            # K-dimension loop
            for kk in range(num_k_tiles):
                # Load A tile
                ta = ct.load(
                    Ai,
                    (tile_m_idx, kk),
                    shape=(TILE_M, TILE_K),
                    padding_mode=zero_pad,
                )

                # Load B tile
                if TRANSPOSE_B:
                    # B is transposed: load from (N, K) layout
                    tb = ct.load(
                        Bi,
                        (tile_n_idx, kk),
                        shape=(TILE_N, TILE_K),
                        padding_mode=zero_pad,
                    )
                    tb = ct.transpose(tb)  # Convert to (TILE_K, TILE_N)
                else:
                    # B is normal: load from (K, N) layout
                    tb = ct.load(
                        Bi,
                        (kk, tile_n_idx),
                        shape=(TILE_K, TILE_N),
                        padding_mode=zero_pad,
                    )

                # Matrix multiplication and accumulation
                acc = ct.mma(ta, tb, acc)

            # Convert to output dtype and store
            acc = ct.astype(acc, Ci.dtype)
            ct.store(Ci, (tile_m_idx, tile_n_idx), tile=acc)

            # Move to next tile
            tile_idx += NUM_SM

        # Update the end position for the next group
        last_problem_end = last_problem_end + num_tiles
