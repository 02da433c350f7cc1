"""Tensor maps a kernel makes itself (lowering/kernel_maps.py): a grouped GEMM reads each problem's arrays
from lists, so no launch-time descriptor can describe them; its pipelined K loop copies by TMA through maps
the issuing thread writes to global memory before the loop, released and acquired for the tensor-map proxy,
at home in the CTA's own memory (`%perctamemoryoffset`, `.minperctamemory`) or in the workspace the
`.nv.host` callback passes (codegen/nv_host.py; its differential test against NVIDIA's object is in
test_nv_host.py). The emulator runs both homes against numpy, and catches a map written without the fences
or two maps in one home."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "generated"), str(ROOT / "tests" / "realistic")]

import export  # noqa: E402
import grammar  # noqa: E402
import launch  # noqa: E402
import variant_reference as reference  # noqa: E402

from tileiras.codegen import ptxas  # noqa: E402
from tileiras.codegen.cubin import read_cubin  # noqa: E402
from tileiras.codegen.hidden_params import KERNEL_MAPS_PTX  # noqa: E402
from tileiras.codegen.metadata import ModuleMetadata  # noqa: E402
from tileiras.driver.tileiras_main import main as tileiras  # noqa: E402
from tileiras.lowering import kernel_maps  # noqa: E402

TILEGYM = ROOT / "tests" / "tilegym" / "bytecode" / "tg_group_gemm_f16_128x128x128.tileirbc"
GROUPED = "g_group_gemm_bf16_rc_g4_128x128x32_aligned_occ2_v13p4"     # 4 problems, B column-major
CLUSTERED = "g_group_gemm_bf16_rr_g2_64x128x64_ragged_ctas2_v13p3"   # row-major B, 2 CTAs a cluster
TARGETS = ["sm_90", "sm_100", "sm_120"]
needs_ptx_9_4 = pytest.mark.skipif(bool(ptxas.ptx_isa_unsupported(KERNEL_MAPS_PTX)),
                                   reason="this ptxas does not read PTX ISA 9.4")


def _compile(src: Path, gpu: str, tmp_path: Path, emit: str = "ptx") -> tuple[str, ModuleMetadata, str]:
    out = tmp_path / f"{src.stem}.{gpu}.{emit}"
    code = tileiras([f"--emit={emit}", "--gpu-name", gpu, "--emit-metadata", "--remarks=all", "--no-cache",
                     str(src), "-o", str(out)])
    assert code == 0
    meta = ModuleMetadata.from_json((tmp_path / f"{out.name}.json").read_bytes())
    return (out.read_text() if emit == "ptx" else ""), meta, str(out)


@needs_ptx_9_4
@pytest.mark.parametrize("gpu", TARGETS)
def test_a_grouped_gemm_copies_through_maps_it_makes(gpu: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    ptx, meta, _ = _compile(TILEGYM, gpu, tmp_path)
    said = capsys.readouterr()
    (info,) = meta.kernels
    assert info.kernel_maps == 2 and not info.tma and info.workspace == 2 * 64 * 128   # A's and B's
    assert "Pipelined load copied by TMA through a tensor map the kernel makes" in said.out + said.err
    assert "cp.async.bulk.tensor" in ptx and f".minperctamemory {128 * info.kernel_maps}" in ptx
    assert re.search(r"^\.version (\d+)\.(\d+)", ptx, re.M).groups() >= ("9", "4")
    params = re.search(r"\.entry \w+\((.*?)\)", ptx, re.S).group(1).split(",")
    assert len(params) == len(info.params) + 1 and params[-1].split()[:3] == [".hidden", ".param", ".u64"]
    # thread 0 writes each map where its view is made (once a problem, before the tile loop), releases the
    # writes, acquires each map; the loop then copies through it
    body = ptx[ptx.index("%perctamemoryoffset;"):]
    assert body.count("st.global.v2.b64") >= 8
    assert body.index("fence.proxy.tensormap::generic.release.gpu") < body.index("fence.proxy.tensormap::generic.acquire")
    assert body.index("fence.proxy.tensormap::generic.acquire") < body.index("mbarrier.init") \
        < body.index("cp.async.bulk.tensor")


@needs_ptx_9_4
def test_the_cubin_carries_the_callback_that_passes_the_workspace(tmp_path: Path) -> None:
    _, meta, path = _compile(TILEGYM, "sm_90", tmp_path, emit="cubin")
    sections = read_cubin(Path(path).read_bytes()).sections
    assert ".nv.host" in sections and meta.kernels[0].kernel_maps == 2


def test_a_ptxas_without_per_cta_memory_keeps_cp_async(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(ptxas, "ptx_isa_unsupported", lambda version: "ptxas 13.2 does not read PTX ISA 9.4")
    ptx, meta, _ = _compile(TILEGYM, "sm_90", tmp_path)
    said = capsys.readouterr()
    assert "cp.async.bulk.tensor" not in ptx and "perctamemory" not in ptx and not meta.kernels[0].kernel_maps
    assert "computed, not a kernel parameter (ptxas 13.2 does not read PTX ISA 9.4)" in said.out + said.err


def _emulate(name: str, gpu: str, per_cta_memory: bool = False) -> list[str]:
    from tileiras.frontend import load_module
    from tileiras.runtime import run_arrays

    v = grammar.parse(name)
    spec = launch.launch(v)
    args = reference.inputs(v, spec)
    want = reference.expected(v, spec, args)
    bytecode = export.bytecode(v, gpu).read_bytes()
    got = run_arrays(load_module(bytecode, f"{name}.tileirbc"), v.name, spec.grid, reference.copies(args),
                     backend="emulator", gpu_name=gpu, source=bytecode, filename=f"{name}.tileirbc",
                     check_races=True, per_cta_memory=per_cta_memory)
    return reference.compare(v, spec, got, want, args, gpu)


@needs_ptx_9_4
@pytest.mark.parametrize("name,gpu,per_cta", [(GROUPED, "sm_90", False), (GROUPED, "sm_90", True),
                                              (GROUPED, "sm_100", False), (CLUSTERED, "sm_120", True),
                                              (CLUSTERED, "sm_90", False)])
def test_the_maps_hold_each_problems_arrays(name: str, gpu: str, per_cta: bool) -> None:
    """Against numpy, problem by problem: in the workspace (each CTA on its own SM: %smid, %nsmid) and in
    the CTAs' own memory; a cluster's CTAs each make their own."""
    assert not _emulate(name, gpu, per_cta)


@needs_ptx_9_4
@pytest.mark.parametrize("mutant,caught", [
    ("release", "missing fence.proxy.tensormap::generic.release"),
    ("acquire", "missing fence.proxy.tensormap::generic.acquire"),
    ("home", "differ|data race")])
def test_a_map_without_its_fences_or_home_is_caught(mutant: str, caught: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The race checker wants the map's writes released and the map acquired before TMA reads it; maps in
    one home make A's copies read B's map (numpy disagrees), or C's stores race with another CTA's reads."""
    monkeypatch.setenv("TILEIRAS_CACHE_DIR", str(tmp_path))
    if mutant == "home":
        address = kernel_maps._address
        monkeypatch.setattr(kernel_maps, "_address", lambda k, i: address(k, 0))
    else:
        write = kernel_maps._write

        def without_fence(k, made, **kwargs) -> None:
            emit = k.b.emit
            k.b.emit = lambda line: None if f"tensormap::generic.{mutant}" in line else emit(line)
            try:
                write(k, made, **kwargs)
            finally:
                k.b.emit = emit
        monkeypatch.setattr(kernel_maps, "_write", without_fence)
    try:
        problems = _emulate(GROUPED, "sm_90")
    except Exception as exc:    # the emulator's report
        problems = [str(exc)]
    assert any(re.search(caught, p) for p in problems), problems


