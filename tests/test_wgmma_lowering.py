"""sm_90's warpgroup mma (lowering/ops_wgmma.py, tileaa/mma_forms.py) on the realistic kernels.

Each realistic configuration below runs on the PTX emulator (race checker on) against numpy at its
real tile sizes on a small problem (one or two blocks, K loops of 2 iterations), and its PTX is
checked for the wgmma form NVIDIA's compiler uses for it (type, shape, A from registers).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import cuda.tile as ct
import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BYTECODE = ROOT / "tests" / "realistic" / "bytecode"
MANIFEST = ROOT / "tests" / "realistic" / "manifest.json"


def _module(name: str):
    from tileiras.frontend import load_module

    return load_module((BYTECODE / f"{name}.tileirbc").read_bytes(), f"{name}.tileirbc")


def _ptx(name: str, tmp_path: Path) -> str:
    return _ptx_of((BYTECODE / f"{name}.tileirbc").read_bytes(), tmp_path)


def _ptx_of(data: bytes, tmp_path: Path) -> str:
    src, out = tmp_path / "k.tileirbc", tmp_path / "k.ptx"
    src.write_bytes(data)
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", "sm_90",
                           str(src), "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return out.read_text()


def _run(name: str, grid: tuple[int, int, int], arrays: list) -> list:
    from tileiras.runtime import run_arrays

    module = _module(name)
    return run_arrays(module, name, grid, arrays, backend="emulator", gpu_name="sm_90", check_races=True)


_NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32, "e4m3": ml_dtypes.float8_e4m3fn,
       "i8": np.int8}

# (configuration, instruction in its PTX, its count per K tile, tolerance relative to max |C|)
MATMULS = [
    ("mm_f16_64x64x32", "m64n64k16.f32.f16.f16", 2),
    ("mm_bf16_128x128x32", "m64n128k16.f32.bf16.bf16", 4),
    ("mm_tf32_64x64x32", "m64n64k8.f32.tf32.tf32", 4),      # tf32: 10-bit operands
    ("mm_e4m3_64x64x32", "m64n64k32.f32.e4m3.e4m3", 1),
    ("mm_i8_64x64x32", "m64n64k32.s32.s8.s8", 1),
]


@pytest.mark.parametrize("config", MATMULS, ids=lambda c: c[0])
def test_matmul_on_wgmma_matches_numpy(config, tmp_path: Path) -> None:
    name, instruction, per_k = config
    tm, tn, tk = (int(v) for v in re.findall(r"(\d+)x(\d+)x(\d+)", name)[0])
    ptx = _ptx(name, tmp_path)
    assert ptx.count(f"wgmma.mma_async.sync.aligned.{instruction}") == per_k, ptx.count("wgmma.mma_async")
    assert "mma.sync" not in ptx
    dtype = name.split("_")[1]
    rng = np.random.default_rng(11)
    m, n, k = tm, tn, 2 * tk
    if dtype == "i8":
        a, b = rng.integers(-8, 8, (m, k)).astype(np.int8), rng.integers(-8, 8, (k, n)).astype(np.int8)
        c = np.zeros((m, n), np.int32)
    else:
        a, b = (rng.standard_normal(s).astype(_NP[dtype]) for s in ((m, k), (k, n)))
        c = np.zeros((m, n), {"tf32": np.float32, "e4m3": np.float16}.get(dtype, _NP[dtype]))
    out = _run(name, (1, 1, 1), [a, b, c])[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    if dtype == "i8":
        assert np.array_equal(out, ref.astype(np.int32))
    else:       # within the bound of the K-term accumulation (fp8: wgmma's narrower one), rounded to C's type
        from accumulation import UNIT, accumulator, assert_accumulated

        aty = "tf32" if dtype == "tf32" else dtype
        out_unit = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32"}.get(np.dtype(c.dtype), "bf16")
        assert out_unit in UNIT
        assert_accumulated(out.astype(np.float64), ref, a.astype(np.float64), b.astype(np.float64).T,
                           accumulator("f32", aty, "sm_90"), aty, out=out_unit)


def test_batched_matmul_on_wgmma_matches_numpy(tmp_path: Path) -> None:
    name = "bmm_f16_64x64x32"
    ptx = _ptx(name, tmp_path)
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") == 2
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal(s).astype(np.float16) for s in ((2, 64, 64), (2, 64, 64)))
    out = _run(name, (1, 1, 2), [a, b, np.zeros((2, 64, 64), np.float16)])[2]
    ref = np.einsum("bmk,bkn->bmn", a.astype(np.float64), b.astype(np.float64))
    from accumulation import assert_accumulated

    for z in range(2):      # each batch within its 64-term f32 accumulation's bound, rounded to f16
        assert_accumulated(out[z].astype(np.float64), ref[z], a[z].astype(np.float64),
                           b[z].astype(np.float64).T, "f32", out="f16")


def test_attention_on_wgmma_matches_numpy(tmp_path: Path) -> None:
    """QK^T reads K by descriptor K-major; P @ V takes P from registers (the register-A form)."""
    name = "fa_f16_q64k64d64"
    ptx = _ptx(name, tmp_path)
    wgmmas = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.f16\.f16 \{[^}]*\}, (\{|%rd)", ptx)
    assert wgmmas.count("%rd") == 4 and wgmmas.count("{") == 4, wgmmas   # 4 from descriptors, 4 from registers
    assert "mma.sync" not in ptx
    seq, d = 128, 64
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, seq, d)).astype(np.float16) for _ in range(3))
    scale = np.float32(1 / np.sqrt(d))
    out = _run(name, (seq // 64, 1, 1), [q, k, v, np.zeros_like(q), np.array(scale)])[3]
    s = q[0].astype(np.float64) @ k[0].astype(np.float64).T * scale
    p = np.exp(s - s.max(1, keepdims=True))
    ref = (p / p.sum(1, keepdims=True)) @ v[0].astype(np.float64)
    assert np.abs(out[0] - ref).max() < 2e-3


@ct.kernel
def mm_at(at, b, c, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    """C = A @ B with A given transposed, (K, M)."""
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(at, 0, shape=(TK, TM))):
        x = ct.load(at, index=(k, bm), shape=(TK, TM))
        acc = ct.mma(ct.transpose(x), ct.load(b, index=(k, bn), shape=(TK, TN)), acc)
    ct.store(c, index=(bm, bn), tile=acc)


def test_transposed_a_is_read_m_major_by_its_descriptor(tmp_path: Path) -> None:
    """A 16-bit A loaded (K, M) and transposed: no copy, the descriptor's transpose-A bit."""
    from cuda.tile.compilation import ConstantConstraint

    sys.path.insert(0, str(ROOT / "tests"))
    from test_tile_layer import _array, _entry, _export
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    data = _export(mm_at, [_array(ct.float16, 2), _array(ct.float16, 2), _array(ct.float32, 2),
                           ConstantConstraint(128), ConstantConstraint(64), ConstantConstraint(64)])
    forms = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.f16\.f16 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, "
                       r"(\d), (\d)", _ptx_of(data, tmp_path))
    assert forms == [("1", "1")] * 8, forms          # 2 warpgroup rows x 4 K steps, A and B M/N-major
    module = load_module(data, "k.tileirbc")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 128)).astype(np.float16), rng.standard_normal((128, 64)).astype(np.float16)
    out = run_arrays(module, _entry(module), (1, 1, 1), [np.ascontiguousarray(a.T), b, np.zeros((128, 64), np.float32)],
                     backend="emulator", gpu_name="sm_90", check_races=True)[2]
    assert np.abs(out - a.astype(np.float64) @ b.astype(np.float64)).max() < 1e-3


