"""PTX emulator: divergence and reconvergence, loops, barriers, calls, atomics, grids and faults."""

from __future__ import annotations

import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx
from tileiras.emulator.host import emulate

HEADER = """
.version 8.0
.target sm_90
.address_size 64
"""


def kernel(body: str, params: str = ".param .u64 out", extra: str = "", name: str = "k",
           directives: str = "") -> str:
    return HEADER + extra + f"""
.visible .entry {name}({params}) {directives}
{{
    .reg .pred %p<16>;
    .reg .b32 %r<64>;
    .reg .b64 %rd<32>;
    .reg .f32 %f<16>;
{body}
}}
"""


STORE_R10 = """
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r10;
    ret;
"""


def run_out(body: str, n: int = 128, dtype: object = np.uint32, grid: tuple = (1, 1, 1),
            check_races: bool | None = None, **kw: object) -> np.ndarray:
    outs, _ = emulate(kernel(body, **kw), "k", grid, (n, 1, 1), [np.zeros(n * grid[0], dtype=dtype)],
                      check_races=check_races)
    return outs[0]


def test_nested_if_else_reconverges() -> None:
    body = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r10, 0;
    and.b32 %r2, %r0, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    // odd threads: split again on bit 1
    and.b32 %r3, %r0, 2;
    setp.ne.u32 %p2, %r3, 0;
    @%p2 bra ODD_HI;
    add.u32 %r10, %r10, 100;
    bra.uni ODD_JOIN;
ODD_HI:
    add.u32 %r10, %r10, 200;
ODD_JOIN:
    add.u32 %r10, %r10, 1;
    bra.uni JOIN;
EVEN:
    setp.lt.u32 %p3, %r0, 64;
    @!%p3 bra EVEN_HI;
    add.u32 %r10, %r10, 1000;
EVEN_HI:
    add.u32 %r10, %r10, 2;
JOIN:
    // everyone, after reconvergence: a warp vote sees the whole warp again
    activemask.b32 %r11;
    popc.b32 %r12, %r11;
    mad.lo.u32 %r10, %r12, 10000, %r10;
""" + STORE_R10
    got = run_out(body)
    t = np.arange(128)
    exp = np.where(t % 2 == 0, np.where(t < 64, 1002, 2), np.where(t & 2, 201, 101)) + 32 * 10000
    np.testing.assert_array_equal(got, exp)


def test_loops_with_per_thread_trip_counts_and_nested_loops() -> None:
    body = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r10, 0;
    mov.u32 %r2, 0;            // i
OUTER:
    setp.ge.u32 %p1, %r2, %r0;
    @%p1 bra DONE;
    mov.u32 %r3, 0;            // j
INNER:
    and.b32 %r4, %r2, 3;
    setp.ge.u32 %p2, %r3, %r4;
    @%p2 bra INNER_END;
    add.u32 %r10, %r10, %r3;
    add.u32 %r3, %r3, 1;
    bra.uni INNER;
INNER_END:
    add.u32 %r10, %r10, %r2;
    // break out early when the sum passes 500
    setp.gt.u32 %p3, %r10, 500;
    @%p3 bra DONE;
    add.u32 %r2, %r2, 1;
    bra.uni OUTER;
DONE:
    bar.sync 0;
""" + STORE_R10
    got = run_out(body)
    exp = []
    for t in range(128):
        s = 0
        for i in range(t):
            s += sum(range(i & 3)) + i
            if s > 500:
                break
        exp.append(s)
    np.testing.assert_array_equal(got, exp)


def test_barrier_exchanges_data_through_shared_memory() -> None:
    extra = ".shared .align 4 .b8 buf[512];\n"
    body = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, buf;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    mul.lo.u32 %r4, %r0, %r0;
    st.shared.u32 [%r3], %r4;
    bar.sync 0;
    sub.u32 %r5, 127, %r0;
    shl.b32 %r6, %r5, 2;
    add.u32 %r7, %r1, %r6;
    ld.shared.u32 %r10, [%r7];
    bar.sync 0;
    // a second round reuses the barrier: rotate by one warp
    st.shared.u32 [%r3], %r10;
    barrier.sync 0;
    add.u32 %r8, %r0, 32;
    and.b32 %r8, %r8, 127;
    shl.b32 %r8, %r8, 2;
    add.u32 %r8, %r1, %r8;
    ld.shared.u32 %r10, [%r8];
