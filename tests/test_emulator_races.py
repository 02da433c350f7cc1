"""The emulator's data-race checker (on by default; `run_ptx(..., check_races=False)` turns it off).

Hand-written kernels in which thread i touches a[i] and its neighbour a[(i+1) % n]:
with a barrier between the accesses nothing is reported; without one, read-after-write,
write-after-write and write-after-read races are, naming both threads. Then every corpus
module runs in checking mode (its first launch; every launch with `-m sweep`).
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tileiras.emulator import EmulatorError
from tileiras.emulator.host import emulate

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"
N = 128
A0 = 0x7000_0000_0000     # the first allocation (array a) in a fresh emulator Memory

# %rd3 = &a[tid], %rd5 = &a[(tid+1) % n], %rd7 = &out[tid], %p1 = (tid == 0)
PROLOGUE = """
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd6, [out];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ntid.x;
    setp.eq.u32 %p1, %r0, 0;
    add.u32 %r2, %r0, 1;
    rem.u32 %r2, %r2, %r1;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    mul.wide.u32 %rd4, %r2, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd7, %rd6, %rd2;
"""
EXCHANGE = """
    st.global.u32 [%rd3], %r0;
    {sync}
    ld.global.u32 %r3, [%rd5];
    st.global.u32 [%rd7], %r3;
"""


def kernel(body: str, extra: str = "") -> str:
    return f"""
.version 8.0
.target sm_90
.address_size 64
{extra}
.visible .entry k(.param .u64 a, .param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
{PROLOGUE}{body}
}}
"""


def run(body: str, extra: str = "", grid: int = 1, check: bool = True) -> np.ndarray:
    """`out` after running the kernel on N threads per CTA."""
    outs, _ = emulate(kernel(body, extra), "k", (grid, 1, 1), (N, 1, 1),
                      [np.zeros(N, np.uint32), np.zeros(N, np.uint32)], check_races=check)
    return outs[1]


def race(body: str, extra: str = "") -> str:
    with pytest.raises(EmulatorError, match="data race") as info:
        run(body, extra)
    return str(info.value)


NEXT = (np.arange(N) + 1) % N


@pytest.mark.parametrize("sync", ["bar.sync 0;", "barrier.sync 0;", "bar.red.popc.u32 %r9, 0, %p1;"])
def test_store_barrier_load_of_the_neighbour_is_not_a_race(sync: str) -> None:
    np.testing.assert_array_equal(run(EXCHANGE.format(sync=sync)), NEXT)


def test_missing_barrier_is_a_read_after_write_race_naming_both_threads() -> None:
    msg = race(EXCHANGE.format(sync=""))
    assert re.search(rf"data race \(read-after-write\): thread 1 wrote global address 0x{A0 + 4:x} "
                     r"at line \d+ 'st.global.u32 \[%rd3\], %r0' and, with no barrier between, thread 0 loads it "
                     r"at line \d+ 'ld.global.u32 %r3, \[%rd5\]' in thread \(0,0,0\) of block \(0,0,0\)", msg), msg


def test_write_after_write_race() -> None:
    msg = race("st.global.u32 [%rd3], %r0;\n st.global.u32 [%rd5], %r0;")
    assert f"write-after-write): thread 1 wrote global address 0x{A0 + 4:x}" in msg
    assert "thread 0 stores to it" in msg


def test_write_after_read_race() -> None:
    msg = race("ld.global.u32 %r3, [%rd5];\n st.global.u32 [%rd3], %r3;")
    assert f"write-after-read): thread {N - 1} read global address 0x{A0:x}" in msg
    assert "thread 0 stores to it" in msg


def test_write_after_reads_by_several_threads_is_a_race_unless_the_writer_was_the_only_reader() -> None:
    msg = race("ld.global.u32 %r3, [%rd1];\n @%p1 st.global.u32 [%rd1], %r0;")
    assert f"write-after-read): several threads read global address 0x{A0:x} (the last at line" in msg
    run("@%p1 ld.global.u32 %r3, [%rd1];\n @%p1 st.global.u32 [%rd1], %r0;")


def test_stores_of_one_instruction_to_one_address_race() -> None:
    msg = race("st.global.u32 [%rd1], %r0;")
    assert re.search(rf"write-after-write\): threads \d+ and 0 both store to global address 0x{A0:x} "
                     "in one instruction", msg), msg


def test_a_thread_never_races_with_itself() -> None:
    out = run("""
    st.global.u32 [%rd3], %r0;
    ld.global.u32 %r3, [%rd3];
    add.u32 %r3, %r3, 5;
    st.global.u32 [%rd3], %r3;
    ld.global.u32 %r3, [%rd3];
    st.global.u32 [%rd7], %r3;
""")
    np.testing.assert_array_equal(out, np.arange(N) + 5)


def test_atomics_from_every_thread_to_one_address_are_not_races() -> None:
    out = run("""
    atom.global.add.u32 %r3, [%rd1], 1;
    red.global.add.u32 [%rd1+4], %r0;
    atom.global.max.u32 %r4, [%rd1+4], %r0;
    atom.global.cas.b32 %r4, [%rd1+8], %r0, %r2;
    bar.sync 0;
    ld.global.u32 %r3, [%rd1];
    st.global.u32 [%rd7], %r3;
""")
    np.testing.assert_array_equal(out, np.full(N, N))


def test_atomics_race_with_plain_accesses() -> None:
    msg = race("atom.global.add.u32 %r3, [%rd1], 1;\n ld.global.u32 %r3, [%rd1];")
    assert f"read-after-write): several threads wrote global address 0x{A0:x}" in msg
    msg = race("@%p1 st.global.u32 [%rd1], %r0;\n atom.global.add.u32 %r3, [%rd1], 1;")
    assert "write-after-write): thread 0 wrote" in msg and "thread 1 writes it (atomic or strong)" in msg


def test_strong_accesses_do_not_race_with_each_other() -> None:
    flag = "@%p1 st.relaxed.gpu.global.u32 [%rd1], 1;\n {load}.global.u32 %r3, [%rd1];\n"
    run(flag.format(load="ld.acquire.gpu") + "st.global.u32 [%rd7], %r3;")
    run(flag.format(load="ld.volatile") + "st.global.u32 [%rd7], %r3;")
    assert "read-after-write): thread 0 wrote" in race(flag.format(load="ld"))


SHARED = ".shared .align 4 .b8 buf[512];"
# %r6: this thread's word of buf, %r8: the next thread's
BUF_WORDS = """
    mov.u32 %r4, buf;
    shl.b32 %r5, %r0, 2;
    add.u32 %r6, %r4, %r5;
    shl.b32 %r7, %r2, 2;
    add.u32 %r8, %r4, %r7;
