"""Software pipelines of tile loops: which `for` loops prefetch their tile loads, how deep.

A `for` loop whose body loads tiles that only tensor cores read (assign_layouts'
shared operands) can load iteration i + S - 1 while it computes iteration i: the
loads get S shared-memory stages and become asynchronous copies issued S - 1
iterations ahead (lowering/pipelined_loop.py and async_copy.py do it). That is
legal when the copies of a later iteration cannot observe anything the loop
does before it (on sm_90+ the same holds for a row kernel's loop without
tensor cores: its tiles, read into registers from the stages, `_register_load`): the view of each
load is defined outside the loop and every index is the induction variable, defined outside the
loop, or computed in the body from those by scalar arithmetic (`index_ops`: a tile index
`k + offset` or `chunk * 4 + c`, which the copies of a later iteration compute again at its
induction variable), the loads are weak, and nothing in the loop writes memory.

How deep is the modulo scheduler's answer (modulo.py): the loop body's
dependence graph (ddg.py) on the target's resource model (resources.py), the
copies as one stage group and the rest of the body as another (the lowering
moves only the copies to earlier iterations), gives the initiation interval
and when each copy's first reader starts; buffers.py turns that into ring
slots and fits them into the shared memory the kernel has left. A row loop
whose schedule wants all its iterations in flight at once is left to plain
loads (`_no_steady_state`): the loops the pass declines are printed with why.
"""

from __future__ import annotations

from typing import Iterator, Optional, Protocol

from ..ir.core import Block, Operation, Value, enclosing
from ..ir.types import TileType, TokenType
from ..ir.record import record
from ..target import Caps
from ..transforms.constants import splat_int
from .buffers import MIN_STAGES, BufferAssignment, PipelinedValue, assign
from .ddg import DependenceGraph, build_loop_ddg
from .modulo import Schedule, ScheduleError, modulo_schedule, serial_schedule
from .resources import ALU, TCGEN05, WGMMA, machine


class Layouts(Protocol):
    """What the scheduler reads of a kernel's layout assignment: its target, which loads the tensor
    cores read from shared memory and which mmas run as wgmma or tcgen05."""
    sm: int
    threads: int
    caps: Caps
    wgmma_ops: set
    tcgen05_layouts: dict
    fma_reasons: dict          # the mmas on the FMA path (no tensor-core form)

    def is_shared_operand(self, value: Value) -> bool: ...


_LOOPS = ("cuda_tile.for", "cuda_tile.loop")
_WRITES = ("cuda_tile.store_view_tko", "cuda_tile.store_ptr_tko", "cuda_tile.atomic_rmw_tko",
           "cuda_tile.atomic_cas_tko", "cuda_tile.atomic_red_view_tko")
# writes a loop may hold and still have its loads issued ahead: weak stores, which order nothing but the
# ops their tokens reach (`_after_writes`)
_PLAIN_STORES = ("cuda_tile.store_view_tko", "cuda_tile.store_ptr_tko")


