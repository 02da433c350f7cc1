"""cuTile kernels for tests/test_tcgen05_lowering.py (a module of their own: cuTile reads the
annotations, which `from __future__ import annotations` would turn into strings)."""

import cuda.tile as ct


@ct.kernel
def mm_twice(a, b, c, d, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """A matmul whose accumulator starts from C (not zero) and gets one more MMA after its K loop."""
    i = ct.bid(0)
    j = ct.bid(1)
    acc = ct.load(c, index=(i, j), shape=(TM, TN))
    for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
        x = ct.load(a, index=(i, k), shape=(TM, TK), padding_mode=ct.PaddingMode.ZERO)
        y = ct.load(b, index=(k, j), shape=(TK, TN), padding_mode=ct.PaddingMode.ZERO)
        acc = ct.mma(x, y, acc)
    x = ct.load(a, index=(i, 0), shape=(TM, TK))
    y = ct.load(b, index=(0, j), shape=(TK, TN))
    acc = ct.mma(x, y, acc)
    ct.store(d, index=(i, j), tile=acc)


@ct.kernel
def shared_a(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """A loaded once and read by the mmas of two loops (as a causal attention's Q): one buffer, two readers."""
    i = ct.bid(0)
    x = ct.load(a, index=(i, 0), shape=(TM, TK))
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for j in range(2):
        acc = ct.mma(x, ct.load(b, index=(0, j), shape=(TK, TN)), acc)
    for j in range(2, 4):
        acc = ct.mma(x, ct.load(b, index=(0, j), shape=(TK, TN)), acc)
    ct.store(c, index=(i, 0), tile=acc)


@ct.kernel
def computed_a(a, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """An fp8 A computed in registers (as an fp8 attention's P): the mma stores it in a swizzled buffer."""
    i = ct.bid(0)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(a, 1, shape=(TM, TK))):
        x = ct.load(a, index=(i, k), shape=(TM, TK))
        y = ct.load(b, index=(k, 0), shape=(TK, TN))
        acc = ct.mma(ct.astype(x * 2, y.dtype), y, acc)
    ct.store(c, index=(i, 0), tile=acc)
