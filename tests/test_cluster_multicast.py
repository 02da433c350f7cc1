"""Multicast TMA in a kernel split over a cluster (sm_90, lowering/multicast.py): TileGym's persistent
matmul at 128x512x64 with num_ctas=4 runs as 4 CTAs of 128x128; every CTA reads the same 128x64 A
tile, which each CTA now loads a quarter of (32 rows), multicast to all four, where before each
loaded all of it. NVIDIA's (2x2 split) multicasts both operands: 5 UTMALDG.2D.MULTICAST."""

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
sys.path.insert(0, str(ROOT / "tests"))

from accumulation import assert_accumulated, full_precision  # noqa: E402
from emulator_runs import edit_ptx  # noqa: E402

PERSISTENT = "tg_matmul_persistent_f16_128x512x64"
MULTICAST = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
REMOTE = re.compile(r"\{ \.reg \.b32 ra; mapa\.shared::cluster\.u32 ra, (%r\d+), (\d); "
                    r"mbarrier\.arrive\.shared::cluster\.b64 _, \[ra\]; \}")


def _module(name: str):
    from tileiras.frontend import load_module

    path = TILEGYM / f"{name}.tileirbc"
    return load_module(path.read_bytes(), path.name), path.read_bytes()


def _ptx(name: str, gpu: str, *extra: str) -> tuple[str, str]:
    """(PTX, what the compiler printed: its remarks) of the kernel compiled for `gpu`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "k.ptx"
        done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit=ptx",
                               "--gpu-name", gpu, str(TILEGYM / f"{name}.tileirbc"), "-o", str(out), *extra],
                              capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        return out.read_text(), done.stdout + done.stderr


def test_the_shared_operand_is_multicast_in_slices() -> None:
    """A: one 64x32 slice a CTA (tensor map box), mask 0xf for every rank; B: each CTA's own two
    64x64 boxes. The empty barriers count 128 threads x 4 CTAs; 4 remote arrivals per release;
    a cluster barrier after the mbarrier init and before the invalidation."""
    ptx, said = _ptx(PERSISTENT, "sm_90", "--remarks=memory")
    assert "RemarkTmaMulticast\n" in said and "Masks = 0xf, 0xf, 0xf, 0xf" in said
    assert ptx.count(MULTICAST) == 5          # 4 prologue stages + the loop's refill
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cta.global") == 10
    arrivals = REMOTE.findall(ptx)
    assert sorted(q for _, q in arrivals) == ["0", "1", "2", "3"]
    assert re.search(r"mov\.b32 \t%r\d+, 512;", ptx)      # the empty barriers' count
    assert ptx.count("barrier.cluster.arrive.relaxed.aligned;") == 1
    assert ptx.count("barrier.cluster.arrive.release.aligned;") == 1
    assert ptx.count("barrier.cluster.wait.acquire.aligned;") == 2
    init = ptx.index("fence.mbarrier_init.release.cluster")
    assert init < ptx.index("barrier.cluster.arrive.relaxed") < ptx.index(MULTICAST)
    assert ptx.rindex("barrier.cluster.wait") < ptx.index("mbarrier.inval")


def test_groups_follow_the_split() -> None:
    """Split 2x2 (NVIDIA's for this kernel): A's rows are shared by the CTAs of one M half (masks
    0x5 / 0xa), B's columns by those of one N half (0x3 / 0xc), NVIDIA's tables; split 1x4: every
    CTA reads the same A, B is each CTA's own."""
    from tileiras.ir.core import Operation
    from tileiras.tileas.multicast_groups import Group, group
    from tileiras.tileaa.clusters import CLUSTER_ATTR, DIMS_ATTR

    def load(dims: tuple) -> Operation:
        return Operation("cuda_tile.load_view_tko", [], [], {DIMS_ATTR: dims})
    entry = Operation("cuda_tile.entry", [], [], {CLUSTER_ATTR: (4, 2, 2)})
    assert group(entry, load(("M", ""))) == Group(2, (0x5, 0xa, 0x5, 0xa), (0, 0, 1, 1))
    assert group(entry, load(("", "N"))) == Group(2, (0x3, 0x3, 0xc, 0xc), (0, 1, 0, 1))
    entry = Operation("cuda_tile.entry", [], [], {CLUSTER_ATTR: (4, 1, 4)})
    assert group(entry, load(("M", ""))) == Group(4, (0xf,) * 4, (0, 1, 2, 3))
    assert group(entry, load(("", "N"))) is None
    assert group(entry, Operation("cuda_tile.load_view_tko", [], [], {})) is None   # not labelled: its own


def test_sm_100_pairs_its_ctas_and_says_so() -> None:
    """sm_100 runs the 4 CTAs as two CTA pairs (tests/test_cta_pair.py): each CTA copies its A rows and
    half of its pair's B, no multicast between the pairs (NVIDIA's multicasts A between them)."""
    ptx, said = _ptx(PERSISTENT, "sm_100", "--remarks=memory")
    assert not re.search(r"cp\.async\.bulk\.tensor\S*multicast", ptx)
    assert "RemarkTmaCtaPair" in said and "half of B's columns" in said, said


@pytest.mark.sweep
@pytest.mark.parametrize("name", [PERSISTENT, PERSISTENT + "_tb"])
def test_no_spills_and_multicast_in_the_sass(name: str, tmp_path: Path) -> None:
    from tileiras.codegen.ptxas import find_ptxas

    ptx = tmp_path / "k.ptx"
    ptx.write_text(_ptx(name, "sm_90")[0])
    cubin = tmp_path / "k.cubin"
    report = subprocess.run([find_ptxas(), "-v", "-arch", "sm_90a", str(ptx), "-o", str(cubin)],
                            capture_output=True, text=True)
    assert "0 bytes spill stores, 0 bytes spill loads" in report.stdout + report.stderr, report.stderr
    sass = subprocess.run([str(Path(find_ptxas()).with_name("cuobjdump")), "-sass", str(cubin)],
                          capture_output=True, text=True).stdout
    assert len(re.findall(r"UTMALDG\.2D\.MULTICAST", sass)) == 5
    assert len(re.findall(r"SYNCS\.ARRIVE\.TRANS64\.RED\.A1T0", sass)) == 4   # the remote releases
    assert len(re.findall(r"UCGABAR_ARV", sass)) == 2


def _run(monkeypatch, edit=None, m: int = 96, n: int = 400, k: int = 384) -> None:
    """The persistent matmul on the emulator (race checker on) and the interpreter, each within the bound its
    K-term f32 accumulation allows of the exact product of random full-precision f16 inputs: one tile, partial
    in M and in N (the last CTA holds 16 of its 128 columns), a K loop of 6 iterations over 5 stages
    (a stage refilled once every CTA has released it). (test_clusters runs 4 tiles a cluster: the
    barriers initialized again for each, behind the cluster barriers.)"""
    from tileiras.runtime import run_arrays

    seen = edit_ptx(monkeypatch, edit or (lambda text: text))
    module, source = _module(PERSISTENT)
    rng = np.random.default_rng(15)
    a64, b64 = full_precision(rng, (m, k), np.float16), full_precision(rng, (k, n), np.float16)
    a, b = a64.astype(np.float16), b64.astype(np.float16)
    c = np.full((m, n), -7, np.float16)
    args = [a, b, c, np.int32(m), np.int32(n), np.int32(k)]
    got = run_arrays(module, PERSISTENT, (1,), args, backend="emulator", gpu_name="sm_90", source=None,
                     filename=f"{PERSISTENT}.tileirbc", check_races=True)
    assert seen and MULTICAST in seen[-1]
    ref = run_arrays(module, PERSISTENT, (1,), args, backend="interpreter")
    for out in (got, ref):      # every element written (none left at -7) and within the bound
        assert_accumulated(np.asarray(out[2]).astype(np.float64), a64 @ b64, a64, b64.T, "f32", out="f16")


def test_the_multicast_pipeline_matches_the_interpreter(monkeypatch) -> None:
    _run(monkeypatch)


def _release_locally(text: str) -> str:
    """Each thread's 4 releases (one per CTA of the cluster) made on its own CTA's barrier: a CTA
    refills a stage once its own threads are done with it, not its peers'."""
    def local(found: re.Match) -> str:
        return f"mbarrier.arrive.shared::cta.b64 _, [{found[1]}];"
    out, n = REMOTE.subn(local, text)
    assert n == 4
    return out


def test_a_stage_refilled_before_the_peers_release_it_is_a_race(monkeypatch) -> None:
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault

    with pytest.raises((DeviceFault, TileirasError), match="write-after-read"):
        _run(monkeypatch, _release_locally)


@pytest.mark.sweep
def test_a_2x2_split_multicasts_both_operands(monkeypatch, tmp_path: Path) -> None:
    """NVIDIA's split of this kernel (64x256 a CTA): A and B each shared by 2 CTAs, a stage
    released in 3 CTAs (the arrivals to the others guarded by the rank's table), 5 multicast boxes
    a stage as NVIDIA's; partial tiles in M and N, race checker on."""
    from tileiras.tileaa import clusters

    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path))   # the compiler's code is patched
    monkeypatch.setattr(clusters, "_factors", lambda c, tm, tn: (2, 2))
    seen = []

    def keep(text: str) -> str:
        seen.append(text)
        return text
    _run(monkeypatch, keep, m=144, n=784)
    assert seen[-1].count(MULTICAST) == 25 and "m64n256k16" in seen[-1]
