"""Op-specific verifiers (what ODS traits cannot express), keyed by op name.

`OP_CHECKS[name](op)` checks the op itself; `REGION_CHECKS[name](op)` runs
after the ops nested in its regions were verified.
"""

from __future__ import annotations


from ..ir import attributes as A
from ..ir import types as T
from ..ir.core import Operation
from ..target import BASE_NAMES
from .verify_rules import (VerifyFailure, bitwidth, dims, dtype, dtypes, elem, elem_name, fail, is_int,
                           view_tile_type)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Callable, Optional

Check = "Callable[[Operation], None]"
OP_CHECKS: dict[str, Check] = {}
REGION_CHECKS: dict[str, Check] = {}


def check(*names: str, regions: bool = False) -> Callable[[Check], Check]:
    def deco(fn: Check) -> Check:
        for n in names:
            (REGION_CHECKS if regions else OP_CHECKS)[f"cuda_tile.{n}"] = fn
        return fn
    return deco


def _attr(op: Operation, name: str, default: Any = None) -> Any:
    return op.attributes.get(name, default)


def _result_elem(op: Operation) -> str:
    return elem_name(op.results[0].type)


# -- floating point modifiers ---------------------------------------------------------
def _ftz(op: Operation) -> None:
    if _attr(op, "flush_to_zero") and _result_elem(op) != "f32":
        raise fail(op, f"flush_to_zero modifier only supported for f32 data type, but got: "
                       f"{dtype(elem(op.results[0].type))}")


def _ieee_rounding(op: Operation) -> None:
    if _attr(op, "rounding_mode", "nearest_even") not in ("nearest_even", "zero", "negative_inf", "positive_inf"):
        raise fail(op, "invalid rounding mode specified, expect one of [nearest_even, zero, negative_inf, "
                       "positive_inf]")


@check("addf", "subf", "mulf", "fma")
def _arith_f(op: Operation) -> None:
    _ieee_rounding(op)
    _ftz(op)


@check("maxf", "minf", "rsqrt", "exp2")
def _ftz_only(op: Operation) -> None:
    _ftz(op)


def _div_sqrt_modifiers(op: Operation, approx: bool, full: bool, has_rounding: bool) -> None:
    e = dtype(elem(op.results[0].type))
    f32 = _result_elem(op) == "f32"
    if _attr(op, "flush_to_zero") and not f32:
        raise fail(op, f"flush_to_zero modifier only supported for f32 data type, but got: {e}")
    if approx and not f32:
        raise fail(op, f"approx modifier only supported for f32 data type, but got: {e}")
    if full and not f32:
        raise fail(op, f"full modifier only supported for f32 data type, but got: {e}")


@check("divf")
def _divf(op: Operation) -> None:
    r = _attr(op, "rounding_mode")
    if r not in ("nearest_even", "zero", "negative_inf", "positive_inf", "approx", "full"):
        raise fail(op, "invalid rounding mode specified, expect one of [nearest_even, zero, negative_inf, "
                       "positive_inf, approx, full]")
    _div_sqrt_modifiers(op, r == "approx", r == "full", r not in ("approx", "full"))


@check("sqrt")
def _sqrt(op: Operation) -> None:
    r = _attr(op, "rounding_mode")
    if r not in ("nearest_even", "zero", "negative_inf", "positive_inf", "approx"):
        raise fail(op, "invalid rounding mode specified, expect one of [nearest_even, zero, negative_inf, "
                       "positive_inf, approx]")
    _div_sqrt_modifiers(op, r == "approx", False, r != "approx")


@check("exp", "tanh")
def _approx_full(op: Operation) -> None:
    r = _attr(op, "rounding_mode", "full")
    if r not in ("full", "approx"):
        raise fail(op, "invalid rounding mode specified, expect one of [approx, full]")
    if r == "approx" and _result_elem(op) != "f32":
        raise fail(op, f"approx modifier only supported for f32 data type, but got: "
                       f"{dtype(elem(op.results[0].type))}")


@check("divi")
def _divi(op: Operation) -> None:
    r = _attr(op, "rounding", "zero")
    if r not in ("zero", "negative_inf", "positive_inf"):
        raise fail(op, "invalid rounding mode specified, expect one of [zero, negative_inf, positive_inf]")
    if r == "negative_inf" and _attr(op, "signedness") == "unsigned":
        raise fail(op, "rounding mode 'negative_inf' is not allowed with 'unsigned' flag")


@check("negi")
def _negi(op: Operation) -> None:
    if _attr(op, "overflow") == "no_unsigned_wrap":
        raise fail(op, "'no_unsigned_wrap' overflow flag is not supported")


# -- conversions ------------------------------------------------------------------------
@check("exti")
def _exti(op: Operation) -> None:
    if bitwidth(elem(op.results[0].type)) <= bitwidth(elem(op.operands[0].type)):
        raise fail(op, "extending to smaller or identical integer")


@check("trunci")
def _trunci(op: Operation) -> None:
    if bitwidth(elem(op.results[0].type)) >= bitwidth(elem(op.operands[0].type)):
        raise fail(op, "truncating to larger or identical integer")


@check("itof")
def _itof(op: Operation) -> None:
    if _result_elem(op) == "f8E8M0FNU":
        raise fail(op, "integer to f8E8M0FNU conversion is not supported, please first convert to another float type")
    if _attr(op, "rounding_mode") != "nearest_even":
        raise fail(op, "invalid rounding mode specified. Only 'nearest_even' is supported")


@check("ftoi")
def _ftoi(op: Operation) -> None:
    if _attr(op, "rounding_mode") != "nearest_int_to_zero":
        raise fail(op, "invalid rounding mode specified. Only 'nearest_int_to_zero' is supported")


