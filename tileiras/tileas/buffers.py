"""Shared-memory buffers as explicit values: size, alignment, swizzle, lifetime, offset.

Every byte of a kernel's shared memory belongs to one `Buffer`: a tile staged for tensor cores,
a pipeline's ring of stages, its mbarriers, the scratch of a layout conversion or a reduction,
an epilogue's restaging. Each buffer states what it holds (`kind`), its size, alignment and
swizzle span, and its *lifetime*: the interval of op positions (program order of the kernel,
`Liveness`) during which its bytes must not change under it. `SharedBuffers` places each buffer
in program order at the lowest offset that overlaps no buffer alive at the same time (first fit),
so a scratch or a staged tile whose lifetime has ended gives its bytes to the next one: one
mechanism for every reuse (the epilogue's included).

Lifetimes (the lowering states them; `Liveness` computes them from the IR):

* ``op``: alive while one op runs (scratch, a tile staged for one mma, an epilogue's restaging);
  every writer meets the CTA at a barrier before it writes, so the previous owner's readers are
  done;
* ``value``: a tile copied into the buffer by one op and read by later ones in the same region:
  from the copy to its last reader (through ops that only re-view it; its first reader waits for
  the copy), extended to the start of every loop that defines it but reads it after its end. A
  reader in a region that does not hold the copy (a loop body that may run many times or never,
  a branch) keeps it to the kernel's end: a copy nobody waited for must not land in reused bytes;
* ``kernel`` (the default, for any buffer whose owner says nothing): from where it is asked for to
  the end of the kernel, above every buffer asked for so far, so nobody reuses its bytes and it
  reuses nobody's (its first writer may not meet the CTA at a barrier first: an mbarrier's init).

`verify` checks the plan: no two buffers alive at once share a byte, every offset is aligned,
and the total fits the target's opt-in maximum. `describe` prints it (--print-ir-after-all).
The nv_tileas pass `plan-shared-memory` (shared_plan.py) places the buffers before any LLVM is
emitted; the lowering records each at the plan's offset, and `verify` checks what it recorded.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

from ..errors import CompileError
from ..ir.core import Operation, Value
from ..ir.record import record, replace

LOOPS = frozenset({"cuda_tile.for", "cuda_tile.loop"})
# Ops that pass a value out of the structured region it lives in: a staged tile used there lives
# as long as the kernel (conservative: nothing tracks it past the region).
_ESCAPES = frozenset({"cuda_tile.yield", "cuda_tile.continue", "cuda_tile.break", "cuda_tile.return"})

KINDS = ("staging", "ring", "mbarrier", "conversion", "reduction", "epilogue", "restaging", "buffer", "tmem")
# kinds `release` leaves alive: tensor memory's mbarrier and address slot, used until its dealloc at
# the kernel's end (an mbarrier's bytes may not be reused before it is invalidated, PTX ISA mbarrier.inval)
KEPT = frozenset({"tmem"})


REGION_ALIGN = 16   # the dynamic region's size: a whole number of 16-byte vectors
_MMAS = ("cuda_tile.mmaf", "cuda_tile.mmai", "cuda_tile.mmaf_scaled")   # tensor-core ops reading the buffers


@record
class Buffer:
    kind: str            # one of KINDS: what the bytes hold
    nbytes: int
    align: int
    swizzle: int         # bytes of the swizzle span (0: unswizzled)
    start: int           # first op position it is alive at
    end: int             # last op position it is alive at (inclusive)
    offset: int          # bytes from the start of the kernel's shared memory
    what: str = ""       # for dumps: the op or value it serves
    top: bool = False    # placed above every other (control state alive to the kernel's end: shared_plan.place)

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.start <= other.end and other.start <= self.end

    def overlaps_in_space(self, other: "Buffer") -> bool:
        return self.offset < other.offset + other.nbytes and other.offset < self.offset + self.nbytes


class Liveness:
    """Program-order positions of an entry's ops: `first[op]` where it starts, `last[op]` the last
    position inside it (its regions), and the live range of a value."""

    def __init__(self, entry: Operation, passes_through: Callable[[Operation], bool] = lambda _op: False) -> None:
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.ops: list[Operation] = []
        self.passes_through = passes_through
        self._number(entry)
        self.end = len(self.ops)          # past every op: "until the kernel ends"

    def _number(self, op: Operation) -> None:
        self.first[id(op)] = len(self.ops)
        self.ops.append(op)
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    self._number(inner)
        self.last[id(op)] = len(self.ops) - 1

    def position(self, op: Optional[Operation]) -> int:
        return self.first.get(id(op), 0) if op is not None else 0

    def op_range(self, op: Optional[Operation]) -> tuple[int, int]:
        """While `op` runs (its regions included); before any op: the whole kernel."""
        if op is None or id(op) not in self.first:
            return 0, self.end
        return self.first[id(op)], self.last[id(op)]

    def _loops_around(self, op: Operation) -> list[Operation]:
        """The loops enclosing `op`, outermost first."""
        out: list[Operation] = []
        parent = _parent_op(op)
        while parent is not None:
            if parent.name in LOOPS:
                out.append(parent)
            parent = _parent_op(parent)
        return out[::-1]

    def value_range(self, value: Value, definer: Operation) -> tuple[int, int]:
        """From `definer` (the op that fills the buffer) to the last reader of `value` or of what
        only re-views it, as `Buffer` lifetimes of kind ``value`` are (module docstring)."""
        start, end = self.op_range(definer)
        seen: set[int] = set()
        work = [value]
        while work:
            v = work.pop()
            for use in list(v.uses):
                if id(use) in seen:
                    continue
                seen.add(id(use))
                if use.name in _ESCAPES or use.name in LOOPS:
                    return self.normalize(start, self.end)
                end = max(end, self._use_end(use, definer))
                if self.passes_through(use):
                    work.extend(use.results)
        return self.normalize(start, end)

    def _use_end(self, use: Operation, definer: Operation) -> int:
        """A read by `use`. Inside a region (a loop, a branch) that does not hold `definer`, the read
        may run many times or never: an asynchronous fill that nobody waits for could still land
        after the last read, so the buffer lives to the kernel's end."""
        around_def = {id(x) for x in self._ops_around(definer)}
        if any(id(x) not in around_def for x in self._ops_around(use)):
            return self.end
        return self.op_range(use)[1]

    def _ops_around(self, op: Operation) -> list[Operation]:
        out: list[Operation] = []
        parent = _parent_op(op)
        while parent is not None:
            out.append(parent)
            parent = _parent_op(parent)
        return out

    def normalize(self, start: int, end: int) -> tuple[int, int]:
        """A lifetime that starts inside a loop and ends after it is alive from the loop's start
        (the next iteration runs while it is alive)."""
        if start >= len(self.ops):
            return start, end
        for loop in self._loops_around(self.ops[start]):
            if end > self.last[id(loop)]:
                return self.first[id(loop)], end
        return start, end


