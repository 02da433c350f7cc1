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