@check("ftof")
def _ftof(op: Operation) -> None:
    src, dst = op.operands[0].type, op.results[0].type
    if src == dst:
        raise fail(op, "converting tiles must not be a no-op")
    r = _attr(op, "rounding_mode", "nearest_even")
    if elem_name(dst) == "f8E8M0FNU":
        if r not in ("zero", "positive_inf"):
            raise fail(op, "invalid rounding mode specified for conversion to f8E8M0FNU. Only 'zero' and "
                           "'positive_inf' are supported")
        return
    narrowing = bitwidth(elem(dst)) < bitwidth(elem(src))
    if narrowing and elem_name(dst) == "tf32":
        if r not in ("nearest_even", "zero", "nearest_away"):
            raise fail(op, "invalid rounding mode specified. Only 'nearest_even', 'zero' and 'nearest_away' are "
                           "supported for conversions to tf32")
    elif narrowing and elem_name(dst) in ("f16", "bf16", "f32", "f64"):
        if r not in ("nearest_even", "zero"):
            raise fail(op, "invalid rounding mode specified. Only 'nearest_even' and 'zero' are supported for "
                           "narrowing conversions to standard types")
    elif r != "nearest_even":
        raise fail(op, "invalid rounding mode specified. Only 'nearest_even' is supported")


@check("bitcast")
def _bitcast(op: Operation) -> None:
    s, r = elem(op.operands[0].type), elem(op.results[0].type)
    sw, rw = (32 if isinstance(s, T.ScalarType) and s.name == "tf32" else bitwidth(s),
              32 if isinstance(r, T.ScalarType) and r.name == "tf32" else bitwidth(r))
    if sw != rw:
        raise fail(op, f"types must be equal width, cannot convert {dtype(op.operands[0].type)} of width {sw} to "
                       f"type {dtype(op.results[0].type)} of width {rw}")


@check("pack", "unpack")
def _pack(op: Operation) -> None:
    src, res = op.operands[0].type, op.results[0].type

    def size_bits(t: T.TileType) -> int:
        e = t.element
        w = 1 if e.name == "i1" else (32 if e.name == "tf32" else bitwidth(e))  # type: ignore[attr-defined]
        n = 1
        for d in t.shape:
            n *= d
        return w * n

    if len(src.shape) != 1:
        raise fail(op, "expects source and result to be rank-1 tiles")
    if bitwidth(src.element) == bitwidth(res.element):
        raise fail(op, "expects source and result to have different element type widths")
    sb, rb = size_bits(src), size_bits(res)
    if sb % 8:
        raise fail(op, "expects source tile to be byte-aligned")
    if rb % 8:
        raise fail(op, "expects result tile to be byte-aligned")
    if sb != rb:
        raise fail(op, f"expects source and result to have the same size in bytes, but got source tile size "
                       f"{sb // 8} bytes and result tile size {rb // 8} bytes")


# -- shapes -------------------------------------------------------------------------------
@check("broadcast")
def _broadcast(op: Operation) -> None:
    s, r = op.operands[0].type.shape, op.results[0].type.shape
    for a, b in zip(s, r):
        if a != b and a != 1:
            raise fail(op, f"expects the shape of source tile to be compatible with that of the result tile, but got: "
                           f"{dims(s)} and {dims(r)}")


@check("reshape")
def _reshape(op: Operation) -> None:
    def n(t: T.TileType) -> int:
        k = 1
        for d in t.shape:
            k *= d
        return k
    if n(op.operands[0].type) != n(op.results[0].type):
        raise fail(op, "expected source tile and result tile to have the same number of elements")


@check("cat")
def _cat(op: Operation) -> None:
    dim = _attr(op, "dim")
    lhs, rhs, res = op.operands[0].type.shape, op.operands[1].type.shape, op.results[0].type.shape
    rank = len(lhs)
    if dim < 0 or dim >= rank:
        raise fail(op, f"expect dim to be [0, {rank}), but got: {dim}")
    if lhs[dim] + rhs[dim] != res[dim]:
        raise fail(op, f"invalid concat at position {dim}, expected: {lhs[dim] + rhs[dim]} but got: {res[dim]}")
    for i in range(rank):
        if i == dim:
            continue
        if lhs[i] != rhs[i]:
            raise fail(op, f"expect lhs and rhs shapes to match at non-concat position {i}, expected: {lhs[i]} "
                           f"but got: {rhs[i]}")
        if lhs[i] != res[i]:
            raise fail(op, f"expect lhs and result shapes to match at non-concat position {i}, expected: {lhs[i]} "
                           f"but got: {res[i]}")


@check("extract")
def _extract(op: Operation) -> None:
    src, res = op.operands[0].type, op.results[0].type
    if src.element != res.element:
        raise fail(op, "source and result element type do not match")
    if len(src.shape) != len(res.shape):
        raise fail(op, "source and result must have the same rank")
    for i, (a, b) in enumerate(zip(src.shape, res.shape)):
        if b == 0 or a % b:
            raise fail(op, f"source dimension {i} size ({a}) must be evenly divisible by result dimension {i} "
                           f"size ({b})")
    idx = op.operand_group("indices")
    if len(idx) != len(src.shape):
        raise fail(op, f"expected {len(src.shape)} indices, but got {len(idx)}")


@check("insert")
def _insert(op: Operation) -> None:
    src, dst = op.operands[0].type, op.operands[1].type
    if op.results[0].type != dst:
        raise fail(op, "failed to verify that all of {destination, result} have same type")
    for i, (a, b) in enumerate(zip(dst.shape, src.shape)):
        if b == 0 or a % b:
            raise fail(op, f"destination dimension {i} size ({a}) must be evenly divisible by source dimension {i} "
                           f"size ({b})")
    idx = op.operand_group("indices")
    if len(idx) != len(dst.shape):
        raise fail(op, f"expected {len(dst.shape)} indices, but got {len(idx)}")


@check("permute")
def _permute(op: Operation) -> None:
    src = op.operands[0].type
    rank = len(src.shape)
    perm = list(_attr(op, "permutation", ()))
    if rank < 2:
        raise fail(op, f"expects at least rank 2, but got: {rank}")
    if len(perm) != rank:
        raise fail(op, f"expect permutation size ({len(perm)}) to equal the rank of the source ({rank})")
    if len(set(perm)) != len(perm):
        raise fail(op, "expect permutation elements to be unique")
    for i, p in enumerate(perm):
        if p < 0 or p >= rank:
            raise fail(op, f"permutation element at index {i} ({p}) is out of bound [0, {rank})")
    res = op.results[0].type.shape
    for i, p in enumerate(perm):
        if res[i] != src.shape[p]:
            raise fail(op, f"result shape invalid at index {i}, expected: {src.shape[p]}, but got: {res[i]}")


