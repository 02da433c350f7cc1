"""codegen/tensormap.py: the hardware descriptor layout, against bytes NVIDIA's callbacks wrote.

The GOLDEN descriptors are the first 64 bytes NVIDIA's `.nv.host` callbacks (tileiras 13.x, the
`nvidia-cuda-tileiras` wheel) wrote for the kernels and arguments named; tests/test_nv_host.py
re-derives such bytes from NVIDIA's objects at test time when its tileiras is installed.
"""

from __future__ import annotations

import itertools

import pytest

from tileiras.codegen.tensormap import (DTYPES, SWIZZLES, TensorMap, TensorMapError, decode, encode, for_array,
                                        replace)

F16_M, F16_K = 512, 256
GOLDEN = [
    # mm_f16_128x128x64 on sm_90, A (512 x 256, row stride 256): 128B swizzle, span >= 128 KiB
    (TensorMap(0x7F0000001000, "f16", (F16_K, F16_M), (2, 2 * F16_K), (64, 128), swizzle="128B"),
     "00100000007f0000126324002000000000000000000000000000000000000000ff000000ff0100000000000000000000"
     "000000000000003f7f00000000000000"),
    # mm_tf32_128x128x32 on sm_100, A (64 x 96 f32, tf32 operand) and B (96 x 48, N-major: 32-byte atoms)
    (TensorMap(0x7F0000003000, "tf32", (96, 64), (4, 384), (32, 128), swizzle="128B"),
     "00300000007f00009263050018000000000000000000000000000000000000005f0000003f0000000000000000000000"
     "000000000000001f7f00000000000000"),
    (TensorMap(0x7F0000005000, "tf32", (48, 96), (4, 192), (32, 32), swizzle="128B_atom_32B"),
     "00500000007f000092630d000c000000000000000000000000000000000000002f0000005f0000000000000000000000"
     "000000000000001f1f00000000000000"),
    # mm_e4m3_64x64x32 on sm_90: A (64 x 32 bytes, 32B swizzle), C (64 x 64 f16); small spans
    (TensorMap(0x10000, "u8", (32, 64), (1, 32), (32, 64), swizzle="32B"),
     "00000100000000001220040002000000000000000000000000000000000000001f0000003f0000000000000000000000"
     "000000000000001f3f00000000000000"),
    (TensorMap(0x30000, "f16", (64, 64), (2, 128), (64, 64), swizzle="128B"),
     "00000300000000001263040008000000000000000000000000000000000000003f0000003f0000000000000000000000"
     "000000000000003f3f00000000000000"),
    # a 5-D batched matmul on sm_90, A (7, 3, 4, 512, 256): NVIDIA orders the map's dims K, M, then the
    # batch dims outermost first
    (TensorMap(0x7F0000001000, "f16", (256, 512, 7, 3, 4),
               (2, 512, 3 * 4 * 512 * 256 * 2, 4 * 512 * 256 * 2, 512 * 256 * 2), (64, 128, 1, 1, 1), swizzle="128B"),
     "00100000007f0000426324002000000000000300000001000040000000000000ff000000ff0100000600000002000000"
     "030000000000003f7f00000000000000"),
    # row kernels (a row sum over 4096 elements, one row per block) on sm_90: an int16 row, and an f64
    # row NVIDIA reshapes into 16 x 256 (3 rows, row stride 5008): no swizzle, box 256 x 1 and 16 x 64
    (TensorMap(0x7F0000001000, "u16", (4096, 8), (2, 8192), (256, 1)),
     "00100000007f0000920004000002000000000000000000000000000000000000ff0f0000070000000000000000000000"
     "00000000000000ff0000000000000000"),
    (TensorMap(0x7F0000001000, "f64", (16, 256, 3), (8, 128, 5008 * 8), (16, 64, 1)),
     "00100000007f0000a204040008000000c80900000000000000000000000000000f000000ff0000000200000000000000"
     "000000000000000f3f00000000000000"),
    (TensorMap(0x7F0000001000, "u64", (16, 256, 3), (8, 128, 5008 * 8), (16, 64, 1)),
     "00100000007f00002202040008000000c80900000000000000000000000000000f000000ff0000000200000000000000"
     "000000000000000f3f00000000000000"),
]


