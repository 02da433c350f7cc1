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

Chosen for the first pipelined loop of the kernel's top-level block (or of branches of `if`s there: the
producer computes their CTA-uniform conditions first and exits where the consumers skip the loop) when the target has
setmaxnreg (sm_90), the consumers are one or two whole warpgroups, and the producer's slice is
pure (no memory, no thread-indexed values).

A persistent kernel (a top-level loop over output tiles whose body runs the pipelined K loop once a
tile, tileas/warp_roles.persistent; the sm_90 form, whatever its consumers compute) sets the ring up once, before the tile loop
(pipelined_loop.begin_persistent: mbarriers, `publish`, the producer's program); the ring's bytes live
over the whole tile loop. The producer runs its own tile loop (the slice of the tile loop's body its
copies need, lowered again) around the fill loop; both roles count the ring's uses on across tiles
(the consumers through a phi of the tile loop, `ActivePipeline.base`), so the producer fills the next
tile's stages while the consumers run this tile's epilogue: no reset, no drain between tiles. With a
wgmma group in flight the consumers release each tile's last stage after its final wait.

A kernel with no mma (a row kernel) has the sm_90 form on every TMA target (warp_roles.has_mma).
On sm_100 / sm_103 the same producer feeds an MMA warp instead (warp_specialize_tcgen05.py, the
`tcgen05` form): the CTA grows by the producer and an MMA warp, and the consumers become the
epilogue warps and skip the loop. Where that producer copies by TMA it is one warp, not a
warpgroup, and where the epilogue warps copy, none (tileas/settled_split.py); where the SM holds
no more CTAs anyway, two or three idle warps make the roles one warpgroup, which gives its registers
back to the epilogue's (setmaxnreg needs whole warpgroups: tileas/warp_roles.ROLE_WARPGROUP). sm_100
attention keeps the producer warpgroup (setmaxnreg as on sm_90), whose second warp issues the
MMAs while the consumers run the softmax (the `attention` form, warp_specialize_tcgen05.py).
Every role's loop over the iterations is one `role_loop`.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Optional

from ..ir.record import record
from .kernel import KernelLowering
from .llvm_text import llvm_type

if TYPE_CHECKING:
    from ..ir.core import Operation
    from . import mbarrier
    from .pipelined_loop import ActivePipeline

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
# A TMA producer keeps no addresses (one thread, a few coordinates): 40 registers, as NVIDIA's
# (32) plus room for the slice it recomputes; two consumer warpgroups take (65536 - 128 * 40) / 256.
# One consumer warpgroup whose occupancy hint asks for 2 CTAs an SM launches with 128 registers and
# takes its share of the half (`occupancy`, `WarpSplit.registers`): (32768 - 128 * 40) / 128 = 216.

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
    j_next: str = ""         # the use count the next iteration starts from (default: j + 1)

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
              step: str, j0: str = "0", loop: Optional["Operation"] = None) -> Iterator[RoleLoop]:
    """A role's own loop over the pipelined loop's iterations (blocks `{name}_head`, `_body`, `_done`):
    the body runs inside the `with`, which leaves the builder in `{name}_done`. Kept rolled (`rolled`):
    the stage is a value, each copy or MMA of the body issued once. `j0`: the ring's use count at
    the first iteration; `loop`: the loop whose index type and comparison it takes (default: the
    pipeline's, as its consumers lowered them)."""
    head, body, done = k.b.label(f"{name}_head"), k.b.label(f"{name}_body"), k.b.label(f"{name}_done")
    entry = k.b.current_block
    k.b.br(head)
    k.b.start_block(head)
    iv, j = k.b.fresh(f"{name[0]}iv"), k.b.fresh(f"{name[0]}j")
    ity, unsigned = (p.ity, p.unsigned) if loop is None else \
        (llvm_type(loop.operand("lowerBound").type.element), bool(loop.attributes.get("unsignedCmp", False)))
    pos = len(k.b.lines)
    k.b.cond_br(k.b.op(f"icmp {'ult' if unsigned else 'slt'} {ity} {iv}, {ub}", tag), body, done)
    k.b.start_block(body)
    it = RoleLoop(iv, j, k.b.op(f"urem i32 {j}, {p.stages}", tag), p.stages, tag)
    yield it
    iv_next, j_next = k.b.op(f"add {ity} {iv}, {step}", tag), it.j_next or k.b.op(f"add i32 {j}, 1", tag)
    latch = k.b.current_block
    k.b.emit(f"br label %{head}{rolled(k)}")
    k.b.lines[pos:pos] = [f"  {iv} = phi {ity} [ {lb}, %{entry} ], [ {iv_next}, %{latch} ]",
                          f"  {j} = phi i32 [ {j0}, %{entry} ], [ {j_next}, %{latch} ]"]
    k.b.start_block(done)



