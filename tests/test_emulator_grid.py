"""Blocks of a grid on the emulator: two run at once (so one can wait for another), the race checker
is on by default and sees races between blocks on global memory, and it can be turned off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tileiras.emulator import EmulatorError, Memory, run_ptx

ROOT = Path(__file__).resolve().parent.parent

# block 1's thread 0 writes a[1] = 42 and then raises the flag a[0]; block 0's thread 0 waits for the
# flag and copies a[1] to out[0]. {flag_store} and {flag_load} are the flag's accesses.
HANDSHAKE = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 a, .param .u64 out)
{{
    .reg .pred %p<8>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [out];
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra DONE;
    mov.u32 %r1, %ctaid.x;
    setp.eq.u32 %p2, %r1, 0;
    @%p2 bra CONSUMER;
    st.global.u32 [%rd1+4], 42;
    {flag_store}
    bra.uni DONE;
CONSUMER:
    {flag_load}
    setp.eq.u32 %p3, %r2, 0;
    @%p3 bra CONSUMER;
    ld.global.u32 %r3, [%rd1+4];
    st.global.u32 [%rd2], %r3;
DONE:
    ret;
}}
"""
RELEASE = "st.release.gpu.global.u32 [%rd1], 1;"
ACQUIRE = "ld.acquire.gpu.global.u32 %r2, [%rd1];"


def handshake(flag_store: str, flag_load: str, **kw: object) -> int:
    mem = Memory()
    a, out = mem.alloc(8), mem.alloc(4)
    mem.write(a, bytes(8))
    run_ptx(HANDSHAKE.format(flag_store=flag_store, flag_load=flag_load), "k", (2, 1, 1), (32, 1, 1), [a, out],
            mem, max_warp_instructions=200_000, **kw)
    return int(np.frombuffer(mem.read(out, 4), np.uint32)[0])


def test_a_block_waiting_for_a_later_block_gets_its_data() -> None:
    # block 0 spins until block 1 raises the flag: it finishes only if both run at once
    assert handshake(RELEASE, ACQUIRE) == 42


def test_a_flag_without_release_and_acquire_is_a_race_between_blocks() -> None:
    with pytest.raises(EmulatorError, match=r"data race between CTAs \(read-after-write\): block \(1,0,0\)"):
        handshake("st.global.u32 [%rd1], 1;", "ld.volatile.global.u32 %r2, [%rd1];")


def test_the_race_checker_is_on_by_default_and_can_be_turned_off() -> None:
    with pytest.raises(EmulatorError, match="data race between CTAs"):
        handshake("st.global.u32 [%rd1], 1;", "ld.volatile.global.u32 %r2, [%rd1];")
    assert handshake("st.global.u32 [%rd1], 1;", "ld.volatile.global.u32 %r2, [%rd1];", check_races=False) == 42
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import tileiras.emulator.executor as e; "
              "print(e.CHECK_RACES)")
    for value, want in (("0", "False"), ("1", "True"), (None, "True")):
        env = {k: v for k, v in os.environ.items() if k != "TILEIRAS_EMULATOR_CHECK_RACES"}
        if value is not None:
            env["TILEIRAS_EMULATOR_CHECK_RACES"] = value
        got = subprocess.run([sys.executable, "-c", script, str(ROOT)], capture_output=True, text=True, env=env)
        assert got.stdout.strip() == want, got.stderr
