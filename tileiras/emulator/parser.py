"""PTX text -> a module of functions, variables and parsed instructions.

Tolerant of everything LLVM's NVPTX back end writes: comments, `.loc`/`.file`
debug lines, `.section` debug blocks, `.pragma`, inline-asm `{ .reg ...; }`
scopes, `.branchtargets` tables, `0f`/`0d` float literals and `U` suffixes.
Nothing is executed or resolved here; names are resolved by `program.py`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Union

from .errors import EmulatorError
from .ptxtypes import TYPE_NAMES

# ---------------------------------------------------------------------------
# operands


@dataclass(frozen=True)
class Reg:
    name: str            # '%r1', '%tid.x', or a bare identifier declared with .reg


@dataclass(frozen=True)
class Imm:
    value: int


@dataclass(frozen=True)
class FImm:
    value: float
    bits: Optional[int] = None   # exact bit pattern of a 0f/0d literal
    width: int = 64              # 32 for 0f, 64 for 0d and decimal literals


@dataclass(frozen=True)
class Sym:
    name: str            # a variable, function, label or (bare) register name
    offset: int = 0


@dataclass(frozen=True)
class Addr:
    base: Union[Reg, Sym, Imm, None]
    offset: int = 0


@dataclass(frozen=True)
class Vec:
    items: tuple


@dataclass(frozen=True)
class TensorAddr:        # '[tensorMap, {c0, c1, ...}]' (cp.async.bulk.tensor)
    base: Addr
    coords: Vec


@dataclass(frozen=True)
class Pipe:              # '%p|%q' (setp) or '%r|%p' (shfl)
    first: object
    second: object


@dataclass(frozen=True)
class Not:               # '!%p'
    inner: object


@dataclass(frozen=True)
class Paren:             # call argument lists
    items: tuple


@dataclass(frozen=True)
class Sink:              # '_'
    pass


Operand = Union[Reg, Imm, FImm, Sym, Addr, TensorAddr, Vec, Pipe, Not, Paren, Sink]

# ---------------------------------------------------------------------------
# declarations and statements


@dataclass
class Instr:
    opcode: str
    mods: tuple[str, ...]
    operands: list
    guard: Optional[tuple[str, bool]]   # (predicate register, negated)
    line: int
    text: str

    @property
    def full_opcode(self) -> str:
        return ".".join((self.opcode, *self.mods))


@dataclass
class VarDecl:
    space: str                     # 'global', 'shared', 'const', 'local', 'param'
    name: str
    type: str                      # element type ('b8', 'u32', ...)
    count: Optional[int]           # number of elements; None for an unsized extern array
    align: int
    vector: int = 1                # .v2/.v4 element vectors
    init: Optional[list] = None    # flat list of ints/floats/Sym initialisers
    linkage: str = ""              # 'extern', 'visible', 'weak', 'common' or ''
    line: int = 0
    is_array: bool = False

    @property
    def elem_bytes(self) -> int:
        from .ptxtypes import ptx_type

        return ptx_type(self.type).nbytes * self.vector

    @property
    def nbytes(self) -> int:
        return self.elem_bytes * (self.count if self.count is not None else 0)


@dataclass
class RegDecl:
    type: str
    names: list[str]
    line: int


@dataclass
class Function:
    name: str
    kind: str                                  # 'entry' or 'func'
    params: list[VarDecl] = field(default_factory=list)
    rets: list[VarDecl] = field(default_factory=list)
    body: Optional[list] = None                # None: a declaration only
    directives: dict = field(default_factory=dict)
    line: int = 0


@dataclass
class Module:
    version: str = ""
    target: str = ""
    address_size: int = 64
    functions: dict[str, Function] = field(default_factory=dict)
    variables: list[VarDecl] = field(default_factory=list)


# ---------------------------------------------------------------------------
# scanning: comments out, then statements / block openers / block closers


_COMMENT = re.compile(r'"[^"\n]*"|//[^\n]*|/\*.*?\*/', re.S)


def _strip_comments(text: str) -> str:
    """Replace comments by nothing (block comments by their newlines, so line numbers survive)."""
    def repl(m: "re.Match[str]") -> str:
        s = m.group()
        if s[0] == '"':
            return s
        if s[1] == "/":
            return ""
        return "\n" * s.count("\n")

    return _COMMENT.sub(repl, text)


_LINE_DIRECTIVES = (".version", ".target", ".address_size", ".file", ".loc", ".section")
_STRUCT = re.compile(r'[;{}"\n]')
_BRACES = re.compile(r"[{}]")


def _scan(text: str) -> list[tuple[str, str, int]]:
    """Split into ('stmt', text, line), ('open', header, line) and ('close', '', line) events."""
    events: list[tuple[str, str, int]] = []
    buf: list[str] = []
    first = ""                # the statement's first non-blank piece ("" while the statement is empty)
    line = 1
    start_line = 1
    pos = 0
    n = len(text)
    while True:
        m = _STRUCT.search(text, pos)
        end = m.start() if m else n
        if end > pos:
            piece = text[pos:end]
            if not first and piece.strip():
                first = piece.strip()
                start_line = line
            buf.append(piece)
        if m is None:
            break
        c = m.group()
        pos = m.end()
        if c == "\n":
            if first:
                head = _peel_labels(first)[1] or _peel_labels("".join(buf).strip())[1]
                if head.startswith(_LINE_DIRECTIVES):
                    # these directives end at the end of the line, not at a ';'
                    events.append(("stmt", "".join(buf).strip(), start_line))
                    buf, first = [], ""
                else:
                    buf.append(" ")
            line += 1
        elif c == '"':
            j = text.find('"', pos)
            j = n - 1 if j < 0 else j
            if not first:
                first, start_line = '"', line
            buf.append(text[pos - 1:j + 1])
            pos = j + 1
        elif c == ";":
            if first:
                events.append(("stmt", "".join(buf).strip(), start_line))
            buf, first = [], ""
        elif c == "{":
            pending = "".join(buf).strip()
            head = _peel_labels(pending)[1]
            if head and not head.startswith(".section") and not _FUNC_HEAD.search(head):
                # a vector operand or an initializer list: keep the braces in this statement
                depth, j = 1, pos
                while depth:
                    k = _BRACES.search(text, j)
                    if k is None:
                        j = n
                        break
                    depth += 1 if k.group() == "{" else -1
                    j = k.end()
                inner = text[pos - 1:j]
                line += inner.count("\n")
                buf.append(inner.replace("\n", " "))
                pos = j
            else:
                events.append(("open", pending, start_line if first else line))
                buf, first = [], ""
        else:   # "}"
            if first:
                events.append(("stmt", "".join(buf).strip(), start_line))
            events.append(("close", "", line))
            buf, first = [], ""
    if first:
        events.append(("stmt", "".join(buf).strip(), start_line))
    return events


_LABEL = re.compile(r"^([A-Za-z_$][\w$]*)\s*:(?!:)\s*")


def _peel_labels(stmt: str) -> tuple[list[str], str]:
    labels = []
    while True:
        m = _LABEL.match(stmt)
        if not m:
            return labels, stmt
        labels.append(m.group(1))
        stmt = stmt[m.end():]


# ---------------------------------------------------------------------------
# operand parsing

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<f32>0[fF][0-9a-fA-F]{8})
  | (?P<f64>0[dD][0-9a-fA-F]{16})
  | (?P<hex>0[xX][0-9a-fA-F]+)[uU]?
  | (?P<flt>[0-9]+\.[0-9]*(?:[eE][-+]?[0-9]+)?|[0-9]+[eE][-+]?[0-9]+)
  | (?P<oct>0[0-7]+)[uU]?
  | (?P<bin>0[bB][01]+)[uU]?
  | (?P<dec>[0-9]+)[uU]?
  | (?P<reg>%[A-Za-z_$][\w$]*(?:\.[xyzw]\b)?)
  | (?P<id>[A-Za-z_$][\w$.]*)
  | (?P<punct>[\[\]{}(),+\-|!_:])
""", re.VERBOSE)


