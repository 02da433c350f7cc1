"""Warp-specialized pipelines (sm_90): a producer warpgroup that only copies, consumer warpgroups
that only compute.

The CTA grows by one warpgroup (threads C .. C + 127 after the C consumer threads the layouts
were assigned for). After the pipeline's barriers are initialized, the producer branches away:
it gives registers back (`setmaxnreg.dec`), then for every iteration j of the loop waits for
the stage's `empty` barrier (parity ((j / S) & 1) ^ 1: a fresh barrier counts as having
completed the phase before its first, so the first S fills do not wait), issues the
iteration's cp.async copies (its 128 threads share the chunks) with a `.noinc` arrival on the
stage's `full` barrier, and exits. The consumers take registers (`setmaxnreg.inc`) where the
larger CTA left them short, wait for `full` before an iteration's first staged read and
arrive on `empty` at its end. After the split every CTA barrier is a named barrier of the
consumers only (the producer has exited).

Chosen where it is safe and pays: the loop is in the kernel's top-level block and nothing
before it touches memory (the producer runs that code too, with thread ids the layouts do not
know), the consumers are whole warpgroups, and the target has setmaxnreg (sm_90).
"""

from __future__ import annotations

from ..ir.core import Operation
from . import mbarrier
from .kernel import KernelLowering

PRODUCER_THREADS = 128
# register budgets (setmaxnreg) by the consumers' warpgroups: (producer dec, consumer inc or 0).
# NVIDIA's sm_90 matmuls (256 threads, TMA producer) give the non-consumer warps 32. Our cp.async
# producer keeps its chunk addresses live, a register pair or so per 16-byte copy of a stage,
# and the counts are the least that ptxas compiles spill-free (f16, K tile 64): 128x128 (16
# copies a thread): 100 bytes of spills at 32, 12 at 56, none at 72; 128x256 (24 copies): 4
# bytes at 72, none at 80. With one consumer warpgroup (256 threads: 255 registers at launch)
# the consumers keep their budget; with two (384 threads, 168 at launch) they take what the
# producer gave back: (65536 - 128 * 80) / 256 = 216.
REGISTERS = {1: (72, 0), 2: (80, 216)}
_SIDE_EFFECT_FREE = ("cuda_tile.constant", "cuda_tile.make_token", "cuda_tile.make_tensor_view", "cuda_tile.make_partition_view",
                     "cuda_tile.get_tile_block_id", "cuda_tile.get_num_tile_blocks", "cuda_tile.assume",
                     "cuda_tile.get_index_space_shape", "cuda_tile.get_tensor_shape")


def _arith(op: Operation) -> bool:
    """Scalar arithmetic (0-d tiles) only: no thread-indexed layout, no memory."""
    from ..ir.types import TileType

    return not op.regions and all(isinstance(r.type, TileType) and not r.type.shape for r in op.results) \
        and op.name.startswith("cuda_tile.") and "load" not in op.name and "store" not in op.name \
        and "atomic" not in op.name and "print" not in op.name


def eligible(k: KernelLowering, loop: Operation) -> str:
    """'' when loop `loop` can be warp-specialized, else why not."""
    if k.sm != 90:
        return "setmaxnreg and the register split are for sm_90"
    if k.threads % 128 or k.threads // 128 not in REGISTERS:
        return f"{k.threads} consumer threads are not one or two whole warpgroups"
    block = loop.parent_block if hasattr(loop, "parent_block") else None
    ops = list(k.entry.regions[0].block.operations)
    if loop not in ops:
        return "the loop is not in the kernel's top-level block"
    del block
    for op in ops[:ops.index(loop)]:
        splat = op.name == "nv_tileas.convert_layout" and op.operands[0].owner is not None \
            and getattr(op.operands[0].owner, "name", "") == "cuda_tile.constant"   # a re-splat: registers only
        if op.name not in _SIDE_EFFECT_FREE and not _arith(op) and not splat:
            return f"'{op.name}' before the loop would run on the producer's threads too"
    return ""


def split(k: KernelLowering, p, lb: str) -> None:
    """Emit the producer's whole loop in a branch taken by threads C .. C + 127; the consumers go on."""
    from .pipelined_loop import _copy

    consumers = k.threads
    dec, inc = REGISTERS[consumers // 128]
    producer, consumer = k.b.label("producer"), k.b.label("consumer")
    k.b.cond_br(k.b.op(f"icmp uge i32 {k.tid}, {consumers}", "ws"), producer, consumer)
    k.b.start_block(producer)
    mbarrier.set_max_registers(k, dec, increase=False)
    head, body, done = k.b.label("prod_head"), k.b.label("prod_body"), k.b.label("prod_done")
    entry = k.b.current_block
    k.b.br(head)
    k.b.start_block(head)
    iv, j = k.b.fresh("piv"), k.b.fresh("pj")
    pos = len(k.b.lines)
    k.b.cond_br(k.b.op(f"icmp {'ult' if p.unsigned else 'slt'} {p.ity} {iv}, {p.ub}", "ws"), body, done)
    k.b.start_block(body)
    stage = k.b.op(f"urem i32 {j}, {p.stages}", "ws")
    free = k.b.op(f"xor i32 {mbarrier.phase_parity(k, j, p.stages)}, 1", "ws")
    mbarrier.wait(k, mbarrier.address(k, p.empty, stage), free, "stage empty")
    saved = k.tid, k.threads
    k.tid, k.threads = k.b.pre(f"sub i32 {k.tid}, {consumers}", "ptid"), PRODUCER_THREADS
    try:
        _copy(k, p, iv, stage, None)
    finally:
        k.tid, k.threads = saved
    mbarrier.copies_arrive(k, mbarrier.address(k, p.full, stage))
    iv_next, j_next = k.b.op(f"add {p.ity} {iv}, {p.step}", "ws"), k.b.op(f"add i32 {j}, 1", "ws")
    latch = k.b.current_block
    k.b.br(head)
    k.b.lines[pos:pos] = [f"  {iv} = phi {p.ity} [ {lb}, %{entry} ], [ {iv_next}, %{latch} ]",
                          f"  {j} = phi i32 [ 0, %{entry} ], [ {j_next}, %{latch} ]"]
    k.b.start_block(done)
    k.b.emit("ret void")
    k.b.start_block(consumer)
    if inc:
        mbarrier.set_max_registers(k, inc, increase=True)
    k.barrier_threads = consumers
