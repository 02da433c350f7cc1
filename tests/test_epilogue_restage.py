"""The accumulator's store restaged in 16-byte runs (lowering/epilogue.py) where the freed buffers
cannot simply take it: inside a persistent kernel's tile loop (the stages stay alive: the tile goes
through bytes nothing in the loop uses) and a chunk of rows at a time where it is larger than the
bytes there are (tests/test_tile_layer.py covers the kernel-end case)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"
PERSISTENT = "tg_matmul_persistent_f16_64x64x32"
STORE = re.compile(r"st\.global(?:\.v(\d))?\.b(\d+)")


def _ptx(name: str, gpu: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.ptx"
        done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit=ptx",
                               "--gpu-name", gpu, str(TILEGYM / f"{name}.tileirbc"), "-o", str(out)],
                              capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        return out.read_text()


def test_a_persistent_matmul_stores_each_tile_16_bytes_at_a_time() -> None:
    """64x64 f16 tiles, 128 threads: 4 16-byte stores a thread and tile (were 16 of 4 bytes), the
    restaging between two CTA barriers inside the tile loop."""
    ptx = _ptx(PERSISTENT, "sm_80")
    widths = [int(v or "1") * int(bits) for v, bits in STORE.findall(ptx)]
    assert widths == [128] * 4, widths


@pytest.mark.parametrize("gpu", ["sm_90", "sm_120"])
def test_a_persistent_matmul_stores_each_tile_by_tma_where_the_target_has_it(gpu: str) -> None:
    """With TMA the tile goes through a swizzled buffer of its own in the loop (epilogue_forms._loop_span),
    stored by one thread's box, as NVIDIA's does: no st.global; the thread waits for the box to have
    read the buffer before the next tile's writes."""
    ptx = _ptx(PERSISTENT, gpu)
    assert not STORE.findall(ptx)
    assert len(re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta", ptx)) == 1, ptx
    assert "cp.async.bulk.wait_group.read 0" in ptx


@pytest.mark.parametrize("gpu", ["sm_80", "sm_120", "sm_100"])
def test_a_persistent_matmul_restaged_in_its_loop_matches_the_interpreter(gpu: str) -> None:
    """Two CTAs, 12 tiles partial in M and N (each CTA restages 6 through the same bytes while its
    next tile's copies are in flight; on sm_120 stores them by TMA through one buffer; on sm_100 the
    epilogue warps read each tile's accumulator from tensor memory in column chunks), the race
    checker on."""
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    path = TILEGYM / f"{PERSISTENT}.tileirbc"
    module = load_module(path.read_bytes(), path.name)
    m, n, k = 160, 208, 96
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((m, k)) / 4).astype(np.float16)
    b = (rng.standard_normal((k, n)) / 4).astype(np.float16)
    c = np.full((m, n), -7, np.float16)
    args = [a, b, c, np.int32(m), np.int32(n), np.int32(k)]
    got = run_arrays(module, PERSISTENT, (2,), args, backend="emulator", gpu_name=gpu, source=None,
                     filename=path.name, check_races=True)
    want = run_arrays(module, PERSISTENT, (2,), args, backend="interpreter")
    got_c, want_c = np.asarray(got[2]).astype(np.float64), np.asarray(want[2]).astype(np.float64)
    assert not (want_c == -7).any()
    assert np.abs(got_c - want_c).max() <= 2.0 ** -9 * np.abs(want_c).max()


@pytest.mark.parametrize("gpu", ["sm_90", "sm_120"])
def test_16_bit_fragments_go_to_shared_memory_four_matrices_a_store(gpu: str, monkeypatch) -> None:
    """The accumulator's 16-bit fragments are written to the epilogue's buffer with stmatrix.x4 (two
    16 x 8 blocks a store, lane l addressing row l % 8 of matrix l / 8), as NVIDIA's epilogues do:
    64x64 f16 tiles over 4 warps, 4 a thread and tile where 16 two-element stores were; sm_80 has no
    stmatrix. The emulator (race checker on) matches the interpreter; with one of the 4 deleted, it
    does not."""
    from emulator_runs import edit_ptx
    from tileiras.emulator.errors import DeviceFault
    from tileiras.errors import TileirasError

    ptx = _ptx(PERSISTENT, gpu)
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 4
    assert "stmatrix" not in _ptx(PERSISTENT, "sm_80")
    test_a_persistent_matmul_restaged_in_its_loop_matches_the_interpreter(gpu)
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", tempfile.mkdtemp())
    edit_ptx(monkeypatch, lambda text: re.sub(r"\tstmatrix\.sync\.aligned\.m8n8\.x4\.shared\.b16 [^\n]*\n", "", text,
                                              count=1))
    with pytest.raises((AssertionError, DeviceFault, TileirasError)):
        test_a_persistent_matmul_restaged_in_its_loop_matches_the_interpreter(gpu)


@pytest.mark.parametrize("gpu, element, warps, threads, expected", [
    ("sm_90", "f16", (1, 4, 1), 128, "stmatrix"),
    ("sm_120", "bf16", (1, 2, 2), 128, "stmatrix"),
    ("sm_80", "f16", (1, 4, 1), 128, "pairs"),        # no stmatrix before sm_90
    ("sm_90", "f32", (1, 4, 1), 128, "pairs"),        # 32-bit elements: 8x8 b16 matrices do not hold them
    ("sm_90", "f16", (1, 2, 1), 128, "pairs"),        # half the warps repeat the grid's blocks
])
def test_how_fragments_are_stored_is_decided_in_the_middle_level(gpu, element, warps, threads, expected) -> None:
    """epilogue_forms.fragment_stores decides stmatrix or pairs from the target table, the element
    and the fragment layout; the lowering only translates (lowering/epilogue.write_fragments)."""
    from tileiras.ir.types import ScalarType, TileType
    from tileiras.layout.encodings import MmaLayout
    from tileiras.target.table import caps
    from tileiras.tileas.epilogue_forms import fragment_stores

    layout = MmaLayout(threads, (1, 64, 64), warps)
    assert fragment_stores(caps(gpu), TileType((64, 64), ScalarType(element)), layout) == expected
