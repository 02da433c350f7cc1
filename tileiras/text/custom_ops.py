"""Hand-written printers: custom<...> format directives and ops without a format."""

from __future__ import annotations


from ..ir import attributes as A
from ..ir import types as T
from ..ir.core import Operation
from ..dialects.registry import OpDef
from .printer import (Printer, dense_str, hints_str, predicate_str, types_str)

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Callable


# -- custom<...> directives of declarative formats -------------------------------------
def _attr(op: Operation, args) -> object:
    return op.attributes.get(args[0].name)


def _rounding_unless(default: str) -> Callable:
    def directive(p: Printer, op: Operation, defn: OpDef, args) -> None:
        v = _attr(op, args)
        if v is not None and v != default:
            p.out.append(f"rounding<{v}>")
    return directive


def _keyword(p: Printer, op: Operation, defn: OpDef, args) -> None:
    p.out.append(str(_attr(op, args)))


def _cuda_tile_type(p: Printer, op: Operation, defn: OpDef, args) -> None:
    arg = args[0]
    p.out.append(p.types_of(op, defn, arg.name))


def _dense(p: Printer, op: Operation, defn: OpDef, args) -> None:
    value = op.attributes[args[0].name]
    rtype = p.typed(op.results[0]) if len(args) > 1 and op.results else value.type
    p.out.append(dense_str(value, rtype))


def _dense_no_result(p: Printer, op: Operation, defn: OpDef, args) -> None:
    value = op.attributes[args[0].name]
    p.out.append(dense_str(value))


def _visibility(p: Printer, op: Operation, defn: OpDef, args) -> None:
    v = _attr(op, args)
    if v is not None and v != "public":
        p.out.append(f"{v} ")


def _assume_predicate(p: Printer, op: Operation, defn: OpDef, args) -> None:
    p.out.append(predicate_str(_attr(op, args)))


def _if_region(p: Printer, op: Operation, defn: OpDef, args) -> None:
    idx = defn.regions.index(args[0].name)
    region = op.regions[idx]
    term = region.blocks[0].operations[-1] if region.blocks and region.blocks[0].operations else None
    print_term = term is None or bool(term.operands) or term.name != "cuda_tile.yield"
    p.region(region, print_terminator=print_term)


def _argument_region(p: Printer, op: Operation, defn: OpDef, args) -> None:
    idx = defn.regions.index(args[0].name)
    region = op.regions[idx]
    p.out.append("\n" + " " * p.indent)
    block_args = region.blocks[0].arguments if region.blocks else []
    p.out.append("(" + ", ".join(f"{p.ref(a)}: {p.typed(a)}" for a in block_args) + ") ")
    p.region(region)


CUSTOM_DIRECTIVES: dict[str, Callable] = {
    "CudaTileType": _cuda_tile_type,
    "IEEERoundingMode": _rounding_unless("nearest_even"),
    "DivFOpRoundingMode": _rounding_unless("nearest_even"),
    "FToFRoundingMode": _rounding_unless("nearest_even"),
    "SqrtOpRoundingMode": _rounding_unless("nearest_even"),
    "TanHOpRoundingMode": _rounding_unless("full"),
    "ExpOpRoundingMode": _rounding_unless("full"),
    "IntegerRoundingMode": _rounding_unless("nearest_int_to_zero"),
    "Signedness": _keyword,
    "ComparisonPredicate": _keyword,
    "ComparisonOrdering": _keyword,
    "SymbolVisibility": _visibility,
    "AssumePredicate": _assume_predicate,
    "DenseTypedElementsAttr": _dense,
    "DenseTypedElementsAttrNoResult": _dense_no_result,
    "IfOpRegion": _if_region,
    "ArgumentRegion": _argument_region,
}


# -- ops with hand-written printers ------------------------------------------------------
def _entry(p: Printer, op: Operation) -> None:
    out = p.out
    out.append(" " + _symbol(op.attributes["sym_name"]))
    ftype: T.FunctionType = op.attributes["function_type"]
    block = op.regions[0].blocks[0] if op.regions and op.regions[0].blocks else None
    args = block.arguments if block is not None else []
    out.append("(" + ", ".join(f"{p.ref(a)}: {p.typed(a)}" for a in args) + ")")
    if ftype.results:
        if len(ftype.results) == 1:
            out.append(f" -> {ftype.results[0]}")
        else:
            out.append(" -> (" + types_str(ftype.results) + ")")
    hints = op.attributes.get("optimization_hints")
    if isinstance(hints, A.OptimizationHints) and hints.entries:
        out.append(" optimization_hints=" + hints_str(hints))
    out.append(" ")
    p.region(op.regions[0])
    p.attr_dict(op, {"arg_attrs", "function_type", "sym_name", "res_attrs", "optimization_hints"})


