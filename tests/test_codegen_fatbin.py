"""The fatbin writer, checked against NVIDIA's `fatbinary` (the oracle) and by round trip."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tileiras.codegen import fatbin as fb
from tileiras.codegen.nvptx import llvm_to_ptx
from tileiras.codegen.ptxas import assemble, find_ptxas
from tileiras.errors import CompileError, TileirasError

DATA = Path(__file__).parent / "data" / "llvm"
GPUS = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", "sm_103", "sm_110",
        "sm_120", "sm_121f"]


@pytest.fixture(scope="module")
def images() -> tuple[dict[str, str], dict[str, bytes]]:
    ir = (DATA / "allparams.ll").read_text()
    ptx = {gpu: llvm_to_ptx(ir, gpu) for gpu in GPUS}
    return ptx, {gpu: assemble(text, gpu) for gpu, text in ptx.items()}


def oracle(tmp_path: Path, cubins: dict[str, bytes], ptx: dict[str, str], cmdline: str = "") -> bytes:
    """`fatbinary --create` with compression off, images in our canonical order."""
    tool = find_ptxas().parent / "fatbinary"
    if not tool.is_file():
        pytest.skip("the nvidia-cuda-nvcc wheel has no fatbinary")
    argv = [str(tool), "-64", "--compress=false", f"--create={tmp_path / 'oracle.fatbin'}"]
    if cmdline:
        argv.append(f"--cmdline={cmdline}")
    for kind, images_of_kind, suffix in (("elf", cubins, "cubin"), ("ptx", ptx, "ptx")):
        for gpu in sorted(images_of_kind, key=fb._split_gpu):
            path = tmp_path / f"{gpu}.{suffix}"
            data = images_of_kind[gpu]
            path.write_bytes(data if isinstance(data, bytes) else data.encode())
            argv.append(f"--image3=kind={kind},sm={gpu[3:]},file={path}")
    subprocess.run(argv, check=True, capture_output=True)
    return (tmp_path / "oracle.fatbin").read_bytes()


@pytest.mark.parametrize("gpus", [["sm_80"], ["sm_90a"], ["sm_100"], ["sm_80", "sm_90", "sm_100", "sm_121f"], GPUS])
def test_cubin_fatbin_is_byte_identical_to_fatbinary(tmp_path: Path, images, gpus: list[str]) -> None:
    _, cubins = images
    chosen = {gpu: cubins[gpu] for gpu in gpus}
    assert fb.make_fatbin(chosen) == oracle(tmp_path, chosen, {})


def test_ptx_entries_match_fatbinary_headers(tmp_path: Path, images) -> None:
    ptx, cubins = images
    chosen_ptx = {"sm_90a": ptx["sm_90a"], "sm_121f": ptx["sm_121f"]}
    chosen_cubins = {"sm_80": cubins["sm_80"], "sm_100": cubins["sm_100"]}
    ours = fb.parse_fatbin(fb.make_fatbin(chosen_cubins, chosen_ptx, ptxas_options="-O3 --lineinfo"))
    theirs = fb.parse_fatbin(oracle(tmp_path, chosen_cubins, chosen_ptx, cmdline="-O3 --lineinfo"))
    assert [(e.kind, e.gpu) for e in ours] == [(e.kind, e.gpu) for e in theirs] == [
        ("elf", "sm_80"), ("elf", "sm_100"), ("ptx", "sm_90a"), ("ptx", "sm_121f")]
    for mine, reference in zip(ours, theirs):
        assert (mine.sm, mine.flags, mine.version, mine.extension) == (
            reference.sm, reference.flags, reference.version, reference.extension)
        if mine.kind == "elf":
            assert mine.payload == reference.payload
        else:
            # fatbinary strips comments and indentation from PTX; we keep the text as LLVM wrote it.
            assert mine.content.decode() == chosen_ptx[mine.gpu]
            assert not mine.compressed and not reference.compressed


def test_round_trip(images) -> None:
    ptx, cubins = images
    blob = fb.make_fatbin({g: cubins[g] for g in ("sm_90", "sm_80")}, {"sm_90": ptx["sm_90"]})
    assert len(blob) % 8 == 0
    entries = fb.parse_fatbin(blob)
    assert [(e.kind, e.gpu) for e in entries] == [("elf", "sm_80"), ("elf", "sm_90"), ("ptx", "sm_90")]
    assert entries[0].content[: len(cubins["sm_80"])] == cubins["sm_80"]
    assert entries[1].content[: len(cubins["sm_90"])] == cubins["sm_90"]
    assert entries[2].content.decode() == ptx["sm_90"]
    assert entries[2].version == (8, 8)


def test_order_of_mappings_does_not_matter(images) -> None:
    ptx, cubins = images
    forward = {g: cubins[g] for g in GPUS}
    backward = {g: cubins[g] for g in reversed(GPUS)}
    assert fb.make_fatbin(forward, {"sm_100": ptx["sm_100"]}) == fb.make_fatbin(backward, {"sm_100": ptx["sm_100"]})


def test_debug_ptx_sets_the_debug_flag() -> None:
    text = llvm_to_ptx((DATA / "vadd_debug.ll").read_text(), "sm_90", debug=True)
    entry = fb.parse_fatbin(fb.make_fatbin({}, {"sm_90": text}))[0]
    assert entry.flags & fb.FLAG_DEBUG


def test_cubin_under_the_wrong_target(images) -> None:
    _, cubins = images
    with pytest.raises(CompileError, match="built for sm_80"):
        fb.make_fatbin({"sm_90": cubins["sm_80"]})


def test_not_a_cubin() -> None:
    with pytest.raises(CompileError, match="not a 64-bit"):
        fb.make_fatbin({"sm_90": b"hello world, not an ELF file at all, padding padding padding padding"})


def test_bad_inputs() -> None:
    with pytest.raises(CompileError):
        fb.make_fatbin({})
    with pytest.raises(TileirasError):
        fb.make_fatbin({}, {"compute_90": ".version 8.8\n"})
    with pytest.raises(CompileError, match="no .version"):
        fb.make_fatbin({}, {"sm_90": ".target sm_90\n"})


@pytest.mark.parametrize("blob", [b"", b"\x50\xed\x55\xba", b"\x00" * 32,
                                  bytes.fromhex("50ed55ba01001000ff00000000000000")])
def test_parse_rejects_garbage(blob: bytes) -> None:
    with pytest.raises(CompileError):
        fb.parse_fatbin(blob)


def test_parse_rejects_truncated(images) -> None:
    _, cubins = images
    blob = fb.make_fatbin({"sm_80": cubins["sm_80"]})
    with pytest.raises(CompileError):
        fb.parse_fatbin(blob[:-8])
