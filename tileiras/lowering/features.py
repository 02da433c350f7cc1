"""Which targets have which hardware features: one table, one diagnostic.

A feature the target lacks is reported naming the op, the type and the
target, before any PTX exists, so ptxas never sees code it would reject.
"""

from __future__ import annotations

from ..driver.errors import CompileError
from ..ir.core import Operation

# feature -> (lowest SM that has it, what to call it in the message)
FEATURES: dict[str, tuple[int, str]] = {
    "f8E4M3FN": (89, "element type f8E4M3FN"),
    "f8E5M2": (89, "element type f8E5M2"),
    "f8E8M0FNU": (100, "element type f8E8M0FNU"),
    "f4E2M1FN": (100, "element type f4E2M1FN"),
    "mmaf_scaled": (100, "block-scaled matrix multiply"),
    "bf16_atomic_add": (90, "atomic add of bf16"),
}

# Arch-specific (`a`) families: sm_100-class conversions are absent on sm_110/sm_107 base parts too.
MISSING_ON: dict[str, frozenset[int]] = {}


def require(op: Operation, feature: str, sm: int, gpu: str) -> None:
    lowest, what = FEATURES[feature]
    if sm < lowest or sm in MISSING_ON.get(feature, frozenset()):
        loc = f"{op.location}: " if getattr(op, "location", None) else ""
        raise CompileError(f"{loc}error: '{op.name}' op {what} requires sm_{lowest} or newer; "
                           f"the target is {gpu}")
