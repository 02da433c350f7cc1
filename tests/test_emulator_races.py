"""The emulator's opt-in data-race checker (`run_ptx(..., check_races=True)`).

Hand-written kernels in which thread i touches a[i] and its neighbour a[(i+1) % n]:
with a barrier between the accesses nothing is reported; without one, read-after-write,
write-after-write and write-after-read races are, naming both threads. Then every corpus
case runs in checking mode.
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


def test_races_between_ctas_are_not_reported() -> None:
    # CTA c stores a[(i + 2c) % n]: the CTAs' stores and loads overlap, each CTA's own do not
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
    sys.path.insert(0, str(CORPUS))
    import reference

    cases = []
    for kernel_, entry, case in reference.iter_cases(reference.load_manifest()):
        ident = f"{entry['symbol']}-{case['name']}-{kernel_.get('gpu_code') or 'sm_90'}"
        cases.append(pytest.param(kernel_, entry, case, id=ident))
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
