"""CTA pairs on sm_100 (tileaa/clusters.py `PAIR_ATTR`, tileas/cta_pairs.py, lowering/cta_pair.py): a kernel whose hints ask
for clusters of 2 (cutile-python's MatMul sample: `num_ctas=ct.ByTarget(sm_100=2)`) runs its K loop's
mma as one `tcgen05.mma.cta_group::2` over CTAs 2i and 2i+1, as NVIDIA's compiler does: each CTA holds
half of the M rows and copies half of B, the leader issues the MMAs for both. Before: one CTA computed
the whole 128x256 tile with cta_group::1 (and the cluster hint was dropped)."""

from __future__ import annotations

import re
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from accumulation import assert_accumulated, full_precision  # noqa: E402
from emulator_runs import edit_ptx, emulate, removing  # noqa: E402
from test_tile_layer import _module, _ptx  # noqa: E402
from tilegym_modules import tilegym  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "tilegym" / "bytecode"


@lru_cache(maxsize=None)
def _kernel(dtype: str, tm: int, tn: int, tk: int) -> bytes:
    """The MatMul sample (clusters of 2 on sm_100) at these tiles."""
    with tilegym() as (configs, generate):
        base = next(c for c in configs.all_configs() if c.name == "cp_matmul_f16_128x256x64")
        A = configs.A
        out = "float16" if dtype.startswith("float8") else dtype
        return generate.export(configs.Config(f"pair_{tm}x{tn}x{tk}", base.module, base.kernel,
                                              (A(dtype, 4096, 4096), A(dtype, 4096, 4096), A(out, 4096, 4096),
                                               tm, tn, tk)))


def _run(data: bytes, dtype: str, m: int, n: int, k: int, grid: int) -> None:
    """The emulator's C (race checker on) against numpy: random full-precision inputs, within the bound of an f32
    sum of K products rounded to the output type."""
    import ml_dtypes

    np_type = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float8_e4m3fn": ml_dtypes.float8_e4m3fn}[dtype]
    out_type = np.float16 if dtype.startswith("float8") else np_type
    rng = np.random.default_rng(m + n + k)
    a64, b64 = full_precision(rng, (m, k), np_type), full_precision(rng, (k, n), np_type)
    a, b = a64.astype(np_type), b64.astype(np_type)
    got = emulate(_module(data), [a, b, np.full((m, n), np.nan, out_type)], "sm_100", (grid, 1, 1))[2]
    assert_accumulated(np.asarray(got).astype(np.float64), a64 @ b64, a64, b64.T, "f32",
                       out="bf16" if dtype == "bfloat16" else "f16")


def test_the_cluster_pass_pairs_the_ctas_along_m_on_sm_100_only() -> None:
    from tileiras.frontend import load_module
    from tileiras.tileaa.clusters import PAIR_ATTR, plan, split_over_cluster

    def entry():
        path = CORPUS / "cp_matmul_f16_128x256x64.tileirbc"
        module = load_module(path.read_bytes(), path.name)
        return next(op for op in module.walk() if op.name == "cuda_tile.entry")

    assert plan(entry(), "sm_100")[0] == (2, 2, 1)
    split = entry()
    split_over_cluster(split, "sm_100")
    assert split.attributes[PAIR_ATTR]
    assert {tuple(op.results[0].type.shape) for op in split.walk() if op.name == "cuda_tile.mmaf"} == {(64, 256)}
    assert plan(entry(), "sm_90")[0] is None      # the sample asks for clusters on sm_100 only


