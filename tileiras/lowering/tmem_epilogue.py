"""The epilogue of a warp-specialized sm_100 matmul, column chunk by column chunk.

The accumulator of a 128x256 or 256x128 tile is 128 registers a thread in the epilogue's two
warpgroups, and the CTA that also holds the producer warpgroup and the MMA warp launches with 128
registers a thread: read whole (one tcgen05.ld), the tile does not fit. NVIDIA's epilogues read
tensor memory a few columns at a time and convert and store each piece before reading the next;
so does this one: where the rest of the kernel after the loop is its accumulator computed on
element by element (conversions; arithmetic with broadcasts of smaller tiles, a constant, a scale,
a bias, lowered whole first; tiles loaded a chunk at a time, a residual) and stored to a view
(tileas/tcgen05_roles.chunkable), the epilogue warps read each
chunk of `CHUNK_REGISTERS` registers (`ops_tcgen05.read_columns`, a 16x256b.xN load of some of
the warp's 8-column blocks), then lower the conversions and the store on that chunk alone, in a
`ColumnChunk` layout: the accumulator layout's slots of those blocks. The store's own lowering
then computes exactly those elements' addresses and bounds. Those ops are marked lowered
(`KernelLowering.lowered_ahead`) and the kernel's walk skips them.
"""

from __future__ import annotations

from typing import Optional

from ..ir.core import Operation
from ..ir.types import TileType
from ..ir.record import record, replace
from .kernel import KernelLowering
from ..layout.encodings import MmaLayout, window_slot
from ..layout.index_math import Pre, coords, element
from .llvm_text import llvm_type
from .epilogue import write_fragments
from ..tileas.epilogue_forms import fragment_stores
from ..layout.shared_matrix import SharedMatrix
from ..tileas.tcgen05_roles import chunked
from ..tileas.tma_boxes import TmaCopy, describe
from .tma_copy import hidden_param
from .token_waits import emit_wait
from .tma_copy import store as store_boxes
from .values import TileRegs, TokenVal

CHUNK_REGISTERS = 32     # accumulator registers a chunk reads (NVIDIA's: 8 to 32 columns a thread)


@record
class ColumnChunk:
    """The slots of 8-column blocks `first` .. `first + blocks - 1` (of each warp's) of an mma
    accumulator layout `parent`, in the parent's order: what one chunk of the epilogue holds."""
    parent: MmaLayout
    first: int
    blocks: int

    @property
    def threads(self) -> int:
        return self.parent.threads

    def parent_slot(self, slot: int) -> int:
        return window_slot(self.parent, self.first, self.blocks, slot)

    def run(self, num_elements: int) -> int:
        return self.parent.run(num_elements)

    def owns_all(self, num_elements: int) -> bool:
        return False     # the other chunks hold the rest

    def slots(self, num_elements: int) -> int:
        rb, rm, _ = self.parent.repeats
        return rb * rm * self.blocks * 4

    def slot_shift(self, shape: tuple[int, ...], slot: int) -> Optional[tuple[int, ...]]:
        """`MmaLayout.slot_shift` from the chunk's first slot: its elements' addresses step from one
        (ops_memory._shifted_addresses) where each was built on its own (a residual of 128 x 256 bf16 with
        runtime strides, 32 elements a chunk: two 64-bit products, two bounds and their `and` each)."""
        first, at = (self.parent.slot_shift(shape, self.parent_slot(s)) for s in (0, slot))
        if first is None or at is None or any(a < f for a, f in zip(at, first)):
            return None
        return tuple(a - f for a, f in zip(at, first))

    def describe(self) -> str:
        return f"#column_chunk<{self.parent.describe()}, blocks {self.first}..{self.first + self.blocks - 1}>"


@element.register
def _chunk_element(layout: ColumnChunk, pre: Pre, tid: str, num_elements: int, slot: int) -> tuple[str, Optional[str]]:
    return element(layout.parent, pre, tid, num_elements, layout.parent_slot(slot))


@coords.register
def _chunk_coords(layout: ColumnChunk, pre: Pre, tid: str, slot: int) -> tuple[str, str, str, Optional[str]]:
    return coords(layout.parent, pre, tid, layout.parent_slot(slot))


