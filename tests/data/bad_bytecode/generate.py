"""Regenerate the malformed TileIR bytecode files of this directory.

Each file is a small, hand-assembled module broken in one way; MANIFEST
maps the file to the substring its diagnostic must contain. Run:
    python tests/data/bad_bytecode/generate.py
"""

from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = b"\x7fTileIR\x00"


def varint(x: int) -> bytes:
    out = bytearray()
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def header(major: int = 13, minor: int = 4) -> bytes:
    return MAGIC + bytes([major, minor, 0, 0])


def section(sid: int, payload: bytes, align: int = 1, file_pos: int = 0, length: int | None = None) -> bytes:
    """A section as it appears at `file_pos` in the file (padding depends on it)."""
    n = len(payload) if length is None else length
    head = bytes([sid | (0x80 if align > 1 else 0)]) + varint(n)
    if align > 1:
        head += varint(align)
        pad = (-(file_pos + len(head))) % align
        head += b"\xcb" * pad
    return head + payload


def table(entries: list[bytes], width: int) -> bytes:
    out = bytearray(varint(len(entries)))
    if entries:
        out += b"\xcb" * ((-len(out)) % width)
        off = 0
        for e in entries:
            out += off.to_bytes(width, "little")
            off += len(e)
        for e in entries:
            out += e
    return bytes(out)


def assemble(parts: list[tuple[int, bytes, int]], major: int = 13, minor: int = 4, end: bool = True) -> bytes:
    out = bytearray(header(major, minor))
    for sid, payload, align in parts:
        out += section(sid, payload, align, len(out))
    if end:
        out.append(0)
    return bytes(out)


# type table: 0 = i32, 1 = tile<i32>, 2 = () -> (), 3 = token
TYPES = [varint(3), varint(13) + varint(0) + varint(0), varint(16) + varint(0) + varint(0), varint(17)]
STRINGS = [b"k", b"file.py"]
RETURN = varint(92) + varint(0) + varint(0)          # return (variadic op: 0 results, 0 operands)
MAKE_TOKEN = varint(68) + varint(3)                  # %0 = make_token : token


def func(body: bytes, flag: int = 0x02, name: int = 0, sig: int = 2, loc: int = 1, length: int | None = None,
         nfuncs: int = 1) -> bytes:
    n = len(body) if length is None else length
    return varint(nfuncs) + varint(name) + varint(sig) + bytes([flag]) + varint(loc) + varint(n) + body


def debug(locs: list[int], attrs: list[bytes]) -> bytes:
    out = bytearray(varint(1))
    out += b"\xcb" * ((-len(out)) % 4)
    out += (0).to_bytes(4, "little")
    out += varint(len(locs))
    out += b"\xcb" * ((-len(out)) % 8)
    for i in locs:
        out += i.to_bytes(8, "little")
    rest = table(attrs or [b"\x00"], 4)
    # the attribute table is aligned relative to the section start
    cnt = varint(len(attrs or [b"\x00"]))
    out += cnt
    out += b"\xcb" * ((-len(out)) % 4)
    entries = attrs or [b"\x00"]
    off = 0
    for e in entries:
        out += off.to_bytes(4, "little")
        off += len(e)
    for e in entries:
        out += e
    del rest
    return bytes(out)


def module(body: bytes = MAKE_TOKEN + RETURN, types=TYPES, strings=STRINGS, consts=(), fn: bytes | None = None,
           dbg: bytes | None = None, extra: list | None = None, skip: tuple = (), major: int = 13,
           minor: int = 4, raw_consts: list | None = None) -> bytes:
    parts = []
    if 2 not in skip:
        parts.append((2, fn if fn is not None else func(body), 8))
    if 4 not in skip:
        entries = raw_consts if raw_consts is not None else [varint(len(c)) + c for c in consts]
        parts.append((4, table(entries, 8), 8))
    if 3 not in skip:
        parts.append((3, dbg if dbg is not None else debug([0] * 16, []), 8))
    if 5 not in skip:
        parts.append((5, table(list(types), 4), 4))
    if 1 not in skip:
        parts.append((1, table(list(strings), 4), 4))
    parts += extra or []
    return assemble(parts, major, minor)


