"""Bytecode for the hand-written ``text/*.mlir`` kernels, built op by op.

cuTile's Python frontend never emits these ops (mulhii, plain divi, ptr_to_ptr,
ptr_to_int, get_tensor_shape, alloca, memory_fence_alias_tko, the i4 type), so
each ``.mlir`` file here is written by hand in the syntax NVIDIA's
``tileirdisasm`` prints.  To check that text against NVIDIA's tools, this module
builds the same module with cuTile's low-level bytecode encoder
(``cuda.tile._bytecode``); ``tests/test_corpus.py`` asserts that NVIDIA's
disassembly of that bytecode equals the hand-written file, and that NVIDIA's
``tileiras`` compiles it.  The bytecode also joins the corpus (manifest kind
"text") so the interpreter and emulator can run these ops like any other kernel.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Sequence

from corpus_spec import ZEROS, Arr, Entry, case, tol, uniform


@dataclass(frozen=True)
class TextKernel:
    name: str
    build: Callable[[str], bytes]          # version -> bytecode
    entries: Sequence[Entry]
    description: str
    min_version: str = "13.1"
    gpu_code: str = "sm_90"
    skip: Mapping[str, str] = field(default_factory=dict)


def _bv(version: str):
    from cuda.tile._bytecode.version import BytecodeVersion
    return {"13.1": BytecodeVersion.V_13_1, "13.2": BytecodeVersion.V_13_2,
            "13.3": BytecodeVersion.V_13_3, "13.4": BytecodeVersion.V_13_4}[version]


class Fn:
    """One entry function under construction: typed helpers over cuTile's encoder."""

    def __init__(self, writer, fb):
        import cuda.tile._bytecode as bc
        self.bc = bc
        self.w = writer
        self.tt = writer.type_table
        self.cb = fb.code_builder
        self.params = fb.parameters

    # types
    def elem(self, name: str):
        from cuda.tile._bytecode.type import SimpleType
        return self.tt.simple(getattr(SimpleType, name.upper()))

    def tile(self, elem: str, shape: Sequence[int] = ()):
        return self.tt.tile(self.elem(elem), tuple(shape))

    def ptr_tile(self, elem: str, shape: Sequence[int] = ()):
        return self.tt.tile(self.tt.pointer(self.elem(elem), self.bc.PtrAttr.Missing),
                            tuple(shape))

    @property
    def token_ty(self):
        return self.tt.Token

    # ops used by every kernel
    def token(self):
        return self.bc.encode_MakeTokenOp(self.cb, self.token_ty)

    def block_id(self):
        t = self.tile("i32")
        return self.bc.encode_GetTileBlockIdOp(self.cb, t, t, t)

    def view_1d(self, elem: str, ptr, shape, stride, tile: int):
        """make_tensor_view + make_partition_view over a dynamic 1-D array."""
        bc = self.bc
        dyn = bc.DYNAMIC_SHAPE
        tv_ty = self.tt.tensor_view(self.elem(elem), [dyn], [dyn], bc.PtrAttr.Missing)
        tv = bc.encode_MakeTensorViewOp(self.cb, tv_ty, ptr, [shape], [stride])
        pv_ty = self.tt.partition_view([tile], tv_ty, [0], bc.PaddingValue.Missing)
        return tv, tv_ty, bc.encode_MakePartitionViewOp(self.cb, pv_ty, tv)

    def load(self, elem: str, view, index, token, n: int):
        bc = self.bc
        return bc.encode_LoadViewTkoOp(self.cb, self.tile(elem, (n,)), self.token_ty, view,
                                       [index], token, bc.MemoryOrderingSemantics.WEAK, None,
                                       None, [False])

    def store(self, value, view, index, token):
        bc = self.bc
        return bc.encode_StoreViewTkoOp(self.cb, self.token_ty, value, view, [index], token,
                                        bc.MemoryOrderingSemantics.WEAK, None, None, [False])

    def ret(self):
        self.bc.encode_ReturnOp(self.cb, [])


