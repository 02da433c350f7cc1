"""The tensor-core forms of an mma, by its element types: the tcgen05 kinds (sm_100 / sm_103) and
the block-scaled forms of `mmaf_scaled`. A property of the op the levels ask before choosing how it
runs (the cluster split's CTA pair, the layouts, the warp roles); the lowering emits the kind chosen.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.record import record


@record
class Kind:
    """One tcgen05.mma kind."""
    name: str          # .kind::NAME
    a: int             # A / B format codes of the instruction descriptor
    b: int
    d: int             # accumulator format code (1 f32, 2 s32)
    k: int             # K per instruction
    elem_bytes: int


# (A, B, accumulator) element types -> the tcgen05 kind that computes them
KINDS: dict[tuple[str, str, str], Kind] = {
    ("f16", "f16", "f32"): Kind("f16", 0, 0, 1, 16, 2),
    ("bf16", "bf16", "f32"): Kind("f16", 1, 1, 1, 16, 2),
    ("f8E4M3FN", "f8E4M3FN", "f32"): Kind("f8f6f4", 0, 0, 1, 32, 1),
    ("f8E5M2", "f8E5M2", "f32"): Kind("f8f6f4", 1, 1, 1, 32, 1),
    ("i8", "i8", "i32"): Kind("i8", 1, 1, 2, 32, 1),
    ("tf32", "tf32", "f32"): Kind("tf32", 2, 2, 1, 8, 4),
}

# block-scaled operand element types and their PTX names (fp8 e4m3 / e5m2, fp4 e2m1)
SCALED_ELEMENTS = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2", "f4E2M1FN": "e2m1"}
SCALE_BLOCK = 32          # K per instruction = elements per scale (mxf8f6f4, scale_vec::1X)
_F8_CODE = {"f8E4M3FN": 0, "f8E5M2": 1}    # A / B format codes of kind::mxf8f6f4


@record
class Scaled:
    """One block-scaled mma.sync form: its kind, scale factors per instruction (scale_vec::NX)
    and their PTX type, and the instruction's K."""
    kind: str
    vec: int
    stype: str
    k: int


# (operand element, scale element, elements per scale) -> the block-scaled mma.sync form
SCALED: dict[tuple[str, str, int], Scaled] = {
    ("f8", "f8E8M0FNU", 32): Scaled("mxf8f6f4", 1, "ue8m0", 32),
    ("f4E2M1FN", "f8E8M0FNU", 32): Scaled("mxf4", 2, "ue8m0", 64),
    ("f4E2M1FN", "f8E8M0FNU", 16): Scaled("mxf4nvf4", 4, "ue8m0", 64),
    ("f4E2M1FN", "f8E4M3FN", 16): Scaled("mxf4nvf4", 4, "ue4m3", 64),
}


def fragment_multiple(shape: tuple[int, ...]) -> bool:
    """An accumulator of (batch?, rows, cols) that m16n8 fragments tile."""
    return len(shape) in (2, 3) and shape[-2] % 16 == 0 and shape[-1] % 8 == 0


def scaled_form(op: Operation) -> "Scaled | None":
    """The block-scaled form of `op`'s operand and scale types (None: no tensor-core form)."""
    lhs, rhs, scale = (op.operand(n).type for n in ("lhs", "rhs", "lhs_scale"))
    a, b = str(lhs.element), str(rhs.element)  # type: ignore[union-attr]
    if a != b and not (a in SCALED_ELEMENTS and b in SCALED_ELEMENTS and "f4E2M1FN" not in (a, b)):
        return None
    key = "f8" if a in SCALED_ELEMENTS and a != "f4E2M1FN" else a
    return SCALED.get((key, str(scale.element), lhs.shape[-1] // scale.shape[-1]))  # type: ignore[union-attr]


def kind_of(op: Operation) -> Optional[Kind]:
    """The tcgen05 kind that computes mma `op`, or None."""
    if op.name == "cuda_tile.mmaf_scaled":
        return _scaled_kind(op)
    lhs, rhs, acc = (op.operand(n) for n in ("lhs", "rhs", "acc"))
    key = tuple(str(getattr(v.type, "element", "")) for v in (lhs, rhs, acc))
    kind = KINDS.get(key)  # type: ignore[arg-type]
    if kind is not None and kind.name == "i8" and not (
            op.attributes.get("signedness_lhs", "signed") == "signed"
            and op.attributes.get("signedness_rhs", "signed") == "signed"):
        return None
    return kind


def _scaled_kind(op: Operation) -> Optional[Kind]:
    """A block-scaled mma's kind: fp8 (e4m3/e5m2, ue8m0 per 32: kind::mxf8f6f4; a K tile over 128
    takes a cell of scale factors per 128, as fp4's do) or fp4 (e2m1, ue8m0 per 32 or ue4m3 / ue8m0
    per 16: kind::mxf4nvf4, whose A and B the mma packs two to a byte, K-major)."""
    lhs, rhs, acc = (op.operand(n).type for n in ("lhs", "rhs", "acc"))
    f = scaled_form(op)
    if f is not None and f.k == 64:
        return Kind("mxf4nvf4", 1, 1, 1, 64, 1)
    if f is None or not fragment_multiple(acc.shape) or lhs.shape[-1] % SCALE_BLOCK:  # type: ignore[union-attr]
        return None
    return Kind("mxf8f6f4", _F8_CODE[str(lhs.element)], _F8_CODE[str(rhs.element)], 1, SCALE_BLOCK, 1)  # type: ignore[union-attr]
