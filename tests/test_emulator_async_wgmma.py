"""wgmma in the emulator: hand-written sm_90a PTX for every input type, layout and flag.

One warpgroup copies operand images (canonical layouts built by `emulator_async_layouts`) from
global to shared memory, fences the proxies, syncs, and issues wgmma.mma_async with descriptors
passed as parameters; every thread then stores its accumulator registers. The host reads the
fragments back with the PTX ISA's m64nN accumulator layout and compares with numpy.
"""

from __future__ import annotations

from typing import Any

import os
import sys

import ml_dtypes
import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx

sys.path.insert(0, os.path.dirname(__file__))
from accumulation import accumulator, assert_accumulated, full_precision  # noqa: E402
from emulator_async_layouts import gmma_desc, image  # noqa: E402

B_BASE = 0x4000
RAW = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn,
       "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8}
KDIM = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}


def kernel(shape: str, types: str, nd: int, na: int, imms: str, fence: bool = True, early_read: bool = False,
           wait: bool = True, load_c: bool = False, early_store: bool = False, straggler: bool = False,
           zero_init: bool = True) -> str:
    d = ", ".join(f"%d{i}" for i in range(nd))
    a_op = "{" + ", ".join(f"%a{i}" for i in range(na)) + "}" if na else "%rd20"
    load_a = "\n".join(f"    ld.global.u32 %a{i}, [%rd12+{4 * i}];" for i in range(na))
    init = "\n".join(f"    ld.global.u32 %d{i}, [%rd13+{4 * i}];" if load_c else f"    mov.b32 %d{i}, 0;"
                     for i in range(nd)) if load_c or zero_init else ""
    store = "\n".join(f"    st.global.u32 [%rd11+{4 * i}], %d{i};" for i in range(nd))
    early = "    st.global.u32 [%rd11], %d0;" if early_read else ""
    if early_store:       # overwrite the A operand while the wgmma may still be reading it (bar.sync is no help)
        early += "\n    bar.sync 0;\n    shl.b32 %r6, %r0, 2;\n    add.u32 %r6, %r6, %r5;\n" \
                 "    st.shared.u32 [%r6], %r0;"
    return f"""
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 img, .param .u32 nbytes, .param .u64 adesc, .param .u64 bdesc,
                  .param .u64 afrag, .param .u64 cin, .param .u32 scale_d)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b32 %d<{max(nd, 1)}>;
    .reg .b32 %a<{max(na, 1)}>;
    .reg .b64 %rd<24>;
    .shared .align 1024 .b8 buf[32768];
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [img];
    ld.param.u32 %r9, [nbytes];
    ld.param.u64 %rd20, [adesc];
    ld.param.u64 %rd21, [bdesc];
    ld.param.u64 %rd5, [afrag];
    ld.param.u64 %rd6, [cin];
    ld.param.u32 %r8, [scale_d];
    setp.ne.u32 %p2, %r8, 0;
    mov.u32 %r0, %tid.x;
    shl.b32 %r1, %r0, 4;
    mov.u32 %r5, buf;
COPY:
    setp.ge.u32 %p1, %r1, %r9;
    @%p1 bra COPIED;
    cvt.u64.u32 %rd3, %r1;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.v4.u32 {{%r10, %r11, %r12, %r13}}, [%rd4];
    add.u32 %r2, %r5, %r1;
    st.shared.v4.u32 [%r2], {{%r10, %r11, %r12, %r13}};
    add.u32 %r1, %r1, 2048;
    bra COPY;
COPIED:
    {"fence.proxy.async.shared::cta;" if fence else ""}
    bar.sync 0;
    mul.wide.u32 %rd7, %r0, {4 * max(na, 1)};
    add.s64 %rd12, %rd5, %rd7;
    mul.wide.u32 %rd8, %r0, {4 * nd};
    add.s64 %rd13, %rd6, %rd8;
    add.s64 %rd11, %rd1, %rd8;
{load_a}
{init}
{STRAGGLE if straggler else ""}
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.{shape}.{types} {{{d}}}, {a_op}, %rd21, %p2{imms};
    wgmma.commit_group.sync.aligned;
{early}
    {"wgmma.wait_group.sync.aligned 0;" if wait else ""}
{store}
    ret;
{LATE if straggler else ""}
}}
"""


# warp 3 takes a detour placed after the kernel's end, so warps 0-2 reach the wgmma first and must wait for it
STRAGGLE = """
    shr.u32 %r14, %r0, 5;
    setp.eq.u32 %p3, %r14, 3;
    @%p3 bra LATE;
BACK:"""
LATE = """
LATE:
    mov.u32 %r15, 0;
SPIN:
    add.u32 %r15, %r15, 1;
    setp.lt.u32 %p3, %r15, 5;
    @%p3 bra SPIN;
    bra BACK;"""


