"""TMA-fed sm_90 and sm_100 pipelines (lowering/tma_copy.py): the choice, the kernel's hidden tensor-map
parameters, their launch metadata and `.nv.info`, and the emulator running the kernels against
the interpreter with the race checker on.

A race from a consumer that skips the full-barrier wait of a TMA-fed stage is
test_mbarrier_pipeline.test_a_pipeline_without_a_wait_is_reported_as_a_race (sm_90, "stage
full"): its matmul is the one checked TMA-fed here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BYTECODE = ROOT / "tests" / "realistic" / "bytecode"
sys.path.insert(0, str(ROOT / "tests"))

from emulator_runs import edit_ptx, emulate, removing, without_wait  # noqa: E402
from test_realistic_emulator import _check  # noqa: E402


def _compile(src: Path, tmp_path: Path, emit: str = "ptx", *extra: str, gpu: str = "sm_90") -> tuple[Path, object]:
    from tileiras.codegen.metadata import ModuleMetadata

    out = tmp_path / f"k.{emit}"
    done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", f"--emit={emit}", "--gpu-name",
                           gpu, "--emit-metadata", str(src), "-o", str(out), *extra],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return out, ModuleMetadata.from_json(Path(str(out) + ".json").read_text())


def test_matmul_loads_by_tma_through_hidden_parameters(tmp_path: Path) -> None:
    """128x128x64 f16: A (128 x 64, K contiguous) is one 64x128 box, B (64 x 128, N contiguous) two
    64x64 boxes, 32 KB a stage, as NVIDIA's compiler copies them, and the epilogue stores C with
    TMA; the three maps are `.hidden` parameters after the user's 15 (as NVIDIA's) and the
    metadata says how each field is filled."""
    from tileiras.codegen.tma_params import Field, TmaParam

    ptx_path, meta = _compile(BYTECODE / "mm_f16_128x128x64.tileirbc", tmp_path)
    ptx = ptx_path.read_text()
    info = meta.kernels[0]
    assert len(info.params) == 15
    assert info.tma == (
        # a[M, K] (params 0..4: base, M, K, stride of M, stride of K = 1): dims innermost first
        TmaParam(0, "f16", (Field(2), Field(1)), (Field(-1, 1), Field(3)), (64, 128), "128B"),
        TmaParam(5, "f16", (Field(7), Field(6)), (Field(-1, 1), Field(8)), (64, 64), "128B"),
        TmaParam(10, "f16", (Field(12), Field(11)), (Field(-1, 1), Field(13)), (64, 64), "128B"))
    hidden = re.findall(r"\.hidden\t\.param \.align 64 \.b8 mm_f16_128x128x64_param_(\d+)\[128\]", ptx)
    assert hidden == ["15", "16", "17"] and "_param_18" not in ptx
    assert ptx.count("prefetch.tensormap") == 2        # the loads' maps, by the producer thread
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile\.bulk_group", ptx)
    assert len(stores) == 4 and "cp.async.bulk.wait_group.read 0;" in ptx   # C: four 64x64 boxes
    copies = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cta\.global\.tile\.mbarrier::complete_tx::bytes", ptx)
    assert len(copies) == 3 and "cp.async.cg" not in ptx
    assert re.search(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[%r\d+\], %r\d+;", ptx)
    assert "32768" in ptx                      # the stage's bytes, announced once
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx


# sm_90 kernels whose descriptors are NVIDIA's, field for field (test_nv_host.KERNELS: what its
# cubins' callbacks write): the same maps, in the same order, from the same parameters, with the
# same boxes, swizzles and element types (attention: the query tile's one-shot load first).
SAME_AS_NVIDIA = ["mm_f16_128x128x64", "bmm_bf16_128x128x32", "mm_bf16_128x128x32", "mm_f16_256x128x64",
                  "mm_tf32_128x128x32", "mm_e4m3_64x64x32", "mm_i8_128x128x32", "fa_f16_q128k128d128"]
# sm_100: the loads' maps (boxes of at most 128 rows: i8 256x128's A is two bands) and C's, stored by
# the chunked tensor-memory epilogue in boxes of 128 rows. (tf32 differs: NVIDIA's N-major B map
# uses the 128B swizzle with 32-byte atoms, the layout tcgen05 reads MN-major tf32 from; ours the
# plain 128B swizzle its MMA descriptor names.)
SAME_AS_NVIDIA_SM100 = ["mm_f16_128x128x64", "mm_e4m3_128x128x64", "mm_i8_256x128x64", "bmm_f16_64x64x32"]


@pytest.mark.parametrize("name,gpu", [(n, "sm_90") if i < 2 else pytest.param(n, "sm_90", marks=pytest.mark.sweep)
                                      for i, n in enumerate(SAME_AS_NVIDIA)]
                         + [(n, "sm_100") if i < 1 else pytest.param(n, "sm_100", marks=pytest.mark.sweep)
                            for i, n in enumerate(SAME_AS_NVIDIA_SM100)])
def test_descriptors_are_nvidias(name: str, gpu: str, tmp_path: Path) -> None:
    from test_nv_host import KERNELS

    _, meta = _compile(BYTECODE / f"{name}.tileirbc", tmp_path, gpu=gpu)
    assert list(meta.kernels[0].tma) == list(KERNELS[(name, gpu)][1])


def test_sm100_producer_is_one_thread_issuing_boxes(tmp_path: Path) -> None:
    """sm_100 128x128x64 f16 (producer warp, MMA warp and two idle warps, one warpgroup with setmaxnreg beside the
    epilogue warpgroup: 256 threads, the SM holding one such CTA by its shared memory): one producer thread
    prefetches the two load maps and per stage announces its 32 KB on the full barrier and issues
    A's box and B's two; the MMA thread reads TMA-written stages without a proxy fence (the only
    one left is the epilogue's, before C's two 64x128 store boxes)."""
    ptx_path, meta = _compile(BYTECODE / "mm_f16_128x128x64.tileirbc", tmp_path, gpu="sm_100")
    ptx = ptx_path.read_text()
    assert ".reqntid 256, 1, 1" in ptx and "setmaxnreg.dec.sync.aligned.u32 40;" in ptx and "cp.async.cg" not in ptx and "cp.async.mbarrier" not in ptx
    copies = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cta\.global\.tile\.mbarrier::complete_tx::bytes", ptx)
    assert len(copies) == 3 and ptx.count("prefetch.tensormap") == 2 and "32768" in ptx
    assert len(re.findall(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64", ptx)) == 1
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.tile\.bulk_group", ptx)
    assert len(stores) == 2 and ptx.count("fence.proxy.async.shared::cta") == 1
    assert [t.box for t in meta.kernels[0].tma] == [(64, 128), (64, 64), (64, 128)]


def test_hidden_parameters_stay_out_of_the_kernels_param_info(tmp_path: Path) -> None:
    """ptxas leaves `.hidden` parameters out of EIATTR_KPARAM_INFO (the user's 15, at NVIDIA's
    offsets) and keeps their room in the parameter bank: 0x48 bytes of user parameters, the maps
    at 0x70, 0xf0 and 0x170 (64-byte aligned in the bank, which starts at 0x210): 0x1f0 bytes,
    NVIDIA's cubin's size."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sass_stats import cuobjdump_path

    tool = cuobjdump_path()
    if tool is None:
        pytest.skip("cuobjdump (nvidia-cuda-cuobjdump) is not installed")
    cubin, _ = _compile(BYTECODE / "mm_f16_128x128x64.tileirbc", tmp_path, "cubin")
    elf = subprocess.run([str(tool), "-elf", str(cubin)], capture_output=True, text=True, check=True).stdout
    params = re.findall(r"Ordinal : 0x([0-9a-f]+)\tOffset  : 0x([0-9a-f]+)\tSize    : 0x([0-9a-f]+)", elf)
    assert sorted(int(o, 16) for o, _, _ in params) == list(range(15))
    assert max(int(off, 16) + int(size, 16) for _, off, size in params) == 0x48
    size = re.search(r"EIATTR_CBANK_PARAM_SIZE\n\s*Format:.*\n\s*Value:\s*0x([0-9a-f]+)", elf)
    assert size and int(size.group(1), 16) == 0x70 + 3 * 128


