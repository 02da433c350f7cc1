"""The Blackwell (sm_100 / sm_103) form of a warp-specialized K loop: producer, MMA and epilogue warps.

As NVIDIA's sm_100 matmuls are built, no thread both copies and computes:
- the producer warpgroup (warp_specialize.py, shared with sm_90) waits for a stage's `empty`
  mbarrier and fills it: where every load can go by TMA (tma_copy.py, as on sm_90) one thread
  announces the stage's bytes on its `full` mbarrier and issues the boxes (the producer role
  is then one warp, whose other lanes exit; block-scaled: its lanes stay to copy A's scales by
  cp.async, pipelined_loop.copied); where TMA cannot copy, the epilogue warps are the producer
  (`WarpSplit.copiers`, settled_split.settle): before reading the accumulator they issue each
  stage's cp.async copies (arriving on `full` when they land, `cp.async.mbarrier.arrive.noinc`) or,
  where no copy is legal (no facts: stage_rings.producer_stages), load each element of the stage,
  store it, fence the async proxy and arrive on `full` (NVIDIA's sm_100 kernels without TMA: one
  warpgroup loads and runs the epilogue), so the CTA is 160 threads, not 288 (launched as 384, 168
  registers: a tf32 bmm's producer warpgroup spilled 60 instructions), and stages that need
  preparing (tf32 rounding) are prepared a stage behind the fill (warp_specialize.fill); a
  block-scaled mma's cp.async producer stays a warpgroup of its own;
- where the SM holds no more CTAs anyway (its shared memory), the producer warp and the MMA warp,
  or the MMA warp alone, are one warpgroup with idle warps after them (`WarpSplit.idle`), which
  runs setmaxnreg.dec and gives the epilogue warps what it gave back (setmaxnreg.inc, with two
  epilogue warpgroups), as NVIDIA's sm_100 matmuls' 256 and 384 threads do;
- one thread of the MMA warp (the warp after the producer's; its other lanes leave at once) waits
  for `full`, issues the iteration's tcgen05.mma instructions on the stage's descriptors and
  `tcgen05.commit`s them to the stage's `empty` mbarrier (the stage is free once the MMAs that read
  it are done); after the last iteration it commits to the accumulator-ready mbarrier (tmem.py's);
- the epilogue warps (the C threads the layouts were assigned for) skip the loop (but for that
  fill, whose ring count a persistent loop carries over tiles): they wait for the
  accumulator-ready phase and read tensor memory (`tcgen05.ld`: in column chunks, each converted and
  stored before the next, where the rest of the kernel is that store, tmem_epilogue.py; else whole,
  ops_tcgen05.after_loop), then run the rest of the kernel.

Under a persistent loop (tileas/warp_roles.persistent: the K loop run once an output tile) the producer
and the MMA warp run the tile loop too, counting the ring's uses on across tiles; the MMA thread
commits each tile's accumulators to accumulator-ready, and waits before a tile's first MMAs (which
overwrite them) until every epilogue thread has arrived on the accumulator-free mbarrier
(tmem.accumulator_free) after reading the last tile's: one accumulator, so a tile's MMAs wait for
the last tile's tensor-memory reads (NVIDIA's keeps two), while the producer fills the next tile's stages.
Where stages need preparing, the epilogue warps prepare each tile's before reading its accumulator,
counting the ring's uses over the tiles as the other roles do.

Chosen when the loop's body is only its staged loads (possibly reshaped by unit dimensions) feeding
tcgen05 mmas whose accumulators stay in tensor memory for the whole loop (`resident_loop`) from a
zero start, and the loop carries nothing else: then no epilogue thread has anything to do in it,
except where a stage needs work before the MMAs read it (`_prepare_stages`): tf32 operands are
rounded in place (as their ftof says: the tensor cores would truncate) and a block-scaled mma's
scale tiles restaged into the tcgen05.cp source order; the epilogue warps do that each iteration
between the stage's `full` and a per-stage `ready` mbarrier the MMA thread also waits for (the
role NVIDIA's block-scaled kernels give a scale warp).

Attention (a loop that keeps O in tensor memory, rescaled there by the softmax's correction) has
work between its mmas, so `loop_mmas` (tileas/tcgen05_roles.py) refuses it; with one or two consumer warpgroups (256 or 384
threads, as NVIDIA's) and scores that fit the larger CTA's launch budget (`consumers_issue`) it is
split as NVIDIA's sm_100 attention is
(`attention_mmas`, the "attention" form): the producer warpgroup's first warp copies K and V by
TMA, its second warp's first thread issues S_j = Q K_j^T (committed to the `scores` mbarrier)
and, once the consumers arrived on `probabilities` (P_j stored in tensor memory over the scores'
columns, O rescaled), O += P_j V_j (committed to the stage's `empty` and to `output`, which the
S that overwrites P_j's columns waits for: S_{j+2}, the scores alternating between two buffers
where tensor memory has the columns, else S_{j+1}); the consumer warpgroups run the loop body with
each mma replaced by its handshake (`consume_attention_mma`) and store O by TMA after it
(tmem_epilogue.store_fragments). At M = 64 (no tensor-memory A) P goes through a swizzled
shared buffer alive through the loop (`p_buffer`): the consumers store it and fence the async
proxy before `probabilities`, the MMA thread reads it by descriptor; the MMAs that read P_j are
complete before `scores` of S_{j+1} (one commit covers both), which the consumers wait for before
storing P_{j+1}. Scores that are a chain of mmas (MLA prefill: Q K^T + Q_pe K_pe^T) are issued
one after the other into the last one's columns before the one `scores` commit. Where the MMA
warp cannot issue the mmas (a cp.async producer, whose copies take the whole warpgroup) the
consumers issue them themselves beside the producer warpgroup (the sm_90 "wgmma" form).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..ir.core import Operation
from . import mbarrier
from .kernel import KernelLowering
from ..tileas.tcgen05_buffers import HANDSHAKE, p_matrix, scale_stage
from ..tileas.tcgen05_roles import p_in_tmem, scaled_mma as _scaled, staged_load as _source

if TYPE_CHECKING:
    from .pipelined_loop import ActivePipeline
    from .warp_specialize import RoleLoop

def _transposed(value: object) -> bool:
    """Whether the path from its load to `value` transposes it (the MMA then reads the stage as the
    other major: the instruction descriptor's transpose bit, as unspecialized)."""
    return _traced(value)[1]


def _traced(value: object) -> tuple[Optional[Operation], bool]:
    from ..tileaa.mma_operands import passes, source

    return source(value, passes)  # type: ignore[arg-type]


def rounded(k: KernelLowering) -> dict:
    """The loads of the specialized loop read as tf32 -> the rounding mode of their ftof: the
    epilogue warps round them in their stages (`_prepare_stages`) before the MMA warp reads them."""
    out = {}
    for op in k.warp_split.loop.regions[0].block.operations:
        if op.name == "cuda_tile.ftof":
            out[_source(op.results[0])] = str(op.attributes.get("rounding_mode", "nearest_even"))
    return out


def prepared(k: KernelLowering) -> bool:
    """The epilogue warps prepare each stage before the MMA warp reads it (tf32 rounding, scales)."""
    return bool(rounded(k)) or _scaled(k) is not None


def _scale_stages(k: KernelLowering, p: "ActivePipeline", op: Operation) -> tuple[int, int, int]:
    """(shared offset of stage 0's restaged scales, bytes a stage, tensor-memory columns a stage) of
    the block-scaled mma `op`: per stage, so that neither the restaging nor the tcgen05.cp of the
    next iterations overwrites scales that MMAs still in flight read."""
    nbytes, columns = scale_stage(k, op)
    if (op, "stages") not in k.tmem_buffers:
        k.tmem_buffers[(op, "stages")] = k.alloc_buffer(p.stages * nbytes, "tmem-stages")
    return k.tmem_buffers[(op, "stages")], nbytes, columns


def p_buffer(k: KernelLowering, o: Operation) -> object:
    """The swizzled shared buffer of P where it does not go to tensor memory (`p_in_tmem`), alive
    through the loop (allocated when the MMA warp is emitted, at the loop), else None: the
    consumers store P_j there, the MMA thread reads it as O += P_j V_j's A (K-major)."""
    from ..ir.record import replace

    matrix = p_matrix(k, o)
    if matrix is None:
        return None
    if (o, "p") not in k.tmem_buffers:
        k.tmem_buffers[(o, "p")] = replace(matrix, offset=k.alloc_buffer(matrix.nbytes, "p-buffer"))
    return k.tmem_buffers[(o, "p")]


# the handshake mbarriers of the specialized attention, by index: (name, arrivals)
def double_scores(k: KernelLowering, s: Operation, o: Operation) -> int:
    """Columns between the two scores buffers the MMA thread alternates (S_j in buffer j % 2, P_j
    over it), so that S_{j+1} waits for O += P_{j-1} V_{j-1} (the other buffer), not for the O += P_j
    V_j just issued; 0 (one buffer) where the second does not fit tensor memory (512 columns, shared
    by the CTAs the occupancy hint puts on an SM) or its allocation was made before. The second buffer lies after every column the kernel's plan uses."""
    from ..tileas.tmem_columns import op_columns, plan, tmem_a_columns
    from .tmem import COLUMNS, allocation_columns

    starts, total = plan(k.assignment.tcgen05_layouts)  # type: ignore[union-attr]
    _, m, n = k.assignment.tcgen05_layouts[s].shape  # type: ignore[union-attr]
    first = starts[s][0]
    span = max(op_columns(s, m, n), starts[o][1] + tmem_a_columns(o, m) - first)
    tm = getattr(k, "tmem", None)
    if not starts[o][1] >= first or allocation_columns(total + span) * k.warp_split.min_ctas > COLUMNS \
            or tm is not None and tm.cols < allocation_columns(total + span):
        return 0    # (the CTAs an SM holds at once share its columns: each allocation waits for room)
    from .tmem import tensor_memory

    tensor_memory(k, total + span)
    return total - first


def _scores_buffer(k: KernelLowering, j: str, tag: str) -> str:
    """i32 column offset of iteration `j`'s scores buffer (0 or the split's `scores_shift`)."""
    shift = k.warp_split.scores_shift
    return k.b.op(f"mul i32 {k.b.op(f'and i32 {j}, 1', tag)}, {shift}", tag) if shift else "0"


def _output(k: KernelLowering, j: str, tag: str) -> str:
    """The `output` mbarrier that O += P_j V_j commits to: one, or one per scores buffer."""
    if not k.warp_split.scores_shift:
        return _bar(k, "output")
    index = [n for n, _ in HANDSHAKE].index("output")
    return mbarrier.address(k, k.warp_split.handshake, k.b.op(f"add i32 {k.b.op(f'and i32 {j}, 1', tag)}, {index}",
                                                              tag))


def handshake(k: KernelLowering) -> "mbarrier.BarrierArray":
    """The specialized attention's handshake mbarriers, allocated and initialized by the consumers
    before they meet the other roles at `publish`."""
    split = k.warp_split
    if split.handshake is None:
        split.handshake = mbarrier.allocate(k, len(HANDSHAKE), "handshake")
        mbarrier.init(k, [(split.handshake, [n or k.threads for _, n in HANDSHAKE])])
    return split.handshake


def _bar(k: KernelLowering, name: str) -> str:
    return mbarrier.address(k, k.warp_split.handshake, str([n for n, _ in HANDSHAKE].index(name)))


def emit_attention_warp(k: KernelLowering, p: "ActivePipeline", first: int, lb: str, ub: str, step: str) -> None:
    """The MMA warp of a specialized attention (threads `first` ..+31; one issues): per iteration j,
    wait for K_j and V_j (`full`) and for the O += P V whose P lies in the columns S_j goes to (two
    scores buffers, `double_scores`: O += P_{j-2} V_{j-2}, on its buffer's `output` mbarrier; one:
    O += P_{j-1} V_{j-1}), issue S_j = Q K_j^T and commit it to `scores`; wait for the consumers'
    `probabilities` (P_j stored, O rescaled), issue O += P_j V_j and commit it to the stage's
    `empty` and to its buffer's `output`. After the loop it commits to the tensor-memory mbarrier
    the consumers wait for before reading O. (Whether one thread's tcgen05 operations run in issue
    order whatever columns they touch is not in the PTX ISA's list of implicitly pipelined pairs:
    the `output` wait keeps S from overwriting a P that an earlier MMA may still read.)"""
    from ..tileaa.mma_forms import kind_of
    from .ops_tcgen05 import _Operand, _region, _shared, commit, instruction, issue_mmas, region
    from .registry import LOWERINGS
    from .tma_copy import wait_once
    from .tmem import ROLE_EXIT, tensor_memory
    from .values import SharedTileVal
    from .pipelined_loop import _stage_offset, _staged
    from .warp_specialize import role_loop

    *s_ops, o_op = k.warp_split.mmas
    issuer, leave = k.b.label("mma_issuer"), k.b.label("mma_idle")
    k.b.cond_br(k.b.op(f"icmp eq i32 {k.tid}, {first}", "mw"), issuer, leave)
    k.b.start_block(leave)
    k.b.emit(f"ret void {ROLE_EXIT}")
    k.b.start_block(issuer)
    wait_once(k, list(p.once))      # Q, where it is copied once by TMA (else the consumers' copies, published)
    shared_p = p_buffer(k, o_op)
    k.warp_split.scores_shift = double_scores(k, s_ops[-1], o_op) if shared_p is None else 0
    s_base, o_at = region(k, s_ops[-1]), region(k, o_op)    # a chain of scores accumulates in the last's columns
    p_base = _region(k, o_op, a=True)[0] if shared_p is None else None
    p_a = None if shared_p is None else _Operand(shared_p, True)  # type: ignore[arg-type]  # stored (M, K)
    ready = tensor_memory(k, 0).mbarrier
    queries = [_shared(k, k.get(s.operand("lhs")), "a") for s in s_ops]
    views = [op for op in p.loop.regions[0].block.operations if op.name in ("cuda_tile.reshape", "cuda_tile.permute")]
    fence_after = 'call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()'
    with role_loop(k, p, "mma", "mw", lb, ub, step) as it:
        it.wait(k, p.full, "stage full")
        later = k.b.op(f"icmp ne i32 {it.j}, 0", "mw")
        shift = _scores_buffer(k, it.j, "mw")
        s_at = s_base if shift == "0" else k.b.op(f"add i32 {s_base}, {shift}", "mw")
        p_at = p_base if shift == "0" or p_base is None else k.b.op(f"add i32 {p_base}, {shift}", "mw")
        if shift == "0":      # S_j goes over P_{j-1}: O += P_{j-1} V_{j-1} must be complete
            k.guarded(later, lambda: mbarrier.wait(k, _bar(k, "output"), mbarrier.phase_parity(
                k, k.b.op(f"sub i32 {it.j}, 1", "mw"), 1), "previous P V complete") or None)
        else:                 # S_j goes over P_{j-2}, in this buffer (its own output mbarrier's phase (j - 2) / 2)
            k.guarded(k.b.op(f"icmp uge i32 {it.j}, 2", "mw"), lambda: mbarrier.wait(k, _output(k, it.j, "mw"),
                      mbarrier.phase_parity(k, k.b.op(f"sub i32 {it.j}, 2", "mw"), 2),
                      "P V two back complete") or None)
        k.b.emit(fence_after)
        for load in p.loads:      # this stage's K and V, seen through the body's reshapes and transposes
            k.values[load.results[0]] = SharedTileVal(load.results[0].type,
                                                      _staged(p, load, _stage_offset(k, p, load, it.stage)))
        for op in views:
            if all(v in k.values for v in op.operands):
                LOWERINGS[op.name](k, op)
        issued = [(s, q, None, s_at, "1" if i else "0") for i, (s, q) in enumerate(zip(s_ops, queries))]
        for op, a, a_tmem, at, acc in (*issued, (o_op, p_a, p_at, o_at, None)):
            if acc is None:       # O += P V: once the consumers stored P and rescaled O
                mbarrier.wait(k, _bar(k, "probabilities"), mbarrier.phase_parity(k, it.j, 1), "P stored")
                k.b.emit(fence_after)
                acc = k.b.op(f"zext i1 {later} to i32", "mw")
            b = _shared(k, k.get(op.operand("rhs")), "b")
            _, m, n = k.assignment.tcgen05_layouts[op].shape  # type: ignore[union-attr]
            idesc = instruction(kind_of(op), min(m, 128), n, a is not None and not a.kmajor,  # type: ignore[arg-type]
                                not b.kmajor)
            issue_mmas(k, op, a, b, a_tmem, at, acc, idesc)
            if op is s_ops[-1]:
                commit(k, _bar(k, "scores"))
        commit(k, mbarrier.address(k, p.empty, it.stage))    # K_j and V_j are read
        commit(k, _output(k, it.j, "mw"))
    commit(k, ready)          # O is complete (at once when the loop ran no iteration)
    k.b.emit(f"ret void {ROLE_EXIT}")


def consume_attention_mma(k: KernelLowering, op: Operation, lhs: object, acc: object) -> object:
    """A consumer's part of a specialized attention's mma (the MMA warp issues it): for S (the last of
    a chain of scores; the earlier ones are nothing here), wait for `scores` and read S from tensor
    memory; for O += P V, rescale O in tensor memory (not in the
    first iteration), store P there, and arrive on `probabilities`. The iteration's `scores` wait
    also orders the rescale after O += P_{j-1} V_{j-1}, committed before S_j."""
    from .llvm_text import llvm_type
    from ..tileaa.mma_operands import carried_factor, rescale
    from ..tileaa.mma_forms import kind_of
    from .ops_tcgen05 import _a_in_tmem, _region, _rescale_in_tmem, _transfer, region
    from .values import TileRegs

    split = k.warp_split
    counter = k.active_pipelines[split.loop].counter
    layout = acc.layout  # type: ignore[attr-defined]
    address = region(k, op)
    shift = _scores_buffer(k, counter, "tsb")
    if op in split.mmas[:-2]:    # an earlier link of a chain of scores: issued into the last one's columns
        return acc
    if op is split.mmas[-2]:
        mbarrier.wait(k, _bar(k, "scores"), mbarrier.phase_parity(k, counter, 1), "scores complete")
        k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
        at = address if shift == "0" else k.b.op(f"add i32 {address}, {shift}", "tsb")
        regs = _transfer(k, layout, at, None, kind_of(op).d == 1)  # type: ignore[union-attr]
        k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
        return TileRegs(acc.type, regs, layout)  # type: ignore[attr-defined]
    scale = rescale(op)
    later = k.b.op(f"icmp ne i32 {counter}, 0", "tlater")
    k.guarded(later, lambda: _rescale_in_tmem(k, scale, layout, address) or None)
    shared_p = p_buffer(k, op)
    if shared_p is None and shift == "0":
        assert _a_in_tmem(k, op, lhs) is not None     # P, over the scores' columns (`attention_mmas`)
    elif shared_p is None:                  # over this iteration's scores buffer
        assert p_in_tmem(k, op)
        base = k.b.op(f"add i32 {_region(k, op, a=True)[0]}, {shift}", "tsb")
        _transfer(k, lhs.layout, base, list(lhs.slots), False, llvm_type(lhs.type.element))  # type: ignore
    else:   # the MMAs that read P_{j-1} completed before `scores` of S_j (one commit covers both)
        from .async_copy import fence_async_proxy
        from .ops_mma import store_tile

        store_tile(k, lhs, shared_p)  # type: ignore[arg-type]
        fence_async_proxy(k)          # P_j, seen by the tensor cores' reads (async proxy)
    k.b.emit('call void asm sideeffect "tcgen05.wait::st.sync.aligned;", "~{memory}"()')
    k.b.emit('call void asm sideeffect "tcgen05.fence::before_thread_sync;", "~{memory}"()')
    mbarrier.arrive(k, _bar(k, "probabilities"))
    return TileRegs(acc.type, list(k.tile(carried_factor(scale)[0]).slots), layout)  # type: ignore


def mma_warp_done(k: KernelLowering) -> None:
    """After the specialized attention's loop: the consumers wait until the MMA warp's last MMAs are
    complete (O, and every stage's reads) before reading O or leaving the loop's barriers."""
    from .tmem import tensor_memory, wait_mbarrier

    wait_mbarrier(k, tensor_memory(k, 0))


def emit_mma_warp(k: KernelLowering, p: "ActivePipeline", mmas: tuple, first: int, lb: str, ub: str,
                  step: str) -> None:
    """The MMA warp's program (threads `first` ..+31), in its own blocks, ending with `ret`. Under a
    persistent loop (warp_roles.persistent) it runs the tile loop too, committing each tile's
    accumulators, and a tile's first MMAs wait until the epilogue warps have read the last tile's
    (tmem.accumulator_free): one accumulator in tensor memory, reused tile after tile."""
    from .ops_tcgen05 import commit, region
    from .tmem import ROLE_EXIT, stage_barriers, tensor_memory
    from .warp_specialize import role_loop

    assert p.full is not None and p.empty is not None
    issuer, leave = k.b.label("mma_issuer"), k.b.label("mma_idle")
    from .cta_pair import issuer as pair_issuer

    # (a CTA pair's: the leader issues for both CTAs, cta_pair.py)
    k.b.cond_br(pair_issuer(k, k.b.op(f"icmp eq i32 {k.tid}, {first}", "mw"), mmas[0]), issuer, leave)
    k.b.start_block(leave)
    k.b.emit(f"ret void {ROLE_EXIT}")
    k.b.start_block(issuer)
    operands = {op: tuple(_source(op.operand(n)) for n in ("lhs", "rhs")) for op in mmas}
    scaled = _scaled(k)
    if scaled is not None:   # its scales' columns for every stage (after the accumulator's)
        from ..tileas.tmem_columns import columns_of

        _, m, n = k.assignment.tcgen05_layouts[scaled].shape  # type: ignore[union-attr]
        assert getattr(k, "tmem", None) is None
        tensor_memory(k, columns_of(m, n) + p.stages * _scale_stages(k, p, scaled)[2])
    addresses = {op: region(k, op) for op in mmas}
    ready_stages = None
    if prepared(k):    # one arrival per epilogue thread (tensor memory is allocated by now; a pair's: both CTAs')
        ready_stages = k.tmem.ready = stage_barriers(k, p.stages, k.threads * (2 if p.pair else 1))
        work = " and ".join(w for w, on in (("round the tf32 operands", rounded(k)),
                                             ("restage the block scales", scaled is not None)) if on)
        k.schedule_notes.append(f"//   stages prepared: the epilogue warps wait full, {work} of each stage, "
                                f"then arrive on its ready mbarrier; the MMA thread waits full and ready")
    ready = tensor_memory(k, 0).mbarrier
    split = k.warp_split
    if split.outer is None:
        _issue_loop(k, p, operands, addresses, scaled, ready_stages, lb, ub, step)
        commit(k, ready, p.pair is not None)  # the accumulators are complete (at once when the loop ran no iteration)
    else:   # a persistent loop: a tile's first MMAs overwrite the accumulators once the epilogue has read them
        from .tmem import accumulator_free
        from .warp_specialize import _bounds, _lower_again

        free, phase = accumulator_free(k), k.b.pre("alloca i32, align 4", "mwf")
        k.b.emit(f"store i32 1, ptr {phase}")     # (a fresh barrier's phase before its first counts as complete)
        with role_loop(k, p, "tile", "mw", lb, ub, step, loop=split.outer) as tile:
            body = split.outer.regions[0].block
            k.set(body.arguments[0], k.splat(body.arguments[0].type, tile.iv))
            _lower_again(k, split.outer_slice)
            parity = k.b.op(f"load i32, ptr {phase}", "mwf")
            mbarrier.wait(k, free, parity, "accumulators read")
            k.b.emit(f"store i32 {k.b.op(f'xor i32 {parity}, 1', 'mwf')}, ptr {phase}")
            tile.j_next = _issue_loop(k, p, operands, addresses, scaled, ready_stages, *_bounds(k, split.loop),
                                      tile.j, split.loop).j
            commit(k, ready)    # this tile's accumulators are complete
    k.b.emit(f"ret void {ROLE_EXIT}")


def _issue_loop(k: KernelLowering, p: "ActivePipeline", operands: dict, addresses: dict, scaled: Optional[Operation],
                ready_stages: object, lb: str, ub: str, step: str, j0: str = "0",
                loop: Optional[Operation] = None) -> "RoleLoop":
    """The MMA thread's loop over the K loop's iterations (the ring's use count from `j0`): wait for the
    stage, issue its MMAs (the first of the run overwriting the accumulators), commit them to the
    stage's `empty`. Its RoleLoop."""
    from ..tileaa.mma_forms import kind_of
    from .async_copy import fence_async_proxy
    from .ops_tcgen05 import _Operand, commit, instruction, issue_mmas, issued_m
    from .pipelined_loop import _stage_offset, _staged
    from .warp_specialize import role_loop

    with role_loop(k, p, "mma", "mw", lb, ub, step, j0, loop) as it:
        # the copies' own phase (complete by the time the stage is prepared: the wait costs one try,
        # and makes the copied bytes the MMAs read directly visible to this thread), then the epilogue
        # warps' preparation of the stage
        it.wait(k, p.full, "stage full")
        if ready_stages is not None:
            it.wait(k, ready_stages, "stage prepared")
        if not p.tma:
            fence_async_proxy(k)    # the producer's cp.async copies, seen by the tensor cores' reads
        k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
        accumulate = k.b.op(f"zext i1 {k.b.op(f'icmp ne i32 {it.j}, {j0}', 'mw')} to i32", "mw")  # zero start
        for op, (a_load, b_load) in operands.items():
            # the loads' own swizzled buffers: A stored (M, K) is K-major, B stored (K, N) N-major; a
            # transposed load the other way round
            a = _Operand(_staged(p, a_load, _stage_offset(k, p, a_load, it.stage)), not _transposed(op.operand("lhs")))
            b = _Operand(_staged(p, b_load, _stage_offset(k, p, b_load, it.stage)), _transposed(op.operand("rhs")))
            _, m, n = k.assignment.tcgen05_layouts[op].shape  # type: ignore[union-attr]
            idesc = instruction(kind_of(op), issued_m(m, p.pair is not None), n,  # type: ignore[arg-type]
                                not a.kmajor, not b.kmajor)
            scales = None
            if op is scaled:     # this stage's restaged scales into this stage's columns, then the MMAs
                from .ops_blockscale import Tcgen05Scales
                from ..tileas.tmem_columns import columns_of

                base, nbytes, cols = _scale_stages(k, p, op)
                buffer = k.b.op(f"add i32 {k.b.op(f'mul i32 {it.stage}, {nbytes}', 'mw')}, {base}", "mw")
                at = k.b.op(f"add i32 {addresses[op]}, {k.b.op(f'mul i32 {it.stage}, {cols}', 'mw')}", "mw")
                scales = Tcgen05Scales(k, op, k.b.op(f"add i32 {at}, {columns_of(m, n)}", "mw"), m, n, buffer)
                scales.copy()
            issue_mmas(k, op, a, b, None, addresses[op], accumulate, idesc, scales)
        # the stage is free once these MMAs are done (a pair's: in both CTAs)
        commit(k, mbarrier.address(k, p.empty, it.stage), p.pair is not None)
    return it


def epilogue(k: KernelLowering, p: "ActivePipeline", loop: Operation) -> None:
    """The epilogue warps' part of the loop: wait until the MMA warp's last MMAs are done, then read
    the accumulators out of tensor memory (the loop's results)."""
    from ..tileaa.access_width import chunk_elements
    from ..ir.types import storage_bytes
    from .ops_tcgen05 import after_loop, describe
    from .tmem import tensor_memory, wait_mbarrier
    from .tmem_epilogue import lower as chunked

    # the body's ops are lowered only in the other roles (which make no remarks): say what they run
    for load in p.loads:
        if p.tma and load in p.tma:
            from ..tileas.tma_boxes import describe as boxes

            k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", load,
                     Instruction="TMA load (cp.async.bulk.tensor to shared memory)", Boxes=boxes(p.tma[load]),
                     Pipeline=f"{p.stages} stages, issued {p.stages} iterations ahead by one producer thread")
            continue
        tile = load.results[0].type
        chunk = chunk_elements(load, k.get(load.operand("view")), tile)
        bits = 8 * storage_bytes(tile.element) * max(chunk, 1)
        who = "the epilogue warps" if p.epilogue_fills else "the producer warps"
        k.remark("passed", "memory", "RemarkMemoryLoadInstructionSelected", "Load instruction selected", load,
                 Instruction="Ldgsts instruction (cp.async to shared memory)" if chunk else
                 "Global-memory load instruction, each element stored to the stage (no fact proves a copy aligned)",
                 Width=f"{bits} bits", Pipeline=f"{p.stages} stages, issued by {who} {p.stages} iterations ahead")
    if p.epilogue_fills:    # the epilogue warps fill the stages before they read the accumulator
        from .warp_specialize import _bounds, fill

        p.ring_out = fill(k, p, *_bounds(k, loop), p.base if p.persistent else "0").j
    for op in k.warp_split.mmas:
        instruction, mnk = describe(op, k.layout_of(op.results[0]), p.pair is not None)
        k.remark("passed", "tensorcore", "RemarkTensorCoreMMA", "MMA operation successfully optimized to use "
                 "Tensor Cores", op, Instruction=instruction, Shape=mnk)
    if prepared(k) and not p.epilogue_fills:   # (filling, they prepare each stage a stage behind: fill)
        p.ring_out = _prepare_stages(k, p, loop, p.base if p.persistent else "0")
    wait_mbarrier(k, tensor_memory(k, 0))
    if not (len(k.warp_split.mmas) == 1 and chunked(k, loop, k.warp_split.mmas[0])):
        after_loop(k, loop)
    if k.warp_split.outer is not None:   # read: the MMA warp may overwrite them with the next tile's
        from .tmem import accumulator_free

        k.b.emit('call void asm sideeffect "tcgen05.wait::ld.sync.aligned;", "~{memory}"()')
        k.b.emit('call void asm sideeffect "tcgen05.fence::before_thread_sync;", "~{memory}"()')
        mbarrier.arrive(k, accumulator_free(k))