@contextmanager
def module(version: str, out: bytearray) -> Iterator:
    import cuda.tile._bytecode as bc
    with bc.write_bytecode(1, out, _bv(version)) as w:
        yield w


@contextmanager
def entry(w, name: str, params: Sequence) -> Iterator[Fn]:
    import cuda.tile._bytecode as bc
    with w.function(name, list(params), [], True, {}, bc.MISSING_DEBUG_ATTR_ID) as fb:
        yield Fn(w, fb)


def _array_params(w, *elems: str) -> list:
    """Entry parameter types of 1-D arrays in cuTile's ABI: ptr, shape, stride (i32)."""
    import cuda.tile._bytecode as bc
    from cuda.tile._bytecode.type import SimpleType
    tt = w.type_table
    i32 = tt.tile(tt.I32, ())
    out = []
    for e in elems:
        pointee = tt.simple(getattr(SimpleType, e.upper()))
        out += [tt.tile(tt.pointer(pointee, bc.PtrAttr.Missing), ()), i32, i32]
    return out


# --------------------------------------------------------------------------- kernels

def build_mulhi_divi(version: str) -> bytes:
    """hi = mulhii(a, b); q = divi signed (rounding toward zero); qu = divi unsigned."""
    out = bytearray()
    with module(version, out) as w:
        with entry(w, "mulhi_divi", _array_params(w, "i32", "i32", "i32", "i32", "i32")) as f:
            bc = f.bc
            a, an, as_, b, bn, bs, hi, hn, hs, q, qn, qs, qu, un, us = f.params
            tok = f.token()
            _, _, va = f.view_1d("i32", a, an, as_, 64)
            _, _, vb = f.view_1d("i32", b, bn, bs, 64)
            _, _, vh = f.view_1d("i32", hi, hn, hs, 64)
            _, _, vq = f.view_1d("i32", q, qn, qs, 64)
            _, _, vu = f.view_1d("i32", qu, un, us, 64)
            bx, _, _ = f.block_id()
            x, t1 = f.load("i32", va, bx, tok, 64)
            y, t2 = f.load("i32", vb, bx, tok, 64)
            ty = f.tile("i32", (64,))
            h = bc.encode_MulhiIOp(f.cb, ty, x, y)
            s = bc.encode_DivIOp(f.cb, ty, x, y, bc.Signedness.Signed, bc.RoundingMode.ZERO)
            u = bc.encode_DivIOp(f.cb, ty, x, y, bc.Signedness.Unsigned, bc.RoundingMode.ZERO)
            f.store(h, vh, bx, t1)
            f.store(s, vq, bx, t2)
            f.store(u, vu, bx, t2)
            f.ret()
    return bytes(out)


def build_ptr_casts(version: str) -> bytes:
    """Read f32 data through an i32 pointer (ptr_to_ptr), round-trip the pointer through
    an integer (ptr_to_int, addi, int_to_ptr), and report the view's extent
    (get_tensor_shape)."""
    out = bytearray()
    with module(version, out) as w:
        with entry(w, "ptr_casts", _array_params(w, "f32", "i32", "i32")) as f:
            bc = f.bc
            x, xn, xs, o, on, os_, n, nn, ns = f.params
            tok = f.token()
            pi = bc.encode_PtrToPtrOp(f.cb, f.ptr_tile("i32"), x)
            addr = bc.encode_PtrToIntOp(f.cb, f.tile("i64"), pi)
            zero = bc.encode_ConstantOp(f.cb, f.tile("i64"), (0).to_bytes(8, "little"))
            addr2 = bc.encode_AddIOp(f.cb, f.tile("i64"), addr, zero, bc.IntegerOverflow.NONE)
            p2 = bc.encode_IntToPtrOp(f.cb, f.ptr_tile("i32"), addr2)
            tv, tv_ty, vx = f.view_1d("i32", p2, xn, xs, 32)
            (extent,) = bc.encode_GetTensorShapeOp(f.cb, [f.tile("i32")], tv)
            _, _, vo = f.view_1d("i32", o, on, os_, 32)
            _, _, vn = f.view_1d("i32", n, nn, ns, 1)
            bx, _, _ = f.block_id()
            bits, t1 = f.load("i32", vx, bx, tok, 32)
            f.store(bits, vo, bx, t1)
            ext = bc.encode_ReshapeOp(f.cb, f.tile("i32", (1,)), extent)
            f.store(ext, vn, bx, tok)
            f.ret()
    return bytes(out)


