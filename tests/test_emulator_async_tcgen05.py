"""tcgen05 in the emulator: tensor memory, tcgen05.mma with instruction and shared-memory descriptors,
commit to an mbarrier, tcgen05.ld/st/cp, waits and fences, in hand-written sm_100a PTX.

Four warps copy operand images (canonical layouts from `emulator_async_layouts`) into shared
memory; warp 0 allocates tensor memory (the address lands in shared memory); thread 0 issues the
MMAs and commits them to an mbarrier that every thread waits on; each warp then reads its
32-lane quarter of the accumulator with tcgen05.ld.32x32b and stores it. Compared with numpy.
"""

from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx

sys.path.insert(0, os.path.dirname(__file__))
from accumulation import assert_accumulated, full_precision  # noqa: E402
from emulator_async_layouts import image, umma_desc  # noqa: E402

B_BASE = 0x4000
C_BASE = 0x6000
# kind -> {type: (raw dtype, idesc code)}
TYPES = {"f16": {"f16": (np.float16, 0), "bf16": (ml_dtypes.bfloat16, 1)}, "tf32": {"tf32": (np.float32, 2)},
         "f8f6f4": {"e4m3": (ml_dtypes.float8_e4m3fn, 0), "e5m2": (ml_dtypes.float8_e5m2, 1)},
         "i8": {"u8": (np.uint8, 0), "s8": (np.int8, 1)}}
KDIM = {"f16": 16, "tf32": 8, "f8f6f4": 32, "i8": 32}
COLS = 256


def idesc(kind: str, aty: str, bty: str, m: int, n: int, ta: int, tb: int, neg_a: int = 0) -> int:
    d = 2 if kind == "i8" else 1
    return (d << 4) | (TYPES[kind][aty][1] << 7) | (TYPES[kind][bty][1] << 10) | (neg_a << 13) | (ta << 15) | \
        (tb << 16) | ((n >> 3) << 17) | ((m >> 4) << 24)


def kernel(kind: str, n: int, mma: str = "", preload: bool = False, a_from_tmem: bool = False,
           ld_lane_shift: int = 0, cols: int = COLS, after_relinquish: bool = False) -> str:
    regs = ", ".join(f"%v{i}" for i in range(n))
    store = "\n".join(f"    st.global.u32 [%rd11+{4 * i}], %v{i};" for i in range(n))
    load_c = "\n".join(f"    ld.global.u32 %v{i}, [%rd13+{4 * i}];" for i in range(n))
    a_op = "[%r24]" if a_from_tmem else "%rd20"
    mma = mma or f"tcgen05.mma.cta_group::1.kind::{kind} [%r20], {a_op}, %rd21, %r7, %p2;"
    cp = """
    @%p1 tcgen05.cp.cta_group::1.128x256b [%r24], %rd22;""" if a_from_tmem else ""
    again = """
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot+4], 32;""" if after_relinquish else ""
    return f"""
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 img, .param .u32 nbytes, .param .u64 adesc, .param .u64 bdesc,
                  .param .u32 idesc, .param .u32 enable, .param .u64 cin, .param .u64 cpdesc, .param .u32 mask)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .b32 %v<{n}>;
    .reg .b64 %rd<24>;
    .shared .align 1024 .b8 buf[32768];
    .shared .align 8 .b64 bar;
    .shared .align 8 .b32 slot[2];
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [img];
    ld.param.u32 %r9, [nbytes];
    ld.param.u64 %rd20, [adesc];
    ld.param.u64 %rd21, [bdesc];
    ld.param.u64 %rd22, [cpdesc];
    ld.param.u32 %r7, [idesc];
    ld.param.u32 %r8, [enable];
    ld.param.u64 %rd6, [cin];
    ld.param.u32 %r15, [mask];
    setp.ne.u32 %p2, %r8, 0;
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p1, %r0, 0;
    shr.u32 %r14, %r0, 5;
    setp.eq.u32 %p3, %r14, 0;
    shl.b32 %r1, %r0, 4;
    mov.u32 %r5, buf;
COPY:
    setp.ge.u32 %p4, %r1, %r9;
    @%p4 bra COPIED;
    cvt.u64.u32 %rd3, %r1;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd4];
    add.u32 %r2, %r5, %r1;
    st.shared.v4.u32 [%r2], {{%r10, %r11, %r12, %r13}};
    add.u32 %r1, %r1, 2048;
    bra COPY;
COPIED:
    fence.proxy.async.shared::cta;
    @%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], {cols};
    @%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;{again}
    @%p1 mbarrier.init.shared.b64 [bar], 1;
    @%p1 fence.mbarrier_init.release.cluster;     // the init, visible to the async proxy
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.b32 %r20, [slot];
    add.u32 %r24, %r20, {COLS // 2};
    shl.b32 %r21, %r14, 21;
    add.u32 %r22, %r20, %r21;
    add.u32 %r22, %r22, {ld_lane_shift << 16};
    mul.wide.u32 %rd8, %r0, {4 * n};
    add.s64 %rd11, %rd1, %rd8;
    add.s64 %rd13, %rd6, %rd8;
{load_c if preload else ""}
    {"tcgen05.st.sync.aligned.32x32b.x" + str(n) + ".b32 [%r22], {" + regs + "};" if preload else ""}
    tcgen05.wait::st.sync.aligned;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;{cp}
    @%p1 {mma}
    @%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p5, [bar], 0;
    @!%p5 bra WAIT;
    tcgen05.fence::after_thread_sync;
    tcgen05.ld.sync.aligned.32x32b.x{n}.b32 {{{regs}}}, [%r22];
    tcgen05.wait::ld.sync.aligned;
{store}
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    @%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r20, {cols};
    ret;
}}
"""


