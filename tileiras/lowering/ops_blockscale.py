"""mmaf_scaled (block-scaled fp8, MXFP8: e4m3/e5m2 with one ue8m0 scale per 32 K) on tensor cores.

The operands go through the mma.sync machinery of ops_mma (accumulator in `MmaLayout` registers,
A and B staged in shared memory, m16n8k32 fragments with the 8-bit layout); each instruction's K
(32) is exactly one scale block, so every instruction applies one A scale per row and one B
scale per column. The form per target (`Caps.blockscale`, tileiras/target):

* sm_120 / sm_121: `mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32` with
  .ue8m0 scales, what NVIDIA's compiler issues there (SASS QMMA with scale factors). Scale
  operands (PTX ISA "Block Scaling for mma.sync", scale_vec::1X, selectors byte 0 / thread 0):
  the 32-bit scale-a-data of lane 4g holds SF_A of row g in its low byte, lane 4g + 1 that of
  row g + 8; the scale-b-data of lane 4g holds SF_B of column g. Every lane loads its byte (lanes
  4g + 2 and + 3 repeat 4g and 4g + 1; the instruction does not read them).
* sm_100 / sm_103: tcgen05.mma ...kind::mxf8f6f4.block_scale with the scale factors in tensor
  memory (the second half of this module; ops_tcgen05 drives it) where the accumulator leaves
  columns for them. NVIDIA's compiler runs its default 256 x 256 tile with cta_group::2 (a CTA
  pair, 128 x 256 each); with one CTA that accumulator takes all 512 columns, so ours, like every
  target without the block-scaled mma.sync (sm_100, sm_103, sm_110), scales in registers: per
  32-wide K block an fp8 mma.sync into zero, then acc += partial * (SF_A[row] * SF_B[col]) by FMA
  (ue8m0 scales are powers of two: the product is exact unless it leaves f32's range).

fp4 (f4E2M1FN) operands (`SCALED`): on sm_120 / sm_121 the block_scale mma.sync of m16n8k64,
`kind::mxf4` with ue8m0 scales per 32 (MXFP4, scale_vec::2X) and `kind::mxf4nvf4` with scales per 16
(NVFP4: ue4m3, or ue8m0; scale_vec::4X), as NVIDIA's compiler issues there. A and B are packed two
to a byte, K-major (fp4_pack.py), and their fragments read by ldmatrix as the 8-bit ones (the e2m1
fragments are the 8-bit ones with each byte a pair of nibbles; ops_mma._PackedFragments); where
they are copied in K slices they stay one to a byte and are packed eight to a register as the
fragments are gathered (ops_mma._nibbles). Each
scale register holds the instruction's 2 or 4 K blocks, one byte each from byte 0, in the lanes
scale_vec::1X uses. On sm_100 / sm_103 fp4 runs on tcgen05.mma kind::mxf4nvf4 (block32: 2 scale
factors a row per MMA of K 64, block16: 4), the operands packed two to a byte by the mma
(fp4_pack.py), the scale factors in tensor memory as fp8's (below; NVFP4's 8 K blocks of a K tile
of 128 take two cells a row). Elsewhere (sm_110) the fp4 fragments are widened to e4m3 as they are
gathered (every e2m1 value is an e4m3 one: a prmt table) for the fp8 mma.sync, scaled by FMA as
fp8's; a scale block of 16 (NVFP4) is half an instruction's K, so each half gets an instruction of
its own with the other half's A registers zero.
"""

from __future__ import annotations

from ..ir.core import Operation
from ..target import caps
from ..tileaa.mma_forms import (SCALE_BLOCK, SCALED_ELEMENTS, SF_CHUNK_BYTES, SF_COLS, scale_blocks, scaled_form,
                                sf_cells, sf_chunks, tcgen05_sf_bytes)
from .kernel import KernelLowering
from .smem import descriptor, element_offset, pointer
from ..layout.shared_matrix import SharedMatrix
from .values import SharedTileVal, TileRegs
from ..tileas.mma_sync_staging import restages_scales


def describe(op: Operation, sm: int) -> str:
    """The remark's Instruction."""
    a, b = (SCALED_ELEMENTS[str(op.operand(n).type.element)] for n in ("lhs", "rhs"))  # type: ignore[union-attr]
    if caps(sm).blockscale == "native":
        f = scaled_form(op)
        assert f is not None
        return f"Tensor-core SM120 (mma.sync.kind::{f.kind}.block_scale.scale_vec::{f.vec}X.{a}.{b}.{f.stype})"
    if "e2m1" in (a, b):
        return "Tensor-core SM89 (mma.sync.e4m3.e4m3 of e2m1 widened to e4m3, block scales by FMA)"
    return f"Tensor-core SM89 (mma.sync.{a}.{b}, block scales by FMA)"