def _tokens(text: str, where: str) -> list[tuple[str, str]]:
    toks = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise EmulatorError(f"cannot parse PTX operands near '{text[pos:pos + 20]}' in '{where}'")
        kind = m.lastgroup
        if kind != "ws":
            toks.append((kind, m.group(kind)))
        pos = m.end()
    return toks


class _OperandParser:
    def __init__(self, text: str, where: str) -> None:
        self.toks = _tokens(text, where)
        self.i = 0
        self.where = where

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("eof", "")

    def next(self) -> tuple[str, str]:
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        kind, text = self.next()
        if text != value:
            raise EmulatorError(f"expected '{value}' but found '{text}' in '{self.where}'")

    def fail(self, what: str) -> EmulatorError:
        return EmulatorError(f"cannot parse {what} in '{self.where}'")

    def operands(self) -> list:
        ops = []
        if self.peek()[0] == "eof":
            return ops
        while True:
            ops.append(self.operand())
            kind, text = self.peek()
            if kind == "eof":
                return ops
            if text != ",":
                raise self.fail(f"operand list (unexpected '{text}')")
            self.next()

    def operand(self) -> object:
        first = self.simple()
        if self.peek()[1] == "|":
            self.next()
            return Pipe(first, self.simple())
        return first

    def simple(self) -> object:
        kind, text = self.peek()
        if text == "[":
            self.next()
            addr = self.address()
            if self.peek()[1] == ",":      # a tensor-map address with its coordinates
                self.next()
                coords = self.simple()
                if not isinstance(coords, Vec):
                    raise self.fail("tensor coordinates")
                self.expect("]")
                return TensorAddr(addr, coords)
            self.expect("]")
            return addr
        if text == "{":
            self.next()
            items = []
            while self.peek()[1] != "}":
                items.append(self.simple())
                if self.peek()[1] == ",":
                    self.next()
                elif self.peek()[1] != "}":
                    raise self.fail("vector operand")
            self.next()
            return Vec(tuple(items))
        if text == "(":
            self.next()
            items = []
            while self.peek()[1] != ")":
                items.append(self.simple())
                if self.peek()[1] == ",":
                    self.next()
                elif self.peek()[1] != ")":
                    raise self.fail("call argument list")
            self.next()
            return Paren(tuple(items))
        if text == "!":
            self.next()
            return Not(self.simple())
        if text == "_" and kind == "punct":
            self.next()
            return Sink()
        if text == "-" or kind in ("dec", "hex", "oct", "bin", "f32", "f64", "flt"):
            return self.number()
        if kind == "reg":
            self.next()
            return Reg(text)
        if kind == "id":
            self.next()
            if text == "_":
                return Sink()
            if self.peek()[1] == "(" and text in ("generic",):
                self.next()
                inner = self.simple()
                self.expect(")")
                return inner
            offset = 0
            if self.peek()[1] in ("+", "-"):
                offset = self.offset()
            return Sym(text, offset)
        raise self.fail(f"operand '{text}'")

    def offset(self) -> int:
        total = 0
        while self.peek()[1] in ("+", "-"):
            sign = 1
            while self.peek()[1] in ("+", "-"):
                if self.next()[1] == "-":
                    sign = -sign
            kind, text = self.next()
            total += sign * _int_value(kind, text, self.where)
        return total

    def number(self) -> object:
        sign = 1
        while self.peek()[1] == "-":
            self.next()
            sign = -sign
        kind, text = self.next()
        if kind == "f32":
            import struct

            bits = int(text[2:], 16)
            value = struct.unpack("<f", bits.to_bytes(4, "little"))[0]
            if sign < 0:
                bits ^= 0x80000000
                value = -value
            return FImm(value, bits, 32)
        if kind == "f64":
            import struct

            bits = int(text[2:], 16)
            value = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
            if sign < 0:
                bits ^= 1 << 63
                value = -value
            return FImm(value, bits, 64)
        if kind == "flt":
            return FImm(sign * float(text), None, 64)
        return Imm(sign * _int_value(kind, text, self.where))

    def address(self) -> Addr:
        kind, text = self.peek()
        if kind == "reg":
            self.next()
            base: object = Reg(text)
        elif kind == "id":
            self.next()
            base = Sym(text)
        elif text == "-" or kind in ("dec", "hex", "oct", "bin"):
            value = self.number()
            return Addr(None, value.value if isinstance(value, Imm) else 0)
        else:
            raise self.fail("address operand")
        offset = self.offset() if self.peek()[1] in ("+", "-") else 0
        return Addr(base, offset)


