# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/silu_and_mul.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct
from cuda.tile import RoundingMode as RMd

# (vendor.py) torch is not needed to export these kernels: its dtype names used in kernel code
# stand for the cuTile dtypes of the same name.
import types as _types
torch = _types.ModuleType("torch")
torch.__dict__.update(dict(float32=ct.float32, int32=ct.int32))


ConstInt = ct.Constant[int]


@ct.kernel
def _silu_and_mul_kernel_row_wise(
    input,
    output,
    TILE_SIZE: ConstInt,
    TOTAL_HIDDEN_SIZE: ConstInt,
):
    bid = ct.bid(0)  # this gives us our row
    offsets = ct.arange(TILE_SIZE, dtype=torch.int32)

    # For 2D input (batch_size, 2*hidden_size), we need 2D indices
    # Row index is just bid (scalar), column indices are offsets-based
    row_idx = bid
    a_col_idx = offsets  # First half: [0, hidden_size)
    b_col_idx = offsets + TOTAL_HIDDEN_SIZE  # Second half: [hidden_size, 2*hidden_size)

    # Load tiles using gather with 2D indices
    # gather broadcasts (scalar, tile) to (tile,)
    a_tile = ct.gather(input, (row_idx, a_col_idx), check_bounds=True)
    b_tile = ct.gather(input, (row_idx, b_col_idx), check_bounds=True)
    a_tile = ct.astype(a_tile, torch.float32)
    b_tile = ct.astype(b_tile, torch.float32)

    # Implement sigmoid for SiLU
    denom = 1 + ct.exp(-a_tile)
    sigmoid_a = ct.truediv(1.0, denom, flush_to_zero=True, rounding_mode=RMd.APPROX)

    # Perform SiLU(a) * b
    silu_a = a_tile * sigmoid_a
    result = silu_a * b_tile
    result = ct.astype(result, output.dtype)
    # output is also 2D: (batch_size, hidden_size)
    out_col_idx = offsets
    ct.scatter(output, (row_idx, out_col_idx), result, check_bounds=True)


@ct.kernel
def _silu_and_mul_backward_kernel_row_wise(
    grad_output,  # dc: (batch_size, hidden_size)
    input,  # original input: (batch_size, 2*hidden_size)
    grad_a,  # output: (batch_size, hidden_size)
    grad_b,  # output: (batch_size, hidden_size)
    TILE_SIZE: ConstInt,
    TOTAL_HIDDEN_SIZE: ConstInt,
):
    bid = ct.bid(0)  # row index
    offsets = ct.arange(TILE_SIZE, dtype=torch.int32)

    row_idx = bid
    a_col_idx = offsets  # First half: [0, hidden_size)
    b_col_idx = offsets + TOTAL_HIDDEN_SIZE  # Second half: [hidden_size, 2*hidden_size)

    # Load grad_output (dc)
    dc_tile = ct.gather(grad_output, (row_idx, offsets), check_bounds=True)
    dc_tile = ct.astype(dc_tile, torch.float32)

    # Recompute a and b from input (saves memory vs saving in forward)
    a_tile = ct.gather(input, (row_idx, a_col_idx), check_bounds=True)
    b_tile = ct.gather(input, (row_idx, b_col_idx), check_bounds=True)
    a_tile = ct.astype(a_tile, torch.float32)
    b_tile = ct.astype(b_tile, torch.float32)

    # Recompute sigmoid(a) and silu(a)
    denom = 1 + ct.exp(-a_tile)
    sigmoid_a = ct.truediv(1.0, denom, flush_to_zero=True, rounding_mode=RMd.APPROX)
    silu_a = a_tile * sigmoid_a

    # Compute db = dc * silu(a)
    db_tile = dc_tile * silu_a
    db_tile = ct.astype(db_tile, input.dtype)
    ct.scatter(grad_b, (row_idx, offsets), db_tile, check_bounds=True)

    # Compute da = dc * b * sigmoid(a) * (1 + a * (1 - sigmoid(a)))
    # = dc * b * (sigmoid(a) + a * sigmoid(a) * (1 - sigmoid(a)))
    one_minus_sigmoid = 1.0 + -sigmoid_a
    silu_grad = sigmoid_a + silu_a * one_minus_sigmoid
    da_tile = dc_tile * (b_tile * silu_grad)
    da_tile = ct.astype(da_tile, input.dtype)
    ct.scatter(grad_a, (row_idx, offsets), da_tile, check_bounds=True)