@check("iota")
def _iota(op: Operation) -> None:
    t = op.results[0].type
    if len(t.shape) != 1:
        raise fail(op, "expects result type to be 1-d tile")
    w = bitwidth(t.element)
    if w < 64 and t.shape[0] > (1 << w):
        raise fail(op, f"the number of elements {t.shape[0]} exceeds the maximum value of element type "
                       f"{dtype(t.element)}")


@check("select")
def _select(op: Operation) -> None:
    if _result_elem(op) == "f4E2M1FN":
        raise fail(op, "cannot operate on sub-byte type F4E2M1FN")


@check("constant")
def _constant(op: Operation) -> None:
    d = op.attributes.get("value")
    if not isinstance(d, A.DenseElements):
        raise fail(op, "requires attribute 'value'")
    if d.type != op.results[0].type:
        raise fail(op, "failed to verify that all of {value, result} have same type")


@check("global")
def _global(op: Operation) -> None:
    d = op.attributes.get("value")
    if not isinstance(d, A.DenseElements) or len(d.type.shape) != 1:
        raise fail(op, "type must have rank 1")


@check("join_tokens")
def _join(op: Operation) -> None:
    if len(op.operands) < 2:
        raise fail(op, "expect two or more tokens")


@check("print_tko")
def _print(op: Operation) -> None:
    s = _attr(op, "str", "")
    expected = 0
    i = 0
    while i < len(s):
        if s[i] != "%":
            i += 1
            continue
        j = i + 1
        while j < len(s) and s[j] in "-+ #0123456789.hlLqjzt":
            j += 1
        if j >= len(s):
            raise fail(op, "found unterminated format expression")
        if s[j] == "%" and j == i + 1:
            i = j + 1
            continue
        expected += 1
        i = j + 1
    args = op.operand_group("args")
    if expected != len(args):
        raise fail(op, f"incorrect number of operands: expected {expected}, found {len(args)}")


@check("alloca")
def _alloca(op: Operation) -> None:
    align = _attr(op, "alignment", 0)
    if align <= 0 or align & (align - 1):
        raise fail(op, "'alignment' must be power of two")
    pointee = op.results[0].type.element.pointee
    size = 1 if elem_name(pointee) == "i1" else bitwidth(pointee) // 8
    if align < size:
        raise fail(op, f"'alignment' ({align}) must be at least the natural size ({size} bytes) for element type "
                       f"{dtype(pointee)}")


@check("assume")
def _assume(op: Operation) -> None:
    p = _attr(op, "predicate")
    t = op.results[0].type
    # the predicate's attribute name, as NVIDIA's messages quote it (observed through its tileirdisasm)
    name = {A.DivBy: "cuda_tile.div_by", A.SameElements: "cuda_tile.same_elements",
            A.Bounded: "cuda_tile.bounded"}.get(type(p), "predicate")
    if isinstance(p, A.DivBy):
        d = p.divisor
        if d <= 0 or d & (d - 1):
            raise fail(op, f"'{name}' divisor must be a power of 2")
        if (p.every is None) != (p.along is None):
            raise fail(op, f"'{name}' 'every'/'along' must be used in combination")
        if d > 4611686018427387904:
            raise fail(op, f"'{name}' divisor is too large")
        if isinstance(t, T.TensorViewType):
            if p.every is not None:
                raise fail(op, f"'{name}' 'every'/'along' cannot be used if the constrained value is a tensor_view")
            return
        if not isinstance(t, T.TileType) or not (is_int(t) or isinstance(t.element, T.PointerType)):
            raise fail(op, f"'{name}' is valid only for tile of integer/pointer or tensor_view values")
        if p.every is not None:
            if not t.shape:
                raise fail(op, f"'{name}' 'every'/'along' cannot be used if the constrained value is a 0D tile")
            if not 0 <= p.along < len(t.shape):
                raise fail(op, f"'{name}' every_dim ({p.along}) must be >= 0 and < tile rank ({len(t.shape)})")
            if not 0 <= p.every <= t.shape[p.along]:
                raise fail(op, f"expected '{name}' every_dim to be within 0 and the size of the respective "
                               f"dimension ({t.shape[p.along]})")
    elif isinstance(p, A.SameElements):
        if not isinstance(t, T.TileType) or not (is_int(t) or isinstance(t.element, T.PointerType)):
            raise fail(op, f"'{name}' is valid only for tile of integer/pointer values")
        if len(p.values) != len(t.shape):
            raise fail(op, f"expected number of values in '{name}' ({len(p.values)}) to match rank of constrained "
                           f"tile ({len(t.shape)})")
        for i, (v, d) in enumerate(zip(p.values, t.shape)):
            if v < 0 or v > d:
                raise fail(op, f"expected '{name}' value {i} to be within 0 and the size of the respective "
                               f"dimension ({d})")
    elif isinstance(p, A.Bounded):
        if not isinstance(t, T.TileType) or not is_int(t):
            raise fail(op, f"'{name}' is valid only for tile of integer values")
        w = bitwidth(t.element)
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        if p.ub is not None and not lo <= p.ub <= hi:
            raise fail(op, f"'{name}' expects upper bound to be within [{lo}, {hi}]")
        if p.lb is not None and not lo <= p.lb <= hi:
            raise fail(op, f"'{name}' expects lower bound to be within [{lo}, {hi}]")
        if p.lb is not None and p.ub is not None and p.lb > p.ub:
            raise fail(op, f"'{name}' expects lower bound to be less than or equal to upper bound")


