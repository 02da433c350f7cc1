"""Host relocatable objects: ELF for Linux, COFF for Windows, x86_64 and aarch64."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tileiras.codegen.host_object import host_ir, make_host_object
from tileiras.codegen.metadata import KernelInfo, KernelParam, ModuleMetadata
from tileiras.errors import CompileError, ExitCode, TileirasError

DATA = Path(__file__).parent / "data" / "llvm"
ROOT = Path(__file__).parent.parent
FATBIN = bytes.fromhex("50ed55ba01001000") + bytes(range(256)) * 3  # any bytes: the object just embeds them
HOSTS = [("x86_64", "linux"), ("aarch64", "linux"), ("x86_64", "windows"), ("aarch64", "windows")]


def metas() -> list[ModuleMetadata]:
    out = []
    for gpu in ("sm_80", "sm_90"):
        kernels = []
        for name in ("vadd", "scalars", "allparams"):
            kernels += ModuleMetadata.from_json((DATA / f"{name}.meta.json").read_text()).kernels
        out.append(ModuleMetadata(tuple(kernels), gpu))
    return out




def elf_header(obj: bytes) -> tuple[int, int]:
    """(e_type, e_machine)."""
    assert obj[:4] == b"\x7fELF" and obj[4] == 2 and obj[5] == 1
    return struct.unpack_from("<HH", obj, 16)


def elf_symbols(obj: bytes) -> dict[str, tuple[int, int]]:
    """name -> (binding, section index) from the ELF symbol table."""
    shoff = struct.unpack_from("<Q", obj, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", obj, 58)
    headers = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize) for i in range(shnum)]
    symtab = next(h for h in headers if h[1] == 2)  # SHT_SYMTAB
    strtab = headers[symtab[6]]
    names = obj[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for offset in range(symtab[4], symtab[4] + symtab[5], 24):
        name_off, info, _, shndx = struct.unpack_from("<IBBH", obj, offset)
        name = names[name_off:names.index(b"\0", name_off)].decode()
        if name:
            out[name] = (info >> 4, shndx)
    return out


def coff_symbols(obj: bytes) -> dict[str, tuple[int, int]]:
    """name -> (storage class, section number) from the COFF symbol table."""
    pointer, count = struct.unpack_from("<II", obj, 8)
    strings = pointer + 18 * count
    out: dict[str, tuple[int, int]] = {}
    index = 0
    while index < count:
        raw, _value, section, _type, storage, aux = struct.unpack_from("<8sIhHBB", obj, pointer + 18 * index)
        if raw[:4] == b"\0\0\0\0":
            offset = struct.unpack_from("<I", raw, 4)[0]
            name = obj[strings + offset:obj.index(b"\0", strings + offset)].decode()
        else:
            name = raw.rstrip(b"\0").decode()
        out[name] = (storage, section)
        index += 1 + aux
    return out


LAUNCHERS = {"vadd_launch", "axpb_launch", "allparams_launch"}


@pytest.mark.parametrize("arch, machine", [("x86_64", 62), ("aarch64", 183)])
def test_linux_elf_relocatable(arch: str, machine: int) -> None:
    obj = make_host_object(FATBIN, metas(), arch, "linux")
    assert elf_header(obj) == (1, machine)  # ET_REL
    table = elf_symbols(obj)
    for name in LAUNCHERS:
        assert table[name][0] == 1 and table[name][1] != 0  # STB_GLOBAL, defined
    undefined = {name for name, (bind, shndx) in table.items() if bind == 1 and shndx == 0}
    assert undefined == {"dlopen", "dlsym", "pthread_mutex_lock", "pthread_mutex_unlock"}
    assert FATBIN in obj


@pytest.mark.parametrize("arch, machine", [("x86_64", 0x8664), ("aarch64", 0xAA64)])
def test_windows_coff_object(arch: str, machine: int) -> None:
    obj = make_host_object(FATBIN, metas(), arch, "windows")
    assert struct.unpack_from("<H", obj, 0)[0] == machine
    table = coff_symbols(obj)
    for name in LAUNCHERS:
        storage, section = table[name]
        assert storage == 2 and section > 0  # IMAGE_SYM_CLASS_EXTERNAL, defined
    undefined = {name for name, (storage, section) in table.items() if storage == 2 and section == 0}
    undefined.discard("_fltused")  # MSVC's marker for floating-point use, defined by every C runtime
    assert undefined == {"__imp_LoadLibraryA", "__imp_GetProcAddress", "__imp_AcquireSRWLockExclusive",
                         "__imp_ReleaseSRWLockExclusive"}
    assert FATBIN in obj and b"nvcuda.dll\0" in obj


@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils")
def test_readelf_agrees() -> None:
    obj = make_host_object(FATBIN, metas(), "x86_64", "linux")
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"tileiras-host-{os.getpid()}.o"
    path.write_bytes(obj)
    try:
        sections = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True, check=True).stdout
        syms = subprocess.run(["readelf", "-sW", str(path)], capture_output=True, text=True, check=True).stdout
    finally:
        path.unlink()
    assert ".nv_fatbin" in sections and ".note.GNU-stack" in sections
    for name in LAUNCHERS:
        assert any(line.split()[-1:] == [name] and "GLOBAL" in line and "FUNC" in line for line in syms.splitlines())


def test_fatbin_section_is_aligned() -> None:
    ir = host_ir(FATBIN, metas())
    assert 'section ".nv_fatbin", align 8' in ir


@pytest.mark.parametrize("arch, os_name", HOSTS)
def test_reproducible(arch: str, os_name: str) -> None:
    assert make_host_object(FATBIN, metas(), arch, os_name) == make_host_object(FATBIN, metas(), arch, os_name)


def test_reproducible_across_processes_and_directories(tmp_path: Path) -> None:
    script = ("import sys; from pathlib import Path; from tileiras.codegen.host_object import make_host_object; "
              "from tileiras.codegen.metadata import ModuleMetadata; "
              "m = [ModuleMetadata.from_json(Path(p).read_text()) for p in sys.argv[1:]]; "
              "sys.stdout.buffer.write(make_host_object(bytes(range(200)), m))")
    outputs = []
    for sub in ("x", "y z"):
        (tmp_path / sub).mkdir()
        done = subprocess.run([sys.executable, "-c", script, str(DATA / "vadd.meta.json")], cwd=tmp_path / sub,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, check=True)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    assert outputs[0] == make_host_object(bytes(range(200)),
                                          ModuleMetadata.from_json((DATA / "vadd.meta.json").read_text()))


def test_single_metadata_and_unusual_names() -> None:
    weird = ModuleMetadata((KernelInfo("my.kernel$1", (KernelParam("p", "ptr<f16>"), KernelParam("x", "bf16")),
                                       (32, 1, 1)),), "sm_86")
    obj = make_host_object(FATBIN, weird)
    assert "my_kernel_1_launch" in elf_symbols(obj)
    assert b"my.kernel$1\0" in obj  # the driver is asked for the real entry name


def test_module_without_kernels() -> None:
    obj = make_host_object(FATBIN, ModuleMetadata((), "sm_90"))
    assert not LAUNCHERS & set(elf_symbols(obj))


def test_unsupported_host() -> None:
    with pytest.raises(TileirasError) as info:
        make_host_object(FATBIN, metas(), "riscv64", "linux")
    assert info.value.code == ExitCode.INVALID_OPTIONS
    with pytest.raises(TileirasError):
        make_host_object(FATBIN, metas(), "x86_64", "macos")


def test_no_metadata() -> None:
    with pytest.raises(CompileError):
        make_host_object(FATBIN, [])
