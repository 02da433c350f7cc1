"""The TileIR text printer: byte-for-byte what NVIDIA's `tileirdisasm` prints.

The module's body ops are printed at indentation 0 (no module wrapper) with
the dialect prefix dropped; each op goes through its declaration's assembly
format (text/format.py) or its hand-written printer (text/custom_ops.py).
With `debug_info`, every op ends with `loc(#aliasN)` and the location
aliases follow the ops, ordered like MLIR's alias printer does.
"""

from __future__ import annotations


from ..ir import attributes as A
from ..ir import types as T
from ..ir.core import Location, Operation, Region, Value
from ..dialects.registry import OpDef, VARIADIC
from .format import AttrDict, Custom, Lit, OIList, Optional_, TypeOf, Var, compile_format
from .naming import Namer

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Optional

INDENT = 2

# Enums printed as a bare keyword by the declarative format (I32EnumAttr);
# the others are EnumAttr wrappers printed as `<keyword>`.
BARE_ENUMS = frozenset({"MemoryOrderingSemantics", "MemoryScope", "AtomicRMWMode", "MultimemReductionKind"})


def type_str(t: Any) -> str:
    return str(t)


def types_str(ts) -> str:
    return ", ".join(str(t) for t in ts)


def escape_string(s: str) -> str:
    """MLIR's string literal: printable ASCII kept, `"` and `\\` escaped, others as \\XX."""
    out = ['"']
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c == "\\":
            out.append("\\\\")
        elif 0x20 <= ch < 0x7F and c != '"':
            out.append(c)
        else:
            out.append("\\" + format(ch, "02X"))
    out.append('"')
    return "".join(out)


def _is_bare_identifier(s: str) -> bool:
    return bool(s) and (s[0].isalpha() or s[0] == "_") and all(c.isalnum() or c in "_$." for c in s)


def symbol(name: str) -> str:
    return "@" + (name if _is_bare_identifier(name) else escape_string(name))


# -- attribute values ----------------------------------------------------------------
def int_str(v: int) -> str:
    return str(v)


def typed_attr(v: Any) -> str:
    """An attribute with its type, as in ArrayAttr elements (`0 : i32`)."""
    if isinstance(v, A.IntegerAttr):
        if v.type.name == "i1":  # type: ignore[attr-defined]
            return "true" if v.value else "false"
        if v.type.name == "i64":  # type: ignore[attr-defined]
            return str(v.value)  # MLIR elides the default integer type
        return f"{v.value} : {v.type}"
    if isinstance(v, A.FloatAttr):
        from ..ir.floats import mlir_float

        text = mlir_float(v.bits, v.type.name)  # type: ignore[attr-defined]
        if v.type.name == "f64" and not text.startswith("0x"):  # type: ignore[attr-defined]
            return text  # the default float type is elided unless the value is printed as hex
        return f"{mlir_float(v.bits, v.type.name)} : {v.type}"  # type: ignore[attr-defined]
    if isinstance(v, bool):
        return "true" if v else "false"
    return untyped_attr(v)


