"""TMA tile loads of a pipelined loop (sm_90, sm_100 / sm_103, sm_120 / sm_121) and epilogue stores: `cp.async.bulk.tensor`
through hidden tensor maps, as tileas/tma_boxes.plan cut them into boxes (where it cannot, the
pipeline keeps its cp.async copies and a remark says why).

Each (tensor view, box) becomes one hidden kernel parameter after the user's
(`ptr byval([128 x i8]) align 64` with `nvvm.grid_constant`, so its address is the parameter's
own, never a local copy; codegen/tma_ptx.py marks it `.hidden`). One elected thread per stage
announces the stage's bytes (`mbarrier.arrive.expect_tx`, the full barrier's only arrival) and
issues the boxes; the hardware completes the transaction on the same barrier.

A tile loaded once before a loop that reads it every iteration (attention's queries: a
loop-invariant operand) is a *one-shot* load (`load_once`): its own mbarrier, initialized by the
thread that then announces the bytes and issues the boxes; readers wait for phase 0
(`wait_once`: a pipelined loop's prologue, after its own copies are under way, else the first
reader), and the barrier is invalidated (`invalidate`) after a CTA barrier before its bytes can
serve another buffer (the loop's end, or the epilogue that reuses the buffers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..codegen.tma_params import TmaParam
from ..ir.core import Operation
from ..ir.record import record, replace
from ..layout.shared_matrix import SharedMatrix
from ..tileas.tma_boxes import TmaCopy
from . import mbarrier
from .kernel import KernelLowering
from .mbarrier import BarrierArray
from .smem import pointer
from .values import SharedTileVal

if TYPE_CHECKING:
    from .cta_pair import CtaPair


def hidden_param(k: KernelLowering, spec: TmaParam, load: Optional[Operation] = None) -> int:
    """The slot of the kernel's tensor map for `spec` (one per distinct view and box): among its hidden
    parameters, or for a map the kernel makes itself (`spec.built`, of `load`'s view) among those
    (kernel_maps.py)."""
    if spec.built:
        from .kernel_maps import slot

        assert load is not None, "a map the kernel makes is made for a load's view"
        return slot(k, load, spec)
    if spec not in k.tma_params:
        k.tma_params.append(spec)
    return k.tma_params.index(spec)


def param_name(slot: int) -> str:
    return f"%tmap{slot}"


def map_operand(k: KernelLowering, t: TmaCopy) -> str:
    """The copy's tensor map as an inline-asm operand: its hidden parameter, or the address of the map
    the kernel made (kernel_maps.py)."""
    if t.spec.built:
        from .kernel_maps import operand

        return operand(k, t)
    return f"ptr {param_name(t.slot)}"


def signature(k: KernelLowering) -> list[str]:
    """The hidden parameters, after the user's, as the kernel's LLVM signature lists them."""
    return [f'ptr byval([128 x i8]) align 64 "nvvm.grid_constant" {param_name(i)}' for i in range(len(k.tma_params))]


def prefetch(k: KernelLowering, loads: dict) -> None:
    """Fetch the descriptors the copies will use into the TMA unit's cache (one thread), those the
    kernel makes itself written first (kernel_maps.build)."""
    from .kernel_maps import build

    build(k, loads)
    for t in {(t.spec.built, t.slot): t for t in loads.values()}.values():
        k.b.emit(f'call void asm sideeffect "prefetch.tensormap [$0];", "l,~{{memory}}"({map_operand(k, t)})')


def issue(k: KernelLowering, loads: dict, matrices: dict, stage: dict, full: str,
          casts: Optional[dict] = None, pair: "Optional[CtaPair]" = None) -> None:
    """One thread's copies of an iteration (its indices lowered at its induction variable:
    pipelined_loop.at_iteration) into its stage (`stage`: load ->
    i32 bytes past `matrices[load]`, "" for none): the stage's bytes announced on its `full`
    barrier, then every box of every load (of a sliced load, `casts[load]` = (i32 slice, i16 CTA
    mask): this CTA's slice, multicast to the CTAs of the mask). `pair` (a tileas/cta_pairs.CtaPair): the
    pair's A and B complete on the leader's `full`, whose announcement counts both CTAs' bytes of
    them; the other loads (block scales, which each CTA's own threads restage) on the CTA's own."""
    from . import cta_pair

    paired = {load for load in loads if pair is not None and load in (pair.a_load, pair.b_load)}
    own = sum(t.nbytes for load, t in loads.items() if load not in paired)
    lead = full
    if paired:
        both = own + 2 * sum(loads[load].nbytes for load in paired)
        mbarrier.arrive_expect_tx(k, full, k.b.op(f"select i1 {cta_pair.is_leader(k)}, i32 {both}, i32 {own}", "tc"))
        lead = cta_pair.leader_barrier(k, full)
    else:
        mbarrier.arrive_expect_tx(k, full, own)
    for load, t in loads.items():
        load_boxes(k, load, t, matrices[load].offset, lead if load in paired else full, stage[load],
                   (casts or {}).get(load), load in paired)


def load_boxes(k: KernelLowering, op: Operation, t: TmaCopy, offset: int, full: str, stage: str = "",
               cast: Optional[tuple[str, str]] = None, pair: bool = False) -> None:
    """Every box of the tile `op` loads, into shared bytes `offset` (+ i32 `stage` unless ""),
    completing on the barrier at `full`; with `cast` (i32 slice, i16 CTA mask) this CTA's slice of
    each box, into the same offset of every CTA of the mask (and onto each one's barrier there);
    `pair`: the `.cta_group::2` form, `full` (shared::cluster) in the pair's leader."""
    for at, coords in _boxes(k, op, t, offset):
        at_coord, size = t.pair_part
        if size:     # the peer's half of B
            from .cta_pair import pair_rank

            shift = k.b.op(f"mul i32 {pair_rank(k)}, {size}", "tc")
            coords = [*coords[:at_coord], k.b.op(f"add i32 {coords[at_coord]}, {shift}", "tc"), *coords[at_coord + 1:]]
        if cast is not None:
            part = cast[0]
            shift = part if part == "0" else k.b.op(f"mul i32 {part}, {t.slice_bytes}", "tc")
            at = k.b.op(f"add i32 {shift}, {at}", "tc")   # type: ignore[assignment]
            first = part if part == "0" else k.b.op(f"mul i32 {part}, {t.box[1]}", "tc")
            coords = [coords[0], k.b.op(f"add i32 {coords[1]}, {first}", "tc"), *coords[2:]]
        place = k.b.op(f"add i32 {stage}, {at}", "tc") if stage else str(at)
        dst = k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, place)} to i32", "tc")
        n = len(coords)
        if pair:
            _asm(k, f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                    f".cta_group::2 [$0], [$1, {{{_places(2, n)}}}], [${n + 2}];", "r,l," + "r," * n + "r",
                 f"i32 {dst}, {map_operand(k, t)}, {_i32s(coords)}, i32 {full}")
        elif cast is None:
            _asm(k, f"cp.async.bulk.tensor.{n}d.shared::cta.global.tile.mbarrier::complete_tx::bytes "
                    f"[$0], [$1, {{{_places(2, n)}}}], [${n + 2}];", "r,l," + "r," * n + "r",
                 f"i32 {dst}, {map_operand(k, t)}, {_i32s(coords)}, i32 {full}")
        else:
            _asm(k, f"cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                    f".multicast::cluster [$0], [$1, {{{_places(2, n)}}}], [${n + 2}], ${n + 3};",
                 "r,l," + "r," * n + "r,h",
                 f"i32 {dst}, {map_operand(k, t)}, {_i32s(coords)}, i32 {full}, i16 {cast[1]}")


@record(frozen=False)
class OneShot:
    """A tile copied by TMA once, completing the single phase of its own mbarrier."""

    copy: TmaCopy
    barrier: BarrierArray       # one mbarrier, expecting one arrival (with the tile's bytes)
    valid: bool = True          # initialized and not yet invalidated


def load_once(k: KernelLowering, op: Operation, matrix: SharedMatrix, planned: TmaCopy) -> OneShot:
    """Copy the tile of load `op` into `matrix` (swizzled, placed) by TMA, once, as plan-shared-memory
    planned the copy (tileas/pipeline_copies.once): thread 0 initializes the tile's own mbarrier,
    announces the bytes and issues the boxes. Readers `wait_once` (every thread that reads, parity 0);
    after the last, once a CTA barrier has passed, `invalidate`."""
    t = replace(planned, slot=hidden_param(k, planned.spec))
    shot = OneShot(t, mbarrier.allocate(k, 1))
    k.barrier()   # readers of the buffer's earlier contents are done
    mbarrier.init(k, [(shot.barrier, [1])])   # (thread 0's: its own arrival below needs no publishing)
    full = mbarrier.address(k, shot.barrier, "0")

    def copy() -> None:
        mbarrier.arrive_expect_tx(k, full, t.nbytes)
        load_boxes(k, op, t, matrix.offset, full)
    k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "tc"), copy)
    return shot


