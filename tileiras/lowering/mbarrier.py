"""mbarriers (sm_90+): the one way the lowering makes and uses them.

An mbarrier is an 8-byte object in shared memory that completes a *phase* when
its expected number of arrivals (and, for TMA, of transaction bytes) has come
in; waiters name the phase by its parity. The pipelines keep their barriers in
an array placed among the kernel's shared buffers (smem.py), initialized by one
thread before the loop (then `fence.mbarrier_init` and a CTA barrier make the
counts visible to everyone) and invalidated after it, so a loop that runs again
(inside an outer loop) starts from phase 0.

Every operation is inline PTX on the barrier's 32-bit shared address, so the
text is the same on every LLVM version (the NVVM intrinsics for try_wait.parity
and the `.noinc` cp.async arrive are recent or missing).
"""

from __future__ import annotations

from ..ir.record import record
from .kernel import KernelLowering
from .smem import pointer
from ..schedule.buffers import MBARRIER_BYTES

# try_wait's suspend-time hint (nanoseconds a thread may sleep before it re-checks), NVIDIA's value
SUSPEND_HINT_NS = 10_000_000


@record
class BarrierArray:
    offset: int      # bytes from the start of the buffers region
    count: int


def allocate(k: KernelLowering, count: int, subject: object = None) -> BarrierArray:
    """`count` mbarriers, back to back, in the buffer the plan placed for them (8 bytes each, as the
    schedule's buffer assignment counts them), alive as the plan says (to the kernel's end, or over a ring
    whose loop invalidates them, then a CTA barrier, before it ends: warp_roles.frees_barriers); `subject`:
    which of the op's arrays (as `alloc_buffer`: None for a loop's ring, "handshake" for attention's)."""
    return BarrierArray(k.alloc_buffer(count * MBARRIER_BYTES, "mbarriers", subject), count)


def split(bars: BarrierArray, first: int) -> tuple[BarrierArray, BarrierArray]:
    """The first `first` barriers of `bars` and the rest, as two arrays."""
    return BarrierArray(bars.offset, first), BarrierArray(bars.offset + first * MBARRIER_BYTES, bars.count - first)


def address(k: KernelLowering, bars: BarrierArray, index: str) -> str:
    """i32 shared-space address of barrier `index` (an i32 value or a literal) of `bars`."""
    if index.isdigit():
        at = bars.offset + MBARRIER_BYTES * int(index)
        return k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, str(at))} to i32", "mb")
    base = k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, str(bars.offset))} to i32", "mb")
    return k.b.op(f"add i32 {base}, {k.b.op(f'shl i32 {index}, 3', 'mb')}", "mb")


def _asm(k: KernelLowering, text: str, constraints: str, args: str) -> None:
    clobbers = f"{constraints},~{{memory}}" if constraints else "~{memory}"
    k.b.emit(f'call void asm sideeffect "{text}", "{clobbers}"({args})')


def init(k: KernelLowering, arrays: list[tuple[BarrierArray, list[int]]]) -> None:
    """Thread 0 initializes barrier i of each array to expect `counts[i]` arrivals; the caller's next
    CTA barrier publishes the counts (after `fence.mbarrier_init`)."""
    def body() -> None:
        for bars, counts in arrays:
            assert len(counts) == bars.count
            for i, n in enumerate(counts):
                _asm(k, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r",
                     f"i32 {address(k, bars, str(i))}, i32 {n}")
        _asm(k, "fence.mbarrier_init.release.cluster;", "", "")
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "mb"), body)


def inval(k: KernelLowering, arrays: list[BarrierArray]) -> None:
    """Thread 0 invalidates every barrier of `arrays` (after a CTA barrier: nobody uses them any more)."""
    def body() -> None:
        for bars in arrays:
            for i in range(bars.count):
                _asm(k, "mbarrier.inval.shared::cta.b64 [$0];", "r", f"i32 {address(k, bars, str(i))}")
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "mb"), body)


def arrive(k: KernelLowering, bar: str) -> None:
    """This thread's arrival on the barrier at `bar`."""
    _asm(k, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r", f"i32 {bar}")


def arrive_expect_tx(k: KernelLowering, bar: str, nbytes: "int | str") -> None:
    """This thread's arrival, announcing `nbytes` of transactions (bulk copies) the phase also awaits."""
    _asm(k, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r", f"i32 {bar}, i32 {nbytes}")


def copies_arrive(k: KernelLowering, bar: str) -> None:
    """An arrival on `bar` made when this thread's cp.async copies issued so far have landed; it counts
    as one of the barrier's expected arrivals (`.noinc`)."""
    _asm(k, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r", f"i32 {bar}")


def wait(k: KernelLowering, bar: str, parity: str, what: str) -> None:
    """Block until the phase of parity `parity` (i32 0/1) of the barrier at `bar` has completed: a
    `try_wait.parity` loop (each try may suspend the thread up to the hint); `what` names the wait
    in a PTX comment."""
    loop, done = k.b.label("mbwait"), k.b.label("mbdone")
    k.b.br(loop)
    k.b.start_block(loop)
    ok = k.b.op(f'call i32 asm sideeffect "{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2, '
                f'{SUSPEND_HINT_NS}; selp.u32 $0, 1, 0, p; }} // wait: {what}", "=r,r,r,~{{memory}}"(i32 {bar}, i32 {parity})', "mb")
    k.b.cond_br(k.b.op(f"icmp ne i32 {ok}, 0", "mb"), done, loop)
    k.b.start_block(done)


def phase_parity(k: KernelLowering, use: str, stages: int) -> str:
    """Parity of the phase that the `use`-th (i32, from 0) use of a ring of `stages` barriers completes."""
    return k.b.op(f"and i32 {k.b.op(f'udiv i32 {use}, {stages}', 'mb')}, 1", "mb")


def set_max_registers(k: KernelLowering, count: int, increase: bool) -> None:
    """Give registers back to the SM (`dec`) or take them (`inc`): every thread of the warpgroup runs
    it, and `count` (24..256, a multiple of 8) becomes its per-thread budget."""
    assert 24 <= count <= 256 and count % 8 == 0
    _asm(k, f"setmaxnreg.{'inc' if increase else 'dec'}.sync.aligned.u32 {count};", "", "")
