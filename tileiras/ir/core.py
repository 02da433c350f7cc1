"""The IR core: values, operations, blocks and regions.

Operations are generic (MLIR style): a name, operands, results, attributes
and regions. What an op *means* -- its operand groups, attributes, format
and verifier -- lives in one declaration per op in `tileiras.dialects`;
`Operation.operand_group()` uses that declaration to split the flat operand
list into the named groups of the op (single, optional or variadic).
"""

from __future__ import annotations

from .record import record

from .types import TileType, Type

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Any, Callable, Iterator, Optional


@record
class Location:
    """A source location: file, line and column (MLIR FileLineColLoc).

    Fused and named locations are represented by their primary file location;
    `scope` keeps the debug-info scope (a DI attribute) when the module has one.
    """

    file: str
    line: int
    column: int
    scope: Any = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class Value:
    """An SSA value: the result of an operation or the argument of a block."""

    __slots__ = ("type", "name_hint", "uses", "facts")

    def __init__(self, type: Type, name_hint: Optional[str] = None) -> None:
        self.type = type
        self.name_hint = name_hint
        self.uses: list[Operation] = []
        # What the nv_tileaa level proved of an integer, pointer or view (tileiras.tileaa.facts); None above it.
        self.facts: Any = None

    @property
    def layout(self) -> Any:
        """The distributed layout of a tile value at the nv_tileas level: its type's encoding
        (`TileType.encoding`); None above it and for values that are not tiles."""
        return getattr(self.type, "encoding", None)

    @layout.setter
    def layout(self, layout: Any) -> None:
        """The value's type becomes its tile type in `layout`."""
        t = self.type
        if not isinstance(t, TileType):
            if layout is not None:
                raise TypeError(f"a layout for a value of type {t}, not a tile")
            return
        self.type = t.with_encoding(layout)

    def replace_all_uses_with(self, other: "Value") -> None:
        for user in list(self.uses):
            user.operands = [other if v is self else v for v in user.operands]
            other.uses.append(user)
        self.uses.clear()


class OpResult(Value):
    __slots__ = ("owner", "index")

    def __init__(self, type: Type, owner: "Operation", index: int, name_hint: Optional[str] = None) -> None:
        super().__init__(type, name_hint)
        self.owner = owner
        self.index = index


class BlockArgument(Value):
    __slots__ = ("owner", "index")

    def __init__(self, type: Type, owner: "Block", index: int, name_hint: Optional[str] = None) -> None:
        super().__init__(type, name_hint)
        self.owner = owner
        self.index = index


