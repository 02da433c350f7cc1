"""The catalogue of PTX mutation operators (benchmarks/mutations.py runs them).

Each operator maps a PTX text to its mutants: (line number, what was done, mutated text), one
per place it applies, each a bug a compiler could make and a GPU would show (a wrong result, a
race, a hang). Families: fences, waits, arrivals, expect_tx counts, descriptor fields, swizzles,
coordinates, initializations, shapes, targets, modifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterator

Mutant = tuple[int, str, str]


@dataclass(frozen=True)
class Operator:
    name: str
    family: str
    apply: Callable[[list[str]], Iterator[tuple[int, str, list[str]]]]

    def mutants(self, ptx: str) -> list[Mutant]:
        lines = ptx.split("\n")
        return [(i + 1, what, "\n".join(new)) for i, what, new in self.apply(lines)]


def _code(line: str) -> str:
    return line.split("//")[0].strip()


def _instr(pattern: str) -> Callable[[str], bool]:
    rx = re.compile(pattern)
    return lambda line: bool(rx.search(_code(line)))


def deleting(pattern: str) -> Callable[[list[str]], Iterator]:
    """Delete one instruction matching `pattern` (each match a mutant)."""
    hit = _instr(pattern)

    def apply(lines: list[str]) -> Iterator:
        for i, line in enumerate(lines):
            if hit(line):
                yield i, f"deleted '{_code(line)}'", lines[:i] + lines[i + 1:]

    return apply


def rewriting(pattern: str, edit: Callable[[re.Match], str]) -> Callable[[list[str]], Iterator]:
    """Rewrite the match of `pattern` in one line (each matching line a mutant)."""
    rx = re.compile(pattern)

    def apply(lines: list[str]) -> Iterator:
        for i, line in enumerate(lines):
            code = _code(line)
            m = rx.search(code)
            if not m:
                continue
            new = code[:m.start()] + edit(m) + code[m.end():]
            if new != code:
                yield i, f"'{code}' -> '{new}'", lines[:i] + ["\t" + new] + lines[i + 1:]

    return apply


# An mbarrier wait that succeeds at once: the try_wait's predicate set true.
_skip_try_wait = rewriting(r"mbarrier\.try_wait[^\s;]*\s+([^,\s]+)\s*,[^;]*;",
                           lambda m: f"setp.eq.u32 {m.group(1)}, 0, 0;")


def _expect_tx(lines: list[str]) -> Iterator:
    """An expect_tx byte count 16 bytes short: an immediate, or the mov that sets its register."""
    rx = re.compile(r"mbarrier\.(?:arrive\.)?expect_tx\S*\s+(?:[^,]+,\s*)?\[[^\]]+\]\s*,\s*([^;,\s]+)")
    for i, line in enumerate(lines):
        m = rx.search(_code(line))
        if not m:
            continue
        count = m.group(1)
        if count.isdigit():
            new = _code(line).replace(count, str(int(count) - 16), 1) if int(count) > 16 else None
            if new:
                yield i, f"expect_tx {count} -> {int(count) - 16}", lines[:i] + ["\t" + new] + lines[i + 1:]
            continue
        for j in range(i - 1, -1, -1):      # the register's last definition by an immediate
            d = re.match(r"\s*mov\.[bsu]32\s+" + re.escape(count) + r"\s*,\s*(\d+)\s*;", lines[j])
            if d and int(d.group(1)) > 16:
                new = lines[j].replace(d.group(1), str(int(d.group(1)) - 16))
                yield j, f"expect_tx {d.group(1)} -> {int(d.group(1)) - 16} (line {i + 1})", \
                    lines[:j] + [new] + lines[j + 1:]
                break


def _descriptor(field: str) -> Callable[[list[str]], Iterator]:
    """A wgmma/tcgen05 shared-memory descriptor constant with one field changed: "base" (base offset,
    bits 49-51), "swizzle" (wgmma bits 62-63, tcgen05 bits 61-63), "lbo" or "sbo" (one 16-byte unit)."""
    rx = re.compile(r"\b(\d{13,20})\b")

    def change(v: int) -> int | None:
        wgmma = v >> 62 != 0 and (v >> 46) & 7 == 0
        umma = (v >> 46) & 7 == 1
        if not (wgmma or umma):
            return None
        if field == "base":
            return v ^ (1 << 49)
        if field == "swizzle":
            return v ^ ((1 << 62) if wgmma else (2 << 61))
        if field == "lbo":
            return v + (1 << 16)
        return v + (1 << 32)

    def apply(lines: list[str]) -> Iterator:
        for i, line in enumerate(lines):
            code = _code(line)
            if not re.match(r"(mov|or|add)\.[bsu]64", code):
                continue
            for m in rx.finditer(code):
                v = int(m.group(1))
                w = change(v) if v < 1 << 64 else None
                if w is not None:
                    new = code[:m.start()] + str(w) + code[m.end():]
                    yield i, f"descriptor {field}: 0x{v:x} -> 0x{w:x}", lines[:i] + ["\t" + new] + lines[i + 1:]

    return apply


# A TMA copy's first two coordinates swapped (where they differ).
_swap_coordinates = rewriting(
    r"(cp\.(?:async|reduce\.async)\.bulk\.tensor\S*\s+.*\{\s*)([^,}\s]+)\s*,\s*([^,}\s]+)",
    lambda m: f"{m.group(1)}{m.group(3)}, {m.group(2)}")


def _statements(lines: list[str]) -> Iterator[str]:
    """Each instruction's whole text (LLVM spreads mma.sync's operands over several lines)."""
    text = ""
    for line in lines:
        text += " " + _code(line)
        if text.rstrip().endswith((";", "}")) or not text.strip():
            yield text.strip()
            text = ""


def _accumulator_registers(lines: list[str]) -> set[str]:
    """The registers mma.sync and wgmma read as accumulators (mma.sync's last operand vector, wgmma's
    first), and every register copied into them (loop-carried values reach them through movs)."""
    regs: set[str] = set()
    copies: list[tuple[str, str]] = []
    for code in _statements(lines):
        for opcode, which in (("mma.sync", -1), ("wgmma.mma_async", 0)):
            at = code.find(opcode)
            vecs = re.findall(r"\{([^{}]*)\}", code[at:]) if at >= 0 else []
            if vecs:
                regs |= {r.strip() for r in vecs[which].split(",")}
        m = re.fullmatch(r"mov\.b(?:32|64)\s+(%\w+)\s*,\s*(%\w+)\s*;", code)
        if m:
            copies.append((m.group(1), m.group(2)))
    grew = True
    while grew:
        grew = False
        for dst, src in copies:
            if dst in regs and src not in regs:
                regs.add(src)
                grew = True
    return regs


def _delete_accumulator_init(lines: list[str]) -> Iterator:
    """The accumulators' zero-initialization deleted: every mov of 0 into a register that reaches an
    mma/wgmma accumulator (one mutant: the compiler forgot to zero the accumulators)."""
    acc = _accumulator_registers(lines)
    rx = re.compile(r"\s*mov\.[bf]32\s+(%\w+)\s*,\s*(0f00000000|0)\s*;")
    hits = [i for i, line in enumerate(lines) if (m := rx.match(line)) and m.group(1) in acc]
    if hits:
        yield hits[0], f"accumulator zero-init deleted ({len(hits)} movs)", \
            [line for i, line in enumerate(lines) if i not in set(hits)]


def _tcgen05_accumulate_first(lines: list[str]) -> Iterator:
    """The first tcgen05.mma's enable-input-d forced true (its last operand, or the setp of an inline-asm
    predicate before it): it accumulates into never-written tensor memory."""
    for i, line in enumerate(lines):
        code = _code(line)
        if "tcgen05.mma" not in code:
            continue
        m = re.search(r"setp\.ne\.b32\s+(\w+)\s*,\s*(%\w+)\s*,\s*0\s*;", code)
        if m:
            new = code[:m.start(2)] + "1" + code[m.end(2):]
        else:
            m = re.search(r",\s*(%\w+)\s*;", code)
            if not m:
                continue
            new = code[:m.start(1)] + "1" + code[m.end(1):]
        yield i, f"enable-input-d forced true in '{code[:80]}'", lines[:i] + ["\t" + new] + lines[i + 1:]
        return


def _target(lines: list[str]) -> Iterator:
    for i, line in enumerate(lines):
        m = re.match(r"\s*\.target\s+sm_(\d+)([af]?)", line)
        if not m:
            continue
        sm, suffix = m.group(1), m.group(2)
        if suffix:
            yield i, f".target sm_{sm}{suffix} -> sm_{sm}", lines[:i] + [f".target sm_{sm}"] + lines[i + 1:]
        if sm != "80":
            yield i, f".target sm_{sm}{suffix} -> sm_80", lines[:i] + [".target sm_80"] + lines[i + 1:]


def _raise_count(m: re.Match) -> str:
    return f"{m.group(1)}{int(m.group(2)) + 1}"


def _split(rx: str, lane: str = "0") -> Callable[[list[str]], Iterator]:
    """An .aligned instruction copied into both arms of a branch on the lane (`lane` of each warp, a setp
    comparison of %laneid such as "0" or "lt 16", at one copy, the rest at the other), as LLVM duplicates a
    bar.sync that is not `convergent`: a barrier's warp arrives twice, which hangs a GPU (seen on an H200), and
    any other .aligned instruction runs with half a warp, which the ISA leaves undefined."""
    pattern = re.compile(rx)
    cmp, _, value = lane.rpartition(" ")

    def apply(lines: list[str]) -> Iterator:
        for i, line in enumerate(lines):
            code = _code(line)
            if not pattern.match(code):
                continue
            split = ["\t{", "\t.reg .pred %p_split;", "\t.reg .b32 %r_split;", "\tmov.u32 %r_split, %laneid;",
                     f"\tsetp.{cmp or 'eq'}.u32 %p_split, %r_split, {value};", f"\t@%p_split bra SPLIT_LANE0_{i};",
                     f"\t{code}", f"\tbra.uni SPLIT_JOIN_{i};", f"SPLIT_LANE0_{i}:", f"\t{code}",
                     f"SPLIT_JOIN_{i}:", "\t}"]
            yield i, f"'{code}' split over a branch on the lane", lines[:i] + split + lines[i + 1:]

    return apply


def _init_in_loop(lines: list[str]) -> Iterator:
    """An mbarrier.init repeated at the head of the first loop after it, as a compiler that sinks the barriers'
    setup into the loop (or a persistent kernel that sets them up per tile) would: the barrier is initialized
    again while it is live, with no mbarrier.inval between, which the ISA leaves undefined and which on a GPU
    drops the arrivals, transactions and phase its users count on. An init in a block that a branch skips keeps
    that guard (its operands are computed in the block); one guarded inside its own inline-asm braces (operands
    computed by every thread) runs unguarded, by whichever threads run the loop: that loop may belong to
    other warps than the initializing thread's."""
    labels = {m.group(1): i for i, line in enumerate(lines) if (m := re.match(r"^(\$?[\w.$]+):", line.strip()))}
    branch = re.compile(r"^@(!?)(%\w+)\s+bra(?:\.uni)?\s+([\w.$]+)\s*;")
    back = {labels[m.group(1)] for i, line in enumerate(lines)
            if (m := re.search(r"\bbra(?:\.uni)?\s+([\w.$]+)\s*;", _code(line))) and labels.get(m.group(1), i) < i}
    for i, line in enumerate(lines):
        code = _code(line)
        if "mbarrier.init" not in code:
            continue
        inline = re.search(r"(?:^|;)\s*@!?\w+\s+(mbarrier\.init[^;]*;)", code)
        copy = inline.group(1) if inline else code if code.startswith("@") else None
        for j in range(i - 1, -1, -1):      # the branch around a block of inits (no label between)
            if copy is not None or lines[j].strip().endswith(":"):
                break
            m = branch.match(_code(lines[j]))
            if m and labels.get(m.group(3), -1) > i:
                copy = f"@{'' if m.group(1) else '!'}{m.group(2)} {code}"
        head = min((h for h in back if h > i), default=None)
        if copy is None or head is None:
            continue
        yield i, f"'{code}' repeated at the loop head {lines[head].strip()} (line {head + 1})", \
            lines[:head + 1] + ["\t" + copy] + lines[head + 1:]


