"""Named-barrier binding (seed 000, "Assign Named Barriers", at our scale).

A CTA has 16 named barriers (`bar.sync id, threads`); id 0 is the one __syncthreads
(`barrier0`, bar.sync 0) uses, so a role of a warp-specialized kernel that synchronizes
among itself (the consumer warpgroups' CTA barriers, the epilogue they run), or two roles
that meet once (consumers and producer when the pipeline's mbarriers are initialized), get
ids 1..15. Each use has a lifetime: [first, last) positions in the kernel's program order
(its top-level operations). Two uses live at the same time never share an id: a bar.sync
of one would count the other's arrivals. Binding walks the uses in order and gives each the
lowest id not bound yet, else the lowest id whose bound lifetimes are all disjoint from the
use's; when neither exists the kernel cannot be compiled with these roles (NamedBarrierError).
Scanning ids in order keeps the binding the same from one compile to the next.
"""

from __future__ import annotations

from ..ir.record import record

FIRST_ID = 1            # 0: __syncthreads
LAST_ID = 15            # PTX ISA: barriers 0..15 per CTA
WARP = 32               # bar.sync's thread count is a multiple of the warp size


class NamedBarrierError(Exception):
    """The named barriers cannot be bound (more uses live at once than ids, or a bad thread count)."""


@record
class BarrierUse:
    name: str                # what meets there, e.g. "consumers"
    threads: int             # how many threads arrive
    live: tuple[int, int]    # [first, last) program positions where it is used


@record
class NamedBarrier:
    name: str
    id: int
    threads: int
    live: tuple[int, int]

    def describe(self) -> str:
        return f"{self.name}: bar.sync {self.id}, {self.threads}"


def overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def bind(uses: list[BarrierUse]) -> tuple[NamedBarrier, ...]:
    """An id per use: fresh ids first (lowest unbound), then reuse of the lowest id whose every
    bound use is dead while this one is live."""
    bound: dict[int, list[tuple[int, int]]] = {}
    out = []
    for use in uses:
        if use.threads <= 0 or use.threads % WARP:
            raise NamedBarrierError(f"named barrier '{use.name}': {use.threads} threads is not a positive "
                                    f"multiple of {WARP}")
        if use.live[0] >= use.live[1]:
            raise NamedBarrierError(f"named barrier '{use.name}': empty lifetime {use.live}")
        fresh = [i for i in range(FIRST_ID, LAST_ID + 1) if i not in bound]
        reuse = [i for i in sorted(bound) if not any(overlaps(use.live, other) for other in bound[i])]
        if not fresh and not reuse:
            live = ", ".join(b.name for b in out if overlaps(b.live, use.live))
            raise NamedBarrierError(f"fails to assign named barrier '{use.name}': ids {FIRST_ID}-{LAST_ID} "
                                    f"are all held by uses live at the same time ({live})")
        chosen = (fresh or reuse)[0]
        bound.setdefault(chosen, []).append(use.live)
        out.append(NamedBarrier(use.name, chosen, use.threads, use.live))
    return tuple(out)
