"""The rules behind the verifier: type constraints, type-relation traits and
per-op checks, with the diagnostics NVIDIA's dialect emits for each rule.

`check_op(op)` raises `VerifyFailure(op, message)` for the first broken rule
of one op (its own invariants); `check_regions(op)` checks what depends on
the op's nested ops (terminators, loop-carried values, reduce bodies).
Types in messages use MLIR's diagnostic spelling (`'!cuda_tile.tile<4xf32>'`).
"""

from __future__ import annotations


from ..ir import attributes as A
from ..ir import types as T
from ..ir.core import Operation, _default_segments
from .registry import OPTIONAL, SINGLE, VARIADIC, OpDef

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Callable, Optional

MAX_TILE_ELEMENTS = 16777216


class VerifyFailure(Exception):
    def __init__(self, op: Optional[Operation], message: str) -> None:
        super().__init__(message)
        self.op = op
        self.message = message


def fail(op: Operation, message: str) -> VerifyFailure:
    return VerifyFailure(op, message)


# -- MLIR diagnostic spelling of types -------------------------------------------
def dtype(t: Any) -> str:
    """A type as MLIR streams it into a diagnostic (quoted, dialect-qualified)."""
    return f"'{qualified(t)}'"


def qualified(t: Any) -> str:
    if isinstance(t, T.ScalarType):
        return t.name
    if isinstance(t, T.FunctionType):
        ins = ", ".join(qualified(x) for x in t.inputs)
        outs = ", ".join(qualified(x) for x in t.results)
        return f"({ins}) -> ({outs})" if len(t.results) != 1 else f"({ins}) -> {outs}"
    if isinstance(t, T.TileType) and t.encoding is not None:   # nv_tileas: the layout, as its text spells it
        return f"!cuda_tile.{str(t)[:-1]}, {T.encoding_text(t.encoding)}>"
    return "!cuda_tile." + str(t)


def dtypes(ts) -> str:
    return ", ".join(dtype(t) for t in ts)


def dims(shape) -> str:
    return ", ".join(str(d) for d in shape)


# -- type predicates ------------------------------------------------------------
INTS = ("i1", "i8", "i16", "i32", "i64")
BASE_FLOATS = ("f16", "bf16", "f32", "f64")
ALL_FLOATS = BASE_FLOATS + ("tf32", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "fnv8E5M3FNU")
NUMBERS = INTS + ALL_FLOATS


def elem(t: Any) -> Any:
    return t.element if isinstance(t, T.TileType) else t


def elem_name(t: Any) -> str:
    e = elem(t)
    return e.name if isinstance(e, T.ScalarType) else str(e)


def is_float(t: Any) -> bool:
    e = elem(t)
    return isinstance(e, T.ScalarType) and e.name in ALL_FLOATS


def is_int(t: Any) -> bool:
    e = elem(t)
    return isinstance(e, T.ScalarType) and (e.name in INTS or e.name == "i4")


def bitwidth(e: Any) -> int:
    if isinstance(e, T.ScalarType):
        if e.name == "tf32":
            return 19
        return T.SCALAR_BITS.get(e.name, 0)
    return 64


def _tile_of(names: tuple[str, ...], rank0: bool = False) -> Callable[[Any], bool]:
    def pred(t: Any) -> bool:
        if not isinstance(t, T.TileType) or (rank0 and t.shape):
            return False
        e = t.element
        return isinstance(e, T.ScalarType) and e.name in names
    return pred


def _ptr_tile(rank0: bool = False) -> Callable[[Any], bool]:
    return lambda t: isinstance(t, T.TileType) and isinstance(t.element, T.PointerType) and not (rank0 and t.shape)


def _views(t: Any) -> bool:
    return isinstance(t, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType))


def _summary(names: tuple[str, ...]) -> str:
    return " or ".join(names)


_MMAF_IN = ("f16", "bf16", "f32", "f64", "tf32", "f8E4M3FN", "f8E5M2")
_MMAF_ACC = ("f16", "f32", "f64")

