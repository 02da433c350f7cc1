"""PTX emulator: warp collectives, ldmatrix/stmatrix, mma.sync, cp.async and mbarriers."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tileiras.emulator import EmulatorError
from tileiras.emulator.host import emulate

RNG = np.random.default_rng(7)

HEADER = """
.version 8.0
.target sm_90
.address_size 64
"""


def kernel(body: str, params: str, extra: str = "") -> str:
    return HEADER + extra + f"""
.visible .entry k({params})
{{
    .reg .pred %p<16>;
    .reg .b32 %r<80>;
    .reg .b64 %rd<32>;
    .reg .f32 %f<16>;
    .reg .b16 %h<8>;
{body}
}}
"""


PROLOGUE = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %laneid;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [inp];
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.u32 %r2, [%rd4];
    add.s64 %rd5, %rd1, %rd3;
"""


def run_warp(body: str, inp: np.ndarray, n: int = 128, extra: str = "") -> np.ndarray:
    ptx = kernel(PROLOGUE + body + "\n    st.global.u32 [%rd5], %r10;\n    ret;", ".param .u64 out, .param .u64 inp",
                 extra)
    (o, _), _ = emulate(ptx, "k", (1, 1, 1), (n, 1, 1), [np.zeros(n, np.uint32), inp.astype(np.uint32)])
    return o


