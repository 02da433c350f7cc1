"""GPU targets: how each `--gpu-name` maps onto LLVM's NVPTX backend and onto ptxas.

The target table (tileiras/target/table.py) says, for every target we accept, which
CPU LLVM generates code for, which PTX ISA version LLVM is told to use (`+ptxNN`),
and which `.version` / `.target` the finished PTX must declare; this module is
its codegen view, one `Target` per accepted name. They differ only where LLVM 22 does
not know the target (sm_107 needs PTX 9.4, LLVM stops at 9.0): there LLVM
generates code for the nearest member of the same family and the header is
rewritten, which is sound because PTX for sm_100 / sm_100f assembles for sm_107.

PTX ISA choice: 8.8 (CUDA 12.9) everywhere it is enough, so the PTX copy in a
fatbin JIT-compiles on 12.9+ drivers and every instruction LLVM 22 gates on a
PTX version up to 8.8 is available; sm_88 and sm_110 need 9.0.
"""

from __future__ import annotations

import re

from tileiras.errors import ExitCode, TileirasError
from tileiras.ir.record import record
from tileiras.target import ROWS, Caps


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


def _rows(caps: Caps) -> tuple[Target, ...]:
    """A capability row's base target and its `a`/`f` variants (an LLVM stand-in's variants are its
    family-specific `f` target)."""
    declared = caps.ptx_declared or caps.ptx
    out = []
    for suffix in ("", *caps.variants):
        cpu = (caps.llvm_as + ("f" if suffix else "")) if caps.llvm_as else caps.name + suffix
        out.append(Target(caps.name + suffix, caps.sm, suffix, cpu, caps.ptx, declared))
    return tuple(out)


# Every target the back end accepts, from the target table (tileiras/target): base targets first,
# then their `a`/`f` variants.
TARGETS: dict[str, Target] = {row.name: row for caps in ROWS for row in _rows(caps)}

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
