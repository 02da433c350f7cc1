"""No spills where NVIDIA's compiler has none (issue 14, item 4), on TileGym's kernels at their
default tile sizes (tests/tilegym/bytecode, the bytecode cuTile exports for them).

Pinned causes, each with a kernel that spilled before its fix (ptxas spill instructions, ours
before -> after; NVIDIA's in brackets):

* a transposing view (`ct.load(..., order=...)`, attention's K^T, MoE's weights) loaded one
  element at a time and staged from registers: fmha d128 64x64 1172/1431/1106 -> 0 on
  sm_80/sm_90/sm_120 [13/0/20]; MLA prefill 1561 -> 0 on sm_90 [0]. Pass `order-views`
  (tileaa/view_order.py) loads it in tensor order and permutes; cp.async takes 4-D tiles.
* a 128x128 accumulator on 4 warps under three loops (grouped GEMM): 126 -> 0 on sm_90 [0]
  with 8 warps (tileas/warps.py).
* a row operand broadcast to every row, held whole by each group of warps sharing a row
  (RMSNorm's weight beside a 4 x 8192 tile on 8 warps, 2 a row: 128 weights and 128 inputs a
  lane): tg_rmsnorm_persistent_bf16_2048x8192 34/32/30/40 LDL+STL -> 0 on sm_80/sm_90/sm_100/sm_120
  [0]. `layout.row_layout` spreads a row over more warps while a lane would hold more than 32 of
  its elements (8 a row: 32 weights a lane, 205-209 registers).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import cuda.tile as ct
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TILEGYM = ROOT / "tests" / "tilegym" / "bytecode"


def _module(name: str):
    from tileiras.frontend import load_module

    path = TILEGYM / f"{name}.tileirbc"
    return load_module(path.read_bytes(), path.name), path.read_bytes()


def _spills(name: str, gpu: str, tmp_path: Path) -> tuple[int, int, str]:
    """(spill store bytes, spill load bytes, the report) of our PTX for `name` under ptxas -v."""
    from tileiras.codegen.ptxas import find_ptxas

    ptx = tmp_path / f"{name}.{gpu}.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit=ptx",
                           "--gpu-name", gpu, str(TILEGYM / f"{name}.tileirbc"), "-o", str(ptx)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    arch = gpu + ("a" if gpu in ("sm_90", "sm_100") else "")
    report = subprocess.run([find_ptxas(), "-v", "-arch", arch, str(ptx), "-o", str(tmp_path / "k.cubin")],
                            capture_output=True, text=True)
    assert report.returncode == 0, report.stderr
    text = report.stdout + report.stderr
    found = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
    assert found, text
    return int(found[1]), int(found[2]), text


# (kernel, target): pairs that spilled before, where NVIDIA's compiler has no spills (or fewer)
# (one per cause in the default run, the rest with -m sweep)
NO_SPILLS = [
    ("tg_fmha_f16_d128_causal_64x64", "sm_80"),
    ("tg_group_gemm_f16_128x128x128", "sm_90"),
    pytest.param("tg_fmha_f16_d128_causal_64x64", "sm_90", marks=pytest.mark.sweep),
    pytest.param("tg_fmha_bf16_d128_causal_64x64", "sm_120", marks=pytest.mark.sweep),
    pytest.param("tg_fmha_fwd_lse_f16_d128_64x64", "sm_80", marks=pytest.mark.sweep),
    pytest.param("tg_mla_prefill_bf16_g1_64x64_occ1", "sm_90", marks=pytest.mark.sweep),
    pytest.param("tg_moe_bf16_up_128x128x64", "sm_90", marks=pytest.mark.sweep),
]
# Not listed: tg_fmha_f16_d64_full_256x128 on sm_80/sm_90/sm_120 spills 40-84 bytes since division
# became div.approx (ptxas allocates differently); NVIDIA's spills there too (1262-1529 LDL/STL)


@pytest.mark.parametrize("name,gpu", NO_SPILLS)
def test_no_spills(name: str, gpu: str, tmp_path: Path) -> None:
    stores, loads, report = _spills(name, gpu, tmp_path)
    assert (stores, loads) == (0, 0), report


# TileGym's row kernels of 8k-16k columns: no local memory at all on any target (NVIDIA's has
# none); before, 30-46 LDL/STL (RMSNorm, SiLU-and-mul backward) and 4-10 (SwiGLU backward: a
# stack frame even where ptxas counted no spill bytes)
LONG_ROWS = [pytest.param(name, gpu, marks=() if (name, gpu) == ("tg_swiglu_bwd_f16_11008", "sm_90")
                          else pytest.mark.sweep)
             for name in ("tg_swiglu_bwd_f16_11008", "tg_silu_and_mul_bwd_bf16_14336",
                          "tg_rmsnorm_persistent_bf16_2048x8192")
             for gpu in ("sm_80", "sm_90", "sm_100", "sm_120")]


@pytest.mark.parametrize("name,gpu", LONG_ROWS)
def test_long_rows_use_no_local_memory(name: str, gpu: str, tmp_path: Path) -> None:
    stores, loads, report = _spills(name, gpu, tmp_path)
    assert (stores, loads) == (0, 0) and " 0 bytes stack frame" in report, report


def test_long_element_wise_rows_are_streamed_in_chunks() -> None:
    """SiLU-and-mul backward on 256 threads: every op on its 16384-column rows runs once per chunk of
    4096 (16 elements a thread), chunk after chunk (each chunk's stores before the next chunk's
    loads); a block whose row feeds a reduction (RMSNorm) is left whole."""
    from tileiras.tileaa.passes import to_tileaa
    from tileiras.tileaa.row_chunks import chunk_rows

    module, _ = _module("tg_silu_and_mul_bwd_bf16_14336")
    entry = next(op for op in module.walk() if op.name == "cuda_tile.entry")
    to_tileaa(entry)
    assert chunk_rows(entry, 256) == 1
    sizes = {r.type.num_elements for op in entry.walk() for r in op.results if hasattr(r.type, "num_elements")}
    assert max(sizes) == 4096
    memory = [op.short_name.split("_")[0] for op in entry.walk()
              if op.name in ("cuda_tile.load_ptr_tko", "cuda_tile.store_ptr_tko")]
    assert memory == ["load"] * 3 + ["store"] * 2 + ["load"] * 3 + ["store"] * 2 + \
        ["load"] * 3 + ["store"] * 2 + ["load"] * 3 + ["store"] * 2
    assert chunk_rows(entry, 256) == 0   # chunks are not long: once
    module, _ = _module("tg_rmsnorm_persistent_bf16_2048x8192")
    entry = next(op for op in module.walk() if op.name == "cuda_tile.entry")
    to_tileaa(entry)
    assert chunk_rows(entry, 256) == 0


def _row_arguments(name: str, rows: int) -> list[np.ndarray]:
    """Random rows for TileGym's SwiGLU / SiLU-and-mul backward (the shapes of its configs)."""
    import ml_dtypes

    rng = np.random.default_rng(14)
    if name.startswith("tg_silu"):
        shapes, dtype = [(rows, 14336), (rows, 28672), (rows, 14336), (rows, 14336)], ml_dtypes.bfloat16
    else:
        shapes, dtype = [(rows, 11008)] * 5, np.float16
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