# -- mma ----------------------------------------------------------------------------------
def _mma_shapes(op: Operation) -> None:
    lhs, rhs, acc = (op.operands[i].type.shape for i in range(3))
    if len(lhs) not in (2, 3):
        raise fail(op, "operands must be 2D or 3D tiles")
    if len(rhs) != len(lhs) or len(acc) != len(lhs):
        raise fail(op, "operands must have the same rank")
    b = 1 if len(lhs) == 3 else 0
    if b:
        if lhs[0] != rhs[0]:
            raise fail(op, f"shape error: dim 0 of lhs ({lhs[0]}) and dim 0 of rhs ({rhs[0]}) must match, but got "
                           f"lhs shape ({dims(lhs)}) and rhs shape ({dims(rhs)})")
        if lhs[0] != acc[0]:
            raise fail(op, f"shape error: dim 0 of lhs ({lhs[0]}) and dim 0 of acc ({acc[0]}) must match, but got "
                           f"lhs shape ({dims(lhs)}) and acc shape ({dims(acc)})")
    r, c = b, b + 1
    if lhs[c] != rhs[r]:
        raise fail(op, f" shape error: dim {c} of lhs ({lhs[c]}) and dim {r} of rhs ({rhs[r]}) must match, but got "
                       f"lhs shape ({dims(lhs)}) and rhs shape ({dims(rhs)})")
    if lhs[r] != acc[r]:
        raise fail(op, f" shape error: dim {r} of lhs ({lhs[r]}) and dim {r} of acc ({acc[r]}) must match, but got "
                       f"lhs shape ({dims(lhs)}) and acc shape ({dims(acc)})")
    if rhs[c] != acc[c]:
        raise fail(op, f" shape error: dim {c} of rhs ({rhs[c]}) and dim {c} of acc ({acc[c]}) must match, but got "
                       f"rhs shape ({dims(rhs)}) and acc shape ({dims(acc)})")