def begin(k: KernelLowering) -> None:
    """At the kernel's start: when its pipelined loop will be warp-specialized (the plan's
    decision, tileas/warp_roles.decide), the producer warpgroup branches away here (its code is emitted at the loop)."""
    from ..ir.record import replace
    from ..tileas.plan import plan_of

    plan = plan_of(k.assignment)  # type: ignore[arg-type]
    k.warp_split_refused = plan.warp_split_refused
    if plan.warp_split is None:
        staged = plan.shared is not None and any(fitted.stages for _, fitted in plan.shared.fits.values())
        if plan.pipelines and plan.warp_split_refused and not staged:   # (else the pipelined loop says why)
            loop = next(iter(plan.pipelines))
            k.remark("missed", "memory", "RemarkWarpSpecialization", "Warp roles of a pipelined loop", loop,
                     Roles=f"not warp-specialized: {plan.warp_split_refused}")
        elif not plan.pipelines and k.caps.has("mbarrier_tx"):
            # (NVIDIA's gives even such a kernel's one-shot TMA loads to a producer warpgroup: nothing to run ahead of)
            k.remark("missed", "memory", "RemarkWarpSpecialization", "Warp roles of a pipelined loop", k.entry,
                     Roles="not warp-specialized: no loop of the kernel is pipelined, so no producer could run ahead of "
                           "its consumers (each load is issued once)")
        return
    # this lowering's own copy (it records what it emitted; the padded and unpadded lowerings each start afresh)
    split = k.warp_split = replace(plan.warp_split, producer=k.b.label("producer"))
    k.extra_threads = split.producers + split.registers(k.threads)[0]
    k.barrier_id, k.barrier_threads = split.barrier("consumers").id, k.threads
    k.schedule_notes.append(f"//   named barriers (bound from the warp roles' lifetimes): "
                            f"{'; '.join(b.describe() for b in split.barriers)}")
    consumers = k.b.label("consumers")
    k.b.cond_br(k.b.op(f"icmp uge i32 {k.tid}, {k.threads}", "ws"), split.producer, consumers)
    k.b.start_block(consumers)


