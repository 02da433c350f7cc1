"""The framing of TileIR bytecode: header (magic, version) and the section table.

Kept apart from the reader so that a compile-cache lookup can digest a file's
sections without importing the op tables, types and attributes the reader needs
(`content_digest`: here rather than in a module of its own, which would cost every
compile that makes a key an import).
"""

from __future__ import annotations

from ..errors import BytecodeError
from .encoding import MAGIC, NUM_SECTIONS, SEC_CONSTANT, SEC_DEBUG, SEC_END, SEC_FUNC, SEC_PRODUCER, SEC_STRING, \
    SEC_TYPE, SUPPORTED_VERSIONS, Cursor

# Source locations live only in the debug section (ops refer to them by index), so a digest that
# leaves that section out is unchanged when only line or column numbers move: such a compile is a
# cache hit whenever line info is off. The producer section names the frontend and never affects code.
_IGNORED_WITHOUT_LINE_INFO = (SEC_DEBUG, SEC_PRODUCER)


def _vstr(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def _read_header(data: bytes) -> tuple[int, int]:
    for i, expected in enumerate(MAGIC):
        got = data[i] if i < len(data) else 0
        if got != expected:
            raise BytecodeError(f"error: error at offset {i + 1}: invalid magic number at position {i}, "
                                f"got {got} expected {expected}")
    if len(data) < 12:
        raise BytecodeError("error: error at offset 8: failed to parse bytecode header")
    major, minor = data[8], data[9]
    tag = int.from_bytes(data[10:12], "little")
    if (major, minor) not in SUPPORTED_VERSIONS or tag > 1:
        lo, hi = SUPPORTED_VERSIONS[0], SUPPORTED_VERSIONS[-1]
        raise BytecodeError(
            f"error: error at offset 12: unsupported Tile version {major}.{minor}.{tag}, this reader supports "
            f"versions [{_vstr(lo)} - {_vstr(hi)}]\n"
            "error: error at offset 12: failed to parse bytecode header")
    return major, minor


def _sections(data: bytes) -> dict[int, tuple[int, int]]:
    cur = Cursor(data, 12)
    found: dict[int, tuple[int, int]] = {}
    required_align = {SEC_STRING: 4, SEC_TYPE: 4, SEC_CONSTANT: 8, SEC_DEBUG: 8, SEC_FUNC: 8}
    while True:
        if cur.remaining() < 1:
            raise _section_error(cur, "unexpected end of data while reading section header")
        head = cur.byte()
        sid, aligned = head & 0x7F, bool(head & 0x80)
        if sid == SEC_END:
            if aligned:
                raise _section_error(cur, "end section should not have alignment flag set")
            if cur.remaining():
                raise BytecodeError(f"error: error at offset {cur.pos}: end section is not the last section")
            return found
        if sid >= NUM_SECTIONS:
            raise _section_error(cur, f"unknown section ID: {sid}")
        try:
            length = cur.varint("section length")
        except BytecodeError:
            raise _section_error(cur, "failed to read section length") from None
        if length > cur.remaining():
            raise _section_error(cur, f"section length {length} exceeds remaining data size {cur.remaining()}")
        alignment = 1
        if aligned:
            try:
                alignment = cur.varint("alignment")
            except BytecodeError:
                raise _section_error(cur, "failed to read section alignment") from None
            if alignment == 0 or alignment & (alignment - 1):
                raise _section_error(cur, f"invalid alignment value: {alignment}")
            pad = (-cur.pos) % alignment
            if pad > cur.remaining():
                raise _section_error(cur, "unexpected end of data in section padding")
            cur.pos += pad
            if length > cur.remaining():
                raise _section_error(cur, f"section length {length} exceeds remaining data size {cur.remaining()}")
        need = required_align.get(sid)
        if need and (not aligned or alignment % need):
            have = f"has alignment of {alignment}" if aligned else "has no alignment flag set"
            raise BytecodeError(f"error: error at offset {cur.pos}: section {sid} must have alignment that is a "
                                f"multiple of {need} bytes, but {have}")
        if sid in found:
            raise BytecodeError(f"error: error at offset {cur.pos}: duplicate section {sid}")
        found[sid] = (cur.pos, cur.pos + length)
        cur.pos += length


def _section_error(cur: Cursor, message: str) -> BytecodeError:
    return BytecodeError(f"error: error at offset {cur.pos}: {message}\n"
                         f"error: error at offset {cur.pos}: failed to parse section header")


def content_digest(data: bytes, keep_locations: bool) -> str:
    """The compile cache's digest (cache.hashing) of the bytecode's code-relevant content: all of it
    when `keep_locations`, else without the debug and producer sections (framing validated, no IR built)."""
    from ..hashing import digest as new_digest

    if keep_locations:
        return new_digest(data).hexdigest()
    _read_header(data)
    digest = new_digest(data[:12])
    for sid, (start, end) in sorted(_sections(data).items()):
        if sid in _IGNORED_WITHOUT_LINE_INFO:
            continue
        digest.update(sid.to_bytes(1, "little") + (end - start).to_bytes(8, "little"))
        digest.update(data[start:end])
    return digest.hexdigest()
