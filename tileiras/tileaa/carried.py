"""Which reductions the loops of a looped group carry (tileaa/tile_loops.py): policies, tried in turn.

A reduction whose result fits a chunk can be carried: the loop accumulates the reduce of each chunk,
so the chunk keeps whole the axes the reduction keeps. Otherwise it is computed chunk by chunk, its
reduced axis whole in the chunk (or, longer than a chunk, in the runs of the nested form). Carrying
thus shapes the chunk, and two carried reductions along two axes would need both whole: a tile less
its rows' means, less its columns' then. `loop_tiles` grows a block's groups under each policy of
`POLICIES` in turn, the tiles one leaves whole grown again under the next (skipped where it carries
the same reductions of the block as one before: `policies`):

* `fitting`: every reduction whose result fits a chunk, but one that would leave the chunk short runs
  of the rows it reduces (`short_runs`);
* `kept`: of those, only the ones along another axis than their operand's innermost (a (64, 4096)
  tile centred both ways on 8 warps: its column sums carried, its row sums computed in chunks of
  whole rows);
* `none`: none (the nested forms; a reduction read across another computed in each chunk that reads
  it, `cross_reductions.py`).
"""

from __future__ import annotations

from ..ir.core import Operation
from .nested_loops import RUN

POLICIES = ("fitting", "kept", "none")


def policies(reduces: list[Operation], chunk: int) -> list[str]:
    """The policies of `POLICIES` that carry other reductions of `reduces` (a block's) than the one
    before: the others would grow the same groups again."""
    out: list[str] = []
    seen: set[tuple[bool, ...]] = set()
    for policy in POLICIES:
        which = tuple(carried(op, chunk, policy) for op in reduces)
        if which not in seen:
            seen.add(which)
            out.append(policy)
    return out


def carried(op: Operation, chunk: int, policy: str) -> bool:
    """Whether `op` is a reduction into a value the loops carry, in chunks of `chunk` elements under
    `policy`."""
    if op.name != "cuda_tile.reduce" or policy == "none":
        return False
    result = op.results[0].type.num_elements  # type: ignore[union-attr]
    if result > chunk or short_runs(op, chunk // result):
        return False
    return policy == "fitting" or not (result > 1 and _along_rows(op))


def short_runs(op: Operation, run: int) -> bool:
    """Whether reduce `op`, carried, would read its rows in runs shorter than `RUN` (or than the row):
    it reduces its operand's innermost axis and has several results, which the chunk keeps whole, so
    a chunk holds `run` elements of each row. A (256, 256) tile's row sums on one warp: runs of 2, 8
    bytes of each row a load, a sector of 32 bytes fetched for each. Computed chunk by chunk instead,
    rows whole in each chunk (or in runs of the nested form), they are read in lines, as the tile's
    other reductions read theirs."""
    several = op.results[0].type.num_elements > 1  # type: ignore[union-attr]
    shape = op.operands[0].type.shape  # type: ignore[union-attr]
    return several and _along_rows(op) and run < min(RUN, shape[int(op.attributes["dim"])])


def _along_rows(op: Operation) -> bool:
    """Whether reduce `op` runs along its operand's innermost axis longer than one."""
    shape = op.operands[0].type.shape  # type: ignore[union-attr]
    long = [i for i, n in enumerate(shape) if n != 1]
    return long[-1:] == [int(op.attributes["dim"])]
