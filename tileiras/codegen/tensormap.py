"""Tensor-map descriptors (TMA): the 128-byte tensor maps `cp.async.bulk.tensor` reads, in the
hardware's own bit layout (sm_90 and later), as NVIDIA's tileiras host callback writes them.

Everything that builds or reads a descriptor goes through this module: the `.nv.host` callback
generator (`codegen/nv_host.py` mirrors `encode` in LLVM IR), `tma_params.hidden_params`, the
runtime marshal layer, the emulator's `cp.async.bulk.tensor` and `tensormap.replace`, tests.

    raw = encode(TensorMap(base, "f16", dims=(K, M), strides=(2, 2 * K), box=(64, 128), swizzle="128B"))
    tm = decode(raw)          # -> TensorMap, or TensorMapError naming the bad field

Dimension 0 is the innermost (contiguous) one, as in CUtensorMap and in the coordinate vectors
of the PTX instructions.

How the layout was learned. CUDA calls the descriptor opaque, but NVIDIA's tileiras fills the
descriptors of its kernels' hidden parameters itself, in an x86-64 callback it hands ptxas with
`--nv-host` (`__CUDA_TILEIR_FUNC_ON_ARGUMENTS_CHANGE_<n>`, see codegen/nv_host.py). We ran those
callbacks on many argument buffers for kernels of every element type, rank (1 to 5), box shape
and swizzle NVIDIA's compiler produces (tests/test_nv_host.py keeps checking it) and read the
fields off the bytes. The element types and swizzle modes observed take the `new_val` numbering
of PTX `tensormap.replace` (PTX ISA, "Tensormap new_val validity"); we assume the same of the
interleave and fill fields. Only the first 64 bytes are written; the callback leaves bytes
64..127 as they are, we write zeros there and `decode` does not read them.

Layout (little-endian; "evidence" = seen to vary in NVIDIA's callbacks with the field; "constant"
= the same in every descriptor NVIDIA writes, replicated; "ours" = placed by us, see below):

    bytes  bits    field                                                        source
    0-7    4..56   global address (bits 0..3 must be zero: 16-byte aligned)      evidence
    8-11   0       0                                                             constant
           1       1                                                             constant
           2..3    0                                                             constant
           4..6    rank - 1                                                      evidence (ranks 1-5)
           7..10   element type, PTX .elemtype numbering (`ELEMTYPES`)           evidence (u8 u16 u32 u64
                                                                                 f16 f32 f64 bf16; NVIDIA maps
                                                                                 signed types to unsigned)
           11..12  interleave (0 none, 1 16B, 2 32B)                             ours (0 seen)
           13..15  swizzle mode (0 none, 1 32B, 2 64B, 3 128B, 4 96B)            evidence (0-3)
           16      tf32: f32 data an mma reads as tf32                           evidence (NVIDIA's tf32 operands)
           17      0                                                             constant
           18      1                                                             constant
           19..20  swizzle atomicity (0 16-byte chunks, 1 32-byte)               evidence (0, 1: bit 19)
           21      1 when the tensor spans >= 128 KiB (`LARGE_BIT`)               evidence
           22      out-of-bounds fill (0 zeros, 1 NaN)                           ours (0 seen)
           23..31  0                                                             constant
    12-27          global stride of dims 1..4, bytes / 16, u32 each              evidence
    28-31          0                                                             constant
    32-51          global dim - 1 of dims 0..4, u32 each (unused dims: 0)         evidence
    52-54          0                                                             constant
    55-59          box dim - 1 of dims 0..4, u8 each (unused dims: 0)             evidence
    60-61  0..14   element stride - 1 of dims 0..4, 3 bits each                  ours (1 seen)
    62-63          0                                                             constant

"ours" fields are where NVIDIA's descriptors hold zeros because its kernels only ever use the
zero value (no interleave, zero fill, element stride 1): round trips through this module and the
emulator are exact, but a GPU may read them elsewhere. NVIDIA's loads with NaN padding do not use
TMA, so the fill bit could not be observed.

The "spans >= 128 KiB" bit is set when dims[0] * element size + sum over d >= 1 of
(dims[d] - 1) * strides[d] (bytes, the distance from the first element to one past the last)
reaches 128 KiB; `decode` does not need it (it follows from the other fields) and ignores it, as
it ignores the fields of dimensions past the rank (`encode` writes zeros there).
"""