def _strided_matmul() -> bytes:
    """The realistic matmul with rows known only 8-byte aligned (strides divisible by 4 f16
    elements): cp.async's 8-byte copies are legal, TMA's 16-byte stride rule is not proven (but
    for the f32 C, whose rows are 16-byte multiples)."""
    import io

    import cuda.tile as ct
    from cuda.tile.compilation import (ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature,
                                       export_kernel)
    from test_tile_layer import corpus_kernels

    def arr(dtype):
        return ArrayConstraint(dtype=dtype, ndim=2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=16,
                               stride_divisible_by=(4, 1), base_addr_divisible_by=16)
    buf = io.BytesIO()
    sig = KernelSignature(parameters=[arr(ct.float16), arr(ct.float16), arr(ct.float32), ConstantConstraint(128),
                                      ConstantConstraint(128), ConstantConstraint(64)],
                          calling_convention=CallingConvention.cutile_python_v1())
    export_kernel(corpus_kernels.load("matmul").matmul, [sig], buf, output_format="tileir_bytecode",
                  bytecode_version="13.4", gpu_code="sm_90")
    return buf.getvalue()


def test_an_unaligned_view_keeps_cp_async_with_a_remark(tmp_path: Path) -> None:
    from remark_yaml import arg, load_remarks

    src = tmp_path / "strided.tileirbc"
    src.write_bytes(_strided_matmul())
    yaml_file = tmp_path / "r.yaml"
    ptx_path, meta = _compile(src, tmp_path, "ptx", "--remark-format=yaml", "--remarks=all",
                              f"--remarks-output-file={yaml_file}")
    ptx = ptx_path.read_text()
    assert [t.address for t in meta.kernels[0].tma] == [10]           # only C's store
    assert "cp.async.bulk.tensor.2d.shared::cta.global" not in ptx and "prefetch.tensormap" not in ptx
    assert "cp.async.ca.shared.global" in ptx and "mbarrier.try_wait.parity" in ptx   # still pipelined
    missed = [r for r in load_remarks(yaml_file.read_text()) if r["Name"] == "RemarkTmaLoadMissed"]
    assert len(missed) == 2, missed
    assert any("stride 0 is known a multiple of 8 bytes, not of 16" in str(arg(r, "Reason")) for r in missed)


