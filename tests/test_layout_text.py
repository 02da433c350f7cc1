"""nv_tileas' text: tile types carry their layouts (`tile<128x128xf32, #mma>`, the layouts named at the top),
printed by `--print-ir-after-all` and `tileir opt`, and read back (tileas/text.py, layout/encoding_text.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.frontend import load_module
from tileiras.layout.encoding_text import LayoutSyntaxError, parse_layout
from tileiras.layout.encodings import (BlockedLayout, BroadcastSourceLayout, MmaLayout, MmaRowLayout, PairAccLayout,
                                       RowWarpLayout, TmemAccLayout)
from tileiras.tileaa.passes import to_tileaa
from tileiras.tileas.passes import to_tileas
from tileiras.tileas.materialize import tile_values
from tileiras.tileas.text import parse_tileas
from tileiras.text.lexer import ParseError
from tileiras.text.parser import parse_module
from tileiras.text.printer import Printer

ROOT = Path(__file__).resolve().parent.parent
_MMA = MmaLayout(256, (1, 128, 64), (1, 4, 1), interleaved=True)
_LAYOUTS = [
    BlockedLayout(128), BlockedLayout(256, 8),
    RowWarpLayout(128, 64, rpw=2), RowWarpLayout(256, 4096, wpr=2, chunk=8), RowWarpLayout(128, 1, rpw=4),
    _MMA, MmaLayout(128, (2, 64, 32), (2, 2, 1)),
    TmemAccLayout(128, (1, 128, 256), (1, 4, 1)), PairAccLayout(128, (1, 64, 256), (1, 2, 2)),
    MmaRowLayout(_MMA), MmaRowLayout(TmemAccLayout(256, (1, 128, 128), (1, 4, 2))),
    BroadcastSourceLayout(_MMA, (128, 64), (1, 64)),
    BroadcastSourceLayout(BlockedLayout(128, 4), (16, 64), (16, 1)),
]


@pytest.mark.parametrize("layout", _LAYOUTS, ids=lambda layout: layout.describe())
def test_every_layout_reads_back_from_what_it_prints(layout) -> None:
    back = parse_layout(layout.describe())
    assert back == layout and type(back) is type(layout)


def test_an_mma_grid_with_idle_warps_says_its_threads() -> None:
    """Warps beside the grid hold copies: the grid alone would read back with fewer threads."""
    layout = MmaLayout(256, (1, 16, 64), (1, 1, 4))
    assert layout.describe().endswith(", threads=256>")
    assert parse_layout(layout.describe()) == layout


@pytest.mark.parametrize("text,says", [
    ("#mma<warps=1x4, per_warp=1x2x16 blocks>", "3 warp counts"),
    ("#mma<warps=1x4x1, per_warp=1x2x16>", "does not end in ' blocks'"),
    ("#blocked<vec=4>", "needs 'threads='"),
    ("#blocked<threads=0>", "not a positive integer"),
    ("#blocked<threads=128, width=4>", "unknown field 'width'"),
    ("#swizzled<threads=128>", "unknown layout '#swizzled'"),
    ("#mma_rows<#blocked<threads=128>>", "holds an mma layout"),
    ("#broadcast_source<1x64 of #blocked<threads=128>>", "SRC to DST of LAYOUT"),
    ("#blocked<threads=128", "unclosed"),
    ("#blocked<threads=128> trailing", "unexpected"),
])
def test_text_that_is_no_layout_says_what_was_expected(text: str, says: str) -> None:
    with pytest.raises(LayoutSyntaxError, match=says):
        parse_layout(text)


def _at_tileas(path: Path, gpu: str):
    module = load_module(path.read_bytes(), str(path))
    entries = [op for op in module.regions[0].blocks[0].operations if op.name == "cuda_tile.entry"]
    for entry in entries:
        to_tileaa(entry)
    to_tileas(entries, gpu)
    return module, entries


@pytest.mark.parametrize("name,gpu", [("mm_f16_128x128x64", "sm_90"), ("mm_f16_128x128x64", "sm_100"),
                                      ("fa_bf16_q128k64d128_causal", "sm_80"), ("softmax_f16_n1024_r4", "sm_120")])
def test_the_levels_text_reads_back_with_every_layout(name: str, gpu: str) -> None:
    """Printed with layouts, parsed, verified and printed again: the same text, each value in its layout."""
    from tileiras.dialects.verifier import verify_module

    module, entries = _at_tileas(ROOT / "tests" / "realistic" / "bytecode" / f"{name}.tileirbc", gpu)
    text = Printer(layouts=True).print_module(module)
    assert "#nv_tileas." in text
    back = parse_tileas(text, name)
    verify_module(back)
    assert Printer(layouts=True).print_module(back) == text
    before = [v.layout for entry in entries for v in tile_values(entry) if v.type.shape]
    after = [v.layout for op in back.regions[0].blocks[0].operations if op.name == "cuda_tile.entry"
             for v in tile_values(op) if v.type.shape]
    assert before == after and all(layout is not None for layout in after)


def test_cuda_tile_text_with_a_layout_is_refused_where_cuda_tile_is_read() -> None:
    with pytest.raises(ParseError, match="a tile type with a layout is nv_tileas IR"):
        parse_module("entry @k() {\n  %c = constant <f32: 0.0> : tile<4xf32, #nv_tileas.blocked<threads=128>>\n"
                     "  return\n}\n")


@pytest.mark.parametrize("edit,says", [
    (("#nv_tileas.mma<warps=1x4x1, per_warp=1x2x16 blocks, warpgroup rows>", "#nv_tileas.mma<warps=1x4x1>"),
     "invalid layout: .* ends? in ' blocks'|needs 3 warp counts"),
    ((", #mma>", ", #nope>"), "undefined symbol alias id '#nope'"),
])
def test_tileir_opt_reports_a_bad_layout_with_its_line(tmp_path: Path, edit, says: str) -> None:
    run = [sys.executable, "-m", "tileiras.driver.tileir_main", "opt"]
    lit = ROOT / "tests" / "lit" / "tileas" / "layouts.mlir"
    done = subprocess.run(run + [str(lit), "--passes", "canonical-form,nv_tileas", "--gpu-name", "sm_90"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text(done.stdout.replace(*edit))
    failed = subprocess.run(run + [str(bad), "--passes", ""], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert failed.returncode == 5 and "Traceback" not in failed.stderr
    assert failed.stderr.startswith(f"{bad}:"), failed.stderr
    assert re.search(says, failed.stderr), failed.stderr


def test_tileir_opt_refuses_to_lay_out_a_kernel_laid_out_already(tmp_path: Path) -> None:
    run = [sys.executable, "-m", "tileiras.driver.tileir_main", "opt"]
    lit = ROOT / "tests" / "lit" / "tileas" / "layouts.mlir"
    done = subprocess.run(run + [str(lit), "--passes", "canonical-form,nv_tileas"], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    laid_out = tmp_path / "tileas.mlir"
    laid_out.write_text(done.stdout)
    again = subprocess.run(run + [str(laid_out), "--passes", "nv_tileas"], capture_output=True, text=True, cwd=ROOT,
                           timeout=120)
    assert again.returncode == 2 and "at nv_tileas already" in again.stderr and not again.stdout, again.stderr
    folded = subprocess.run(run + [str(laid_out), "--passes", "canonical-form"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert folded.returncode == 0 and "tile<128x128xf32, #mma>" in folded.stdout, folded.stderr


@pytest.mark.parametrize("edit,says", [
    # a value used in a layout other than its definition's: the parser's check of every use's type
    (("continue %5 : tile<128x128xf32, #mma>", "continue %5 : tile<128x128xf32, #blocked>"),
     r"use of value '%5' expects different type than prior uses: "
     r"'!cuda_tile.tile<128x128xf32, #nv_tileas.blocked<threads=128, vec=8>>' vs '!cuda_tile.tile<128x128xf32, "
     r"#nv_tileas.mma<"),
    # an element conversion that moves its tile: the level's rule (tileas/verify.verify_types), not internal
    (("-> tile<128x128xf16, #mma>", "-> tile<128x128xf16, #blocked>"),
     r"error: nv_tileas verifier: 'cuda_tile.ftof' has values that must share a layout in different ones"),
])
def test_tileir_opt_holds_nv_tileas_text_to_its_layouts(tmp_path: Path, edit, says: str) -> None:
    run = [sys.executable, "-m", "tileiras.driver.tileir_main", "opt"]
    lit = ROOT / "tests" / "lit" / "tileas" / "layouts.mlir"
    done = subprocess.run(run + [str(lit), "--passes", "canonical-form,nv_tileas", "--gpu-name", "sm_90"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0 and edit[0] in done.stdout, done.stderr
    bad = tmp_path / "bad.mlir"
    bad.write_text(done.stdout.replace(*edit, 1))
    failed = subprocess.run(run + [str(bad), "--passes", ""], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert failed.returncode == 5 and "Traceback" not in failed.stderr and not failed.stdout
    assert re.search(says, failed.stderr) and "internal" not in failed.stderr, failed.stderr
    assert "bad.mlir" in failed.stderr.split("error:")[0], failed.stderr   # where, in the file given