@needs_ptx_9_4
@pytest.mark.parametrize("gpu", TARGETS)
def test_the_epilogue_stores_through_a_map_it_makes(gpu: str, tmp_path: Path) -> None:
    """C's view is a problem's too: its epilogue stores by TMA through a map thread 0 makes where the view
    is (A's, B's and C's: three), after its earlier stores have completed (`cp.async.bulk.wait_group 0`:
    they read the map C had before). `test_the_maps_hold_each_problems_arrays` runs it against numpy."""
    src = export.bytecode(grammar.parse(GROUPED), gpu)
    ptx, meta, _ = _compile(src, gpu, tmp_path)
    assert meta.kernels[0].kernel_maps == 3
    assert "cp.async.bulk.tensor.2d.global.shared::cta" in ptx
    written = ptx.index("cp.async.bulk.wait_group 0;")
    assert written < ptx.index("st.global.v2.b64", written) < ptx.index("cp.async.bulk.tensor.2d.global")


def test_the_metadata_names_the_maps_a_kernel_makes() -> None:
    """`kernel_maps` travels in the launch metadata (the workspace a launcher gives: 8 KiB a map an SM) and
    is left out where a kernel makes none, so older metadata reads the same."""
    from tileiras.codegen.metadata import WORKSPACE_PER_MAP, KernelInfo, KernelParam

    info = KernelInfo("k", (KernelParam("a", "ptr<f16>"),), (128, 1, 1), kernel_maps=3)
    doc = ModuleMetadata((info,), "sm_90").to_document()
    assert doc["kernels"][0]["kernel_maps"] == 3
    back = ModuleMetadata.from_json(ModuleMetadata((info,), "sm_90").to_json())
    assert back.kernels[0].kernel_maps == 3 and back.kernels[0].workspace == 3 * WORKSPACE_PER_MAP == 3 * 8192
    plain = ModuleMetadata((KernelInfo("k", (), (128, 1, 1)),), "sm_90").to_document()
    assert "kernel_maps" not in plain["kernels"][0]
