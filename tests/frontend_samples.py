"""Hand-built TileIR bytecode samples covering ops, attributes and types that
cuTile Python kernels rarely produce.

Built with cuTile's low-level bytecode encoder (`cuda.tile._bytecode`), so the
bytes come from NVIDIA's own writer; every sample is a valid module that
NVIDIA's `tileirdisasm` accepts. `build_samples(version)` returns
{name: bytes} for one bytecode version ("13.1" ... "13.4").
"""

from __future__ import annotations

import struct
from typing import Callable

SampleFn = Callable[..., None]
_SAMPLES: list[tuple[str, str, SampleFn]] = []


def sample(name: str, since: str = "13.1") -> Callable[[SampleFn], SampleFn]:
    def deco(fn: SampleFn) -> SampleFn:
        _SAMPLES.append((name, since, fn))
        return fn
    return deco


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


class K:
    """Small conveniences over cuTile's encoder for one function body."""

    def __init__(self, bc, w, fb) -> None:
        self.bc = bc
        self.w = w
        self.tt = w.type_table
        self.cb = fb.code_builder
        self.params = fb.parameters
        self.version = w.version

    def t(self, elem, *shape):
        st = self.bc.SimpleType
        e = getattr(self.tt, elem) if elem in ("I1", "I32", "I64", "F32", "Token") else self.tt.simple(getattr(st, elem))
        return self.tt.tile(e, shape)

    def ptr(self, elem):
        st = self.bc.SimpleType
        return self.tt.pointer(self.tt.simple(getattr(st, elem)), self.bc.PtrAttr.Missing)

    def const(self, elem, shape, data: bytes):
        return self.bc.encode_ConstantOp(self.cb, self.t(elem, *shape), data)

    def i32(self, v: int):
        return self.const("I32", (), struct.pack("<i", v))

    def f32(self, v: float, *shape):
        return self.const("F32", shape, struct.pack("<f", v))

    def ret(self) -> None:
        self.bc.encode_ReturnOp(self.cb, [])


def _module(bc, version, body: SampleFn, params=(), name="k", hints=None, globals_=()) -> bytes:
    major, minor = (int(x) for x in version.split("."))
    v = bc.BytecodeVersion(major * 10000 + minor * 100)
    buf = bytearray()
    with bc.write_bytecode(1, buf, v) as w:
        for gname, gtype_fn, data, align, const in globals_:
            kw = {"constant": const} if const else {}
            w.global_section.define_global(gname, gtype_fn(w.type_table, bc), data, align, **kw)
        ptypes = [p(w.type_table, bc) for p in params]
        with w.function(name, ptypes, [], True, hints or {}, bc.MISSING_DEBUG_ATTR_ID) as fb:
            body(K(bc, w, fb))
    return bytes(buf)


def build_samples(version: str) -> dict[str, bytes]:
    from cuda.tile import _bytecode as bc

    out = {}
    for name, since, fn in _SAMPLES:
        if _vkey(version) < _vkey(since):
            continue
        out[name] = fn(bc, version)
    return out


def _tile(elem, *shape):
    def make(tt, bc):
        st = bc.SimpleType
        e = getattr(tt, elem) if elem in ("I1", "I32", "I64", "F32", "Token") else tt.simple(getattr(st, elem))
        return tt.tile(e, shape)
    return make


def _ptr_tile(elem, *shape):
    def make(tt, bc):
        p = tt.pointer(tt.simple(getattr(bc.SimpleType, elem)), bc.PtrAttr.Missing)
        return tt.tile(p, shape)
    return make


