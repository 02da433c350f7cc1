"""sm_100 attention, warp-specialized as NVIDIA's is (tileas/tcgen05_roles.attention_mmas): a
producer warpgroup whose first warp copies K and V by TMA and whose second issues the MMAs (S =
Q K^T, then O += P V once the softmax stored P in tensor memory), and two consumer warpgroups that
run the softmax and rescale O in tensor memory; 384 threads, setmaxnreg 40 / 232 (one consumer
warpgroup: 256 threads, setmaxnreg.dec 40; M = 64: P through shared memory); O stored by TMA
(tmem_epilogue.store_fragments). The SASS shows the three roles' loops; the emulator runs causal and non-causal d64 / d128 against numpy with the
race checker (test_tcgen05_lowering.py runs bf16 d128 and causal f16 d64 by default; more here
under sweep); where the form cannot apply the kernel keeps the earlier one, with a remark."""

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

from test_tile_layer import _ptx, _ptxas_report  # noqa: E402


def _roles_remark(name: str, path: Path | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "tileiras", "--gpu-name", "sm_100", "--emit=llvm", "-o", "/dev/null",
                           "--remarks=memory", "--remark-format=command-line",
                           str(path or REALISTIC / f"{name}.tileirbc")],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return re.search(r"Roles = (.*)", done.stdout + done.stderr).group(1)  # type: ignore[union-attr]