from __future__ import annotations

import struct
from typing import Sequence

from tileiras.ir.record import record

SIZE = 128                 # bytes of a tensor map; the layout defines (and the callback writes) the first 64
MAX_RANK = 5

# name -> (CUtensorMapDataType code, bytes per element, is float)
DTYPES: dict[str, tuple[int, int, bool]] = {
    "u8": (0, 1, False), "u16": (1, 2, False), "u32": (2, 4, False), "s32": (3, 4, False),
    "u64": (4, 8, False), "s64": (5, 8, False), "f16": (6, 2, True), "f32": (7, 4, True),
    "f64": (8, 8, True), "bf16": (9, 2, True), "f32_ftz": (10, 4, True), "tf32": (11, 4, True),
    "tf32_ftz": (12, 4, True),
}
# name -> (the descriptor's element-type field, its tf32 bit). The field takes the PTX
# tensormap.replace .elemtype numbering (which differs from CUtensorMapDataType's); NVIDIA's tf32
# operands are f32 maps with the tf32 bit set, not the PTX numbering's .tf32 (11).
ELEMTYPES: dict[str, tuple[int, int]] = {
    "u8": (0, 0), "u16": (1, 0), "u32": (2, 0), "s32": (3, 0), "u64": (4, 0), "s64": (5, 0), "f16": (6, 0),
    "f32": (7, 0), "f32_ftz": (8, 0), "f64": (9, 0), "bf16": (10, 0), "tf32": (7, 1), "tf32_ftz": (8, 1),
}
DTYPE_BY_ELEMTYPE = {code: name for name, code in ELEMTYPES.items()}
SWIZZLES = {"none": 0, "32B": 1, "64B": 2, "128B": 3, "128B_atom_32B": 4}      # CUtensorMapSwizzle numbering
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128}
SWIZZLE_ATOM = {0: 16, 1: 16, 2: 16, 3: 16, 4: 32}      # bytes the swizzle moves as one chunk
# CUtensorMapSwizzle value -> the descriptor's (swizzle mode, swizzle atomicity) fields: 128-byte
# swizzling of 32-byte atoms is mode 128B with atomicity 1 (PTX .swizzle_atomicity numbering).
_SWIZZLE_FIELD = {0: (0, 0), 1: (1, 0), 2: (2, 0), 3: (3, 0), 4: (3, 1)}
INTERLEAVES = {"none": 0, "16B": 1, "32B": 2}
FILLS = {"zero": 0, "nan": 1}


@record
class _Bits:
    """A field of the flags word (bytes 8..11)."""

    shift: int
    width: int

    def get(self, word: int) -> int:
        return (word >> self.shift) & ((1 << self.width) - 1)

    def put(self, word: int, value: int) -> int:
        mask = ((1 << self.width) - 1) << self.shift
        return (word & ~mask) | ((value << self.shift) & mask)


RANK_BITS = _Bits(4, 3)
ELEMTYPE_BITS = _Bits(7, 4)
INTERLEAVE_BITS = _Bits(11, 2)
SWIZZLE_BITS = _Bits(13, 3)
TF32_BIT = _Bits(16, 1)
ATOMICITY_BITS = _Bits(19, 2)
LARGE_BIT = _Bits(21, 1)
FILL_BIT = _Bits(22, 1)
LARGE_SPAN = 1 << 17       # bytes: the span from which bit 21 is set
CONSTANT_FLAGS = 0x2 | 0x40000                   # bits 1 and 18: set in every descriptor
_FIELD_BITS = (RANK_BITS, ELEMTYPE_BITS, INTERLEAVE_BITS, SWIZZLE_BITS, TF32_BIT, ATOMICITY_BITS, LARGE_BIT,
               FILL_BIT)
_KNOWN_FLAGS = CONSTANT_FLAGS | sum(((1 << b.width) - 1) << b.shift for b in _FIELD_BITS)
ESTRIDE_BITS = 3