# -- samples ------------------------------------------------------------------------
@sample("float_arith")
def _float_arith(bc, version):
    def body(k: K):
        RM = bc.RoundingMode
        a = k.f32(1.5, 8)
        b = k.f32(-2.25, 8)
        t = k.t("F32", 8)
        k.bc.encode_AddFOp(k.cb, t, a, b, RM.ZERO, True)
        k.bc.encode_SubFOp(k.cb, t, a, b, RM.NEGATIVE_INF, False)
        k.bc.encode_MulFOp(k.cb, t, a, b, RM.POSITIVE_INF, True)
        k.bc.encode_DivFOp(k.cb, t, a, b, RM.APPROX, False)
        k.bc.encode_DivFOp(k.cb, t, a, b, RM.FULL, True)
        k.bc.encode_FmaOp(k.cb, t, a, b, a, RM.NEAREST_EVEN, False)
        k.bc.encode_MaxFOp(k.cb, t, a, b, True, True)
        k.bc.encode_MinFOp(k.cb, t, a, b, True, False)
        k.bc.encode_MinFOp(k.cb, t, a, b, False, True)
        k.bc.encode_RemFOp(k.cb, t, a, b)
        k.bc.encode_FPowFOp(k.cb, t, a, b)
        k.bc.encode_SqrtOp(k.cb, t, a, RM.APPROX, True)
        k.bc.encode_RsqrtOp(k.cb, t, a, True)
        k.bc.encode_Exp2Op(k.cb, t, a, True)
        if _vkey(version) >= (13, 3):
            k.bc.encode_ExpOp(k.cb, t, a, RM.APPROX)
        else:
            k.bc.encode_ExpOp(k.cb, t, a, RM.FULL)
        if _vkey(version) >= (13, 2):
            k.bc.encode_TanHOp(k.cb, t, a, RM.APPROX)
            k.bc.encode_Atan2Op(k.cb, t, a, b)
        else:
            k.bc.encode_TanHOp(k.cb, t, a, RM.FULL)
        for fn in (bc.encode_AbsFOp, bc.encode_CeilOp, bc.encode_CosOp, bc.encode_CosHOp, bc.encode_FloorOp,
                   bc.encode_LogOp, bc.encode_Log2Op, bc.encode_NegFOp, bc.encode_SinOp, bc.encode_SinHOp,
                   bc.encode_TanOp):
            fn(k.cb, t, a)
        i1 = k.t("I1", 8)
        k.bc.encode_CmpFOp(k.cb, i1, a, b, bc.ComparisonPredicate.LESS_THAN_OR_EQUAL, bc.ComparisonOrdering.UNORDERED)
        k.bc.encode_CmpFOp(k.cb, i1, a, b, bc.ComparisonPredicate.NOT_EQUAL, bc.ComparisonOrdering.ORDERED)
        k.ret()
    return _module(bc, version, body)


@sample("int_arith")
def _int_arith(bc, version):
    def body(k: K):
        OV, S = bc.IntegerOverflow, bc.Signedness
        t = k.t("I32", 4)
        a = k.const("I32", (4,), struct.pack("<4i", 1, -2, 3, 2147483647))
        b = k.const("I32", (4,), struct.pack("<i", 7))
        k.bc.encode_AddIOp(k.cb, t, a, b, OV.NSW)
        k.bc.encode_SubIOp(k.cb, t, a, b, OV.NUW)
        k.bc.encode_MulIOp(k.cb, t, a, b, OV.NW)
        k.bc.encode_ShLIOp(k.cb, t, a, b, OV.NONE)
        k.bc.encode_ShRIOp(k.cb, t, a, b, S.Unsigned)
        k.bc.encode_DivIOp(k.cb, t, a, b, S.Signed, bc.RoundingMode.ZERO)
        k.bc.encode_DivIOp(k.cb, t, a, b, S.Unsigned, bc.RoundingMode.POSITIVE_INF)
        k.bc.encode_DivIOp(k.cb, t, a, b, S.Signed, bc.RoundingMode.NEGATIVE_INF)
        k.bc.encode_RemIOp(k.cb, t, a, b, S.Signed)
        k.bc.encode_MaxIOp(k.cb, t, a, b, S.Unsigned)
        k.bc.encode_MinIOp(k.cb, t, a, b, S.Signed)
        k.bc.encode_MulhiIOp(k.cb, t, a, b)
        k.bc.encode_AndIOp(k.cb, t, a, b)
        k.bc.encode_OrIOp(k.cb, t, a, b)
        k.bc.encode_XOrIOp(k.cb, t, a, b)
        k.bc.encode_AbsIOp(k.cb, t, a)
        if _vkey(version) >= (13, 2):
            k.bc.encode_NegIOp(k.cb, t, a, OV.NSW)
        else:
            k.bc.encode_NegIOp(k.cb, t, a, OV.NONE)
        i1 = k.t("I1", 4)
        c = k.bc.encode_CmpIOp(k.cb, i1, a, b, bc.ComparisonPredicate.GREATER_THAN, S.Unsigned)
        k.bc.encode_SelectOp(k.cb, t, c, a, b)
        k.ret()
    return _module(bc, version, body)


