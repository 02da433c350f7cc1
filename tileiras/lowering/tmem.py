"""Tensor memory of one kernel (sm_100 tcgen05): allocation, the MMA-completion mbarrier, release.

A kernel whose mmas run on tcgen05 (ops_tcgen05.py) gets, in its entry block: warp 0 allocates
`columns` columns of tensor memory (a power of two, 32..512; all 128 lanes) and gives up its
permit to allocate more (so other CTAs on the SM are not blocked behind it); thread 0 initializes
one mbarrier (one arrival per phase: the MMA issuer's `tcgen05.commit`); then a CTA barrier and
every thread reads the allocated address from shared memory. Before every `ret`: a CTA barrier
(every warp's tensor-memory reads are done) and warp 0 frees the columns, which a kernel must do
before it exits.

The mbarrier's phase parity is a thread-local counter (an alloca LLVM promotes to registers):
each MMA batch completes one phase, and every thread waits for it with `try_wait.parity`.

Shared control block (128 bytes): the mbarrier at 0, the tensor-memory address at 8, from 16
the stage mbarriers of a warp-specialized loop whose epilogue warps prepare each stage for the
MMA warp (`stage_barriers`), and in its last 8 bytes the accumulator-free mbarrier of a persistent
loop's MMA warp (`accumulator_free`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.record import record
from ..target.table import TMEM_COLUMNS
from ..tileas.tcgen05_buffers import CONTROL_BYTES
from .smem import pointer

if TYPE_CHECKING:
    from .kernel import KernelLowering

COLUMNS = TMEM_COLUMNS      # tensor memory per SM: 128 lanes x 512 32-bit columns (the target table's)
ROLE_EXIT = "; role exit"    # a `ret void` of a warp-specialized role that never touched tensor memory


@record(frozen=False)
class TensorMemory:
    columns: int       # allocated columns
    address: str       # i32: the allocation's base address (lane 0, first column)
    mbarrier: str      # i32: shared address of the MMA-completion mbarrier
    phase: str         # ptr: the thread's expected phase parity (alloca)
    warp0: str         # i32 1 where this thread is in warp 0 (allocates and frees), else 0
    control: int = 0   # offset of the shared control block
    group: int = 1     # .cta_group: 2 where a CTA pair shares the MMAs (cta_pair.py)
    ready: object = None   # mbarrier.BarrierArray: the stages prepared for the MMA warp (`stage_barriers`)
    free: str = ""         # i32: the accumulator-free mbarrier (`accumulator_free`), once asked for


def allocation_columns(needed: int) -> int:
    """The power of two >= 32 that tcgen05.alloc hands out for `needed` columns."""
    cols = 32
    while cols < needed:
        cols *= 2
    return cols


def _shared_u32(k: "KernelLowering", offset: int) -> str:
    return k.b.pre(f"ptrtoint ptr addrspace(3) {pointer(k, str(offset))} to i32", "tmc")


def tensor_memory(k: "KernelLowering", columns: int) -> TensorMemory:
    """The kernel's tensor memory (allocated on first use, in the entry block)."""
    state = getattr(k, "tmem", None)
    if state is not None:
        return state
    cols = allocation_columns(columns)
    group = 2 if k.cta_pair is not None else 1
    base = k.alloc_buffer(CONTROL_BYTES, "tmem-control")   # kept alive by the epilogue's release
    mbar, slot = _shared_u32(k, base), _shared_u32(k, base + 8)
    warp0 = k.b.pre(f"zext i1 {k.b.pre(f'icmp ult i32 {k.tid}, 32', 'tmw')} to i32", "tmw")
    first = k.b.pre(f"zext i1 {k.b.pre(f'icmp eq i32 {k.tid}, 0', 'tmt')} to i32", "tmt")
    pro = k.b.prologue
    pro.append(f'  call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $0, 0; '
               f'@p tcgen05.alloc.cta_group::{group}.sync.aligned.shared::cta.b32 [$1], {cols}; '
               f'@p tcgen05.relinquish_alloc_permit.cta_group::{group}.sync.aligned; }}", '
               f'"r,r,~{{memory}}"(i32 {warp0}, i32 {slot})')
    pro.append(f'  call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $0, 0; '
               f'@p mbarrier.init.shared::cta.b64 [$1], 1; }}", "r,r,~{{memory}}"(i32 {first}, i32 {mbar})')
    k.b.declare("declare void @llvm.nvvm.barrier0()")
    pro.append("  call void @llvm.nvvm.barrier0()")
    pro.append('  call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()')
    address = k.b.pre(f"load volatile i32, ptr addrspace(3) {pointer(k, str(base + 8))}", "tma")
    phase = k.b.pre("alloca i32, align 4", "tmp")
    pro.append(f"  store i32 0, ptr {phase}")
    state = TensorMemory(cols, address, mbar, phase, warp0, base, group=group)
    k.tmem = state
    return state