_split_barrier = _split(r"^bar(?:\.cta)?\.(?:sync|arrive)\b[^;]*;")
# the other .aligned instructions our kernels run (warpgroup MMAs, register reallocation, tensor memory moves)
_split_aligned = _split(r"^(?:wgmma\.\S*|setmaxnreg\S*|tcgen05\.(?:ld|st|wait::\w+)\S*)\.aligned\b[^;{}]*;$", "lt 16")


CATALOGUE: tuple[Operator, ...] = (
    Operator("delete fence.proxy.async", "fences", deleting(r"^fence\.proxy\.async")),
    Operator("delete wgmma.fence", "fences", deleting(r"^wgmma\.fence")),
    Operator("delete tcgen05.fence::before_thread_sync", "fences", deleting(r"^tcgen05\.fence::before")),
    Operator("delete tcgen05.fence::after_thread_sync", "fences", deleting(r"^tcgen05\.fence::after")),
    Operator("delete fence.mbarrier_init", "fences", deleting(r"^fence\.mbarrier_init")),
    Operator("skip an mbarrier wait", "waits", _skip_try_wait),
    Operator("delete cp.async.wait", "waits", deleting(r"^cp\.async\.wait_(group|all)")),
    Operator("delete cp.async.bulk.wait_group", "waits", deleting(r"^cp\.async\.bulk\.wait_group")),
    Operator("delete tcgen05.wait", "waits", deleting(r"^tcgen05\.wait::")),
    Operator("raise a wait_group count", "waits",
             rewriting(r"((?:wgmma|cp\.async|cp\.async\.bulk)\.wait_group(?:\.read)?(?:\.sync\.aligned)?\s+)(\d+)",
                       _raise_count)),
    Operator("delete bar.sync", "waits", deleting(r"^(bar|barrier)\.sync\b")),
    Operator("split an aligned barrier", "waits", _split_barrier),
    Operator("split an aligned instruction", "waits", _split_aligned),
    Operator("delete an mbarrier arrive", "arrivals", deleting(r"^mbarrier\.arrive(?!\.expect_tx)")),
    Operator("delete a commit", "arrivals",
             deleting(r"^(tcgen05\.commit|cp\.async\.mbarrier\.arrive|wgmma\.commit_group|cp\.async\.commit_group|"
                      r"cp\.async\.bulk\.commit_group)")),
    Operator("expect_tx 16 bytes short", "expect_tx", _expect_tx),
    Operator("descriptor base offset", "descriptors", _descriptor("base")),
    Operator("descriptor LBO", "descriptors", _descriptor("lbo")),
    Operator("descriptor SBO", "descriptors", _descriptor("sbo")),
    Operator("descriptor swizzle", "swizzles", _descriptor("swizzle")),
    Operator("swap TMA coordinates", "coordinates", _swap_coordinates),
    Operator("delete an accumulator's zero-init", "initializations", _delete_accumulator_init),
    Operator("first tcgen05.mma accumulates", "initializations", _tcgen05_accumulate_first),
    Operator("delete mbarrier.init", "initializations", deleting(r"^mbarrier\.init")),
    Operator("mbarrier.init repeated in a loop", "initializations", _init_in_loop),
    Operator("ldmatrix/stmatrix count", "shapes",
             rewriting(r"(\.x)(4|2)\b(?=.*\.shared)", lambda m: f"{m.group(1)}{int(m.group(2)) // 2}")),
    Operator("lower the target", "targets", _target),
    Operator("mma layouts .col.row", "modifiers", rewriting(r"\.row\.col\b", lambda m: ".col.row")),
    Operator("acquire/release made relaxed", "modifiers",
             rewriting(r"\.(acquire|release)\b", lambda m: ".relaxed")),
)