def _int_value(kind: str, text: str, where: str) -> int:
    text = text.rstrip("uU")
    if kind == "hex":
        return int(text, 16)
    if kind == "oct":
        return int(text, 8)
    if kind == "bin":
        return int(text[2:], 2)
    if kind == "dec":
        return int(text, 10)
    raise EmulatorError(f"expected an integer but found '{text}' in '{where}'")


def parse_operands(text: str, where: str) -> list:
    p = _OperandParser(text, where)
    return p.operands()


# ---------------------------------------------------------------------------
# statements

_INSTR = re.compile(r"^(?:@(!?)\s*(%?[A-Za-z_$][\w$]*)\s+)?([a-z_][\w.:]*)\s*(.*)$", re.DOTALL)


def parse_instruction(stmt: str, line: int) -> Instr:
    m = _INSTR.match(stmt)
    if not m:
        raise EmulatorError(f"line {line}: cannot parse PTX statement '{stmt}'")
    neg, pred, opcode, rest = m.groups()
    parts = opcode.split(".")
    guard = (pred, bool(neg)) if pred else None
    operands = parse_operands(rest.strip(), stmt)
    return Instr(parts[0], tuple(p for p in parts[1:] if p), operands, guard, line, " ".join(stmt.split()))


_SPACES = ("global", "shared", "const", "local", "param", "tex", "surf")
_LINKAGE = ("extern", "visible", "weak", "common")


