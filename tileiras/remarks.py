"""Optimization remarks: what the compiler decided for each op a kernel author can act on.

The lowering reports a decision with one call, `KernelLowering.remark(...)`,
which lands here in the collector the driver opened for the compile
(`collecting()`); with no collector open a report costs one test. The driver
filters the remarks by kind and category (`--remarks*`, NVIDIA's options) and
writes them either as LLVM optimization-remark YAML (`--remark-format=yaml`,
one `--- !Passed|!Missed|!Failure|!Analysis` document per remark, as NVIDIA's
tileiras and clang's `-fsave-optimization-record` write them) or as text on
stdout (`--remark-format=command-line`, NVIDIA's default).
"""

from __future__ import annotations

from .ir.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Any, Optional

# kind -> (YAML tag, command-line label); the kinds are NVIDIA's filter names
KINDS: dict[str, tuple[str, str]] = {
    "passed": ("Passed", "passed"),
    "missed": ("Missed", "missed"),
    "failed": ("Failure", "failed"),
    "analysis": ("Analysis", "analysis"),
}
# category (the --remarks filter value) -> the `Pass:` name NVIDIA's remarks carry
CATEGORIES: dict[str, str] = {"memory": "Memory", "tensorcore": "Tensor-core"}


@record
class Remark:
    kind: str                            # a key of KINDS
    category: str                        # a key of CATEGORIES
    name: str                            # stable identifier, e.g. RemarkMemoryLoadInstructionSelected
    function: str                        # the kernel's symbol
    message: str
    file: str = ""
    line: int = 0
    column: int = 0
    args: tuple[tuple[str, str], ...] = ()   # further (key, value) facts: Instruction, Shape, Reason...

    def to_list(self) -> list[Any]:
        return [self.kind, self.category, self.name, self.function, self.message, self.file, self.line,
                self.column, [list(a) for a in self.args]]

    @classmethod
    def from_list(cls, row: list[Any]) -> "Remark":
        kind, category, name, function, message, file, line, column, args = row
        return cls(kind, category, name, function, message, file, line, column, tuple(tuple(a) for a in args))


_active: Optional[list[Remark]] = None


class collecting:
    """`with collecting() as remarks:` every report made inside lands in the list `remarks`."""

    def __enter__(self) -> list[Remark]:
        global _active
        self._outer = _active
        _active = []
        return _active

    def __exit__(self, *exc: object) -> None:
        global _active
        _active = self._outer


def active() -> bool:
    return _active is not None


def report(kind: str, category: str, name: str, function: str, message: str, location: Any = None,
           **args: object) -> None:
    """Record one remark in the open collector (nothing when none is open)."""
    if _active is None:
        return
    assert kind in KINDS and category in CATEGORIES, (kind, category)
    file = str(getattr(location, "file", "") or "")
    line = int(getattr(location, "line", 0) or 0)
    column = int(getattr(location, "column", 0) or 0)
    _active.append(Remark(kind, category, name, function, message, file, line, column,
                          tuple((key, str(value)) for key, value in args.items())))


def select(remarks: list[Remark], filters: dict[str, str]) -> list[Remark]:
    """The remarks a `--remarks*` filter keeps: `filters` maps each kind to none|all|memory|tensorcore."""
    return [r for r in remarks if filters.get(r.kind, "none") in ("all", r.category)]


def for_target(remark: Remark, gpu: str) -> Remark:
    """The remark with its target named (a fatbin or object compiles several)."""
    return Remark(remark.kind, remark.category, remark.name, remark.function, remark.message, remark.file,
                  remark.line, remark.column, (*remark.args, ("Target", gpu)))


def dumps(remarks: list[Remark]) -> str:
    import json

    return json.dumps([r.to_list() for r in remarks], separators=(",", ":"))


def loads(text: str) -> list[Remark]:
    import json

    return [Remark.from_list(row) for row in json.loads(text)]


# -- writers -------------------------------------------------------------------
def _scalar(value: object) -> str:
    """A YAML scalar: numbers bare, strings single-quoted unless plainly safe."""
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = text and text == text.strip() and all(c.isalnum() or c in " _.-/" for c in text) \
        and not text[0].isdigit() and text[0] not in "-." and text.lower() not in ("true", "false", "null", "yes", "no")
    return text if plain else "'" + text.replace("'", "''") + "'"


def to_yaml(remarks: list[Remark]) -> str:
    out: list[str] = []
    for r in remarks:
        out += [f"--- !{KINDS[r.kind][0]}",
                f"{'Pass:':<17}{_scalar(CATEGORIES[r.category])}",
                f"{'Name:':<17}{_scalar(r.name)}"]
        if r.file:
            out.append(f"{'DebugLoc:':<17}{{ File: {_scalar(r.file)}, Line: {r.line}, Column: {r.column} }}")
        out += [f"{'Function:':<17}{_scalar(r.function)}", "Args:",
                f"  - {'Remark:':<13}{_scalar(r.message)}"]
        out += [f"  - {key + ':':<13}{_scalar(value)}" for key, value in r.args]
        out.append("...")
    return "\n".join(out) + ("\n" if out else "")


def to_text(remarks: list[Remark]) -> str:
    """NVIDIA's command-line format: per function and category, each remark with its location."""
    out: list[str] = []
    for r in remarks:
        out += [f"in function: {r.function}:", "", f"  category: {CATEGORIES[r.category]}",
                f"    remark[{KINDS[r.kind][1]}]: {r.message}"]
        if r.file:
            out.append(f'      --> "{r.file}":{r.line}:{r.column}')
        out += ["       |", f"       = name: {r.name}"]
        out += [f"       = {'reason' if key == 'Reason' else 'note'}: "
                + (value if key == "Reason" else f"{key} = {value}") for key, value in r.args]
        out += ["", ""]
    return "\n".join(out)


# -- ptxas's resource report (`ptxas -v`) ---------------------------------------------
def from_ptxas_log(log: str) -> list[Remark]:
    """Registers and spills of each function, from ptxas's `-v` report."""
    import re

    out: list[Remark] = []
    function = ""
    spills: tuple[int, int] | None = None
    for line in log.splitlines():
        if m := re.search(r"Function properties for (\S+)", line):
            function, spills = m.group(1), None
        elif m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spills = int(m.group(1)), int(m.group(2))
        elif (m := re.search(r"Used (\d+) registers", line)) and function and spills is not None:
            stores, loads = spills
            if stores or loads:
                out.append(Remark("missed", "memory", "RemarkRegisterSpills", function,
                                  "Registers spilled to local memory",
                                  args=(("Registers", m.group(1)), ("SpillStores", f"{stores} bytes"),
                                        ("SpillLoads", f"{loads} bytes"))))
            else:
                out.append(Remark("analysis", "memory", "RemarkRegisterUsage", function, "No register spills",
                                  args=(("Registers", m.group(1)),)))
            function, spills = "", None
    return out