"""
SHARED_EXCHANGE = BUF_WORDS + """    st.shared.u32 [%r6], %r0;
    {sync}
    ld.shared.u32 %r3, [%r8];
    st.global.u32 [%rd7], %r3;
"""


def test_shared_memory_races() -> None:
    np.testing.assert_array_equal(run(SHARED_EXCHANGE.format(sync="bar.sync 0;"), SHARED), NEXT)
    msg = race(SHARED_EXCHANGE.format(sync=""), SHARED)
    assert "read-after-write): thread 1 wrote shared address 0x4" in msg


def test_generic_addresses_of_shared_memory_are_checked_as_shared() -> None:
    body = """
    mov.u64 %rd8, buf;
    cvta.shared.u64 %rd8, %rd8;
    add.s64 %rd9, %rd8, %rd2;
    add.s64 %rd10, %rd8, %rd4;
    st.u32 [%rd9], %r0;
    {sync}
    ld.u32 %r3, [%rd10];
    st.global.u32 [%rd7], %r3;
"""
    np.testing.assert_array_equal(run(body.format(sync="bar.sync 0;"), SHARED), NEXT)
    assert "thread 1 wrote shared address 0x4" in race(body.format(sync=""), SHARED)


def test_cp_async_writes_shared_memory_when_waited_for() -> None:
    body = BUF_WORDS + """    st.global.u32 [%rd3], %r0;
    bar.sync 0;
    cp.async.ca.shared.global [%r6], [%rd3], 4;
    cp.async.wait_all;
    {sync}
    ld.shared.u32 %r3, [%r8];
    st.global.u32 [%rd7], %r3;
"""
    np.testing.assert_array_equal(run(body.format(sync="bar.sync 0;"), SHARED), NEXT)
    msg = race(body.format(sync=""), SHARED)
    assert "thread 1 wrote shared address 0x4 at line" in msg and "'cp.async.ca.shared.global" in msg


def test_a_completed_mbarrier_phase_orders_accesses() -> None:
    extra = SHARED + "\n.shared .align 8 .b8 mb[8];"
    body = """
    @%p1 mbarrier.init.shared.b64 [mb], {count};
    bar.sync 0;
    st.global.u32 [%rd3], %r0;
    mbarrier.arrive.shared.b64 %rd8, [mb];
WAIT:
    mbarrier.try_wait.shared.b64 %p2, [mb], %rd8;
    @!%p2 bra WAIT;
    ld.global.u32 %r3, [%rd5];
    st.global.u32 [%rd7], %r3;
"""
    np.testing.assert_array_equal(run(body.format(count=N), extra), NEXT)


def test_a_relaxed_arrive_publishes_nothing() -> None:
    """`mbarrier.arrive.relaxed` counts towards the phase but, unlike the default (release) arrive,
    orders none of the arriving thread's earlier writes before the waiters' reads (shared memory,
    where the checker follows what each wait publishes)."""
    extra = SHARED + "\n.shared .align 8 .b8 mb[8];"
    body = BUF_WORDS + """
    @%p1 mbarrier.init.shared.b64 [mb], 128;
    bar.sync 0;
    st.shared.u32 [%r6], %r0;
    mbarrier.arrive{sem}.shared.b64 %rd8, [mb];
WAIT:
    mbarrier.try_wait.shared.b64 %p2, [mb], %rd8;
    @!%p2 bra WAIT;
    ld.shared.u32 %r3, [%r8];
    st.global.u32 [%rd7], %r3;
"""
    np.testing.assert_array_equal(run(body.format(sem=".release.cta"), extra), NEXT)
    np.testing.assert_array_equal(run(body.format(sem=""), extra), NEXT)
    assert "read" in race(body.format(sem=".relaxed.cta"), extra)


INVAL = """
    @%p1 mbarrier.init.shared.b64 [mb], 128;
    bar.sync 0;
    mbarrier.arrive{sem}.shared.b64 %rd8, [mb];
    {skip}
WAIT:
    mbarrier.try_wait.shared.b64 %p2, [mb], %rd8;
    @!%p2 bra WAIT;
SKIP:
    {sync}
    @%p1 mbarrier.inval.shared.b64 [mb];
    st.global.u32 [%rd7], %r0;
"""
MB = "\n.shared .align 8 .b8 mb[8];"


def test_mbarrier_inval_must_follow_every_other_threads_wait() -> None:
    """Another thread's wait on an mbarrier is ordered before thread 0's mbarrier.inval only by a barrier (or
    an mbarrier phase) that thread releases after it: without the bar.sync, the inval is reported, whatever
    order the emulator ran the warps in."""
    np.testing.assert_array_equal(run(INVAL.format(sem="", skip="", sync="bar.sync 0;"), MB), np.arange(N))
    msg = race(INVAL.format(sem="", skip="", sync=""), MB)
    assert "mbarrier.inval" in msg and "wait on it at line 30 'mbarrier.try_wait" in msg, msg


def test_an_mbarrier_used_before_its_initialization_is_ordered_is_reported() -> None:
    """Thread 0's mbarrier.init reaches the other threads only through a barrier: without the bar.sync, their
    arrivals and waits are reported though the emulator ran the init first."""
    body = INVAL.format(sem="", skip="", sync="bar.sync 0;").replace("    bar.sync 0;\n    mbarrier.arrive",
                                                                       "    mbarrier.arrive")
    with pytest.raises(EmulatorError, match="initialization by thread 0 is not ordered before this use") as info:
        run(body, MB)
    assert "line 27 'mbarrier.arrive.shared.b64" in str(info.value) and "thread (1,0,0)" in str(info.value)



@pytest.mark.parametrize("check", [True, False])
def test_an_mbarrier_invalidated_but_never_initialized_is_reported(check: bool) -> None:
    """mbarrier.inval on shared memory holding no valid mbarrier (never initialized, or invalidated already) is
    undefined (PTX ISA, mbarrier): reported with the inval's line, race checker on or off (the sm_90 chunked
    layernorm's unused ring stages used to pass with their init deleted)."""
    body = "    @%p1 mbarrier.init.shared.b64 [mb], 1;\n    @%p1 mbarrier.inval.shared.b64 [mb];\n"
    np.testing.assert_array_equal(run(body, MB, check=check), np.zeros(N))
    for bad in (body.replace("    @%p1 mbarrier.init.shared.b64 [mb], 1;\n", ""),
                body + "    @%p1 mbarrier.inval.shared.b64 [mb];\n"):
        with pytest.raises(EmulatorError, match="invalidated before mbarrier.init") as info:
            run(bad, MB, check=check)
        assert "mbarrier.inval.shared.b64 [mb]'" in str(info.value), info.value