def parse_var(stmt: str, line: int, allow_no_space: bool = False) -> VarDecl:
    """`[.linkage] .space [.align N] [.vN] .type name[dims] [= init]`."""
    init_text = None
    if "=" in stmt:
        stmt, init_text = stmt.split("=", 1)
    words = stmt.replace("\t", " ").split()
    linkage, space, align, vector, ty = "", None, 0, 1, None
    name = None
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("."):
            key = w[1:]
            if key in _LINKAGE:
                linkage = key
            elif key in _SPACES:
                space = key
            elif key == "align":
                i += 1
                align = int(words[i], 0)
            elif key in ("v2", "v4", "v8"):
                vector = int(key[1:])
            elif key in TYPE_NAMES:
                ty = key
            elif key in ("ptr", "hidden"):
                pass     # pointer attributes and .hidden (symbol visibility) change nothing here
            elif key in ("shared::cta", "shared::cluster"):
                space = "shared"
            else:
                raise EmulatorError(f"line {line}: unsupported variable directive '.{key}' in '{stmt.strip()}'")
        else:
            name = "".join(words[i:])
            break
        i += 1
    if space is None and not allow_no_space:
        raise EmulatorError(f"line {line}: variable declaration without a state space: '{stmt.strip()}'")
    if ty is None or name is None:
        raise EmulatorError(f"line {line}: cannot parse the declaration '{stmt.strip()}'")
    m = re.match(r"^([A-Za-z_$%][\w$]*)((?:\[[^\]]*\])*)$", name)
    if not m:
        raise EmulatorError(f"line {line}: cannot parse the declared name '{name}'")
    base, dims_text = m.groups()
    count: Optional[int] = 1
    dims = re.findall(r"\[([^\]]*)\]", dims_text)
    for d in dims:
        if d.strip() == "":
            count = None
        elif count is not None:
            count *= int(d.strip(), 0)
    init = _parse_init(init_text, line) if init_text is not None else None
    if count is None and init is not None:
        count = len(init)
    return VarDecl(space or "param", base, ty, count, align or 0, vector, init, linkage, line, is_array=bool(dims))


