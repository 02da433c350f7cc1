"""sm_100 warp specialization beyond the 128-row f16 matmul (warp_specialize_tcgen05.py): two
epilogue warpgroups (M or N 256), whose epilogue reads tensor memory in column chunks
(tmem_epilogue.py); tf32 operands, which the epilogue warps round in their stages before the
MMA warp reads them; block-scaled fp8, whose scales the epilogue warps restage per stage for the
MMA warp's tcgen05.cp (test_blockscale_lowering.py runs its K loop of 2 specialized). The realistic kernels run on the emulator with the race checker against the
interpreter at reduced problem sizes (partial tiles: the chunked stores' bounds); ptxas and
cuobjdump show the roles' loops, no spills and registers within the launch budget."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
REALISTIC = ROOT / "tests" / "realistic" / "bytecode"
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "benchmarks"))

from emulator_runs import edit_ptx, emulate, emulate_and_interpret, removing  # noqa: E402
from test_tile_layer import _ptx, _ptxas_report  # noqa: E402

_DTYPES = {"f16": np.float16, "tf32": np.float32}


def _run(name: str, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(emulator's C with the race checker, interpreter's C) of a realistic matmul on m x n x k."""
    from tileiras.frontend import load_module

    module = load_module((REALISTIC / f"{name}.tileirbc").read_bytes(), f"{name}.tileirbc")
    dtype = _DTYPES[name.split("_")[1]]
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    out, ref = emulate_and_interpret(module, [a, b, np.zeros((m, n), dtype)], "sm_100")
    return out[2].astype(np.float64), ref[2].astype(np.float64)


# (kernel, M, N, K): one partial tile (the chunked stores' bounds), K loops that wrap the stage ring
SPECIALIZED = [
    ("mm_f16_128x256x64", 112, 240, 192),
    ("mm_tf32_64x64x32", 64, 48, 160),
    pytest.param("mm_tf32_128x128x64", 112, 128, 256, marks=pytest.mark.sweep),
    pytest.param("mm_f16_256x128x64", 240, 112, 192, marks=pytest.mark.sweep),
    pytest.param("mm_tf32_256x128x64", 256, 128, 256, marks=pytest.mark.sweep),
]


@pytest.mark.parametrize("name,m,n,k", SPECIALIZED)
def test_specialized_matmul_matches_the_interpreter_under_the_race_checker(name: str, m: int, n: int,
                                                                           k: int) -> None:
    """f16 outputs differ by an f16 rounding of f32 sums taken in another order; tf32 products are
    the rounded operands' (the epilogue warps round as the ftof says), so the f32 sums agree to
    their order (truncated operands would differ by ~1e-2 here)."""
    out, ref = _run(name, m, n, k)
    tol = 2e-3 if "f16" in name else 1e-5
    assert np.abs(out - ref).max() <= tol * max(1.0, np.abs(ref).max())


def test_rounding_without_the_proxy_fence_is_reported(monkeypatch) -> None:
    """The race checker covers the epilogue warps' rounding: their generic st.shared of a stage,
    read by the MMA warp's tcgen05.mma through the async proxy, need a fence.proxy.async before
    their arrival on the stage's `ready` mbarrier."""
    from tileiras.emulator import EmulatorError

    edit_ptx(monkeypatch, removing(r"fence\.proxy\.async\.shared::cta;", needs="// wait: stage prepared"))
    with pytest.raises(EmulatorError, match=r"missing fence\.proxy\.async: .*st\.shared\.v4.* the tcgen05\.mma"):
        _run("mm_tf32_64x64x32", 64, 64, 160)