# constraint name -> (predicate, MLIR summary)
CONSTRAINTS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "any": (lambda t: True, ""),
    "tile": (lambda t: isinstance(t, T.TileType), "Tile type"),
    "float_tile": (_tile_of(BASE_FLOATS), f"tile of {_summary(BASE_FLOATS)} values"),
    "anyfloat_tile": (_tile_of(ALL_FLOATS), f"tile of {_summary(ALL_FLOATS)} values"),
    "int_tile": (_tile_of(INTS), f"tile of {_summary(INTS)} values"),
    "int4_tile": (_tile_of(INTS + ("i4",)), f"tile of {_summary(INTS + ('i4',))} values"),
    "unpacked_tile": (_tile_of(NUMBERS + ("i4",)), f"tile of {_summary(NUMBERS + ('i4',))} values"),
    "mmaf_operand": (_tile_of(_MMAF_IN), f"mmaf operand tile type of {_summary(_MMAF_IN)} values"),
    "mmaf_acc": (_tile_of(_MMAF_ACC), f"mmaf acc/result tile type of {_summary(_MMAF_ACC)} values"),
    "mmai_operand": (_tile_of(("i8",)), "mmai operand tile type of i8 values"),
    "mmai_acc": (_tile_of(("i32",)), "mmai acc tile type of i32 values"),
    "mmai_result": (_tile_of(("i32",)), "mmai result tile type of i32 values"),
    "mmaf_scaled_operand": (_tile_of(("f8E4M3FN", "f8E5M2", "f4E2M1FN")),
                            "mmaf_scaled operand tile type of f8E4M3FN or f8E5M2 or f4E2M1FN values"),
    "mmaf_scaled_scale": (_tile_of(("f8E4M3FN", "f8E8M0FNU", "fnv8E5M3FNU")),
                          "mmaf_scaled scale tile type of f8E4M3FN or f8E8M0FNU or fnv8E5M3FNU values"),
    "mmaf_scaled_result": (_tile_of(("f32",)), "mmaf_scaled result tile type of f32 values"),
    "i64_tile": (_tile_of(("i64",)), "tile of i64 values"),
    "i1_tile": (_tile_of(("i1",)), "tile of i1 values"),
    "i8_tile": (_tile_of(("i8",)), "tile of i8 values"),
    "number_tile": (_tile_of(NUMBERS), f"tile of {_summary(NUMBERS)} values"),
    "ptr_tile": (_ptr_tile(), "tile of Pointer type values"),
    "scalar_i1": (_tile_of(("i1",), True), "0D tile of i1 values"),
    "scalar_i32": (_tile_of(("i32",), True), "0D tile of i32 values"),
    "scalar_int": (_tile_of(INTS, True), f"0D tile of {_summary(INTS)} values"),
    "scalar_ptr": (_ptr_tile(True), "0D tile of Pointer type values"),
    "token": (lambda t: isinstance(t, T.TokenType), "cuda tile token type"),
    "tensor_view": (lambda t: isinstance(t, T.TensorViewType), "tensor view type"),
    "partition_view": (lambda t: isinstance(t, T.PartitionViewType), "partition view type"),
    "strided_view": (lambda t: isinstance(t, T.StridedViewType), "strided view type"),
    "gather_view": (lambda t: isinstance(t, T.GatherScatterViewType), "gather/scatter view type"),
    "tile_view": (_views, "TileView instance"),
}

# Type relations (ODS traits), checked in this order after the constraints.
TYPES_MATCH: dict[str, list[tuple[str, ...]]] = {}
for _name, _groups in {
    ("absf", "absi", "ceil", "cos", "cosh", "exp", "exp2", "floor", "log", "log2", "negf", "negi", "rsqrt",
     "sin", "sinh", "sqrt", "tan", "tanh"): [("source", "result")],
    ("addf", "addi", "andi", "divf", "divi", "maxf", "maxi", "minf", "mini", "mulf", "muli", "ori", "remf",
     "shli", "shri", "subf", "subi", "xori"): [("lhs", "rhs", "result")],
    ("atan2", "mulhii"): [("x", "y", "result")],
    ("remi",): [("result", "lhs", "rhs")],
    ("assume",): [("value", "result")],
    ("fma",): [("lhs", "rhs", "acc", "result")],
    ("mmaf", "mmai", "mmaf_scaled"): [("acc", "result")],
    ("cmpf", "cmpi"): [("lhs", "rhs")],
    ("select",): [("val_if_true", "val_if_false", "result")],
    ("offset",): [("result", "ptr")],
    ("fpowf",): [("result", "source", "exponent")],
    ("atomic_cas_tko",): [("cmp", "val", "result")],
    ("atomic_rmw_tko",): [("arg", "result")],
    ("for",): [("lowerBound", "upperBound", "step")],
}.items():
    for _n in _name:
        TYPES_MATCH[f"cuda_tile.{_n}"] = _groups