def test_the_pair_runs_cta_group_2_as_nvidias(tmp_path: Path) -> None:
    """What NVIDIA's 13.5 emits for this sample on sm_100 (its PTX, captured): cta_group::2 alloc,
    MMAs and multicast commits, TMA loads completing on the leader's mbarrier, the pair's bytes
    announced by the leader only, a cluster barrier after the mbarriers' initialization."""
    ptx = _ptx((CORPUS / "cp_matmul_f16_128x256x64.tileirbc").read_bytes(), "sm_100", tmp_path)
    assert ".reqnctapercluster 2" in ptx
    assert len(re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16", ptx)) == 4      # K tile 64: 4 MMAs of K 16
    assert "tcgen05.mma.cta_group::1" not in ptx
    for form in ("tcgen05.alloc.cta_group::2", "tcgen05.relinquish_alloc_permit.cta_group::2",
                 "tcgen05.dealloc.cta_group::2",
                 "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64",
                 "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.cta_group::2",
                 "mapa.shared::cluster.u32", "fence.mbarrier_init.release.cluster",
                 "barrier.cluster.arrive.relaxed.aligned"):
        assert form in ptx, form
    # A: 64 rows x 64 of K, B: half of its 256 columns, in each CTA: 24 KB, announced twice over
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in ptx and len(re.findall(r"selp\.b32 \t%r\d+, 49152, 0,", ptx)) == 1
    # the instruction descriptor: M = 128 over the pair (>> 4 at bit 24), N = 256 (>> 3 at bit 17)
    idesc = (1 << 4) | (1 << 16) | ((256 >> 3) << 17) | ((128 >> 4) << 24)
    assert re.search(rf"\b{idesc}\b", ptx)


def test_the_pair_is_told_in_the_remarks_and_the_schedule(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit=ptx",
                           "--gpu-name", "sm_100", "--remarks=tensorcore", "--print-ir-after-all",
                           str(CORPUS / "tg_bmm_persistent_f16_128x256x64_sm100.tileirbc"), "-o",
                           str(tmp_path / "k.ptx")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert "CTAs 2i and 2i+1 share one mma as a CTA pair" in said
    assert "Instruction = Tensor-core SM100 (tcgen05.mma.cta_group::2.kind::f16)" in said
    assert "Shape = [128, 256, 16]" in said
    assert "a CTA pair runs its mma (tcgen05.mma.cta_group::2)" in said


@pytest.mark.parametrize("dtype,tiles,shape,grid", [
    ("float16", (128, 256, 64), (200, 512, 200), 4),            # partial tiles in M and K, 2 x 2 clusters
    ("bfloat16", (128, 128, 64), (128, 256, 640), 2),           # a K loop of 10 (the stages go round)
    pytest.param("float8_e4m3fn", (128, 256, 128), (128, 256, 384), 1, marks=pytest.mark.sweep),
    ("float16", (256, 256, 64), (512, 256, 192), 2),            # M = 256 over the pair: 128 rows a CTA
    pytest.param("float16", (256, 128, 64), (300, 256, 64), 4, marks=pytest.mark.sweep),
])
def test_the_pair_matches_numpy_under_the_race_checker(dtype: str, tiles: tuple, shape: tuple, grid: int,
                                                       tmp_path: Path) -> None:
    data = _kernel(dtype, *tiles)
    assert "tcgen05.mma.cta_group::2" in _ptx(data, "sm_100", tmp_path)
    _run(data, dtype, *shape, grid)


def test_the_pair_without_its_cluster_barrier_is_reported(monkeypatch) -> None:
    """The peer's copies complete on the leader's mbarriers: without the cluster barrier after their
    initialization the race checker reports the use of an mbarrier not known to be initialized."""
    from tileiras.emulator import EmulatorError

    edit_ptx(monkeypatch, removing(r"\tbarrier\.cluster\.(arrive\.relaxed|wait\.acquire)\.aligned;\n", 4))
    with pytest.raises(EmulatorError, match="whose initialization by thread 0 is not visible"):
        _run(_kernel("float16", 128, 256, 64), "float16", 128, 256, 128, 1)


def test_the_pair_with_the_peers_bytes_unannounced_is_reported(monkeypatch) -> None:
    """The leader announces both CTAs' bytes on its full barrier; announcing only its own lets the MMA
    read the peer's stage before it landed."""
    from tileiras.emulator import EmulatorError

    edit_ptx(monkeypatch, lambda ptx: re.sub(r"(selp\.b32 \t%r\d+), 49152,", r"\1, 24576,", ptx))
    with pytest.raises(EmulatorError, match="read before the mbarrier wait"):
        _run(_kernel("float16", 128, 256, 64), "float16", 128, 256, 128, 1)


def test_each_cta_alone_where_the_pair_cannot_run(monkeypatch, tmp_path: Path) -> None:
    """Where the loop is not the pair's form (here: the pair refused), each CTA runs its 64 rows with
    cta_group::1 and reads its accumulator through the pair's register layout by a conversion."""
    from tileiras.tileas import cta_pairs

    monkeypatch.setattr(cta_pairs, "plan", lambda *args, **kwargs: None)
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))   # not the pair's cached PTX
    seen = edit_ptx(monkeypatch, lambda ptx: ptx)
    _run(_kernel("float16", 128, 256, 64), "float16", 200, 512, 200, 4)
    assert "tcgen05.mma.cta_group::1" in seen[0] and "cta_group::2" not in seen[0]