def end(k: KernelLowering) -> None:
    """After the kernel: the split's roles were emitted. A split whose loop is not pipelined (no ring, a
    serial schedule, no stages) is dropped by plan-shared-memory before any LLVM, so one the lowering
    did not emit is an internal error: the lowering takes no decision back."""
    split = k.warp_split
    if split is not None and not split.emitted:
        from ..errors import CompileError

        raise CompileError(f"error: internal: the warp-specialized loop at {split.loop.location} was not "
                           f"pipelined, though plan-shared-memory kept its roles")


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
    from .pipelined_loop import copied
    from .tmem import ROLE_EXIT
    from .warp_specialize_tcgen05 import emit_attention_warp, emit_mma_warp

    split = k.warp_split
    assert split is not None and p.full is not None and p.empty is not None
    consumers = k.threads
    _, dec, inc = split.registers(consumers, bool(p.tma) and not copied(p))   # (cp.async: every thread's budget)
    # the MMA role's first thread: after the producer's role (tcgen05 form), or its warpgroup's second warp
    mma_first = consumers + (32 if split.form == "attention" else split.producers)
    cont = k.b.label("consumer_loop")
    k.b.br(cont)
    k.b.start_block(split.producer)
    split.emitted = True
    saved_values = dict(k.values)
    # the consumers' values of the slice do not dominate the producer: its own copy, the guards' part first
    _lower_again(k, split.guard_slice)
    for cond, taken in split.guards:    # the consumers' branches to the loop, or the role is done
        go, leave = k.b.label("producer_guard"), k.b.label("producer_skip")
        c = k.tile(cond).slots[0]  # type: ignore[arg-type]
        k.b.cond_br(c, go, leave) if taken else k.b.cond_br(c, leave, go)
        k.b.start_block(leave)
        k.b.emit(f"ret void {ROLE_EXIT}")
        k.b.start_block(go)
    if dec:     # the whole warpgroup at once (attention: its MMA warp too; tcgen05: the TMA, MMA and idle warps)
        mbarrier.set_max_registers(k, dec, increase=False)
    publish(k)
    if p.tma and not split.mmas:   # (tcgen05 form: after the MMA warp has gone its way)
        _elect_tma_thread(k, p, consumers)
    _lower_again(k, tuple(op for op in split.slice if op not in split.guard_slice))
    loop = split.loop
    lb, ub, step = _bounds(k, split.outer or loop)
    if split.mmas and not split.producers:  # the MMA warp is the role's only working warp (the epilogue warps copy)
        emit_mma_warp(k, p, split.mmas, mma_first, lb, ub, step)
        k.values = saved_values
        k.b.start_block(cont)
        if inc:
            mbarrier.set_max_registers(k, inc, increase=True)
        return
    if split.mmas:      # the MMA warp goes its own way
        mma_warp, producer = k.b.label("mma_warp"), k.b.label("producer_loop")
        mine = k.b.op(f"icmp uge i32 {k.tid}, {mma_first}", "ws")
        if split.form == "attention" or split.idle:     # (the warpgroup's last warps are idle: below)
            mine = k.b.op(f"and i1 {mine}, {k.b.op(f'icmp ult i32 {k.tid}, {mma_first + 32}', 'ws')}", "ws")
        k.b.cond_br(mine, mma_warp, producer)
        k.b.start_block(mma_warp)
        if split.form == "attention":
            emit_attention_warp(k, p, mma_first, lb, ub, step)
        else:
            emit_mma_warp(k, p, split.mmas, mma_first, lb, ub, step)
        k.b.start_block(producer)
        if split.idle:      # the warps after the MMA warp are done
            _leave_unless(k, k.b.op(f"icmp ult i32 {k.tid}, {mma_first}", "ws"))
        if p.tma:
            _elect_tma_thread(k, p, consumers)
    if split.outer is not None:     # the tile loop around the stages' loop, the ring's count carried over
        with role_loop(k, p, "tile", "ws", lb, ub, step, loop=split.outer) as tile:
            body = split.outer.regions[0].block
            k.set(body.arguments[0], k.splat(body.arguments[0].type, tile.iv))
            _lower_again(k, split.outer_slice)
            tile.j_next = fill(k, p, *_bounds(k, loop), tile.j, loop).j
    else:
        it = fill(k, p, lb, ub, step)
    if p.pair is not None:
        from .cta_pair import drain

        drain(k, p, it)
    k.b.emit(f"ret void {ROLE_EXIT}")
    k.values = saved_values
    k.b.start_block(cont)
    if inc:
        mbarrier.set_max_registers(k, inc, increase=True)


def _leave_unless(k: KernelLowering, stay: str) -> None:
    """The threads where `stay` (i1) is false end here."""
    from .tmem import ROLE_EXIT

    go, leave = k.b.label("role_stays"), k.b.label("role_idle")
    k.b.cond_br(stay, go, leave)
    k.b.start_block(leave)
    k.b.emit(f"ret void {ROLE_EXIT}")
    k.b.start_block(go)


