"""Floating-point arithmetic: f16/bf16 (scalar and packed x2), f32 and f64.

Round-to-nearest f32/f64 add, sub, mul, div and sqrt are IEEE-exact through
numpy; fma and the directed modes (.rz/.rm/.rp) use error-free transforms
(two_sum/two_prod) and `fpmath.round_to`, so they are correctly rounded too.
`.approx` functions (ex2, lg2, sin, cos, rcp, rsqrt, tanh, div.approx) are
computed in float64 and rounded once: more accurate than the hardware, whose
error bounds the differential tests allow for. No contraction of mul+add
into fma happens here (ptxas may contract `mul.f32`/`add.f32` without `.rn`).
"""

from __future__ import annotations

from typing import Any, Callable

from ..fpmath import fma64, ftz32, round_to, step_f64, two_prod, two_sum
from ..parser import Instr
from ..program import K_OP, Decoder, Mods, bad
from ..ptxtypes import np_dtype
from .common import full

ROUND = ("rn", "rz", "rm", "rp")
HALF = {"f16": "f16", "bf16": "bf16", "f16x2": "f16", "bf16x2": "bf16", "f32x2": "f32"}
# packed type -> register type holding the pair
PACKED = {"f16x2": "b32", "bf16x2": "b32", "f32x2": "b64"}


def _np() -> Any:
    import numpy as np

    return np


# --- rounding of exact results -----------------------------------------------

def finish(s: Any, e: Any, target: str, mode: str) -> Any:
    """Round float64 `s` (+ residual `e`, or None if exact) to `target` values (as target dtype)."""
    np = _np()
    dt = np_dtype(target)
    if target == "f64":
        return s if mode == "rn" or e is None else step_f64(s, e, mode)
    if mode == "rn" and target in ("f32", "f16"):
        r = np.asarray(s).astype(dt)
        if e is not None:
            # the residual only matters where s sits exactly halfway between two target values
            # (numpy's float64 -> target cast rounds s itself correctly everywhere else)
            low_bits, tiny = (29, 2.0 ** -126) if target == "f32" else (42, 2.0 ** -14)
            raw = np.asarray(s, dtype=np.float64).view(np.uint64)
            halfway = (raw & np.uint64((1 << low_bits) - 1)) == np.uint64(1 << (low_bits - 1))
            risky = (halfway | (np.abs(s) < tiny)) & (np.asarray(e) != 0)
            if risky.any():
                fixed = round_to(s, target, "rn", e).astype(dt)
                r = np.where(risky, fixed, r)
        return r
    return round_to(s, target, mode, e).astype(dt)


def _sign(x: Any) -> Any:
    return _np().sign(x)


def _zero_sum(r: Any, s: Any, e: Any, x: Any, y: Any, mode: str) -> Any:
    """`r` with IEEE's sign for an exact zero sum x + y (s + e == 0): that of round-to-nearest,
    except that .rm makes it -0 unless both addends are +0."""
    np = _np()
    zero = (s == 0) & (e == 0)
    if not zero.any():
        return r
    signed = -((-x) + (-y)) if mode == "rm" else x + y
    return np.where(zero, np.asarray(signed).astype(r.dtype), r)


def exact_op(op: str, args: list, mode: str, target: str) -> Any:
    """`op` of float64 arguments, correctly rounded to `target` under `mode`."""
    np = _np()
    if op in ("add", "sub"):
        a, b = args
        b = b if op == "add" else -b
        s, e = two_sum(a, b)
        bad_ = ~np.isfinite(s)
        if bad_.any():
            e = np.where(bad_, 0.0, e)
        return _zero_sum(finish(s, e, target, mode), s, e, a, b, mode)
    if op == "mul":
        a, b = args
        if target != "f64":
            return finish(a * b, None, target, mode)
        p, e = two_prod(a, b)
        return finish(p, np.where(np.isfinite(e), e, 0.0), target, mode)
    if op in ("fma", "mad"):
        a, b, c = args
        if target != "f64":
            p = a * b
            s, e = two_sum(p, c)
            e = np.where(np.isfinite(e), e, 0.0)
            return _zero_sum(finish(s, e, target, mode), s, e, p, c, mode)
        r, e = fma64(a, b, c)
        e = np.where(np.isfinite(e), e, 0.0)
        return _zero_sum(finish(r, e, target, mode), r, e, a * b, c, mode)
    if op in ("div", "rcp"):
        a, b = (np.float64(1.0), args[0]) if op == "rcp" else args
        q = a / b
        if mode == "rn" and target == "f64":
            return q
        p, pe = two_prod(q, b)
        rem = (a - p) - pe
        err = np.where(np.isfinite(q) & np.isfinite(rem), _sign(rem) * _sign(b), 0.0)
        return finish(q, err, target, mode)
    if op == "sqrt":
        (a,) = args
        s = np.sqrt(a)
        if mode == "rn" and target == "f64":
            return s
        p, pe = two_prod(s, s)
        rem = (a - p) - pe
        err = np.where(np.isfinite(s) & np.isfinite(rem), _sign(rem), 0.0)
        return finish(s, err, target, mode)
    raise AssertionError(op)