# TMA-fed sm_90 kernels at their real tiles on the emulator against the interpreter (race checker
# on), every element type at 128x128x64 and 128x256x64, and attention: a sweep. The default suite
# runs TMA-fed kernels already: test_realistic_emulator's sample on sm_90 (f16 128x128x64, int8
# 128x256x64 with two consumer warpgroups, tf32, e4m3, causal attention) and test_mbarrier_pipeline.
DEFAULT: list[str] = []
SWEEP = [f"mm_{t}_{tile}" for t in ("f16", "bf16", "tf32", "e4m3", "i8") for tile in ("128x128x64", "128x256x64")
         if f"mm_{t}_{tile}" not in DEFAULT] + [
    "fa_f16_q128k64d64", "fa_f16_q64k64d128_causal", "fa_bf16_q128k64d128", "bmm_f16_128x128x64", "mm_tf32_256x128x64"]


# sm_100 (warp-specialized: one TMA producer thread, the MMA warp, C stored by TMA from the chunked
# epilogue); the default suite also runs test_mbarrier_pipeline's sm_100 matmuls (128x128, 64x64,
# 320 threads) and test_warp_specialize_tcgen05's (128x256 f16, 64x64 tf32), TMA-fed, race checker on
DEFAULT_SM100 = ["mm_f16_128x128x64"]
SWEEP_SM100 = ["mm_f16_128x256x64", "mm_tf32_128x128x64", "mm_e4m3_128x128x64", "mm_i8_256x128x64",
               "mm_bf16_256x128x64", "bmm_f16_64x64x32", "fa_bf16_q128k64d128_causal"]