@sample("constants")
def _constants(bc, version):
    def body(k: K):
        k.const("I1", (8,), bytes([0b10110010]))
        k.const("I1", (4,), b"\xff")
        k.const("I1", (4,), b"\x00")
        k.const("I8", (2, 4), bytes([1, 255, 3, 128, 5, 6, 0, 7]))
        k.const("I16", (2,), struct.pack("<2h", -7, 300))
        k.const("I64", (), struct.pack("<q", -(2 ** 63)))
        k.const("F16", (4,), struct.pack("<4e", 0.5, -0.0, 65504.0, 6e-8))
        k.const("F64", (2,), struct.pack("<2d", 0.1, 1e300))
        k.const("F32", (4,), struct.pack("<4f", float("inf"), float("-inf"), float("nan"), 3.0))
        k.const("F32", (2, 2), struct.pack("<4f", 1.0, 0.1, 123456.789, 1e-45))
        k.const("F32", (), struct.pack("<f", 16777216.0))
        k.const("BF16", (2,), bytes([0x80, 0x3F, 0xC0, 0x7F]))
        k.const("F32", (128,), b"".join(struct.pack("<f", i * 0.25) for i in range(128)))
        k.const("I32", (64,), b"".join(struct.pack("<i", i) for i in range(64)))
        k.const("I16", (2, 64), b"".join(struct.pack("<h", i) for i in range(128)))
        k.const("F8E4M3FN", (4,), bytes([0x38, 0xB8, 0x7F, 0x7E]))
        k.const("F8E5M2", (4,), bytes([0x3C, 0x7C, 0x7F, 0x01]))
        k.const("F32", (), struct.pack("<f", -3.0))
        k.const("F32", (), struct.pack("<f", 2.5))
        k.ret()
    return _module(bc, version, body)


@sample("low_precision_types", since="13.3")
def _low_precision(bc, version):
    def body(k: K):
        a = k.const("F8E8M0FNU", (4,), bytes([127, 128, 0, 255]))
        f = k.const("F4E2M1FN", (4,), bytes([0x1, 0x2, 0xA, 0x7]))
        k.bc.encode_FToFOp(k.cb, k.t("F32", 4), a, bc.RoundingMode.NEAREST_EVEN)
        k.bc.encode_FToFOp(k.cb, k.t("F16", 4), f, bc.RoundingMode.NEAREST_EVEN)
        k.ret()
    return _module(bc, version, body)


@sample("conversions")
def _conversions(bc, version):
    def body(k: K):
        RM, S = bc.RoundingMode, bc.Signedness
        f = k.f32(2.5, 4)
        i = k.const("I32", (4,), struct.pack("<i", -3))
        k.bc.encode_FToFOp(k.cb, k.t("F16", 4), f, RM.ZERO)
        k.bc.encode_FToFOp(k.cb, k.t("F64", 4), f, RM.NEAREST_EVEN)
        if _vkey(version) >= (13, 4):
            k.bc.encode_FToIOp(k.cb, k.t("I16", 4), f, S.Signed, RM.NEAREST_INT_TO_ZERO, True)
            k.bc.encode_FToIOp(k.cb, k.t("I32", 4), f, S.Unsigned, RM.NEAREST_INT_TO_ZERO, False)
        else:
            k.bc.encode_FToIOp(k.cb, k.t("I16", 4), f, S.Signed, RM.NEAREST_INT_TO_ZERO, False)
        k.bc.encode_IToFOp(k.cb, k.t("F32", 4), i, S.Unsigned, RM.NEAREST_EVEN)
        k.bc.encode_IToFOp(k.cb, k.t("BF16", 4), i, S.Signed, RM.NEAREST_EVEN)
        k.bc.encode_ExtIOp(k.cb, k.t("I64", 4), i, S.Signed)
        k.bc.encode_TruncIOp(k.cb, k.t("I8", 4), i, bc.IntegerOverflow.NUW)
        k.bc.encode_BitcastOp(k.cb, k.t("F32", 4), i)
        p = k.params[0]
        k.bc.encode_PtrToIntOp(k.cb, k.t("I64"), p)
        pi = k.bc.encode_PtrToIntOp(k.cb, k.t("I64"), p)
        k.bc.encode_IntToPtrOp(k.cb, k.tt.tile(k.ptr("F16"), ()), pi)
        k.bc.encode_PtrToPtrOp(k.cb, k.tt.tile(k.ptr("I8"), ()), p)
        k.ret()
    return _module(bc, version, body, params=[_ptr_tile("F32")])


