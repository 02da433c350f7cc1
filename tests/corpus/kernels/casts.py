"""Conversions: int<->float, integer widen/narrow, float widen/narrow with rounding modes,
8-bit and 4-bit floats, tf32, bitcasts and byte packing."""

import cuda.tile as ct

from corpus_spec import ZEROS, Arr, Entry, Kernel, case, choice, randint, tol, uniform

RN, RZ, RM, RP, RA = (ct.RoundingMode.RN, ct.RoundingMode.RZ, ct.RoundingMode.RM,
                      ct.RoundingMode.RP, ct.RoundingMode.RA)


@ct.kernel
def cast_int_float(x, xi, xu, o_f2i, o_f2u, o_f2l, o_i2f, o_u2f, o_i2h, o_l2d):
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    s = ct.load(xi, index=(i,), shape=(64,))
    u = ct.load(xu, index=(i,), shape=(64,))
    ct.store(o_f2i, index=(i,), tile=ct.astype(f, ct.int32))
    ct.store(o_f2u, index=(i,), tile=ct.astype(ct.abs(f), ct.uint8))
    ct.store(o_f2l, index=(i,), tile=ct.astype((f * 1000.0), ct.int64))
    ct.store(o_i2f, index=(i,), tile=ct.astype(s, ct.float32))
    ct.store(o_u2f, index=(i,), tile=ct.astype(u, ct.float32))
    ct.store(o_i2h, index=(i,), tile=ct.astype((s // 65536), ct.float16))
    ct.store(o_l2d, index=(i,), tile=ct.astype(ct.astype(s, ct.int64), ct.float64))


@ct.kernel
def cast_int_width(b, ub, l, o_b2i, o_ub2i, o_b2l, o_l2s, o_l2b, o_ui2ul):
    """exti signed/unsigned and trunci between i8, i16, i32, i64."""
    i = ct.bid(0)
    sb = ct.load(b, index=(i,), shape=(64,))
    u = ct.load(ub, index=(i,), shape=(64,))
    w = ct.load(l, index=(i,), shape=(64,))
    ct.store(o_b2i, index=(i,), tile=ct.astype(sb, ct.int32))
    ct.store(o_ub2i, index=(i,), tile=ct.astype(u, ct.uint32))
    ct.store(o_b2l, index=(i,), tile=ct.astype(sb, ct.int64))
    ct.store(o_l2s, index=(i,), tile=ct.astype(w, ct.int16))
    ct.store(o_l2b, index=(i,), tile=ct.astype(w, ct.int8))
    ct.store(o_ui2ul, index=(i,), tile=ct.astype(ct.astype(u, ct.uint32), ct.uint64))


@ct.kernel
def cast_float_width(x, h, bh, d, o_f2h, o_f2bf, o_h2f, o_bf2f, o_d2f, o_f2d, o_bf2h):
    """ftof between f16, bf16, f32, f64 with the default rounding (nearest_even)."""
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    hv = ct.load(h, index=(i,), shape=(64,))
    bv = ct.load(bh, index=(i,), shape=(64,))
    dv = ct.load(d, index=(i,), shape=(64,))
    ct.store(o_f2h, index=(i,), tile=ct.astype(f, ct.float16))
    ct.store(o_f2bf, index=(i,), tile=ct.astype(f, ct.bfloat16))
    ct.store(o_h2f, index=(i,), tile=ct.astype(hv, ct.float32))
    ct.store(o_bf2f, index=(i,), tile=ct.astype(bv, ct.float32))
    ct.store(o_d2f, index=(i,), tile=ct.astype(dv, ct.float32))
    ct.store(o_f2d, index=(i,), tile=ct.astype(f, ct.float64))
    ct.store(o_bf2h, index=(i,), tile=ct.astype(bv, ct.float16))


@ct.kernel
def cast_rounding(x, d, o_f2h, o_d2f, o_f2tf):
    """Explicit ftof rounding modes (cuTile emits them from bytecode 13.4; NVIDIA's verifier
    allows only nearest_even and zero when narrowing to a standard type).

    o_f2h rows: nearest_even, zero; o_d2f: zero; o_f2tf rows (read back as f32): zero,
    nearest_away."""
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    dv = ct.load(d, index=(i,), shape=(64,))
    ct.store(o_f2h, index=(0, i),
             tile=ct.expand_dims(ct.astype(f, ct.float16, rounding_mode=RN), 0))
    ct.store(o_f2h, index=(1, i),
             tile=ct.expand_dims(ct.astype(f, ct.float16, rounding_mode=RZ), 0))
    ct.store(o_d2f, index=(i,), tile=ct.astype(dv, ct.float32, rounding_mode=RZ))
    ct.store(o_f2tf, index=(0, i), tile=ct.expand_dims(
        ct.astype(ct.astype(f, ct.tfloat32, rounding_mode=RZ), ct.float32), 0))
    ct.store(o_f2tf, index=(1, i), tile=ct.expand_dims(
        ct.astype(ct.astype(f, ct.tfloat32, rounding_mode=RA), ct.float32), 0))


@ct.kernel
def cast_f8(x, q4, q5, o_rt4, o_rt5, o_q4, o_q5, o_from4, o_from5):
    """f32 <-> f8E4M3FN / f8E5M2 in registers and f8 arrays in memory."""
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    a = ct.load(q4, index=(i,), shape=(64,))
    b = ct.load(q5, index=(i,), shape=(64,))
    ct.store(o_rt4, index=(i,), tile=ct.astype(ct.astype(f, ct.float8_e4m3fn), ct.float32))
    ct.store(o_rt5, index=(i,), tile=ct.astype(ct.astype(f, ct.float8_e5m2), ct.float32))
    ct.store(o_q4, index=(i,), tile=ct.astype(f, ct.float8_e4m3fn))
    ct.store(o_q5, index=(i,), tile=ct.astype(ct.astype(f, ct.float16), ct.float8_e5m2))
    ct.store(o_from4, index=(i,), tile=ct.astype(a, ct.float32))
    ct.store(o_from5, index=(i,), tile=ct.astype(b, ct.float16))


@ct.kernel
def cast_e8m0(s, o_from, o_copy):
    """f8E8M0FNU (power-of-two scale type) arrays: needs sm_100 and bytecode 13.2."""
    i = ct.bid(0)
    e = ct.load(s, index=(i,), shape=(64,))
    ct.store(o_from, index=(i,), tile=ct.astype(e, ct.float32))
    ct.store(o_copy, index=(i,), tile=e)


@ct.kernel
def cast_e8m0_round(x, o_rz, o_rp):
    """f32 -> f8E8M0FNU, which only rounds toward zero or +inf (cuTile: 13.3)."""
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    ct.store(o_rz, index=(i,), tile=ct.astype(ct.astype(f, ct.float8_e8m0fnu, rounding_mode=RZ),
                                              ct.float32))
    ct.store(o_rp, index=(i,), tile=ct.astype(ct.astype(f, ct.float8_e8m0fnu, rounding_mode=RP),
                                              ct.float32))


@ct.kernel
def cast_f4(x, o_rt):
    """f4E2M1FN in registers only (memory layout of f4 arrays is packed): sm_100, 13.3."""
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    ct.store(o_rt, index=(i,), tile=ct.astype(ct.astype(f, ct.float4_e2m1fn), ct.float32))


@ct.kernel
def cast_e5m3(x, o_rt):
    """f8E5M3FNU round trip: sm_107 and bytecode 13.4."""
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    ct.store(o_rt, index=(i,), tile=ct.astype(ct.astype(f, ct.float8_e5m3fnu), ct.float32))


@ct.kernel
def cast_tf32(x, o_rt):
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    t = ct.astype(f, ct.tfloat32)
    ct.store(o_rt, index=(i,), tile=ct.astype(t, ct.float32))


@ct.kernel
def bitcast(x, h, d, o_f2i, o_i2f, o_h2s, o_d2l, o_u2f):
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(64,))
    hv = ct.load(h, index=(i,), shape=(64,))
    dv = ct.load(d, index=(i,), shape=(64,))
    bits = ct.bitcast(f, ct.int32)
    ct.store(o_f2i, index=(i,), tile=bits)
    ct.store(o_i2f, index=(i,), tile=ct.bitcast(bits ^ -2147483648, ct.float32))
    ct.store(o_h2s, index=(i,), tile=ct.bitcast(hv, ct.int16))
    ct.store(o_d2l, index=(i,), tile=ct.bitcast(dv, ct.int64))
    ct.store(o_u2f, index=(i,), tile=ct.bitcast(ct.bitcast(f, ct.uint32) & 0x7FFFFFFF, ct.float32))


@ct.kernel
def pack_bytes(x, o_bytes, o_back):
    """pack_to_bytes / unpack_from_bytes (pack and unpack ops, 13.3)."""
    i = ct.bid(0)
    f = ct.load(x, index=(i,), shape=(32,))
    raw = ct.pack_to_bytes(f)
    ct.store(o_bytes, index=(i,), tile=raw)
    ct.store(o_back, index=(i,), tile=ct.unpack_from_bytes(raw, ct.int32))


def _arrs(**kw: str | tuple[str, int]) -> dict[str, Arr]:
    return {n: Arr(*(t if isinstance(t, tuple) else (t, 1))) for n, t in kw.items()}


def _entry(symbol: str, ref: str, params: dict, outputs: tuple, n: int, inits: dict,
           grid: int = 2, tolerance="exact", rows: dict | None = None) -> Entry:
    arrays = {}
    for name, p in params.items():
        shape = (rows[name], n) if rows and name in rows else (n,)
        if name in outputs and name not in inits:
            shape = (n * 4,) if name == "o_bytes" else shape
            arrays[name] = (shape, ZEROS)
        else:
            arrays[name] = (shape, inits[name])
    return Entry(symbol=symbol, params=params, reference=ref, outputs=outputs,
                 tolerance=tolerance, cases=[case((grid,), **arrays)])


_IF = _arrs(x="float32", xi="int32", xu="uint32", o_f2i="int32", o_f2u="uint8",
            o_f2l="int64", o_i2f="float32", o_u2f="float32", o_i2h="float16", o_l2d="float64")
_IW = _arrs(b="int8", ub="uint8", l="int64", o_b2i="int32", o_ub2i="uint32", o_b2l="int64",
            o_l2s="int16", o_l2b="int8", o_ui2ul="uint64")
_FW = _arrs(x="float32", h="float16", bh="bfloat16", d="float64", o_f2h="float16",
            o_f2bf="bfloat16", o_h2f="float32", o_bf2f="float32", o_d2f="float32",
            o_f2d="float64", o_bf2h="float16")
_FR = _arrs(x="float32", d="float64", o_f2h=("float16", 2), o_d2f="float32",
            o_f2tf=("float32", 2))
_F8 = _arrs(x="float32", q4="float8_e4m3fn", q5="float8_e5m2", o_rt4="float32",
            o_rt5="float32", o_q4="float8_e4m3fn", o_q5="float8_e5m2", o_from4="float32",
            o_from5="float16")
_E8 = _arrs(s="float8_e8m0fnu", o_from="float32", o_copy="float8_e8m0fnu")
_BC = _arrs(x="float32", h="float16", d="float64", o_f2i="int32", o_i2f="float32",
            o_h2s="int16", o_d2l="int64", o_u2f="float32")
# Values exactly halfway or near halfway between neighbours of narrower types, plus
# signed zeros, subnormals and large magnitudes.
_TRICKY = choice([0.0, "-0.0", 1.0, -1.0, 1.0009765625, 1.00048828125, 0.1, -0.1, 65504.0,
                  65520.0, 70000.0, 1e-8, -3.0e-5, 448.0, 500.0, 57344.0, 1.5, 2.75, -7.25,
                  3.3333333, 1e30, "inf", "-inf", "nan"])

KERNELS = [
    Kernel("cast_int_float", cast_int_float,
           [_entry("cast_int_float", "cast_int_float", _IF, tuple(n for n in _IF if n[0] == "o"),
                   128, {"x": uniform(-200.0, 200.0), "xi": randint(-2**31, 2**31),
                         "xu": ["bits"]})],
           "ftoi signed/unsigned (truncating), itof signed/unsigned, i32->f16, i64->f64"),
    Kernel("cast_int_width", cast_int_width,
           [_entry("cast_int_width", "cast_int_width", _IW, tuple(n for n in _IW if n[0] == "o"),
                   128, {"b": ["bits"], "ub": ["bits"], "l": ["bits"]})],
           "exti signed/unsigned and trunci"),
    Kernel("cast_float_width", cast_float_width,
           [_entry("cast_float_width", "cast_float_width", _FW,
                   tuple(n for n in _FW if n[0] == "o"), 128,
                   {"x": _TRICKY, "h": uniform(-100, 100), "bh": uniform(-100, 100),
                    "d": uniform(-1e5, 1e5)})],
           "ftof between f16/bf16/f32/f64 (nearest_even)"),
    Kernel("cast_rounding", cast_rounding,
           [_entry("cast_rounding", "cast_rounding", _FR, ("o_f2h", "o_d2f", "o_f2tf"),
                   128, {"x": _TRICKY, "d": uniform(-1e5, 1e5)},
                   rows={"o_f2h": 2, "o_f2tf": 2})],
           "ftof rounding<zero> and rounding<nearest_away> (cuTile: 13.4)",
           skip={v: "ftof rounding modes other than nearest_even need 13.4"
                 for v in ("13.1", "13.2", "13.3")}),
    Kernel("cast_f8", cast_f8,
           [_entry("cast_f8", "cast_f8", _F8, tuple(n for n in _F8 if n[0] == "o"), 128,
                   {"x": uniform(-300.0, 300.0), "q4": uniform(-400.0, 400.0),
                    "q5": uniform(-5000.0, 5000.0)})],
           "f8E4M3FN and f8E5M2 conversions and arrays"),
    Kernel("cast_e8m0", cast_e8m0,
           [_entry("cast_e8m0", "cast_e8m0", _E8, ("o_from", "o_copy"), 128,
                   {"s": choice([0.125, 1.0, 8.0, 2.0 ** 30, 2.0 ** -100])})],
           "f8E8M0FNU arrays and f8E8M0FNU -> f32 (sm_100)", gpu_code="sm_100",
           skip={"13.1": "float8_e8m0fnu needs 13.2"}),
    Kernel("cast_e8m0_round", cast_e8m0_round,
           [_entry("cast_e8m0_round", "cast_e8m0_round",
                   _arrs(x="float32", o_rz="float32", o_rp="float32"), ("o_rz", "o_rp"), 128,
                   {"x": choice([0.3, 0.5, 1.0, 3.0, 4.0, 1000.0, 2.0 ** -20, 2.0 ** 40])})],
           "f32 -> f8E8M0FNU with rounding<zero> and rounding<positive_inf> (sm_100)",
           gpu_code="sm_100",
           skip={v: "f32 -> float8_e8m0fnu rounding needs 13.3" for v in ("13.1", "13.2")}),
    Kernel("cast_f4", cast_f4,
           [_entry("cast_f4", "cast_f4", _arrs(x="float32", o_rt="float32"), ("o_rt",), 128,
                   {"x": uniform(-6.0, 6.0)})],
           "f4E2M1FN round trip (sm_100)", gpu_code="sm_100",
           skip={v: "float4_e2m1fn needs 13.3" for v in ("13.1", "13.2")}),
    Kernel("cast_e5m3", cast_e5m3,
           [_entry("cast_e5m3", "cast_e5m3", _arrs(x="float32", o_rt="float32"), ("o_rt",), 128,
                   {"x": uniform(0.01, 100.0)})],
           "f8E5M3FNU round trip (sm_107)", gpu_code="sm_107",
           skip={v: "float8_e5m3fnu needs 13.4" for v in ("13.1", "13.2", "13.3")}),
    Kernel("cast_tf32", cast_tf32,
           [_entry("cast_tf32", "cast_tf32", _arrs(x="float32", o_rt="float32"), ("o_rt",), 128, {"x": uniform(-10.0, 10.0)},
                   tolerance=tol(1e-6))],
           "f32 -> tf32 -> f32 (tf32 has no arithmetic in cuTile; see matmul_tf32)"),
    Kernel("bitcast", bitcast,
           [_entry("bitcast", "bitcast", _BC, tuple(n for n in _BC if n[0] == "o"), 128,
                   {"x": uniform(-10.0, 10.0), "h": uniform(-10.0, 10.0),
                    "d": uniform(-1e6, 1e6)})],
           "bitcast between same-width float and integer types"),
    Kernel("pack_bytes", pack_bytes,
           [_entry("pack_bytes", "pack_bytes",
                   _arrs(x="float32", o_bytes="uint8", o_back="int32"), ("o_bytes", "o_back"),
                   64, {"x": uniform(-10.0, 10.0)})],
           "pack_to_bytes / unpack_from_bytes",
           skip={v: "pack/unpack need 13.3" for v in ("13.1", "13.2")}),
]
