"""The fatbin container: cubins for several targets plus PTX for JIT, in one blob.

Layout (little-endian), as NVIDIA's `fatbinary` writes it with compression off
(checked field by field against `fatbinary --create` in the tests):

    file header, 16 bytes
      u32 magic 0xBA55ED50 | u16 version 1 | u16 header size 16 | u64 size of all entries
    entry header, 64 bytes (+ an extension, see below)
      0x00 u16 kind (1 PTX, 2 ELF)   0x02 u16 0x0101          0x04 u32 entry header size
      0x08 u64 payload size (padded) 0x10 u32 compressed size 0x14 u32 extension offset (0x40 or 0)
      0x18 u16 minor  0x1a u16 major (PTX: its .version; ELF: CUDA ELF ABI version . 1)
      0x1c u32 SM number             0x20 u32 name offset     0x24 u32 name size
      0x28 u64 flags                 0x30 u64 0               0x38 u64 uncompressed size
    extension (PTX always; ELF from sm_100 on, when the cubin has a .nv.compat section)
      0x40 u32 0x48 | u32 n | PTX: the ptxas command line (n bytes) + NUL
                            | ELF: NUL + the .nv.compat bytes (n of them)
      padded with zeros to a multiple of 8
    payload: the cubin, or the PTX text + NUL, padded with zeros to a multiple of 8

Flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x8000 zstd-compressed,
0x100000 `a` target, 0x200000 `f` target, 0x1000000 compat info present.
We never compress, so the output is deterministic and needs no codec.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from tileiras.errors import CompileError, ExitCode, TileirasError

from .cubin import read_cubin

MAGIC = 0xBA55ED50
FILE_HEADER = struct.Struct("<IHHQ")
ENTRY_HEADER = struct.Struct("<HHIQIIHHIIIQQQ")
EXTENSION_OFFSET = 0x40
KIND_PTX = 1
KIND_ELF = 2

FLAG_64BIT = 0x1
FLAG_DEBUG = 0x2
FLAG_HOST_LINUX = 0x10
FLAG_COMPRESSED = 0x8000
FLAG_COMPAT = 0x1000000
SUFFIX_FLAGS: dict[str, int] = {"": 0, "a": 0x100000, "f": 0x200000}
# fatbinary repeats a cubin's .nv.compat in the entry header only from Blackwell on
# (sm_90 cubins carry the section too, but their entries have no extension).
COMPAT_MIN_SM = 100
KIND_NAMES: dict[int, str] = {KIND_PTX: "ptx", KIND_ELF: "elf"}

_GPU = re.compile(r"^sm_([0-9]+)([af]?)$")
_PTX_VERSION = re.compile(r"^\s*\.version\s+([0-9]+)\.([0-9]+)", re.MULTILINE)
_PTX_DEBUG = re.compile(r"^\s*\.target\s+[^\n]*\bdebug\b", re.MULTILINE)


@dataclass(frozen=True)
class FatbinEntry:
    kind: str                 # "elf" or "ptx"
    sm: int
    flags: int
    version: tuple[int, int]  # (major, minor)
    extension: bytes          # the entry header past its first 64 bytes
    payload: bytes            # as stored, padding included
    compressed: bool

    @property
    def suffix(self) -> str:
        for suffix, bit in SUFFIX_FLAGS.items():
            if bit and self.flags & bit:
                return suffix
        return ""

    @property
    def gpu(self) -> str:
        return f"sm_{self.sm}{self.suffix}"

    @property
    def content(self) -> bytes:
        """The cubin bytes, or the PTX text (padding and NUL removed)."""
        if self.kind == "ptx":
            return self.payload.split(b"\0", 1)[0]
        return self.payload


def _pad8(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 8)


def _split_gpu(gpu: str) -> tuple[int, str]:
    match = _GPU.match(gpu)
    if not match:
        raise TileirasError(f"error: '{gpu}' is not a target name like sm_90", ExitCode.INVALID_OPTIONS)
    return int(match.group(1)), match.group(2)


def _entry(kind: int, sm: int, suffix: str, version: tuple[int, int], flags: int,
           extension: bytes, payload: bytes) -> bytes:
    header_size = ENTRY_HEADER.size + len(extension)
    flags |= FLAG_64BIT | FLAG_HOST_LINUX | SUFFIX_FLAGS[suffix]
    header = ENTRY_HEADER.pack(kind, 0x0101, header_size, len(payload), 0,
                               EXTENSION_OFFSET if extension else 0, version[1], version[0], sm,
                               0, 0, flags, 0, 0)
    return header + extension + payload


def _elf_entry(gpu: str, cubin: bytes) -> bytes:
    sm, suffix = _split_gpu(gpu)
    info = read_cubin(cubin, f"the cubin given for {gpu}")
    if info.sm != sm:
        raise CompileError(f"error: the cubin given for {gpu} was built for sm_{info.sm}")
    compat = info.sections.get(".nv.compat", b"") if sm >= COMPAT_MIN_SM else b""
    extension = b""
    flags = 0
    if compat:
        extension = _pad8(struct.pack("<II", 0x48, len(compat)) + b"\0" + compat)
        flags |= FLAG_COMPAT
    return _entry(KIND_ELF, sm, suffix, (1, info.abi_version), flags, extension, _pad8(cubin))


def _ptx_entry(gpu: str, text: str, ptxas_options: str) -> bytes:
    sm, suffix = _split_gpu(gpu)
    match = _PTX_VERSION.search(text)
    if match is None:
        raise CompileError(f"error: the PTX given for {gpu} has no .version directive")
    if "\0" in text:
        raise CompileError(f"error: the PTX given for {gpu} contains a NUL byte")
    options = ptxas_options.encode("utf-8")
    extension = _pad8(struct.pack("<II", 0x48, len(options)) + options + b"\0")
    flags = FLAG_DEBUG if _PTX_DEBUG.search(text) else 0
    version = (int(match.group(1)), int(match.group(2)))
    return _entry(KIND_PTX, sm, suffix, version, flags, extension, _pad8(text.encode("utf-8") + b"\0"))


def make_fatbin(cubins: Mapping[str, bytes], ptx: Mapping[str, str] = MappingProxyType({}),
                ptxas_options: str = "") -> bytes:
    """A fatbin of `cubins` (gpu -> cubin) and `ptx` (gpu -> PTX text), in canonical order.

    Entries are sorted by target (cubins first, then PTX), so the bytes do not
    depend on the mappings' order. `ptxas_options` is recorded in PTX entries,
    the way `fatbinary --cmdline` does, for the driver's JIT.
    """
    if not cubins and not ptx:
        raise CompileError("error: a fatbin needs at least one cubin or PTX image")

    def order(gpu: str) -> tuple[int, str]:
        return _split_gpu(gpu)

    body = b"".join(_elf_entry(gpu, cubins[gpu]) for gpu in sorted(cubins, key=order))
    body += b"".join(_ptx_entry(gpu, ptx[gpu], ptxas_options) for gpu in sorted(ptx, key=order))
    return FILE_HEADER.pack(MAGIC, 1, FILE_HEADER.size, len(body)) + body


def parse_fatbin(data: bytes) -> list[FatbinEntry]:
    """Read a fatbin back (ours or fatbinary's); CompileError on a malformed container."""
    if len(data) < FILE_HEADER.size:
        raise CompileError("error: fatbin is truncated")
    magic, version, header_size, size = FILE_HEADER.unpack_from(data, 0)
    if magic != MAGIC or version != 1:
        raise CompileError("error: not a fatbin (bad magic or version)")
    end = header_size + size
    if end > len(data):
        raise CompileError("error: fatbin is truncated")
    entries: list[FatbinEntry] = []
    offset = header_size
    while offset < end:
        if offset + ENTRY_HEADER.size > end:
            raise CompileError("error: fatbin entry header is truncated")
        (kind, _ver, entry_size, payload_size, compressed_size, _ext, minor, major, sm,
         _name_off, _name_size, flags, _zero, _uncompressed) = ENTRY_HEADER.unpack_from(data, offset)
        if kind not in KIND_NAMES or entry_size < ENTRY_HEADER.size or offset + entry_size + payload_size > end:
            raise CompileError(f"error: malformed fatbin entry at offset {offset}")
        start = offset + entry_size
        entries.append(FatbinEntry(
            kind=KIND_NAMES[kind], sm=sm, flags=flags, version=(major, minor),
            extension=data[offset + ENTRY_HEADER.size:start],
            payload=data[start:start + payload_size],
            compressed=bool(flags & FLAG_COMPRESSED) or compressed_size != 0))
        offset = start + payload_size
    return entries