@lru_cache(maxsize=None)
def _persistent_bmm(batch: int, m: int, n: int, k: int) -> bytes:
    """TileGym's persistent bmm at 128x256x64 (clusters of 2 on sm_100), its sizes made small."""
    with tilegym() as (configs, generate):
        base = next(c for c in configs.all_configs() if c.name == "tg_bmm_persistent_f16_128x256x64_sm100")
        A = configs.A
        params = (A("float16", batch, m, k), A("float16", batch, k, n), A("float16", batch, m, n), base.params[3],
                  m, n, k, *base.params[7:])
        return generate.export(configs.Config("pair_bmm", base.module, base.kernel, params, hints=base.hints))


def test_a_persistent_kernels_pair_matches_numpy(tmp_path: Path) -> None:
    """The persistent bmm: each cluster runs 3 of the 6 tiles one after another, every tile's MMAs into
    the same tensor memory (the pair meets, tcgen05 fences around a release / acquire cluster barrier,
    before the leader's MMAs overwrite what the peer's last epilogue read). Unspecialized: every thread
    waits for the leader's multicast commit."""
    data = _persistent_bmm(2, 384, 256, 192)
    ptx = _ptx(data, "sm_100", tmp_path)
    assert ".reqnctapercluster 2" in ptx and "tcgen05.mma.cta_group::2" in ptx
    rng = np.random.default_rng(9)
    a64, b64 = full_precision(rng, (2, 384, 192), np.float16), full_precision(rng, (2, 192, 256), np.float16)
    a, b = a64.astype(np.float16), b64.astype(np.float16)
    got = emulate(_module(data), [a, b, np.full((2, 384, 256), np.nan, np.float16), np.int32(2)], "sm_100",
                  (2, 1, 1))[2]
    for i in range(2):      # each batch an f32 sum of 192 products, rounded to f16
        assert_accumulated(np.asarray(got[i]).astype(np.float64), a64[i] @ b64[i], a64[i], b64[i].T, "f32", out="f16")


def test_the_next_tiles_mmas_unordered_with_the_peers_epilogue_are_reported(monkeypatch, tmp_path: Path) -> None:
    """Without the release / acquire cluster barrier (relaxed: it publishes only the mbarriers'
    initialization) the leader's next MMAs write the peer's tensor memory its epilogue may still read."""
    from tileiras.emulator import EmulatorError
    from tileiras.lowering import cta_pair, multicast

    monkeypatch.setattr(cta_pair, "meet", lambda k, tensor_memory=False: multicast.sync(k, relaxed=True))
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(9)
    a = (rng.integers(-8, 8, (2, 384, 192)) / 4).astype(np.float16)
    b = (rng.integers(-8, 8, (2, 192, 256)) / 4).astype(np.float16)
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(write-after-read\)"):
        emulate(_module(_persistent_bmm(2, 384, 256, 192)),
                [a, b, np.zeros((2, 384, 256), np.float16), np.int32(2)], "sm_100", (2, 1, 1))


@lru_cache(maxsize=None)
def _mxfp8(tm: int, tn: int, tk: int, swizzled: bool = False) -> bytes:
    """cutile-python's block-scaled sample (MXFP8, clusters of 2 on sm_100) at these tiles (`swizzled`:
    its scales in cuTile's (MN / 128, K / 128, 32, 16) layout)."""
    name = "cp_mxfp8_matmul_swizzled_256x256x128" if swizzled else "cp_mxfp8_matmul_256x256x128"
    with tilegym() as (configs, generate):
        base = next(c for c in configs.all_configs() if c.name == name)
        params = list(base.params)
        params[5:8] = [tm, tn, tk]
        if swizzled:    # the scale arrays' shapes follow K (their K / 128 dimension)
            A, e8 = configs.A, base.params[1].dtype
            m, k = base.params[0].shape
            n = base.params[2].shape[1]
            params[1], params[3] = A(e8, m // 128, k // 128, 32, 16), A(e8, n // 128, k // 128, 32, 16)
        return generate.export(configs.Config(f"pair_mxfp8_{tm}x{tn}x{tk}", base.module, base.kernel,
                                              tuple(params)))


def _run_mxfp8(data: bytes, m: int, n: int, k: int, grid: int, swizzled: bool = False) -> None:
    import ml_dtypes

    from test_clusters import _swizzle

    rng = np.random.default_rng(16)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.float8_e4m3fn)
    sa = rng.integers(120, 135, (m, k // 32)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    sb = rng.integers(120, 135, (k // 32, n)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    scales = (_swizzle(sa), _swizzle(np.ascontiguousarray(sb.T))) if swizzled else (sa, sb)
    got = emulate(_module(data), [a, scales[0], b, scales[1], np.zeros((m, n), np.float32)], "sm_100",
                  (grid, 1, 1))[4]
    scaled_a = a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, axis=1)
    scaled_b = b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, axis=0)
    assert_accumulated(np.asarray(got).astype(np.float64), scaled_a @ scaled_b, scaled_a, scaled_b.T, "f32")