def cases() -> dict[str, tuple[bytes, str]]:
    good = module()
    c: dict[str, tuple[bytes, str]] = {}
    c["valid"] = (good, "")
    c["empty"] = (b"", "invalid magic number")
    c["wrong_magic"] = (b"\x7fTileXR\x00" + good[8:], "invalid magic number at position 5")
    c["truncated_header"] = (good[:10], "failed to parse bytecode header")
    c["unknown_version_12_4"] = (header(12, 4) + good[12:], "unsupported Tile version 12.4.0")
    c["future_version_14_0"] = (header(14, 0) + good[12:], "unsupported Tile version 14.0.0")
    c["truncated_section"] = (good[: len(good) // 2], "exceeds remaining data size")
    c["truncated_end_marker"] = (good[:-1], "unexpected end of data while reading section header")
    c["trailing_garbage"] = (good + b"\x00\x00", "end section is not the last section")
    c["unknown_section_id"] = (header() + section(9, b"", 1) + b"\x00", "unknown section ID: 9")
    c["section_length_4gb"] = (header() + bytes([0x82]) + varint(0xFFFFFFFF) + b"\x08" + b"\x00" * 16,
                               "section length 4294967295 exceeds remaining data size")
    c["section_length_2pow63"] = (header() + bytes([0x01]) + varint(1 << 62) + b"\x00",
                                  "exceeds remaining data size")
    c["bad_varint_section_length"] = (header() + bytes([0x01]) + b"\xff" * 12, "failed to read section length")
    c["invalid_alignment"] = (header() + bytes([0x81]) + varint(1) + varint(3) + b"\x00\x00", "invalid alignment value: 3")
    c["unaligned_string_section"] = (assemble([(2, func(RETURN), 8), (1, table(STRINGS, 4), 1)]),
                                     "must have alignment that is a multiple of 4")
    c["duplicate_section"] = (assemble([(2, func(RETURN), 8), (5, table(TYPES, 4), 4), (1, table(STRINGS, 4), 4),
                                        (1, table(STRINGS, 4), 4)]), "duplicate section")
    c["missing_string_section"] = (module(skip=(1,)), "string section is mandatory")
    c["missing_function_section"] = (module(skip=(2,)), "function section is mandatory")
    c["string_count_4gb"] = (module(strings=[], extra=[]).replace(b"", b"", 0)
                             if False else assemble([(2, func(RETURN), 8), (5, table(TYPES, 4), 4),
                                                     (1, varint(0xFFFFFFFF) + b"\x00" * 8, 4)]),
                             "number of strings (4294967295) exceeds the maximum")
    c["type_count_4gb"] = (assemble([(2, func(RETURN), 8), (5, varint(0xFFFFFFFF) + b"\x00" * 8, 4),
                                     (1, table(STRINGS, 4), 4)]), "number of types (4294967295) exceeds the maximum")
    c["constant_count_4gb"] = (module(extra=[]) and assemble([(2, func(RETURN), 8), (4, varint(0xFFFFFFFF) + b"\x00" * 8, 8),
                                                             (5, table(TYPES, 4), 4), (1, table(STRINGS, 4), 4)]),
                               "insufficient data for constant indices")
    c["function_count_4gb"] = (module(fn=varint(0xFFFFFFFF)), "number of functions (4294967295) exceeds payload size")
    c["function_body_too_long"] = (module(fn=func(RETURN, length=1 << 40)), "function body length")
    c["function_name_out_of_range"] = (module(fn=func(RETURN, name=77)), "string index 77 out of bounds")
    c["signature_out_of_range"] = (module(fn=func(RETURN, sig=55)), "function signature index 55 out of bounds")
    c["signature_not_function"] = (module(fn=func(RETURN, sig=1)), "does not refer to a function type")
    c["non_entry_function"] = (module(fn=func(RETURN, flag=0)), "un-expected non-entry function 'k'")
    c["type_index_out_of_range"] = (module(body=varint(68) + varint(99) + RETURN), "type index 99 out of bounds")
    c["cyclic_type"] = (module(body=varint(68) + varint(4) + RETURN,
                               types=TYPES + [varint(13) + varint(4) + varint(0)]), "refers to itself")
    c["type_dangling_element"] = (module(body=varint(68) + varint(4) + RETURN,
                                         types=TYPES + [varint(13) + varint(40) + varint(0)]),
                                  "type index 40 out of bounds")
    c["unknown_type_tag"] = (module(body=varint(68) + varint(4) + RETURN, types=TYPES + [varint(99)]),
                             "unknown type tag 99")
    c["type_shape_4gb_claim"] = (module(body=varint(68) + varint(4) + RETURN,
                                        types=TYPES + [varint(13) + varint(0) + varint(0xFFFFFFFF)]),
                                 "tile shape size 4294967295 exceeds remaining data")
    c["non_power_of_two_tile"] = (module(body=varint(68) + varint(4) + RETURN,
                                         types=TYPES + [varint(13) + varint(0) + varint(1) + (3).to_bytes(8, "little")]),
                                  "all dimensions must be powers of two, got 3")
    c["unknown_opcode"] = (module(body=varint(999) + RETURN), "unsupported opcode 999")
    c["opcode_from_newer_version"] = (module(body=varint(120) + varint(3) + varint(0) + RETURN, minor=3),
                                      "unsupported opcode 120 for bytecode version 13.3")
    c["operand_index_out_of_range"] = (module(body=MAKE_TOKEN + varint(92) + varint(0) + varint(1) + varint(5)),
                                       "operand index 5 out of bounds (size=1)")
    c["operand_count_4gb"] = (module(body=varint(92) + varint(0) + varint(0xFFFFFFFF)),
                              "failed to read operand count")
    c["truncated_body"] = (module(body=varint(16)), "failed to read result type")
    if_types = TYPES + [varint(0), varint(13) + varint(4) + varint(0)]  # 4 = i1, 5 = tile<i1>
    cond = varint(16) + varint(5) + varint(0)                             # %0 = constant <i1: true>
    c["missing_terminator"] = (module(body=cond + varint(50) + varint(0) + varint(0) + varint(2)
                                      + varint(1) + varint(0) + varint(1) + MAKE_TOKEN + varint(0) + RETURN,
                                      types=if_types, consts=[b"\xff"]),
                               "but the last operation 'cuda_tile.make_token' is not a terminator")
    c["empty_if_region"] = (module(body=varint(68) + varint(3) + varint(50) + varint(0) + varint(0) + varint(2)
                                   + varint(1) + varint(0) + varint(0) + varint(0) + RETURN),
                            "block is expected to have a terminator operation, but it is empty")
    c["constant_index_out_of_range"] = (module(body=varint(16) + varint(1) + varint(7) + RETURN),
                                        "constant index 7 out of bounds")
    c["constant_wrong_size"] = (module(body=varint(16) + varint(1) + varint(0) + RETURN, consts=[b"\x01\x02"]),
                                "failed to validate buffer size and format")
    c["constant_size_4gb_claim"] = (module(body=varint(16) + varint(1) + varint(0) + RETURN,
                                           raw_consts=[varint(0xFFFFFFFF) + b"\x00"]),
                                    "cannot read 4294967295 bytes")
    c["invalid_enum_value"] = (module(body=varint(61) + varint(1) + varint(3) + varint(0) + varint(9) + varint(0)
                                      + RETURN), "invalid integer value for enum type: 9")
    c["dangling_debug_index"] = (module(dbg=debug([1, 5, 5], [b"\x00"])), "debug info index 5 out of bounds")
    c["truncated_debug_locations"] = (module(dbg=debug([0], [])), "failed to read operation location")
    c["cyclic_debug_info"] = (module(dbg=debug([1, 1, 1], [varint(6) + varint(1) + varint(1)])), "refers to itself")
    c["string_offset_out_of_range"] = (assemble([(2, func(RETURN), 8), (5, table(TYPES, 4), 4),
                                                 (1, varint(1) + b"\xcb" * 3 + (500).to_bytes(4, "little") + b"k", 4)]),
                                       "string index 0 has an invalid offset")
    c["mlir_bytecode"] = (b"ML\xefR\x06\x00\x00", "invalid magic number")
    return c


def main() -> None:
    manifest = {}
    for name, (data, message) in cases().items():
        with open(os.path.join(HERE, f"{name}.tileirbc"), "wb") as f:
            f.write(data)
        manifest[name] = message
    with open(os.path.join(HERE, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