""" + STORE_R10
    got = run_out(body, extra=extra)
    t = np.arange(128)
    first = (127 - t) ** 2
    np.testing.assert_array_equal(got, first[(t + 32) % 128])


def test_barrier_reductions() -> None:
    body = """
    mov.u32 %r0, %tid.x;
    and.b32 %r2, %r0, 7;
    setp.eq.u32 %p1, %r2, 0;
    bar.red.popc.u32 %r3, 0, %p1;
    setp.lt.u32 %p2, %r0, 200;
    bar.red.and.pred %p3, 1, %p2;
    setp.eq.u32 %p4, %r0, 77;
    bar.red.or.pred %p5, 2, %p4;
    bar.red.and.pred %p6, 3, %p4;
    selp.u32 %r4, 1000, 0, %p3;
    selp.u32 %r5, 100, 0, %p5;
    selp.u32 %r6, 10, 0, %p6;
    add.u32 %r10, %r3, %r4;
    add.u32 %r10, %r10, %r5;
    add.u32 %r10, %r10, %r6;
""" + STORE_R10
    got = run_out(body)
    np.testing.assert_array_equal(got, np.full(128, 16 + 1000 + 100))


def test_named_barriers_producer_consumer_warps() -> None:
    """Warps 0-1 produce, warps 2-3 consume: bar.arrive / bar.sync with a thread count."""
    extra = ".shared .align 4 .b8 buf[256];\n"
    body = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, buf;
    mov.u32 %r10, 0;
    setp.ge.u32 %p1, %r0, 64;
    @%p1 bra CONSUMER;
    mad.lo.u32 %r2, %r0, 3, 1;
    shl.b32 %r3, %r0, 2;
    add.u32 %r3, %r1, %r3;
    st.shared.u32 [%r3], %r2;
    bar.arrive 1, 128;
    bra.uni END;
CONSUMER:
    bar.sync 1, 128;
    sub.u32 %r4, %r0, 64;
    shl.b32 %r3, %r4, 2;
    add.u32 %r3, %r1, %r3;
    ld.shared.u32 %r10, [%r3];
END:
""" + STORE_R10
    got = run_out(body, extra=extra)
    t = np.arange(128)
    np.testing.assert_array_equal(got, np.where(t >= 64, (t - 64) * 3 + 1, 0))


def test_exited_threads_count_as_arrived_at_barriers() -> None:
    extra = ".shared .align 4 .b8 buf[512];\n"
    body = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.ge.u32 %p1, %r0, 40;
    @%p1 exit;
    mov.u32 %r1, buf;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    st.shared.u32 [%r3], %r0;
    bar.sync 0;
    sub.u32 %r4, 39, %r0;
    shl.b32 %r4, %r4, 2;
    add.u32 %r4, %r1, %r4;
    ld.shared.u32 %r10, [%r4];
    st.global.u32 [%rd3], %r10;
"""
    got = run_out(body, extra=extra)
    t = np.arange(128)
    np.testing.assert_array_equal(got, np.where(t < 40, 39 - t, 0))


def test_barrier_deadlock_is_reported() -> None:
    body = """
    mov.u32 %r0, %tid.x;
    setp.lt.u32 %p1, %r0, 32;
    @%p1 bra WAIT;
    ret;
WAIT:
    bar.sync 1, 64;
    mov.u32 %r10, 1;
""" + STORE_R10
    with pytest.raises(EmulatorError, match="deadlock.*barrier 1"):
        run_out(body)


FUNCS = """
.func (.param .b32 ret) collatz_steps(.param .b32 x)
{
    .reg .pred %q<4>;
    .reg .b32 %s<8>;
    ld.param.b32 %s0, [x];
    mov.u32 %s1, 0;
LOOP:
    setp.le.u32 %q1, %s0, 1;
    @%q1 bra END;
    and.b32 %s2, %s0, 1;
    setp.eq.u32 %q2, %s2, 0;
    @%q2 bra EVEN;
    mad.lo.u32 %s0, %s0, 3, 1;
    bra.uni NEXT;
EVEN:
    shr.u32 %s0, %s0, 1;
NEXT:
    add.u32 %s1, %s1, 1;
    bra.uni LOOP;
END:
    st.param.b32 [ret], %s1;
    ret;
}

