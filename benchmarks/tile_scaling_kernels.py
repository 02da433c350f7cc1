"""The kernels of `tile_scaling.py`, written with cuTile Python and exported to TileIR bytecode.

Each kernel takes its tile size as a compile-time constant, so one tile size is one module. The
arrays are specialized as cuTile's launcher specializes contiguous tensors (the last stride the
constant 1, a 16-byte aligned base, extents divisible by 16), except saxpy's, which carry no
alignment or divisibility facts (an arbitrary slice of a tensor).
"""

from __future__ import annotations

import io
from typing import Any, Callable

# kernel name -> (what it is, rank of its arrays)
KERNELS: dict[str, str] = {
    "vector_add": "c = a + b, one 1-D tile a block",
    "saxpy": "y = alpha x + y, 1-D, no alignment or divisibility facts",
    "row_reduce": "y[i] = sum_j x[i, j], (16, n/16) tiles in a loop over columns",
    "softmax": "softmax of one row of n elements a block",
    "cast_chain": "f32 -> f16 -> f32 * 2 -> bf16 -> f32 store, 1-D",
    "transpose": "y = x^T, one (2^(k/2), 2^(k-k/2)) tile a block",
    "gather": "y[i] = 2 x[i] through tiles of pointers (iota + offset), bounds checked, 1-D",
    "cumsum": "inclusive prefix sums of one row of n elements a block",
    "rms_norm": "RMSNorm of (16, n/16) rows: x * rsqrt(mean(x^2)) * w, the weight row broadcast over rows",
    "sum_rows": "y[i] = sum_j x[i, j] of one (2^(k/2), 2^(k-k/2)) tile a block, one warp (a hint)",
    "max_cols": "y[j] = max_i x[i, j] of one (2^(k/2), 2^(k-k/2)) tile a block, one warp (a hint)",
    "sum_and_max": "y[i] = sum_j x[i, j] and z[j] = max_i x[i, j] of one such tile (two axes), one warp",
    "center_both": "y = x less its rows' means, less its columns' then, of one such tile, one warp",
}
REDUCE_ROWS = 16
# kernels whose warps a hint asks for: one (cuTile writes `num_worker_warps` only into 13.5 bytecode,
# which it does not export yet, so `export` adds the hint to its 13.4 module and writes 13.5)
ONE_WARP = ("sum_rows", "max_cols", "sum_and_max", "center_both")
# one-warp kernels whose outputs are not one 1-D array: the rank of each
OUTPUTS = {"sum_and_max": (1, 1), "center_both": (2,)}


def _shape_2d(elements: int) -> tuple[int, int]:
    bits = elements.bit_length() - 1
    return 1 << (bits // 2), 1 << (bits - bits // 2)


def tile_shape(kernel: str, elements: int) -> tuple[int, ...]:
    """The shape of `kernel`'s tile of `elements` elements."""
    if kernel in ("row_reduce", "rms_norm"):
        rows = min(REDUCE_ROWS, elements)
        return rows, elements // rows
    if kernel in ("softmax", "cumsum"):
        return 1, elements
    if kernel in ("transpose", *ONE_WARP):
        return _shape_2d(elements)
    return (elements,)


def _kernels() -> dict[str, Callable[..., Any]]:
    import tile_scaling_cutile as cutile   # cuTile's kernels read their annotations at definition

    return {name: getattr(cutile, name) for name in KERNELS}


def _array(rank: int, aligned: bool = True) -> Any:
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    return ArrayConstraint(
        ct.float32, rank, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
        may_alias_internally=False,
        stride_constant=tuple([None] * (rank - 1) + [1]),
        stride_divisible_by=tuple([4 if aligned else 1] * (rank - 1) + [1]),
        shape_divisible_by=tuple([16 if aligned else 1] * rank),
        base_addr_divisible_by=16 if aligned else 4)


def _parameters(kernel: str, elements: int) -> list[Any]:
    """cuTile's constraints of `kernel`'s parameters for tiles of `elements` elements."""
    import cuda.tile as ct
    from cuda.tile.compilation import ConstantConstraint, ScalarConstraint

    if kernel == "vector_add":
        return [_array(1), _array(1), _array(1), ConstantConstraint(elements)]
    if kernel == "saxpy":
        return [ScalarConstraint(ct.float32), _array(1, aligned=False), _array(1, aligned=False),
                ConstantConstraint(elements)]
    if kernel == "row_reduce":
        rows = min(REDUCE_ROWS, elements)
        return [_array(2), _array(1), ConstantConstraint(rows), ConstantConstraint(elements // rows)]
    if kernel in ("softmax", "cumsum"):
        return [_array(2), _array(2), ConstantConstraint(elements)]
    if kernel == "rms_norm":
        rows = min(REDUCE_ROWS, elements)
        return [_array(2), _array(1), _array(2), ConstantConstraint(rows), ConstantConstraint(elements // rows)]
    if kernel in ("cast_chain", "gather"):
        return [_array(1), _array(1), ConstantConstraint(elements)]
    if kernel in ONE_WARP:
        rows, cols = _shape_2d(elements)
        outputs = [_array(rank) for rank in OUTPUTS.get(kernel, (1,))]
        return [_array(2), *outputs, ConstantConstraint(rows), ConstantConstraint(cols)]
    rows, cols = _shape_2d(elements)
    return [_array(2), _array(2), ConstantConstraint(rows), ConstantConstraint(cols)]


def export(kernel: str, elements: int, bytecode_version: str = "13.4") -> bytes:
    """TileIR bytecode of `kernel` for tiles of `elements` elements (a power of two)."""
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    signature = KernelSignature(parameters=_parameters(kernel, elements),
                                calling_convention=CallingConvention.cutile_python_v1(),
                                symbol=f"{kernel}_{elements}")
    buf = io.BytesIO()
    export_kernel(_kernels()[kernel], [signature], buf, output_format="tileir_bytecode",
                  bytecode_version=bytecode_version)
    return _one_warp(buf.getvalue()) if kernel in ONE_WARP else buf.getvalue()


def _one_warp(bytecode: bytes) -> bytes:
    """`bytecode` with the hint `num_worker_warps_per_cta = 1` on its entries (every target), as 13.5."""
    from tileiras.bytecode.writer import write_module
    from tileiras.frontend import load_module
    from tileiras.ir.attributes import OptimizationHints

    module = load_module(bytecode, "kernel.tileirbc")
    hint = OptimizationHints(tuple((sm, (("num_worker_warps_per_cta", 1),)) for sm in ("sm_80", "sm_90", "sm_100", "sm_120")))
    for op in module.walk():
        if op.name == "cuda_tile.entry":
            op.attributes["optimization_hints"] = hint
    return write_module(module, "13.5")
