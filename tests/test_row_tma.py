"""Row kernels' tiles moved by TMA on sm_90, sm_100 and sm_120 (lowering/row_tma.py): which loads and
stores go through shared memory by `cp.async.bulk.tensor`, the boxes, the group of loads issued
together, and the kernels on the emulator against the interpreter with the race checker on
(sm_90 runs in test_realistic_emulator.py for every realistic configuration)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BYTECODE = ROOT / "tests" / "realistic" / "bytecode"
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import edit_ptx, emulate, interpret, without_wait  # noqa: E402
from test_realistic_emulator import _check  # noqa: E402

from tileiras.target import with_feature  # noqa: E402

LOAD_2D = "cp.async.bulk.tensor.2d.shared::cta.global"
LOAD_1D = "cp.async.bulk.tensor.1d.shared::cta.global"
STORE_2D = "cp.async.bulk.tensor.2d.global.shared::cta"
STORE_1D = "cp.async.bulk.tensor.1d.global.shared::cta"


def _ptx(src: Path, gpu: str, tmp_path: Path, *extra: str) -> tuple[str, str]:
    out = tmp_path / f"{src.stem}.{gpu}.ptx"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--emit=ptx", "--gpu-name", gpu,
                           str(src), "-o", str(out), *extra], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return out.read_text(), done.stdout + done.stderr


@pytest.mark.parametrize("gpu", [row.name for row in with_feature("row_tma")])
def test_a_layernorm_moves_its_rows_by_tma(gpu: str, tmp_path: Path) -> None:
    """layernorm over 4096 f16 columns: x (1 x 4096) in 16 boxes of 256 columns, w and b (4096) in
    16 one-dimensional boxes each, all three issued together on three mbarriers before x is
    reduced, read back with 16-byte shared loads; y stored by TMA in 16 boxes; four hidden
    tensor maps after the user's 17 parameters (as NVIDIA's compiler does)."""
    ptx, remarks = _ptx(BYTECODE / "layernorm_f16_n4096.tileirbc", gpu, tmp_path, "--remarks=all")
    assert ptx.count(LOAD_2D) == 16 and ptx.count(LOAD_1D) == 32 and ptx.count(STORE_2D) == 16
    assert ptx.count("mbarrier.init") == 3 and ptx.count("mbarrier.arrive.expect_tx") == 3
    # the group is issued before the first wait: w and b arrive while x is reduced
    assert ptx.rindex(LOAD_1D) < ptx.index("// wait: one-shot TMA load")
    assert ptx.count("// wait: one-shot TMA load") == 3
    assert "ld.global" not in ptx and "st.global" not in ptx
    assert len(re.findall(r"ld\.shared\.v4\.b32", ptx)) >= 3 * 4
    assert len(re.findall(r"\.param \.align 64 \.b8 \w+\[128\]", ptx)) == 4
    assert remarks.count("TMA load (cp.async.bulk.tensor to shared memory)") == 3
    assert remarks.count("TMA store (cp.async.bulk.tensor from shared memory)") == 1


def test_sm_80_keeps_its_global_accesses(tmp_path: Path) -> None:
    ptx, _ = _ptx(BYTECODE / "layernorm_f16_n4096.tileirbc", "sm_80", tmp_path)
    assert "cp.async.bulk" not in ptx and "mbarrier" not in ptx
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx


@pytest.mark.parametrize("name", ["vector_add_f32_1024", "transpose_f32_64x64"])
def test_elementwise_kernels_keep_their_global_accesses(name: str, tmp_path: Path) -> None:
    """Each tile passes through registers once: 16-byte global loads and stores, as NVIDIA's."""
    ptx, _ = _ptx(BYTECODE / f"{name}.tileirbc", "sm_90", tmp_path)
    assert "cp.async.bulk" not in ptx and "ld.global.v4" in ptx and "st.global.v4" in ptx


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", "sm_120"])
def test_a_kernel_that_maps_its_tiles_once_keeps_its_global_accesses(gpu: str, tmp_path: Path) -> None:
    """rope reads x's halves twice and broadcasts its cos/sin tables over the 32 heads, but has no
    loop and no reduction: nothing would overlap the copies, so its tiles stay 16-byte global
    accesses, as NVIDIA's (no TMA, no mbarrier). Each thread loads the table elements its x
    elements need, where it needs them (`broadcast_source`): no shared memory at all."""
    ptx, _ = _ptx(BYTECODE / "rope_bf16_s4h32d128.tileirbc", gpu, tmp_path)
    assert "cp.async.bulk" not in ptx and "mbarrier" not in ptx
    assert "ld.global.v4.b32" in ptx and "st.global.v4.b32" in ptx
    assert ".shared" not in ptx