@pytest.mark.sweep
def test_block_scaled_matmul_wrapping_its_stages_matches_numpy() -> None:
    """Block-scaled 128x128x128 (one epilogue warpgroup): a K loop of 6 wraps the 4 stages, so
    every stage's restaged scales and tensor-memory scale columns are reused."""
    from test_blockscale_lowering import _inputs, _kernel, _reference
    from test_tile_layer import _module

    module = _module(_kernel(128, 128, 128))
    a, sa, b, sb = _inputs(128, 128, 6 * 128)
    out = emulate(module, [a, sa, b, sb, np.zeros((128, 128), np.float32)], "sm_100")[4]
    ref = _reference(a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


def _bytecode(name: str) -> bytes:
    if name.startswith("mxfp8"):     # the TileGym sample at these tiles (test_blockscale_lowering.py)
        from test_blockscale_lowering import _kernel

        return _kernel(*(int(x) for x in name.split("_")[1].split("x")))
    return (REALISTIC / f"{name}.tileirbc").read_bytes()


def _sass(name: str, tmp_path: Path) -> tuple[str, str, list]:
    """(PTX, ptxas -v report, each K loop's SASS opcodes) of a kernel on sm_100a."""
    from sass_roles import cycles
    from sass_stats import cuobjdump_path, parse_sass

    ptx = _ptx(_bytecode(name), "sm_100", tmp_path)
    report = _ptxas_report(ptx, "sm_100a", tmp_path)
    done = subprocess.run([str(cuobjdump_path()), "-sass", str(tmp_path / "r.cubin")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [func] = parse_sass(done.stdout).values()
    return ptx, report, [[i.base for i in body] for body in cycles(func)]


# (the default suite checks the f16 roles in test_mbarrier_pipeline.py; TMA-fed, the producer is one warp, and
# with the MMA warp and two idle warps one warpgroup that gives its registers back, the SM holding one CTA
# anyway: 384 threads launch with 168 registers a thread, the epilogue taking 232; 256 with 255)
@pytest.mark.parametrize("name,threads,budget", [
    pytest.param("mm_f16_128x256x64", 384, 168, marks=pytest.mark.sweep),
    pytest.param("mm_tf32_128x128x64", 256, 255, marks=pytest.mark.sweep),
    pytest.param("mxfp8_128x128x128", 256, 255, marks=pytest.mark.sweep),
    pytest.param("mxfp8_128x256x128", 384, 168, marks=pytest.mark.sweep)])
def test_specialized_roles_fit_the_launch_budget(name: str, threads: int, budget: int, tmp_path: Path) -> None:
    """Producer (one thread's TMA boxes; block-scaled: beside them, A's scales by cp.async, whose 4-byte
    rows no TMA box takes, arrivals on `full`), MMA thread (UTCHMMA and commits, nothing copied) and,
    for tf32, the epilogue warps' rounding loop (shared loads and stores only); the epilogue's
    tensor-memory reads are chunked (32 registers a load), outside every loop; no spills, registers
    within what the CTA launches with."""
    ptx, report, bodies = _sass(name, tmp_path)
    assert f".reqntid {threads}, 1, 1" in ptx and ptx.count("setmaxnreg.dec.sync.aligned.u32 40;") == 1
    assert ("setmaxnreg.inc.sync.aligned.u32 232;" in ptx) == (threads == 384)
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report, report
    registers = int(re.search(r"Used (\d+) registers", report).group(1))  # type: ignore[union-attr]
    assert registers <= budget, report
    mma = "UTCQMMA" if name.startswith("mxfp8") else "UTCHMMA"
    copy = "UTMALDG"
    copying = [b for b in bodies if copy in b]
    assert all(("LDGSTS" in b) == name.startswith("mxfp8") for b in copying)
    issuing = [b for b in bodies if mma in b]
    assert copying and issuing and not any(mma in b or "STS" in b for b in copying)
    assert not any(copy in b or "STS" in b for b in issuing) and all("UTCBAR" in b for b in issuing)
    preparing = [b for b in bodies if "STS" in b]     # tf32 rounding, scales restaged
    assert bool(preparing) == ("f16" not in name) and not any(mma in b or copy in b for b in preparing)
    assert not any("LDTM" in b for b in bodies)
    loads = re.findall(r"tcgen05\.ld\.sync\.aligned\.16x256b\.x(\d+)\.b32", ptx)
    assert len(loads) >= 2 and all(int(x) <= 8 for x in loads), loads


@pytest.mark.parametrize("shared,hint,consumers,alone", [
    (150_000, 1, 128, 1),     # one CTA an SM by its shared memory: the roles take a warpgroup
    (66_816, 1, 128, 0),      # three fit (mm_f16_64x64x32): the roles stay two warps, the SM holds three
    (100_000, 2, 128, 2),     # the hint's two: launched for two
    (60_000, 2, 128, 0),      # more than the hint asks
    (100_000, 2, 256, 0),     # two epilogue warpgroups at a hint of 2 would launch with 80 registers
])
def test_the_roles_take_a_warpgroup_only_where_the_sm_holds_no_more_ctas(shared: int, hint: int, consumers: int,
                                                                       alone: int) -> None:
    from tileiras.target import caps
    from tileiras.tileas.settled_split import ctas_alone

    assert ctas_alone(caps("sm_100"), shared, hint, consumers) == alone


@pytest.mark.parametrize("first,blocks", [(0, 8), (8, 8), (4, 4), (14, 2)])
def test_an_epilogue_chunk_steps_its_slots_from_its_first(first: int, blocks: int) -> None:
    """A column chunk of a tensor-memory accumulator (256 x 256 on 4 x 2 warps: 16 blocks of 8 columns, 4 of 16 rows a warp) places
    each slot a constant, non-negative distance from its first slot's element, the parent's distance between the
    two; ops_memory._shifted_addresses steps the chunk's addresses from one. A tile of another shape has none."""
    from tileiras.layout.encodings import TmemAccLayout
    from tileiras.lowering.tmem_epilogue import ColumnChunk

    parent = TmemAccLayout(256, (1, 256, 256), (1, 4, 2))
    chunk = ColumnChunk(parent, first, blocks)
    shape = (256, 256)
    shifts = [chunk.slot_shift(shape, s) for s in range(chunk.slots(256 * 256))]
    assert shifts[0] == (0, 0) and all(d is not None and min(d) >= 0 for d in shifts)
    origin = parent.slot_shift(shape, chunk.parent_slot(0))
    for s, shift in enumerate(shifts):
        at = parent.slot_shift(shape, chunk.parent_slot(s))
        assert tuple(a - o for a, o in zip(at, origin)) == shift
    assert chunk.slot_shift((128, 256), 1) is None