def _symbol(name: str) -> str:
    from .printer import symbol

    return symbol(name)


def _view_common(p: Printer, op: Operation) -> None:
    p.out.append(" " + op.attributes["memory_ordering_semantics"])
    scope = op.attributes.get("memory_scope")
    if scope is not None:
        p.out.append(" " + scope)


def _view_optionals(p: Printer, op: Operation) -> None:
    token = op.operand("token")
    if token is not None:
        p.out.append(" token = " + p.ref(token))
    hints = op.attributes.get("optimization_hints")
    if hints is not None:
        p.out.append(" optimization_hints = " + hints_str(hints))
    _inbounds(p, op)
    p.attr_dict(op, {"memory_ordering_semantics", "memory_scope", "optimization_hints", "operandSegmentSizes",
                     "inbounds"}, keyword=True)


def _inbounds(p: Printer, op: Operation) -> None:
    flags = op.attributes.get("inbounds")
    if flags and any(flags):
        p.out.append(" inbounds = [" + ", ".join("true" if f else "false" for f in flags) + "]")


def _index_types(p: Printer, index) -> None:
    if not index:
        return
    types = [v.type for v in index]
    if all(t == types[0] for t in types):
        p.out.append(f", {types[0]}")
    else:
        for t in types:
            p.out.append(f", {t}")


def _load_view(p: Printer, op: Operation) -> None:
    _view_common(p, op)
    index = op.operand_group("index")
    p.out.append(f" {p.ref(op.operand('view'))}[{p.refs(index)}]")
    _view_optionals(p, op)
    p.out.append(f" : {p.typed(op.operand('view'))}")
    _index_types(p, index)
    p.out.append(f" -> {p.typed(op.results[0])}, {p.typed(op.results[1])}")


def _store_view(p: Printer, op: Operation) -> None:
    _view_common(p, op)
    index = op.operand_group("index")
    p.out.append(f" {p.ref(op.operand('tile'))}, {p.ref(op.operand('view'))}[{p.refs(index)}]")
    _view_optionals(p, op)
    p.out.append(f" : {p.typed(op.operand('tile'))}, {p.typed(op.operand('view'))}")
    _index_types(p, index)
    p.out.append(f" -> {op.results[0].type}")


def _atomic_red_view(p: Printer, op: Operation) -> None:
    _view_common(p, op)
    index = op.operand_group("index")
    p.out.append(f" {p.ref(op.operand('view'))}[{p.refs(index)}], {op.attributes['mode']}, "
                 f"{p.ref(op.operand('value'))}")
    token = op.operand("token")
    if token is not None:
        p.out.append(" token = " + p.ref(token))
    _inbounds(p, op)
    p.attr_dict(op, {"memory_ordering_semantics", "memory_scope", "mode", "operandSegmentSizes", "inbounds"},
                keyword=True)
    p.out.append(f" : {p.typed(op.operand('value'))}, {p.typed(op.operand('view'))}")
    _index_types(p, index)
    p.out.append(f" -> {op.results[0].type}")


def _make_tensor_view(p: Printer, op: Operation) -> None:
    tv: T.TensorViewType = op.results[0].type  # type: ignore[assignment]
    shape_vals = list(op.operand_group("dynamicShape"))
    stride_vals = list(op.operand_group("dynamicStrides"))

    def mixed(static, dyn) -> str:
        it = iter(dyn)
        parts = []
        for s in static:
            if s == T.DYNAMIC:
                v = next(it, None)
                parts.append(p.ref(v) if v is not None else "<<missing>>")
            else:
                parts.append(str(s))
        return ", ".join(parts)

    p.out.append(f" {p.ref(op.operand('base'))}, shape = [{mixed(tv.shape, shape_vals)}], "
                 f"strides = [{mixed(tv.strides, stride_vals)}]")
    p.attr_dict(op, {"operandSegmentSizes"})
    p.out.append(" : ")
    base = op.operand("base").type
    if getattr(getattr(base, "element", None), "ptr_attr", None) is not None:
        p.out.append(f"{base}" + (", " if shape_vals or stride_vals else " -> "))  # not inferable from the view
    if shape_vals or stride_vals:
        p.out.append(f"{(shape_vals or stride_vals)[0].type} -> ")
    p.out.append(str(tv))


def _make_view(p: Printer, op: Operation) -> None:
    p.out.append(" " + p.ref(op.operands[0]))
    p.attr_dict(op, set())
    p.out.append(f" : {p.typed(op.results[0])}")