def test_a_softmax_padded_with_minus_infinity_loads_directly_and_stores_by_tma(tmp_path: Path) -> None:
    """TMA fills what lies outside the tensor with zeros, not -inf: the softmax's rows are global
    loads (as NVIDIA's), the remark says why, and its 4 x 1024 output goes out in 16 boxes of one
    row and 256 columns."""
    ptx, remarks = _ptx(BYTECODE / "softmax_f16_n1024_r4.tileirbc", "sm_90", tmp_path, "--remarks=all")
    assert LOAD_2D not in ptx and "ld.global.v4.b32" in ptx
    assert ptx.count(STORE_2D) == 16 and "st.global" not in ptx
    assert "pads with neg_inf" in remarks


def test_stores_in_a_loop_wait_until_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without its loops pipelined (TMA stages filled by a producer warpgroup on every TMA target; turned
    off here) the chunked layernorm stores y by TMA chunk by chunk inside its loop, whose next iteration
    reads memory: the issuing thread waits for the boxes to be written (not only read), and the
    emulator's result matches the interpreter's."""
    from tileiras.schedule import pipeline

    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(pipeline, "plan_pipelines", lambda entry, assignment, declined=None: {})
    seen = edit_ptx(monkeypatch, lambda text: text)
    _check("layernorm_chunked_f16_n8192_t2048", "sm_100")
    ptx = seen[0]
    assert ptx.count(STORE_2D) == 8 and "cp.async.bulk.wait_group 0;" in ptx
    assert "wait_group.read" not in ptx


@pytest.mark.parametrize("name", ["layernorm_f16_n4096", "softmax_f16_n1024_r4", "rmsnorm_bf16_n16384",
                                  "layernorm_chunked_f16_n8192_t2048", "rope_bf16_s4h32d128"])
@pytest.mark.parametrize("gpu", ["sm_100", "sm_120"])
def test_row_kernels_match_the_interpreter(name: str, gpu: str) -> None:
    _check(name, gpu)


def test_a_reader_that_skips_the_wait_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault, EmulatorError

    edit_ptx(monkeypatch, without_wait("one-shot TMA load"))
    with pytest.raises((DeviceFault, TileirasError, EmulatorError), match="mbarrier wait"):
        _check("layernorm_f16_n4096", "sm_90")


# load A, store B, load C, store D (A + C less C's max: the kernel reduces, so its tiles may go by TMA):
# a group ends at the first write, a load after it stays a global load
ORDERED = """
entry @ordered(%p0: tile<ptr<f32>>, %n0: tile<i32>, %s0: tile<i32>, %p1: tile<ptr<f32>>, %n1: tile<i32>, %s1: tile<i32>, %p2: tile<ptr<f32>>, %n2: tile<i32>, %s2: tile<i32>, %p3: tile<ptr<f32>>, %n3: tile<i32>, %s3: tile<i32>) {
  %0 = make_token : token
  %a = assume div_by<16>, %p0 : tile<ptr<f32>>
  %m0 = assume div_by<16>, %n0 : tile<i32>
  %ta = make_tensor_view %a, shape = [%m0], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %b = assume div_by<16>, %p1 : tile<ptr<f32>>
  %m1 = assume div_by<16>, %n1 : tile<i32>
  %tb = make_tensor_view %b, shape = [%m1], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %c = assume div_by<16>, %p2 : tile<ptr<f32>>
  %m2 = assume div_by<16>, %n2 : tile<i32>
  %tc = make_tensor_view %c, shape = [%m2], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %d = assume div_by<16>, %p3 : tile<ptr<f32>>
  %m3 = assume div_by<16>, %n3 : tile<i32>
  %td = make_tensor_view %d, shape = [%m3], strides = [1] : tile<i32> -> tensor_view<?xf32, strides=[1]>
  %bx, %by, %bz = get_tile_block_id : tile<i32>
  %pa = make_partition_view %ta : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>
  %x, %t1 = load_view_tko weak %pa[%bx] token = %0 : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<256xf32>, token
  %pb = make_partition_view %tb : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>
  %t2 = store_view_tko weak %x, %pb[%bx] token = %0 : tile<256xf32>, partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
  %pc = make_partition_view %tc : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>
  %y, %t3 = load_view_tko weak %pc[%bx] token = %0 : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>, tile<i32> -> tile<256xf32>, token
  %mx = reduce %y dim=0 identities=[0xFF800000 : f32] : tile<256xf32> -> tile<f32>
  (%u: tile<f32>, %v: tile<f32>) {
    %w = maxf %u, %v : tile<f32>
    yield %w : tile<f32>
  }
  %r = reshape %mx : tile<f32> -> tile<1xf32>
  %bm = broadcast %r : tile<1xf32> -> tile<256xf32>
  %xy = addf %x, %y : tile<256xf32>
  %s = subf %xy, %bm : tile<256xf32>
  %pd = make_partition_view %td : partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>
  %t4 = store_view_tko weak %s, %pd[%bx] token = %0 : tile<256xf32>, partition_view<tile=(256), tensor_view<?xf32, strides=[1]>>, tile<i32> -> token
  return
}
"""


def test_a_group_of_loads_ends_at_the_first_write(tmp_path: Path) -> None:
    from tileiras.frontend import load_module

    src = tmp_path / "ordered.mlir"
    src.write_text(ORDERED)
    ptx, _ = _ptx(src, "sm_90", tmp_path)
    assert ptx.count(LOAD_1D) == 1 and ptx.count("mbarrier.init") == 1   # A only
    assert "ld.global" in ptx                                             # C: after the store to B
    assert ptx.count("cp.async.bulk.tensor.1d.global.shared::cta") == 2   # B and D
    # B is stored while C's load follows: its thread waits until the box is written
    assert "cp.async.bulk.wait_group 0;" in ptx and "wait_group.read" in ptx
    module = load_module(ORDERED.encode(), "ordered.mlir")
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(1024).astype(np.float32) for _ in range(4)]   # (ptr, shape, stride) each
    got, ref = emulate(module, args, "sm_90", (4, 1, 1)), interpret(module, args, (4, 1, 1))
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g, r)
    np.testing.assert_array_equal(got[1], args[0])
    y = args[2].reshape(4, 256)
    np.testing.assert_array_equal(got[3], ((args[0] + args[2]).reshape(4, 256) - y.max(axis=1, keepdims=True)).ravel())


# -- row loops: software-pipelined like the tensor-core loops (schedule/pipeline.py `_register_load`) --
@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", "sm_120"])
def test_a_row_loop_is_software_pipelined(gpu: str, tmp_path: Path) -> None:
    """row_sum (16 x 512 f32 chunks) on sm_90+: its loop's load becomes a ring of stages filled
    iterations ahead by TMA (full/empty mbarriers), the threads reading each stage into registers; a
    producer warpgroup that gives registers away issues the copies on every target, as NVIDIA's
    compiler does (a row kernel runs no mma: sm_100 has no MMA warp to give it, warp_roles.has_mma)."""
    ptx, remarks = _ptx(BYTECODE / "row_sum_f32_16x512.tileirbc", gpu, tmp_path, "--remarks=all")
    assert LOAD_2D in ptx and "ld.global" not in ptx
    assert "// wait: stage full" in ptx and "Loop software-pipelined" in remarks
    assert "setmaxnreg.dec" in ptx and ".reqntid 256" in ptx
    # the consumers store the sums by TMA (row_copies.candidate), their barriers named, as NVIDIA's does
    assert STORE_1D in ptx and "st.global" not in ptx
    assert remarks.count("TMA store (cp.async.bulk.tensor from shared memory)") == 1


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_a_split_row_kernels_store_unfenced_for_the_async_proxy_is_reported(gpu: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The consumers write the sums into the store's buffer, fence the async proxy and meet on their named
    barrier before one of them issues the TMA store: without the fence the emulator reports it."""
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault, EmulatorError

    def unfenced(text: str) -> str:
        text, n = re.subn(r"fence\.proxy\.async\.shared::cta;((?:\s*//[^\n]*\n)*\s*bar\.sync)", r"\1", text)
        assert n == 1, n
        return text
    edit_ptx(monkeypatch, unfenced)
    with pytest.raises((AssertionError, DeviceFault, TileirasError, EmulatorError), match="fence.proxy.async"):
        _check("row_sum_f32_16x512", gpu)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", "sm_120"])