@record
class PipelinePlan:
    loop: Operation
    loads: tuple[Operation, ...]   # the loads that become staged asynchronous copies, in body order
    graph: DependenceGraph
    schedule: Schedule
    first_use: tuple[int, ...]     # per load, when its first reader starts (ticks)
    issue: int                     # when the copies' stage starts (ticks): they are issued together
    deepest: int                   # the target's deepest ring (Caps.max_stages)
    mechanism: str = "cp.async"    # what the lowering waits with (buffers.barriers)
    # the body's scalar ops that compute the loads' indices from the induction variable, in body
    # order: issued with the copies, at the copied iteration's induction variable (`index_ops`)
    index_ops: tuple[Operation, ...] = ()

    @property
    def pipelined(self) -> bool:
        return self.schedule.kind == "modulo"

    @property
    def depth(self) -> int:
        """The iterations in flight the schedule asks for (a copy's issue to its first reader, in
        initiation intervals), before any limit on a ring's stages."""
        return max(PipelinedValue("", 0, self.issue, use).slots(self.schedule.ii) for use in self.first_use)

    def landing(self) -> tuple[int, ...]:
        """Per load, when its copy lands (its issue plus its latency, ticks)."""
        index = {node.op: node for node in self.graph.nodes}
        return tuple(self.schedule.start[index[load].index] + index[load].latency for load in self.loads)

    def values(self, sizes: dict[Operation, int], held: int = 0, produced: bool = False) -> list[PipelinedValue]:
        """The rings' values: each copy's slot lives from the iteration's issue to its first reader's
        start; `produced`: a producer role of its own issues the copies (warp specialization), as soon as
        a slot is free, and the consumers wait for a stage where their iteration starts, so a slot need
        only cover the copy's latency, wherever the schedule placed the first reader (resources the
        copies do not share with the consumers may have pushed it later)."""
        uses = self.landing() if produced else self.first_use
        return [PipelinedValue(f"%{i}", sizes[load], self.issue, use, held=held)
                for i, (load, use) in enumerate(zip(self.loads, uses))]

    def describe(self) -> list[str]:
        """The schedule for the IR dump: II, its bounds, and each op's stage and cycle."""
        s, tick = self.schedule, self.graph.tick
        head = (f"{s.kind} schedule, II {s.ii * tick} cycles ({s.ii} ticks of {tick}; ResMII {s.res_mii}, "
                f"RecMII {s.rec_mii}): {s.reason}; {s.stages} schedule stage{'s' if s.stages > 1 else ''}")
        rows: dict[int, list[str]] = {}
        for node in self.graph.nodes:
            if node.footprint.reservations:
                rows.setdefault(s.stage(node.index), []).append(f"{node.name}@{s.start[node.index] * tick}")
        return [head] + [f"stage {stage}: {' '.join(ops)}" for stage, ops in sorted(rows.items())]


def _walk(ops: list[Operation]) -> Iterator[Operation]:
    return (inner for op in ops for inner in op.walk())


def _defined_in(ops: list[Operation]) -> set[Value]:
    out: set[Value] = set()
    for op in _walk(ops):
        out.update(op.results)
        for region in op.regions:
            for block in region.blocks:
                out.update(block.arguments)
    return out


def plan_pipelines(entry: Operation, assignment: Layouts,
                   declined: Optional[dict[Operation, str]] = None) -> dict[Operation, PipelinePlan]:
    """The loops that can be pipelined, with their loads (the depth is chosen at lowering, where the
    tiles' buffer sizes and the kernel's other shared memory are known). `declined` gets the loops
    that could be and are not, with why."""
    plans: dict[Operation, PipelinePlan] = {}
    rows = _reduces(entry)
    for loop in entry.walk():
        if loop.name != "cuda_tile.for":
            continue
        body = loop.regions[0].block
        writes = [op for op in _walk(body.operations) if op.name in _WRITES]
        if any(op.name not in _PLAIN_STORES or str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak"
               for op in writes):
            continue
        # a value the loop carries changes every iteration: a load it indexes cannot be issued ahead; nor
        # can one that a write's token orders after it (this iteration's or, carried, an earlier one's)
        inside = _defined_in(body.operations) | set(body.arguments[1:])
        after = _after_writes(body, writes)
        loads = []
        for op in body.operations:
            if op.name != "cuda_tile.load_view_tko" or not assignment.is_shared_operand(op.results[0]):
                continue
            if str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak":
                continue
            if index_ops(op, body, inside) is None:
                continue
            if op.operand("token") in after:
                continue
            loads.append(op)
        row_loop = not loads and assignment.caps.has("mbarrier_tx") and rows
        if row_loop:
            loads = [op for op in body.operations
                     if _register_load(op, inside, assignment) and op.operand("token") not in after]
            if writes and sum(op.results[0].type.num_elements for op in loads) > ROW_ELEMENTS * assignment.threads:
                loads = []      # (too many registers kept a thread: `ROW_ELEMENTS`)
        if not loads:
            continue
        plan = schedule_loads(loop, tuple(loads), assignment)
        why = _no_steady_state(plan) if row_loop else ""
        if not why:
            plans[loop] = plan
        elif declined is not None:
            declined[loop] = why
    return plans


