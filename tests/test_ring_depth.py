"""How deep a loop's ring of stages is, and where its mbarriers go.

* A ring a producer role fills (warp specialization) only needs its copies' latency covered: the
  producer issues a copy as soon as a slot is free and the consumers wait where their iteration starts,
  so the depth is 1 + ceil(latency / II) (`PipelinePlan.values(produced=True)`), wherever the modulo
  schedule placed the first reader. Attention's two mmas and its softmax make a long II: two stages, as
  NVIDIA's compiler (and FlashAttention 3) use; the copies of one iteration of a matmul's loop take
  several IIs, so it keeps its depth.
* The control state alive to the kernel's end (mbarrier arrays, tensor memory's address slot) is placed
  above every other buffer (`shared_plan.place`): a causal attention's first loop's mbarriers no longer
  keep its second loop's deeper ring from the bytes the first ring used.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from pipeline_dump_support import dump, pipelines  # noqa: E402
REALISTIC = ROOT / "tests" / "realistic" / "bytecode"
TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"




@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_an_attention_ring_its_producer_fills_is_two_stages(gpu: str, tmp_path: Path) -> None:
    (stages, line), = pipelines(dump(REALISTIC / "fa_f16_q128k128d128.tileirbc", gpu, tmp_path))
    assert "warp-specialized" in line and "not warp-specialized" not in line
    assert stages == 2


def test_a_matmul_ring_keeps_the_depth_its_copies_latency_asks(tmp_path: Path) -> None:
    """128 x 128 x 32 bf16 tiles on sm_90: a copy's latency spans several IIs of the K loop."""
    (stages, line), = pipelines(dump(REALISTIC / "bmm_bf16_128x128x32.tileirbc", "sm_90", tmp_path))
    assert "warp-specialized" in line and stages >= 4


def test_mbarriers_go_above_the_rings_a_later_loop_reuses(tmp_path: Path) -> None:
    """Causal attention on sm_90: the diagonal loop (not warp-specialized, three stages) reuses the bytes of
    the off-diagonal loop's two-stage ring, its mbarriers above both."""
    text = dump(TILEGYM / "cp_fmha_f16_d64_causal_128x128.tileirbc", "sm_90", tmp_path)
    assert sorted(stages for stages, _ in pipelines(text)) == [2, 3]
    rings = [(int(m.group(1)), int(m.group(2))) for m in
             re.finditer(r"ring \(ring\) (\d+) B .*? offset (\d+):", text)]
    bars = [int(m.group(1)) for m in re.finditer(r"mbarriers \(buffer\) \d+ B .*? offset (\d+):", text)]
    assert len(rings) == 4 and bars
    assert min(bars) >= max(offset + nbytes for nbytes, offset in rings)
    first, second = rings[:2], rings[2:]
    assert min(offset for _, offset in second) == min(offset for _, offset in first)
    total = int(re.search(r"(\d+) bytes of dynamic shared memory", text).group(1))  # type: ignore[union-attr]
    assert total <= max(offset + nbytes for nbytes, offset in rings) + 1024