@sample("shapes")
def _shapes(bc, version):
    def body(k: K):
        a = k.f32(1.0, 2, 4)
        r = k.bc.encode_ReshapeOp(k.cb, k.t("F32", 8), a)
        r1 = k.bc.encode_ReshapeOp(k.cb, k.t("F32", 1, 8), r)
        k.bc.encode_BroadcastOp(k.cb, k.t("F32", 4, 8), r1)
        k.bc.encode_PermuteOp(k.cb, k.t("F32", 4, 2), a, [1, 0])
        k.bc.encode_CatOp(k.cb, k.t("F32", 4, 4), a, a, 0)
        idx = k.i32(1)
        zero = k.i32(0)
        k.bc.encode_ExtractOp(k.cb, k.t("F32", 1, 4), a, [idx, zero])
        if _vkey(version) >= (13, 4):
            sub = k.f32(0.0, 1, 4)
            k.bc.encode_InsertOp(k.cb, k.t("F32", 2, 4), sub, a, [idx, zero])
        k.bc.encode_IotaOp(k.cb, k.t("I32", 16))
        bx = k.bc.encode_GetTileBlockIdOp(k.cb, k.t("I32"), k.t("I32"), k.t("I32"))
        k.bc.encode_GetNumTileBlocksOp(k.cb, k.t("I32"), k.t("I32"), k.t("I32"))
        k.bc.encode_AddIOp(k.cb, k.t("I32"), bx[0], bx[2], bc.IntegerOverflow.NONE)
        k.ret()
    return _module(bc, version, body)


@sample("pack_unpack", since="13.3")
def _pack(bc, version):
    def body(k: K):
        a = k.const("F4E2M1FN", (8,), bytes(range(0, 8)))
        p = k.bc.encode_PackOp(k.cb, k.t("I8", 4), a)
        k.bc.encode_UnpackOp(k.cb, k.t("F4E2M1FN", 8), p)
        k.ret()
    return _module(bc, version, body)


@sample("mma")
def _mma(bc, version):
    def body(k: K):
        a = k.const("F16", (16, 16), struct.pack("<e", 1.0))
        c = k.f32(0.0, 16, 16)
        if _vkey(version) >= (13, 3):
            k.bc.encode_MmaFOp(k.cb, k.t("F32", 16, 16), a, a, c, True)
        k.bc.encode_MmaFOp(k.cb, k.t("F32", 16, 16), a, a, c, False)
        i = k.const("I8", (2, 16, 32), b"\x01")
        j = k.const("I8", (2, 32, 16), b"\x02")
        acc = k.const("I32", (2, 16, 16), struct.pack("<i", 0))
        k.bc.encode_MmaIOp(k.cb, k.t("I32", 2, 16, 16), i, j, acc, bc.Signedness.Signed, bc.Signedness.Unsigned)
        k.ret()
    return _module(bc, version, body)


@sample("reduce_scan")
def _reduce(bc, version):
    def body(k: K):
        a = k.f32(1.0, 8, 4)
        st = k.t("F32")
        nb = k.bc.encode_ReduceOp(k.cb, [k.t("F32", 4)], [a], 0, [bc.Float(0.0, bc.SimpleType.F32, k.tt)])
        with nb.new_block([st, st]) as (x, y):
            s = k.bc.encode_AddFOp(k.cb, st, x, y, bc.RoundingMode.NEAREST_EVEN, False)
            k.bc.encode_YieldOp(k.cb, [s])
        nb.done()
        b = k.const("I32", (8, 4), struct.pack("<i", 3))
        it = k.t("I32")
        nb = k.bc.encode_ReduceOp(k.cb, [k.t("F32", 8), k.t("I32", 8)], [a, b], 1,
                                  [bc.Float(float("-inf"), bc.SimpleType.F32, k.tt), bc.Integer(k.tt.I32, 32, -1)])
        with nb.new_block([st, st, it, it]) as (x0, y0, x1, y1):
            m = k.bc.encode_MaxFOp(k.cb, st, x0, y0, False, False)
            n = k.bc.encode_MaxIOp(k.cb, it, x1, y1, bc.Signedness.Signed)
            k.bc.encode_YieldOp(k.cb, [m, n])
        nb.done()
        nb = k.bc.encode_ScanOp(k.cb, [k.t("I32", 8, 4)], [b], 0, True, [bc.Integer(k.tt.I32, 32, 0)])
        with nb.new_block([it, it]) as (x, y):
            s = k.bc.encode_AddIOp(k.cb, it, x, y, bc.IntegerOverflow.NONE)
            k.bc.encode_YieldOp(k.cb, [s])
        nb.done()
        k.ret()
    return _module(bc, version, body)