def untyped_attr(v: Any) -> str:
    """printAttributeWithoutType."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, A.IntegerAttr):
        if v.type.name == "i1":  # type: ignore[attr-defined]
            return "true" if v.value else "false"
        return str(v.value)
    if isinstance(v, A.FloatAttr):
        from ..ir.floats import mlir_float

        return mlir_float(v.bits, v.type.name)  # type: ignore[attr-defined]
    if isinstance(v, str):
        return escape_string(v)
    if isinstance(v, A.DictAttr):
        return dict_attr(v)
    if isinstance(v, tuple):
        return "[" + ", ".join(typed_attr(x) for x in v) + "]"
    if isinstance(v, T.Type):
        return str(v)
    if isinstance(v, A.OptimizationHints):
        return hints_str(v)
    return str(v)


def dict_attr(d: A.DictAttr) -> str:
    if not d.items:
        return "{}"
    parts = []
    for k, v in d.items:
        if v is True and not isinstance(v, A.IntegerAttr):
            parts.append(k)  # unit attributes print as their name
        else:
            parts.append(f"{k} = {typed_attr(v)}")
    return "{" + ", ".join(parts) + "}"


def hints_str(h: A.OptimizationHints) -> str:
    arches = []
    for arch, items in h.entries:
        inner = ", ".join(f"{k} = {untyped_attr(v)}" for k, v in items)
        arches.append(f"{arch} = {{{inner}}}")
    return "<" + ", ".join(arches) + ">"


def predicate_str(p: Any) -> str:
    if isinstance(p, A.DivBy):
        s = f"div_by<{p.divisor}"
        if p.every is not None:
            s += f", every {p.every} along {p.along}"
        return s + ">"
    if isinstance(p, A.SameElements):
        return "same_elements<[" + ", ".join(str(v) for v in p.values) + "]>"
    if isinstance(p, A.Bounded):
        lb = "?" if p.lb is None else str(p.lb)
        ub = "?" if p.ub is None else str(p.ub)
        return f"bounded<{lb}, {ub}>"
    return str(p)


HEX_ELEMENT_LIMIT = 100


def dense_values(d: A.DenseElements) -> str:
    """The element list of a dense attribute as MLIR prints it (without `dense<`...`>`)."""
    from ..ir.dense import element_bits, is_splat, num_elements

    t = d.type
    elem = t.element.name  # type: ignore[attr-defined]
    splat = is_splat(t, d.raw)
    n = num_elements(t)
    if not splat and n > HEX_ELEMENT_LIMIT:
        return '"0x' + d.raw.hex().upper() + '"'
    if elem == "i1":
        fmt = lambda b: "true" if b else "false"  # noqa: E731
    elif elem.startswith("i"):
        width = int(elem[1:])
        fmt = lambda b: str(b - (1 << width) if b >> (width - 1) else b)  # noqa: E731
    else:
        from ..ir.floats import mlir_float

        fmt = lambda b: mlir_float(b, elem)  # noqa: E731
    if splat:
        from ..ir.dense import first_bits

        return fmt(first_bits(t, d.raw))
    if n == 0:
        return ""
    bits = element_bits(t, d.raw)
    shape = t.shape
    rank = len(shape)
    out: list[str] = []
    counter = [0] * rank
    open_brackets = 0
    for idx in range(n):
        if idx:
            out.append(", ")
        while open_brackets < rank:
            out.append("[")
            open_brackets += 1
        out.append(fmt(bits[idx]))
        counter[rank - 1] += 1
        for i in range(rank - 1, 0, -1):
            if counter[i] >= shape[i]:
                counter[i] = 0
                counter[i - 1] += 1
                open_brackets -= 1
                out.append("]")
    out.append("]" * open_brackets)
    return "".join(out)


def dense_str(d: A.DenseElements, t: "Optional[T.Type | str]" = None) -> str:
    """custom<DenseTypedElementsAttr>: `<f32: 1.000000e+00> : tile<f32>`."""
    return f"<{d.type.element}: {dense_values(d)}> : {t if t is not None else d.type}"


# -- locations -----------------------------------------------------------------------
class AliasTable:
    """MLIR alias assignment for the locations and debug-info attributes printed."""

    def __init__(self) -> None:
        self.entries: dict[Any, list] = {}   # key -> [alias base, depth, order, value]
        self.names: dict[Any, str] = {}

    def visit(self, value: Any) -> int:
        key = _loc_key(value)
        e = self.entries.get(key)
        if e is not None:
            return e[1]
        e = [_alias_base(value), 0, len(self.entries), value]
        self.entries[key] = e
        depth = 0
        for child in _children(value):
            depth = max(depth, self.visit(child) + 1)
        e[1] = depth
        return depth

    def finalize(self) -> None:
        ordered = sorted(self.entries.items(), key=lambda kv: (kv[1][1], kv[1][0], kv[1][2]))
        counts: dict[str, int] = {}
        self.order = []
        for key, (base, depth, order, value) in ordered:
            i = counts.get(base, 0)
            counts[base] = i + 1
            name = base if i == 0 else (f"{base}_{i}" if base[-1].isdigit() else f"{base}{i}")
            self.names[key] = name
            self.order.append((name, value))

    def ref(self, value: Any) -> str:
        return "#" + self.names[_loc_key(value)]

    def definitions(self) -> list[str]:
        return [f"#{name} = {self.define(value)}" for name, value in self.order]

    def define(self, v: Any) -> str:
        if v is None:
            return "loc(unknown)"
        if isinstance(v, _FileLoc):
            return f"loc({escape_string(v.file)}:{v.line}:{v.column})"
        if isinstance(v, Location):
            if v.scope is None:
                return f"loc({escape_string(v.file)}:{v.line}:{v.column})"
            return f"#cuda_tile.di_loc<{self.ref(_FileLoc(v.file, v.line, v.column))} in {self.ref(v.scope)}>"
        if isinstance(v, A.CallSiteLoc):
            return f"loc(callsite({self.ref(v.callee)} at {self.ref(v.caller)}))"
        if isinstance(v, A.DIFile):
            return f"#cuda_tile.di_file<{escape_string(v.name)} in {escape_string(v.directory)}>"
        if isinstance(v, A.DICompileUnit):
            return f"#cuda_tile.di_compile_unit<file = {self.ref(v.file)}>"
        if isinstance(v, A.DISubprogram):
            s = (f"#cuda_tile.di_subprogram<file = {self.ref(v.file)}, line = {v.line}, "
                 f"name = {escape_string(v.name)}, linkageName = {escape_string(v.linkage_name)}, "
                 f"compileUnit = {self.ref(v.compile_unit)}")
            if v.scope_line:
                s += f", scopeLine = {v.scope_line}"
            return s + ">"
        if isinstance(v, A.DILexicalBlock):
            s = f"#cuda_tile.di_lexical_block<scope = {self.ref(v.scope)}, file = {self.ref(v.file)}, line = {v.line}"
            if v.column:
                s += f", column = {v.column}"
            return s + ">"
        return str(v)


class _FileLoc:
    """A plain FileLineColLoc (the source part of a di_loc)."""

    __slots__ = ("file", "line", "column")

    def __init__(self, file: str, line: int, column: int) -> None:
        self.file, self.line, self.column = file, line, column


def _loc_key(v: Any) -> Any:
    if v is None:
        return ("unknown",)
    if isinstance(v, _FileLoc):
        return ("file", v.file, v.line, v.column)
    if isinstance(v, Location):
        if v.scope is None:
            return ("file", v.file, v.line, v.column)
        return ("diloc", v.file, v.line, v.column, _loc_key(v.scope))
    if isinstance(v, A.CallSiteLoc):
        return ("callsite", _loc_key(v.callee), _loc_key(v.caller))
    return ("attr", v)


def _alias_base(v: Any) -> str:
    if isinstance(v, A.DIFile):
        return "di_file"
    if isinstance(v, A.DICompileUnit):
        return "di_compile_unit"
    if isinstance(v, A.DISubprogram):
        return "di_subprogram"
    if isinstance(v, A.DILexicalBlock):
        return "di_lexical_block"
    return "loc"


def _children(v: Any) -> list:
    if isinstance(v, Location) and v.scope is not None:
        return [_FileLoc(v.file, v.line, v.column), v.scope]
    if isinstance(v, A.CallSiteLoc):
        return [v.callee, v.caller]
    if isinstance(v, A.DICompileUnit):
        return [v.file]
    if isinstance(v, A.DISubprogram):
        return [v.file, v.compile_unit]
    if isinstance(v, A.DILexicalBlock):
        return [v.scope, v.file]
    return []


# -- the printer --------------------------------------------------------------------------
_FORMATS: dict[str, tuple] = {}  # op name -> (compiled format, names it prints)


class Printer:
    def __init__(self, debug_info: bool = False, layouts: bool = False) -> None:
        """`layouts`: each tile value's type carries its layout (nv_tileas: `tile<128x64xf16, #mma>`,
        the layouts named once at the top, `#mma = #nv_tileas.mma<...>`)."""
        self.debug_info = debug_info
        self.layouts: Optional[dict[Any, str]] = {} if layouts else None   # layout -> its alias
        self.namer = Namer()
        self.aliases: Optional[AliasTable] = AliasTable() if debug_info else None
        self.out: list[str] = []
        self.indent = 0
        from .custom_ops import CUSTOM_DIRECTIVES, CUSTOM_PRINTERS  # imports this module: bound here, once

        self.custom_printers = CUSTOM_PRINTERS
        self.custom_directives = CUSTOM_DIRECTIVES

    # -- entry points ---------------------------------------------------------------
    def print_module(self, module: Operation) -> str:
        body = module.regions[0].blocks[0].operations if module.regions and module.regions[0].blocks else []
        self.namer.number_top(body)
        if self.aliases is not None:
            for op in body:
                self._visit_locs(op)
            self.aliases.finalize()
        producer = module.attributes.get("producer")
        if producer:
            self.out.append(f"// Producer: {producer}\n")
        if self.layouts is not None:
            self.layouts = layout_aliases(module)
            self.out += [f"#{alias} = {T.encoding_text(layout)}\n" for layout, alias in self.layouts.items()]
        for op in body:
            self.print_op(op)
            self.out.append("\n")
        if not body:
            self.out.append("\n")
        if self.aliases is not None:
            for line in self.aliases.definitions():
                self.out.append(line)
                self.out.append("\n")
        return "".join(self.out)

    def _visit_locs(self, op: Operation) -> None:
        assert self.aliases is not None
        self.aliases.visit(op.location)
        for region in op.regions:
            for block in region.blocks:
                ops = block.operations
                if ops and elided_terminator(op, ops[-1]):
                    ops = ops[:-1]  # not printed, so its location is not either
                for inner in ops:
                    self._visit_locs(inner)

    # -- ops --------------------------------------------------------------------------
    def print_op(self, op: Operation) -> None:
        out = self.out
        if op.results:
            out.append(self.namer.result_defs(op))
            out.append(" = ")
        defn = op.definition
        # cuda_tile ops print bare inside the cuda_tile module; ops of the levels below keep their dialect
        out.append(defn.mnemonic if defn.name.startswith("cuda_tile.") else defn.name)
        if defn.format is not None:
            self._print_format(op, defn)
        else:
            self.custom_printers[op.name](self, op)
        if self.aliases is not None:
            out.append(f" loc({self.aliases.ref(op.location)})")

    def region(self, region: Region, print_terminator: bool = True) -> None:
        out = self.out
        out.append("{\n")
        self.indent += INDENT
        if region.blocks:
            ops = region.blocks[0].operations
            if not print_terminator and ops:
                ops = ops[:-1]
            pad = " " * self.indent
            for op in ops:
                out.append(pad)
                self.print_op(op)
                out.append("\n")
        self.indent -= INDENT
        out.append(" " * self.indent + "}")

    def ref(self, v: Value) -> str:
        return self.namer.ref(v)

    def typed(self, v: Value) -> str:
        """`v`'s type, with its layout where the printer shows layouts and `v` is a tile of rank 1 or more."""
        t = v.type
        if self.layouts is None or v.layout is None or not isinstance(t, T.TileType) or not t.shape:
            return str(t)
        alias = self.layouts.get(v.layout)   # none where an op is printed alone: the layout in full
        return f"{str(t)[:-1]}, {'#' + alias if alias else T.encoding_text(v.layout)}>"

    def types_of(self, op: Operation, defn: OpDef, name: str) -> str:
        """The types of `op`'s operand or result group `name`."""
        values = op.operand_group(name) if any(g.name == name for g in defn.operands) else _result_group(op, defn, name)
        return ", ".join(self.typed(v) for v in values)

    def refs(self, vs) -> str:
        return ", ".join(self.namer.ref(v) for v in vs)

    def attr_dict(self, op: Operation, elided: set[str], keyword: bool = False) -> None:
        rest = [(k, v) for k, v in op.attributes.items() if k not in elided and not _is_default(op, k, v)]
        if not rest:
            return
        parts = []
        for k, v in rest:
            if v is True:
                parts.append(k)
            else:
                parts.append(f"{k} = {self._generic_attr(op, k, v)}")
        self.out.append((" attributes {" if keyword else " {") + ", ".join(parts) + "}")

    def _generic_attr(self, op: Operation, name: str, v: Any) -> str:
        a = op.definition.attr(name)
        if a is not None and a.kind == "enum":
            return f"#cuda_tile.{_enum_mnemonic(a.enum)}<{v}>"
        if a is not None and a.kind == "int":
            return f"{v} : {a.int_type}"
        if a is not None and a.kind == "boolarray":
            return "array<i1" + ("" if not v else ": " + ", ".join("true" if b else "false" for b in v)) + ">"
        if a is not None and a.kind == "i32array":
            return "array<i32" + ("" if not v else ": " + ", ".join(str(b) for b in v)) + ">"
        if isinstance(v, A.OptimizationHints):
            return "#cuda_tile.optimization_hints" + hints_str(v)
        if isinstance(v, A.DenseElements):
            return f"dense<{dense_values(v)}> : {v.type}"
        return typed_attr(v)

    # -- declarative formats -----------------------------------------------------------
    def _print_format(self, op: Operation, defn: OpDef) -> None:
        cached = _FORMATS.get(defn.name)
        if cached is None:
            units = frozenset(a.name for a in defn.attributes if a.kind == "unit")
            elems = compile_format(defn.format, units)  # type: ignore[arg-type]
            used: set[str] = {"operandSegmentSizes"}
            _collect_names(elems, used)
            cached = _FORMATS[defn.name] = (elems, used)
        self._elements(op, defn, cached[0], cached[1])

    def _elements(self, op: Operation, defn: OpDef, elems, used: set[str], skip=None) -> None:
        out = self.out
        for e in elems:
            if e is skip:
                continue
            if isinstance(e, Lit):
                if e.text == "":
                    continue
                if e.text == " ":
                    out.append(" ")
                    continue
                if e.space_before:
                    out.append(" ")
                out.append(e.text)
            elif isinstance(e, AttrDict):
                self.attr_dict(op, used, e.with_keyword)
            elif isinstance(e, Optional_):
                if self._present(op, defn, e.anchor):
                    self._elements(op, defn, e.then, used, skip=e.elided_anchor)
                else:
                    self._elements(op, defn, e.else_, used)
            elif isinstance(e, OIList):
                for lit, els in e.clauses:
                    if any(self._present(op, defn, x) for x in els if not isinstance(x, Lit)):
                        if lit.space_before:
                            out.append(" ")
                        out.append(lit.text)
                        unit_only = len(els) == 1 and isinstance(els[0], Var) and \
                            (a := defn.attr(els[0].name)) is not None and a.kind == "unit"
                        if not unit_only:
                            self._elements(op, defn, els, used)
            else:
                if e.space_before:
                    out.append(" ")
                if isinstance(e, Var):
                    self._var(op, defn, e.name)
                elif isinstance(e, TypeOf):
                    out.append(self.types_of(op, defn, e.name))
                elif isinstance(e, Custom):
                    self.custom_directives[e.name](self, op, defn, e.args)

    def _present(self, op: Operation, defn: OpDef, anchor) -> bool:
        if isinstance(anchor, Custom):
            anchor = anchor.args[0]
        name = anchor.name
        for i, g in enumerate(defn.operands):
            if g.name == name:
                return bool(op.operand_group(name))
        for i, r in enumerate(defn.results):
            if r.name == name:
                return bool(_result_group(op, defn, name))
        a = defn.attr(name)
        if a is not None:
            v = op.attributes.get(name)
            if v is None or v is False:
                return False
            if a.default is not None and v == a.default:
                return False
            return True
        for i, r in enumerate(defn.regions):
            if r == name:
                return bool(op.regions[i].blocks) if i < len(op.regions) else False
        return False

    def _var(self, op: Operation, defn: OpDef, name: str) -> None:
        out = self.out
        for g in defn.operands:
            if g.name == name:
                out.append(self.refs(op.operand_group(name)))
                return
        a = defn.attr(name)
        if a is not None:
            out.append(self.attr_value(a, op.attributes.get(name)))
            return
        for i, r in enumerate(defn.regions):
            if r == name:
                self.region(op.regions[i])
                return
        raise KeyError(f"{op.name}: unknown format variable ${name}")

    def attr_value(self, a, v: Any) -> str:
        kind = a.kind
        if kind == "enum":
            return v if a.enum in BARE_ENUMS else f"<{v}>"
        if kind in ("str",):
            if a.name == "sym_name":
                return symbol(v)
            return escape_string(v)
        if kind == "symref":
            return symbol(v)
        if kind == "int":
            return str(v)
        if kind == "bool":
            return "true" if v else "false"
        if kind == "i32array":
            return "[" + ", ".join(str(x) for x in v) + "]"
        if kind == "array":
            return "[" + ", ".join(typed_attr(x) for x in v) + "]"
        if kind == "hints":
            return hints_str(v)
        if kind == "predicate":
            return predicate_str(v)
        if kind == "type":
            return str(v)
        return untyped_attr(v)


