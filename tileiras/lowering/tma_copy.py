"""TMA tile loads of a pipelined loop (sm_90, sm_100 / sm_103, sm_120 / sm_121) and epilogue stores: `cp.async.bulk.tensor`
through hidden tensor maps.

A pipelined load goes through TMA when its descriptor can be made at launch from the kernel's
own arguments (codegen/tma_params.py): the tensor view's base, extents and strides are kernel
parameters or constants (tileaa/facts.view_sources), the base is 16-byte aligned and every
outer stride a multiple of 16 bytes by the divisibility facts, the dimension the tile's
columns run along has unit stride, and the stage is the swizzled `SharedMatrix` wgmma and
tcgen05.mma read (K-major A, N- or K-major B):
that layout is what TMA writes with the matching swizzle, one box per column atom (`span`
bytes of every row, rows <= 256); or, for a block-scaled mma's scale tiles (`dense`), an
unswizzled stage without padding, one box of the whole tile whose rows are whole 16-byte units.
Otherwise the pipeline keeps its cp.async copies and a remark says why.

Each (tensor view, box) becomes one hidden kernel parameter after the user's
(`ptr byval([128 x i8]) align 64` with `nvvm.grid_constant`, so its address is the parameter's
own, never a local copy; codegen/tma_ptx.py marks it `.hidden`). One elected thread per stage
announces the stage's bytes (`mbarrier.arrive.expect_tx`, the full barrier's only arrival) and
issues the boxes; the hardware completes the transaction on the same barrier.

A tile loaded once before a loop that reads it every iteration (attention's queries: a
loop-invariant operand) is a *one-shot* load (`load_once`): its own mbarrier, initialized by the
thread that then announces the bytes and issues the boxes; readers wait for phase 0
(`wait_once`: a pipelined loop's prologue, after its own copies are under way, else the first
reader), and the barrier is invalidated (`invalidate`) after a CTA barrier before its bytes can
serve another buffer (the loop's end, or the epilogue that reuses the buffers).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation
from ..ir.record import record, replace
from ..ir.types import ScalarType, TileType
from ..codegen.tma_params import Field, TmaParam
from . import mbarrier
from .kernel import KernelLowering
from ..ir.types import storage_bytes
from .mbarrier import BarrierArray
from .smem import pointer
from ..layout.shared_matrix import SharedMatrix
from .values import PartitionViewVal, SharedTileVal

if TYPE_CHECKING:
    from .cta_pair import CtaPair

MAX_BOX = 256
MAX_STORE_ROWS = 64     # an sm_90 store's box: one consumer warpgroup's rows of an mma tile (NVIDIA's
                        # boxes; sm_100's hold 128, tmem_epilogue.TMEM_LANES)
MAX_RANK = 5
_SWIZZLE = {128: "128B", 64: "64B", 32: "32B"}
# TileIR element -> tensor-map element type (codegen/tensormap.DTYPES); others by their bytes
_DTYPES = {"f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}   # (integers: NVIDIA's u8 .. u64)
_BY_BYTES = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}


@record
class TmaCopy:
    """How one tile is copied: hidden parameter `slot`, boxes along the tile's columns (one per
    swizzle atom) and, for a store, along its rows (bands of `MAX_STORE_ROWS`)."""

    spec: TmaParam              # the descriptor, as the launch fills it
    order: tuple[int, ...]      # tile dimensions in the map's order (innermost first)
    per_atom: int               # columns one box moves (a swizzle atom's row)
    atoms: int                  # boxes per tile
    atom_bytes: int             # shared bytes from one box to the next
    box_bytes: int
    box: tuple[int, ...]
    bands: int = 1              # boxes per tile along its rows
    band_bytes: int = 0         # shared bytes from one band to the next within an atom
    slot: int = -1              # index among the kernel's tensor maps (k.tma_params), once chosen
    slices: int = 1             # multicast (`sliced`): the CTAs sharing the tile each issue one slice of rows
    slice_bytes: int = 0        # shared bytes from one slice to the next within an atom
    pair_part: tuple[int, int] = (0, 0)   # a CTA pair's B (cta_pair.py): (coordinate, elements) of the
                                          # half each CTA copies along N, the peer's from this many on

    @property
    def nbytes(self) -> int:
        """Bytes landing in the CTA's stage: every slice's, whichever CTA issued it."""
        return self.atoms * self.bands * self.slices * self.box_bytes


def _dtype(op: Operation, elem: ScalarType) -> str:
    """The map's element type: NVIDIA's for the tile (f32 loads read as tf32 rounded to nearest
    even: a tf32 map, which the copy reads as f32 bits and rounds as the ftof says anyway)."""
    if elem.name == "f32" and op.name.startswith("cuda_tile.load") and _read_as_tf32(op.results[0]):
        return "tf32"
    return _DTYPES.get(elem.name) or _BY_BYTES[storage_bytes(elem)]


def _read_as_tf32(value: object) -> bool:
    uses = getattr(value, "uses", [])
    if len(uses) != 1:
        return False
    use = uses[0]
    if use.name in ("cuda_tile.reshape", "cuda_tile.permute"):
        return _read_as_tf32(use.results[0])
    return use.name == "cuda_tile.ftof" and str(use.results[0].type.element) == "tf32" \
        and str(use.attributes.get("rounding_mode", "nearest_even")) == "nearest_even"


def plan(k: KernelLowering, op: Operation, view: object, matrix: SharedMatrix,
         rows: int = MAX_BOX, dense: bool = False, tile: Optional[TileType] = None) -> tuple[Optional[TmaCopy], str]:
    """(TmaCopy, "") when the tile that `op` loads from (or stores to) its view can be copied by
    TMA into (out of) `matrix`, a box holding at most `rows` rows; else (None, why not). `dense`:
    an unswizzled stage without padding is copied too, as one unswizzled box (`_dense`). `tile`:
    the part of the tile copied, if not the whole: a CTA pair's half of B along one dimension."""
    from ..host_platform import tma_callback_unsupported
    from ..tileaa.facts import view_sources

    unsupported = tma_callback_unsupported()
    if unsupported:
        return None, unsupported
    whole = op.results[0].type if op.name.startswith("cuda_tile.load") else op.operand("tile").type
    assert isinstance(whole, TileType)
    tile = tile or whole
    if not isinstance(view, PartitionViewVal) or view.traversal_strides is not None or view.sparse_dim is not None:
        return None, "the view is strided or gathers rows"
    if view.padding not in (None, "zero"):
        return None, f"the view pads with {view.padding} (TMA fills zeros)"
    if not matrix.swizzled and not (dense and matrix.pitch == matrix.cols * matrix.elem_bytes):
        return None, "the stage is padded against bank conflicts, not the swizzled layout TMA writes"
    rank = len(tile.shape)
    if rank > MAX_RANK or sorted(view.dim_map) != list(range(rank)):
        return None, f"a rank-{rank} tile that is not a permutation of the tensor's dimensions"
    partition = op.operand("view").owner
    sources, why = view_sources(partition.operands[0])
    if sources is None:
        return None, why
    tensor = view.tensor
    eb = matrix.elem_bytes
    inner = view.dim_map[-1]
    if sources.strides[inner].param >= 0 or sources.strides[inner].const != 1:
        return None, f"the tile's columns run along tensor dimension {inner}, whose stride is not 1"
    if tensor.base_align < 16:
        return None, f"the base pointer is known {tensor.base_align}-byte aligned, not 16"
    for d, div in enumerate(tensor.stride_div):
        if d != inner and (div * eb) % 16:
            return None, f"stride {d} is known a multiple of {div * eb} bytes, not of 16"
    if not matrix.swizzled:
        return _dense(op, tile, view, sources, matrix)
    span = matrix.span
    if span not in _SWIZZLE or (matrix.cols * eb) % span or (matrix.batch * matrix.rows) % 8:
        return None, f"the swizzled stage ({matrix.rows} rows of {matrix.cols * eb} bytes) is not whole 8-row atoms"
    order = tuple(reversed(range(rank)))
    per_atom = span // eb
    box = (per_atom, *(tile.shape[i] for i in order[1:]))
    bands = box[1] // rows if rank >= 2 and matrix.batch == 1 and box[1] > rows and box[1] % rows == 0 else 1
    if bands > 1:
        box = (per_atom, rows, *box[2:])
    if max(box) > MAX_BOX:
        return None, f"the box {'x'.join(map(str, box))} has a dimension over {MAX_BOX}"
    dims = [view.dim_map[i] for i in order]
    field = lambda s: Field(s.param, s.const)   # noqa: E731
    spec = TmaParam(sources.base, _dtype(op, tile.element), tuple(field(sources.shape[d]) for d in dims),
                    tuple(field(sources.strides[d]) for d in dims), box, _SWIZZLE[span])
    box_bytes = eb
    for b in box:
        box_bytes *= b
    halved = [d for d in range(rank) if tile.shape[d] != whole.shape[d]]
    part = (order.index(halved[0]), tile.shape[halved[0]]) if halved else (0, 0)
    return TmaCopy(spec, order, per_atom, matrix.cols // per_atom, matrix.atom_bytes, box_bytes, box, bands,
                   rows * span, pair_part=part), ""