def test_a_row_loop_whose_iterations_all_fit_in_flight_loads_directly(gpu: str, tmp_path: Path) -> None:
    """The chunked layernorm n8192 runs three loops of 4 iterations. The schedule of each reading loop
    wants more iterations in flight than it has, so a ring would only issue every copy at the loop's
    start, as plain loads do, with barriers to wait at: those two load directly, decided by
    plan-pipelines and shown in its dump (on the H100, 1.48x NVIDIA's time pipelined, 1.00x so). The
    third loop (normalize and store) wants 3 of its 4 and stays pipelined."""
    ptx, remarks = _ptx(BYTECODE / "layernorm_chunked_f16_n8192_t2048.tileirbc", gpu, tmp_path, "--remarks=all",
                        "--print-ir-after-all")
    declined = r"the schedule wants \d+ iterations in flight, and the loop has 4: a ring would issue every copy"
    assert remarks.count("Loop not software-pipelined") == 2 and len(re.findall(declined, remarks)) >= 4
    assert remarks.count("Loop software-pipelined") == 1
    assert re.search(r"//   loop at .*:133:4: not pipelined: " + declined, remarks)
    assert ptx.count("// wait: stage full") >= 1 and "ld.global" in ptx


def test_sm_80_row_loops_load_directly(tmp_path: Path) -> None:
    ptx, _ = _ptx(BYTECODE / "row_sum_f32_16x512.tileirbc", "sm_80", tmp_path)
    assert "cp.async" not in ptx and "mbarrier" not in ptx and "ld.global.v4" in ptx


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", "sm_120"])
@pytest.mark.parametrize("name, recipe", [("row_sum_f32_16x512", "small"), ("row_sum_f32_16x512", "ragged"),
                                          ("layernorm_chunked_f16_n16384_t1024", "small")])
