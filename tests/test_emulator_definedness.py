"""Undefined state on the emulator: registers, shared and tensor memory start undefined (and hold a
poison value); a value no instruction wrote that reaches a store or a branch is reported with the
instruction, its line and the register it came from."""

from __future__ import annotations

import numpy as np
import pytest

from tileiras.emulator import EmulatorError
from tileiras.emulator.host import emulate


def kernel(body: str, extra: str = "", target: str = "sm_90") -> str:
    return f"""
.version 8.0
.target {target}
.address_size 64
{extra}
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<32>;
    .reg .f32 %f<16>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd2, %r0, 16;
    add.s64 %rd3, %rd1, %rd2;
{body}
}}
"""


def run(body: str, n: int = 32, **kw: object) -> np.ndarray:
    (out,), _ = emulate(kernel(body, **kw), "k", 1, n, [np.zeros((n, 4), np.float32)])
    return out


# one m16n8k16 mma.sync per warp: A and B all ones, so D = 16 + C
MMA = """
    mov.b32 %r1, 0x3C003C00;
{init}
    mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%f0, %f1, %f2, %f3}}, {{%r1, %r1, %r1, %r1}}, {{%r1, %r1}},
        {{%f4, %f5, %f6, %f7}};
    st.global.v4.f32 [%rd3], {{%f0, %f1, %f2, %f3}};
"""
ZERO_C = "\n".join(f"    mov.f32 %f{i}, 0f00000000;" for i in range(4, 8))


def test_an_mma_accumulating_into_registers_nobody_zeroed_is_reported() -> None:
    np.testing.assert_array_equal(run(MMA.format(init=ZERO_C)), np.full((32, 4), 16.0))
    with pytest.raises(EmulatorError, match=r"undefined value stored: %f0 holds a value computed from %f4, which no "
                                            r"instruction wrote in this thread at line \d+ 'st.global.v4.f32"):
        run(MMA.format(init=ZERO_C.replace("mov.f32 %f4, 0f00000000;", "")))


def test_poison_spoils_what_undefined_registers_reach_with_the_checker_off() -> None:
    (out,), _ = emulate(kernel(MMA.format(init="")), "k", 1, 32, [np.zeros((32, 4), np.float32)],
                        check_races=False)
    assert np.isnan(out).all()


def test_a_branch_on_an_undefined_predicate_is_reported() -> None:
    body = """
    add.u32 %r2, %r3, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra SKIP;
    st.global.u32 [%rd3], %r0;
SKIP:
    ret;
"""
    with pytest.raises(EmulatorError, match=r"branch on an undefined predicate: %p1 is computed from %r3, which no "
                                            r"instruction wrote in this thread at line \d+ '@%p1 bra SKIP'"):
        run(body)
    run(body.replace("add.u32 %r2, %r3, 1;", "add.u32 %r2, %r0, 1;"))


def test_a_write_in_some_threads_defines_the_register_in_those_only() -> None:
    body = """
    setp.lt.u32 %p1, %r0, 16;
    @%p1 mov.u32 %r2, 7;
    st.global.u32 [%rd3], %r2;
"""
    with pytest.raises(EmulatorError, match=r"undefined value stored: %r2 .* in thread \(16,0,0\)"):
        run(body)
    out = run(body.replace("@%p1 mov", "mov"))
    np.testing.assert_array_equal(out[:, 0].view(np.uint32), 7)


def test_reading_shared_memory_nobody_wrote_is_reported() -> None:
    body = """
    mov.u32 %r1, buf;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    {store}
    bar.sync 0;
    ld.shared.u32 %r4, [%r3+4];
    st.global.u32 [%rd3], %r4;
"""
    extra = ".shared .align 4 .b8 buf[132];"
    with pytest.raises(EmulatorError, match=r"read of undefined shared memory: thread 31 loads it at shared address "
                                            r"0x80, which no instruction wrote at line \d+ 'ld.shared.u32"):
        run(body.format(store="st.shared.u32 [%r3], %r0;"), extra=extra)
    last = "setp.eq.u32 %p2, %r0, 31;\n    @%p2 st.shared.u32 [%r3+4], %r0;"
    out = run(body.format(store="st.shared.u32 [%r3], %r0;\n    " + last), extra=extra)
    assert out[0, 0].view(np.uint32) == 1


def test_a_packed_register_is_defined_in_the_bytes_that_came_defined() -> None:
    # LLVM packs a value with an undefined half and takes the defined bytes out again (prmt, unpacking mov)
    body = """
    .reg .b16 %rs<4>;
    cvt.u16.u32 %rs1, %r0;
    mov.b32 %r2, {{%rs1, %rs3}};
    {take}
    st.global.u32 [%rd3], %r4;
"""
    out = run(body.format(take="prmt.b32 %r4, %r2, 0, 0x7710;"))
    np.testing.assert_array_equal(out[:, 0].view(np.uint32), np.arange(32))
    run(body.format(take="mov.b32 {%rs2, %rs0}, %r2;\n    cvt.u32.u16 %r4, %rs2;"))
    with pytest.raises(EmulatorError, match=r"undefined value stored: %r4"):
        run(body.format(take="prmt.b32 %r4, %r2, 0, 0x7732;"))      # the undefined half's bytes
    with pytest.raises(EmulatorError, match=r"undefined value stored: %r4"):
        run(body.format(take="mov.b32 {%rs2, %rs0}, %r2;\n    cvt.u32.u16 %r4, %rs0;"))


def test_an_unpacking_mov_that_skips_the_undefined_half_with_a_sink_is_defined() -> None:
    body = """
    .reg .b64 %rd<8>;
    mov.b64 %rd5, {%r9, %r0};
    mov.b64 {_, %r4}, %rd5;
    st.global.u32 [%rd3], %r4;
"""
    out = run(body.replace("    .reg .b64 %rd<8>;\n", ""))
    np.testing.assert_array_equal(out[:, 0].view(np.uint32), np.arange(32))
