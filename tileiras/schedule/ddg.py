"""The dependence graph of a tile loop's body, with each op's footprint from the resource model.

One node per op of the `for` body (its terminator aside; an op with regions,
a nested `if`/`for`/`reduce`, is one node costing what its ops cost in a row).
Edges carry (latency, distance): a data edge from an op to every user of its
results in the body, distance 0; a loop-carried edge from the op whose result
the `continue` yields as iter value j to every user of block argument j + 1,
distance 1; and, where the body writes memory, the ordering of its memory ops
(a write before later reads and writes, the next iteration's too).

The model's footprints are in cycles; a tile loop's are hundreds to thousands,
so the graph counts time in ticks of `tick` cycles, chosen so the busiest unit
fills about `ROWS` ticks an iteration: the modulo reservation table stays
small at about 3% resolution.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from ..ir.core import Operation, Value
from ..ir.record import record
from ..ir.types import PointerType, ScalarType, TileType, TokenType
from .resources import ALU, MMA_SYNC, Footprint, Machine, Reservation

ROWS = 32

_MMA = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")
_LOADS = ("cuda_tile.load_view_tko", "cuda_tile.load_ptr_tko")
_STORES = ("cuda_tile.store_view_tko", "cuda_tile.store_ptr_tko")
_ATOMICS = ("cuda_tile.atomic_rmw_tko", "cuda_tile.atomic_cas_tko", "cuda_tile.atomic_red_view_tko")
_SPECIAL = frozenset(f"cuda_tile.{n}" for n in (
    "exp", "exp2", "log", "log2", "sin", "cos", "tan", "sinh", "cosh", "tanh", "rsqrt", "sqrt", "pow",
    "fpowf", "fpowi", "divf", "atan2", "remf"))
_REDUCE = ("cuda_tile.reduce", "cuda_tile.scan")
# Register renames and views: no work proportional to the tile.
_FREE = frozenset(f"cuda_tile.{n}" for n in (
    "reshape", "broadcast", "permute", "bitcast", "assume", "constant", "extract", "make_token",
    "join_tokens", "make_partition_view", "make_tensor_view", "make_strided_view", "get_index_space_shape",
    "get_tensor_shape", "get_tile_block_id", "get_num_tile_blocks"))


@record
class Node:
    index: int
    name: str                                  # for dumps: the op's name without its dialect
    footprint: Footprint                       # in ticks
    op: Optional[Operation] = None
    group: str = ""                            # nodes of one group share a stage ("" : free to move)

    @property
    def latency(self) -> int:
        return self.footprint.latency


@record
class Edge:
    src: int
    dst: int
    latency: int
    distance: int = 0
    kind: str = "data"                         # data, carried, memory


@record(frozen=False)
class DependenceGraph:
    nodes: list
    edges: list
    tick: int = 1                              # cycles per time unit

    def add(self, name: str, footprint: Footprint, op: Optional[Operation] = None, group: str = "") -> int:
        self.nodes.append(Node(len(self.nodes), name, footprint, op, group))
        return len(self.nodes) - 1

    def connect(self, src: int, dst: int, distance: int = 0, kind: str = "data",
                latency: Optional[int] = None) -> None:
        lat = self.nodes[src].latency if latency is None else latency
        self.edges.append(Edge(src, dst, lat, distance, kind))


def operand_class(elem: object) -> str:
    """The tensor-core rate class of an mma's operand element type."""
    name = str(elem)
    if name in ("f16", "bf16"):
        return "f16"
    if name in ("f32", "tf32"):
        return "tf32"
    if name == "f64":
        return name
    if name.startswith("f8") or name.startswith("f4") or name.startswith("f6"):
        return "f8"
    return "i8"


def footprint_of(op: Operation, machine: Machine, copied: frozenset = frozenset(),
                 mma_units: Mapping[Operation, str] | None = None, tma: bool = False) -> Footprint:
    """The cycles op costs on `machine`; `copied`: loads made asynchronous copies (to shared memory);
    `mma_units`: the unit of each mma not on mma.sync (wgmma, tcgen05; ALU: the FMA path)."""
    mma_units = mma_units or {}
    name = op.name
    if op.regions and name not in _REDUCE:
        return _sequence([footprint_of(inner, machine, copied, mma_units, tma)
                          for region in op.regions for block in region.blocks for inner in block.operations])
    if name in _MMA:
        a, b = op.operands[0].type, op.operands[1].type
        acc = op.results[0].type
        k = a.shape[-1]
        fmas = _elements(acc) * k
        unit = mma_units.get(op, MMA_SYNC)
        if unit == ALU:     # the FMA path
            return machine.fma(fmas, _bytes(a) + _bytes(b), f64=str(a.element) == "f64")
        return machine.mma(unit, operand_class(a.element), fmas, _bytes(a) + _bytes(b))
    if name in _LOADS:
        nbytes = _bytes(op.results[0].type)
        return machine.copy_async(nbytes, tma) if op in copied else machine.load_global(nbytes)
    if name in _STORES or name in _ATOMICS:
        return machine.store_global(_bytes(op.operands[0].type))
    if name in _FREE or not any(_elements(r.type) > 1 for r in op.results):
        return machine.free()
    if name in _REDUCE:
        return machine.reduce(_elements(op.operands[0].type))
    return machine.elementwise(max(_elements(r.type) for r in op.results), special=name in _SPECIAL)


def _sequence(parts: list[Footprint]) -> Footprint:
    """Ops run one after another: latencies add, each unit is held for the sum of its holds."""
    held: dict[str, int] = {}
    for part in parts:
        for r in part.reservations:
            held[r.unit] = held.get(r.unit, 0) + r.length * r.count
    return Footprint("region", sum(p.latency for p in parts),
                     tuple(Reservation(unit, 0, length) for unit, length in held.items() if length))