# entry -> its Liveness, from the `shared-buffer-lifetimes` pass to the lowering (which may lower an
# entry several times); keyed by identity with the entry kept beside it, the last few only
_COMPUTED: dict[int, tuple[Operation, Liveness]] = {}
_KEPT = 16


def compute_lifetimes(entry: Operation, _assignment: object = None) -> Liveness:
    """Pass `shared-buffer-lifetimes`: number the ops of `entry` (after the level's last rewrite)
    for the lifetimes of the buffers the lowering asks for."""
    from ..tileaa.mma_operands import passes_shared

    live = Liveness(entry, passes_shared)
    _COMPUTED[id(entry)] = (entry, live)
    while len(_COMPUTED) > _KEPT:
        del _COMPUTED[next(iter(_COMPUTED))]
    return live


def lifetimes(entry: Operation) -> Liveness:
    """`entry`'s Liveness: the pass's, unless the entry changed since (or the pass did not run)."""
    held = _COMPUTED.get(id(entry))
    if held is not None and held[0] is entry and len(held[1].ops) == sum(1 for _ in entry.walk()):
        return held[1]
    return compute_lifetimes(entry)


def buffers_free_after(entry: Operation, op: Operation, shared_operand: "Callable[[Value], bool] | None") -> bool:
    """`op` sits in the kernel's body, or in `if`s there (no loop around it; a condition is uniform
    over the CTA, so every thread takes the barriers), and no op after it (after each enclosing
    `if` too) runs a tensor-core op or stages a load in the buffers (`shared_operand`: the loads
    staged there)."""
    body, later, at = entry.regions[0].block, [], op
    while True:
        block = at.parent
        later += block.operations[block.operations.index(at) + 1:]
        if block is body:
            break
        at = block.parent.parent if block.parent is not None else None
        if getattr(at, "name", "") != "cuda_tile.if":
            return False
    for inner in (x for o in later for x in o.walk()):
        if inner.name in _MMAS:
            return False
        if inner.name == "cuda_tile.load_view_tko" and shared_operand is not None \
                and shared_operand(inner.results[0]):
            return False
    return True


def _parent_op(op: Operation) -> Optional[Operation]:
    block = getattr(op, "parent", None)
    region = getattr(block, "parent", None)
    return getattr(region, "parent", None)