.func (.param .b32 ret) twice(.param .b32 x)
{
    .reg .b32 %s<4>;
    ld.param.b32 %s0, [x];
    {
    .param .b32 p0;
    .param .b32 r0;
    st.param.b32 [p0], %s0;
    call.uni (r0), collatz_steps, (p0);
    ld.param.b32 %s1, [r0];
    }
    shl.b32 %s2, %s1, 1;
    st.param.b32 [ret], %s2;
    ret;
}
"""


def _collatz(x: int) -> int:
    steps = 0
    while x > 1:
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def test_calls_from_divergent_paths_return_to_their_call_sites() -> None:
    body = """
    mov.u32 %r0, %tid.x;
    add.u32 %r1, %r0, 1;
    and.b32 %r2, %r0, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    {
    .param .b32 a0;
    .param .b32 r0;
    st.param.b32 [a0], %r1;
    call.uni (r0), collatz_steps, (a0);
    ld.param.b32 %r10, [r0];
    }
    add.u32 %r10, %r10, 1000;
    bra.uni JOIN;
EVEN:
    {
    .param .b32 a0;
    .param .b32 r0;
    st.param.b32 [a0], %r1;
    call.uni (r0), twice, (a0);
    ld.param.b32 %r10, [r0];
    }
JOIN:
""" + STORE_R10
    got = run_out(body, extra=FUNCS)
    exp = [(_collatz(t + 1) + 1000) if t % 2 else 2 * _collatz(t + 1) for t in range(128)]
    np.testing.assert_array_equal(got, exp)


def test_recursion_and_missing_function_bodies_are_errors() -> None:
    rec = """
.func (.param .b32 ret) f(.param .b32 x)
{
    .reg .b32 %s<2>;
    ld.param.b32 %s0, [x];
    {
    .param .b32 p;
    .param .b32 r;
    st.param.b32 [p], %s0;
    call.uni (r), f, (p);
    ld.param.b32 %s1, [r];
    }
    st.param.b32 [ret], %s1;
    ret;
}
"""
    body = """
    {
    .param .b32 p;
    .param .b32 r;
    st.param.b32 [p], 1;
    call.uni (r), f, (p);
    ld.param.b32 %r10, [r];
    }
""" + STORE_R10
    with pytest.raises(EmulatorError, match="recursive calls are not supported: k -> f -> f"):
        run_out(body, extra=rec)
    ext = ".extern .func (.param .b32 ret) __nv_sinf(.param .b32 x);\n"
    body = """
    {
    .param .b32 p;
    .param .b32 r;
    st.param.b32 [p], 1;
    call.uni (r), __nv_sinf, (p);
    ld.param.b32 %r10, [r];
    }
""" + STORE_R10
    with pytest.raises(EmulatorError, match="__nv_sinf.*no body"):
        run_out(body, extra=ext)


def test_brx_jump_table() -> None:
    body = """
    mov.u32 %r0, %tid.x;
    rem.u32 %r1, %r0, 3;
    $Ltab: .branchtargets A, B, C;
    brx.idx %r1, $Ltab;
A:
    mov.u32 %r10, 10;
    bra.uni J;
B:
    mov.u32 %r10, 20;
    bra.uni J;
C:
    mov.u32 %r10, 30;