def _dense(op: Operation, tile: TileType, view: PartitionViewVal, sources: object,
           matrix: SharedMatrix) -> tuple[Optional[TmaCopy], str]:
    """The copy of a tile into an unswizzled, unpadded stage (its rows back to back, as TMA writes
    without swizzle): one box of the whole tile where its dimensions fit one (the block-scaled mma's
    scale tiles, which its restaging reads byte by byte; a row kernel's short rows); else, for a
    tile of one or two dimensions, one box per row and `MAX_BOX`-column block (row_tma.py), each
    landing where the row-major tile has it. TMA's rules: a box's rows are whole 16-byte units;
    every box starts 128-byte aligned in shared memory."""
    eb = matrix.elem_bytes
    rank = len(tile.shape)
    order = tuple(reversed(range(rank)))
    box = tuple(tile.shape[i] for i in order)
    atoms = bands = 1
    if box[0] > MAX_BOX and rank <= 2:
        per_atom = next((w for w in range(MAX_BOX, 0, -1) if box[0] % w == 0 and (w * eb) % 128 == 0), 0)
        if not per_atom:
            return None, f"the tile's {box[0]} columns do not cut into boxes of 128-byte multiples"
        atoms, bands = box[0] // per_atom, (box[1] if rank == 2 else 1)
        box = (per_atom, *([1] if rank == 2 else []))
    if (box[0] * eb) % 16:
        return None, f"the tile's rows are {box[0] * eb} bytes: a TMA box's rows are whole 16-byte units"
    if max(box) > MAX_BOX:
        return None, f"the box {'x'.join(map(str, box))} has a dimension over {MAX_BOX}"
    dims = [view.dim_map[i] for i in order]
    field = lambda s: Field(s.param, s.const)   # noqa: E731
    spec = TmaParam(sources.base, _dtype(op, tile.element), tuple(field(sources.shape[d]) for d in dims),  # type: ignore
                    tuple(field(sources.strides[d]) for d in dims), box, "none")  # type: ignore[attr-defined]
    box_bytes = eb * math.prod(box)
    if atoms * bands > 1 and box_bytes % 128:
        return None, f"boxes of {box_bytes} bytes do not keep the next box 128-byte aligned"
    return TmaCopy(spec, order, box[0], atoms, box_bytes, box_bytes, box, bands,
                   tile.shape[-1] * eb if bands > 1 else 0), ""


