"""Which tcgen05 mmas the MMA warp of a warp-specialized sm_100 loop issues, decided on the IR and
its layouts before any lowering (pass `plan-warp-roles`, warp_roles.decide):

* a matmul's K loop whose whole work is its mmas, accumulators resident in tensor memory from zero
  (`loop_mmas`), read after the loop by the epilogue warps, in column chunks where the rest of the
  kernel is the accumulator computed on element by element, with broadcasts (a scale, a bias) and
  tiles loaded beside it (a residual), and stored (`chunkable`);
* an attention loop, which computes between its mmas: the consumers run the softmax where the
  scores fit the larger CTA's registers (`consumers_issue`), and the MMA warp issues S = Q K^T and
  O += P V where their operands allow (`attention_mmas`), P in tensor memory or a swizzled shared
  buffer (`p_in_tmem`).

The lowering emits those roles (lowering/warp_specialize_tcgen05.py, lowering/tmem_epilogue.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..dialects.elementwise import VALUES
from ..ir.core import Operation
from ..layout.encodings import MmaLayout, PairAccLayout, TmemAccLayout
from ..tileaa.mma_forms import kind_of
from ..tileaa.mma_operands import (LOOP_BODY_OPS, passes, rescale, resident_loop, source, to_tf32, transpose_2d,
                                   zero)
from ..transforms.rewrite import inside_op
from .tcgen05_select import RESTAGED, register_a
from .tmem_columns import tmem_a_columns
from .warp_roles import launch_registers, pure

if TYPE_CHECKING:
    from .plan import KernelFacts

# registers a consumer thread's softmax keeps beside the scores and their exponentials (row max and
# sum, addresses, loop state): the launch budget of NVIDIA's 384-thread attention (168) less 2 x 64
SOFTMAX_REGISTERS = 40

# element-wise conversions an epilogue may apply to the accumulator before storing it, and reshapes
# (a batched matmul's (1, M, N) store), which keep the row-major order a ColumnChunk's elements follow
EPILOGUE_CHAIN = frozenset({"cuda_tile.ftof", "cuda_tile.itof", "cuda_tile.ftoi", "cuda_tile.exti",
                            "cuda_tile.trunci", "cuda_tile.reshape"})


def staged_load(value: object) -> Optional[Operation]:
    """The load whose tile `value` is (through unit reshapes, 2-D transposes and roundings to tf32),
    else None."""
    return source(value, passes)[0]  # type: ignore[arg-type]


def scaled_mma(k: "KernelFacts") -> Optional[Operation]:
    """The specialized loop's block-scaled mma (its only one; `loop_mmas`), whose scales the
    epilogue warps restage per stage for the MMA warp's tcgen05.cp (lowering/warp_specialize_tcgen05.py)."""
    return next((op for op in k.warp_split.mmas if op.name == "cuda_tile.mmaf_scaled"), None)