@pytest.mark.parametrize("what", ["attention-64x32", "matmul-64x32x64", "matmul-64x16x64"])
def test_narrow_n_tiles_run_on_wgmma(what: str, tmp_path: Path) -> None:
    """N = 32 and 16 (TileGym's attention backward tiles, 64 x 32 scores; MLA decode's 16 heads): wgmma
    m64n32k16 / m64n16k16, as NVIDIA's, B read by its descriptor as stored: K-major (K^T of the scores,
    64-byte rows in the 64B swizzle) or N-major (32B / 64B swizzle). The emulator (race checker on)
    agrees with numpy."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_tile_layer import _attention, _entry, _matmul
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    rng = np.random.default_rng(8)
    if what.startswith("attention"):
        seq, d = 128, 64
        data = _attention(seq, d, 64, 32)
        ptx = _ptx_of(data, tmp_path)
        assert "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16" in ptx and "mma.sync" not in ptx
        q, k, v = (rng.standard_normal((1, seq, d)).astype(np.float16) for _ in range(3))
        scale = np.float32(1 / np.sqrt(d))
        module = load_module(data, "k.tileirbc")
        out = run_arrays(module, _entry(module), (seq // 64, 1, 1), [q, k, v, np.zeros_like(q), np.array(scale)],
                         backend="emulator", gpu_name="sm_90", check_races=True)[3]
        s = q[0].astype(np.float64) @ k[0].astype(np.float64).T * scale
        p = np.exp(s - s.max(1, keepdims=True))
        assert np.abs(out[0] - (p / p.sum(1, keepdims=True)) @ v[0].astype(np.float64)).max() < 2e-3
        return
    tn = int(what.split("x")[1])
    data = _matmul("float16", "float32", 64, tn, 64)
    ptx = _ptx_of(data, tmp_path)
    # an N-major B of 32- or 64-byte rows, read as stored in the 32B / 64B swizzle (MLA decode's 512 x 16
    # B: HGMMA.64x16x16 as NVIDIA's)
    assert f"wgmma.mma_async.sync.aligned.m64n{tn}k16.f32.f16.f16" in ptx and "mma.sync" not in ptx
    a, b = rng.standard_normal((64, 128)).astype(np.float16), rng.standard_normal((128, 2 * tn)).astype(np.float16)
    module = load_module(data, "k.tileirbc")
    out = run_arrays(module, _entry(module), (1, 2, 1), [a, b, np.zeros((64, 2 * tn), np.float32)],
                     backend="emulator", gpu_name="sm_90", check_races=True)[2]
    assert np.abs(out - a.astype(np.float64) @ b.astype(np.float64)).max() < 1e-3


def test_k_major_copies_take_their_room_before_the_pipeline(tmp_path: Path) -> None:
    """tf32 128x256x64: the K-major tf32 copies of A and B (32 + 64 KB) are allocated before the K
    loop's pipeline, which then finds no room for two ~99 KB stages and leaves the loop
    unpipelined: it compiles, on HGMMA."""
    ptx = _ptx("mm_tf32_128x256x64", tmp_path)
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32") == 8   # a warpgroup's 64 rows, 8 K steps
    assert "mma.sync" not in ptx


def test_e5m2_matmul_on_wgmma_is_exact(tmp_path: Path) -> None:
    """fp8 e5m2 (QGMMA k32, 32B-swizzled A, B copied K-major): products of 8-bit floats are exact
    in f32 and small sums stay exact."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_tile_layer import _entry, _matmul
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    data = _matmul("float8_e5m2", "float32", 64, 64, 32)
    module = load_module(data, "k.tileirbc")
    rng = np.random.default_rng(2)
    a, b = (rng.integers(-4, 5, s).astype(ml_dtypes.float8_e5m2) for s in ((64, 64), (64, 64)))
    out = run_arrays(module, _entry(module), (1, 1, 1), [a, b, np.zeros((64, 64), np.float32)], backend="emulator",
                     gpu_name="sm_90", check_races=True)[2]
    assert np.array_equal(out, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))
    assert _ptx_of(data, tmp_path).count("wgmma.mma_async.sync.aligned.m64n64k32.f32.e5m2.e5m2") == 1


