"""Warps per CTA, chosen per kernel.

The kernel's `num_worker_warps_per_cta` optimization hint wins where the bytecode
carries one for the target. Otherwise the accumulators decide: a tensor-core
accumulator lives in registers for a whole K loop, and a thread has 255 of them,
so the CTA gets enough warps that no accumulator needs more than
`ACC_REGS_PER_THREAD` (4 warps, NVIDIA's default, at least; 16 at most), less
`NEST_REGS` for each loop beyond two around the mma: an outer loop's state (a grouped
GEMM's group, tile and problem bounds, the views it selects) stays live beside the
accumulator through the whole K loop (a 128x128 f32 accumulator on 4 warps leaves too few
registers under three loops: spills, where 8 warps have none). Any
other computed tile (a row of 16k columns, attention's scores) gets warps until
it takes at most `TILE_REGS_PER_THREAD` registers a thread (8 warps at most), but for
no more warps than an mma's wgmma takes (its warpgroups stack along M): a bmm's 64 x 256 f32
epilogue tile asked for 8 warps and left the mma on mma.sync, where NVIDIA's runs one warpgroup
of m64n256; so did attention's O at d = 256 and 64 query rows, in the mma's loop (NVIDIA's: one
consumer warpgroup of wgmma beside a producer warpgroup, whose loads leave the consumers' registers
to O: with facts ours matches it, none spilled; without, 30 spill instructions against NVIDIA's
176). Only where no producer can take a loop's loads off the consumers (`_loads_crowd_one_warpgroup`)
does a tile in it keep its warps, the mma on mma.sync.
"""

from __future__ import annotations

from ..ir.core import Block, Operation
from ..target import caps
from ..tileaa.hints import entry_hint, occupancy
from ..tileaa.mma_operands import MMAS, for_tensor_cores

DEFAULT_WARPS = 4
MAX_WARPS = 16
ACC_REGS_PER_THREAD = 128
NEST_REGS = 32
TILE_REGS_PER_THREAD = 64
TILE_MAX_WARPS = 8
# An element-wise kernel (no mma, no reduction or scan) gets warps until the tiles live at once take at most what
# a thread has (`live_registers`): RoPE's rotated halves, x1 and x2 of 16 x 8 x 64 f32 (64 registers a thread each
# on 4 warps) live beside their products and broadcast cos and sin, 166 spill instructions on 4 warps (NVIDIA's:
# 98 on 8), none on 8 at 187 registers. (A kernel that reduces streams its rows in chunks after the warps are
# chosen, tileaa/row_chunks.py and tile_loops.py: the whole tiles' liveness says nothing of its registers.)
LIVE_REGS_PER_THREAD = 255
_EXCHANGES = ("cuda_tile.reduce", "cuda_tile.scan")



# results the tile rule leaves to others: accumulators (the mma rule), what loops and branches
# carry or constants splat (their producers count), and tiles staged for tensor cores
_NOT_COUNTED = (*MMAS, "cuda_tile.for", "cuda_tile.loop", "cuda_tile.if",
                "cuda_tile.constant")


def _computed_in_registers(op: Operation) -> bool:
    if op.name in _NOT_COUNTED or not op.results:
        return False
    return not (op.name == "cuda_tile.load_view_tko" and for_tensor_cores(op))


def _loop_depth(op: Operation) -> int:
    """How many loops enclose `op`."""
    depth, block = 0, op.parent
    while block is not None and block.parent is not None and block.parent.parent is not None:
        owner = block.parent.parent   # block -> region -> op
        depth += owner.name in ("cuda_tile.for", "cuda_tile.loop")
        block = owner.parent
    return depth


