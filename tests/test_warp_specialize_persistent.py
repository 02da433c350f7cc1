"""Warp specialization of persistent GEMMs on sm_90, sm_100 and sm_120 (issue 34): a top-level loop over output
tiles whose body runs the pipelined K loop once a tile (tileas/warp_roles.persistent). The ring and its
mbarriers are set up once before the tile loop, the TMA producer warp (and sm_100's MMA warp) runs the
tile loop too, and the roles count the ring's uses on across tiles (no reset, no drain between tiles). Checked by our remark and PTX, and on the
emulator with the race checker against numpy / the interpreter, with CTAs running several tiles (an
uneven share) and K loops shorter and longer than the ring, neither a multiple of its depth."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
for sub in ("tests/generated", "tests/realistic", "benchmarks"):
    sys.path.insert(0, str(ROOT / sub))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import export  # noqa: E402
import grammar  # noqa: E402
import launch  # noqa: E402
import variant_reference as reference  # noqa: E402
from emulator_runs import emulate_and_interpret  # noqa: E402

TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"
GEMM = "g_gemm_f16_rr_64x64x32_zero_persistent_none_aligned_h0_v13p4"


def _compile(bytecode: Path, gpu: str, tmp_path: Path) -> tuple[str, str]:
    """(PTX, remarks) of our compile."""
    out = tmp_path / f"{bytecode.stem}.{gpu}.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit=ptx",
                           "--remarks=all", "--gpu-name", gpu, str(bytecode), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return out.read_text(), done.stdout + done.stderr


def _roles(remarks: str) -> str:
    return re.search(r"Roles = (.*)", remarks).group(1)


@pytest.mark.parametrize("bytecode", [
    pytest.param(lambda: export.bytecode(grammar.parse(GEMM), "sm_90"), id="generated-64x64x32"),
    pytest.param(lambda: TILEGYM / "cp_matmul_persistent_f16_128x256x64.tileirbc", id="cutile-128x256x64"),
    pytest.param(lambda: TILEGYM / "tg_bmm_persistent_f16_64x64x64_sm90.tileirbc", id="tilegym-bmm-64x64x64"),
])
def test_a_persistent_gemm_is_warp_specialized_on_sm_90(bytecode, tmp_path: Path) -> None:
    """A TMA producer warp giving registers back, the mbarriers initialized once (before the tile loop:
    one init a barrier), the producer's stage waits in a loop nested in its own tile loop."""
    ptx, remarks = _compile(bytecode(), "sm_90", tmp_path)
    assert _roles(remarks).startswith("warp-specialized:"), _roles(remarks)
    assert "one thread issues TMA copies" in _roles(remarks)
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx
    stages = int(re.search(r"Pipeline = (\d+) stages", remarks).group(1))
    assert ptx.count("mbarrier.init.shared") == 2 * stages
    assert ptx.count("mbarrier.inval.shared") == 2 * stages      # once, after the tile loop
    assert len(re.findall(r"// wait: stage empty", ptx)) == 1      # the producer's, for every tile


def test_sm_100_persistent_gemm_has_an_mma_warp_running_the_tile_loop(tmp_path: Path) -> None:
    """The tcgen05 form: a TMA producer warp and an MMA warp, both running the tile loop; the epilogue
    warps release each tile's accumulators on the accumulator-free mbarrier (one arrival a thread), which
    the MMA warp waits for before a tile's first MMAs."""
    ptx, remarks = _compile(export.bytecode(grammar.parse(GEMM), "sm_100"), "sm_100", tmp_path)
    assert _roles(remarks).startswith("warp-specialized (tcgen05):"), _roles(remarks)
    [free] = re.findall(r"try_wait\.parity\.shared::cta\.b64 p, \[(%r\d+)\].*// wait: accumulators read", ptx)
    assert re.search(rf"mbarrier\.init\.shared::cta\.b64 \[{free}\], 128;", ptx)   # one arrival an epilogue thread
    assert len(re.findall(r"// wait: stage empty", ptx)) == 1


def test_sm_120_persistent_gemm_has_mma_sync_consumers_running_the_tile_loop(tmp_path: Path) -> None:
    """sm_120's form (mma.sync consumers beside a TMA producer warpgroup giving registers back) runs the
    persistent loop as sm_90's does: the ring set up once, the producer's stage waits in its own tile loop."""
    ptx, remarks = _compile(export.bytecode(grammar.parse(GEMM), "sm_120"), "sm_120", tmp_path)
    assert _roles(remarks).startswith("warp-specialized:") and "persistent" in _roles(remarks), _roles(remarks)
    assert "setmaxnreg.dec.sync.aligned.u32 40" in ptx and "mma.sync" in ptx
    stages = int(re.search(r"Pipeline = (\d+) stages", remarks).group(1))
    assert ptx.count("mbarrier.init.shared") == 2 * stages
    assert len(re.findall(r"// wait: stage empty", ptx)) == 1


