"""Pass `plan-shared-memory`: the kernel's shared-memory buffers, sized before any LLVM is emitted;
then the warp split as its loop's copies settle it (settled_split.py), how every pipelined loop's
stages are filled (pipeline_copies.py: TMA boxes or cp.async, multicast; `KernelPlan.ring_copies`) and
which loop-invariant operands are copied once by TMA (`KernelPlan.once_copies`), and whether each
such loop's mbarriers are freed after it (`KernelPlan.barriers_freed`), in the pass's dump;
the lowering emits them as decided.

Each op that will ask the lowering for shared memory is given, here, the buffers it will ask for:
one `Request` per (op, role, subject) (`role` names what the buffer is for at its call site:
"scratch", "ring", "staging", ...; `subject` which of the op's buffers of that role it is: the load a
loop's ring holds, an mma operand's letter, ...; none where the op asks one). A sizing function per buffer kind
(`tileas/shared_sizes.py`) reads the size, alignment, swizzle and lifetime from the IR, the layouts
and the `KernelPlan`; the requests are then placed by `SharedBuffers`' first fit over the `Liveness`
lifetimes, in program order (`place`): the offsets the lowering gives them.

Covered (`SharedPlan.covered`): the roles of `shared_sizes.SIZERS` in every kernel (conversion
scratch, cross-warp reduction scratch, tensor memory's control block), and, in the kernels where
they are exact, the staged loads, the loops' rings (what their stages hold and their depths, which
the pass decides here, `SharedPlan.rings` and `SharedPlan.fits`; the lowering reads them,
`pipelined_loop.planned_ring` and `planned_fit`), their mbarriers and
K-major copies (decided here in every kernel, `SharedPlan.kmajor`; the lowering reads them,
`ops_wgmma.before_loop`), the scratch of reduces and scans (`shared_stages.py`: "staging", "invariant",
"ring", "mbarriers", "kmajor", "reduction"), the row kernels' TMA buffers (`shared_rows.py`:
"row-load", "row-store" and the row group's mbarriers), the buffer an mma accumulator's store
goes through (`shared_epilogue.py`: "restage", "tma-store"; asked once the buffers alive at the
store are released, `Request.releases`, as the lowering releases them), the tcgen05 buffers
(`shared_tcgen05.py`: a warp-specialized loop's MMA warp's "tmem-stages" and "p-buffer", its
epilogue's or attention's TMA-stored "tmem-epilogue", an mma's restaged "scales") and what ops
ask for their operands (`shared_operands.py`): the mmas' operands restaged in shared memory
("mma-stage", "mma-slice"; mma.sync's, wgmma's and tcgen05's; "fp4-pack": a 4-bit operand packed;
"k-slice": a load left to its mma by the last resort; "operand-conversion": one not staged after
all, transposed; "kmajor-copy": an op's own K-major copies), an FMA mma's operands, a pack's and a
gather's row indices in scratch ("reduction"). The kernel is planned under each `Assumptions`
(padded stages, room reserved, deferred loads) that `shared_choice.choose` tries, and the plan it
keeps is the kernel's: the lowering lowers it once under those assumptions. Tensor memory's
control block, asked once per kernel, is planned at the op that first needs it
(`tcgen05_buffers.first_asker`), where the lowering asks for it. An op's requests are placed in the
order it asks (`Request.late`: a warp-specialized loop asks for its stages, then from its body
for its MMA warp's buffers, tensor memory's, its epilogue's; shared_tcgen05.py lists the ranks).

The lowering places no buffer itself and decides none of its properties: asking for the buffer of a
role and subject (`KernelLowering.alloc_buffer(nbytes, role, subject)`), it gets the one the plan placed
for that request of its op (`PlanReader.buffer`, in whatever order the op asks), whose size, alignment,
swizzle and lifetime are the plan's; it states only the bytes it writes there, which the buffer must hold. A request
the plan did not place (a role it does not size in the kernel, `SharedPlan.complete`: none in the 2751
corpus and generated kernel-target pairs measured; a request it did not foresee, or a buffer too small)
is an internal error where the check is strict (`STRICT_ENV`, set by the test suite), else a line of the
kernel's --print-ir-after-all notes and the buffer placed above every planned one, alive to the kernel's
end, where it overlaps none; and a planned buffer nobody asked for is one too (`PlanReader.finish`).
Either way the code stays correct; only the kernel's shared memory grows.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..errors import CompileError
from ..ir.core import Operation, Value
from ..ir.record import record
from ..target import caps
from ..tileaa.allocas import alloca_bytes
from .buffers import KEPT, REGION_ALIGN, Buffer, SharedBuffers, _align, lifetimes
from .plan import plan_of

if TYPE_CHECKING:
    from .assign_layouts import LayoutAssignment

STRICT_ENV = "TILEIRAS_STRICT_SHARED_PLAN"   # "1": a request the plan did not place is an internal error
UNPLANNED_ALIGN = 1024     # a buffer the plan did not place: aligned for any (a 128-byte swizzle's period)


@record
class Request:
    """One buffer an op asks for: what `KernelLowering.alloc_buffer` is given."""
    op: Optional[Operation]   # the asking op (None: the kernel's, outside every op)
    role: str
    kind: str
    nbytes: int
    align: int
    swizzle: int = 0
    lifetime: Optional[tuple[int, int]] = None   # op positions; None: from the asking op to the kernel's end
    late: int = 0             # its turn among the op's requests: 0 first, then by rank (an MMA warp's, from
                              # its loop's body; shared_tcgen05.py lists the ranks)
    releases: bool = False    # asked once the buffers alive at its op are released (an epilogue's: SharedBuffers.release)
    subject: Any = None       # which of the op's buffers of the role: None (its only one), the load a ring or a
                              # row buffer holds, an mma operand's letter ("a", "b", "a-scale", "b-scale"), ...

    def key(self) -> tuple:
        return request_key(self.op, self.role, self.subject)

    def describe(self, name_of: Optional[Callable[[Value], str]] = None) -> str:
        """The request as the dump and the diagnostics say it (`name_of`: an op subject by its result's name)."""
        live = f"ops {self.lifetime[0]}..{self.lifetime[1]}" if self.lifetime else "its op to the kernel's end"
        return (f"{self.role} ({self.kind}) {self.nbytes} B align {self.align}"
                f"{f' swizzle {self.swizzle}B' if self.swizzle else ''}, live over {live}"
                f"{', the buffers released before it' if self.releases else ''}"
                f"{f', for {subject_text(self.subject, name_of)}' if self.subject is not None else ''}")


def request_key(op: Optional[Operation], role: str, subject: Any = None) -> tuple:
    """How a request is found: its op, its role and its subject (compared by identity, a name by value;
    a tuple element by element)."""
    def part(x: Any) -> Any:
        if x is None or isinstance(x, (str, int)):
            return x
        if isinstance(x, tuple):
            return tuple(part(y) for y in x)
        return id(x)

    return (id(op) if op is not None else 0, role, part(subject))


def subject_text(subject: Any, name_of: Optional[Callable[[Value], str]] = None) -> str:
    """How a request's subject reads: a letter or name as it is, an op by its result's name (`name_of`)
    or its location, a tuple element by element."""
    if isinstance(subject, Operation):
        if name_of is not None and subject.results:
            return name_of(subject.results[0])
        where = f" at {subject.location}" if subject.location else ""
        return f"{subject.name.split('.')[-1]}{where}"
    if isinstance(subject, tuple):
        return "(" + ", ".join(subject_text(x, name_of) for x in subject) + ")"
    return str(subject)


@record
class Assumptions:
    """How the kernel stages its tiles: the choices plan-shared-memory makes (shared_choice.py)."""
    padded: bool = True      # staged rows padded against bank conflicts
    reserve: int = 0         # bytes pipelines leave free for what their loop body asks later
    defer: bool = False      # an oversized load may be left to its mma
    free_barriers: bool = False   # pipelines' mbarriers give their bytes back after the loop (warp_roles.frees_barriers)
    in_share: bool = True    # planned within the occupancy hint's share (its rings down to one stage: stage_rings.fit)

    def describe(self) -> str:
        return (f"staged tiles {'padded' if self.padded else 'unpadded'}"
                f"{f', {self.reserve} B left free by pipelines' if self.reserve else ''}"
                f"{', oversized loads deferred to their mma' if self.defer else ''}"
                f"{', loop mbarriers freed after their loops' if self.free_barriers else ''}"
                + ("" if self.in_share else ", beyond the occupancy hint's share"))


@record(frozen=False)
class SharedPlan:
    """The planned requests of one kernel, keyed by (op, role, subject): `Request.key`."""
    requests: dict                # Request.key() -> Request
    covered: frozenset            # roles planned; a request of another goes above the plan (PlanReader.buffer)
    buffers: SharedBuffers        # the requests placed (offsets), program order
    assumes: "Assumptions"        # how the kernel stages its tiles under this plan
    fits: dict                    # pipelined loop -> (bytes taken before it, its BufferAssignment: the depth)
    rings: dict                   # every loop with a pipeline plan -> what its stages hold (stage_rings.StageRing;
                                  # None: no ring, where its loads fit no stages or stage_rings.ring_of refuses),
                                  # read by the lowering (pipelined_loop.planned_ring)
    kmajor: dict                  # every loop -> the K-major copies it gives its wgmmas before its stages
                                  # (kmajor_copies.LoopCopy), read by the lowering (ops_wgmma.before_loop)
    epilogues: dict               # store of mma fragments -> how it goes through shared memory
                                  # (epilogue_forms.Epilogue; None: it does not), read by the lowering
                                  # (lowering/epilogue.decided)
    tma_stages: dict              # store of tensor memory's fragments -> its TMA copy and buffer (None: none;
                                  # shared_tcgen05._tma_stage), read by the lowering (lowering/tmem_epilogue.py)
    slices: dict                  # reduce, scan or mma -> the slices its scratch or its staged operands go in,
                                  # read by the lowering (lowering/ops_reduce.py, ops_mma.lower_mma_sync)
    deferred: frozenset           # the loads left to their mma in the last resort (deferred_loads.defers),
                                  # read by the lowering (lowering/async_copy.load_to_shared)
    packed: frozenset             # the fp4 mma.syncs that pack their operands (mma_sync_staging.packs), read
                                  # by the lowering (ops_mma.lower_mma_sync)
    row_groups: dict              # the body's first row TMA load -> its group (shared_rows.RowGroup), and
    row_stores: dict              # a candidate row store -> (copy, buffer, why not): read by lowering/row_tma.py
    allocas: int = 0              # static shared memory of the kernel's allocas
    limit: int = 0                # the target's opt-in maximum of shared memory per block
    share: int = 0                # what one CTA may take where the occupancy hint asks for several an SM
                                  # (warp_roles.occupancy_share); `limit` without a hint

    @property
    def complete(self) -> bool:
        """Whether the plan places every buffer the lowering will ask for (every role covered)."""
        from .shared_sizes import ROLES

        return self.covered.issuperset(ROLES)

    @property
    def bytes(self) -> int:
        """The kernel's shared memory: its buffers and allocas."""
        return -(-self.buffers.total // REGION_ALIGN) * REGION_ALIGN + self.allocas

    @property
    def excess(self) -> int:
        """Bytes by which the kernel's shared memory (its buffers and allocas) exceeds the occupancy hint's share
        (planned within it: Assumptions.in_share) or the target's limit."""
        return max(0, self.bytes - (self.share if self.assumes.in_share else self.limit))

    @property
    def unstaged(self) -> int:
        """Pipelined loops given no stages (left unpipelined for lack of room)."""
        return sum(1 for _used, fitted in self.fits.values() if not fitted.stages)

    @property
    def refused(self) -> bool:
        """Whether a pipelined loop gets fewer than two stages (unpipelined, or one stage) for lack of room."""
        from ..schedule.buffers import MIN_STAGES    # (the scheduler loads with the first pipelined loop)

        return any(fitted.stages < MIN_STAGES for _used, fitted in self.fits.values())


# A sizing function: (entry, assignment) -> the requests of one role, any order.
Sizer = Callable[[Operation, "LayoutAssignment"], list[Request]]


def shared_plan_of(assignment: "LayoutAssignment") -> Optional[SharedPlan]:
    return plan_of(assignment).shared


def plan_shared_memory(entry: Operation, assignment: "LayoutAssignment") -> None:
    """Pass `plan-shared-memory`: the kernel planned under each assumption `shared_choice` tries;
    the plan kept is the kernel's."""
    from .shared_choice import choose

    plan = plan_of(assignment)

    def without_roles(why: str) -> None:
        """The kernel has no warp roles (`why`: the refusal the dump and the remark give), and is planned
        again without them."""
        plan.warp_split, plan.warp_split_refused = None, why
        plan.shared = choose(lambda assumes: _plan(entry, assignment, assumes))

    plan.shared = choose(lambda assumes: _plan(entry, assignment, assumes))
    split = plan.warp_split
    if split is not None and not _staged(plan.shared, split.loop):   # no stages for the producer to fill
        without_roles(f"the pipelined loop gets no stages: {_unstaged(entry, assignment, split)}")
    from .pipeline_copies import decide_all
    from .shared_stages import staging_facts

    # how each ring's stages are filled (TMA boxes, cp.async, multicast), as the lowering emits them (settling
    # the split changes none: its loop, its outer loop and, where a CTA pair may run, its form stay)
    facts = staging_facts(entry, assignment, plan.warp_split, plan.shared.assumes.padded)
    plan.ring_copies, plan.once_copies = decide_all(facts)
    if plan.warp_split is not None:    # the split as its loop's copies settle it (the buffers were planned so)
        from .settled_split import ctas_alone, settle
        from .warp_roles import occupancy_hint

        loop = plan.warp_split.loop
        alone = ctas_alone(facts.caps, plan.shared.bytes, occupancy_hint(facts), facts.threads)
        plan.warp_split = settle(plan.warp_split, plan.ring_copies.get(loop), plan.shared.rings.get(loop), alone)
        starved = plan.warp_split.starved(facts.threads)
        if starved:     # the roles would starve the producer
            without_roles(starved)
            facts = staging_facts(entry, assignment, None, plan.shared.assumes.padded)
            plan.ring_copies, plan.once_copies = decide_all(facts)
    # ...and whether their mbarriers are freed after the loop, as the lowering then allocates them
    from .warp_roles import barriers_freed

    plan.barriers_freed = barriers_freed(plan.warp_split, tuple(plan.ring_copies), entry,
                                         plan.shared.assumes.free_barriers)


def _unstaged(entry: Operation, assignment: "LayoutAssignment", split: Any) -> str:
    """Why the split loop got no stages: its ring did not fit, or it has none (`stage_rings.ring_or_why`)."""
    shared = plan_of(assignment).shared
    if split.loop in shared.fits:
        return "they do not fit in shared memory"
    from .shared_stages import staging_facts
    from .stage_rings import ring_or_why

    facts = staging_facts(entry, assignment, split, shared.assumes.padded)
    return ring_or_why(facts, split.loop)[1] or "its schedule runs one iteration at a time"


def _staged(shared: SharedPlan, loop: Operation) -> bool:
    fitted = shared.fits.get(loop)
    return fitted is not None and bool(fitted[1].stages)


def _plan(entry: Operation, assignment: "LayoutAssignment", assumes: Assumptions) -> SharedPlan:
    """Every covered request sized, then placed in program order, under `assumes`."""
    from .shared_sizes import SIZERS
    from . import shared_operands
    from .shared_stages import ROLES as STAGING, predict, reductions_predicted

    live = lifetimes(entry)
    asked: list[Request] = []
    for _role, size in SIZERS:
        asked += size(entry, assignment)
    covered = {role for role, _ in SIZERS}
    found = predict(entry, assignment, asked, assumes)
    asked += found.requests
    covered |= set(STAGING) - (set() if reductions_predicted(entry, assignment) else {"reduction"})
    if found.pairs_run:
        covered.add("pair-conversion")    # none: every pair layout's mma runs as the pair
    covered |= set(shared_operands.ROLES)
    # program order, as the lowering asks
    asked.sort(key=lambda r: (live.position(r.op), r.late))
    requests: dict = {}
    for request in asked:
        if request.key() in requests:
            raise CompileError(f"error: internal: {_op_name(request.op)} is given two {request.role} buffers for "
                               f"{subject_text(request.subject)} (plan-shared-memory)")
        requests[request.key()] = request
    allocas = sum(alloca_bytes(op) for op in entry.walk() if op.name == "cuda_tile.alloca")
    return SharedPlan(requests, frozenset(covered), place(asked, entry), assumes, found.fits, found.rings, found.kmajor,
                      found.epilogues, found.tma_stages, found.slices,
                      frozenset(found.deferred), frozenset(found.packed), found.row_groups, found.row_stores, allocas,
                      caps(assignment.sm).smem_per_block, found.share)


def place(requests: list[Request], entry: Operation) -> SharedBuffers:
    """`requests` placed in program order, each by the first fit over its lifetime; the control state alive
    to the kernel's end (no lifetime: mbarrier arrays, tensor memory's address slot) after them, above every
    other: a loop's mbarriers placed where its rings end would keep a later loop's deeper rings from those
    bytes (they are a few bytes, which an epilogue released to reuse them gains nothing from)."""
    live = lifetimes(entry)
    placed = SharedBuffers()
    ordered = sorted(requests, key=lambda r: (live.position(r.op), r.late))
    above = {i for i, r in enumerate(ordered) if r.lifetime is None and (r.role == "mbarriers" or r.kind in KEPT)}
    at: dict[int, Buffer] = {}
    for i in [i for i in range(len(ordered)) if i not in above] + sorted(above):
        request = ordered[i]
        what = request.op.name if request.op is not None else ""
        if request.releases:
            placed.release(live.position(request.op))
        at[i] = placed.allocate(request.kind, request.nbytes, request.align, request.lifetime,
                                live.position(request.op), live.end, request.swizzle,
                                f"{request.role} of {what}" if what else request.role, top=i in above)
    placed.buffers = [at[i] for i in range(len(ordered))]   # in program order, as the requests
    return placed


def shared_plan_lines(entry: Operation, assignment: "LayoutAssignment", name_of: Callable[[Value], str]) -> list[str]:
    """Comment lines for --print-ir-after-all: each planned buffer, and the roles still placed at lowering."""
    from .shared_sizes import ROLES

    plan = shared_plan_of(assignment)
    if plan is None:
        return []
    lines = [f"//   predicted roles: {', '.join(sorted(plan.covered)) or 'none'}; placed above the plan: "
             f"{', '.join(role for role in ROLES if role not in plan.covered) or 'none'}",
             f"//   {plan.assumes.describe()}: chosen here"
             f"{'' if plan.complete else ', from the buffers predicted (not every role is)'}"]

    def the_loop(loop: Operation) -> str:
        return f"//     the loop at {loop.location}" if loop.location else "//     the loop"

    for loop, (used, fitted) in plan.fits.items():
        lines.append(f"{the_loop(loop)}: {fitted.stages} stages beside {used} B planned before it ({fitted.reason})")
    for loop, ring in plan.rings.items():
        if ring is not None:
            lines += [f"{the_loop(loop)}: {line}" for line in ring.describe(name_of)]
    for loop, copies in plan.kmajor.items():
        lines += [f"{the_loop(loop)}: {copy.describe(name_of)} before it" for copy in copies]
    for loop, freed in (plan_of(assignment).barriers_freed or {}).items():
        lifetime = "freed after it (invalidated, then a CTA barrier)" if freed else "kept to the kernel's end"
        lines.append(f"{the_loop(loop)}: its mbarriers {lifetime}")
    for copies in (plan_of(assignment).ring_copies or {}).values():
        lines += [f"//     {line}" for line in copies.describe(name_of)]
    lines += [f"//     {shot.describe(name_of)}" for shot in (plan_of(assignment).once_copies or {}).values()]
    for request, buffer in zip(plan.requests.values(), plan.buffers.buffers):
        at = f" at {request.op.location}" if request.op is not None and request.op.location else ""
        of = name_of(request.op.results[0]) if request.op is not None and request.op.results else \
            (request.op.name if request.op is not None else "the kernel")
        lines.append(f"//     {request.describe(name_of)}, offset {buffer.offset}: {of}{at}")
    return lines


class PlanReader:
    """The plan as the lowering reads it: the buffer plan-shared-memory placed for each request of an op
    (`buffer`), the decisions of its tables (`decided`, `get`), and what the lowering asked that the plan
    did not place (module docstring)."""

    def __init__(self, plan: Optional[SharedPlan], where: str) -> None:
        self.plan = plan
        self.where = where
        self.strict = os.environ.get(STRICT_ENV, "") == "1"
        self.asked: set = set()                # the keys of the planned requests asked for
        self.mismatches: list[str] = []
        self.unplanned: dict[str, int] = {}    # role -> requests the plan did not place (placed above it)
        # key -> the offset the plan placed it at
        self.offsets = {key: b.offset for key, b in zip(plan.requests, plan.buffers.buffers)} \
            if plan is not None else {}
        self.top = plan.buffers.total if plan is not None else 0   # the end of the highest planned buffer

    def buffer(self, op: Optional[Operation], role: str, needs: int, subject: Any = None) \
            -> Optional[tuple[Request, int]]:
        """The buffer the plan placed for `op`'s request of `role` for `subject` (which of the op's buffers of
        that role: `Request.subject`), with its offset: its size, alignment, swizzle and lifetime are the
        plan's, whatever order the op asks in. `needs`: the bytes the op writes in it, which it must hold.
        None where the plan placed none (a role it does not size, a request it did not place, one asked twice
        or too small: an internal error where the check is strict): the caller places it above every planned
        buffer (`above`)."""
        if self.plan is None or role not in self.plan.covered:
            self.unplanned[role] = self.unplanned.get(role, 0) + 1
            return None
        key = request_key(op, role, subject)
        planned = self.plan.requests.get(key)
        if planned is None:
            self._mismatch(f"{_op_name(op)} asks for a {role} buffer of {needs} B"
                           f"{f' for {subject_text(subject)}' if subject is not None else ''}, "
                           "which the plan does not place")
        elif key in self.asked:
            self._mismatch(f"{_op_name(op)} asks twice for its {planned.describe()}")
        elif planned.nbytes < needs:
            self._mismatch(f"{_op_name(op)} writes {needs} B in the plan's {planned.describe()}")
        else:
            self.asked.add(key)
            return planned, self.offsets[key]
        self.unplanned[role] = self.unplanned.get(role, 0) + 1
        return None

    def above(self, after: int) -> int:
        """Where a buffer the plan did not place goes: above every planned buffer and `after` (the end of
        every buffer placed so far), aligned for any buffer (`UNPLANNED_ALIGN`), where it overlaps none."""
        return _align(max(self.top, after), UNPLANNED_ALIGN)

    def decided(self, table: str, op: Operation, what: str) -> Any:
        """What the plan decided for `op` in its `table` (a `SharedPlan` field: "epilogues", "slices",
        "rings", ...), which the lowering reads; where the plan decided nothing for it, an internal error
        naming `what` (the lowering decides none of it)."""
        decisions = getattr(self.plan, table) if self.plan is not None else {}
        if op not in decisions:
            raise CompileError(f"error: internal: the kernel's plan decides no {what} at {op.location} "
                               f"(plan-shared-memory's {table})")
        return decisions[op]

    def get(self, table: str, op: Operation, default: Any = None) -> Any:
        """`decided` for a table whose ops are only those the plan gave something (an op it gave
        nothing: `default`)."""
        return getattr(self.plan, table).get(op, default) if self.plan is not None else default

    @property
    def complete(self) -> bool:
        """Whether every buffer asked for so far was the plan's (at its offset)."""
        return not self.unplanned and not self.mismatches

    def finish(self) -> list[str]:
        """After the kernel is lowered: every planned request was asked for. The mismatches."""
        if self.plan is None:
            return self.mismatches
        for key, planned in self.plan.requests.items():
            if key not in self.asked and planned.role in self.plan.covered:
                self._mismatch(f"{_op_name(planned.op)} never asks for the planned {planned.describe()}")
        return self.mismatches

    def summary(self) -> str:
        """One line for the schedule's dump: whether the plan placed every buffer, else the
        requests of each role it did not size."""
        if not self.unplanned:
            return f"shared-memory plan: {self.where}: every buffer planned"
        left = ", ".join(f"{role} x{n}" for role, n in sorted(self.unplanned.items()))
        return f"shared-memory plan: {self.where}: placed above the plan, not planned: {left}"

    def _mismatch(self, message: str) -> None:
        text = f"error: internal: shared-memory plan: {self.where}: {message}"
        if self.strict:
            raise CompileError(text)
        self.mismatches.append(text)


def _op_name(op: Optional[Operation]) -> str:
    if op is None:
        return "the kernel"
    return f"'{op.name}' at {op.location}" if op.location else f"'{op.name}'"
