"""Which loads of a cluster-split kernel are multicast (sm_90): the CTAs that read the same tile.

After `split-over-cluster` (tileaa/clusters.py) the CTAs of a cluster each compute a part of the
tile block's output; an operand tile whose dimensions are not all split is the same tile in several
CTAs (the persistent matmul at 128x512 split 1x4: every CTA reads the same 128x64 A tile, its own
quarter of B). For each load the CTAs needing the same tile (the ranks agreeing on the coordinates
of the tile's split dimensions: rank % fM along M, rank / fM along N) form its `group`; the TMA box
is cut along its rows into one slice per member (tma_boxes.sliced; each slice whole 8-row swizzle
atoms), each member issuing one slice to all. A stage's empty barrier awaits the releases of every
CTA that receives anything this CTA issues (`ClusterLoads.receivers`: the union of its groups).
The protocol is emitted by lowering/multicast.py.

Kept without multicast, with a remark (`refuse`): a warp-specialized kernel, a cp.async pipeline, a
target without the "multicast" feature (sm_100's CTA pairs are another form), a box that does not
cut into whole 8-row atoms.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..ir.core import Operation
from ..ir.record import record
from ..target import with_feature
from ..tileaa.clusters import CLUSTER_ATTR, DIMS_ATTR


@record
class Group:
    """The CTAs of a cluster that read the same tile of one load."""

    size: int                   # CTAs that need the tile: it is cut in `size` slices
    masks: tuple[int, ...]      # by rank: its group's CTA mask (itself included)
    part: tuple[int, ...]       # by rank: the slice it issues


@record
class ClusterLoads:
    """A pipeline's multicast plan: the loads shared between CTAs, and whose releases a stage awaits."""

    ctas: int
    groups: dict                # load op -> Group (loads read by one CTA only are absent)
    receivers: tuple[int, ...]  # by rank: the CTAs that receive what it issues (itself included)

    @property
    def releasing_ctas(self) -> int:
        """CTAs whose threads release each stage of a CTA (the same for every rank: groups are symmetric)."""
        return bin(self.receivers[0]).count("1")


def group(entry: Operation, load: Operation) -> Optional[Group]:
    """The CTAs that load the same tile as `load` in a cluster-split `entry`; None where each CTA
    loads its own (or the split left no labels on the load)."""
    shape = entry.attributes.get(CLUSTER_ATTR)
    dims = load.attributes.get(DIMS_ATTR)
    if shape is None or dims is None:
        return None
    c, fm, fn = shape
    split = {lbl for lbl, f in (("M", fm), ("N", fn)) if f > 1 and lbl in dims}

    def coords(r: int) -> tuple:
        return tuple(r % fm if lbl == "M" else r // fm for lbl in sorted(split))
    members = [[q for q in range(c) if coords(q) == coords(r)] for r in range(c)]
    if len(members[0]) == 1:
        return None
    return Group(len(members[0]), tuple(sum(1 << q for q in m) for m in members),
                 tuple(m.index(r) for r, m in enumerate(members)))


def plan(k: Any, loop: Operation, copies: dict, note: Callable[..., None]) -> tuple[Optional[ClusterLoads], dict]:
    """The multicast plan of a TMA pipeline (`copies`: load op -> TmaCopy, every load of the loop)
    and the copies to issue (shared loads cut in slices); (None, `copies`) where the cluster's CTAs
    keep loading their own tiles, with a remark saying why when some tile is shared (`note`: takes
    the remarks, pipeline_copies.CopyRemark's fields)."""
    from ..tileas import tma_boxes

    shape = k.entry.attributes.get(CLUSTER_ATTR)
    groups = {load: g for load in copies if (g := group(k.entry, load)) is not None}
    if shape is None or not groups:
        return None, copies
    why = _unsupported(k)
    sliced: dict = {}
    for load, g in groups.items():
        if why:
            break
        sliced[load], why = tma_boxes.sliced(copies[load], g.size)
    if why:
        refuse(k, loop, tuple(copies), why, note)
        return None, copies
    c = shape[0]
    receivers = tuple(1 << r | _union(g.masks[r] for g in groups.values()) for r in range(c))
    for load, g in groups.items():
        note("passed", "RemarkTmaMulticast", "Operand multicast to the CTAs of the cluster", load,
             CTAs=str(g.size), Slices=f"{g.size} slices of {'x'.join(map(str, sliced[load].box))} a box",
             Masks=", ".join(f"0x{m:x}" for m in g.masks))
    return ClusterLoads(c, groups, receivers), {**copies, **sliced}


def _unsupported(k: Any) -> str:
    if not k.caps.has("multicast"):
        return f"multicast loads are made for {', '.join(row.name for row in with_feature('multicast'))} only (not sm_{k.sm})"
    if k.warp_split is not None:   # its producer neither releases stages across the cluster nor meets the
        return "the kernel is warp-specialized"   # others at the cluster barriers
    return ""


def refuse(k: Any, loop: Operation, loads: tuple, why: str, note: Callable[..., None]) -> None:
    """The remark (to `note`) for a pipeline whose loads stay each CTA's own though some are shared
    (`why` not, or the target's own reason first)."""
    if any(group(k.entry, load) is not None for load in loads):
        note("missed", "RemarkTmaMulticastMissed", "Shared operand loaded by each CTA of the cluster", loop,
             Reason=_unsupported(k) or why)


def _union(masks) -> int:
    out = 0
    for m in masks:
        out |= m
    return out
