"""Primitive encodings of TileIR bytecode: varints, zigzag varints, LE integers.

`Cursor` reads from an immutable byte buffer and raises `BytecodeError`
with NVIDIA's "error at offset N: ..." wording on any overrun, so a
malformed length can never make the reader allocate or loop past the data.
"""

from __future__ import annotations

from ..errors import BytecodeError

MAGIC = b"\x7fTileIR\x00"
ALIGN_BYTE = 0xCB

# Section ids.
SEC_END, SEC_STRING, SEC_FUNC, SEC_DEBUG, SEC_CONSTANT, SEC_TYPE, SEC_GLOBAL, SEC_PRODUCER = range(8)
NUM_SECTIONS = 8

# Bytecode versions this implementation reads and writes.
SUPPORTED_VERSIONS: tuple[tuple[int, int], ...] = ((13, 1), (13, 2), (13, 3), (13, 4), (13, 5))


def version_str(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def parse_version(text: str) -> tuple[int, int]:
    parts = text.strip().split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts):
        raise ValueError(text)
    return int(parts[0]), int(parts[1])


class Cursor:
    __slots__ = ("data", "pos", "end", "base")

    def __init__(self, data: bytes | memoryview, start: int = 0, end: int | None = None, base: int = 0) -> None:
        self.data = data
        self.pos = start
        self.end = len(data) if end is None else end
        self.base = base  # position that messages count offsets from

    def error(self, message: str) -> BytecodeError:
        return BytecodeError(f"error at offset {self.pos - self.base}: {message}")

    def remaining(self) -> int:
        return self.end - self.pos

    def at_end(self) -> bool:
        return self.pos >= self.end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.error("unexpected end of data")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self, what: str = "varint") -> int:
        data, pos, end = self.data, self.pos, self.end
        result = 0
        shift = 0
        while True:
            if pos >= end or shift > 63:
                self.pos = pos
                raise self.error(f"failed to read {what}")
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        self.pos = pos
        return result & 0xFFFFFFFFFFFFFFFF

    def svarint(self, what: str = "signed varint") -> int:
        """Zigzag-decoded varint, as a signed 64-bit value."""
        v = self.varint(what)
        v = (v >> 1) ^ -(v & 1)
        return v

    def le(self, size: int, signed: bool = False) -> int:
        if self.pos + size > self.end:
            raise self.error("unexpected end of data")
        v = int.from_bytes(self.data[self.pos:self.pos + size], "little", signed=signed)
        self.pos += size
        return v

    def take(self, n: int) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise self.error(f"cannot read {n} bytes: only {self.end - self.pos} remain")
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b

    def skip(self, n: int) -> None:
        if n > self.end - self.pos:
            raise self.error("unexpected end of data")
        self.pos += n

    def align(self, alignment: int, origin: int = 0) -> None:
        """Skip padding so that (pos - origin) is a multiple of `alignment`."""
        if alignment < 2:
            return
        pad = (-(self.pos - origin)) % alignment
        if pad > self.end - self.pos:
            raise self.error("unexpected end of data in padding")
        self.pos += pad

    def le_list(self, width: int, what: str = "array") -> list[int]:
        """A varint count followed by `width`-byte little-endian signed integers."""
        n = self.varint(f"{what} size")
        if n * width > self.end - self.pos:
            raise self.error(f"{what} size {n} exceeds remaining data")
        data = self.data
        pos = self.pos
        out = [int.from_bytes(data[pos + i * width:pos + (i + 1) * width], "little", signed=True) for i in range(n)]
        self.pos = pos + n * width
        return out


# -- writing -------------------------------------------------------------------
def put_varint(buf: bytearray, x: int) -> None:
    x &= 0xFFFFFFFFFFFFFFFF
    while x >= 0x80:
        buf.append((x & 0x7F) | 0x80)
        x >>= 7
    buf.append(x)


def put_svarint(buf: bytearray, x: int) -> None:
    put_varint(buf, ((x << 1) ^ (x >> 63)) & 0xFFFFFFFFFFFFFFFF)


def put_le_list(buf: bytearray, values, width: int) -> None:
    put_varint(buf, len(values))
    for v in values:
        buf += int(v).to_bytes(width, "little", signed=True)


def pad_to(buf: bytearray, alignment: int, origin: int = 0) -> None:
    buf += bytes([ALIGN_BYTE]) * ((-(len(buf) - origin)) % alignment)
