"""The resource model: which rows each target family has, and what a tile op reserves on them."""

from __future__ import annotations

import pytest

from tileiras.schedule import resources as rs
from tileiras.schedule.resources import Reservation


@pytest.mark.parametrize("sm, family", [(80, "sm_80"), (86, "sm_80"), (89, "sm_80"), (90, "sm_90"),
                                        (100, "sm_100"), (103, "sm_100"), (120, "sm_120"), (121, "sm_120")])
def test_every_target_has_its_family(sm, family) -> None:
    assert rs.family_of(sm).name == family


def test_the_families_rows_follow_the_hardware() -> None:
    f80, f90, f100, f120 = (rs.FAMILIES[n] for n in ("sm_80", "sm_90", "sm_100", "sm_120"))
    assert (rs.TMA in f80.units, rs.TMEM in f80.units, f80.tensor_unit) == (False, False, rs.MMA_SYNC)
    assert (f90.has_tma, rs.TMEM in f90.units, f90.tensor_unit) == (True, False, rs.WGMMA)
    assert (f100.has_tma, rs.TMEM in f100.units, f100.tensor_unit, f100.tmem_bytes) == (True, True, rs.TCGEN05,
                                                                                        256 * 1024)
    assert (f120.has_tma, rs.TMEM in f120.units, f120.tensor_unit, f120.tmem_bytes) == (True, False, rs.MMA_SYNC, 0)
    # peak dense FP16 tensor rate per SM per clock doubles A100 -> H100 -> B200
    assert [f.fma_per_clk[f.tensor_unit]["f16"] for f in (f80, f90, f100)] == [1024, 2048, 4096]
    assert rs.machine(90).capacities == {unit: 1 for unit in f90.units}


@pytest.mark.parametrize("sm, smem", [(80, 166912), (86, 101376), (90, 232448), (100, 232448), (120, 101376)])
def test_shared_memory_capacity_is_the_opt_in_limit(sm, smem) -> None:
    assert rs.machine(sm).smem_bytes == smem


def test_an_mma_holds_its_tensor_unit_and_reads_shared_memory() -> None:
    fmas, operands = 128 * 128 * 64, 2 * 128 * 64 * 2
    sync = rs.machine(80).mma(rs.MMA_SYNC, "f16", fmas, operands)
    # 1M FMAs at 1024 a clock; each operand read by two warps (ldmatrix) at 128 B a clock
    assert sync.latency == 1024 + 32
    assert sync.reservations == (Reservation("mma.sync", 0, 1024), Reservation("smem_rd", 0, 512),
                                 Reservation("issue", 0, 128))
    wg = rs.machine(90).mma(rs.WGMMA, "f16", fmas, operands)
    assert wg.latency == 512 + 64
    assert wg.reservations == (Reservation("wgmma", 0, 512), Reservation("smem_rd", 0, 256))
    tc = rs.machine(100).mma(rs.TCGEN05, "f8", fmas, operands)
    assert tc.reservations == (Reservation("tcgen05", 0, 128), Reservation("smem_rd", 0, 256),
                               Reservation("tmem", 0, 128))
    # a unit the family lacks falls back to the warp-level path
    assert rs.machine(80).mma(rs.WGMMA, "tf32", fmas, operands).reservations[0] == Reservation("mma.sync", 0, 2048)


def test_copies_land_after_the_memory_latency() -> None:
    cp = rs.machine(80).copy_async(16384)
    # 16 KB at 47 B a clock from L2; written into shared memory once it lands, 600 cycles in
    assert cp.latency == 600 + 349
    assert cp.reservations == (Reservation("issue", 0, 8), Reservation("lsu", 0, 349),   # 32 warp copies
                               Reservation("smem_wr", 600, 128))
    tma = rs.machine(90).copy_async(16384, tma=True)
    assert tma.op_class == "copy_tma" and tma.latency == 650 + 256
    assert tma.reservations == (Reservation("tma", 0, 256), Reservation("smem_wr", 650, 128))


def test_elementwise_ops_use_the_alu_or_the_special_function_unit() -> None:
    m = rs.machine(80)
    assert m.elementwise(8192) == rs.Footprint("alu", 128 + 4, (Reservation("alu", 0, 128), Reservation("issue", 0, 64)))
    assert m.elementwise(8192, special=True).reservations[0] == Reservation("xu", 0, 512)
    assert m.reduce(8192).latency == 128 + rs.REDUCE_LATENCY
    assert m.free() == rs.Footprint("free", 0)



@pytest.mark.parametrize("sm, unit", [("sm_80", "mma.sync"), ("sm_90", "wgmma"), ("sm_100", "tcgen05")])
def test_a_loops_mma_reserves_the_unit_its_lowering_uses(monkeypatch, sm: str, unit: str) -> None:
    """The scheduler costs each mma on the tensor-core unit its lowering picked (wgmma on sm_90,
    tcgen05 on sm_100), not on mma.sync: the unit decides ResMII and so the stage count."""
    from pathlib import Path

    from tileiras.bytecode.reader import read_module
    from tileiras.lowering.pipeline import lower_module
    from tileiras.schedule import ddg, pipeline

    reserved: list[str] = []
    real = ddg.footprint_of

    def spy(op, machine, copied=frozenset(), mma_units=None, tma=False):
        fp = real(op, machine, copied, mma_units, tma)
        if op.name in ddg._MMA:
            reserved.extend(r.unit for r in fp.reservations if r.unit in (rs.MMA_SYNC, rs.WGMMA, rs.TCGEN05))
        return fp

    monkeypatch.setattr(ddg, "footprint_of", spy)
    name = "mm_f16_128x128x64"
    path = Path(__file__).parent / "realistic" / "bytecode" / f"{name}.tileirbc"
    lower_module(read_module(path.read_bytes(), name), sm)
    assert pipeline.build_loop_ddg is ddg.build_loop_ddg and reserved and set(reserved) == {unit}