def loop_mmas(k: "KernelFacts", loop: Operation, loads: tuple) -> tuple[tuple[Operation, ...], str]:
    """The tcgen05 mmas that are the whole work of `loop` (empty, and why not, otherwise)."""
    layouts = getattr(k.assignment, "tcgen05_layouts", None) or {}
    body = loop.regions[0].block
    # the staged loads' index arithmetic goes with the copies (PipelinePlan.index_ops): the MMA warp has none
    indexing = set(k.pipelines[loop].index_ops) if loop in (k.pipelines or {}) else set()
    mmas = []
    for op in body.operations:
        if op in indexing and all(use in loads or use in indexing for r in op.results for use in r.uses):
            continue
        if op in layouts:
            if op.name == "cuda_tile.mmaf_scaled" and any(
                    staged_load(op.operand(n)) not in loads for n in ("lhs_scale", "rhs_scale")):
                return (), "a block-scaled mma's scales are not staged loads of the loop"
            found = resident_loop(op)
            if found is None or found[0] is not loop:
                return (), "an mma's accumulator does not stay in tensor memory through the loop"
            if not zero(loop.operand_group("initValues")[found[1]]):
                return (), "an accumulator starts from a nonzero value"
            sources = [staged_load(op.operand(n)) for n in ("lhs", "rhs")]
            if any(src not in loads for src in sources):
                return (), "an mma operand is not a staged load of the loop"
            if not all(k.assignment.is_swizzled(src.results[0]) for src in sources):  # type: ignore[union-attr]
                return (), "an mma operand's buffer is not in the layout the MMA reads"
            mmas.append(op)
        elif to_tf32(op):
            if staged_load(op.results[0]) not in loads or len(op.results[0].uses) != 1 \
                    or op.results[0].uses[0] not in layouts:
                return (), "a tf32 rounding that is not of a staged load feeding an mma"
        elif transpose_2d(op):     # a column-major operand: the MMA reads its stage transposed
            if staged_load(op.results[0]) not in loads or \
                    any(u not in layouts and not passes(u) for u in op.results[0].uses):
                return (), "a transpose that is not of a staged load feeding an mma"
        elif op.name == "cuda_tile.load_view_tko" and op not in loads:
            return (), "a load of the loop is not staged by the pipeline (the producer copies only staged loads)"
        elif op.name not in LOOP_BODY_OPS:
            return (), f"the loop body also runs '{op.name}'"
    if not mmas:
        return (), "no tcgen05 mma in the loop"
    if len(layouts) > 1 and any(op.name == "cuda_tile.mmaf_scaled" for op in mmas):
        return (), "a block-scaled mma beside other tcgen05 mmas (its scales' tensor memory is per stage)"
    if len(body.arguments) - 1 != len(mmas):
        return (), "the loop carries values besides its accumulators"
    words = _accumulator_words(k, mmas)
    # two epilogue warpgroups: read whole, the accumulators may not fit the larger CTA's launch (whatever its
    # producer: a warpgroup copying by cp.async at most, beside the MMA warp)
    budget = min(255, launch_registers(k, extra=32))
    if k.threads // 128 > 1 and words + WHOLE_MARGIN > budget:
        found, why = chunkable(loop)
        if found is None or len(mmas) != 1:
            return (), (f"the epilogue warps' {words} accumulator registers a thread, read whole, do not fit the "
                        f"{budget} the CTA launches with; they read them in column chunks, but "
                        f"{why or 'two mmas'}")
    return tuple(mmas), ""


# Registers the epilogue warps need beside the accumulators they read out of tensor memory whole (addresses,
# masks, the rest of the kernel): a split-K 64 x 256 f32 tile on 256 threads (64 a thread) adding itself to
# the output atomically through computed pointers takes 96.
WHOLE_MARGIN = 64


def _accumulator_words(k: "KernelFacts", mmas: list) -> int:
    """The 32-bit registers a consumer thread holds of `mmas`' accumulators."""
    return sum(op.results[0].type.num_elements * max(op.results[0].type.element.bitwidth, 32) // 32
               for op in mmas) // k.threads


def consumers_issue(k: "KernelFacts", loop: Operation) -> Optional[str]:
    """Where `loop_mmas` refuses the MMA-warp form because the loop computes between its mmas
    (attention: S = Q K^T, the softmax, O rescaled in tensor memory, O += P V), the sm_90 form
    still applies: the producer warpgroup copies K and V, the consumer warpgroups run the body and
    issue its tcgen05 mmas themselves (one thread, waited for by all, as unspecialized), so a stage
    is read by the tensor cores before the consumers release it. Chosen for loops that keep an
    accumulator in tensor memory, rescaled (`mma_operands.rescale`) or beside other mmas whose results
    the body computes with (attention's backward: dQ += dS K beside S = Q K^T and dP = dO V^T; a d64
    backward without facts ran 84 instructions per mma unsplit, 40 split, NVIDIA's 14): the matmuls
    keep their form.
    None where the loop is not such a loop; "" where the form applies; else why not: ptxas
    allocates within the budget the larger CTA launches with (setmaxnreg.inc does not raise it),
    so the scores a consumer thread reads out of tensor memory, and their exponentials, must fit
    there beside the softmax's state (NVIDIA's: 384 threads, 168 registers, the scores of 128 x
    128 on two warpgroups)."""
    layouts = getattr(k.assignment, "tcgen05_layouts", None) or {}
    resident = [op for op in layouts if (resident_loop(op) or (None,))[0] is loop]
    mmas = [op for op in layouts if op.parent is loop.regions[0].block]
    if not any(rescale(op) is not None for op in resident) and not (resident and len(mmas) > 1):
        return None
    if k.threads not in (128, 256):   # one warpgroup: 256 threads launch with 255 registers, no setmaxnreg.inc
        return (f"{k.threads // 32} consumer warps: the specialized attention is built for one or two "
                f"consumer warpgroups (256 or 384 threads, as NVIDIA's)")
    budget = min(255, launch_registers(k))
    for op, layout in layouts.items():
        _, m, n = layout.shape
        words = m * n // k.threads      # f32 scores a consumer thread holds
        if resident_loop(op) is None and 2 * words + SOFTMAX_REGISTERS > budget:
            return (f"the consumers' {m} x {n} scores take {words} registers a thread, twice that and the "
                    f"softmax's {SOFTMAX_REGISTERS} exceed the {budget} the larger CTA launches with")
    return ""


