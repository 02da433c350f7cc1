"""What an mma reads: the ways a loaded tile reaches the mmas that read it from shared memory, and
the loop that carries an accumulator (IR queries every level asks: the cluster split, the layouts,
the warp roles and the lowering).

A tile staged for the tensor cores may be read by several mmas, each through its own chain of ops
that only change how the buffer is read (unit reshapes, 2-D transposes, roundings to tf32): the
keys and values of attention's backward pass are read as they are by one mma and transposed by
another. `mma_reads` follows every use of such a tile; the tile stays in one shared buffer as long
as every path ends at an mma operand, and each mma reads it with its own path's orientation.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Operation, Value
from ..ir.record import record
from ..ir.types import element_of

MMAS = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")


@record
class MmaRead:
    operand: Value       # the value the mma reads (the end of the path)
    mma: Operation
    transposed: bool     # the path transposes the tile an odd number of times
    rounded: bool        # the path rounds the tile to tf32


# the ops a loop whose whole work is its mmas holds beside them (their loads and unit reshapes)
LOOP_BODY_OPS = ("cuda_tile.load_view_tko", "cuda_tile.reshape", "cuda_tile.continue")

OPERANDS = ("lhs", "rhs")                          # A and B
SCALED_OPERANDS = OPERANDS + ("lhs_scale", "rhs_scale")   # and a block-scaled mma's scales


def _reads(user: Operation, v: Value, roles: tuple[str, ...]) -> bool:
    return v is not user.operand("acc") and any(
        user.operand(r) is v for r in roles if r in OPERANDS or user.name == "cuda_tile.mmaf_scaled")


def mma_reads(value: Value, passes: Callable[[Operation], bool],
              roles: tuple[str, ...] = OPERANDS) -> Optional[list[MmaRead]]:
    """Every path from `value` to an mma reading it as one of `roles` (A or B) through ops that
    `passes` accepts, or None when some use leads anywhere else (or nowhere)."""
    out: list[MmaRead] = []
    stack = [(value, False, False)]
    while stack:
        v, transposed, rounded = stack.pop()
        if not v.uses:
            return None
        for user in v.uses:
            if user.name in MMAS and _reads(user, v, roles):
                out.append(MmaRead(v, user, transposed, rounded))
            elif passes(user):
                stack.append((user.results[0], transposed ^ (user.name == "cuda_tile.permute"),
                              rounded or user.name == "cuda_tile.ftof"))
            else:
                return None
    return out


def tree_values(value: Value, passes: Callable[[Operation], bool]) -> list[Value]:
    """`value` and every value on its paths to the mmas (as `mma_reads` follows them)."""
    out, stack = [], [value]
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(user.results[0] for user in v.uses if user.name not in MMAS and passes(user))
    return out


def source(value: Value, passes: Callable[[Operation], bool]) -> tuple[Optional[Operation], bool]:
    """(the load `value` is a view of, through ops `passes` accepts, or None; whether the path from
    the load transposes it)."""
    transposed = False
    while True:
        owner = getattr(value, "owner", None)
        if not isinstance(owner, Operation):
            return None, False
        if owner.name == "cuda_tile.load_view_tko":
            return owner, transposed
        if not passes(owner):
            return None, False
        transposed ^= owner.name == "cuda_tile.permute"
        value = owner.operands[0]


def unit_reshape(op: Operation) -> bool:
    """A reshape that only drops or adds unit dimensions (a batched load's (1, rows, cols) tile)."""
    src, dst = op.operands[0].type, op.results[0].type
    return op.name == "cuda_tile.reshape" and \
        [d for d in src.shape if d != 1] == [d for d in dst.shape if d != 1]  # type: ignore[attr-defined]


def to_tf32(op: Operation) -> bool:
    """A rounding of an f32 tile to tf32."""
    return op.name == "cuda_tile.ftof" and str(getattr(op.operands[0].type, "element", "")) == "f32" \
        and str(getattr(op.results[0].type, "element", "")) == "tf32"


def transpose_2d(op: Operation) -> bool:
    return op.name == "cuda_tile.permute" and len(op.results[0].type.shape) == 2  # type: ignore[attr-defined]


def passes(op: Operation) -> bool:
    """Ops a staged operand passes through on its way to a tcgen05 mma: unit reshapes, 2-D
    transposes, roundings to tf32."""
    return op.name == "cuda_tile.reshape" and unit_reshape(op) or to_tf32(op) or transpose_2d(op)


def loaded(value: object) -> Optional[bool]:
    """For a tile only mmas read, a load possibly reshaped (unit dimensions only), transposed (2-D)
    or rounded to tf32, whose every use leads to mmas reading it as A or B (attention's backward
    pass reads its keys as they are and transposed: one buffer): whether it is the transpose of
    what is stored (cp.async copies the load into the buffer the MMA reads, swizzled, in its
    row-major order; tf32: the mma restages it). None for any other tile."""
    load, transposed = source(value, passes)  # type: ignore[arg-type]
    if load is None or not mma_reads(load.results[0], passes):
        return None
    return transposed


def resident_loop(op: Operation) -> Optional[tuple[Operation, int]]:
    """(for op, carried index) when `op`'s accumulator is a value a `for` carries that nothing else
    in the loop reads (but, possibly, the multiply that rescales it: `rescale`), and its result only
    goes back round as that value: the accumulator then stays in tensor memory for the whole loop
    and is read into registers once, after it."""
    acc, result = op.operand("acc"), op.results[0]
    block = op.parent
    loop = block.parent.parent if block is not None and block.parent is not None else None
    scale = rescale(op)
    carried = carried_factor(scale)[0] if scale is not None else acc  # type: ignore[index]
    if loop is None or loop.name != "cuda_tile.for" or getattr(carried, "owner", None) is not block:
        return None
    last = block.operations[-1]
    index = carried.index - 1  # type: ignore[union-attr]
    if last.name != "cuda_tile.continue" or carried.uses != [scale or op] or result.uses != [last] \
            or index < 0 or last.operands[index] is not result \
            or sum(1 for v in last.operands if v is result) != 1:
        return None
    return loop, index


def rescale(op: Operation) -> Optional[Operation]:
    """The f32 multiply of a carried value by a factor (either order) that is `op`'s accumulator, read
    by `op` alone: attention's O, rescaled by the softmax's correction before each P @ V. Its
    accumulator stays in tensor memory and is rescaled there (as NVIDIA's correction step does),
    so O never occupies registers inside the loop. None otherwise."""
    acc = op.operand("acc")
    owner = getattr(acc, "owner", None)
    if not isinstance(owner, Operation) or owner.name != "cuda_tile.mulf" or acc.uses != [op] \
            or str(getattr(acc.type, "element", "")) != "f32" \
            or owner.attributes.get("flush_to_zero", False) \
            or str(owner.attributes.get("rounding_mode", "nearest_even")) not in ("nearest_even", "approx", "full"):
        return None
    return owner if carried_factor(owner, op.parent) is not None else None


def carried_factor(mul: Operation, block: object = None) -> "Optional[tuple[object, object]]":
    """(carried value, factor) of a rescaling multiply: the operand that is an argument of the
    loop body (`block`: mul's own by default) and the other one; None where not exactly one is."""
    block = block or mul.parent
    args = [getattr(v, "owner", None) is block for v in mul.operands]
    if args.count(True) != 1:
        return None
    return (mul.operands[0], mul.operands[1]) if args[0] else (mul.operands[1], mul.operands[0])


def zero(value: object) -> bool:
    """A constant of zero bytes (through layout conversions): the first MMA then ignores tensor memory."""
    owner = getattr(value, "owner", None)
    while isinstance(owner, Operation) and owner.name == "nv_tileas.convert_layout":
        owner = getattr(owner.operands[0], "owner", None)
    return isinstance(owner, Operation) and owner.name == "cuda_tile.constant" \
        and not any(owner.attributes["value"].raw)


def scale_loads(mma: Operation) -> tuple:
    """The loads a block-scaled mma's scale tiles come from, through reshapes and permutes (cuTile's
    swizzled scale layouts), or None for a scale that is not a load's."""
    out = []
    for name in ("lhs_scale", "rhs_scale"):
        owner = getattr(mma.operand(name), "owner", None)
        while isinstance(owner, Operation) and owner.name in ("cuda_tile.reshape", "cuda_tile.permute"):
            owner = getattr(owner.operands[0], "owner", None)
        out.append(owner if isinstance(owner, Operation) and owner.name == "cuda_tile.load_view_tko" else None)
    return tuple(out)


def for_tensor_cores(load: Operation) -> bool:
    """A load only mmas read (through reshapes and transposes): it is staged in shared memory."""
    users = list(load.results[0].uses)
    while users:
        user = users.pop()
        if user.name in ("cuda_tile.reshape", "cuda_tile.permute"):
            users.extend(user.results[0].uses)
        elif user.name not in MMAS:
            return False
    return True


def passes_shared(op: Operation) -> bool:
    """A reshape that only adds or drops unit dimensions, a 2-D transpose, or a rounding to tf32:
    ops a shared-memory operand of an mma passes through without moving data."""
    if op.name == "cuda_tile.reshape":
        src, dst = op.operands[0].type, op.results[0].type
        return [d for d in src.shape if d != 1] == [d for d in dst.shape if d != 1] and len(dst.shape) in (2, 3)  # type: ignore[attr-defined]
    if op.name == "cuda_tile.ftof":   # f32 -> tf32: the fragments are rounded as they are read
        return str(element_of(op.operands[0].type)) == "f32" and str(element_of(op.results[0].type)) == "tf32"
    return op.name == "cuda_tile.permute" and tuple(op.attributes["permutation"]) == (1, 0)