def _tensor_core_configs() -> list[str]:
    import json

    return [c["name"] for c in json.loads(MANIFEST.read_text())["configs"]
            if "sm_90" in c["targets"] and c["family"] in ("matmul", "bmm", "splitk", "attention")]


@pytest.mark.sweep
@pytest.mark.parametrize("name", _tensor_core_configs())
def test_every_realistic_sm90_mma_is_a_wgmma(name: str, tmp_path: Path) -> None:
    """Where NVIDIA's compiler uses HGMMA/IGMMA/QGMMA (every realistic matmul, batched and split-K
    matmul and attention on sm_90), ours issues wgmma and no mma.sync."""
    ptx = _ptx(name, tmp_path)
    assert "wgmma.mma_async" in ptx and "mma.sync" not in ptx


# A K-major copy in two slots (tileas/kmajor_copies.loop_copies): the loop's wgmma keeps its group in
# flight (wait_group 1) while the next iteration copies into the other slot. On an H200 this took tf32
# 128x128x32 from 1.58x to 1.27x NVIDIA's time and int8 128x128x64 from 1.31x to 1.15x.
_IN_FLIGHT = re.compile(r"wgmma\.wait_group\.sync\.aligned\s+1;")


@pytest.mark.parametrize("name", ["mm_i8_128x128x32", "mm_e4m3_64x64x32", "mm_tf32_128x128x32"])
def test_a_copied_operand_in_two_slots_leaves_the_group_in_flight(name: str, tmp_path: Path) -> None:
    ptx = _ptx(name, tmp_path)
    assert _IN_FLIGHT.search(ptx), name
    from test_realistic_emulator import _check

    _check(name, "sm_90")      # against the interpreter, race checker on