@pytest.mark.parametrize("check", [True, False])
def test_an_mbarrier_initialized_again_while_valid_is_reported(check: bool) -> None:
    """mbarrier.init over a valid mbarrier (no mbarrier.inval since its own init) is undefined (PTX ISA,
    mbarrier.init: invalidate first): reported with the second init's line and the first's, race checker on or
    off. Here the other threads still wait on the old one's phase (on hardware the re-init resets the phase they
    wait for, and they may never see it end); an init after an inval, with nobody left using it, runs clean."""
    again = INVAL.format(sem="", skip="", sync="bar.sync 0;").replace(
        "    @%p1 mbarrier.inval.shared.b64 [mb];\n", "")
    np.testing.assert_array_equal(run(again, MB, check=check), np.arange(N))
    live = again.replace("    mbarrier.arrive.shared.b64 %rd8, [mb];\n",
                         "    mbarrier.arrive.shared.b64 %rd8, [mb];\n    @%p1 mbarrier.init.shared.b64 [mb], 128;\n")
    with pytest.raises(EmulatorError, match="which is still valid") as info:
        run(live, MB, check=check)
    msg = str(info.value)
    assert "at line 29 '@%p1 mbarrier.init.shared.b64 [mb], 128'" in msg, msg
    assert "initialized by thread 0 at line 26 '@%p1 mbarrier.init" in msg and "phase" in msg, msg
    reinit = again + "    @%p1 mbarrier.inval.shared.b64 [mb];\n    @%p1 mbarrier.init.shared.b64 [mb], 1;\n"
    np.testing.assert_array_equal(run(reinit, MB, check=check), np.arange(N))
    with pytest.raises(EmulatorError, match="which is still valid"):
        run(again + "    @%p1 mbarrier.init.shared.b64 [mb], 1;\n", MB, check=check)


@pytest.mark.parametrize("sem", ["", ".relaxed.cta"])
def test_arrivals_on_a_phase_the_invalidating_thread_saw_complete_need_no_barrier(sem: str) -> None:
    """Arrivals (release or relaxed) on a phase the invalidating thread saw complete are done with the mbarrier
    (NVIDIA's tcgen05.commit and TMA completions are ordered so): no barrier is needed before the inval."""
    only_0 = INVAL.format(sem=sem, skip="@!%p1 bra SKIP;", sync="")
    np.testing.assert_array_equal(run(only_0, MB), np.arange(N))


def test_races_between_ctas_are_reported() -> None:
    # CTA c stores a[(i + 2c) % n]: the CTAs' stores and loads overlap (each CTA's own do not), and
    # no atomic or strong access orders one CTA's after the other's: blocks of a grid run concurrently
    body = """
    mov.u32 %r4, %ctaid.x;
    shl.b32 %r4, %r4, 1;
    add.u32 %r5, %r0, %r4;
    rem.u32 %r5, %r5, %r1;
    mul.wide.u32 %rd8, %r5, 4;
    add.s64 %rd9, %rd1, %rd8;
    st.global.u32 [%rd9], %r0;
    bar.sync 0;
    ld.global.u32 %r3, [%rd5];
    st.global.u32 [%rd7], %r3;
"""
    with pytest.raises(EmulatorError, match=r"data race between CTAs \(write-after-write\): block \(0,0,0\)"):
        run(body, grid=2)


def test_with_the_checker_off_a_racy_kernel_runs() -> None:
    np.testing.assert_array_equal(run(EXCHANGE.format(sync=""), check=False), NEXT)


@pytest.mark.parametrize("value,reported", [("1", True), ("0", False)])
def test_the_environment_variable_sets_the_default(value: str, reported: bool) -> None:
    script = ("import numpy as np, sys\n"
              "from tileiras.emulator.host import emulate\n"
              f"emulate(sys.argv[1], 'k', 1, {N}, [np.zeros({N}, np.uint32), np.zeros({N}, np.uint32)])\n")
    env = dict(os.environ, TILEIRAS_EMULATOR_CHECK_RACES=value, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", script, kernel(EXCHANGE.format(sync=""))], env=env,
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode != 0) == reported, proc.stderr
    assert ("data race (read-after-write)" in proc.stderr) == reported, proc.stderr


# --- the corpus ---------------------------------------------------------------------------------

def _corpus_cases() -> list:
    """Every launch of the corpus: by default the first of each kernel module (every module's PTX runs under the
    race checker, on each target the corpus names); its other entries and launches (element types, shapes) with
    `-m sweep`."""
    sys.path.insert(0, str(CORPUS))
    import reference

    cases = []
    seen: set = set()
    for kernel_, entry, case in reference.iter_cases(reference.load_manifest()):
        ident = f"{entry['symbol']}-{case['name']}-{kernel_.get('gpu_code') or 'sm_90'}"
        module = id(kernel_)
        marks = [pytest.mark.sweep] if module in seen else []
        seen.add(module)
        cases.append(pytest.param(kernel_, entry, case, id=ident, marks=marks))
    return cases