def choose_threads(entry: Operation, gpu: str) -> int:
    wanted = entry_hint(entry, gpu, "num_worker_warps_per_cta")
    if wanted is not None and wanted <= MAX_WARPS:
        return 32 * wanted
    from ..tileaa.mma_forms import select_shape

    from ..ir.types import ScalarType, TileType

    warps = DEFAULT_WARPS
    mmas = [op for op in entry.walk() if op.name in MMAS]
    crowding = {mma for mma in mmas if _loads_crowd_one_warpgroup(entry, mma, gpu)}
    for op in entry.walk():
        for r in op.results[:1] if _computed_in_registers(op) else ():
            t = r.type
            if isinstance(t, TileType) and isinstance(t.element, ScalarType):
                regs = -(-t.num_elements * t.element.bitwidth // 32)
                capped = [mma for mma in mmas if mma not in crowding or not _in_its_loop(op, mma)]
                while warps < TILE_MAX_WARPS and regs > warps * 32 * TILE_REGS_PER_THREAD \
                        and not any(_last_for_wgmma(mma, gpu, warps) for mma in capped):
                    warps *= 2
        if op.name not in MMAS:
            continue
        lhs, rhs, acc = (op.operand(n).type for n in ("lhs", "rhs", "acc"))
        if select_shape(op, lhs, rhs, acc, caps(gpu).sm) is None:  # type: ignore[arg-type]
            continue
        regs = acc.num_elements * max(1, acc.element.bitwidth // 32)  # type: ignore[union-attr]
        budget = ACC_REGS_PER_THREAD - NEST_REGS * max(0, _loop_depth(op) - 2)
        if op.name == "cuda_tile.mmaf_scaled":
            plain = warps      # the warps the accumulator alone asks for
            while plain < MAX_WARPS and regs > plain * 32 * budget:
                plain *= 2
            regs *= _accumulator_weight(op, gpu, 32 * plain)
        while warps < MAX_WARPS and regs > warps * 32 * budget and not _last_for_wgmma(op, gpu, warps):
            warps *= 2
    for op in mmas:   # the tensor-core family first: an mma tcgen05 takes only with more warps gets them
        while warps < MAX_WARPS and _more_for_tcgen05(op, gpu, warps):
            warps *= 2
    if not mmas and not any(op.name in _EXCHANGES for op in entry.walk()):
        while warps < TILE_MAX_WARPS and live_registers(entry.regions[0].block, warps) > LIVE_REGS_PER_THREAD:
            warps *= 2
    return 32 * warps


def live_registers(block: "Block", warps: int) -> int:
    """The most registers a thread of `warps` holds at once for the tiles computed in `block` (and the
    blocks nested in it): at each op, every tile `_computed_in_registers` defined before it and read at or
    after it, plus the peak of the op's own regions. A tile read inside a nested op stays live through it."""
    from ..ir.types import ScalarType, TileType

    position = {op: i for i, op in enumerate(block.operations)}

    def at_top(user: Operation) -> "int | None":
        while user is not None and user not in position:
            parent = user.parent            # block -> region -> op
            user = parent.parent.parent if parent is not None and parent.parent is not None else None
        return position.get(user) if user is not None else None

    deltas = [0] * (len(block.operations) + 1)
    nested = [0] * len(block.operations)
    for i, op in enumerate(block.operations):
        nested[i] = max((live_registers(b, warps) for r in op.regions for b in r.blocks), default=0)
        if not _computed_in_registers(op):
            continue
        t = op.results[0].type
        if not (isinstance(t, TileType) and isinstance(t.element, ScalarType)):
            continue
        regs = -(-t.num_elements * t.element.bitwidth // (32 * 32 * warps))
        last = max((p for u in op.results[0].uses if (p := at_top(u)) is not None), default=i)
        deltas[i] += regs
        deltas[last + 1] -= regs
    peak = live = 0
    for i in range(len(block.operations)):
        live += deltas[i]
        peak = max(peak, live + nested[i])
    return peak


def _in_its_loop(op: Operation, mma: Operation) -> bool:
    """Whether `op` runs in a loop around `mma` (its tiles then live beside the accumulator)."""
    from ..transforms.rewrite import inside_op
    from .warp_roles import enclosing_loop

    loop = enclosing_loop(mma)
    return loop is not None and inside_op(op, loop)


def _loads_crowd_one_warpgroup(entry: Operation, mma: Operation, gpu: str) -> bool:
    """Whether the loads `mma`'s loop stages for it go through the registers of the warpgroup the wgmma
    leaves (no fact proves a cp.async chunk, `chunk_elements`) where no producer warpgroup of its own may
    take them (uncopied_loads.producer_warpgroup_loads: the kernel asks for two CTAs an SM, and a producer's
    registers would halve the consumers'), so they crowd the consumers' beside the loop's tiles (an f16
    attention at d = 256 on one warpgroup without facts: 418 spill instructions, 148 in its hot loop; on
    two on mma.sync, 104)."""
    from ..tileaa.access_width import chunk_elements
    from ..tileaa.views import view_of
    from ..ir.types import TileType
    from .uncopied_loads import producer_warpgroup_loads
    from .warp_roles import enclosing_loop

    loop = enclosing_loop(mma)
    if loop is None or producer_warpgroup_loads(caps(gpu), DEFAULT_WARPS * 32, occupancy(entry, gpu)):
        return False
    for load in loop.regions[0].block.operations:
        view = view_of(load.operand("view")) if load.name == "cuda_tile.load_view_tko" else None
        tile = load.results[0].type if view is not None else None
        if isinstance(tile, TileType) and for_tensor_cores(load) and not chunk_elements(load, view, tile):
            return True
    return False


def _last_for_wgmma(op: Operation, gpu: str, warps: int) -> bool:
    """Whether `warps` is the most the mma's wgmma takes (its warpgroups stack along M, 64 rows each):
    more would leave it mma.sync. The tensor-core family comes before the register rule: a grouped GEMM's
    128 x 256 tile under three loops asked for 16 warps and fell to mma.sync on sm_90, where NVIDIA's runs
    two consumer warpgroups of m64n256k16; on 8 warps its wgmma takes 244 registers a thread, no spills."""
    from ..tileaa.mma_forms import select_wgmma

    sm = caps(gpu).sm
    return select_wgmma(op, sm, 32 * warps) is not None and select_wgmma(op, sm, 64 * warps) is None


def _more_for_tcgen05(op: Operation, gpu: str, warps: int) -> bool:
    """Whether the mma runs on tcgen05 with twice `warps` but not with `warps`: a 256-row accumulator's
    lanes are read by 8 warps (two per lane quarter), so 4 left a 256 x 16 e4m3 tile on mma.sync where
    NVIDIA's runs two 128-row tcgen05 mmas on 256 threads (found by seed 40)."""
    if not caps(gpu).has("tcgen05"):
        return False
    from .tcgen05_select import choose

    sm = caps(gpu).sm
    return choose(op, sm, 32 * warps) is None and choose(op, sm, 64 * warps) is not None


def _accumulator_weight(op: Operation, gpu: str, threads: int) -> int:
    """How many accumulators' worth of registers a thread needs for the rule above: the
    FMA form keeps each instruction's partial sums and the scales beside the accumulator, and with
    as many warps as plain mma.sync gets it runs out of registers (128 x 128 tiles spill). One where
    the mma runs on tcgen05 with the `threads` the plain count gives and its scales are tiles a
    pipeline can stage (`_stageable`): its accumulator stays in tensor memory and the epilogue reads it
    as any tcgen05 matmul's (NVIDIA's: 256 threads; the warp-specialized form then fits, the producer's
    one warp beside one or two epilogue warpgroups). Other scales (rearranged in registers: the
    sample's 32x4x4 packing; rows at 8-byte strides) keep two: every thread then restages its share of
    them each K step, and the wider CTA spreads that code (twice the LLVM time at 256 x 256 with half)."""
    from ..tileaa.mma_forms import scaled_form
    from .tcgen05_select import choose as on_tcgen05

    sm = caps(gpu).sm
    if caps(sm).blockscale == "native":
        # fp4 operands reach the mma in registers, one element to a register: A's and B's
        # K tiles weigh as much as the accumulator again (128 x 128 x 128: 256 threads, no spills)
        f = scaled_form(op)
        return 2 if f is not None and f.k == 64 else 1
    if on_tcgen05(op, sm, threads) is None or not _stageable(op):
        return 2
    # fp4 on tcgen05: A and B reach the packing in registers, one element to a byte register: beyond
    # a K tile of 128 (NVIDIA's default) they weigh as much as an accumulator (128 x 128 x 256 NVFP4
    # spilled with 128 threads)
    f = scaled_form(op)
    return 2 if f is not None and f.k == 64 and op.operand("lhs").type.shape[-1] > 128 else 1  # type: ignore[union-attr]


def _stageable(op: Operation) -> bool:
    """Both scale tiles are loads (through unit reshapes) from views whose outer strides are known
    16-byte multiples: what a pipeline copies whole, by TMA or in cp.async chunks."""
    from ..tileaa.facts import ViewFacts
    from ..tileaa.views import cut_from
    from .tcgen05_roles import staged_load as _source

    for name in ("lhs_scale", "rhs_scale"):
        load = _source(op.operand(name))
        facts = getattr(cut_from(load), "facts", None) if load is not None else None
        if not isinstance(facts, ViewFacts) or any(d % 16 for d in facts.stride_div[:-1]):
            return False
    return True
