"""A hardware feature the target lacks: one diagnostic, from the target table.

A feature the target lacks is reported naming the op, the type and the
target, before any PTX exists, so ptxas never sees code it would reject.
Which targets have which feature is tileiras/target/table.py's.
"""

from __future__ import annotations

from ..errors import CompileError
from ..ir.core import Operation
from ..target import FEATURES, caps, since, with_feature


def require(op: Operation, feature: str, sm: int, gpu: str) -> None:
    if caps(sm).has(feature):
        return
    what = FEATURES[feature]
    from ..ir.diagnostic_location import location_prefix

    loc = location_prefix(getattr(op, "location", None))
    first = since(feature)
    if first is None:   # one family's (PTX `cvt ... ue5m3x2`: sm_107a/sm_107f; newer targets' ptxas rejects it)
        names = ", ".join(row.name for row in with_feature(feature))
        raise CompileError(f"{loc}error: '{op.name}' op {what} requires {names} (no other family has it); "
                           f"the target is {gpu}")
    raise CompileError(f"{loc}error: '{op.name}' op {what} requires {first.name} or newer; the target is {gpu}")