def build_alloca(version: str) -> bytes:
    """Stage a tile through per-block scratch memory from alloca (13.3)."""
    out = bytearray()
    with module(version, out) as w:
        with entry(w, "alloca_scratch", _array_params(w, "f32", "f32")) as f:
            bc = f.bc
            x, xn, xs, o, on, os_ = f.params
            tok = f.token()
            _, _, vx = f.view_1d("f32", x, xn, xs, 64)
            _, _, vo = f.view_1d("f32", o, on, os_, 64)
            bx, _, _ = f.block_id()
            t, t1 = f.load("f32", vx, bx, tok, 64)
            base = bc.encode_AllocaOp(f.cb, f.ptr_tile("f32"), 64, 16, False)
            lanes = bc.encode_IotaOp(f.cb, f.tile("i32", (64,)))
            b1 = bc.encode_ReshapeOp(f.cb, f.ptr_tile("f32", (1,)), base)
            b64 = bc.encode_BroadcastOp(f.cb, f.ptr_tile("f32", (64,)), b1)
            ptrs = bc.encode_OffsetOp(f.cb, f.ptr_tile("f32", (64,)), b64, lanes)
            w_tok = bc.encode_StorePtrTkoOp(f.cb, f.token_ty, ptrs, t, None, t1,
                                            bc.MemoryOrderingSemantics.WEAK, None, None)
            back, t2 = bc.encode_LoadPtrTkoOp(f.cb, f.tile("f32", (64,)), f.token_ty, ptrs, None,
                                              None, w_tok, bc.MemoryOrderingSemantics.WEAK, None,
                                              None)
            one = bc.encode_ConstantOp(f.cb, f.tile("f32", (64,)),
                                       (0x3F800000).to_bytes(4, "little"))
            r = bc.encode_AddFOp(f.cb, f.tile("f32", (64,)), back, one,
                                 bc.RoundingMode.NEAREST_EVEN, False)
            f.store(r, vo, bx, t2)
            f.ret()
    return bytes(out)


def build_memory_fence(version: str) -> bytes:
    """Store, fence aliasing memory (memory_fence_alias_tko, 13.4), reload through a
    second view of the same array, store the doubled value to another array."""
    out = bytearray()
    with module(version, out) as w:
        with entry(w, "memory_fence", _array_params(w, "f32", "f32", "f32")) as f:
            bc = f.bc
            x, xn, xs, m, mn, ms, o, on, os_ = f.params
            tok = f.token()
            _, _, vx = f.view_1d("f32", x, xn, xs, 64)
            _, _, vm = f.view_1d("f32", m, mn, ms, 64)
            _, _, vm2 = f.view_1d("f32", m, mn, ms, 64)
            _, _, vo = f.view_1d("f32", o, on, os_, 64)
            bx, _, _ = f.block_id()
            t, t1 = f.load("f32", vx, bx, tok, 64)
            t2 = f.store(t, vm, bx, t1)
            t3 = bc.encode_MemoryFenceAliasTkoOp(f.cb, f.token_ty, t2)
            back, t4 = f.load("f32", vm2, bx, t3, 64)
            r = bc.encode_AddFOp(f.cb, f.tile("f32", (64,)), back, back,
                                 bc.RoundingMode.NEAREST_EVEN, False)
            f.store(r, vo, bx, t4)
            f.ret()
    return bytes(out)


