"""Iterative modulo scheduling (Rau, "Iterative Modulo Scheduling", 1994) of a loop's dependence graph.

The initiation interval II starts at MII = max(ResMII, RecMII): ResMII, the
busiest unit's hold over its capacity; RecMII, the smallest II under which no
dependence cycle (latency - II x distance summed round it) is positive. At each
II from there, ops are placed by priority (height above the loop's end) at the
earliest cycle in [Estart, Estart + II - 1] where the modulo reservation table
has room; when none has, the op takes a cycle anyway and evicts the ops it
collides with and the successors it now starts too late for, to be placed
again. A budget of placements bounds that backtracking; exhausted, the next II
is tried. Past the length of one serial iteration, overlap buys nothing: the
serial schedule (every op after its dependences, one iteration at a time) is
the fallback. The cost evaluator ranks schedules lexicographically: II, then
stages (the prologue), then the summed lifetimes of values (register pressure).
"""

from __future__ import annotations

import heapq
from typing import Optional

from ..ir.record import record
from .ddg import DependenceGraph, Edge
from .resources import Footprint
from .scc import cyclic_components

BUDGET_RATIO = 6            # placements allowed per op at one II (Rau suggests 3 to 6)
_NO_OVERLAP = 1 << 40       # an II no latency reaches: a loop-carried edge never binds under it


class ScheduleError(ValueError):
    """The graph has no schedule at any II (a cycle of dependences within one iteration)."""


@record
class Cost:
    ii: int
    stages: int
    lifetime: int              # sum over edges of how long the value lives, ticks

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.ii, self.stages, self.lifetime)


@record
class Schedule:
    kind: str                  # "modulo" or "serial"
    ii: int
    start: tuple[int, ...]     # per node, ticks from the iteration's first op (min 0)
    res_mii: int
    rec_mii: int
    bottleneck: str            # the busiest unit (the one ResMII comes from)
    placements: int = 0        # placement steps spent at this II (evictions included)
    reason: str = ""

    @property
    def stages(self) -> int:
        return max(self.start, default=0) // self.ii + 1 if self.ii else 1

    def stage(self, node: int) -> int:
        return self.start[node] // self.ii


# ---- lower bounds ----