_MMAF_OUT = {"f4E2M1FN": ("f16", "f32"), "f8E4M3FN": ("f16", "f32"), "f8E5M2": ("f16", "f32"),
             "f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "f32": ("f32",), "f64": ("f64",)}


@check("mmaf")
def _mmaf(op: Operation) -> None:
    _mma_shapes(op)
    i, a = elem_name(op.operands[0].type), elem_name(op.operands[2].type)
    allowed = _MMAF_OUT.get(i)
    if allowed is None:
        raise fail(op, f"unsupported input element type: {dtype(elem(op.operands[0].type))}")
    if a not in allowed:
        raise fail(op, f"unsupported combination of element types. Input type {dtype(elem(op.operands[0].type))} "
                       f"expects accumulator/result type to be one of {{{', '.join(repr(x) for x in allowed)}}}, "
                       f"but got {dtype(elem(op.operands[2].type))}".replace('"', "'"))


@check("mmai")
def _mmai(op: Operation) -> None:
    if not all(elem_name(op.operands[k].type) == "i8" for k in (0, 1)):
        raise fail(op, f"operand #0 must be mmai operand tile type of i8 values, but got {dtype(op.operands[0].type)}")
    _mma_shapes(op)


@check("mmaf_scaled")
def _mmaf_scaled(op: Operation) -> None:
    _mma_shapes(op)
    lhs, rhs, acc, ls, rs = (op.operands[i].type for i in range(5))
    if ls.element != rs.element:
        raise fail(op, "failed to verify that all of {lhs_scale, rhs_scale} have the same element type")
    b = 1 if len(lhs.shape) == 3 else 0
    r, c = b, b + 1
    L, R, LS, RS = lhs.shape, rhs.shape, ls.shape, rs.shape
    if len(LS) != len(L) or len(RS) != len(R):
        raise fail(op, "scale operands must have the same rank as lhs and rhs")
    if b:
        if L[0] != LS[0]:
            raise fail(op, f"shape error: dim 0 of lhs ({L[0]}) and dim 0 of lhs_scale ({LS[0]}) must match, but got "
                           f"lhs shape ({dims(L)}) and lhs_scale shape ({dims(LS)})")
        if R[0] != RS[0]:
            raise fail(op, f"shape error: dim 0 of rhs ({R[0]}) and dim 0 of rhs_scale ({RS[0]}) must match, but got "
                           f"rhs shape ({dims(R)}) and rhs_scale shape ({dims(RS)})")
    if L[r] != LS[r]:
        raise fail(op, f"shape error: dim {r} of lhs ({L[r]}) and dim {r} of lhs_scale ({LS[r]}) must match, but got "
                       f"lhs shape ({dims(L)}) and lhs_scale shape ({dims(LS)})")
    if R[c] != RS[c]:
        raise fail(op, f"shape error: dim {c} of rhs ({R[c]}) and dim {c} of rhs_scale ({RS[c]}) must match, but got "
                       f"rhs shape ({dims(R)}) and rhs_scale shape ({dims(RS)})")
    if LS[c] != RS[r]:
        raise fail(op, f"shape error: dim {c} of lhs_scale ({LS[c]}) and dim {r} of rhs_scale ({RS[r]}) must match, "
                       f"but got lhs_scale shape ({dims(LS)}) and rhs_scale shape ({dims(RS)})")
    se, le = elem_name(ls), elem_name(lhs)
    if se == "f8E4M3FN" and le != "f4E2M1FN":
        raise fail(op, f"unsupported combination of element types. Scale type 'f8E4M3FN' expects lhs and rhs element "
                       f"types to be 'f4E2M1FN', but got '{le}'")
    if se == "f8E8M0FNU" and le not in ("f8E4M3FN", "f8E5M2", "f4E2M1FN"):
        raise fail(op, f"unsupported combination of element types. Scale type 'f8E8M0FNU' expects lhs and rhs element "
                       f"types to be one of {{'f8E4M3FN', 'f8E5M2', 'f4E2M1FN'}}, but got '{le}'")
    k, sk = L[c], LS[c]
    if sk == 0 or k % sk:
        raise fail(op, f"shape error: dim {c} of lhs_scale ({sk}) must be a divisor of dim {c} of lhs ({k}), but got "
                       f"lhs_scale shape ({dims(LS)}) and lhs shape ({dims(L)})")
    vec = k // sk
    if le in ("f8E4M3FN", "f8E5M2") and vec != 32:
        raise fail(op, f"shape error: f8 element type requires block scale factor of lhs_scale and rhs_scale to be "
                       f"32, but got {vec}")
    if le == "f4E2M1FN" and se == "f8E4M3FN" and vec != 16:
        raise fail(op, f"shape error: f4E2M1FN element type with f8E4M3FN scales requires block scale factor of "
                       f"lhs_scale and rhs_scale to be 16, but got {vec}")
    if le == "f4E2M1FN" and se == "f8E8M0FNU" and vec not in (16, 32):
        raise fail(op, f"shape error: f4E2M1FN element type with f8E8M0FNU scales requires block scale factor of "
                       f"lhs_scale and rhs_scale to be 16 or 32, but got {vec}")


# -- memory -----------------------------------------------------------------------------------
def _load_model(op: Operation) -> None:
    mo = _attr(op, "memory_ordering_semantics")
    scope = _attr(op, "memory_scope")
    if mo not in ("weak", "relaxed", "acquire"):
        raise fail(op, f"expect one of: weak, relaxed, or acquire, but got: {mo}")
    if mo == "weak" and scope is not None:
        raise fail(op, "weak load must not have memory scope")
    if mo != "weak" and scope is None:
        raise fail(op, f"memory scope is required for {mo} load")


def _store_model(op: Operation) -> None:
    mo = _attr(op, "memory_ordering_semantics")
    scope = _attr(op, "memory_scope")
    if mo not in ("weak", "relaxed", "release"):
        raise fail(op, f"expect one of: weak, relaxed, or release, but got: {mo}")
    if mo == "weak" and scope is not None:
        raise fail(op, "weak store must not have memory scope")
    if mo != "weak" and scope is None:
        raise fail(op, f"memory scope is required for {mo} store")


_HINT_KEYS = {
    "entry": ("num_cta_in_cga", "num_worker_warps_per_cta", "occupancy"),
    "view": ("allow_tma", "latency"),
    "ptr": ("allow_tma", "latency"),
}
_ARCHES = (*BASE_NAMES, "default")     # the hints' target keys: every base target of the target table


def _hints(op: Operation, kind: str, strict: bool = False) -> None:
    """Optimization hints: NVIDIA's tools only warn about unknown keys or values
    unless asked to treat hints strictly, so by default nothing is rejected."""
    h = _attr(op, "optimization_hints")
    if not strict or not isinstance(h, A.OptimizationHints) or not h.entries:
        return
    allowed = _HINT_KEYS[kind]
    for arch, items in h.entries:
        if arch not in _ARCHES or any(k not in allowed for k, _ in items):
            raise fail(op, "Optimization hints verification failed")


def _view_common(op: Operation, tile_type: Any) -> None:
    view = op.operand("view").type
    index = op.operand_group("index")
    rank = len(view.tile_shape)
    if len(index) != rank:
        raise fail(op, f"expected {rank} index operands (based on view type), got {len(index)}")
    expect = view_tile_type(view)
    if tile_type != expect:
        raise fail(op, f"expected tile type to be {dtype(expect)} (based on view type), got {dtype(tile_type)}")
    types = [v.type for v in index]
    if types:
        if isinstance(view, T.GatherScatterViewType):
            sd = view.sparse_dim
            if sd >= len(types):
                raise fail(op, f"gather/scatter dimension {sd} is out of range for index count {len(types)}")
            g = types[sd]
            if not isinstance(g, T.TileType) or len(g.shape) != 1:
                rank_s = len(g.shape) if isinstance(g, T.TileType) else 0
                raise fail(op, f"expected index at sparse_dim position {sd} to be a 1D tensor for GatherScatterView, "
                               f"got rank {rank_s}")
            if g.shape[0] != view.tile_shape[sd]:
                raise fail(op, f"expected gather/scatter index size ({g.shape[0]}) to match tile shape at "
                               f"gather/scatter dimension {sd} ({view.tile_shape[sd]})")
            base = None
            for i, t in enumerate(types):
                if i == sd:
                    continue
                if not isinstance(t, T.TileType) or t.shape:
                    raise fail(op, f"expected index {i} to be a scalar tile for GatherScatterView")
                if base is None:
                    base = t
                elif t != base:
                    raise fail(op, f"expected scalar index {i} to have the same type as other scalar indices "
                                   f"({dtype(base)}), got {dtype(t)}")
        else:
            for t in types:
                if not isinstance(t, T.TileType) or t.shape:
                    raise fail(op, f"expected index type to be a scalar tile, got {dtype(t)}")
            for i, t in enumerate(types):
                if t != types[0]:
                    raise fail(op, f"expected index type {i} to be the same as other index types ({dtype(types[0])}), "
                                   f"got {dtype(t)}")
    inb = _attr(op, "inbounds")
    if inb is not None and len(inb) != len(index):
        raise fail(op, f"inbounds size ({len(inb)}) must match the number of index dimensions ({len(index)})")
    _hints(op, "view")


@check("load_view_tko")
def _load_view(op: Operation) -> None:
    _view_common(op, op.results[0].type)
    _load_model(op)


@check("store_view_tko")
def _store_view(op: Operation) -> None:
    _view_common(op, op.operand("tile").type)
    _store_model(op)


@check("load_ptr_tko")
def _load_ptr(op: Operation) -> None:
    _hints(op, "ptr")
    src = op.operand("source").type
    res = op.results[0].type
    if isinstance(src, T.TileType) and isinstance(res, T.TileType):
        if src.shape != res.shape or src.element.pointee != res.element:  # type: ignore[attr-defined]
            raise fail(op, "failed to verify that `source` type is expected a pointer type of `result` type")
    mask = op.operand("mask")
    if mask is not None and mask.type.shape != res.shape:
        raise fail(op, "failed to verify that shape of 'mask' must match the shape of 'source'")
    pad = op.operand("paddingValue")
    if pad is not None and pad.type != res:
        raise fail(op, "type of 'paddingValue' must match the type of 'result'")
    _load_model(op)


@check("store_ptr_tko")
def _store_ptr(op: Operation) -> None:
    _hints(op, "ptr")
    dst = op.operand("destination").type
    val = op.operand("value").type
    if dst.shape != val.shape or dst.element.pointee != val.element:
        raise fail(op, "failed to verify that `destination` type is expected a pointer type of `value` type")
    mask = op.operand("mask")
    if mask is not None and mask.type.shape != val.shape:
        raise fail(op, "failed to verify that shape of 'destination' must match the shape of 'mask'")
    _store_model(op)


_INT_MODES = ("and", "or", "xor", "add", "max", "min", "umax", "umin")


def _rmw_mode(op: Operation, mode: str, e: Any) -> None:
    name = e.name if isinstance(e, T.ScalarType) else ""
    if mode in _INT_MODES:
        if name not in ("i32", "i64"):
            raise fail(op, f"'{mode}' works only with integers i32 and i64")
    elif mode == "addf":
        if name not in ("f32", "f64", "f16", "bf16"):
            raise fail(op, f"'{mode}' works only with floats f16, bf16, f32, and f64")
    elif mode == "xchg":
        if bitwidth(e) not in (32, 64) or name == "tf32":
            raise fail(op, f"'{mode}' works only with integers or float of 32 or 64 bitwidth")


def _atomic_ordering(op: Operation) -> None:
    if _attr(op, "memory_ordering_semantics") not in ("relaxed", "acquire", "release", "acq_rel"):
        raise fail(op, "memory ordering semantics must be one of: relaxed, acquire, release, acq_rel")


@check("atomic_rmw_tko")
def _rmw(op: Operation) -> None:
    pointee = op.operand("pointers").type.element.pointee
    e = elem(op.operand("arg").type)
    if pointee != e:
        raise fail(op, f"expected pointee type ({dtype(pointee)}) to match element type of 'arg' ({dtype(e)})")
    mask = op.operand("mask")
    if mask is not None and mask.type.shape != op.operand("arg").type.shape:
        raise fail(op, "failed to verify that all of {pointers, arg, mask} have same shape")
    _rmw_mode(op, _attr(op, "mode"), e)
    _atomic_ordering(op)


@check("atomic_cas_tko")
def _cas(op: Operation) -> None:
    pointee = op.operand("pointers").type.element.pointee
    e = elem(op.operand("val").type)
    if pointee != e:
        raise fail(op, f"expected pointee type ({dtype(pointee)}) to match element type of 'val' ({dtype(e)})")
    if bitwidth(e) not in (32, 64) or elem_name(e) == "tf32":
        raise fail(op, "expect only float or integer types with 32 or 64 bit")
    mask = op.operand("mask")
    if mask is not None and mask.type.shape != op.operand("val").type.shape:
        raise fail(op, "failed to verify that all of {pointers, val, cmp and mask} have same shape")
    _atomic_ordering(op)


@check("atomic_red_view_tko")
def _red_view(op: Operation) -> None:
    view = op.operand("view").type
    if isinstance(view, T.GatherScatterViewType):
        raise fail(op, "gather_scatter_view is not supported; use partition_view instead")
    vt = view_tile_type(view)
    val = op.operand("value").type
    if vt.element != val.element:
        raise fail(op, f"view element type ({dtype(vt.element)}) must match value element type ({dtype(val.element)})")
    if vt.shape != val.shape:
        raise fail(op, f"view tile shape {dims(vt.shape)} must match value shape {dims(val.shape)} for element-wise "
                       "atomic operations")
    mode = _attr(op, "mode")
    if mode == "xchg":
        raise fail(op, "atomic_red_view_tko op cannot use xchg operation")
    _rmw_mode(op, mode, val.element)
    if _attr(op, "memory_ordering_semantics") != "relaxed":
        raise fail(op, "only 'relaxed' memory ordering is supported for view-based atomic reductions")
    if _attr(op, "memory_scope") == "sys":
        raise fail(op, "memory scope 'sys' is not supported for view-based atomic reductions; use 'tl_blk' or "
                       "'device' for TMA compatibility")
    index = op.operand_group("index")
    if len(index) != len(vt.shape):
        raise fail(op, f"expected {len(vt.shape)} index operand(s) for view with tile rank {len(vt.shape)}, got "
                       f"{len(index)}")
    inb = _attr(op, "inbounds")
    if inb is not None and len(inb) != len(index):
        raise fail(op, f"inbounds size ({len(inb)}) must match the number of index dimensions ({len(index)})")
    for i, v in enumerate(index):
        if v.type.shape:
            raise fail(op, f"index operand {i} must be a scalar tile (rank 0), got shape {dims(v.type.shape)}")


@check("make_tensor_view")
def _make_tv(op: Operation) -> None:
    tv = op.results[0].type
    base = op.operand("base").type.element.pointee
    if tv.element != base:
        raise fail(op, f"expected pointer to {dtype(tv.element)} to build tensor_view of this type, got {dtype(base)}")
    shape = op.operand_group("dynamicShape")
    strides = op.operand_group("dynamicStrides")
    ns = sum(1 for d in tv.shape if d == T.DYNAMIC)
    nst = sum(1 for d in tv.strides if d == T.DYNAMIC)
    if ns != len(shape):
        raise fail(op, f"expected {ns} dynamic shape operands, got {len(shape)}")
    if nst != len(strides):
        raise fail(op, f"expected {nst} dynamic stride operands, got {len(strides)}")
    first = (shape or strides or [None])[0]
    for kind, vals in (("shape", shape), ("stride", strides)):
        for i, v in enumerate(vals):
            if v.type != first.type:
                raise fail(op, f"expected dynamic {kind} index {i} to be of the same type as the other dynamic values "
                               f"({dtype(first.type)}), got {dtype(v.type)}")


@check("make_partition_view", "make_strided_view", "make_gather_scatter_view")
def _make_view(op: Operation) -> None:
    tv = op.operands[0].type
    want = op.results[0].type.tensor_view
    if tv != want:
        raise fail(op, f"expected the type of the provided tensor_view value ({dtype(tv)}) to be the same as the view's "
                       f"tensor_view type ({dtype(want)})")


@check("get_tensor_shape")
def _get_tensor_shape(op: Operation) -> None:
    n = len(op.operands[0].type.shape)
    if len(op.results) != n:
        raise fail(op, f"expected {n} results due to tensor rank, but got {len(op.results)}")


@check("get_index_space_shape")
def _get_index_shape(op: Operation) -> None:
    n = len(op.operands[0].type.tile_shape)
    if len(op.results) != n:
        raise fail(op, f"expected {n} results due to view index space rank, but got {len(op.results)}")


# -- control flow --------------------------------------------------------------------------
def _parent(op: Operation) -> Optional[Operation]:
    blk = op.parent
    reg = blk.parent if blk is not None else None
    return reg.parent if reg is not None else None


def _enclosing(op: Operation, kinds: tuple[str, ...], note: str) -> Operation:
    cur = op
    while True:
        p = _parent(cur)
        if p is None or p.name in kinds:
            if p is None:
                raise fail(op, note)
            return p
        if p.name != "cuda_tile.if":
            raise fail(op, note)
        cur = p


@check("break")
def _break(op: Operation) -> None:
    loop = _enclosing(op, ("cuda_tile.loop",), "can only be nested within a ancestor chain of 'cuda_tile.loop', "
                                               "'cuda_tile.if' operations")
    got = [v.type for v in op.operands]
    want = [r.type for r in loop.results]
    if got != want:
        raise fail(op, f"operand types must correspond to the parent loop result types: ({dtypes(got)}) vs "
                       f"({dtypes(want)})")


@check("continue")
def _continue(op: Operation) -> None:
    loop = _enclosing(op, ("cuda_tile.loop", "cuda_tile.for"),
                      "can only be nested within a ancestor chain of 'cuda_tile.for', 'cuda_tile.loop', "
                      "'cuda_tile.if' operations")
    got = [v.type for v in op.operands]
    if loop.name == "cuda_tile.loop":
        want = [v.type for v in loop.operands]
        if got != want:
            raise VerifyFailure(op, f"`loop` is missing a valid terminator. `continue` op should have operand types "
                                    f"that match the parent loop iter_values: ({dtypes(want)}), but found: "
                                    f"({dtypes(got)})")
    else:
        want = [r.type for r in loop.results]
        if got != want:
            raise VerifyFailure(op, f"`for` is missing a valid terminator. `continue` op should have operand types "
                                    f"that match the parent loop return types: ({dtypes(want)}), but found: "
                                    f"({dtypes(got)})")


@check("return")
def _return(op: Operation) -> None:
    cur = _parent(op)
    while cur is not None and cur.name == "cuda_tile.if":
        cur = _parent(cur)
    if cur is None or cur.name != "cuda_tile.entry":
        raise fail(op, "must be used within a cuda_tile.entry, or cuda_tile.if operation")
    results = cur.attributes["function_type"].results
    if len(op.operands) != len(results):
        raise fail(op, f"has {len(op.operands)} operands, but enclosing function (@{cur.attributes['sym_name']}) "
                       f"returns {len(results)}")
    if op.operands:
        raise fail(op, f"has {len(op.operands)} operands, but entry function must return 0 operands")


@check("yield")
def _yield(op: Operation) -> None:
    p = _parent(op)
    if p is None or p.name not in ("cuda_tile.if", "cuda_tile.reduce", "cuda_tile.scan"):
        raise fail(op, "expects parent op to be one of 'cuda_tile.if, cuda_tile.reduce, cuda_tile.scan'")


@check("entry")
def _entry(op: Operation) -> None:
    ft = op.attributes["function_type"]
    if ft.results:
        raise fail(op, "entry op must not return values")
    for t in ft.inputs:
        if isinstance(t, T.TileType) and t.shape:
            raise fail(op, "entry op must have scalar types (rank 0 !cuda_tile.tile)")
    block = op.regions[0].blocks[0] if op.regions and op.regions[0].blocks else None
    if block is None or [a.type for a in block.arguments] != list(ft.inputs):
        raise fail(op, "entry block arguments must match the function type")
    _hints(op, "entry")


@check("if")
def _if(op: Operation) -> None:
    ret = [r.type for r in op.results]
    for i, t in enumerate(ret):
        if isinstance(t, T.TensorViewType):
            raise fail(op, f"result type {i} is a tensor_view, which is not supported")
        if isinstance(t, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType)):
            raise fail(op, f"result type {i} is a tile view, which is not supported")