def test_pipelined_row_loops_match_the_interpreter(name: str, recipe: str, gpu: str) -> None:
    _check(name, gpu, recipe)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100"])
def test_a_row_loop_reading_a_stage_before_it_is_full_is_reported(gpu: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault, EmulatorError

    edit_ptx(monkeypatch, without_wait("stage full"))
    with pytest.raises((DeviceFault, TileirasError, EmulatorError), match="mbarrier wait"):
        _check("row_sum_f32_16x512", gpu)


@pytest.mark.parametrize("gpu", ["sm_90", "sm_100", "sm_120"])
def test_a_row_loops_padding_is_put_back_after_the_copy(gpu: str) -> None:
    """row_max (32 x 256 chunks, its view padded with -inf) is a pipelined row loop: TMA fills its stages
    with zeros outside the tensor, and the readers put -inf back (ops_memory.restore_padding). With every
    input negative and the last chunk 8 columns wide, a zero left in place would be every row's max."""
    from test_realistic_emulator import _module

    import configs

    from tileiras.runtime import run_arrays

    small = configs.ragged(next(c for c in configs.all_configs() if c.name == "row_max_f16_32x256"))
    x = -np.abs(np.random.default_rng(7).standard_normal(small.params[0].shape)).astype(np.float16) - 0.5
    x_arr, y_arr = small.arrays
    assert x_arr.shape == x.shape and y_arr.output
    args = [x, np.zeros(y_arr.shape, np.float16)]
    module, source = _module("row_max_f16_32x256")
    got = run_arrays(module, "row_max_f16_32x256", small.grid, args, backend="emulator", gpu_name=gpu,
                     source=source, filename="row_max_f16_32x256.tileirbc", check_races=True)
    np.testing.assert_array_equal(got[1], x.max(axis=1))
