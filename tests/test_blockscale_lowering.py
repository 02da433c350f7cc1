"""Block-scaled fp8 matmuls (mmaf_scaled, MXFP8; lowering/ops_blockscale.py) on tensor cores: the
form per target (sm_120: mma.sync ...kind::mxf8f6f4.block_scale with ue8m0 scales; sm_100:
tcgen05.mma ...block_scale with the scale factors copied into tensor memory by tcgen05.cp where
the accumulator leaves columns for them, else fp8 mma.sync per scale block scaled into the
accumulator by FMA), PTX that ptxas assembles without local memory, the remark, and the emulator
running our code against numpy under the race checker (plain (M, K / 32) scales and the swizzled
32x4x4 scale tiles the kernel unswizzles itself)."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import edit_ptx, emulate, removing  # noqa: E402
from test_tile_layer import _module, _ptx, _ptxas_report  # noqa: E402
from tilegym_modules import tilegym  # noqa: E402

E4, E8 = "float8_e4m3fn", "float8_e8m0fnu"
SBS = 32   # elements per scale


@lru_cache(maxsize=None)
def _kernel(tm: int, tn: int, tk: int, swizzled: bool = False, k_tiles: int = 4) -> bytes:
    """cutile-python's BlockScaledMatMul sample at these tiles, specialized for a 2 x 2 grid of them
    over a K of `k_tiles` tiles (the scale arrays 2-D, or 4-D swizzled 32x4x4 as the sample's host packs
    them). 4 tiles of 128 make the scale rows 16 bytes apart, which the bytecode states (div_by 16);
    3 tiles make them 12 bytes apart, which it does not (TileGym's K = 768: 24 bytes)."""
    with tilegym() as (configs, generate):
        return _export(configs, generate, tm, tn, tk, swizzled, k_tiles)


def _export(configs, generate, tm: int, tn: int, tk: int, swizzled: bool, k_tiles: int = 4) -> bytes:
    A = configs.A
    m, n, k = 2 * tm, 2 * tn, k_tiles * tk
    scales = (A(E8, m // 128, k // SBS // 4, 32, 16), A(E8, n // 128, k // SBS // 4, 32, 16)) if swizzled else \
        (A(E8, m, k // SBS), A(E8, k // SBS, n))
    config = configs.Config("block_scaled_matmul", "cp_BlockScaledMatMul", "block_scaled_matmul_kernel",
                            (A(E4, m, k), scales[0], A(E4, k, n), scales[1], A("float32", m, n), tm, tn, tk, SBS))
    return generate.export(config)


def test_sm120_issues_the_block_scaled_mma_sync(tmp_path: Path) -> None:
    ptx = _ptx(_kernel(128, 128, 64), "sm_120", tmp_path)
    assert ".target sm_120a" in ptx          # the block-scaled form exists on the arch-specific target only
    mma = "mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.e4m3.e4m3.f32.ue8m0"
    # 128 x 128 x 64 on 4 warps of 64 x 64: (64 / 16) x (64 / 8) x (64 / 32) instructions a warp, one
    # scale block each
    assert ptx.count(mma) == 64, ptx.count(mma)
    assert "fma.rn.f32" not in ptx
    report = _ptxas_report(ptx, "sm_120a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes stack frame" in report, report


@pytest.mark.parametrize("tm,tn", [(128, 128), (128, 256), (256, 128), (256, 256)])
def test_sm100_runs_on_tcgen05_with_its_scale_factors_in_tensor_memory(tm: int, tn: int, tmp_path: Path) -> None:
    """M = 256 (the sample's num_ctas=2) runs on a CTA pair: 128 rows a CTA, one tcgen05.mma.cta_group::2 of
    M = 256 per scale block (tests/test_cta_pair.py)."""
    ptx = _ptx(_kernel(tm, tn, 128), "sm_100", tmp_path)
    pair = tm == 256
    if pair:
        assert ".reqnctapercluster 2, 1, 1" in ptx
        tm = 128
    group = 2 if pair else 1
    mma = f"tcgen05.mma.cta_group::{group}.kind::mxf8f6f4.block_scale.scale_vec::1X"
    assert ptx.count(mma) == 4 * (tm // 128)          # K = 128: 4 scale blocks, per 128-row half
    assert ptx.count(f"tcgen05.cp.cta_group::{group}.32x128b.warpx4") == (tm + tn) // 128
    assert "mma.sync" not in ptx and "fence.proxy.async.shared::cta" in ptx
    # warp-specialized (NVIDIA's: 256 threads): 128 epilogue threads a 128 x 128 accumulator, as any tcgen05 matmul,
    # and the TMA, MMA and two idle warps (setmaxnreg: the SM holds one such CTA); a pair's CTAs, whose SM holds
    # more than one (tileas/settled_split.ctas_alone), the TMA and MMA warps alone
    assert f".reqntid {tm * tn // 128 + (64 if pair else 128)}, 1, 1" in ptx
    # the producer warp's loop: A, B (boxes of 128 rows, 128 bytes wide) and B's (K / 32, N) scales (one
    # unswizzled box) by TMA; A's (M, K / 32) scales, 4-byte rows (TMA's box rows are whole 16-byte units), by
    # cp.async
    if pair:    # A and half of B complete on the leader's barrier, B's scales on the CTA's own
        assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                         ".cta_group::2") == 2
        assert ptx.count("cp.async.bulk.tensor.2d.shared::cta.global.tile") == 1
    else:
        assert ptx.count("cp.async.bulk.tensor.2d.shared::cta.global.tile") == tm // 128 + tn // 128 + 1
    assert re.search(r"cp\.async\.ca\.shared\.global \[[^]]+\], \[[^]]+\], 4, ", ptx) and "cp.async.cg" not in ptx
    report = _ptxas_report(ptx, "sm_100a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes stack frame" in report, report


def test_sm100_tensor_maps_are_nvidias_but_for_its_cta_pairs_boxes(tmp_path: Path) -> None:
    """The hidden tensor maps of the 128 x 128 x 128 sample (launch metadata) against NVIDIA's (test_nv_host.py,
    read off its callbacks): the same views, element types and strides; A's scales have none (cp.async); B's
    scales one unswizzled box of the tile's columns by its K / 32 rows. NVIDIA's CTA pair halves each CTA's
    boxes (64 rows of A, 64 columns of B, in 64B atoms, and of B's scales)."""
    from tileiras.ir.record import replace
    import json

    from test_nv_host import KERNELS
    from tileiras.codegen.tma_params import TmaParam

    src = tmp_path / "k.tileirbc"
    src.write_bytes(_kernel(128, 128, 128))
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--emit-metadata",
                           "--gpu-name", "sm_100", str(src), "-o", str(tmp_path / "k.ptx")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    [kernel] = json.loads((tmp_path / "k.ptx.json").read_text())["kernels"]
    ours = [TmaParam.from_json(doc) for doc in kernel["tma"]]
    theirs = KERNELS[("mxfp8_128x128x128", "sm_100")][1]
    pair = [((128, 128), "128B"), ((128, 128), "128B"), ((128, 4), "none"), ((32, 128), "128B")]
    assert ours == [replace(t, box=box, swizzle=swizzle) for t, (box, swizzle) in zip(theirs, pair)]


def test_sm100_scales_fp8_mma_sync_partials_by_fma(tmp_path: Path) -> None:
    """64 x 64 has no 128-row scale chunks."""
    ptx = _ptx(_kernel(64, 64, 64), "sm_100", tmp_path)
    # 4 warps of 32 x 32: (32 / 16) x (32 / 8) x (64 / 32) instructions a warp, each scaled by 4 FMAs
    assert ptx.count("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == 16
    assert "kind::mxf8f6f4" not in ptx and ptx.count("fma.rn.f32") >= 4 * 16
    report = _ptxas_report(ptx, "sm_100a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes stack frame" in report, report


def test_the_remark_names_the_instruction(tmp_path: Path) -> None:
    src = tmp_path / "k.tileirbc"
    src.write_bytes(_kernel(64, 64, 64))
    seen = {}
    for gpu in ("sm_120", "sm_100"):
        done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", gpu,
                               "--remarks=tensorcore", "--remark-format=command-line", str(src),
                               "-o", str(tmp_path / "k.ptx")], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        seen[gpu] = done.stdout + done.stderr
    assert "mma.sync.kind::mxf8f6f4.block_scale" in seen["sm_120"], seen["sm_120"]
    assert "block scales by FMA" in seen["sm_100"] and "FMA instructions instead" not in seen["sm_100"], seen["sm_100"]
    src.write_bytes(_kernel(128, 128, 64))
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", "sm_100",
                           "--remarks=tensorcore", "--remark-format=command-line", str(src), "-o", str(tmp_path / "k.ptx")],
                          capture_output=True, text=True, cwd=ROOT)
    assert "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale" in done.stdout + done.stderr, done.stderr


def _inputs(m: int, n: int, k: int, seed: int = 1):
    import ml_dtypes

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.float8_e4m3fn)
    # exponents around 2^0 (127), both ways, so that a wrong scale shows
    sa = rng.integers(120, 135, (m, k // SBS)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    sb = rng.integers(120, 135, (k // SBS, n)).astype(np.uint8).view(ml_dtypes.float8_e8m0fnu)
    return a, sa, b, sb


def _reference(a, sa, b, sb) -> np.ndarray:
    A = a.astype(np.float64) * np.repeat(sa.astype(np.float64), SBS, axis=1)
    B = b.astype(np.float64) * np.repeat(sb.astype(np.float64), SBS, axis=0)
    return A @ B


def _swizzle(scale: np.ndarray) -> np.ndarray:
    """The sample host's 32x4x4 packing of an (MN, K / 32) scale matrix: (MN / 128, K / 128, 32, 16),
    element [m0, k0, m1, 4 m2 + k1] = scale[128 m0 + 32 m2 + m1, 4 k0 + k1]."""
    mn, ks = scale.shape
    return np.ascontiguousarray(scale.reshape(mn // 128, 4, 32, ks // 4, 4).transpose(0, 3, 2, 1, 4)
                                .reshape(mn // 128, ks // 4, 32, 16))


# K tiles of 64 give 2-byte scale rows (staged into the pipeline through registers); of 128, A's 4-byte scale
# rows that cp.async copies into the loop's pipeline stages beside the TMA boxes of A, B and B's scales
@pytest.mark.parametrize("gpu,tile,tk,instruction", [
    ("sm_120", 64, 64, "kind::mxf8f6f4.block_scale"), ("sm_120", 128, 128, "kind::mxf8f6f4.block_scale"),
    ("sm_100", 64, 64, "fma.rn.f32"), ("sm_100", 128, 64, "tcgen05.cp"), ("sm_100", 128, 128, "tcgen05.cp")],
    ids=["sm_120-mma.sync", "sm_120-mma.sync-cp.async", "sm_100-fma", "sm_100-tcgen05", "sm_100-tcgen05-cp.async"])
def test_block_scaled_matmul_matches_numpy_under_the_race_checker(gpu: str, tile: int, tk: int, instruction: str,
                                                                   tmp_path: Path) -> None:
    tm = tn = tile
    assert instruction in _ptx(_kernel(tm, tn, tk), gpu, tmp_path)
    module = _module(_kernel(tm, tn, tk))
    m, n, k = tm, tn, 2 * tk      # a K loop of 2 iterations: the accumulator goes round in registers
    a, sa, b, sb = _inputs(m, n, k)
    c = np.zeros((m, n), np.float32)
    out = emulate(module, [a, sa, b, sb, c], gpu)[4]
    ref = _reference(a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.sweep
@pytest.mark.parametrize("tm,tn", [(128, 256), (256, 128), (256, 256)])
def test_wide_tiles_match_numpy_under_the_race_checker(tm: int, tn: int) -> None:
    """Two epilogue warpgroups (320 threads; 256 x 256: each CTA of a pair, 128 x 256): the producer warp's
    first thread issues the boxes of A, B and B's scales and announces their bytes, its lanes copy A's
    scales by cp.async; one full mbarrier counts them all. A K loop of 3 wraps the 3 stages."""
    module = _module(_kernel(tm, tn, 128))
    a, sa, b, sb = _inputs(tm, tn, 3 * 128, seed=3)
    out = emulate(module, [a, sa, b, sb, np.zeros((tm, tn), np.float32)], "sm_100")[4]
    ref = _reference(a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("tile,tk,k_tiles,k", [
    (128, 128, 3, 384), pytest.param(256, 128, 3, 384, marks=pytest.mark.sweep),
    pytest.param(256, 128, 3, 768, marks=pytest.mark.sweep), pytest.param(256, 64, 8, 512, marks=pytest.mark.sweep)],
    ids=["128-ws", "256-pair", "256-pair-wraps", "256-pair-2-byte-rows"])
def test_unstageable_scale_rows_go_through_registers_into_the_pipeline(tile: int, tk: int, k_tiles: int, k: int,
                                                                      tmp_path: Path) -> None:
    """A's scale rows with no cp.async form: 12 bytes apart with no fact on the stride (TileGym's K = 768
    shape: 24 bytes), or 2 bytes long (K tile 64). The threads that copy load them byte by byte and store
    them into the stage (NVIDIA's: byte loads too), then arrive on its full mbarrier beside the TMA boxes
    of A, B and B's scales. 128 x 128: the producer warp's lanes (warp-specialized, 320 threads);
    256 x 256 (sweep): each CTA of a pair 128 x 256, all 512 threads; K = 768 goes round the ring twice.
    Before: no pipeline at all. Race checker on."""
    bytecode = _kernel(tile, tile, tk, k_tiles=k_tiles)
    ptx = _ptx(bytecode, "sm_100", tmp_path)
    assert "cp.async.bulk.tensor" in ptx and "cp.async.ca" not in ptx and "cp.async.cg" not in ptx
    assert "ld.global.b8" in ptx and "st.shared.b8" in ptx   # the scales, byte by byte
    a, sa, b, sb = _inputs(tile, tile, k, seed=5)
    out = emulate(_module(bytecode), [a, sa, b, sb, np.zeros((tile, tile), np.float32)], "sm_100")[4]
    ref = _reference(a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("gpu", ["sm_120", "sm_100"])
def test_swizzled_scales_unswizzled_in_the_kernel_match_numpy(gpu: str) -> None:
    """The 4-D swizzled scale tiles go through reshape/permute in registers; the mma stages them
    (sm_100: tcgen05, restaged from the staged tiles)."""
    tm = tn = 128
    tk = 128
    module = _module(_kernel(tm, tn, tk, swizzled=True))
    m, n, k = tm, tn, tk
    a, sa, b, sb = _inputs(m, n, k, seed=2)
    c = np.zeros((m, n), np.float32)
    packed_b = _swizzle(np.ascontiguousarray(sb.T))     # B's scales are packed N-major
    out = emulate(module, [a, _swizzle(sa), b, packed_b, c], gpu)[4]
    ref = _reference(a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


_SELECTOR_PTX = """
.version 8.7
.target sm_120a
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 psa, .param .u64 psb, .param .u64 pd) {
  .reg .b32 %a<4>; .reg .b32 %b<2>; .reg .b32 %s<2>; .reg .f32 %d<4>; .reg .f32 %z;
  .reg .b64 %p<5>; .reg .b64 %o<3>; .reg .b32 %lane;
  ld.param.u64 %p0, [pa]; ld.param.u64 %p1, [pb]; ld.param.u64 %p2, [psa]; ld.param.u64 %p3, [psb];
  ld.param.u64 %p4, [pd];
  mov.u32 %lane, %tid.x;
  mul.wide.u32 %o0, %lane, 16; add.s64 %p0, %p0, %o0; add.s64 %p4, %p4, %o0;
  mul.wide.u32 %o1, %lane, 8; add.s64 %p1, %p1, %o1;
  mul.wide.u32 %o2, %lane, 4; add.s64 %p2, %p2, %o2; add.s64 %p3, %p3, %o2;
  ld.global.v4.b32 {%a0, %a1, %a2, %a3}, [%p0];
  ld.global.v2.b32 {%b0, %b1}, [%p1];
  ld.global.b32 %s0, [%p2]; ld.global.b32 %s1, [%p3];
  mov.f32 %z, 0f00000000;
  mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.e4m3.e4m3.f32.ue8m0
    {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%z, %z, %z, %z}, {%s0}, {BA, TA}, {%s1}, {BB, TB};
  st.global.v4.f32 [%p4], {%d0, %d1, %d2, %d3};
  ret;
}
"""


@pytest.mark.parametrize("ba,ta,bb,tb", [(0, 0, 0, 0), (2, 1, 3, 3), (1, 0, 2, 1)])
def test_emulated_block_scale_selectors_follow_the_ptx_isa(ba: int, ta: int, bb: int, tb: int) -> None:
    """One m16n8k32 block-scaled mma.sync with every selector pair: SF_A of row r is byte byte-id-a of
    lane 4 (r % 8) + 2 thread-id-a + r / 8, SF_B of column n byte byte-id-b of lane 4 n + thread-id-b;
    every other byte and lane holds another exponent, so a wrong pick shows."""
    import ml_dtypes

    from tileiras.emulator import Memory, run_ptx

    rng = np.random.default_rng(ba + 4 * ta + 16 * bb + 64 * tb)
    a = rng.standard_normal((16, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((32, 8)).astype(ml_dtypes.float8_e4m3fn)
    sfa, sfb = rng.integers(118, 136, 16), rng.integers(118, 136, 8)
    lane = np.arange(32)[:, None]
    g, t = lane // 4, lane % 4
    e = np.arange(16)[None, :]      # A: element e of a lane is in register e / 4 (the 8-bit fragments)
    a_frag = a.view(np.uint8)[g + 8 * ((e // 4) % 2), 4 * t + e % 4 + 16 * (e // 8)]
    e = np.arange(8)[None, :]
    b_frag = b.view(np.uint8)[4 * t + e % 4 + 16 * (e // 4), g]
    scale_a = rng.integers(100, 150, (32, 4)).astype(np.uint8)     # distractors everywhere else
    scale_b = rng.integers(100, 150, (32, 4)).astype(np.uint8)
    r = np.arange(16)
    scale_a[4 * (r % 8) + 2 * ta + r // 8, ba] = sfa
    scale_b[4 * np.arange(8) + tb, bb] = sfb
    mem = Memory()
    arrays = [np.ascontiguousarray(x) for x in (a_frag, b_frag, scale_a, scale_b, np.zeros((32, 4), np.float32))]
    addrs = []
    for arr in arrays:
        addrs.append(mem.alloc(arr.nbytes))
        mem.write(addrs[-1], arr.tobytes())
    ptx = _SELECTOR_PTX.replace("BA", str(ba)).replace("TA", str(ta)).replace("BB", str(bb)).replace("TB", str(tb))
    run_ptx(ptx, "k", (1, 1, 1), (32, 1, 1), addrs, mem, check_races=True)
    d = np.frombuffer(mem.read(addrs[4], 32 * 16), np.float32).reshape(32, 4)
    out = np.zeros((16, 8))
    e = np.arange(4)[None, :]
    out[g + 8 * (e // 2), 2 * t + e % 2] = d
    ref = (a.astype(np.float64) * np.exp2(sfa - 127.0)[:, None]) @ (b.astype(np.float64) * np.exp2(sfb - 127.0)[None, :])
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_restaged_scales_without_the_proxy_fence_are_reported(monkeypatch) -> None:
    """The race checker covers the restaging: generic st.shared of the scale bytes, read by tcgen05.cp
    through the async proxy, need fence.proxy.async before the barrier that publishes them."""
    from tileiras.emulator import EmulatorError

    edit_ptx(monkeypatch, removing(r"fence\.proxy\.async\.shared::cta;", needs="tcgen05.cp"))
    module = _module(_kernel(128, 128, 64))
    a, sa, b, sb = _inputs(128, 128, 128)
    with pytest.raises(EmulatorError, match=r"missing fence\.proxy\.async: .*st\.shared\.b8.* the tcgen05\.cp"):
        emulate(module, [a, sa, b, sb, np.zeros((128, 128), np.float32)], "sm_100")


@pytest.mark.parametrize("tile", [256, pytest.param(128, marks=pytest.mark.sweep)])
def test_sm120_operands_beyond_shared_memory_are_copied_in_k_slices(tile: int) -> None:
    """MXFP8 at 256 x 256 x 256 tiles: A and B (64 KB each) do not fit sm_120's 99 KB beside each other;
    each is left to the block-scaled mma, which copies it a K slice at a time (its scales stay whole,
    indexed by the absolute K). NVIDIA's compiles these tiles too. The emulator (race checker on) =
    numpy."""
    import contextlib
    import io

    from tileiras.lowering.pipeline import lower_module

    module = _module(_kernel(tile, tile, 256, k_tiles=1))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        lower_module(_module(_kernel(tile, tile, 256, k_tiles=1)), "sm_120", print_ir_after_all=True)
    assert ("K slices" in err.getvalue()) == (tile == 256), err.getvalue()[-2000:]
    a, sa, b, sb = _inputs(tile, tile, 256, seed=4)
    out = emulate(module, [a, sa, b, sb, np.zeros((tile, tile), np.float32)], "sm_120")[4]
    ref = _reference(a, sa, b, sb)
    assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()
