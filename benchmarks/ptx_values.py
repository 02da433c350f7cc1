"""Values of a PTX function's integer registers, for the mutation catalogue's equivalences (mutations.py).

Our compiler's PTX computes an mbarrier's address and the phase parity a wait asks for with a few integer
instructions from constants, the shared buffer's address and loop counters whose bounds are constants (LLVM's
`mov I, 0` ... `add I, I, 1; setp.ne I, 4`). Evaluating those per value of the counters tells which mbarrier
each instruction uses and which parity it waits for in each iteration, and which branches an iteration takes.
Addresses are offsets from the function's shared buffer (every symbol counts as 0: the kernels hold one).
A register defined twice by the same instruction on the same operands has the value both compute. Block ids
have no value, but spans (`bounds`): a comparison true (or false) for every block id decides its branch.
Anything else (a register defined twice otherwise, another special register, an unknown instruction) has no
value (None), and the checks that ask fail closed.
"""

from __future__ import annotations

import itertools
import re
from typing import Iterator, Optional

Env = dict[str, int]

_DEF = re.compile(r"^(?P<op>[a-z][\w.:]*)\s+(?P<dst>%\w+)\s*,\s*(?P<rest>.*)$")
_WIDTH = re.compile(r"\.[bsu](16|32|64)\b")
_REG = re.compile(r"%\w+")
_MAX_ENVS = 256         # loop-counter combinations evaluated at most
# the greatest value of each block id (CUDA's grid limits: 2^31 - 1 blocks along x, 65535 along y and z)
_BLOCK_IDS = {"%ctaid.x": 2**31 - 1, "%ctaid.y": 65535, "%ctaid.z": 65535}


def statements(code: str) -> list[str]:
    """The statements of one line's code (inline-asm braces and `.reg` declarations dropped)."""
    parts = [p.strip().strip("{}").strip() for p in code.split(";")]
    return [p for p in parts if p and not p.startswith(".reg")]


