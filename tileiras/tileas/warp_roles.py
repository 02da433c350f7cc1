"""Pass `plan-warp-roles`'s decision: whether the kernel's first pipelined loop of its top-level block
or of branches of `if`s there (or, where there is none, the pipelined loop a persistent tile loop runs
once a tile: `persistent`) is
warp-specialized, in which form, with which roles, register budgets (setmaxnreg), named barriers
and occupancy, or why not (`decide`; the forms are described in lowering/warp_specialize.py, which
emits them). Decided from the IR, its layouts and its planned pipelines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir.core import Operation, Value, enclosing
from ..ir.record import record
from ..schedule.named_barriers import BarrierUse, NamedBarrier, NamedBarrierError, bind
from ..tileaa.hints import occupancy as hinted_occupancy

if TYPE_CHECKING:
    from .plan import KernelFacts

PRODUCER_THREADS = 128


# Targets whose consumers issue mma.sync in the sm_90 form are `Caps.mma_sync_roles` (sm_120's tensor cores
# have neither wgmma nor tcgen05; NVIDIA's compiler specializes its matmuls and attention there the same
# way: a TMA producer warp giving registers back, consumer warpgroups).
# register budgets (setmaxnreg) by the consumers' warpgroups: (producer dec, consumer inc or 0).
# NVIDIA's sm_90 matmuls (256 threads, TMA producer) give the non-consumer warps 32. Our cp.async
# producer keeps its chunk addresses live, a register pair or so per 16-byte copy of a stage,
# and the counts are the least that ptxas compiles spill-free (f16, K tile 64): 128x128 (16
# copies a thread): 100 bytes of spills at 32, 12 at 56, none at 72; 128x256 (24 copies): 4
# bytes at 72, none at 80. With one consumer warpgroup (256 threads: 255 registers at launch)
# the consumers keep their budget; with two (384 threads, 168 at launch) they take what the
# producer gave back: (65536 - 128 * 80) / 256 = 216.
REGISTERS = {1: (72, 0), 2: (80, 216)}
# Where the consumers take nothing back (one warpgroup, one CTA an SM), a producer copying from rows that are not
# contiguous keeps more: 56 registers and one a copy of a stage (`WarpSplit.copies`), 72 at least. A persistent
# row kernel's 4096 f32 row whose stride is unknown, copied in 4-byte chunks (32 a thread, their offsets hoisted
# out of the loop over rows), spilled 24 bytes at 72 on sm_120, none at 80. (Beside two consumer warpgroups the
# budget stays: a tf32 GEMM's 256 x 128 tile without facts spilled 683 instructions at 152 and 176, 631 at 80
# and 216.)
COPY_BASE_REGISTERS = 56


# A producer that stages loads through its registers (no cp.async form, nor TMA, legal: a kernel without
# facts) keeps its launch budget, and so do the consumers: at 72 it spills its element loads (on sm_90 an f16
# decode's 64 x 256 K tile, 128 loads a thread: 20 spill instructions; an attention's: 66; at its launch budget
# none). NVIDIA's producer warps of such kernels load element by element without setmaxnreg too. Where an
# occupancy hint asks for two CTAs an SM, the CTA launches with 128 registers a thread, too few for the
# consumers' loop: the producer gives back to SHARED_LOADS_REGISTERS and the consumers take the rest of the
# CTA's half (an e4m3 attention at d = 128 without facts on sm_90: 302 spill instructions with no setmaxnreg,
# 10 at 72 and 184, 23 at 80, 39 at 88, 57 at 96, 12 at 56; NVIDIA's 36). By where the loop's accumulators
# live (`WarpSplit.tmem_accumulators`): in the consumers' registers, 72; in tensor memory (sm_100), the consumers
# need fewer and the producer's element addresses more (the same attention on sm_100: 4 spill instructions in the
# producer at 72, 2 at 80, none at 88 and 96; NVIDIA's none).
SHARED_LOADS_REGISTERS = {False: 72, True: 88}
#
# A TMA producer keeps no addresses (one thread, a few coordinates): 40 registers, as NVIDIA's
# (32) plus room for the slice it recomputes; two consumer warpgroups take (65536 - 128 * 40) / 256.
# One consumer warpgroup whose occupancy hint asks for 2 CTAs an SM launches with 128 registers and
# takes its share of the half (`occupancy`, `WarpSplit.registers`): (32768 - 128 * 40) / 128 = 216.
TMA_REGISTERS = {1: (40, 0), 2: (40, 232)}



# The tcgen05 form's roles beside its epilogue warpgroups. Where the producer is one TMA warp or the epilogue
# warps themselves (tileas/settled_split.py), the TMA warp, the MMA warp and idle warps make one whole warpgroup
# (`WarpSplit.idle` pads it), as NVIDIA's sm_100 matmuls do, which gives its registers back (setmaxnreg needs
# every warp of a warpgroup): by the epilogue's warpgroups, (the role warpgroup's setmaxnreg.dec, the
# epilogue's setmaxnreg.inc or 0). One epilogue warpgroup: 256 threads launch with 255 registers, nothing more
# to take. Two (M or N 256): 384 threads launch with 168 and the epilogue takes what the role warpgroup gave
# back, (65536 - 128 * 40) / 256 = 232 (NVIDIA's: 32, 232: an int8 split-K epilogue loading its stages element
# by element spilled at 168, none after the .inc); tcgen05_roles.loop_mmas still sizes whole accumulator reads by
# the launch budget. 40 as the sm_90 TMA
# producer's: room for the tile index arithmetic a persistent loop's TMA and MMA threads recompute. A cp.async
# producer warpgroup of its own (beside a block-scaled mma) has the MMA warp after it, a warpgroup's only warp:
# no role moves registers there.
ROLE_WARPGROUP = {1: (40, 0), 2: (40, 232)}


_PURE = ("cuda_tile.constant", "cuda_tile.make_token", "cuda_tile.make_tensor_view",
         "cuda_tile.make_partition_view", "cuda_tile.get_tile_block_id", "cuda_tile.get_num_tile_blocks",
         "cuda_tile.assume", "cuda_tile.get_index_space_shape", "cuda_tile.get_tensor_shape",
         "nv_tileaa.cluster_ctarank")


@record(frozen=False)
class WarpSplit:
    loop: Operation
    slice: tuple[Operation, ...]    # top-level ops the producer lowers again, in block order
    producer: str                   # label of the producer's first block
    barriers: tuple = ()            # named_barriers.NamedBarrier: "consumers", "publish"
    emitted: bool = False
    mmas: tuple[Operation, ...] = ()  # tcgen05 form: the mmas the MMA warp issues (else the sm_90 form)
    # the producer role's threads (one warp once TMA-fed: settled_split.settled; 0: the consumers copy, the
    # tcgen05 form's epilogue warps before they read the accumulator, `copiers`)
    producers: int = PRODUCER_THREADS
    attention: bool = False         # the mmas are attention's S and O: the consumers run the softmax
    handshake: object = None        # attention: its mbarriers (tcgen05_buffers.HANDSHAKE)
    note: str = ""                  # sm_100 attention in the "wgmma" form: why its MMA warp could not issue
    min_ctas: int = 1               # CTAs an SM must hold at once (the occupancy hint; `occupancy`)
    scores_shift: int = 0           # attention: columns to the second scores buffer (0: one buffer)
    outer: Optional[Operation] = None   # the persistent loop whose body runs `loop` once a tile (`persistent`)
    outer_slice: tuple[Operation, ...] = ()  # ...and the ops of its body the producer lowers again
    # the `if`s the loop is in, outermost first: (condition, the branch taken is the then branch). A
    # condition is a scalar, the same in every thread of the CTA: the producer takes the branches too
    guards: tuple[tuple[Value, bool], ...] = ()
    guard_slice: tuple[Operation, ...] = ()  # the ops of `slice` the conditions need, lowered before any barrier
    # the producer stages loads element by element through its registers (stage_rings.producer_stages): no role
    # reallocates registers (`registers`)
    loads_in_registers: bool = False
    # tcgen05 form: threads after the MMA warp making the producer's and the MMA warp's one whole warpgroup
    # (`ROLE_WARPGROUP`; settled_split.settle), which exit once it has run setmaxnreg
    idle: int = 0
    # the loop's mma accumulators live in tensor memory (sm_100), not in the consumers' registers
    tmem_accumulators: bool = False
    # the cp.async copies each producer thread issues for a stage from rows that are not contiguous, each an
    # address of its own (settled_split.settle): its budget (`registers`)
    copies: int = 0

    @property
    def form(self) -> str:
        """"tcgen05": an MMA warp runs the loop's mmas, the consumers only the epilogue; "attention":
        an MMA warp (in the producer's warpgroup) issues S and O, the consumers run the softmax;
        "wgmma": the consumers run the loop body, mmas included (sm_90; sm_100's attention where
        the MMA warp cannot issue its mmas)."""
        return "attention" if self.attention else "tcgen05" if self.mmas else "wgmma"

    def registers(self, consumers: int, tma: bool = False) -> tuple[int, int, int]:
        """(threads beside the consumers and the producer role: the tcgen05 form's MMA warp and idle warps; the
        setmaxnreg.dec of the warpgroup beside the consumers; the consumers' setmaxnreg.inc; 0: none) for
        `consumers` threads (`tma`: the producer copies with TMA)."""
        if self.form == "tcgen05":
            if not self.idle:      # (the MMA warp after a producer warpgroup of its own, or alone)
                return 32, 0, 0
            extra, (dec, inc) = 32 + self.idle, ROLE_WARPGROUP[consumers // 128]
        elif self.loads_in_registers and self.min_ctas == 1:
            return 0, 0, 0
        elif self.loads_in_registers:   # two CTAs an SM: each role its part of the CTA's share
            extra, (dec, inc) = 0, (SHARED_LOADS_REGISTERS[self.tmem_accumulators], 0)
        else:
            extra, (dec, inc) = 0, (TMA_REGISTERS if tma else REGISTERS)[consumers // 128]
            if not tma and not inc and self.min_ctas == 1:     # (the consumers take nothing back)
                launched = min(255, 65536 // (consumers + PRODUCER_THREADS)) // 8 * 8
                dec = min(max(dec, -(-(COPY_BASE_REGISTERS + self.copies) // 8) * 8), launched)
        if self.min_ctas > 1:   # the consumers take what the warpgroup beside them gave back of the CTA's share
            inc = (65536 // self.min_ctas - PRODUCER_THREADS * dec) // consumers // 8 * 8
        return extra, dec, inc

    def starved(self, consumers: int) -> str:
        """Why the split cannot give its cp.async producer the registers its copies need ("" where it can):
        beside two consumer warpgroups the producer's budget is fixed (`REGISTERS`), and a stage copied from
        rows that are not contiguous takes an address a copy (`COPY_BASE_REGISTERS` and one a copy). A
        chunked f32 RMSNorm of 4 x 4096 without facts (128 four-byte copies a producer thread) spilled 167
        instructions in its producer at 80 registers; its loop pipelined without roles (the consumers issue
        its copies), none, as NVIDIA's, which does not specialize it."""
        dec, inc = REGISTERS.get(consumers // 128, (0, 0))
        if self.form != "wgmma" or self.loads_in_registers or not inc or not self.copies:
            return ""
        needed = COPY_BASE_REGISTERS + self.copies
        if needed <= dec:
            return ""
        return (f"its producer's {self.copies} cp.async copies a stage need {needed} registers, more than the "
                f"{dec} two consumer warpgroups leave it")

    def copiers(self, consumers: int) -> tuple[int, int]:
        """(the first thread, the number of threads) of the role that copies the ring's loads, beside
        `consumers` consumer threads."""
        return (consumers, self.producers) if self.producers else (0, consumers)

    def barrier(self, name: str) -> "NamedBarrier":
        return next(b for b in self.barriers if b.name == name)


def ring_loop(split: Optional[WarpSplit], loop: Operation) -> Operation:
    """The op whose lifetime loop `loop`'s stage ring spans: the loop's own, or the persistent loop around
    a warp-specialized one (its producer fills the next tile's stages while the consumers store this
    tile: the epilogue's buffers must not share the ring's bytes)."""
    return split.outer if split is not None and split.loop is loop and split.outer is not None else loop


def enclosing_loop(op: Operation) -> "Operation | None":
    """The nearest `for` or `loop` around `op`, if any."""
    return enclosing(op, ("cuda_tile.for", "cuda_tile.loop"))


def frees_barriers(split: Optional[WarpSplit], loop: Operation, entry: Operation, free: bool) -> bool:
    """Whether pipelined loop `loop`'s full / empty mbarriers live as its ring does (its lifetime, the
    ring loop's: `ring_loop`), not to the kernel's end: only where the plan frees them (`free`,
    shared_choice: the kernel fits no other way) and the loop invalidates them once done
    (lowering/pipelined_loop.finish, end_persistent: then a CTA barrier, before their bytes serve
    another buffer, as the PTX ISA asks of an mbarrier's memory), so the buffers after the loop may take
    them (a sub-tiled epilogue's 64 KB exchange on sm_120). Never where an MMA warp runs the loop (its
    last stages' empty arrivals are never waited for: the barriers stay valid), the CTAs of a cluster
    signal each other's barriers, or a loop around the ring runs it again (its next run's
    initialization would write the bytes with no barrier after their other use). plan-shared-memory
    decides it for each loop (`KernelPlan.barriers_freed`); the lowering reads it."""
    from ..tileaa.clusters import CLUSTER_ATTR

    return free and not (split is not None and split.loop is loop and split.form == "tcgen05"
                         or CLUSTER_ATTR in entry.attributes or enclosing_loop(ring_loop(split, loop)) is not None)


def barriers_freed(split: Optional[WarpSplit], loops: tuple[Operation, ...], entry: Operation,
                   free: bool) -> dict[Operation, bool]:
    """plan-shared-memory's decision for each of `loops` (those whose stages mbarriers hand over):
    whether its mbarriers are freed after it (`frees_barriers`; `KernelPlan.barriers_freed`)."""
    return {loop: frees_barriers(split, loop, entry, free) for loop in loops}


def mma_sync_roles(k: "KernelFacts") -> bool:
    """Whether the kernel's warp roles (and its TMA stages) are those of mma.sync consumers: on a TMA
    target built on mma.sync (sm_120), or on a tcgen05 target where no mma of the kernel is tcgen05 (tiles
    under its smallest M of 64, which NVIDIA's specializes there the same way: a TMA producer warp,
    consumer warpgroups issuing mma.sync from ldmatrix)."""
    if not k.caps.has("tma") or not has_mma(k):
        return False
    if k.caps.has("tcgen05"):
        return not getattr(k.assignment, "tcgen05_layouts", None)
    return k.caps.mma_sync_roles


def has_mma(k: "KernelFacts") -> bool:
    """Whether the kernel runs an mma. One that does not (a row kernel) has the sm_90 form on every TMA
    target: a TMA producer warpgroup, consumer warpgroups computing in registers, whatever the
    target's tensor cores (NVIDIA's specializes its row kernels so on sm_90, sm_100 and sm_120)."""
    from ..tileaa.mma_operands import MMAS

    return any(op.name in MMAS for op in k.entry.walk())


def pure(op: Operation) -> bool:
    """No memory, no thread-indexed layout: 0-d scalars, views, constants."""
    from ..ir.types import TileType

    if op.name in _PURE:
        return True
    return not op.regions and all(isinstance(r.type, TileType) and not r.type.shape for r in op.results) \
        and op.name.startswith("cuda_tile.") and not any(w in op.name for w in ("load", "store", "atomic", "print"))


def _first_pipelined(ops: list, pipelines: dict, guards: tuple = (), before: tuple = ()) \
        -> Optional[tuple[Operation, tuple, tuple]]:
    """The first pipelined loop among `ops` or in the branches of their `if`s: (loop, the `if`s'
    conditions and branches leading to it, the ops that run before it on that path, in order)."""
    for op in ops:
        if op in pipelines:
            return op, guards, before
        if op.name == "cuda_tile.if":
            for taken, region in zip((True, False), op.regions):
                found = _first_pipelined(region.blocks[0].operations, pipelines,
                                         guards + ((op.operands[0], taken),), before) if region.blocks else None
                if found is not None:
                    return found
        before += (op,)
    return None


def _producer_slice(block_ops: list, loop: Operation, loads: tuple, outer: Optional[Operation] = None,
                    guards: tuple = (), index_ops: tuple = ()) -> tuple[Optional[tuple], str]:
    """(the top-level ops, the persistent loop's body ops) before `loop` that its staged loads' views
    and indices, its bounds and the conditions of the `if`s it is in (`guards`) depend on, each in block
    order (None and why when one of them is not pure). `block_ops`: the ops that run before `loop` (or
    `outer`), then it. With `outer` (a persistent loop, whose body holds `loop`) the top-level ops are
    those the body's ops and the outer bounds need. `index_ops`: the loop body's ops computing the
    indices (PipelinePlan.index_ops), which the producer computes with its copies: what they read."""
    iv = loop.regions[0].block.arguments[0]
    computed = {r for op in index_ops for r in op.results}
    wanted: list[Value] = [loop.operand(n) for n in ("lowerBound", "upperBound", "step")]
    wanted += [cond for cond, _ in guards]
    for load in loads:
        wanted.append(load.operand("view"))
        wanted.extend(v for v in load.operand_group("index") if v is not iv and v not in computed)
    wanted.extend(v for op in index_ops for v in op.operands if v is not iv and v not in computed)
    if outer is None:
        top, why = _slice(block_ops, loop, wanted)
        return (None, why) if top is None else ((top, ()), "")
    body = outer.regions[0].block
    inner, outside = _slice(list(body.operations), loop, wanted, tuple(body.arguments[1:]), escape=True)
    if inner is None:
        return None, outside
    wanted = [*outside, *(outer.operand(n) for n in ("lowerBound", "upperBound", "step"))]
    top, why = _slice(block_ops, outer, wanted)
    return (None, why) if top is None else ((top, inner), "")


def _slice(block_ops: list, before: Operation, wanted: list, carried: tuple = (),
           escape: bool = False) -> tuple[Optional[tuple], Any]:
    """The pure ops of `block_ops` before `before` that `wanted` depends on, in block order (`carried`:
    the persistent loop's carried values, which the producer does not have). With `escape` (the
    enclosing block's turn comes next) values made outside `block_ops` are handed back instead of the reason."""
    position = {op: i for i, op in enumerate(block_ops)}
    chosen: set = set()
    outside: list = []
    while wanted:
        value = wanted.pop()
        owner = getattr(value, "owner", None)
        if any(value is c for c in carried):
            return None, "its copies depend on a value the persistent loop carries"
        if not isinstance(owner, Operation):
            continue      # a kernel argument, or the persistent loop's index
        if owner in chosen:
            continue
        if owner not in position and escape:
            outside.append(value)
            continue
        if owner not in position or position[owner] >= position[before]:
            return None, f"'{owner.name}' that its copies need is not before the loop"
        if not pure(owner):
            return None, f"its copies depend on '{owner.name}'"
        chosen.add(owner)
        wanted.extend(owner.operands)
    ops = tuple(sorted(chosen, key=position.__getitem__))
    return (ops, outside) if escape else (ops, "")


def decide(k: "KernelFacts") -> tuple[Optional[WarpSplit], str]:
    """The warp split of the kernel's first top-level pipelined loop, or why there is none (the
    nv_tileas pass `plan-warp-roles`, tileas/plan.py: decided from the IR, its layouts and its
    planned pipelines; `lowering.warp_specialize.begin` lowers it)."""
    if not k.caps.has("tma"):
        return None, ("warp specialization is built for sm_90 (wgmma), sm_100 / sm_103 (tcgen05) and "
                      "sm_120 / sm_121 (mma.sync)")
    if k.threads % 128 or k.threads // 128 not in REGISTERS:
        return None, f"{k.threads} consumer threads are not one or two whole warpgroups"
    ops = list(k.entry.regions[0].block.operations)
    placed = _first_pipelined(ops, k.pipelines or {})
    outer, guards, before = None, (), ops
    if placed is not None:
        loops, guards, before = [placed[0]], placed[1], [*placed[2], placed[0]]
    else:
        outer, inner, why = persistent(k, ops)
        if outer is None:
            return None, why
        loops = [inner]
    note = ""
    loads = k.pipelines[loops[0]].loads
    mma_sync = mma_sync_roles(k)
    # mma.sync consumers launch with what the CTA's threads (and an occupancy hint) leave them, and ptxas
    # allocates within that, whatever setmaxnreg.inc grants later: ldmatrix'd fragments fit an occupancy
    # hint's 128, as NVIDIA's; fragments gathered element by element (8-bit or 32-bit N-major operands)
    # need GATHER_MARGIN beside the loop's accumulators
    gathered = mma_sync and k.assignment is not None and not all(
        k.assignment.only_ldmatrix_reads(load.results[0]) for load in loads
        if k.assignment.is_shared_operand(load.results[0]))
    launch = launch_registers(k, occupancy_hint(k))
    if gathered and _loop_accumulator_registers(k, loops[0]) + GATHER_MARGIN > launch:
        hint = f" (the occupancy hint asks {occupancy_hint(k)} CTAs an SM)" if occupancy_hint(k) > 1 else ""
        return None, (f"{k.threads // 128} consumer warpgroup{'s' if k.threads > 128 else ''} would launch with "
                      f"{launch} registers a thread{hint}, and operands gathered element by element (no ldmatrix) "
                      "need more beside the loop's accumulators")
    mmas: tuple = ()
    attention: Optional[str] = None     # sm_100 attention: "" (`consumers_issue`)
    if k.caps.has("tcgen05") and not mma_sync and has_mma(k):
        from .tcgen05_roles import attention_mmas, consumers_issue, loop_mmas   # (sm_100 kernels only)

        if k.threads // 128 not in ROLE_WARPGROUP:
            return None, (f"{k.threads // 128} epilogue warpgroups: the larger CTA would launch with 128 "
                          f"registers a thread, fewer than the epilogue's tensor-memory load needs")
        mmas, why = loop_mmas(k, loops[0], loads)
        attention = consumers_issue(k, loops[0]) if not mmas else None
        if not mmas and attention != "":
            return None, attention or why
        if outer is not None and attention is not None:
            return None, "a persistent loop's K loop is warp-specialized with an MMA warp, not attention's"
        if not mmas:     # attention: its MMA warp where it can issue both mmas, else the consumers do
            mmas, note = attention_mmas(k, loops[0], loads)
    found, why = _producer_slice(before, loops[0], loads, outer, guards, k.pipelines[loops[0]].index_ops)
    if found is None:
        return None, why
    at = ops.index(outer) if outer is not None else \
        sum(1 for op in before[:-1] if op.parent is k.entry.regions[0].block)   # the top-level op holding the loop
    extra = PRODUCER_THREADS + (32 if mmas and attention is None else 0)  # all meet at publish (the MMA warp)
    try:   # the consumers meet among themselves all through the kernel, everyone once at the loop
        barriers = bind([BarrierUse("consumers", k.threads, (0, len(ops))),
                         BarrierUse("publish", k.threads + extra, (at, at + 1))])
    except NamedBarrierError as err:
        return None, str(err)
    guard_slice = _slice(before, loops[0], [cond for cond, _ in guards])[0] if guards else ()
    # the occupancy hint holds for the forms whose consumers compute in registers beside a producer warpgroup
    # (sm_90's, mma.sync consumers, sm_100's attention whose consumers issue, a row kernel's on every target)
    consumers_compute = attention == "" or k.caps.has("wgmma") or mma_sync or not has_mma(k)
    return WarpSplit(loops[0], found[0], "", barriers, mmas=mmas, outer=outer, outer_slice=found[1], guards=guards,
                     guard_slice=guard_slice or (),
                     attention=bool(mmas) and attention is not None, note=note,
                     min_ctas=occupancy(k) if k.threads == 128 and consumers_compute else 1,
                     tmem_accumulators=any(map(k.assignment.is_tcgen05, loops[0].walk()))), ""


def _made_each_tile(load: Operation, outer: Operation) -> bool:
    """Whether `load`'s tensor view is made inside `outer` of parts the kernel computes (a TMA copy of it goes
    through a map the kernel makes, lowering/kernel_maps.py)."""
    from ..tileaa.facts import view_sources
    from ..tileaa.views import cut_from
    from ..transforms.rewrite import inside_op

    view = cut_from(load) if load.operand("view") is not None else None
    made = getattr(view, "owner", None)
    return isinstance(made, Operation) and inside_op(made, outer) and view_sources(view)[0] is None


def persistent(k: "KernelFacts", ops: list) -> tuple[Optional[Operation], Optional[Operation], str]:
    """(the persistent loop, the pipelined loop its body runs once a tile) or why there is none: a
    top-level `for` over output tiles whose body holds one pipelined loop at its top level, after only
    pure ops (index arithmetic), with no `continue` or `break` but its last op (the inner loop's end
    then reaches the next tile: the stage ring's count carries over, lowering/warp_specialize.py). Built
    for the sm_90 form (wgmma, mma.sync or register consumers) and sm_100's MMA warp (`decide`: a matmul's
    K loop), one CTA's own copies (no cluster multicast, no CTA pair)."""
    from ..tileaa.clusters import CLUSTER_ATTR

    none, pipelines = "no pipelined loop in the kernel's top-level block or in branches of its ifs", k.pipelines or {}
    for outer in (op for op in ops if op.name == "cuda_tile.for"):
        body = list(outer.regions[0].block.operations)
        inner = [op for op in body if op in pipelines]
        if not inner or any(op in pipelines for op in outer.walk() if op is not outer and op not in inner):
            continue
        if len(inner) > 1:
            return None, None, "a persistent loop runs several pipelined loops"
        if k.entry.attributes.get(CLUSTER_ATTR) is not None:
            return None, None, none     # (multicast and CTA pairs are not built for a persistent loop)
        at = body.index(inner[0])
        if k.caps.has("tma") and any(_made_each_tile(load, outer) for load in pipelines[inner[0]].loads):
            return None, None, ("a pipelined load's view is made each tile from computed values: its tensor map "
                                "too (lowering/kernel_maps.py), which the producer's copies would not see")
        if not all(pure(op) or _in_registers(op) for op in body[:at]):
            return None, None, ("the persistent loop computes more than indices before its pipelined loop: "
                                f"'{next(op for op in body[:at] if not pure(op) and not _in_registers(op)).name}'")
        exits = [op for op in outer.walk() if op.name in ("cuda_tile.continue", "cuda_tile.break")
                 and _loop_of(op) is outer]
        if any(op is not body[-1] for op in exits):
            return None, None, "the persistent loop leaves a tile early (continue or break before its end)"
        return outer, inner[0], ""
    return None, None, none


def _in_registers(op: Operation) -> bool:
    """A layout conversion recomputed in its target layout (an accumulator's zeros): no shared memory."""
    return op.name == "nv_tileas.convert_layout" and bool(op.attributes.get("rematerialize", False))


def _loop_of(op: Operation) -> Optional[Operation]:
    """The innermost loop around `op`."""
    block = op.parent
    while block is not None and block.parent is not None:
        owner = block.parent.parent
        if owner is None or owner.name in ("cuda_tile.for", "cuda_tile.loop"):
            return owner
        block = owner.parent
    return None


def occupancy_hint(k: "KernelFacts") -> int:
    """The CTAs per SM the entry's `occupancy` hint asks for on this target (1: none)."""
    return hinted_occupancy(k.entry, k.sm)


RESERVED = 1024     # shared memory the driver reserves for each CTA (smem_per_sm - smem_per_block)


def occupancy_share(k: "KernelFacts") -> int:
    """The shared memory one CTA may take where the entry's occupancy hint asks for n CTAs an SM:
    the SM's shared memory over n, less the 1 KB the driver reserves for each CTA; the target's
    per-block limit otherwise. A ring deeper than that share keeps the SM to fewer CTAs than asked
    (the ragged bmm at occupancy 2: 201 KiB on sm_90, NVIDIA's 89)."""
    n = occupancy_hint(k)
    return k.caps.smem_per_block if n <= 1 else min(k.caps.smem_per_block, k.caps.smem_per_sm // n - RESERVED)


def occupancy(k: "KernelFacts") -> int:
    """The CTAs per SM the entry's `occupancy` hint asks for on this target (1: none). NVIDIA's keeps
    it for its 256-thread attentions: `.maxnreg 128` at occupancy 2, the consumers' setmaxnreg.inc
    taking what the producer warpgroup gave back (224 beside 32); the two-consumer-warpgroup form
    (384 threads, 168 registers at launch) has no room to halve."""
    value = occupancy_hint(k)
    if value == 1:
        return 1
    # kept where every producer budget fits the launch and the consumers' share exceeds it (setmaxnreg.dec
    # and .inc never go the other way): occupancy 2 and 3 with one consumer warpgroup
    launch = launch_registers(k, value)
    dec = max(d for d, _ in (*REGISTERS.values(), *TMA_REGISTERS.values()))
    if _accumulator_registers(k) + MMA_MARGIN > launch:
        return 1
    return value if dec <= launch <= (65536 // value - PRODUCER_THREADS * dec) // k.threads else 1


# Registers a consumer's wgmma needs beyond its accumulator's (operand addresses, descriptors, loop state): ptxas
# asked 154 for a 64 x 256 f32 accumulator (128 a thread) and refused the 128 an occupancy hint of 2 leaves the
# split's consumers at launch (setmaxnreg.inc does not raise what ptxas allocates within): an f16 GEMM and a tf32
# bmm 64 x 256 on sm_90 failed to compile. NVIDIA's keeps such kernels to one CTA an SM (255 registers).
MMA_MARGIN = 32


# Registers mma.sync consumers gathering their fragments element by element need beside the loop's
# accumulators (addresses, the gathered elements, loop state): mm_i8_256x128x64 spilled with 168 beside a
# 128-register accumulator, tg_fmha_e5m2_d128_causal_64x64 with 128 beside 96 (its S and O); a tf32 bmm
# 128 x 64 x 32 (64 beside) compiles within 128 without spills, as NVIDIA's.
GATHER_MARGIN = 64


def launch_registers(k: "KernelFacts", ctas: int = 1, extra: int = 0) -> int:
    """Registers a thread of the split CTA (the consumers, the producer warpgroup and `extra` threads: an
    MMA warp) share, `ctas` of them an SM (the launch caps it at 255)."""
    return 65536 // (k.threads + PRODUCER_THREADS + extra) // ctas // 8 * 8


def _registers(k: "KernelFacts", op: Operation) -> int:
    """32-bit registers a consumer thread holds of mma `op`'s accumulator, in registers."""
    from ..ir.types import TileType, storage_bytes

    tile = op.results[0].type
    return -(-tile.num_elements * storage_bytes(tile.element) // 4 // k.threads) if isinstance(tile, TileType) else 0


def _loop_accumulator_registers(k: "KernelFacts", loop: Operation) -> int:
    """32-bit registers a consumer thread holds of the accumulators of the mmas in `loop`, together."""
    shapes = k.assignment.mma_shapes if k.assignment is not None else {}
    return sum(_registers(k, op) for op in loop.walk() if op in shapes)


def _accumulator_registers(k: "KernelFacts") -> int:
    """32-bit registers a consumer thread holds of the kernel's largest tensor-core accumulator (wgmma's and
    mma.sync's live in registers; tcgen05's in tensor memory)."""
    if k.assignment is None:
        return 0
    tcgen05 = getattr(k.assignment, "tcgen05_layouts", None) or {}
    return max((_registers(k, op) for op in k.assignment.mma_shapes if op not in tcgen05), default=0)