@sample("control_flow")
def _control(bc, version):
    def body(k: K):
        it = k.t("I32")
        ft = k.t("F32")
        lb, ub, step = k.i32(0), k.i32(10), k.i32(1)
        init = k.f32(0.0)
        nb = k.bc.encode_ForOp(k.cb, [ft], lb, ub, step, [init], False)
        with nb.new_block([it, ft]) as (iv, acc):
            f = k.bc.encode_IToFOp(k.cb, ft, iv, bc.Signedness.Signed, bc.RoundingMode.NEAREST_EVEN)
            s = k.bc.encode_AddFOp(k.cb, ft, acc, f, bc.RoundingMode.NEAREST_EVEN, False)
            k.bc.encode_ContinueOp(k.cb, [s])
        (res,) = nb.done()
        nb = k.bc.encode_ForOp(k.cb, [], lb, ub, step, [], _vkey(version) >= (13, 2))
        with nb.new_block([it]) as (iv,):
            k.bc.encode_ContinueOp(k.cb, [])
        nb.done()
        cond = k.const("I1", (), b"\xff")
        nb = k.bc.encode_IfOp(k.cb, [ft, it], cond)
        with nb.new_block([]):
            k.bc.encode_YieldOp(k.cb, [res, lb])
        with nb.new_block([]):
            k.bc.encode_YieldOp(k.cb, [init, ub])
        nb.done()
        nb = k.bc.encode_IfOp(k.cb, [], cond)
        with nb.new_block([]):
            k.bc.encode_YieldOp(k.cb, [])
        with nb.new_block([]):
            k.bc.encode_YieldOp(k.cb, [])
        nb.done()
        nb = k.bc.encode_LoopOp(k.cb, [it], [lb])
        with nb.new_block([it]) as (x,):
            nx = k.bc.encode_AddIOp(k.cb, it, x, step, bc.IntegerOverflow.NONE)
            c = k.bc.encode_CmpIOp(k.cb, k.t("I1"), nx, ub, bc.ComparisonPredicate.EQUAL, bc.Signedness.Signed)
            ib = k.bc.encode_IfOp(k.cb, [], c)
            with ib.new_block([]):
                k.bc.encode_BreakOp(k.cb, [nx])
            with ib.new_block([]):
                k.bc.encode_YieldOp(k.cb, [])
            ib.done()
            k.bc.encode_ContinueOp(k.cb, [nx])
        nb.done()
        nb = k.bc.encode_LoopOp(k.cb, [], [])
        with nb.new_block([]):
            k.bc.encode_BreakOp(k.cb, [])
        nb.done()
        k.ret()
    return _module(bc, version, body)


@sample("pointers")
def _pointers(bc, version):
    def body(k: K):
        MO, MS = bc.MemoryOrderingSemantics, bc.MemoryScope
        p = k.params[0]
        pt = k.tt.tile(k.ptr("F32"), (8,))
        r = k.bc.encode_ReshapeOp(k.cb, k.tt.tile(k.ptr("F32"), (1,)), p)
        ptrs0 = k.bc.encode_BroadcastOp(k.cb, pt, r)
        off = k.bc.encode_IotaOp(k.cb, k.t("I32", 8))
        ptrs = k.bc.encode_OffsetOp(k.cb, pt, ptrs0, off)
        mask = k.const("I1", (8,), bytes([0x0F]))
        pad = k.f32(0.0, 8)
        tok = k.bc.encode_MakeTokenOp(k.cb, k.tt.Token)
        ft, tk = k.t("F32", 8), k.tt.Token
        hints = bc.attribute.make_load_store_hints({"sm_90": bc.LoadStoreHints(latency=3, allow_tma=False),
                                          "sm_100": bc.LoadStoreHints(latency=5)})
        v, t1 = k.bc.encode_LoadPtrTkoOp(k.cb, ft, tk, ptrs, None, None, None, MO.WEAK, None, None)
        v2, t2 = k.bc.encode_LoadPtrTkoOp(k.cb, ft, tk, ptrs, mask, pad, tok, MO.ACQUIRE, MS.DEVICE, hints)
        k.bc.encode_LoadPtrTkoOp(k.cb, ft, tk, ptrs, mask, None, t1, MO.RELAXED, MS.TL_BLK, None)
        t3 = k.bc.encode_StorePtrTkoOp(k.cb, tk, ptrs, v, mask, t2, MO.RELEASE, MS.SYS, hints)
        k.bc.encode_StorePtrTkoOp(k.cb, tk, ptrs, v2, None, None, MO.WEAK, None, None)
        k.bc.encode_JoinTokensOp(k.cb, tk, [t1, t2, t3])
        k.bc.encode_AtomicRMWTkoOp(k.cb, ft, tk, ptrs, v, mask, tok, MO.RELAXED, MS.DEVICE, bc.AtomicRMWMode.ADDF)
        ip = k.tt.tile(k.ptr("I32"), (8,))
        iptrs = k.bc.encode_PtrToPtrOp(k.cb, ip, ptrs)
        iv = k.const("I32", (8,), struct.pack("<i", 1))
        k.bc.encode_AtomicRMWTkoOp(k.cb, k.t("I32", 8), tk, iptrs, iv, None, None, MO.ACQ_REL, MS.SYS,
                                   bc.AtomicRMWMode.XCHG)
        k.bc.encode_AtomicCASTkoOp(k.cb, k.t("I32", 8), tk, iptrs, iv, iv, None, None, MO.ACQUIRE, MS.TL_BLK)
        k.bc.encode_AtomicCASTkoOp(k.cb, k.t("I32", 8), tk, iptrs, iv, iv, mask, tok, MO.RELAXED, MS.DEVICE)
        k.ret()
    return _module(bc, version, body, params=[_ptr_tile("F32")])