@pytest.mark.parametrize("kernel_,entry,case", _corpus_cases())
def test_corpus_kernels_have_no_races(kernel_: dict, entry: dict, case: dict) -> None:
    import reference

    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    path = kernel_["files"][max(kernel_["files"], key=lambda v: tuple(int(p) for p in v.split(".")))]
    args = reference.make_args(kernel_, entry, case)
    arrays = [args[p["name"]] for p in entry["params"] if p["kind"] in ("array", "scalar", "list")]

    def on(gpu: str) -> None:
        run_arrays(load_module(str(CORPUS / path)), entry["symbol"], tuple(case["grid"]), arrays,
                   backend="emulator", gpu_name=gpu, stdout=io.StringIO(), source=(CORPUS / path).read_bytes(),
                   filename=path, check_races=True)

    try:
        on(kernel_.get("gpu_code") or "sm_90")
    except EmulatorError:
        raise
    except Exception as exc:   # a feature sm_90 lacks: run on the oldest target that has it
        found = re.search(r"requires (sm_\d+) or newer", str(exc))
        if not found:
            raise
        on(found.group(1))


# --- happens-before: what each wait orders ------------------------------------------------------

# threads 64..127 store their word of buf and arrive on mbarrier B; thread 0 alone completes a
# phase of mbarrier A; threads 0..63 wait on A, {wait_b}, then read word i + 64
CHAINED = BUF_WORDS + """
    @%p1 mbarrier.init.shared.b64 [mba], 1;
    @%p1 mbarrier.init.shared.b64 [mbb], 64;
    bar.sync 0;
    setp.lt.u32 %p3, %r0, 64;
    @%p3 bra CONSUMER;
    st.shared.u32 [%r6], %r0;
    mbarrier.arrive.shared.b64 %rd8, [mbb];
    bra DONE;
CONSUMER:
    @%p1 mbarrier.arrive.shared.b64 %rd9, [mba];
WAIT_A:
    mbarrier.try_wait.parity.shared.b64 %p4, [mba], 0;
    @!%p4 bra WAIT_A;
{wait_b}
    ld.shared.u32 %r3, [%r6+256];
    st.global.u32 [%rd7], %r3;
DONE:
"""
WAIT_B = """WAIT_B:
    mbarrier.try_wait.parity.shared.b64 %p5, [mbb], 0;
    @!%p5 bra WAIT_B;"""
MBARS = SHARED + "\n.shared .align 8 .b8 mba[8];\n.shared .align 8 .b8 mbb[8];"


def test_a_wait_on_one_mbarrier_does_not_order_what_another_publishes() -> None:
    """Both phases complete (A's before the consumers read, B's after the producers store), but only
    B's orders the stores before the loads: a consumer that waits on A alone races."""
    want = np.where(np.arange(N) < 64, np.arange(N) + 64, 0)
    np.testing.assert_array_equal(run(CHAINED.format(wait_b=WAIT_B), MBARS), want)
    msg = race(CHAINED.format(wait_b=""), MBARS)
    assert re.search(r"read-after-write\): thread 64 stored to shared address 0x100 at line \d+ "
                     r"'st.shared.u32 \[%r6\], %r0' and no mbarrier wait or barrier orders that store before this "
                     r"access by thread 0 at line \d+ 'ld.shared.u32 %r3, \[%r6\+256\]'", msg), msg


def test_cp_async_bytes_are_published_only_by_the_copying_threads_cp_async_arrive() -> None:
    """cp.async.mbarrier.arrive.noinc makes the phase wait for the thread's copies; a plain arrive
    does not, so the consumer may read bytes still in flight: the cp.async lands at wait_all, after
    the consumer released the stage, yet its write was under way since the issue."""
    want = np.where(np.arange(N) < 64, np.arange(N) + 64, 0)
    np.testing.assert_array_equal(run(cp_arrive(NOINC, after="cp.async.wait_all;"), MBARS), want)
    msg = race(cp_arrive("mbarrier.arrive.shared.b64 %rd8, [mbb];", after="cp.async.wait_all;"), MBARS)
    # the consumer reads bytes the copy has yet to land (shared memory starts undefined)
    assert re.search(r"read-after-write\): the cp.async at line \d+ 'cp.async.ca.shared.global \[%r6\], \[%rd3\], 4' "
                     r"writes shared address 0x100 and thread 0 loads it before the copy is complete", msg), msg



# threads 64..127 copy their word of `a` into buf by cp.async, {arrive}, then {producer}; threads 0..63
# {consumer}, read word i + 64 and release it on mbarrier A, which the copying threads wait on, then {after},
# before exiting (`cp_arrive`)
CP_ARRIVE = BUF_WORDS + """
    @%p1 mbarrier.init.shared.b64 [mba], 64;
    @%p1 mbarrier.init.shared.b64 [mbb], 64;
    st.global.u32 [%rd3], %r0;
    bar.sync 0;
    setp.lt.u32 %p3, %r0, 64;
    @%p3 bra CONSUMER;
    cp.async.ca.shared.global [%r6], [%rd3], 4;
    {arrive}
    {producer}
WAIT_A:
    mbarrier.try_wait.parity.shared.b64 %p4, [mba], 0;
    @!%p4 bra WAIT_A;
    {after}
    bra DONE;
CONSUMER:
    {consumer}
    ld.shared.u32 %r3, [%r6+256];
    mbarrier.arrive.shared.b64 %rd9, [mba];
    st.global.u32 [%rd7], %r3;
DONE:
"""


def cp_arrive(arrive: str, producer: str = "", consumer: str = WAIT_B, after: str = "") -> str:
    return CP_ARRIVE.format(arrive=arrive, producer=producer, consumer=consumer, after=after)


NOINC = "cp.async.mbarrier.arrive.noinc.shared.b64 [mbb];"
# without .noinc the arrive-on leaves the pending count as it is: the thread arrives as well
INC = "cp.async.mbarrier.arrive.shared.b64 [mbb];\n    mbarrier.arrive.shared.b64 %rd8, [mbb];"
IN_FLIGHT = (r"data race \(read-after-write\): the cp.async at line \d+ 'cp.async.ca.shared.global \[%r6\], "
             r"\[%rd3\], 4' writes shared address 0x{addr:x} and thread {t} loads it before the copy is complete")