class Values:
    """The registers of one function body (`codes[start:end]`, mutations._codes' lines)."""

    def __init__(self, codes: list[str], start: int, end: int) -> None:
        self.codes, self.start, self.end = codes, start, end
        self.defs: dict[str, list[tuple[int, str, list[str]]]] = {}
        self.predicated: set[tuple[int, str]] = set()   # (index, register) of the definitions under a predicate
        for i in range(start, end):
            for part in statements(codes[i]):
                m = _DEF.match(re.sub(r"^@!?%?\w+\s+", "", part))
                if m:
                    args = [a.strip() for a in m.group("rest").split(",")]
                    self.defs.setdefault(m.group("dst"), []).append((i, m.group("op"), args))
                    if part.startswith("@"):
                        self.predicated.add((i, m.group("dst")))
        self.counters = self._counters()
        self.residues = self._residues()

    def _counters(self) -> dict[str, tuple[range, int]]:
        """Loop counters: (the values each iteration sees, the index of the increment) of every register set by a
        `mov` of a constant and `add I, I, 1` only, the add followed by a comparison with a constant bound."""
        out = {}
        for reg, defs in self.defs.items():
            if len(defs) != 2:
                continue
            (_, op0, a0), (i1, op1, a1) = sorted(defs)
            if not (op0.startswith("mov.") and int_literal(a0[0]) is not None and op1.startswith("add.")
                    and a1[0] == reg and int_literal(a1[1]) == 1):
                continue
            for part in (p for j in range(i1, min(i1 + 3, self.end)) for p in statements(self.codes[j])):
                m = re.match(r"setp\.(eq|ne|lt)\.[bsu]32\s+%\w+\s*,\s*" + re.escape(reg) + r"\s*,\s*(-?\w+)$", part)
                bound = int_literal(m.group(2)) if m else None
                if bound is not None and bound > int_literal(a0[0]):     # type: ignore[operator]
                    out[reg] = (range(int_literal(a0[0]), bound), i1)     # type: ignore[arg-type]
                    break
        return out

    def _residues(self) -> dict[str, int]:
        """Registers that hold x mod d for an unsigned 32-bit x however it is computed (a loop-carried stage index):
        `and.b32 r, x, d - 1` for d a power of two, or `r = x - ((x * M) >> (32 + s)) * d` as LLVM divides by a
        constant (mul.hi.u32 h, x, M; shr.u32 q, h, s; mul.lo q * d; sub x - that), with a magic M for which the
        quotient is exact for every u32 x (M = ceil(2^(32+s) / d) and M d - 2^(32+s) <= 2^s, Granlund and
        Montgomery): r takes the values 0 .. d - 1."""
        def one(reg: str, op: str) -> Optional[list[str]]:
            defs = self.defs.get(reg, [])
            return defs[0][2] if len(defs) == 1 and defs[0][1].startswith(op) else None

        out = {}
        for reg in self.defs:
            mask = one(reg, "and.b32")      # x & (2^k - 1): x mod 2^k
            low = int_literal(mask[1]) if mask and not mask[0].startswith("%p") else None
            if low is not None and low > 0 and low & (low + 1) == 0 and low < 256:
                out[reg] = low + 1
                continue
            sub = one(reg, "sub.s32") or one(reg, "sub.u32")
            prod = one(sub[1], "mul.lo.") if sub else None
            if not sub or not prod:
                continue
            d = int_literal(prod[1])
            shifted = one(prod[0], "shr.u32")
            high = one(shifted[0], "mul.hi.u32") if shifted else None
            if d is None or d < 2 or not high or high[0] != sub[0] or int_literal(shifted[1]) is None:
                continue
            magic, shift = int_literal(high[1]), int_literal(shifted[1])
            if magic is None:
                continue
            magic &= (1 << 32) - 1          # (written as a negative 32-bit immediate)
            total = 32 + shift      # type: ignore[operator]
            if magic == -(-(1 << total) // d) and magic * d - (1 << total) <= 1 << shift:   # type: ignore[operator]
                out[reg] = d
        return out

    def definition(self, reg: str) -> Optional[tuple[int, str, list[str]]]:
        """The one definition of `reg`, or the first of several that are the same instruction on the same
        operands, none of them `reg` itself (LLVM recomputes a thread-index expression on two paths: each
        computes the same value, whichever reached); None where it has none or different ones."""
        defs = self.defs.get(reg, [])
        if len(defs) == 1:
            return defs[0]
        if defs and all((op, args) == (defs[0][1], defs[0][2]) for _, op, args in defs) and \
                not any(reg in _REG.findall(a) for a in defs[0][2]):
            return defs[0]
        return None

    def counters_of(self, regs: list[str], residues: bool = False) -> Optional[list[str]]:
        """The loop counters the values of `regs` depend on (None: one of them is defined twice otherwise);
        `residues`: registers holding x mod d count as such counters too (_residues)."""
        found: list[str] = []
        todo, seen = list(regs), set()
        while todo:
            reg = todo.pop()
            if reg in seen:
                continue
            seen.add(reg)
            if reg in self.counters or residues and reg in self.residues:
                found.append(reg)
                continue
            defs = self.defs.get(reg, [])
            if len(defs) > 1 and self.definition(reg) is None:
                return None
            for _, _, args in defs[:1]:
                todo.extend(r for a in args for r in _REG.findall(a))
        return sorted(found)

    def envs(self, regs: list[str], residues: bool = False) -> Optional[list[Env]]:
        """Every combination of the values of the loop counters `regs` depend on (None: too many, or a register
        defined twice; `residues`: and of the registers holding x mod d, 0 .. d - 1)."""
        names = self.counters_of(regs, residues)
        if names is None:
            return None
        ranges = [self.counters[n][0] if n in self.counters else range(self.residues[n]) for n in names]
        total = 1
        for r in ranges:
            total *= len(r)
        if total > _MAX_ENVS:
            return None
        return [dict(zip(names, combo)) for combo in itertools.product(*ranges)]

    def value(self, operand: str, env: Env) -> Optional[int]:
        """The value of an operand (a register, an immediate or a symbol) given the loop counters' `env`."""
        operand = operand.strip().strip("[]").strip()
        if (n := int_literal(operand)) is not None:
            return n
        if not operand.startswith("%"):
            return 0 if re.fullmatch(r"[A-Za-z_$][\w$]*", operand) else None     # a symbol: the buffer's base
        if operand in env:
            return env[operand]
        defs = self.definition(operand)
        if defs is None:
            return None
        _, op, args = defs
        if op.startswith("selp.") and len(args) == 3:       # a choice by a predicate
            which = self.truth(args[2], env)
            return None if which is None else self.value(args[0] if which else args[1], env)
        vals = [self.value(a, env) for a in args]
        if any(v is None for v in vals):
            return None
        width = int(m.group(1)) if (m := _WIDTH.search(op)) else 64
        width *= 2 if ".wide" in op else 1
        result = _apply(op.split(".")[0], op, vals)         # type: ignore[arg-type]
        return None if result is None else result & ((1 << width) - 1)

    def truth(self, pred: str, env: Env) -> Optional[bool]:
        """Whether predicate register `pred` holds given `env` (None: unknown). `x | y` compared with 0 is known
        nonzero when one operand is, whatever the other (a thread index)."""
        defs = self.definition(pred)
        if defs is None:
            return None
        _, op, args = defs
        m = re.match(r"setp\.(eq|ne|lt|le|gt|ge)\.", op)
        if m is None or len(args) != 2:
            return None
        a, b = self.value(args[0], env), self.value(args[1], env)
        if (a is None or b is None) and m.group(1) in ("eq", "ne") and self.value(args[1], env) == 0:
            nz = self._nonzero(args[0], env)
            return None if nz is None else nz == (m.group(1) == "ne")
        if a is None or b is None:
            spans = self.bounds(args[0], env, defs[0]), self.bounds(args[1], env, defs[0])
            if ".u" in op and any(s is not None and s[0] < 0 for s in spans):
                return None     # (an unsigned comparison reads a negative value as a large one)
            return self._compare_bounds(m.group(1), *spans)
        return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[m.group(1)]

    def bounds(self, operand: str, env: Env, at: int = -1) -> Optional[tuple[int, int]]:
        """[least, greatest] an operand of the statement at index `at` can hold given `env`, where it is computed
        from block ids (%ctaid) by additions, subtractions, products and shifts by constants and masks, on the
        assumption that this arithmetic does not wrap: a block id times a tile's extent is a row or column of
        an array of the launch, and no array a GPU can hold has 2^31 rows (cuTile's indices are 32-bit). A
        register is read at its definition before `at` in the same basic block where it has one there (a
        counter set before a loop), else at its only definition. None: anything else."""
        operand = operand.strip()
        if (v := self.value(operand, env)) is not None and not operand.startswith("%ctaid"):
            return (v, v)
        if operand in _BLOCK_IDS:
            return (0, _BLOCK_IDS[operand])
        found = self._reaching(operand, at) if operand.startswith("%") else None
        if found is None:
            return None
        i, op, args = found
        name = op.split(".")[0]
        if name in ("mov", "cvt") and len(args) == 1:
            return self.bounds(args[0], env, i)
        spans = [self.bounds(a, env, i) for a in args]
        if any(r is None for r in spans):
            return None
        (lo, hi), rest = spans[0], spans[1:]   # type: ignore[misc]
        if name == "add" and len(rest) == 1 and ".cc" not in op:
            return (lo + rest[0][0], hi + rest[0][1])     # type: ignore[index]
        if name == "sub" and len(rest) == 1 and ".cc" not in op:
            return (lo - rest[0][1], hi - rest[0][0])     # type: ignore[index]
        k = rest[0][0] if rest and rest[0][0] == rest[0][1] else None      # type: ignore[index]
        if k is None or k < 0 or lo < 0:
            return None
        if name == "shl" or name == "mul" and ".lo" in op:
            f = (lambda x: x << k) if name == "shl" else (lambda x: x * k)
            return (f(lo), f(hi))
        if name == "mad" and ".lo" in op and len(rest) == 2:
            return (lo * k + rest[1][0], hi * k + rest[1][1])     # type: ignore[index]
        if name == "shr":
            return (lo >> k, hi >> k)
        if name == "and":
            return (0, min(hi, k))
        return None

    def _reaching(self, reg: str, at: int) -> Optional[tuple[int, str, list[str]]]:
        """The definition of `reg` that reaches the statement at index `at`: the last one before it in its basic
        block (no label or branch between; not predicated), else its only one."""
        before = [d for d in self.defs.get(reg, []) if d[0] < at]
        if before and not any(c.endswith(":") or re.search(r"\bbra\b|\bret\b|\bexit\b", c)
                              for c in self.codes[before[-1][0] + 1:at]):
            return None if (before[-1][0], reg) in self.predicated else before[-1]
        return self.definition(reg)

    @staticmethod
    def _compare_bounds(how: str, a: Optional[tuple[int, int]], b: Optional[tuple[int, int]]) -> Optional[bool]:
        """Whether `a how b` holds for every pair of values of the two spans (True), for none (False), or either."""
        if a is None or b is None:
            return None
        always = {"lt": a[1] < b[0], "le": a[1] <= b[0], "gt": a[0] > b[1], "ge": a[0] >= b[1],
                  "eq": a[0] == a[1] == b[0] == b[1], "ne": a[1] < b[0] or a[0] > b[1]}[how]
        never = {"lt": a[0] >= b[1], "le": a[0] > b[1], "gt": a[1] <= b[0], "ge": a[1] < b[0],
                 "eq": a[1] < b[0] or a[0] > b[1], "ne": a[0] == a[1] == b[0] == b[1]}[how]
        return True if always else False if never else None

    def _nonzero(self, operand: str, env: Env) -> Optional[bool]:
        v = self.value(operand, env)
        if v is not None:
            return v != 0
        defs = self.defs.get(operand, [])
        if len(defs) == 1 and defs[0][1].startswith("or."):
            return True if any(self._nonzero(a, env) for a in defs[0][2]) else None
        return None

    def paths(self, first: int, env: Env, stop: int) -> Iterator[int]:
        """The statement indices reachable from index `first` without passing index `stop` (a loop's back edge:
        included, not followed), following only the branches `env` allows."""
        labels = {c[:-1]: i for i, c in enumerate(self.codes[self.start:self.end], self.start) if c.endswith(":")}
        todo, seen = [first], set()
        while todo:
            i = todo.pop()
            while self.start <= i < self.end and i not in seen:
                seen.add(i)
                yield i
                if i == stop:
                    break
                parts = statements(self.codes[i])
                branch = next((m for p in parts if (m := re.match(r"^(@(!?)(%\w+)\s+)?bra(?:\.uni)?\s+(\$?\w+)$", p))),
                              None)
                if branch is not None:
                    taken = True if branch.group(1) is None else self.truth(branch.group(3), env)
                    if taken is not None and branch.group(2):
                        taken = not taken
                    if taken is not False:
                        if branch.group(4) not in labels:
                            raise LookupError(branch.group(4))
                        todo.append(labels[branch.group(4)])
                    if taken is True:
                        break
                if any(re.match(r"^(ret|exit)\b", p) for p in parts):
                    break
                i += 1


def int_literal(text: str) -> Optional[int]:
    """A PTX integer immediate (decimal or hexadecimal, signed), else None."""
    text = text.strip()
    try:
        return int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)
    except ValueError:
        return None