def ref_shfl(vals: np.ndarray, mode: str, b: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    out, pred = vals.copy(), np.zeros(vals.size, bool)
    for t in range(vals.size):
        lane, base = t % 32, t - t % 32
        clamp, seg = c & 31, (c >> 8) & 31
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        j, ok = {"up": (lane - b, lane - b >= max_lane), "down": (lane + b, lane + b <= max_lane),
                 "bfly": (lane ^ b, (lane ^ b) <= max_lane),
                 "idx": (min_lane | (b & ~seg), (min_lane | (b & ~seg)) <= max_lane)}[mode]
        j = j if ok else lane
        src = base + j
        out[t] = vals[src] if src < vals.size else vals[t]
        pred[t] = ok
    return out, pred


@pytest.mark.parametrize("mode,b,c", [("up", 1, 0), ("up", 5, 0), ("down", 2, 31), ("down", 3, 0x81F),
                                      ("bfly", 1, 31), ("bfly", 16, 31), ("idx", 7, 31), ("idx", 3, 0x1C1F)])
def test_shfl_modes(mode: str, b: int, c: int) -> None:
    inp = RNG.integers(0, 2**31, 128).astype(np.uint32)
    got = run_warp(f"shfl.sync.{mode}.b32 %r3|%p1, %r2, {b}, {c}, -1; selp.u32 %r4, 1, 0, %p1;"
                   " shl.b32 %r3, %r3, 1; or.b32 %r10, %r3, %r4;", inp)
    vals, pred = ref_shfl(inp, mode, b, c)
    np.testing.assert_array_equal(got, ((vals << 1) | pred).astype(np.uint32))


def test_shfl_reduction_tree_and_partial_warp() -> None:
    inp = RNG.integers(0, 1000, 48).astype(np.uint32)
    body = "mov.u32 %r10, %r2;\n" + "".join(
        f"    shfl.sync.bfly.b32 %r3, %r10, {k}, 31, -1;\n    add.u32 %r10, %r10, %r3;\n" for k in (16, 8, 4, 2, 1))
    got = run_warp(body, inp, n=48)
    # the partial second warp (16 threads): lanes whose partner does not exist read their own value
    vals = inp.astype(np.uint32).copy()
    for k in (16, 8, 4, 2, 1):
        partner = np.array([t ^ k if ((t - t % 32) + ((t % 32) ^ k)) < 48 else t for t in range(48)])
        partner = np.array([(t - t % 32) + ((t % 32) ^ k) if (t - t % 32) + ((t % 32) ^ k) < 48 else t
                            for t in range(48)])
        vals = vals + vals[partner]
    np.testing.assert_array_equal(got, vals)


def test_vote_ballot_match_redux_elect_under_divergence() -> None:
    inp = RNG.integers(0, 4, 128).astype(np.uint32)
    body = """
    setp.lt.u32 %p1, %r1, 20;          // only lanes < 20 take part
    @!%p1 bra SKIP;
    setp.ne.u32 %p2, %r2, 0;
    vote.sync.ballot.b32 %r3, %p2, 0xfffff;
    vote.sync.all.pred %p3, %p2, 0xfffff;
    vote.sync.any.pred %p4, %p2, 0xfffff;
    vote.sync.uni.pred %p5, %p2, 0xfffff;
    match.any.sync.b32 %r4, %r2, 0xfffff;
    redux.sync.add.u32 %r5, %r2, 0xfffff;
    redux.sync.max.u32 %r6, %r1, 0xfffff;
    elect.sync %r7|%p6, 0xfffff;
    selp.u32 %r8, 1, 0, %p3; selp.u32 %r9, 2, 0, %p4; selp.u32 %r11, 4, 0, %p5; selp.u32 %r12, 8, 0, %p6;
    or.b32 %r8, %r8, %r9; or.b32 %r8, %r8, %r11; or.b32 %r8, %r8, %r12;
    xor.b32 %r10, %r3, %r4;
    mad.lo.u32 %r10, %r5, 1000003, %r10;
    mad.lo.u32 %r10, %r6, 7919, %r10;
    mad.lo.u32 %r10, %r7, 131, %r10;
    add.u32 %r10, %r10, %r8;
    bra.uni END;
SKIP:
    mov.u32 %r10, 0;
END:
"""
    got = run_warp(body, inp)
    exp = np.zeros(128, np.uint64)
    for w in range(4):
        lanes = np.arange(20)
        v = inp[w * 32:w * 32 + 20]
        ballot = sum(1 << int(l_) for l_ in lanes if v[l_] != 0)
        all_, any_ = bool((v != 0).all()), bool((v != 0).any())
        uni = all_ or not any_
        for l_ in lanes:
            match = sum(1 << int(k) for k in lanes if v[k] == v[l_])
            flags = all_ * 1 + any_ * 2 + uni * 4 + (l_ == 0) * 8
            val = (ballot ^ match) + int(v.sum()) * 1000003 + 19 * 7919 + 0 * 131 + flags
            exp[w * 32 + l_] = val & 0xFFFFFFFF
    np.testing.assert_array_equal(got, exp.astype(np.uint32))


def test_collective_waits_for_lanes_on_another_path() -> None:
    """Lanes that reach the shuffle through different branches still exchange values there."""
    inp = np.arange(64, dtype=np.uint32)
    body = """
    and.b32 %r3, %r1, 1;
    setp.eq.u32 %p1, %r3, 0;
    @%p1 bra EVEN;
    add.u32 %r2, %r2, 1000;
    bra.uni JOIN;
EVEN:
    add.u32 %r2, %r2, 2000;
JOIN:
    shfl.sync.bfly.b32 %r10, %r2, 1, 31, -1;
"""
    got = run_warp(body, inp, n=64)
    t = np.arange(64)
    own = t + np.where(t % 2, 1000, 2000)
    np.testing.assert_array_equal(got, own[t ^ 1])


def test_shfl_after_some_lanes_exit() -> None:
    inp = np.arange(32, dtype=np.uint32)
    body = """
    setp.ge.u32 %p1, %r1, 16;
    @%p1 exit;
    shfl.sync.down.b32 %r10, %r2, 1, 31, 0xffff;
"""
    got = run_warp(body, inp, n=32)
    exp = np.zeros(32, np.uint32)
    exp[:16] = np.minimum(np.arange(16) + 1, 31)
    exp[15] = 16     # lane 16 exited but its register still holds its value
    np.testing.assert_array_equal(got, exp)


# --- ldmatrix / stmatrix / movmatrix -------------------------------------------------

def _lane_pairs(trans: bool) -> tuple[np.ndarray, np.ndarray]:
    lane = np.arange(32)[:, None]
    j = np.arange(2)[None, :]
    row, col = np.broadcast_to(lane // 4, (32, 2)), 2 * (lane % 4) + j
    return (col, row) if trans else (row, col)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_and_stmatrix(num: int, trans: bool) -> None:
    # 4 matrices of 8x8 u16, stored with a row pitch of 24 elements; lane i points at row i%8 of matrix i//8
    mats = RNG.integers(0, 65536, (4, 8, 8)).astype(np.uint16)
    pitch = 24
    smem = np.zeros((32, pitch), np.uint16)
    for m in range(4):
        smem[m * 8:(m + 1) * 8, :8] = mats[m]
    regs = ", ".join(f"%r{20 + i}" for i in range(num))
    tr = ".trans" if trans else ""
    body = f"""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    mov.u32 %r3, sm;
    // copy the source block into shared memory: 32 rows of {pitch} u16
    mul.lo.u32 %r4, %r0, {pitch * 2};
    cvt.u64.u32 %rd3, %r4;
    add.s64 %rd4, %rd1, %rd3;
    add.u32 %r5, %r3, %r4;
    mov.u32 %r6, 0;
COPY:
    ld.global.u32 %r7, [%rd4];
    st.shared.u32 [%r5], %r7;
    add.s64 %rd4, %rd4, 4;
    add.u32 %r5, %r5, 4;
    add.u32 %r6, %r6, 1;
    setp.lt.u32 %p1, %r6, {pitch // 2};
    @%p1 bra COPY;
    bar.sync 0;
    add.u32 %r8, %r3, %r4;
    ldmatrix.sync.aligned.m8n8.x{num}{tr}.shared.b16 {{{regs}}}, [%r8];
    mul.wide.u32 %rd5, %r0, {4 * num};
    add.s64 %rd6, %rd2, %rd5;
"""
    for i in range(num):
        body += f"    st.global.u32 [%rd6+{4 * i}], %r{20 + i};\n"
    # and store them back through stmatrix into a second shared block, then to global
    body += f"""
    bar.sync 0;
    mov.u32 %r9, sm2;
    mul.lo.u32 %r10, %r0, 16;
    add.u32 %r9, %r9, %r10;
    mov.u32 %r15, 0;                         // shared memory starts undefined: zero what stmatrix leaves
    st.shared.v4.u32 [%r9], {{%r15, %r15, %r15, %r15}};
    bar.sync 0;
    stmatrix.sync.aligned.m8n8.x{num}{tr}.shared.b16 [%r9], {{{regs}}};
    bar.sync 0;
    ld.param.u64 %rd7, [back];
    mul.wide.u32 %rd8, %r0, 16;
    add.s64 %rd9, %rd7, %rd8;
    add.s64 %rd10, %rd9, 0;
    ld.shared.v4.u32 {{%r11, %r12, %r13, %r14}}, [%r9];
    st.global.v4.u32 [%rd10], {{%r11, %r12, %r13, %r14}};
"""
    ptx = kernel(body, ".param .u64 src, .param .u64 dst, .param .u64 back",
                 extra=".shared .align 16 .b8 sm[1536];\n.shared .align 16 .b8 sm2[512];\n")
    (src, dst, back), _ = emulate(ptx, "k", (1, 1, 1), (32, 1, 1),
                                  [smem, np.zeros(32 * num, np.uint32), np.zeros((32, 8), np.uint16)])
    got = dst.reshape(32, num).view(np.uint16).reshape(32, num, 2)
    rows, cols = _lane_pairs(trans)
    for i in range(num):
        np.testing.assert_array_equal(got[:, i, :], mats[i][rows, cols])
    np.testing.assert_array_equal(back[:8 * num].reshape(num, 8, 8), mats[:num])


def test_movmatrix_transposes() -> None:
    mat = RNG.integers(0, 65536, (8, 8)).astype(np.uint16)
    rows, cols = _lane_pairs(False)
    frag = np.ascontiguousarray(mat[rows, cols]).view(np.uint32).reshape(32)
    got = run_warp("movmatrix.sync.aligned.m8n8.trans.b16 %r10, %r2;", frag, n=32)
    np.testing.assert_array_equal(got.view(np.uint16).reshape(32, 2), mat.T[rows, cols])


# --- mma.sync -------------------------------------------------------------------------

def _frag(kind: str, shape: str, op: str) -> tuple[np.ndarray, np.ndarray]:
    """Independent transcription of the PTX ISA fragment tables: (rows, cols) per lane and element."""
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    m, n, k = (int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
    r, c = [], []
    if op == "c":
        if shape == "m8n8k4":
            for i in range(2):
                r.append(g), c.append(2 * t + i)
        else:
            for i in range(4):
                r.append(g + 8 * (i >= 2)), c.append(2 * t + (i % 2))
    elif kind == "f16":
        if op == "a":
            cnt = 8 if k == 16 else 4
            for i in range(cnt):
                r.append(g + 8 * (i % 4 >= 2)), c.append(2 * t + (i % 2) + 8 * (i >= 4))
        else:
            for i in range(k // 4):
                r.append(2 * t + (i % 2) + 8 * (i >= 2)), c.append(g)
    elif kind in ("tf32", "f64") and shape != "m8n8k4":
        if op == "a":
            for i in range(k // 2):
                r.append(g + 8 * (i % 2)), c.append(t + 4 * (i // 2))
        else:
            for i in range(k // 4):
                r.append(t + 4 * i), c.append(g)
    elif kind == "f64":
        (r.append(g), c.append(t)) if op == "a" else (r.append(t), c.append(g))
    else:   # 8-bit
        if op == "a":
            cnt = 16 if k == 32 else 8
            for i in range(cnt):
                r.append(g + 8 * ((i // 4) % 2)), c.append(4 * t + (i % 4) + 16 * (i >= 8))
        else:
            for i in range(k // 4):
                r.append(4 * t + (i % 4) + 16 * (i >= 4)), c.append(g)
    return np.stack(r, 1), np.stack(c, 1)


MMA_CASES = [
    ("m16n8k16", "f32", "f16", "f32", np.float16), ("m16n8k8", "f32", "f16", "f32", np.float16),
    ("m16n8k16", "f32", "bf16", "f32", ml_dtypes.bfloat16), ("m16n8k16", "f16", "f16", "f16", np.float16),
    ("m16n8k8", "f32", "tf32", "f32", np.float32), ("m16n8k4", "f32", "tf32", "f32", np.float32),
    ("m16n8k32", "s32", "s8", "s32", np.int8), ("m16n8k16", "s32", "u8", "s32", np.uint8),
    ("m8n8k4", "f64", "f64", "f64", np.float64), ("m16n8k8", "f64", "f64", "f64", np.float64),
    ("m16n8k32", "f32", "e4m3", "f32", ml_dtypes.float8_e4m3fn),
]


@pytest.mark.parametrize("shape,dty,aty,cty,adt", MMA_CASES)
def test_mma_sync_against_numpy(shape: str, dty: str, aty: str, cty: str, adt: object) -> None:
    m, n, k = (int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
    kind = {"f16": "f16", "bf16": "f16", "tf32": "tf32", "f64": "f64"}.get(aty, "b8")
    if np.dtype(adt).kind in "iu":
        A = RNG.integers(-20 if aty == "s8" else 0, 40, (m, k)).astype(adt)
        B = RNG.integers(-20 if aty == "s8" else 0, 40, (k, n)).astype(adt)
        C = RNG.integers(-1000, 1000, (m, n)).astype(np.int32)
    else:
        A = RNG.uniform(-2, 2, (m, k)).astype(adt)
        B = RNG.uniform(-2, 2, (k, n)).astype(adt)
        C = RNG.uniform(-2, 2, (m, n)).astype(np.float64 if cty == "f64" else np.float16 if cty == "f16"
                                               else np.float32)
    ra, ca = _frag(kind, shape, "a")
    rb, cb = _frag(kind, shape, "b")
    rc, cc = _frag(kind, shape, "c")
    a_frag = np.ascontiguousarray(A[ra, ca])
    b_frag = np.ascontiguousarray(B[rb, cb])
    c_frag = np.ascontiguousarray(C[rc, cc])
    word = 8 if kind == "f64" else 4
    a_words = a_frag.view(np.uint64 if word == 8 else np.uint32).reshape(32, -1)
    b_words = b_frag.view(np.uint64 if word == 8 else np.uint32).reshape(32, -1)
    c_words = c_frag.view(np.uint64 if cty == "f64" else np.uint32).reshape(32, -1)
    na, nb, nc = a_words.shape[1], b_words.shape[1], c_words.shape[1]
    cw = 8 if cty == "f64" else 4
    rk = "%rd" if word == 8 else "%r"
    ck = "%rd" if cty == "f64" else "%r"
    regs_a = [f"{rk}{10 + i}" for i in range(na)]
    regs_b = [f"{rk}{20 + i}" for i in range(nb)]
    regs_c = [f"{ck}{26 + i}" if ck == "%rd" else f"%r{40 + i}" for i in range(nc)]
    regs_d = [f"{ck}{30 - i}" if ck == "%rd" else f"%r{60 + i}" for i in range(nc)]
    body = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd3, [pc]; ld.param.u64 %rd4, [pd];
"""
    for name, regs, width, base in (("a", regs_a, word, "%rd1"), ("b", regs_b, word, "%rd2"),
                                    ("c", regs_c, cw, "%rd3")):
        body += f"    mul.wide.u32 %rd5, %r0, {len(regs) * width};\n    add.s64 %rd6, {base}, %rd5;\n"
        for i, r in enumerate(regs):
            body += f"    ld.global.b{width * 8} {r}, [%rd6+{i * width}];\n"
    body += (f"    mma.sync.aligned.{shape}.row.col.{dty}.{aty}.{aty}.{cty} {{{', '.join(regs_d)}}}, "
             f"{{{', '.join(regs_a)}}}, {{{', '.join(regs_b)}}}, {{{', '.join(regs_c)}}};\n")
    body += f"    mul.wide.u32 %rd5, %r0, {nc * cw};\n    add.s64 %rd6, %rd4, %rd5;\n"
    for i, r in enumerate(regs_d):
        body += f"    st.global.b{cw * 8} [%rd6+{i * cw}], {r};\n"
    ptx = kernel(body, ".param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pd")
    (_, _, _, d_words), _ = emulate(ptx, "k", (1, 1, 1), (32, 1, 1),
                                    [a_words, b_words, c_words, np.zeros_like(c_words)])
    d_frag = d_words.reshape(-1).view(C.dtype).reshape(32, -1)
    D = np.zeros((m, n), C.dtype)
    D[rc, cc] = d_frag
    if np.dtype(adt).kind in "iu":
        np.testing.assert_array_equal(D, A.astype(np.int64) @ B.astype(np.int64) + C)
    else:
        A64, B64 = A.astype(np.float64), B.astype(np.float64)
        if aty == "tf32":   # the tensor cores read only the top 19 bits
            A64 = (A.view(np.uint32) & 0xFFFFE000).view(np.float32).astype(np.float64)
            B64 = (B.view(np.uint32) & 0xFFFFE000).view(np.float32).astype(np.float64)
        ref = A64 @ B64 + C.astype(np.float64)
        # within the bound of the K products and C summed in dty (tests/accumulation.py): the truncated tf32
        # inputs are the reference's too, so no input rounding
        from accumulation import limit

        bound = limit(np.abs(ref), np.abs(A64) @ np.abs(B64) + np.abs(C.astype(np.float64)), k + 1, dty)
        err = np.abs(D.astype(np.float64) - ref)
        assert (err <= bound).all(), f"{int((err > bound).sum())} elements beyond the K={k} bound"


def test_mma_requires_the_whole_warp() -> None:
    """mma is .aligned: a warp split across paths executes it once every lane has arrived."""
    A = RNG.uniform(-1, 1, (16, 8)).astype(np.float16)
    B = RNG.uniform(-1, 1, (8, 8)).astype(np.float16)
    ra, ca = _frag("f16", "m16n8k8", "a")
    rb, cb = _frag("f16", "m16n8k8", "b")
    rc, cc = _frag("f16", "m16n8k8", "c")
    a_words = np.ascontiguousarray(A[ra, ca]).view(np.uint32).reshape(32, 2)
    b_words = np.ascontiguousarray(B[rb, cb]).view(np.uint32).reshape(32, 1)
    body = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [pa]; ld.param.u64 %rd2, [pb]; ld.param.u64 %rd4, [pd];
    mul.wide.u32 %rd5, %r0, 8; add.s64 %rd6, %rd1, %rd5;
    ld.global.b32 %r10, [%rd6]; ld.global.b32 %r11, [%rd6+4];
    mul.wide.u32 %rd5, %r0, 4; add.s64 %rd6, %rd2, %rd5;
    ld.global.b32 %r12, [%rd6];
    setp.lt.u32 %p1, %r0, 9;
    @%p1 bra LOW;
    mov.b32 %f1, 0f3F800000;
    bra.uni GO;
LOW:
    mov.b32 %f1, 0f3F800000;
GO:
    mov.b32 %f2, 0f3F800000; mov.b32 %f3, 0f3F800000; mov.b32 %f4, 0f3F800000;
    mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f5, %f6, %f7, %f8}, {%r10, %r11}, {%r12}, {%f1, %f2, %f3, %f4};
    mul.wide.u32 %rd5, %r0, 16; add.s64 %rd6, %rd4, %rd5;
    st.global.v4.f32 [%rd6], {%f5, %f6, %f7, %f8};
"""
    ptx = kernel(body, ".param .u64 pa, .param .u64 pb, .param .u64 pd")
    (_, _, d), _ = emulate(ptx, "k", (1, 1, 1), (32, 1, 1), [a_words, b_words, np.zeros((32, 4), np.float32)])
    D = np.zeros((16, 8), np.float32)
    D[rc, cc] = d
    np.testing.assert_allclose(D, A.astype(np.float64) @ B.astype(np.float64) + 1, rtol=1e-6)


def test_unsupported_mma_shape_is_an_error() -> None:
    body = "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%f1, %f2}, {%r1, %r2}, {%r3, %r4}, {%f3, %f4};"
    with pytest.raises(EmulatorError, match="unsupported mma"):
        emulate(kernel(body, ".param .u64 out"), "k", (1, 1, 1), (32, 1, 1), [np.zeros(1, np.uint32)])


# --- cp.async and mbarriers ---------------------------------------------------------

def test_cp_async_groups_zero_fill_and_visibility() -> None:
    src = np.arange(1, 257, dtype=np.uint32)
    body = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, sm;
    mul.wide.u32 %rd3, %r0, 16;
    add.s64 %rd4, %rd1, %rd3;
    mul.lo.u32 %r2, %r0, 16;
    add.u32 %r3, %r1, %r2;
    // the old contents: zeros (shared memory starts undefined)
    mov.u32 %r11, 0;
    st.shared.v4.u32 [%r3], {%r11, %r11, %r11, %r11};
    st.shared.v4.u32 [%r3+1024], {%r11, %r11, %r11, %r11};
    // group 0: a full 16-byte copy; group 1: only 4 source bytes, the other 12 zero-filled
    cp.async.cg.shared.global [%r3], [%rd4], 16;
    cp.async.commit_group;
    add.u32 %r4, %r3, 1024;
    cp.async.ca.shared.global [%r4], [%rd4], 16, 4;
    cp.async.commit_group;
    // before waiting, the shared destination still holds the old contents
    ld.shared.u32 %r5, [%r3];
    cp.async.wait_group 1;
    ld.shared.u32 %r6, [%r3];
    ld.shared.u32 %r7, [%r4+4];
    ld.shared.u32 %r8, [%r4];
    cp.async.wait_all;
    ld.shared.u32 %r9, [%r4];
    ld.shared.u32 %r10, [%r4+4];
    mul.wide.u32 %rd5, %r0, 24;
    add.s64 %rd6, %rd2, %rd5;
    st.global.v2.u32 [%rd6], {%r5, %r6};
    st.global.v2.u32 [%rd6+8], {%r7, %r8};
    st.global.v2.u32 [%rd6+16], {%r9, %r10};
"""
    ptx = kernel(body, ".param .u64 src, .param .u64 out", extra=".shared .align 16 .b8 sm[2048];\n")
    # the race checker reports the reads of bytes still in flight (the first, and group 1's before wait_all)
    with pytest.raises(EmulatorError, match=r"data race \(read-after-write\): the cp.async at line \d+ "
                       r"'cp.async.cg.shared.global \[%r3\], \[%rd4\], 16' writes shared address 0x0 and thread 0 "
                       r"loads it before the copy is complete"):
        emulate(ptx, "k", (1, 1, 1), (64, 1, 1), [src, np.zeros((64, 6), np.uint32)], check_races=True)
    (_, out), _ = emulate(ptx, "k", (1, 1, 1), (64, 1, 1), [src, np.zeros((64, 6), np.uint32)], check_races=False)
    t = np.arange(64)
    np.testing.assert_array_equal(out[:, 0], 0)                  # not visible before the wait
    np.testing.assert_array_equal(out[:, 1], src[4 * t])         # group 0 done by wait_group 1
    np.testing.assert_array_equal(out[:, 2], 0)                  # group 1 still pending
    np.testing.assert_array_equal(out[:, 3], 0)
    np.testing.assert_array_equal(out[:, 4], src[4 * t])         # done after wait_all
    np.testing.assert_array_equal(out[:, 5], 0)                  # zero-filled tail


def test_cp_async_out_of_bounds_source_is_a_fault() -> None:
    body = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [src];
    mov.u32 %r1, sm;
    mul.wide.u32 %rd3, %r0, 16;
    add.s64 %rd4, %rd1, %rd3;
    mul.lo.u32 %r2, %r0, 16;
    add.u32 %r3, %r1, %r2;
    cp.async.cg.shared.global [%r3], [%rd4], 16;
"""
    ptx = kernel(body, ".param .u64 src", extra=".shared .align 16 .b8 sm[2048];\n")
    with pytest.raises(EmulatorError, match=r"out-of-bounds global access.*cp.async.*thread \(16,0,0\)"):
        emulate(ptx, "k", (1, 1, 1), (32, 1, 1), [np.zeros(64, np.uint32)])


def test_mbarrier_producer_consumer() -> None:
    """Warp 1 produces into shared memory and arrives; warp 0 waits on the phase, then reads."""
    body = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, bar;
    mov.u32 %r2, buf;
    ld.param.u64 %rd1, [out];
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra INIT_DONE;
    mbarrier.init.shared.b64 [%r1], 32;
INIT_DONE:
    bar.sync 0;
    setp.lt.u32 %p2, %r0, 32;
    @%p2 bra CONSUMER;
    // producer warp: two rounds (two phases)
    sub.u32 %r3, %r0, 32;
    shl.b32 %r4, %r3, 2;
    add.u32 %r5, %r2, %r4;
    mul.lo.u32 %r6, %r3, 10;
    st.shared.u32 [%r5], %r6;
    mbarrier.arrive.shared.b64 %rd2, [%r1];
    // wait for the consumers to read the first round (phase 1 completes when they arrive)
WAIT1:
    mbarrier.try_wait.parity.shared.b64 %p3, [%r1], 1;
    @!%p3 bra WAIT1;
    add.u32 %r6, %r6, 1;
    st.shared.u32 [%r5], %r6;
    mbarrier.arrive.shared.b64 %rd2, [%r1];
    bra.uni END;
CONSUMER:
WAIT0:
    mbarrier.try_wait.parity.shared.b64 %p4, [%r1], 0;
    @!%p4 bra WAIT0;
    shl.b32 %r7, %r0, 2;
    add.u32 %r8, %r2, %r7;
    ld.shared.u32 %r9, [%r8];
    mbarrier.arrive.shared.b64 %rd3, [%r1];
WAIT2:
    mbarrier.test_wait.parity.shared.b64 %p5, [%r1], 0;
    @!%p5 bra WAIT2;
    mbarrier.try_wait.shared.b64 %p6, [%r1], %rd3;
    @!%p6 bra WAIT2;
    // phase 2 (the second production) completes after this: wait on parity 0 again
WAIT3:
    mbarrier.try_wait.parity.shared.b64 %p7, [%r1], 0;
    @!%p7 bra WAIT3;
    ld.shared.u32 %r10, [%r8];
    mul.wide.u32 %rd4, %r0, 8;
    add.s64 %rd5, %rd1, %rd4;
    st.global.v2.u32 [%rd5], {%r9, %r10};
END:
"""
    ptx = kernel(body, ".param .u64 out", extra=".shared .align 8 .b8 bar[8];\n.shared .align 4 .b8 buf[128];\n")
    (out,), _ = emulate(ptx, "k", (1, 1, 1), (64, 1, 1), [np.zeros((64, 2), np.uint32)])
    t = np.arange(32)
    np.testing.assert_array_equal(out[:32, 0], t * 10)
    np.testing.assert_array_equal(out[:32, 1], t * 10 + 1)


def test_mbarrier_wait_that_never_completes_is_a_deadlock() -> None:
    # (one thread initializes, and a barrier publishes it: concurrent inits by every thread are themselves a race)
    body = """
    mov.u32 %r1, bar;
    mov.u32 %r2, %tid.x;
    setp.eq.u32 %p2, %r2, 0;
    @%p2 mbarrier.init.shared.b64 [%r1], 64;
    bar.sync 0;
    mbarrier.arrive.shared.b64 %rd2, [%r1];
W:
    mbarrier.try_wait.parity.shared.b64 %p1, [%r1], 0;
    @!%p1 bra W;
"""
    ptx = kernel(body, ".param .u64 out", extra=".shared .align 8 .b8 bar[8];\n")
    with pytest.raises(EmulatorError, match="deadlock.*mbarrier"):
        emulate(ptx, "k", (1, 1, 1), (32, 1, 1), [np.zeros(1, np.uint32)])


def test_bulk_copy_completes_an_mbarrier_transaction() -> None:
    src = np.arange(64, dtype=np.uint32) * 3
    body = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, bar;
    mov.u32 %r2, buf;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra WAIT;
    mbarrier.init.shared::cta.b64 [%r1], 1;
    fence.mbarrier_init.release.cluster;
    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r1], 256;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2], [%rd1], 256, [%r1];
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group.read 0;
WAIT:
    bar.sync 0;
POLL:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r1], 0;
    @!%p2 bra POLL;
    shl.b32 %r3, %r0, 2;
    add.u32 %r4, %r2, %r3;
    ld.shared.u32 %r5, [%r4];
    mul.wide.u32 %rd4, %r0, 4;
    add.s64 %rd5, %rd2, %rd4;
    st.global.u32 [%rd5], %r5;
    // and back out with a bulk store from shared memory
    @%p1 bra END;
    add.s64 %rd6, %rd2, 256;
    cp.async.bulk.global.shared::cta.bulk_group [%rd6], [%r2], 256;
    cp.async.bulk.commit_group;
    cp.async.bulk.wait_group 0;
END:
"""
    ptx = kernel(body, ".param .u64 src, .param .u64 out",
                 extra=".shared .align 8 .b8 bar[8];\n.shared .align 128 .b8 buf[256];\n")
    (_, out), _ = emulate(ptx, "k", (1, 1, 1), (64, 1, 1), [src, np.zeros(128, np.uint32)])
    np.testing.assert_array_equal(out[:64], src)
    np.testing.assert_array_equal(out[64:], src)
    with pytest.raises(EmulatorError, match="cp.async.bulk.tensor"):
        emulate(kernel("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], "
                       "[%rd1, {%r2}], [%r3];", ".param .u64 out"), "k", (1, 1, 1), (32, 1, 1),
                [np.zeros(1, np.uint32)])