J:
""" + STORE_R10
    got = run_out(body)
    np.testing.assert_array_equal(got, (np.arange(128) % 3 + 1) * 10)


@pytest.mark.parametrize("n", [128, 96, 50])
def test_atomics_with_contention(n: int) -> None:
    ptx = kernel("""
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [fout];
    ld.param.u64 %rd3, [olds];
    add.u32 %r1, %r0, 1;
    atom.global.add.u32 %r2, [%rd1], %r1;
    and.b32 %r3, %r0, 3;
    mul.wide.u32 %rd4, %r3, 4;
    add.s64 %rd5, %rd1, %rd4;
    atom.global.max.s32 %r4, [%rd5+4], %r0;
    atom.global.inc.u32 %r5, [%rd1+20], 9;
    cvt.rn.f32.u32 %f1, %r1;
    mul.f32 %f1, %f1, 0f3DCCCCCD;
    red.global.add.f32 [%rd2], %f1;
    mul.wide.u32 %rd6, %r0, 4;
    add.s64 %rd7, %rd3, %rd6;
    st.global.u32 [%rd7], %r2;
    atom.global.cas.b32 %r6, [%rd1+24], %r0, %r1;
    atom.global.exch.b32 %r7, [%rd1+28], %r0;
    add.u32 %r8, %r6, %r7;
    st.global.u32 [%rd7+512], %r8;
    """, params=".param .u64 out, .param .u64 fout, .param .u64 olds")
    out = np.zeros(8, np.int32)
    out[1:5] = -1
    (o, f, olds), _ = emulate(ptx, "k", (1, 1, 1), (n, 1, 1), [out, np.zeros(1, np.float32),
                                                              np.zeros(256, np.uint32)])
    t = np.arange(n)
    assert o[0] == n * (n + 1) // 2
    np.testing.assert_array_equal(o[1:5], [max(t[t % 4 == k]) for k in range(4)])
    assert o[5] == n % 10        # inc wraps at 9
    acc = np.float32(0)
    for v in (t + 1).astype(np.float32) * np.float32(0.1):
        acc = np.float32(acc + v)
    assert f[0] == acc           # sequential in thread order
    np.testing.assert_array_equal(olds[:n], np.cumsum(t + 1) - (t + 1))   # each thread saw the running sum
    # cas in thread order: thread t finds t (left by thread t-1) and swaps in t+1
    cas_old = t
    exch_old = np.where(t == 0, 0, t - 1)
    np.testing.assert_array_equal(olds[128:128 + n], cas_old + exch_old)


def test_spin_lock_in_shared_memory_makes_progress() -> None:
    extra = ".shared .align 4 .b8 lock[4];\n.shared .align 4 .b8 total[4];\n"
    body = """
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, lock;
    mov.u32 %r2, total;
    setp.ne.u32 %p3, %r0, 0;
    @%p3 bra SKIP;
    st.shared.u32 [%r1], 0;
    st.shared.u32 [%r2], 0;
SKIP:
    bar.sync 0;
SPIN:
    atom.shared.cas.b32 %r3, [%r1], 0, 1;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra SPIN;
    ld.shared.u32 %r4, [%r2];
    add.u32 %r4, %r4, %r0;
    st.shared.u32 [%r2], %r4;
    atom.shared.exch.b32 %r5, [%r1], 0;
    bar.sync 0;
    ld.shared.u32 %r10, [%r2];
""" + STORE_R10
    # the lock's atomics are relaxed, so by the PTX memory model the critical sections race: the race
    # checker says so; what this test checks is that the scheduler lets the lock holder progress
    got = run_out(body, n=64, extra=extra, check_races=False)
    np.testing.assert_array_equal(got, np.full(64, sum(range(64))))


def test_grid_and_block_indices() -> None:
    ptx = kernel("""
    mov.u32 %r0, %tid.x; mov.u32 %r1, %tid.y; mov.u32 %r2, %tid.z;
    mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ctaid.y; mov.u32 %r5, %ctaid.z;
    mov.u32 %r6, %ntid.x; mov.u32 %r7, %ntid.y; mov.u32 %r8, %nctaid.x; mov.u32 %r9, %nctaid.y;
    // linear block and thread ids
    mad.lo.u32 %r11, %r5, %r9, %r4;
    mad.lo.u32 %r11, %r11, %r8, %r3;
    mad.lo.u32 %r12, %r2, %r7, %r1;
    mad.lo.u32 %r12, %r12, %r6, %r0;
    mul.lo.u32 %r13, %r6, %r7;
    mov.u32 %r14, %ntid.z;
    mul.lo.u32 %r13, %r13, %r14;
    mad.lo.u32 %r15, %r11, %r13, %r12;
    // value: tid.x + 10*tid.y + 100*tid.z + 1000*ctaid.x + 10000*ctaid.y + 100000*ctaid.z
    mad.lo.u32 %r10, %r1, 10, %r0;
    mad.lo.u32 %r10, %r2, 100, %r10;
    mad.lo.u32 %r10, %r3, 1000, %r10;
    mad.lo.u32 %r10, %r4, 10000, %r10;
    mad.lo.u32 %r10, %r5, 100000, %r10;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r15, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r10;
    """)
    grid, block = (3, 2, 2), (4, 3, 2)
    n = 12 * 24
    (o,), stats = emulate(ptx, "k", grid, block, [np.zeros(n, np.uint32)])
    exp = [x + 10 * y + 100 * z + 1000 * bx + 10000 * by + 100000 * bz
           for bz in range(2) for by in range(2) for bx in range(3)
           for z in range(2) for y in range(3) for x in range(4)]
    np.testing.assert_array_equal(o, exp)
    assert stats.ctas == 12


def test_generic_addressing_local_memory_and_dynamic_shared() -> None:
    extra = ".extern .shared .align 16 .b8 dyn[];\n.shared .align 4 .b8 stat[12];\n"
    body = """
    .local .align 4 .b8 depot[64];
    .reg .b64 %SP;
    mov.u32 %r0, %tid.x;
    mov.u64 %rd10, depot;
    cvta.local.u64 %SP, %rd10;
    st.local.u32 [depot], 0;                 // local memory starts undefined
    // per-thread local array indexed dynamically through a generic pointer
    and.b32 %r1, %r0, 15;
    mul.wide.u32 %rd11, %r1, 4;
    add.s64 %rd12, %SP, %rd11;
    st.u32 [%rd12], %r0;
    ld.local.u32 %r2, [depot];
    // dynamic shared memory (placed after the static arrays) through a generic pointer
    mov.u64 %rd13, dyn;
    cvta.shared.u64 %rd14, %rd13;
    mul.wide.u32 %rd15, %r0, 4;
    add.s64 %rd16, %rd14, %rd15;
    st.u32 [%rd16], %r0;
    isspacep.shared %p1, %rd16;
    isspacep.global %p2, %rd16;
    bar.sync 0;
    xor.b32 %r3, %r0, 1;
    mul.wide.u32 %rd17, %r3, 4;
    add.s64 %rd18, %rd13, %rd17;
    ld.shared.u32 %r4, [%rd18];
    mov.u32 %r5, %dynamic_smem_size;
    mad.lo.u32 %r10, %r4, 1000, %r5;
    selp.u32 %r6, 1, 0, %p1;
    selp.u32 %r7, 2, 0, %p2;
    add.u32 %r10, %r10, %r6;
    add.u32 %r10, %r10, %r7;
    setp.eq.u64 %p3, %rd13, 16;
    selp.u32 %r8, 100000000, 0, %p3;
    add.u32 %r10, %r10, %r8;
    add.u32 %r10, %r10, %r2;
