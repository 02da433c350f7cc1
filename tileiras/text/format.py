"""MLIR declarative assembly formats: parsed once per op into an element tree.

The printer and the parser both walk this tree. Spacing follows MLIR's
generated printers, whose decisions are made when the printer is
*generated*, walking the elements in order (optional groups included) and
not when it runs; `compile_format` replays that walk and stores on every
element whether a space goes before it.
"""

from __future__ import annotations

from ..ir.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Optional, Union


@record(frozen=False)
class Lit:
    text: str                     # "" and " " are whitespace elements
    space_before: bool = False


@record(frozen=False)
class Var:
    name: str
    space_before: bool = False


@record(frozen=False)
class TypeOf:
    name: str                     # type($name)
    space_before: bool = False


@record(frozen=False)
class Custom:
    name: str
    args: list                    # Var | TypeOf
    space_before: bool = False


@record(frozen=False)
class AttrDict:
    with_keyword: bool = False


@record(frozen=False)
class Optional_:
    then: list
    else_: list
    anchor: Union[Var, TypeOf, Custom]
    elided_anchor: Optional[Var] = None   # a unit-attr anchor that is not printed


@record(frozen=False)
class OIList:
    clauses: list                 # [(Lit, [elements])]


Element = (Lit, Var, TypeOf, Custom, AttrDict, Optional_, OIList)  # for isinstance


def _tokenize(fmt: str) -> list[str]:
    toks: list[str] = []
    i = 0
    n = len(fmt)
    while i < n:
        c = fmt[i]
        if c.isspace():
            i += 1
        elif c == "`":
            j = fmt.index("`", i + 1)
            toks.append(fmt[i:j + 1])
            i = j + 1
        elif c == "$":
            j = i + 1
            while j < n and (fmt[j].isalnum() or fmt[j] == "_"):
                j += 1
            toks.append(fmt[i:j])
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (fmt[j].isalnum() or fmt[j] in "_-"):
                j += 1
            toks.append(fmt[i:j])
            i = j
        else:
            toks.append(c)
            i += 1
    return toks


class _FormatParser:
    def __init__(self, fmt: str, unit_attrs: frozenset[str]) -> None:
        self.toks = _tokenize(fmt)
        self.pos = 0
        self.unit_attrs = unit_attrs

    def peek(self) -> Optional[str]:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def next(self) -> str:
        t = self.toks[self.pos]
        self.pos += 1
        return t

    def expect(self, t: str) -> None:
        got = self.next()
        if got != t:
            raise ValueError(f"format: expected {t!r}, got {got!r}")

    def elements(self, stop: tuple[str, ...] = ()) -> list:
        out = []
        while self.peek() is not None and self.peek() not in stop:
            out.append(self.element())
        return out

    def element(self):
        t = self.next()
        if t.startswith("`"):
            return Lit(t[1:-1])
        if t.startswith("$"):
            return Var(t[1:])
        if t == "attr-dict":
            return AttrDict(False)
        if t == "attr-dict-with-keyword":
            return AttrDict(True)
        if t == "type":
            self.expect("(")
            name = self.next()[1:]
            self.expect(")")
            return TypeOf(name)
        if t == "custom":
            self.expect("<")
            name = self.next()
            self.expect(">")
            self.expect("(")
            args = []
            while self.peek() != ")":
                tok = self.next()
                if tok == ",":
                    continue
                if tok == "type":
                    self.expect("(")
                    args.append(TypeOf(self.next()[1:]))
                    self.expect(")")
                else:
                    args.append(Var(tok[1:]))
            self.expect(")")
            return Custom(name, args)
        if t == "oilist":
            self.expect("(")
            clauses = []
            while True:
                lit = self.element()
                elems = self.elements(stop=("|", ")"))
                clauses.append((lit, elems))
                if self.next() == ")":
                    break
            return OIList(clauses)
        if t == "(":
            then = self.elements(stop=(")", ":"))
            else_: list = []
            if self.peek() == ":":
                self.next()
                self.expect("(")
                else_ = self.elements(stop=(")",))
                self.expect(")")
            self.expect(")")
            self.expect("?")
            anchor = self._find_anchor(then)
            then = [self._strip_anchor(e) for e in then]
            elided = None
            if (isinstance(anchor, Var) and anchor.name in self.unit_attrs and then and then[0] is not anchor):
                elided = anchor
            return Optional_(then, else_, anchor, elided)
        if t == "^":
            return "^"
        raise ValueError(f"format: unexpected token {t!r}")

    def _find_anchor(self, elems: list):
        for i, e in enumerate(elems):
            if i + 1 < len(elems) and elems[i + 1] == "^":
                return e
        raise ValueError("format: optional group without anchor")

    @staticmethod
    def _strip_anchor(e):
        return e

    def parse(self) -> list:
        elems = self.elements()
        return _drop_carets(elems)


def _drop_carets(elems: list) -> list:
    out = []
    for e in elems:
        if e == "^":
            continue
        if isinstance(e, Optional_):
            e.then = _drop_carets(e.then)
            e.else_ = _drop_carets(e.else_)
        if isinstance(e, OIList):
            e.clauses = [(lit, _drop_carets(els)) for lit, els in e.clauses]
        out.append(e)
    return out


def _space_before_literal(value: str, last_was_punct: bool) -> bool:
    if len(value) != 1 and value != "->":
        return True
    if last_was_punct:
        return value[0] not in ">)}],"
    return value[0] not in "<>(){}[],"


class _SpaceState:
    def __init__(self) -> None:
        self.should_emit_space = True
        self.last_was_punct = False

    def visit(self, elems: list, unit_attrs: frozenset[str], skip=None) -> None:
        for e in elems:
            if e is skip:
                continue
            if isinstance(e, Lit):
                v = e.text
                if v == "" or v.isspace():
                    e.space_before = v == " "
                    self.should_emit_space = False
                    self.last_was_punct = v == ""
                    continue
                e.space_before = self.should_emit_space and _space_before_literal(v, self.last_was_punct)
                self.should_emit_space = len(v) != 1 or v[0] not in "<({["
                self.last_was_punct = v[0] != "_" and not v[0].isalpha()
            elif isinstance(e, AttrDict):
                self.last_was_punct = False
            elif isinstance(e, Optional_):
                self.visit(e.then, unit_attrs, skip=e.elided_anchor)
                self.visit(e.else_, unit_attrs)
            elif isinstance(e, OIList):
                for lit, els in e.clauses:
                    self.visit([lit], unit_attrs)
                    unit_only = len(els) == 1 and isinstance(els[0], Var) and els[0].name in unit_attrs
                    if not unit_only:
                        self.visit(els, unit_attrs)
            else:
                e.space_before = self.should_emit_space or not self.last_was_punct
                self.last_was_punct = False
                self.should_emit_space = True


_COMPILED: dict[tuple[str, frozenset[str]], tuple] = {}  # a dict, not functools.lru_cache: start-up cost


def compile_format(fmt: str, unit_attrs: frozenset[str] = frozenset()) -> tuple:
    """Parse an assembly format and annotate each element with its spacing (memoised)."""
    key = (fmt, unit_attrs)
    elems = _COMPILED.get(key)
    if elems is None:
        parsed = _FormatParser(fmt, unit_attrs).parse()
        _SpaceState().visit(parsed, unit_attrs)
        elems = _COMPILED[key] = tuple(parsed)
    return elems