@pytest.mark.parametrize("name,gpu", [(n, "sm_90") for n in DEFAULT] + [(n, "sm_100") for n in DEFAULT_SM100]
                         + [pytest.param(n, "sm_90", marks=pytest.mark.sweep) for n in SWEEP]
                         + [pytest.param(n, "sm_100", marks=pytest.mark.sweep) for n in SWEEP_SM100])
def test_tma_fed_kernel_matches_the_interpreter(name: str, gpu: str, tmp_path: Path) -> None:
    _, meta = _compile(BYTECODE / f"{name}.tileirbc", tmp_path, gpu=gpu)
    assert meta.kernels[0].tma, f"{name}: no TMA load on {gpu}"
    _check(name, gpu)


def test_sm100_tma_store_without_its_proxy_fence_is_a_race(monkeypatch) -> None:
    """The chunked epilogue's generic writes of C into the swizzled buffer must be fenced for the
    async proxy before the TMA store reads them: without the fence the race checker says so."""
    from tileiras.emulator import EmulatorError

    edit_ptx(monkeypatch, removing(r"fence\.proxy\.async\.shared::cta;", count=1,
                                   needs="cp.async.bulk.tensor.2d.global.shared::cta"))
    with pytest.raises(EmulatorError, match=r"fence\.proxy\.async"):
        _check("mm_f16_128x128x64", "sm_100")


def test_metadata_carries_the_tensor_maps_and_refuses_bad_ones() -> None:
    """The `tma` records survive the JSON round trip (absent when a kernel has none, so other
    kernels' metadata is unchanged); a record naming a parameter the kernel lacks is refused."""
    import json

    from tileiras.codegen.metadata import KernelInfo, KernelParam, ModuleMetadata
    from tileiras.errors import TileirasError
    from tileiras.codegen.tma_params import Field, TmaParam

    spec = TmaParam(0, "bf16", (Field(2), Field(1)), (Field(-1, 1), Field(3)), (64, 128), "128B")
    params = (KernelParam("arg0", "ptr<bf16>"), *(KernelParam(f"arg{i}", "i32") for i in range(1, 5)))
    meta = ModuleMetadata((KernelInfo("k", params, (256, 1, 1), tma=(spec,)),
                           KernelInfo("plain", params, (128, 1, 1))), "sm_90")
    text = meta.to_json()
    assert ModuleMetadata.from_json(text) == meta
    doc = json.loads(text)
    assert "tma" not in doc["kernels"][1]
    doc["kernels"][0]["tma"][0]["dims"][0] = [9, 0]        # the kernel has 5 parameters
    with pytest.raises(TileirasError, match=r"kernels\[0\]\.tma\[0\] names a parameter"):
        ModuleMetadata.from_json(json.dumps(doc))


@pytest.mark.sweep     # (20 s; the default suite runs this pipeline in test_mbarrier_pipeline)
def test_unspecialized_tma_pipeline_without_its_full_wait_is_a_race(monkeypatch, tmp_path: Path) -> None:
    """Without a producer warpgroup thread 0 issues each stage's TMA copies (every thread waits for
    everyone's release first); a consumer that reads a stage without waiting on its full barrier
    reads bytes the TMA unit is still writing: the race checker says so."""
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault
    from tileiras.tileas import warp_roles
    from test_tile_layer import _inputs, _matmul, _module

    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))   # not the suite's cache: other code
    monkeypatch.setattr(warp_roles, "decide", lambda k: (None, "turned off by the test"))
    seen = edit_ptx(monkeypatch, without_wait("stage full"))
    module = _module(_matmul("float16", "float32", 128, 128, 64))
    a, b, c = _inputs("float16", 128, 128, 6 * 64)
    with pytest.raises((DeviceFault, TileirasError), match="read before the mbarrier wait"):
        emulate(module, [a, b, c], "sm_90")
    ptx = seen[0]
    assert ".reqntid 128, 1, 1" in ptx and "setmaxnreg" not in ptx
    stages = ptx.count("mbarrier.init.shared::cta.b64") // 2
    # 3 boxes an iteration: the prologue's stages - 1 iterations, unrolled, and the loop's refill
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cta.global") == 3 * stages and "cp.async.cg" not in ptx