@pytest.mark.parametrize("arrive", [NOINC, INC])
def test_a_consumer_may_read_what_only_a_cp_async_arrive_publishes(arrive: str) -> None:
    """The phase cp.async.mbarrier.arrive arrives in completes only after the thread's copies (its arrive-on
    fires then), so the consumers that wait for it read the copied words."""
    want = np.where(np.arange(N) < 64, np.arange(N) + 64, 0)
    body = cp_arrive(arrive)
    np.testing.assert_array_equal(run(body, MBARS), want)
    np.testing.assert_array_equal(run(body, MBARS, check=False), want)


@pytest.mark.parametrize("arrive", [NOINC, INC])
def test_reading_a_copy_tracked_by_a_cp_async_arrive_without_waiting_is_a_race(arrive: str) -> None:
    """The arrive is no wait: the copying thread itself reading its destination after it, or a consumer
    ordered after the copying threads by a CTA barrier instead of the mbarrier's phase, reads bytes the copy
    may not have written yet (the arrive-on fires when the copies complete, not when the thread issues it)."""
    own = cp_arrive(arrive=arrive, producer="ld.shared.u32 %r9, [%r6];", consumer=WAIT_B)
    msg = race(own, MBARS)
    assert re.search(IN_FLIGHT.format(addr=0x100, t=64), msg), msg
    barrier = cp_arrive(arrive=arrive, producer="bar.sync 1, 128;", consumer="bar.sync 1, 128;")
    msg = race(barrier, MBARS)
    assert re.search(IN_FLIGHT.format(addr=0x100, t=0), msg), msg
    # without the race checker the consumer sees the old (undefined) contents: the copies land later
    assert not (run(barrier, MBARS, check=False)[:64] == np.arange(64, 128)).all()


def test_overwriting_the_source_of_a_copy_in_flight_is_a_race() -> None:
    """A cp.async reads its source at some time before it completes: a store to it meanwhile, by the copying
    thread itself after its cp.async.mbarrier.arrive (no wait), races with the copy; after cp.async.wait_all it
    does not."""
    msg = race(cp_arrive(arrive=NOINC, producer="st.global.u32 [%rd3], %r0;", consumer=WAIT_B), MBARS)
    assert re.search(rf"data race \(write-after-read\): the cp.async at line \d+ 'cp.async.ca.shared.global "
                     rf"\[%r6\], \[%rd3\], 4' reads global address 0x{A0 + 4 * 64:x} and thread 64 stores to it "
                     r"before the copy is complete", msg), msg
    want = np.where(np.arange(N) < 64, np.arange(N) + 64, 0)
    np.testing.assert_array_equal(run(cp_arrive(arrive=NOINC, producer="cp.async.wait_all;\n    "
                                                       "st.global.u32 [%rd3], %r0;", consumer=WAIT_B), MBARS), want)


def test_a_thread_that_waited_for_its_tracked_copies_and_what_it_orders_after_see_them() -> None:
    """cp.async.wait_all completes the thread's copies whatever cp.async.mbarrier.arrive tracks them: the thread
    reads its own, and a CTA barrier after that publishes them (the mbarrier's waiters see them by its phase)."""
    want = np.where(np.arange(N) < 64, np.arange(N) + 64, 0)
    waited = "cp.async.wait_all;\n    ld.shared.u32 %r9, [%r6];"
    np.testing.assert_array_equal(run(cp_arrive(arrive=NOINC, producer=waited, consumer=WAIT_B), MBARS),
                                  want)
    np.testing.assert_array_equal(run(cp_arrive(arrive=NOINC, producer=waited + "\n    bar.sync 1, 128;",
                                                       consumer="bar.sync 1, 128;"), MBARS), want)


# thread 64 copies its word into buf and {arrive}s on mbarrier B (initialized with {count}); thread 0 arrives
# on B too, waits for B's first phase, reads thread 64's word and releases it on A
CP_ARRIVE_ORDER = BUF_WORDS + """
    @%p1 mbarrier.init.shared.b64 [mba], 1;
    @%p1 mbarrier.init.shared.b64 [mbb], {count};
    st.global.u32 [%rd3], %r0;
    bar.sync 0;
    setp.eq.u32 %p3, %r0, 64;
    @!%p3 bra OTHERS;
    cp.async.ca.shared.global [%r6], [%rd3], 4;
    {arrive}
WAIT_A:
    mbarrier.try_wait.parity.shared.b64 %p4, [mba], 0;
    @!%p4 bra WAIT_A;
    bra DONE;
OTHERS:
    @!%p1 bra DONE;
    mbarrier.arrive.shared.b64 %rd8, [mbb];
""" + WAIT_B + """
    ld.shared.u32 %r3, [%r6+256];
    mbarrier.arrive.shared.b64 %rd9, [mba];
    st.global.u32 [%rd7], %r3;
DONE:
"""


def test_which_phase_a_cp_async_arrive_completes_follows_the_copies_completion() -> None:
    """With .noinc, an mbarrier expecting one arrival may complete its first phase with thread 0's arrival,
    before thread 64's copy lands and its arrive-on fires (then in the next phase): thread 0 reads the copy
    unordered, even though thread 64 issued its cp.async.mbarrier.arrive first. Expecting both arrivals, or
    without .noinc (the pending count is incremented when it is issued, so the phase waits for the copy), the
    read is ordered."""
    want = np.where(np.arange(N) == 0, 64, 0)
    noinc = "cp.async.mbarrier.arrive.noinc.shared.b64 [mbb];"
    msg = race(CP_ARRIVE_ORDER.format(arrive=noinc, count=1), MBARS)
    assert re.search(IN_FLIGHT.format(addr=0x100, t=0), msg), msg
    np.testing.assert_array_equal(run(CP_ARRIVE_ORDER.format(arrive=noinc, count=2), MBARS), want)
    inc = "cp.async.mbarrier.arrive.shared.b64 [mbb];"
    np.testing.assert_array_equal(run(CP_ARRIVE_ORDER.format(arrive=inc, count=1), MBARS), want)