def test_a_block_scaled_pair_with_an_mma_warp_matches_numpy(tmp_path: Path) -> None:
    """MXFP8 at 256x128x128 (128 rows a CTA, warp-specialized): each CTA's epilogue warps restage its own
    scales, the peer's arrive on the leader's `ready` mbarrier (release at cluster scope), the leader's
    tcgen05.cp.cta_group::2 copies each CTA's restaged scales into its own tensor memory, then
    tcgen05.mma.cta_group::2 block_scale. (The 512-thread 256x256 samples, unspecialized, meet at a
    cluster barrier after the restaging instead: tests/test_clusters.py.)"""
    data = _mxfp8(256, 128, 128)
    ptx = _ptx(data, "sm_100", tmp_path)
    assert "tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale" in ptx
    assert "tcgen05.cp.cta_group::2.32x128b.warpx4" in ptx
    assert "mbarrier.arrive.release.cluster.shared::cluster.b64" in ptx
    _run_mxfp8(data, 256, 256, 384, 2)


def test_a_block_scaled_pair_without_the_restaging_barrier_is_reported(monkeypatch) -> None:
    """Unspecialized, both CTAs meet at a cluster barrier after restaging their scales each iteration:
    without it the leader's tcgen05.cp reads the peer's restaged bytes unordered."""
    from tileiras.emulator import EmulatorError

    def drop(ptx: str) -> str:
        lines = ptx.split("\n")
        at = [i for i, line in enumerate(lines) if "barrier.cluster.arrive.release.aligned" in line
              or "barrier.cluster.wait.acquire.aligned" in line]
        assert len(at) == 4        # the tile's pipeline start (tensor memory), then the restaging's
        for i in at[2:]:
            lines[i] = ""
        return "\n".join(lines)

    edit_ptx(monkeypatch, drop)
    with pytest.raises(EmulatorError, match=r"data race \(read-after-write\).*tcgen05\.cp\.cta_group::2"):
        _run_mxfp8((CORPUS / "cp_mxfp8_matmul_256x256x128.tileirbc").read_bytes(), 256, 256, 256, 1)


@pytest.mark.parametrize("tk,swizzled", [(64, False), pytest.param(256, False, marks=pytest.mark.sweep),
                                         (256, True)])
def test_block_scaled_pairs_at_other_k_tiles(tk: int, swizzled: bool, tmp_path: Path) -> None:
    """The samples' K tile halved and doubled (as NVIDIA's compiles them: pairs, no spills). K = 64: A's and
    B's scale bytes (128 x 2 each) fill no whole round of the 512 threads that restage them (the last round
    guarded); K = 256: two 32-bit cells of scale factors a row (as fp4's); swizzled at K = 256, the scales'
    two reshapes meet on one dimension (the cluster split took that for a conflict). Before: mma.sync with
    FMA block scaling, 304 / 684 / 3280 bytes of spills."""
    from test_tile_layer import _ptxas_report

    data = _mxfp8(256, 256, tk, swizzled)
    ptx = _ptx(data, "sm_100", tmp_path)
    assert ptx.count("tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale") == tk // 32
    report = _ptxas_report(ptx, "sm_100a", tmp_path)
    assert "0 bytes spill stores" in report, report
    _run_mxfp8(data, 256, 256, 2 * tk, 1, swizzled)