# --- type plumbing -----------------------------------------------------------

def _flush(ty: str) -> Callable[[Any], Any]:
    np = _np()
    if ty == "f32":
        return ftz32
    if ty == "f16":
        tiny = np.float16(6.1035156e-05)
        return lambda x: np.where((np.abs(x) < tiny) & (x != 0), np.copysign(np.float16(0), x), x).astype(np.float16)
    if ty == "bf16":
        import ml_dtypes

        tiny = 1.1754944e-38

        def f(x: Any) -> Any:
            x32 = np.asarray(x).astype(np.float32)
            return np.where((np.abs(x32) < tiny) & (x32 != 0), np.copysign(np.float32(0), x32), x32).astype(
                ml_dtypes.bfloat16)

        return f
    return lambda x: x


def _saturate(x: Any) -> Any:
    np = _np()
    dt = x.dtype
    x32 = np.asarray(x).astype(np.float64)
    return np.where(np.isnan(x32), 0.0, np.clip(x32, 0.0, 1.0)).astype(dt)


def _relu(x: Any) -> Any:
    np = _np()
    dt = x.dtype
    x64 = np.asarray(x).astype(np.float64)
    return np.where(np.isnan(x64), np.nan, np.where(x64 < 0, 0.0, x64)).astype(dt)


def _float_node(dec: Decoder, ins: Instr, ty: str, nsrc: int, compute: Callable[..., Any]) -> tuple:
    """Wire an elementwise float computation on scalar types or packed x2 types."""
    np = _np()
    ops = ins.operands
    if len(ops) != nsrc + 1:
        raise bad(ins, f"expected {nsrc + 1} operands")
    if ty in PACKED:
        hdt = np_dtype(HALF[ty])
        reg = PACKED[ty]
        raw = np_dtype(reg)
        readers = [dec.reader(op, reg, ins) for op in ops[1:]]
        w = dec.writer_t(ops[0], reg, ins)

        def packed(st: Any, m: Any) -> None:
            args = [np.ascontiguousarray(full(st, r(st)).astype(raw)).view(hdt) for r in readers]
            out = np.asarray(compute(*args)).astype(hdt)
            w.put(st, m, np.ascontiguousarray(out).view(raw))

        return (K_OP, packed, None)
    readers = [dec.reader(op, ty, ins) for op in ops[1:]]
    w = dec.writer_t(ops[0], ty, ins)
    if nsrc == 1:
        (ra,) = readers

        def f1(st: Any, m: Any) -> None:
            w.put(st, m, compute(ra(st)))

        return (K_OP, f1, None)
    if nsrc == 2:
        ra, rb = readers

        def f2(st: Any, m: Any) -> None:
            w.put(st, m, compute(ra(st), rb(st)))

        return (K_OP, f2, None)

    def fn(st: Any, m: Any) -> None:
        w.put(st, m, compute(*[r(st) for r in readers]))

    return (K_OP, fn, None)


def _wrap(base: Callable[..., Any], ty: str, ftz: bool, sat: bool, relu: bool = False) -> Callable[..., Any]:
    """Add input/output flushing, saturation and relu around a computation."""
    flush = _flush(HALF.get(ty, ty)) if ftz else None
    if flush is None and not sat and not relu:
        return base

    def f(*args: Any) -> Any:
        if flush is not None:
            args = tuple(flush(a) for a in args)
        r = base(*args)
        if flush is not None:
            r = flush(r)
        if sat:
            r = _saturate(r)
        if relu:
            r = _relu(r)
        return r

    return f


# --- arithmetic -----------------------------------------------------------------

_NSRC = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "mad": 3}


