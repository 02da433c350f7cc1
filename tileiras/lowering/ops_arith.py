"""Elementwise arithmetic, comparisons, selects and conversions.

Each op is one row of a table: the LLVM instruction (or intrinsic) applied
slot by slot. Attributes that change the instruction (signedness, rounding,
comparison predicates) are resolved by small functions next to the tables.
"""

from __future__ import annotations

from typing import Callable

from ..ir.core import Operation
from ..ir.record import replace
from ..ir.types import ScalarType, TileType, element_of
from . import ue5m3
from .kernel import KernelLowering
from .llvm_text import llvm_type
from .values import SharedTileVal, TileRegs


def _elem(op: Operation) -> ScalarType:
    t = element_of(op.results[0].type)
    assert isinstance(t, ScalarType)
    return t


def _map(k: KernelLowering, op: Operation, fn: Callable[[list[str]], str]) -> None:
    """Apply `fn` to the operand slots, slot by slot, and bind the result."""
    tiles = [k.tile(v) for v in op.operands]
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    n = len(tiles[0].slots) if tiles else k.slots(rtype)  # operands share their layout
    out = [fn([t.slots[i] for t in tiles]) for i in range(n)]
    k.set(op.results[0], TileRegs(rtype, out))


def _signed(op: Operation) -> bool:
    return str(op.attributes.get("signedness", "signed")) == "signed"


# -- float binary ops ---------------------------------------------------------------
# rounding mode -> nvvm intrinsic suffix; nearest_even is the plain LLVM instruction.
_ROUNDING_SUFFIX = {"zero": "rz", "negative_inf": "rm", "positive_inf": "rp", "nearest_even": "rn"}
_FLOAT_BINARY = {"cuda_tile.addf": ("fadd", "add"), "cuda_tile.subf": ("fsub", None),
                 "cuda_tile.mulf": ("fmul", "mul"), "cuda_tile.divf": ("fdiv", "div")}


def _float_binary(k: KernelLowering, op: Operation) -> None:
    instr, intrinsic = _FLOAT_BINARY[op.name]
    ty = llvm_type(_elem(op))
    mode = str(op.attributes.get("rounding_mode", "nearest_even"))
    ftz = bool(op.attributes.get("flush_to_zero", False))
    if op.name == "cuda_tile.divf" and mode == "approx" and ty == "float":
        # div.approx[.ftz].f32, as asked: div.rn would cost a Newton refinement and a slow-path
        # subroutine per division in ptxas (and in the kernel)
        name = f"llvm.nvvm.div.approx{'.ftz' if ftz else ''}.f"
        _map(k, op, lambda a: k.b.call("float", name, [("float", a[0]), ("float", a[1])]))
        return
    if mode in ("nearest_even", "approx", "full") and not ftz or ty not in ("float", "double"):
        _map(k, op, lambda a: k.b.op(f"{instr} {ty} {a[0]}, {a[1]}", "f"))
        return
    suffix = _ROUNDING_SUFFIX.get(mode, "rn")
    if op.name == "cuda_tile.subf":
        # a - b == a + (-b) exactly, in every rounding mode
        def sub(a: list[str]) -> str:
            neg = k.b.op(f"fneg {ty} {a[1]}", "f")
            return _rounded(k, "add", suffix, ty, ftz, [a[0], neg])
        _map(k, op, sub)
        return
    _map(k, op, lambda a: _rounded(k, intrinsic, suffix, ty, ftz, a))


def _rounded(k: KernelLowering, base: str, suffix: str, ty: str, ftz: bool, args: list[str]) -> str:
    kind = "d" if ty == "double" else "f"
    name = f"llvm.nvvm.{base}.{suffix}{'.ftz' if ftz and kind == 'f' else ''}.{kind}"
    return k.b.call(ty, name, [(ty, a) for a in args])