def res_mii(g: DependenceGraph, capacities: dict[str, int]) -> tuple[int, str]:
    """(ResMII, its unit): the total hold of each unit over its capacity, the largest."""
    held: dict[str, int] = {}
    for node in g.nodes:
        for r in node.footprint.reservations:
            if r.unit not in capacities:
                raise ScheduleError(f"op {node.name} reserves unit '{r.unit}' the target does not have")
            held[r.unit] = held.get(r.unit, 0) + r.length * r.count
    best, unit = 1, ""
    for name, total in held.items():
        need = -(-total // capacities[name])
        if need > best:
            best, unit = need, name
    return best, unit


def rec_mii(g: DependenceGraph) -> int:
    """The smallest II under which no dependence cycle has positive length (1 without cycles)."""
    best = 1
    for component in _cyclic_components(g):
        edges = [e for e in g.edges if e.src in component and e.dst in component]
        if _positive_cycle(component, edges, _NO_OVERLAP):   # only distance-0 cycles stay positive
            raise ScheduleError("a cycle of dependences within one iteration: "
                                + ", ".join(g.nodes[n].name for n in sorted(component)))
        lo, hi = best, max(best, sum(e.latency for e in edges) + 1)
        if not _positive_cycle(component, edges, lo):
            continue
        while lo < hi:                # the smallest II with no positive cycle
            mid = (lo + hi) // 2
            if _positive_cycle(component, edges, mid):
                lo = mid + 1
            else:
                hi = mid
        best = lo
    return best


def group_chains(g: DependenceGraph) -> tuple[dict[int, int], dict[str, int]]:
    """Per grouped node, its depth: the longest same-iteration dependence path to it from a member
    of its group; per group, its span: the deepest member's depth."""
    members: dict[str, set[int]] = {}
    for node in g.nodes:
        if node.group:
            members.setdefault(node.group, set()).add(node.index)
    forward: list[list[Edge]] = [[] for _ in g.nodes]
    for e in g.edges:
        if e.distance == 0 and e.src < e.dst:   # same-iteration edges follow program order
            forward[e.src].append(e)
    depth: dict[int, int] = {}
    span: dict[str, int] = {}
    for group, inside in members.items():
        longest = {v: 0 for v in inside}
        for v in range(min(inside), len(g.nodes)):
            if v in longest:
                for e in forward[v]:
                    longest[e.dst] = max(longest.get(e.dst, 0), longest[v] + e.latency)
        for v in inside:
            depth[v] = longest[v]
        span[group] = max(longest[v] for v in inside)
    return depth, span


def group_mii(g: DependenceGraph, capacities: Optional[dict[str, int]] = None) -> int:
    """The smallest II that fits each stage group in one stage: its span plus one; and, where two
    members a -> b hold the same single unit one after the other, the next iteration's a must wait
    for b: II >= path(a, b) + b's hold end - a's hold start."""
    depth, span = group_chains(g)
    best = 1 + max(span.values(), default=0)
    if not capacities:
        return best
    forward: list[list[Edge]] = [[] for _ in g.nodes]
    for e in g.edges:
        if e.distance == 0 and e.src < e.dst:
            forward[e.src].append(e)
    single = {u for u, c in capacities.items() if c == 1}
    for a in depth:
        holds_a = [r for r in g.nodes[a].footprint.reservations if r.unit in single]
        if not holds_a:
            continue
        longest = {a: 0}
        for v in range(a, len(g.nodes)):
            if v in longest:
                for e in forward[v]:
                    longest[e.dst] = max(longest.get(e.dst, 0), longest[v] + e.latency)
        for b, path in longest.items():
            if b == a or g.nodes[b].group != g.nodes[a].group:
                continue
            for rb in g.nodes[b].footprint.reservations:
                for ra in holds_a:
                    if ra.unit == rb.unit and path + rb.offset >= ra.offset + ra.length:
                        best = max(best, path + rb.offset + rb.length - ra.offset)
    return best


def _positive_cycle(nodes: set[int], edges: list[Edge], ii: int) -> bool:
    """Bellman-Ford on longest paths: does a cycle of latency - ii x distance > 0 exist?"""
    dist = {n: 0 for n in nodes}
    for _ in range(len(nodes)):
        changed = False
        for e in edges:
            w = dist[e.src] + e.latency - ii * e.distance
            if w > dist[e.dst]:
                dist[e.dst] = w
                changed = True
        if not changed:
            return False
    return True


def _cyclic_components(g: DependenceGraph) -> list[set[int]]:
    """The dependence graph's strongly connected components that hold a cycle (its recurrences)."""
    succ: dict[int, list[int]] = {n.index: [] for n in g.nodes}
    for e in g.edges:
        succ[e.src].append(e.dst)
    return cyclic_components(succ)


# ---- the modulo reservation table ----

class ReservationTable:
    """II rows; each row counts, per unit, how much of it is held in that cycle modulo II, and by
    which ops (op -> count: placing and evicting are dictionary updates, not list scans)."""

    def __init__(self, ii: int, capacities: dict[str, int]) -> None:
        self.ii = ii
        self.capacities = capacities
        self.used: list[dict[str, int]] = [{} for _ in range(ii)]
        self.holders: list[dict[str, dict[int, int]]] = [{} for _ in range(ii)]
        self._patterns: dict[int, list[tuple[int, str, int]]] = {}

    def _pattern(self, fp: Footprint) -> list[tuple[int, str, int]]:
        """fp's per-row demand folded modulo II: (row offset, unit, count), a long hold counted
        as often as it wraps onto the same row."""
        key = id(fp)
        if key not in self._patterns:
            need: dict[tuple[int, str], int] = {}
            for r in fp.reservations:
                for k in range(r.offset, r.offset + r.length):
                    cell = (k % self.ii, r.unit)
                    need[cell] = need.get(cell, 0) + r.count
            self._patterns[key] = [(k, unit, n) for (k, unit), n in need.items()]
        return self._patterns[key]

    def _demand(self, fp: Footprint, t: int) -> dict[tuple[int, str], int]:
        return {((t + k) % self.ii, unit): n for k, unit, n in self._pattern(fp)}

    def fits(self, fp: Footprint, t: int) -> bool:
        ii, used, caps = self.ii, self.used, self.capacities
        return all(used[(t + k) % ii].get(unit, 0) + n <= caps[unit] for k, unit, n in self._pattern(fp))

    def conflicts(self, fp: Footprint, t: int) -> set[int]:
        """The ops holding a cell that placing fp at t would overfill."""
        out: set[int] = set()
        for (row, unit), n in self._demand(fp, t).items():
            if self.used[row].get(unit, 0) + n > self.capacities[unit]:
                out.update(self.holders[row].get(unit, ()))
        return out

    def place(self, node: int, fp: Footprint, t: int) -> None:
        for (row, unit), n in self._demand(fp, t).items():
            held = self.holders[row].setdefault(unit, {})
            held[node] = held.get(node, 0) + n
            self.used[row][unit] = self.used[row].get(unit, 0) + n

    def remove(self, node: int, fp: Footprint, t: int) -> None:
        for (row, unit), _ in self._demand(fp, t).items():
            self.used[row][unit] -= self.holders[row][unit].pop(node, 0)


# ---- placement ----

def heights(g: DependenceGraph, ii: int) -> list[int]:
    """Rau's HeightR: the longest latency - II x distance path from each op to any end."""
    h = [0] * len(g.nodes)
    for _ in range(len(g.nodes) + 1):
        changed = False
        for e in g.edges:
            w = h[e.dst] + e.latency - ii * e.distance
            if w > h[e.src]:
                h[e.src] = w
                changed = True
        if not changed:
            break
    return h


def place_at(g: DependenceGraph, ii: int, capacities: dict[str, int], priority: list[int],
             budget: int) -> Optional[tuple[list[int], int]]:
    """One iterative modulo scheduling attempt at `ii`: (start cycles, placements spent) or None
    when the budget runs out. `priority`: higher first; ties go to the earlier op."""
    n = len(g.nodes)
    preds: list[list[Edge]] = [[] for _ in range(n)]
    succs: list[list[Edge]] = [[] for _ in range(n)]
    for e in g.edges:
        preds[e.dst].append(e)
        succs[e.src].append(e)
    order = sorted(range(n), key=lambda v: (-priority[v], v))
    groups: dict[str, list[int]] = {}
    for node in g.nodes:
        if node.group:
            groups.setdefault(node.group, []).append(node.index)
    depth, span = group_chains(g)
    if any(chain >= ii for chain in span.values()):
        return None            # a group's chain is longer than a stage
    table = ReservationTable(ii, capacities)
    start: dict[int, int] = {}
    previous: dict[int, int] = {}
    floor: dict[str, int] = {}      # per group, the earliest stage it may still take
    # a group's placed members share one stage: how many are placed, and that stage
    members: dict[str, int] = dict.fromkeys(groups, 0)
    stage_of: dict[str, int] = {}
    rank = {v: i for i, v in enumerate(order)}
    waiting = [(rank[v], v) for v in order]      # unplaced ops by priority (a heap; stale entries skipped)
    spent = 0

    def unplace(v: int) -> None:
        if v in start:
            table.remove(v, g.nodes[v].footprint, start.pop(v))
            if g.nodes[v].group:
                members[g.nodes[v].group] -= 1
            heapq.heappush(waiting, (rank[v], v))

    while len(start) < n:
        if spent >= budget:
            return None
        while waiting[0][1] in start:
            heapq.heappop(waiting)
        v = heapq.heappop(waiting)[1]
        name = g.nodes[v].group
        fp, group = g.nodes[v].footprint, groups.get(name, ())
        estart = max((start[e.src] + e.latency - ii * e.distance for e in preds[v] if e.src in start and e.src != v),
                     default=0)
        lo, hi = estart, estart + ii - 1
        if group and members[name]:   # a group's members share one stage (all placed ones already do)
            stage = stage_of[name]
            lo, hi = max(estart, stage * ii), stage * ii + ii - 1
        elif group:   # the group's first: where its whole chain still fits in the stage
            chain, first = span[g.nodes[v].group], max(estart, floor.get(g.nodes[v].group, 0) * ii)
            lo = next(c for c in range(first, first + ii) if (c - depth[v]) % ii + chain < ii)
            hi = lo + (ii - 1 - chain - (lo - depth[v]) % ii)
        t = next((c for c in range(lo, hi + 1) if table.fits(fp, c)), None)
        if t is None:   # no room: take a cycle anyway, later than last time, and evict
            t = lo if v not in previous or lo > previous[v] else previous[v] + 1
            for w in table.conflicts(fp, t):
                unplace(w)
        if group and members[name] and stage_of[name] != t // ii:
            # the group moves to t's stage: never back to an earlier one, where it did not fit
            floor[name] = t // ii
            for m in group:
                unplace(m)
        for e in succs[v]:
            if e.dst != v and e.dst in start and start[e.dst] < t + e.latency - ii * e.distance:
                unplace(e.dst)
        table.place(v, fp, t)
        start[v] = previous[v] = t
        if group:
            members[name] += 1
            stage_of[name] = t // ii
        spent += 1
    return [start[v] for v in range(n)], spent


def serial_schedule(g: DependenceGraph, res: int = 0, rec: int = 0, unit: str = "", reason: str = "") -> Schedule:
    """Every op in program order after its same-iteration dependences, each unit held by one op at a
    time; II is the whole iteration's length (nothing overlaps the next one)."""
    n = len(g.nodes)
    start = [0] * n
    busy: dict[str, int] = {}
    end = 0
    for v in range(n):   # nodes are in program order, which respects distance-0 edges
        t = max((start[e.src] + e.latency for e in g.edges if e.dst == v and e.distance == 0 and e.src < v),
                default=0)
        for r in g.nodes[v].footprint.reservations:
            t = max(t, busy.get(r.unit, 0) - r.offset)
        start[v] = t
        for r in g.nodes[v].footprint.reservations:
            busy[r.unit] = max(busy.get(r.unit, 0), t + r.offset + r.length)
        end = max(end, t + g.nodes[v].latency, *(busy.values() or [0]))
    for e in g.edges:   # the next iteration starts after every carried value is ready
        if e.distance:
            end = max(end, -(-(start[e.src] + e.latency - start[e.dst]) // e.distance))
    return Schedule("serial", max(1, end), tuple(start), res, rec, unit, 0, reason)


def evaluate(g: DependenceGraph, s: Schedule) -> Cost:
    """The schedule's cost: II, then stages, then how long values live (sum over edges)."""
    life = sum(s.start[e.dst] + s.ii * e.distance - s.start[e.src] for e in g.edges if e.kind != "memory")
    return Cost(s.ii, s.stages, life)


def modulo_schedule(g: DependenceGraph, capacities: dict[str, int], max_ii: Optional[int] = None,
                    budget_ratio: int = BUDGET_RATIO) -> Schedule:
    """The best modulo schedule at the smallest feasible II from MII up to `max_ii` (default: one
    serial iteration's length), else the serial schedule."""
    if not g.nodes:
        return Schedule("serial", 1, (), 1, 1, "", 0, "empty loop body")
    res, unit = res_mii(g, capacities)
    rec, grp = rec_mii(g), group_mii(g, capacities)
    mii = max(res, rec, grp)
    serial = serial_schedule(g, res, rec, unit)
    limit = serial.ii if max_ii is None else max_ii
    budget = budget_ratio * len(g.nodes)

    def attempt(ii: int) -> Optional[Schedule]:
        found: list[Schedule] = []
        for priority in (heights(g, ii), [0] * len(g.nodes)):   # height-based, then program order
            placed = place_at(g, ii, capacities, priority, budget)
            if placed is not None:
                base = min(placed[0]) // ii * ii   # whole stages: the groups' stages stay shared
                found.append(Schedule("modulo", ii, tuple(t - base for t in placed[0]), res, rec, unit,
                                      placed[1]))
        return min(found, key=lambda s: evaluate(g, s).key) if found else None

    best = _smallest_feasible(attempt, mii, limit)
    if best is not None and evaluate(g, best).key < evaluate(g, serial).key:
        bounds = {f"ResMII {res} ({unit})": res, f"RecMII {rec} (a loop-carried dependence)": rec,
                  f"GroupMII {grp} (a stage group's dependence chain)": grp}
        bound = max(bounds, key=lambda k: bounds[k])
        why = "II = MII" if best.ii == mii else f"II {best.ii - mii} above MII (no placement fits below)"
        return Schedule(best.kind, best.ii, best.start, res, rec, unit, best.placements, f"{why}, bound by {bound}")
    if best is not None:
        why = f"the modulo schedule at II {best.ii} is no better than one iteration at a time ({serial.ii})"
    elif mii > limit:
        why = f"MII {mii} is past the largest II worth trying ({limit})"
    else:
        why = f"no modulo schedule with II in [{mii}, {limit}] within {budget} placements"
    return Schedule("serial", serial.ii, serial.start, res, rec, unit, 0, why)


LINEAR_TRIES = 4


def _smallest_feasible(attempt, lower: int, upper: int) -> Optional[Schedule]:
    """The schedule at the smallest II in [lower, upper] that `attempt` finds: a few steps up from
    `lower`, then galloping (doubling the step) and a binary search back down (seed 004's search)."""
    tried: dict[int, Optional[Schedule]] = {}

    def at(ii: int) -> Optional[Schedule]:
        if ii not in tried:
            tried[ii] = attempt(ii)
        return tried[ii]

    for ii in range(lower, min(upper, lower + LINEAR_TRIES - 1) + 1):
        if at(ii) is not None:
            return tried[ii]
    failed, step = lower + LINEAR_TRIES - 1, LINEAR_TRIES
    hi = failed + step
    while hi < upper and at(hi) is None:
        failed, step = hi, step * 2
        hi = failed + step
    if hi >= upper:
        hi = upper
        if hi <= failed or at(hi) is None:
            return None
    while failed + 1 < hi:
        mid = (failed + hi) // 2
        if at(mid) is not None:
            hi = mid
        else:
            failed = mid
    return tried[hi]
