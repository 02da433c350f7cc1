"""The buffers sm_100's tcgen05 roles ask for, sized and aligned here for the lowering that places
them and for plan-shared-memory (shared_tcgen05.py) alike: the restaged block scales, one stage's
restaged scales, P's swizzled shared buffer where it does not go to tensor memory, the attention's
handshake mbarriers, the epilogue's swizzled stage and tensor memory's control block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..ir.core import Operation
from ..ir.types import ScalarType
from ..layout.encodings import MmaLayout
from ..layout.shared_matrix import SharedMatrix, matrix_shape
from ..tileaa.mma_forms import sf_cells, tcgen05_columns, tcgen05_sf_bytes
from ..tileaa.mma_operands import resident_loop, zero
from .plan import plan_of
from .tcgen05_roles import p_in_tmem
from .tma_boxes import TmaCopy, plan

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment
    from .plan import KernelFacts

SCALES_ALIGN = 128      # restaged scales (tcgen05.cp reads 128-byte rows)
P_ALIGN = 1024          # P's shared buffer is swizzled
STAGE_ALIGN = 1024      # the swizzled buffer an epilogue's chunks (or attention's O) are written into
CONTROL_BYTES = 128     # tensor memory's control block: its mbarriers and the allocated address
TMEM_LANES = 128        # rows of one warpgroup's accumulator: a TMA store box's (NVIDIA's sm_100 boxes)

HANDSHAKE = (("scores", 1),           # S_j complete (tcgen05.commit): the consumers read it
             ("probabilities", 0),    # P_j in tensor memory, O rescaled: every consumer thread arrives
             ("output", 1),           # O += P_j V_j complete (j even; `double_scores`: else every j): the
             ("output_odd", 1))       # scores buffer that P_j lies over may take S_{j+2} (j odd: this one)


def scale_stage(k: "KernelFacts", op: Operation) -> tuple[int, int]:
    """(bytes, tensor-memory columns) of one stage's restaged scales of the block-scaled mma `op`
    (lowering/warp_specialize_tcgen05._scale_stages; plan-shared-memory's "tmem-stages", shared_tcgen05.py)."""
    _, m, n = k.assignment.tcgen05_layouts[op].shape  # type: ignore[union-attr]
    return tcgen05_sf_bytes(m, n, sf_cells(op)), tcgen05_columns(m, n, sf_cells(op))


def p_matrix(k: "KernelFacts", o: Operation) -> object:
    """The (unplaced) swizzled shared matrix of P (O += P V's A) where it does not go to tensor
    memory (`p_in_tmem`), else None (lowering/warp_specialize_tcgen05.p_buffer places it; plan-shared-memory
    sizes it, shared_tcgen05.py)."""
    return None if p_in_tmem(k, o) else matrix_shape(o.operand("lhs").type, k.pad_buffers, swizzled=True)  # type: ignore[arg-type]


def tma_stage(k: "KernelFacts", store: Operation, layout: MmaLayout, first_fit: "Callable[[int, int], int]",
              limit: int) -> Optional[tuple[TmaCopy, SharedMatrix]]:
    """Where `store`'s view has a descriptor, made of the kernel's parameters or by the kernel (tileas/tma_boxes.plan
    with `built`, as the sm_90 epilogue's) and its elements are whole bytes: its TMA copy (boxes of one
    warpgroup's 128 tensor-memory lanes, NVIDIA's sm_100 boxes) and the (unplaced) swizzled buffer
    the chunks are written into, placed after the loop in bytes its stages no longer need (every
    copy into them landed before the MMAs that read it, which were done before the accumulator was
    ready); None where not, or where the buffer does not fit below `limit` at `first_fit(nbytes,
    align)` (the lowest offset free over the store, beside the buffers placed before it). Decided by
    plan-shared-memory (shared_tcgen05.py) for the lowering (lowering/tmem_epilogue.py)."""
    tile = store.operand("tile").type
    elem = getattr(tile, "element", None)
    if not k.caps.has("tma") or not isinstance(elem, ScalarType) or elem.bitwidth < 8:
        return None
    b, m, n = layout.shape
    matrix = SharedMatrix(0, b, m, n, elem.bitwidth // 8, swizzled=True)
    t, _ = plan(store, matrix, rows=TMEM_LANES, built=True)
    if t is None:
        return None
    if first_fit(matrix.nbytes, STAGE_ALIGN) + matrix.nbytes > limit:
        return None
    return t, matrix


def first_asker(entry: Operation, assignment: "LayoutAssignment") -> Optional[Operation]:
    """The op whose lowering first asks for the kernel's tensor memory (lowering/tmem.tensor_memory, which places
    its control block then: a buffer alive to the kernel's end above everything taken so far), or
    None where no mma runs on tcgen05. In program order, the first of: the warp-specialized loop whose
    MMA warp issues tcgen05 mmas (warp_specialize_tcgen05: its roles allocate the columns), a `for`
    that stores the nonzero initial value of an accumulator it keeps in tensor memory
    (ops_tcgen05.before_loop), a tcgen05 mma (ops_tcgen05: its accumulator's region). Decides for
    plan-shared-memory (shared_sizes.tmem_control), where the lowering asks for it (`PlanReader.buffer` reports a request
    at another op)."""
    layouts = getattr(assignment, "tcgen05_layouts", None) or {}
    if not layouts:
        return None
    from .settled_split import settled
    from .shared_stages import StagingFacts

    kplan = plan_of(assignment)
    facts = StagingFacts(entry, assignment.sm, assignment.threads, assignment, kplan.pipelines, kplan.warp_split,
                         True, {}, {})
    split = settled(facts)      # (an attention whose copies are not all TMA's: its consumers issue the mmas)
    split_loop = split.loop if split is not None and split.mmas else None   # (before_loop leaves it alone)
    stores: set[int] = set()     # loops storing a nonzero initial accumulator before they run
    for op in layouts:
        found = resident_loop(op)
        if found is not None and found[0] is not split_loop \
                and not zero(found[0].operand_group("initValues")[found[1]]):
            stores.add(id(found[0]))
    if split_loop is not None:   # its MMA warp runs where the loop is pipelined (else the body's mmas ask)
        from .stage_rings import ring_of

        ring = ring_of(facts, split_loop)
        if ring is None or not ring.plan.pipelined:
            split_loop = None
    for op in entry.walk():
        if op is split_loop or id(op) in stores or op in layouts:
            return op
    return None
