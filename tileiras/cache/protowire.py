"""Protocol-buffer wire format, just enough for the few REAPI messages the remote cache sends.

Messages are written as lists of (field number, value) and read back as
{field number: [values]}: ints are varints, bytes and str length-delimited
(strings and nested messages alike). Unknown fields are kept and ignored by the
reader's caller, as protobuf requires, so newer servers stay readable. This
spares the remote tier the protobuf runtime and generated stubs (hundreds of
milliseconds of imports per compiler process).
"""

from __future__ import annotations

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5

Field = tuple[int, "int | bytes | str | None"]


class WireError(ValueError):
    """A message that is not valid protobuf wire format."""


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement, as protobuf writes negative numbers
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def encode(fields: list[Field]) -> bytes:
    """Serialize (number, value) pairs; None, 0, b'' and '' are left out (proto3 defaults)."""
    out = bytearray()
    for number, value in fields:
        if value is None or value == 0 or value == b"" or value == "":
            continue
        if isinstance(value, bool) or isinstance(value, int):
            out += _varint(number << 3 | VARINT) + _varint(int(value))
        else:
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            out += _varint(number << 3 | LENGTH) + _varint(len(data)) + data
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def decode(data: bytes) -> dict[int, list[int | bytes]]:
    """Field number -> values in order; length-delimited values stay bytes."""
    fields: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(data):
        tag, pos = _read_varint(data, pos)
        number, kind = tag >> 3, tag & 7
        value: int | bytes
        if kind == VARINT:
            value, pos = _read_varint(data, pos)
        elif kind == LENGTH:
            length, pos = _read_varint(data, pos)
            if pos + length > len(data):
                raise WireError("truncated field")
            value, pos = data[pos:pos + length], pos + length
        elif kind in (FIXED64, FIXED32):
            size = 8 if kind == FIXED64 else 4
            if pos + size > len(data):
                raise WireError("truncated field")
            value, pos = int.from_bytes(data[pos:pos + size], "little"), pos + size
        else:
            raise WireError(f"unsupported wire type {kind}")
        fields.setdefault(number, []).append(value)
    return fields


def first(fields: dict[int, list[int | bytes]], number: int, default: int | bytes = b"") -> int | bytes:
    values = fields.get(number)
    return values[-1] if values else default  # protobuf: the last occurrence wins


def first_bytes(fields: dict[int, list[int | bytes]], number: int) -> bytes:
    """The last value of a length-delimited field (b'' when absent); WireError for another wire type."""
    value = first(fields, number, b"")
    if not isinstance(value, bytes):
        raise WireError(f"field {number} is a number where bytes belong")
    return value


def first_int(fields: dict[int, list[int | bytes]], number: int) -> int:
    """The last value of a varint field (0 when absent); WireError for another wire type."""
    value = first(fields, number, 0)
    if not isinstance(value, int):
        raise WireError(f"field {number} is bytes where a number belongs")
    return value
