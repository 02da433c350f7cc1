# SPDX-FileCopyrightText: Copyright (c) 2025 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
# SPDX-License-Identifier: MIT
#
# From NVIDIA/TileGym at commit 75a14307776188ff0baf451cd9b9fc9fa3a87233, src/tilegym/ops/cutile/swiglu.py.
# Only the cuTile kernels and the helpers they use are kept, verbatim; the host code is
# left out (tests/tilegym/vendor.py). License: tests/tilegym/licenses/.

import cuda.tile as ct
from cuda.tile import RoundingMode as RMd


PAD_ZERO = ct.PaddingMode.ZERO


def _sigmoid(x):
    denom = 1.0 + ct.exp(-x)
    return ct.truediv(1.0, denom, flush_to_zero=True, rounding_mode=RMd.APPROX)


def _silu(x):
    return x * _sigmoid(x)


@ct.kernel
def _swiglu_forward_kernel(a, b, c, TILE_SIZE: ct.Constant[int]):
    row = ct.bid(0)
    offsets = ct.arange(TILE_SIZE, dtype=ct.int32)

    a_tile = ct.gather(a, (row, offsets), check_bounds=True, padding_value=0.0)
    b_tile = ct.gather(b, (row, offsets), check_bounds=True, padding_value=0.0)

    a_tile_f32 = a_tile.astype(ct.float32)
    c_tile = _silu(a_tile_f32).astype(a.dtype) * b_tile
    ct.scatter(c, (row, offsets), c_tile, check_bounds=True)


@ct.kernel
def _swiglu_backward_kernel(dc, a, b, da, db, TILE_SIZE: ct.Constant[int]):
    row = ct.bid(0)
    col = ct.bid(1)

    dc_tile = ct.load(dc, index=(row, col), shape=(1, TILE_SIZE), padding_mode=PAD_ZERO)
    a_tile = ct.load(a, index=(row, col), shape=(1, TILE_SIZE), padding_mode=PAD_ZERO)
    b_tile = ct.load(b, index=(row, col), shape=(1, TILE_SIZE), padding_mode=PAD_ZERO)

    # Convert to float32 for precision
    dc_tile = dc_tile.astype(ct.float32)
    a_tile_f32 = a_tile.astype(ct.float32)
    b_tile_f32 = b_tile.astype(ct.float32)

    sigmoid_a = _sigmoid(a_tile_f32)
    silu_a = a_tile_f32 * sigmoid_a

    # db = dc * silu(a)
    db_tile = dc_tile * silu_a
    ct.store(db, index=(row, col), tile=db_tile.astype(a.dtype))

    # da = dc * b * sigmoid(a) * (1 + a * (1 - sigmoid(a)))
    one_minus_sigmoid = 1.0 - sigmoid_a
    silu_grad = sigmoid_a * (1.0 + a_tile_f32 * one_minus_sigmoid)
    da_tile = dc_tile * b_tile_f32 * silu_grad
    ct.store(da, index=(row, col), tile=da_tile.astype(a.dtype))