def test_our_nv_host_object_fills_our_kernels_hidden_parameters(tmp_path: Path) -> None:
    """The `.nv.host` object made from our PTX and metadata (codegen/nv_host.for_ptx, which finds
    the tensor maps as the PTX's last parameters) writes, where ptxas lays those parameters out,
    the descriptors the emulator's launcher computes (tma_params.hidden_params)."""
    import random

    from tileiras.codegen import nv_host
    from tileiras.codegen.tma_params import hidden_params
    from test_nv_host import KERNELS, _arguments, _buffer, _call, _callbacks, _link

    name = "mm_f16_128x128x64"
    ptx_path, meta = _compile(BYTECODE / f"{name}.tileirbc", tmp_path)
    specs = meta.kernels[0].tma
    types, _, ranks = KERNELS[(name, "sm_90")]
    obj = nv_host.for_ptx(ptx_path.read_text(), {name: specs}, 90)
    assert obj is not None
    fill = _callbacks(_link(obj, tmp_path / "ours"))[1][name]
    values = _arguments(types, ranks, random.Random(1))
    buf, maps = _buffer(types, values, len(specs), 90, bytes(2048))
    _call(fill, buf)
    assert [bytes(buf[off:off + 128]) for off in maps] == hidden_params(specs, values)


def test_the_cubin_carries_the_nv_host_object_and_a_hit_does_not_rebuild_it(tmp_path: Path) -> None:
    """`tileiras -o k.cubin` on a TMA kernel embeds, as `.nv.host`, the object made from its PTX and
    metadata; the cubin's key names the maps, so a second compile is a hit that builds nothing
    (`--time-passes` shows no ptxas) and writes the same bytes."""
    from tileiras.codegen import nv_host
    from tileiras.codegen.cubin import read_cubin

    name = "mm_f16_128x128x64"
    ptx_path, meta = _compile(BYTECODE / f"{name}.tileirbc", tmp_path)
    cache = tmp_path / "cache"
    outs = []
    for i in range(2):
        out = tmp_path / f"k{i}.cubin"
        done = subprocess.run([sys.executable, "-m", "tileiras.driver.tileiras_main", "--gpu-name", "sm_90",
                               "--cache-dir", str(cache), "--time-passes", str(BYTECODE / f"{name}.tileirbc"),
                               "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert ("ptxas (" in done.stderr) == (i == 0), done.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert read_cubin(outs[0]).sections[".nv.host"] == nv_host.for_ptx(ptx_path.read_text(),
                                                                        {name: meta.kernels[0].tma}, 90)


_ON_ANOTHER_HOST = r"""
import sys
import tileiras.host_platform as hp
hp.host_tag = lambda: "linux-aarch64"
from tileiras.driver.tileiras_main import main
sys.exit(main(sys.argv[1:]))
"""


def test_other_hosts_keep_cp_async_and_key_their_ptx_apart(tmp_path: Path) -> None:
    """The `.nv.host` callback is x86-64 Linux code: compiled on another host (an aarch64 Grace
    machine), the same matmul takes no tensor maps and copies with cp.async, with the remark saying
    why, and the PTX cache keys of the two hosts differ (a shared cache never mixes them)."""
    from tileiras.cache import keys
    from tileiras import host_platform

    out = tmp_path / "k.ptx"
    done = subprocess.run([sys.executable, "-c", _ON_ANOTHER_HOST, "--emit=ptx", "--gpu-name", "sm_90",
                           "--no-cache", "--emit-metadata", "--remarks=all",
                           str(BYTECODE / "mm_f16_128x128x64.tileirbc"), "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    ptx = out.read_text()
    assert ".hidden" not in ptx and "cp.async.bulk.tensor" not in ptx and "cp.async.cg" in ptx
    assert '"tma"' not in Path(str(out) + ".json").read_text()
    assert "x86-64 Linux hosts only, not linux-aarch64" in done.stdout + done.stderr
    assert host_platform.host_tag() == "linux-x86_64"
    here = keys.module_key("d" * 64, "sm_90", None)
    original = host_platform.host_tag
    try:
        host_platform.host_tag = lambda: "linux-aarch64"
        assert keys.module_key("d" * 64, "sm_90", None) != here
    finally:
        host_platform.host_tag = original


def test_attention_queries_are_one_shot_tma_loads(tmp_path: Path) -> None:
    """sm_90 attention (warp-specialized): the query tile, read by every iteration of the K/V loop,
    is copied once by TMA before it (as NVIDIA's: its map first, then K's and V's), on its own
    mbarrier: initialized for one arrival, the bytes announced, one box of 64 columns x 128 rows;
    the consumers wait for phase 0 and it is invalidated after the loop with the stages' barriers."""
    ptx_file, meta = _compile(BYTECODE / "fa_f16_q128k64d64.tileirbc", tmp_path)
    ptx = ptx_file.read_text()
    assert [t.box for t in meta.kernels[0].tma][:3] == [(64, 128, 1), (64, 64, 1), (64, 64, 1)]
    assert "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
    assert ptx.count("// wait: one-shot TMA load") == 1
    init = ptx.index("mbarrier.init")          # the query's barrier, before the stages' (the consumers' path)
    copy = ptx.index("cp.async.bulk.tensor.3d.shared::cta.global", ptx.index("mbarrier.arrive.expect_tx", init))
    assert copy < ptx.index("mbarrier.init", copy) < ptx.index("// wait: one-shot TMA load")
    assert "16384" in ptx                                   # 128 x 64 f16, announced once
    assert ptx.count("mbarrier.inval") == ptx.count("mbarrier.init")


@pytest.mark.parametrize("gpu", ["sm_90", pytest.param("sm_100", marks=pytest.mark.sweep)])
def test_attention_without_the_query_wait_is_a_race(gpu: str, monkeypatch) -> None:
    """Consumers that read the query tile without waiting for its one-shot barrier read bytes the
    TMA unit may still be writing: the race checker says so."""
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault
    from tileiras.emulator import EmulatorError

    edit_ptx(monkeypatch, without_wait("one-shot TMA load"))
    with pytest.raises((DeviceFault, TileirasError, EmulatorError), match="mbarrier wait"):
        _check("fa_f16_q64k64d64", gpu)


# The K-major copies of a loop in one slot each (`kmajor_copies.two_slots` refused): the freed buffers
# are then smaller than the i8 256x128's C, as in a loop whose ring has no room for second slots.
_ONE_SLOT = r"""
import sys
import tileiras.tileas.kmajor_copies as kmajor_copies
kmajor_copies.two_slots = lambda *args: False
from tileiras.driver.tileiras_main import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def one_slot_copies(monkeypatch, tmp_path: Path) -> None:
    """In this process: K-major copies in one slot, compiled afresh (the cache keys on our files)."""
    from tileiras.tileas import kmajor_copies

    monkeypatch.setattr(kmajor_copies, "two_slots", lambda *args: False)
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))


def test_a_c_larger_than_the_freed_buffers_is_stored_by_tma_in_chunks(tmp_path: Path, one_slot_copies) -> None:
    """i8 256x128 on sm_90, its B copied K-major in one slot: C (128 KB of i32) exceeds the freed
    pipeline buffers, so it goes by TMA in four 32-column chunks through two 32 KB buffers in turn
    (16 boxes of 32x64, as many as NVIDIA's), thread 0 waiting for the previous chunk's reads before
    the barrier that publishes the next; the emulator agrees with the interpreter, race checker on.
    (With two slots, the default, the freed buffers hold C whole: one group of the 16 boxes.)"""
    src = BYTECODE / "mm_i8_256x128x64.tileirbc"
    out = tmp_path / "k.ptx"
    done = subprocess.run([sys.executable, "-c", _ONE_SLOT, "--emit=ptx", "--no-cache", "--gpu-name", "sm_90",
                           "--emit-metadata", str(src), "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    ptx = out.read_text()
    assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta") == 16
    assert ptx.count("cp.async.bulk.commit_group;") == 4 and ptx.count("cp.async.bulk.wait_group.read 0;") == 4
    assert "st.global" not in ptx
    (tmp_path / "whole").mkdir()
    whole = _compile(src, tmp_path / "whole")[0].read_text()
    assert whole.count("cp.async.bulk.tensor.2d.global.shared::cta") == 16
    assert whole.count("cp.async.bulk.commit_group;") == 1
    _check("mm_i8_256x128x64", "sm_90")


@pytest.mark.sweep
def test_a_chunked_c_store_without_its_read_wait_is_a_race(monkeypatch, one_slot_copies) -> None:
    """Writing C's next chunk into a buffer a TMA store may still be reading is a race the checker
    reports (the waits before each chunk's barrier taken out, the last kept)."""
    from tileiras.emulator import EmulatorError
    from tileiras.runtime import backends

    real = backends.compile_module

    def without_waits(req, emit, gpu):
        ptx, meta = real(req, emit, gpu)
        text = ptx.decode()
        waits = text.count("cp.async.bulk.wait_group.read 0;")
        assert waits == 4
        return text.replace("cp.async.bulk.wait_group.read 0;", "", waits - 1).encode(), meta
    monkeypatch.setattr(backends, "compile_module", without_waits)
    with pytest.raises(EmulatorError, match="write-after-read"):
        _check("mm_i8_256x128x64", "sm_90")


@pytest.mark.parametrize("name,b_copy", [("mm_tf32_256x128x64", 32768), ("mm_tf32_128x256x64", 32768)])
def test_tf32_large_tiles_are_pipelined_by_tma(name: str, b_copy: int, tmp_path: Path) -> None:
    """tf32 256x128 / 128x256 on sm_90 (two 96 KB stages): A (f32, K-major as stored) is rounded to
    tf32 where TMA put it and wgmma reads the stage itself; only B (N-major) gets a K-major copy,
    made whole (256x128: 32 KB) or in two K halves through a 32 KB buffer (128x256: 64 KB would not
    fit). So the loop is pipelined, warp-specialized, by TMA (both were unpipelined, by cp.async)."""
    ptx_file, meta = _compile(BYTECODE / f"{name}.tileirbc", tmp_path)
    ptx = ptx_file.read_text()
    assert ".reqntid 384, 1, 1" in ptx and "cp.async.cg" not in ptx and "cp.async.ca" not in ptx
    assert ptx.count("mbarrier.init.shared::cta.b64") == 4            # two stages: full and empty each
    assert meta.kernels[0].dynamic_smem == 2 * 98304 + b_copy + 32   # the stages, B's copy, the mbarriers
    waits = len(re.findall(r"wgmma\.wait_group\.sync\.aligned\s+0;", ptx))
    assert waits == (2 if name == "mm_tf32_128x256x64" else 1), waits   # one more between B's halves


def test_a_ring_mixes_tma_boxes_and_cp_async_on_one_full_barrier(monkeypatch, tmp_path: Path) -> None:
    """sm_120's e4m3 matmul: A's stage, read by ldmatrix, is swizzled and filled by TMA; B, read
    transposed (no ldmatrix form for 8-bit), keeps its padded stage and cp.async, beside A's box on the
    same full mbarrier (its count: the TMA thread's arrival and every copying thread's); before, the
    padded B kept the whole ring on cp.async. The emulator agrees with the interpreter, and the race
    checker reports a stage read before the copying threads' bytes are counted (their arrivals
    taken out)."""
    from tileiras.errors import TileirasError
    from tileiras.emulator.errors import DeviceFault

    ptx = _compile(BYTECODE / "mm_e4m3_128x128x64.tileirbc", tmp_path, gpu="sm_120")[0].read_text()
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cta.global") >= 1 and "cp.async.cg.shared.global" in ptx
    assert "cp.async.mbarrier.arrive.noinc.shared" in ptx
    _check("mm_e4m3_128x128x64", "sm_120")
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path / "cache"))
    edit_ptx(monkeypatch, removing(r"\tcp\.async\.mbarrier\.arrive\.noinc\.shared(::cta)?\.b64 \[[^]]*\];\n"))
    with pytest.raises((DeviceFault, TileirasError)):
        _check("mm_e4m3_128x128x64", "sm_120")
