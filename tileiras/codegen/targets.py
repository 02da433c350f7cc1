"""GPU targets: how each `--gpu-name` maps onto LLVM's NVPTX backend and onto ptxas.

One table says, for every target we accept, which CPU LLVM generates code for,
which PTX ISA version LLVM is told to use (`+ptxNN`), and which `.version` /
`.target` the finished PTX must declare. They differ only where LLVM 22 does
not know the target (sm_107 needs PTX 9.4, LLVM stops at 9.0): there LLVM
generates code for the nearest member of the same family and the header is
rewritten, which is sound because PTX for sm_100 / sm_100f assembles for sm_107.

PTX ISA choice: 8.8 (CUDA 12.9) everywhere it is enough, so the PTX copy in a
fatbin JIT-compiles on 12.9+ drivers and every instruction LLVM 22 gates on a
PTX version up to 8.8 is available; sm_88 and sm_110 need 9.0.
"""

from __future__ import annotations

import re

from tileiras.driver.errors import ExitCode, TileirasError
from tileiras.ir.record import record


@record
class Target:
    name: str            # what the user writes: sm_90, sm_90a, sm_100f
    sm: int              # 90
    suffix: str          # "", "a" (arch-specific) or "f" (family-specific)
    llvm_cpu: str        # CPU string handed to LLVM's NVPTX target machine
    llvm_ptx: int        # LLVM feature +ptxNN
    ptx_version: int     # .version the PTX declares, times ten

    @property
    def header_rewritten(self) -> bool:
        return self.llvm_cpu != self.name or self.llvm_ptx != self.ptx_version


def _row(name: str, ptx: int, llvm_cpu: str | None = None, declared: int | None = None) -> Target:
    match = re.fullmatch(r"sm_([0-9]+)([af]?)", name)
    assert match, name
    return Target(name, int(match.group(1)), match.group(2), llvm_cpu or name, ptx, declared or ptx)


# Every target the back end accepts.  Base targets first, then `a`/`f` variants.
TARGETS: dict[str, Target] = {
    row.name: row
    for row in (
        _row("sm_80", 88), _row("sm_86", 88), _row("sm_87", 88), _row("sm_88", 90), _row("sm_89", 88),
        _row("sm_90", 88), _row("sm_90a", 88),
        _row("sm_100", 88), _row("sm_100a", 88), _row("sm_100f", 88),
        _row("sm_103", 88), _row("sm_103a", 88), _row("sm_103f", 88),
        _row("sm_107", 88, llvm_cpu="sm_100", declared=94),
        _row("sm_107a", 88, llvm_cpu="sm_100f", declared=94),
        _row("sm_107f", 88, llvm_cpu="sm_100f", declared=94),
        _row("sm_110", 90), _row("sm_110a", 90), _row("sm_110f", 90),
        _row("sm_120", 88), _row("sm_120a", 88), _row("sm_120f", 88),
        _row("sm_121", 88), _row("sm_121a", 88), _row("sm_121f", 88),
    )
}

# The base targets the product documents (issue 3); `a`/`f` variants ride along.
BASE_TARGETS: tuple[str, ...] = tuple(name for name, row in TARGETS.items() if not row.suffix)

# Instructions that exist only on `a` (and for tcgen05 `f`) targets, seen either as
# NVVM intrinsic calls or inside inline asm.  A module using them on a plain target
# is compiled for that target's arch-specific variant instead of failing in LLVM.
ARCH_SPECIFIC_USE = re.compile(
    r"@llvm\.nvvm\.(?:wgmma|setmaxnreg|tcgen05|mma\.block\.scale)\."
    r"|@llvm\.nvvm\.(?:ff\.to\.(?:ue8m0x2|e2m1x2)|(?:ue8m0x2|e2m1x2)\.to)\."
    r"|\basm\b[^\n]*\"[^\"\n]*\b(?:wgmma|tcgen05|setmaxnreg)\.[a-z]"
    r"|\basm\b[^\n]*\"[^\"\n]*\.block_scale\b"
    r"|\basm\b[^\n]*\"[^\"\n]*\bcvt\.[a-z.]*ue5m3x2"
)


def lookup(gpu: str) -> Target:
    row = TARGETS.get(gpu)
    if row is None:
        known = ", ".join(BASE_TARGETS)
        raise TileirasError(f"error: unsupported GPU target '{gpu}' (supported: {known}, and their a/f variants)",
                            ExitCode.INVALID_OPTIONS)
    return row


def arch_specific_variant(target: Target) -> Target | None:
    """sm_90 -> sm_90a; None when the target has no such variant (sm_80)."""
    if target.suffix:
        return target
    return TARGETS.get(f"sm_{target.sm}a")