class _Scales:
    """Loads the scale factors one lane needs, from a scale tile staged in shared memory: SF_A
    (rows, K / 32) or SF_B (K / 32, columns); a transposed shared tile is the transpose of what
    is stored. Each byte is loaded once per (batch, block start, K block)."""

    def __init__(self, k: KernelLowering, tile: "TileRegs | SharedTileVal", along_rows: bool) -> None:
        from .ops_mma import stage

        self.k = k
        self.elem = tile.type.element
        self.matrix: SharedMatrix = stage(k, tile, "a-scale" if along_rows else "b-scale") \
            if restages_scales(tile) else tile.matrix  # type: ignore[union-attr]
        self.transposed = isinstance(tile, SharedTileVal) and tile.transposed
        self.along_rows = along_rows          # SF_A: (x, kb); SF_B: (kb, x)
        self.cache: dict[tuple[str, str, int], str] = {}

    def byte(self, b: str, x: str, kb: int) -> str:
        """The scale (i32, zero-extended byte) of row/column `x` (i32 expression), K block kb."""
        key = (b, x, kb)
        if key not in self.cache:
            k = self.k
            r, c = (x, str(kb)) if self.along_rows else (str(kb), x)
            if self.transposed:
                r, c = c, r
            p = pointer(k, element_offset(k, self.matrix, b, r, c))
            self.cache[key] = k.b.op(f"zext i8 {k.b.op(f'load i8, ptr addrspace(3) {p}', 'sf')} to i32", "sf")
        return self.cache[key]

    def value(self, b: str, x: str, kb: int) -> str:
        """The scale as an f32 (2^(e - 127); 0xFF is NaN)."""
        from .ops_reduce import _to_float

        key = (b, x, -1 - kb)
        if key not in self.cache:
            k = self.k
            byte = k.b.op(f"trunc i32 {self.byte(b, x, kb)} to i8", "sf")
            self.cache[key] = _to_float(k, byte, self.elem, "float")
        return self.cache[key]


def _lane_offsets(k: KernelLowering) -> dict[str, str]:
    """Per lane (g = lane / 4, t = lane % 4): "a": the A row its scale-a-data holds (g + 8 (lane % 2)),
    "g" / "g8": its accumulator rows g and g + 8 (and its scale-b-data's column g), "c0" / "c1": its
    accumulator columns 2 t and 2 t + 1."""
    lane = k.b.pre(f"and i32 {k.tid}, 31", "lane")
    g = k.b.pre(f"lshr i32 {lane}, 2", "g")
    odd = k.b.pre(f"and i32 {lane}, 1", "sfo")
    t2 = k.b.pre(f"shl i32 {k.b.pre(f'and i32 {lane}, 3', 't')}, 1", "t2")
    return {"a": k.b.pre(f"add i32 {g}, {k.b.pre(f'shl i32 {odd}, 3', 'sfo')}", "sfr"), "g": g,
            "g8": k.b.pre(f"add i32 {g}, 8", "g8"), "c0": t2, "c1": k.b.pre(f"add i32 {t2}, 1", "t21")}


