"""PTX emulator: each instruction family against values computed independently in numpy/Python.

Every test builds a tiny kernel in which thread i loads inputs a[i], b[i], c[i],
runs the instruction(s) under test and stores d[i]; exact rounding is checked
against Python `Fraction` arithmetic.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tileiras.emulator import EmulatorError
from tileiras.emulator.host import emulate

N = 64
RNG = np.random.default_rng(20240607)

PTX_TYPES = {np.dtype(np.int8): "s8", np.dtype(np.uint8): "u8", np.dtype(np.int16): "s16",
             np.dtype(np.uint16): "u16", np.dtype(np.int32): "s32", np.dtype(np.uint32): "u32",
             np.dtype(np.int64): "s64", np.dtype(np.uint64): "u64", np.dtype(np.float16): "b16",
             np.dtype(ml_dtypes.bfloat16): "b16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
REG_CLASS = {8: ".b16", 16: ".b16", 32: ".b32", 64: ".b64"}


def elementwise(body: str, inputs: dict, out_dtype: object, n: int = N, regs: str = "",
                out_name: str = "d", out_reg_type: str | None = None) -> np.ndarray:
    """Run `body` with %a, %b, %c loaded from the input arrays (one element per thread) and store %d."""
    out_dtype = np.dtype(out_dtype)
    names = list(inputs)
    params = ",\n".join([".param .u64 out"] + [f".param .u64 in_{k}" for k in names])
    decls = []
    loads = []
    for k in names:
        arr = inputs[k]
        bits = arr.dtype.itemsize * 8
        decls.append(f".reg {REG_CLASS[bits]} %{k};")
        loads.append(f"""ld.param.u64 %rd1, [in_{k}];
    mul.wide.u32 %rd2, %r0, {arr.dtype.itemsize};
    add.s64 %rd3, %rd1, %rd2;
    ld.global.{PTX_TYPES[arr.dtype] if arr.dtype.itemsize > 1 else PTX_TYPES[arr.dtype]} %{k}, [%rd3];""")
    obits = out_dtype.itemsize * 8
    decls.append(f".reg {out_reg_type or REG_CLASS[obits]} %{out_name};")
    store_type = {1: "b8", 2: "b16", 4: "b32", 8: "b64"}[out_dtype.itemsize]
    if out_dtype == np.bool_:
        store_type = "b8"
    ptx = f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k({params})
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .pred %p<8>;
    .reg .b32 %t<16>;
    .reg .b64 %tl<8>;
    .reg .b16 %th<8>;
    {' '.join(decls)}
    {regs}
    mov.u32 %r0, %tid.x;
    {chr(10).join(loads)}
    {body}
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r0, {out_dtype.itemsize};
    add.s64 %rd3, %rd1, %rd2;
    st.global.{store_type} [%rd3], %{out_name};
    ret;
}}
"""
    args = [np.zeros(n, dtype=out_dtype)] + [inputs[k] for k in names]
    outs, _ = emulate(ptx, "k", (1, 1, 1), (n, 1, 1), args)
    return outs[0]


def ints(dtype: object, n: int = N, special: tuple = ()) -> np.ndarray:
    info = np.iinfo(dtype)
    v = RNG.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    v[:len(special)] = special
    return v


def floats(dtype: object, n: int = N, scale: float = 10.0, special: tuple = ()) -> np.ndarray:
    v = (RNG.standard_normal(n) * scale).astype(dtype)
    v[:len(special)] = special
    return v


def as_u(v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(v).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[v.dtype.itemsize])


def wrap(values: list | np.ndarray, dtype: object) -> np.ndarray:
    dt = np.dtype(dtype)
    bits = dt.itemsize * 8
    out = np.array([int(v) & ((1 << bits) - 1) for v in values], dtype=np.uint64)
    return out.astype({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]).view(dt)


# --- exact rounding reference (Python Fractions) ----------------------------------

FORMATS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "tf32": (8, 10), "f64": (11, 52)}


