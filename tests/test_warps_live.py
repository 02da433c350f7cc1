"""tileas/warps.py's rule for element-wise kernels: warps until the tiles live at once fit a thread."""

from __future__ import annotations

from pathlib import Path

import pytest

from tileiras.frontend import load_module
from tileiras.ir.core import Operation
from tileiras.ir.types import ScalarType, TileType
from tileiras.tileaa.passes import to_tileaa
from tileiras.tileas import warps

BYTECODE = Path(__file__).parent / "realistic" / "bytecode"


def _entry(name: str) -> Operation:
    path = BYTECODE / f"{name}.tileirbc"
    module = load_module(path.read_bytes(), str(path))
    entry = next(op for op in module.regions[0].block.operations if op.name == "cuda_tile.entry")
    to_tileaa(entry)
    return entry


@pytest.mark.parametrize("gpu", ["sm_80", "sm_90", "sm_100", "sm_120"])
def test_rope_gets_the_warps_its_live_tiles_need(gpu: str) -> None:
    """RoPE's rotated halves (each within the tile rule's 64 registers a thread on 4 warps) live beside their
    products and the broadcast cos and sin: on 4 warps they take more than a thread's 255 registers at once
    (ptxas took 244-250 there), on 8 they fit (159-170)."""
    entry = _entry("rope_bf16_s4h32d128")
    block = entry.regions[0].block
    assert warps.live_registers(block, 4) > warps.LIVE_REGS_PER_THREAD >= warps.live_registers(block, 8)
    assert warps.choose_threads(entry, gpu) == 256


def test_live_registers_counts_what_is_read_later() -> None:
    """A tile counts from its definition to its last reader: the peak is where the most are live at once, less
    than every tile's sum."""
    entry = _entry("rope_bf16_s4h32d128")
    block = entry.regions[0].block
    tiles = [op for op in entry.walk() if warps._computed_in_registers(op) and isinstance(op.results[0].type, TileType)
             and isinstance(op.results[0].type.element, ScalarType)]
    total = sum(-(-t.num_elements * t.element.bitwidth // (32 * 32 * 8)) for t in (op.results[0].type for op in tiles))
    assert 0 < warps.live_registers(block, 8) < total
    assert warps.live_registers(block, 8) <= warps.live_registers(block, 4)


def test_a_kernel_that_reduces_keeps_the_tile_rule() -> None:
    """A reduction's rows are streamed in chunks after the warps are chosen: its whole tiles' liveness is not
    what a thread holds, and the rule leaves it alone."""
    entry = _entry("softmax_f16_n4096_r1")
    assert any(op.name == "cuda_tile.reduce" for op in entry.walk())
    assert warps.choose_threads(entry, "sm_90") == 128