def lower(k: KernelLowering, op: Operation, shape: object, lhs: "TileRegs | SharedTileVal",
          rhs: "TileRegs | SharedTileVal", acc: TileRegs, scales: list) -> TileRegs:
    """The block-scaled mma of `op` on this target's form (module docstring)."""
    from .ops_mma import lower_mma_sync

    sa, sb = _Scales(k, scales[0], True), _Scales(k, scales[1], False)
    lanes = _lane_offsets(k)
    a, b = (SCALED_ELEMENTS[str(v.type.element)] for v in (lhs, rhs))
    native = caps(k.sm).blockscale == "native"
    at: dict[tuple[str, str], str] = {}

    def add(x: str, lane_part: str) -> str:
        """Block start x plus one of this lane's offsets (each sum once per op)."""
        key = (x, lane_part)
        if key not in at:
            at[key] = lanes[lane_part] if x == "0" else k.b.op(f"add i32 {x}, {lanes[lane_part]}", "sfx")
        return at[key]

    f = scaled_form(op)
    assert f is not None

    def packed(src: _Scales, bt: str, x: str, kb: int) -> str:
        """The instruction's f.vec scale bytes of row / column x from K block kb, byte 0 up."""
        out = src.byte(bt, x, kb)
        for i in range(1, f.vec):
            part = k.b.op(f"shl i32 {src.byte(bt, x, kb + i)}, {8 * i}", "sf")
            out = k.b.op(f"or i32 {out}, {part}", "sf")
        return out

    def issue_native(bt: str, m0: str, n0: str, k0: int, args: list[tuple[str, str]], c: list[str]) -> list[str]:
        kb = k0 * f.vec // f.k
        fa = packed(sa, bt, add(m0, "a"), kb)
        fb = packed(sb, bt, add(n0, "g"), kb)
        text = (f"mma.sync.aligned.kind::{f.kind}.block_scale.scale_vec::{f.vec}X.m16n8k{f.k}.row.col.f32.{a}.{b}.f32.{f.stype} "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13}, {$14}, {0, 0}, {$15}, {0, 0};")
        cons = ",".join(["=f"] * 4 + ["r"] * 6 + ["f"] * 4 + ["r", "r"])
        operands = ", ".join([f"{t} {v}" for t, v in args] + [f"float {v}" for v in c] + [f"i32 {fa}", f"i32 {fb}"])
        ret = "{float, float, float, float}"
        res = k.b.op(f'call {ret} asm "{text}", "{cons}"({operands})', "mma")
        return [k.b.op(f"extractvalue {ret} {res}, {i}", "acc") for i in range(4)]

    block = op.operand("lhs").type.shape[-1] // op.operand("lhs_scale").type.shape[-1]  # type: ignore[union-attr]

    def issue_fma(bt: str, m0: str, n0: str, k0: int, args: list[tuple[str, str]], c: list[str]) -> list[str]:
        """acc += (A B) * SF_A * SF_B per scale block; a block of 16 (NVFP4) is half the
        instruction's K: one instruction per half, with A's registers of the other half zero
        (a0, a1 hold K 0-15, a2, a3 K 16-31; every operand is finite, so 0 x B is 0)."""
        from .ops_mma import _issue

        ret = "{float, float, float, float}"
        out = c
        for half in range(SCALE_BLOCK // block):
            kb = (k0 + half * block) // block
            regs = args if block == SCALE_BLOCK else \
                [(t, "0" if i in ((2, 3) if half == 0 else (0, 1)) else v) for i, (t, v) in enumerate(args)]
            res = _issue(k, shape, ret, regs + [("float", "0.0")] * 4)  # type: ignore[arg-type]
            part = [k.b.op(f"extractvalue {ret} {res}, {i}", "acc") for i in range(4)]
            rows = [sa.value(bt, add(m0, which), kb) for which in ("g", "g8")]
            cols = [sb.value(bt, add(n0, which), kb) for which in ("c0", "c1")]
            acc = []
            for i in range(4):   # accumulator i: row g + 8 (i / 2), column 2 t + i % 2
                s = k.b.op(f"fmul float {rows[i // 2]}, {cols[i % 2]}", "sfm")
                acc.append(k.b.call("float", "llvm.fma.f32", [("float", part[i]), ("float", s), ("float", out[i])],
                                    hint="acc"))
            out = acc
        return out

    return lower_mma_sync(k, op, shape, lhs, rhs, acc, issue_native if native else issue_fma,  # type: ignore[arg-type]
                          also_read=scales)


# -- sm_100 / sm_103: tcgen05.mma ...kind::mxf8f6f4.block_scale, the scale factors in tensor memory -------
#
# Where the accumulator leaves tensor-memory columns free (M 128 or 256, N up to 256, not both 256), the mma runs on
# tcgen05 (tileaa/mma_forms.py gives its kind and the scales' geometry, `tcgen05_scales_refused` / `tcgen05_columns`,
# which tileas/tcgen05_select.py asks). Scale-factor layout (what tcgen05.mma reads, PTX ISA "Block Scaling
# for tcgen05.mma"): the factors of row r (A) or column r (B) sit in lane r % 32, column r / 32 from the
# operand's scale address, from byte sf_id of the 32-bit cell, where sf_id is the first K block the MMA
# covers (scale_vec::1X: one byte, fp8's K 32; 2X / 4X: two or four bytes, fp4's K 64 in blocks of 32 or 16):
# one cell holds 4 K blocks, so a K tile of 4 blocks takes one column per 32 rows, of 8 two (`sf_cells`: each
# cell's columns apart). The address's bits 30-31 and the instruction descriptor's A / B scale-factor IDs
# (bits 29-30 / 4-5) name the first byte; bit 23 says ue8m0 (else ue4m3, NVFP4's). tcgen05.cp .32x128b.warpx4
# copies 32 rows of 16 bytes (lane l: rows l, l + 32, l + 64, l + 96 of a 128-row chunk, 4 K blocks each)
# from shared memory to 4 columns of all four lane quarters; the mma restages the (rows, K / 32) scale tiles
# into that order (`SF_CHUNK_BYTES` per 128 rows) each K step (in a warp-specialized loop the epilogue warps
# do, into a buffer and scale columns per stage, warp_specialize_tcgen05.py). The pipeline stages the scale
# tiles unpadded (`tileas/stage_rings.scale_loads`): B's (K / 32, N) by TMA, A's (M, K / 32), whose 4-byte rows no TMA
# box takes, by cp.async.


def tcgen05_sources(k: KernelLowering, tiles: list) -> "list[_Scales]":
    """SF_A and SF_B (`tiles`: staged, or in registers, which this stages) as the restaging reads them."""
    return [_Scales(k, tiles[0], True), _Scales(k, tiles[1], False)]


def restage_tcgen05(k: KernelLowering, op: Operation, sources: "list[_Scales]", buffer: str, m: int, n: int) -> None:
    """The threads (k.threads of them) restage the scale factors `sources` (`tcgen05_sources`, in
    shared memory every thread sees) into the tcgen05.cp source order at shared offset `buffer`
    (i32), then fence for the async proxy. Thread t moves bytes e = t + s threads of A: (row e / kblocks,
    K block e % kblocks), then of B the same way (a last round that the threads do not fill guarded)."""
    from .async_copy import fence_async_proxy

    kblocks = scale_blocks(op)[1]
    for src, rows in ((sources[0], m), (sources[1], n)):
        for first in range(0, rows * kblocks, k.threads):
            e = k.b.op(f"add i32 {k.tid}, {first}", "sfe") if first else k.tid
            if first + k.threads > rows * kblocks:
                k.guarded(k.b.op(f"icmp ult i32 {e}, {rows * kblocks}", "sfe"),
                          lambda e=e, src=src: _restage_one(k, op, sources, buffer, m, n, src, e) or None)
            else:
                _restage_one(k, op, sources, buffer, m, n, src, e)
    fence_async_proxy(k)   # tcgen05.cp reads the restaged bytes through the async proxy


def _restage_one(k: KernelLowering, op: Operation, sources: "list[_Scales]", buffer: str, m: int, n: int,
                 src: "_Scales", e: str) -> None:
    """This thread's byte `e` of `src` (A's or B's scales) into its place in the tcgen05.cp source."""
    kblocks = scale_blocks(op)[1]
    cells = sf_cells(op)
    x = k.b.op(f"udiv i32 {e}, {kblocks}", "sfr")
    kb = k.b.op(f"urem i32 {e}, {kblocks}", "sfk")
    r, c = (x, kb) if src.along_rows else (kb, x)
    if src.transposed:
        r, c = c, r
    val = k.b.op(f"load i8, ptr addrspace(3) {pointer(k, element_offset(k, src.matrix, '0', r, c))}", "sfv")
    # byte 512 (cell chunks + chunk) + 16 (x % 32) + 4 ((x / 32) % 4) + K block % 4 of the
    # operand's chunks (cell = K block / 4: one 32-bit cell holds 4 K blocks of a row)
    chunks = sf_chunks(m if src is sources[0] else n)
    quarter = k.b.op(f"and i32 {k.b.op(f'lshr i32 {x}, 5', 'sfd')}, 3", "sfd")
    chunk = k.b.op(f"lshr i32 {x}, 7", "sfd")
    if cells > 1:
        cell = k.b.op(f"lshr i32 {kb}, 2", "sfd")
        chunk = k.b.op(f"add i32 {chunk}, {k.b.op(f'mul i32 {cell}, {chunks}', 'sfd')}", "sfd")
        kb = k.b.op(f"and i32 {kb}, 3", "sfd")
    terms = [k.b.op(f"mul i32 {chunk}, {SF_CHUNK_BYTES}", "sfd"),
             k.b.op(f"shl i32 {k.b.op(f'and i32 {x}, 31', 'sfd')}, 4", "sfd"),
             k.b.op(f"shl i32 {quarter}, 2", "sfd"), kb]
    dst = buffer if src is sources[0] else \
        k.b.op(f"add i32 {buffer}, {sf_chunks(m) * SF_CHUNK_BYTES * cells}", "sfd")
    for term in terms:
        dst = k.b.op(f"add i32 {dst}, {term}", "sfd")
    k.b.emit(f"store i8 {val}, ptr addrspace(3) {pointer(k, dst)}")


class Tcgen05Scales:
    """The scale factors of one tcgen05 block-scaled mma op: restaged in shared memory (by every
    thread here, unless `buffer` says where another role restaged them: the warp-specialized
    loop's epilogue warps, warp_specialize_tcgen05.py), copied to tensor memory at `sf_address`
    by the issuing thread (`copy`) ahead of its MMAs (`mma`), which tcgen05 runs in issue order."""

    def __init__(self, k: KernelLowering, op: Operation, sf_address: str, m: int, n: int,
                 buffer: "str | None" = None) -> None:
        from .async_copy import is_ready, wait_for

        self.k, self.m, self.n, self.address = k, m, n, sf_address
        from .cta_pair import runs

        self.group = 2 if runs(k, op) else 1
        self.block, _ = scale_blocks(op)
        self.cells = sf_cells(op)
        self.fp4 = scaled_form(op).k == 64  # type: ignore[union-attr]
        self.ue8m0 = str(op.operand("lhs_scale").type.element) == "f8E8M0FNU"  # type: ignore[union-attr]
        if buffer is not None:
            self.buffer = buffer
            return
        tiles = [k.get(op.operand(name)) for name in ("lhs_scale", "rhs_scale")]  # type: ignore[arg-type]
        sources = tcgen05_sources(k, tiles)
        if op not in k.tmem_buffers:     # A's chunks, then B's
            k.tmem_buffers[op] = k.alloc_buffer(tcgen05_sf_bytes(m, n, self.cells), "scales")
        self.buffer = str(k.tmem_buffers[op])
        if not is_ready(tiles):   # the sources' copies (or staging stores) are published
            wait_for(k, tiles)
            k.barrier()
        restage_tcgen05(k, op, sources, self.buffer, m, n)

    def copy(self) -> None:
        """tcgen05.cp of every 128-row chunk and cell (A's, then B's; per operand cell by cell, each
        cell's chunks side by side) into its 4 columns (issuing thread only)."""
        k = self.k
        for chunk in range((sf_chunks(self.m) + sf_chunks(self.n)) * self.cells):
            # no swizzle, 8-row groups 128 bytes apart (the stride byte offset), version 0b001
            desc = descriptor(k, [self.buffer, chunk * SF_CHUNK_BYTES], (1 << 46) | ((128 >> 4) << 32))
            taddr = k.b.op(f"add i32 {self.address}, {SF_COLS * chunk}", "sft")
            # a CTA pair's: each CTA's restaged bytes into its own tensor memory (cta_pair.py)
            k.b.emit(f'call void asm sideeffect "tcgen05.cp.cta_group::{self.group}.32x128b.warpx4 [$0], $1;", '
                     f'"r,l,~{{memory}}"(i32 {taddr}, i64 {desc})')

    def mma(self, d: str, a_desc: str, b_desc: str, idesc: int, k0: int, half: int, enable: str) -> None:
        """One block-scaled MMA: K from k0 (its first K block, k0 / block, picks the cell and the byte
        in it: the scale-factor ID), rows 128 half.. of A."""
        k = self.k
        cell, kb = divmod(k0 // self.block, 4)
        chunks_a, chunks_b = sf_chunks(self.m), sf_chunks(self.n)
        # the descriptor's D-format bits are B's scale-factor ID here (D is always f32)
        desc = (idesc & ~0x30) | (kb << 4) | (self.ue8m0 << 23) | (kb << 29)
        a_col = SF_COLS * (cell * chunks_a + half)
        b_col = SF_COLS * (self.cells * chunks_a + cell * chunks_b)
        sfa = k.b.op(f"add i32 {self.address}, {_i32(a_col | (kb << 30))}", "sfa")
        sfb = k.b.op(f"add i32 {self.address}, {_i32(b_col | (kb << 30))}", "sfb")
        # fp4: kind::mxf4nvf4 with 2 (block32) or 4 (block16) scale factors a row per MMA
        kind = f"mxf4nvf4.block_scale.block{self.block}" if self.fp4 else "mxf8f6f4.block_scale.scale_vec::1X"
        k.b.emit(f'call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $6, 0; '
                 f'tcgen05.mma.cta_group::{self.group}.kind::{kind} [$0], $1, $2, $3, [$4], [$5], p; }}", '
                 f'"r,l,l,r,r,r,r,~{{memory}}"(i32 {d}, i64 {a_desc}, i64 {b_desc}, i32 {desc}, i32 {sfa}, i32 {sfb}, '
                 f'i32 {enable})')


def _i32(v: int) -> int:
    """An unsigned 32-bit constant as LLVM's i32 literal."""
    return v - (1 << 32) if v >= 1 << 31 else v
