"""The TileIR text parser.

Reads what `tileirdisasm` prints (module body ops, `loc(#locN)` suffixes and
location aliases at the end) and the full form (`cuda_tile.module @m { ... }`
with or without `cuda_tile.` prefixes, `!cuda_tile.tile<...>` types,
`#cuda_tile.div_by<...>` attributes). Ops with an assembly format are parsed
by walking their format (text/format.py); the rest have hand-written parsers
below. Errors are `file:line:col: error: message`.
"""

from __future__ import annotations

import re


from ..ir import attributes as A
from ..ir import types as T
from ..ir.core import Block, Location, Operation, Region, Value
from ..dialects.registry import OPTIONAL, SINGLE, VARIADIC, OpDef, find
from .format import AttrDict, Custom, Lit, OIList, Optional_, TypeOf, Var, compile_format
from .lexer import Lexer, ParseError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Callable, Optional

SCALARS = frozenset(T.SCALAR_BITS) | {"fnv8E5M3FNU"}
BARE_ENUMS = frozenset({"MemoryOrderingSemantics", "MemoryScope", "AtomicRMWMode", "MultimemReductionKind"})
IMPLICIT_TERMINATOR = {
    "cuda_tile.entry": "cuda_tile.return", "cuda_tile.for": "cuda_tile.continue",
    "cuda_tile.loop": "cuda_tile.continue", "cuda_tile.if": "cuda_tile.yield",
    "cuda_tile.reduce": "cuda_tile.yield", "cuda_tile.scan": "cuda_tile.yield",
}
ALIASES = {"cuda_tile.pow": "cuda_tile.fpowf", "cuda_tile.print": "cuda_tile.print_tko"}
# Result types an op's format does not spell: the operand whose type they take.
RESULT_FROM_OPERAND = {
    "cuda_tile.assume": "value", "cuda_tile.insert": "destination", "cuda_tile.mmaf": "acc",
    "cuda_tile.mmai": "acc", "cuda_tile.mmaf_scaled": "acc", "cuda_tile.fpowi": "source",
}
_ALIAS_DEF = re.compile(r"^([#!])([A-Za-z_][A-Za-z0-9_$.\-]*)\s*=", re.M)


class _Scope:
    def __init__(self, parent: Optional["_Scope"] = None) -> None:
        self.names: dict[str, list[Value]] = {}
        self.parent = parent

    def lookup(self, name: str) -> Optional[list[Value]]:
        s: Optional[_Scope] = self
        while s is not None:
            v = s.names.get(name)
            if v is not None:
                return v
            s = s.parent
        return None