def wait_once(k: KernelLowering, shots: list[OneShot]) -> None:
    """This thread waits until the one-shot loads `shots` have landed (their barriers' phase 0; the
    barrier's initialization must have been published to it by a CTA barrier since)."""
    for shot in shots:
        mbarrier.wait(k, mbarrier.address(k, shot.barrier, "0"), "0", "one-shot TMA load")


def invalidate(k: KernelLowering, shots: list[OneShot]) -> None:
    """Thread 0 invalidates the barriers of `shots` still valid (after a CTA barrier past every
    wait): their bytes may serve other buffers, and a load run again initializes afresh."""
    live = [s for s in shots if s.valid]
    if live:
        mbarrier.inval(k, [s.barrier for s in live])
    for s in live:
        s.valid = False


def one_shots(k: KernelLowering, pending_only: bool = False) -> list[OneShot]:
    """The kernel's one-shot loads so far whose barriers are valid (`pending_only`: whose tile has
    not been waited for yet), each once."""
    out: list[OneShot] = []
    for value in list(k.values.values()):
        shot = value.arrival if isinstance(value, SharedTileVal) else None
        if shot is not None and shot.valid and (value.pending or not pending_only) \
                and not any(s is shot for s in out):
            out.append(shot)
    return out


def store(k: KernelLowering, op: Operation, t: TmaCopy, matrix: SharedMatrix, first_col: int = 0,
          wait: bool = True, written: bool = False) -> None:
    """One thread's TMA store of the tile in `matrix` (swizzled, its generic writes fenced for the
    async proxy and published) to the view of store op `op`, box by box (the unit clips what lies
    outside the tensor), one bulk group; `matrix` may hold the tile's columns from `first_col` on
    only (a chunk, epilogue.tma_store). With `wait` the thread then waits until the boxes have been
    read out of shared memory, which must outlive the reads (else the caller does, `stores_read`);
    with `written` until they have been written to global memory (a read may follow)."""
    for at, coords in _boxes(k, op, t, matrix.offset, first_col):
        src = k.b.op(f"ptrtoint ptr addrspace(3) {pointer(k, str(at))} to i32", "tc")
        n = len(coords)
        _asm(k, f"cp.async.bulk.tensor.{n}d.global.shared::cta.tile.bulk_group [$0, {{{_places(1, n)}}}], "
                f"[${n + 1}];", "l," + "r," * n + "r", f"{map_operand(k, t)}, {_i32s(coords)}, i32 {src}")
    _asm(k, "cp.async.bulk.commit_group;", "", "")
    if written:
        _asm(k, "cp.async.bulk.wait_group 0;", "", "")
    elif wait:
        stores_read(k)


