"""SSA value names, as MLIR's printer assigns them.

Each region is numbered from the counters its parent region ended with;
names come from the ops' own naming rules (`RESULT_NAMERS`), block
arguments of entry blocks are `argN`, everything else is numbered. A
name already used in an enclosing scope gets a `_N` suffix drawn from a
shared conflict counter.
"""

from __future__ import annotations


from ..ir.core import Operation, OpResult, Region, Value
from ..ir import attributes as A

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Callable, Optional

_ALLOWED_PUNCT = "$._-"


def sanitize(name: str) -> str:
    if name and all(c.isalnum() or c in _ALLOWED_PUNCT for c in name) and not name[0].isdigit():
        return name
    out = "_" if name and name[0].isdigit() else ""
    for ch in name:
        if ch.isalnum() or ch in _ALLOWED_PUNCT:
            out += ch
        elif ch == " ":
            out += "_"
        else:
            out += format(ord(ch), "X")
    return out


# -- per-op result naming (MLIR getAsmResultNames) --------------------------------
def _constant_name(op: Operation) -> Optional[str]:
    from ..ir.floats import decode_parts, integer_value
    from ..ir.dense import element_bits, first_bits, is_splat, num_elements

    dense = op.attributes.get("value")
    if not isinstance(dense, A.DenseElements):
        return None
    t = dense.type
    elem = t.element.name  # type: ignore[attr-defined]
    if elem == "i1":
        bits = [first_bits(t, dense.raw)] if is_splat(t, dense.raw) else element_bits(t, dense.raw)
        if all(bits):
            return "true"
        if not any(bits):
            return "false"
        return "cst_i1"
    name = "cst"
    if is_splat(t, dense.raw) or num_elements(t) == 1:
        first = first_bits(t, dense.raw) if num_elements(t) else None
        if first is not None:
            if elem.startswith("i"):
                width = int(elem[1:])
                v = first - (1 << width) if first >> (width - 1) else first
                name += f"_{v}"
            else:
                special = decode_parts(first, elem)[0]
                if special == "nan":
                    name += "_NaN"
                else:
                    iv = integer_value(first, elem)
                    if iv is not None:
                        name += f"_{iv}"
    return f"{name}_{elem}"


def _assume_name(op: Operation, namer: "Namer") -> list[tuple[int, str]]:
    src = op.operands[0] if op.operands else None
    if isinstance(src, OpResult) and src.owner.name in HAS_ASM_INTERFACE:
        prod = src.owner
        name = "assume_"
        for idx, n in namer.result_names(prod):
            if idx == src.index:
                name += n
        return [(0, name)]
    return [(0, "assume")]


def _first(name: str) -> Callable[[Operation, "Namer"], list[tuple[int, str]]]:
    return lambda op, namer: [(0, name)] if op.results else []


# Ops implementing OpAsmOpInterface (relevant to how `assume` names its result).
HAS_ASM_INTERFACE = frozenset({
    "cuda_tile.assume", "cuda_tile.broadcast", "cuda_tile.constant", "cuda_tile.for",
    "cuda_tile.make_tensor_view", "cuda_tile.make_partition_view", "cuda_tile.make_strided_view",
    "cuda_tile.make_gather_scatter_view", "cuda_tile.reduce", "cuda_tile.reshape", "cuda_tile.entry",
    "cuda_tile.if", "cuda_tile.loop", "cuda_tile.scan", "cuda_tile.module",
})

RESULT_NAMERS: dict[str, Callable[[Operation, "Namer"], list[tuple[int, str]]]] = {
    "cuda_tile.assume": _assume_name,
    "cuda_tile.broadcast": _first("bcast"),
    "cuda_tile.reshape": _first("reshape"),
    "cuda_tile.make_tensor_view": _first("tview"),
    "cuda_tile.make_partition_view": _first("pview"),
    "cuda_tile.make_strided_view": _first("sview"),
    "cuda_tile.make_gather_scatter_view": _first("gsview"),
    "cuda_tile.for": _first("for"),
    "cuda_tile.reduce": _first("reduce"),
    "cuda_tile.constant": lambda op, namer: [(0, n)] if (n := _constant_name(op)) else [],
}


