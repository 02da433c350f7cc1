"""Named-barrier binding: ids 1..15 (0 is __syncthreads), fresh ids first, reuse only across
disjoint lifetimes, a clear error when more uses are live at once than ids; and the ids the
sm_90 warp-specialized kernels use come from that binding (PTX, IR dump, remarks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tileiras.schedule.named_barriers import BarrierUse, NamedBarrierError, bind

BYTECODE = Path(__file__).resolve().parent / "realistic" / "bytecode"


def test_uses_live_together_get_distinct_ids_never_zero() -> None:
    got = bind([BarrierUse("consumers", 256, (0, 20)), BarrierUse("publish", 384, (7, 8))])
    assert [(b.name, b.id, b.threads) for b in got] == [("consumers", 1, 256), ("publish", 2, 384)]


def test_fresh_ids_come_first_then_the_lowest_disjoint_one() -> None:
    uses = [BarrierUse("u0", 128, (0, 20))] + [BarrierUse(f"u{i}", 128, (0, 10)) for i in range(1, 14)]
    uses += [BarrierUse("early", 128, (10, 12)), BarrierUse("late", 128, (12, 14))]
    got = bind(uses)
    assert [b.id for b in got[:15]] == list(range(1, 16))          # disjoint or not, fresh ids first
    assert got[15].id == 2                                         # u0 (id 1) still lives; u1 died at 10
    assert bind(uses[:15] + [BarrierUse("after", 64, (20, 30))])[15].id == 1


def test_more_live_uses_than_ids_fail_with_a_diagnostic() -> None:
    uses = [BarrierUse(f"u{i}", 128, (0, 10)) for i in range(15)]
    with pytest.raises(NamedBarrierError, match="fails to assign named barrier 'extra'"):
        bind(uses + [BarrierUse("extra", 128, (9, 11))])
    assert bind(uses + [BarrierUse("extra", 128, (10, 11))])[-1].id == 1


@pytest.mark.parametrize("threads", [0, 100])
def test_thread_counts_are_whole_warps(threads: int) -> None:
    with pytest.raises(NamedBarrierError, match="multiple of 32"):
        bind([BarrierUse("bad", threads, (0, 1))])


@pytest.mark.parametrize("name,consumers", [("mm_f16_128x128x64", 128), ("mm_f16_128x256x64", 256)])
def test_warp_specialized_kernels_sync_on_the_bound_ids(monkeypatch, name: str, consumers: int) -> None:
    """The consumers' CTA barriers and the one meeting with the producer use the ids bound for
    them; the binding is in the IR dump and in the warp-roles remark."""
    import contextlib
    import io

    from tileiras.bytecode.reader import read_module
    from tileiras import remarks
    from tileiras.tileas import warp_roles
    from tileiras.lowering.pipeline import lower_module

    chosen = []
    real = warp_roles.bind
    monkeypatch.setattr(warp_roles, "bind", lambda uses: chosen.append(real(uses)) or chosen[-1])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        ir, _ = lower_module(read_module((BYTECODE / f"{name}.tileirbc").read_bytes(), name), "sm_90",
                             print_ir_after_all=True)
    (barriers,) = chosen
    ids = {b.name: (b.id, b.threads) for b in barriers}
    assert ids == {"consumers": (1, consumers), "publish": (2, consumers + 128)}
    used = set(re.findall(r"bar\.sync (\d+), (\d+);", ir))
    assert used == {(str(i), str(t)) for i, t in ids.values()}
    assert "named barriers (bound from the warp roles' lifetimes): consumers: bar.sync 1" in err.getvalue()