def _persistent_launch(name: str, k_iters: int, tiles_m: int, ctas: int) -> tuple:
    """The variant and its launch on (tiles_m x 2) output tiles, `k_iters` K tiles, `ctas` CTAs."""
    v = grammar.parse(name)
    spec = launch.launch(v)
    m0, _ = spec.params[2].shape
    k0 = spec.params[0].shape[1]
    m, k = tiles_m * v["tm"], k_iters * v["tk"]

    def resized(p):
        if not isinstance(p, launch.Arr):
            return p
        return dataclasses.replace(p, shape=tuple(m if d == m0 else k if d == k0 else d for d in p.shape))
    return v, dataclasses.replace(spec, params=tuple(resized(p) for p in spec.params), grid=(ctas, 1, 1))


# (variant, K tiles, M tiles, CTAs): 10 or 12 tiles over 3 CTAs (4 + 3 + 3 or 4 each); K loops of 3 and 11
# against rings of 8 (64x64x32) and 6 (64x128x32) stages: the ring's phase turns inside and across tiles
PERSISTENT = [
    (GEMM, 11, 5, 3),
    (GEMM, 3, 6, 3),
    (GEMM, 3, 1, 3),      # 2 tiles over 3 CTAs: one runs none (its producer and consumers meet once, then leave)
    ("g_gemm_f16_rr_64x128x32_zero_persistent_subtile_aligned_h0_v13p4", 7, 5, 3),   # a shared epilogue buffer
    # mma.sync consumers fed by a cp.async producer warpgroup; C restaged through shared memory beside the ring
    ("g_gemm_bf16_cc_16x128x128_zero_persistent_scale_aligned_ctas2_v13p1", 5, 6, 4),
    pytest.param("g_gemm_tf32_rc_64x64x32_zero_persistent_cast_aligned_h0_v13p4", 5, 5, 3,
                 marks=pytest.mark.sweep),                                            # K-major copies of B
    pytest.param("g_gemm_bf16_rc_128x256x64_zero_persistent_bias_aligned_h0_v13p4", 7, 5, 2,
                 marks=pytest.mark.sweep),     # two consumer warpgroups, the bias' conversion beside the ring
]


# sm_100 (variant, K tiles, M tiles, CTAs): 10 tiles over 2 CTAs; K loops of 5 and 7 against rings of 8 and 4;
# the race checker sees a tile's MMAs overwrite tensor memory the epilogue still reads (no accumulator-free wait)
PERSISTENT_SM100 = [
    (GEMM, 5, 5, 2),
    (GEMM, 3, 1, 3),      # a CTA without a tile
    pytest.param("g_gemm_f16_rr_128x128x64_zero_persistent_none_aligned_h0_v13p4", 7, 5, 2, marks=pytest.mark.sweep),
    pytest.param("g_gemm_f16_rr_128x128x32_zero_persistent_subtile_aligned_h0_v13p4", 5, 5, 2,
                 marks=pytest.mark.sweep),    # the chunked epilogue (tmem_epilogue.py) per tile
    # tf32: the epilogue warps round each tile's stages before the MMA warp reads them, the ring counted over tiles
    ("g_gemm_tf32_rr_64x256x32_undef_persistent_subtile_aligned_lat3_v13p4", 7, 5, 2),
    # C read in place: each chunk's C loaded beside its accumulator columns, after the previous tile's store
    ("g_gemm_e4m3_rr_128x128x128_zero_persistent_alphabeta_aligned_occ2_v13p4", 3, 5, 2),
]


def _on(gpu: str, case):
    """A case of the lists above for `gpu` (its marks kept)."""
    if hasattr(case, "marks"):     # a pytest.param (itself a tuple)
        return pytest.param(gpu, *case.values, marks=case.marks, id=case.id)
    return (gpu, *case)


# sm_120 (mma.sync consumers): 10 tiles over 3 CTAs, a K loop of 7 against its ring
PERSISTENT_SM120 = [(GEMM, 7, 5, 3)]


@pytest.mark.parametrize("gpu,name,k_iters,tiles_m,ctas", [*(_on("sm_90", c) for c in PERSISTENT),
                                                           *(_on("sm_100", c) for c in PERSISTENT_SM100),
                                                           *(_on("sm_120", c) for c in PERSISTENT_SM120)])
