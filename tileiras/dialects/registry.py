"""Op declarations: one `OpDef` per operation, looked up by full name.

An `OpDef` is the single declaration that the bytecode reader and writer,
the printer, the parser and the verifier all read:

* `operands` / `results`: named groups, each single, optional or variadic,
  with the type constraint the verifier checks and the bytecode version
  that introduced it;
* `attributes`: named attributes with their kind (how bytecode stores them
  and which Python value they hold, see `tileiras.ir.attributes`), whether
  they are optional, their default and their version;
* `regions`, `traits`, the assembly `format` (MLIR declarative syntax, or
  None when the op has a hand-written printer/parser), and the opcode.

Declarations are written compactly with `define()`; see `cuda_tile.py`.
"""

from __future__ import annotations

from ..ir.core import use_op_table
from ..ir.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Optional

SINGLE, OPTIONAL, VARIADIC = "single", "optional", "variadic"


_VERSION_KEYS: dict[str, tuple[int, ...]] = {}


def version_key(v: str) -> tuple[int, ...]:
    key = _VERSION_KEYS.get(v)
    if key is None:
        key = _VERSION_KEYS[v] = tuple(int(p) for p in v.split("."))
    return key


@record
class OperandDef:
    name: str
    kind: str = SINGLE          # single | optional | variadic
    constraint: str = "any"     # verifier type constraint (see verifier.CONSTRAINTS)
    since: str = "13.1"

    @property
    def is_optional(self) -> bool:
        return self.kind == OPTIONAL

    @property
    def is_variadic(self) -> bool:
        return self.kind == VARIADIC


ResultDef = OperandDef


@record
class AttrDef:
    name: str
    kind: str                    # enum | unit | bool | int | str | symref | type | dense |
                                 # i32array | i64array | boolarray | hints | predicate | array | dictarray
    enum: Optional[str] = None   # enum name when kind == "enum"
    optional: bool = False
    default: Any = None
    since: str = "13.1"
    int_type: str = "i64"        # width of integer attributes (for the generic attr-dict form)

    @property
    def is_unit(self) -> bool:
        return self.kind == "unit"


@record
class OpDef:
    name: str                               # full name, "cuda_tile.addf"
    opcode: int
    since: str
    operands: tuple[OperandDef, ...] = ()
    results: tuple[ResultDef, ...] = ()
    attributes: tuple[AttrDef, ...] = ()
    regions: tuple[str, ...] = ()
    traits: frozenset[str] = frozenset()
    format: Optional[str] = None            # declarative assembly format; None = custom
    attr_sized_operands: bool = False       # AttrSizedOperandSegments

    @property
    def mnemonic(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def is_variadic(self) -> bool:
        """MLIR's Operator::isVariadic: some operand or result group is variadic."""
        return any(g.kind == VARIADIC for g in self.operands + self.results)

    @property
    def has_optional_operands(self) -> bool:
        return any(g.kind == OPTIONAL for g in self.operands)

    @property
    def needs_segment_sizes(self) -> bool:
        return any(g.kind != SINGLE for g in self.operands)

    def attr(self, name: str) -> Optional[AttrDef]:
        for a in self.attributes:
            if a.name == name:
                return a
        return None

    def has_trait(self, trait: str) -> bool:
        return trait in self.traits


_REGISTRY: dict[str, OpDef] = {}
_BY_OPCODE: dict[int, OpDef] = {}
# Declarations, built into OpDefs on first lookup: a disassembly touches a
# handful of the ~110 ops, and building all of them up front would be a
# tenth of its start-up.
_DECLARED: dict[str, tuple] = {}
_DECLARED_OPCODES: dict[int, str] = {}
_loaded = False


def register(op: OpDef) -> OpDef:
    _REGISTRY[op.name] = op
    _BY_OPCODE[op.opcode] = op
    return op


def _ensure_loaded() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import cuda_tile  # noqa: F401  (declares the ops)


def _build(name: str) -> Optional[OpDef]:
    args = _DECLARED.get(name)
    return None if args is None else register(_make(*args))


def lookup(name: str) -> OpDef:
    """The declaration of the op called `name` ("cuda_tile.addf"); KeyError if unknown."""
    op = find(name)
    if op is None:
        raise KeyError(name)
    return op


def find(name: str) -> Optional[OpDef]:
    op = _REGISTRY.get(name)
    if op is None:
        _ensure_loaded()
        op = _build(name)
    return op


def by_opcode(opcode: int) -> Optional[OpDef]:
    op = _BY_OPCODE.get(opcode)
    if op is None:
        _ensure_loaded()
        name = _DECLARED_OPCODES.get(opcode)
        op = None if name is None else _build(name)
    return op


def all_ops() -> list[OpDef]:
    """Every op, in declaration order."""
    _ensure_loaded()
    return [find(name) for name in _DECLARED] + [op for name, op in _REGISTRY.items() if name not in _DECLARED]


# -- the compact declaration syntax ------------------------------------------
def _parse_groups(spec: str) -> tuple[OperandDef, ...]:
    """`name[?|*]:constraint[@version]` separated by spaces."""
    groups = []
    for tok in spec.split():
        since = "13.1"
        if "@" in tok:
            tok, since = tok.split("@")
        name, _, constraint = tok.partition(":")
        kind = SINGLE
        if name.endswith("?"):
            kind, name = OPTIONAL, name[:-1]
        elif name.endswith("*"):
            kind, name = VARIADIC, name[:-1]
        groups.append(OperandDef(name, kind, constraint or "any", since))
    return tuple(groups)


def _parse_attrs(spec: str) -> tuple[AttrDef, ...]:
    """`name[?]:kind[=default][@version]`; kind `enum.Name`, `i32`/`i64`, ..."""
    attrs = []
    for tok in spec.split():
        since = "13.1"
        if "@" in tok:
            tok, since = tok.split("@")
        name, _, rest = tok.partition(":")
        optional = name.endswith("?")
        name = name.rstrip("?")
        kind, _, default_text = rest.partition("=")
        enum = None
        int_type = "i64"
        default: Any = None
        if kind.startswith("enum."):
            kind, enum = "enum", kind[5:]
            default = default_text or None
        elif kind in ("i32", "i64"):
            kind, int_type = "int", kind
            default = int(default_text) if default_text else None
        elif kind == "boolarray":
            default = () if default_text == "empty" else None
        attrs.append(AttrDef(name, kind, enum, optional, default, since, int_type))
    return tuple(attrs)


def define(mnemonic: str, opcode: int, since: str, *, ins: str = "", outs: str = "",
           attrs: str = "", regions: str = "", traits: str = "", fmt: Optional[str] = None) -> None:
    """Declare an op; its OpDef is built on first lookup."""
    name = f"cuda_tile.{mnemonic}"
    _DECLARED[name] = (name, opcode, since, ins, outs, attrs, regions, traits, fmt)
    _DECLARED_OPCODES[opcode] = name


def _make(name: str, opcode: int, since: str, ins: str, outs: str, attrs: str, regions: str, traits: str,
          fmt: Optional[str]) -> OpDef:
    traits_set = frozenset(traits.split())
    return OpDef(
        name=name,
        opcode=opcode,
        since=since,
        operands=_parse_groups(ins),
        results=_parse_groups(outs),
        attributes=_parse_attrs(attrs),
        regions=tuple(regions.split()),
        traits=traits_set,
        format=" ".join(fmt.split()) if fmt else None,
        attr_sized_operands="AttrSizedOperandSegments" in traits_set,
    )


use_op_table(lookup)