""" + STORE_R10
    ptx = kernel(body, extra=extra)
    (o,), _ = emulate(ptx, "k", (1, 1, 1), (128, 1, 1), [np.zeros(128, np.uint32)], dynamic_smem=512)
    t = np.arange(128)
    # depot[0] holds the value of the thread itself when (t & 15) == 0, else 0
    np.testing.assert_array_equal(o, (t ^ 1) * 1000 + 512 + 1 + 100000000 + np.where(t % 16 == 0, t, 0))


def test_global_and_const_variables_with_initializers() -> None:
    extra = """
.global .align 4 .u32 table[4] = {10, 20, 30, 40};
.const .align 8 .f64 scale = 0d4000000000000000;
.global .align 8 .u64 ptr = table;
.global .align 4 .b32 counter;
"""
    body = """
    mov.u32 %r0, %tid.x;
    and.b32 %r1, %r0, 3;
    mov.u64 %rd4, table;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd4, %rd5;
    ld.global.u32 %r2, [%rd6];
    ld.const.f64 %rd7, [scale];
    mov.b64 %rd8, %rd7;
    ld.global.u64 %rd9, [ptr];
    ld.global.u32 %r3, [%rd9+4];
    atom.global.add.u32 %r4, [counter], 1;
    cvt.rn.f64.u32 %rd10, %r2;
    mov.b64 %rd11, %rd10;
    {
    .reg .f64 %x, %y;
    mov.b64 %x, %rd11;
    mov.b64 %y, %rd8;
    mul.rn.f64 %x, %x, %y;
    cvt.rzi.u32.f64 %r5, %x;
    }
    add.u32 %r10, %r5, %r3;
""" + STORE_R10
    got = run_out(body, n=32, extra=extra)
    np.testing.assert_array_equal(got, (np.arange(32) % 4 + 1) * 20 + 20)


def test_clock_is_monotonic_and_trap_is_a_fault() -> None:
    body = """
    mov.u64 %rd10, %clock64;
    mov.u32 %r2, %clock;
    add.u32 %r2, %r2, 1;
    mov.u64 %rd11, %clock64;
    setp.gt.u64 %p1, %rd11, %rd10;
    selp.u32 %r10, 1, 0, %p1;