SHAPES_MATCH: dict[str, tuple[str, ...]] = {f"cuda_tile.{k}": v for k, v in {
    "atomic_cas_tko": ("pointers", "cmp", "val", "result"), "atomic_rmw_tko": ("pointers", "arg", "result"),
    "bitcast": ("source", "result"), "exti": ("from", "to"), "trunci": ("from", "to"), "ftof": ("from", "to"),
    "ftoi": ("from", "to"), "itof": ("from", "to"), "int_to_ptr": ("source", "result"),
    "ptr_to_int": ("source", "result"), "ptr_to_ptr": ("source", "result"),
    "remi": ("result", "lhs", "rhs"), "select": ("cond", "val_if_true", "val_if_false", "result"),
    "fpowi": ("source", "exponent"),
}.items()}
RANKS_MATCH: dict[str, tuple[str, ...]] = {f"cuda_tile.{k}": v for k, v in {
    "broadcast": ("source", "result"), "cat": ("lhs", "rhs", "result"), "extract": ("source", "result"),
    "permute": ("source", "result"),
    "pack": ("source", "result"), "unpack": ("source", "result"), "fpowf": ("source", "exponent", "result"),
    "insert": ("source", "destination"), "mmaf": ("lhs", "rhs", "acc"), "mmai": ("lhs", "rhs", "acc"),
    "mmaf_scaled": ("lhs", "rhs", "acc"),
}.items()}
ELEMENTS_MATCH: dict[str, tuple[str, ...]] = {f"cuda_tile.{k}": v for k, v in {
    "cat": ("lhs", "rhs", "result"), "permute": ("source", "result"), "mmaf": ("lhs", "rhs"),
    "mmai": ("lhs", "rhs"), "mmaf_scaled": ("lhs", "rhs"), "insert": ("source", "destination"),
}.items()}
# Attribute constraints (ODS), checked before everything else: (op, attribute) -> (predicate, summary).
_NON_NEGATIVE_I32 = (lambda v: v >= 0, "32-bit signless integer attribute whose value is non-negative")
_MIN_ZERO_I64 = (lambda v: v >= 0, "64-bit signless integer attribute whose minimum value is 0")
ATTR_CONSTRAINTS: dict[str, dict[str, tuple[Callable[[Any], bool], str]]] = {
    "cuda_tile.reduce": {"dim": _NON_NEGATIVE_I32},
    "cuda_tile.scan": {"dim": _NON_NEGATIVE_I32},
    "cuda_tile.alloca": {"num_elem": _MIN_ZERO_I64, "alignment": _MIN_ZERO_I64},
}
# Regions are single-block (ODS SizedRegion<1>) except these, which may also be empty.
MAY_BE_EMPTY = {("cuda_tile.if", "elseRegion")}
SAME_SHAPE_ALL = {"cuda_tile.absf", "cuda_tile.absi", "cuda_tile.offset"}
SAME_ELEM_ALL = {"cuda_tile.broadcast", "cuda_tile.reshape"}
SAME_OPERANDS_SHAPE = {"cuda_tile.reduce", "cuda_tile.scan"}


def named_types(op: Operation, defn: OpDef, name: str) -> list[Any]:
    for g in defn.operands:
        if g.name == name:
            return [v.type for v in op.operand_group(name)]
    idx = 0
    for r in defn.results:
        if r.kind == VARIADIC:
            return [v.type for v in op.results] if r.name == name else []
        if r.name == name:
            return [op.results[idx].type] if idx < len(op.results) else []
        idx += 1
    return []


def _shape(t: Any) -> Optional[tuple]:
    return tuple(t.shape) if isinstance(t, T.TileType) else None


# -- type verifiers (types are checked where they are built) ------------------------
def check_tile_type(t: T.TileType) -> Optional[str]:
    if isinstance(t.element, T.ScalarType) and t.element.name == "f4E2M1FN":
        if not t.shape or all(d % 2 for d in t.shape):
            return "F4E2M1FN tiles must have an even number of elements"
    n = 1
    for d in t.shape:
        if d <= 0:
            return f"all dimensions must be positive constants, got {dims(t.shape)}"
        if d & (d - 1):
            return f"all dimensions must be powers of two, got {dims(t.shape)}"
        if n > MAX_TILE_ELEMENTS // d:
            return f"tile would exceed the maximum of {MAX_TILE_ELEMENTS} elements"
        n *= d
    return None


def _dyn(vals) -> str:
    return "[" + ", ".join("?" if v == T.DYNAMIC else str(v) for v in vals) + "]"


# Element types a pointer may point to (NVIDIA's list, in its order).
POINTEE_TYPES = ("f16", "bf16", "f32", "tf32", "f64", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f4E2M1FN", "fnv8E5M3FNU",
                 "i1", "i8", "i16", "i32", "i64")


