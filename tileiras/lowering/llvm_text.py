"""A small emitter of LLVM IR text.

Text is what llvmlite parses fastest, and emitting it directly keeps the
lowering free of llvmlite's Python IR builder (slow to import and to build).
"""

from __future__ import annotations

import re
import struct
from typing import Optional

from ..ir.types import PointerType, ScalarType, TokenType, Type

# TileIR element type -> LLVM type. f8/f4 variants are carried as raw bits.
LLVM_SCALAR: dict[str, str] = {
    "i1": "i1", "i4": "i4", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64",
    "f16": "half", "bf16": "bfloat", "f32": "float", "tf32": "float", "f64": "double",
    "f8E4M3FN": "i8", "f8E5M2": "i8", "f8E8M0FNU": "i8", "f4E2M1FN": "i8", "fnv8E5M3FNU": "i8",
}

# Inline assembly that the threads of a warp must execute together, at one instruction: the
# `.aligned` forms (bar.sync is barrier.sync.aligned; wgmma, setmaxnreg, tcgen05 ld/st/wait,
# ldmatrix, mma.sync) and the warp-synchronous ones. LLVM may duplicate or sink an ordinary call
# into the arms of a branch on the thread index (thread 0 issues the TMA store, the rest skip it):
# a warp split over two copies of `bar.sync` arrives twice and the GPU hangs. `convergent` forbids
# that, as it does for NVVM's own barrier intrinsics.
_COLLECTIVE_ASM = re.compile(r'asm sideeffect "[^"]*(?:\.aligned\b|\bbar\.(?:sync|arrive|red)\b'
                             r'|\b(?:elect|shfl|vote|redux|match)\.sync\b)')


def convergent(line: str) -> str:
    """`line` with the `convergent` attribute on its call when it calls collective inline asm."""
    if "asm sideeffect" not in line or not _COLLECTIVE_ASM.search(line):
        return line
    call, dbg, meta = line.partition(", !dbg !")
    if not call.rstrip().endswith(")"):     # no call, or already marked
        return line
    return f"{call.rstrip()} convergent{dbg}{meta}"


# Tile pointers are generic: they may point at global memory (kernel arguments,
# globals) or at shared memory (alloca). LLVM infers the global space where it can.
TILE_PTR = "ptr"
SHARED_PTR = "ptr addrspace(3)"


def llvm_type(t: Type) -> str:
    """The LLVM type of one element of a tile of `t` (or of a scalar `t`)."""
    if isinstance(t, ScalarType):
        return LLVM_SCALAR[t.name]
    if isinstance(t, PointerType):
        return TILE_PTR
    if isinstance(t, TokenType):
        return "i1"
    raise TypeError(f"no LLVM type for {t}")


def float_literal(value: float, llvm_ty: str) -> str:
    """LLVM's exact spelling of a float constant of type `llvm_ty`."""
    if llvm_ty == "half":
        import numpy as np

        return "0xH%04X" % int(np.float16(value).view(np.uint16))
    if llvm_ty == "bfloat":
        import numpy as np

        bits = int(np.float32(value).view(np.uint32))
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF
        if value != value:
            rounded = 0x7FC0
        return "0xR%04X" % rounded
    if llvm_ty == "float":
        # LLVM wants a float constant as the double with the same value.
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", value))[0]


def float_bits_literal(bits: int, llvm_ty: str) -> str:
    """A float constant given by its storage bits."""
    if llvm_ty == "half":
        return "0xH%04X" % bits
    if llvm_ty == "bfloat":
        return "0xR%04X" % bits
    if llvm_ty == "float":
        return float_literal(struct.unpack("<f", struct.pack("<I", bits))[0], "float")
    return "0x%016X" % bits


class FunctionBuilder:
    """Builds the body of one LLVM function as text, block by block."""

    def __init__(self) -> None:
        self.prologue: list[str] = []   # entry-block values that depend only on the thread id
        self.lines: list[str] = []
        self._counter = 0
        self.current_block = "body"
        self.declarations: set[str] = set()
        self.dbg: str = ""              # ", !dbg !N" of the op being lowered (line info)

    def fresh(self, hint: str = "v") -> str:
        return f"%{self.label(hint)}"

    def label(self, hint: str = "bb") -> str:
        self._counter += 1
        # a hint ending in a digit ("g8" then 688) must not spell another name ("g" then 8688)
        return f"{hint}_{self._counter}" if hint[-1:].isdigit() else f"{hint}{self._counter}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line + self.dbg)

    def op(self, rhs: str, hint: str = "v") -> str:
        name = self.fresh(hint)
        self.emit(f"{name} = {rhs}")
        return name

    def pre(self, rhs: str, hint: str = "p") -> str:
        """An instruction placed in the entry block, so it dominates every use."""
        name = self.fresh(hint)
        self.prologue.append(f"  {name} = {rhs}")
        return name

    def start_block(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.current_block = label

    def br(self, label: str) -> None:
        self.emit(f"br label %{label}")

    def cond_br(self, cond: str, if_true: str, if_false: str) -> None:
        self.emit(f"br i1 {cond}, label %{if_true}, label %{if_false}")

    def declare(self, decl: str) -> None:
        self.declarations.add(decl)

    def call(self, ret: str, name: str, args: list[tuple[str, str]], decl_args: Optional[list[str]] = None,
             hint: str = "c", attrs: str = "") -> str:
        arg_types = decl_args if decl_args is not None else [t for t, _ in args]
        self.declare(f"declare {ret} @{name}({', '.join(arg_types)}){attrs}")
        arg_text = ", ".join(f"{t} {v}" for t, v in args)
        if ret == "void":
            self.emit(f"call void @{name}({arg_text})")
            return ""
        return self.op(f"call {ret} @{name}({arg_text})", hint)

    def body(self) -> str:
        return "\n".join(["entry:", *map(convergent, self.prologue), "  br label %body", "body:",
                          *map(convergent, self.lines)])