def test_persistent_gemm_matches_numpy_under_the_race_checker(gpu: str, name: str, k_iters: int, tiles_m: int,
                                                              ctas: int) -> None:
    v, spec = _persistent_launch(name, k_iters, tiles_m, ctas)
    problems = reference.emulate(v, spec, export.bytecode(v, gpu).read_bytes(), gpu)
    assert not problems, "\n".join(problems)


# cuTile's persistent matmul: (kernel, M, N, K, CTAs); 128x256 tiles (two consumer warpgroups): 3 tiles over 2
# CTAs, 5 K tiles against a ring of 4; f32 32x32x32 (a cp.async producer warpgroup): 12 tiles over 5 CTAs
CUTILE = [
    ("cp_matmul_persistent_f32_32x32x32", 128, 96, 224, 5, "sm_90"),
    ("cp_matmul_persistent_f32_32x32x32", 128, 96, 224, 5, "sm_120"),     # mma.sync consumers
    pytest.param("cp_matmul_persistent_f16_128x256x64", 384, 256, 320, 2, "sm_90", marks=pytest.mark.sweep),
    # sm_100: an MMA warp, the two epilogue warpgroups reading each tile's accumulator in column chunks
    # (tcgen05_roles.chunkable: the tile loop carries the store's token to the next tile)
    ("cp_matmul_persistent_f16_128x256x64", 384, 256, 320, 2, "sm_100"),
]


@pytest.mark.parametrize("name,m,n,k,ctas,gpu", CUTILE)
def test_cutile_persistent_matmul_matches_the_interpreter(name: str, m: int, n: int, k: int, ctas: int, gpu: str,
                                                          tmp_path: Path) -> None:
    from tileiras.frontend import load_module

    bytecode = TILEGYM / f"{name}.tileirbc"
    assert _roles(_compile(bytecode, gpu, tmp_path)[1]).startswith("warp-specialized")
    module = load_module(bytecode.read_bytes(), bytecode.name)
    dtype = np.float16 if "f16" in name else np.float32
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    out, ref = emulate_and_interpret(module, [a, b, np.zeros((m, n), dtype)], gpu, grid=(ctas, 1, 1))
    got, want = out[2].astype(np.float64), ref[2].astype(np.float64)
    assert np.abs(got - want).max() <= 2e-3 * max(1.0, np.abs(want).max())


def test_attention_backward_over_query_groups_matches_the_interpreter(tmp_path: Path) -> None:
    """TileGym's dK/dV kernel: its loop over a GQA group's query heads runs the pipelined loop over query
    tiles once a head and carries the dK, dV accumulators (the consumers' own), K and V loaded once by
    TMA before it. Two heads a group, causal: each CTA's query loop starts at its own tile."""
    from tilegym_modules import tilegym
    from tileiras.frontend import load_module

    b, hkv, group, s, d, tm, tn = 1, 2, 2, 256, 64, 32, 64
    with tilegym() as (configs, generate):
        q, kv = configs.A("float16", b, hkv * group, s, d), configs.A("float16", b, hkv, s, d)
        lse = configs.A("float32", b * hkv * group * s)
        config = configs.Config("dkdv_gqa2", "tg_attention", "_fmha_bwd_dkdv_kernel",
                                (q, kv, kv, q, kv, kv, lse, lse, configs.f32(0.125), d, hkv * group, hkv, s, tm, tn,
                                 group, True), {"occupancy": 2})
        data = generate.export(config)
    bytecode = tmp_path / "dkdv_gqa2.tileirbc"
    bytecode.write_bytes(data)
    assert _roles(_compile(bytecode, "sm_90", tmp_path)[1]).startswith("warp-specialized:")
    module = load_module(bytecode.read_bytes(), bytecode.name)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(q.shape).astype(np.float16), rng.standard_normal(kv.shape).astype(np.float16),
            rng.standard_normal(kv.shape).astype(np.float16), rng.standard_normal(q.shape).astype(np.float16),
            np.zeros(kv.shape, np.float16), np.zeros(kv.shape, np.float16),
            (rng.random(lse.shape) * 2 + 3).astype(np.float32), rng.standard_normal(lse.shape).astype(np.float32),
            np.float32(0.125)]
    out, ref = emulate_and_interpret(module, args, "sm_90", grid=(s // tn, b * hkv, 1))
    for got, want in ((out[4], ref[4]), (out[5], ref[5])):     # dK, dV: within an f16 rounding of their size
        want = want.astype(np.float64)
        assert np.abs(got.astype(np.float64) - want).max() <= 2e-3 * max(1.0, np.abs(want).max())