def chunk_blocks(layout: MmaLayout) -> int:
    """8-column blocks (of each warp's) a chunk reads: CHUNK_REGISTERS registers."""
    _, rm, rn = layout.repeats
    blocks = max(1, CHUNK_REGISTERS // (4 * rm))
    while rn % blocks:
        blocks //= 2
    return blocks


def lower(k: KernelLowering, loop: Operation, mma: Operation) -> bool:
    """The rest of the kernel after `loop` (whose result is `mma`'s accumulator, in tensor memory),
    chunk by chunk; False (nothing emitted) where it is not `chunkable`."""
    from .ops_tcgen05 import read_columns
    from .registry import LOWERINGS

    found = chunked(loop, k.assignment.tcgen05_layouts[mma], k.cta_pair is not None)
    if found is None:
        return False
    before, chain, store = found
    asked = len(k.buffers.buffers)
    for op in before:      # (as the kernel's walk would: the buffers they ask for are theirs)
        outer, k.current_op = k.current_op, op
        LOWERINGS[op.name](k, op)
        k.current_op = outer
    if len(k.buffers.buffers) > asked:   # their scratch is read before the chunks reuse its bytes
        k.barrier()
    layout = k.assignment.tcgen05_layouts[mma]  # type: ignore[union-attr]
    init = k.tile(loop.operand_group("initValues")[0])
    lb = k.tile(loop.operand("lowerBound")).slots[0]  # type: ignore[arg-type]
    ub = k.tile(loop.operand("upperBound")).slots[0]  # type: ignore[arg-type]
    ity = llvm_type(loop.operand("lowerBound").type.element)  # type: ignore[union-attr]
    ran = k.b.op(f"icmp {'ult' if loop.attributes.get('unsignedCmp', False) else 'slt'} {ity} {lb}, {ub}", "tran")
    result = loop.results[0]
    values = [result] + [op.results[0] for op in chain]
    # the tiles the chain reads beside (tcgen05_roles.broadcast), whole: each chunk takes its slots of them
    beside = {v: k.tile(v) for op in chain for v in op.operands
              if v not in values and isinstance(v.type, TileType) and v.type.shape}
    assert all(tile.layout == layout for tile in beside.values()), "tcgen05_roles.chunkable: in the accumulator's layout"
    saved = {v: v.layout for v in [*values, *beside]}
    blocks, total = chunk_blocks(layout), layout.repeats[2]
    lty = llvm_type(result.type.element)  # type: ignore[attr-defined]
    k.schedule_notes.append(f"//   epilogue: the accumulator read from tensor memory in {total // blocks} column "
                            f"chunks (16x256b.x{blocks}), each {'converted and ' if chain else ''}stored before "
                            f"the next")
    staged = _tma_stage(k, store)
    if staged is not None:
        k.schedule_notes.append(f"//   epilogue: the chunks written swizzled into the freed stages, then stored by "
                                f"one thread with TMA: {describe(staged[0])}")
    # what the chain's loads wait for (a persistent tile's C after the previous tile's store) is waited for
    # once, before the first chunk: a barrier between chunks would publish the chunks' writes to the
    # staging buffer before their fence.proxy.async
    for op in chain:
        emit_wait(k, op)
    waits = {op: k.order.waits.pop(op) for op in chain if k.order is not None and op in k.order.waits}
    k.b.emit('call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
    try:
        for first in range(0, total, blocks):
            chunk = ColumnChunk(layout, first, blocks)
            for v in [*values, *beside]:      # the values hold this chunk's slots while its ops are lowered
                v.layout = chunk
            for v, whole in beside.items():
                k.set(v, TileRegs(whole.type, [whole.slots[chunk.parent_slot(s)]
                                               for s in range(chunk.slots(whole.type.num_elements))], chunk))
            regs = read_columns(k, mma, first, blocks)
            inits = [init.slots[chunk.parent_slot(s)] for s in range(len(regs))]
            # a loop that ran no iteration left tensor memory unwritten: its result is the initial value
            k.set(result, TileRegs(result.type, [k.b.op(f"select i1 {ran}, {lty} {r}, {lty} {i}", "tacc")  # type: ignore[arg-type]
                                                 for r, i in zip(regs, inits)], chunk))
            # one remark per op, for all the chunks (whose code is alike): the first chunk's, counted whole
            k.remark = _counted(k, total // blocks) if not first else lambda *args, **kwargs: None  # type: ignore
            try:
                for op in chain + ([] if staged else [store]):
                    outer, k.current_op = k.current_op, op
                    LOWERINGS[op.name](k, op)
                    k.current_op = outer
            finally:
                del k.remark
            if staged is not None:      # this chunk's elements into the C tile's swizzled buffer
                # (coordinates computed per chunk: hoisted, every chunk's would stay live all along)
                tile = k.tile(store.operand("tile"))
                write_fragments(k, tile, staged[1], fragment_stores(k.caps, tile.type, tile.layout),  # type: ignore
                                here=True)
    finally:
        for v, lay in saved.items():
            v.layout = lay
        if k.order is not None:
            k.order.waits.update(waits)
    if staged is not None:
        _store_by_tma(k, store, *staged)
    for v in [*values, *beside]:
        k.values.pop(v, None)      # partial: nothing after this reads them
    k.set(store.results[0], TokenVal())
    k.lowered_ahead.update(before + chain + [store])
    return True


def _tma_stage(k: KernelLowering, store: Operation) -> Optional[tuple[TmaCopy, SharedMatrix]]:
    """The TMA copy and buffer plan-shared-memory gave `store` (`SharedPlan.tma_stages`:
    tcgen05_buffers.tma_stage beside the buffers planned before it), the buffer placed and the tensor
    map a hidden parameter; None where it gave none."""
    found = k.planned.get("tma_stages", store)
    if found is None:
        return None
    t, matrix = found
    t = replace(t, slot=hidden_param(k, t.spec, store))
    return t, replace(matrix, offset=k.alloc_buffer(matrix.nbytes, "tmem-epilogue"))


def _store_by_tma(k: KernelLowering, op: Operation, t: TmaCopy, matrix: SharedMatrix) -> None:
    """Every chunk is in `matrix`: its generic writes fenced for the async proxy and published to the
    epilogue warps' thread 0, which stores the boxes (tma_copy.store); remarked as the sm_90 one."""
    from .async_copy import fence_async_proxy

    fence_async_proxy(k)
    k.barrier()
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "ep"), lambda: store_boxes(k, op, t, matrix))
    k.remark("passed", "memory", "RemarkMemoryStoreInstructionSelected", "Store instruction selected", op,
             Instruction="TMA store (cp.async.bulk.tensor from shared memory)",
             Boxes=f"{describe(t)}, by one thread through a swizzled buffer, written chunk by chunk")


def store_fragments(k: KernelLowering, op: Operation, tile: TileRegs) -> bool:
    """Attention's O on sm_100 (an accumulator kept in tensor memory, rescaled there: its registers
    after the loop in the accumulator's layout, divided and converted) stored by TMA as NVIDIA's
    is: every thread writes its fragments swizzled into bytes free while the store runs (the
    stages', `_tma_stage`), then one thread stores the boxes (128 rows each). Only where the
    attention is warp-specialized (tileas/tcgen05_roles.attention_mmas), whose consumers have
    the registers: the unspecialized M = 256 ones spill for the buffer's addresses (24 bytes in the
    f16 d128 causal 256x128). False (nothing emitted) elsewhere: other kernels, a store inside a
    loop, a layout or view TMA cannot take. Which stores are, and their buffers, plan-shared-memory
    decided (shared_tcgen05.at_op)."""
    found = _tma_stage(k, op)
    if found is None:
        return False
    t, matrix = found
    k.barrier()          # every thread's reads of the bytes' earlier buffers are done
    write_fragments(k, tile, matrix, fragment_stores(k.caps, tile.type, tile.layout),  # type: ignore[arg-type]
                    here=True)     # (addresses not hoisted: live only here)
    from .async_copy import fence_async_proxy

    fence_async_proxy(k)
    k.barrier()
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "ep"), lambda: store_boxes(k, op, t, matrix))
    return True


def _counted(k: KernelLowering, chunks: int):
    """k.remark with a store's per-thread count ("N per thread") multiplied by `chunks`."""
    remark = k.remark

    def emit(*args, **kwargs) -> None:
        stores = str(kwargs.get("Stores", ""))
        if stores.endswith(" per thread") and stores.split()[0].isdigit():
            kwargs["Stores"] = f"{int(stores.split()[0]) * chunks} per thread"
        remark(*args, **kwargs)
    return emit
