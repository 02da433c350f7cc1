"""Tensor-map descriptors (TMA): the 128-byte encoding our emulator and launcher use.

NVIDIA's CUtensorMap is opaque (the driver fills it); we define our own layout
of the same information, and everything that builds or reads a descriptor goes
through this module: tests, the runtime marshal layer, the emulator's
`cp.async.bulk.tensor` and `tensormap.replace`.

    raw = encode(TensorMap(base, "f16", dims=(K, M), strides=(2, 2 * K), box=(64, 128), swizzle="128B"))
    tm = decode(raw)          # -> TensorMap, or TensorMapError naming the bad field

Dimension 0 is the innermost (contiguous) one, as in CUtensorMap and in the
coordinate vectors of the PTX instructions. Layout (little-endian, 128 bytes,
64-byte aligned where it lives, like CUtensorMap):

    offset size  field
     0     8     global address of element (0, ..., 0)
     8     4     magic 0x50414d54 ("TMAP"); anything else is not a tensor map
    12     1     rank (1..5)
    13     1     element type (CUtensorMapDataType numbering, `DTYPES`)
    14     1     swizzle (0 none, 1 32B, 2 64B, 3 128B, 4 128B with 32-byte atoms: CUtensorMapSwizzle numbering)
    15     1     interleave (0 none, 1 16B, 2 32B)
    16     1     out-of-bounds fill (0 zeros, 1 NaN for float types)
    17     3     reserved (zero)
    20     20    global dims, u32 x 5 (elements)
    40     40    global strides, u64 x 5 (bytes; stride[0] is the element size)
    80     10    box dims, u16 x 5 (elements, 1..256)
    90     5     element strides, u8 x 5 (1..8)
    95     33    reserved (zero)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

SIZE = 128
MAGIC = 0x50414D54
MAX_RANK = 5

# name -> (CUtensorMapDataType code, bytes per element, is float)
DTYPES: dict[str, tuple[int, int, bool]] = {
    "u8": (0, 1, False), "u16": (1, 2, False), "u32": (2, 4, False), "s32": (3, 4, False),
    "u64": (4, 8, False), "s64": (5, 8, False), "f16": (6, 2, True), "f32": (7, 4, True),
    "f64": (8, 8, True), "bf16": (9, 2, True), "f32_ftz": (10, 4, True), "tf32": (11, 4, True),
    "tf32_ftz": (12, 4, True),
}
DTYPE_BY_CODE = {code: name for name, (code, _, _) in DTYPES.items()}
SWIZZLES = {"none": 0, "32B": 1, "64B": 2, "128B": 3, "128B_atom_32B": 4}
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128, 4: 128}
SWIZZLE_ATOM = {0: 16, 1: 16, 2: 16, 3: 16, 4: 32}      # bytes the swizzle moves as one chunk
INTERLEAVES = {"none": 0, "16B": 1, "32B": 2}
FILLS = {"zero": 0, "nan": 1}

_HEAD = struct.Struct("<QIBBBBB3x")       # address, magic, rank, dtype, swizzle, interleave, fill
_DIMS = struct.Struct("<5I")
_STRIDES = struct.Struct("<5Q")
_BOX = struct.Struct("<5H")
_ESTRIDES = struct.Struct("<5B")


class TensorMapError(ValueError):
    """A descriptor that is malformed or violates the TMA rules; the message names the field."""


@dataclass(frozen=True)
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

    def check(self) -> None:
        """Raise TensorMapError unless this is a map cuTensorMapEncodeTiled would accept (the rules we rely on)."""
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
            if d and (self.strides[d] % 16 or not 0 < self.strides[d] < 1 << 40):
                raise TensorMapError(f"global stride {d} is {self.strides[d]} bytes: it must be a positive "
                                     "multiple of 16 below 2^40")
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


def encode(tm: TensorMap) -> bytes:
    """The 128 descriptor bytes of `tm` (checked first)."""
    tm.check()
    pad = (0,) * (MAX_RANK - tm.rank)
    out = _HEAD.pack(tm.address, MAGIC, tm.rank, DTYPES[tm.dtype][0], SWIZZLES[tm.swizzle],
                     INTERLEAVES[tm.interleave], FILLS[tm.fill])
    out += _DIMS.pack(*tm.dims, *pad) + _STRIDES.pack(*tm.strides, *pad) + _BOX.pack(*tm.box, *pad)
    out += _ESTRIDES.pack(*tm.estrides(), *pad)
    return out + bytes(SIZE - len(out))


def decode(raw: bytes) -> TensorMap:
    """The TensorMap in 128 descriptor bytes; TensorMapError if they are not a valid one."""
    if len(raw) != SIZE:
        raise TensorMapError(f"a tensor map is {SIZE} bytes, got {len(raw)}")
    address, magic, rank, dtype, swizzle, interleave, fill = _HEAD.unpack_from(raw, 0)
    if magic != MAGIC:
        raise TensorMapError("not a tensor map (no 'TMAP' magic: uninitialized or not built by "
                             "tileiras.runtime.tensormap)")
    if not 1 <= rank <= MAX_RANK:
        raise TensorMapError(f"rank {rank} is outside 1..{MAX_RANK}")
    names = {v: k for k, v in SWIZZLES.items()}, {v: k for k, v in INTERLEAVES.items()}, \
        {v: k for k, v in FILLS.items()}
    if dtype not in DTYPE_BY_CODE or swizzle not in names[0] or interleave not in names[1] or fill not in names[2]:
        raise TensorMapError(f"bad element type {dtype}, swizzle {swizzle}, interleave {interleave} or fill {fill}")
    tm = TensorMap(address, DTYPE_BY_CODE[dtype], _DIMS.unpack_from(raw, 20)[:rank],
                   _STRIDES.unpack_from(raw, 40)[:rank], _BOX.unpack_from(raw, 80)[:rank],
                   _ESTRIDES.unpack_from(raw, 90)[:rank], names[0][swizzle], names[1][interleave], names[2][fill])
    tm.check()
    return tm


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