def build_int4(version: str) -> bytes:
    """i8 -> i4 (trunci) -> i8 (exti signed and unsigned): the i4 element type (13.3)."""
    out = bytearray()
    with module(version, out) as w:
        with entry(w, "int4_roundtrip", _array_params(w, "i8", "i8", "i8")) as f:
            bc = f.bc
            x, xn, xs, s, sn, ss, u, un, us = f.params
            tok = f.token()
            _, _, vx = f.view_1d("i8", x, xn, xs, 64)
            _, _, vs = f.view_1d("i8", s, sn, ss, 64)
            _, _, vu = f.view_1d("i8", u, un, us, 64)
            bx, _, _ = f.block_id()
            t, t1 = f.load("i8", vx, bx, tok, 64)
            n4 = bc.encode_TruncIOp(f.cb, f.tile("i4", (64,)), t, bc.IntegerOverflow.NONE)
            sx = bc.encode_ExtIOp(f.cb, f.tile("i8", (64,)), n4, bc.Signedness.Signed)
            ux = bc.encode_ExtIOp(f.cb, f.tile("i8", (64,)), n4, bc.Signedness.Unsigned)
            f.store(sx, vs, bx, t1)
            f.store(ux, vu, bx, t1)
            f.ret()
    return bytes(out)


def _i32(*names: str) -> dict[str, Arr]:
    return {n: Arr("int32", 1) for n in names}


TEXT_KERNELS = [
    TextKernel(
        "mulhi_divi", build_mulhi_divi,
        [Entry("mulhi_divi", _i32("a", "b", "hi", "q", "qu"),
               [case((2,), a=((128,), ["bits"]), b=((128,), ["nonzero_bits"]),
                     hi=((128,), ZEROS), q=((128,), ZEROS), qu=((128,), ZEROS))],
               "mulhi_divi", ("hi", "q", "qu"))],
        "mulhii (unsigned high half) and divi rounding toward zero, signed and unsigned"),
    TextKernel(
        "ptr_casts", build_ptr_casts,
        [Entry("ptr_casts", {"x": Arr("float32", 1), "o": Arr("int32", 1),
                             "n": Arr("int32", 1)},
               [case((2,), x=((64,), uniform(-4, 4)), o=((64,), ZEROS), n=((2,), ZEROS))],
               "ptr_casts", ("o", "n"))],
        "ptr_to_ptr, ptr_to_int, int_to_ptr and get_tensor_shape"),
    TextKernel(
        "alloca", build_alloca,
        [Entry("alloca_scratch", {"x": Arr("float32", 1), "o": Arr("float32", 1)},
               [case((2,), x=((128,), uniform(-4, 4)), o=((128,), ZEROS))],
               "alloca", ("o",), tolerance=tol(0.0))],
        "per-block scratch memory from alloca, accessed through offset pointers",
        min_version="13.3"),
    TextKernel(
        "memory_fence", build_memory_fence,
        [Entry("memory_fence", {"x": Arr("float32", 1), "m": Arr("float32", 1),
                                "o": Arr("float32", 1)},
               [case((2,), x=((128,), uniform(-4, 4)), m=((128,), ZEROS), o=((128,), ZEROS))],
               "memory_fence", ("m", "o"))],
        "memory_fence_alias_tko ordering a store before a reload through another view",
        min_version="13.4"),
    TextKernel(
        "int4", build_int4,
        [Entry("int4_roundtrip", {"x": Arr("int8", 1), "s": Arr("int8", 1),
                                  "u": Arr("int8", 1)},
               [case((2,), x=((128,), ["bits"]), s=((128,), ZEROS), u=((128,), ZEROS))],
               "int4", ("s", "u"))],
        "the i4 element type through trunci and exti", min_version="13.3"),
]