def _get_shape(p: Printer, op: Operation) -> None:
    p.out.append(f" {p.ref(op.operands[0])} : {p.typed(op.operands[0])} -> ")
    p.out.append(p.typed(op.results[0]) if op.results else "")


def _control_region(p: Printer, op: Operation) -> None:
    region = op.regions[0]
    ops = region.blocks[0].operations if region.blocks else []
    term = ops[-1] if ops else None
    print_term = term is None or bool(term.operands) or term.name != "cuda_tile.continue"
    p.region(region, print_terminator=print_term)


def _for(p: Printer, op: Operation) -> None:
    out = p.out
    if op.attributes.get("unsignedCmp"):
        out.append(" unsigned")
    block = op.regions[0].blocks[0]
    iv = block.arguments[0]
    lb, ub, step = op.operands[0], op.operands[1], op.operands[2]
    out.append(f" {p.ref(iv)} in ({p.ref(lb)} to {p.ref(ub)}, step {p.ref(step)}) : {iv.type} ")
    inits = op.operand_group("initValues")
    if inits:
        pairs = ", ".join(f"{p.ref(a)} = {p.ref(v)}" for a, v in zip(block.arguments[1:], inits))
        out.append(f"iter_values({pairs}) -> ({', '.join(p.typed(v) for v in inits)}) ")
    _control_region(p, op)
    p.attr_dict(op, {"unsignedCmp"})


def _loop(p: Printer, op: Operation) -> None:
    out = p.out
    out.append(" ")
    inits = op.operand_group("initValues")
    block = op.regions[0].blocks[0]
    has_ret = bool(op.results)
    if inits:
        pairs = ", ".join(f"{p.ref(a)} = {p.ref(v)}" for a, v in zip(block.arguments, inits))
        out.append(f"iter_values({pairs}) ")
    if inits or has_ret:
        out.append(": ")
    if inits:
        out.append(", ".join(p.typed(v) for v in inits) + " ")
        if has_ret:
            out.append("-> ")
    if has_ret:
        out.append(", ".join(p.typed(r) for r in op.results) + " ")
    _control_region(p, op)
    p.attr_dict(op, set())


# The multimem ops as NVIDIA's tileirdisasm 13.5 prints them (observed): the view comes first even where
# a tile is stored, `reduction` is left in the attribute dictionary (elided when `add`), a space always
# follows the optional clauses, and the token's type is listed after the index types.
def _multimem(p: Printer, op: Operation) -> None:
    _view_common(p, op)
    index = op.operand_group("index")
    view = op.operand("view")
    tile = op.operand("tile") if op.name != "cuda_tile.multimem_load_reduce_view_tko" else None
    token = op.operand("token")
    out = p.out
    out.append(f" {p.ref(view)}, {p.ref(tile)}[" if tile is not None else f" {p.ref(view)}[")
    out.append(f"{p.refs(index)}]")
    if token is not None:
        out.append(" token = " + p.ref(token))
    flags = op.attributes.get("inbounds")
    out.append(" inbounds = [" + ", ".join("true" if f else "false" for f in flags) + "]" if flags and any(flags)
               else " ")
    p.attr_dict(op, {"memory_ordering_semantics", "memory_scope", "operandSegmentSizes", "inbounds"},
                keyword=True)
    out.append(f" : {p.typed(view)}" + (f", {p.typed(tile)}" if tile is not None else ""))
    _index_types(p, index)
    if token is not None:
        out.append(f", {p.typed(token)}")
    out.append(" -> " + ", ".join(p.typed(r) for r in op.results))


CUSTOM_PRINTERS: dict[str, Callable[[Printer, Operation], None]] = {
    "cuda_tile.entry": _entry,
    "cuda_tile.load_view_tko": _load_view,
    "cuda_tile.store_view_tko": _store_view,
    "cuda_tile.atomic_red_view_tko": _atomic_red_view,
    "cuda_tile.make_tensor_view": _make_tensor_view,
    "cuda_tile.make_partition_view": _make_view,
    "cuda_tile.make_strided_view": _make_view,
    "cuda_tile.make_gather_scatter_view": _make_view,
    "cuda_tile.get_tensor_shape": _get_shape,
    "cuda_tile.get_index_space_shape": _get_shape,
    "cuda_tile.for": _for,
    "cuda_tile.loop": _loop,
    "cuda_tile.multimem_load_reduce_view_tko": _multimem,
    "cuda_tile.multimem_reduce_view_tko": _multimem,
    "cuda_tile.multimem_store_view_tko": _multimem,
}