def attention_mmas(k: "KernelFacts", loop: Operation, loads: tuple) -> tuple[tuple[Operation, ...], str]:
    """(S = Q K^T, O += P V) of an attention loop (`consumers_issue`) whose MMAs one thread of an MMA
    warp can issue while the consumers run only the softmax (NVIDIA's roles): Q a swizzled tile
    loaded before the loop, K and V the loop's staged loads read by nothing else, S from zero, O
    kept in tensor memory and rescaled there, P stored to tensor memory as P V's A operand
    (M = 128) or to a shared buffer (M = 64, `p_buffer`). The scores may be a chain of mmas, each
    accumulating onto the one before (MLA prefill: Q K^T + Q_pe K_pe^T), all issued into the last
    one's columns. Else () and why not."""
    layouts = k.assignment.tcgen05_layouts  # type: ignore[union-attr]
    mmas = [op for op in loop.regions[0].block.operations if op in layouts]
    if len(mmas) < 2:
        return (), f"{len(mmas)} tcgen05 mma in the loop body (the MMA warp issues S = Q K^T and O += P V)"
    *scores, o = mmas
    if resident_loop(scores[0]) is not None or not zero(scores[0].operand("acc")):
        return (), "the scores' mma does not start from zero"
    for before, after in zip(scores, scores[1:]):
        if after.operand("acc") is not before.results[0] or len(before.results[0].uses) != 1 \
                or layouts[after].shape != layouts[before].shape:
            return (), f"{len(mmas)} tcgen05 mmas in the loop body that are not a chain of scores and O += P V"
    if rescale(o) is None or (resident_loop(o) or (None,))[0] is not loop:
        return (), "the last mma's accumulator is not O, rescaled in tensor memory"
    if any(kind_of(op).name in RESTAGED or op.name == "cuda_tile.mmaf_scaled" for op in mmas):  # type: ignore
        return (), "an operand is restaged (tf32) or block-scaled"
    if not p_in_tmem(k, o) and not register_a(kind_of(o)):  # type: ignore[arg-type]
        return (), "P can go neither to tensor memory nor to a swizzled shared buffer"
    # (tf32 kinds were refused above: no rounding lies on these paths, only unit reshapes and transposes)
    queries = [staged_load(op.operand("lhs")) for op in scores]
    staged = {op: staged_load(op.operand("rhs")) for op in mmas}
    if any(q is None or inside_op(q, loop) for q in queries) or set(staged.values()) != set(loads) \
            or len(loads) != len(mmas):
        return (), "the operands are not Q loaded before the loop and K, V staged by the pipeline"
    if not all(k.assignment.is_swizzled(src.results[0]) for src in (*queries, *loads)):  # type: ignore
        return (), "an operand's buffer is not in the layout the MMA reads"
    for op, load in staged.items():     # the consumers read no stage: K and V feed the mmas only
        value = load.results[0]  # type: ignore[union-attr]
        while len(value.uses) == 1 and value.uses[0].name in ("cuda_tile.reshape", "cuda_tile.permute"):
            value = value.uses[0].results[0]
        if [u for u in value.uses] != [op]:
            return (), "a staged tile is read by more than its mma"
    return tuple(mmas), ""