def _parse_init(text: str, line: int) -> list:
    toks = _tokens(text.replace("{", " { ").replace("}", " } "), text)
    values: list = []
    i = 0
    while i < len(toks):
        kind, t = toks[i]
        if t in ("{", "}", ","):
            i += 1
            continue
        sign = 1
        while t == "-":
            sign = -sign
            i += 1
            kind, t = toks[i]
        if kind in ("dec", "hex", "oct", "bin"):
            values.append(sign * _int_value(kind, t, text))
        elif kind in ("f32", "f64", "flt"):
            p = _OperandParser(t, text)
            v = p.number()
            values.append(FImm(-v.value, None, 64) if sign < 0 else v)
        elif kind == "id":
            if t == "generic" and i + 1 < len(toks) and toks[i + 1][1] == "(":
                i += 2
                kind, t = toks[i]
                i += 1   # the closing paren follows
            off = 0
            while i + 2 < len(toks) and toks[i + 1][1] in ("+", "-") and toks[i + 2][0] in ("dec", "hex"):
                s = -1 if toks[i + 1][1] == "-" else 1
                off += s * _int_value(toks[i + 2][0], toks[i + 2][1], text)
                i += 2
            values.append(Sym(t, off))
        elif t in ("(", ")"):
            pass
        else:
            raise EmulatorError(f"line {line}: cannot parse initializer '{text.strip()}'")
        i += 1
    return values


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses/brackets."""
    parts, depth, cur = [], 0, []
    for c in text:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


_FUNC_HEAD = re.compile(r"\.(entry|func)\b")


def _parse_function_header(header: str, line: int) -> Function:
    m = _FUNC_HEAD.search(header)
    assert m is not None
    kind = m.group(1)
    rest = header[m.end():].strip()
    rets: list[VarDecl] = []
    if rest.startswith("("):
        inner, rest = _take_parens(rest, line)
        rets = [parse_var(p, line, allow_no_space=True) for p in _split_top(inner)]
    nm = re.match(r"([A-Za-z_$][\w$.]*)\s*", rest)
    if not nm:
        raise EmulatorError(f"line {line}: cannot parse the function header '{header}'")
    name = nm.group(1)
    rest = rest[nm.end():]
    params: list[VarDecl] = []
    if rest.startswith("("):
        inner, rest = _take_parens(rest, line)
        params = [parse_var(p, line, allow_no_space=True) for p in _split_top(inner)]
    directives = {key: value.strip() for key, value in re.findall(r"\.(\w+)([^.]*)", rest)}
    return Function(name, kind, params, rets, None, directives, line)


def _take_parens(text: str, line: int) -> tuple[str, str]:
    depth = 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[1:i], text[i + 1:].strip()
    raise EmulatorError(f"line {line}: unbalanced parentheses in '{text}'")


_IGNORED_BODY_DIRECTIVES = (".loc", ".pragma", ".file", ".maxnreg", ".maxntid", ".reqntid", ".minnctapersm",
                            ".reqnctapercluster", ".blocksareclusters", ".explicitcluster", ".maxclusterrank",
                            ".noreturn", ".section", ".alias", ".abi_preserve", ".abi_preserve_control")


def parse_module(text: str) -> Module:
    """Parse a whole PTX module."""
    events = _scan(_strip_comments(text))
    mod = Module()
    i = 0
    n = len(events)
    while i < n:
        kind, stmt, line = events[i]
        if kind == "close":
            raise EmulatorError(f"line {line}: unbalanced '}}' in PTX")
        if kind == "open":
            labels, head = _peel_labels(stmt)
            if head.startswith(".section") or head == "":
                i = _skip_block(events, i, line)
                continue
            if _FUNC_HEAD.search(head):
                fn = _parse_function_header(head, line)
                body, i = _parse_body(events, i + 1)
                fn.body = body
                mod.functions[fn.name] = fn
                continue
            raise EmulatorError(f"line {line}: unexpected block '{head}'")
        i += 1
        labels, stmt = _peel_labels(stmt)
        if not stmt:
            continue
        word = stmt.split()[0]
        if word == ".version":
            mod.version = stmt.split()[1]
        elif word == ".target":
            mod.target = stmt[len(".target"):].strip()
        elif word == ".address_size":
            mod.address_size = int(stmt.split()[1])
        elif word in (".file", ".pragma", ".loc", ".section"):
            continue
        elif _FUNC_HEAD.search(stmt):
            fn = _parse_function_header(stmt, line)
            mod.functions.setdefault(fn.name, fn)
        elif word.startswith("."):
            mod.variables.append(parse_var(stmt, line))
        else:
            raise EmulatorError(f"line {line}: unexpected statement at module scope: '{stmt}'")
    return mod


def _skip_block(events: list, i: int, line: int) -> int:
    depth = 0
    while i < len(events):
        kind = events[i][0]
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise EmulatorError(f"line {line}: unterminated block in PTX")


def _parse_body(events: list, i: int) -> tuple[list, int]:
    """Body items: ('reg', RegDecl) ('var', VarDecl) ('label', name) ('instr', Instr)
    ('open',) ('close',) ('targets', label, [names])."""
    body: list = []
    depth = 1
    while i < len(events):
        kind, stmt, line = events[i]
        i += 1
        if kind == "open":
            labels, head = _peel_labels(stmt)
            body.extend(("label", lab) for lab in labels)
            if head:
                raise EmulatorError(f"line {line}: unexpected block header '{head}' inside a function")
            body.append(("open",))
            depth += 1
            continue
        if kind == "close":
            depth -= 1
            if depth == 0:
                return body, i
            body.append(("close",))
            continue
        labels, stmt = _peel_labels(stmt)
        if not stmt:
            body.extend(("label", lab) for lab in labels)
            continue
        if stmt.startswith((".branchtargets", ".calltargets")):
            names = [s.strip() for s in stmt.split(None, 1)[1].split(",")] if " " in stmt else []
            for lab in labels:
                body.append(("targets", lab, names))
            continue
        body.extend(("label", lab) for lab in labels)
        if stmt.split(None, 1)[0] == ".reg":
            body.append(("reg", _parse_reg_decl(stmt, line)))
        elif stmt.split(None, 1)[0] in _IGNORED_BODY_DIRECTIVES or ".callprototype" in stmt.split(None, 1)[0]:
            continue
        elif stmt.startswith("."):
            body.append(("var", parse_var(stmt, line)))
        else:
            body.append(("instr", parse_instruction(stmt, line)))
    raise EmulatorError("unterminated function body in PTX")


def _parse_reg_decl(stmt: str, line: int) -> RegDecl:
    words = stmt.split(None, 2)
    ty = None
    rest = ""
    idx = 1
    parts = stmt.replace(",", " , ").split()
    names: list[str] = []
    vec = 1
    for idx, w in enumerate(parts[1:], start=1):
        if w.startswith(".") and w[1:] in TYPE_NAMES:
            ty = w[1:]
        elif w in (".v2", ".v4"):
            vec = int(w[2:])
        elif w.startswith("."):
            raise EmulatorError(f"line {line}: unsupported register declaration '{stmt}'")
        else:
            rest = " ".join(parts[idx:])
            break
    del words
    if ty is None:
        raise EmulatorError(f"line {line}: register declaration without a type: '{stmt}'")
    if vec != 1:
        raise EmulatorError(f"line {line}: vector registers are not supported: '{stmt}'")
    for item in rest.split(","):
        item = item.strip()
        if not item:
            continue
        m = re.match(r"^(%?[A-Za-z_$][\w$]*)<(\d+)>$", item)
        if m:
            names.extend(f"{m.group(1)}{k}" for k in range(int(m.group(2))))
        else:
            names.append(item)
    return RegDecl(ty, names, line)
