"""Facts read from a cubin (a CUDA ELF64 object): its SM, ABI version and sections.

Only what packaging needs: the SM a cubin was built for (to catch a cubin given
under the wrong target), the CUDA ELF ABI version, and the `.nv.compat`
section that a fatbin entry repeats in its header.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tileiras.errors import CompileError

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
_EI_ABIVERSION = 8


@dataclass(frozen=True)
class CubinInfo:
    sm: int
    abi_version: int
    sections: dict[str, bytes]


def read_cubin(data: bytes, what: str = "cubin") -> CubinInfo:
    """Parse the ELF header and section table; CompileError if it is not a CUDA ELF64."""
    if len(data) < 64 or not data.startswith(ELF_MAGIC) or data[4] != 2 or data[5] != 1:
        raise CompileError(f"error: {what} is not a 64-bit little-endian ELF cubin")
    machine = struct.unpack_from("<H", data, 18)[0]
    if machine != EM_CUDA:
        raise CompileError(f"error: {what} is an ELF file for machine {machine}, not a CUDA cubin")
    flags = struct.unpack_from("<I", data, 48)[0]
    shoff = struct.unpack_from("<Q", data, 40)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    sections: dict[str, bytes] = {}
    try:
        headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
        if shnum:
            str_off, str_size = headers[shstrndx][4], headers[shstrndx][5]
            names = data[str_off:str_off + str_size]
            for name_off, sh_type, _flags, _addr, offset, size in headers:
                name = names[name_off:names.index(b"\0", name_off)].decode("ascii", errors="replace")
                sections[name] = b"" if sh_type == 8 else data[offset:offset + size]  # SHT_NOBITS
    except (struct.error, ValueError, IndexError):
        raise CompileError(f"error: {what} has a corrupt ELF section table") from None
    return CubinInfo(sm=(flags >> 8) & 0xFF, abi_version=data[_EI_ABIVERSION], sections=sections)