def p_in_tmem(k: "KernelFacts", o: Operation) -> bool:
    """Whether O += P V reads P from tensor memory (M = 128 or 256 in the scores' layout, as
    ops_tcgen05._a_in_tmem stores it), else from a swizzled shared buffer (M = 64)."""
    m = k.assignment.tcgen05_layouts[o].shape[1]  # type: ignore[union-attr]
    layout = k.layout_of(o.operand("lhs"))
    return bool(tmem_a_columns(o, m)) and isinstance(layout, TmemAccLayout) and layout.shape[1] == m


def _epilogue_pure(op: Operation) -> bool:
    return pure(op) or op.name == "cuda_tile.make_partition_view"


def chunkable(loop: Operation) -> tuple[Optional[tuple[list[Operation], list[Operation], Operation]], str]:
    """(ops lowered before the chunks, the chain, store) of what follows `loop` when it is only its one
    result computed on element by element and stored to a view (then `return`, or a persistent loop's
    `continue` carrying the store's token to the next tile); else None and why.
    The chain's ops are element-wise (`EPILOGUE_CHAIN`, arithmetic and math) on values computed from
    the accumulator, on tiles loaded beside it a chunk at a time (`_chunk_load`: a residual, C's old
    values), and on broadcasts of smaller tiles (`broadcast`: a constant, a scale, a bias), which are
    computed whole before the chunks, with the scalars and views they need."""
    block = loop.parent
    assert block is not None
    ops = block.operations[block.operations.index(loop) + 1:]
    last = ops[-1] if ops else None
    # the kernel's end, or a persistent loop's next tile, which carries at most the store's token
    ends = last is not None and (last.name == "cuda_tile.return" and not last.operands
                                 or last.name == "cuda_tile.continue" and _continues_after_store(last, ops))
    if len(loop.results) != 1 or not ends:
        return None, "the loop's one result is not all the rest of the kernel uses"
    chain: list[Operation] = []
    before: list[Operation] = []
    store = None
    derived: set = {loop.results[0]}      # the values computed from the accumulator
    for op in ops[:-1]:
        reads = [v in derived for v in op.operands]
        if store is None and op.name == "cuda_tile.store_view_tko" and op.operand("tile") in derived \
                and all(u is last for u in op.results[0].uses) and sum(reads) == 1:
            store = op
        elif store is None and _chunk_load(op, loop.results[0]):
            chain.append(op)      # a tile beside the accumulator (a residual): loaded a chunk at a time
            derived.add(op.results[0])
        elif store is None and any(reads) and _chained(op):
            other = next((v for read, v in zip(reads, op.operands)
                          if not read and not (broadcast(v) and v.layout == loop.results[0].layout)), None)
            if other is not None:
                return None, (f"the epilogue's '{op.name}' reads a whole tile beside the accumulator "
                              f"('{getattr(other.owner, 'name', 'argument')}'), not a broadcast in its layout")
            chain.append(op)
            derived.add(op.results[0])
        elif not any(reads) and _before_chunks(op):
            before.append(op)
        else:
            return None, f"the epilogue also runs '{op.name}'"
    if store is None:
        return None, "the accumulator is not stored to a view after the loop"
    if any(u is not store and u not in chain for v in derived for u in v.uses):
        return None, "a value computed from the accumulator is used besides its store"
    return (before, chain, store), ""


def _continues_after_store(last: Operation, ops: list[Operation]) -> bool:
    """Whether `continue` `last` carries only the token of a store among `ops` (a persistent loop's
    tiles ordered by their stores) into the next iteration."""
    stores = {op.results[0] for op in ops if op.name == "cuda_tile.store_view_tko"}
    return all(v in stores for v in last.operands)


