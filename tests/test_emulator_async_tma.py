"""TMA in the emulator: cp.async.bulk.tensor loads/stores through our tensor maps, with mbarriers.

Hand-written PTX: thread 0 loads a box into shared memory (arrive.expect_tx + try_wait.parity),
then every thread copies the box out to global memory word by word, un-swizzling each shared
address in PTX (addr ^ ((addr >> 7) & mask) << 4), so the swizzle the emulator applies is checked
against the PTX ISA's formula, not against itself. The results are compared with numpy slices of
the source tensor (zero or NaN fill outside it).
"""

from __future__ import annotations

import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx
from tileiras.codegen.tensormap import TensorMap, TensorMapError, decode, encode, for_array

HEAD = """
.version 8.6
.target sm_90a
.address_size 64
"""
# swizzle -> (mask of address bits 7.., where the XOR lands)
SWZ = {"none": (0, 4), "32B": (1, 4), "64B": (3, 4), "128B": (7, 4), "128B_atom_32B": (3, 5)}


def load_kernel(rank: int, nbytes: int, swizzle: str, tmap_in_global: bool = False, wait: bool = True) -> str:
    coords = ", ".join(f"%r{10 + d}" for d in range(rank))
    params = ", ".join(f".param .s32 c{d}" for d in range(rank))
    getc = "\n".join(f"    ld.param.s32 %r{10 + d}, [c{d}];" for d in range(rank))
    tmap_decl = ".param .u64 tmap_ptr" if tmap_in_global else ".param .align 64 .b8 tmap[128]"
    tmap_ref = "%rd9" if tmap_in_global else "tmap"
    get_tmap = "    ld.param.u64 %rd9, [tmap_ptr];" if tmap_in_global else ""
    waiting = """
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
    @!%p2 bra WAIT;""" if wait else ""
    return HEAD + f"""
.visible .entry k(.param .u64 out, {tmap_decl}, {params})
{{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 1024 .b8 buf[{nbytes}];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
{get_tmap}
{getc}
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p1, %r0, 0;
    @%p1 mbarrier.init.shared.b64 [bar], 1;
    @%p1 fence.mbarrier_init.release.cluster;     // the init, visible to the async proxy
    bar.sync 0;
    prefetch.tensormap [{tmap_ref}];
    @%p1 cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
        [buf], [{tmap_ref}, {{{coords}}}], [bar];
    @%p1 mbarrier.arrive.expect_tx.shared.b64 _, [bar], {nbytes};{waiting}
    mov.u32 %r1, %r0;
    shl.b32 %r1, %r1, 2;
    mov.u32 %r5, buf;
COPY:
    setp.ge.u32 %p3, %r1, {nbytes};
    @%p3 bra DONE;
    add.u32 %r2, %r5, %r1;
    shr.u32 %r3, %r2, 7;
    and.b32 %r3, %r3, {SWZ[swizzle][0]};
    shl.b32 %r3, %r3, {SWZ[swizzle][1]};
    xor.b32 %r2, %r2, %r3;
    ld.shared.u32 %r4, [%r2];
    cvt.u64.u32 %rd2, %r1;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
    add.u32 %r1, %r1, 512;
    bra COPY;
DONE:
    ret;
}}
"""