# thread 64 copies its word into buf, arrives on mbarrier B by cp.async.mbarrier.arrive.noinc, then waits on A;
# thread 0 arrives on A, {wait_b}, then invalidates B
CP_ARRIVE_INVAL = BUF_WORDS + """
    @%p1 mbarrier.init.shared.b64 [mba], 1;
    @%p1 mbarrier.init.shared.b64 [mbb], 1;
    st.global.u32 [%rd3], %r0;
    bar.sync 0;
    setp.eq.u32 %p3, %r0, 64;
    @!%p3 bra OTHERS;
    cp.async.ca.shared.global [%r6], [%rd3], 4;
    cp.async.mbarrier.arrive.noinc.shared.b64 [mbb];
WAIT_A:
    mbarrier.try_wait.parity.shared.b64 %p4, [mba], 0;
    @!%p4 bra WAIT_A;
    bra DONE;
OTHERS:
    @!%p1 bra DONE;
    mbarrier.arrive.shared.b64 %rd8, [mba];
    {wait_b}
    mbarrier.inval.shared.b64 [mbb];
DONE:
"""


# thread 64 copies its word into buf, arrives on B by cp.async.mbarrier.arrive.noinc, waits for B's phase and
# raises a flag in global memory; thread 0 spins on the flag, then waits for B and reads thread 64's word
CP_ARRIVE_SPIN = BUF_WORDS + """
    @%p1 mbarrier.init.shared.b64 [mbb], 1;
    st.global.u32 [%rd3], %r0;
    bar.sync 0;
    setp.eq.u32 %p3, %r0, 64;
    @!%p3 bra OTHERS;
    cp.async.ca.shared.global [%r6], [%rd3], 4;
    cp.async.mbarrier.arrive.noinc.shared.b64 [mbb];
""" + WAIT_B + """
    mov.u32 %r9, 1;
    st.volatile.global.u32 [%rd6+4], %r9;
    bra DONE;
OTHERS:
    @!%p1 bra DONE;
SPIN:
    ld.volatile.global.u32 %r9, [%rd6+4];
    setp.eq.u32 %p6, %r9, 0;
    @%p6 bra SPIN;
""" + WAIT_B.replace("WAIT_B", "WAIT_B2") + """
    ld.shared.u32 %r3, [%r6+256];
    st.global.u32 [%rd7], %r3;
DONE:
"""


def test_copies_a_waiting_thread_needs_land_while_another_thread_spins() -> None:
    """The copies a cp.async.mbarrier.arrive tracks land once only waiting threads and spinning ones are left:
    the spinning thread waits for a flag that the waiting thread raises after the phase."""
    out = run(CP_ARRIVE_SPIN, MBARS)
    assert out[0] == 64 and out[1] == 1


def test_invalidating_an_mbarrier_a_cp_async_arrive_on_may_still_reach_is_reported() -> None:
    """The arrive-on of cp.async.mbarrier.arrive comes when the thread's copies complete: an mbarrier.inval that
    no wait for its phase orders after it may come first (the PTX ISA leaves that undefined)."""
    with pytest.raises(EmulatorError, match=r"mbarrier.inval of the mbarrier at shared address 0x208 while the "
                       r"arrive-on of thread 64's cp.async.mbarrier.arrive at line \d+ "
                       r"'cp.async.mbarrier.arrive.noinc.shared.b64 \[mbb\]' still waits for its copies"):
        run(CP_ARRIVE_INVAL.format(wait_b=""), MBARS)
    run(CP_ARRIVE_INVAL.format(wait_b=WAIT_B), MBARS)


def _recorded(body: str, extra: str) -> list[bool]:
    """redundancy.Recorder.needed of the kernel's run with the race checker on: for each wait it ran, in the
    order of the PTX, whether one of its executions ordered anything new."""
    from tileiras.emulator import redundancy

    with redundancy.recording() as rec:
        run(body, extra)
    return [rec.needed[line] for line in sorted(rec.needed)]


def test_a_copy_wait_orders_nothing_new_only_where_the_threads_saw_their_copies_arrivals_complete() -> None:
    """The copying threads' cp.async.wait_all has nothing to wait for once each has seen the phase its
    cp.async.mbarrier.arrive arrived in complete (the arrive-on fires only after the thread's copies); a thread
    that only waited for the consumers' release has not (the phase may be complete, but it did not see it)."""
    arrive = "cp.async.mbarrier.arrive.noinc.shared.b64 [mbb];"
    # the copiers' wait on A, their wait_all, the consumers' wait on B
    assert _recorded(cp_arrive(after="cp.async.wait_all;", arrive=arrive), MBARS) == [True, True, True]
    seen_b = arrive + """
WAIT_B2:
    mbarrier.try_wait.parity.shared.b64 %p6, [mbb], 0;
    @!%p6 bra WAIT_B2;"""
    # the copiers' waits on B and A, their wait_all, the consumers' wait on B (an mbarrier that cp.async
    # arrivals complete orders their bytes by its phase: a wait on it is never taken as redundant)
    assert _recorded(cp_arrive(after="cp.async.wait_all;", arrive=seen_b), MBARS) == [True, True, False, True]


def test_an_mbarrier_wait_orders_nothing_new_only_where_its_phase_is_known_already() -> None:
    """The consumers' first wait on B acquires the producers' stores; a second wait on the same phase finds
    every clock released into it known already."""
    twice = WAIT_B + "\n" + WAIT_B.replace("WAIT_B", "WAIT_B2").replace("%p5", "%p6")
    # the wait on A (thread 0's phase: new to the other consumers), the two waits on B
    assert _recorded(CHAINED.format(wait_b=twice), MBARS) == [True, True, False]



# every thread stores its word of buf and arrives on A (128 arrivals); thread 0 waits for A and arrives on B, which
# every thread waits for: B's phase orders every store before every thread; then {before}, bar.sync 1, {after},
# and each thread reads the next thread's word
HANDED = BUF_WORDS + """
    @%p1 mbarrier.init.shared.b64 [mba], 128;
    @%p1 mbarrier.init.shared.b64 [mbb], 1;
    bar.sync 0;
    st.shared.u32 [%r6], %r0;
    mbarrier.arrive.shared.b64 %rd8, [mba];
    @!%p1 bra WAIT_B;
WAIT_A:
    mbarrier.try_wait.parity.shared.b64 %p4, [mba], 0;
    @!%p4 bra WAIT_A;
    mbarrier.arrive.shared.b64 %rd9, [mbb];
""" + WAIT_B + """
    {before}
    {barrier}
    {after}
    ld.shared.u32 %r3, [%r8];
    st.global.u32 [%rd7], %r3;
"""
SPLIT_BARRIER = """setp.lt.u32 %p3, %r0, 64;
    @%p3 bra LOW;
    bar.sync 1;
    bra MET;
LOW:
    bar.sync 1;
MET:"""


