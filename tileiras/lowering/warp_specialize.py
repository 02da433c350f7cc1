"""Warp-specialized pipelines (sm_90, and sm_120 with mma.sync): a producer warpgroup that only copies, consumer warpgroups
that only compute.

The CTA grows by one warpgroup: threads C .. C + 127 after the C consumer threads the layouts
were assigned for. At the kernel's start the producer branches away; the consumers run the
whole kernel (every CTA barrier is then the consumers' named barrier). At the loop, a
consumer initializes the pipeline's mbarriers and the CTA meets once on the `publish` named
barrier (consumers and producer) so the producer sees them. The ids are bound from the roles'
lifetimes (schedule/named_barriers.py: 1..15, never two live uses on one id). The producer gives registers back
(`setmaxnreg.dec`), computes only the backward slice of what its copies need (the views, their
indices, the loop bounds: pure scalar code, lowered again in its own blocks), then for every
iteration j waits for the stage's `empty` barrier (parity ((j / S) & 1) ^ 1: a fresh barrier
counts as having completed the phase before its first, so the first S fills do not wait),
issues the iteration's cp.async copies (its 128 threads share the chunks) with a `.noinc`
arrival on the stage's `full` barrier, and exits. A TMA-fed loop (tma_copy.py) needs one
producer thread: the others exit after `publish`, and it prefetches the tensor maps, then per
iteration waits `empty`, announces the stage's bytes on `full` and issues the boxes. The consumers take registers
(`setmaxnreg.inc`) where the larger CTA left them short, wait for `full` before an iteration's
first staged read and arrive on `empty` at its end.

Chosen for the first pipelined loop of the kernel's top-level block when the target has
setmaxnreg (sm_90), the consumers are one or two whole warpgroups, and the producer's slice is
pure (no memory, no thread-indexed values).

On sm_100 / sm_103 the same producer feeds an MMA warp instead (warp_specialize_tcgen05.py, the
`tcgen05` form): the CTA grows by the producer warpgroup and an MMA warp (a whole warpgroup
where the registers must move, warp_specialize_tcgen05.ROLES), and the consumers become the
epilogue warps and skip the loop. Where that producer copies by TMA it is one warp, not a
warpgroup (`shrink`: the form gives no role setmaxnreg, which needs whole warpgroups). sm_100
attention keeps the producer warpgroup (setmaxnreg as on sm_90), whose second warp issues the
MMAs while the consumers run the softmax (the `attention` form, warp_specialize_tcgen05.py).
Every role's loop over the iterations is one `role_loop`.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional

from ..ir.core import Operation, Value
from ..ir.record import record
from ..schedule.named_barriers import BarrierUse, NamedBarrier, NamedBarrierError, bind
from .kernel import KernelLowering

if TYPE_CHECKING:
    from ..tileas.plan import KernelFacts
    from . import mbarrier
    from .pipelined_loop import ActivePipeline

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
# A TMA producer keeps no addresses (one thread, a few coordinates): 40 registers, as NVIDIA's
# (32) plus room for the slice it recomputes; two consumer warpgroups take (65536 - 128 * 40) / 256.
# One consumer warpgroup whose occupancy hint asks for 2 CTAs an SM launches with 128 registers and
# takes its share of the half (`occupancy`, `WarpSplit.registers`): (32768 - 128 * 40) / 128 = 216.
TMA_REGISTERS = {1: (40, 0), 2: (40, 232)}
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
    producers: int = PRODUCER_THREADS  # the producer role's threads (one warp once TMA-fed: `shrink`)
    attention: bool = False         # the mmas are attention's S and O: the consumers run the softmax
    handshake: object = None        # attention: its mbarriers (warp_specialize_tcgen05.HANDSHAKE)
    note: str = ""                  # sm_100 attention in the "wgmma" form: why its MMA warp could not issue
    min_ctas: int = 1               # CTAs an SM must hold at once (the occupancy hint; `occupancy`)
    scores_shift: int = 0           # attention: columns to the second scores buffer (0: one buffer)

    @property
    def form(self) -> str:
        """"tcgen05": an MMA warp runs the loop's mmas, the consumers only the epilogue; "attention":
        an MMA warp (in the producer's warpgroup) issues S and O, the consumers run the softmax;
        "wgmma": the consumers run the loop body, mmas included (sm_90; sm_100's attention where
        the MMA warp cannot issue its mmas)."""
        return "attention" if self.attention else "tcgen05" if self.mmas else "wgmma"

    def registers(self, consumers: int, tma: bool = False) -> tuple[int, int, int, int]:
        """(MMA role's threads, setmaxnreg of producer, MMA role, consumers; 0: none) for `consumers`
        threads (`tma`: the producer copies with TMA)."""
        from .warp_specialize_tcgen05 import ROLES

        if self.form == "tcgen05":
            return ROLES[consumers // 128]
        dec, inc = (TMA_REGISTERS if tma else REGISTERS)[consumers // 128]
        if self.min_ctas > 1:   # the consumers take what the producer gave back of the CTA's share
            inc = (65536 // self.min_ctas - PRODUCER_THREADS * dec) // consumers // 8 * 8
        return 0, dec, 0, inc

    def barrier(self, name: str) -> "NamedBarrier":
        return next(b for b in self.barriers if b.name == name)


LOOP_IDS_FROM = 1_000_000   # metadata numbers no other part of a module uses
_loop_ids = itertools.count(LOOP_IDS_FROM, 2)


def restart_loop_ids() -> None:
    """Number the next module's loop metadata from the start: the same module, the same LLVM IR,
    whatever the process lowered before (another target, another compile in a worker)."""
    global _loop_ids
    _loop_ids = itertools.count(LOOP_IDS_FROM, 2)


def rolled(k: KernelLowering) -> str:
    """The `!llvm.loop` attachment that keeps a role's loop rolled: unrolled by the stage count
    (which makes the stage a constant), LLVM copies every copy or MMA of the body that many times,
    where NVIDIA's loops issue each once."""
    n = next(_loop_ids)
    k.globals += [f"!{n} = distinct !{{!{n}, !{n + 1}}}", f'!{n + 1} = !{{!"llvm.loop.unroll.disable"}}']
    return f", !llvm.loop !{n}"


@record(frozen=False)
class RoleLoop:
    """One role's copy of the pipelined loop, open between `role_loop`'s head and latch."""
    iv: str                  # the induction variable (the loop's own type)
    j: str                   # the iteration's number from 0 (i32): the stage ring's use count
    stage: str               # j mod stages (i32)
    stages: int
    tag: str                 # the value-name tag of the role's code

    def wait(self, k: KernelLowering, bars: "mbarrier.BarrierArray", what: str, free: bool = False) -> None:
        """Wait for this iteration's phase of the stage's barrier in `bars` (`free`: the phase before it,
        as a producer waits for `empty`: a fresh barrier counts as having completed it)."""
        from . import mbarrier

        if free:
            parity = k.b.op(f"xor i32 {mbarrier.phase_parity(k, self.j, self.stages)}, 1", self.tag)
            mbarrier.wait(k, mbarrier.address(k, bars, self.stage), parity, what)
        else:
            mbarrier.wait(k, mbarrier.address(k, bars, self.stage), mbarrier.phase_parity(k, self.j, self.stages),
                          what)


@contextmanager
def role_loop(k: KernelLowering, p: "ActivePipeline", name: str, tag: str, lb: str, ub: str,
              step: str) -> Iterator[RoleLoop]:
    """A role's own loop over the pipelined loop's iterations (blocks `{name}_head`, `_body`, `_done`):
    the body runs inside the `with`, which leaves the builder in `{name}_done`. Kept rolled (`rolled`):
    the stage is a value, each copy or MMA of the body issued once."""
    head, body, done = k.b.label(f"{name}_head"), k.b.label(f"{name}_body"), k.b.label(f"{name}_done")
    entry = k.b.current_block
    k.b.br(head)
    k.b.start_block(head)
    iv, j = k.b.fresh(f"{name[0]}iv"), k.b.fresh(f"{name[0]}j")
    pos = len(k.b.lines)
    k.b.cond_br(k.b.op(f"icmp {'ult' if p.unsigned else 'slt'} {p.ity} {iv}, {ub}", tag), body, done)
    k.b.start_block(body)
    yield RoleLoop(iv, j, k.b.op(f"urem i32 {j}, {p.stages}", tag), p.stages, tag)
    iv_next, j_next = k.b.op(f"add {p.ity} {iv}, {step}", tag), k.b.op(f"add i32 {j}, 1", tag)
    latch = k.b.current_block
    k.b.emit(f"br label %{head}{rolled(k)}")
    k.b.lines[pos:pos] = [f"  {iv} = phi {p.ity} [ {lb}, %{entry} ], [ {iv_next}, %{latch} ]",
                          f"  {j} = phi i32 [ 0, %{entry} ], [ {j_next}, %{latch} ]"]
    k.b.start_block(done)


def mma_sync_roles(k: "KernelFacts | KernelLowering") -> bool:
    """Whether the kernel's warp roles (and its TMA stages) are those of mma.sync consumers: on a TMA
    target built on mma.sync (sm_120), or on a tcgen05 target where no mma of the kernel is tcgen05 (tiles
    under its smallest M of 64, which NVIDIA's specializes there the same way: a TMA producer warp,
    consumer warpgroups issuing mma.sync from ldmatrix)."""
    if not k.caps.has("tma"):
        return False
    if k.caps.has("tcgen05"):
        from ..tileaa.mma_operands import MMAS

        layouts = getattr(k.assignment, "tcgen05_layouts", None)
        return not layouts and any(op.name in MMAS for op in k.entry.walk())
    return k.caps.mma_sync_roles


def _pure(op: Operation) -> bool:
    """No memory, no thread-indexed layout: 0-d scalars, views, constants."""
    from ..ir.types import TileType

    if op.name in _PURE:
        return True
    return not op.regions and all(isinstance(r.type, TileType) and not r.type.shape for r in op.results) \
        and op.name.startswith("cuda_tile.") and not any(w in op.name for w in ("load", "store", "atomic", "print"))


def _producer_slice(block_ops: list, loop: Operation, loads: tuple) -> tuple[Optional[tuple], str]:
    """The top-level ops before `loop` that its staged loads' views and indices and its bounds
    depend on (None and why when one of them is not pure)."""
    iv = loop.regions[0].block.arguments[0]
    wanted: list[Value] = [loop.operand(n) for n in ("lowerBound", "upperBound", "step")]
    for load in loads:
        wanted.append(load.operand("view"))
        wanted.extend(v for v in load.operand_group("index") if v is not iv)
    position = {op: i for i, op in enumerate(block_ops)}
    chosen: set = set()
    while wanted:
        owner = getattr(wanted.pop(), "owner", None)
        if not isinstance(owner, Operation) or owner in chosen:
            continue      # a kernel argument (or already taken)
        if owner not in position or position[owner] >= position[loop]:
            return None, f"'{owner.name}' that its copies need is not before the loop"
        if not _pure(owner):
            return None, f"its copies depend on '{owner.name}'"
        chosen.add(owner)
        wanted.extend(owner.operands)
    return tuple(sorted(chosen, key=position.__getitem__)), ""


def decide(k: "KernelFacts") -> tuple[Optional[WarpSplit], str]:
    """The warp split of the kernel's first top-level pipelined loop, or why there is none (the
    nv_tileas pass `plan-warp-roles`, tileas/plan.py: decided from the IR, its layouts and its
    planned pipelines; `begin` lowers it)."""
    if not k.caps.has("tma"):
        return None, ("warp specialization is built for sm_90 (wgmma), sm_100 / sm_103 (tcgen05) and "
                      "sm_120 / sm_121 (mma.sync)")
    if k.threads % 128 or k.threads // 128 not in REGISTERS:
        return None, f"{k.threads} consumer threads are not one or two whole warpgroups"
    ops = list(k.entry.regions[0].block.operations)
    loops = [op for op in ops if op in (k.pipelines or {})]
    if not loops:
        return None, "no pipelined loop in the kernel's top-level block"
    note = ""
    loads = k.pipelines[loops[0]].loads
    mma_sync = mma_sync_roles(k)
    if mma_sync and k.threads > 128 and k.assignment is not None and not all(
            k.assignment.only_ldmatrix_reads(load.results[0]) for load in loads
            if k.assignment.is_shared_operand(load.results[0])):
        # two consumer warpgroups launch with 168 registers a thread (ptxas allocates within that,
        # whatever setmaxnreg.inc grants later); fragments gathered element by element (8-bit or
        # 32-bit N-major operands) need the unspecialized CTA's 255 (mm_i8_256x128x64 spilled)
        return None, ("two consumer warpgroups would launch with 168 registers a thread, and operands "
                      "gathered element by element (no ldmatrix) need more")
    if mma_sync and _occupancy_hint(k) > 1:
        # the hinted CTAs an SM leave a thread 128 registers at launch, and ptxas compiles the consumers
        # within that whatever setmaxnreg.inc grants (tg_fmha_bwd_dq_f16_d64_64x32 spilled)
        return None, (f"the occupancy hint ({_occupancy_hint(k)} CTAs an SM) leaves the larger CTA 128 registers "
                      "a thread, fewer than the consumers' mma.sync fragments need")
    mmas: tuple = ()
    attention: Optional[str] = None     # sm_100 attention: "" (`consumers_issue`)
    if k.caps.has("tcgen05") and not mma_sync:
        from .warp_specialize_tcgen05 import ROLES, attention_mmas, consumers_issue, loop_mmas

        if k.threads // 128 not in ROLES:
            return None, (f"{k.threads // 128} epilogue warpgroups: the larger CTA would launch with 128 "
                          f"registers a thread, fewer than the epilogue's tensor-memory load needs")
        mmas, why = loop_mmas(k, loops[0], loads)
        attention = consumers_issue(k, loops[0]) if not mmas else None
        if not mmas and attention != "":
            return None, attention or why
        if not mmas:     # attention: its MMA warp where it can issue both mmas, else the consumers do
            mmas, note = attention_mmas(k, loops[0], loads)
    found, why = _producer_slice(ops, loops[0], loads)
    if found is None:
        return None, why
    at = ops.index(loops[0])
    extra = PRODUCER_THREADS     # all meet at publish: the producer, and the MMA warp's role (tcgen05 form)
    if mmas and attention is None:
        from .warp_specialize_tcgen05 import ROLES

        extra += ROLES[k.threads // 128][0]
    try:   # the consumers meet among themselves all through the kernel, everyone once at the loop
        barriers = bind([BarrierUse("consumers", k.threads, (0, len(ops))),
                         BarrierUse("publish", k.threads + extra, (at, at + 1))])
    except NamedBarrierError as err:
        return None, str(err)
    return WarpSplit(loops[0], found, "", barriers, mmas=mmas,
                     attention=bool(mmas) and attention is not None, note=note,
                     min_ctas=occupancy(k) if k.threads == 128 and (attention == "" or k.caps.has("wgmma")) else 1), ""


def _occupancy_hint(k: "KernelFacts | KernelLowering") -> int:
    """The CTAs per SM the entry's `occupancy` hint asks for on this target (1: none)."""
    hints = k.entry.attributes.get("optimization_hints")
    value = hints.get(f"sm_{k.sm}", "occupancy", 1) if hints is not None and hasattr(hints, "get") else 1
    return value if isinstance(value, int) and value > 1 else 1


def occupancy(k: "KernelFacts | KernelLowering") -> int:
    """The CTAs per SM the entry's `occupancy` hint asks for on this target (1: none). NVIDIA's keeps
    it for its 256-thread attentions: `.maxnreg 128` at occupancy 2, the consumers' setmaxnreg.inc
    taking what the producer warpgroup gave back (224 beside 32); the two-consumer-warpgroup form
    (384 threads, 168 registers at launch) has no room to halve."""
    value = _occupancy_hint(k)
    if value == 1:
        return 1
    # kept where every producer budget fits the launch and the consumers' share exceeds it (setmaxnreg.dec
    # and .inc never go the other way): occupancy 2 and 3 with one consumer warpgroup
    launch = 65536 // (k.threads + PRODUCER_THREADS) // value // 8 * 8
    dec = max(d for d, _ in (*REGISTERS.values(), *TMA_REGISTERS.values()))
    return value if dec <= launch <= (65536 // value - PRODUCER_THREADS * dec) // k.threads else 1


def begin(k: KernelLowering) -> None:
    """At the kernel's start: when its pipelined loop will be warp-specialized (the plan's
    decision, `decide`), the producer warpgroup branches away here (its code is emitted at the loop)."""
    from ..ir.record import replace
    from ..tileas.plan import plan_of

    plan = plan_of(k.assignment)  # type: ignore[arg-type]
    k.warp_split_refused = plan.warp_split_refused
    if plan.warp_split is None:
        return
    # this lowering's own copy (it records what it emitted; the padded and unpadded lowerings each start afresh)
    split = k.warp_split = replace(plan.warp_split, producer=k.b.label("producer"))
    k.extra_threads = PRODUCER_THREADS + split.registers(k.threads)[0]
    k.barrier_id, k.barrier_threads = split.barrier("consumers").id, k.threads
    k.schedule_notes.append(f"//   named barriers (bound from the warp roles' lifetimes): "
                            f"{'; '.join(b.describe() for b in split.barriers)}")
    consumers = k.b.label("consumers")
    k.b.cond_br(k.b.op(f"icmp uge i32 {k.tid}, {k.threads}", "ws"), split.producer, consumers)
    k.b.start_block(consumers)


def end(k: KernelLowering) -> None:
    """After the kernel: when the loop was not pipelined after all (its copies were not legal
    cp.async, its stages did not fit), the CTA is launched without the producer (and MMA) warps;
    the branch to them is never taken and the consumers' named barriers are the whole CTA's."""
    split = k.warp_split
    if split is not None and not split.emitted:
        from .tmem import ROLE_EXIT

        k.b.start_block(split.producer)
        k.b.emit(f"ret void {ROLE_EXIT}")
        k.extra_threads = 0


def settle(k: KernelLowering, tma: Optional[dict], loads: tuple) -> None:
    """Once the pipeline's copy mechanism is known (`tma`: the loads TMA copies): a TMA-fed
    tcgen05-form producer is one warp (`shrink`); the attention form's MMA warp is the producer
    warpgroup's second warp, which needs every load copied by TMA (one thread: cp.async copies
    take the whole warpgroup), else the consumers issue the mmas themselves (the "wgmma" form)."""
    from .warp_specialize_tcgen05 import split_mmas

    split = k.warp_split
    if split.mmas and not split_mmas(k, tma, loads):
        split.mmas, split.attention = (), False
        split.note = "the MMA warp shares the producer's warpgroup, whose copies are cp.async here"
    elif tma:
        shrink(k)


def shrink(k: KernelLowering) -> None:
    """A TMA-fed tcgen05-form producer needs one thread: its role is one warp, not a warpgroup (no
    setmaxnreg, which would need the whole warpgroup, in this form), so the CTA launches 96 threads
    fewer (NVIDIA's sm_100 matmuls: one TMA warp) and the MMA warp follows it."""
    from ..ir.record import replace

    split = k.warp_split
    if split.form != "tcgen05" or split.producers == 32:
        return
    k.extra_threads -= split.producers - 32
    split.producers = 32
    split.barriers = tuple(replace(b, threads=k.threads + k.extra_threads) if b.name == "publish" else b
                           for b in split.barriers)
    k.schedule_notes.append(f"//   TMA-fed producer: one warp (publish: bar.sync {split.barrier('publish').id}, "
                            f"{k.threads + k.extra_threads})")


def publish(k: KernelLowering) -> None:
    """Consumers and producer meet once: the pipeline's mbarriers are initialized (attention's
    handshake too, and the query tile the consumers copied is made visible to the MMA warp's
    tensor-core reads through the async proxy)."""
    split = k.warp_split
    if split.form == "attention" and not split.emitted:
        from .async_copy import fence_async_proxy
        from .warp_specialize_tcgen05 import handshake

        handshake(k)
        fence_async_proxy(k)
    bar = split.barrier("publish")
    k.b.emit(f'call void asm sideeffect "bar.sync {bar.id}, {bar.threads};", "~{{memory}}"()')
    if k.cta_pair is not None:    # ...and the two CTAs of the pair (the peer's copies land on the leader's)
        from .cta_pair import meet

        meet(k)


def _elect_tma_thread(k: KernelLowering, p: "ActivePipeline", first: int) -> None:
    """One thread (`first`, the producer warpgroup's first) issues every TMA copy and prefetches
    the tensor maps; the rest of the warpgroup is done (after any setmaxnreg, which is .aligned)."""
    from . import tma_copy
    from .pipelined_loop import copied
    from .tmem import ROLE_EXIT

    if copied(p):   # the role's threads also copy the loads TMA cannot (block scales): all stay
        k.guarded(k.b.op(f"icmp eq i32 {k.tid}, {first}", "ws"), lambda: tma_copy.prefetch(k, p.tma))
        return
    elected, idle = k.b.label("tma_thread"), k.b.label("producer_idle")
    k.b.cond_br(k.b.op(f"icmp eq i32 {k.tid}, {first}", "ws"), elected, idle)
    k.b.start_block(idle)
    k.b.emit(f"ret void {ROLE_EXIT}")
    k.b.start_block(elected)
    tma_copy.prefetch(k, p.tma)


def emit_producer(k: KernelLowering, p: "ActivePipeline") -> None:
    """The producer's whole program (and in the tcgen05 form the MMA warp's), in their own blocks;
    the consumers go on where they were."""
    from . import mbarrier
    from .pipelined_loop import copied, copies_arrive, copy_iteration, tma_iteration
    from .registry import LOWERINGS
    from .tmem import ROLE_EXIT
    from .warp_specialize_tcgen05 import emit_attention_warp, emit_mma_warp

    split = k.warp_split
    assert split is not None and p.full is not None and p.empty is not None
    consumers = k.threads
    _, dec, mma_dec, inc = split.registers(consumers, bool(p.tma))
    # the MMA role's first thread: after the producer's role (tcgen05 form), or its warpgroup's second warp
    mma_first = consumers + (32 if split.form == "attention" else split.producers)
    cont = k.b.label("consumer_loop")
    k.b.br(cont)
    k.b.start_block(split.producer)
    split.emitted = True
    if dec and split.form != "tcgen05":     # the whole warpgroup (attention: its MMA warp too)
        mbarrier.set_max_registers(k, dec, increase=False)
    publish(k)
    if p.tma and not split.mmas:   # (tcgen05 form: after the MMA warp has gone its way)
        _elect_tma_thread(k, p, consumers)
    saved_values = dict(k.values)
    k.remark = lambda *args, **kwargs: None     # type: ignore[method-assign]  # reported by the consumers
    try:
        for op in split.slice:          # the consumers' values of these do not dominate the producer
            LOWERINGS[op.name](k, op)
    finally:
        del k.remark                    # the class's method again
    loop = split.loop
    lb, ub, step = (k.tile(loop.operand(n)).slots[0] for n in ("lowerBound", "upperBound", "step"))
    if split.mmas:      # the MMA warp goes its own way
        mma_warp, producer = k.b.label("mma_warp"), k.b.label("producer_loop")
        mine = k.b.op(f"icmp uge i32 {k.tid}, {mma_first}", "ws")
        if split.form == "attention":     # (the warpgroup's last two warps are idle: below)
            mine = k.b.op(f"and i1 {mine}, {k.b.op(f'icmp ult i32 {k.tid}, {mma_first + 32}', 'ws')}", "ws")
        k.b.cond_br(mine, mma_warp, producer)
        k.b.start_block(mma_warp)       # each role gives back its own share, after the common slice
        if mma_dec:
            mbarrier.set_max_registers(k, mma_dec, increase=False)
        if split.form == "attention":
            emit_attention_warp(k, p, mma_first, lb, ub, step)
        else:
            emit_mma_warp(k, p, split.mmas, mma_first, lb, ub, step)
        k.b.start_block(producer)
        if dec and split.form == "tcgen05":
            mbarrier.set_max_registers(k, dec, increase=False)
        if p.tma:
            _elect_tma_thread(k, p, consumers)
    with role_loop(k, p, "prod", "ws", lb, ub, step) as it:
        it.wait(k, p.empty, "stage empty", free=True)
        if p.tma and copied(p):     # one thread's boxes beside every thread's cp.async
            k.guarded(k.b.op(f"icmp eq i32 {k.tid}, {consumers}", "ws"),
                      lambda: tma_iteration(k, p, it.iv, it.stage))
        elif p.tma:
            tma_iteration(k, p, it.iv, it.stage)
        if copied(p):
            saved = k.tid, k.threads
            k.tid, k.threads = k.b.pre(f"sub i32 {k.tid}, {consumers}", "ptid"), split.producers
            try:
                copy_iteration(k, p, it.iv, it.stage, None)
            finally:
                k.tid, k.threads = saved
            copies_arrive(k, p, mbarrier.address(k, p.full, it.stage))
    if p.pair is not None:
        from .cta_pair import drain

        drain(k, p, it)
    k.b.emit(f"ret void {ROLE_EXIT}")
    k.values = saved_values
    k.b.start_block(cont)
    if inc:
        mbarrier.set_max_registers(k, inc, increase=True)