def _lower_again(k: KernelLowering, ops: tuple) -> None:
    """The producer's own copy of `ops` (its slice), their remarks the consumers' to report."""
    from .registry import LOWERINGS

    k.remark = lambda *args, **kwargs: None     # type: ignore[method-assign]
    try:
        for op in ops:
            LOWERINGS[op.name](k, op)
    finally:
        del k.remark                    # the class's method again


def _bounds(k: KernelLowering, loop: "Operation") -> tuple[str, str, str]:
    return tuple(k.tile(loop.operand(n)).slots[0] for n in ("lowerBound", "upperBound", "step"))  # type: ignore[return-value]


def fill(k: KernelLowering, p: "ActivePipeline", lb: str, ub: str, step: str, j0: str = "0",
         loop: Optional["Operation"] = None) -> RoleLoop:
    """The producer's loop over the pipelined loop's iterations: wait for the stage's `empty`, copy the
    iteration into it. Its RoleLoop, whose `j` after it is the ring's use count. Run by the copying role
    (`WarpSplit.copiers`: the producer's, or the tcgen05 form's epilogue warps)."""
    from . import mbarrier
    from .async_copy import ROLE_ELEMENTS_UNROLLED
    from .pipelined_loop import copied, copies_arrive, copy_iteration, tma_iteration

    first, copiers = k.warp_split.copiers(k.threads)
    # the tcgen05 form's epilogue warps, filling the stages themselves, prepare each (tf32 rounding) a stage
    # behind: its copies have landed by then, and the MMA warp, waiting for it, frees the stages they refill
    prepares = False
    if p.epilogue_fills:
        from .warp_specialize_tcgen05 import prepared

        prepares = prepared(k)
    with role_loop(k, p, "prod", "ws", lb, ub, step, j0, loop) as it:
        it.wait(k, p.empty, "stage empty", free=True)
        if p.tma and copied(p):     # one thread's boxes beside every thread's cp.async
            k.guarded(k.b.op(f"icmp eq i32 {k.tid}, {first}", "ws"),
                      lambda: tma_iteration(k, p, it.iv, it.stage))
        elif p.tma:
            tma_iteration(k, p, it.iv, it.stage)
        if copied(p):
            saved = k.tid, k.threads
            k.tid, k.threads = (k.b.pre(f"sub i32 {k.tid}, {first}", "ptid") if first else k.tid), copiers
            try:
                copy_iteration(k, p, it.iv, it.stage, None, ROLE_ELEMENTS_UNROLLED, gather=True)
            finally:
                k.tid, k.threads = saved
            copies_arrive(k, p, mbarrier.address(k, p.full, it.stage))
        if prepares:    # the stage before, full once this thread's own copies of it landed
            k.guarded(k.b.op(f"icmp ugt i32 {it.j}, {j0}", "ws"), lambda: _prepare_before(k, p, it.j))
    if prepares:        # ...and the last
        k.guarded(k.b.op(f"icmp ugt i32 {it.j}, {j0}", "ws"), lambda: _prepare_before(k, p, it.j))
    return it


def _prepare_before(k: KernelLowering, p: "ActivePipeline", j: str) -> None:
    """Wait for the stage of the ring's use j - 1 to be full and prepare it (warp_specialize_tcgen05.prepare_stage)."""
    from . import mbarrier
    from .warp_specialize_tcgen05 import prepare_stage

    use = k.b.op(f"sub i32 {j}, 1", "ws")
    stage = k.b.op(f"urem i32 {use}, {p.stages}", "ws")
    mbarrier.wait(k, mbarrier.address(k, p.full, stage), mbarrier.phase_parity(k, use, p.stages), "stage full")
    prepare_stage(k, p, stage)
