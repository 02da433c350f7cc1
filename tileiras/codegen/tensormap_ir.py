"""A tensor map's 64 bytes computed in LLVM IR, from values known only when the code runs.

`tensormap.encode` writes a map from Python integers; the `.nv.host` callback (codegen/nv_host.py)
computes the same bytes on the host from a kernel's arguments at launch, and a kernel computes them
itself for a tensor view whose base or shape it reads from memory (lowering/kernel_maps.py). Both
spell the descriptor as the same i64 arithmetic, `words`; the first 64 bytes are all the hardware
reads of a map made this way (NVIDIA's callbacks and kernels write no more).
"""

from __future__ import annotations

from typing import Callable, Sequence, Union

from tileiras.errors import CompileError
from tileiras.codegen import tensormap
from tileiras.codegen.tma_params import TmaParam

Value = Union[int, str]                 # a constant, or the name of an i64 SSA value
M64 = (1 << 64) - 1
M32 = (1 << 32) - 1


class I64:
    """i64 arithmetic emitted as LLVM IR lines (`emit`), fresh names from `fresh`, constants folded."""

    _FOLD = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "shl": lambda a, b: a << b, "lshr": lambda a, b: a >> b, "and": lambda a, b: a & b,
             "or": lambda a, b: a | b}

    def __init__(self, fresh: Callable[[], str], emit: Callable[[str], None]) -> None:
        self.fresh, self.emit = fresh, emit

    @staticmethod
    def lit(v: Value) -> str:
        """An operand: SSA names as they are, constants as signed i64 literals."""
        return v if isinstance(v, str) else str(v - (1 << 64) if v >= 1 << 63 else v)

    def op(self, code: str, a: Value, b: Value) -> Value:
        if isinstance(a, int) and isinstance(b, int):
            return self._FOLD[code](a, b) & M64
        if code in ("add", "or", "shl", "lshr") and b == 0 or code == "mul" and b == 1:
            return a
        if code in ("and", "mul", "shl", "lshr") and a == 0 or code in ("and", "mul") and b == 0:
            return 0
        out = self.fresh()
        self.emit(f"{out} = {code} i64 {self.lit(a)}, {self.lit(b)}")
        return out

    def at_least(self, a: Value, bound: int) -> Value:
        """1 when a >= bound (unsigned), else 0."""
        if isinstance(a, int):
            return int(a >= bound)
        cmp, out = self.fresh(), self.fresh()
        self.emit(f"{cmp} = icmp uge i64 {a}, {bound}")
        self.emit(f"{out} = zext i1 {cmp} to i64")
        return out


def words(ir: I64, spec: TmaParam, address: Value, dims: Sequence[Value], strides: Sequence[Value],
          where: str) -> list[Value]:
    """The eight i64 words `tensormap.encode` makes for `spec`, its base `address`, extents `dims` and
    strides `strides` (elements, innermost first, as the map lists them); `where` names the kernel in
    errors."""
    rank = len(dims)
    if not (len(strides) == len(spec.box) == rank and 1 <= rank <= tensormap.MAX_RANK):
        raise CompileError(f"error: kernel '{where}': a tensor map needs 1..5 dims with one stride "
                           "and one box size each")
    try:
        flags = tensormap.static_flags(rank, spec.dtype, spec.swizzle)
    except KeyError as exc:
        raise CompileError(f"error: kernel '{where}': tensor map element type '{spec.dtype}' or "
                           f"swizzle '{spec.swizzle}' is unknown") from exc
    if any(not 1 <= b <= 256 for b in spec.box):
        raise CompileError(f"error: kernel '{where}': tensor map box {spec.box} is outside 1..256")
    eb = tensormap.DTYPES[spec.dtype][1]
    address = ir.op("and", address, tensormap.ADDRESS_MASK)
    strides = [ir.op("mul", s, eb) for s in strides]
    minus1 = [ir.op("and", ir.op("sub", d, 1), M32) for d in dims] + [0] * (tensormap.MAX_RANK - rank)
    fields = [ir.op("and", ir.op("lshr", s, 4), M32) for s in strides[1:]]
    fields += [0] * (tensormap.MAX_RANK - 1 - len(fields))
    span = ir.op("mul", dims[0], eb)
    for d in range(1, rank):
        span = ir.op("add", span, ir.op("mul", ir.op("sub", dims[d], 1), strides[d]))
    large = ir.op("shl", ir.at_least(span, tensormap.LARGE_SPAN), tensormap.LARGE_BIT.shift)
    boxes = [b - 1 for b in spec.box] + [0] * (tensormap.MAX_RANK - rank)
    high = lambda a, b: ir.op("or", a, ir.op("shl", b, 32))  # noqa: E731
    return [
        address,
        high(ir.op("or", flags, large), fields[0]),
        high(fields[1], fields[2]),
        fields[3],
        high(minus1[0], minus1[1]),
        high(minus1[2], minus1[3]),
        ir.op("or", minus1[4], boxes[0] << 56),
        boxes[1] | boxes[2] << 8 | boxes[3] << 16 | boxes[4] << 24,   # element strides 1: zero fields
    ]