def _barriers_redundant(body: str, extra: str) -> list[bool]:
    """redundancy.Recorder.redundant of each barrier the kernel's run (race checker on) met, in PTX order."""
    from tileiras.emulator import redundancy

    with redundancy.recording() as rec:
        run(body, extra)
    return [rec.redundant(line) for line in sorted(rec.barriers)]


def handed(before: str = "", after: str = "", barrier: str = "bar.sync 1;") -> str:
    return HANDED.format(before=before, after=after, barrier=barrier)


def test_a_barrier_orders_nothing_new_only_where_its_threads_know_every_event_it_joins() -> None:
    """After B's phase every thread knows every store, and since its arrival on A (its last release) it only
    waited on B: bar.sync 1 orders nothing new, and deleting it changes nothing. It orders something where a
    thread stores again before it (the neighbour's read needs it), where thread 0 invalidates B after it (the
    others' waits on B must come first), and where its instance is met at two lines (deleting one re-pairs)."""
    want = (np.arange(N) + 1) % N
    assert _barriers_redundant(handed(), MBARS) == [False, True]
    np.testing.assert_array_equal(run(handed(barrier=""), MBARS), want)
    again = "st.shared.u32 [%r6], %r2;"
    assert _barriers_redundant(handed(before=again), MBARS) == [False, False]
    assert "read-after-write" in race(handed(before=again, barrier=""), MBARS)
    inval = "@%p1 mbarrier.inval.shared.b64 [mbb];"
    assert _barriers_redundant(handed(after=inval), MBARS) == [False, False]
    assert "is not ordered before the inval" in race(handed(after=inval, barrier=""), MBARS)
    assert _barriers_redundant(handed(barrier=SPLIT_BARRIER), MBARS) == [False, False, False]


# warp 0 writes 4 columns of its 32 tensor-memory lanes and arrives on an mbarrier; warp 4 (the same
# lane quarter) waits for it and reads them back; warps 1-3 only allocate/free around them
TMEM = """
.version 8.7
.target sm_100a
.address_size 64
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b32 %v<8>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b32 slot;
    .shared .align 8 .b64 mb;
    ld.param.u64 %rd1, [out];
    mov.u32 %r0, %tid.x;
    shr.u32 %r1, %r0, 5;
    setp.eq.u32 %p1, %r1, 0;
    setp.eq.u32 %p2, %r0, 0;
    @%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [slot], 32;
    @%p2 mbarrier.init.shared.b64 [mb], 32;
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    ld.shared.b32 %r2, [slot];
    and.b32 %r3, %r1, 3;
    shl.b32 %r3, %r3, 21;
    add.u32 %r3, %r3, %r2;
    setp.eq.u32 %p3, %r1, 4;
    @%p3 bra READER;
    @!%p1 bra DONE;
    add.u32 %v0, %r0, 1;
    add.u32 %v1, %r0, 2;
    add.u32 %v2, %r0, 3;
    add.u32 %v3, %r0, 4;
    tcgen05.st.sync.aligned.32x32b.x4.b32 [%r3], {{%v0, %v1, %v2, %v3}};
    {wait_st}
    tcgen05.fence::before_thread_sync;
    mbarrier.arrive.shared.b64 %rd2, [mb];
    bra DONE;
READER:
    {wait}
    tcgen05.fence::after_thread_sync;
    tcgen05.ld.sync.aligned.32x32b.x4.b32 {{%v4, %v5, %v6, %v7}}, [%r3];
    tcgen05.wait::ld.sync.aligned;
    sub.u32 %r4, %r0, 128;
    mul.wide.u32 %rd3, %r4, 16;
    add.s64 %rd4, %rd1, %rd3;
    st.global.v4.u32 [%rd4], {{%v4, %v5, %v6, %v7}};
DONE:
    tcgen05.fence::before_thread_sync;
    bar.sync 0;
    tcgen05.fence::after_thread_sync;
    @%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r2, 32;
    ret;
}}
"""
TMEM_WAIT = """WAIT:
    mbarrier.try_wait.parity.shared.b64 %p4, [mb], 0;
    @!%p4 bra WAIT;"""
WAIT_ST = "tcgen05.wait::st.sync.aligned;"


def _tmem(wait: str = TMEM_WAIT, wait_st: str = WAIT_ST) -> np.ndarray:
    (out,), _ = emulate(TMEM.format(wait=wait, wait_st=wait_st), "k", 1, 160, [np.zeros((32, 4), np.uint32)],
                        check_races=True)
    return out


def test_tensor_memory_written_by_one_warp_and_read_by_another_needs_the_wait() -> None:
    np.testing.assert_array_equal(_tmem(), np.arange(32)[:, None] + np.arange(1, 5))
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(read-after-write\): the tcgen05.ld by "
                       r"thread 128 accesses lane 0 column 0, but thread 0 wrote it at line \d+ 'tcgen05.st.sync"
                       r".aligned.32x32b.x4.b32 .*' and no mbarrier wait or barrier orders that access"):
        _tmem(wait="")
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(read-after-write\): .* thread 0's write "
                       r"of it by the instruction at line \d+ 'tcgen05.st.* may still be in flight"):
        _tmem(wait_st="")


def _tcgen05_run(monkeypatch, edit, **kw) -> None:
    """test_emulator_async_tcgen05's MMA kernel (thread 0 issues the MMAs and commits them to an
    mbarrier every thread waits on before reading its accumulator quarter), edited by `edit`."""
    sys.path.insert(0, str(ROOT / "tests"))
    import test_emulator_async_tcgen05 as t5

    real = t5.kernel
    monkeypatch.setattr(t5, "kernel", lambda *a, **k: edit(real(*a, **k)))
    got, want = t5.run("f16", "f16", 16, **kw)
    np.testing.assert_array_equal(got, want)