def check_type(t: Any) -> Optional[str]:
    """The message of the first rule type `t` breaks (recursively), or None."""
    if isinstance(t, T.PointerType):
        if not (isinstance(t.pointee, T.ScalarType) and t.pointee.name in POINTEE_TYPES):
            return f"failed to verify 'pointeeType': {_summary(POINTEE_TYPES)}"
        return None
    if isinstance(t, T.TileType):
        if isinstance(t.element, T.PointerType):
            return check_type(t.element) or check_tile_type(t)
        return check_tile_type(t)
    if isinstance(t, T.TensorViewType):
        if len(t.shape) != len(t.strides):
            return (f"expected shape and stride to be of same rank but got shape of rank {len(t.shape)} "
                    f"and stride of rank {len(t.strides)}")
        if any(d <= 0 and d != T.DYNAMIC for d in t.shape):
            return f"dimensions must have strictly positive constant sizes but got {_dyn(t.shape)}"
        if any(d <= 0 and d != T.DYNAMIC for d in t.strides):
            return f"dimensions must have strictly positive constant strides but got {_dyn(t.strides)}"
        return None
    if isinstance(t, (T.PartitionViewType, T.StridedViewType, T.GatherScatterViewType)):
        err = check_type(t.tensor_view)
        if err:
            return err
        tile = list(t.tile_shape)
        tv = t.tensor_view
        if not tile:
            return "0-dimension tile shape is not supported"
        if len(tile) != len(tv.shape):
            return (f"expected tensor_view rank and tile rank to match, got tensor_view of rank {len(tv.shape)} "
                    f"and tiles of rank {len(tile)}")
        if not isinstance(t, T.GatherScatterViewType):
            if len(t.dim_map) != len(tile):
                return (f"expected dim_map to map exactly all {len(tile)} dimensions of the tile, got "
                        f"{len(t.dim_map)} mappings")
        if any(d <= 0 for d in tile):
            return f"tile shape dimensions must have positive length but got [{dims(tile)}]"
        if any(d & (d - 1) for d in tile):
            return f"tile shape dimensions must have power of two length but got [{dims(tile)}]"
        if isinstance(t, T.GatherScatterViewType):
            if t.sparse_dim >= len(tv.shape):
                return (f"gather dimension is outside of tensor view dimensions, expected strictly less than "
                        f"{len(tv.shape)}, got {t.sparse_dim}")
        else:
            used: dict[int, int] = {}
            for tile_dim, tv_dim in enumerate(t.dim_map):
                if tv_dim < 0:
                    return f"target dimension must not be negative, got {tv_dim}"
                if tv_dim >= len(tv.shape):
                    return (f"target dimension is outside of tensor view dimensions, expected strictly less than "
                            f"{len(tv.shape)}, got {tv_dim}")
                if tv_dim in used:
                    return (f"target dimension {tv_dim} mapped at least twice (for tile dimensions {used[tv_dim]} "
                            f"and {tile_dim})")
                used[tv_dim] = tile_dim
        err = check_tile_type(T.TileType(tuple(tile), tv.element))
        if err:
            return err
        pad = t.padding_value
        if pad is not None and pad.kind != "zero" and not is_float(tv.element):
            return (f"padding_value {pad.kind} can only be used with floating point element types, got "
                    f"{dtype(tv.element)}")
        if isinstance(t, T.StridedViewType):
            if len(t.traversal_strides) != len(tile):
                return f"expected {len(tile)} traversal strides, got {len(t.traversal_strides)}"
            if any(s <= 0 for s in t.traversal_strides):
                return f"traversal strides must be strictly positive but got [{dims(t.traversal_strides)}]"
        return None
    if isinstance(t, T.FunctionType):
        for x in t.inputs + t.results:
            err = check_type(x)
            if err:
                return err
    return None


def view_tile_type(v: Any) -> T.TileType:
    return T.TileType(tuple(v.tile_shape), v.tensor_view.element)