def sliced(t: TmaCopy, parts: int) -> tuple[Optional[TmaCopy], str]:
    """`t` cut along the rows of its boxes into `parts` slices, each multicast by one CTA of the
    cluster into all (lowering/multicast.py); (None, why not). A slice holds whole 8-row swizzle
    atoms, so that it lands at an offset where the swizzle pattern starts afresh."""
    if len(t.box) != 2 or t.bands != 1 or t.spec.swizzle == "none":
        return None, f"the {'x'.join(map(str, t.box))} box is not one swizzled 2-D box per atom"
    rows = t.box[1] // parts
    if t.box[1] % parts or rows % 8:
        return None, f"the box's {t.box[1]} rows do not cut into {parts} slices of whole 8-row atoms"
    box = (t.box[0], rows)
    row_bytes = t.box_bytes // t.box[1]
    return replace(t, spec=replace(t.spec, box=box), box=box, box_bytes=rows * row_bytes, slices=parts,
                   slice_bytes=rows * row_bytes), ""


def hidden_param(k: KernelLowering, spec: TmaParam) -> int:
    """The slot of the kernel's tensor map for `spec` (one per distinct view and box)."""
    if spec not in k.tma_params:
        k.tma_params.append(spec)
    return k.tma_params.index(spec)


def param_name(slot: int) -> str:
    return f"%tmap{slot}"