_STAGE_BARRIERS = 16     # offset of the stage mbarriers in the control block


def stage_barriers(k: "KernelLowering", stages: int, arrivals: int) -> "object":
    """`stages` mbarriers of `arrivals` arrivals each, in the control block of the kernel's tensor
    memory (allocated already), initialized at the kernel's start (then a CTA barrier)."""
    from .mbarrier import BarrierArray
    from ..schedule.buffers import MBARRIER_BYTES

    state = k.tmem
    assert state is not None and _STAGE_BARRIERS + stages * MBARRIER_BYTES <= CONTROL_BYTES
    bars = BarrierArray(state.control + _STAGE_BARRIERS, stages)
    first = k.b.pre(f"zext i1 {k.b.pre(f'icmp eq i32 {k.tid}, 0', 'tmt')} to i32", "tmt")
    for i in range(stages):
        at = _shared_u32(k, bars.offset + i * MBARRIER_BYTES)
        k.b.prologue.append(f'  call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $0, 0; '
                            f'@p mbarrier.init.shared::cta.b64 [$1], {arrivals}; }}", "r,r,~{{memory}}"'
                            f'(i32 {first}, i32 {at})')
    k.b.prologue.append('  call void asm sideeffect "fence.mbarrier_init.release.cluster;", "~{memory}"()')
    k.b.prologue.append("  call void @llvm.nvvm.barrier0()")
    return bars


def accumulator_free(k: "KernelLowering") -> str:
    """The shared address of the mbarrier on which every epilogue thread arrives once it has read a
    tile's accumulators (a persistent loop's MMA warp waits for it before the next tile's first MMAs
    overwrite them): the control block's last 8 bytes, `k.threads` arrivals a phase, initialized at
    the kernel's start."""
    from ..schedule.buffers import MBARRIER_BYTES

    state = k.tmem
    assert state is not None
    if not state.free:
        at = CONTROL_BYTES - MBARRIER_BYTES
        assert state.ready is None or _STAGE_BARRIERS + state.ready.count * MBARRIER_BYTES <= at
        state.free = _shared_u32(k, state.control + at)
        first = k.b.pre(f"zext i1 {k.b.pre(f'icmp eq i32 {k.tid}, 0', 'tmt')} to i32", "tmt")
        k.b.prologue.append(f'  call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $0, 0; '
                            f'@p mbarrier.init.shared::cta.b64 [$1], {k.threads}; }}", "r,r,~{{memory}}"'
                            f'(i32 {first}, i32 {state.free})')
        k.b.prologue.append('  call void asm sideeffect "fence.mbarrier_init.release.cluster;", "~{memory}"()')
        k.b.prologue.append("  call void @llvm.nvvm.barrier0()")
    return state.free


def wait_mbarrier(k: "KernelLowering", state: TensorMemory) -> None:
    """Every thread waits for the mbarrier's current phase (the committed MMAs), then flips its parity."""
    from .mbarrier import wait

    parity = k.b.op(f"load i32, ptr {state.phase}", "tmph")
    wait(k, state.mbarrier, parity, "mma complete")
    k.b.emit(f"store i32 {k.b.op(f'xor i32 {parity}, 1', 'tmph')}, ptr {state.phase}")


def release(k: "KernelLowering") -> None:
    """Free the kernel's tensor memory before each `ret void` (no-op without tcgen05)."""
    state = getattr(k, "tmem", None)
    if state is None:
        return
    k.b.declare("declare void @llvm.nvvm.barrier0()")
    # warp-specialized: the epilogue warps' named barrier; the other roles' exits (marked) free nothing
    barrier = f'  call void asm sideeffect "bar.sync {k.barrier_id}, {k.barrier_threads};", "~{{memory}}"()' \
        if k.barrier_threads else "  call void @llvm.nvvm.barrier0()"
    free = ['  call void asm sideeffect "tcgen05.fence::before_thread_sync;", "~{memory}"()',
            barrier,
            '  call void asm sideeffect "tcgen05.fence::after_thread_sync;", "~{memory}"()',
            f'  call void asm sideeffect "{{ .reg .pred p; setp.ne.b32 p, $0, 0; '
            f'@p tcgen05.dealloc.cta_group::{state.group}.sync.aligned.b32 $1, {state.columns}; }}", '
            f'"r,r,~{{memory}}"(i32 {state.warp0}, i32 {state.address})']
    out: list[str] = []
    for line in k.b.lines:
        if line.strip().startswith("ret void") and ROLE_EXIT not in line:
            out += free
        out.append(line)
    k.b.lines = out