def _apply(name: str, op: str, v: list[int]) -> Optional[int]:
    """The result of integer instruction `op` (its first word `name`) on operand values `v`."""
    if name in ("mov", "cvt", "cvta") and len(v) == 1:
        return v[0]
    if name == "not":
        return ~v[0]
    if name == "bfe" and ".u" in op:
        return (v[0] >> v[1]) & ((1 << v[2]) - 1)
    binary = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "shl": lambda a, b: a << b,
              "shr": lambda a, b: a >> b, "or": lambda a, b: a | b, "and": lambda a, b: a & b,
              "xor": lambda a, b: a ^ b, "mul": lambda a, b: a * b}
    if name == "mul" and ".hi.u32" in op and len(v) == 2:     # the high half of the unsigned 64-bit product
        return ((v[0] & 0xFFFFFFFF) * (v[1] & 0xFFFFFFFF)) >> 32
    if ".hi" in op or ".cc" in op or ".sat" in op:
        return None         # (a signed product's high half, a carry, a saturation: not modelled)
    if name in binary and len(v) == 2 and (name != "shr" or ".u" in op or ".b" in op):
        return binary[name](v[0], v[1])
    if name == "mad" and len(v) == 3 and (".lo" in op or ".wide.u" in op):
        return v[0] * v[1] + v[2]       # (the low half, as `value` masks it; a wide product of unsigned operands)
    return None
