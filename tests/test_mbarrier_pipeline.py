"""mbarrier pipelines (sm_90+): the full/empty handshake of a K loop's stages, warp-specialized on
sm_90 and sm_120 (a producer that only copies, consumer warpgroups that only compute), with an MMA
warp on sm_100, and unspecialized where no form applies. Matmul and attention run on the PTX emulator with the race checker
against numpy at the tile sizes real kernels use; a wait taken out of the generated PTX is
reported; ptxas and cuobjdump show the handshake in the SASS with no spills."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from emulator_runs import edit_ptx, without_wait  # noqa: E402
from test_tile_layer import _attention, _entry, _inputs, _matmul, _module, _ptx, _ptxas_report  # noqa: E402


def _run(module, grid, arrays, gpu: str = "sm_90"):
    """Every argument array after the kernel ran on the emulator with the race checker."""
    from tileiras.runtime import run_arrays

    return run_arrays(module, _entry(module), grid, arrays, backend="emulator", gpu_name=gpu, check_races=True)


# 5 stages: 6 iterations refill and flip phases; 1: only the wgmma group drained after the loop
@pytest.mark.parametrize("iterations", [1, 3, 6], ids=["single", "fill", "wrap"])
def test_sm90_matmul_pipeline_matches_numpy_under_the_race_checker(iterations: int) -> None:
    module = _module(_matmul("float16", "float32", 128, 128, 64))
    a, b, c = _inputs("float16", 128, 128, iterations * 64)
    out = _run(module, (1, 1, 1), [a, b, c])[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("gpu,what,report", [
    # warp-specialized (sm_90): without `full` the consumers' wgmma reads a stage still being filled
    ("sm_90", "stage full", "read before the mbarrier wait"),
    # without `empty` the producer refills stages still being read; its extra arrivals also run the
    # full barriers' phases past the consumers, which then wait forever
    ("sm_90", "stage empty", "write-after-read|deadlock"),
    # warp-specialized with mma.sync consumers (sm_120: a TMA producer warp, ldmatrix from the
    # swizzled stages): the same two mistakes
    ("sm_120", "stage full", "read before the mbarrier wait"),
    ("sm_120", "stage empty", "write-after-read|deadlock"),
    # warp-specialized (sm_100): without `full` the MMA thread's tcgen05.mma reads a stage still
    # being filled; without `empty` the producer refills a stage before the MMAs reading it are
    # committed
    # (the emulator may run the MMA thread through every iteration before the producer copies
    # anything: its commits then run the empty barriers' phases past the producer's waits, or the
    # epilogue's C, staged for its TMA store in the stages' bytes, is overwritten by a late copy)
    # (or it reads a stage no copy has written yet: shared memory starts undefined)
    ("sm_100", "stage full", "read before the mbarrier wait|deadlock|write-after-read|read of undefined shared memory"),
    ("sm_100", "stage empty", "write-after-read|deadlock"),
])
def test_a_pipeline_without_a_wait_is_reported_as_a_race(monkeypatch, gpu: str, what: str, report: str) -> None:
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault

    edit_ptx(monkeypatch, without_wait(what))
    module = _module(_matmul("float16", "float32", 128, 128, 64))
    a, b, c = _inputs("float16", 128, 128, 6 * 64)   # the ring wraps: stages are refilled
    with pytest.raises((DeviceFault, TileirasError), match=report):
        _run(module, (1, 1, 1), [a, b, c], gpu=gpu)


@pytest.mark.parametrize("tm,tn", [(128, 128), (64, 64)])
def test_sm100_specialized_pipeline_matches_numpy_under_the_race_checker(tm: int, tn: int) -> None:
    """Producer warpgroup, MMA warp and epilogue warps (warp_specialize_tcgen05.py): 6 iterations
    wrap the stage ring, so every stage is refilled after its MMAs' commit freed it."""
    module = _module(_matmul("float16", "float32", tm, tn, 64))
    a, b, c = _inputs("float16", tm, tn, 6 * 64)
    out = _run(module, (1, 1, 1), [a, b, c], gpu="sm_100")[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("gpu", ["sm_120"])   # mma.sync from ldmatrix
def test_unspecialized_pipeline_matches_numpy_under_the_race_checker(gpu: str) -> None:
    """Every thread copies and reads: it releases the stage it read, waits for everyone's release,
    refills it and waits for its next stage to be full; the ring wraps."""
    module = _module(_matmul("float16", "float32", 128, 128, 64))
    a, b, c = _inputs("float16", 128, 128, 6 * 64)
    out = _run(module, (1, 1, 1), [a, b, c], gpu=gpu)[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def test_sm90_attention_pipeline_matches_numpy_under_the_race_checker() -> None:
    seq, head, bq, bk = 512, 64, 128, 64      # a K/V loop of 8 iterations: the 4 stages are refilled
    module = _module(_attention(seq, head, bq, bk))
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, seq, head)).astype(np.float16) for _ in range(3))
    scale = np.float32(1 / np.sqrt(head))
    out = _run(module, (seq // bq, 1, 1), [q, k, v, np.zeros_like(q), np.array(scale)])[3]
    s = q[0].astype(np.float64) @ k[0].astype(np.float64).T * scale
    p = np.exp(s - s.max(1, keepdims=True))
    assert np.abs(out[0] - (p / p.sum(1, keepdims=True)) @ v[0].astype(np.float64)).max() < 2e-3


def _sass(ptx: str, tmp_path: Path, arch: str = "sm_90a") -> tuple[str, str]:
    """(ptxas -v report, cuobjdump -sass text) of our PTX (sm_90 unless `arch` says)."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from sass_stats import cuobjdump_path

    report = _ptxas_report(ptx, arch, tmp_path)
    tool = cuobjdump_path()
    assert tool is not None, "cuobjdump (nvidia-cuda-cuobjdump) is needed to read the SASS"
    done = subprocess.run([str(tool), "-sass", str(tmp_path / "r.cubin")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return report, done.stdout


def test_sm90_matmul_sass_has_the_producer_consumer_handshake(tmp_path: Path) -> None:
    ptx = _ptx(_matmul("float16", "float32", 128, 128, 64), "sm_90", tmp_path)
    assert ".reqntid 256, 1, 1" in ptx and "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    report, sass = _sass(ptx, tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report, report
    assert "setmaxnreg' ignored" not in report, report
    stages = ptx.count("mbarrier.init.shared::cta.b64") // 2   # a full and an empty mbarrier each
    assert stages >= 2 and sass.count("SYNCS.EXCH.64") == 2 * stages
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in sass        # the try_wait.parity loops
    # one producer thread: expect_tx on `full`, then the stage's boxes (A: 64x128, B: two of 64x64)
    assert "SYNCS.ARRIVE.TRANS64 " in sass and sass.count("UTMALDG.2D") == 3 and "LDGSTS" not in sass
    assert sass.count("UTMACCTL.PF") == 2                  # prefetch.tensormap of both descriptors
    assert "USETMAXREG.DEALLOC" in sass                    # the producer gives its registers back


@pytest.mark.parametrize("config,threads", [((4096, 64, 128, 64), 256), ((4096, 128, 128, 128), 384)],
                         ids=["d64", "d128"])
def test_sm90_attention_sass_has_the_producer_consumer_handshake(config, threads: int, tmp_path: Path) -> None:
    """The query tile is copied once by TMA before the loop, on its own mbarrier; the producer computes
    only the K/V coordinates and the loop bounds, and streams K and V by TMA."""
    ptx = _ptx(_attention(*config), "sm_90", tmp_path)
    assert f".reqntid {threads}, 1, 1" in ptx
    report, sass = _sass(ptx, tmp_path)
    assert "0 bytes spill stores" in report and "setmaxnreg' ignored" not in report, report
    barriers = ptx.count("mbarrier.init.shared::cta.b64")      # full/empty per stage (at least 2), the query's
    assert barriers >= 5 and barriers % 2 and sass.count("SYNCS.EXCH.64") == barriers
    assert "SYNCS.PHASECHK.TRANS64.TRYWAIT" in sass
    # K and V by TMA (the producer's one thread), the query tile too (a consumer thread, once)
    assert "UTMALDG.3D" in sass and "ARRIVES.LDGSTSBAR.64" not in sass and "LDGSTS" not in sass
    assert "USETMAXREG.DEALLOC" in sass


# (TMA-fed: the producer is one warp beside the MMA warp, tileas/settled_split.py; where the SM holds one CTA
# anyway, by its shared memory, the two and two idle warps are one warpgroup that gives its registers back)
@pytest.mark.parametrize("tm,tn,threads", [(128, 128, 256), (64, 64, 192), (128, 256, 384)])
def test_sm100_sass_has_producer_mma_and_epilogue_roles(tm: int, tn: int, threads: int, tmp_path: Path) -> None:
    """The epilogue warps run no K loop; the producer's loop copies (one thread's TMA boxes: these
    views are made of kernel parameters) and never issues an MMA; the MMA thread's loop issues
    UTCHMMA and commits (UTCBAR), and copies nothing. A 64 x 64 tile's CTA leaves room for more on its SM:
    its roles are two warps, without setmaxnreg (which would launch it with 255 registers a thread)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from sass_roles import cycles
    from sass_stats import parse_sass

    ptx = _ptx(_matmul("float16", "float32", tm, tn, 64), "sm_100", tmp_path)
    assert f".reqntid {threads}, 1, 1" in ptx
    assert ("setmaxnreg.dec.sync.aligned.u32 40;" in ptx) == (threads % 128 == 0)
    assert ptx.count("tcgen05.commit") == 2          # to a stage's empty barrier, then accumulator-ready
    report, sass = _sass(ptx, tmp_path, "sm_100a")
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report, report
    [func] = parse_sass(sass).values()
    bodies = [[i.base for i in body] for body in cycles(func)]
    copying = [b for b in bodies if "UTMALDG" in b]
    issuing = [b for b in bodies if "UTCHMMA" in b and "UTCBAR" in b]
    assert copying and issuing and "LDGSTS" not in sass
    assert not any("UTCHMMA" in b for b in copying) and not any("UTMALDG" in b for b in issuing)
    assert not any("LDTM" in b for b in bodies)     # the epilogue reads tensor memory once, after the loop


@pytest.mark.parametrize("name,says", [
    ("mm_f16_128x128x64", "warp-specialized (tcgen05): warp 4 produces (one thread issues TMA copies into 4 stages"),
    ("mm_bf16_128x256x64", "warp-specialized (tcgen05): warp 8 produces (one thread issues TMA copies into 3 stages"),
    ("mm_tf32_64x64x32", "warp-specialized (tcgen05): warp 4 produces (one thread issues TMA copies into"),
])
def test_sm100_warp_roles_are_remarked_and_dumped(name: str, says: str, tmp_path: Path) -> None:
    """The decision (specialized or not, roles, warps per role) is a remark and a line of the
    schedule's IR dump, as on sm_90."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-m", "tileiras", "--no-cache", "--gpu-name", "sm_100",
                           str(root / "tests" / "realistic" / "bytecode" / f"{name}.tileirbc"), "-o",
                           str(tmp_path / "k.cubin"), "--remarks=memory", "--print-ir-after-all"],
                          capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    remark = done.stdout + done.stderr
    assert any(says in line for line in remark.splitlines() if "note: Roles = " in line)
    dump = remark.split("IR Dump After schedule", 1)[1].split("IR Dump After lower-to-llvm", 1)[0]
    assert says in dump


def test_sm90_two_consumer_warpgroups_take_the_producers_registers() -> None:
    """128x256: two consumer warpgroups (m64n256 each) and the producer, 384 threads."""
    module = _module(_matmul("float16", "float32", 128, 256, 64))
    a, b, c = _inputs("float16", 128, 256, 3 * 64)
    out = _run(module, (1, 1, 1), [a, b, c])[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())


def test_sm90_wide_matmul_ptx_splits_registers(tmp_path: Path) -> None:
    ptx = _ptx(_matmul("float16", "float32", 128, 256, 64), "sm_90", tmp_path)
    assert ".reqntid 384, 1, 1" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx and "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    report, sass = _sass(ptx, tmp_path)
    assert "0 bytes spill stores" in report and "setmaxnreg' ignored" not in report, report
    assert "USETMAXREG.DEALLOC" in sass and "USETMAXREG.TRY" in sass


def test_sm90_matmul_keeps_one_wgmma_group_in_flight(tmp_path: Path) -> None:
    """NVIDIA's order: each K step waits down to one wgmma group in flight (the previous step's
    retires), then releases the stage that step read; the last group is waited for after the loop,
    the accumulator passing through that wait so ptxas need not serialize the wgmmas."""
    ptx = _ptx(_matmul("float16", "float32", 128, 128, 64), "sm_90", tmp_path)
    waits = [(m.start(), int(m.group(1))) for m in re.finditer(r"wgmma\.wait_group\.sync\.aligned\s+(\d+);", ptx)]
    assert [n for _, n in waits] == [1, 0], waits
    release = ptx.index("mbarrier.arrive.shared::cta.b64 _,")     # the consumers' release of `empty`
    assert waits[0][0] < release < waits[1][0]
    report, sass = _sass(ptx, tmp_path)
    assert "serialized" not in report, report
    assert sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x1") == 1 and sass.count("WARPGROUP.DEPBAR.LE gsb0, 0x0") == 1


def test_releasing_a_stage_before_its_wgmma_group_retires_is_a_race(monkeypatch) -> None:
    """The consumers' release of `empty` moved above the wait_group 1 that retires the group
    reading the stage: the producer's refill overwrites what that wgmma may still be reading."""
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault
    def retire_after_release(text: str) -> str:
        lines = text.splitlines()
        wait = next(i for i, line in enumerate(lines) if re.search(r"wgmma\.wait_group\.sync\.aligned\s+1;", line))
        release = next(i for i in range(wait, len(lines)) if "mbarrier.arrive.shared::cta.b64 _," in lines[i])
        lines.insert(release + 1, lines.pop(wait))
        return "\n".join(lines)

    edit_ptx(monkeypatch, retire_after_release)
    module = _module(_matmul("float16", "float32", 128, 128, 64))
    a, b, c = _inputs("float16", 128, 128, 6 * 64)
    with pytest.raises((DeviceFault, TileirasError), match="write-after-read"):
        _run(module, (1, 1, 1), [a, b, c])


def test_sm90_unspecialized_pipeline_keeps_one_wgmma_group_in_flight(monkeypatch, tmp_path: Path) -> None:
    """Without the producer warpgroup every thread, after its wait_group 1, releases the stage the
    previous K step read and waits for everyone's release; then thread 0 refills it by TMA."""
    from tileiras.tileas import warp_roles

    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))   # not the suite's cache: other code
    monkeypatch.setattr(warp_roles, "decide", lambda k: (None, "turned off by the test"))
    module = _module(_matmul("float16", "float32", 128, 128, 64))
    a, b, c = _inputs("float16", 128, 128, 6 * 64)
    out = _run(module, (1, 1, 1), [a, b, c])[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(out - ref).max() <= 1e-4 * max(1.0, np.abs(ref).max())