@check("if", regions=True)
def _if_regions(op: Operation) -> None:
    ret = [r.type for r in op.results]

    def check_branch(region, name: str) -> None:
        if not region.blocks or not region.blocks[0].operations:
            return
        y = region.blocks[0].operations[-1]
        if y.name != "cuda_tile.yield":
            return
        got = [v.type for v in y.operands]
        if ret and not got:
            raise fail(op, f"has return type of {dtypes(ret)} but {name} branch does not yield anything")
        if not ret and got:
            raise fail(op, f"does not return a value, but {name} branch yields {dtypes(got)}")
        if got != ret:
            raise fail(op, f"type does not match yield type, {name} branch yields {dtypes(got)} but op result type is "
                           f"{dtypes(ret)}")

    if not op.regions or not op.regions[0].blocks:
        raise fail(op, "must define then branch")
    check_branch(op.regions[0], "then")
    if len(op.regions) < 2 or not op.regions[1].blocks:
        if ret:
            raise fail(op, "has non-empty return type, must define else branch")
        return
    check_branch(op.regions[1], "else")


def _loop_iters(op: Operation, iter_args) -> None:
    inits = op.operand_group("initValues")
    if len(iter_args) != len(inits):
        raise fail(op, f"mismatch in number of region iterator values and loop iterator inits: {len(iter_args)} vs "
                       f"{len(inits)}")
    for i, (init, arg) in enumerate(zip(inits, iter_args)):
        if isinstance(arg.type, T.TensorViewType):
            raise fail(op, f"loop-carried value {i} is a tensor_view, which is not supported")
        if isinstance(arg.type, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType)):
            raise fail(op, f"loop-carried value {i} is a tile view, which is not supported")
        if init.type != arg.type:
            raise fail(op, f"init value {i} and region iter_value {i} have different type: {dtype(init.type)} != "
                           f"{dtype(arg.type)}")
    for i, r in enumerate(op.results):
        if isinstance(r.type, T.TensorViewType):
            raise fail(op, f"result type {i} is a tensor_view, which is not supported")
        if isinstance(r.type, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType)):
            raise fail(op, f"result type {i} is a tile view, which is not supported")