def _reduce_args(region: Region) -> list[str]:
    args = region.blocks[0].arguments if region.blocks else []
    names = []
    for i in range(len(args)):
        name = "reduce_lhs" if i % 2 == 0 else "reduce_rhs"
        if len(args) > 2:
            name += str(i // 2)
        names.append(name)
    return names


def _for_args(region: Region) -> list[str]:
    args = region.blocks[0].arguments if region.blocks else []
    return ["loopIdx"] + [f"iterArg{i}" for i in range(len(args) - 1)] if args else []


BLOCK_ARG_NAMERS: dict[str, Callable[[Region], list[str]]] = {
    "cuda_tile.reduce": _reduce_args,
    "cuda_tile.for": _for_args,
}


class Namer:
    """Assigns every value its printed name; `ref(v)` is how an operand prints."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}           # id(value) -> name without '%'
        self.groups: dict[int, list[int]] = {}    # id(op) -> result group starts
        self._scopes: list[set[str]] = []
        self.next_value = 0
        self.next_arg = 0
        self.next_conflict = 0

    # -- public ---------------------------------------------------------------
    def number_top(self, ops: list[Operation]) -> None:
        """Number a module body: each top-level op's regions start fresh."""
        self._scopes = [set()]
        counters = (self.next_value, self.next_arg, self.next_conflict)
        for op in ops:
            self._number_op_results(op)
        counters = (self.next_value, self.next_arg, self.next_conflict)
        for op in ops:
            for region in op.regions:
                self._number_region_tree(region, counters)

    def ref(self, v: Value) -> str:
        if isinstance(v, OpResult):
            owner = v.owner
            if len(owner.results) > 1:
                starts = self.groups.get(id(owner), [0])
                head = 0
                nxt = len(owner.results)
                for s in starts:
                    if s <= v.index:
                        head = s
                    else:
                        nxt = s
                        break
                name = self.names.get(id(owner.results[head]), "<<UNKNOWN SSA VALUE>>")
                if nxt - head != 1:
                    return f"%{name}#{v.index - head}"
                return f"%{name}"
        return "%" + self.names.get(id(v), "<<UNKNOWN SSA VALUE>>")

    def result_defs(self, op: Operation) -> str:
        """The `%a, %b:2` list before ` = `."""
        starts = self.groups.get(id(op), [0])
        n = len(op.results)
        parts = []
        for i, s in enumerate(starts):
            end = starts[i + 1] if i + 1 < len(starts) else n
            name = "%" + self.names.get(id(op.results[s]), "<<UNKNOWN SSA VALUE>>")
            if end - s > 1:
                name += f":{end - s}"
            parts.append(name)
        return ", ".join(parts)

    def result_names(self, op: Operation) -> list[tuple[int, str]]:
        namer = RESULT_NAMERS.get(op.name)
        if namer is not None:
            return namer(op, self)
        if len(op.results) > 1:
            defn = op.definition
            if all(r.kind == "single" for r in defn.results):
                return [(i, r.name) for i, r in enumerate(defn.results)][:len(op.results)]
        return []

    # -- MLIR's algorithm ---------------------------------------------------------
    def _used(self, name: str) -> bool:
        for s in self._scopes:
            if name in s:
                return True
        return False

    def _unique(self, name: str) -> str:
        name = sanitize(name)
        if self._used(name):
            while True:
                probe = f"{name}_{self.next_conflict}"
                self.next_conflict += 1
                if not self._used(probe):
                    name = probe
                    break
        self._scopes[-1].add(name)
        return name

    def _set_name(self, v: Value, name: str) -> None:
        if not name:
            self.names[id(v)] = str(self.next_value)
            self.next_value += 1
        else:
            self.names[id(v)] = self._unique(name)

    def _number_op_results(self, op: Operation) -> None:
        if not op.results:
            return
        starts = [0]
        for idx, name in self.result_names(op):
            if idx >= len(op.results) or id(op.results[idx]) in self.names:
                continue
            self._set_name(op.results[idx], name)
            if idx:
                starts.append(idx)
        first = op.results[0]
        if id(first) not in self.names:
            self.names[id(first)] = str(self.next_value)
            self.next_value += 1
        if len(starts) > 1:
            self.groups[id(op)] = sorted(starts)

    def _number_region_tree(self, region: Region, counters: tuple[int, int, int]) -> None:
        self.next_value, self.next_arg, self.next_conflict = counters
        self._scopes.append(set())
        parent = region.parent
        namer = BLOCK_ARG_NAMERS.get(parent.name) if parent is not None else None
        if namer is not None and region.blocks:
            for arg, name in zip(region.blocks[0].arguments, namer(region)):
                self._set_name(arg, name)
        for bi, block in enumerate(region.blocks):
            for arg in block.arguments:
                if id(arg) in self.names:
                    continue
                if bi == 0:
                    self._set_name(arg, f"arg{self.next_arg}")
                    self.next_arg += 1
                else:
                    self._set_name(arg, "")
            for op in block.operations:
                self._number_op_results(op)
        inner = (self.next_value, self.next_arg, self.next_conflict)
        for block in region.blocks:
            for op in block.operations:
                for sub in op.regions:
                    self._number_region_tree(sub, inner)
        self._scopes.pop()