def stores_read(k: KernelLowering) -> None:
    """This thread's TMA stores so far have read their shared bytes (they may be written again)."""
    _asm(k, "cp.async.bulk.wait_group.read 0;", "", "")


def _boxes(k: KernelLowering, op: Operation, t: TmaCopy, offset: int,
           first_col: int = 0) -> list[tuple[int, list[str]]]:
    """(shared byte offset, i32 coordinates innermost first) of each box of the tile `op` copies
    (its columns from `first_col` on)."""
    from .ops_memory import view_index

    view = k.get(op.operand("view"))
    starts, _ = view_index(k, op, view)
    shape = view.tile_shape
    coords = [k.b.op(f"trunc i64 {k.b.op(f'mul i64 {starts[i]}, {shape[i]}', 'tc')} to i32", "tc") for i in t.order]

    def at(c: str, step: int) -> str:
        return c if step == 0 else k.b.op(f"add i32 {c}, {step}", "tc")
    return [(offset + a * t.atom_bytes + j * t.band_bytes,
             [at(coords[0], first_col + a * t.per_atom), *([at(coords[1], j * t.box[1])] if t.bands > 1 else coords[1:2]),
              *coords[2:]])
            for a in range(t.atoms) for j in range(t.bands)]


def _places(first: int, n: int) -> str:
    return ", ".join(f"${first + i}" for i in range(n))


def _i32s(values: list[str]) -> str:
    return ", ".join(f"i32 {v}" for v in values)


def _asm(k: KernelLowering, text: str, constraints: str, args: str) -> None:
    clobbers = f"{constraints},~{{memory}}" if constraints else "~{memory}"
    k.b.emit(f'call void asm sideeffect "{text}", "{clobbers}"({args})')