""" + STORE_R10
    np.testing.assert_array_equal(run_out(body, n=32), np.ones(32))
    body = """
    mov.u32 %r0, %tid.x;
    setp.eq.u32 %p1, %r0, 5;
    @%p1 trap;
    mov.u32 %r10, 0;
""" + STORE_R10
    with pytest.raises(EmulatorError, match=r"trap executed.*thread \(5,0,0\)"):
        run_out(body, n=32)


# --- faults --------------------------------------------------------------------------

OOB = """
    mov.u32 %r0, %tid.x;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r0;
"""


def test_out_of_bounds_global_access_names_instruction_thread_and_address() -> None:
    mem = Memory()
    buf = mem.alloc(4 * 100)
    with pytest.raises(EmulatorError) as info:
        run_ptx(kernel(OOB), "k", (1, 1, 1), (128, 1, 1), [buf], mem)
    msg = str(info.value)
    assert "out-of-bounds global access of 4 bytes" in msg
    assert f"0x{buf + 400:x}" in msg
    assert "st.global.u32 [%rd3], %r0" in msg
    assert "thread (100,0,0)" in msg and "block (0,0,0)" in msg
    # a load just past the end of an allocation faults even when another allocation follows
    mem2 = Memory()
    a = mem2.alloc(256)
    mem2.alloc(256)
    ptx = kernel("""
    ld.param.u64 %rd1, [out];
    ld.global.u32 %r1, [%rd1+256];
    """)
    with pytest.raises(EmulatorError, match="out-of-bounds global access"):
        run_ptx(ptx, "k", (1, 1, 1), (32, 1, 1), [a], mem2)


def test_misaligned_and_shared_out_of_bounds_accesses_are_faults() -> None:
    mem = Memory()
    buf = mem.alloc(1024)
    ptx = kernel("""
    ld.param.u64 %rd1, [out];
    ld.global.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1+8];
    """)
    with pytest.raises(EmulatorError, match="misaligned global access of 16 bytes"):
        run_ptx(ptx, "k", (1, 1, 1), (32, 1, 1), [buf], mem)
    ptx = kernel("""
    mov.u32 %r0, %tid.x;
    shl.b32 %r1, %r0, 2;
    mov.u32 %r2, sbuf;
    add.u32 %r3, %r2, %r1;
    st.shared.u32 [%r3], %r0;
    """, extra=".shared .align 4 .b8 sbuf[64];\n")
    with pytest.raises(EmulatorError, match=r"out-of-bounds shared access.*thread \(16,0,0\)"):
        run_ptx(ptx, "k", (1, 1, 1), (32, 1, 1), [buf], mem)


def test_launch_configuration_errors() -> None:
    mem = Memory()
    buf = mem.alloc(4096)
    ptx = kernel(OOB, directives=".reqntid 64, 1, 1")
    with pytest.raises(EmulatorError, match=r"requires a block of \(64, 1, 1\)"):
        run_ptx(ptx, "k", (1, 1, 1), (128, 1, 1), [buf], mem)
    run_ptx(ptx, "k", (1, 1, 1), (64, 1, 1), [buf], mem)
    with pytest.raises(EmulatorError, match="takes 1 parameters"):
        run_ptx(ptx, "k", (1, 1, 1), (64, 1, 1), [buf, 3], mem)
    with pytest.raises(EmulatorError, match="no kernel 'nope'.*kernels: k"):
        run_ptx(ptx, "nope", (1, 1, 1), (64, 1, 1), [buf], mem)
    with pytest.raises(EmulatorError, match="at most 1024"):
        run_ptx(kernel(OOB), "k", (1, 1, 1), (2048, 1, 1), [buf], mem)


def test_endless_loop_is_stopped() -> None:
    body = """
L:
    bra.uni L;