def run(kind: str, aty: str, n: int, m: int = 128, bty: str = "", a_major: str = "K", a_span: int = 0,
        b_major: str = "K", b_span: int = 0, c: "np.ndarray | None" = None, a_from_tmem: bool = False,
        disable: int = 0, neg_a: int = 0, enable_d: "int | None" = None, edit: object = None, full: bool = False,
        **kw) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    bty = bty or aty
    k = KDIM[kind]
    if kind == "i8":
        a_vals, b_vals = rng.integers(-8 if aty == "s8" else 0, 8, (m, k)), rng.integers(-8 if bty == "s8" else 0, 8,
                                                                                         (n, k))
    elif full:      # random full-precision values, compared within the accumulation's bound
        a_vals = full_precision(rng, (m, k), TYPES[kind][aty][0])
        b_vals = full_precision(rng, (n, k), TYPES[kind][bty][0])
    else:
        a_vals, b_vals = rng.integers(-8, 8, (m, k)) / 4, rng.integers(-8, 8, (n, k)) / 4
    a = a_vals.astype(TYPES[kind][aty][0])
    b = b_vals.astype(TYPES[kind][bty][0])
    a_img, a_lbo, a_sbo = image(a, a_major == "K", a_span, 0)
    b_img, b_lbo, b_sbo = image(b, b_major == "K", b_span, B_BASE)
    cp_desc = 0
    img = np.zeros(C_BASE + 8192, np.uint8)
    img[:a_img.size] = a_img
    img[B_BASE:B_BASE + b_img.size] = b_img
    if a_from_tmem:         # A's rows as 8 32-bit columns each, for tcgen05.cp.128x256b into tensor memory
        cp_img, cp_lbo, cp_sbo = image(np.ascontiguousarray(a).view(np.uint32), True, 0, C_BASE)
        img[C_BASE:C_BASE + cp_img.size] = cp_img[:8192]
        cp_desc = umma_desc(C_BASE, cp_lbo, cp_sbo, 0)
    out_dtype = np.int32 if kind == "i8" else np.float32
    cin = np.zeros((128, n), out_dtype)
    lanes = np.arange(m) if m == 128 else 32 * (np.arange(m) // 16) + np.arange(m) % 16
    if c is None and m != 128:      # the kernel reads all 128 lanes, tensor memory starts undefined: zeros
        c = np.zeros((m, n), out_dtype)
    if c is not None:
        cin[lanes] = c
    mem = Memory()
    ptrs = [mem.alloc(arr.nbytes) for arr in (cin, img, cin)]
    mem.write(ptrs[1], img.tobytes())
    mem.write(ptrs[2], cin.tobytes())
    words = [0, 0, 0, 0]
    if disable:
        words[0] = disable
    ptx = kernel(kind, n, preload=c is not None, a_from_tmem=a_from_tmem, **kw)
    ptx = edit(ptx) if edit else ptx
    if disable:
        ptx = ptx.replace(", %rd21, %r7, %p2;", ", %rd21, %r7, {%r15, %r30, %r30, %r30}, %p2;").replace(
            "ld.param.u32 %r15, [mask];", "ld.param.u32 %r15, [mask];\n    mov.b32 %r30, 0;")
    run_ptx(ptx, "k", 1, 128, [ptrs[0], ptrs[1], img.size, umma_desc(0, a_lbo, a_sbo, a_span),
                               umma_desc(B_BASE, b_lbo, b_sbo, b_span),
                               idesc(kind, aty, bty, m, n, int(a_major != "K"), int(b_major != "K"), neg_a),
                               int(c is not None) if enable_d is None else enable_d, ptrs[2], cp_desc, words[0]],
            mem, check_races=True)
    got = np.frombuffer(mem.read(ptrs[0], cin.nbytes), out_dtype).reshape(128, n)[lanes]
    want = (-a_vals if neg_a else a_vals) @ b_vals.T + (c if c is not None else 0)
    if full:
        assert_accumulated(got, want, a_vals, b_vals, "s32" if kind == "i8" else "f32", aty)
    if disable:
        keep = ((disable >> lanes) & 1) == 1
        want[keep] = c[keep] if c is not None else 0
    return got, want


@pytest.mark.parametrize("kind,aty,bty,m,n,a_major,a_span,b_major,b_span", [
    ("f16", "f16", "f16", 128, 16, "K", 0, "K", 0),
    ("f16", "bf16", "bf16", 128, 64, "K", 128, "MN", 128),
    ("f16", "f16", "f16", 64, 32, "MN", 64, "K", 32),
    ("tf32", "tf32", "tf32", 128, 32, "K", 64, "K", 128),
    ("f8f6f4", "e4m3", "e5m2", 64, 16, "K", 32, "K", 0),
    ("i8", "s8", "u8", 128, 32, "K", 128, "K", 64),
])
def test_tcgen05_mma_matches_numpy(kind, aty, bty, m, n, a_major, a_span, b_major, b_span) -> None:
    got, want = run(kind, aty, n, m, bty, a_major, a_span, b_major, b_span)
    np.testing.assert_array_equal(got, want)
    if kind != "i8":    # random values, within the K-term bound
        run(kind, aty, n, m, bty, a_major, a_span, b_major, b_span, full=True)


def test_accumulating_into_tensor_memory_written_by_tcgen05_st() -> None:
    c = np.arange(128 * 16).reshape(128, 16) / 4.0
    got, want = run("f16", "f16", 16, c=c, neg_a=1)
    np.testing.assert_array_equal(got, want)


def test_disable_output_lane_keeps_those_rows() -> None:
    c = np.full((128, 16), 7.0)
    got, want = run("f16", "f16", 16, c=c, disable=0x0000_F00F)
    np.testing.assert_array_equal(got, want)
    assert (got[:4] == 7).all() and (got[4:12] != 7).any()


def test_a_operand_copied_into_tensor_memory_by_tcgen05_cp() -> None:
    got, want = run("f16", "f16", 16, a_from_tmem=True)
    np.testing.assert_array_equal(got, want)


def test_block_scaled_fp8_mma_reads_its_scale_factors_from_tensor_memory() -> None:
    """kind::mxf8f6f4.block_scale: 32x128b.warpx4 copies of the scale-factor atoms (row i at byte
    16*(i % 32) + 4*(i // 32) + K block), the K block picked by the descriptor's scale-factor IDs."""
    rng = np.random.default_rng(9)
    m = n = 128
    sf_a, sf_b = 2, 1
    a_vals = full_precision(rng, (m, 32), ml_dtypes.float8_e4m3fn)
    b_vals = full_precision(rng, (n, 32), ml_dtypes.float8_e4m3fn)
    a = a_vals.astype(ml_dtypes.float8_e4m3fn)
    b = b_vals.astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(120, 135, (m, 4)).astype(np.uint8)       # e8m0 exponents for 4 K blocks
    sb = rng.integers(120, 135, (n, 4)).astype(np.uint8)
    a_img, a_lbo, a_sbo = image(a, True, 128, 0)
    b_img, b_lbo, b_sbo = image(b, True, 128, B_BASE)
    sf_base = 2 * B_BASE                # A and B take 16 KiB each here
    img = np.zeros(sf_base + 1024, np.uint8)
    img[:B_BASE] = a_img[:B_BASE]
    img[B_BASE:sf_base] = b_img[:B_BASE]
    for base, sf in ((sf_base, sa), (sf_base + 512, sb)):
        i = np.arange(128)
        for kb in range(4):
            img[base + 16 * (i % 32) + 4 * (i // 32) + kb] = sf[:, kb]
    desc = idesc("f8f6f4", "e4m3", "e4m3", m, n, 0, 0)
    desc = (desc & ~(0x3 << 4)) | (sf_b << 4) | (1 << 23) | (sf_a << 29)     # block-scaled layout, UE8M0
    mma = ("tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32 [%r20], %rd20, %rd21, %r7, [%r26], "
           "[%r27], %p2;")
    ptx = kernel("f8f6f4", n, mma=mma, a_from_tmem=True).replace(
        "@%p1 tcgen05.cp.cta_group::1.128x256b [%r24], %rd22;", """
    @%p1 tcgen05.cp.cta_group::1.32x128b.warpx4 [%r24], %rd22;
    add.s64 %rd23, %rd22, 32;
    add.u32 %r25, %r24, 4;
    @%p1 tcgen05.cp.cta_group::1.32x128b.warpx4 [%r25], %rd23;
    shr.u32 %r26, %r7, 29;
    and.b32 %r26, %r26, 3;
    shl.b32 %r26, %r26, 30;
    or.b32 %r26, %r26, %r24;
    shr.u32 %r27, %r7, 4;
    and.b32 %r27, %r27, 3;
    shl.b32 %r27, %r27, 30;
    or.b32 %r27, %r27, %r25;""").replace("buf[32768]", "buf[40960]")
    mem = Memory()
    out = mem.alloc(128 * n * 4)
    src = mem.alloc(img.size)
    mem.write(src, img.tobytes())
    run_ptx(ptx, "k", 1, 128, [out, src, img.size, umma_desc(0, a_lbo, a_sbo, 128),
                               umma_desc(B_BASE, b_lbo, b_sbo, 128),
                               desc, 0, out, umma_desc(sf_base, 0, 128, 0), 0], mem, check_races=True)
    got = np.frombuffer(mem.read(out, 128 * n * 4), np.float32).reshape(128, n)
    scaled_a = a_vals * np.exp2(sa[:, sf_a] - 127.0)[:, None]
    scaled_b = b_vals * np.exp2(sb[:, sf_b] - 127.0)[:, None]
    assert_accumulated(got.astype(np.float64), scaled_a @ scaled_b.T, scaled_a, scaled_b, "f32")


E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


@pytest.mark.parametrize("block,vec,span", [(16, 4, 0), (32, 2, 0), (16, 4, 64)])
def test_block_scaled_fp4_mma_unpacks_nibbles_and_applies_each_blocks_scale(block: int, vec: int, span: int) -> None:
    """kind::mxf4nvf4: e2m1 operands two to a byte (even K in the low nibble), K-major (no swizzle
    or NVIDIA's 64-byte swizzle), each row's `vec` scale factors (block16: ue4m3 per 16 K, 4X;
    block32: ue8m0 per 32, 2X) from consecutive bytes of its cell, from the scale-factor ID on."""
    rng = np.random.default_rng(block + span)
    m = n = 128
    kdim = 64
    sf_id = 0 if vec == 4 else 2
    a_nib, b_nib = rng.integers(0, 16, (m, kdim)), rng.integers(0, 16, (n, kdim))
    pack = lambda nib: (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8)  # noqa: E731
    a_img, a_lbo, a_sbo = image(pack(a_nib), True, span, 0)
    b_img, b_lbo, b_sbo = image(pack(b_nib), True, span, B_BASE)
    ue8m0 = block == 32
    if ue8m0:
        sa, sb = (rng.integers(120, 135, (r, 4)).astype(np.uint8) for r in (m, n))
        value = lambda raw: np.exp2(raw.astype(np.float64) - 127)  # noqa: E731
    else:
        sa, sb = (rng.uniform(0.125, 16, (r, 4)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8) for r in (m, n))
        value = lambda raw: raw.view(ml_dtypes.float8_e4m3fn).astype(np.float64)  # noqa: E731
    sf_base = 2 * B_BASE
    img = np.zeros(sf_base + 1024, np.uint8)
    img[:a_img.size] = a_img
    img[B_BASE:B_BASE + b_img.size] = b_img
    for base, sf in ((sf_base, sa), (sf_base + 512, sb)):
        i = np.arange(128)
        for byte in range(4):
            img[base + 16 * (i % 32) + 4 * (i // 32) + byte] = sf[:, byte]
    desc = (1 << 7) | (1 << 10) | ((n >> 3) << 17) | ((m >> 4) << 24)
    desc |= (sf_id << 4) | (ue8m0 << 23) | (sf_id << 29)
    mma = (f"tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block{block} [%r20], %rd20, %rd21, %r7, "
           "[%r26], [%r27], %p2;")
    ptx = kernel("f16", n, mma=mma, a_from_tmem=True).replace(
        "@%p1 tcgen05.cp.cta_group::1.128x256b [%r24], %rd22;", f"""
    @%p1 tcgen05.cp.cta_group::1.32x128b.warpx4 [%r24], %rd22;
    add.s64 %rd23, %rd22, 32;
    add.u32 %r25, %r24, 4;
    @%p1 tcgen05.cp.cta_group::1.32x128b.warpx4 [%r25], %rd23;
    or.b32 %r26, %r24, {sf_id << 30};
    or.b32 %r27, %r25, {sf_id << 30};""").replace("buf[32768]", "buf[40960]")
    mem = Memory()
    out = mem.alloc(128 * n * 4)
    src = mem.alloc(img.size)
    mem.write(src, img.tobytes())
    run_ptx(ptx, "k", 1, 128, [out, src, img.size, umma_desc(0, a_lbo, a_sbo, span),
                               umma_desc(B_BASE, b_lbo, b_sbo, span),
                               desc, 0, out, umma_desc(sf_base, 0, 128, 0), 0], mem, check_races=True)
    got = np.frombuffer(mem.read(out, 128 * n * 4), np.float32).reshape(128, n)
    per = kdim // vec
    scale_a = np.repeat(value(sa[:, sf_id:sf_id + vec]), per, axis=1)
    scale_b = np.repeat(value(sb[:, sf_id:sf_id + vec]), per, axis=1)
    want = (E2M1[a_nib] * scale_a) @ (E2M1[b_nib] * scale_b).T
    assert_accumulated(got.astype(np.float64), want, E2M1[a_nib] * scale_a, E2M1[b_nib] * scale_b, "f32")


def test_fp4_kinds_refuse_transposed_operands() -> None:
    """e2m1 operands are K-major only: a transpose bit in the descriptor is a fault, not a guess."""
    desc = (1 << 7) | (1 << 10) | (1 << 16) | ((128 >> 3) << 17) | ((128 >> 4) << 24)
    mma = ("tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.block16 [%r20], %rd20, %rd21, %r7, "
           "[%r24], [%r24], %p2;")
    ptx = kernel("f16", 8, mma=mma, a_from_tmem=True).replace(
        "@%p1 tcgen05.cp.cta_group::1.128x256b [%r24], %rd22;", "")
    mem = Memory()
    out = mem.alloc(128 * 8 * 4)
    with pytest.raises(EmulatorError, match=r"K-major only"):
        run_ptx(ptx, "k", 1, 128, [out, out, 0, 0, 0, desc, 0, out, 0, 0], mem)


def test_tensor_memory_faults() -> None:
    with pytest.raises(EmulatorError, match=r"warp 0 may access tensor-memory lanes 0..31, not lanes 32..63"):
        run("f16", "f16", 16, ld_lane_shift=32)
    with pytest.raises(EmulatorError, match=r"tcgen05.mma D uses tensor-memory column \d+, which is not allocated"):
        run("f16", "f16", 16, cols=32, mma="tcgen05.mma.cta_group::1.kind::f16 [%r24], %rd20, %rd21, %r7, %p2;")
    with pytest.raises(EmulatorError, match=r"tcgen05.alloc after tcgen05.relinquish_alloc_permit"):
        run("f16", "f16", 16, after_relinquish=True)
    with pytest.raises(EmulatorError, match=r"instruction descriptor: sparse tcgen05.mma is not supported"):
        run("f16", "f16", 16, mma="tcgen05.mma.cta_group::1.kind::f16 [%r20], %rd20, %rd21, 4, %p2;")


HALVES = """
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b32 %v<4>;
    .reg .b32 %w<8>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b32 slot;
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    setp.eq.u32 %p1, %r1, 0;
    @%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.b32 %r2, [slot];
    shl.b32 %r3, %r1, 21;
    add.u32 %r3, %r3, %r2;                   // lane 32w, column 0
    mul.lo.u32 %r4, %r0, 10;
    add.u32 %v0, %r4, 1;
    add.u32 %v1, %r4, 2;
    add.u32 %v2, %r4, 3;
    add.u32 %v3, %r4, 4;
    mov.u32 %w0, 0;                          // tensor memory starts undefined: zero the 8 columns first
    tcgen05.st.sync.aligned.32x32b.x8.b32 [%r3], {%w0, %w0, %w0, %w0, %w0, %w0, %w0, %w0};
    tcgen05.wait::st.sync.aligned;
    tcgen05.st.sync.aligned.16x32bx2.x4.b32 [%r3], 4, {%v0, %v1, %v2, %v3};
    tcgen05.wait::st.sync.aligned;
    tcgen05.ld.sync.aligned.32x32b.x8.b32 {%w0, %w1, %w2, %w3, %w4, %w5, %w6, %w7}, [%r3];
    tcgen05.wait::ld.sync.aligned;
    mul.wide.u32 %rd2, %r0, 32;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%w0, %w1, %w2, %w3};
    st.global.v4.u32 [%rd3+16], {%w4, %w5, %w6, %w7};
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    @%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;
    ret;
}
"""


def test_16x32bx2_shape_puts_the_second_half_warp_at_the_split_column() -> None:
    from tileiras.emulator.host import emulate

    (out,), _ = emulate(HALVES, "k", 1, 128, [np.zeros((128, 8), np.uint32)], check_races=True)
    want = np.zeros((128, 8), np.uint32)
    for t in range(128):                     # thread t of warp w: lane 32w + t % 16, columns 4*(t % 32 >= 16) + j
        w, i = divmod(t, 32)
        want[32 * w + i % 16, 4 * (i // 16):4 * (i // 16) + 4] = 10 * t + np.arange(1, 5)
    np.testing.assert_array_equal(out, want)


def test_16x128b_shape_places_packed_fragments() -> None:
    """.16x128b.x2 (a warp's 16 lanes x 8 columns; the upper 16 lanes of each quarter through
    the address's lane +16): register r of thread i at lane i/4 + 8 (r % 2), column i % 4 + 4 (r / 2)."""
    from tileiras.emulator.host import emulate

    src = HALVES.replace("tcgen05.st.sync.aligned.16x32bx2.x4.b32 [%r3], 4, {%v0, %v1, %v2, %v3};",
                         "add.u32 %r5, %r3, 1048576;\n    tcgen05.st.sync.aligned.16x128b.x2.b32 [%r5], "
                         "{%v0, %v1, %v2, %v3};")
    (out,), _ = emulate(src, "k", 1, 128, [np.zeros((128, 8), np.uint32)], check_races=True)
    want = np.zeros((128, 8), np.uint32)
    for t in range(128):
        w, i = divmod(t, 32)
        for r in range(4):
            want[32 * w + 16 + i // 4 + 8 * (r % 2), i % 4 + 4 * (r // 2)] = 10 * t + r + 1
    np.testing.assert_array_equal(out, want)


def test_accumulating_into_tensor_memory_nobody_wrote_is_reported() -> None:
    """Freshly allocated tensor memory is undefined: the first tcgen05.mma must not accumulate
    (enable-input-d false) unless something wrote D first."""
    with pytest.raises(EmulatorError, match=r"read of undefined tensor memory: tcgen05.mma accumulating "
                                            r"\(enable-input-d true\) reads lane 0, column 0, which no instruction "
                                            r"wrote since its allocation at line \d+ '@%p1 tcgen05.mma"):
        run("f16", "f16", 32, enable_d=1)


def test_exiting_with_tensor_memory_allocated_is_reported() -> None:
    from tileiras.emulator.host import emulate

    ptx = HALVES.replace("    @%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;\n", "")
    with pytest.raises(EmulatorError, match=r"block \(0,0,0\) exits with tensor-memory columns 0..31 still allocated"):
        emulate(ptx, "k", 1, 128, [np.zeros((128, 8), np.uint32)])


@pytest.mark.parametrize("fence", ["before", "after"])
def test_tcgen05_fences_order_tensor_memory_with_bar_sync(fence) -> None:
    """Every warp stores its lanes of C, then bar.sync, then thread 0's tcgen05.mma accumulates on
    them: the stores need tcgen05.fence::before_thread_sync before the barrier, the mma
    tcgen05.fence::after_thread_sync after it."""
    c = np.arange(128 * 32, dtype=np.float32).reshape(128, 32) / 16
    got, want = run("f16", "f16", 32, c=c)
    np.testing.assert_array_equal(got, want)
    sync = "    tcgen05.wait::st.sync.aligned;\n    tcgen05.fence::before_thread_sync;\n    bar.sync 0;\n" \
           "    tcgen05.fence::after_thread_sync;"
    kept = sync.replace(f"    tcgen05.fence::{fence}_thread_sync;\n", "").replace(
        f"\n    tcgen05.fence::{fence}_thread_sync;", "")
    why = ("no tcgen05.fence::before_thread_sync by that thread published it" if fence == "before" else
           "no tcgen05.fence::after_thread_sync came after it")
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(write-after-write\): the tcgen05.mma by "
                                            r"thread 0 accesses lane \d+ column \d+, but .*" + why):
        run("f16", "f16", 32, c=c, edit=lambda p: p.replace(sync, kept, 1))


@pytest.mark.parametrize("case", ["in flight", "committed, not waited", "waited", "same accumulator",
                                  "copied, then read"])
def test_one_threads_tcgen05_operations_are_ordered_only_as_pipelined_pairs(case: str) -> None:
    """The PTX ISA ('Pipelined tcgen05 instructions') runs one thread's asynchronous tcgen05 operations in issue
    order only in pipelined pairs: mma -> mma with the same accumulator and shape, cp -> mma. An mma into
    accumulator S over cells that an earlier mma into accumulator O still reads as its A operand (attention's P in
    tensor memory) must wait on the mbarrier of a tcgen05.commit after the first: issuing it later, or only
    committing the first, races (both used to pass: every operation of a thread counted as one in-order
    pipeline); after the wait, with the same accumulator and shape, or after a tcgen05.cp, it is ordered."""
    from tileiras.emulator.errors import DeviceFault
    from tileiras.emulator.happens_before import Clocks

    hb = Clocks(np, 32, 1024, {10: "tcgen05.mma O", 20: "tcgen05.mma S"})
    cells = hb.tensor(128)
    x = cells.cells(np.arange(32)[:, None], np.arange(8)[None, :])
    mma_o, mma_s = ("mma", False, 0x40, 128, 64, "f16"), ("mma", False, 0x00, 128, 64, "f16")
    first = ("cp", False) if case == "copied, then read" else mma_s if case == "same accumulator" else mma_o
    cells.access(x, 0, case == "copied, then read", 10, "the first", ("tcgen05", 0), pipe=first)
    if case in ("committed, not waited", "waited"):
        hb.commit(0, 100)           # thread 0's tcgen05.commit: the operations complete, then arrive on 100
        hb.complete(100)
    if case == "waited":
        hb.acquire(100, [0])        # thread 0 waits on that mbarrier's phase
    write = case != "copied, then read"
    if case in ("in flight", "committed, not waited"):
        with pytest.raises(DeviceFault, match="execute in issue order only as the PTX ISA's pipelined pairs"):
            cells.access(x, 0, write, 20, "the second", ("tcgen05", 0), pipe=mma_s)
    else:
        cells.access(x, 0, write, 20, "the second", ("tcgen05", 0), pipe=mma_s)