def acc_layout(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of each thread's accumulator element i (PTX ISA, wgmma m64nN D fragment)."""
    tid = np.arange(128)[:, None]
    i = np.arange(n // 2)[None, :]
    w, lane = tid // 32, tid % 32
    return 16 * w + lane // 4 + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)


def a_frag(a: np.ndarray, ty: str) -> np.ndarray:
    """Register A fragments (128 threads x regs) of a 64 x K matrix: mma.m16n8k* A layouts per warp."""
    k = a.shape[1]
    e = a.itemsize
    per = 4 // e
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    out = np.zeros((128, 4 * per), dtype=a.dtype)
    for w in range(4):
        for j in range(4 * per):
            if ty == "tf32":
                r, c = g + 8 * (j % 2), t + 4 * (j // 2)
            else:
                r = g + 8 * ((j // per) % 2)      # a register holds `per` consecutive K elements
                c = per * t + j % per + (k // 2) * (j // (2 * per))
            out[32 * w + lane, j] = a[16 * w + r, c]
    return np.ascontiguousarray(out).view(np.uint32)


def run(ty: str, n: int, dty: str = "f32", a_major: str = "K", a_span: int = 0, b_major: str = "K",
        b_span: int = 0, a_in_regs: bool = False, c: "np.ndarray | None" = None, scale: tuple = (1, 1),
        check_races: bool = True, scale_d: "int | None" = None, edit: Any = None, b_desc_bits: int = 0,
        full: bool = False, values: "tuple[np.ndarray, np.ndarray] | None" = None,
        **kw) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    k = KDIM[ty]
    bty = kw.pop("bty", ty)
    if values is not None:
        a_vals, b_vals = values
    elif ty in ("s8", "u8"):
        lo = 0 if ty == "u8" else -8
        a_vals, b_vals = rng.integers(lo, 8, (64, k)), rng.integers(lo, 8, (n, k))
    elif full:      # random full-precision values (the caller compares within the accumulation's bound)
        a_vals, b_vals = full_precision(rng, (64, k), RAW[ty]), full_precision(rng, (n, k), RAW[bty])
    else:
        a_vals, b_vals = rng.integers(-8, 8, (64, k)) / 4, rng.integers(-8, 8, (n, k)) / 4
    a = a_vals.astype(RAW[ty])
    b = b_vals.astype(RAW[bty])
    if ty == "tf32":
        a, b = a.view(np.uint32), b.view(np.uint32)
    a_img, a_lbo, a_sbo = image(a if a_major == "K" else np.ascontiguousarray(a), a_major == "K", a_span, 0)
    b_img, b_lbo, b_sbo = image(b, b_major == "K", b_span, B_BASE)
    img = np.zeros(B_BASE + b_img.size, np.uint8)
    img[:a_img.size] = a_img
    img[B_BASE:] = b_img
    img = np.concatenate([img, np.zeros(-img.size % 16, np.uint8)])
    per_reg = 2 if dty == "f16" else 1
    nd = n // 2 // per_reg
    rows, cols = acc_layout(n)
    cin = np.zeros((128, n // 2), dtype={"f32": np.float32, "f16": np.float16, "s32": np.int32}[dty])
    if c is not None:
        cin[:] = c[rows, cols]
    mem = Memory()
    ptrs = []
    frag = a_frag(a, ty) if a_in_regs else np.zeros((128, 1), np.uint32)
    for arr in (np.zeros((128, nd), np.uint32), img, frag, cin):
        ptrs.append(mem.alloc(arr.nbytes))
        mem.write(ptrs[-1], arr.tobytes())
    shape = f"m64n{n}k{k}"
    types = f"{dty}.{ty}.{bty}"
    transposable = ty in ("f16", "bf16")
    imms = "" if dty == "s32" else f", {scale[0]}, {scale[1]}"
    if transposable:
        imms += ("" if a_in_regs else f", {int(a_major != 'K')}") + f", {int(b_major != 'K')}"
    na = frag.shape[1] if a_in_regs else 0
    ptx = kernel(shape, types, nd, na, imms, load_c=c is not None, **kw)
    ptx = edit(ptx) if edit else ptx
    run_ptx(ptx, "k", 1, 128, [ptrs[0], ptrs[1], img.size, gmma_desc(0, a_lbo, a_sbo, a_span),
                               gmma_desc(B_BASE, b_lbo, b_sbo, b_span) | b_desc_bits, ptrs[2], ptrs[3],
                               int(c is not None) if scale_d is None else scale_d],
            mem, check_races=check_races)
    raw = np.frombuffer(mem.read(ptrs[0], 128 * nd * 4), cin.dtype).reshape(128, n // 2)
    got = np.zeros((64, n))
    got[rows, cols] = raw
    av = a_vals * scale[0]
    want = av @ (b_vals * scale[1]).T + (c if c is not None else 0)
    if full:
        assert_accumulated(got, want, av, b_vals, accumulator(dty, ty, "sm_90"), ty)
    return got, want


@pytest.mark.parametrize("ty,n,dty,a_major,a_span,b_major,b_span", [
    ("f16", 16, "f32", "K", 0, "K", 0),
    ("f16", 32, "f16", "MN", 64, "K", 32),
    ("bf16", 64, "f32", "K", 128, "MN", 128),
    ("bf16", 8, "f32", "MN", 0, "MN", 0),
    ("tf32", 24, "f32", "K", 128, "K", 64),
    ("e4m3", 16, "f32", "K", 64, "K", 128),
    ("e5m2", 40, "f16", "K", 0, "K", 32),
    ("s8", 32, "s32", "K", 128, "K", 0),
    ("u8", 16, "s32", "K", 32, "K", 64),
])
def test_wgmma_matches_numpy(ty, n, dty, a_major, a_span, b_major, b_span) -> None:
    got, want = run(ty, n, dty, a_major, a_span, b_major, b_span)
    np.testing.assert_allclose(got, want, rtol=1e-3 if dty == "f16" else 1e-6)
    run(ty, n, dty, a_major, a_span, b_major, b_span, full=True)   # random values, within the K-term bound


@pytest.mark.parametrize("ty", ["e4m3", "e5m2"])
def test_fp8_into_f32_accumulates_below_single_precision(ty: str) -> None:
    """fp8 products into an f32 accumulator keep only the addends' bits within the largest one's 14-bit
    significand (the PTX ISA: "higher than half precision but lower than single precision"; a GH200 adding
    32 products of 1/256 per wgmma stalls at 64). Into 64 the 32 products of 2^-8 are lost (f32 would give
    64.125); into 32 they are kept (32.125); f16 inputs, and fp8 into an f16 accumulator, are not affected."""
    sixteenth = (np.full((64, 32), 1 / 16), np.full((16, 32), 1 / 16))
    got, want = run(ty, 16, "f32", values=sixteenth, c=np.full((64, 16), 64.0))
    assert (want == 64.125).all() and (got == 64.0).all(), np.unique(got)
    got, _ = run(ty, 16, "f32", values=sixteenth, c=np.full((64, 16), 32.0))
    assert (got == 32.125).all(), np.unique(got)
    got, _ = run("f16", 16, "f32", values=(np.full((64, 16), 1 / 16), np.full((16, 16), 1 / 16)),
                 c=np.full((64, 16), 64.0))
    assert (got == 64.0625).all(), np.unique(got)
    # random full-precision values: within the bound of that narrower accumulation (accumulation.accumulator)
    run(ty, 64, "f32", full=True)


def test_mixed_fp8_inputs_accumulate_into_c_with_negated_a() -> None:
    c = np.arange(64 * 16).reshape(64, 16) / 8.0
    got, want = run("e4m3", 16, bty="e5m2", c=c, scale=(-1, 1))
    np.testing.assert_allclose(got, want)


def test_tf32_operands_in_shared_memory_are_rounded_to_nearest_even() -> None:
    """wgmma reads f32 bits in shared memory as tf32 rounded to nearest, ties to even, as an H200 does
    (tileaa/mma_forms.WGMMA_TF32_ROUNDING): the compiler leaves such operands unrounded."""
    ulp = 2.0 ** -10
    raw = np.array([1 + 0.75 * ulp, 1 + 0.5 * ulp, 1 + 1.5 * ulp, 1 + 0.25 * ulp, -1 - 0.75 * ulp, 2 - 0.25 * ulp,
                    3.0, 1 + 2 ** -20])
    tf32 = np.array([1 + ulp, 1.0, 1 + 2 * ulp, 1.0, -1 - ulp, 2.0, 3.0, 1.0])   # nearest, ties to even
    a = np.tile(raw, (64, 1)) * (1 + np.arange(64) // 16)[:, None]    # exact scalings by 1..4
    b = np.ones((24, 8))
    got, _ = run("tf32", 24, "f32", "K", 128, "K", 64, values=(a, b))
    np.testing.assert_array_equal(got, np.tile(tf32, (64, 1)) * (1 + np.arange(64) // 16)[:, None] @ b.T)


@pytest.mark.parametrize("ty", ["f16", "tf32", "s8"])
def test_register_a_operand(ty) -> None:
    dty = "s32" if ty == "s8" else "f32"
    got, want = run(ty, 16, dty, a_in_regs=True, b_span=128 if ty != "s8" else 0,
                    c=np.ones((64, 16)) * 3 if ty == "f16" else None)
    np.testing.assert_allclose(got, want)


def test_warps_of_a_warpgroup_reaching_wgmma_at_different_times_wait_for_each_other() -> None:
    got, want = run("f16", 16, straggler=True)
    np.testing.assert_allclose(got, want)


def test_reading_the_accumulator_before_wait_group_is_reported() -> None:
    with pytest.raises(EmulatorError, match=r"register %d0 is written by the wgmma.mma_async at line \d+ and is "
                                            r"accessed before the wgmma.wait_group that waits for it at line \d+ "
                                            r"'st.global.u32 \[%rd11\], %d0'"):
        run("f16", 16, early_read=True)
    with pytest.raises(EmulatorError, match=r"register %d0 is written by the wgmma.mma_async"):
        run("f16", 16, wait=False)


def test_overwriting_an_operand_before_wait_group_is_reported() -> None:
    with pytest.raises(EmulatorError, match=r"data race \(write-after-read\): the store at line \d+ overwrites "
                                            r"shared address 0x4, but the asynchronous read of it by the instruction "
                                            r"at line \d+ 'wgmma.mma_async.*', issued by thread 0, may still be in "
                                            r"flight"):
        run("f16", 16, early_store=True)


def test_generic_stores_read_by_wgmma_need_a_proxy_fence() -> None:
    with pytest.raises(EmulatorError, match=r"missing fence.proxy.async: thread \d+ stored to shared address 0x\w+ "
                                            r"at line \d+ 'st.shared.v4.u32 .*' through the generic proxy and the "
                                            r"wgmma.mma_async at line \d+ reads it"):
        run("f16", 16, fence=False)
    got, want = run("f16", 16, fence=False, check_races=False)     # the values are right without the checker
    np.testing.assert_allclose(got, want)


def test_wgmma_needs_whole_warpgroups_and_supported_shapes() -> None:
    mem = Memory()
    ptx = kernel("m64n16k16", "f32.f16.f16", 8, 0, ", 1, 1, 0, 0")
    with pytest.raises(EmulatorError, match=r"needs whole warpgroups; the block has 64 threads"):
        run_ptx(ptx, "k", 1, 64, [mem.alloc(4096), mem.alloc(16), 16, 0, 0, mem.alloc(16), mem.alloc(4096), 0],
                mem)
    with pytest.raises(EmulatorError, match=r"shape .m64n12k16 does not exist"):
        run_ptx(kernel("m64n12k16", "f32.f16.f16", 3, 0, ", 1, 1, 0, 0"), "k", 1, 128,
                [0, 0, 0, 0, 0, 0, 0, 0], mem)


def test_accumulating_into_registers_nobody_zeroed_is_reported() -> None:
    # scale-d false: the wgmma does not read the accumulators, so they need no initialization
    got, want = run("f16", 16, zero_init=False)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(EmulatorError, match=r"undefined value stored: %d0 holds a value computed from %d0, which no "
                                            r"instruction wrote in this thread at line \d+ 'st.global.u32"):
        run("f16", 16, zero_init=False, scale_d=1)


def test_wgmma_needs_wgmma_fence_before_it_and_after_other_accesses_of_its_registers() -> None:
    fence = "    wgmma.fence.sync.aligned;\n"
    with pytest.raises(EmulatorError, match=r"wgmma.mma_async without wgmma.fence: warpgroup 0 issues its first "
                                            r"wgmma.mma_async with no wgmma.fence before it"):
        run("f16", 16, edit=lambda p: p.replace(fence, ""))
    # the fence before the accumulators (C) and the A fragments are loaded: their loads are not fenced
    c = np.arange(64 * 16, dtype=np.float32).reshape(64, 16) / 8
    first_load = "    ld.global.u32 %a0,"
    with pytest.raises(EmulatorError, match=r"register %a0 is accessed by the instruction at line \d+ and then by "
                                            r"this wgmma.mma_async with no wgmma.fence between"):
        run("f16", 16, a_in_regs=True, c=c,
            edit=lambda p: p.replace(fence, "").replace(first_load, fence + first_load))
    got, want = run("f16", 16, a_in_regs=True, c=c)
    np.testing.assert_allclose(got, want)


def test_the_descriptor_base_offset_sets_the_swizzle_phase() -> None:
    # B starts at 0x4000, aligned to the 1024-byte repeat of the 128-byte swizzle: base offset 0 is right,
    # any other shifts the rows' XOR pattern and reads other bytes
    got, want = run("f16", 16, b_span=128)
    np.testing.assert_array_equal(got, want)
    got, want = run("f16", 16, b_span=128, b_desc_bits=3 << 49)
    assert not np.array_equal(got, want)