@check("for", regions=True)
def _for_regions(op: Operation) -> None:
    block = op.regions[0].blocks[0] if op.regions[0].blocks else None
    if block is None or not block.arguments:
        raise fail(op, "expected at least one block argument for induction variable")
    iv = block.arguments[0]
    if iv.type != op.operands[0].type:
        raise fail(op, f"expected induction variable to be same type as bounds and step: {dtype(iv.type)} vs "
                       f"{dtype(op.operands[0].type)}")
    _loop_iters(op, block.arguments[1:])
    if [r.type for r in op.results] != [v.type for v in op.operand_group("initValues")]:
        raise fail(op, "failed to verify that all of {initValues, resultValues} have same type")


@check("loop", regions=True)
def _loop_regions(op: Operation) -> None:
    block = op.regions[0].blocks[0] if op.regions[0].blocks else None
    _loop_iters(op, block.arguments if block is not None else [])


@check("reduce", "scan")
def _aggregate(op: Operation) -> None:
    ops = op.operands
    if not ops:
        raise fail(op, "expect at least 1 operand")
    if len(ops) != len(op.results):
        raise fail(op, "expect same number of operands and results")
    ids = _attr(op, "identities", ())
    if len(ids) != len(ops):
        raise fail(op, f"expect identities to match the number of operands but got: {len(ops)} operands and "
                       f"{len(ids)} identities")
    for i, (v, ident) in enumerate(zip(ops, ids)):
        it = getattr(ident, "type", T.I1 if isinstance(ident, bool) else None)
        e = elem(v.type)
        if {elem_name(e), getattr(it, "name", "")} == {"bf16", "f16"}:
            continue
        if it != e:
            raise fail(op, f"expect same type for operand at index: {i} and identity at index: {i} but got: "
                           f"{dtype(e)} and {dtype(it)}")
    rank = len(ops[0].type.shape)
    dim = _attr(op, "dim", 0)
    if dim < 0 or dim >= rank:
        raise fail(op, f"dimension ({dim}) is out of bound [0, {rank})")
    if op.name == "cuda_tile.scan":
        for i, (v, r) in enumerate(zip(ops, op.results)):
            if v.type != r.type:
                raise fail(op, f"expect same type for operand at index: {i} and result at index: {i}")
    else:  # InferTypeOpInterface: the whole inferred list against the whole result list
        inferred = [T.TileType(tuple(d for k, d in enumerate(v.type.shape) if k != dim), v.type.element)
                    for v in ops]
        if inferred != [r.type for r in op.results]:
            raise fail(op, f"inferred type(s) {dtypes(inferred)} are incompatible with return type(s) of operation "
                           f"{dtypes(r.type for r in op.results)}")