def _chunk_load(op: Operation, acc: object) -> bool:
    """A load of a tile of the accumulator's shape, in its layout, whose token nothing but the store
    waits on (directly or joined with others: C read in place, after the previous tile's store): each
    chunk loads its own elements (the store of a chunk's elements follows their load)."""
    if op.name != "cuda_tile.load_view_tko":
        return False
    tile = op.results[0]
    return getattr(tile.type, "shape", None) == acc.type.shape and tile.layout == acc.layout \
        and all(_to_store(u) for u in op.results[1].uses)  # type: ignore[attr-defined]


def _to_store(op: Operation) -> bool:
    """A store, or a `join_tokens` whose tokens only stores wait on."""
    if op.name == "cuda_tile.join_tokens":
        return all(_to_store(u) for u in op.results[0].uses)
    return op.name == "cuda_tile.store_view_tko"


def _chained(op: Operation) -> bool:
    """An op a chunk of the epilogue applies to its elements alone (`chunkable`)."""
    if len(op.results) != 1 or op.regions:
        return False
    if op.name in EPILOGUE_CHAIN:
        return len(op.operands) == 1
    shape = getattr(op.results[0].type, "shape", None)
    return op.name in VALUES and all(getattr(v.type, "shape", None) == shape for v in op.operands)


def _before_chunks(op: Operation) -> bool:
    """An op of the epilogue that does not read the accumulator, lowered whole before its chunks:
    scalars, views, element-wise ops and shape changes, and loads whose token nothing waits on."""
    if op.regions:
        return False
    if op.name == "cuda_tile.load_view_tko":
        return not op.results[1].uses
    if op.name == "cuda_tile.join_tokens":
        return all(_to_store(u) for u in op.results[0].uses)
    return _epilogue_pure(op) or op.name in VALUES or op.name in _SHAPING


_SHAPING = frozenset({"cuda_tile.constant", "cuda_tile.reshape", "cuda_tile.broadcast", "nv_tileas.convert_layout"})


def broadcast(value: object) -> bool:
    """Whether tile `value` is a broadcast of a smaller one: a splat constant, a broadcast (of a
    scalar, of a per-row scale, of a column bias), and element-wise ops, layout conversions and
    reshapes of such tiles. A thread holds one register per element of the smaller tile it sees,
    where a loaded tile (a residual) would take one an element of the accumulator's."""
    from ..transforms.constants import is_splat_constant

    owner = getattr(value, "owner", None)
    if not isinstance(owner, Operation):
        return False
    if owner.name == "cuda_tile.constant":
        return is_splat_constant(value)  # type: ignore[arg-type]
    if owner.name == "cuda_tile.broadcast":
        return True
    if owner.name in ("nv_tileas.convert_layout", "cuda_tile.reshape") or owner.name in VALUES:
        return all(broadcast(v) for v in owner.operands)
    return False


def chunked(loop: Operation, layout: MmaLayout, paired: bool
            ) -> Optional[tuple[list[Operation], list[Operation], Operation]]:
    """`chunkable`'s (pure ops, conversion chain, store) where the epilogue warps read the accumulator of
    `loop` (in `layout`; `paired`: a CTA pair runs its mma) in column chunks, else None (also a
    pair's rows that each CTA reads alone: read whole, then converted, ops_tcgen05._transfer).
    (lowering/tmem_epilogue.lower; plan-shared-memory, shared_tcgen05.py)."""
    found, _ = chunkable(loop)
    if found is None or isinstance(layout, PairAccLayout) and not paired:
        return None
    return found


def fragments_staged(k: "KernelFacts", op: Operation, layout: object, split: object) -> bool:
    """Whether the epilogue (lowering/tmem_epilogue.store_fragments) tries to store `op`'s tile (in `layout`) by TMA: a store in the
    kernel's body of attention's O (an mma layout) where the attention is warp-specialized (`split`,
    its MMA warp's form). (Also plan-shared-memory, shared_tcgen05.py.)"""
    return k.caps.has("tcgen05") and op.parent is k.entry.regions[0].block and isinstance(layout, MmaLayout) \
        and split is not None and split.form == "attention"  # type: ignore[attr-defined]