"""
    mem = Memory()
    buf = mem.alloc(4)
    with pytest.raises(EmulatorError, match="endless loop"):
        run_ptx(kernel(body), "k", (1, 1, 1), (32, 1, 1), [buf], mem, max_warp_instructions=10_000)


def test_memory_interface() -> None:
    mem = Memory()
    a = mem.alloc(10, align=512)
    assert a % 512 == 0
    b = mem.alloc(1 << 20)
    assert b >= a + 10
    mem.write(a, b"0123456789")
    assert mem.read(a + 2, 3) == b"234"
    mem.write(b + (1 << 20) - 4, b"wxyz")
    assert mem.read(b + (1 << 20) - 4, 4) == b"wxyz"
    assert mem.read(a, 10) == b"0123456789"       # survived the heap growing
    with pytest.raises(EmulatorError, match="outside every allocation"):
        mem.read(a + 8, 4)
    with pytest.raises(EmulatorError, match="outside every allocation"):
        mem.write(0, b"x")


PRINTF = """
.extern .func (.param .b32 func_retval0) vprintf (.param .b64 vprintf_param_0, .param .b64 vprintf_param_1);
.extern .func __assertfail (.param .b64 p0, .param .b64 p1, .param .b32 p2, .param .b64 p3, .param .b64 p4);
.global .align 1 .b8 fmt[37] = {116, 37, 100, 32, 37, 115, 32, 37, 108, 108, 100, 32, 37, 46, 51, 102, 32, 37,
 53, 120, 32, 37, 99, 37, 37, 124, 37, 45, 52, 117, 124, 37, 101, 10, 0};
.global .align 1 .b8 word[3] = {104, 105, 0};
.global .align 1 .b8 msg[9] = {116, 111, 111, 32, 98, 105, 103, 33, 0};
.global .align 1 .b8 file[6] = {107, 46, 99, 117, 0};
"""


def test_vprintf_and_device_assert() -> None:
    import io

    body = """
    .local .align 8 .b8 args[48];
    mov.u32 %r0, %tid.x;
    mov.u32 %r10, 0;                         // the threads that skip the call store it too
    setp.ge.u32 %p1, %r0, 3;
    @%p1 bra SKIP;
    mov.u64 %rd1, args;
    st.local.u32 [%rd1], %r0;
    mov.u64 %rd2, word;
    cvta.global.u64 %rd2, %rd2;
    st.local.u64 [%rd1+8], %rd2;
    cvt.s64.s32 %rd3, %r0;
    mul.lo.s64 %rd3, %rd3, -10000000000;
    st.local.u64 [%rd1+16], %rd3;
    mov.b64 %rd4, 0d400921FB54442D18;
    st.local.u64 [%rd1+24], %rd4;
    st.local.u32 [%rd1+32], 255;
    st.local.u32 [%rd1+36], 65;
    st.local.u32 [%rd1+40], 7;
    mov.b64 %rd5, 0d3F50624DD2F1A9FC;
    st.local.u64 [%rd1+48], %rd5;
    cvta.local.u64 %rd6, %rd1;
    mov.u64 %rd7, fmt;
    cvta.global.u64 %rd7, %rd7;
    {
    .param .b64 p0;
    .param .b64 p1;
    .param .b32 r0;
    st.param.b64 [p0], %rd7;
    st.param.b64 [p1], %rd6;
    call.uni (r0), vprintf, (p0, p1);
    ld.param.b32 %r10, [r0];
    }
SKIP:
""" + STORE_R10
    out = io.StringIO()
    ptx = kernel(body.replace(".local .align 8 .b8 args[48];", ".local .align 8 .b8 args[56];"), extra=PRINTF)
    (o,), _ = emulate(ptx, "k", (1, 1, 1), (32, 1, 1), [np.zeros(32, np.uint32)], stdout=out)
    lines = [f"t{t} hi {-10000000000 * t} 3.142    ff A%|7   |1.000000e-03\n" for t in range(3)]
    assert out.getvalue() == "".join(lines)
    np.testing.assert_array_equal(o[:3], [len(s) for s in lines])
    body = """
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p1, %r0, 9;
    @%p1 bra OK;
    mov.u64 %rd1, msg; cvta.global.u64 %rd1, %rd1;
    mov.u64 %rd2, file; cvta.global.u64 %rd2, %rd2;
    {
    .param .b64 p0;
    .param .b64 p1;
    .param .b32 p2;
    .param .b64 p3;
    .param .b64 p4;
    st.param.b64 [p0], %rd1;
    st.param.b64 [p1], %rd2;
    st.param.b32 [p2], 42;
    st.param.b64 [p3], 0;
    st.param.b64 [p4], 1;
    call.uni __assertfail, (p0, p1, p2, p3, p4);
    }
OK:
    mov.u32 %r10, 1;
""" + STORE_R10
    with pytest.raises(EmulatorError, match=r"device assertion failed: too big! \(k.cu:42\).*thread \(9,0,0\)"):
        emulate(kernel(body, extra=PRINTF), "k", (1, 1, 1), (32, 1, 1), [np.zeros(32, np.uint32)])
