"""K-major copies of tensor-core operands in swizzled shared memory (sm_90 wgmma, sm_100 tcgen05).

Both generations read A (M, K) and B (K, N) by descriptor; an operand whose stored orientation
or element values the instruction cannot take as they are gets a K-major copy: A as (M, K), B
as (N, K), in a swizzled buffer the descriptor then reads. That covers an N-major B of a type
without a transposed form on wgmma (tf32, fp8, int8) and any f32 tile read as tf32 with a
rounding the tensor cores do not apply themselves, which the copy applies as its ftof says.

* `copy_kmajor`: from a shared operand (a cp.async buffer), after the CTA barrier that published
  it. Each thread moves v x v blocks (`_BLOCK`: rows of 32 bits of 8- or 16-bit elements, of 4
  32-bit elements) in a runtime loop: v loads of stored rows, transposed in registers where the
  source runs along M/N (byte permutes, register moves), v stores of K-contiguous rows. Which thread
  moves which block (`warp_shape`: a grid of blocks per warp, walked diagonally, its lanes' rows
  taken in turn, where that helps) is chosen by counting the bank conflicts of the loads and stores
  on the two buffers' layouts.
* `store_kmajor`: from a register tile, element by element (rare: loads that could not be copied
  asynchronously, or computed tiles).

Both end with the proxy fence: the tensor cores read the buffer through the async proxy.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.record import replace
from .async_copy import fence_async_proxy
from .kernel import KernelLowering, storage_type, to_storage
from ..ir.types import storage_bytes
from .ops_reduce import counted_loop
from .smem import element_offset, flipped_row, pointer
from ..layout.shared_matrix import SharedMatrix, k_and_x, kmajor_bytes, kmajor_shape
from .values import SharedTileVal, TileRegs
from ..tileas.kmajor_lanes import warp_shape

_ELEM_TYPE = {1: "i8", 2: "i16", 4: "i32"}
# v of the v x v blocks per element size: 32-bit rows for 8- and 16-bit elements, 128-bit rows of
# 32-bit ones (one 16-byte load or store per row; stored rows are 16-byte aligned, padded or swizzled)
_BLOCK = {1: 4, 2: 2, 4: 4}


def place_kmajor(k: KernelLowering, m: SharedMatrix, role: str, slots: int = 1, subject: object = None) \
        -> SharedMatrix:
    """`m` placed, 1024-byte aligned (the swizzle pattern's period), in a buffer of `slots` copies of
    it (`slot_bytes` apart); `role`, `subject`: as `alloc_buffer`."""
    return replace(m, offset=k.alloc_buffer(kmajor_bytes(m, slots), role, subject))


def kmajor_matrix(k: KernelLowering, rows: int, cols: int, elem_bytes: int, role: str = "kmajor-copy",
                  subject: object = None) -> SharedMatrix:
    """A new swizzled (rows, cols) buffer; `role`: "kmajor" where a loop asks for it before its
    pipeline's stages, "kmajor-copy" where the op that copies asks; `subject`: as `alloc_buffer`."""
    return place_kmajor(k, kmajor_shape(rows, cols, elem_bytes, k.pad_buffers), role, subject=subject)


def kmajor_buffer(k: KernelLowering, tile_shape: "tuple[int, ...]", role: str, elem_bytes: int,
                  asked: str = "kmajor-copy", subject: object = None) -> SharedMatrix:
    """The K-major buffer of an operand tile of this shape and role ("a" or "b"); `asked`: the
    buffer's role, as `kmajor_matrix`; `subject`: as `alloc_buffer` (the operand's role where None)."""
    kdim, x_size = k_and_x(tile_shape[-2:], role)
    return kmajor_matrix(k, x_size, kdim, elem_bytes, asked, role if subject is None else subject)


def copy_kmajor(k: KernelLowering, value: SharedTileVal, role: str, dst: Optional[SharedMatrix],
                k_first: int = 0, turns: bool = True) -> SharedMatrix:
    """`value` (A or B, a shared operand) copied K-major into `dst` (a new buffer when None); a `dst`
    narrower than K holds the K range from `k_first` on (ops_wgmma: a copy made in K chunks); `turns`:
    whether its lanes may take their rows in turn (kmajor_lanes.warp_shape)."""
    src = value.matrix
    eb = src.elem_bytes
    kdim, x_size = k_and_x(value.type.shape[-2:], role)
    kdim = dst.cols if dst is not None else kdim
    stored_k_rows = (role == "b") != value.transposed      # stored (K, X): needs the transpose
    dst = dst or kmajor_matrix(k, x_size, kdim, eb, subject=role)
    v = _BLOCK[eb]
    vty = f"<{v} x {_ELEM_TYPE[eb]}>"
    align = v * eb
    blocks_x = x_size // v
    blocks = blocks_x * (kdim // v)
    stop = -(-blocks // k.threads) * k.threads

    shape = warp_shape(src, dst, stored_k_rows, v, blocks_x, kdim // v, k_first, turns)
    xw, along_x = shape.xw, shape.along_x

    def body(i: str, _: list[str]) -> list[str]:
        # a runtime loop: unrolled, LLVM would hoist every address out of the K loop (spills)
        item = k.b.op(f"add i32 {k.tid}, {i}", "cw")
        lane = k.b.op(f"and i32 {item}, 31", "cl")
        # the copy's steps are whole warps apart: a turn made of the thread's lane, with its rows'
        # offsets, stays out of the copy's loop
        tid_lane = k.b.op(f"and i32 {k.tid}, 31", "cl")
        if shape == (blocks_x, True, 0, 0, 0):      # a warp's lanes along X, the warps along X then K
            x0 = k.b.op(f"mul i32 {k.b.op(f'urem i32 {item}, {blocks_x}', 'cx')}, {v}", "cx")
            k0 = k.b.op(f"mul i32 {k.b.op(f'udiv i32 {item}, {blocks_x}', 'ck')}, {v}", "ck")
        else:       # a warp moves xw x (32 / xw) blocks (kmajor_lanes.WarpShape); the warps along X then K
            warp = k.b.op(f"lshr i32 {item}, 5", "cl")
            tiles_x, kw = blocks_x // xw, 32 // xw
            fast = xw if along_x else kw     # blocks along the lanes' faster dimension
            low = k.b.op(f"and i32 {lane}, {fast - 1}", "cl")
            high = k.b.op(f"lshr i32 {lane}, {fast.bit_length() - 1}", "cl")
            if shape.skew:
                skewed = k.b.op(f"add i32 {high}, {k.b.op(f'mul i32 {low}, {shape.skew}', 'cl')}", "cl")
                high = k.b.op(f"and i32 {skewed}, {32 // fast - 1}", "cl")
            x_in, k_in = (low, high) if along_x else (high, low)
            tile_x = k.b.op(f"mul i32 {k.b.op(f'urem i32 {warp}, {tiles_x}', 'cx')}, {xw}", "cx")
            tile_k = k.b.op(f"mul i32 {k.b.op(f'udiv i32 {warp}, {tiles_x}', 'ck')}, {kw}", "ck")
            x0 = k.b.op(f"mul i32 {k.b.op(f'add i32 {tile_x}, {x_in}', 'cx')}, {v}", "cx")
            k0 = k.b.op(f"mul i32 {k.b.op(f'add i32 {tile_k}, {k_in}', 'ck')}, {v}", "ck")

        def at(base: str, j: "int | str") -> str:
            return base if j == 0 else k.b.op(f"add i32 {base}, {j}", "cj")

        def turn(d: int) -> "str | None":
            """The lane's row turn (kmajor_lanes.WarpShape.rows), None without one."""
            return k.b.op(f"and i32 {k.b.op(f'lshr i32 {tid_lane}, {d.bit_length() - 1}', 'ct')}, {v - 1}", "ct") \
                if d else None

        def rows_of(m: SharedMatrix, r: str, c: str, turn: "str | None") -> "Callable[[int], str]":
            """Step j's row of a block from row `r` (a multiple of v) of `m`: row j, or the lane's turned
            row j ^ turn, its offset xor-ed from the turned first row's (layout.shared_matrix.row_flip)."""
            if turn is None:
                return lambda j: element_offset(k, m, "0", at(r, j), c)
            first = flipped_row(k, m, element_offset(k, m, "0", r, c), turn)
            return lambda j: flipped_row(k, m, first, j)

        def move() -> None:
            ks = at(k0, k_first)
            load_turn, store_turn = turn(shape.load_turn), turn(shape.store_turn)
            source = rows_of(src, ks, x0, load_turn) if stored_k_rows else \
                (lambda j: element_offset(k, src, "0", at(x0, j), ks))
            rows = [k.b.op(f"load {vty}, ptr addrspace(3) {pointer(k, source(j))}, align {align}", "cv")
                    for j in range(v)]
            if value.tf32:   # f32 read as tf32: rounded as its ftof says
                rows = [_tf32_words(k, r, v, value.tf32) for r in rows]
            if stored_k_rows:
                rows = _transpose(k, rows, _ELEM_TYPE[eb])
            if load_turn:    # element i of a column came from row i ^ turn: swap it back
                rows = [_flip_elements(k, row, vty, load_turn, eb) for row in rows]
            if store_turn:   # a turn of 0 or 1: step j stores row j or j ^ 1
                odd = k.b.op(f"icmp ne i32 {store_turn}, 0", "ct")
                rows = [k.b.op(f"select i1 {odd}, {vty} {rows[j ^ 1]}, {vty} {rows[j]}", "ct") for j in range(v)]
            target = rows_of(dst, x0, k0, store_turn)
            for j, row in enumerate(rows):
                k.b.emit(f"store {vty} {row}, ptr addrspace(3) {pointer(k, target(j))}, align {align}")

        if stop != blocks:
            k.guarded(k.b.op(f"icmp ult i32 {item}, {blocks}", "cw"), lambda: move() or None)
        else:
            move()
        return []

    counted_loop(k, "0", str(stop), k.threads, [], body)
    fence_async_proxy(k)
    return dst


def store_kmajor(k: KernelLowering, tile: TileRegs, role: str, dst: Optional[SharedMatrix]) -> SharedMatrix:
    """A register tile (A or B) stored K-major into `dst` (a new buffer when None), as it is (a
    tile read as tf32 was rounded in registers by its ftof)."""
    elem = tile.type.element
    dst = dst or kmajor_buffer(k, tile.type.shape, role, storage_bytes(elem))  # type: ignore[arg-type]
    k.barrier()   # earlier readers of the buffer (the previous iteration's mma) are done
    lty = storage_type(elem)
    for slot, v in enumerate(tile.slots):
        *_, r, c = k.multi_index(tile.type.shape, slot, tile.layout)
        x, kk = (r, c) if role == "a" else (c, r)
        p = pointer(k, element_offset(k, dst, "0", x, kk))
        k.store_first_copy(tile.type.num_elements, slot, tile.layout, f"store {lty} {to_storage(k, v, elem)}, "
                           f"ptr addrspace(3) {p}")
    fence_async_proxy(k)
    return dst


def _tf32_words(k: KernelLowering, row: str, v: int, mode: str) -> str:
    """A <v x i32> row of f32 bits, each rounded to tf32 as `mode` says."""
    from .ops_arith import _round_to_tf32

    out = "undef"
    for i in range(v):
        word = k.b.op(f"extractelement <{v} x i32> {row}, i32 {i}", "tf")
        rounded = _round_to_tf32(k, k.b.op(f"bitcast i32 {word} to float", "tf"), mode)
        out = k.b.op(f"insertelement <{v} x i32> {out}, i32 {k.b.op(f'bitcast float {rounded} to i32', 'tf')}, "
                     f"i32 {i}", "tf")
    return out


def _flip_elements(k: KernelLowering, row: str, vty: str, turn: str, eb: int) -> str:
    """`row` (one 32-bit word of v elements of `eb` bytes) with elements i and i ^ `turn` swapped:
    a byte permute whose selector is the lane's (prmt)."""
    word = k.b.op(f"bitcast {vty} {row} to i32", "ct")
    selector = k.b.op(f"xor i32 {k.b.op(f'mul i32 {turn}, {eb * 0x1111}', 'ct')}, {0x3210}", "ct")
    flipped = k.b.op(f'call i32 asm "prmt.b32 $0, $1, $1, $2;", "=r,r,r"(i32 {word}, i32 {selector})', "ct")
    return k.b.op(f"bitcast i32 {flipped} to {vty}", "ct")


def _transpose(k: KernelLowering, rows: list[str], elem: str) -> list[str]:
    """The columns of a v x v block (v = 2 or 4) given as its v row vectors: shuffles, which the
    NVPTX backend turns into byte permutes (prmt)."""
    v = len(rows)

    def shuffle(ty: str, a: str, b: str, mask: list[int]) -> str:
        return k.b.op(f"shufflevector {ty} {a}, {ty} {b}, <{len(mask)} x i32> "
                      f"<{', '.join(f'i32 {n}' for n in mask)}>", "ct")

    vty = f"<{v} x {elem}>"
    if v == 2:
        return [shuffle(vty, rows[0], rows[1], [c, v + c]) for c in range(v)]
    lo, hi = (shuffle(vty, rows[j], rows[j + 1], list(range(2 * v))) for j in (0, 2))
    return [shuffle(f"<{2 * v} x {elem}>", lo, hi, [c, v + c, 2 * v + c, 3 * v + c]) for c in range(v)]