def test_second_slots_that_would_cost_the_ring_a_stage_are_not_taken(tmp_path: Path) -> None:
    """tf32 128x128x64: a 32 KB copy of B beside 64 KB stages; a second slot would leave two stages
    of three (measured slower on an H200: 1.71x NVIDIA's time against 1.29x), so it keeps one slot
    and waits for its group every iteration."""
    ptx = _ptx("mm_tf32_128x128x64", tmp_path)
    assert not _IN_FLIGHT.search(ptx)


def test_a_copy_in_one_slot_with_its_group_in_flight_is_a_race(monkeypatch, tmp_path: Path) -> None:
    """Both iterations copying into the same slot while the group stays in flight: the race checker
    reports the copy overwriting what the previous iteration's wgmma may still read."""
    from tileiras.emulator import EmulatorError
    from tileiras.lowering import ops_wgmma
    from test_realistic_emulator import _check

    real = ops_wgmma._slot
    monkeypatch.setattr(ops_wgmma, "_slot", lambda k, op, buffer: (buffer, real(k, op, buffer)[1]))
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))   # the cache keys on our files
    with pytest.raises(EmulatorError, match="write-after-read"):
        _check("mm_i8_128x128x32", "sm_90")


@pytest.mark.parametrize("name", ["mm_f16_128x128x64", "mm_tf32_128x128x32", "fa_f16_q128k64d128"])
def test_descriptors_are_built_on_their_low_word(name: str, tmp_path: Path) -> None:
    """smem.descriptor: a wgmma descriptor is the buffers' start in 16-byte units plus the offsets'
    units on its 32-bit low word, with a constant high word; no 64-bit shift or bit-field extract (the
    64-bit sum of the address cost four uniform instructions a descriptor in the hot loop: the
    128x128x64 f16 loop went from 94 to 57 SASS instructions, NVIDIA's has 70)."""
    ptx = _ptx(name, tmp_path)
    assert "wgmma.mma_async" in ptx
    assert not re.search(r"\b(shr|bfe)\.[ub]64\b", ptx)
