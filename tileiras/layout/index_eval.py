"""Runs the integer instructions a layout's index math emits (index_math.py), in Python, for one thread.

The layouts of tileiras/layout/encodings.py compute a thread's elements by emitting LLVM
instructions through `pre(rhs_text, hint) -> name`. `Evaluator.pre` is such a callback: it
evaluates each instruction at once (the thread id is known) and names the result, so
`element(layout, ev.pre, "%tid", n, slot)` (index_math.py) yields names whose values `ev.value`
reads back. Anything outside the small i32/i1 integer subset raises, so new instructions cannot
pass unnoticed. The middle level evaluates a warp's elements with it to count bank conflicts before
it picks a scratch layout (tileas/scratch_swizzle.py); tests/test_layout_atoms.py checks the layouts.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from .index_math import element

_I32 = (1 << 32) - 1

_BINARY: dict[str, Callable[[int, int], int]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "udiv": lambda a, b: a // b,
    "urem": lambda a, b: a % b,
    "shl": lambda a, b: a << b,
    "lshr": lambda a, b: a >> b,
    "and": lambda a, b: a & b,
    "or": lambda a, b: a | b,
    "xor": lambda a, b: a ^ b,
}

_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
    "ult": lambda a, b: a < b,
    "ule": lambda a, b: a <= b,
    "ugt": lambda a, b: a > b,
    "uge": lambda a, b: a >= b,
}

_MASK = {"i32": _I32, "i1": 1}


class Evaluator:
    """`tid` may be a numpy array of thread ids: every value is then an array (a warp at once);
    divisors stay literals."""

    def __init__(self, tid: Any, tid_name: str = "%tid") -> None:
        self.values: dict[str, int] = {tid_name: tid}
        self.count = 0

    def value(self, operand: str) -> int:
        """An operand: a name defined earlier or an integer literal."""
        if operand in self.values:
            return self.values[operand]
        if operand.startswith("%"):
            raise KeyError(f"undefined value {operand}")
        return int(operand)

    def pre(self, rhs: str, hint: str) -> str:
        compare, op, ty, a, b = _parse(rhs)
        if compare:
            result = _COMPARE[op](self.value(a), self.value(b)) * 1   # i1 as 0 / 1
        else:
            x, y = self.value(a), self.value(b)
            if op in ("udiv", "urem") and y == 0:
                raise ZeroDivisionError(rhs)
            result = _BINARY[op](x, y) & _MASK[ty]
        self.count += 1
        name = f"%{hint}.{self.count}"
        self.values[name] = result
        return name


class Program:
    """The instructions `emit(pre)` makes (the subset `Evaluator` runs), parsed once into one Python
    function: calling it on a value of `name` computes what `Evaluator` would, instruction by
    instruction, and returns the values of the names `emit` returned (None stays None). For the same
    arithmetic on many values (a warp's lanes, a scratch's elements) without parsing it per value."""

    def __init__(self, emit: Callable[[Callable[[str, str], str]], Any], name: str = "%tid") -> None:
        self.names: dict[str, str] = {name: "x"}     # IR name -> Python local
        self.lines: list[str] = []
        out = emit(self._pre)
        outputs = tuple(out) if isinstance(out, tuple) else (out,)
        body = "".join(f"    {line}\n" for line in self.lines)
        result = ", ".join("None" if o is None else self._operand(o) for o in outputs)
        scope: dict[str, Any] = {}
        exec(f"def run(x):\n{body}    return ({result},)\n", scope)   # noqa: S102 (our own instructions)
        self.run: Callable[[int], tuple[Optional[int], ...]] = scope["run"]

    def _operand(self, operand: str) -> str:
        if operand in self.names:
            return self.names[operand]
        if operand.startswith("%"):
            raise KeyError(f"undefined value {operand}")
        return str(int(operand))

    def _pre(self, rhs: str, hint: str) -> str:
        compare, op, ty, a, b = _parse(rhs)
        if compare:
            expr, mask = f"int({self._operand(a)} {_PY_COMPARE[op]} {self._operand(b)})", 1
        else:
            expr, mask = f"({self._operand(a)} {_PY_BINARY[op]} {self._operand(b)})", _MASK[ty]
        name, local = f"%{hint}.{len(self.lines) + 1}", f"v{len(self.lines) + 1}"
        self.lines.append(f"{local} = {expr} & {mask}")   # // and % by zero raise, as in Evaluator
        self.names[name] = local
        return name

    def __call__(self, x: int) -> tuple[Optional[int], ...]:
        return self.run(x)


def _parse(rhs: str) -> tuple[bool, str, str, str, str]:
    """(a comparison, its predicate or the binary op, the type, the two operands) of an instruction of
    the subset both evaluators run; ValueError for any other."""
    words = rhs.replace(",", " ").split()
    if words[0] == "icmp":
        pred, ty, a, b = words[1:]
        if ty != "i32" or pred not in _COMPARE:
            raise ValueError(f"unsupported instruction: {rhs}")
        return True, pred, ty, a, b
    op, ty, a, b = words
    if op not in _BINARY or ty not in _MASK:
        raise ValueError(f"unsupported instruction: {rhs}")
    return False, op, ty, a, b


# the Python operators of _BINARY and _COMPARE, for Program
_PY_BINARY = {"add": "+", "sub": "-", "mul": "*", "udiv": "//", "urem": "%", "shl": "<<", "lshr": ">>",
              "and": "&", "or": "|", "xor": "^"}
_PY_COMPARE = {"eq": "==", "ne": "!=", "ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}


def placements(layout: object, threads: int, num_elements: int) -> dict[tuple[int, int], tuple[int, bool]]:
    """(tid, slot) -> (element index, first copy) for every thread and slot of a lowering layout."""
    out = {}
    for tid in range(threads):
        for slot in range(layout.slots(num_elements)):  # type: ignore[attr-defined]
            ev = Evaluator(tid)
            e, valid = element(layout, ev.pre, "%tid", num_elements, slot)
            first: Optional[int] = None if valid is None else ev.value(valid)
            out[(tid, slot)] = (ev.value(e), True if first is None else bool(first))
    return out