class Parser:
    def __init__(self, text: str, filename: str, layouts: Optional[Callable[[str], Any]] = None) -> None:
        """`layouts`: reads the layout a text starts with (`#mma<...>`: the layout and where its text ends;
        ValueError if it is none), where the text is nv_tileas IR (tileas/text.py); without it a layout in a
        type is an error."""
        self.layouts = layouts
        self.lx = Lexer(text, filename)
        self.filename = filename
        self.scope = _Scope()
        self.alias_pos: dict[str, int] = {}
        self.type_alias_pos: dict[str, int] = {}
        self.alias_cache: dict[str, Any] = {}
        self.alias_busy: set[str] = set()
        self.wrappers = 0
        self.use_at: dict[int, int] = {}  # id(value) -> where it was last referenced (for use-type errors)
        for m in _ALIAS_DEF.finditer(text):
            (self.alias_pos if m.group(1) == "#" else self.type_alias_pos)[m.group(2)] = m.end()

    # -- module ------------------------------------------------------------------
    def parse_module(self) -> Operation:
        lx = self.lx
        module: Optional[Operation] = None
        body_ops: list[Operation] = []
        while not lx.at_end():
            if self._skip_alias_def():
                continue
            name = lx.peek_keyword()
            if name == "module" and self._is_builtin_module():
                lx.keyword()
                if lx.accept_keyword("attributes"):
                    self.parse_attr_dict_body()
                lx.expect("{")
                continue  # a builtin `module { ... }` wrapper: its body is read in place
            if name in ("cuda_tile.module", "module") and module is None and not body_ops:
                module = self._parse_module_op()
                continue
            if lx.startswith("}") and self._wrapper_depth_ok():
                lx.expect("}")
                self.parse_trailing_loc()
                continue
            if module is not None:
                raise lx.error("expected at most one 'cuda_tile.module'")
            body_ops.append(self.parse_op())
        if module is None and len(body_ops) == 1 and body_ops[0].name == "cuda_tile.module":
            module = body_ops[0]
        if module is None:
            module = Operation("cuda_tile.module", attributes={"sym_name": "kernels"}, regions=[Region([Block()])])
            for op in body_ops:
                module.regions[0].blocks[0].append(op)
        return module

    def _is_builtin_module(self) -> bool:
        lx = self.lx
        save = lx.pos
        lx.keyword()
        ok = lx.startswith("{") or lx.peek_keyword() == "attributes"
        lx.pos = save
        if ok:
            self.wrappers += 1
        return ok

    def _wrapper_depth_ok(self) -> bool:
        if self.wrappers > 0:
            self.wrappers -= 1
            return True
        return False

    def _skip_alias_def(self) -> bool:
        lx = self.lx
        lx.skip()
        m = _ALIAS_DEF.match(lx.text, lx.pos)
        if not m:
            return False
        lx.pos = m.end()
        if m.group(1) == "#":
            self.alias_value(m.group(2))
            self._parse_attr_value_skip()
        else:
            self.parse_type()
        return True

    def _parse_attr_value_skip(self) -> None:
        self.parse_location_or_attr()

    def _parse_module_op(self) -> Operation:
        lx = self.lx
        lx.keyword()
        name = lx.prefixed("@")
        if name is None:
            raise lx.error("expected symbol name for 'cuda_tile.module'")
        attrs: dict[str, Any] = {"sym_name": name}
        if lx.accept_keyword("attributes"):
            attrs.update(self.parse_attr_dict_body())
        module = Operation("cuda_tile.module", attributes=attrs)
        region = self.parse_region(module, [], implicit=None)
        module.add_region(region)
        module.location = self.parse_trailing_loc()
        return module

    # -- ops ----------------------------------------------------------------------
    def parse_op(self) -> Operation:
        lx = self.lx
        lx.skip()
        start = lx.pos
        defs: list[tuple[str, int]] = []
        if lx.startswith("%"):
            while True:
                name = lx.prefixed("%")
                count = 1
                if lx.accept(":"):
                    count = lx.integer("result count")
                defs.append((name, count))  # type: ignore[arg-type]
                if not lx.accept(","):
                    break
            lx.expect("=")
        nres = sum(c for _, c in defs) if defs else None
        lx.skip()
        name_pos = lx.pos
        if lx.startswith('"'):
            op = self._parse_generic(nres)
        else:
            opname = lx.keyword("operation name")
            # cuda_tile's ops print bare, the levels' below with their dialect (text/printer.py)
            full = opname if opname.startswith(("cuda_tile.", "nv_tileaa.", "nv_tileas.")) else f"cuda_tile.{opname}"
            full = ALIASES.get(full, full)
            defn = find(full)
            if defn is None:
                raise lx.error(f"custom op '{opname}' is unknown", name_pos)
            op = self._parse_custom(defn, nres, name_pos)
        loc = self.parse_trailing_loc()
        if loc is not _NO_LOC:
            op.location = loc
        elif op.location is None:
            line, col = lx.line_col(start)
            op.location = Location(self.filename, line, col)
        if defs:
            if nres != len(op.results):
                if not op.results:
                    raise lx.error("cannot name an operation with no results", start)
                raise lx.error(f"operation defines {len(op.results)} results but was provided {nres} to bind",
                               start)
            i = 0
            for name, count in defs:
                self.scope.names[name] = list(op.results[i:i + count])
                i += count
        return op

    def _parse_custom(self, defn: OpDef, nres: Optional[int], pos: int) -> Operation:
        try:
            return self._parse_custom_body(defn, nres, pos)
        except ParseError as exc:
            if exc.ssa or "error: custom op '" in exc.message:
                raise
            head, sep, tail = exc.message.partition("error: ")
            raise ParseError(f"{head}{sep}custom op '{defn.name}' {tail}") from None

    def _parse_custom_body(self, defn: OpDef, nres: Optional[int], pos: int) -> Operation:
        st = _OpState(defn, nres)
        if defn.format is not None:
            units = frozenset(a.name for a in defn.attributes if a.kind == "unit")
            elems = compile_format(defn.format, units)
            self._elements(st, elems)
        else:
            handler = CUSTOM_PARSERS.get(defn.name)
            if handler is None:
                raise self.lx.error(f"'{defn.name}' has no textual form", pos)
            handler(self, st)
        return st.build(self, pos)

    # -- format walking --------------------------------------------------------------
    def _elements(self, st: "_OpState", elems) -> None:
        for e in elems:
            self._element(st, e)

    def _element(self, st: "_OpState", e) -> None:
        lx = self.lx
        if isinstance(e, Lit):
            t = e.text
            if t in ("", " "):
                return
            if t[0].isalpha() or t[0] == "_":
                lx.expect_keyword(t)
            else:
                lx.expect(t)
        elif isinstance(e, Var):
            self._var(st, e.name)
        elif isinstance(e, TypeOf):
            st.types[e.name] = self._types_for(st, e.name)
        elif isinstance(e, Custom):
            CUSTOM_DIRECTIVE_PARSERS[e.name](self, st, e.args)
        elif isinstance(e, AttrDict):
            if e.with_keyword:
                if lx.accept_keyword("attributes"):
                    st.attrs.update(self.parse_attr_dict_body())
            elif lx.startswith("{"):
                st.attrs.update(self.parse_attr_dict_body())
        elif isinstance(e, Optional_):
            if self._group_present(st, e):
                if e.elided_anchor is not None:
                    st.attrs[e.elided_anchor.name] = True
                for x in e.then:
                    if x is e.elided_anchor:
                        continue
                    self._element(st, x)
            else:
                for x in e.else_:
                    self._element(st, x)
        elif isinstance(e, OIList):
            seen: set[int] = set()
            while True:
                for i, (lit, els) in enumerate(e.clauses):
                    if i not in seen and lx.peek_keyword() == lit.text:
                        lx.expect_keyword(lit.text)
                        seen.add(i)
                        if len(els) == 1 and isinstance(els[0], Var) and st.defn.attr(els[0].name) is not None \
                                and st.defn.attr(els[0].name).kind == "unit":
                            st.attrs[els[0].name] = True
                        else:
                            self._elements(st, els)
                        break
                else:
                    break

    def _group_present(self, st: "_OpState", e: Optional_) -> bool:
        lx = self.lx
        first = next((x for x in e.then if not (isinstance(x, Lit) and x.text in ("", " "))), None)
        if isinstance(first, Lit):
            t = first.text
            if t[0].isalpha() or t[0] == "_":
                return lx.peek_keyword() == t
            return lx.startswith(t) and not (t == "-" and lx.startswith("->"))
        if isinstance(first, Var):
            g = st.group(first.name)
            if g is not None:
                return lx.startswith("%")
            a = st.defn.attr(first.name)
            if a is not None and a.kind == "enum":
                kw = lx.peek_keyword()
                return kw is not None and kw in A.ENUM_INDEX[a.enum]  # type: ignore[index]
            if a is not None and a.kind == "hints":
                return lx.startswith("<") or lx.startswith("#")
            return False
        if isinstance(first, (Custom, TypeOf)):
            return self._looks_like_type()
        return False

    def _looks_like_type(self) -> bool:
        lx = self.lx
        if lx.startswith("!"):
            return True
        kw = lx.peek_keyword()
        return kw is not None and (kw in SCALARS or kw in ("tile", "ptr", "token", "tensor_view", "partition_view",
                                                             "strided_view", "gather_scatter_view"))

    def _var(self, st: "_OpState", name: str) -> None:
        lx = self.lx
        g = st.group(name)
        if g is not None:
            lx.skip()
            start = lx.pos
            if g.kind == SINGLE:
                st.operands[name] = [self.value_ref()]
            elif g.kind == OPTIONAL:
                st.operands[name] = [self.value_ref()] if lx.startswith("%") else []
            else:
                st.operands[name] = self.value_list()
            st.use_pos[name] = self._ref_positions(start, len(st.operands[name]))
            return
        a = st.defn.attr(name)
        if a is not None:
            st.attrs[name] = self.attr_of_kind(a)
            return
        if name in st.defn.regions:
            st.regions[name] = self.parse_region(None, [], implicit=IMPLICIT_TERMINATOR.get(st.defn.name))
            return
        raise lx.error(f"unknown format variable ${name}")

    def _ref_positions(self, start: int, n: int) -> list[int]:
        """Source positions of the n value references scanned from `start`."""
        out = []
        pos = start
        text = self.lx.text
        for _ in range(n):
            pos = text.find("%", pos)
            out.append(pos)
            pos += 1
        return out

    def _types_for(self, st: "_OpState", name: str) -> list[T.Type]:
        """Types of a group: as many as its operands, or a greedy list for results."""
        g = st.group(name)
        if g is not None and g.kind == VARIADIC and name in st.operands and self._looks_like_type():
            out = self.type_list()  # MLIR reads the whole list, then matches it with the operands
            n = len(st.operands[name])
            if len(out) != n:
                raise self.lx.error(f"number of operands and types do not match: got {n} operands and "
                                    f"{len(out)} types")
            return out
        if g is not None and name in st.operands:
            n = len(st.operands[name])
            out = []
            for i in range(n):
                if i:
                    self.lx.expect(",")
                out.append(self.parse_type())
            return out
        r = next((r for r in st.defn.results if r.name == name), None)
        if r is not None and r.kind == SINGLE:
            return [self.parse_type()]
        return self.type_list()

    # -- values -------------------------------------------------------------------------
    def value_ref(self) -> Value:
        lx = self.lx
        lx.skip()
        pos = lx.pos
        self.last_ref_pos = pos
        name = lx.prefixed("%")
        if name is None:
            raise lx.error("expected SSA operand")
        idx = 0
        has_idx = False
        if lx.text.startswith("#", lx.pos):
            lx.pos += 1
            idx = lx.integer("result number")
            has_idx = True
        vals = self.scope.lookup(name)
        if vals is None:
            raise lx.error("use of undeclared SSA value name", pos, ssa=True)
        if not has_idx and len(vals) != 1:
            raise lx.error(f"use of value '%{name}' expects a result number (it names {len(vals)} results)", pos,
                           ssa=True)
        if idx >= len(vals):
            raise lx.error(f"result number {idx} out of range for '%{name}'", pos, ssa=True)
        self.use_at[id(vals[idx])] = pos
        return vals[idx]

    def value_list(self) -> list[Value]:
        lx = self.lx
        out: list[Value] = []
        if not lx.startswith("%"):
            return out
        out.append(self.value_ref())
        while True:
            save = lx.pos
            if lx.accept(",") and lx.startswith("%"):
                out.append(self.value_ref())
                continue
            lx.pos = save
            return out

    # -- regions ------------------------------------------------------------------------
    def parse_region(self, parent: Optional[Operation], args: list[tuple[str, T.Type]],
                     implicit: Optional[str]) -> Region:
        lx = self.lx
        lx.expect("{")
        outer = self.scope
        self.scope = _Scope(outer)
        block = Block()
        for name, t in args:
            a = block.add_argument(t)
            self.scope.names[name] = [a]
        try:
            while not lx.accept("}"):
                if lx.at_end():
                    raise lx.error("expected '}' to end region")
                block.append(self.parse_op())
        finally:
            self.scope = outer
        if implicit is not None:
            last = block.operations[-1] if block.operations else None
            if last is None or not last.definition.has_trait("Terminator"):
                block.append(Operation(implicit))
        return Region([block])

    # -- locations -------------------------------------------------------------------
    def parse_trailing_loc(self) -> Any:
        lx = self.lx
        save = lx.pos
        if lx.accept_keyword("loc"):
            lx.expect("(")
            v = self._loc_body()
            lx.expect(")")
            return v
        lx.pos = save
        return _NO_LOC

    def _loc_body(self) -> Any:
        lx = self.lx
        if lx.startswith("#"):
            return self.alias_value(lx.prefixed("#"))  # type: ignore[arg-type]
        if lx.accept_keyword("unknown"):
            return None
        if lx.accept_keyword("callsite"):
            lx.expect("(")
            callee = self._loc_body()
            lx.expect_keyword("at")
            caller = self._loc_body()
            lx.expect(")")
            return A.CallSiteLoc(callee, caller)
        if lx.startswith('"'):
            f = lx.string()
            line = col = 0
            if lx.accept(":"):
                line = lx.integer()
                lx.expect(":")
                col = lx.integer()
            return Location(f, line, col)
        if lx.startswith("loc"):
            return self.parse_location_or_attr()
        raise lx.error("expected location")

    def alias_value(self, name: str) -> Any:
        if name in self.alias_cache:
            return self.alias_cache[name]
        pos = self.alias_pos.get(name)
        if pos is None:
            raise self.lx.error(f"undefined symbol alias id '#{name}'")
        if name in self.alias_busy:
            raise self.lx.error(f"alias '#{name}' refers to itself")
        self.alias_busy.add(name)
        save = self.lx.pos
        try:
            self.lx.pos = pos
            v = self.parse_location_or_attr()
        finally:
            self.lx.pos = save
            self.alias_busy.discard(name)
        self.alias_cache[name] = v
        return v

    def _layout(self) -> Any:
        """A tile type's layout: `#nv_tileas.KIND<...>` (layout/encoding_text.py) or an alias of one."""
        lx = self.lx
        lx.skip()
        pos = lx.pos
        if self.layouts is None:
            raise lx.error("a tile type with a layout is nv_tileas IR (a dump), which `tileir opt` reads; "
                           "this reads cuda_tile IR", pos)
        if not lx.startswith("#nv_tileas."):
            if not lx.startswith("#"):
                raise lx.error("expected a layout ('#nv_tileas.KIND<...>' or its alias)", pos)
            layout = self.alias_value(lx.prefixed("#"))  # type: ignore[arg-type]
            if not hasattr(layout, "describe"):
                raise lx.error("the alias does not name a layout", pos)
            return layout
        kind = lx.pos + len("#nv_tileas.")       # `#nv_tileas.mma<...>` is read as `#mma<...>`, on one line
        line_end = lx.text.find("\n", kind)
        try:
            layout, length = self.layouts("#" + lx.text[kind:line_end if line_end >= 0 else len(lx.text)])
        except ValueError as exc:
            raise lx.error(f"invalid layout: {exc}", pos) from None
        lx.pos = kind + length - 1            # past its closing `>` (`length` counts the `#` put in front)
        return layout

    def parse_location_or_attr(self) -> Any:
        """`loc(...)`, `#alias`, a `#cuda_tile.di_*<...>` attribute or a layout (`#nv_tileas.mma<...>`)."""
        lx = self.lx
        if lx.startswith("#nv_tileas."):
            return self._layout()
        if lx.accept_keyword("loc"):
            lx.expect("(")
            v = self._loc_body()
            lx.expect(")")
            return v
        if lx.startswith("#cuda_tile."):
            lx.pos += len("#cuda_tile.")
            return self._dialect_attr(lx.keyword("attribute name"))
        if lx.startswith("#"):
            return self.alias_value(lx.prefixed("#"))  # type: ignore[arg-type]
        return self.attr_value()

    def _struct_params(self) -> dict[str, Any]:
        lx = self.lx
        params: dict[str, Any] = {}
        lx.expect("<")
        while not lx.accept(">"):
            key = lx.keyword("parameter name")
            lx.expect("=")
            if lx.startswith('"'):
                params[key] = lx.string()
            elif lx.peek_number():
                params[key] = lx.integer()
            else:
                params[key] = self.parse_location_or_attr()
            lx.accept(",")
        return params

    def _dialect_attr(self, kind: str) -> Any:
        lx = self.lx
        if kind == "di_file":
            lx.expect("<")
            name = lx.string()
            lx.expect_keyword("in")
            directory = lx.string()
            lx.expect(">")
            return A.DIFile(name, directory)
        if kind == "di_loc":
            lx.expect("<")
            src = self.parse_location_or_attr()
            lx.expect_keyword("in")
            scope = self.parse_location_or_attr()
            lx.expect(">")
            return Location(src.file, src.line, src.column, scope)
        if kind == "di_compile_unit":
            p = self._struct_params()
            return A.DICompileUnit(p["file"])
        if kind == "di_subprogram":
            p = self._struct_params()
            return A.DISubprogram(p["file"], p.get("line", 0), p.get("name", ""), p.get("linkageName", ""),
                                  p["compileUnit"], p.get("scopeLine", 0))
        if kind == "di_lexical_block":
            p = self._struct_params()
            return A.DILexicalBlock(p["scope"], p["file"], p.get("line", 0), p.get("column", 0))
        if kind in ("div_by", "same_elements", "bounded"):
            return self._predicate(kind)
        if kind == "optimization_hints":
            return self._hints_body()
        enum = _ENUM_BY_MNEMONIC.get(kind)
        if enum is not None:
            lx.expect("<")
            pos = lx.pos
            kw = lx.keyword()
            if kw not in A.ENUM_INDEX[enum]:
                raise lx.error(f"invalid {kind} '{kw}'; expected one of: {', '.join(A.ENUMS[enum])}", pos)
            lx.expect(">")
            return kw
        raise lx.error(f"unknown attribute '#cuda_tile.{kind}'")

    # -- types ----------------------------------------------------------------------
    def parse_type(self) -> T.Type:
        lx = self.lx
        lx.skip()
        pos = lx.pos
        if lx.accept("!"):
            if lx.text.startswith("cuda_tile.", lx.pos):
                lx.pos += len("cuda_tile.")
            else:
                name = lx.prefixed("") if False else lx.keyword("type alias")
                tpos = self.type_alias_pos.get(name)
                if tpos is None:
                    raise lx.error(f"undefined symbol alias id '!{name}'", pos)
                save = lx.pos
                lx.pos = tpos
                try:
                    return self.parse_type()
                finally:
                    lx.pos = save
        if lx.startswith("("):
            return self._function_type()
        t = self._parse_type_body(pos)
        if not isinstance(t, T.ScalarType):
            from ..dialects.verify_rules import check_type

            err = check_type(t)
            if err:
                raise lx.error(err, pos)
        return t

    def _parse_type_body(self, pos: int) -> T.Type:
        lx = self.lx
        kw = lx.keyword("valid keyword")
        if kw in SCALARS:
            return T.ScalarType(kw)
        if kw == "token":
            return T.TOKEN
        if kw == "ptr":
            lx.expect("<")
            pointee = self.parse_type()
            attr = None
            if lx.accept(","):
                lx.expect("<")
                attr = self._ptr_attr()
                lx.expect(">")
            lx.expect(">")
            return T.PointerType(pointee, attr) if attr else T.PointerType(pointee)
        if kw == "tile":
            lx.expect("<")
            shape, elem = self._dims_and_elem(allow_dynamic=False)
            if shape and lx.accept(","):   # nv_tileas: the tile's layout (`#mma` or `#nv_tileas.mma<...>`)
                encoding = self._layout()
                lx.expect(">")
                return T.TileType(tuple(shape), elem, encoding)
            lx.expect(">")
            return T.TileType(tuple(shape), elem)
        if kw == "tensor_view":
            lx.expect("<")
            shape, elem = self._dims_and_elem(allow_dynamic=True)
            strides: list[int] = []
            attr = None
            if shape:
                if not lx.accept(",") or not lx.accept_keyword("strides"):
                    raise lx.error("expected 'strides'")
                lx.expect("=")
                strides = self._strides()
            elif lx.accept(","):
                if lx.peek_keyword() == "strides":
                    raise lx.error("strides must not be provided for 0-d tiles")
                if not lx.startswith("#cuda_tile.ptr_attr<"):
                    raise lx.error("expected token after element type in 0-d tensor_view")
                attr = self._view_ptr_attr()
            if attr is None and lx.accept(","):
                attr = self._view_ptr_attr()
            lx.expect(">")
            if attr:
                return T.TensorViewType(elem, tuple(shape), tuple(strides), attr)
            return T.TensorViewType(elem, tuple(shape), tuple(strides))
        if kw in ("partition_view", "strided_view", "gather_scatter_view"):
            return self._view_type(kw)
        raise lx.error(f"unknown type: {kw}", pos)

    def _ptr_attr(self) -> str:
        lx = self.lx
        pos = lx.pos
        kw = lx.keyword("valid keyword")
        from ..bytecode.reader import PTR_ATTRS

        if kw not in PTR_ATTRS:
            raise lx.error(f"unknown pointer attribute '{kw}'", pos)
        return kw

    def _function_type(self) -> T.FunctionType:
        lx = self.lx
        lx.expect("(")
        ins = [] if lx.startswith(")") else self.type_list()
        lx.expect(")")
        lx.expect("->")
        if lx.accept("("):
            outs = [] if lx.startswith(")") else self.type_list()
            lx.expect(")")
        else:
            outs = [self.parse_type()]
        return T.FunctionType(tuple(ins), tuple(outs))

    def _dims_and_elem(self, allow_dynamic: bool) -> tuple[list[int], T.Type]:
        lx = self.lx
        lx.skip()
        shape: list[int] = []
        text = lx.text
        while True:
            m = re.compile(r"(\?|[0-9]+)x").match(text, lx.pos)
            if not m:
                break
            d = m.group(1)
            if d == "?":
                if not allow_dynamic:
                    raise lx.error("expected static shape")
                shape.append(T.DYNAMIC)
            else:
                shape.append(int(d))
            lx.pos = m.end()
        return shape, self.parse_type()

    def _view_ptr_attr(self) -> str:
        """`#cuda_tile.ptr_attr<kind>` in a tensor_view type."""
        lx = self.lx
        lx.expect("#cuda_tile.ptr_attr<")
        attr = self._ptr_attr()
        lx.expect(">")
        return attr

    def _strides(self) -> list[int]:
        """`[s, ...]` of a tensor_view: strictly positive integers or `?`."""
        lx = self.lx
        lx.expect("[")
        out: list[int] = []
        while not lx.accept("]"):
            if out:
                lx.expect(",")
            if lx.accept("?"):
                out.append(T.DYNAMIC)
                continue
            if not lx.peek_number() and not lx.startswith("-"):
                raise lx.error("expected either 64-bit integer or question mark")
            pos = lx.pos
            v = lx.integer()
            if v <= 0:
                raise lx.error(f"expected strictly positive integer, got {v}", pos)
            out.append(v)
        return out

    def _int_list(self, open_: str, close: str, allow_dynamic: bool = False) -> list[int]:
        lx = self.lx
        lx.expect(open_)
        out: list[int] = []
        while not lx.accept(close):
            if out:
                lx.expect(",")
            if allow_dynamic and lx.accept("?"):
                out.append(T.DYNAMIC)
            else:
                out.append(lx.integer())
        return out

    def _tile_shape(self) -> list[int]:
        lx = self.lx
        lx.expect_keyword("tile")
        lx.expect("=")
        lx.expect("(")
        if lx.accept(")"):
            return []  # rejected by the type verifier ("0-dimension tile shape is not supported")
        dims = [lx.integer()]
        while True:
            lx.skip()
            if lx.text.startswith("x", lx.pos):
                lx.pos += 1
                dims.append(lx.integer())
            else:
                break
        lx.expect(")")
        return dims

    def _view_type(self, kind: str) -> T.Type:
        lx = self.lx
        lx.expect("<")
        tile_shape = self._tile_shape()
        lx.expect(",")
        traversal: list[int] = []
        if kind == "strided_view":
            lx.expect_keyword("traversal_strides")
            lx.expect("=")
            traversal = self._int_list("[", "]")
            lx.expect(",")
        padding = None
        if lx.accept_keyword("padding_value"):
            lx.expect("=")
            kw_pos = lx.pos
            kw = lx.keyword("valid keyword")
            if kw not in A.ENUM_INDEX["PaddingValue"]:
                raise lx.error(f"invalid padding_value attribute specification. Got \"{kw}\" but expect one of: "
                               "zero, neg_zero, nan, pos_inf, neg_inf", kw_pos)
            padding = T.PaddingValue(kw)
            lx.expect(",")
        tv = self.parse_type()
        if not isinstance(tv, T.TensorViewType):
            raise lx.error(f"expected 'tensor_view' type, but got '!cuda_tile.{tv}'")
        dim_map = list(range(len(tile_shape)))
        sparse_dim = 0
        while lx.accept(","):
            key = lx.keyword()
            lx.expect("=")
            if key == "dim_map":
                dim_map = self._int_list("[", "]")
            elif key == "sparse_dim":
                sparse_dim = lx.integer()
            else:
                raise lx.error(f"unexpected '{key}' in {kind}")
        lx.expect(">")
        if kind == "partition_view":
            return T.PartitionViewType(tuple(tile_shape), tv, tuple(dim_map), padding)
        if kind == "strided_view":
            return T.StridedViewType(tuple(tile_shape), tuple(traversal), tv, tuple(dim_map), padding)
        return T.GatherScatterViewType(tuple(tile_shape), tv, sparse_dim, padding)

    def type_list(self) -> list[T.Type]:
        out = [self.parse_type()]
        lx = self.lx
        while True:
            save = lx.pos
            if lx.accept(",") and self._looks_like_type():
                out.append(self.parse_type())
                continue
            lx.pos = save
            return out

    # -- attributes ----------------------------------------------------------------------
    def attr_of_kind(self, a) -> Any:
        lx = self.lx
        kind = a.kind
        if kind == "enum":
            if lx.startswith("#cuda_tile."):
                return self.parse_location_or_attr()
            if lx.accept("<"):
                kw = lx.keyword(f"{a.enum} value")
                lx.expect(">")
            else:
                kw = lx.keyword(f"{a.enum} value")
            if kw not in A.ENUM_INDEX[a.enum]:
                raise lx.error("expected string or keyword containing one of the following enum values for "
                               f"attribute '{a.name}' [{', '.join(A.ENUMS[a.enum])}]")
            return kw
        if kind == "symref" or (kind == "str" and a.name == "sym_name"):
            if not lx.startswith("@"):
                raise lx.error("expected valid '@'-identifier for symbol name")
            return lx.prefixed("@")
        if kind == "str":
            if not lx.startswith('"'):
                raise lx.error("expected attribute value")
            return lx.string()
        if kind == "int":
            return lx.integer()
        if kind == "bool":
            kw = lx.keyword("true or false")
            if kw not in ("true", "false"):
                raise lx.error("expected 'true' or 'false'")
            return kw == "true"
        if kind == "i32array":
            if lx.accept_keyword("array"):
                lx.expect("<")
                lx.expect_keyword("i32")
                vals: list[int] = []
                if lx.accept(":"):
                    vals.append(lx.integer())
                    while lx.accept(","):
                        vals.append(lx.integer())
                lx.expect(">")
                return tuple(vals)
            return tuple(self._int_list("[", "]"))
        if kind in ("array", "dictarray"):
            v = self.attr_value()
            return tuple(v) if isinstance(v, (list, tuple)) else (v,)
        if kind == "hints":
            if lx.startswith("#cuda_tile."):
                return self.parse_location_or_attr()
            return self._hints_body()
        if kind == "predicate":
            return self._predicate_any()
        if kind == "type":
            return self.parse_type()
        if kind == "boolarray":
            v = self.attr_value()
            return tuple(bool(x) for x in v)
        return self.attr_value()

    def _hints_body(self) -> A.OptimizationHints:
        lx = self.lx
        lx.expect("<")
        entries = []
        while not lx.accept(">"):
            if entries:
                lx.expect(",")
            arch = lx.keyword("valid keyword or string")
            lx.expect("=")
            if not lx.startswith("{"):
                from .printer import typed_attr

                v = self.attr_value()  # shown as MLIR streams an attribute: with its type, even i64
                shown = f"{v.value} : {v.type}" if isinstance(v, A.IntegerAttr) else typed_attr(v)
                raise lx.error(f"expected dictionary attribute for optimization_hints entry `{arch}` got "
                               f"value={shown}")
            d = self.parse_attr_dict_body()
            items = []
            for k, v in d.items():
                if isinstance(v, A.IntegerAttr):
                    v = v.value
                items.append((k, v))
            entries.append((arch, tuple(sorted(items))))
        entries.sort(key=lambda e: e[0])
        return A.OptimizationHints(tuple(entries))

    def _predicate_any(self) -> Any:
        lx = self.lx
        if lx.startswith("#"):
            v = self.parse_location_or_attr()
        else:
            kind = lx.keyword("assume predicate attribute")
            if kind not in ("div_by", "same_elements", "bounded"):
                raise lx.error(f"unknown assume predicate attribute: {kind} (expected 'div_by', 'same_elements', "
                               "or 'bounded')")
            v = self._predicate(kind)
        if not isinstance(v, (A.DivBy, A.SameElements, A.Bounded)):
            raise lx.error("expected assume predicate attribute")
        return v

    def _predicate(self, kind: str) -> Any:
        lx = self.lx
        lx.expect("<")
        if kind == "div_by":
            d = lx.integer("divisor")
            every = along = None
            if lx.accept(","):
                lx.expect_keyword("every")
                every = lx.integer()
                lx.expect_keyword("along")
                along = lx.integer()
            lx.expect(">")
            return A.DivBy(d, every, along)
        if kind == "same_elements":
            vals = self._int_list("[", "]")
            lx.expect(">")
            return A.SameElements(tuple(vals))
        lb = None if lx.accept("?") else lx.integer()
        lx.expect(",")
        ub = None if lx.accept("?") else lx.integer()
        lx.expect(">")
        return A.Bounded(lb, ub)

    def parse_attr_dict_body(self) -> dict[str, Any]:
        lx = self.lx
        lx.expect("{")
        out: dict[str, Any] = {}
        while not lx.accept("}"):
            if out:
                lx.expect(",")
            key = lx.string() if lx.startswith('"') else lx.keyword("attribute name")
            if lx.accept("="):
                out[key] = self.attr_value()
            else:
                out[key] = True
        return out

    def attr_value(self) -> Any:
        """A generic MLIR attribute value (attr-dict entries, array elements)."""
        lx = self.lx
        if lx.startswith('"'):
            s = lx.string()
            if lx.accept(":"):
                self.parse_type()
            return s
        if lx.startswith("["):
            lx.expect("[")
            items = []
            while not lx.accept("]"):
                if items:
                    lx.expect(",")
                items.append(self.attr_value())
            return tuple(items)
        if lx.startswith("{"):
            return A.DictAttr(tuple(sorted(self.parse_attr_dict_body().items())))
        if lx.startswith("#"):
            return self.parse_location_or_attr()
        if lx.startswith("@"):
            return lx.prefixed("@")
        if lx.startswith("("):
            return self._function_type()
        kw = lx.peek_keyword()
        if kw in ("true", "false"):
            lx.keyword()
            return kw == "true"
        if kw == "unit":
            lx.keyword()
            return True
        if kw == "array":
            lx.keyword()
            lx.expect("<")
            self.parse_type()  # element type of the array
            vals: list[Any] = []
            if lx.accept(":"):
                while True:
                    k2 = lx.peek_keyword()
                    if k2 in ("true", "false"):
                        lx.keyword()
                        vals.append(k2 == "true")
                    else:
                        vals.append(lx.integer())
                    if not lx.accept(","):
                        break
            lx.expect(">")
            return tuple(vals)
        if kw == "dense":
            lx.keyword()
            lx.expect("<")
            start = lx.pos
            depth = 1
            while depth:  # find the matching '>'
                c = lx.text[lx.pos:lx.pos + 1]
                if not c:
                    raise lx.error("unterminated dense attribute")
                depth += {"<": 1, ">": -1}.get(c, 0)
                lx.pos += 1
            inner = lx.text[start:lx.pos - 1]
            lx.expect(":")
            t = self.parse_type()
            sub = Parser(inner, self.filename)
            return sub._dense_values(t)
        if lx.peek_number() or lx.startswith("-") or lx.startswith("+"):
            tok = lx.number_token()
            if lx.accept(":"):
                t = self.parse_type()
                return _typed_number(tok, t, lx)
            if re.fullmatch(r"-?(0x[0-9A-Fa-f]+|[0-9]+)", tok):
                return A.IntegerAttr(_int_literal(tok, lx), T.I64)
            return _typed_number(tok, T.F64, lx)
        if kw is not None and self._looks_like_type():
            return self.parse_type()
        raise lx.error("expected attribute value")

    # -- dense constants ----------------------------------------------------------------
    def parse_dense(self) -> A.DenseElements:
        """`<elem: values> : tile-type`."""
        lx = self.lx
        lx.expect("<")
        elem = self.parse_type()
        lx.expect(":")
        start = lx.pos
        raw_vals = self._nested_values(elem)
        if not isinstance(raw_vals, tuple):
            _literal_shape(raw_vals, lx, start)  # the literal's structure is checked before its type is read
        lx.expect(">")
        lx.expect(":")
        t = self.parse_type()
        if not isinstance(t, T.TileType):
            raise lx.error(f"expected a tile type for the constant, got {t}")
        if t.element != elem:
            raise lx.error(f"mismatch between the element type: '{elem}' and the tile element type '{t.element}'",
                           start)
        return self._build_dense(t, raw_vals, start)

    def _dense_values(self, t: T.Type) -> A.DenseElements:
        start = self.lx.pos
        vals = self._nested_values()
        return self._build_dense(t, vals, start)  # type: ignore[arg-type]

    def _nested_values(self, elem: Optional[T.Type] = None) -> Any:
        lx = self.lx
        if lx.startswith("["):
            lx.expect("[")
            items = []
            while not lx.accept("]"):
                if items:
                    lx.expect(",")
                items.append(self._nested_values(elem))
            return items
        if lx.startswith('"'):
            return ("hex", lx.string())
        kw = lx.peek_keyword()
        if kw in ("true", "false"):
            lx.keyword()
            return kw
        if kw is not None and isinstance(elem, T.ScalarType):
            raise lx.error("expected integer value" if elem.is_int else "expected floating point literal")
        return lx.number_token()

    def _build_dense(self, t: T.TileType, vals: Any, pos: int) -> A.DenseElements:
        from ..ir.dense import element_size

        lx = self.lx
        if not isinstance(t, T.TileType):
            raise lx.error(f"expected a tile type, got {t}", pos)
        if not isinstance(t.element, T.ScalarType):  # a constant is a number tile: no pointer literals
            raise lx.error(f"expected an integer or floating point element type for the constant, got "
                           f"'{t.element}'", pos)
        elem = t.element.name
        if isinstance(vals, tuple) and vals and vals[0] == "hex":
            text = vals[1]
            if not text.startswith("0x"):
                raise lx.error("expected hex string", pos)
            try:
                raw = bytes.fromhex(text[2:])
            except ValueError:
                raise lx.error("invalid hex string", pos) from None
            from ..ir.dense import raw_size_ok

            if not raw_size_ok(t, len(raw)):
                raise lx.error("elements hex data size is invalid for provided type", pos)
            return A.DenseElements(t, raw)
        flat: list[Any] = []

        def leaves(v: Any) -> None:
            if isinstance(v, list):
                for x in v:
                    leaves(x)
            else:
                flat.append(v)

        leaves(vals)
        bits = [_element_bits(v, elem, lx, pos) for v in flat]
        shape = _literal_shape(vals, lx, pos)
        if shape and shape != list(t.shape):
            raise lx.error(f"inferred shape of elements literal ({_int_list_str(shape)}) does not match type "
                           f"({_int_list_str(t.shape)})", pos)
        if len(bits) > 1 and all(b == bits[0] for b in bits):
            bits = bits[:1]  # MLIR stores a uniform literal as a splat
        if elem == "i1":
            if len(bits) == 1:
                return A.DenseElements(t, b"\xff" if bits[0] else b"\x00")
            packed = bytearray((len(bits) + 7) // 8)
            for i, b in enumerate(bits):
                if b:
                    packed[i // 8] |= 1 << (i % 8)
            return A.DenseElements(t, bytes(packed))
        size = element_size(t.element)
        return A.DenseElements(t, b"".join(b.to_bytes(size, "little") for b in bits))

    # -- generic op form -------------------------------------------------------------------
    def _parse_generic(self, nres: Optional[int]) -> Operation:
        lx = self.lx
        pos = lx.pos
        name = lx.string()
        full = ALIASES.get(name, name)
        defn = find(full)
        if defn is None:
            self._unknown_generic()
            raise lx.error(f"operation '{name}' is unknown", pos)
        lx.expect("(")
        operands = [] if lx.startswith(")") else self.value_list()
        lx.expect(")")
        attrs: dict[str, Any] = {}
        if lx.accept("<"):
            attrs.update(self.parse_attr_dict_body())
            lx.expect(">")
        regions: list[Region] = []
        if lx.accept("("):
            while True:
                regions.append(self._generic_region(defn))
                if not lx.accept(","):
                    break
            lx.expect(")")
        if lx.startswith("{"):
            attrs.update(self.parse_attr_dict_body())
        lx.expect(":")
        ftype = self._function_type()
        segments = attrs.pop("operandSegmentSizes", None)
        typed: dict[str, Any] = {}
        for k, v in attrs.items():
            a = defn.attr(k)
            typed[k] = _coerce_generic(a, v) if a is not None else v
        sizes = tuple(segments) if segments is not None else None
        if sizes is None and defn.needs_segment_sizes:
            sizes = tuple(_segments_from_count(defn, len(operands)))
        op = Operation(defn.name, operands, list(ftype.results), typed, segment_sizes=sizes)
        for r in regions:
            op.add_region(r)
        return op

    def _unknown_generic(self) -> None:
        """Read an unregistered op's operands, attributes and signature, so that the errors MLIR reports
        for its types (built, and checked, as they are parsed) come before 'unknown operation'."""
        from ..dialects.verify_rules import check_type

        lx = self.lx
        if not lx.accept("("):
            return
        if not lx.startswith(")"):
            self.value_list()
        lx.expect(")")
        if lx.startswith("{"):
            self.parse_attr_dict_body()
        if not lx.accept(":"):
            return
        lx.skip()
        pos = lx.pos
        err = check_type(self._function_type())
        if err:
            raise lx.error(err, pos)

    def _generic_region(self, defn: OpDef) -> Region:
        lx = self.lx
        lx.expect("{")
        outer = self.scope
        self.scope = _Scope(outer)
        block = Block()
        try:
            lx.skip()
            if lx.startswith("}"):
                lx.accept("}")
                return Region()  # `{ }`: a region without blocks
            if lx.startswith("^"):
                lx.prefixed("^")
                if lx.accept("("):
                    while not lx.accept(")"):
                        if block.arguments:
                            lx.expect(",")
                        n = lx.prefixed("%")
                        lx.expect(":")
                        self.scope.names[n] = [block.add_argument(self.parse_type())]  # type: ignore[index]
                        self.parse_trailing_loc()
                lx.expect(":")
            while not lx.accept("}"):
                if lx.at_end():
                    raise lx.error("expected '}' to end region")
                block.append(self.parse_op())
        finally:
            self.scope = outer
        return Region([block])


_NO_LOC = object()
# Constraints that admit exactly one type: an operand under one needs no type in the syntax.
_BUILDABLE: dict[str, T.Type] = {
    "token": T.TOKEN,
    "scalar_i1": T.TileType((), T.ScalarType("i1")),
    "scalar_i32": T.TileType((), T.ScalarType("i32")),
}
_ENUM_BY_MNEMONIC = {mnemonic: enum for enum, mnemonic in A.ENUM_MNEMONICS.items()}


def _segments_from_count(defn: OpDef, n: int) -> list[int]:
    fixed = sum(1 for g in defn.operands if g.kind == SINGLE)
    return [1 if g.kind == SINGLE else n - fixed for g in defn.operands]


def _coerce_generic(a, v: Any) -> Any:
    if a.kind == "int" and isinstance(v, A.IntegerAttr):
        return v.value
    if a.kind == "str" and isinstance(v, str):
        return v
    if a.kind == "boolarray" and isinstance(v, tuple):
        return tuple(bool(x) for x in v)
    if a.kind == "enum" and isinstance(v, A.IntegerAttr) and 0 <= v.value < len(A.ENUMS.get(a.enum, ())):
        return A.ENUMS[a.enum][v.value]  # an enum written as its integer value (`0 : i32`)
    return v


def _literal_shape(v: Any, lx: Lexer, pos: int) -> list[int]:
    """The shape of a nested dense literal ([] for a splat); sibling elements must have one shape."""
    if not isinstance(v, list):
        return []
    shapes = [_literal_shape(x, lx, pos) for x in v]
    if any(s != shapes[0] for s in shapes[1:]):
        raise lx.error("tensor literal is invalid; ranks are not consistent between elements", pos)
    return [len(v)] + (shapes[0] if shapes else [])


def _int_list_str(xs) -> str:
    return "[" + ", ".join(str(x) for x in xs) + "]"


def _int_literal(tok: str, lx: Lexer) -> int:
    """A decimal or 0x-hex integer literal (leading zeros allowed), bounded in size."""
    body = tok.lstrip("-+")
    neg = tok.startswith("-")
    if len(body) > 64:
        raise lx.error("integer literal is too large")
    try:
        v = int(body[2:], 16) if body[:2] in ("0x", "0X") else int(body, 10)
    except ValueError:
        raise lx.error(f"invalid integer literal '{tok}'") from None
    return -v if neg else v


def _typed_number(tok: str, t: T.Type, lx: Lexer) -> Any:
    if isinstance(t, T.ScalarType) and t.is_int:
        v = _int_literal(tok, lx)
        width = t.bitwidth
        if v >> (width - 1) and v > 0 and width < 64 + 1:
            v -= (1 << width) if v >= 1 << (width - 1) else 0
        return A.IntegerAttr(v, t)
    if isinstance(t, T.ScalarType):
        bits = _element_bits(tok, t.name, lx, lx.pos)
        from ..ir.floats import bits_to_float

        return A.FloatAttr(bits_to_float(bits, t.name), t, bits)
    raise lx.error(f"unexpected type {t} for a number")


def _element_bits(v: Any, elem: str, lx: Lexer, pos: int) -> int:
    from ..ir.floats import FORMATS, encode

    if elem.startswith("i"):
        width = int(elem[1:])
        if v in ("true", "false"):
            if elem != "i1":
                raise lx.error("expected integer value", pos)
            return 1 if v == "true" else 0
        try:
            n = _int_literal(v, lx)
        except ParseError:
            raise lx.error("expected integer elements, but parsed floating-point", pos) from None
        if elem == "i1" and n not in (0, 1, -1):
            raise lx.error("integer constant out of range for type", pos)
        lo, hi = -(1 << (width - 1)), (1 << width) - 1
        if not lo <= n <= hi:
            raise lx.error("integer constant out of range for type", pos)
        return n & ((1 << width) - 1)
    if elem not in FORMATS:
        raise lx.error(f"unsupported element type {elem}", pos)
    if v in ("true", "false"):
        raise lx.error("expected floating-point elements, but parsed integer", pos)
    body = v.lstrip("-+")
    if body.startswith(("0x", "0X")):
        bits = int(body, 16)
        if v.startswith("-"):
            raise lx.error("hexadecimal float literal should not have a leading minus", pos)
        if bits >> FORMATS[elem].width:
            raise lx.error("hexadecimal float constant out of range for type", pos)
        return bits
    if body.isdigit():
        raise lx.error("unexpected decimal integer literal for a floating point value", pos)
    if v.lstrip("-+") in ("0", "0.0") and v.startswith("-"):
        return encode(-0.0, elem)
    m = re.fullmatch(r"[-+]?([0-9.]*)(?:[eE]([-+]?[0-9]+))?", v)
    if m is None or len(v) > 1000:
        raise lx.error(f"invalid float literal '{v}'", pos)
    if m.group(2) is not None and (len(m.group(2)) > 6 or abs(int(m.group(2))) > 2000):
        return encode(float(v), elem)  # far outside every format: infinity or zero
    from ..ir.floats import _decimal_ratio

    if not re.search(r"[0-9]", m.group(1)) or m.group(1).count(".") > 1:
        raise lx.error(f"invalid float literal '{v}'", pos)
    num, den = _decimal_ratio(v)
    if num == 0 and v.startswith("-"):
        return encode(-0.0, elem)
    return encode((num, den), elem)


class _OpState:
    def __init__(self, defn: OpDef, nres: Optional[int]) -> None:
        self.defn = defn
        self.nres = nres
        self.operands: dict[str, list[Value]] = {}
        self.attrs: dict[str, Any] = {}
        self.types: dict[str, list[T.Type]] = {}
        self.use_pos: dict[str, list[int]] = {}
        self.regions: dict[str, Region] = {}
        self.result_types: Optional[list[T.Type]] = None

    def group(self, name: str):
        for g in self.defn.operands:
            if g.name == name:
                return g
        return None

    def _check_use(self, p: Parser, gname: str, want: list[T.Type]) -> None:
        vals = self.operands.get(gname, [])
        positions = self.use_pos.get(gname, [])
        for k, (v, t) in enumerate(zip(vals, want)):
            if v.type != t:
                from ..dialects.verify_rules import dtype

                at = positions[k] if k < len(positions) else p.use_at.get(id(v))
                ref = p.lx.text[at:at + 64].split()[0].rstrip(",]):") if at is not None else "?"
                raise p.lx.error(f"use of value '{ref}' expects different type than prior uses: {dtype(t)} vs "
                                 f"{dtype(v.type)}", at, ssa=True)

    def resolve_types(self, p: Parser) -> None:
        """Check operand types against the types the format spelled or implied (MLIR's operand resolution)."""
        from ..dialects.verify_rules import TYPES_MATCH

        for g in self.defn.operands:
            if g.name in self.types:
                self._check_use(p, g.name, self.types[g.name])
        for group in TYPES_MATCH.get(self.defn.name, ()):
            known = None
            for n in group:
                if n in self.types and self.types[n]:
                    known = self.types[n][0]
                    break
            if known is None:
                continue
            for n in group:
                if n in self.types or self.group(n) is None:
                    continue
                g = self.group(n)
                if g.kind == SINGLE:
                    self._check_use(p, n, [known])

    def check_implied_types(self, p: Parser, result_types: list[T.Type]) -> None:
        """Operands whose type the syntax leaves out get the one type their constraint allows (MLIR's
        buildable types) or, for the view makers, the result view's tensor_view type."""
        for g in self.defn.operands:
            if g.name in self.types:
                continue
            want = _BUILDABLE.get(g.constraint)
            if want is None and g.name == "tensor_view" and result_types:
                want = getattr(result_types[0], "tensor_view", None)
            if want is not None:
                self._check_use(p, g.name, [want] * len(self.operands.get(g.name, [])))

    def build(self, p: Parser, pos: int) -> Operation:
        defn = self.defn
        if defn.name == "cuda_tile.load_ptr_tko":
            # `%src, %x` is ambiguous (mask or padding): the printer writes a lone
            # padding value in the mask's place, so its type decides.
            mask = self.operands.get("mask")
            if mask and not self.operands.get("paddingValue") and getattr(
                    getattr(mask[0].type, "element", None), "name", "") != "i1":
                self.operands["paddingValue"], self.operands["mask"] = mask, []
                self.use_pos["paddingValue"] = self.use_pos.pop("mask", [])
                if "mask" in self.types:
                    self.types["paddingValue"] = self.types.pop("mask")
        if defn.format is not None:
            self.resolve_types(p)
        operands: list[Value] = []
        sizes = []
        for g in defn.operands:
            vals = self.operands.get(g.name, [])
            if g.kind == SINGLE and len(vals) != 1:
                raise p.lx.error(f"'{defn.name}' expects operand '{g.name}'", pos)
            operands.extend(vals)
            sizes.append(len(vals))
        result_types = self.result_types
        if result_types is None:
            result_types = []
            for r in defn.results:
                if r.name in self.types:
                    result_types.extend(self.types[r.name])
                elif r.name == "result_token" or r.constraint == "token":
                    result_types.append(T.TOKEN)
                elif defn.name in RESULT_FROM_OPERAND:
                    src = self.operands.get(RESULT_FROM_OPERAND[defn.name])
                    if not src:
                        raise p.lx.error(f"cannot infer the result type of '{defn.name}'", pos)
                    result_types.append(src[0].type)
                elif defn.name in ("cuda_tile.get_tile_block_id", "cuda_tile.get_num_tile_blocks") and result_types:
                    result_types.append(result_types[0])
                elif r.kind == VARIADIC:
                    continue
                else:
                    raise p.lx.error(f"cannot infer the type of result '{r.name}' of '{defn.name}'", pos)
        self.check_implied_types(p, result_types)
        attrs = self.attrs
        for a in defn.attributes:
            if a.name not in attrs and not a.optional and a.kind != "unit" and a.default is not None:
                attrs[a.name] = a.default
        op = Operation(defn.name, operands, result_types, attrs,
                       segment_sizes=tuple(sizes) if defn.needs_segment_sizes else None)
        for rname in defn.regions:
            r = self.regions.get(rname)
            op.add_region(r if r is not None else Region())
        return op


# -- custom<...> directive parsers -----------------------------------------------------
def _d_types(p: Parser, st: _OpState, args) -> None:
    name = args[0].name
    st.types[name] = p._types_for(st, name)


_IEEE = ("nearest_even", "zero", "negative_inf", "positive_inf")


def _d_rounding(default: str, allowed: tuple[str, ...], validate: bool):
    """custom<...RoundingMode>: optional `rounding<mode>`, else `default`.

    With `validate`, modes outside `allowed` are rejected while parsing (IEEE
    and integer roundings); otherwise only unknown names are, and the
    verifier judges the rest (divf, sqrt, exp, tanh).
    """
    def parse(p: Parser, st: _OpState, args) -> None:
        lx = p.lx
        name = args[0].name
        if not lx.accept_keyword("rounding"):
            st.attrs[name] = default
            return
        lx.expect("<")
        kw = lx.keyword("valid keyword")
        lx.expect(">")
        listed = ", ".join(f"'{m}'" for m in allowed)
        if kw not in A.ENUM_INDEX["RoundingMode"]:
            raise lx.error(f"expected rounding mode to be one of: {listed}" + (f", got: '{kw}'" if validate else ""))
        if validate and kw not in allowed:
            raise lx.error(f"expected rounding mode to be one of: {listed}, got: '{kw}'")
        st.attrs[name] = kw
    return parse


_ENUM_PARSE_MESSAGES = {
    "Signedness": "expected signedness to be one of: {'signed', 'unsigned'}",
    "ComparisonPredicate": "expected 'comparison_predicate' to be one of: {'equal', 'not_equal', 'less_than', "
                           "'less_than_or_equal', 'greater_than', 'greater_than_or_equal'}",
    "ComparisonOrdering": "expected 'comparison_ordering' to be one of: {'ordered', 'unordered'}",
}


def _d_keyword(enum: str):
    def parse(p: Parser, st: _OpState, args) -> None:
        lx = p.lx
        kw = lx.keyword("valid keyword")
        if kw not in A.ENUM_INDEX[enum]:
            raise lx.error(_ENUM_PARSE_MESSAGES[enum])
        st.attrs[args[0].name] = kw
    return parse


def _d_visibility(p: Parser, st: _OpState, args) -> None:
    kw = p.lx.peek_keyword()
    if kw in ("public", "private"):
        p.lx.keyword()
        st.attrs[args[0].name] = kw
    else:
        st.attrs[args[0].name] = "public"


def _d_predicate(p: Parser, st: _OpState, args) -> None:
    st.attrs[args[0].name] = p._predicate_any()


def _d_dense(p: Parser, st: _OpState, args) -> None:
    d = p.parse_dense()
    st.attrs[args[0].name] = d
    if len(args) > 1:
        st.types[args[1].name] = [d.type]


def _d_if_region(p: Parser, st: _OpState, args) -> None:
    st.regions[args[0].name] = p.parse_region(None, [], implicit="cuda_tile.yield")


def _d_argument_region(p: Parser, st: _OpState, args) -> None:
    lx = p.lx
    lx.expect("(")
    block_args: list[tuple[str, T.Type]] = []
    while not lx.accept(")"):
        if block_args:
            lx.expect(",")
        n = lx.prefixed("%")
        if n is None:
            raise lx.error("expected SSA identifier")
        lx.expect(":")
        block_args.append((n, p.parse_type()))
        p.parse_trailing_loc()
    if not block_args and lx.startswith("{") and lx.text[lx.pos + 1:].lstrip().startswith("}"):
        lx.expect("{")
        lx.expect("}")
        st.regions[args[0].name] = Region()  # `() {}` is a region without blocks, as in MLIR
        return
    st.regions[args[0].name] = p.parse_region(None, block_args, implicit="cuda_tile.yield")


CUSTOM_DIRECTIVE_PARSERS = {
    "CudaTileType": _d_types,
    "IEEERoundingMode": _d_rounding("nearest_even", _IEEE, True),
    "DivFOpRoundingMode": _d_rounding("nearest_even", _IEEE + ("approx", "full"), False),
    "FToFRoundingMode": _d_rounding("nearest_even", _IEEE + ("nearest_away",), True),
    "SqrtOpRoundingMode": _d_rounding("nearest_even", _IEEE + ("approx",), False),
    "TanHOpRoundingMode": _d_rounding("full", ("approx", "full"), False),
    "ExpOpRoundingMode": _d_rounding("full", ("approx", "full"), False),
    "IntegerRoundingMode": _d_rounding("nearest_int_to_zero", ("nearest_int_to_zero",), True),
    "Signedness": _d_keyword("Signedness"),
    "ComparisonPredicate": _d_keyword("ComparisonPredicate"),
    "ComparisonOrdering": _d_keyword("ComparisonOrdering"),
    "SymbolVisibility": _d_visibility,
    "AssumePredicate": _d_predicate,
    "DenseTypedElementsAttr": _d_dense,
    "DenseTypedElementsAttrNoResult": _d_dense,
    "IfOpRegion": _d_if_region,
    "ArgumentRegion": _d_argument_region,
}


# -- hand-written op parsers ---------------------------------------------------------------
def _p_entry(p: Parser, st: _OpState) -> None:
    lx = p.lx
    name = lx.prefixed("@")
    if name is None:
        raise lx.error("expected valid '@'-identifier for symbol name")
    st.attrs["sym_name"] = name
    lx.expect("(")
    args: list[tuple[str, T.Type]] = []
    while not lx.accept(")"):
        if args:
            lx.expect(",")
        n = lx.prefixed("%")
        if n is None:
            raise lx.error("expected SSA identifier")
        lx.expect(":")
        args.append((n, p.parse_type()))
        if lx.startswith("{"):
            p.parse_attr_dict_body()
        p.parse_trailing_loc()
    results: list[T.Type] = []
    if lx.accept("->"):
        if lx.accept("("):
            results = [] if lx.startswith(")") else p.type_list()
            lx.expect(")")
        else:
            results = [p.parse_type()]
    st.attrs["function_type"] = T.FunctionType(tuple(t for _, t in args), tuple(results))
    if lx.accept_keyword("optimization_hints"):
        lx.expect("=")
        st.attrs["optimization_hints"] = p.attr_of_kind(st.defn.attr("optimization_hints"))
    else:
        st.attrs["optimization_hints"] = A.OptimizationHints(())
    if lx.accept_keyword("attributes"):
        st.attrs.update(p.parse_attr_dict_body())
    st.regions["body"] = p.parse_region(None, args, implicit="cuda_tile.return")
    if lx.startswith("{"):
        st.attrs.update(p.parse_attr_dict_body())


def _p_memory(p: Parser, st: _OpState, with_scope_required: bool = False) -> None:
    lx = p.lx
    kw = lx.peek_keyword()
    if kw not in A.ENUM_INDEX["MemoryOrderingSemantics"]:
        raise lx.error(f"invalid memory_ordering_semantics attribute specification. Got \"{kw or ''}\" but expect "
                       "one of: weak, relaxed, acquire, release, acq_rel")
    lx.keyword()
    st.attrs["memory_ordering_semantics"] = kw
    kw = lx.peek_keyword()
    if kw is not None:  # an operand (`%v`) comes next unless a scope is given
        if kw not in A.ENUM_INDEX["MemoryScope"]:
            raise lx.error(f"invalid memory_scope attribute specification. Got \"{kw}\" but expect one of: "
                           + ", ".join(A.ENUMS["MemoryScope"]))
        lx.keyword()
        st.attrs["memory_scope"] = kw


def _p_view_index(p: Parser, st: _OpState) -> None:
    lx = p.lx
    st.operands["view"] = [p.value_ref()]
    lx.expect("[")
    st.operands["index"] = p.value_list()
    lx.expect("]")


def _p_view_optionals(p: Parser, st: _OpState) -> None:
    lx = p.lx
    while True:
        if lx.peek_keyword() == "token":
            lx.keyword()
            lx.expect("=")
            st.operands["token"] = [p.value_ref()]
        elif lx.peek_keyword() == "optimization_hints":
            lx.keyword()
            lx.expect("=")
            st.attrs["optimization_hints"] = p.attr_of_kind(st.defn.attr("optimization_hints"))
        elif lx.peek_keyword() == "inbounds":
            lx.keyword()
            lx.expect("=")
            vals = p.attr_value()
            st.attrs["inbounds"] = tuple(bool(v) for v in vals)
        elif lx.peek_keyword() == "attributes":
            lx.keyword()
            st.attrs.update(p.parse_attr_dict_body())
        else:
            break


def _p_index_types(p: Parser, st: _OpState) -> None:
    lx = p.lx
    n = len(st.operands.get("index", []))
    types = []
    while lx.accept(","):  # as many as written: the verifier compares the count with the view's rank
        types.append(p.parse_type())
    if n and not types:
        raise lx.error("expected index types")


def _inbounds_default(st: _OpState) -> None:
    st.attrs.setdefault("inbounds", tuple(False for _ in st.operands.get("index", [])))


def _p_load_view(p: Parser, st: _OpState) -> None:
    _p_memory(p, st)
    _p_view_index(p, st)
    _p_load_signature(p, st)


def _p_load_signature(p: Parser, st: _OpState) -> None:
    """The optional clauses and `: <view type>, <index types> -> <tile>, token` of a view load."""
    lx = p.lx
    _p_view_optionals(p, st)
    lx.expect(":")
    p.parse_type()
    _p_index_types(p, st)
    lx.expect("->")
    tile = p.parse_type()
    lx.expect(",")
    tok = p.parse_type()
    st.result_types = [tile, tok]
    _inbounds_default(st)


def _p_store_view(p: Parser, st: _OpState) -> None:
    lx = p.lx
    _p_memory(p, st)
    st.operands["tile"] = [p.value_ref()]
    lx.expect(",")
    _p_view_index(p, st)
    _p_view_optionals(p, st)
    _p_view_write_signature(p, st)


def _p_view_write_signature(p: Parser, st: _OpState) -> None:
    """`: <tile or value type>, <view type>, <index types> -> token` of a view store or reduction."""
    lx = p.lx
    lx.expect(":")
    p.parse_type()
    lx.expect(",")
    p.parse_type()
    _p_index_types(p, st)
    lx.expect("->")
    st.result_types = [p.parse_type()]
    _inbounds_default(st)


def _p_atomic_red_view(p: Parser, st: _OpState) -> None:
    lx = p.lx
    _p_memory(p, st)
    _p_view_index(p, st)
    lx.expect(",")
    mode = lx.keyword("atomic mode")
    if mode not in A.ENUM_INDEX["AtomicRMWMode"]:
        raise lx.error(f"invalid atomic mode '{mode}'")
    st.attrs["mode"] = mode
    lx.expect(",")
    st.operands["value"] = [p.value_ref()]
    _p_view_optionals(p, st)
    _p_view_write_signature(p, st)


def _p_multimem(p: Parser, st: _OpState) -> None:
    """The multimem view ops in the form the printer (and NVIDIA's tileirdisasm) writes:
    `<ordering> [scope] %view[, %tile][%i...] [token = %t] [inbounds = [...]] [attributes {reduction = ...}]
    : <view type>[, <tile type>], <index types>[, token] -> <results>`; `reduction` defaults to add."""
    lx = p.lx
    _p_memory(p, st)
    loads = st.defn.name == "cuda_tile.multimem_load_reduce_view_tko"
    st.operands["view"] = [p.value_ref()]
    if not loads:
        lx.expect(",")
        st.operands["tile"] = [p.value_ref()]
    lx.expect("[")
    st.operands["index"] = p.value_list()
    lx.expect("]")
    _p_view_optionals(p, st)
    lx.expect(":")
    p.parse_type()
    if not loads:
        lx.expect(",")
        p.parse_type()
    rest = []
    while lx.accept(","):
        rest.append(p.parse_type())
    if st.operands.get("token"):
        if not rest or rest[-1] != T.TOKEN:
            raise lx.error("expected the token type after the index types")
        rest.pop()
    if st.operands["index"] and not rest:
        raise lx.error("expected index types")
    lx.expect("->")
    st.result_types = [p.parse_type()]
    if loads:
        lx.expect(",")
        st.result_types.append(p.parse_type())
    _inbounds_default(st)


def _p_make_tensor_view(p: Parser, st: _OpState) -> None:
    lx = p.lx
    st.operands["base"] = [p.value_ref()]
    lists: dict[str, list[Any]] = {}
    for key in ("shape", "strides"):
        lx.expect(",")
        lx.expect_keyword(key)
        lx.expect("=")
        lx.expect("[")
        items: list[Any] = []
        while not lx.accept("]"):
            if items:
                lx.expect(",")
            if lx.startswith("%"):
                items.append(p.value_ref())
            elif lx.peek_number() or lx.startswith("-"):
                items.append(lx.integer())
            else:
                raise lx.error("expected either integer or SSA value")
        lists[key] = items
    if lx.startswith("{"):
        st.attrs.update(p.parse_attr_dict_body())
    lx.expect(":")
    # `[base type,] [index type] -> tensor_view`: the base type is spelled out when its pointer has an attribute
    t = p.parse_type()
    while lx.accept(","):
        t = p.parse_type()
    if lx.accept("->"):
        t = p.parse_type()
    if not isinstance(t, T.TensorViewType):
        raise lx.error(f"expected tensor_view type, got {t}")
    for key, declared in (("shape", t.shape), ("stride", t.strides)):
        given = lists["shape" if key == "shape" else "strides"]
        if len(given) != len(declared):
            raise lx.error(f"expected {key} declaration to contain {len(declared)} elements due to tensor_view "
                           f"type, but {len(given)} were provided")
        for i, (g, d) in enumerate(zip(given, declared)):
            gv = "dynamic" if isinstance(g, Value) else str(g)
            dv = "dynamic" if d == T.DYNAMIC else str(d)
            if gv != dv:
                raise lx.error(f"input {key} dimension {i} does not match tensor_view type (expected {dv}, got {gv})")
    st.operands["dynamicShape"] = [v for v in lists["shape"] if isinstance(v, Value)]
    st.operands["dynamicStrides"] = [v for v in lists["strides"] if isinstance(v, Value)]
    st.result_types = [t]


def _p_make_view(p: Parser, st: _OpState) -> None:
    lx = p.lx
    st.operands["tensor_view"] = [p.value_ref()]
    if lx.startswith("{"):
        st.attrs.update(p.parse_attr_dict_body())
    lx.expect(":")
    t = p.parse_type()
    want = _VIEW_RESULTS[st.defn.name]
    if not isinstance(t, want[1]):
        raise lx.error(f"'{st.defn.name}' expected '{want[0]}' type, but got '!cuda_tile.{t}'")
    st.result_types = [t]


# view maker -> (type mnemonic, type class) of its result
_VIEW_RESULTS = {
    "cuda_tile.make_partition_view": ("partition_view", T.PartitionViewType),
    "cuda_tile.make_strided_view": ("strided_view", T.StridedViewType),
    "cuda_tile.make_gather_scatter_view": ("gather_scatter_view", T.GatherScatterViewType),
}


def _p_get_shape(p: Parser, st: _OpState) -> None:
    lx = p.lx
    st.operands["src"] = [p.value_ref()]
    lx.expect(":")
    pos = lx.pos
    src_t = p.parse_type()
    if st.defn.name == "cuda_tile.get_tensor_shape" and not isinstance(src_t, T.TensorViewType):
        raise lx.error(f"expected tensor_view, got '!cuda_tile.{src_t}'", pos)
    lx.expect("->")
    rt = p.parse_type()
    if isinstance(src_t, T.TensorViewType):
        n = len(src_t.shape)
    else:
        n = len(getattr(src_t, "tile_shape", ()))
    st.result_types = [rt] * n


def _p_for(p: Parser, st: _OpState) -> None:
    lx = p.lx
    if lx.accept_keyword("unsigned"):
        st.attrs["unsignedCmp"] = True
    iv = lx.prefixed("%")
    if iv is None:
        raise lx.error("expected induction variable")
    lx.expect_keyword("in")
    lx.expect("(")
    lb = p.value_ref()
    lx.expect_keyword("to")
    ub = p.value_ref()
    lx.expect(",")
    lx.expect_keyword("step")
    step = p.value_ref()
    lx.expect(")")
    lx.expect(":")
    ivt = p.parse_type()
    st.operands.update({"lowerBound": [lb], "upperBound": [ub], "step": [step]})
    for bound in ("lowerBound", "upperBound", "step"):  # the bounds are resolved with the induction type
        st._check_use(p, bound, [ivt])
    args = [(iv, ivt)]
    inits: list[Value] = []
    types: list[T.Type] = []
    if lx.accept_keyword("iter_values"):
        names, inits = _iter_values(p)
        lx.expect("->")
        lx.expect("(")
        types = p.type_list()
        lx.expect(")")
        args += list(zip(names, types))
    st.operands.update({"lowerBound": [lb], "upperBound": [ub], "step": [step], "initValues": inits})
    st.regions["region"] = p.parse_region(None, args, implicit="cuda_tile.continue")
    if lx.startswith("{"):
        st.attrs.update(p.parse_attr_dict_body())
    st.result_types = list(types)


def _iter_values(p: Parser) -> tuple[list[str], list[Value]]:
    lx = p.lx
    lx.expect("(")
    names: list[str] = []
    vals: list[Value] = []
    while not lx.accept(")"):
        if names:
            lx.expect(",")
        n = lx.prefixed("%")
        if n is None:
            raise lx.error("expected SSA identifier")
        lx.expect("=")
        names.append(n)
        vals.append(p.value_ref())
    return names, vals


def _p_loop(p: Parser, st: _OpState) -> None:
    lx = p.lx
    names: list[str] = []
    inits: list[Value] = []
    iter_types: list[T.Type] = []
    result_types: list[T.Type] = []
    if lx.accept_keyword("iter_values"):
        names, inits = _iter_values(p)
    if lx.accept(":"):
        first = p.type_list()
        if names:
            iter_types = first
            if lx.accept("->"):
                result_types = p.type_list()
        else:
            result_types = first
    if names and not iter_types:
        iter_types = [v.type for v in inits]
    st.operands["initValues"] = inits
    st.regions["region"] = p.parse_region(None, list(zip(names, iter_types)), implicit="cuda_tile.continue")
    if lx.startswith("{"):
        st.attrs.update(p.parse_attr_dict_body())
    st.result_types = result_types


CUSTOM_PARSERS = {
    "cuda_tile.entry": _p_entry,
    "cuda_tile.load_view_tko": _p_load_view,
    "cuda_tile.store_view_tko": _p_store_view,
    "cuda_tile.atomic_red_view_tko": _p_atomic_red_view,
    "cuda_tile.make_tensor_view": _p_make_tensor_view,
    "cuda_tile.make_partition_view": _p_make_view,
    "cuda_tile.make_strided_view": _p_make_view,
    "cuda_tile.make_gather_scatter_view": _p_make_view,
    "cuda_tile.get_tensor_shape": _p_get_shape,
    "cuda_tile.get_index_space_shape": _p_get_shape,
    "cuda_tile.for": _p_for,
    "cuda_tile.loop": _p_loop,
    "cuda_tile.multimem_load_reduce_view_tko": _p_multimem,
    "cuda_tile.multimem_reduce_view_tko": _p_multimem,
    "cuda_tile.multimem_store_view_tko": _p_multimem,
}


def _plain_signatures(module: Operation) -> Operation:
    """The types inside function types and constants' values lose their layouts: a layout belongs to a
    value's type (as the nv_tileas passes leave it), not to a signature or an attribute."""
    def plain(t: Any) -> Any:
        if isinstance(t, T.TileType):
            return t.with_encoding(None)
        if isinstance(t, T.FunctionType):
            return T.FunctionType(tuple(map(plain, t.inputs)), tuple(map(plain, t.results)))
        return t

    for op in module.walk():
        for key, value in op.attributes.items():
            if isinstance(value, T.FunctionType):
                op.attributes[key] = plain(value)
            elif isinstance(value, A.DenseElements):   # a constant's value, typed as its result
                value.type = plain(value.type)
    return module


def parse_module(text: str, filename: str = "<text>", layouts: Optional[Callable[[str], Any]] = None) -> Operation:
    """Parse TileIR text into a `cuda_tile.module` operation (CompileError on bad input); `layouts` as for
    `Parser`: a tile type read with a layout has it as its encoding."""
    try:
        module = Parser(text, filename, layouts).parse_module()
        return _plain_signatures(module) if layouts is not None else module   # (no layout read without a reader)
    except ParseError:
        raise
    except RecursionError:
        raise ParseError(f"{filename}: error: input is nested too deeply") from None