def ref_round(x: Fraction, fmt: str, mode: str) -> float:
    """Round an exact rational to `fmt` (IEEE, with subnormals and overflow) under `mode`."""
    ebits, mbits = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    emin, emax = 1 - bias, bias
    max_finite = Fraction(2 ** (mbits + 1) - 1, 2 ** mbits) * Fraction(2) ** emax
    if x == 0:
        return 0.0
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = math.floor(math.log2(a.numerator) - math.log2(a.denominator))
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    q = Fraction(2) ** (max(e, emin) - mbits)
    lo = (a // q) * q
    hi = lo + q
    if lo == a:
        r = a
    elif mode == "rz" or (mode == "rm" and sign > 0) or (mode == "rp" and sign < 0):
        r = lo
    elif mode in ("rp", "rm"):
        r = hi
    elif mode == "rna":
        r = hi if a - lo >= hi - a else lo
    else:
        if a - lo < hi - a:
            r = lo
        elif a - lo > hi - a:
            r = hi
        else:
            r = lo if (lo / q) % 2 == 0 else hi
    if r > max_finite:
        away = mode in ("rn", "rna") or (mode == "rp" and sign > 0) or (mode == "rm" and sign < 0)
        return sign * math.inf if away else sign * float(max_finite)
    return sign * float(r)


# --- integer arithmetic -----------------------------------------------------------

INT_TYPES = [np.int32, np.uint32, np.int64, np.uint64, np.int16, np.uint16]


@pytest.mark.parametrize("dtype", INT_TYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul.lo", "min", "max", "and", "or", "xor"])
def test_integer_binary(dtype: object, op: str) -> None:
    t = PTX_TYPES[np.dtype(dtype)]
    if op in ("and", "or", "xor"):
        t = "b" + t[1:]
    a, b = ints(dtype), ints(dtype)
    got = elementwise(f"{op}.{t} %d, %a, %b;", {"a": a, "b": b}, dtype)
    pa, pb = [int(x) for x in a], [int(x) for x in b]
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul.lo": lambda x, y: x * y,
         "min": min, "max": max, "and": lambda x, y: x & y, "or": lambda x, y: x | y,
         "xor": lambda x, y: x ^ y}[op]
    np.testing.assert_array_equal(got, wrap([f(x, y) for x, y in zip(pa, pb)], dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_mul_hi_and_mad(dtype: object) -> None:
    t = PTX_TYPES[np.dtype(dtype)]
    bits = np.dtype(dtype).itemsize * 8
    a, b, c = ints(dtype), ints(dtype), ints(dtype)
    pa, pb, pc = [int(x) for x in a], [int(x) for x in b], [int(x) for x in c]
    got = elementwise(f"mul.hi.{t} %d, %a, %b;", {"a": a, "b": b}, dtype)
    np.testing.assert_array_equal(got, wrap([(x * y) >> bits for x, y in zip(pa, pb)], dtype))
    got = elementwise(f"mad.lo.{t} %d, %a, %b, %c;", {"a": a, "b": b, "c": c}, dtype)
    np.testing.assert_array_equal(got, wrap([x * y + z for x, y, z in zip(pa, pb, pc)], dtype))
    got = elementwise(f"mad.hi.{t} %d, %a, %b, %c;", {"a": a, "b": b, "c": c}, dtype)
    np.testing.assert_array_equal(got, wrap([((x * y) >> bits) + z for x, y, z in zip(pa, pb, pc)], dtype))


@pytest.mark.parametrize("dtype,wide", [(np.int32, np.int64), (np.uint32, np.uint64), (np.int16, np.int32),
                                        (np.uint16, np.uint32)])
def test_mul_wide_and_mad_wide(dtype: object, wide: object) -> None:
    t = PTX_TYPES[np.dtype(dtype)]
    a, b, c = ints(dtype), ints(dtype), ints(wide)
    got = elementwise(f"mul.wide.{t} %d, %a, %b;", {"a": a, "b": b}, wide)
    np.testing.assert_array_equal(got, wrap([int(x) * int(y) for x, y in zip(a, b)], wide))
    got = elementwise(f"mad.wide.{t} %d, %a, %b, %c;", {"a": a, "b": b, "c": c}, wide)
    np.testing.assert_array_equal(got, wrap([int(x) * int(y) + int(z) for x, y, z in zip(a, b, c)], wide))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_div_rem_truncate_toward_zero(dtype: object) -> None:
    t = PTX_TYPES[np.dtype(dtype)]
    info = np.iinfo(dtype)
    a = ints(dtype, special=(info.min, info.max, 7, -7 if info.min else 7, 0))
    b = ints(dtype, special=(-1 if info.min else 3, 2, -2 if info.min else 2, 2, 5)) // 1000003
    b[b == 0] = 3
    got_q = elementwise(f"div.{t} %d, %a, %b;", {"a": a, "b": b}, dtype)
    got_r = elementwise(f"rem.{t} %d, %a, %b;", {"a": a, "b": b}, dtype)
    q = [abs(int(x)) // abs(int(y)) * (1 if (int(x) < 0) == (int(y) < 0) else -1) for x, y in zip(a, b)]
    r = [int(x) - int(y) * qq for x, y, qq in zip(a, b, q)]
    np.testing.assert_array_equal(got_q, wrap(q, dtype))
    np.testing.assert_array_equal(got_r, wrap(r, dtype))


def test_div_by_zero_is_defined() -> None:
    a = ints(np.uint32)
    got = elementwise("div.u32 %d, %a, 0;", {"a": a}, np.uint32)
    np.testing.assert_array_equal(got, np.full(N, 0xFFFFFFFF, np.uint32))
    got = elementwise("rem.u32 %d, %a, 0;", {"a": a}, np.uint32)
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_shifts_clamp(dtype: object) -> None:
    t = PTX_TYPES[np.dtype(dtype)]
    bits = np.dtype(dtype).itemsize * 8
    a = ints(dtype)
    s = RNG.integers(0, bits + 40, N).astype(np.uint32)
    got_l = elementwise(f"shl.b{bits} %d, %a, %b;", {"a": a, "b": s}, dtype)
    got_r = elementwise(f"shr.{t} %d, %a, %b;", {"a": a, "b": s}, dtype)
    exp_l = [(int(x) << int(k)) if k < bits else 0 for x, k in zip(a, s)]
    exp_r = [(int(x) >> min(int(k), bits)) for x, k in zip(a, s)]
    np.testing.assert_array_equal(got_l, wrap(exp_l, dtype))
    np.testing.assert_array_equal(got_r, wrap(exp_r, dtype))


def test_saturating_add_and_carry_chain() -> None:
    a = ints(np.int32, special=(2**31 - 1, -2**31, 5))
    b = ints(np.int32, special=(1, -1, -9))
    got = elementwise("add.sat.s32 %d, %a, %b;", {"a": a, "b": b}, np.int32)
    np.testing.assert_array_equal(got, np.clip(a.astype(np.int64) + b, -2**31, 2**31 - 1).astype(np.int32))
    got = elementwise("sub.sat.s32 %d, %a, %b;", {"a": a, "b": b}, np.int32)
    np.testing.assert_array_equal(got, np.clip(a.astype(np.int64) - b, -2**31, 2**31 - 1).astype(np.int32))
    # a 128-bit add and subtract built from 64-bit carry chains
    x, y = ints(np.uint64, n=2 * N), ints(np.uint64, n=2 * N)
    body = """
    ld.param.u64 %rd4, [in_a]; mul.wide.u32 %rd5, %r0, 16; add.s64 %rd4, %rd4, %rd5;
    ld.global.v2.u64 {%tl0, %tl1}, [%rd4];
    ld.param.u64 %rd4, [in_b]; add.s64 %rd4, %rd4, %rd5;
    ld.global.v2.u64 {%tl2, %tl3}, [%rd4];
    add.cc.u64 %tl4, %tl0, %tl2;
    addc.u64 %tl5, %tl1, %tl3;
    sub.cc.u64 %tl6, %tl4, %tl2;
    subc.cc.u64 %tl7, %tl5, %tl3;
    xor.b64 %d, %tl4, %tl5;
    """
    lo_x, hi_x, lo_y, hi_y = x[0::2], x[1::2], y[0::2], y[1::2]
    got = elementwise(body, {"a": x, "b": y}, np.uint64)
    total = [(int(a) | int(b) << 64) + (int(c) | int(d) << 64) for a, b, c, d in zip(lo_x, hi_x, lo_y, hi_y)]
    exp = [(t & (2**64 - 1)) ^ ((t >> 64) & (2**64 - 1)) for t in total]
    np.testing.assert_array_equal(got, np.array(exp, dtype=np.uint64))
    back = elementwise(body.replace("xor.b64 %d, %tl4, %tl5;", "xor.b64 %d, %tl6, %tl7;"), {"a": x, "b": y},
                       np.uint64)
    np.testing.assert_array_equal(back, lo_x ^ hi_x)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_bit_counting(dtype: object) -> None:
    bits = np.dtype(dtype).itemsize * 8
    a = ints(dtype, special=(0, 1, 2 ** (bits - 1), 2 ** bits - 1))
    pa = [int(x) for x in a]
    got = elementwise(f"popc.b{bits} %d, %a;", {"a": a}, np.uint32)
    np.testing.assert_array_equal(got, [bin(x).count("1") for x in pa])
    got = elementwise(f"clz.b{bits} %d, %a;", {"a": a}, np.uint32)
    np.testing.assert_array_equal(got, [bits - x.bit_length() for x in pa])
    got = elementwise(f"brev.b{bits} %d, %a;", {"a": a}, dtype)
    np.testing.assert_array_equal(got, np.array([int(f"{x:0{bits}b}"[::-1], 2) for x in pa], dtype=dtype))
    got = elementwise(f"bfind.u{bits} %d, %a;", {"a": a}, np.uint32)
    np.testing.assert_array_equal(got, np.array([x.bit_length() - 1 if x else 0xFFFFFFFF for x in pa], np.uint32))
    got = elementwise(f"bfind.shiftamt.u{bits} %d, %a;", {"a": a}, np.uint32)
    np.testing.assert_array_equal(got, np.array([bits - x.bit_length() if x else 0xFFFFFFFF for x in pa],
                                                np.uint32))


def test_bfind_signed() -> None:
    a = ints(np.int32, special=(0, -1, 1, -2**31, 2**31 - 1))
    got = elementwise("bfind.s32 %d, %a;", {"a": a}, np.uint32)
    exp = [((~int(x) if x < 0 else int(x)).bit_length() - 1) & 0xFFFFFFFF for x in a]
    np.testing.assert_array_equal(got, np.array(exp, dtype=np.uint64).astype(np.uint32))


def _bfe_ref(x: int, pos: int, ln: int, bits: int, signed: bool) -> int:
    pos &= 0xFF
    ln &= 0xFF
    msb = bits - 1
    sbit = ((x >> min(pos + ln - 1, msb)) & 1) if (signed and ln > 0) else 0
    out = 0
    for i in range(bits):
        bit = ((x >> (pos + i)) & 1) if (i < ln and pos + i <= msb) else sbit
        out |= bit << i
    return out


@pytest.mark.parametrize("ty", ["u32", "s32", "u64", "s64"])
def test_bfe(ty: str) -> None:
    bits = int(ty[1:])
    dtype = np.dtype(f"uint{bits}")
    a = ints(dtype)
    pos = RNG.integers(0, bits + 8, N).astype(np.uint32)
    ln = RNG.integers(0, bits + 8, N).astype(np.uint32)
    pos[:3] = (0, 3, 300)
    ln[:3] = (0, bits, 5)
    got = elementwise(f"bfe.{ty} %d, %a, %b, %c;", {"a": a, "b": pos, "c": ln}, dtype)
    exp = [_bfe_ref(int(x), int(p), int(l_), bits, ty[0] == "s") for x, p, l_ in zip(a, pos, ln)]
    np.testing.assert_array_equal(got, np.array(exp, dtype=dtype))


def test_bfi_prmt_lop3_shf() -> None:
    a, b = ints(np.uint32), ints(np.uint32)
    pos = RNG.integers(0, 40, N).astype(np.uint32)
    got = elementwise("bfi.b32 %d, %a, %b, %c, 7;", {"a": a, "b": b, "c": pos}, np.uint32)
    exp = []
    for x, y, p in zip(a, b, pos):
        x, y, p = int(x), int(y), int(p)
        ln = min(7, max(32 - p, 0))
        mask = ((1 << ln) - 1) << p if p < 32 else 0
        exp.append((y & ~mask) | ((x << p) & mask) & 0xFFFFFFFF)
    np.testing.assert_array_equal(got, np.array(exp, np.uint64).astype(np.uint32))
    sel = RNG.integers(0, 1 << 16, N).astype(np.uint32)
    got = elementwise("prmt.b32 %d, %a, %b, %c;", {"a": a, "b": b, "c": sel}, np.uint32)
    exp = []
    for x, y, s in zip(a, b, sel):
        src = int(x).to_bytes(4, "little") + int(y).to_bytes(4, "little")
        out = bytearray()
        for i in range(4):
            nib = (int(s) >> (4 * i)) & 0xF
            byte = src[nib & 7]
            out.append((0xFF if byte & 0x80 else 0) if nib & 8 else byte)
        exp.append(int.from_bytes(out, "little"))
    np.testing.assert_array_equal(got, np.array(exp, np.uint32))
    for sel_imm in (0x5410, 0x3298, 0x7654, 0xF8E1):
        got = elementwise(f"prmt.b32 %d, %a, %b, {sel_imm:#x};", {"a": a, "b": b}, np.uint32)
        exp = []
        for x, y in zip(a, b):
            src = int(x).to_bytes(4, "little") + int(y).to_bytes(4, "little")
            nibs = [(sel_imm >> (4 * i)) & 0xF for i in range(4)]
            exp.append(int.from_bytes(bytes((0xFF if src[n & 7] & 0x80 else 0) if n & 8 else src[n & 7]
                                            for n in nibs), "little"))
        np.testing.assert_array_equal(got, np.array(exp, np.uint32), err_msg=hex(sel_imm))
    for mode, table in (("f4e", lambda s, i: (s + i) % 8), ("b4e", lambda s, i: (s - i) % 8),
                        ("rc8", lambda s, i: s), ("ecl", lambda s, i: max(i, s)), ("ecr", lambda s, i: min(i, s)),
                        ("rc16", lambda s, i: 2 * (s & 1) + (i & 1))):
        got = elementwise(f"prmt.b32.{mode} %d, %a, %b, %c;", {"a": a, "b": b, "c": sel}, np.uint32)
        exp = []
        for x, y, s in zip(a, b, sel):
            src = int(x).to_bytes(4, "little") + int(y).to_bytes(4, "little")
            exp.append(int.from_bytes(bytes(src[table(int(s) & 3, i)] for i in range(4)), "little"))
        np.testing.assert_array_equal(got, np.array(exp, np.uint32), err_msg=mode)
    c = ints(np.uint32)
    for lut in (0x96, 0xE8, 0x01, 0xF0, 0x6A):
        got = elementwise(f"lop3.b32 %d, %a, %b, %c, {lut};", {"a": a, "b": b, "c": c}, np.uint32)
        exp = np.zeros(N, np.uint32)
        for i in range(8):
            if lut >> i & 1:
                exp |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
        np.testing.assert_array_equal(got, exp, err_msg=hex(lut))
    n = RNG.integers(0, 70, N).astype(np.uint32)
    for d, mode in (("l", "wrap"), ("l", "clamp"), ("r", "wrap"), ("r", "clamp")):
        got = elementwise(f"shf.{d}.{mode}.b32 %d, %a, %b, %c;", {"a": a, "b": b, "c": n}, np.uint32)
        exp = []
        for x, y, k in zip(a, b, n):
            k = int(k) & 31 if mode == "wrap" else min(int(k), 32)
            both = (int(y) << 32) | int(x)
            exp.append(((both << k) >> 32) & 0xFFFFFFFF if d == "l" else (both >> k) & 0xFFFFFFFF)
        np.testing.assert_array_equal(got, np.array(exp, np.uint32), err_msg=f"{d}.{mode}")


def test_dp4a_sad_mul24_neg_abs_not() -> None:
    a, b, c = ints(np.uint32), ints(np.uint32), ints(np.int32)
    got = elementwise("dp4a.s32.u32 %d, %a, %b, %c;", {"a": a, "b": b, "c": c}, np.int32)
    exp = []
    for x, y, z in zip(a, b, c):
        xa = [((int(x) >> 8 * i) & 0xFF) for i in range(4)]
        yb = [((int(y) >> 8 * i) & 0xFF) for i in range(4)]
        xa = [v - 256 if v >= 128 else v for v in xa]
        exp.append(sum(p * q for p, q in zip(xa, yb)) + int(z))
    np.testing.assert_array_equal(got, wrap(exp, np.int32))
    got = elementwise("sad.u32 %d, %a, %b, 5;", {"a": a, "b": b}, np.uint32)
    np.testing.assert_array_equal(got, wrap([abs(int(x) - int(y)) + 5 for x, y in zip(a, b)], np.uint32))
    got = elementwise("mul24.lo.u32 %d, %a, %b;", {"a": a, "b": b}, np.uint32)
    np.testing.assert_array_equal(got, wrap([(int(x) & 0xFFFFFF) * (int(y) & 0xFFFFFF) for x, y in zip(a, b)],
                                            np.uint32))
    s = ints(np.int32, special=(-2**31, 0, -5))
    np.testing.assert_array_equal(elementwise("neg.s32 %d, %a;", {"a": s}, np.int32), wrap([-int(x) for x in s],
                                                                                       np.int32))
    np.testing.assert_array_equal(elementwise("abs.s32 %d, %a;", {"a": s}, np.int32), wrap([abs(int(x)) for x in s],
                                                                                       np.int32))
    np.testing.assert_array_equal(elementwise("not.b32 %d, %a;", {"a": a}, np.uint32), ~a)
    np.testing.assert_array_equal(elementwise("cnot.b32 %d, %a;", {"a": np.where(a % 3 == 0, 0, a).astype(np.uint32)},
                                              np.uint32), (np.where(a % 3 == 0, 0, a) == 0).astype(np.uint32))


# --- compare and select ----------------------------------------------------------

@pytest.mark.parametrize("cmp,ty,pyop", [
    ("eq", "s32", lambda x, y: x == y), ("ne", "s32", lambda x, y: x != y), ("lt", "s32", lambda x, y: x < y),
    ("le", "s32", lambda x, y: x <= y), ("gt", "s32", lambda x, y: x > y), ("ge", "s32", lambda x, y: x >= y),
    ("lo", "u32", lambda x, y: x < y), ("ls", "u32", lambda x, y: x <= y), ("hi", "u32", lambda x, y: x > y),
    ("hs", "u32", lambda x, y: x >= y), ("lt", "s64", lambda x, y: x < y), ("hi", "u64", lambda x, y: x > y),
])
def test_setp_selp_integer(cmp: str, ty: str, pyop: object) -> None:
    dt = np.dtype(f"{'int' if ty[0] == 's' else 'uint'}{ty[1:]}")
    a, b = ints(dt), ints(dt)
    b[::3] = a[::3]
    got = elementwise(f"setp.{cmp}.{ty} %p1, %a, %b; selp.u32 %d, 1, 2, %p1;", {"a": a, "b": b}, np.uint32)
    np.testing.assert_array_equal(got, [1 if pyop(int(x), int(y)) else 2 for x, y in zip(a, b)])


@pytest.mark.parametrize("cmp", ["eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu",
                                 "num", "nan"])
def test_setp_float_ordered_unordered(cmp: str) -> None:
    a = floats(np.float32, special=(np.nan, 1.0, np.nan, -0.0, np.inf))
    b = floats(np.float32, special=(1.0, np.nan, np.nan, 0.0, np.inf))
    b[10::3] = a[10::3]
    got = elementwise(f"setp.{cmp}.f32 %p1|%p2, %a, %b; selp.u32 %t0, 1, 0, %p1; selp.u32 %t1, 2, 0, %p2;"
                      " or.b32 %d, %t0, %t1;", {"a": a, "b": b}, np.uint32)
    base = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal}
    unordered = np.isnan(a) | np.isnan(b)
    if cmp == "num":
        exp = ~unordered
    elif cmp == "nan":
        exp = unordered
    elif cmp.endswith("u"):
        exp = base[cmp[:2]](a, b) | unordered
    else:
        exp = base[cmp](a, b) & ~unordered
    np.testing.assert_array_equal(got, exp.astype(np.uint32) | ((~exp).astype(np.uint32) * 2))


def test_setp_with_boolean_combination_and_predicate_logic() -> None:
    a, b = ints(np.int32), ints(np.int32)
    body = """setp.lt.s32 %p1, %a, 0;
    setp.gt.and.s32 %p2|%p3, %b, 0, %p1;
    setp.ne.or.s32 %p4, %a, %b, !%p2;
    xor.pred %p5, %p3, %p4;
    not.pred %p6, %p5;
    and.pred %p7, %p6, %p1;
    selp.u32 %t0, 1, 0, %p2; selp.u32 %t1, 2, 0, %p3; selp.u32 %t2, 4, 0, %p4; selp.u32 %t3, 8, 0, %p7;
    or.b32 %t0, %t0, %t1; or.b32 %t2, %t2, %t3; or.b32 %d, %t0, %t2;"""
    got = elementwise(body, {"a": a, "b": b}, np.uint32)
    p1 = a < 0
    p2 = (b > 0) & p1
    p3 = ~(b > 0) & p1
    p4 = (a != b) | ~p2
    p7 = ~(p3 ^ p4) & p1
    np.testing.assert_array_equal(got, p2 * 1 + p3 * 2 + p4 * 4 + p7 * 8)


def test_set_and_slct() -> None:
    a, b = floats(np.float32), floats(np.float32)
    got = elementwise("set.lt.u32.f32 %d, %a, %b;", {"a": a, "b": b}, np.uint32)
    np.testing.assert_array_equal(got, np.where(a < b, 0xFFFFFFFF, 0).astype(np.uint32))
    got = elementwise("set.gt.f32.f32 %d, %a, %b;", {"a": a, "b": b}, np.float32)
    np.testing.assert_array_equal(got, np.where(a > b, 1.0, 0.0).astype(np.float32))
    x, y, c = ints(np.int32), ints(np.int32), ints(np.int32)
    got = elementwise("slct.s32.s32 %d, %a, %b, %c;", {"a": x, "b": y, "c": c}, np.int32)
    np.testing.assert_array_equal(got, np.where(c >= 0, x, y))


# --- moves -------------------------------------------------------------------------

def test_mov_pack_unpack_and_special_registers() -> None:
    a = ints(np.uint16, n=N)
    b = ints(np.uint16, n=N)
    got = elementwise("mov.b32 %d, {%a, %b};", {"a": a, "b": b}, np.uint32)
    np.testing.assert_array_equal(got, a.astype(np.uint32) | (b.astype(np.uint32) << 16))
    w = ints(np.uint64)
    got = elementwise("mov.b64 {%th0, %th1, %th2, %th3}, %a; mov.b64 %d, {%th3, %th2, %th1, %th0};",
                      {"a": w}, np.uint64)
    exp = [int.from_bytes(b"".join(((int(v) >> 16 * i) & 0xFFFF).to_bytes(2, "little") for i in (3, 2, 1, 0)),
                          "little") for v in w]
    np.testing.assert_array_equal(got, np.array(exp, np.uint64))
    got = elementwise("mov.b32 %d, 0f3FC00000;", {"a": a}, np.float32)
    np.testing.assert_array_equal(got, np.full(N, 1.5, np.float32))
    got = elementwise("mov.u32 %t0, %laneid; mov.u32 %t1, %warpid; mov.u32 %t2, %ntid.x; mov.u32 %t3, %lanemask_lt;"
                      " mad.lo.u32 %t0, %t1, 1000, %t0; add.u32 %t0, %t0, %t2; popc.b32 %t3, %t3;"
                      " mad.lo.u32 %d, %t3, 100000, %t0;", {"a": a}, np.uint32)
    t = np.arange(N)
    np.testing.assert_array_equal(got, (t % 32) * 100000 + (t // 32) * 1000 + t % 32 + N)


# --- floating point ----------------------------------------------------------------

def _f32_bits(v: float) -> int:
    return struct.unpack("<I", struct.pack("<f", v))[0]


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "fma"])
def test_f32_arithmetic_is_correctly_rounded(op: str, mode: str) -> None:
    a = floats(np.float32, scale=3.0, special=(1.0, 1e-30, 3.4e38, -2.5))
    b = floats(np.float32, scale=3.0, special=(1e-30, 1.0, 3.4e38, 1e-45))
    c = floats(np.float32, scale=3.0, special=(1.0, -1.0, -3.4e38, 7.0))
    b[b == 0] = 1.0
    instr = f"{op}.{mode}.f32 %d, %a, %b{', %c' if op == 'fma' else ''};"
    got = elementwise(instr, {"a": a, "b": b, "c": c}, np.float32)
    exp = []
    for x, y, z in zip(a, b, c):
        fx, fy, fz = Fraction(float(x)), Fraction(float(y)), Fraction(float(z))
        exact = {"add": fx + fy, "sub": fx - fy, "mul": fx * fy, "div": fx / fy, "fma": fx * fy + fz}[op]
        exp.append(ref_round(exact, "f32", mode))
    np.testing.assert_array_equal(got, np.array(exp, dtype=np.float32))


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("op", ["add", "mul", "div", "fma", "sqrt", "rcp"])
def test_f64_arithmetic_is_correctly_rounded(op: str, mode: str) -> None:
    a = np.abs(floats(np.float64, scale=1e3)) if op == "sqrt" else floats(np.float64, scale=1e3)
    b = floats(np.float64, scale=1e-3)
    c = floats(np.float64, scale=1.0)
    instr = {"sqrt": f"sqrt.{mode}.f64 %d, %a;", "rcp": f"rcp.{mode}.f64 %d, %a;",
             "fma": f"fma.{mode}.f64 %d, %a, %b, %c;"}.get(op, f"{op}.{mode}.f64 %d, %a, %b;")
    got = elementwise(instr, {"a": a, "b": b, "c": c}, np.float64)
    exp = []
    for x, y, z in zip(a, b, c):
        fx, fy, fz = Fraction(float(x)), Fraction(float(y)), Fraction(float(z))
        if op == "sqrt":
            # bracket the exact square root between neighbouring doubles
            r = math.sqrt(float(x))
            lo, hi = r, r
            while Fraction(lo) ** 2 > fx:
                lo = math.nextafter(lo, 0)
            while Fraction(hi) ** 2 < fx:
                hi = math.nextafter(hi, math.inf)
            lo = lo if Fraction(lo) ** 2 <= fx else lo
            if Fraction(lo) ** 2 == fx:
                exp.append(lo)
                continue
            lo = max(v for v in (lo, math.nextafter(hi, 0)) if Fraction(v) ** 2 <= fx)
            hi = math.nextafter(lo, math.inf)
            if mode in ("rz", "rm"):
                exp.append(lo)
            elif mode == "rp":
                exp.append(hi)
            else:
                mid = (Fraction(lo) + Fraction(hi)) / 2
                exp.append(lo if mid * mid > fx else hi)
            continue
        exact = {"add": fx + fy, "mul": fx * fy, "div": fx / fy, "fma": fx * fy + fz, "rcp": 1 / fx}[op]
        exp.append(ref_round(exact, "f64", mode))
    np.testing.assert_array_equal(got, np.array(exp, dtype=np.float64))


def test_f32_sqrt_rcp_directed_and_ftz_sat() -> None:
    a = np.abs(floats(np.float32, special=(2.0, 1e-40, 0.0, 3.0)))
    for mode in ("rn", "rz", "rm", "rp"):
        got = elementwise(f"sqrt.{mode}.f32 %d, %a;", {"a": a}, np.float32)
        for g, x in zip(got, a):
            fx = Fraction(float(x))
            g = Fraction(float(g))
            nxt = Fraction(float(np.nextafter(np.float32(float(g)), np.float32(np.inf))))
            prv = Fraction(float(np.nextafter(np.float32(float(g)), np.float32(-np.inf))))
            if g * g == fx:
                continue
            if mode in ("rz", "rm"):
                assert g * g < fx < nxt * nxt
            elif mode == "rp":
                assert prv * prv < fx < g * g
            else:
                assert abs(g * g - fx) <= min(abs(prv * prv - fx), abs(nxt * nxt - fx))
        got = elementwise(f"rcp.{mode}.f32 %d, %a;", {"a": a + np.float32(0.5)}, np.float32)
        exp = [ref_round(1 / Fraction(float(x)), "f32", mode) for x in a + np.float32(0.5)]
        np.testing.assert_array_equal(got, np.array(exp, np.float32))
    tiny = np.array([1e-39, -1e-39, 2.0, -3.0] * (N // 4), dtype=np.float32)
    got = elementwise("mul.ftz.f32 %d, %a, 0f3F800000;", {"a": tiny}, np.float32)
    np.testing.assert_array_equal(as_u(got), as_u(np.where(np.abs(tiny) < 1.2e-38, np.copysign(0, tiny), tiny)
                                                 .astype(np.float32)))
    got = elementwise("mul.sat.f32 %d, %a, 0f3F000000;", {"a": tiny}, np.float32)
    np.testing.assert_array_equal(got, np.clip(tiny * np.float32(0.5), 0, 1))


@pytest.mark.parametrize("ty,dt", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_half_precision_arithmetic(ty: str, dt: object) -> None:
    a, b, c = floats(dt, scale=4), floats(dt, scale=4), floats(dt, scale=4)
    fmt = ty
    for op in ("add", "sub", "mul", "fma"):
        instr = f"{op}.rn.{ty} %d, %a, %b{', %c' if op == 'fma' else ''};"
        got = elementwise(instr, {"a": a, "b": b, "c": c}, dt)
        exp = []
        for x, y, z in zip(a, b, c):
            fx, fy, fz = Fraction(float(x)), Fraction(float(y)), Fraction(float(z))
            exact = {"add": fx + fy, "sub": fx - fy, "mul": fx * fy, "fma": fx * fy + fz}[op]
            exp.append(ref_round(exact, fmt, "rn"))
        np.testing.assert_array_equal(got.astype(np.float64), np.array(exp), err_msg=op)
    got = elementwise(f"neg.{ty} %d, %a;", {"a": a}, dt)
    np.testing.assert_array_equal(got, -a)
    got = elementwise(f"abs.{ty} %d, %a;", {"a": a}, dt)
    np.testing.assert_array_equal(got, np.abs(a))
    got = elementwise(f"fma.rn.relu.{ty} %d, %a, %b, %c;", {"a": a, "b": b, "c": c}, dt)
    ref = (a.astype(np.float64) * b + c)
    np.testing.assert_array_equal(got.astype(np.float64), np.maximum(ref, 0).astype(dt).astype(np.float64))


@pytest.mark.parametrize("ty,dt", [("f16x2", np.float16), ("bf16x2", ml_dtypes.bfloat16)])
def test_packed_half2_arithmetic(ty: str, dt: object) -> None:
    a, b, c = floats(dt, n=2 * N), floats(dt, n=2 * N), floats(dt, n=2 * N)
    pa, pb, pc = (np.ascontiguousarray(v).view(np.uint32) for v in (a, b, c))
    for op, f in (("add", lambda x, y, z: x + y), ("mul", lambda x, y, z: x * y),
                  ("fma", lambda x, y, z: x * y + z)):
        instr = f"{op}.rn.{ty} %d, %a, %b{', %c' if op == 'fma' else ''};"
        got = elementwise(instr, {"a": pa, "b": pb, "c": pc}, np.uint32).view(dt)
        exp = [ref_round(f(Fraction(float(x)), Fraction(float(y)), Fraction(float(z))), ty[:-2], "rn")
               for x, y, z in zip(a, b, c)]
        np.testing.assert_array_equal(got.astype(np.float64), np.array(exp), err_msg=op)
    got = elementwise(f"max.{ty} %d, %a, %b;", {"a": pa, "b": pb}, np.uint32).view(dt)
    np.testing.assert_array_equal(got, np.maximum(a, b))


def test_float_min_max_nan_and_signed_zero() -> None:
    a = floats(np.float32, special=(np.nan, 1.0, np.nan, -0.0, 0.0, -3.0))
    b = floats(np.float32, special=(2.0, np.nan, np.nan, 0.0, -0.0, 4.0))
    got = elementwise("min.f32 %d, %a, %b;", {"a": a, "b": b}, np.float32)
    exp = np.fmin(a, b)
    exp[3] = exp[4] = -0.0
    np.testing.assert_array_equal(as_u(got), as_u(exp))
    got = elementwise("max.NaN.f32 %d, %a, %b;", {"a": a, "b": b}, np.float32)
    exp = np.maximum(a, b)
    exp[3] = exp[4] = 0.0
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    np.testing.assert_array_equal(got[~np.isnan(got)], exp[~np.isnan(exp)])
    got = elementwise("max.xorsign.abs.f32 %d, %a, %b;", {"a": a[6:], "b": b[6:]}, np.float32, n=N - 6)
    exp = np.copysign(np.maximum(np.abs(a[6:]), np.abs(b[6:])), np.where(np.signbit(a[6:]) ^ np.signbit(b[6:]),
                                                                         -1.0, 1.0)).astype(np.float32)
    np.testing.assert_array_equal(got, exp)


def test_approximate_functions_are_close() -> None:
    a = floats(np.float32, scale=2.0)
    pos = np.abs(a) + np.float32(0.01)
    for instr, x, ref, tol in (("ex2.approx.f32", a, np.exp2, 2e-7), ("lg2.approx.f32", pos, np.log2, 1e-6),
                               ("sin.approx.f32", a, np.sin, 1e-6), ("cos.approx.f32", a, np.cos, 1e-6),
                               ("rcp.approx.f32", a, lambda v: 1 / v, 2e-7),
                               ("rsqrt.approx.f32", pos, lambda v: 1 / np.sqrt(v), 2e-7),
                               ("sqrt.approx.f32", pos, np.sqrt, 2e-7), ("tanh.approx.f32", a, np.tanh, 1e-6),
                               ("ex2.approx.ftz.f32", a, np.exp2, 2e-7)):
        got = elementwise(f"{instr} %d, %a;", {"a": x}, np.float32)
        np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=tol, atol=1e-7, err_msg=instr)
    got = elementwise("div.approx.f32 %d, %a, %b;", {"a": a, "b": pos}, np.float32)
    np.testing.assert_allclose(got, a / pos, rtol=2e-7)
    h = floats(np.float16, scale=2.0)
    got = elementwise("ex2.approx.f16 %d, %a;", {"a": h}, np.float16)
    np.testing.assert_allclose(got.astype(np.float64), np.exp2(h.astype(np.float64)), rtol=1e-3)


def test_testp_copysign() -> None:
    a = floats(np.float32, special=(np.nan, np.inf, -np.inf, 1e-40, 0.0, -1.0))
    for test, ref in (("finite", np.isfinite(a)), ("infinite", np.isinf(a)), ("number", ~np.isnan(a)),
                      ("notanumber", np.isnan(a)), ("normal", np.isfinite(a) & (np.abs(a) >= 1.1754944e-38)),
                      ("subnormal", (np.abs(a) < 1.1754944e-38) & (a != 0))):
        got = elementwise(f"testp.{test}.f32 %p1, %a; selp.u32 %d, 1, 0, %p1;", {"a": a}, np.uint32)
        np.testing.assert_array_equal(got, ref.astype(np.uint32), err_msg=test)
    b = floats(np.float32)
    got = elementwise("copysign.f32 %d, %a, %b;", {"a": a, "b": b}, np.float32)
    np.testing.assert_array_equal(got, np.copysign(b, a))


# --- conversions ---------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("dst,dt", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_cvt_f32_to_half_all_rounding_modes(mode: str, dst: str, dt: object) -> None:
    a = floats(np.float32, scale=100.0, special=(65519.0, 65520.0, 1e-7, -1e-7, 3e-8, 1e30, np.nan, -0.0))
    got = elementwise(f"cvt.{mode}.{dst}.f32 %d, %a;", {"a": a}, dt)
    exp = [math.nan if math.isnan(float(x)) else ref_round(Fraction(float(x)), dst, mode) if x != 0 else float(x)
           for x in a]
    np.testing.assert_array_equal(got.astype(np.float64), np.array(exp))


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_cvt_f64_to_f32_and_back(mode: str) -> None:
    a = floats(np.float64, scale=1e5, special=(1e-310, 3.5e38, -3.5e38, 1e-46))
    got = elementwise(f"cvt.{mode}.f32.f64 %d, %a;", {"a": a}, np.float32)
    exp = [ref_round(Fraction(float(x)), "f32", mode) for x in a]
    np.testing.assert_array_equal(got, np.array(exp, np.float32))
    f = floats(np.float32)
    np.testing.assert_array_equal(elementwise("cvt.f64.f32 %d, %a;", {"a": f}, np.float64), f.astype(np.float64))


@pytest.mark.parametrize("irnd,ref", [("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor), ("rpi", np.ceil)])
@pytest.mark.parametrize("dst", ["s32", "u32", "s64", "u64", "s8", "u16"])
def test_cvt_float_to_int_saturates(irnd: str, ref: object, dst: str) -> None:
    dt = np.dtype(f"{'int' if dst[0] == 's' else 'uint'}{dst[1:]}")
    a = floats(np.float32, scale=float(np.iinfo(dt).max) / 4,
               special=(np.nan, np.inf, -np.inf, 2.5, -2.5, 0.5, 1e30, -1e30))
    out_t = dt if dt.itemsize >= 4 else np.dtype(np.int32 if dst[0] == "s" else np.uint32)
    reg_t = "%d"
    body = (f"cvt.{irnd}.{dst}.f32 %th0, %a; cvt.{'s' if dst[0] == 's' else 'u'}32.{dst} %d, %th0;"
            if dt.itemsize < 4 else f"cvt.{irnd}.{dst}.f32 {reg_t}, %a;")
    got = elementwise(body, {"a": a}, out_t)
    info = np.iinfo(dt)
    r = ref(a.astype(np.float64))
    exp = np.where(np.isnan(r), 0, np.clip(np.nan_to_num(r, posinf=2.0**70, neginf=-2.0**70), info.min, info.max))
    exp = [int(v) if v < 2.0 ** 64 else info.max for v in exp]
    exp = [min(max(v, info.min), info.max) for v in exp]
    np.testing.assert_array_equal(got, np.array(exp, dtype=object).astype(out_t))


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("src", ["s32", "u32", "s64", "u64"])
def test_cvt_int_to_float_all_rounding_modes(mode: str, src: str) -> None:
    dt = np.dtype(f"{'int' if src[0] == 's' else 'uint'}{src[1:]}")
    a = ints(dt)
    got = elementwise(f"cvt.{mode}.f32.{src} %d, %a;", {"a": a}, np.float32)
    np.testing.assert_array_equal(got, np.array([ref_round(Fraction(int(x)), "f32", mode) for x in a], np.float32))
    got = elementwise(f"cvt.{mode}.f16.{src} %d, %a;", {"a": (a % 100000).astype(dt)}, np.float16)
    np.testing.assert_array_equal(got.astype(np.float64),
                                  [ref_round(Fraction(int(x)), "f16", mode) for x in (a % 100000).astype(dt)])
    got = elementwise(f"cvt.{mode}.f64.{src} %d, %a;", {"a": a}, np.float64)
    np.testing.assert_array_equal(got, [ref_round(Fraction(int(x)), "f64", mode) for x in a])


def test_cvt_integer_widths_and_saturation() -> None:
    a = ints(np.int32, special=(-1, 200, -200, 70000, -70000))
    got = elementwise("cvt.s8.s32 %th0, %a; cvt.s32.s8 %d, %th0;", {"a": a}, np.int32)
    np.testing.assert_array_equal(got, a.astype(np.int8).astype(np.int32))
    got = elementwise("cvt.sat.u8.s32 %th0, %a; cvt.u32.u8 %d, %th0;", {"a": a}, np.uint32)
    np.testing.assert_array_equal(got, np.clip(a, 0, 255).astype(np.uint32))
    got = elementwise("cvt.sat.s16.s32 %th0, %a; cvt.s32.s16 %d, %th0;", {"a": a}, np.int32)
    np.testing.assert_array_equal(got, np.clip(a, -32768, 32767))
    u = ints(np.uint64)
    got = elementwise("cvt.sat.s32.u64 %d, %a;", {"a": u}, np.int32)
    np.testing.assert_array_equal(got, np.minimum(u, 2**31 - 1).astype(np.int32))
    got = elementwise("cvt.s64.s32 %d, %a;", {"a": a}, np.int64)
    np.testing.assert_array_equal(got, a.astype(np.int64))
    got = elementwise("cvt.u64.u32 %d, %a;", {"a": a.view(np.uint32)}, np.uint64)
    np.testing.assert_array_equal(got, a.view(np.uint32).astype(np.uint64))
    # ld.param.s32 into a 64-bit register sign-extends (the operand-size rule LLVM relies on)
    got = elementwise("mov.b64 %tl0, %a; cvt.u32.u64 %t0, %tl0; cvt.s64.s32 %d, %t0;", {"a": u}, np.int64)
    np.testing.assert_array_equal(got, u.astype(np.uint32).view(np.int32).astype(np.int64))


def test_cvt_float_saturate_relu_and_integral_rounding() -> None:
    a = floats(np.float32, scale=2.0, special=(np.nan, -0.5, 1.5, 2.5))
    got = elementwise("cvt.sat.f32.f32 %d, %a;", {"a": a}, np.float32)
    np.testing.assert_array_equal(got, np.where(np.isnan(a), 0, np.clip(a, 0, 1)).astype(np.float32))
    for irnd, f in (("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor), ("rpi", np.ceil)):
        got = elementwise(f"cvt.{irnd}.f32.f32 %d, %a;", {"a": a}, np.float32)
        np.testing.assert_array_equal(got, f(a))
    got = elementwise("cvt.rn.relu.f16.f32 %d, %a;", {"a": a}, np.float16)
    exp = np.where(a < 0, 0, a).astype(np.float16)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    np.testing.assert_array_equal(got[~np.isnan(got)], exp[~np.isnan(exp)])


def test_cvt_packed_and_small_formats() -> None:
    a, b = floats(np.float32), floats(np.float32)
    got = elementwise("cvt.rn.f16x2.f32 %d, %a, %b;", {"a": a, "b": b}, np.uint32)
    exp = np.stack([b.astype(np.float16), a.astype(np.float16)], axis=1).view(np.uint32).reshape(-1)
    np.testing.assert_array_equal(got, exp)
    got = elementwise("cvt.rn.bf16x2.f32 %d, %a, %b;", {"a": a, "b": b}, np.uint32)
    exp = np.stack([b.astype(ml_dtypes.bfloat16), a.astype(ml_dtypes.bfloat16)], axis=1).view(np.uint32).reshape(-1)
    np.testing.assert_array_equal(got, exp)
    big = a * np.float32(100)
    got = elementwise("cvt.rn.satfinite.e4m3x2.f32 %d, %a, %b;", {"a": big, "b": b}, np.uint16)
    lo = np.clip(b, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(np.uint16)
    hi = np.clip(big, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8).astype(np.uint16)
    np.testing.assert_array_equal(got, lo | (hi << 8))
    got = elementwise("cvt.rn.f16x2.e4m3x2 %d, %a;", {"a": lo | (hi << 8)}, np.uint32)
    back = np.stack([lo.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float16),
                     hi.astype(np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float16)], axis=1)
    np.testing.assert_array_equal(got, back.view(np.uint32).reshape(-1))
    got = elementwise("cvt.rna.tf32.f32 %d, %a;", {"a": a}, np.float32)
    np.testing.assert_array_equal(got, np.array([ref_round(Fraction(float(x)), "tf32", "rna") for x in a],
                                                np.float32))


# --- errors ------------------------------------------------------------------------------

def test_unknown_instruction_and_modifier_are_errors() -> None:
    a = ints(np.uint32)
    with pytest.raises(EmulatorError, match="unsupported PTX instruction 'frobnicate'"):
        elementwise("frobnicate.b32 %d, %a;", {"a": a}, np.uint32)
    with pytest.raises(EmulatorError, match=r"unsupported modifier \.wobbly"):
        elementwise("add.wobbly.u32 %d, %a, %a;", {"a": a}, np.uint32)
    with pytest.raises(EmulatorError, match="undeclared register %nope"):
        elementwise("add.u32 %d, %a, %nope;", {"a": a}, np.uint32)


def test_extended_precision_multiply_with_mad_cc_and_madc() -> None:
    """A 64x64->128-bit product from 32-bit limbs, the way libdevice's trig reduction does it."""
    x, y = ints(np.uint64), ints(np.uint64)
    body = """
    mov.b64 {%t0, %t1}, %a;
    mov.b64 {%t2, %t3}, %b;
    mul.lo.u32 %t4, %t0, %t2;
    mul.hi.u32 %t5, %t0, %t2;
    mad.lo.cc.u32 %t5, %t0, %t3, %t5;
    madc.hi.u32 %t6, %t0, %t3, 0;
    mad.lo.cc.u32 %t5, %t1, %t2, %t5;
    madc.hi.cc.u32 %t6, %t1, %t2, %t6;
    madc.hi.u32 %t7, %t1, %t3, 0;
    mad.lo.cc.u32 %t6, %t1, %t3, %t6;
    addc.u32 %t7, %t7, 0;
    mov.b64 %tl0, {%t4, %t5};
    mov.b64 %tl1, {%t6, %t7};
    xor.b64 %d, %tl0, %tl1;
    """
    got = elementwise(body, {"a": x, "b": y}, np.uint64)
    exp = [((int(a) * int(b)) & (2**64 - 1)) ^ ((int(a) * int(b)) >> 64) for a, b in zip(x, y)]
    np.testing.assert_array_equal(got, np.array(exp, dtype=np.uint64))


def test_cvt_microscaling_formats() -> None:
    a = floats(np.float32, scale=3.0, special=(0.0, -0.3, 6.5, -100.0, 0.25, 0.75))
    b = floats(np.float32, scale=3.0)
    # e2m1 (fp4): two nibbles in a byte, the first source in the high nibble; saturating
    got = elementwise("cvt.rn.satfinite.e2m1x2.f32 %th0, %a, %b; cvt.u32.u16 %d, %th0;", {"a": a, "b": b},
                      np.uint32, regs="")
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)

    def fp4(v: float) -> int:
        mag = min(abs(v), 6.0)
        i = int(np.argmin(np.abs(grid - mag)))
        ties = np.flatnonzero(np.abs(grid - mag) == np.abs(grid - mag).min())
        if ties.size > 1:
            i = int(ties[0] if ties[0] % 2 == 0 else ties[1])   # ties to the even code
        return (8 if v < 0 else 0) | i
    exp = np.array([fp4(float(x)) << 4 | fp4(float(y)) for x, y in zip(a, b)], np.uint32)
    np.testing.assert_array_equal(got & 0xFF, exp)
    back = elementwise("cvt.u16.u32 %th0, %a; cvt.rn.f16x2.e2m1x2 %d, %th0;", {"a": exp}, np.uint32)
    halves = back.view(np.float16).reshape(-1, 2).astype(np.float64)
    sign = lambda c: np.where(c & 8, -1.0, 1.0)
    np.testing.assert_array_equal(halves[:, 0], sign(exp & 0xF) * grid[exp & 7])
    np.testing.assert_array_equal(halves[:, 1], sign(exp >> 4) * grid[(exp >> 4) & 7])
    # ue8m0: powers of two, rounding toward zero or up
    pos = np.abs(a) + np.float32(1e-3)
    for mode, f in (("rz", np.floor), ("rp", np.ceil)):
        got = elementwise(f"cvt.{mode}.satfinite.ue8m0x2.f32 %th0, %a, %b; cvt.rn.bf16x2.ue8m0x2 %d, %th0;",
                          {"a": pos, "b": pos}, np.uint32)
        vals = got.view(ml_dtypes.bfloat16).reshape(-1, 2).astype(np.float64)
        np.testing.assert_array_equal(vals[:, 0], 2.0 ** f(np.log2(pos.astype(np.float64))))
        np.testing.assert_array_equal(vals[:, 0], vals[:, 1])


@pytest.mark.parametrize("ty,dt", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_exact_zero_sums_have_the_ieee_sign(ty: str, dt: object, mode: str) -> None:
    """x + (-x) is +0 except under .rm (-0); -0 + -0 and fma(0, -1, -0) stay -0 (found by the random
    programs: f64 fma lost the -0, and .rm gave +0)."""
    a = np.array([1.5, -0.0, 0.0, -0.0, 2.0, 0.0], dt)
    b = np.array([-1.5, -0.0, -0.0, 0.0, -2.0, -1.0], dt)
    c = np.array([0.0, -0.0, -0.0, -0.0, 4.0, -0.0], dt)
    cancel = "-0.0" if mode == "rm" else "0.0"
    add = elementwise(f"add.{mode}.{ty} %d, %a, %b;", {"a": a, "b": b, "c": c}, dt, n=6)
    assert [str(v) for v in add.tolist()] == [cancel, "-0.0", cancel, cancel, cancel, "-1.0"]
    fma = elementwise(f"fma.{mode}.{ty} %d, %a, %b, %c;", {"a": a, "b": b, "c": c}, dt, n=6)
    assert [str(v) for v in fma.tolist()] == ["-2.25", cancel, "-0.0", "-0.0", "0.0" if mode != "rm" else "-0.0",
                                              "-0.0"]
