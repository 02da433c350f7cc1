"""The epilogue buffers of `plan-shared-memory`: how a store of an mma accumulator goes through shared memory.

A store of mma fragments (a view store, weak, or a store through pointers) goes through shared
memory as `epilogue_forms.epilogue` decides, here, for the lowering (`SharedPlan.epilogues`): by TMA where
the target has it ("tma-store": one swizzled buffer, or two in turn for column chunks), or restaged in
16-byte runs ("restage": the whole tile, or a chunk of rows at a time); or not at all (a store
through pointers in another layout than the fragments' then converts them through scratch,
"store-conversion"). The
decision reads the buffers placed before the store (whether the tile fits in the freed buffers,
or, in a persistent kernel's loop, beside what the loop keeps alive): the plan decides beside its
own placement of the requests before the store (`place`), the lowering beside the same buffers at
the same offsets (the plan's). A store after the kernel's
last tensor-core op releases every buffer first (`Request.releases`: their lifetimes end there),
as the lowering does.

sm_100's warp-specialized attention stores its O by TMA from the fragments where
`tmem_epilogue.store_fragments` finds the bytes ("tmem-epilogue", shared_tcgen05.py); only where
it does not does the store have an epilogue of its own. A store of mma fragments to a view that is not
a partition of a tensor view made in the kernel (`tileaa/views.view_of`) stores them as they are, here and
in the lowering alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ..ir.core import Operation, Value
from .buffers import SharedBuffers, lifetimes
from .shared_plan import Request, place

if TYPE_CHECKING:
    from .shared_stages import StagingFacts

DECIDED = ("restage", "tma-store")     # the buffers `epilogue_forms.epilogue` decides
ROLES = DECIDED + ("store-conversion",)
VIEW_STORE = "cuda_tile.store_view_tko"
PTR_STORE = "cuda_tile.store_ptr_tko"
STORES = (VIEW_STORE, PTR_STORE)


class EpilogueFacts:
    """What `epilogue_forms.epilogue` reads: the staging facts (the views' facts, the
    layouts, the warp split) and `buffers`, the requests placed before the store."""

    def __init__(self, facts: "StagingFacts", buffers: SharedBuffers) -> None:
        self.facts = facts
        self.buffers = buffers

    def __getattr__(self, name: str) -> Any:
        return getattr(self.facts, name)

    def lifetimes(self) -> Any:
        return lifetimes(self.facts.entry)


def requests(facts: "StagingFacts", op: Operation, asked: list[Request], decisions: dict) -> list[Request]:
    """The buffer the epilogue of store `op` asks for (none where it stores the fragments as they
    are), decided beside those of the requests `asked` that come before it, placed; the decision
    (`epilogue_forms.Epilogue`, None: none) recorded in `decisions`, which the lowering reads
    (`SharedPlan.epilogues`)."""
    from ..layout.encodings import MmaLayout

    value = _stored(op)
    layout = facts.layout_of(value)
    # a store through pointers in another layout than its values' converts them where it does not restage
    converts = op.name == PTR_STORE and layout != facts.layout_of(op.operand("destination"))  # type: ignore[arg-type]
    decisions[op] = None
    if not (converts or isinstance(layout, MmaLayout)):
        return []
    from . import epilogue_forms

    live = lifetimes(facts.entry)
    placed = place([r for r in asked if live.position(r.op) < live.position(op)], facts.entry)
    decided = decisions[op] = epilogue_forms.epilogue(EpilogueFacts(facts, placed), op, value.type, layout)  # type: ignore[arg-type]
    if decided is not None:
        return [decided.request(op, live.op_range(op))]
    if converts:     # KernelLowering.convert's scratch: every element at its row-major index
        from ..ir.types import storage_bytes

        ttype = value.type
        nbytes = ttype.num_elements * storage_bytes(ttype.element)  # type: ignore[attr-defined]
        return [Request(op, "store-conversion", "conversion", nbytes, 16, 0, live.op_range(op))]
    return []


def _stored(op: Operation) -> Value:
    value: Optional[Value] = op.operand("tile") if op.name == VIEW_STORE else op.operand("value")
    assert value is not None
    return value
