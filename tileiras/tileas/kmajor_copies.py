"""The K-major copies sm_90's wgmmas get from the loop around them, decided at nv_tileas: an operand
staged in a pipelined loop whose layout wgmma cannot read by descriptor (an N-major B of a type with
no transposed form, an f32 tile read as tf32 not rounded in its stage) is copied K-major into a
buffer the loop gives before its stages (`loop_copies`): in two slots where the loop's wgmma then
keeps its group in flight and the ring loses no stage (`two_slots`), in two K halves where whole
copies leave the ring no two stages (`_chunked_copy`). plan-shared-memory (shared_stages.py) decides
and sizes them, each loop's in `SharedPlan.kmajor`; the lowering (lowering/ops_wgmma.before_loop,
lowering/kmajor_copy.py) only places and fills them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..ir.core import Operation, Value
from ..ir.record import record
from ..layout.shared_matrix import SharedMatrix, k_and_x, kmajor_bytes, kmajor_shape, matrix_shape
from ..schedule.buffers import MBARRIER_BYTES, MIN_STAGES
from ..tileaa.mma_forms import WgmmaShape, reads_directly
from ..tileaa.mma_operands import passes_shared
from ..transforms.rewrite import inside_op
from .stage_rings import group_in_flight, tma_swizzles, uses_mbarriers
from .tma_boxes import read_as_tf32

if TYPE_CHECKING:
    from .shared_stages import StagingFacts


@record
class LoopCopy:
    """A K-major copy buffer a loop gives one wgmma operand before its stages (not yet placed)."""
    mma: Operation
    role: str              # "a" or "b"
    matrix: SharedMatrix   # one slot (half of K where the copy is made in two halves)
    slots: int             # 2 where the loop's wgmma keeps its group in flight over it (`two_slots`)

    @property
    def key(self) -> "tuple[Operation, str]":
        return self.mma, self.role

    def describe(self, name_of: Callable[[Value], str]) -> str:
        """A dump line: whose operand, the buffer (rows along M or N, columns along K), its slots or halves."""
        m = self.matrix
        kdim, _ = k_and_x(self.mma.operand("lhs" if self.role == "a" else "rhs").type.shape[-2:], self.role)  # type: ignore
        form = " in two slots" if self.slots > 1 else " in two K halves" if m.cols < kdim else ""
        return (f"{self.role.upper()} of {name_of(self.mma.results[0])} copied K-major into a {m.rows} x {m.cols} "
                f"swizzled buffer of {m.nbytes} B{form}")


def loop_copies(k: "StagingFacts", loop: Operation, used: int) -> "list[LoopCopy]":
    """The K-major copy buffers (not yet placed) the wgmmas inside `loop` are given before it, in
    the order asked: one for each staged load copied K-major in the loop that no outer loop gave one
    (`k.wgmma_buffers`); `used`: the shared memory taken before them. Two slots where the loop's
    wgmma may then keep its group in flight (`two_slots`). Decided by plan-shared-memory
    (shared_stages.py), which records them (`SharedPlan.kmajor`) for the lowering."""
    if k.assignment is None:
        return []
    copies: list = []   # (mma, role, tile shape, element bytes) of each K-major copy the loop makes
    for op, shape in k.assignment.wgmma_shapes.items():     # program order
        if not inside_op(op, loop):
            continue
        for role, name in (("a", "lhs"), ("b", "rhs")):
            value = op.operand(name)
            transposed = False
            while getattr(value.owner, "name", "") and passes_shared(value.owner):  # type: ignore[union-attr]
                transposed ^= value.owner.name == "cuda_tile.permute"  # type: ignore[union-attr]
                value = value.owner.operands[0]  # type: ignore[union-attr]
            if (op, role) in k.wgmma_buffers or getattr(value.owner, "name", "") != "cuda_tile.load_view_tko" \
                    or not k.assignment.is_shared_operand(value) or k.assignment.is_swizzled(value) \
                    or tma_rounded_stage(k, shape, loop, value.owner, role, transposed):  # type: ignore[arg-type]
                continue
            copies.append((op, role, op.operand(name).type.shape, shape.elem_bytes))  # type: ignore[union-attr]
    chunked = _chunked_copy(k, loop, copies, used)
    out = []
    for op, role, tile_shape, eb in copies:
        kdim, x_size = k_and_x(tile_shape[-2:], role)
        out.append(((op, role), kmajor_shape(x_size, kdim // 2 if (op, role) == chunked else kdim, eb, k.pad_buffers)))
    slots = 2 if out and chunked is None and two_slots(k, loop, [m for _, m in out], used) else 1
    return [LoopCopy(op, role, matrix, slots) for (op, role), matrix in out]


def two_slots(k: "StagingFacts", loop: Operation, copies: "list[SharedMatrix]", used: int) -> bool:
    """Whether `loop`'s K-major copies get two slots each: its wgmma would keep its group in flight
    (`group_in_flight`, on mbarrier-handed stages) and the second slots cost the ring no stage (on an
    H200, tf32 128x128x64 ran 1.29x NVIDIA's time with one slot and three stages, 1.71x with two
    slots and two stages; the 64x64 and 128x128x32 tf32 / int8 / fp8 loops, deep either way, gained
    6-20%)."""
    plan = k.pipelines.get(loop) if k.pipelines else None
    if plan is None or not plan.pipelined or not uses_mbarriers(k) or group_in_flight(k, loop, plan.loads) is None:
        return False
    stage = _stage_bytes(k, plan) + 2 * MBARRIER_BYTES      # a stage and its full / empty barriers

    def depth(copied: int) -> int:
        return min(k.caps.max_stages, (k.caps.smem_per_block - used - copied) // stage)

    one = sum(m.nbytes for m in copies)
    two = sum(kmajor_bytes(m, 2) for m in copies)
    return depth(one) >= MIN_STAGES and depth(two) >= depth(one)


def _stage_bytes(k: "StagingFacts", plan: object) -> int:
    """Bytes of one stage of a pipelined loop's loads."""
    return sum(matrix_shape(ld.results[0].type, k.pad_buffers, k.assignment.is_swizzled(ld.results[0])  # type: ignore
                            or (uses_mbarriers(k) and tma_swizzles(k, ld))).nbytes
               for ld in plan.loads)  # type: ignore[attr-defined]


