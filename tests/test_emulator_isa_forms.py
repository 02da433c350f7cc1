"""The PTX ISA's forms on the emulator: an instruction the module's .target does not have, or modifiers
in an order the ISA does not write, are errors when the PTX is decoded (ptxas refuses them too)."""

from __future__ import annotations

import pytest

from tileiras.emulator import EmulatorError, load_program


def ptx(target: str, body: str) -> str:
    return f"""
.version 8.7
.target {target}
.address_size 64
.visible .entry k()
{{
    .reg .b32 %r<8>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<4>;
{body}
    ret;
}}
"""


MMA = ("    mma.sync.aligned.m16n8k16.{layouts}.f32.f16.f16.f32 {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, "
       "{{%r4, %r5}}, {{%f4, %f5, %f6, %f7}};")


@pytest.mark.parametrize("target, body, need", [
    ("sm_80", "    wgmma.fence.sync.aligned;", "sm_90a"),
    ("sm_90", "    wgmma.fence.sync.aligned;", "sm_90a"),
    ("sm_100a", "    wgmma.fence.sync.aligned;", "sm_90a"),
    ("sm_90a", "    tcgen05.fence::before_thread_sync;", "sm_100a or sm_101a or sm_103a or sm_110a"),
    ("sm_100", "    tcgen05.fence::before_thread_sync;", "sm_100a"),
    ("sm_80", "    setmaxnreg.dec.sync.aligned.u32 40;", "sm_90a or newer"),
    ("sm_80", "    fence.proxy.async.shared::cta;", "sm_90 or newer"),
    ("sm_75", MMA.format(layouts="row.col").replace("m16n8k16", "m16n8k16") + "\n    cp.async.commit_group;",
     "sm_80 or newer"),
])
def test_an_instruction_newer_than_the_target_is_refused(target, body, need) -> None:
    with pytest.raises(EmulatorError, match=f"needs .target {need}.*the module says .target {target}"):
        load_program(ptx(target, body), "k")


@pytest.mark.parametrize("target, body", [
    ("sm_90a", "    wgmma.fence.sync.aligned;"),
    ("sm_100a", "    tcgen05.fence::before_thread_sync;"),
    ("sm_100f", "    tcgen05.fence::before_thread_sync;"),
    ("sm_100a", "    setmaxnreg.dec.sync.aligned.u32 40;"),
    ("sm_80", MMA.format(layouts="row.col")),
])
def test_instructions_the_target_has_decode(target, body) -> None:
    load_program(ptx(target, body), "k")


@pytest.mark.parametrize("layouts", ["col.row", "row.row", "col.col"])
def test_mma_m16n8k16_takes_only_row_col(layouts) -> None:
    with pytest.raises(EmulatorError, match=r"m16n8k16 takes the layouts .row.col"):
        load_program(ptx("sm_80", MMA.format(layouts=layouts)), "k")


def test_wgmma_modifiers_in_another_order_are_refused() -> None:
    body = ("    wgmma.mma_async.aligned.sync.m64n8k16.f32.f16.f16 {%f0, %f1, %f2, %f3}, %rd1, %rd2, 1, 1, 1, 0, 0;")
    with pytest.raises(EmulatorError, match=r"wgmma.mma_async.sync.aligned.shape.dtype.atype.btype is the order"):
        load_program(ptx("sm_90a", body), "k")
