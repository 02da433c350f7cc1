"""Hidden tensor-map parameters: how a kernel's TMA descriptors are made from its own arguments.

A kernel that copies with TMA (`cp.async.bulk.tensor`) takes, after the user's parameters,
one `.param .align 64 .b8 [128]` tensor map per (tensor view, box) it copies through. The
launcher passes only the user's parameters (that is all cuTile's launcher knows); the
descriptors are filled at launch from them:

* on a GPU, by the host callback the cubin carries in `.nv.host`
  (`codegen/nv_host.for_ptx`, whose object ptxas embeds with `--nv-host`; the CUDA driver runs it
  when the arguments change);
* in the emulator and our own test launchers, by `hidden_params` below.

Both compute the same bytes from the same `TmaParam` records, which the lowering makes and
the launch metadata carries. A field of a descriptor is either a constant of the kernel or
the value of one user parameter (a tensor view's dynamic shape or stride); the callback reads a
parameter narrower than 64 bits zero-extended.

NVIDIA's kernels, for comparison (tests/test_nv_host.py): a cuTile array of rank r arrives as
its address (u64), shape and strides (r x u32 each, in elements, outermost first); the map lists
the two innermost dims first, then the outer ones outermost first, the last stride being 1.
"""

from __future__ import annotations

from typing import Sequence

from tileiras.ir.record import record

from .tensormap import DTYPES, TensorMap, encode


@record
class Field:
    """A descriptor field's value at launch: user parameter `param`'s value, or `const`."""

    param: int = -1
    const: int = 0

    def value(self, args: Sequence[int]) -> int:
        return int(args[self.param]) if self.param >= 0 else self.const

    def to_json(self) -> list[int]:
        return [self.param, self.const]

    @staticmethod
    def from_json(doc: Sequence[int]) -> "Field":
        return Field(int(doc[0]), int(doc[1]))


@record
class TmaParam:
    """One hidden tensor-map parameter. Dimensions are listed innermost first (as in the map and in
    the coordinates of `cp.async.bulk.tensor`); `strides` are in elements, `strides[0]` is 1."""

    address: int                 # index of the user parameter holding the tensor's base pointer
    dtype: str                   # a `tensormap.DTYPES` name
    dims: tuple[Field, ...]      # global extent per dimension, elements
    strides: tuple[Field, ...]   # global stride per dimension, elements
    box: tuple[int, ...]         # elements per dimension one copy moves
    swizzle: str = "none"        # a `tensormap.SWIZZLES` name: the shared layout the copy writes
    built: bool = False          # made in the kernel (lowering/kernel_maps.py), not a hidden parameter:
                                 # `address` and each Field.param index its tensor view's operands

    def tensor_map(self, args: Sequence[int]) -> TensorMap:
        eb = DTYPES[self.dtype][1]
        return TensorMap(int(args[self.address]), self.dtype, tuple(f.value(args) for f in self.dims),
                         tuple(f.value(args) * eb for f in self.strides), self.box, swizzle=self.swizzle)

    def to_json(self) -> dict:
        return {"address": self.address, "dtype": self.dtype, "dims": [f.to_json() for f in self.dims],
                "strides": [f.to_json() for f in self.strides], "box": list(self.box), "swizzle": self.swizzle}

    @staticmethod
    def from_json(doc: dict) -> "TmaParam":
        return TmaParam(int(doc["address"]), str(doc["dtype"]), tuple(Field.from_json(f) for f in doc["dims"]),
                        tuple(Field.from_json(f) for f in doc["strides"]), tuple(int(b) for b in doc["box"]),
                        str(doc["swizzle"]))


def hidden_params(specs: Sequence[TmaParam], args: Sequence[int]) -> list[bytes]:
    """The 128-byte values of a kernel's hidden parameters for the user's arguments `args`
    (pointers as device addresses); `TensorMapError` when an argument breaks a TMA rule."""
    return [encode(spec.tensor_map(args)) for spec in specs]
