"""`.aligned` barriers are executed by each warp at one instruction.

`bar.sync` is `barrier.sync.aligned`: the GPU counts a warp's arrival once per barrier instruction
the warp executes, so a warp split over two copies of the same barrier (thread 0 at one, the rest at
the other) arrives twice, the barrier's count goes wrong and the kernel hangs. On an H200 this hung
our sm_90 int8 128x256 matmul, the chunked layernorm and every warp-specialized attention-backward
variant: LLVM had duplicated the inline-asm `bar.sync` after a thread-0 TMA store into both arms of
the branch. The emulator reports such a split; the lowering marks collective inline asm
`convergent` so LLVM never makes one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tileiras.emulator import EmulatorError
from tileiras.emulator.host import emulate
from tileiras.lowering.llvm_text import convergent

ROOT = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(ROOT / "realistic")]


def kernel(body: str) -> str:
    return f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    setp.ne.u32 %p1, %r0, 0;
{body}
    st.global.u32 [%rd3], %r0;
    ret;
}}
"""


# thread 0 takes one arm, the other 63 threads the other; the barrier follows the join
JOINED = """
    @%p1 bra SKIP;
    mov.u32 %r1, 7;
SKIP:
    bar.sync 1, 64;
"""
# the same barrier copied into both arms, as LLVM tail-duplicates a non-convergent call
SPLIT = """
    @%p1 bra OTHERS;
    mov.u32 %r1, 7;
    bar.sync 1, 64;
    bra.uni DONE;
OTHERS:
    bar.sync 1, 64;
DONE:
"""


def run(body: str) -> np.ndarray:
    (out,), _ = emulate(kernel(body), "k", 1, 64, [np.zeros(64, np.uint32)])
    return out


def test_a_barrier_after_the_join_runs() -> None:
    np.testing.assert_array_equal(run(JOINED), np.arange(64, dtype=np.uint32))


def test_a_warp_split_over_two_copies_of_an_aligned_barrier_is_reported() -> None:
    with pytest.raises(EmulatorError, match=r"warp 0 executes aligned barrier 1 at two instructions \(line \d+ and "
                                            r"line \d+\).*hangs"):
        run(SPLIT)


def test_the_non_aligned_barrier_may_be_reached_from_two_instructions() -> None:
    # barrier.sync without .aligned counts threads, so divergent arrival is allowed
    np.testing.assert_array_equal(run(SPLIT.replace("bar.sync", "barrier.sync")), np.arange(64, dtype=np.uint32))


@pytest.mark.parametrize("line, marked", [
    ('  call void asm sideeffect "bar.sync 1, 256;", "~{memory}"(), !dbg !7', True),
    ('  %w = call i32 asm sideeffect "wgmma.commit_group.sync.aligned;", "=r"()', True),
    ('  call void asm sideeffect "setmaxnreg.inc.sync.aligned.u32 232;", ""()', True),
    ('  %e = call i32 asm sideeffect "elect.sync %r, -1;", "=r"()', True),
    ('  call void asm sideeffect "fence.proxy.async.shared::cta;", "~{memory}"()', False),
    ('  call void asm sideeffect "mbarrier.arrive.shared::cta.b64 _, [$0];", "r"(i32 %b)', False),
])
def test_collective_inline_asm_is_convergent(line: str, marked: bool) -> None:
    out = convergent(line)
    assert (") convergent" in out) == marked
    assert convergent(out) == out                    # once
    assert out.endswith(", !dbg !7") == line.endswith(", !dbg !7")


def test_a_kernel_that_hung_on_the_gpu_runs_on_the_emulator() -> None:
    """The chunked layernorm hung on an H200 (a thread-0 TMA copy, then bar.sync, duplicated by LLVM);
    it now runs with its barriers at one instruction per warp and matches the interpreter. (The
    int8 128x256 matmul that hung is in test_realistic_emulator's sample.)"""
    from test_realistic_emulator import _check

    _check("layernorm_chunked_f16_n8192_t2048", "sm_90")
