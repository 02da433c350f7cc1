"""Token ordering: which token-ordered ops must wait for the whole CTA before they run.

A tile's elements live in different threads, so when a token orders op B
after op A, a thread running B may need memory that another thread touched in
A; a CTA barrier makes A's accesses visible first. This pass follows the
tokens (through `join_tokens`, and `for`/`loop`/`if` results and block
arguments, to a fixed point) and gives every token-ordered memory op the set
of earlier accesses it is ordered after and that no barrier has fenced yet.
It then decides, per op, from the alias facts (alias.py):

* no wait: every earlier access is a read and so is this one; or the memory
  is disjoint; or the same elements are touched by the same thread in both
  ops (`thread_local`, decided from the layouts by the caller);
* a barrier only if a runtime test fails (`unless`): ("injective", view)
  for tiles of one partition at constant, distinct indices (some tensor view
  may map two coordinates to one address), ("separate", view, view) for views
  of two tensor views that may share memory (their address ranges may meet);
* a barrier otherwise. Acquire ops order everything after them, release ops
  everything before them, and fences and grid-dependency ops everything
  after them, for all threads: those always get a barrier.

After a barrier the op's token carries only the op itself: everything before
it in program order is fenced. An access that reaches an op around a loop's
back edge remembers the loop: values defined inside it then name a different
instance, so they prove neither "same elements" nor anything a runtime test
could read.
"""

from __future__ import annotations

from typing import Callable, Optional

from ..ir.core import Block, BlockArgument, Operation, Value
from ..ir.types import TokenType
from .alias import DISJOINT, DISJOINT_IF_INJECTIVE, DISJOINT_IF_SEPARATE, SAME, Access, relation

_READS = frozenset({"cuda_tile.load_view_tko", "cuda_tile.load_ptr_tko"})
_WRITES = frozenset({"cuda_tile.store_view_tko", "cuda_tile.store_ptr_tko"})
_ATOMICS = frozenset({"cuda_tile.atomic_rmw_tko", "cuda_tile.atomic_cas_tko", "cuda_tile.atomic_red_view_tko"})
_ACCESSES = _READS | _WRITES | _ATOMICS
# ops that order every later access of every thread after them
_SYNC = frozenset({"cuda_tile.memory_fence_alias_tko", "cuda_tile.gdc_wait_tko", "cuda_tile.gdc_launch_dependents_tko"})

ThreadLocal = Callable[[Operation, Operation], bool]
# (access, loops whose back edge it crossed): what a token is ordered after and no barrier fenced yet
Effects = frozenset
Test = tuple  # ("injective", tensor view) or ("separate", tensor view, tensor view)


class Wait:
    """What one access waits for: `barrier`, or a barrier unless every runtime test in `unless`
    passes; `after` lists the earlier ops that made it wait (for dumps)."""

    __slots__ = ("barrier", "unless", "after")

    def __init__(self, barrier: bool, unless: tuple[Test, ...], after: tuple[Operation, ...]) -> None:
        self.barrier = barrier
        self.unless = unless
        self.after = after


def _around(effects: Effects, loop: Operation) -> Effects:
    """`effects` carried around `loop`'s back edge."""
    return Effects((op, crossed | {loop}) for op, crossed in effects)


def _block_of(value: Value) -> Block:
    return value.owner if isinstance(value, BlockArgument) else value.owner.parent


def _enclosing(block: "Block | None"):
    """`block`, then the blocks around it, outwards."""
    while block is not None:
        yield block
        region = block.parent
        op = region.parent if region is not None else None
        block = op.parent if op is not None else None


def _inside(value: Value, loop: Operation) -> bool:
    """True when `value` is defined in `loop`'s body (a new instance each iteration)."""
    return any(b.parent is not None and b.parent.parent is loop for b in _enclosing(_block_of(value)))


def _dominates(value: Value, op: Operation) -> bool:
    """True when `value` is defined in a block around `op` (in structured code it then comes first,
    since an earlier access used it)."""
    return _block_of(value) in set(_enclosing(op.parent))