def signature(k: KernelLowering) -> list[str]:
    """The hidden parameters, after the user's, as the kernel's LLVM signature lists them."""
    return [f'ptr byval([128 x i8]) align 64 "nvvm.grid_constant" {param_name(i)}' for i in range(len(k.tma_params))]


def prefetch(k: KernelLowering, loads: dict) -> None:
    """Fetch the descriptors the copies will use into the TMA unit's cache (one thread)."""
    for slot in sorted({t.slot for t in loads.values()}):
        k.b.emit(f'call void asm sideeffect "prefetch.tensormap [$0];", "l,~{{memory}}"(ptr {param_name(slot)})')


def issue(k: KernelLowering, loads: dict, matrices: dict, iv_arg: object, iv: str, stage: dict, full: str,
          casts: Optional[dict] = None, pair: "Optional[CtaPair]" = None) -> None:
    """One thread's copies of an iteration (induction variable `iv`) into its stage (`stage`: load ->
    i32 bytes past `matrices[load]`, "" for none): the stage's bytes announced on its `full`
    barrier, then every box of every load (of a sliced load, `casts[load]` = (i32 slice, i16 CTA
    mask): this CTA's slice, multicast to the CTAs of the mask). `pair` (a cta_pair.CtaPair): the
    pair's A and B complete on the leader's `full`, whose announcement counts both CTAs' bytes of
    them; the other loads (block scales, which each CTA's own threads restage) on the CTA's own."""
    from . import cta_pair

    paired = {load for load in loads if pair is not None and load in (pair.a_load, pair.b_load)}
    own = sum(t.nbytes for load, t in loads.items() if load not in paired)
    lead = full
    if paired:
        both = own + 2 * sum(loads[load].nbytes for load in paired)
        mbarrier.arrive_expect_tx(k, full, k.b.op(f"select i1 {cta_pair.is_leader(k)}, i32 {both}, i32 {own}", "tc"))
        lead = cta_pair.leader_barrier(k, full)
    else:
        mbarrier.arrive_expect_tx(k, full, own)
    saved = k.values.get(iv_arg)
    k.values[iv_arg] = k.splat(iv_arg.type, iv)  # type: ignore[attr-defined]
    try:
        for load, t in loads.items():
            load_boxes(k, load, t, matrices[load].offset, lead if load in paired else full, stage[load],
                       (casts or {}).get(load), load in paired)
    finally:
        if saved is not None:
            k.values[iv_arg] = saved


