# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/softmax.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import math
import cuda.tile as ct
from cuda.tile import RoundingMode as RMd


ConstInt = ct.Constant[int]


@ct.kernel(occupancy=4)
def _softmax_kernel(
    output,
    input,
    N_ROWS: ConstInt,
    TILE_SIZE: ConstInt,
    DIM_COLS: ConstInt,
):
    # Static persistent scheduling: each block processes multiple rows
    pid = ct.bid(0)
    num_programs = ct.num_blocks(0)
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)

    for row_idx in range(pid, N_ROWS, num_programs):
        # Load the row tile using index-based access
        row = ct.gather(input, (row_idx, offsets), check_bounds=True, padding_value=-math.inf)
        # Convert to float32 for computation
        row = ct.astype(row, ct.float32)

        # Subtract maximum for numerical stability
        row_max = ct.max(row, 0, keepdims=True)
        row_minus_max = row - row_max

        # Compute exponential
        numerator = ct.exp(row_minus_max, rounding_mode=RMd.APPROX)

        # Compute sum for normalization
        denominator = ct.sum(numerator, 0, keepdims=True)

        # Final softmax computation
        softmax_output = ct.truediv(numerator, denominator, rounding_mode=RMd.APPROX, flush_to_zero=True)
        softmax_output = ct.astype(softmax_output, input.dtype)
        ct.scatter(output, (row_idx, offsets), softmax_output, check_bounds=True)


@ct.kernel
def _softmax_kernel_multi_wave_full_row_reg_cached_ldg(
    output,
    input,
    N: ConstInt,
    TILE_SIZE: ConstInt,
):
    """scheduling=multi_wave | coverage=full_row | load=ldg | caching=reg_cached

    Multi-wave softmax: one block per row, no grid-stride loop.
    Uses conditional bounds check — skipped when TILE_SIZE == N (power-of-2 N)."""
    row_idx = ct.bid(0)
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)
    check_bound = TILE_SIZE != N

    row = ct.gather(input, (row_idx, offsets), check_bounds=check_bound, padding_value=-math.inf)
    row = ct.astype(row, ct.float32)

    row_max = ct.max(row, 0, keepdims=True)
    numerator = ct.exp(row - row_max, rounding_mode=RMd.APPROX)
    denominator = ct.sum(numerator, 0, keepdims=True)

    softmax_output = ct.truediv(numerator, denominator, rounding_mode=RMd.APPROX, flush_to_zero=True)
    softmax_output = ct.astype(softmax_output, input.dtype)
    ct.scatter(output, (row_idx, offsets), softmax_output, check_bounds=check_bound)


@ct.kernel(occupancy=2)
def _softmax_kernel_tma(
    output,
    input,
    N_ROWS: ConstInt,
    N_COLS: ConstInt,
    TILE_SIZE: ConstInt,
):
    # Static persistent scheduling: each block processes multiple rows
    pid = ct.bid(0)
    num_programs = ct.num_blocks(0)

    for row_idx in range(pid, N_ROWS, num_programs):
        # Load the entire row in one tile (TILE_SIZE >= n_cols by design)
        row = ct.load(input, index=(row_idx, 0), shape=(1, TILE_SIZE), padding_mode=ct.PaddingMode.NEG_INF)

        # Convert to float32 for computation
        row = ct.astype(row, ct.float32)

        # Subtract maximum for numerical stability
        row_max = ct.max(row, 1, keepdims=True)
        row_minus_max = row - row_max

        # Compute exponential
        numerator = ct.exp(row_minus_max, rounding_mode=RMd.APPROX)

        # Compute sum for normalization
        denominator = ct.sum(numerator, 1, keepdims=True)

        # Final softmax computation
        softmax_output = ct.truediv(numerator, denominator, rounding_mode=RMd.APPROX, flush_to_zero=True)

        # Convert back to original dtype and store
        softmax_output = ct.astype(softmax_output, input.dtype)
        ct.store(output, index=(row_idx, 0), tile=softmax_output)


@ct.kernel(occupancy=4)
def _softmax_kernel_chunked(
    output,
    input,
    N_ROWS: ConstInt,
    N_COLS: ConstInt,
    TILE_SIZE: ConstInt,
):
    # Static persistent scheduling: each block processes multiple rows
    pid = ct.bid(0)
    num_programs = ct.num_blocks(0)

    for row_idx in range(pid, N_ROWS, num_programs):
        row_max = ct.full((1,), -math.inf, dtype=ct.float32)
        denominator = ct.full((1,), 0.0, dtype=ct.float32)
        num_chunks = (N_COLS + TILE_SIZE - 1) // TILE_SIZE
        col_offsets_base = ct.arange(TILE_SIZE, dtype=ct.int32)

        # Pass 1: Find maximum
        for chunk_idx in range(num_chunks):
            chunk_start = chunk_idx * TILE_SIZE
            col_indices = ct.full((TILE_SIZE,), chunk_start, dtype=ct.int32) + col_offsets_base
            chunk = ct.gather(input, (row_idx, col_indices), check_bounds=True, padding_value=-math.inf)
            chunk = ct.astype(chunk, ct.float32)
            chunk_max = ct.max(chunk, 0, keepdims=True)
            row_max = ct.maximum(row_max, chunk_max)

        # Pass 2: First pass to compute denominator (sum of all exp values)
        for chunk_idx in range(num_chunks):
            chunk_start = chunk_idx * TILE_SIZE
            col_indices = ct.full((TILE_SIZE,), chunk_start, dtype=ct.int32) + col_offsets_base
            chunk = ct.gather(input, (row_idx, col_indices), check_bounds=True, padding_value=-math.inf)
            chunk = ct.astype(chunk, ct.float32)
            row_minus_max = chunk - row_max
            numerator = ct.exp(row_minus_max, rounding_mode=RMd.APPROX)
            exponentials_sum = ct.sum(numerator, 0, keepdims=True)
            denominator = denominator + exponentials_sum

        # Reciprocal once per row, multiplied inside the pass-3 chunk loop.
        inv_denominator = ct.truediv(1.0, denominator, rounding_mode=RMd.APPROX, flush_to_zero=True)

        # Pass 3: Compute final softmax
        for chunk_idx in range(num_chunks):
            chunk_start = chunk_idx * TILE_SIZE
            col_indices = ct.full((TILE_SIZE,), chunk_start, dtype=ct.int32) + col_offsets_base
            # Use gather to load chunk (returns 1D tensor like basic kernel)
            chunk = ct.gather(input, (row_idx, col_indices), check_bounds=True, padding_value=-math.inf)
            chunk = ct.astype(chunk, ct.float32)
            row_minus_max = chunk - row_max
            numerator = ct.exp(row_minus_max, rounding_mode=RMd.APPROX)
            softmax_output = numerator * inv_denominator
            softmax_output = ct.astype(softmax_output, input.dtype)
            # Use scatter with bounds checking to avoid writing padded zeros
            ct.scatter(output, (row_idx, col_indices), softmax_output, check_bounds=True)