@pytest.mark.parametrize("name,gpu", [("tg_swiglu_bwd_f16_11008", "sm_80"),
                                      pytest.param("tg_swiglu_bwd_f16_11008", "sm_90", marks=pytest.mark.sweep),
                                      pytest.param("tg_silu_and_mul_bwd_bf16_14336", "sm_80",
                                                   marks=pytest.mark.sweep)])
def test_rows_streamed_in_chunks_match_the_interpreter(name: str, gpu: str) -> None:
    """The streamed row kernels at their own 16384-column tiles over shorter rows (11008, 14336: the
    last chunks partly or wholly masked), two rows, race checker on: every array as the interpreter
    leaves it, outputs written."""
    from tileiras.runtime import run_arrays

    module, source = _module(name)
    ref = run_arrays(module, name, (2, 1, 1), _row_arguments(name, 16), backend="interpreter")
    got = run_arrays(module, name, (2, 1, 1), _row_arguments(name, 16), backend="emulator", gpu_name=gpu,
                     source=source, filename=f"{name}.tileirbc", check_races=True)
    before = _row_arguments(name, 16)
    assert not np.array_equal(np.asarray(ref[-1]), before[-1]) and not np.array_equal(np.asarray(ref[-2]), before[-2])
    for out, want in zip(got, ref):
        assert np.array_equal(np.asarray(out).view(np.uint16), np.asarray(want).view(np.uint16))