def load_boxes(k: KernelLowering, op: Operation, t: TmaCopy, offset: int, full: str, stage: str = "",
               cast: Optional[tuple[str, str]] = None, pair: bool = False) -> None:
    """Every box of the tile `op` loads, into shared bytes `offset` (+ i32 `stage` unless ""),
    completing on the barrier at `full`; with `cast` (i32 slice, i16 CTA mask) this CTA's slice of
    each box, into the same offset of every CTA of the mask (and onto each one's barrier there);
    `pair`: the `.cta_group::2` form, `full` (shared::cluster) in the pair's leader."""
    for at, coords in _boxes(k, op, t, offset):
        at_coord, size = t.pair_part
        if size:     # the peer's half of B
            from .cta_pair import pair_rank

            shift = k.b.op(f"mul i32 {pair_rank(k)}, {size}", "tc")
            coords = [*coords[:at_coord], k.b.op(f"add i32 {coords[at_coord]}, {shift}", "tc"), *coords[at_coord + 1:]]
        if cast is not None:
            part = cast[0]
            shift = part if part == "0" else k.b.op(f"mul i32 {part}, {t.slice_bytes}", "tc")
            at = k.b.op(f"add i32 {shift}, {at}", "tc")   # type: ignore[assignment]
            first = part if part == "0" else k.b.op(f"mul i32 {part}, {t.box[1]}", "tc")
            coords = [coords[0], k.b.op(f"add i32 {coords[1]}, {first}", "tc"), *coords[2:]]
        place = k.b.op(f"add i32 {stage}, {at}", "tc") if stage else str(at)
        dst = k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, place)} to i32", "tc")
        n = len(coords)
        if pair:
            _asm(k, f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                    f".cta_group::2 [$0], [$1, {{{_places(2, n)}}}], [${n + 2}];", "r,l," + "r," * n + "r",
                 f"i32 {dst}, ptr {param_name(t.slot)}, {_i32s(coords)}, i32 {full}")
        elif cast is None:
            _asm(k, f"cp.async.bulk.tensor.{n}d.shared::cta.global.tile.mbarrier::complete_tx::bytes "
                    f"[$0], [$1, {{{_places(2, n)}}}], [${n + 2}];", "r,l," + "r," * n + "r",
                 f"i32 {dst}, ptr {param_name(t.slot)}, {_i32s(coords)}, i32 {full}")
        else:
            _asm(k, f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                    f".multicast::cluster [$0], [$1, {{{_places(2, n)}}}], [${n + 2}], ${n + 3};",
                 "r,l," + "r," * n + "r,h",
                 f"i32 {dst}, ptr {param_name(t.slot)}, {_i32s(coords)}, i32 {full}, i16 {cast[1]}")


@record(frozen=False)
class OneShot:
    """A tile copied by TMA once, completing the single phase of its own mbarrier."""

    copy: TmaCopy
    barrier: BarrierArray       # one mbarrier, expecting one arrival (with the tile's bytes)
    valid: bool = True          # initialized and not yet invalidated


def load_once(k: KernelLowering, op: Operation, view: object, matrix: SharedMatrix,
              rows: int = MAX_BOX) -> tuple[Optional[OneShot], str]:
    """Copy the tile of load `op` into `matrix` (swizzled, placed) by TMA, once: thread 0 initializes
    the tile's own mbarrier, announces the bytes and issues the boxes. Readers `wait_once` (every
    thread that reads, parity 0); after the last, once a CTA barrier has passed, `invalidate`.
    (None, why not) where `plan` refuses the copy; nothing is emitted then."""
    t, why = plan(k, op, view, matrix, rows)
    if t is None:
        return None, why
    t = replace(t, slot=hidden_param(k, t.spec))
    shot = OneShot(t, mbarrier.allocate(k, 1))
    k.barrier()   # readers of the buffer's earlier contents are done
    mbarrier.init(k, [(shot.barrier, [1])])   # (thread 0's: its own arrival below needs no publishing)
    full = mbarrier.address(k, shot.barrier, "0")

    def copy() -> None:
        mbarrier.arrive_expect_tx(k, full, t.nbytes)
        load_boxes(k, op, t, matrix.offset, full)
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "tc"), copy)
    return shot, ""


def wait_once(k: KernelLowering, shots: list[OneShot]) -> None:
    """This thread waits until the one-shot loads `shots` have landed (their barriers' phase 0; the
    barrier's initialization must have been published to it by a CTA barrier since)."""
    for shot in shots:
        mbarrier.wait(k, mbarrier.address(k, shot.barrier, "0"), "0", "one-shot TMA load")


def invalidate(k: KernelLowering, shots: list[OneShot]) -> None:
    """Thread 0 invalidates the barriers of `shots` still valid (after a CTA barrier past every
    wait): their bytes may serve other buffers, and a load run again initializes afresh."""
    live = [s for s in shots if s.valid]
    if live:
        mbarrier.inval(k, [s.barrier for s in live])
    for s in live:
        s.valid = False