# -- generic invariants ---------------------------------------------------------------
def check_invariants(op: Operation, defn: OpDef) -> None:
    for name, (pred, summary) in ATTR_CONSTRAINTS.get(op.name, {}).items():
        v = op.attributes.get(name)
        if isinstance(v, int) and not pred(v):
            raise fail(op, f"attribute '{name}' failed to satisfy constraint: {summary}")
    # operand counts / groups
    sizes = op.segment_sizes or _default_segments(defn.operands, len(op.operands))
    if len(sizes) != len(defn.operands) or sum(sizes) != len(op.operands):
        raise fail(op, f"has {len(op.operands)} operands, which does not match its operand groups")
    i = 0
    for g, n in zip(defn.operands, sizes):
        if g.kind == SINGLE and n != 1 or g.kind == OPTIONAL and n > 1:
            raise fail(op, f"expects exactly {'one' if g.kind == SINGLE else 'at most one'} '{g.name}' operand")
        pred, summary = CONSTRAINTS[g.constraint]
        for v in op.operands[i:i + n]:
            if summary and not pred(v.type):
                prefix = "variadic of " if g.kind == VARIADIC else ""
                raise fail(op, f"operand #{i} must be {prefix}{summary}, but got {dtype(v.type)}")
            i += 1
    # results
    ri = 0
    for r in defn.results:
        pred, summary = CONSTRAINTS[r.constraint]
        vals = op.results[ri:] if r.kind == VARIADIC else op.results[ri:ri + 1]
        for v in vals:
            if summary and not pred(v.type):
                prefix = "variadic of " if r.kind == VARIADIC else ""
                raise fail(op, f"result #{v.index} must be {prefix}{summary}, but got {dtype(v.type)}")
        ri += len(vals)
    if ri != len(op.results):
        raise fail(op, f"has {len(op.results)} results, expected {ri}")
    # attributes
    for a in defn.attributes:
        v = op.attributes.get(a.name)
        if v is None:
            if not a.optional and a.kind != "unit" and a.default is None:
                raise fail(op, f"requires attribute '{a.name}'")
            continue
        if a.kind == "enum" and v not in A.ENUM_INDEX[a.enum]:  # type: ignore[index]
            shown = f"{v.value} : {v.type}" if isinstance(v, A.IntegerAttr) else v
            raise fail(op, f"attribute '{a.name}' has invalid value '{shown}'")
    # regions
    if len(op.regions) != len(defn.regions):
        raise fail(op, f"requires {len(defn.regions)} regions")
    for i, (region, rname) in enumerate(zip(op.regions, defn.regions)):
        if len(region.blocks) != 1 and not (not region.blocks and (op.name, rname) in MAY_BE_EMPTY):
            raise fail(op, f"region #{i} ('{rname}') failed to verify constraint: region with 1 blocks")
    # type relations
    name = op.name
    for group in TYPES_MATCH.get(name, ()):
        types = [t for n in group for t in named_types(op, defn, n)]
        if name == "cuda_tile.for":
            types = [t for n in group for t in named_types(op, defn, n)]
        if types and any(t != types[0] for t in types):
            raise fail(op, f"failed to verify that all of {{{', '.join(group)}}} have same type")
    if name in SAME_SHAPE_ALL:
        shapes = [_shape(v.type) for v in list(op.operands) + list(op.results)]
        if any(s != shapes[0] for s in shapes):
            raise fail(op, "requires the same shape for all operands and results")
    if name in SAME_ELEM_ALL:
        es = [elem(v.type) for v in list(op.operands) + list(op.results)]
        if any(e != es[0] for e in es):
            raise fail(op, "requires the same element type for all operands and results")
    if name in SAME_OPERANDS_SHAPE:
        shapes = [_shape(v.type) for v in op.operands]
        if any(s != shapes[0] for s in shapes):
            raise fail(op, "requires the same shape for all operands")
    group = SHAPES_MATCH.get(name)
    if group:
        shapes = [_shape(t) for n in group for t in named_types(op, defn, n)]
        if any(s != shapes[0] for s in shapes):
            raise fail(op, f"failed to verify that all of {{{', '.join(group)}}} have same shape")
    group = RANKS_MATCH.get(name)
    if group:
        ranks = [len(t.shape) for n in group for t in named_types(op, defn, n) if isinstance(t, T.TileType)]
        if any(r != ranks[0] for r in ranks):
            raise fail(op, f"failed to verify that all of {{{', '.join(group)}}} have same rank")
    group = ELEMENTS_MATCH.get(name)
    if group:
        es = [elem(t) for n in group for t in named_types(op, defn, n)]
        if any(e != es[0] for e in es):
            raise fail(op, f"failed to verify that all of {{{', '.join(group)}}} have the same element type")
    if name in ("cuda_tile.cmpf", "cuda_tile.cmpi"):
        lhs, res = op.operands[0].type, op.results[0].type
        if not (isinstance(lhs, T.TileType) and res == T.TileType(lhs.shape, T.I1)):
            raise fail(op, "failed to verify that Result type has i1 element type and same shape as operands")
    for v in list(op.results):
        err = check_type(v.type)
        if err:
            raise fail(op, err)
