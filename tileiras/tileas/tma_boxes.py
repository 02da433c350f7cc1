"""How TMA copies a tile between a tensor view and a shared stage: whether it can, and its boxes.

TMA copies a tile when its descriptor can be made at launch from the kernel's own arguments
(codegen/tma_params.py): the tensor view's base, extents and strides are kernel parameters or
constants (tileaa/facts.view_sources), or, for a pipelined loop's copies and an epilogue's stores
(`built`), by the kernel itself from the values it computes (lowering/kernel_maps.py); the base is
16-byte aligned and every outer stride a multiple of 16 bytes by the divisibility facts (tileaa/views.py), the dimension the tile's columns run along
has unit stride, and the stage is the swizzled `SharedMatrix` wgmma and tcgen05.mma read (K-major
A, N- or K-major B): that layout is what TMA writes with the matching swizzle, one box per column
atom (`span` bytes of every row, rows <= 256); or, for a block-scaled mma's scale tiles and row
kernels (`dense`), an unswizzled stage without padding. `plan` says which boxes, or why not; the
lowering (lowering/tma_copy.py) issues them.
"""

from __future__ import annotations

import math
from typing import Optional

from ..codegen import ptxas
from ..codegen.hidden_params import KERNEL_MAPS_PTX
from ..codegen.tma_params import Field, TmaParam
from .. import host_platform
from ..ir.core import Operation
from ..ir.record import record, replace
from ..ir.types import ScalarType, TileType, storage_bytes
from ..layout.shared_matrix import SharedMatrix
from ..tileaa.facts import ViewSources, view_sources
from ..target import Caps
from ..tileaa.views import View, cut_from, view_of

MAX_BOX = 256
MAX_STORE_ROWS = 64     # an sm_90 store's box: one consumer warpgroup's rows of an mma tile (NVIDIA's
                        # boxes; sm_100's hold 128, tcgen05_buffers.TMEM_LANES)
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
    if elem.name == "f32" and op.name.startswith("cuda_tile.load") and read_as_tf32(op.results[0]):
        return "tf32"
    return _DTYPES.get(elem.name) or _BY_BYTES[storage_bytes(elem)]


def read_as_tf32(value: object) -> bool:
    uses = getattr(value, "uses", [])
    if len(uses) != 1:
        return False
    use = uses[0]
    if use.name in ("cuda_tile.reshape", "cuda_tile.permute"):
        return read_as_tf32(use.results[0])
    return use.name == "cuda_tile.ftof" and str(use.results[0].type.element) == "tf32" \
        and str(use.attributes.get("rounding_mode", "nearest_even")) == "nearest_even"


def view_refused(op: Operation, elem_bytes: float, refills: bool = False) -> str:
    """Why no TMA descriptor can copy the tile `op` loads (stores), whatever its stage's layout: the
    view's facts alone ("" where they allow one; `elem_bytes`, the stage's bytes an element; `refills`
    as `plan`'s)."""
    return _view_facts(op, elem_bytes, refills, padded=False)[0]


def _view_facts(op: Operation, elem_bytes: float, refills: bool, padded: bool, built: bool = False
                ) -> tuple[str, Optional[View], Optional[ViewSources]]:
    """(why not, "" where TMA may copy; the view; its sources) for `view_refused` and `plan`, which goes on
    with the view and sources. `padded`: the stage is padded, which TMA cannot write either (said in
    `plan`'s order). `built`: the kernel may make the descriptor of a view whose parts it computes
    (`kernel_maps`)."""
    unsupported = host_platform.tma_callback_unsupported()   # (through the module: tests patch it)
    if unsupported:
        return unsupported, None, None
    whole = op.results[0].type if op.name.startswith("cuda_tile.load") else op.operand("tile").type
    view = view_of(op.operand("view"))
    if view is None or view.traversal_strides is not None or view.sparse_dim is not None:
        return "the view is strided or gathers rows", None, None
    if view.padding not in (None, "zero") and not refills:
        return f"the view pads with {view.padding} (TMA fills zeros)", None, None
    if padded:
        return "the stage is padded against bank conflicts, not the swizzled layout TMA writes", None, None
    rank = len(whole.shape)
    if rank > MAX_RANK or sorted(view.dim_map) != list(range(rank)):
        return f"a rank-{rank} tile that is not a permutation of the tensor's dimensions", None, None
    made = cut_from(op)
    sources, why = view_sources(made)
    if sources is None and built:
        unsupported = host_platform.tma_callback_unsupported() or ptxas.ptx_isa_unsupported(KERNEL_MAPS_PTX)
        if unsupported:
            return f"{why} ({unsupported})", None, None
        sources, why = view_sources(made, built=True)
    if sources is None:
        return why, None, None
    tensor, inner = view.tensor, view.dim_map[-1]
    if sources.strides[inner].param >= 0 or sources.strides[inner].const != 1:
        return f"the tile's columns run along tensor dimension {inner}, whose stride is not 1", None, None
    if tensor.base_align < 16:
        return f"the base pointer is known {tensor.base_align}-byte aligned, not 16", None, None
    for d, div in enumerate(tensor.stride_div):
        if d != inner and (div * elem_bytes) % 16:
            return f"stride {d} is known a multiple of {div * elem_bytes} bytes, not of 16", None, None
    return "", view, sources


