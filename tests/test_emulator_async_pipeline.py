"""A warp-specialized TMA pipeline in hand-written PTX: the emulator runs it without false deadlocks,
the race checker passes it, and the same pipeline with a wait taken out is reported.

Warp 0 (the producer, after setmaxnreg.dec) elects one lane that streams T tiles of 8 x 16 floats
through a ring of 2 shared-memory stages: it waits for the stage's `empty` mbarrier, arms the
`full` mbarrier with arrive.expect_tx and issues the TMA load. Warps 1-2 (the consumers, after
setmaxnreg.inc) wait for `full` with try_wait.parity, add their two elements of the tile to a
running sum and arrive on `empty`. At the end the consumers meet on named barrier 1 (64 threads),
then release the producer through named barrier 2 (bar.arrive / bar.sync, 96 threads).
"""

from __future__ import annotations

import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx
from tileiras.codegen.tensormap import for_array

T = 7          # tiles: more than the 2 stages, so the ring wraps and the phases flip

PRODUCER = """
    // ---- producer warp
    setmaxnreg.dec.sync.aligned.u32 40;
    mov.u32 %r30, 0;
PLOOP:
    setp.ge.u32 %p3, %r30, {T};
    @%p3 bra PDONE;
    and.b32 %r31, %r30, 1;                 // stage
    shr.u32 %r32, %r30, 1;
    and.b32 %r32, %r32, 1;                 // phase of this round
    xor.b32 %r33, %r32, 1;                 // the empty barrier's previous phase
    shl.b32 %r34, %r31, 3;
    add.u32 %r35, %r34, empty;
    add.u32 %r36, %r34, full;
{producer_wait}
    elect.sync %r37|%p5, -1;
    @!%p5 bra PNEXT;
    shl.b32 %r38, %r31, 9;
    add.u32 %r38, %r38, ring;
    shl.b32 %r39, %r30, 3;                 // tile t covers rows 8t .. 8t+7
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r36], 512;
    cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%r38], [tmap, {{%r40, %r39}}], [%r36];
PNEXT:
    add.u32 %r30, %r30, 1;
    bra PLOOP;
PDONE:
    bar.sync 2, 96;
    bra END;
"""

CONSUMER = """
    // ---- consumer warps
    setmaxnreg.inc.sync.aligned.u32 232;
    mov.f32 %f1, 0f00000000;
    mov.u32 %r30, 0;
    sub.u32 %r50, %r0, 32;                 // consumer thread 0..63
    shl.b32 %r51, %r50, 3;                 // its two floats: bytes 8c .. 8c+7 of the tile
CLOOP:
    setp.ge.u32 %p3, %r30, {T};
    @%p3 bra CDONE;
    and.b32 %r31, %r30, 1;
    shr.u32 %r32, %r30, 1;
    and.b32 %r32, %r32, 1;
    shl.b32 %r34, %r31, 3;
    add.u32 %r35, %r34, empty;
    add.u32 %r36, %r34, full;
{consumer_wait}
    shl.b32 %r38, %r31, 9;
    add.u32 %r38, %r38, ring;
    add.u32 %r38, %r38, %r51;
    ld.shared.v2.f32 {{%f2, %f3}}, [%r38];
    add.f32 %f1, %f1, %f2;
    add.f32 %f1, %f1, %f3;
    mbarrier.arrive.shared::cta.b64 _, [%r35];
    add.u32 %r30, %r30, 1;
    bra CLOOP;
CDONE:
    bar.sync 1, 64;
    bar.arrive 2, 96;
    mul.wide.u32 %rd2, %r50, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f1;
    bra END;
"""

WAIT = """
{label}:
    mbarrier.try_wait.parity.shared::cta.b64 %p4, [{bar}], {parity};
    @!%p4 bra {label};"""


def kernel(consumer_first: bool = False, consumer_waits: bool = True, producer_waits: bool = True) -> str:
    producer = PRODUCER.format(T=T, producer_wait=WAIT.format(label="PWAIT", bar="%r35", parity="%r33")
                               if producer_waits else "")
    consumer = CONSUMER.format(T=T, consumer_wait=WAIT.format(label="CWAIT", bar="%r36", parity="%r32")
                               if consumer_waits else "")
    first, second = (consumer, producer) if consumer_first else (producer, consumer)
    which = "setp.ne.u32 %p2, %r1, 0;" if not consumer_first else "setp.eq.u32 %p2, %r1, 0;"
    return f"""
.version 8.6
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .align 64 .b8 tmap[128])
.reqntid 96
{{
    .reg .pred %p<8>;
    .reg .b32 %r<64>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<8>;
    .shared .align 1024 .b8 ring[1024];
    .shared .align 8 .b64 full[2];
    .shared .align 8 .b64 empty[2];
    ld.param.u64 %rd1, [out];
    mov.u32 %r40, 0;
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra INIT_DONE;
    mbarrier.init.shared::cta.b64 [full], 1;
    mbarrier.init.shared::cta.b64 [full+8], 1;
    mbarrier.init.shared::cta.b64 [empty], 64;
    mbarrier.init.shared::cta.b64 [empty+8], 64;
INIT_DONE:
    fence.mbarrier_init.release.cluster;
    bar.sync 0;
    {which}
    @%p2 bra SECOND;
{first}
SECOND:
{second}
END:
    ret;
}}
"""