def test_long_rows_are_spread_over_warps() -> None:
    """A lane holds at most 32 elements of a long row (the row broadcast to every row costs that
    many registers a lane); short rows keep one warp each."""
    from tileiras.layout.encodings import ROW_LANE_ELEMENTS, row_layout

    assert row_layout(256, (4, 8192), vec=8).wpr == 8       # RMSNorm 2048x8192: was 2 (128 a lane)
    assert row_layout(256, (4, 4096), vec=8).wpr == 4       # was 2 (64 a lane)
    assert row_layout(128, (16, 1024), vec=8).wpr == 1      # 32 a lane already
    assert row_layout(256, (1, 16384), vec=8).wpr == 8      # fewer rows than warps: as before
    assert row_layout(128, (4, 8192), scan=True).wpr == 1   # a scan runs along one warp
    layout = row_layout(256, (4, 8192), vec=8)
    assert layout.per_lane == ROW_LANE_ELEMENTS


@pytest.mark.parametrize("gpu", ["sm_80", pytest.param("sm_90", marks=pytest.mark.sweep)])
def test_rmsnorm_with_rows_over_eight_warps_matches_the_interpreter(gpu: str) -> None:
    """TileGym's persistent RMSNorm at its own 4 x 8192 tile (each row over all 8 warps: the sum of
    squares crosses warps through shared memory), 16 rows on 2 CTAs (two loop trips each), race
    checker on: every array as the interpreter leaves it."""
    import ml_dtypes

    from tileiras.runtime import run_arrays

    name = "tg_rmsnorm_persistent_bf16_2048x8192"
    module, source = _module(name)

    def arguments() -> list[np.ndarray]:
        rng = np.random.default_rng(14)
        x, y = (rng.standard_normal((16, 8192)).astype(ml_dtypes.bfloat16) for _ in range(2))
        return [x, y, rng.standard_normal(8192).astype(ml_dtypes.bfloat16), rng.standard_normal(16).astype(np.float32)]

    ref = run_arrays(module, name, (2, 1, 1), arguments(), backend="interpreter")
    got = run_arrays(module, name, (2, 1, 1), arguments(), backend="emulator", gpu_name=gpu, source=source,
                     filename=f"{name}.tileirbc", check_races=True)
    assert not np.array_equal(np.asarray(ref[1]), arguments()[1])    # Y was written
    for out, want in zip(got, ref):
        out, want = np.asarray(out).astype(np.float64), np.asarray(want).astype(np.float64)
        np.testing.assert_allclose(out, want, rtol=2.0 ** -8, atol=1e-6)


def test_transposing_tensor_core_loads_are_loaded_in_tensor_order() -> None:
    """After nv_tileaa, no load an mma reads walks a tensor through a transposing dim_map: it reads
    the identity view and a permute [1, 0] transposes it (the form of ct.transpose(ct.load()))."""
    from tileiras.tileaa.mma_operands import for_tensor_cores
    from tileiras.tileaa.passes import to_tileaa

    module, _ = _module("tg_fmha_f16_d128_causal_64x64")
    entry = next(op for op in module.walk() if op.name == "cuda_tile.entry")
    before = [op for op in entry.walk() if op.name == "cuda_tile.load_view_tko"
              and tuple(op.operand("view").type.dim_map) != tuple(range(4))]
    assert len(before) == 2   # K in the unmasked and in the masked loop
    to_tileaa(entry)
    loads = [op for op in entry.walk() if op.name == "cuda_tile.load_view_tko"]
    assert all(tuple(op.operand("view").type.dim_map) == tuple(range(4)) for op in loads)
    permutes = [op for op in entry.walk() if op.name == "cuda_tile.permute"]
    assert len(permutes) == 2 and all(p.results[0].type.shape == (128, 64) for p in permutes)
    assert all(p.results[0].uses[0].name == "cuda_tile.mmaf" for p in permutes)
    assert all(for_tensor_cores(op) for op in loads)
    to_tileaa(entry)   # idempotent
    assert len([op for op in entry.walk() if op.name == "cuda_tile.permute"]) == 2


def _fmha_arguments(seq: int) -> list[np.ndarray]:
    rng = np.random.default_rng(14)
    shape = (1, 32, seq, 128)   # [batch, heads, sequence, head dim]; H = 32 is the kernel's constant
    arrays = [rng.standard_normal(shape).astype(np.float16) for _ in range(4)]
    return arrays + [np.array(1 / np.sqrt(128), np.float32), np.array(0, np.int32)]


