"""Buffer assignment and barrier slots of a modulo-scheduled loop (seed 000, at our scale).

Each pipelined value (a tile copied ahead of its use) gets a ring of slots in
shared memory (or tensor memory, where the target has it and the value lives
there): one slot per iteration in flight between the copy's issue and the
barrier after its last consumer's stage, 1 + ceil((consumer - producer) / II),
since the lowering's stages are whole IIs (a consumer waits at its stage's
start); one more where the reader keeps the slot an iteration longer (a wgmma
group left in flight releases it after the next iteration's wait). Values whose lifetimes never overlap in the steady state (intervals
modulo II) and whose slots are the same size share one ring. The barriers
follow the copy mechanism: cp.async commit groups (one per slot, `slots - 1`
in flight, waited down to `slots - 2`) plus the CTA barrier that frees a slot;
or an mbarrier pair per slot (full: the copy's transaction count; empty: the
consumers' release), 8 bytes each in shared memory. When the rings do not fit
beside what the kernel already uses, every ring loses a slot until they do, down
to two, or to `least` where the caller allows one stage: each iteration's copies
then wait until the last one's readers are done (nothing overlaps within the CTA;
the other CTAs an occupancy hint asks for overlap it, stage_rings.fit).
"""

from __future__ import annotations

from typing import Optional

from ..ir.record import record

MIN_STAGES = 2
MBARRIER_BYTES = 8      # PTX ISA: an mbarrier object is a .b64 in shared memory