@sample("views")
def _views(bc, version):
    def body(k: K):
        MO, MS = bc.MemoryOrderingSemantics, bc.MemoryScope
        D = bc.DYNAMIC_SHAPE
        p, n, s = k.params
        f32 = k.tt.F32
        tv_t = k.tt.tensor_view(f32, [D, 64], [D, 1], bc.PtrAttr.Missing)
        tv = k.bc.encode_MakeTensorViewOp(k.cb, tv_t, p, [n], [s])
        tv2_t = k.tt.tensor_view(f32, [32, 64], [64, 1], bc.PtrAttr.Missing)
        tv2 = k.bc.encode_MakeTensorViewOp(k.cb, tv2_t, p, [], [])
        pv_t = k.tt.partition_view([16, 32], tv_t, [1, 0], bc.PaddingValue.NegInf)
        pv = k.bc.encode_MakePartitionViewOp(k.cb, pv_t, tv)
        pv2_t = k.tt.partition_view([8, 8], tv2_t, [0, 1], bc.PaddingValue.Missing)
        pv2 = k.bc.encode_MakePartitionViewOp(k.cb, pv2_t, tv2)
        i = k.i32(0)
        j = k.const("I64", (), struct.pack("<q", 1))
        tok = k.bc.encode_MakeTokenOp(k.cb, k.tt.Token)
        hints = bc.attribute.make_load_store_hints({"sm_90": bc.LoadStoreHints(latency=2)})
        tile, t1 = k.bc.encode_LoadViewTkoOp(k.cb, k.t("F32", 16, 32), k.tt.Token, pv, [i, i], tok, MO.RELAXED,
                                             MS.DEVICE, hints, [False, False])
        k.bc.encode_LoadViewTkoOp(k.cb, k.t("F32", 8, 8), k.tt.Token, pv2, [j, j], None, MO.WEAK, None, None, [False, False])
        k.bc.encode_StoreViewTkoOp(k.cb, k.tt.Token, tile, pv, [i, i], t1, MO.RELEASE, MS.TL_BLK, None, [False, False])
        k.bc.encode_GetTensorShapeOp(k.cb, [k.t("I32"), k.t("I32")], tv)
        k.bc.encode_GetIndexSpaceShapeOp(k.cb, [k.t("I64"), k.t("I64")], pv)
        k.ret()
    return _module(bc, version, body, params=[_ptr_tile("F32"), _tile("I32"), _tile("I32")])