def _fma(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    mode = str(op.attributes.get("rounding_mode", "nearest_even"))
    if mode in ("nearest_even", "approx", "full") or ty not in ("float", "double"):
        _map(k, op, lambda a: k.b.call(ty, f"llvm.fma.{_suffix(ty)}", [(ty, x) for x in a]))
    else:
        ftz = bool(op.attributes.get("flush_to_zero", False))
        _map(k, op, lambda a: _rounded(k, "fma", _ROUNDING_SUFFIX.get(mode, "rn"), ty, ftz, a))


def _suffix(ty: str) -> str:
    return {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}[ty]


def _float_minmax(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    nan = bool(op.attributes.get("propagate_nan", False))
    is_max = op.name.endswith("maxf")
    if ty == "float" and op.attributes.get("flush_to_zero", False):
        # LLVM's maxnum/maximum never flush subnormals; NVVM's fmax.ftz (PTX max.ftz.f32) does
        name = f"llvm.nvvm.f{'max' if is_max else 'min'}.ftz{'.nan' if nan else ''}.f"
    else:
        base = ("maximum" if nan else "maxnum") if is_max else ("minimum" if nan else "minnum")
        name = f"llvm.{base}.{_suffix(ty)}"
    _map(k, op, lambda a: k.b.call(ty, name, [(ty, a[0]), (ty, a[1])]))


def _unary_float(intrinsic: str) -> Callable[[KernelLowering, Operation], None]:
    def lower(k: KernelLowering, op: Operation) -> None:
        ty = llvm_type(_elem(op))
        _map(k, op, lambda a: k.b.call(ty, f"llvm.{intrinsic}.{_suffix(ty)}", [(ty, a[0])]))
    return lower


def _negf(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    _map(k, op, lambda a: k.b.op(f"fneg {ty} {a[0]}", "f"))


# -- integer ops ----------------------------------------------------------------------
def _int_binary(instr: str, unsigned_instr: str | None = None) -> Callable[[KernelLowering, Operation], None]:
    def lower(k: KernelLowering, op: Operation) -> None:
        ty = llvm_type(_elem(op))
        name = instr if (unsigned_instr is None or _signed(op)) else unsigned_instr
        _map(k, op, lambda a: k.b.op(f"{name} {ty} {a[0]}, {a[1]}", "i"))
    return lower


def _divi(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    signed = _signed(op)
    rounding = str(op.attributes.get("rounding", "zero"))

    def div(a: list[str]) -> str:
        q = k.b.op(f"{'sdiv' if signed else 'udiv'} {ty} {a[0]}, {a[1]}", "i")
        if rounding == "zero":
            return q
        r = k.b.op(f"{'srem' if signed else 'urem'} {ty} {a[0]}, {a[1]}", "i")
        nonzero = k.b.op(f"icmp ne {ty} {r}, 0", "i")
        if rounding == "positive_inf":
            if signed:
                same = k.b.op(f"xor {ty} {a[0]}, {a[1]}", "i")
                pos = k.b.op(f"icmp sge {ty} {same}, 0", "i")
                nonzero = k.b.op(f"and i1 {nonzero}, {pos}", "i")
            bump = k.b.op(f"zext i1 {nonzero} to {ty}", "i")
            return k.b.op(f"add {ty} {q}, {bump}", "i")
        # negative_inf (floor): only signed division with operands of opposite sign moves
        if not signed:
            return q
        diff = k.b.op(f"xor {ty} {a[0]}, {a[1]}", "i")
        neg = k.b.op(f"icmp slt {ty} {diff}, 0", "i")
        adjust = k.b.op(f"and i1 {nonzero}, {neg}", "i")
        bump = k.b.op(f"zext i1 {adjust} to {ty}", "i")
        return k.b.op(f"sub {ty} {q}, {bump}", "i")
    _map(k, op, div)


def _minmax_i(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    base = ("s" if _signed(op) else "u") + ("max" if op.name.endswith("maxi") else "min")
    _map(k, op, lambda a: k.b.call(ty, f"llvm.{base}.{ty}", [(ty, a[0]), (ty, a[1])]))


def _absi(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    _map(k, op, lambda a: k.b.call(ty, f"llvm.abs.{ty}", [(ty, a[0]), ("i1", "false")]))


def _negi(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    _map(k, op, lambda a: k.b.op(f"sub {ty} 0, {a[0]}", "i"))


def _mulhii(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    bits = _elem(op).bitwidth
    wide = f"i{2 * bits}"
    ext = "zext" if str(op.attributes.get("signedness", "unsigned")) == "unsigned" else "sext"

    def hi(a: list[str]) -> str:
        x = k.b.op(f"{ext} {ty} {a[0]} to {wide}", "i")
        y = k.b.op(f"{ext} {ty} {a[1]} to {wide}", "i")
        p = k.b.op(f"mul {wide} {x}, {y}", "i")
        s = k.b.op(f"lshr {wide} {p}, {bits}", "i")
        return k.b.op(f"trunc {wide} {s} to {ty}", "i")
    _map(k, op, hi)


def _shift(k: KernelLowering, op: Operation) -> None:
    elem = _elem(op)
    ty, bits = llvm_type(elem), elem.bitwidth
    instr = "shl" if op.name.endswith("shli") else ("ashr" if _signed(op) else "lshr")

    # LLVM makes a shift by the width or more poison; TileIR clamps like PTX: 0, or the sign for ashr.
    # The amount is masked below the width too: NVPTX folds `select(amount >= 64, 0, shl)` into a
    # shl.b64, whose 32-bit amount operand drops the high half of an i64 amount.
    def clamped(a: list[str]) -> str:
        big = k.b.op(f"icmp uge {ty} {a[1]}, {bits}", "i")
        amount = k.b.op(f"and {ty} {a[1]}, {bits - 1}", "i")
        if instr == "ashr":
            return k.b.op(f"ashr {ty} {a[0]}, {k.b.op(f'select i1 {big}, {ty} {bits - 1}, {ty} {amount}', 'i')}", "i")
        return k.b.op(f"select i1 {big}, {ty} 0, {ty} {k.b.op(f'{instr} {ty} {a[0]}, {amount}', 'i')}", "i")
    _map(k, op, clamped)


# -- comparisons and select -------------------------------------------------------------
_CMPI = {"equal": "eq", "not_equal": "ne", "less_than": "lt", "less_than_or_equal": "le",
         "greater_than": "gt", "greater_than_or_equal": "ge"}
_CMPF = {"equal": "eq", "not_equal": "ne", "less_than": "lt", "less_than_or_equal": "le",
         "greater_than": "gt", "greater_than_or_equal": "ge"}


def _cmpi(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(element_of(op.operands[0].type))
    pred = _CMPI[str(op.attributes["comparison_predicate"])]
    if pred not in ("eq", "ne"):
        pred = ("s" if _signed(op) else "u") + pred
    _map(k, op, lambda a: k.b.op(f"icmp {pred} {ty} {a[0]}, {a[1]}", "c"))


def _cmpf(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(element_of(op.operands[0].type))
    ordered = str(op.attributes.get("comparison_ordering", "ordered")) == "ordered"
    pred = ("o" if ordered else "u") + _CMPF[str(op.attributes["comparison_predicate"])]
    _map(k, op, lambda a: k.b.op(f"fcmp {pred} {ty} {a[0]}, {a[1]}", "c"))


def _select(k: KernelLowering, op: Operation) -> None:
    ty = llvm_type(_elem(op))
    _map(k, op, lambda a: k.b.op(f"select i1 {a[0]}, {ty} {a[1]}, {ty} {a[2]}", "s"))


# -- conversions ---------------------------------------------------------------------------
def _exti(k: KernelLowering, op: Operation) -> None:
    src = llvm_type(element_of(op.operands[0].type))
    dst = llvm_type(_elem(op))
    instr = "sext" if _signed(op) else "zext"
    _map(k, op, lambda a: k.b.op(f"{instr} {src} {a[0]} to {dst}", "x"))


def _trunci(k: KernelLowering, op: Operation) -> None:
    src = llvm_type(element_of(op.operands[0].type))
    dst = llvm_type(_elem(op))
    _map(k, op, lambda a: k.b.op(f"trunc {src} {a[0]} to {dst}", "x"))


def _itof(k: KernelLowering, op: Operation) -> None:
    src = llvm_type(element_of(op.operands[0].type))
    dst_t = _elem(op)
    instr = "sitofp" if _signed(op) else "uitofp"
    if not _is_narrow(dst_t):
        dst = llvm_type(dst_t)
        _map(k, op, lambda a: k.b.op(f"{instr} {src} {a[0]} to {dst}", "x"))
        return
    _require_narrow(k, op, dst_t)
    # Through f32: exact below 2**24, and every narrow format saturates far below that.
    _map(k, op, lambda a: _to_narrow(k, k.b.op(f"{instr} {src} {a[0]} to float", "x"), "float", dst_t.name))


def _ftoi(k: KernelLowering, op: Operation) -> None:
    src_t = element_of(op.operands[0].type)
    assert isinstance(src_t, ScalarType)
    dst = llvm_type(_elem(op))
    # Saturating, NaN -> 0: the semantics of PTX cvt.rzi, and defined for every input.
    base = "fptosi.sat" if _signed(op) else "fptoui.sat"
    if not _is_narrow(src_t):
        src = llvm_type(src_t)
        _map(k, op, lambda a: k.b.call(dst, f"llvm.{base}.{dst}.{_suffix(src)}", [(src, a[0])]))
        return
    _require_narrow(k, op, src_t)

    def convert(a: list[str]) -> str:
        v, ty = _from_narrow(k, a[0], src_t.name)
        f = _float_convert(k, v, ty, "float")  # exact
        return k.b.call(dst, f"llvm.{base}.{dst}.f32", [("float", f)])
    _map(k, op, convert)


def _require_narrow(k: KernelLowering, op: Operation, t: ScalarType) -> None:
    from .features import require

    require(op, t.name, k.sm, k.gpu)


_FLOAT_RANK = {"half": 1, "bfloat": 1, "float": 2, "double": 3}


class _IntrinsicCodec:
    """A narrow float format NVVM converts with intrinsics on pairs: (to-format intrinsic,
    from-format intrinsic, the 16-bit float type that holds its values exactly). `bytes`: the
    pair comes back as two bytes (fp8, e8m0), not two nibbles of one (fp4)."""

    def __init__(self, to: str, back: str, half: str, to_upward: str = "", bytes: bool = True) -> None:
        self.to, self.back, self.half, self.to_upward, self.bytes = to, back, half, to_upward, bytes

    def encode(self, k: KernelLowering, f: str, mode: str) -> str:
        return self.encode_pair(k, "0.0", f, mode)[0]

    def encode_pair(self, k: KernelLowering, hi: str, lo: str, mode: str) -> tuple[str, str]:
        """Two f32 values in one conversion: (the byte of `lo`, the byte of `hi`, if any: "" when
        `hi` is the 0.0 pad, or the format packs nibbles)."""
        intrinsic = self.to_upward if mode == "positive_inf" and self.to_upward else self.to
        pair = k.b.call("i16", intrinsic, [("float", hi), ("float", lo)])
        high = k.b.op(f"lshr i16 {pair}, 8", "x") if hi != "0.0" and self.bytes else ""
        return k.b.op(f"trunc i16 {pair} to i8", "x"), k.b.op(f"trunc i16 {high} to i8", "x") if high else ""

    def decode(self, k: KernelLowering, v: str) -> tuple[str, str]:
        wide = k.b.op(f"zext i8 {v} to i16", "x")
        pair = k.b.call(f"<2 x {self.half}>", self.back, [("i16", wide)])
        return k.b.op(f"extractelement <2 x {self.half}> {pair}, i32 0", "x"), self.half


class _AsmCodec:
    """fnv8E5M3FNU: no LLVM intrinsic, inline PTX (ue5m3.py)."""

    def encode(self, k: KernelLowering, f: str, mode: str) -> str:
        return ue5m3.from_f32(k.b, f)

    def decode(self, k: KernelLowering, v: str) -> tuple[str, str]:
        return ue5m3.to_bf16(k.b, v), "bfloat"


# Narrow float formats, stored as one byte, and how to convert them (from and to f32)
_NARROW: dict[str, "_IntrinsicCodec | _AsmCodec"] = {
    "f8E4M3FN": _IntrinsicCodec("llvm.nvvm.ff.to.e4m3x2.rn", "llvm.nvvm.e4m3x2.to.f16x2.rn", "half"),
    "f8E5M2": _IntrinsicCodec("llvm.nvvm.ff.to.e5m2x2.rn", "llvm.nvvm.e5m2x2.to.f16x2.rn", "half"),
    # e8m0 rounds toward zero, or toward +inf when asked
    "f8E8M0FNU": _IntrinsicCodec("llvm.nvvm.ff.to.ue8m0x2.rz", "llvm.nvvm.ue8m0x2.to.bf16x2", "bfloat",
                                 "llvm.nvvm.ff.to.ue8m0x2.rp"),
    "f4E2M1FN": _IntrinsicCodec("llvm.nvvm.ff.to.e2m1x2.rn.satfinite", "llvm.nvvm.e2m1x2.to.f16x2.rn", "half",
                                bytes=False),
    "fnv8E5M3FNU": _AsmCodec(),
}


def _float_convert(k: KernelLowering, v: str, src: str, dst: str) -> str:
    """Convert between the LLVM float types half, bfloat, float and double."""
    if src == dst:
        return v
    if {src, dst} == {"half", "bfloat"}:
        wide = k.b.op(f"fpext {src} {v} to float", "x")
        return k.b.op(f"fptrunc float {wide} to {dst}", "x")
    instr = "fpext" if _FLOAT_RANK[dst] > _FLOAT_RANK[src] else "fptrunc"
    return k.b.op(f"{instr} {src} {v} to {dst}", "x")


def _from_narrow(k: KernelLowering, v: str, fmt: str) -> tuple[str, str]:
    """A narrow-format byte -> (its exact value, that value's LLVM type: half or bfloat)."""
    return _NARROW[fmt].decode(k, v)


def _to_narrow(k: KernelLowering, v: str, src: str, fmt: str, mode: str = "nearest_even") -> str:
    """A half/bfloat/float/double value -> the narrow-format byte (saturating to finite)."""
    # f64 -> f32 rounds to odd, so the second rounding into the narrow format is the only one
    f = _round_to_odd_f32(k, v) if src == "double" else _float_convert(k, v, src, "float")
    return _NARROW[fmt].encode(k, f, mode)


def _round_to_odd_f32(k: KernelLowering, v: str) -> str:
    """f64 -> f32 truncated, with the lowest bit set when inexact (round to odd)."""
    t = _narrow_directed(k, v, "double", "float", "rz")
    back = k.b.op(f"fpext float {t} to double", "ro")
    inexact = k.b.op(f"fcmp une double {back}, {v}", "ro")
    bits = k.b.op(f"bitcast float {t} to i32", "ro")
    sticky = k.b.op(f"zext i1 {inexact} to i32", "ro")
    return k.b.op(f"bitcast i32 {k.b.op(f'or i32 {bits}, {sticky}', 'ro')} to float", "ro")


def _is_narrow(t: ScalarType) -> bool:
    return t.name in _NARROW


def _ftof(k: KernelLowering, op: Operation) -> None:
    src_t = element_of(op.operands[0].type)
    dst_t = _elem(op)
    shared = k.get(op.operands[0])
    if isinstance(shared, SharedTileVal):  # a staged f32 mma operand read as tf32: rounded in its fragments
        k.set(op.results[0], replace(shared, type=op.results[0].type,
                                     tf32=str(op.attributes.get("rounding_mode", "nearest_even"))))
        return
    assert isinstance(src_t, ScalarType)
    for t in (src_t, dst_t):
        if _is_narrow(t):
            _require_narrow(k, op, t)
    src, dst = llvm_type(src_t), llvm_type(dst_t)

    mode = str(op.attributes.get("rounding_mode", "nearest_even"))

    def convert(a: list[str]) -> str:
        v, ty = a[0], src
        if src_t.name == dst_t.name:
            return v
        if _is_narrow(src_t):
            v, ty = _from_narrow(k, v, src_t.name)
        if _is_narrow(dst_t):
            return _to_narrow(k, v, ty, dst_t.name, mode)
        if dst_t.name == "tf32":
            return _round_to_tf32(k, _float_convert(k, v, ty, "float"), mode)
        if mode in _DIRECTED and _FLOAT_RANK.get(dst, 0) < _FLOAT_RANK.get(ty, 0):
            return _narrow_directed(k, v, ty, dst, _DIRECTED[mode])
        return _float_convert(k, v, ty, dst)
    codec = _NARROW.get(dst_t.name)
    if isinstance(codec, _IntrinsicCodec) and codec.bytes and src in ("half", "bfloat", "float") \
            and not _is_narrow(src_t):
        _to_narrow_pairs(k, op, codec, src, mode)  # two elements per cvt, as NVIDIA's
        return
    _map(k, op, convert)


def _to_narrow_pairs(k: KernelLowering, op: Operation, codec: "_IntrinsicCodec", src: str, mode: str) -> None:
    """An elementwise conversion into a paired narrow format: slots 2i and 2i+1 share one cvt."""
    slots = k.tile(op.operands[0]).slots
    wide = [_float_convert(k, v, src, "float") for v in slots]
    out: list[str] = []
    for i in range(0, len(wide) - 1, 2):
        out.extend(codec.encode_pair(k, wide[i + 1], wide[i], mode))
    if len(wide) % 2:
        out.append(codec.encode(k, wide[-1], mode))
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    k.set(op.results[0], TileRegs(rtype, out))


# Directed rounding of a narrowing float conversion: PTX cvt's rounding modifiers.
_DIRECTED = {"zero": "rz", "negative_inf": "rm", "positive_inf": "rp"}
_ASM_REG = {"half": ("h", "i16"), "bfloat": ("h", "i16"), "float": ("f", "float"), "double": ("d", "double")}
_PTX_FLOAT = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}


def _narrow_directed(k: KernelLowering, v: str, src: str, dst: str, rnd: str) -> str:
    if src == "double" and dst in ("half", "bfloat"):
        # f64 -> f32 -> f16 rounds twice; exact for truncation, and the only narrowing
        # modes the dialect allows are nearest-even and toward zero
        v = _narrow_directed(k, v, "double", "float", rnd)
        src = "float"
    out_c, out_ty = _ASM_REG[dst]
    in_c, _ = _ASM_REG[src]
    bits = k.b.op(f'call {out_ty} asm "cvt.{rnd}.{_PTX_FLOAT[dst]}.{_PTX_FLOAT[src]} $0, $1;", '
                  f'"={out_c},{in_c}"({src} {v})', "cv")
    return k.b.op(f"bitcast i16 {bits} to {dst}", "cv") if out_ty == "i16" else bits


def _round_to_tf32(k: KernelLowering, v: str, mode: str) -> str:
    """An f32 rounded to tf32 precision (10 mantissa bits), kept in f32 storage: one cvt.rn.tf32.f32
    where the target has it (ties to even, infinities and NaN kept: what the integer sequence below
    computes in seven instructions; a tf32 mma operand rounded in shared memory every K step)."""
    if mode not in ("zero", "nearest_away") and k.caps.has("cvt_tf32_rn"):
        word = k.b.op(f'call i32 asm "cvt.rn.tf32.f32 $0, $1;", "=r,f"(float {v})', "tf")
        return k.b.op(f"bitcast i32 {word} to float", "tf")
    bits = k.b.op(f"bitcast float {v} to i32", "tf")
    if mode in ("zero",):
        rounded = bits
    elif mode == "nearest_away":  # ties away from zero: add half an ulp to the magnitude
        rounded = k.b.op(f"add i32 {bits}, 4096", "tf")
    else:  # nearest, ties to even: add half an ulp (minus one when the kept lsb is 0)
        lsb = k.b.op(f"and i32 {k.b.op(f'lshr i32 {bits}, 13', 'tf')}, 1", "tf")
        bias = k.b.op(f"add i32 {lsb}, 4095", "tf")
        rounded = k.b.op(f"add i32 {bits}, {bias}", "tf")
    masked = k.b.op(f"and i32 {rounded}, -8192", "tf")          # clear the low 13 bits
    exp = k.b.op(f"and i32 {bits}, 2139095040", "tf")           # 0x7F800000
    special = k.b.op(f"icmp eq i32 {exp}, 2139095040", "tf")     # inf and NaN pass through unchanged
    chosen = k.b.op(f"select i1 {special}, i32 {bits}, i32 {masked}", "tf")
    return k.b.op(f"bitcast i32 {chosen} to float", "tf")


def _bitcast(k: KernelLowering, op: Operation) -> None:
    src = llvm_type(element_of(op.operands[0].type))
    dst = llvm_type(_elem(op))
    if src == dst:
        _map(k, op, lambda a: a[0])
    elif "ptr" in src:
        _map(k, op, lambda a: k.b.op(f"ptrtoint {src} {a[0]} to {dst}", "x"))
    elif "ptr" in dst:
        _map(k, op, lambda a: k.b.op(f"inttoptr {src} {a[0]} to {dst}", "x"))
    else:
        _map(k, op, lambda a: k.b.op(f"bitcast {src} {a[0]} to {dst}", "x"))


def _ptr_to_int(k: KernelLowering, op: Operation) -> None:
    _map(k, op, lambda a: k.b.op(f"ptrtoint ptr {a[0]} to i64", "x"))


def _int_to_ptr(k: KernelLowering, op: Operation) -> None:
    """A generic pointer; where the kernel has no `alloca` (whose shared addresses could come back
    through an integer), every pointer it can make is a global one: made in the global space and
    cast, so that LLVM's address-space inference gives its accesses st.global / ld.global (a
    generic access is slower, and a table of pointers, as group GEMM's, would make every store
    one)."""
    if pointers_all_global(k):
        _map(k, op, lambda a: k.b.op(f"addrspacecast ptr addrspace(1) "
                                     f"{k.b.op(f'inttoptr i64 {a[0]} to ptr addrspace(1)', 'x')} to ptr", "x"))
    else:
        _map(k, op, lambda a: k.b.op(f"inttoptr i64 {a[0]} to ptr", "x"))


def pointers_all_global(k: KernelLowering) -> bool:
    """Whether every pointer of the kernel is a global one: no alloca (whose shared buffer it could point into)."""
    held = getattr(k, "_global_only", None)
    if held is None:
        held = k._global_only = not any(o.name == "cuda_tile.alloca" for o in k.entry.walk())  # type: ignore[attr-defined]
    return held


def _ptr_to_ptr(k: KernelLowering, op: Operation) -> None:
    _map(k, op, lambda a: a[0])


LOWERINGS = {
    "cuda_tile.addf": _float_binary, "cuda_tile.subf": _float_binary,
    "cuda_tile.mulf": _float_binary, "cuda_tile.divf": _float_binary,
    "cuda_tile.fma": _fma,
    "cuda_tile.maxf": _float_minmax, "cuda_tile.minf": _float_minmax,
    "cuda_tile.absf": _unary_float("fabs"), "cuda_tile.negf": _negf,
    "cuda_tile.floor": _unary_float("floor"), "cuda_tile.ceil": _unary_float("ceil"),
    "cuda_tile.addi": _int_binary("add"), "cuda_tile.subi": _int_binary("sub"),
    "cuda_tile.muli": _int_binary("mul"), "cuda_tile.divi": _divi,
    "cuda_tile.remi": _int_binary("srem", "urem"),
    "cuda_tile.andi": _int_binary("and"), "cuda_tile.ori": _int_binary("or"), "cuda_tile.xori": _int_binary("xor"),
    "cuda_tile.shli": _shift, "cuda_tile.shri": _shift,
    "cuda_tile.maxi": _minmax_i, "cuda_tile.mini": _minmax_i,
    "cuda_tile.absi": _absi, "cuda_tile.negi": _negi, "cuda_tile.mulhii": _mulhii,
    "cuda_tile.cmpi": _cmpi, "cuda_tile.cmpf": _cmpf, "cuda_tile.select": _select,
    "cuda_tile.exti": _exti, "cuda_tile.trunci": _trunci, "cuda_tile.itof": _itof, "cuda_tile.ftoi": _ftoi,
    "cuda_tile.ftof": _ftof, "cuda_tile.bitcast": _bitcast,
    "cuda_tile.ptr_to_int": _ptr_to_int, "cuda_tile.int_to_ptr": _int_to_ptr, "cuda_tile.ptr_to_ptr": _ptr_to_ptr,
}