# Region-holding ops whose printer drops an operand-less implicit terminator.
_IMPLICIT_TERMINATORS = {"cuda_tile.if": "cuda_tile.yield", "cuda_tile.for": "cuda_tile.continue",
                         "cuda_tile.loop": "cuda_tile.continue"}


def elided_terminator(parent: Operation, term: Operation) -> bool:
    return _IMPLICIT_TERMINATORS.get(parent.name) == term.name and not term.operands


def _enum_mnemonic(enum: Optional[str]) -> str:
    return A.ENUM_MNEMONICS.get(enum or "", (enum or "").lower())


def _is_default(op: Operation, name: str, v: Any) -> bool:
    a = op.definition.attr(name)
    if a is None:
        return False
    if a.kind == "unit":
        return not v
    if a.kind == "boolarray":
        return not any(v)
    return a.default is not None and v == a.default


def _collect_names(elems, used: set[str]) -> None:
    for e in elems:
        if isinstance(e, Var):
            used.add(e.name)
        elif isinstance(e, Custom):
            for a in e.args:
                used.add(a.name)
        elif isinstance(e, Optional_):
            _collect_names(e.then, used)
            _collect_names(e.else_, used)
            _collect_names([e.anchor], used)
        elif isinstance(e, OIList):
            for lit, els in e.clauses:
                _collect_names(els, used)