MMA_WAIT = """WAIT:
    mbarrier.try_wait.parity.shared.b64 %p5, [bar], 0;
    @!%p5 bra WAIT;
    tcgen05.fence::after_thread_sync;"""
COMMIT = "@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [bar];"
# each warp overwrites its quarter of the MMA's A operand (copied into tensor memory by tcgen05.cp)
OVERWRITE_A = ("\n    add.u32 %r25, %r24, %r21;\n    tcgen05.st.sync.aligned.32x32b.x1.b32 [%r25], %r0;"
               "\n    tcgen05.wait::st.sync.aligned;")


def test_the_accumulator_is_read_only_after_the_commits_mbarrier(monkeypatch) -> None:
    """tcgen05.mma writes its accumulator asynchronously: the warps reading it, the issuing thread
    included, must wait for the mbarrier its tcgen05.commit arrives on."""
    _tcgen05_run(monkeypatch, lambda ptx: ptx)
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(read-after-write\): the tcgen05.ld by "
                       r"thread 0 accesses lane 0 column 0, but the tcgen05 operations of thread 0 wrote it at line "
                       r"\d+ '@%p1 tcgen05.mma"):
        _tcgen05_run(monkeypatch, lambda ptx: ptx.replace(MMA_WAIT, ""))
    # a CTA barrier after the commit orders the issue, not the MMA's completion
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(read-after-write\): the tcgen05.ld by "
                       r"thread 0 accesses lane 0 column 0, but the tcgen05 operations of thread 0 wrote it"):
        _tcgen05_run(monkeypatch, lambda ptx: ptx.replace(MMA_WAIT, "bar.sync 0;"))


def test_an_mma_operand_in_tensor_memory_is_overwritten_only_after_the_mma_completed(monkeypatch) -> None:
    """A softmax warp writing the next P into tensor memory while the MMA may still read the last one
    races; after the commit's mbarrier wait it does not."""
    _tcgen05_run(monkeypatch, lambda ptx: ptx.replace(MMA_WAIT, MMA_WAIT + OVERWRITE_A), a_from_tmem=True)
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(write-after-read\): the tcgen05.st by "
                       r"thread 0 accesses lane 0 column 128, but thread 0's read of it by the instruction at line "
                       r"\d+ '@%p1 tcgen05.mma.* may still be in flight"):
        _tcgen05_run(monkeypatch, lambda ptx: ptx.replace(COMMIT, OVERWRITE_A + "\n    " + COMMIT),
                     a_from_tmem=True)


def test_the_mma_warp_skipping_the_tf32_rounding_wait_is_reported(monkeypatch) -> None:
    """sm_100 tf32: the epilogue warps round each stage in place and arrive on its `ready` mbarrier;
    the MMA warp waits on the stage's `full` (the TMA's) and on `ready`. Without the second wait its
    tcgen05.mma reads the stage unordered with the rounding stores (the old checker let the completed
    `full` phase stand in for it)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from emulator_runs import edit_ptx, emulate, without_wait
    from tileiras.frontend import load_module

    data = (ROOT / "tests" / "realistic" / "bytecode" / "mm_tf32_64x64x32.tileirbc").read_bytes()
    module = load_module(data, "mm_tf32_64x64x32.tileirbc")
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((64, 160)).astype(np.float32), rng.standard_normal((160, 64)).astype(np.float32),
            np.zeros((64, 64), np.float32)]
    edit_ptx(monkeypatch, without_wait("stage prepared"))
    with pytest.raises(EmulatorError, match=r"data race \(write-after-read\): the store at line \d+ overwrites shared "
                       r"address 0x[0-9a-f]+, but the tcgen05 operations of thread 160 read it at line \d+ "
                       r"'tcgen05.mma.cta_group::1.kind::tf32"):
        emulate(module, args, "sm_100")


@pytest.mark.sweep      # (3 s; the hand-written kernels above check the same by default)
def test_attention_reading_its_scores_before_the_mmas_commit_is_reported(monkeypatch) -> None:
    """sm_100 attention (every warp reads S from tensor memory after thread 0's MMAs): without the
    `mma complete` waits the tcgen05.ld of S is unordered with the MMAs writing it. The emulator
    computes each MMA when issued, so the results still match: only the tensor-memory tracking
    reports it."""
    sys.path.insert(0, str(ROOT / "tests"))
    from emulator_runs import edit_ptx, without_wait
    from test_realistic_emulator import _check

    edit_ptx(monkeypatch, without_wait("mma complete"))
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(read-after-write\): the tcgen05.ld by "
                       r"thread \d+ accesses lane \d+ column \d+, but the tcgen05 operations of thread \d+ wrote "
                       r"it at line \d+ 'tcgen05.mma"):
        _check("fa_f16_q128k64d64", "sm_100")


def test_the_block_scaled_producer_arriving_without_its_cp_async_is_reported(monkeypatch) -> None:
    """sm_100 mxfp8 128x128x128: the producer warp's lanes copy A's scale rows by cp.async into the stage
    the TMA boxes fill, and arrive on the stage's full mbarrier by cp.async.mbarrier.arrive.noinc; a plain
    mbarrier.arrive there lets the MMA warp's tcgen05.cp read scale bytes the copies may not have written."""
    sys.path.insert(0, str(ROOT / "tests"))
    from emulator_runs import edit_ptx
    from test_blockscale_lowering import _inputs, _kernel, _module
    from emulator_runs import emulate as run_module

    def plain_arrive(ptx: str) -> str:
        out, n = re.subn(r"cp\.async\.mbarrier\.arrive\.noinc\.shared::cta\.b64 \[(%r\d+)\];",
                         r"mbarrier.arrive.shared::cta.b64 _, [\1];", ptx)
        assert n == 1 and "tcgen05.cp" in out
        return out

    edit_ptx(monkeypatch, plain_arrive)
    a, sa, b, sb = _inputs(128, 128, 256)
    with pytest.raises(EmulatorError, match=r"data race \((read|write)-after-(read|write)\): .*'cp\.async\.ca\.shared"):
        run_module(_module(_kernel(128, 128, 128)), [a, sa, b, sb, np.zeros((128, 128), np.float32)], "sm_100")