def plan(op: Operation, matrix: SharedMatrix, rows: int = MAX_BOX, dense: bool = False,
         tile: Optional[TileType] = None, refills: bool = False, built: bool = False) -> tuple[Optional[TmaCopy], str]:
    """(TmaCopy, "") when the tile that `op` loads from (or stores to) its view can be copied by
    TMA into (out of) `matrix`, a box holding at most `rows` rows; else (None, why not). `dense`:
    an unswizzled stage without padding is copied too, as one unswizzled box (`_dense`). `tile`:
    the part of the tile copied, if not the whole: a CTA pair's half of B along one dimension.
    `refills`: the readers put back a padding other than zero themselves (a tile read into registers).
    `built`: the descriptor of a view the kernel computes may be made in the kernel (a pipelined loop's
    copies: `kernel_maps`)."""
    whole = op.results[0].type if op.name.startswith("cuda_tile.load") else op.operand("tile").type
    assert isinstance(whole, TileType)
    tile = tile or whole
    eb = matrix.elem_bytes
    why, view, sources = _view_facts(op, eb, refills,
                                     padded=not matrix.swizzled and not (dense and matrix.pitch == matrix.cols * eb),
                                     built=built)
    if why:
        return None, why
    assert view is not None and sources is not None
    rank = len(tile.shape)
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
                    tuple(field(sources.strides[d]) for d in dims), box, _SWIZZLE[span], sources.built)
    box_bytes = eb
    for b in box:
        box_bytes *= b
    halved = [d for d in range(rank) if tile.shape[d] != whole.shape[d]]
    part = (order.index(halved[0]), tile.shape[halved[0]]) if halved else (0, 0)
    return TmaCopy(spec, order, per_atom, matrix.cols // per_atom, matrix.atom_bytes, box_bytes, box, bands,
                   rows * span, pair_part=part), ""


def box_rows(caps: Caps) -> int:
    """Rows of a pipelined load's TMA box on a target: `Caps.tma_box_rows` where it sets them (sm_100:
    128, one tcgen05.mma's M), else the most a box holds."""
    return caps.tma_box_rows or MAX_BOX


def pipeline_copies(caps: Caps, loads: tuple, matrices: dict, dense: "set | frozenset", tiles: dict,
                    beside: "set | frozenset", refilled: "set | frozenset" = frozenset()) -> tuple[Optional[dict], dict]:
    """Whether a pipelined loop's stages are filled by TMA: (load -> its copy into its stage
    `matrices[load]` holding `tiles[load]`, or None where the loop keeps cp.async; load -> why TMA
    cannot copy it). Every load goes by TMA, except those of `beside` (StageRing.beside: cp.async can
    copy them, or their stages are unpadded, `dense`), which may keep cp.async beside the others'
    boxes: a transposed 8-bit operand's padded stage beside the swizzled ones TMA fills. `refilled`: the
    loads whose readers put back their view's padding (StageRing.refilled)."""
    rows = box_rows(caps)
    plans = {load: plan(load, matrices[load], rows, dense=load in dense, tile=tiles[load], refills=load in refilled,
                        built=True) for load in loads}
    why = {load: reason for load, (t, reason) in plans.items() if t is None}
    if why and (len(why) == len(loads) or not set(why) <= beside):
        return None, why
    return {load: t for load, (t, _) in plans.items() if t}, why


def _dense(op: Operation, tile: TileType, view: View, sources: ViewSources,
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
    spec = TmaParam(sources.base, _dtype(op, tile.element), tuple(field(sources.shape[d]) for d in dims),
                    tuple(field(sources.strides[d]) for d in dims), box, "none", sources.built)
    box_bytes = eb * math.prod(box)
    if atoms * bands > 1 and box_bytes % 128:
        return None, f"boxes of {box_bytes} bytes do not keep the next box 128-byte aligned"
    return TmaCopy(spec, order, box[0], atoms, box_bytes, box_bytes, box, bands,
                   tile.shape[-1] * eb if bands > 1 else 0), ""


def sliced(t: TmaCopy, parts: int) -> tuple[Optional[TmaCopy], str]:
    """`t` cut along the rows of its boxes into `parts` slices, each multicast by one CTA of the
    cluster into all (multicast_groups.py); (None, why not). A slice holds whole 8-row swizzle
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


def describe(t: TmaCopy) -> str:
    n = t.atoms * t.bands
    cast = f", one slice of {t.slices} multicast to the CTAs sharing it" if t.slices > 1 else ""
    return (f"{n} box{'es' if n > 1 else ''} of {'x'.join(map(str, t.box))}{cast} "
            f"(tensor map {t.slot}, {t.nbytes} bytes a stage)")