@sample("views_13_3", since="13.3")
def _views3(bc, version):
    def body(k: K):
        MO, MS = bc.MemoryOrderingSemantics, bc.MemoryScope
        D = bc.DYNAMIC_SHAPE
        p, n = k.params
        f32 = k.tt.F32
        tv_t = k.tt.tensor_view(f32, [D, 64], [64, 1], bc.PtrAttr.Missing)
        tv = k.bc.encode_MakeTensorViewOp(k.cb, tv_t, p, [n], [])
        sv_t = k.tt.strided_view([8, 16], [2, 1], tv_t, [0, 1], bc.PaddingValue.Zero)
        sv = k.bc.encode_MakeStridedViewOp(k.cb, sv_t, tv)
        gv_t = k.tt.gather_scatter_view([8, 16], tv_t, 0, bc.PaddingValue.Nan)
        gv = k.bc.encode_MakeGatherScatterViewOp(k.cb, gv_t, tv)
        i = k.i32(0)
        tok = k.bc.encode_MakeTokenOp(k.cb, k.tt.Token)
        tile, t1 = k.bc.encode_LoadViewTkoOp(k.cb, k.t("F32", 8, 16), k.tt.Token, sv, [i, i], tok, MO.WEAK,
                                             None, None, [False, False])
        rows = k.bc.encode_IotaOp(k.cb, k.t("I32", 8))
        g, t2 = k.bc.encode_LoadViewTkoOp(k.cb, k.t("F32", 8, 16), k.tt.Token, gv, [rows, i], None, MO.WEAK,
                                          None, None, [False, False])
        k.bc.encode_AtomicRedViewTkoOp(k.cb, k.tt.Token, sv, [i, i], tile, t1, MO.RELAXED, MS.DEVICE,
                                       bc.AtomicRMWMode.ADDF, [])
        k.bc.encode_AtomicRedViewTkoOp(k.cb, k.tt.Token, sv, [i, i], g, None, MO.RELAXED, MS.TL_BLK,
                                       bc.AtomicRMWMode.ADDF, [])
        k.ret()
    return _module(bc, version, body, params=[_ptr_tile("F32"), _tile("I32")])


@sample("inbounds", since="13.4")
def _inbounds(bc, version):
    def body(k: K):
        MO = bc.MemoryOrderingSemantics
        p = k.params[0]
        tv_t = k.tt.tensor_view(k.tt.F32, [64, 64], [64, 1], bc.PtrAttr.Missing)
        tv = k.bc.encode_MakeTensorViewOp(k.cb, tv_t, p, [], [])
        pv_t = k.tt.partition_view([16, 16], tv_t, [0, 1], bc.PaddingValue.Missing)
        pv = k.bc.encode_MakePartitionViewOp(k.cb, pv_t, tv)
        i = k.i32(0)
        tile, t1 = k.bc.encode_LoadViewTkoOp(k.cb, k.t("F32", 16, 16), k.tt.Token, pv, [i, i], None, MO.WEAK,
                                             None, None, [True, False])
        k.bc.encode_StoreViewTkoOp(k.cb, k.tt.Token, tile, pv, [i, i], t1, MO.WEAK, None, None, [True, True])
        k.ret()
    return _module(bc, version, body, params=[_ptr_tile("F32")])


@sample("misc")
def _misc(bc, version):
    def body(k: K):
        p, n = k.params
        c = k.const("I1", (), b"\xff")
        k.bc.encode_AssertOp(k.cb, c, 'bad "value"\n\\ end')
        x = k.const("I32", (8,), struct.pack("<i", 16))
        k.bc.encode_AssumeOp(k.cb, k.t("I32", 8), x, bc.DivBy(16))
        k.bc.encode_AssumeOp(k.cb, k.t("I32", 8), x, bc.DivBy(4, 4, 0))
        k.bc.encode_AssumeOp(k.cb, k.t("I32"), n, bc.Bounded(-3, 100))
        k.bc.encode_AssumeOp(k.cb, k.t("I32"), n, bc.Bounded(None, 7))
        k.bc.encode_AssumeOp(k.cb, k.t("I32"), n, bc.Bounded(None, None))
        k.bc.encode_AssumeOp(k.cb, k.tt.tile(k.ptr("F32"), ()), p, bc.DivBy(16))
        a = k.bc.encode_AssumeOp(k.cb, k.t("I32", 8), x, bc.DivBy(8))
        k.bc.encode_AssumeOp(k.cb, k.t("I32", 8), a, bc.Bounded(0, None))
        fl = k.f32(1.0, 4)
        tok = k.bc.encode_MakeTokenOp(k.cb, k.tt.Token)
        if _vkey(version) >= (13, 2):
            t = k.bc.encode_PrintTkoOp(k.cb, k.tt.Token, [fl, n], None, "x=%f n=%d\n")
            k.bc.encode_PrintTkoOp(k.cb, k.tt.Token, [], tok, "hello")
            k.bc.encode_PrintTkoOp(k.cb, k.tt.Token, [fl], t, "%f")
        else:
            k.bc.encode_PrintTkoOp(k.cb, None, [fl, n], None, "x=%f n=%d\n")
            k.bc.encode_PrintTkoOp(k.cb, None, [], None, "hello")
        k.ret()
    return _module(bc, version, body, params=[_ptr_tile("F32"), _tile("I32")])