_PURE = None


@check("reduce", "scan", regions=True)
def _aggregate_regions(op: Operation) -> None:
    n = len(op.operands)
    block = op.regions[0].blocks[0] if op.regions[0].blocks else None
    if block is None or not block.operations:
        raise fail(op, "expect non-empty block")
    args = [a.type for a in block.arguments]
    if len(args) != 2 * n:
        raise fail(op, f"expect {2 * n} block arguments but got: {len(args)}")
    for i, t in enumerate(args):
        if not (isinstance(t, T.TileType) and not t.shape):
            raise fail(op, f"expect 0-rank tile type at index: {i} but got: {dtype(t)}")
    for i in range(0, 2 * n - 1, 2):
        if args[i].element != args[i + 1].element:
            raise fail(op, f"expect same element type for block argument at index: {i} and {i + 1} but got: "
                           f"{dtype(args[i].element)} and {dtype(args[i + 1].element)}")
    for i, v in enumerate(op.operands):
        if elem(v.type) != args[2 * i].element:
            raise fail(op, f"expect same type for operand at index: {i} and block argument at index: {2 * i} but got: "
                           f"{dtype(elem(v.type))} and {dtype(args[2 * i].element)}")
    term = block.operations[-1]
    if len(term.operands) != n:
        raise fail(op, f"expect number of terminators operands ({len(term.operands)}) to match number of operands "
                       f"({n})")
    for i, (v, t) in enumerate(zip(op.operands, term.operands)):
        if elem(v.type) != elem(t.type):
            raise fail(op, f"expect same type for operand at index: {i} and terminator argument at index: {i} but got: "
                           f"{dtype(elem(v.type))} and {dtype(elem(t.type))}")
    for inner in block.operations[:-1]:
        if not inner.definition.has_trait("Pure"):
            raise VerifyFailure(inner, f"only pure operations are allowed inside '{op.name}'")


@check("get_global")
def _get_global(op: Operation) -> None:
    name = op.attributes.get("name")
    module = op
    while module is not None and module.name != "cuda_tile.module":
        module = _parent(module)
    if module is None:
        return
    for g in module.regions[0].blocks[0].operations:
        if g.name == "cuda_tile.global" and g.attributes.get("sym_name") == name:
            ptr = op.results[0].type.element
            gt = g.attributes["value"].type.element
            if ptr.pointee != gt:
                raise fail(op, f"pointee type of result type {dtype(ptr)} does not match type {dtype(gt)} of the "
                               f"global @{name}")
            return
    raise fail(op, f"'{name}' does not reference a valid global")