def _advances(value: Value, crossed: frozenset) -> bool:
    """True when `value` is the induction variable of a `for` loop in `crossed` with a positive
    constant step and no other crossed loop around it: within one run of that loop, every
    iteration holds a different value."""
    if not isinstance(value, BlockArgument) or value.index != 0 or value.owner.parent is None:
        return False
    loop = value.owner.parent.parent
    if loop is None or loop.name != "cuda_tile.for" or loop not in crossed:
        return False
    step = loop.operand("step")
    owner = getattr(step, "owner", None)
    if not isinstance(owner, Operation) or owner.name != "cuda_tile.constant":
        return False
    raw = bytes(owner.attributes["value"].raw)
    if int.from_bytes(raw, "little", signed=True) <= 0:
        return False
    return not any(other is not loop and any(b.parent is not None and b.parent.parent is other
                                             for b in _enclosing(loop.parent)) for other in crossed)


def _ordering(op: Operation) -> str:
    return str(op.attributes.get("memory_ordering_semantics", "weak"))


class _Region:
    """Token sets reaching the ends of one region: `next` (continue) and `exit` (yield, break)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.next: list[list[Effects]] = []
        self.exit: list[list[Effects]] = []


class TokenOrder:
    """The waits of one kernel's token-ordered accesses."""

    def __init__(self, entry: Operation, thread_local: Optional[ThreadLocal] = None) -> None:
        self._thread_local = thread_local or (lambda a, b: False)
        self._sets: dict[Value, Effects] = {}
        self._accesses: dict[Operation, Access] = {}
        self._regions: list[_Region] = []
        self._position: dict[Operation, int] = {}  # program order, for stable dumps
        self.waits: dict[Operation, Wait] = {}
        self._block(entry.regions[0].block)

    def wait(self, op: Operation) -> Optional[Wait]:
        """What `op` waits for; None when nothing."""
        return self.waits.get(op)

    # -- the flow ----------------------------------------------------------------------
    def _set(self, value: Value) -> Effects:
        return self._sets.get(value, Effects())

    def _block(self, block: Block) -> None:
        for op in block.operations:
            self._op(op)

    def _op(self, op: Operation) -> None:
        self._position.setdefault(op, len(self._position))
        if op.name in ("cuda_tile.for", "cuda_tile.loop"):
            return self._loop(op)
        if op.name == "cuda_tile.if":
            return self._if(op)
        incoming = Effects().union(*(self._set(v) for v in op.operands if isinstance(v.type, TokenType)))
        if op.name in ("cuda_tile.continue", "cuda_tile.break", "cuda_tile.yield"):
            return self._terminator(op)
        if op.name in _ACCESSES:
            wait = self._decide(op, incoming)
            if wait is None:
                self.waits.pop(op, None)
            else:
                self.waits[op] = wait
            outgoing = Effects({(op, frozenset())}) if wait is not None and wait.barrier \
                else incoming | {(op, frozenset())}
        elif op.name in _SYNC:
            outgoing = incoming | {(op, frozenset())}
        else:
            outgoing = incoming  # join_tokens, make_token, print: no memory of their own
        for result in op.results:
            if isinstance(result.type, TokenType):
                self._sets[result] = outgoing

    def _terminator(self, op: Operation) -> None:
        kinds = {"cuda_tile.continue": ("for", "loop"), "cuda_tile.break": ("loop",), "cuda_tile.yield": ("if",)}[op.name]
        region = next((r for r in reversed(self._regions) if r.kind in kinds), None)
        if region is None:
            return  # a reduce/scan body's yield: no tokens
        edges = region.next if op.name == "cuda_tile.continue" else region.exit
        edges.append([self._set(v) for v in op.operands])

    def _run_region(self, block: Block, kind: str) -> _Region:
        region = _Region(kind)
        self._regions.append(region)
        self._block(block)
        self._regions.pop()
        return region

    def _loop(self, op: Operation) -> None:
        kind = "for" if op.name == "cuda_tile.for" else "loop"
        body = op.regions[0].block
        carried = body.arguments[1:] if kind == "for" else body.arguments
        state = [self._set(v) for v in op.operand_group("initValues")]
        while True:  # the sets only grow, so this ends
            for arg, effects in zip(carried, state):
                self._sets[arg] = effects
            region = self._run_region(body, kind)
            grown = [s.union(*(_around(edge[i], op) for edge in region.next if i < len(edge)))
                     for i, s in enumerate(state)]
            if grown == state:
                break
            state = grown
        exits = [state] if kind == "for" else region.exit
        for i, result in enumerate(op.results):
            self._sets[result] = Effects().union(*(edge[i] for edge in exits if i < len(edge)))

    def _if(self, op: Operation) -> None:
        exits: list[list[Effects]] = []
        for r in op.regions:
            if r.blocks:
                exits += self._run_region(r.block, "if").exit
        for i, result in enumerate(op.results):
            self._sets[result] = Effects().union(*(edge[i] for edge in exits if i < len(edge)))

    # -- the decision ------------------------------------------------------------------------
    def _access(self, op: Operation) -> Access:
        if op not in self._accesses:
            self._accesses[op] = Access(op)
        return self._accesses[op]

    def _decide(self, op: Operation, earlier: Effects) -> Optional[Wait]:
        barrier, tests, after = False, [], []
        for prior, crossed in sorted(earlier, key=lambda e: (self._position[e[0]], len(e[1]))):
            hazard = self._hazard(prior, crossed, op)
            if hazard is None:
                continue
            if prior not in after:
                after.append(prior)
            if hazard is True:
                barrier = True
            elif not any(t[0] == hazard[0] and all(a is b for a, b in zip(t[1:], hazard[1:])) for t in tests):
                tests.append(hazard)
        if not after:
            return None
        return Wait(barrier, () if barrier else tuple(tests), tuple(after))

    def _hazard(self, prior: Operation, crossed: frozenset, op: Operation) -> "bool | Test | None":
        """None: `op` need not wait for `prior` (reached around the back edges of the loops
        `crossed`); True: a barrier; a Test: a barrier unless it passes."""
        if prior.name in _SYNC or _ordering(prior) in ("acquire", "acq_rel") \
                or _ordering(op) in ("release", "acq_rel"):
            return True
        if prior.name in _READS and op.name in _READS:
            return None
        def varies(value: Value) -> bool:
            return any(_inside(value, loop) for loop in crossed)

        def advances(value: Value) -> bool:
            return _advances(value, crossed)

        kind = relation(self._access(prior), self._access(op), varies, advances)
        if kind == DISJOINT:
            return None
        views = (self._access(op).tensor_view,) if kind == DISJOINT_IF_INJECTIVE else \
            (self._access(prior).tensor_view, self._access(op).tensor_view)
        if kind in (DISJOINT_IF_INJECTIVE, DISJOINT_IF_SEPARATE) \
                and all(not varies(v) and _dominates(v, op) for v in views):
            return ("injective" if kind == DISJOINT_IF_INJECTIVE else "separate", *views)
        if kind == SAME and prior.name not in _ATOMICS and op.name not in _ATOMICS \
                and self._thread_local(prior, op):
            return None  # atomics are excluded: two elements may update one address
        return True

    # -- for --print-ir-after-all ---------------------------------------------------------------
    def describe(self, name_of: Callable[[Value], str]) -> list[str]:
        def name(op: Operation) -> str:
            token = next((r for r in op.results if isinstance(r.type, TokenType)), None)
            return f"{op.short_name} {name_of(token)}" if token is not None else op.short_name

        lines = []
        for op, wait in sorted(self.waits.items(), key=lambda item: self._position[item[0]]):
            what = "barrier" if wait.barrier else "barrier unless " + " and ".join(
                f"{test[0]} {', '.join(name_of(v) for v in test[1:])}" for test in wait.unless)
            lines.append(f"//   {name(op)}: {what} (after {', '.join(name(p) for p in wait.after)})")
        return lines or ["//   no waits"]