def run_load(src: np.ndarray, box: tuple, coords: tuple, swizzle: str = "none", estrides: tuple = (),
             fill: str = "zero", dtype: str = "f32", tmap_in_global: bool = False, check_races: bool = True,
             wait: bool = True) -> np.ndarray:
    mem = Memory()
    a = mem.alloc(src.nbytes)
    mem.write(a, src.tobytes())
    tm = for_array(a, src.shape, src.strides, dtype, box, swizzle, estrides, fill)
    shape = tuple(-(-b // e) for b, e in zip(box, estrides or (1,) * len(box)))
    nbytes = int(np.prod(shape)) * src.itemsize
    out = mem.alloc(nbytes)
    if tmap_in_global:
        t = mem.alloc(128, 64)
        mem.write(t, tm)
        tm = t
    # coordinates are innermost first in PTX
    run_ptx(load_kernel(len(box), nbytes, swizzle, tmap_in_global, wait), "k", 1, 128,
            [out, tm, *reversed(coords)], mem, check_races=check_races)
    return np.frombuffer(mem.read(out, nbytes), src.dtype).reshape(shape)


def expected(src: np.ndarray, box: tuple, coords: tuple, estrides: tuple = (), fill: float = 0.0) -> np.ndarray:
    es = estrides or (1,) * len(box)
    idx = [np.arange(c, c + b, e) for c, b, e in zip(coords, box, es)]
    out = np.full(tuple(len(i) for i in idx), fill, dtype=src.dtype)
    grids = np.meshgrid(*idx, indexing="ij")
    inside = np.ones(out.shape, dtype=bool)
    for g, n in zip(grids, src.shape):
        inside &= (g >= 0) & (g < n)
    out[inside] = src[tuple(g[inside] for g in grids)]
    return out


SRC = np.arange(40 * 48, dtype=np.float32).reshape(40, 48) + 1


@pytest.mark.parametrize("coords", [(8, 16), (0, 0), (-3, -5), (36, 40)])
def test_2d_load_with_zero_fill_outside_the_tensor(coords) -> None:
    np.testing.assert_array_equal(run_load(SRC, (8, 16), coords), expected(SRC, (8, 16), coords))


@pytest.mark.parametrize("swizzle,inner", [("32B", 8), ("64B", 16), ("128B", 32), ("128B", 16),
                                           ("128B_atom_32B", 32)])
def test_swizzled_loads_follow_the_ptx_isa_address_permutation(swizzle, inner) -> None:
    box, coords = (16, inner), (4, 8)
    np.testing.assert_array_equal(run_load(SRC, box, coords, swizzle), expected(SRC, box, coords))


def test_f16_128b_swizzle_box_of_64_columns_as_matmul_tiles_use() -> None:
    src = (np.arange(128 * 192) % 2039).astype(np.float16).reshape(128, 192)
    np.testing.assert_array_equal(run_load(src, (64, 64), (64, 128), "128B", dtype="f16"),
                                  expected(src, (64, 64), (64, 128)))


def test_nan_fill_and_element_strides() -> None:
    got = run_load(SRC, (6, 16), (37, 40), fill="nan", estrides=(2, 1))
    np.testing.assert_array_equal(got, expected(SRC, (6, 16), (37, 40), (2, 1), fill=np.nan))
    assert np.isnan(got).sum() == np.isnan(expected(SRC, (6, 16), (37, 40), (2, 1), np.nan)).sum() > 0


def test_3d_and_5d_loads() -> None:
    src3 = np.arange(5 * 6 * 8, dtype=np.int32).reshape(5, 6, 8)
    np.testing.assert_array_equal(run_load(src3, (2, 4, 4), (3, 4, 4), dtype="s32"),
                                  expected(src3, (2, 4, 4), (3, 4, 4)))
    src5 = np.arange(3 * 2 * 3 * 4 * 4, dtype=np.float32).reshape(3, 2, 3, 4, 4)
    box = (2, 2, 2, 2, 4)
    np.testing.assert_array_equal(run_load(src5, box, (2, 0, 1, 3, 0)), expected(src5, box, (2, 0, 1, 3, 0)))


def test_tensor_map_in_global_memory() -> None:
    np.testing.assert_array_equal(run_load(SRC, (8, 16), (8, 16), tmap_in_global=True),
                                  expected(SRC, (8, 16), (8, 16)))


def test_reading_the_box_without_waiting_for_the_mbarrier_is_reported() -> None:
    with pytest.raises(EmulatorError, match=r"read before the mbarrier wait: shared address 0x0 is written by the "
                                            r"TMA load at line \d+ .* phase 0 of the mbarrier at shared address "
                                            r"0x200, and thread 0 loads it without having waited"):
        run_load(SRC, (8, 16), (8, 16), wait=False)


@pytest.mark.parametrize("fence_after_barrier", [False, True])
def test_the_init_fence_must_be_ordered_before_another_threads_tma(fence_after_barrier: bool) -> None:
    """Thread 0 initializes the mbarrier, thread 32 (another warp) issues the TMA load that completes on it: the
    async proxy sees the init only through thread 0's fence.mbarrier_init, so the fence must come before the
    bar.sync that hands the mbarrier over. Fenced after the barrier, it is reported, though the emulator ran
    thread 0's fence before thread 32's copy (a fence that merely ran earlier used to count)."""
    src = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    fence = "    @%p1 fence.mbarrier_init.release.cluster;     // the init, visible to the async proxy\n"
    ptx = load_kernel(2, 8 * 16 * 4, "none").replace(
        "    setp.eq.u32 %p1, %r0, 0;\n", "    setp.eq.u32 %p1, %r0, 0;\n    setp.eq.u32 %p0, %r0, 32;\n").replace(
        "@%p1 cp.async.bulk.tensor", "@%p0 cp.async.bulk.tensor").replace(
        "@%p1 mbarrier.arrive.expect_tx", "@%p0 mbarrier.arrive.expect_tx")
    if fence_after_barrier:
        ptx = ptx.replace(fence + "    bar.sync 0;\n", "    bar.sync 0;\n" + fence)
    assert "@%p0 cp.async.bulk.tensor" in ptx and ("bar.sync 0;\n" + fence in ptx) == fence_after_barrier
    mem = Memory()
    a = mem.alloc(src.nbytes)
    mem.write(a, src.tobytes())
    out = mem.alloc(8 * 16 * 4)
    args = [out, for_array(a, src.shape, src.strides, "f32", (8, 16), "none", (), "zero"), 16, 8]
    if not fence_after_barrier:
        run_ptx(ptx, "k", 1, 128, args, mem, check_races=True)
        got = np.frombuffer(mem.read(out, 8 * 16 * 4), np.float32).reshape(8, 16)
        np.testing.assert_array_equal(got, expected(src, (8, 16), (8, 16)))
        return
    with pytest.raises(EmulatorError, match="whose initialization thread 0 fenced .* but no barrier or mbarrier "
                                            "phase orders that fence before this use") as info:
        run_ptx(ptx, "k", 1, 128, args, mem, check_races=True)
    assert "thread (32,0,0)" in str(info.value), info.value


def test_bad_tensor_maps_are_device_faults() -> None:
    mem = Memory()
    out = mem.alloc(512)
    with pytest.raises(EmulatorError, match=r"bad tensor map at kernel parameter address 0x40: not a tensor map "
                                            r"\(flags word 0x00000000.*in thread \(0,0,0\)"):
        run_ptx(load_kernel(2, 512, "none"), "k", 1, 128, [out, bytes(128), 0, 0], mem)
    src = mem.alloc(SRC.nbytes)
    tm = for_array(src, SRC.shape, SRC.strides, "f32", (8, 16))
    shifted = load_kernel(2, 512 + 16, "none").replace("[buf], [tmap", "[buf+16], [tmap")
    with pytest.raises(EmulatorError, match=r"TMA shared-memory address 0x10 is not 128-byte aligned"):
        run_ptx(shifted, "k", 1, 128, [out, for_array(src, SRC.shape, SRC.strides, "f32", (8, 8), "32B"), 0, 0],
                mem)
    multicast = load_kernel(2, 512, "none").replace(
        "complete_tx::bytes\n        [buf], [tmap, {%r10, %r11}], [bar];",
        "complete_tx::bytes.multicast::cluster [buf], [tmap, {%r10, %r11}], [bar], %rs1;").replace(
        ".reg .b64 %rd<16>;", ".reg .b64 %rd<16>;\n    .reg .b16 %rs<2>;\n    mov.u16 %rs1, 3;")
    with pytest.raises(EmulatorError, match=r"multicast mask 0x3 names CTAs outside this one-CTA cluster"):
        run_ptx(multicast, "k", 1, 128, [out, tm, 0, 0], mem)
    in_shared = load_kernel(2, 512, "none").replace("[tmap, {%r10", "[smap, {%r10").replace(
        ".shared .align 8 .b64 bar;", ".shared .align 8 .b64 bar;\n    .shared .align 64 .b8 smap[128];")
    with pytest.raises(EmulatorError, match=r"a tensor map must be in .param, .const or .global memory, not .shared"):
        run_ptx(in_shared, "k", 1, 128, [out, tm, 0, 0], mem)


STORE = HEAD + """
.visible .entry k(.param .align 64 .b8 tmap[128], .param .s32 c0, .param .s32 c1, .param .u32 fence)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .shared .align 128 .b8 buf[512];
    ld.param.s32 %r10, [c0];
    ld.param.s32 %r11, [c1];
    ld.param.u32 %r12, [fence];
    mov.u32 %r0, %tid.x;
    shl.b32 %r1, %r0, 2;
    add.u32 %r2, %r0, 1000;
    st.shared.u32 [buf+%r1], %r2;
    setp.ne.u32 %p2, %r12, 0;
    @%p2 fence.proxy.async.shared::cta;
    bar.sync 0;
    setp.eq.u32 %p1, %r0, 0;
    @%p1 cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [tmap, {%r10, %r11}], [buf];
    @%p1 cp.async.bulk.commit_group;
    @%p1 cp.async.bulk.wait_group.read 0;
    ret;
}
""".replace("[buf+%r1]", "[%r3]").replace("    st.shared.u32", "    mov.u32 %r3, buf;\n    add.u32 %r3, %r3, %r1;\n"
                                                                  "    st.shared.u32")


def test_store_writes_only_the_box_inside_the_tensor() -> None:
    mem = Memory()
    dst = np.zeros((10, 12), np.uint32)
    a = mem.alloc(dst.nbytes)
    mem.write(a, dst.tobytes())
    tm = for_array(a, dst.shape, dst.strides, "u32", (16, 8))
    run_ptx(STORE, "k", 1, 128, [tm, 8, 4, 1], mem, check_races=True)     # x = 8, y = 4: rows 4..19, cols 8..15
    got = np.frombuffer(mem.read(a, dst.nbytes), np.uint32).reshape(10, 12)
    box = np.arange(1000, 1128, dtype=np.uint32).reshape(16, 8)
    want = dst.copy()
    want[4:10, 8:12] = box[:6, :4]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("wait_first", [True, False])
def test_reusing_the_staging_buffer_needs_the_store_read_to_finish(wait_first) -> None:
    wait = "    @%p1 cp.async.bulk.wait_group.read 0;\n"
    reuse = "    bar.sync 0;\n    st.shared.u32 [%r3], %r0;\n"
    ptx = STORE.replace(wait, "").replace("    ret;", (wait + reuse if wait_first else reuse + wait) + "    ret;")
    mem = Memory()
    a = mem.alloc(10 * 12 * 4)
    tm = for_array(a, (10, 12), (48, 4), "u32", (16, 8))
    if wait_first:
        run_ptx(ptx, "k", 1, 128, [tm, 0, 0, 1], mem, check_races=True)
        return
    with pytest.raises(EmulatorError, match=r"data race \(write-after-read\): the store at line \d+ overwrites shared "
                                            r"address 0x4, but the asynchronous read of it by the instruction at line "
                                            r"\d+ '@%p1 cp.async.bulk.tensor.2d.global.shared::cta.*', issued by thread 0, "
                                            r"may still be in flight"):
        run_ptx(ptx, "k", 1, 128, [tm, 0, 0, 1], mem, check_races=True)


@pytest.mark.parametrize("op,dtype", [("add", "f32"), ("max", "s32"), ("xor", "u32"), ("add", "f16")])
def test_reduce_combines_the_box_into_global_memory(op, dtype) -> None:
    np_type = {"f32": np.float32, "s32": np.int32, "u32": np.uint32, "f16": np.float16}[dtype]
    ptx = STORE.replace("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group",
                        f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group")
    if dtype == "f16":      # 256 halves in the 512-byte buffer: store the thread number as two f16 values
        ptx = ptx.replace("    add.u32 %r2, %r0, 1000;", "    cvt.rn.f16.u32 %rs1, %r0;\n    mov.b32 %r2, {%rs1, %rs1};"
                          ).replace(".reg .b32 %r<32>;", ".reg .b32 %r<32>;\n    .reg .b16 %rs<2>;")
    else:
        ptx = ptx.replace("    add.u32 %r2, %r0, 1000;", "    sub.u32 %r2, %r0, 60;" if dtype == "s32" else
                          "    add.u32 %r2, %r0, 1000;" if dtype == "u32" else "    cvt.rn.f32.u32 %r2, %r0;")
    mem = Memory()
    rng = np.random.default_rng(2)
    dst = rng.integers(-50, 50, (10, 16 if dtype == "f16" else 12)).astype(np_type)
    a = mem.alloc(dst.nbytes)
    mem.write(a, dst.tobytes())
    box = (16, 16) if dtype == "f16" else (16, 8)
    tm = for_array(a, dst.shape, dst.strides, {"f32": "f32", "s32": "s32", "u32": "u32", "f16": "f16"}[dtype], box)
    run_ptx(ptx, "k", 1, 128, [tm, 4, 2, 1], mem, check_races=True)       # rows 2.., columns 4..
    got = np.frombuffer(mem.read(a, dst.nbytes), np_type).reshape(dst.shape)
    t = np.arange(128)
    vals = {"f32": t.astype(np.float32), "s32": (t - 60).astype(np.int32), "u32": (t + 1000).astype(np.uint32),
            "f16": np.repeat(t, 2).astype(np.float16)}[dtype].reshape(box)
    want = dst.copy()
    part = want[2:, 4:]
    fn = {"add": np.add, "max": np.maximum, "xor": np.bitwise_xor}[op]
    want[2:, 4:] = fn(part, vals[:part.shape[0], :part.shape[1]]).astype(np_type)
    np.testing.assert_array_equal(got, want)


def test_store_of_generic_writes_without_proxy_fence_is_reported() -> None:
    mem = Memory()
    a = mem.alloc(10 * 12 * 4)
    tm = for_array(a, (10, 12), (48, 4), "u32", (16, 8))
    with pytest.raises(EmulatorError, match=r"missing fence.proxy.async: thread \d+ stored to shared address 0x\w+ "
                                            r"at line \d+ 'st.shared.u32 \[%r3\], %r2' through the generic proxy and "
                                            r"the TMA store at line \d+ reads it"):
        run_ptx(STORE, "k", 1, 128, [tm, 0, 0, 0], mem, check_races=True)


REPLACE = HEAD + """
.visible .entry k(.param .u64 out, .param .u64 tmap_ptr, .param .u64 src, .param .u32 rows)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 128 .b8 buf[256];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd9, [tmap_ptr];
    ld.param.u64 %rd8, [src];
    ld.param.u32 %r9, [rows];
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p1, %r0, 0;
    @%p1 tensormap.replace.tile.global_address.global.b1024.b64 [%rd9], %rd8;
    @%p1 tensormap.replace.tile.global_dim.global.b1024.b32 [%rd9], 1, %r9;
    @%p1 tensormap.replace.tile.box_dim.global.b1024.b32 [%rd9], 0, 4;
    fence.proxy.tensormap::generic.release.gpu;
    @%p1 mbarrier.init.shared.b64 [bar], 1;
    @%p1 fence.mbarrier_init.release.cluster;     // the init, visible to the async proxy
    bar.sync 0;
    fence.proxy.tensormap::generic.acquire.gpu [%rd9], 128;
    @%p1 cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [buf], [%rd9, {0, 0}], [bar];
    @%p1 mbarrier.arrive.expect_tx.shared.b64 _, [bar], 256;
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
    @!%p2 bra WAIT;
    setp.lt.u32 %p3, %r0, 64;
    @!%p3 bra DONE;
    shl.b32 %r1, %r0, 2;
    mov.u32 %r5, buf;
    add.u32 %r2, %r5, %r1;
    ld.shared.u32 %r4, [%r2];
    cvt.u64.u32 %rd2, %r1;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
DONE:
    ret;
}
"""


def test_tensormap_replace_edits_a_template_in_global_memory() -> None:
    mem = Memory()
    src = np.arange(100, 100 + 16 * 8, dtype=np.float32).reshape(16, 8)
    s = mem.alloc(src.nbytes)
    mem.write(s, src.tobytes())
    placeholder = mem.alloc(16 * 8 * 4)      # the template points elsewhere, with 2 rows and a box of 8 x 16
    template = mem.alloc(128, 64)
    mem.write(template, for_array(placeholder, (2, 8), (32, 4), "f32", (16, 8)))
    out = mem.alloc(256)
    run_ptx(REPLACE, "k", 1, 128, [out, template, s, 12], mem, check_races=True)
    got = np.frombuffer(mem.read(out, 256), np.float32).reshape(16, 4)
    want = np.zeros((16, 4), np.float32)
    want[:12] = src[:12, :4]
    np.testing.assert_array_equal(got, want)
    tm = decode(mem.read(template, 128))
    assert (tm.address, tm.dims, tm.box) == (s, (8, 12), (4, 16))


IN_KERNEL = HEAD + """
.visible .entry k(.param .u64 out, .param .u64 slot, .param .align 64 .b8 template[128], .param .u64 src)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 128 .b8 buf[256];
    .shared .align 128 .b8 tm[128];
    .shared .align 8 .b64 bar;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd9, [slot];
    ld.param.u64 %rd8, [src];
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p1, %r0, 32;
    @!%p1 bra COPIED;
    shl.b32 %r1, %r0, 2;                        // warp 0 copies the template parameter to shared memory
    mov.u32 %r2, template;
    add.u32 %r2, %r2, %r1;
    ld.param.u32 %r3, [%r2];
    mov.u32 %r4, tm;
    add.u32 %r4, %r4, %r1;
    st.shared.u32 [%r4], %r3;
    bar.warp.sync -1;
    setp.eq.u32 %p2, %r0, 0;
    @%p2 tensormap.replace.tile.global_address.shared::cta.b1024.b64 [tm], %rd8;
    @%p2 tensormap.replace.tile.rank.shared::cta.b1024.b32 [tm], 1;
    bar.warp.sync -1;
    tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd9], [tm], 128;
COPIED:
    setp.eq.u32 %p3, %r0, 0;
    @%p3 mbarrier.init.shared.b64 [bar], 1;
    @%p3 fence.mbarrier_init.release.cluster;     // the init, visible to the async proxy
    bar.sync 0;
    fence.proxy.tensormap::generic.acquire.gpu [%rd9], 128;
    @%p3 cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [buf], [%rd9, {0, 0}], [bar];
    @%p3 mbarrier.arrive.expect_tx.shared.b64 _, [bar], 256;
WAIT:
    mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;
    @!%p2 bra WAIT;
    setp.lt.u32 %p3, %r0, 64;
    @!%p3 bra DONE;
    shl.b32 %r1, %r0, 2;
    mov.u32 %r5, buf;
    add.u32 %r2, %r5, %r1;
    ld.shared.u32 %r4, [%r2];
    cvt.u64.u32 %rd2, %r1;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r4;
DONE:
    ret;
}
"""


def test_a_descriptor_built_in_the_kernel_from_a_template_parameter() -> None:
    # the template names a 3-D placeholder; the kernel points it at `src` as 2-D, copies it to global
    # memory (tensormap.cp_fenceproxy) and loads through it
    mem = Memory()
    src = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) + 0.5
    s = mem.alloc(src.nbytes)
    mem.write(s, src.tobytes())
    placeholder = mem.alloc(4096)
    template = for_array(placeholder, (1, 16, 8), (512, 32, 4), "f32", (1, 8, 8))
    slot = mem.alloc(128, 64)
    out = mem.alloc(256)
    run_ptx(IN_KERNEL, "k", 1, 128, [out, slot, template, s], mem, check_races=True)
    np.testing.assert_array_equal(np.frombuffer(mem.read(out, 256), np.float32).reshape(8, 8), src[:8])
    assert decode(mem.read(slot, 128)).rank == 2


def test_host_descriptor_encoding_round_trips_and_checks_its_fields() -> None:
    tm = TensorMap(0x7000_0000_0100, "bf16", (64, 32, 3), (2, 128, 4096), (64, 16, 1), (1, 2, 1), "128B",
                   fill="nan")
    raw = encode(tm)
    assert len(raw) == 128 and raw[64:] == bytes(64)      # the hardware layout uses the first 64 bytes
    assert decode(raw) == tm
    assert tm.box_bytes() == 64 * 8 * 2
    bad = [(dict(box=(128, 16, 1)), "more than the 128B swizzle span"),
           (dict(strides=(2, 100, 4096)), "global stride 1 is 100 bytes"),
           (dict(strides=(4, 128, 4096)), "not the element size"),
           (dict(address=0x7000_0000_0108), "not 16-byte aligned"),
           (dict(box=(64, 300, 1)), "box dim 1 is 300"),
           (dict(dtype="u8", swizzle="none", strides=(1, 128, 4096)), "NaN out-of-bounds fill needs a float")]
    for change, msg in bad:
        with pytest.raises(TensorMapError, match=msg):
            encode(TensorMap(**{**tm.__dict__, **change}))
    with pytest.raises(TensorMapError, match="not a tensor map"):
        decode(bytes(128))


def test_exiting_before_the_store_has_read_shared_memory_is_reported() -> None:
    mem = Memory()
    a = mem.alloc(10 * 12 * 4)
    tm = for_array(a, (10, 12), (48, 4), "u32", (16, 8))
    for missing in ("    @%p1 cp.async.bulk.wait_group.read 0;\n", ""):
        ptx = STORE.replace("cp.async.bulk.wait_group.read 0;", "cp.async.bulk.wait_group.read 1;") if not missing \
            else STORE.replace(missing, "")
        with pytest.raises(EmulatorError, match=r"block \(0,0,0\) exits while the bulk copy issued by thread 0 at line "
                                                r"\d+ '@%p1 cp.async.bulk.tensor.2d.global.shared::cta.*' may still be "
                                                r"reading its shared memory"):
            run_ptx(ptx, "k", 1, 128, [tm, 0, 0, 1], mem)