def _prepare_stages(k: KernelLowering, p: "ActivePipeline", loop: Operation, j0: str) -> str:
    """The epilogue warps' K loop where a stage needs work before the MMAs read it: per iteration,
    wait for the stage to be full and prepare it (`prepare_stage`), which the MMA warp waits for
    instead of `full`. The MMA thread's commit to `empty` comes after its MMAs (and tcgen05.cp) read
    the stage, so the producer refills it only after all this too. `j0`: the ring's use count at the
    first iteration (a persistent loop's tile after tile: each tile's stages prepared before its
    accumulator is read); returns the count after the last."""
    from .warp_specialize import _bounds, role_loop

    with role_loop(k, p, "round", "rw", *_bounds(k, loop), j0) as it:
        it.wait(k, p.full, "stage full")
        prepare_stage(k, p, it.stage)
    return it.j


def prepare_stage(k: KernelLowering, p: "ActivePipeline", stage: str) -> None:
    """This epilogue thread's share of preparing `stage` (full): round its tf32 operands in place (every
    f32 of their buffers, 16 bytes a thread at a time: rounding is element-wise, whatever the swizzle) and
    restage a block-scaled mma's scales into the stage's tcgen05.cp source (ops_blockscale), make the
    writes visible to the tensor cores (the async proxy) and arrive on the stage's `ready` mbarrier."""
    from .ops_blockscale import restage_tcgen05, tcgen05_sources
    from .values import SharedTileVal
    from .async_copy import fence_async_proxy
    from .pipelined_loop import _stage_offset, _staged
    from .smem import pointer

    for load, mode in rounded(k).items():
        matrix = _staged(p, load, _stage_offset(k, p, load, stage))
        words = matrix.nbytes // 16
        for first in range(0, words, k.threads):     # whole rounds where the threads divide the words
            item = k.b.op(f"add i32 {k.tid}, {first}", "rw") if first else k.tid
            off = k.b.op(f"add i32 {k.b.op(f'shl i32 {item}, 4', 'rw')}, {matrix.offset}", "rw")
            if matrix.stage:
                off = k.b.op(f"add i32 {off}, {matrix.stage}", "rw")
            at = pointer(k, off)

            def move(at: str = at, mode: str = mode) -> None:
                word = k.b.op(f"load <4 x i32>, ptr addrspace(3) {at}, align 16", "rw")
                k.b.emit(f"store <4 x i32> {_rounded_words(k, word, mode)}, ptr addrspace(3) {at}, align 16")

            if first + k.threads > words:
                k.guarded(k.b.op(f"icmp ult i32 {item}, {words}", "rw"), lambda: move() or None)
            else:
                move()
    scaled = _scaled(k)
    if scaled is not None:
        base, nbytes, _ = _scale_stages(k, p, scaled)
        sources = [_source(scaled.operand(n)) for n in ("lhs_scale", "rhs_scale")]
        tiles = [SharedTileVal(src.results[0].type,  # type: ignore[union-attr]
                               _staged(p, src, _stage_offset(k, p, src, stage))) for src in sources]
        _, m, n = k.assignment.tcgen05_layouts[scaled].shape  # type: ignore[union-attr]
        at = k.b.op(f"add i32 {k.b.op(f'mul i32 {stage}, {nbytes}', 'rw')}, {base}", "rw")
        restage_tcgen05(k, scaled, tcgen05_sources(k, tiles), at, m, n)
    fence_async_proxy(k)     # the rounded words and restaged scales, seen by the tensor cores' reads
    ready = mbarrier.address(k, k.tmem.ready, stage)
    if p.pair is not None:   # the leader's MMA thread waits for both CTAs' preparation
        from .cta_pair import arrive_at_leader

        arrive_at_leader(k, ready)
    else:
        mbarrier.arrive(k, ready)


# ftof rounding modes -> the cvt that rounds an f32 to tf32 so (sm_90+: one F2FP.TF32 each)
_CVT_TF32 = {"nearest_even": "rn", "zero": "rz", "nearest_away": "rna"}


def _rounded_words(k: KernelLowering, words: str, mode: str) -> str:
    """A <4 x i32> of f32 bits, each rounded to tf32 as `mode` says: by cvt where one has the mode,
    else in integer arithmetic (kmajor_copy's)."""
    from .kmajor_copy import _tf32_words

    cvt = _CVT_TF32.get(mode)
    if cvt is None:
        return _tf32_words(k, words, 4, mode)
    out = "undef"
    for i in range(4):
        word = k.b.op(f"extractelement <4 x i32> {words}, i32 {i}", "tf")
        rounded = k.b.op(f'call i32 asm "cvt.{cvt}.tf32.f32 $0, $1;", "=r,r"(i32 {word})', "tf")
        out = k.b.op(f"insertelement <4 x i32> {out}, i32 {rounded}, i32 {i}", "tf")
    return out