def _no_steady_state(plan: PipelinePlan) -> str:
    """Why a row loop is better left to plain loads ("" where it is not): the schedule wants every
    iteration's copy in flight at once, so a ring would only issue them all at the loop's start, as
    ptxas does with the unrolled loop's plain loads, and those of the next loop follow them without a
    ring's barriers to wait at (cuTile launches one CTA an SM, so nothing else hides a loop's start).
    On the H100 the chunked layernorm n8192 (three loops of 4 iterations) took 1.48x NVIDIA's time
    pipelined and 1.00x with its two reading loops left so; n16384 (16 iterations) 1.66x and 1.38x.
    Not inside another loop: a persistent kernel's carries the ring from row to row, so its copies run
    ahead into the next row's (warp_roles.persistent)."""
    trips, depth = trip_count(plan.loop), max(MIN_STAGES, plan.depth)
    if trips is None or trips > depth or enclosing(plan.loop, _LOOPS) is not None:
        return ""
    return (f"the schedule wants {depth} iterations in flight, and the loop has {trips}: a ring would issue "
            "every copy at the loop's start, as plain loads do, and add barriers to wait at")


def _after_writes(body: "Block", writes: list[Operation]) -> set[Value]:
    """The tokens of `body` that order what takes them after one of its `writes`: their results, joins
    of them, and the block arguments the loop carries them into."""
    after: set[Value] = set()
    grown = True
    while grown:
        size = len(after)
        for op in _walk(body.operations):
            if op in writes or op.name == "cuda_tile.join_tokens" and any(v in after for v in op.operands):
                after.update(r for r in op.results if isinstance(r.type, TokenType))
        last = body.operations[-1] if body.operations else None
        if last is not None and last.name == "cuda_tile.continue":
            after.update(arg for arg, v in zip(body.arguments[1:], last.operands) if v in after)
        grown = len(after) > size
    return after


# Elements a thread may load an iteration of a row loop that also stores, for its loads to be staged: each
# stage is read into registers at the iteration's start (converted to f32, live beside what the body computes
# and stores) while the next copies are in flight. TileGym's RMSNorm backward loads 128 (two 4 x 4096 f16
# tiles on 256 threads): staged it spilled 78 instructions (95 warp-specialized, at the 168 registers of 384
# threads), loaded directly none; the chunked norms and softmax load 8-64 and stage spill-free.
ROW_ELEMENTS = 64


def _reduces(entry: Operation) -> bool:
    """A row kernel: it reduces (the loops' tiles are summed, maxed or normalized row by row)."""
    return any(op.name in ("cuda_tile.reduce", "cuda_tile.scan") for op in entry.walk())


# scalar ops with no effect that an index may be computed with in the loop's body (not `assume`: computed
# again for an iteration past the loop's end, whose copies are predicated off, its fact may not hold)
_INDEX_ARITHMETIC = frozenset(f"cuda_tile.{name}" for name in (
    "constant", "addi", "subi", "muli", "divi", "remi", "maxi", "mini", "negi",
    "shli", "shri", "andi", "ori", "xori", "select", "cmpi", "exti", "trunci"))
_DIVISIONS = ("cuda_tile.divi", "cuda_tile.remi")


def index_ops(load: Operation, body: Block, inside: set[Value]) -> Optional[tuple[Operation, ...]]:
    """The ops of `body` (the loop's) that `load`'s indices are computed with from its induction
    variable (`body.arguments[0]`), scalar arithmetic on it, constants and values defined outside the
    loop; None where its view is defined in the loop (`inside`: what the loop defines and carries) or
    an index depends on anything else (a carried value, a load, an op in a nested region). A gather
    (a tile of row indices among its indices) takes its indices as they are: its copies exchange the
    row indices through scratch behind CTA barriers, which copies issued ahead do not take again."""
    if load.operand("view") in inside:
        return None
    iv = body.arguments[0]
    chain: set[Operation] = set()
    wanted = list(load.operand_group("index"))
    if any(isinstance(v.type, TileType) and v.type.shape for v in wanted):
        return () if all(v is iv or v not in inside for v in wanted) else None
    while wanted:
        value = wanted.pop()
        if value is iv or value not in inside:
            continue
        owner = value.owner
        if not isinstance(owner, Operation) or owner.parent is not body or owner.name not in _INDEX_ARITHMETIC \
                or any(isinstance(r.type, TileType) and r.type.shape for r in owner.results):
            return None
        if owner.name in _DIVISIONS and splat_int(owner.operands[1]) in (None, 0, -1):
            return None     # (a runtime divisor may be zero where the loop runs no iteration)
        if owner not in chain:
            chain.add(owner)
            wanted.extend(owner.operands)
    return tuple(op for op in body.operations if op in chain)