class Operation:
    __slots__ = ("name", "operands", "results", "attributes", "regions", "location",
                 "parent", "segment_sizes")

    def __init__(
        self,
        name: str,
        operands: list[Value] | None = None,
        result_types: list[Type] | None = None,
        attributes: dict[str, Any] | None = None,
        regions: list["Region"] | None = None,
        location: Optional[Location] = None,
        segment_sizes: tuple[int, ...] | None = None,
    ) -> None:
        self.name = name                      # full name, e.g. "cuda_tile.addf"
        self.operands: list[Value] = list(operands or [])
        for v in self.operands:
            v.uses.append(self)
        self.results: list[OpResult] = [OpResult(t, self, i) for i, t in enumerate(result_types or [])]
        self.attributes: dict[str, Any] = dict(attributes or {})
        self.regions: list[Region] = []
        for r in regions or []:
            self.add_region(r)
        self.location = location
        self.parent: Optional[Block] = None
        # Number of operands in each operand group of the op's declaration,
        # in declaration order; None when every group is a single operand.
        self.segment_sizes = segment_sizes

    # -- structure -----------------------------------------------------------
    def add_region(self, region: "Region") -> "Region":
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def short_name(self) -> str:
        """The name without the dialect prefix ("addf")."""
        return self.name.split(".", 1)[1] if "." in self.name else self.name

    @property
    def result(self) -> OpResult:
        assert len(self.results) == 1, f"{self.name} has {len(self.results)} results"
        return self.results[0]

    def walk(self) -> Iterator["Operation"]:
        """Pre-order walk over this op and every op nested in its regions."""
        yield self
        for region in self.regions:
            for block in region.blocks:
                for op in list(block.operations):
                    yield from op.walk()

    @property
    def definition(self) -> Any:
        defn = _DEFS.get(self.name)
        if defn is None:
            if _LOOKUP is None:
                raise LookupError(f"no op table to declare {self.name}: import tileiras.dialects.registry")
            defn = _DEFS[self.name] = _LOOKUP(self.name)
        return defn

    def operand_group(self, name: str) -> list[Value]:
        """The operands of the named group of this op's declaration."""
        defn = self.definition
        sizes = self.segment_sizes or _default_segments(defn.operands, len(self.operands))
        start = 0
        for group, size in zip(defn.operands, sizes):
            if group.name == name:
                return self.operands[start:start + size]
            start += size
        raise KeyError(f"{self.name} has no operand group '{name}'")

    def operand(self, name: str) -> Optional[Value]:
        """The single operand of a group, or None for an absent optional one."""
        group = self.operand_group(name)
        return group[0] if group else None

    def __repr__(self) -> str:
        return f"<Operation {self.name} ({len(self.operands)} operands, {len(self.results)} results)>"

    def clone(self, mapping: Optional[dict[Value, Value]] = None) -> "Operation":
        """A deep copy of this op and its regions; `mapping` maps outside values to their
        replacements and collects the copy's values (old -> new)."""
        mapping = {} if mapping is None else mapping
        copy = Operation(self.name, [mapping.get(v, v) for v in self.operands], [r.type for r in self.results],
                         self.attributes, location=self.location, segment_sizes=self.segment_sizes)
        for old, new in zip(self.results, copy.results):
            new.name_hint, new.facts = old.name_hint, old.facts
            mapping[old] = new
        for region in self.regions:
            twin = copy.add_region(Region())
            for block in region.blocks:
                dup = twin.add_block(Block())
                for arg in block.arguments:
                    mapping[arg] = twin_arg = dup.add_argument(arg.type, arg.name_hint)
                    twin_arg.facts = arg.facts
                for op in block.operations:
                    dup.append(op.clone(mapping))
        return copy

    def insert_before(self, op: "Operation") -> "Operation":
        """Put `op` into this op's block just before it."""
        block = self.parent
        assert block is not None, "insert_before needs an op inside a block"
        op.parent = block
        block.operations.insert(block.operations.index(self), op)
        return op

    def set_operand(self, index: int, value: Value) -> None:
        old = self.operands[index]
        self.operands[index] = value
        value.uses.append(self)
        old.uses.remove(self)   # `uses` holds the op once per operand it is


_DEFS: dict[str, Any] = {}  # op name -> declaration, filled on first use
# op name -> declaration: the op table installs it when imported (dialects/registry.py), as a
# context loads its dialects in MLIR; the IR does not know which dialects exist
_LOOKUP: "Optional[Callable[[str], Any]]" = None


def enclosing(op: Operation, names: tuple[str, ...]) -> Optional[Operation]:
    """The nearest op named one of `names` whose regions hold `op`, if any."""
    block = op.parent
    while block is not None and block.parent is not None:
        owner = block.parent.parent
        if owner is None:
            return None
        if owner.name in names:
            return owner
        block = owner.parent
    return None


def use_op_table(lookup: "Callable[[str], Any]") -> None:
    global _LOOKUP
    _LOOKUP = lookup


def _default_segments(groups, n: int) -> tuple[int, ...]:
    """Group sizes when an op was built without `segment_sizes`: every group has
    one operand, except a single optional/variadic group that takes the rest."""
    var = [i for i, g in enumerate(groups) if getattr(g, "kind", "single") != "single"]
    if len(var) == 1:
        rest = n - (len(groups) - 1)
        return tuple(max(rest, 0) if i == var[0] else 1 for i in range(len(groups)))
    return tuple(1 for _ in groups)


class Block:
    __slots__ = ("arguments", "operations", "parent")

    def __init__(self, arg_types: list[Type] | None = None) -> None:
        self.arguments: list[BlockArgument] = [BlockArgument(t, self, i) for i, t in enumerate(arg_types or [])]
        self.operations: list[Operation] = []
        self.parent: Optional[Region] = None

    def add_argument(self, type: Type, name_hint: Optional[str] = None) -> BlockArgument:
        arg = BlockArgument(type, self, len(self.arguments), name_hint)
        self.arguments.append(arg)
        return arg

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.operations.append(op)
        return op

    @property
    def terminator(self) -> Optional[Operation]:
        return self.operations[-1] if self.operations else None


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks: list[Block] | None = None) -> None:
        self.blocks: list[Block] = []
        self.parent: Optional[Operation] = None
        for b in blocks or []:
            self.add_block(b)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The single block of a single-block region."""
        return self.blocks[0]