def _elements(t: object) -> int:
    if not isinstance(t, TileType):
        return 1
    n = 1
    for d in t.shape:
        n *= d
    return n


def _bytes(t: object) -> int:
    if not isinstance(t, TileType):
        return 0
    elem = t.element
    width = 8 * 8 if isinstance(elem, PointerType) else (elem.bitwidth if isinstance(elem, ScalarType) else 32)
    return max(1, _elements(t) * width // 8)


def _writes(op: Operation) -> bool:
    return any(inner.name in _STORES or inner.name in _ATOMICS for inner in op.walk())


def _reads(op: Operation) -> bool:
    return any(inner.name in _LOADS for inner in op.walk())


def build_loop_ddg(loop: Operation, machine: Machine, copied: Iterable[Operation] = (),
                   mma_units: Mapping[Operation, str] | None = None, tma: bool = False,
                   prefetch_only: bool = False, issued_with: Iterable[Operation] = ()) -> DependenceGraph:
    """The dependence graph of `loop`'s body on `machine`, in ticks (see the module's docstring).
    `prefetch_only`: the lowering can only move the copies to earlier iterations, so the copies
    (and `issued_with`, the scalar ops computing their indices, which it computes again with them)
    form one stage group ("copies") and every other op another ("compute")."""
    body = loop.regions[0].block
    ops = [op for op in body.operations if op.name != "cuda_tile.continue"]
    copied_set = frozenset(copied)
    with_copies = copied_set | frozenset(issued_with)
    cycles = [footprint_of(op, machine, copied_set, mma_units, tma) for op in ops]
    tick = _tick(cycles)
    g = DependenceGraph([], [], tick)
    index: dict[Operation, int] = {}
    for op, fp in zip(ops, cycles):
        group = ("copies" if op in with_copies else "compute") if prefetch_only else ""
        index[op] = g.add(op.name.split(".", 1)[-1], _in_ticks(fp, tick), op, group)
    defined = {res: index[op] for op in ops for res in op.results}
    for op in ops:
        for value in _used(op):
            if value in defined and defined[value] != index[op]:
                g.connect(defined[value], index[op], latency=_latency(g, defined[value], op, value))
    term = body.operations[-1] if body.operations and body.operations[-1].name == "cuda_tile.continue" else None
    if term is not None:
        for j, value in enumerate(term.operands):
            if value not in defined or j + 1 >= len(body.arguments):
                continue
            for op in ops:
                if body.arguments[j + 1] in _used(op):
                    g.connect(defined[value], index[op], distance=1, kind="carried",
                              latency=_latency(g, defined[value], op, body.arguments[j + 1]))
    _memory_edges(g, ops, index)
    return g


def _latency(g: DependenceGraph, src: int, user: Operation, value: Value) -> int:
    """An mma accumulating into another's result streams behind it on the tensor unit: it waits for
    the unit (its hold), not for the result's drain; every other use waits the full latency."""
    producer = g.nodes[src]
    if user.name in _MMA and producer.op is not None and producer.op.name in _MMA and \
            len(user.operands) > 2 and user.operands[2] is value:
        return max((r.length for r in producer.footprint.reservations if r.offset == 0), default=0)
    return producer.latency


def _memory_edges(g: DependenceGraph, ops: list[Operation], index: dict[Operation, int]) -> None:
    """A write orders every other memory op after it (this iteration's later ones and the next
    iteration's earlier ones); reads between themselves are free to move. Two token-ordered memory ops
    (neither with regions) are ordered by their tokens alone, which the data and carried edges follow
    already: Tile IR orders weak memory ops only through tokens (a softmax storing each row it loads
    may load the next rows ahead)."""
    memory = [op for op in ops if _writes(op) or _reads(op)]
    for i, w in enumerate(memory):
        if not _writes(w):
            continue
        for j, other in enumerate(memory):
            if other is w or _token_ordered(w) and _token_ordered(other):
                continue
            if j > i:
                g.connect(index[w], index[other], kind="memory")
                g.connect(index[other], index[w], distance=1, kind="memory")
            else:
                g.connect(index[other], index[w], kind="memory")
                g.connect(index[w], index[other], distance=1, kind="memory")


def _token_ordered(op: Operation) -> bool:
    """A weak memory op without regions that takes a token: what it is ordered after is what its token
    says (acquire and release orderings order other memory ops too)."""
    return not op.regions and str(op.attributes.get("memory_ordering_semantics", "weak")) == "weak" \
        and any(isinstance(v.type, TokenType) for v in op.operands)


def _used(op: Operation) -> set[Value]:
    """Every value op reads, its regions' ops included."""
    return {v for inner in op.walk() for v in inner.operands}


def _tick(footprints: list[Footprint]) -> int:
    """Cycles per tick: the busiest unit's total hold spread over about ROWS ticks."""
    busy: dict[str, int] = {}
    for fp in footprints:
        for r in fp.reservations:
            busy[r.unit] = busy.get(r.unit, 0) + r.length * r.count
    return max(1, -(-max(busy.values(), default=0) // ROWS))


def _in_ticks(fp: Footprint, tick: int) -> Footprint:
    """Latencies round up (a consumer never starts early); holds round to the nearest tick, so the
    many short holds of small ops do not each take a whole tick of a unit."""
    rounded = (Reservation(r.unit, (2 * r.offset + tick) // (2 * tick), (2 * r.length + tick) // (2 * tick), r.count)
               for r in fp.reservations)
    return Footprint(fp.op_class, -(-fp.latency // tick), tuple(r for r in rounded if r.length > 0))