@pytest.mark.parametrize("gpu", ["sm_80", pytest.param("sm_90", marks=pytest.mark.sweep)])
def test_fmha_with_a_transposing_view_matches_the_interpreter(gpu: str) -> None:
    """TileGym's causal attention (K loaded through order=(0, 1, 3, 2)) at a ragged sequence length
    (127: a partial last query and key tile, zero-filled cp.async rows), one head, race checker on."""
    from tileiras.runtime import run_arrays

    name = "tg_fmha_f16_d128_causal_64x64"
    module, source = _module(name)
    seq = 127
    grid = (-(-seq // 64), 1, 1)
    ref = run_arrays(module, name, grid, _fmha_arguments(seq), backend="interpreter")
    got = run_arrays(module, name, grid, _fmha_arguments(seq), backend="emulator", gpu_name=gpu, source=source,
                     filename=f"{name}.tileirbc", check_races=True)
    out, want = np.asarray(got[3]).astype(np.float64), np.asarray(ref[3]).astype(np.float64)
    untouched = _fmha_arguments(seq)[3]
    assert not np.array_equal(want[:, 0], untouched[:, 0].astype(np.float64))   # head 0 was written
    np.testing.assert_allclose(out[:, 0], want[:, 0], rtol=2.0 ** -10, atol=2.0 ** -9 * np.abs(want[:, 0]).max())
    assert np.array_equal(np.asarray(got[3])[:, 1:], untouched[:, 1:])    # no stray writes to other heads
    for got_in, ref_in in zip(got[:3], ref[:3]):
        assert np.array_equal(np.asarray(got_in), np.asarray(ref_in))


def matmul_bt(a, bt, c, TM: int, TN: int, TK: int):
    """C = A @ Bt^T with Bt stored (N, K): B read through a transposing view (an "NT" GEMM)."""
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), ct.float32)
    for kk in range(ct.num_tiles(a, 1, (TM, TK))):
        x = ct.load(a, (bm, kk), shape=(TM, TK))
        y = ct.load(bt, (kk, bn), shape=(TK, TN), order=(1, 0))
        acc = ct.mma(x, y, acc)
    ct.store(c, (bm, bn), tile=acc)


def _matmul_bt_bytecode(tm: int, tn: int, tk: int) -> bytes:
    import io

    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       export_kernel)

    def array(dtype):
        return ArrayConstraint(dtype=dtype, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=16,
                               stride_divisible_by=(8, 1), base_addr_divisible_by=16)

    params = [array(ct.float16), array(ct.float16), array(ct.float32),
              ConstantConstraint(tm), ConstantConstraint(tn), ConstantConstraint(tk)]
    buf = io.BytesIO()
    kernel = ct.kernel(matmul_bt)
    export_kernel(kernel, [KernelSignature(parameters=params, calling_convention=CallingConvention.cutile_python_v1())],
                  buf, output_format="tileir_bytecode", bytecode_version="13.4", gpu_code="sm_90")
    return buf.getvalue()


def test_nt_matmul_reads_b_in_tensor_order_and_matches_numpy(tmp_path: Path) -> None:
    """A 2-D transposing view (no unit dimensions): B's tile is copied with 16-byte cp.async (no
    element-wise loads) and the product matches numpy on the emulator, race checker on."""
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    data = _matmul_bt_bytecode(64, 64, 32)
    src = tmp_path / "nt.tileirbc"
    src.write_bytes(data)
    ptx = tmp_path / "nt.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--no-cache", "--emit=ptx",
                           "--gpu-name", "sm_80", str(src), "-o", str(ptx)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    text = ptx.read_text()
    assert "cp.async.cg.shared.global" in text and "ld.global.b16" not in text and "ld.global.u16" not in text
    module = load_module(data, src.name)
    name = next(str(op.attributes["sym_name"]) for op in module.regions[0].block.operations
                if op.name == "cuda_tile.entry")
    rng = np.random.default_rng(3)
    m, n, k = 64, 128, 128
    a = rng.standard_normal((m, k)).astype(np.float16)
    bt = rng.standard_normal((n, k)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    out = run_arrays(module, name, (m // 64, n // 64, 1), [a, bt, c], backend="emulator", gpu_name="sm_80",
                     check_races=True)[2]
    want = a.astype(np.float32) @ bt.astype(np.float32).T
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