def test_attention_roles_in_the_sass(tmp_path: Path) -> None:
    """The producer thread's loop copies (UTMALDG) and issues no MMA; the MMA thread's issues both
    mmas (UTCHMMA, commits) and copies nothing; the softmax's reads the scores from tensor memory
    (LDTM), exponentiates and issues neither; no spills within the 168 registers 384 threads launch with."""
    from sass_roles import cycles
    from sass_stats import cuobjdump_path, parse_sass

    ptx = _ptx((REALISTIC / "fa_f16_q128k128d64.tileirbc").read_bytes(), "sm_100", tmp_path)
    assert ".reqntid 384, 1, 1" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx and "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    # two scores buffers: S_j waits for O += P_{j-2} V_{j-2} (its buffer's output mbarrier), not the last P V
    assert "// wait: P V two back complete" in ptx and "// wait: previous P V complete" not in ptx
    report = _ptxas_report(ptx, "sm_100a", tmp_path)
    assert "0 bytes spill stores" in report and "0 bytes spill loads" in report, report
    assert int(re.search(r"Used (\d+) registers", report).group(1)) <= 168, report  # type: ignore[union-attr]
    done = subprocess.run([str(cuobjdump_path()), "-sass", str(tmp_path / "r.cubin")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    [func] = parse_sass(done.stdout).values()
    bodies = [[i.base for i in body] for body in cycles(func)]
    copying = [b for b in bodies if "UTMALDG" in b]
    issuing = [b for b in bodies if "UTCHMMA" in b]
    softmax = [b for b in bodies if "MUFU" in b and "LDTM" in b]
    assert len(copying) == len(issuing) == len(softmax) == 1, bodies
    assert "UTCHMMA" not in copying[0] and "LDTM" not in copying[0]
    assert "UTMALDG" not in issuing[0] and "LDTM" not in issuing[0] and "UTCBAR" in issuing[0]
    assert "UTCHMMA" not in softmax[0] and "UTMALDG" not in softmax[0] and "STTM" in softmax[0]
    # O leaves by TMA (one box of 128 rows, as NVIDIA's), written swizzled by the consumers
    assert done.stdout.count("UTMASTG") == 1 and " STG" not in done.stdout


def test_one_consumer_warpgroup_is_specialized_with_p_in_shared_memory(tmp_path: Path) -> None:
    """Four consumer warps (M = 64): 256 threads as NVIDIA's, the producer warpgroup gives registers
    back (setmaxnreg.dec 40) and the consumers keep the 255 the CTA launches with; P goes through a
    swizzled shared buffer (no tensor-memory A at M = 64) that the MMA thread reads by descriptor once
    the consumers stored it, fenced the async proxy and arrived on `probabilities`. (Emulator vs numpy
    under the race checker: test_tcgen05_lowering's q64 and q128k64 attentions, by default.)"""
    assert _roles_remark("fa_f16_q64k64d64").startswith("warp-specialized (attention): warp 4 produces")
    ptx = _ptx((REALISTIC / "fa_f16_q64k64d64.tileirbc").read_bytes(), "sm_100", tmp_path)
    assert ".reqntid 256, 1, 1" in ptx and "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc" not in ptx and "tcgen05.st.sync.aligned.16x128b" not in ptx
    issuer = ptx[ptx.index("// wait: P stored"):]
    assert re.search(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], %rd\d+", issuer)   # A by descriptor


@pytest.mark.parametrize("gpu", ["sm_100", "sm_120", pytest.param("sm_90", marks=pytest.mark.sweep)])
def test_one_warpgroup_attention_keeps_its_occupancy_hint(gpu: str, tmp_path: Path) -> None:
    """TileGym's 64 x 64 attention asks for 2 CTAs an SM: as NVIDIA's, the 256 threads launch with 128
    registers (`.minnctapersm 2`) and the consumers take what the producer warpgroup gave back
    (setmaxnreg.inc 216 beside .dec 40; NVIDIA's 224 / 32), without spills (the f16 d128 causal
    consumers spill 12 bytes at 128). sm_120's mma.sync consumers alike (unsplit before: 194 registers at
    one CTA an SM)."""
    data = (ROOT / "tests" / "tilegym" / "bytecode" / "tg_fmha_f16_d128_causal_64x64.tileirbc").read_bytes()
    ptx = _ptx(data, gpu, tmp_path)
    assert ".reqntid 256, 1, 1" in ptx and ".minnctapersm 2" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx and "setmaxnreg.inc.sync.aligned.u32 216;" in ptx
    report = _ptxas_report(ptx, gpu + "a", tmp_path)
    assert "0 bytes spill stores" in report and "Used 128 registers" in report, report


def test_mma_thread_reading_p_before_the_consumers_stored_it_is_a_race(monkeypatch) -> None:
    """Without the MMA thread's `P stored` wait, O += P V reads the shared P the consumers are still
    writing: the race checker reports it."""
    from emulator_runs import edit_ptx, without_wait
    from test_realistic_emulator import _check
    from tileiras.emulator import EmulatorError

    edit_ptx(monkeypatch, without_wait("P stored"))
    # (on the first iteration P was never written: shared memory starts undefined, the read says so first)
    with pytest.raises(EmulatorError, match=r"data race \(write-after-read\): .* but the tcgen05 operations of "
                       r"thread \d+ read it at line \d+ 'tcgen05\.mma|read of undefined shared memory: .* "
                       r"'tcgen05\.mma"):
        _check("fa_f16_q64k64d64", "sm_100")


@pytest.mark.sweep
def test_mla_prefill_chains_its_scores_in_the_mma_thread(monkeypatch) -> None:
    """TileGym's MLA prefill: S = Q K^T + Q_pe K_pe^T (two mmas, the second accumulating onto the
    first) issued by the MMA thread into the same columns before one `scores` commit; right against
    the interpreter under the race checker, and the consumers reading S without the `scores` wait
    is a tensor-memory race."""
    from emulator_runs import edit_ptx, without_wait
    from test_tcgen05_lowering import test_mla_prefill_shares_columns_between_its_chained_mmas as run
    from tileiras.emulator import EmulatorError

    name = "tg_mla_prefill_bf16_g1_64x64_occ1"
    assert _roles_remark(name, ROOT / "tests" / "tilegym" / "bytecode" / f"{name}.tileirbc").startswith(
        "warp-specialized (attention)")
    run()
    edit_ptx(monkeypatch, without_wait("scores complete"))
    with pytest.raises(EmulatorError, match=r"data race on tensor memory \(read-after-write\)"):
        run()


@pytest.mark.sweep
@pytest.mark.parametrize("name,gpu", [("tg_fmha_f16_d128_causal_64x64", "sm_100"),
                                      ("tg_fmha_e5m2_d128_causal_64x64", "sm_100"),
                                      ("tg_fmha_f16_d128_causal_64x64", "sm_90")])
def test_one_warpgroup_tilegym_attention_matches_the_interpreter(name: str, gpu: str) -> None:
    """TileGym's 64 x 64 attention (M = 64, one consumer warpgroup, P through shared memory; f16 and
    fp8 P), causal: the first loop specialized, the masked one after it not; ragged sequence; 2 CTAs
    an SM as its hint asks (sm_90: the wgmma form with the same registers)."""
    import ml_dtypes

    from test_spills import _module
    from tileiras.runtime import run_arrays

    module, data = _module(name)
    if gpu == "sm_100":
        assert _roles_remark(name, ROOT / "tests" / "tilegym" / "bytecode" / f"{name}.tileirbc").startswith(
            "warp-specialized (attention)")
    dtype = ml_dtypes.float8_e5m2 if "e5m2" in name else np.float16
    seq, shape = 191, (1, 32, 191, 128)

    def arguments() -> list:
        rng = np.random.default_rng(7)
        return [rng.standard_normal(shape).astype(dtype) for _ in range(3)] + \
            [np.zeros(shape, dtype), np.array(1 / np.sqrt(128), np.float32), np.array(0, np.int32)]

    grid = (-(-seq // 64), 1, 1)
    want = run_arrays(module, name, grid, arguments(), backend="interpreter")[3]
    got = run_arrays(module, name, grid, arguments(), backend="emulator", gpu_name=gpu, source=data,
                     filename=f"{name}.tileirbc", check_races=True)[3]
    out, ref = (np.asarray(t).astype(np.float64)[:, 0] for t in (got, want))
    np.testing.assert_allclose(out, ref, rtol=2.0 ** -7, atol=2.0 ** -7 * np.abs(ref).max())


@pytest.mark.sweep
@pytest.mark.parametrize("config", [("fa_f16_q128k128d64", 12, True), ("fa_f16_q128k64d128_causal", 12, True),
                                    ("fa_f16_q128k128d128_causal", 16, True)], ids=lambda c: c[0])
def test_specialized_attention_matches_numpy_under_the_race_checker(config, tmp_path: Path) -> None:
    from test_tcgen05_lowering import test_attention_runs_both_mmas_on_tcgen05

    assert _roles_remark(config[0]).startswith("warp-specialized (attention)")
    test_attention_runs_both_mmas_on_tcgen05(config, tmp_path)


@pytest.mark.sweep
def test_specialized_attention_wrapping_its_stages_matches_numpy() -> None:
    """Six key tiles through three stages: every stage refilled, each handshake mbarrier's phase
    flipped six times (one query tile: the first 128 rows)."""
    import numpy as np

    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    name, seq, d = "fa_f16_q128k128d64", 768, 64
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, seq, d)).astype(np.float16) for _ in range(3))
    scale = np.float32(1 / np.sqrt(d))
    module = load_module((REALISTIC / f"{name}.tileirbc").read_bytes(), f"{name}.tileirbc")
    out = run_arrays(module, name, (1, 1, 1), [q, k, v, np.zeros_like(q), np.array(scale)],
                     backend="emulator", gpu_name="sm_100", check_races=True)[3]
    s = q[0, :128].astype(np.float64) @ k[0].astype(np.float64).T * scale
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v[0].astype(np.float64)
    assert np.abs(out[0, :128].astype(np.float64) - ref).max() < 2e-3


@pytest.mark.sweep
def test_attention_without_tma_keeps_its_producer_and_the_consumers_issue(monkeypatch, tmp_path: Path) -> None:
    """Where K and V cannot go by TMA (here: a host without the TMA callback) the producer's copies are
    cp.async and take its whole warpgroup: the consumers issue the mmas themselves (setmaxnreg 80 /
    216, as sm_90's cp.async producer), still right under the race checker."""
    import tileiras.host_platform as host_platform
    from tileiras.runtime import backends
    from test_tcgen05_lowering import test_attention_runs_both_mmas_on_tcgen05

    monkeypatch.setattr(host_platform, "tma_callback_unsupported", lambda: "test: no TMA callback")
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))     # (the cache key does not see the patch)
    real, seen = backends.compile_module, []

    def spy(req, emit, gpu):
        payload, meta = real(req, emit, gpu)
        seen.append(payload.decode() if isinstance(payload, bytes) else payload)
        return payload, meta

    monkeypatch.setattr(backends, "compile_module", spy)
    test_attention_runs_both_mmas_on_tcgen05(("fa_f16_q128k128d64_causal", 12, True), tmp_path)
    [ptx] = seen
    assert "cp.async.bulk.tensor" not in ptx and "setmaxnreg.dec.sync.aligned.u32 80;" in ptx
    assert ".reqntid 384, 1, 1" in ptx and "// wait: P stored" not in ptx
