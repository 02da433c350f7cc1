"""Shared memory of one kernel: explicit buffers, their padding, and static vs dynamic placement.

A kernel's shared memory is one region of *buffers* (tiles staged for tensor
cores, pipeline rings, mbarriers, the scratch of conversions and reductions,
epilogue restaging: each a sized, aligned value with a lifetime and an offset
that `tileas.buffers.SharedBuffers` fixes when it is allocated, reusing the bytes
of buffers whose lifetime is over). The lowering names the region
`@__tileir_buffers`; `place` decides at the end of a kernel where it lives:

* up to 48 KB in all (the static limit of every target): two static globals;
* beyond that: one dynamic (`extern .shared`) array, up to the target's
  opt-in maximum. The launch metadata carries the
  size, our launcher sets it, and cuTile's launcher grants a kernel all the
  dynamic shared memory the device allows beyond its static size.

Bank conflicts: a matrix whose rows are whole 16-byte chunks gets 16 bytes of
padding after each row (unless the padding alone would overflow the target's
shared memory: the kernel is then lowered again without it), so the 8 rows an `ldmatrix` (or a warp's 16-byte
copies) touch at one column fall in 8 different 16-byte bank groups. Unlike an
xor swizzle, padding keeps every address affine in (row, column): the
fragment loads of a K loop share one base register and differ only by
immediate offsets.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import CompileError
from ..layout.shared_matrix import SharedMatrix, row_flip
from ..tileas.buffers import REGION_ALIGN

if TYPE_CHECKING:
    from .kernel import KernelLowering

STATIC_LIMIT = 48 * 1024



def buffers_base() -> str:
    return "@__tileir_buffers"


def element_offset(k: "KernelLowering", matrix: SharedMatrix, b: str, r: str, c: str) -> str:
    """Byte offset (i32, from the start of the buffers region) of element (b, r, c)."""
    if matrix.swizzled:
        return _swizzled_offset(k, matrix, b, r, c)
    terms = [(b, matrix.rows * matrix.pitch), (r, matrix.pitch), (c, matrix.elem_bytes)]
    const = matrix.offset + sum(int(v) * scale for v, scale in terms if v.isdigit())
    acc = ""
    for v, scale in terms:
        if v.isdigit():
            continue
        t = v if scale == 1 else k.b.op(f"mul i32 {v}, {scale}", "so")
        acc = t if not acc else k.b.op(f"add i32 {acc}, {t}", "so")
    if matrix.stage:
        acc = matrix.stage if not acc else k.b.op(f"add i32 {acc}, {matrix.stage}", "so")
    if not acc:
        return str(const)
    return acc if const == 0 else k.b.op(f"add i32 {acc}, {const}", "so")


def _swizzled_offset(k: "KernelLowering", matrix: SharedMatrix, b: str, r: str, c: str) -> str:
    """Column atom c / per_atom, then row-major `span`-byte rows, 16-byte chunks xor-ed with the row
    bits 7.. of the offset: the layout TMA writes and wgmma / tcgen05 read with the 128B (64B, 32B)
    swizzle."""
    span = matrix.span
    per_atom = span // matrix.elem_bytes
    atom = k.b.op(f"udiv i32 {c}, {per_atom}", "sz") if not c.isdigit() else str(int(c) // per_atom)
    within = k.b.op(f"urem i32 {c}, {per_atom}", "sz") if not c.isdigit() else str(int(c) % per_atom)
    row = r if b == "0" else k.b.op(f"add i32 {k.b.op(f'mul i32 {b}, {matrix.rows}', 'sz')}, {r}", "sz")
    rows = k.b.op(f"add i32 {k.b.op(f'mul i32 {atom}, {matrix.atom_bytes}', 'sz')}, "
                  f"{k.b.op(f'mul i32 {row}, {span}', 'sz')}", "sz")
    inner = k.b.op(f"mul i32 {within}, {matrix.elem_bytes}", "sz")
    mask = (span // 16 - 1) << 4      # 128B: bits 7..9 -> 4..6; 64B: 7..8 -> 4..5; 32B: 7 -> 4
    if matrix.atom_bytes % (8 * span) == 0:
        # whole 8-row atoms: bits 7.. come from the row alone and the xor only touches the bytes
        # within the row, so the row's part stays an add (a register plus immediates per row,
        # where the xor of the whole offset made every element's address a register of its own)
        key = k.b.op(f"mul i32 {k.b.op(f'and i32 {row}, {mask // (span // 8)}', 'sz')}, {span // 8}", "sz")
        off = k.b.op(f"add i32 {rows}, {k.b.op(f'xor i32 {inner}, {key}', 'sz')}", "sz")
    else:
        off = k.b.op(f"add i32 {rows}, {inner}", "sz")
        key = k.b.op(f"and i32 {k.b.op(f'lshr i32 {off}, 3', 'sz')}, {mask}", "sz")
        off = k.b.op(f"xor i32 {off}, {key}", "sz")
    if matrix.stage:
        off = k.b.op(f"add i32 {off}, {matrix.stage}", "sz")
    return off if matrix.offset == 0 else k.b.op(f"add i32 {off}, {matrix.offset}", "sz")




def flipped_row(k: "KernelLowering", matrix: SharedMatrix, offset: str, t: "str | int") -> str:
    """The offset of row r0 ^ `t` from `offset`, that of row r0 (`row_flip` answers for `matrix`)."""
    delta = row_flip(matrix)
    assert delta is not None
    if isinstance(t, int):
        return offset if t == 0 else k.b.op(f"xor i32 {offset}, {delta(t)}", "sr")
    # the delta of a runtime t (below 8), bit by bit: the delta is linear in t's bits
    down = ""
    for i in range(3):
        bit = k.b.op(f"and i32 {k.b.op(f'lshr i32 {t}, {i}', 'sr')}, 1", "sr")
        part = k.b.op(f"mul i32 {bit}, {delta(1 << i)}", "sr")
        down = part if not down else k.b.op(f"xor i32 {down}, {part}", "sr")
    return k.b.op(f"xor i32 {offset}, {down}", "sr")


def descriptor(k: "KernelLowering", offsets: "list[int | str]", fields: int) -> str:
    """The 64-bit shared-memory descriptor (wgmma, tcgen05) of the bytes at the sum of `offsets` in
    the buffers region, its other `fields` given: the start address, in 16-byte units, is the 14-bit
    low field. Built on the low word: the buffers' start (masked once) plus the offsets' units (each
    a multiple of 16, their sum below 2^18, so no carry leaves the field); the high word is a
    constant. In a hot loop that is an add and a move a descriptor, where the 64-bit sum of the
    address took four."""
    start = k.b.pre(f"lshr i32 {k.b.pre(f'ptrtoint ptr addrspace(3) {buffers_base()} to i32', 'wd')}, 4", "wd")
    lo = k.b.pre(f"or i32 {k.b.pre(f'and i32 {start}, 16383', 'wd')}, {fields & 0xFFFFFFFF}", "wd")
    units = 0
    for part in map(str, offsets):
        if part.isdigit():
            units += int(part) >> 4
        elif part:
            lo = k.b.op(f"add i32 {lo}, {k.b.op(f'lshr i32 {part}, 4', 'wd')}", "wd")
    if units:
        lo = k.b.op(f"add i32 {lo}, {units}", "wd")
    return k.b.op(f"or i64 {k.b.op(f'zext i32 {lo} to i64', 'wd')}, {fields >> 32 << 32}", "wd")


def pointer(k: "KernelLowering", byte_offset: str) -> str:
    """ptr addrspace(3) to a byte offset in the buffers region."""
    if byte_offset == "0":
        return buffers_base()
    if byte_offset.isdigit():
        return f"getelementptr inbounds (i8, ptr addrspace(3) {buffers_base()}, i32 {byte_offset})"
    return k.b.op(f"getelementptr inbounds i8, ptr addrspace(3) {buffers_base()}, i32 {byte_offset}", "sp")


def place(k: "KernelLowering", text: str, name: str) -> tuple[str, list[str], int]:
    """(function text, definitions, dynamic bytes): the kernel's buffers placed, their plan verified
    (tileas/buffers.py) and listed for --print-ir-after-all."""
    from ..tileas.buffers import verify

    buffers = -(-k.buffer_bytes // REGION_ALIGN) * REGION_ALIGN
    static_other = k.static_smem_bytes   # allocas: always static
    total = buffers + static_other
    limit = k.caps.smem_per_block
    if total > limit:
        by_kind: dict[str, int] = {}
        for b in k.buffers.buffers:
            by_kind[b.kind] = by_kind.get(b.kind, 0) + b.nbytes
        asked = ", ".join(f"{n} {kind}" for kind, n in sorted(by_kind.items(), key=lambda kv: -kv[1]))
        raise CompileError(f"error: kernel '{name}' needs {total} bytes of shared memory "
                           f"({buffers} for buffers alive at once, of {asked or 'none'} asked for; "
                           f"{static_other} allocas); {k.gpu} allows at most {limit} per block")
    verify(k.buffers.buffers, limit - static_other, f"kernel '{name}'")
    if k.buffers.buffers:
        k.schedule_notes += [f"//   shared buffers: {buffers} bytes (liveness-based reuse; "
                             f"{sum(b.nbytes for b in k.buffers.buffers)} bytes asked for)", *k.buffers.describe()]
    tag = re.sub(r"[^A-Za-z0-9_]", "_", name)
    defs: list[str] = []
    if total <= STATIC_LIMIT:
        if buffers:
            sym = f"@__tileir_buffers_{tag}"
            defs.append(f"{sym} = internal addrspace(3) global [{buffers} x i8] undef, align 1024")
            text = text.replace("@__tileir_buffers", sym)
        return text, defs, 0
    defs.append("@__tileir_dsmem = external addrspace(3) global [0 x i8], align 1024")
    text = text.replace("@__tileir_buffers", "@__tileir_dsmem")
    return text, defs, buffers
