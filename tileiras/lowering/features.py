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
    "fnv8E5M3FNU": (107, "element type fnv8E5M3FNU"),
    "mmaf_scaled": (100, "block-scaled matrix multiply"),
    "bf16_atomic_add": (90, "atomic add of bf16"),
}

# Features of one family only: PTX `cvt ... ue5m3x2` exists on sm_107a/sm_107f and nowhere else
# (not on sm_100/sm_103/sm_110/sm_12x, whose ptxas rejects it).
ONLY_ON: dict[str, frozenset[int]] = {"fnv8E5M3FNU": frozenset({107})}


def require(op: Operation, feature: str, sm: int, gpu: str) -> None:
    lowest, what = FEATURES[feature]
    family = ONLY_ON.get(feature)
    from ..ir.diagnostic_location import location_prefix

    loc = location_prefix(getattr(op, "location", None))
    if family is not None and sm not in family:
        names = ", ".join(f"sm_{n}" for n in sorted(family))
        raise CompileError(f"{loc}error: '{op.name}' op {what} requires {names} (no other family has it); "
                           f"the target is {gpu}")
    if sm < lowest:
        raise CompileError(f"{loc}error: '{op.name}' op {what} requires sm_{lowest} or newer; "
                           f"the target is {gpu}")
