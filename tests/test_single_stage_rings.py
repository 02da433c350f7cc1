"""A ring of one stage, where two do not fit (schedule/buffers.assign's `least`, tileas/stage_rings.fit).

* Under an occupancy hint, a ring whose two stages pass the hint's share of an SM takes one stage in it, so
  the CTAs the hint asks for fit the SM and overlap each other's copies (NVIDIA's keeps such kernels in the
  share too: a bf16 bmm 128 x 64 x 128 at occupancy 2 in 41 KB on sm_120, where ours took 97 KB in two stages
  and one CTA an SM). Where the kernel passes the share all the same, it is planned again without narrowing
  (tileas/shared_choice.choose).
* Without a hint, a ring a copy engine fills with mbarriers (TMA, cp.async beside it) takes one stage rather
  than none: the copies, the producer warp and its register budgets stay (sm_120's attention of d = 128, whose
  two 64 KB stages do not fit beside Q). A ring of cp.async groups stays unpipelined: one stage would only
  hold its tiles longer.
* One stage is refilled only after every thread has read it: the cp.async form's CTA barrier before the
  refill and the producer's wait on the stage's empty mbarrier are what keep it correct; the emulator's race
  checker reports either one missing.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tileiras.schedule.buffers import PipelinedValue, assign, barriers

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "generated"), str(ROOT / "tests" / "realistic")]

from pipeline_dump_support import dump, pipelines  # noqa: E402
REALISTIC = ROOT / "tests" / "realistic" / "bytecode"
TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"
SM80_SHARE = 166912 // 2 - 1024     # an occupancy hint of 2 on sm_80: half the SM less the driver's reserve


def test_one_stage_fits_where_the_caller_allows_it() -> None:
    value = PipelinedValue("a", 40_000, 0, 100)
    assert assign([value], 50, 0, 60_000, "cp.async", 8).stages == 0      # two stages or none
    one = assign([value], 50, 0, 60_000, "cp.async", 8, least=1)
    assert one.stages == 1 and one.nbytes == 40_000 and "1 fit" in one.reason
    assert barriers("cp.async", 1).wait_pending == 0     # cp.async.wait_group 0: the one stage waited for at once


def _dynamic(text: str) -> int:
    return int(re.search(r"(\d+) bytes of dynamic shared memory", text).group(1))  # type: ignore[union-attr]


def test_a_ring_takes_one_stage_to_stay_in_the_occupancy_hints_share(tmp_path: Path) -> None:
    """TileGym's MLA prefill at occupancy 2 on sm_80: its two loops' three stages took 155 KB (one CTA an
    SM); one stage each keeps it in half the SM."""
    text = dump(TILEGYM / "tg_mla_prefill_bf16_g1_64x64_occ2.tileirbc", "sm_80", tmp_path)
    assert [stages for stages, _ in pipelines(text)] == [1, 1]
    assert _dynamic(text) <= SM80_SHARE


def test_a_copy_engines_ring_takes_one_stage_where_two_do_not_fit(tmp_path: Path) -> None:
    """sm_120, no hint: an f16 attention of d = 128 (two 64 KB stages do not fit beside Q in 99 KB) copies
    K and V by TMA from a producer warp into one stage, where it loaded them unpipelined."""
    (stages, line), = pipelines(dump(REALISTIC / "fa_f16_q128k128d128.tileirbc", "sm_120", tmp_path))
    assert stages == 1 and line.startswith("TMA pipeline") and "warp-specialized" in line


def test_a_ring_of_cp_async_groups_stays_unpipelined_without_a_hint(tmp_path: Path) -> None:
    """sm_80, no hint: TileGym's 256 x 128 causal attention at d = 128 keeps its loads unpipelined (one stage
    would hold K and V at once, 136 KB, where the unpipelined loads reuse one buffer: 102 KB)."""
    text = dump(TILEGYM / "tg_fmha_bf16_d128_causal_256x128.tileirbc", "sm_80", tmp_path)
    assert pipelines(text) == [] and _dynamic(text) <= 104448


# ------------------------------------------------------------------------------ on the emulator

ONE_STAGE = "g_bmm_bf16_rr_128x64x128_scale_aligned_occ2_v13p1"    # 6 K iterations through one stage


def _emulate(gpu: str, mutate=None, monkeypatch=None) -> list[str]:
    import export
    import grammar
    import launch
    import variant_reference as reference

    if mutate is not None:
        import tileiras.runtime.backends as backends

        compile_module = backends.compile_module

        def mutated(req, emit, g):
            ptx, meta = compile_module(req, emit, g)
            return mutate(ptx.decode()).encode(), meta
        monkeypatch.setattr(backends, "compile_module", mutated)
    v = grammar.parse(ONE_STAGE)
    return reference.emulate(v, launch.launch(v), export.bytecode(v, gpu).read_bytes(), gpu)


@pytest.mark.parametrize("gpu, form", [("sm_80", "cp.async pipeline"), ("sm_120", "TMA pipeline")])
def test_a_one_stage_ring_matches_numpy(gpu: str, form: str, tmp_path: Path) -> None:
    import export
    import grammar

    (stages, line), = pipelines(dump(export.bytecode(grammar.parse(ONE_STAGE), gpu), gpu, tmp_path))
    assert stages == 1 and line.startswith(form)
    assert _emulate(gpu) == []


def _without_the_barrier_before_the_refill(ptx: str) -> str:
    lines = ptx.splitlines()
    first = next(i for i, line in enumerate(lines) if "cp.async.cg.shared.global" in line)
    del lines[max(i for i in range(first) if "bar.sync" in lines[i])]
    return "\n".join(lines) + "\n"


def _without_the_stage_empty_wait(ptx: str) -> str:
    lines = ptx.splitlines()
    at = next(i for i, line in enumerate(lines) if "// wait: stage empty" in line)
    waited = re.search(r"selp\.u32 (%r\d+)", lines[at]).group(1)  # type: ignore[union-attr]
    lines[at] = f"\tmov.u32 {waited}, 1;"
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("gpu, mutate, says", [
    ("sm_80", _without_the_barrier_before_the_refill, "data race (write-after-read)"),
    ("sm_120", _without_the_stage_empty_wait, "deadlock"),
])
def test_a_one_stage_ring_refilled_before_its_readers_are_done_is_reported(gpu: str, mutate, says: str,
                                                                             monkeypatch) -> None:
    from tileiras.errors import TileirasError

    with pytest.raises(TileirasError) as caught:
        problems = _emulate(gpu, mutate, monkeypatch)
        pytest.fail(f"the mutant ran: {problems}")
    assert says in str(caught.value)
