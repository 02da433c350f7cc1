"""The buffers an op asks for its operands, for `plan-shared-memory` (shared_stages.predict's walk).

The decisions are the middle level's, made by the same functions for the lowering and this plan:
an mma.sync stages its register operands whole or in K slices ("mma-stage", "mma-slice"), packs
sm_120's fp4 operands ("fp4-pack") and stages block-scale tiles held in registers first
(mma_sync_staging.py); a load left to its mma.sync is copied a K slice at a time through a ring of
two slices ("k-slice", deferred_loads.py); a wgmma stores a register A, or a B of a type with a
transposed form, in a swizzled buffer ("mma-stage"), and copies operands it cannot read as stored
K-major ("kmajor-copy", wgmma_operands.py, given the matrix each load is staged in:
`StagingFacts.matrices`); a tcgen05 mma the threads issue stores or packs register operands, copies
a staged load not swizzled K-major, and its tf32 operands into buffers its outermost loop asks for
before its stages (tcgen05_operands.py; its scale tiles after its operands, shared_tcgen05.SCALE_TILES;
nothing where a split loop's MMA warp issues it, `shared_tcgen05.issued_by_mma_warp`); an mma on the
FMA path reads both operands from scratch, a pack / unpack its operand, a gather / scatter view's
reader its row indices ("reduction", move_forms.mma_scratch / scratch_offsets); a transposed mma
operand whose load was not staged after all goes through conversion scratch ("operand-conversion",
move_forms.permute_scratch).

The decisions read how each operand is held (operands.py): here a stand-in (`_stand_in`: a
`_SharedStandIn` for a load staged for the tensor cores, with the matrix it is staged in, not
placed; else a `_RegistersStandIn` in the layout the value is assigned), and the kernel at the op
(`AtOp`: the buffers the plan placed before the op, `place`, with the op's own requests before the
decision: a block-scaled mma.sync's staged scale tiles).

Predicted where `predict` predicts the staging roles: the "reduction" scratch with them where
`scratch_predicted` holds for every op (not where a gather load is staged for the tensor cores:
its copies, hence its row indices' scratch, may be issued by its loop's pipeline); `ROLES` and
"fp4-pack" in every kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir.core import Operation, Value
from ..ir.record import record, replace
from ..ir.types import TileType
from ..tileaa.views import row_indices
from .buffers import Liveness
from .deferred_loads import DeferredLoad, defers, is_deferred, ring_axis, ring_stages, slice_tile
from .operands import RegisterTile, SharedTile
from .shared_plan import Request

if TYPE_CHECKING:
    from .shared_stages import StagingFacts

MMAS = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")
PACKS = ("cuda_tile.pack", "cuda_tile.unpack")
ROLES = ("mma-stage", "mma-slice", "k-slice", "operand-conversion", "kmajor-copy")
PACKED = "fp4-pack"     # also asked for by `requests`, covered with the staging roles (shared_tcgen05.ROLES)
PERMUTE = "cuda_tile.permute"


@record(frozen=False)
class _SharedStandIn(SharedTile):
    """A load staged for the tensor cores as the plan holds it: the matrix it is staged in (not
    placed) and the load it comes from (`source`)."""

    type: TileType
    matrix: Any
    transposed: bool = False
    tf32: str = ""
    deferred: Any = None
    source: Optional[Operation] = None


@record(frozen=False)
class _RegistersStandIn(RegisterTile):
    """A register tile as the plan holds it: its type and the layout it is assigned (no registers)."""

    type: TileType
    layout: Any


class AtOp:
    """The kernel at `op` as the operand decisions read it (operands.Staging), as the plan knows it:
    the buffers placed before the op (`placed`) and the allocas lowered before it."""

    def __init__(self, facts: "StagingFacts", op: Operation, placed: Any, allocas: int, live: Liveness,
                 defer: bool = False) -> None:
        self.sm, self.threads, self.pad_buffers = facts.sm, facts.threads, facts.pad_buffers
        self.caps = facts.caps
        self.assignment = facts.assignment
        self.buffers, self.static_smem_bytes = placed, allocas
        self.current_op, self.live = op, live
        self.defer_loads = defer

    def op_lifetime(self) -> tuple[int, int]:
        return self.live.op_range(self.current_op)


def asks(op: Operation, assignment: Any) -> bool:
    """Whether `op` may ask for buffers for its operands (`requests`)."""
    return op.name in MMAS or op.name in PACKS or row_indices(op) is not None \
        or op.name == PERMUTE and assignment.is_shared_operand(op.operands[0])


def scratch_predicted(op: Operation, assignment: Any) -> bool:
    """Whether the "reduction" scratch `op` may ask for its operands is one `requests` predicts: not
    where a gather / scatter view is read by another op than a load, a store or a reduction into it
    (`tileaa/views.row_indices`), nor by a load of a loop's pipeline plan (its ring may copy it ahead, each
    issue reading the row indices again); a load staged for the tensor cores otherwise reads them at the load,
    as a register load does."""
    from ..ir.types import GatherScatterViewType
    from .plan import plan_of

    if not any(isinstance(v.type, GatherScatterViewType) for v in op.operands):
        return True
    pipelines = plan_of(assignment).pipelines or {}
    return row_indices(op) is not None and not any(op in p.loads for p in pipelines.values())


def deferred(facts: "StagingFacts", op: Operation, view: Any, swizzled: bool, placed: Any, allocas: int,
             live: Liveness) -> bool:
    """Whether the last-resort lowering leaves load `op`, staged for the tensor cores, to its mma
    (deferred_loads.defers decides, beside the buffers `placed` before it): its mma then copies it a
    K slice at a time ("k-slice", `requests`)."""
    at = AtOp(facts, op, placed, allocas, live, defer=True)
    return defers(at, op, view, op.results[0].type, swizzled, live.value_range(op.results[0], op))  # type: ignore[arg-type]


def requests(facts: "StagingFacts", op: Operation, before: list[Request], allocas: int, live: Liveness,
             shared: dict, found: Any) -> list[Request]:
    """The buffers `op` asks for its operands (an mma, a pack / unpack, a gather / scatter view's
    reader), in the order asked (`Request.late`: a tcgen05 mma's scale tiles after its operands);
    `before`: the requests before it (placed here); `allocas`: the bytes of the allocas before it;
    `shared`: the ids of the loads staged in shared memory for the tensor cores (their tiles are
    read there), each with its view's facts where the load is left to its mma (`deferred`), else
    None; `found`: what the plan decided so far (shared_stages.Predicted: its `fits`, the depths planned
    so far, tell whether a split loop's MMA warp issues a tcgen05 mma), given each mma's K slices
    (`slices`) and whether an fp4 mma.sync packs its operands (`packed`)."""
    from ..layout.shared_matrix import matrix_shape
    from .move_forms import mma_scratch, scratch_offsets
    from .shared_plan import place

    assignment = facts.assignment
    at = AtOp(facts, op, place(before, facts.entry), allocas, live)
    lifetime = at.op_lifetime()
    # a pack / unpack reinterprets its operand through scratch (ops_shape._pack_like); a gather /
    # scatter view's row indices go there for every thread to read (ops_memory.view_index)
    through = [op.operands[0]] if op.name in PACKS else [v for v in [row_indices(op)] if v is not None]
    if through:
        return [Request(op, "reduction", "reduction", scratch_offsets([through[0].type])[1], 16, 0, lifetime)]  # type: ignore[list-item]
    if op.name == PERMUTE:   # an mma operand whose load was not staged after all, transposed in scratch
        from .move_forms import permute_scratch
        from .shared_sizes import _tile_bytes

        role = permute_scratch(op, assignment, _stand_in(facts, op.operands[0], shared))
        return [Request(op, role, "conversion", _tile_bytes([op.operands[0]]), 16, 0, lifetime)] \
            if role == "operand-conversion" else []
    if op.name not in MMAS:
        return []
    shape = assignment.mma_shapes.get(op)
    lhs, rhs = (_stand_in(facts, op.operand(n), shared) for n in ("lhs", "rhs"))  # type: ignore[arg-type]
    if shape is None:     # the FMA path: the operands held in registers go through scratch
        held = tuple(n for n, v in (("lhs", lhs), ("rhs", rhs)) if not isinstance(v, SharedTile))
        found.slices[op], nbytes = mma_scratch(at, op, held)  # type: ignore[arg-type]
        return [Request(op, "reduction", "reduction", nbytes, 16, 0, lifetime)] if nbytes else []
    if assignment.is_tcgen05(op):
        return _tcgen05(facts, at, op, lhs, rhs, shared, found.fits)
    layout = facts.layout_of(op.operand("acc"))  # type: ignore[arg-type]
    out: list[Request] = []
    if assignment.is_wgmma(op) and op.name != "cuda_tile.mmaf_scaled":   # as ops_reduce._mma dispatches
        from ..ir.types import storage_bytes
        from ..layout.shared_matrix import KMAJOR_ALIGN, k_and_x, kmajor_shape
        from .wgmma_operands import operand_form, read_operands

        wgmma = assignment.wgmma_shapes[op]
        for value, role in read_operands(wgmma, lhs, rhs, layout):  # type: ignore[arg-type]
            form = operand_form(op, wgmma, value, role, facts.wgmma_buffers,  # type: ignore[arg-type]
                                lambda: _rounds_in_place(facts, op, wgmma, value, role))
            if form == "stage":
                matrix = matrix_shape(value.type, at.pad_buffers, swizzled=True)  # type: ignore[arg-type]
                out.append(Request(op, "mma-stage", "restaging", matrix.nbytes, 1024, matrix.span, lifetime,
                                   subject=role))
            elif form in ("copy", "store"):   # kmajor_copy.copy_kmajor / store_kmajor, into a new buffer
                kdim, x_size = k_and_x(value.type.shape[-2:], role)  # type: ignore[attr-defined]
                eb = value.matrix.elem_bytes if form == "copy" else storage_bytes(value.type.element)  # type: ignore
                matrix = kmajor_shape(x_size, kdim, eb, at.pad_buffers)  # type: ignore[arg-type]
                out.append(Request(op, "kmajor-copy", "buffer", matrix.nbytes, KMAJOR_ALIGN, subject=role))
        return out
    from .mma_sync_staging import operand_staging, packs, staged_tile

    if op.name == "cuda_tile.mmaf_scaled":   # ops_blockscale.lower: the scales first, A's then B's
        out += _scale_tiles(facts, at, op, shared)
        if out:     # beside which the operands' staging is decided
            at.buffers = place(before + out, facts.entry)
    _, staged, chunks = operand_staging(at, shape, lhs, rhs, layout)  # type: ignore[arg-type]
    found.slices[op] = chunks
    if packs(at, shape, lhs, rhs, staged, chunks):  # type: ignore[arg-type]
        found.packed.add(op)
        # ops_mma._packed_fp4_steps: A packed (staged whole first from registers), then B
        kdim = lhs.type.shape[-1]
        for value, rows, operand in ((lhs, lhs.type.shape[0], "a"), (rhs, rhs.type.shape[-1], "b")):
            out += _packed(at, op, value, operand, rows, kdim, lifetime)
        return out
    width = lhs.type.shape[-1] // chunks
    for value, operand in ((lhs, "a"), (rhs, "b")):   # the deferred loads' rings of K slices first
        if is_deferred(value):
            tile = slice_tile(value.deferred.op.results[0].type, ring_axis(value, operand), width)
            nbytes = matrix_shape(tile, at.pad_buffers).nbytes * ring_stages(chunks)  # type: ignore[arg-type]
            out.append(Request(op, "k-slice", "staging", nbytes, 128, 0, lifetime, subject=operand))
    for value, axis in staged:
        if isinstance(value, SharedTile):
            continue
        role, tile, operand = staged_tile(value.type, axis, chunks)
        matrix = matrix_shape(tile, at.pad_buffers)  # type: ignore[arg-type]
        out.append(Request(op, role, "restaging", matrix.nbytes, 128, 0, lifetime, subject=operand))
    return out


def _rounds_in_place(facts: "StagingFacts", op: Operation, shape: Any, value: Any, role: str) -> bool:
    """ops_wgmma._rounds_in_place as the plan knows it: an f32 operand read as tf32 whose stage a
    TMA-fed pipeline fills, as `kmajor_copies.loop_copies` leaves it uncopied (`tma_rounded_stage`)."""
    from .kmajor_copies import tma_rounded_stage

    held = facts.matrices.get(id(value.source)) if value.source is not None else None
    if not value.tf32 or held is None or held[1] is None:
        return False
    return tma_rounded_stage(facts, shape, held[1], value.source, role, value.transposed)  # type: ignore[arg-type]


def _tcgen05(facts: "StagingFacts", at: AtOp, op: Operation, lhs: Any, rhs: Any, shared: dict,
             fits: dict) -> list[Request]:
    """What tcgen05 mma `op` the threads issue asks for its operands (ops_tcgen05.lower_tcgen05, as
    `operand_forms` decides): a register tile stored in a swizzled buffer ("mma-stage"), a 4-bit
    operand packed ("fp4-pack", a register tile staged first, "mma-stage"), A's then B's; then its
    scale tiles held in registers staged (`SCALE_TILES`, ops_blockscale.Tcgen05Scales). None of it
    where the split loop's MMA warp issues the mma (its operands are the stages': shared_tcgen05).
    A staged load read where it is or through a K-major copy ("kmajor-copy"), a tf32 operand's
    K-major copies and a register A in tensor memory are none of these roles."""
    from ..layout.shared_matrix import matrix_shape
    from .shared_tcgen05 import issued_by_mma_warp
    from .tcgen05_operands import operand_forms, reads_in_place

    if issued_by_mma_warp(facts, op, fits):
        return []
    lifetime = at.op_lifetime()
    _, m, n = facts.assignment.tcgen05_layouts[op].shape
    kdim = lhs.type.shape[-1]
    out: list[Request] = []
    forms = operand_forms(at, op, lhs, rhs)  # type: ignore[arg-type]
    if forms[0] == "restaged" and op not in facts.restaged:   # outside loops: its own K-major buffers
        facts.restaged.add(op)
        out += [_kmajor(at, op, value.type.shape, role, 4) for value, role in ((lhs, "a"), (rhs, "b"))]
    for value, form, rows, role in zip((lhs, rhs), forms, (m, n), "ab"):
        if form == "staged":
            matrix = matrix_shape(value.type, at.pad_buffers, swizzled=True)  # type: ignore[arg-type]
            out.append(Request(op, "mma-stage", "restaging", matrix.nbytes, 1024, matrix.span, lifetime, subject=role))
        elif form == "packed":
            out += _packed(at, op, value, role, rows, kdim, lifetime)
        elif form == "shared" and not reads_in_place(value):   # ops_tcgen05._shared: a K-major copy
            out.append(_kmajor(at, op, value.type.shape, role, value.matrix.elem_bytes))
    if op.name == "cuda_tile.mmaf_scaled":
        from .shared_tcgen05 import SCALE_TILES

        out += [replace(r, late=SCALE_TILES) for r in _scale_tiles(facts, at, op, shared)]
    return out


def loop_copies(facts: "StagingFacts", loop: Operation, live: Liveness) -> list[Request]:
    """The K-major copy buffers of the tf32 tcgen05 mmas inside `loop` that it asks for before its
    stages (tcgen05_operands.loop_restaged), A's then B's per mma, each alive to the kernel's end; the
    mmas noted in `facts.restaged`."""
    if not getattr(facts.assignment, "tcgen05_layouts", None):
        return []      # no tcgen05 mma to restage (tcgen05_operands.loop_restaged)
    from .settled_split import settled
    from .tcgen05_operands import loop_restaged

    mmas = loop_restaged(facts.assignment, loop, facts.restaged, settled(facts))
    facts.restaged.update(mmas)
    at = AtOp(facts, loop, None, 0, live)
    return [_kmajor(at, loop, op.operand(name).type.shape, role, 4, (op, role))  # type: ignore[union-attr]
            for op in mmas for name, role in (("lhs", "a"), ("rhs", "b"))]


def _kmajor(at: AtOp, op: Operation, shape: Any, role: str, elem_bytes: int, subject: Any = None) -> Request:
    """A K-major copy buffer of an operand tile of `shape` (kmajor_copy.kmajor_matrix), asked by `op`
    (`subject`: which operand, its role where None; a loop's: (the mma, its role))."""
    from ..layout.shared_matrix import KMAJOR_ALIGN, k_and_x, kmajor_shape

    kdim, x_size = k_and_x(shape[-2:], role)
    return Request(op, "kmajor-copy", "buffer", kmajor_shape(x_size, kdim, elem_bytes, at.pad_buffers).nbytes,  # type: ignore[arg-type]
                   KMAJOR_ALIGN, subject=role if subject is None else subject)


def _packed(at: AtOp, op: Operation, value: Any, operand: str, rows: int, kdim: int,
            lifetime: tuple[int, int]) -> list[Request]:
    """What fp4_pack.pack asks for to pack operand `value` ("a" or "b") of `rows` rows and `kdim` K: the
    register tile staged first (`stages_first`, ops_mma.stage: "mma-stage"), then the packed buffer."""
    from ..layout.shared_matrix import matrix_shape
    from .mma_sync_staging import PACK_ALIGN, packed_matrix, stages_first

    out = []
    if stages_first(value):
        matrix = matrix_shape(value.type, at.pad_buffers)  # type: ignore[arg-type]
        out.append(Request(op, "mma-stage", "restaging", matrix.nbytes, 128, 0, lifetime, subject=operand))
    packed = packed_matrix(rows, kdim)
    out.append(Request(op, "fp4-pack", "restaging", packed.nbytes, PACK_ALIGN, packed.span, lifetime, subject=operand))
    return out


def _scale_tiles(facts: "StagingFacts", at: AtOp, op: Operation, shared: dict) -> list[Request]:
    """The scale tiles of block-scaled mma `op` held in registers, staged by ops_blockscale._Scales
    (`restages_scales`: ops_mma.stage, padded rows), A's then B's."""
    from ..layout.shared_matrix import matrix_shape
    from .mma_sync_staging import restages_scales

    out = []
    for name, operand in (("lhs_scale", "a-scale"), ("rhs_scale", "b-scale")):
        scale = _stand_in(facts, op.operand(name), shared)  # type: ignore[arg-type]
        if restages_scales(scale):
            matrix = matrix_shape(scale.type, at.pad_buffers)
            out.append(Request(op, "mma-stage", "restaging", matrix.nbytes, 128, 0, at.op_lifetime(), subject=operand))
    return out


def _stand_in(facts: "StagingFacts", value: Value, shared: dict) -> Any:
    """How mma operand `value` is held: a `_SharedStandIn` (no buffer) where it is a load staged for
    the tensor cores, possibly through the ops a shared operand passes through (unit reshapes, 2-D
    transposes, a rounding to tf32); else a `_RegistersStandIn` in the layout the value is assigned."""
    from ..tileaa.mma_operands import passes_shared as _passes_shared

    source, transposed, tf32 = value, False, ""
    while isinstance(source.owner, Operation) and _passes_shared(source.owner):
        transposed ^= source.owner.name == "cuda_tile.permute"
        if source.owner.name == "cuda_tile.ftof":     # ops_arith: read as tf32, rounded as it says
            tf32 = str(source.owner.attributes.get("rounding_mode", "nearest_even"))
        source = source.owner.operands[0]
    if facts.assignment.is_shared_operand(value) and id(source.owner) in shared:
        view = shared[id(source.owner)]
        held = (facts.matrices or {}).get(id(source.owner))
        return _SharedStandIn(value.type, held[0] if held is not None else None, transposed=transposed,  # type: ignore
                              tf32=tf32, deferred=DeferredLoad(source.owner, view) if view is not None else None,
                              source=source.owner)
    return _RegistersStandIn(value.type, facts.layout_of(value))