def _arith(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        types = mods.types()
        if len(types) == 2 and op in ("add", "sub", "fma"):
            return _mixed(dec, ins, op, types, mods)
        if len(types) != 1:
            raise bad(ins, "expected exactly one type modifier")
        ty = types[0]
        if ty not in ("f16", "bf16", "f16x2", "bf16x2", "f32", "f32x2", "f64"):
            raise bad(ins, f"unsupported type .{ty}")
        if ty == "f32x2" and op not in ("add", "sub", "mul", "fma"):
            raise bad(ins, f"{op} has no .f32x2 form")
        ftz = mods.flag("ftz")
        sat = mods.flag("sat")
        relu = mods.flag("relu")
        oob = mods.flag("oob")
        if op == "div":
            kind = mods.one(("approx", "full", "rn", "rz", "rm", "rp"))
            if kind is None:
                raise bad(ins, "div needs .approx, .full or a rounding mode")
            mods.done()
            if kind in ("approx", "full"):
                target = ty

                def divide(a: Any, b: Any) -> Any:
                    return (np.asarray(a).astype(np.float64) / b).astype(np_dtype(target))

                return _float_node(dec, ins, ty, 2, _wrap(divide, ty, ftz, sat))
            mode = kind
        else:
            mode = mods.one(ROUND, "rn")
            mods.done()
        del oob
        scalar = HALF.get(ty, ty)
        nsrc = _NSRC[op]
        if op == "mad" and ty == "f32" and "rn" not in ins.mods and mode == "rn":
            pass   # mad.f32 is an fma on every supported target
        if scalar == "f32" and mode == "rn" and op in ("add", "sub", "mul", "div"):
            f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
            return _float_node(dec, ins, ty, nsrc, _wrap(f, ty, ftz, sat))
        if scalar == "f64" and mode == "rn" and op in ("add", "sub", "mul", "div"):
            f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op]
            return _float_node(dec, ins, ty, nsrc, f)

        def compute(*args: Any) -> Any:
            wide = [np.asarray(a).astype(np.float64) for a in args]
            return exact_op(op, wide, mode, scalar)

        return _float_node(dec, ins, ty, nsrc, _wrap(compute, ty, ftz, sat, relu))

    return handler


def _mixed(dec: Decoder, ins: Instr, op: str, types: list[str], mods: Mods) -> tuple:
    """Mixed-precision add/sub/fma (sm_100+): `.f32.f16` / `.f32.bf16`, the f16 or bf16 sources (a,
    and b of an fma) widened exactly, the f32 source c added, the result rounded once to f32."""
    np = _np()
    if types[0] != "f32" or types[1] not in ("f16", "bf16"):
        raise bad(ins, f"unsupported types .{types[0]}.{types[1]}")
    mode = mods.one(ROUND, "rn")
    sat = mods.flag("sat")
    mods.done()
    ops = ins.operands
    narrow = 2 if op == "fma" else 1
    if len(ops) != narrow + 2:
        raise bad(ins, f"expected {narrow + 2} operands")
    readers = [dec.reader(o, types[1] if i < narrow else "f32", ins) for i, o in enumerate(ops[1:])]
    w = dec.writer_t(ops[0], "f32", ins)

    def compute(st: Any, m: Any) -> None:
        wide = [np.asarray(r(st)).astype(np.float64) for r in readers]
        out = np.asarray(exact_op(op, wide, mode, "f32")).astype(np.float32)
        w.put(st, m, np.clip(np.nan_to_num(out, nan=0.0), 0.0, 1.0).astype(np.float32) if sat else out)

    return (K_OP, compute, None)