@pytest.mark.parametrize("tm,want", GOLDEN, ids=lambda v: v.dtype if isinstance(v, TensorMap) else "")
def test_encode_writes_the_bytes_nvidias_callback_writes(tm: TensorMap, want: str) -> None:
    raw = encode(tm)
    assert raw[:64].hex() == want
    assert raw[64:] == bytes(64)
    assert decode(bytes.fromhex(want) + bytes(64)) == TensorMap(**{**tm.__dict__, "element_strides": (1,) * tm.rank})


def test_every_field_round_trips() -> None:
    shapes = {1: ((4096,), (128,)), 2: ((300, 64), (16, 64)), 3: ((5, 40, 96), (1, 8, 32)),
              4: ((2, 3, 40, 64), (1, 2, 8, 32)), 5: ((2, 2, 3, 40, 64), (1, 1, 2, 8, 32))}
    for dtype, swizzle, rank in itertools.product(DTYPES, SWIZZLES, shapes):
        shape, box = shapes[rank]
        eb = DTYPES[dtype][1]
        box = box[:-1] + (min(box[-1], max(16 // eb, 128 // eb if swizzle != "none" else 256)),)
        if swizzle in ("32B", "64B"):
            box = box[:-1] + (int(swizzle[:-1]) // eb,)
        strides, acc = [], eb
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n + 16 // eb
        estrides = tuple(1 + (i % 3) for i in range(rank))
        fill = "nan" if DTYPES[dtype][2] and rank % 2 else "zero"
        tm = TensorMap(0x7F00_1234_5670, dtype, tuple(reversed(shape)), tuple(reversed(strides)),
                       tuple(reversed(box)), estrides, swizzle, fill=fill)
        assert decode(encode(tm)) == tm, (dtype, swizzle, rank)


def test_decode_refuses_what_is_not_a_descriptor() -> None:
    good = bytearray(for_array(0x10000, (64, 64), (128, 2), "f16", (64, 64), "128B"))
    cases = [(bytes(128), "flags word 0x00000000"),
             (good[:64], "is 128 bytes"),
             (good[:11] + b"\x80" + good[12:], "not one a TMA descriptor holds"),    # an unknown flag bit
             (good[:28] + b"\x01" + good[29:], "reserved bytes"),
             (good[:62] + b"\x01" + good[63:], "reserved bytes"),
             (good[:7] + b"\x80" + good[8:], "bits outside 4..56"),
             ((0x10008).to_bytes(8, "little") + good[8:], "bits outside 4..56"),     # not 16-byte aligned
             (bytes(good[:8]) + (0x4_6312 & ~(15 << 7) | 13 << 7).to_bytes(4, "little") + bytes(good[12:]),
              "bad element type 13")]
    for raw, msg in cases:
        with pytest.raises(TensorMapError, match=msg):
            decode(bytes(raw))


def test_replace_edits_the_fields_ptx_names() -> None:
    raw = for_array(0x10000, (1, 16, 8), (512, 32, 4), "f32", (1, 8, 8))
    raw = replace(raw, "global_address", 0, 0x20000)
    raw = replace(raw, "rank", 0, 1)                       # new_val is the rank minus one
    raw = replace(raw, "global_dim", 1, 12)
    raw = replace(raw, "global_stride", 0, 64)             # ordinal 0: the stride of dimension 1
    raw = replace(raw, "box_dim", 0, 4)
    raw = replace(raw, "element_stride", 1, 2)
    raw = replace(raw, "swizzle_mode", 0, 1)
    tm = decode(raw)
    assert (tm.address, tm.dims, tm.strides, tm.box, tm.element_strides, tm.swizzle) == \
        (0x20000, (8, 12), (4, 64), (4, 8), (1, 2), "32B")
    with pytest.raises(TensorMapError, match="not modelled"):
        replace(raw, "im2col", 0, 1)