def _align(offset: int, align: int) -> int:
    return -(-offset // align) * align


class SharedBuffers:
    """The buffers of one kernel, placed as they are asked for."""

    def __init__(self) -> None:
        self.buffers: list[Buffer] = []

    @property
    def total(self) -> int:
        """Bytes from the start of shared memory to the end of the highest buffer."""
        return max((b.offset + b.nbytes for b in self.buffers), default=0)

    def _alive(self, start: int, end: int) -> list[Buffer]:
        """The buffers alive at some point of [start, end]."""
        return [b for b in self.buffers if b.start <= end and start <= b.end]

    def live_top(self, start: int, end: int) -> int:
        """The end of the highest buffer alive at some point of [start, end]: what a buffer of that
        lifetime is placed beside (`first_fit` reuses the bytes of the others)."""
        return max((b.offset + b.nbytes for b in self._alive(start, end)), default=0)

    def data_top(self, start: int, end: int) -> int:
        """`live_top` without the buffers placed on top (`Buffer.top`), which stay above what is placed later."""
        return max((b.offset + b.nbytes for b in self._alive(start, end) if not b.top), default=0)

    @property
    def top_bytes(self) -> int:
        """Bytes of the buffers placed on top (`Buffer.top`)."""
        return sum(_align(b.nbytes, b.align) for b in self.buffers if b.top)

    def free_below(self, start: int, end: int) -> int:
        """Bytes from the start of shared memory to the lowest buffer alive at some point of [start, end]
        (0 where none is: `live_top` is then 0 too)."""
        return min((b.offset for b in self._alive(start, end)), default=0)

    def first_fit(self, nbytes: int, align: int, start: int, end: int) -> int:
        """The lowest aligned offset where `nbytes` overlap no buffer alive during [start, end]."""
        busy = sorted((b.offset, b.offset + b.nbytes) for b in self._alive(start, end))
        offset = 0
        for lo, hi in busy:
            if offset + nbytes <= lo:
                break
            offset = max(offset, _align(hi, align))
        return offset

    def placement(self, nbytes: int, align: int, lifetime: Optional[tuple[int, int]]) -> int:
        """Where `allocate` places a buffer: the first fit over `lifetime`; None: above every buffer so far."""
        align = max(align, 1)
        return _align(self.total, align) if lifetime is None else self.first_fit(nbytes, align, *lifetime)

    def allocate(self, kind: str, nbytes: int, align: int, lifetime: Optional[tuple[int, int]], at: int,
                 kernel_end: int, swizzle: int = 0, what: str = "", offset: Optional[int] = None,
                 top: bool = False) -> Buffer:
        """A new buffer at `offset` (None: its `placement`); `lifetime` None: alive from `at` to the
        kernel's end, above every buffer so far (its owner states no lifetime: it neither reuses nor
        gives bytes); `top`: placed above every other (`Buffer.top`)."""
        if kind not in KINDS:
            raise ValueError(f"unknown shared buffer kind '{kind}'")
        align = max(align, 1)
        start, end = lifetime if lifetime is not None else (at, kernel_end)
        if offset is None:
            offset = self.placement(nbytes, align, lifetime)
        buffer = Buffer(kind, nbytes, align, swizzle, start, end, offset, what, top)
        self.buffers.append(buffer)
        return buffer

    def release(self, before: int) -> None:
        """Every buffer alive at `before` is dead from there on (but the `KEPT` kinds): the caller
        waited for every asynchronous access and met the CTA at a barrier, and nothing after reads them."""
        self.buffers = [replace(b, end=before - 1) if b.start < before <= b.end and b.kind not in KEPT else b
                        for b in self.buffers]

    def describe(self) -> list[str]:
        return [f"//     {b.kind:<10} [{b.offset:>6}, {b.offset + b.nbytes:>6}) {b.nbytes:>6} B align {b.align}"
                f"{f' swizzle {b.swizzle}B' if b.swizzle else ''} alive ops {b.start}..{b.end}"
                f"{f'  {b.what}' if b.what else ''}" for b in self.buffers]


def verify(buffers: Iterable[Buffer], limit: int, where: str) -> None:
    """Raise CompileError when two buffers alive at once share bytes or an offset is misaligned;
    the total against `limit` is smem.place's check (it names what overflowed)."""
    listed = list(buffers)
    for i, a in enumerate(listed):
        if a.offset % a.align:
            raise CompileError(f"error: internal: shared buffer verifier: {where}: a {a.kind} buffer at offset "
                               f"{a.offset} is not aligned to {a.align}")
        for b in listed[i + 1:]:
            if a.overlaps_in_time(b) and a.overlaps_in_space(b):
                raise CompileError(f"error: internal: shared buffer verifier: {where}: the {a.kind} buffer "
                                   f"[{a.offset}, {a.offset + a.nbytes}) and the {b.kind} buffer "
                                   f"[{b.offset}, {b.offset + b.nbytes}) are alive at once (ops {max(a.start, b.start)}.."
                                   f"{min(a.end, b.end)}) and share bytes")
    total = max((b.offset + b.nbytes for b in listed), default=0)
    if total > limit:
        raise CompileError(f"error: internal: shared buffer verifier: {where}: {total} bytes exceed {limit}")