def one_shots(k: KernelLowering, pending_only: bool = False) -> list[OneShot]:
    """The kernel's one-shot loads so far whose barriers are valid (`pending_only`: whose tile has
    not been waited for yet), each once."""
    out: list[OneShot] = []
    for value in list(k.values.values()):
        shot = value.arrival if isinstance(value, SharedTileVal) else None
        if shot is not None and shot.valid and (value.pending or not pending_only) \
                and not any(s is shot for s in out):
            out.append(shot)
    return out


def store(k: KernelLowering, op: Operation, t: TmaCopy, matrix: SharedMatrix, first_col: int = 0,
          wait: bool = True, written: bool = False) -> None:
    """One thread's TMA store of the tile in `matrix` (swizzled, its generic writes fenced for the
    async proxy and published) to the view of store op `op`, box by box (the unit clips what lies
    outside the tensor), one bulk group; `matrix` may hold the tile's columns from `first_col` on
    only (a chunk, epilogue.tma_store). With `wait` the thread then waits until the boxes have been
    read out of shared memory, which must outlive the reads (else the caller does, `stores_read`);
    with `written` until they have been written to global memory (a read may follow)."""
    for at, coords in _boxes(k, op, t, matrix.offset, first_col):
        src = k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, str(at))} to i32", "tc")
        n = len(coords)
        _asm(k, f"cp.async.bulk.tensor.{n}d.global.shared::cta.tile.bulk_group [$0, {{{_places(1, n)}}}], "
                f"[${n + 1}];", "l," + "r," * n + "r", f"ptr {param_name(t.slot)}, {_i32s(coords)}, i32 {src}")
    _asm(k, "cp.async.bulk.commit_group;", "", "")
    if written:
        _asm(k, "cp.async.bulk.wait_group 0;", "", "")
    elif wait:
        stores_read(k)


def stores_read(k: KernelLowering) -> None:
    """This thread's TMA stores so far have read their shared bytes (they may be written again)."""
    _asm(k, "cp.async.bulk.wait_group.read 0;", "", "")


def _boxes(k: KernelLowering, op: Operation, t: TmaCopy, offset: int,
           first_col: int = 0) -> list[tuple[int, list[str]]]:
    """(shared byte offset, i32 coordinates innermost first) of each box of the tile `op` copies
    (its columns from `first_col` on)."""
    from .ops_memory import view_index

    view = k.get(op.operand("view"))
    starts, _ = view_index(k, op, view)
    shape = view.tile_shape
    coords = [k.b.op(f"trunc i64 {k.b.op(f'mul i64 {starts[i]}, {shape[i]}', 'tc')} to i32", "tc") for i in t.order]

    def at(c: str, step: int) -> str:
        return c if step == 0 else k.b.op(f"add i32 {c}, {step}", "tc")
    return [(offset + a * t.atom_bytes + j * t.band_bytes,
             [at(coords[0], first_col + a * t.per_atom), *([at(coords[1], j * t.box[1])] if t.bands > 1 else coords[1:2]),
              *coords[2:]])
            for a in range(t.atoms) for j in range(t.bands)]


def _places(first: int, n: int) -> str:
    return ", ".join(f"${first + i}" for i in range(n))


def _i32s(values: list[str]) -> str:
    return ", ".join(f"i32 {v}" for v in values)


def _asm(k: KernelLowering, text: str, constraints: str, args: str) -> None:
    clobbers = f"{constraints},~{{memory}}" if constraints else "~{memory}"
    k.b.emit(f'call void asm sideeffect "{text}", "{clobbers}"({args})')


def describe(t: TmaCopy) -> str:
    n = t.atoms * t.bands
    cast = f", one slice of {t.slices} multicast to the CTAs sharing it" if t.slices > 1 else ""
    return (f"{n} box{'es' if n > 1 else ''} of {'x'.join(map(str, t.box))}{cast} "
            f"(tensor map {t.slot}, {t.nbytes} bytes a stage)")