_WORDS = struct.Struct("<QI4I4x5I3x5BH2x")     # address, flags, strides 1..4 (+3 unused words), dims, boxes, estrides
ADDRESS_MASK = ((1 << 57) - 1) & ~15            # the address bits the descriptor holds
MAX_STRIDE = 1 << 36                             # bytes: stride / 16 must fit the u32 field


class TensorMapError(ValueError):
    """A descriptor that is malformed or violates the TMA rules; the message names the field."""


@record
class TensorMap:
    """A tiled tensor map. `strides` are in bytes, `strides[0]` must be the element size."""

    address: int
    dtype: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    element_strides: tuple[int, ...] = ()
    swizzle: str = "none"
    interleave: str = "none"
    fill: str = "zero"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def elem_bytes(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def swizzle_bytes(self) -> int:
        return SWIZZLE_BYTES[SWIZZLES[self.swizzle]]

    @property
    def swizzle_atom(self) -> int:
        return SWIZZLE_ATOM[SWIZZLES[self.swizzle]]

    def estrides(self) -> tuple[int, ...]:
        return self.element_strides or (1,) * self.rank

    def box_elements(self) -> tuple[int, ...]:
        """Elements the box holds along each dimension (the box traversed with the element strides)."""
        return tuple(-(-b // e) for b, e in zip(self.box, self.estrides()))

    def box_bytes(self) -> int:
        """Bytes one box load writes to shared memory (the transaction count an mbarrier expects)."""
        n = self.elem_bytes
        for b in self.box_elements():
            n *= b
        return n

    def span(self) -> int:
        """Bytes from the first element to one past the last (what the descriptor's bit 21 tests)."""
        return self.dims[0] * self.elem_bytes + sum((self.dims[d] - 1) * self.strides[d] for d in range(1, self.rank))

    def check(self) -> None:
        """Raise TensorMapError unless this is a map cuTensorMapEncodeTiled would accept (the rules we rely on)
        and the descriptor can hold."""
        if self.dtype not in DTYPES:
            raise TensorMapError(f"unknown element type '{self.dtype}'")
        r = self.rank
        if not 1 <= r <= MAX_RANK:
            raise TensorMapError(f"rank {r} is outside 1..{MAX_RANK}")
        es = self.estrides()
        if not (len(self.strides) == len(self.box) == len(es) == r):
            raise TensorMapError("dims, strides, box and element strides need one entry per dimension")
        if self.address % 16:
            raise TensorMapError(f"global address 0x{self.address:x} is not 16-byte aligned")
        if not 0 <= self.address <= ADDRESS_MASK:
            raise TensorMapError(f"global address 0x{self.address:x} does not fit the descriptor's 57 bits")
        if self.strides[0] != self.elem_bytes:
            raise TensorMapError(f"stride of dimension 0 is {self.strides[0]}, not the element size "
                                 f"{self.elem_bytes}")
        for d in range(r):
            if not 1 <= self.dims[d] <= 1 << 32:
                raise TensorMapError(f"global dim {d} is {self.dims[d]}, outside 1..2^32")
            if not 1 <= self.box[d] <= 256:
                raise TensorMapError(f"box dim {d} is {self.box[d]}, outside 1..256")
            if not 1 <= es[d] <= 8:
                raise TensorMapError(f"element stride {d} is {es[d]}, outside 1..8")
            if d and (self.strides[d] % 16 or not 0 < self.strides[d] < MAX_STRIDE):
                raise TensorMapError(f"global stride {d} is {self.strides[d]} bytes: it must be a positive "
                                     "multiple of 16 below 2^36")
        if self.swizzle not in SWIZZLES or self.interleave not in INTERLEAVES or self.fill not in FILLS:
            raise TensorMapError(f"unknown swizzle '{self.swizzle}', interleave '{self.interleave}' or "
                                 f"fill '{self.fill}'")
        if self.fill == "nan" and not DTYPES[self.dtype][2]:
            raise TensorMapError("NaN out-of-bounds fill needs a float element type")
        inner = self.box[0] * self.elem_bytes
        if self.interleave == "none" and inner % 16:
            raise TensorMapError(f"the box's inner dimension is {inner} bytes, not a multiple of 16")
        if self.swizzle != "none" and self.interleave == "none" and inner > self.swizzle_bytes:
            raise TensorMapError(f"the box's inner dimension is {inner} bytes, more than the "
                                 f"{self.swizzle} swizzle span")


def static_flags(rank: int, dtype: str, swizzle: str = "none", interleave: str = "none", fill: str = "zero") -> int:
    """Bytes 8..11 of a descriptor but the span bit (`LARGE_BIT`), which depends on dims and strides."""
    word = CONSTANT_FLAGS
    word = RANK_BITS.put(word, rank - 1)
    elem, tf32 = ELEMTYPES[dtype]
    mode, atomicity = _SWIZZLE_FIELD[SWIZZLES[swizzle]]
    word = ELEMTYPE_BITS.put(word, elem)
    word = TF32_BIT.put(word, tf32)
    word = INTERLEAVE_BITS.put(word, INTERLEAVES[interleave])
    word = SWIZZLE_BITS.put(word, mode)
    word = ATOMICITY_BITS.put(word, atomicity)
    return FILL_BIT.put(word, FILLS[fill])


def flags_word(tm: TensorMap) -> int:
    """Bytes 8..11 of the descriptor of `tm` (assumed checked)."""
    word = static_flags(tm.rank, tm.dtype, tm.swizzle, tm.interleave, tm.fill)
    return LARGE_BIT.put(word, int(tm.span() >= LARGE_SPAN))


def encode(tm: TensorMap) -> bytes:
    """The 128 descriptor bytes of `tm` (checked first)."""
    tm.check()
    pad = (0,) * (MAX_RANK - tm.rank)
    es = 0
    for d, e in enumerate(tm.estrides()):
        es |= (e - 1) << (ESTRIDE_BITS * d)
    strides = tuple(s >> 4 for s in tm.strides[1:]) + (0,) * (MAX_RANK - tm.rank)
    out = _WORDS.pack(tm.address, flags_word(tm), *strides, *(n - 1 for n in tm.dims), *pad,
                      *(b - 1 for b in tm.box), *pad, es)
    return out + bytes(SIZE - len(out))


def _unpack(raw: bytes) -> tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], int]:
    address, flags, *rest = _WORDS.unpack_from(raw, 0)
    return address, flags, tuple(rest[0:4]), tuple(rest[4:9]), tuple(rest[9:14]), rest[14]


def decode(raw: bytes) -> TensorMap:
    """The TensorMap in 128 descriptor bytes; TensorMapError if they are not a valid one."""
    if len(raw) != SIZE:
        raise TensorMapError(f"a tensor map is {SIZE} bytes, got {len(raw)}")
    address, flags, strides, dims, boxes, es = _unpack(raw)
    if flags & CONSTANT_FLAGS != CONSTANT_FLAGS or flags & ~_KNOWN_FLAGS:
        raise TensorMapError(f"not a tensor map (flags word 0x{flags:08x} is not one a TMA descriptor holds: "
                             "uninitialized or not built by tileiras.codegen.tensormap)")
    if address & ~ADDRESS_MASK:
        raise TensorMapError(f"global address field 0x{address:x} has bits outside 4..56")
    rank = RANK_BITS.get(flags) + 1
    if rank > MAX_RANK:
        raise TensorMapError(f"rank {rank} is outside 1..{MAX_RANK}")
    elem = (ELEMTYPE_BITS.get(flags), TF32_BIT.get(flags))
    swz = (SWIZZLE_BITS.get(flags), ATOMICITY_BITS.get(flags))
    swizzles = {v: k for k, v in _SWIZZLE_FIELD.items()}
    interleaves, fills = {v: k for k, v in INTERLEAVES.items()}, {v: k for k, v in FILLS.items()}
    inter = INTERLEAVE_BITS.get(flags)
    if elem not in DTYPE_BY_ELEMTYPE or swz not in swizzles or inter not in interleaves:
        raise TensorMapError(f"bad element type {elem[0]} (tf32 bit {elem[1]}), swizzle mode {swz[0]} "
                             f"(atomicity {swz[1]}) or interleave {inter}")
    # the fields of dimensions past the rank are not read (tensormap.replace of .rank leaves them)
    if es >> (ESTRIDE_BITS * MAX_RANK) or any(raw[28:32]) or any(raw[52:55]) or any(raw[62:64]):
        raise TensorMapError("not a tensor map (reserved bytes are not zero)")
    dtype = DTYPE_BY_ELEMTYPE[elem]
    swizzle = {v: k for k, v in SWIZZLES.items()}[swizzles[swz]]
    tm = TensorMap(address, dtype, tuple(n + 1 for n in dims[:rank]),
                   (DTYPES[dtype][1],) + tuple(s << 4 for s in strides[:rank - 1]),
                   tuple(b + 1 for b in boxes[:rank]),
                   tuple(((es >> (ESTRIDE_BITS * d)) & 7) + 1 for d in range(rank)), swizzle,
                   interleaves[inter], fills[FILL_BIT.get(flags)])
    tm.check()
    return tm


# tensormap.replace field -> (byte offset, bytes per entry) of the ordinal-indexed fields, and
# the flags-word fields; values as PTX passes them (dims and boxes, strides in bytes).
_REPLACE_ARRAYS = {"global_dim": (32, 4), "global_stride": (12, 4), "box_dim": (55, 1)}
_REPLACE_FLAGS = {"rank": RANK_BITS, "elemtype": ELEMTYPE_BITS, "interleave_layout": INTERLEAVE_BITS,
                  "swizzle_mode": SWIZZLE_BITS, "swizzle_atomicity": ATOMICITY_BITS, "fill_mode": FILL_BIT}
REPLACE_FIELDS = ("global_address", "element_stride", *_REPLACE_ARRAYS, *_REPLACE_FLAGS)


def replace(raw: bytes, field: str, ordinal: int, value: int) -> bytes:
    """`raw` with one field rewritten as PTX `tensormap.replace.tile.<field>` does: `value` is the
    instruction's new_val (`.rank`: rank - 1; `.global_stride` ordinal i: the byte stride of
    dimension i + 1; dims and boxes as they are; enums in PTX numbering). No validation: the map
    is checked when a copy reads it."""
    if len(raw) != SIZE:
        raise TensorMapError(f"a tensor map is {SIZE} bytes, got {len(raw)}")
    out = bytearray(raw)
    if field == "global_address":
        struct.pack_into("<Q", out, 0, value & ((1 << 64) - 1))
    elif field == "element_stride":
        (es,) = struct.unpack_from("<H", out, 60)
        shift = ESTRIDE_BITS * ordinal
        struct.pack_into("<H", out, 60, (es & ~(7 << shift)) | (((value - 1) & 7) << shift))
    elif field in _REPLACE_ARRAYS:
        off, size = _REPLACE_ARRAYS[field]
        v = value >> 4 if field == "global_stride" else value - 1
        out[off + ordinal * size:off + (ordinal + 1) * size] = (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    elif field in _REPLACE_FLAGS:
        (flags,) = struct.unpack_from("<I", out, 8)
        struct.pack_into("<I", out, 8, _REPLACE_FLAGS[field].put(flags, value))
    else:
        raise TensorMapError(f"tensormap.replace field '{field}' is not modelled")
    return bytes(out)


def for_array(address: int, shape: Sequence[int], strides: Sequence[int], dtype: str, box: Sequence[int],
              swizzle: str = "none", element_strides: Sequence[int] = (), fill: str = "zero") -> bytes:
    """Descriptor bytes for a row-major-style array view given as numpy does (outermost dimension first,
    strides in bytes); the box is given in the same order. The map itself lists dimensions innermost first."""
    if not (len(shape) == len(strides) == len(box)):
        raise TensorMapError("shape, strides and box need one entry per dimension")
    es = tuple(reversed(tuple(element_strides))) if element_strides else ()
    return encode(TensorMap(int(address), dtype, tuple(int(x) for x in reversed(shape)),
                            tuple(int(x) for x in reversed(strides)), tuple(int(x) for x in reversed(box)),
                            es, swizzle, "none", fill))