def _minmax(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        ty = mods.type1()
        ftz = mods.flag("ftz")
        nan = mods.flag("NaN")
        xorsign = mods.flag("xorsign")
        if xorsign:
            mods.need(("abs",), ".abs")
        mods.done()
        nsrc = len(ins.operands) - 1
        dt = np_dtype(HALF.get(ty, ty))

        def pair(a: Any, b: Any) -> Any:
            a64, b64 = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
            if xorsign:
                sign = np.signbit(a64) ^ np.signbit(b64)
                a64, b64 = np.abs(a64), np.abs(b64)
            if nan:
                r = np.minimum(a64, b64) if op == "min" else np.maximum(a64, b64)
            else:
                r = np.fmin(a64, b64) if op == "min" else np.fmax(a64, b64)
            both_zero = (a64 == 0) & (b64 == 0)
            if both_zero.any():
                neg = (np.signbit(a64) | np.signbit(b64)) if op == "min" else (np.signbit(a64) & np.signbit(b64))
                r = np.where(both_zero, np.where(neg, -0.0, 0.0), r)
            if xorsign:
                r = np.where(sign, -np.abs(r), np.abs(r))
            return r.astype(dt)

        def reduce(*args: Any) -> Any:
            r = pair(args[0], args[1])
            for x in args[2:]:
                r = pair(r, x)
            return r

        return _float_node(dec, ins, ty, nsrc, _wrap(reduce, ty, ftz, False))

    return handler


def _sign_op(op: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        ty = mods.type1()
        ftz = mods.flag("ftz")
        mods.done()
        scalar = HALF.get(ty, ty)
        dt = np_dtype(scalar)
        bits = dt.itemsize * 8
        from ..ptxtypes import uint_dtype

        ut = uint_dtype(bits)
        sign = ut.type(1 << (bits - 1))

        def f(a: Any) -> Any:
            raw = np.asarray(a).view(ut)
            out = raw ^ sign if op == "neg" else raw & ~sign
            return out.view(dt)

        return _float_node(dec, ins, ty, 1, _wrap(f, ty, ftz, False))

    return handler


# --- special functions -------------------------------------------------------------

def _approx_fn(name: str) -> Callable[[Any], Any]:
    np = _np()
    return {
        "ex2": np.exp2,
        "lg2": np.log2,
        "sin": np.sin,
        "cos": np.cos,
        "tanh": np.tanh,
        "rcp": lambda x: 1.0 / x,
        "rsqrt": lambda x: 1.0 / np.sqrt(x),
        "sqrt": np.sqrt,
    }[name]


def _special(name: str) -> Callable[[Decoder, Instr], Any]:
    def handler(dec: Decoder, ins: Instr) -> Any:
        np = _np()
        mods = Mods(ins)
        ty = mods.type1()
        ftz = mods.flag("ftz")
        approx = mods.flag("approx")
        mode = mods.one(ROUND)
        mods.done()
        scalar = HALF.get(ty, ty)
        dt = np_dtype(scalar)
        if not approx and mode is None:
            raise bad(ins, f"{name} needs .approx or a rounding mode")
        if mode is not None and name in ("rcp", "sqrt"):
            op = name

            def exact(a: Any) -> Any:
                return exact_op(op, [np.asarray(a).astype(np.float64)], mode, scalar)

            return _float_node(dec, ins, ty, 1, _wrap(exact, ty, ftz, False))
        if mode is not None:
            raise bad(ins, f"{name} has no rounding-mode form")
        fn = _approx_fn(name)

        def approx_f(a: Any) -> Any:
            return fn(np.asarray(a).astype(np.float64)).astype(dt)

        return _float_node(dec, ins, ty, 1, _wrap(approx_f, ty, ftz, False))

    return handler


def _testp(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    test = mods.need(("finite", "infinite", "number", "notanumber", "normal", "subnormal"), "test")
    mods.done()
    ra = dec.reader(ins.operands[1], ty, ins)
    w = dec.writer_t(ins.operands[0], "pred", ins)
    tiny = np.finfo(np_dtype(ty)).tiny

    def fn(st: Any, m: Any) -> None:
        a = np.asarray(ra(st))
        r = {
            "finite": lambda: np.isfinite(a),
            "infinite": lambda: np.isinf(a),
            "number": lambda: ~np.isnan(a),
            "notanumber": lambda: np.isnan(a),
            "normal": lambda: np.isfinite(a) & (np.abs(a) >= tiny),
            "subnormal": lambda: (np.abs(a) < tiny) & (a != 0),
        }[test]()
        w.put(st, m, r)

    return (K_OP, fn, None)


def _copysign(dec: Decoder, ins: Instr) -> Any:
    np = _np()
    mods = Mods(ins)
    ty = mods.type1()
    mods.done()
    # copysign d, a, b: the magnitude of b with the sign of a
    return _float_node(dec, ins, ty, 2, lambda a, b: np.copysign(b, a))


FLOAT_HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "add": _arith("add"), "sub": _arith("sub"), "mul": _arith("mul"), "div": _arith("div"),
    "fma": _arith("fma"), "mad": _arith("mad"),
    "min": _minmax("min"), "max": _minmax("max"),
    "neg": _sign_op("neg"), "abs": _sign_op("abs"),
    "rem": lambda dec, ins: (_ for _ in ()).throw(bad(ins, "rem has no float form")),
}

HANDLERS: dict[str, Callable[[Decoder, Instr], Any]] = {
    "fma": FLOAT_HANDLERS["fma"],
    "ex2": _special("ex2"), "lg2": _special("lg2"), "sin": _special("sin"), "cos": _special("cos"),
    "tanh": _special("tanh"), "rcp": _special("rcp"), "rsqrt": _special("rsqrt"), "sqrt": _special("sqrt"),
    "testp": _testp, "copysign": _copysign,
}
