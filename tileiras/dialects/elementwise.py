"""The cuda_tile ops that compute each element of their result from the same element of their
operands, whatever the tile's shape: the passes that split tiles (loop-tiles, row chunks, the cluster
split) and the layout assignment move them with their operands. The lowering has one emitter for
each (lowering/ops_arith.py, ops_math.py; tests/test_op_classes.py holds the two to one set)."""

from __future__ import annotations

ARITHMETIC = frozenset({
    "cuda_tile.absf", "cuda_tile.absi", "cuda_tile.addf", "cuda_tile.addi", "cuda_tile.andi", "cuda_tile.bitcast",
    "cuda_tile.ceil", "cuda_tile.cmpf", "cuda_tile.cmpi", "cuda_tile.divf", "cuda_tile.divi", "cuda_tile.exti",
    "cuda_tile.floor", "cuda_tile.fma", "cuda_tile.ftof", "cuda_tile.ftoi", "cuda_tile.int_to_ptr",
    "cuda_tile.itof", "cuda_tile.maxf", "cuda_tile.maxi", "cuda_tile.minf", "cuda_tile.mini", "cuda_tile.mulf",
    "cuda_tile.mulhii", "cuda_tile.muli", "cuda_tile.negf", "cuda_tile.negi", "cuda_tile.ori",
    "cuda_tile.ptr_to_int", "cuda_tile.ptr_to_ptr", "cuda_tile.remi", "cuda_tile.select", "cuda_tile.shli",
    "cuda_tile.shri", "cuda_tile.subf", "cuda_tile.subi", "cuda_tile.trunci", "cuda_tile.xori",
})
# math functions (libdevice calls or their one-instruction approximations; `pow`: fpowf's older name)
MATH = frozenset({
    "cuda_tile.atan2", "cuda_tile.cos", "cuda_tile.cosh", "cuda_tile.exp", "cuda_tile.exp2", "cuda_tile.fpowf",
    "cuda_tile.fpowi", "cuda_tile.log", "cuda_tile.log2", "cuda_tile.pow", "cuda_tile.remf", "cuda_tile.rsqrt",
    "cuda_tile.sin", "cuda_tile.sinh", "cuda_tile.sqrt", "cuda_tile.tan", "cuda_tile.tanh",
})
VALUES = ARITHMETIC | MATH
# per-element address arithmetic and the memory ops through a tile of pointers
POINTER = frozenset({"cuda_tile.offset", "cuda_tile.load_ptr_tko", "cuda_tile.store_ptr_tko"})
ELEMENTWISE = VALUES | POINTER