def _register_load(op: Operation, inside: set[Value], assignment: Layouts) -> bool:
    """A load of a row loop (sm_90+) whose tile the threads read from registers and which a stage of
    a ring can hold as TMA or cp.async writes it: weak, its view defined outside the loop and its
    indices computed from the induction variable and such values (`index_ops`), a 2-D tile (or one
    whose leading dimensions are 1). Both fill with zeros outside the tensor; the readers put back
    another padding (lowering/ops_memory.restore_padding).
    NVIDIA's compiler pipelines such loops (row sums, chunked norms)
    with TMA and a producer warp; on sm_80 it loads them directly, as ours does."""
    if op.name != "cuda_tile.load_view_tko" or assignment.is_shared_operand(op.results[0]):
        return False
    if str(op.attributes.get("memory_ordering_semantics", "weak")) != "weak":
        return False
    if index_ops(op, op.parent, inside) is None:
        return False
    shape = op.results[0].type.shape
    return len(shape) >= 2 and all(d == 1 for d in shape[:-3])


def schedule_loads(loop: Operation, loads: tuple[Operation, ...], assignment: Layouts) -> PipelinePlan:
    """The modulo schedule of `loop` with `loads` staged (the loop's other ops run in its body)."""
    target = machine(assignment.sm)
    units = {**{op: ALU for op in assignment.fma_reasons}, **{op: WGMMA for op in assignment.wgmma_ops},
             **{op: TCGEN05 for op in assignment.tcgen05_layouts}}
    body = loop.regions[0].block
    inside = _defined_in(body.operations) | set(body.arguments[1:])
    chains = {o for load in loads for o in index_ops(load, body, inside) or ()}
    indexing = tuple(o for o in body.operations if o in chains)
    graph = build_loop_ddg(loop, target, loads, units, prefetch_only=True, issued_with=indexing)
    try:
        schedule = modulo_schedule(graph, target.capacities)
    except ScheduleError as err:   # no overlap is legal: the loop runs one iteration at a time
        schedule = serial_schedule(graph, reason=str(err))
    index = {node.op: node.index for node in graph.nodes}
    copies = [schedule.start[index[load]] for load in loads]
    issue = min(copies) // schedule.ii * schedule.ii
    return PipelinePlan(loop, loads, graph, schedule,
                        tuple(_first_reader(graph, schedule, index[load]) for load in loads), issue,
                        assignment.caps.max_stages, index_ops=indexing)


def _first_reader(graph: DependenceGraph, schedule: Schedule, node: int) -> int:
    """When the first op that reads node's tile starts: through shape changes (no work of their own)
    to the ops that do work."""
    best, seen, work = None, {node}, [node]
    while work:
        v = work.pop()
        for e in graph.edges:
            if e.src != v or e.distance or e.dst in seen or e.kind != "data":
                continue
            seen.add(e.dst)
            if graph.nodes[e.dst].footprint.reservations:
                t = schedule.start[e.dst]
                best = t if best is None else min(best, t)
            else:
                work.append(e.dst)
    return schedule.start[node] + graph.nodes[node].latency if best is None else best


def fit_stages(plan: PipelinePlan, sizes: dict[Operation, int], used: int, limit: int,
               held: int = 0, restarts: bool = True, most: Optional[tuple[int, str]] = None,
               produced: bool = False, least: int = MIN_STAGES) -> BufferAssignment:
    """The plan's rings (`sizes`: bytes of one stage of each load) fitted beside `used` bytes;
    `held`: iterations the readers keep a slot past their stage (PipelinedValue.held). `restarts`:
    the ring starts afresh each time the loop runs (not a persistent kernel's, carried from tile to
    tile), so a static trip count bounds its depth; `most`: another bound (buffers.assign);
    `produced`: a producer role issues the copies (PipelinePlan.values); `least`: buffers.assign."""
    trips = trip_count(plan.loop) if restarts else None
    return assign(plan.values(sizes, held, produced), plan.schedule.ii, used, limit, plan.mechanism, plan.deepest,
                  trips=trips, most=most, least=least)


def trip_count(loop: Operation) -> Optional[int]:
    """Iterations of a `for` whose bounds and step are constants; None otherwise."""
    if loop.name != "cuda_tile.for":
        return None
    lb, ub, step = (splat_int(loop.operand(n)) for n in ("lowerBound", "upperBound", "step"))  # type: ignore[arg-type]
    if lb is None or ub is None or step is None or step <= 0:
        return None
    return max(0, -(-(ub - lb) // step))