def _result_group(op: Operation, defn: OpDef, name: str) -> list:
    # results: at most one variadic group, which then covers all results
    idx = 0
    for r in defn.results:
        if r.kind == VARIADIC:
            return list(op.results) if r.name == name else []
        if r.name == name:
            return [op.results[idx]] if idx < len(op.results) else []
        idx += 1
    return []


def layout_aliases(module: Operation) -> dict[Any, str]:
    """Each distinct layout of the module's tiles, in the order its first value is defined, with its alias: the
    layout's kind, numbered from the second of a kind (`#mma`, `#mma1`)."""
    aliases: dict[Any, str] = {}
    counts: dict[str, int] = {}
    for op in module.walk():
        values = [*op.results, *(a for r in op.regions for b in r.blocks for a in b.arguments)]
        for v in values:
            if v.layout is not None and isinstance(v.type, T.TileType) and v.type.shape and v.layout not in aliases:
                kind = v.layout.describe()[1:].split("<", 1)[0]
                n = counts[kind] = counts.get(kind, -1) + 1
                aliases[v.layout] = f"{kind}{n or ''}"
    return aliases


def print_module(module: Operation, debug_info: bool = False) -> str:
    """The module as `tileirdisasm [-g]` prints it."""
    try:
        return Printer(debug_info).print_module(module)
    except RecursionError:
        from ..errors import CompileError

        raise CompileError("error: module is nested too deeply to print") from None