def run(ptx: str, check_races: bool = True) -> tuple[np.ndarray, np.ndarray]:
    src = np.arange(8 * T * 16, dtype=np.float32).reshape(8 * T, 16) / 8
    mem = Memory()
    a = mem.alloc(src.nbytes)
    mem.write(a, src.tobytes())
    out = mem.alloc(64 * 4)
    run_ptx(ptx, "k", 1, 96, [out, for_array(a, src.shape, src.strides, "f32", (8, 16))], mem,
            check_races=check_races)
    want = src.reshape(T, 128).reshape(T, 64, 2).sum(axis=(0, 2))
    return np.frombuffer(mem.read(out, 256), np.float32), want


@pytest.mark.parametrize("consumer_first", [False, True])
def test_warp_specialized_pipeline_runs_race_free(consumer_first) -> None:
    got, want = run(kernel(consumer_first))
    np.testing.assert_allclose(got, want)


def test_consumer_reading_a_stage_before_its_phase_completes_is_reported() -> None:
    with pytest.raises(EmulatorError, match=r"read before the mbarrier wait: shared address 0x\w+ is written by the "
                                            r"TMA load at line \d+ .*which completes phase 0 of the mbarrier at "
                                            r"shared address 0x400, and thread 32 loads it without having waited"):
        run(kernel(consumer_waits=False))


def test_consumers_running_ahead_without_waiting_leave_the_producer_deadlocked() -> None:
    # scheduled first, the consumers read stages nothing wrote yet (shared memory starts undefined) ...
    ptx = kernel(consumer_first=True, consumer_waits=False)
    with pytest.raises(EmulatorError, match=r"read of undefined shared memory: thread 32 loads it at shared address "
                                            r"0x0, which no instruction wrote at line \d+ 'ld.shared.v2.f32"):
        run(ptx)
    # ... and free every stage several times over; the producer then waits for a phase parity that has
    # already gone by, as it would on a GPU
    with pytest.raises(EmulatorError, match=r"deadlock in block \(0,0,0\): 32 thread\(s\) at an mbarrier wait: "
                                            r"line \d+ 'mbarrier.try_wait.parity.shared::cta.b64 %p4, \[%r35\], %r33'"):
        run(ptx, check_races=False)


def test_producer_overwriting_a_stage_the_consumers_have_not_released_is_reported() -> None:
    with pytest.raises(EmulatorError, match=r"data race \(write-after-read\): the TMA load at line \d+ overwrites "
                                            r"shared address 0x\w+, but thread \d+ read it at line \d+ "
                                            r"'ld.shared.v2.f32 .*' and no mbarrier or barrier orders that read"):
        run(kernel(consumer_first=True, producer_waits=False))


def test_a_wait_that_can_never_succeed_is_a_deadlock_naming_it() -> None:
    # consumers wait for the second round's phase of `full` on the first round: nothing can complete it
    ptx = kernel().replace("[%r36], %r32;", "[%r36], 1;", 1)
    with pytest.raises(EmulatorError, match=r"deadlock in block \(0,0,0\)"):
        run(ptx, check_races=False)


def test_setmaxnreg_needs_a_valid_register_count() -> None:
    with pytest.raises(EmulatorError, match=r"register count must be an immediate multiple of 8 in 24..256"):
        run(kernel().replace("setmaxnreg.dec.sync.aligned.u32 40;", "setmaxnreg.dec.sync.aligned.u32 20;"))


def test_setmaxnreg_budgets_must_fit_and_only_move_their_way() -> None:
    with pytest.raises(EmulatorError, match=r"setmaxnreg.dec to 48 registers: warp 0 has 40, which .dec cannot lower"):
        run(kernel().replace("setmaxnreg.dec.sync.aligned.u32 40;",
                             "setmaxnreg.dec.sync.aligned.u32 40;\n    setmaxnreg.dec.sync.aligned.u32 48;"))
    with pytest.raises(EmulatorError, match=r"setmaxnreg.inc to 232 registers: warp 1 has 256"):
        run(kernel().replace("setmaxnreg.inc.sync.aligned.u32 232;",
                             "setmaxnreg.inc.sync.aligned.u32 256;\n    setmaxnreg.inc.sync.aligned.u32 232;"))


def test_setmaxnreg_inc_past_the_register_file_waits_for_ever() -> None:
    # 512 threads at 128 registers fill the SM's 65536; raising one warpgroup's budget needs another's
    # .dec first: here nobody gives registers back, as on a GPU the .inc hangs
    ptx = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k()
{
    .reg .b32 %r<4>;
    mov.u32 %r0, %tid.x;
    setp.ge.u32 %p1, %r0, 256;
    @%p1 bra DONE;
    setmaxnreg.inc.sync.aligned.u32 160;
DONE:
    ret;
}
""".replace(".reg .b32 %r<4>;", ".reg .b32 %r<4>;\n    .reg .pred %p<2>;")
    with pytest.raises(EmulatorError, match=r"deadlock in block \(0,0,0\): 256 thread\(s\) at a setmaxnreg.inc "
                                            r"waiting for registers: line \d+ 'setmaxnreg.inc.sync.aligned.u32 160'"):
        run_ptx(ptx, "k", 1, 512, [], Memory())
    run_ptx(ptx.replace("setmaxnreg.inc.sync.aligned.u32 160;",
                        "setmaxnreg.dec.sync.aligned.u32 96;\n    bra DONE;\n"
                        "UP:\n    setmaxnreg.inc.sync.aligned.u32 160;")
            .replace("@%p1 bra DONE;", "@%p1 bra UP;"), "k", 1, 512, [], Memory())