@record
class PipelinedValue:
    name: str
    nbytes: int              # one slot
    start: int               # the producer's issue, ticks into the iteration
    consumed: int            # the first consumer's start, ticks
    memory: str = "smem"     # smem or tmem
    released: int = -1       # when its last reader is done (-1: at the barrier ending that stage)
    held: int = 0            # iterations its reader keeps the slot past its stage (a wgmma group left
                             # in flight: released after the next iteration's wait, one more slot)

    def slots(self, ii: int) -> int:
        return 1 + max(0, -(-(self.consumed - self.start) // ii)) + self.held

    def live(self, ii: int) -> tuple[int, int]:
        """[issue, release): by default released by the barrier after its consumer's stage (or the
        `held` iterations after it), as the lowering frees a slot; an explicit `released` for
        values whose readers finish earlier."""
        return self.start, self.released if self.released >= 0 else self.start + self.slots(ii) * ii


@record
class Ring:
    value: str
    slots: int
    nbytes: int              # one slot
    offset: int              # bytes into the loop's buffers (rings that share storage share it)
    memory: str = "smem"
    shares: str = ""         # the value whose ring this one reuses


@record
class Barriers:
    mechanism: str           # "cp.async" or "mbarrier"
    slots: int               # stages
    in_flight: int           # copies (groups or transactions) outstanding in the steady state
    wait_pending: int        # cp.async.wait_group's operand; -1 with mbarriers (phase parity instead)
    mbarriers: int           # mbarrier objects (full + empty per slot)
    nbytes: int              # shared memory they take

    def describe(self) -> str:
        if self.mechanism == "cp.async":
            return (f"{self.slots} cp.async groups ({self.in_flight} in flight, wait_group {self.wait_pending}) "
                    f"and the CTA barrier")
        s = self.slots
        return (f"{self.mbarriers} mbarriers, {self.nbytes} bytes: slot s fills full[s] (mbarriers 0-{s - 1}) "
                f"and is released on empty[s] (mbarriers {s}-{2 * s - 1})")


@record
class BufferAssignment:
    stages: int              # slots per ring, as the lowering builds them; 0: does not fit
    wanted: int              # what the schedule asked for
    rings: tuple[Ring, ...]
    barriers: Optional[Barriers]
    nbytes: int              # shared memory of rings and barriers at `stages`
    used: int                # what the kernel had before
    limit: int
    reason: str


def barriers(mechanism: str, stages: int) -> Barriers:
    if mechanism == "cp.async":
        return Barriers(mechanism, stages, stages - 1, max(0, stages - 2), 0, 0)
    if mechanism == "mbarrier":
        return Barriers(mechanism, stages, stages - 1, -1, 2 * stages, 2 * stages * MBARRIER_BYTES)
    raise ValueError(f"unknown copy mechanism '{mechanism}' (cp.async or mbarrier)")


def disjoint(a: tuple[int, int], b: tuple[int, int], ii: int) -> bool:
    """Do two per-iteration live intervals never overlap once every iteration's copies are laid
    II apart?"""
    if (a[1] - a[0]) + (b[1] - b[0]) > ii:
        return False
    lo = (b[0] - a[0]) % ii     # b's start relative to a's, modulo II
    return lo >= a[1] - a[0] and lo + (b[1] - b[0]) <= ii


def share(values: list[PipelinedValue], ii: int) -> dict[str, str]:
    """value -> the value whose storage it reuses: first fit over groups of equal slot size and
    count, memory kind, and lifetimes disjoint from every member's."""
    groups: list[list[PipelinedValue]] = []
    owner: dict[str, str] = {}
    for v in values:
        for group in groups:
            head = group[0]
            if (head.nbytes, head.slots(ii), head.memory) == (v.nbytes, v.slots(ii), v.memory) and \
                    all(disjoint(m.live(ii), v.live(ii), ii) for m in group):
                group.append(v)
                owner[v.name] = head.name
                break
        else:
            groups.append([v])
    return owner


def assign(values: list[PipelinedValue], ii: int, used: int, limit: int, mechanism: str, deepest: int,
           tmem_limit: int = 0, uniform: bool = True, trips: Optional[int] = None,
           most: Optional[tuple[int, str]] = None, least: int = MIN_STAGES) -> BufferAssignment:
    """Rings and barriers for `values` scheduled at `ii`, fitted into `limit` bytes of shared
    memory beside `used`, at most `deepest` stages (the target's `Caps.max_stages`). `uniform`: every ring
    gets the deepest one's slot count (the lowering issues all of an iteration's copies together). `trips`:
    the loop's iterations where they are known and the ring starts afresh each time the loop runs: no deeper
    (a slot past the last iteration is never filled). `most`: a bound on the depth from how the stages are
    filled, and why; `least`: the fewest stages worth building (one: copy, wait, read)."""
    if not values:
        return BufferAssignment(0, 0, (), None, 0, used, limit, "nothing to pipeline")
    wanted = max(MIN_STAGES, max(v.slots(ii) for v in values))
    wanted, bound = (wanted, "as scheduled") if wanted <= deepest else (deepest, "at the target's deepest")
    if trips is not None and trips < wanted:
        wanted, bound = max(MIN_STAGES, trips), f"for the loop's {trips} iteration{'s' if trips != 1 else ''}"
    if most is not None and most[0] < wanted:
        wanted, bound = max(MIN_STAGES, most[0]), most[1]
    owner = share(values, ii)
    for stages in range(wanted, least - 1, -1):
        rings = _rings(values, ii, stages, owner, uniform)
        bars = barriers(mechanism, stages)
        smem = sum(r.slots * r.nbytes for r in rings if r.memory == "smem" and not r.shares) + bars.nbytes
        tmem = sum(r.slots * r.nbytes for r in rings if r.memory == "tmem" and not r.shares)
        if used + smem <= limit and tmem <= tmem_limit:
            why = (f"{stages} stages {bound}" if stages == wanted else
                   f"{wanted} stages wanted, {stages} fit")
            return BufferAssignment(stages, wanted, rings, bars, smem, used, limit,
                                    f"{why}: {smem} bytes beside {used} in {limit}")
    rings = _rings(values, ii, MIN_STAGES, owner, uniform)
    smem = sum(r.slots * r.nbytes for r in rings if r.memory == "smem" and not r.shares)
    return BufferAssignment(0, wanted, rings, None, smem, used, limit,
                            f"{MIN_STAGES} stages of {smem // MIN_STAGES} bytes do not fit beside {used} bytes "
                            f"in {limit}")


def _rings(values: list[PipelinedValue], ii: int, stages: int, owner: dict[str, str], uniform: bool) -> tuple[Ring, ...]:
    out: list[Ring] = []
    offsets: dict[str, int] = {}
    top = {"smem": 0, "tmem": 0}
    for v in values:
        slots = stages if uniform else min(stages, max(MIN_STAGES, v.slots(ii)))
        head = owner.get(v.name, "")
        if head:
            out.append(Ring(v.name, slots, v.nbytes, offsets[head], v.memory, head))
            continue
        offsets[v.name] = top[v.memory]
        out.append(Ring(v.name, slots, v.nbytes, top[v.memory], v.memory))
        top[v.memory] += slots * v.nbytes
    return tuple(out)