def _chunked_copy(k: "StagingFacts", loop: Operation, copies: list, used: int) -> "tuple[Operation, str] | None":
    """The (mma, "b") whose K-major copy is made in two K halves through a buffer half its size,
    where that lets `loop`'s pipeline have the two stages the whole copies leave no room for beside
    the `used` bytes taken before them (tf32 128x256 on sm_90: two 96 KB stages beside a 64 KB
    copy of B do not fit, beside 32 KB they do); None where the copies are made whole."""
    plan = k.pipelines.get(loop) if k.pipelines else None
    if plan is None or not plan.pipelined or k.assignment is None:
        return None
    need = used + 2 * _stage_bytes(k, plan) + 4 * MBARRIER_BYTES
    sizes = {(op, role): kmajor_shape(*reversed(k_and_x(shp[-2:], role)), eb, k.pad_buffers).nbytes
             for op, role, shp, eb in copies}
    if need + sum(sizes.values()) <= k.caps.smem_per_block:
        return None
    for op, role, shp, eb in copies:
        kdim, _ = k_and_x(shp[-2:], role)
        half = sizes[(op, role)] // 2
        if role == "b" and kdim % 64 == 0 and (kdim // 2 * eb) % 128 == 0 \
                and need + sum(sizes.values()) - half <= k.caps.smem_per_block:
            return op, role
    return None


def tma_rounded_stage(k: "StagingFacts", shape: WgmmaShape, loop: Operation, load: Operation, role: str,
                      transposed: bool) -> bool:
    """Whether `load`, an f32 tile read as tf32 that `loop`'s pipeline will copy by TMA into swizzled
    stages, is stored K-major as wgmma reads it: rounded in its stage (lowering/ops_wgmma._rounds_in_place), no buffer.
    (If the loop ends up not pipelined, its copy takes a buffer where it is made.)"""
    plan = k.pipelines.get(loop) if k.pipelines else None
    if not k.caps.has("wgmma") or not uses_mbarriers(k) or plan is None or not plan.pipelined or load not in plan.loads \
            or not read_as_tf32(load.results[0]):
        return False
    tile = load.results[0].type
    rows, cols = tile.shape[-2:]  # type: ignore[attr-defined]
    return reads_directly(shape, role, transposed, rows, cols) and tma_swizzles(k, load)