@sample("same_elements")
def _same(bc, version):
    from cuda.tile._bytecode.attribute import AttributeTag
    from cuda.tile._bytecode.basic import encode_int_list

    class SameElems(bc.attribute.AssumePredicate):
        def __init__(self, values):
            self.values = values

        def encode_tagged(self, string_table, buf):
            buf.extend(AttributeTag.SameElements._value_)
            encode_int_list(self.values, 8, buf)

    def body(k: K):
        x = k.const("I32", (4, 8), struct.pack("<i", 5))
        k.bc.encode_AssumeOp(k.cb, k.t("I32", 4, 8), x, SameElems([2, 4]))
        k.ret()
    return _module(bc, version, body)


@sample("globals")
def _globals(bc, version):
    def body(k: K):
        pt = k.tt.tile(k.ptr("F32"), ())
        k.bc.encode_GetGlobalOp(k.cb, pt, "table")
        k.bc.encode_GetGlobalOp(k.cb, k.tt.tile(k.ptr("I32"), ()), "counter")
        k.ret()
    f32x4 = _tile("F32", 4)
    i32x1 = _tile("I32", 1)
    const = _vkey(version) >= (13, 3)
    return _module(bc, version, body, globals_=[("table", f32x4, struct.pack("<4f", 1, 2, 3, 4), 16, const),
                                                 ("counter", i32x1, struct.pack("<i", 0), 0, False)])


@sample("alloca", since="13.3")
def _alloca(bc, version):
    def body(k: K):
        pt = k.tt.tile(k.ptr("F32"), ())
        k.bc.encode_AllocaOp(k.cb, pt, 64, 128, False)
        k.bc.encode_AllocaOp(k.cb, pt, 32, 16, True)
        k.ret()
    return _module(bc, version, body)


@sample("tokens_13_4", since="13.4")
def _tokens4(bc, version):
    def body(k: K):
        tok = k.bc.encode_MakeTokenOp(k.cb, k.tt.Token)
        a = k.bc.encode_GdcWaitTkoOp(k.cb, k.tt.Token, None)
        b = k.bc.encode_GdcWaitTkoOp(k.cb, k.tt.Token, tok)
        k.bc.encode_GdcLaunchDependentsTkoOp(k.cb, k.tt.Token, a)
        k.bc.encode_GdcLaunchDependentsTkoOp(k.cb, k.tt.Token, None)
        k.bc.encode_MemoryFenceAliasTkoOp(k.cb, k.tt.Token, b)
        f = k.f32(2.0, 4)
        e = k.const("I32", (4,), struct.pack("<i", 3))
        k.bc.encode_FPowIOp(k.cb, k.t("F32", 4), f, e)
        k.ret()
    return _module(bc, version, body)


@sample("entry_hints")
def _entry_hints(bc, version):
    def body(k: K):
        k.ret()
    hints = {"sm_90": bc.EntryHints(num_cta_in_cga=2, occupancy=1), "sm_100": bc.EntryHints(num_worker_warps_per_cta=4)}
    return _module(bc, version, body, params=[_tile("I64"), _tile("F16")], hints=hints, name="with.dots$name")


# -- helpers shared by the front-end tests ------------------------------------------------
import functools
import glob
import os
import subprocess

VERSIONS = ("13.1", "13.2", "13.3", "13.4")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def oracle(tool: str = "tileirdisasm") -> "str | None":
    """NVIDIA's tool from the nvidia-cuda-tileiras wheel (never our own script of the same name)."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        path = os.path.join(base, "cu13", "bin", tool)
        if os.access(path, os.X_OK):
            return path
    return None


def run_oracle(args: list, tool: str = "tileirdisasm") -> subprocess.CompletedProcess:
    return subprocess.run([oracle(tool)] + list(args), capture_output=True, text=True, timeout=120)


def corpus_files() -> list:
    return sorted(glob.glob(os.path.join(REPO, "tests", "corpus", "bytecode", "*", "*.tileirbc")))


@functools.lru_cache(maxsize=None)
def sample_bytes(version: str) -> dict:
    """The hand-built samples of one version (cuTile's encoder), cached per process."""
    return build_samples(version)


def file_version(data: bytes) -> str:
    return f"{data[8]}.{data[9]}"
