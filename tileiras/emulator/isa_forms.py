"""The PTX ISA's forms the decoder holds instructions to: the `.target` each needs, and modifier orders.

`check_target` compares the module's `.target` with the minimum target of every instruction
(the PTX ISA's "Target ISA notes"): wgmma only on sm_90a, tcgen05 only on the sm_100 family's
architecture-specific targets, cluster and bulk-copy instructions from sm_90, and so on. A
kernel compiled for sm_80 that uses wgmma does not assemble; neither does it run here.

`check_order` holds the modifiers of mma and wgmma to the order the ISA writes them in (the
decoder's `Mods` consumes modifiers by name, in any order): `mma.sync.aligned.m16n8k16.col.row`
is not `.row.col` spelled differently, it does not exist (only m8n8k4 takes other layouts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .errors import EmulatorError


@dataclass(frozen=True)
class Need:
    """A minimum target: `sm` or newer; `arch` the suffixes that must follow it ("a", "af": a or f);
    `only` the sm numbers allowed at all (arch-specific instructions live on some families only)."""

    sm: int
    arch: str = ""
    only: tuple = ()

    def allows(self, sm: int, suffix: str) -> bool:
        if sm < self.sm or (self.only and sm not in self.only):
            return False
        return not self.arch or (suffix != "" and suffix in self.arch)

    def describe(self) -> str:
        if self.only:
            return " or ".join(f"sm_{s}{self.arch[0]}" for s in self.only) + \
                (f" ({'/'.join(self.arch)} variants)" if len(self.arch) > 1 else "")
        return f"sm_{self.sm}{self.arch[:1]} or newer" + (" (an arch-specific target)" if self.arch else "")


# (opcode, modifiers it must carry, the target it needs): the first rule that matches applies
MIN_TARGET: tuple = (
    ("wgmma", (), Need(90, "a", (90,))),
    ("tcgen05", (), Need(100, "af", (100, 101, 103, 110))),
    ("setmaxnreg", (), Need(90, "af")),
    ("mma", ("block_scale",), Need(120, "af", (120, 121))),
    ("mma", ("e4m3",), Need(89)),
    ("mma", ("e5m2",), Need(89)),
    ("cp", ("bulk",), Need(90)),
    ("cp", ("async",), Need(80)),
    ("mbarrier", ("try_wait",), Need(90)),
    ("mbarrier", ("expect_tx",), Need(90)),
    ("mbarrier", (), Need(80)),
    ("fence", ("async",), Need(90)),
    ("fence", ("mbarrier_init",), Need(90)),
    ("barrier", ("cluster",), Need(90)),
    ("elect", (), Need(90)),
    ("mapa", (), Need(90)),
    ("stmatrix", (), Need(90)),
    ("griddepcontrol", (), Need(90)),
    ("redux", (), Need(80)),
    ("ldmatrix", (), Need(75)),
)


def parse_target(text: str) -> Optional[tuple[int, str]]:
    """(sm number, suffix "a"/"f"/"") of a `.target` directive's text; None when it names no sm_ target."""
    m = re.search(r"\bsm_(\d+)([af]?)\b", text)
    return (int(m.group(1)), m.group(2)) if m else None


def check_target(ins: object, target: Optional[tuple[int, str]]) -> None:
    """Raise when instruction `ins` needs a newer (or another family's) target than the module's."""
    if target is None:
        return
    opcode, mods = ins.opcode, set(ins.mods)  # type: ignore[attr-defined]
    for op, must, need in MIN_TARGET:
        if op == opcode and mods.issuperset(must):
            if not need.allows(*target):
                raise EmulatorError(f"line {ins.line}: '{ins.text}' needs .target {need.describe()}; "  # type: ignore
                                    f"the module says .target sm_{target[0]}{target[1]}")
            return


MMA_SHAPE = re.compile(r"m\d+n\d+k\d+")


def check_order(ins: object) -> None:
    """The ISA's modifier order for mma and wgmma: .sync.aligned, then the shape, then (mma) the
    layouts, .row.col except for m8n8k4, then the types."""
    opcode, mods = ins.opcode, list(ins.mods)  # type: ignore[attr-defined]
    if opcode == "wgmma" and mods[:1] == ["mma_async"]:
        head = ["mma_async", "sync", "aligned"]
        if mods[:3] != head or len(mods) < 4 or not MMA_SHAPE.fullmatch(mods[3]):
            raise _bad(ins, "wgmma.mma_async.sync.aligned.shape.dtype.atype.btype is the order the ISA allows")
        return
    if opcode != "mma":
        return
    if mods[:2] != ["sync", "aligned"]:
        raise _bad(ins, "mma begins .sync.aligned")
    shapes = [i for i, m in enumerate(mods) if MMA_SHAPE.fullmatch(m)]
    if len(shapes) != 1:
        return          # the decoder names what is missing
    i = shapes[0]
    layouts = mods[i + 1:i + 3]
    if mods[i] == "m8n8k4" and all(x in ("row", "col") for x in layouts):
        return
    if layouts != ["row", "col"] or any(m in ("row", "col") for m in mods[:i] + mods[i + 3:]):
        raise _bad(ins, f".{mods[i]} takes the layouts .row.col, right after the shape (only m8n8k4 takes others)")


def _bad(ins: object, why: str) -> EmulatorError:
    return EmulatorError(f"line {ins.line}: unsupported PTX instruction '{ins.text}': {why}")  # type: ignore
