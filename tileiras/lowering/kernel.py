"""Lowering of one `cuda_tile.entry` to one LLVM kernel function.

`KernelLowering` walks the entry's body in order and dispatches each op to
the lowering registered for its name in `registry.LOWERINGS`. It owns the
per-kernel state the op lowerings share: the value map, the thread index,
the element-index arithmetic of the layout, shared-memory scratch and
barriers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import remarks as _remarks
from ..errors import CompileError
from ..target import caps
from ..ir.core import Block, Operation, Value
from ..ir.types import DYNAMIC, TileType, Type, storage_bytes
from ..tileas.buffers import Liveness, SharedBuffers, lifetimes
from ..tileas.shared_plan import UNPLANNED_ALIGN, PlanReader, shared_plan_of
from ..layout.encodings import BlockedLayout, Layout, row_major_strides
from ..layout.index_math import element
from .llvm_text import FunctionBuilder, llvm_type
from .values import LoopContext, TileRegs

if TYPE_CHECKING:
    from ..tileas.scratch_swizzle import ScratchSwizzle
    from ..transforms.token_order import TokenOrder
    from ..tileas.assign_layouts import LayoutAssignment


def op_error(op: Operation, message: str) -> CompileError:
    from ..ir.diagnostic_location import location_prefix

    loc = location_prefix(getattr(op, "location", None))
    return CompileError(f"{loc}error: '{op.name}' op {message}")


class KernelLowering:
    def __init__(self, entry: Operation, gpu: str, threads: int, debug: Any = None,
                 assignment: Optional["LayoutAssignment"] = None, order: Optional["TokenOrder"] = None) -> None:
        self.entry = entry
        self.gpu = gpu
        self.caps = caps(gpu)               # what the target has (tileiras/target/table.py)
        self.sm = self.caps.sm
        self.layout = assignment.blocked if assignment is not None else BlockedLayout(threads)  # the default
        self.assignment = assignment
        self.order = order                  # which token-ordered ops wait for the CTA
        self.threads = threads
        self.b = FunctionBuilder()
        self.values: dict[Value, Any] = {}
        self.buffer_bytes = 0               # shared memory of the buffers placed so far (tileas/buffers.py)
        self.buffers = SharedBuffers()      # every shared buffer: size, alignment, lifetime, offset
        self.liveness: Optional[Liveness] = None   # op positions, computed at the first buffer
        self.current_op: Optional[Operation] = None   # the op being lowered (lower_block)
        self._op_scratch: dict[int, Any] = {}   # op -> its scratch buffer (one per op, reused within it)
        # where each buffer this lowering asks for goes: the shared-memory plan's offset (tileas/shared_plan.py)
        self.planned = PlanReader(shared_plan_of(assignment) if assignment is not None else None,
                                  f"kernel '{entry.attributes.get('sym_name', '')}' for {gpu}")
        self.static_smem_bytes = 0          # allocas
        self.pad_buffers = True             # smem.py: pad staged rows against bank conflicts
        self.pipelines: dict = {}           # loop -> schedule.pipeline.PipelinePlan
        self.active_pipelines: dict = {}    # loop being lowered -> pipelined_loop.ActivePipeline
        self.hoisted: dict = {}             # loop -> its pipeline, set up before the persistent loop running it
        self.tmem: Any = None               # tmem.TensorMemory once a tcgen05 mma allocates it
        self.cta_pair: Any = None           # tileas/cta_pairs.CtaPair where a CTA pair runs the pipelined loop's mma
        self.tmem_buffers: dict = {}        # tcgen05 mma -> its restaging buffers (ops_tcgen05.py)
        self.wgmma_buffers: dict = {}       # (wgmma mma, "a"/"b") -> its K-major copy (ops_wgmma.py)
        self.extra_threads = 0              # warp_specialize.py: a producer warpgroup beyond `threads`
        self.barrier_threads = 0            # after its split: CTA barriers are the consumers' named barrier
        self.barrier_id = 0                 # its id (schedule/named_barriers.py)
        self.warp_split: Any = None         # tileas.warp_roles.WarpSplit of the loop it specializes
        self.warp_split_refused = ""        # why no loop of this kernel is warp-specialized
        self.tma_params: list = []          # tma_copy.py: the hidden tensor maps (codegen.tma_params.TmaParam)
        self.kernel_maps: list = []         # kernel_maps.py: the maps it makes itself, (tensor view op, TmaParam)
        self.kernel_maps_at_view: set = set()   # those made where their view is (kernel_maps.at_view)
        self.row_loads: dict = {}           # row_tma.py: load -> its tile's buffer and one-shot TMA copy
        self.lowered_ahead: set = set()     # ops an earlier op lowered already (tmem_epilogue.py): skipped
        self.schedule_notes: list[str] = []  # what the schedule chose, for --print-ir-after-all
        self.globals: list[str] = []        # module-level definitions this kernel needs
        self.loops: list[LoopContext] = []
        self._index_cache: dict[tuple[Any, ...], str] = {}
        self.debug = debug                  # DebugInfo when line info is on
        self.subprogram: Optional[int] = None
        self.sub_file = ""
        self.tid = self.b.pre("call i32 @llvm.nvvm.read.ptx.sreg.tid.x()", "tid")
        self.b.declare("declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()")

    # -- optimization remarks ---------------------------------------------------------
    def remark(self, kind: str, category: str, name: str, message: str, op: Optional[Operation],
               **args: object) -> None:
        """Report a decision (kind passed|missed|failed|analysis, category memory|tensorcore) at `op`'s
        location; `args` are further facts (Instruction, Width, Shape, Reason...). Free when no
        remarks were asked for (tileiras/remarks.py)."""
        if _remarks.active():
            _remarks.report(kind, category, name, str(self.entry.attributes["sym_name"]), message,
                            getattr(op, "location", None), **args)

    # -- values -----------------------------------------------------------------
    def get(self, value: Value) -> Any:
        try:
            return self.values[value]
        except KeyError:
            raise CompileError("error: internal: use of a value before its definition") from None

    def tile(self, value: Value) -> TileRegs:
        lowered = self.get(value)
        if not isinstance(lowered, TileRegs):
            raise CompileError(f"error: internal: expected a tile, got {type(lowered).__name__}")
        return lowered

    def set(self, value: Value, lowered: Any) -> None:
        if isinstance(lowered, TileRegs) and isinstance(value.type, TileType):
            layout = self.layout_of(value)
            if lowered.layout is None:
                lowered.layout = layout
            if lowered.layout != layout or len(lowered.slots) != layout.slots(value.type.num_elements):
                raise CompileError(f"error: internal: a {value.type} lowered in {lowered.layout} "
                                   f"with {len(lowered.slots)} slots, but assigned {layout.describe()}")
        self.values[value] = lowered

    # -- layouts (index arithmetic depends only on the thread id: prologue) ---------
    def layout_of(self, value: Value) -> Layout:
        """The layout of a tile value at the nv_tileas level (`tileas.materialize`)."""
        return value.layout if value.layout is not None else self.layout

    def _element(self, num_elements: int, slot: int, layout: Optional[Layout]) -> tuple[str, Optional[str]]:
        layout = layout or self.layout
        key = (layout, num_elements, slot)
        if key not in self._index_cache:
            self._index_cache[key] = element(layout, self.b.pre, self.tid, num_elements, slot)
        return self._index_cache[key]  # type: ignore[return-value]

    def slots(self, t: TileType, layout: Optional[Layout] = None) -> int:
        return (layout or self.layout).slots(t.num_elements)

    def elem_index(self, num_elements: int, slot: int, layout: Optional[Layout] = None) -> str:
        """i32 row-major element index held by this thread in `slot`."""
        return self._element(num_elements, slot, layout)[0]

    def slot_valid(self, num_elements: int, slot: int, layout: Optional[Layout] = None) -> Optional[str]:
        """i1 'this slot is the first copy of its element', or None when always true.

        Replicated or padded slots repeat elements; stores and atomics must
        happen once per element, so they are guarded by this predicate.
        """
        return self._element(num_elements, slot, layout)[1]

    def multi_index(self, shape: tuple[int, ...], slot: int, layout: Optional[Layout] = None) -> list[str]:
        """i32 index per dimension of the element this thread holds in `slot`."""
        key = ("m", shape, slot, layout or self.layout)
        if key not in self._index_cache:
            n = 1
            for d in shape:
                n *= d
            e = self.elem_index(n, slot, layout)
            out = []
            for dim, stride in zip(shape, row_major_strides(shape)):
                if dim == 1:
                    out.append("0")
                    continue
                q = e if stride == 1 else self.b.pre(f"udiv i32 {e}, {stride}", "q")
                out.append(q if stride * dim == n else self.b.pre(f"urem i32 {q}, {dim}", "i"))
            self._index_cache[key] = out  # type: ignore[assignment]
        return self._index_cache[key]  # type: ignore[return-value]

    def splat(self, t: TileType, scalar: str, layout: Optional[Layout] = None) -> TileRegs:
        return TileRegs(t, [scalar] * self.slots(t, layout), layout or self.layout)

    # -- synchronization and shared memory -----------------------------------------
    def barrier(self) -> None:
        if self.barrier_threads:
            self.b.emit(f'call void asm sideeffect "bar.sync {self.barrier_id}, {self.barrier_threads};", '
                        f'"~{{memory}}"()')
            return
        self.b.declare("declare void @llvm.nvvm.barrier0()")
        self.b.emit("call void @llvm.nvvm.barrier0()")

    def pipelined_load(self, op: Operation) -> Optional[Any]:
        """The active pipeline that stages load `op`, if any."""
        for pipeline in self.active_pipelines.values():
            if op in pipeline.loads:
                return pipeline
        return None

    def lifetimes(self) -> Liveness:
        if self.liveness is None:
            self.liveness = lifetimes(self.entry)
        return self.liveness

    def alloc_buffer(self, nbytes: int, role: str, subject: Any = None) -> int:
        """The offset of the shared buffer plan-shared-memory placed for the current op's request of `role`
        for `subject` (what the op asks it for, and which of its buffers of that role: the load a ring
        holds, an mma operand's letter, ...; its size, alignment, swizzle and lifetime are the plan's:
        tileas/shared_plan.py); `nbytes`: what the op writes in it. Where the plan placed none (a role it does
        not size; a request it did not place or too small: an internal error where the check is strict), the
        buffer goes above every planned one, alive to the kernel's end, sharing no byte."""
        live = self.lifetimes()
        what = self.current_op.name if self.current_op is not None else ""
        at = live.position(self.current_op)
        found = self.planned.buffer(self.current_op, role, nbytes, subject)
        if found is None:
            buffer = self.buffers.allocate("buffer", nbytes, UNPLANNED_ALIGN, None, at, live.end, 0, what,
                                           self.planned.above(self.buffers.total))
        else:
            planned, offset = found
            buffer = self.buffers.allocate(planned.kind, planned.nbytes, planned.align, planned.lifetime, at,
                                           live.end, planned.swizzle, what, offset)
        self.buffer_bytes = self.buffers.total
        return buffer.offset

    def scratch(self, nbytes: int, role: str = "conversion") -> str:
        """Shared scratch for the current op (elements exchanged between threads: every use starts
        with a CTA barrier and is read before the op ends, so one buffer serves all of an op's uses);
        `role`: as `alloc_buffer`."""
        from .smem import pointer

        key = id(self.current_op)
        held = self._op_scratch.get(key)
        if held is None or held[1] < nbytes:
            held = (self.alloc_buffer(nbytes, role), nbytes)
            self._op_scratch[key] = held
        return pointer(self, str(held[0]))

    def _to_shared(self, sources: list[TileRegs], role: str = "conversion",
                   swizzle: Optional["ScratchSwizzle"] = None) -> tuple[str, str]:
        """Store every source element at its row-major index (sources end to end), or where
        `swizzle` moves it; (buffer, type)."""
        elem = sources[0].type.element
        lty = storage_type(elem)
        total = sum(s.type.num_elements for s in sources)
        buf = self.scratch(total * storage_bytes(elem), role=role)
        self.barrier()  # earlier readers of the scratch are done
        base = 0
        for tile in sources:
            n = tile.type.num_elements
            for k, v in enumerate(tile.slots):
                if swizzle is None:
                    e = self.elem_index(n, k, tile.layout)
                else:
                    e = self._swizzled(swizzle, swizzle.write_run, k, lambda s: self.elem_index(n, s, tile.layout))
                at = e if base == 0 else self.b.op(f"add i32 {e}, {base}", "sx")
                p = self.b.op(f"getelementptr {lty}, ptr addrspace(3) {buf}, i32 {at}", "sp")
                self.store_first_copy(tile.type.num_elements, k, tile.layout,
                                       f"store {lty} {to_storage(self, v, elem)}, ptr addrspace(3) {p}")
            base += tile.type.num_elements
        self.barrier()
        return buf, lty

    def guarded(self, cond: Optional[str], body: Callable[[], Optional[str]], default: Optional[str] = None,
                ty: str = "") -> str:
        """Run `body()` only where `cond` holds; merge its value with `default` otherwise.

        With `default` None the body is run for its effect (a store) and "" is returned.
        """
        if cond is None:
            return body() or ""
        if default is None:
            self.guarded_values(cond, lambda: [body()][:0], [], ty)
            return ""
        return self.guarded_values(cond, lambda: [body() or ""], [default], ty)[0]

    def guarded_values(self, cond: str, body: Callable[[], list[str]], defaults: list[str], ty: str,
                       tag: str = "ld") -> list[str]:
        """`guarded` for several values of type `ty`: `body()`'s where `cond` holds, else `defaults`."""
        then, join = self.b.label("then"), self.b.label("join")
        before = self.b.current_block
        self.b.cond_br(cond, then, join)
        self.b.start_block(then)
        values = body()
        end = self.b.current_block
        self.b.br(join)
        self.b.start_block(join)
        return [d if v == d else self.b.op(f"phi {ty} [ {v}, %{end} ], [ {d}, %{before} ]", tag)
                for v, d in zip(values, defaults)]

    def store_first_copy(self, num_elements: int, slot: int, layout: Optional[Layout], store: str) -> None:
        """Emit `store` from the first copy of a replicated element only (copies storing the same
        value from several threads at once would be a data race)."""
        self.guarded(self.slot_valid(num_elements, slot, layout), lambda: self.b.emit(store))

    def _from_shared(self, buf: str, lty: str, elem: Type, idx: str) -> str:
        p = self.b.op(f"getelementptr {lty}, ptr addrspace(3) {buf}, i32 {idx}", "sp")
        return from_storage(self, self.b.op(f"load {lty}, ptr addrspace(3) {p}", "sv"), elem)

    def exchange(self, src: TileRegs | list[TileRegs], dst_type: TileType,
                 src_index: Callable[[list[str]], str], dst_layout: Optional[Layout] = None,
                 role: str = "conversion", swizzle: Optional["ScratchSwizzle"] = None) -> TileRegs:
        """Move elements between threads: dst[i] = src[src_index(i)] via shared memory.

        `src_index` maps the i32 multi-index of a destination element to the
        i32 row-major index of the source element that it takes. Several
        sources are laid end to end (for `cat`). Sources may be in any layout;
        the result is in `dst_layout` (blocked by default); `role`: of its scratch, as `alloc_buffer`;
        `swizzle`: where a single source's elements lie in the scratch (tileas/scratch_swizzle.py).
        """
        sources = src if isinstance(src, list) else [src]
        buf, lty = self._to_shared(sources, role, swizzle)
        layout = dst_layout or self.layout

        def at(k: int) -> str:
            return src_index(self.multi_index(dst_type.shape, k, layout))
        out = [self._from_shared(buf, lty, dst_type.element,
                                 at(k) if swizzle is None else self._swizzled(swizzle, swizzle.read_run, k, at))
               for k in range(self.slots(dst_type, layout))]
        return TileRegs(dst_type, out, layout)

    def _swizzled(self, swizzle: "ScratchSwizzle", run: int, slot: int, index: Callable[[int], str]) -> str:
        """The scratch index of `slot`'s element: its run's first element swizzled, plus its place
        in the run (one chunk), so that LLVM sees a run's accesses as consecutive and merges them."""
        within = slot % run
        first = swizzle.index(self.b.op, index(slot - within))
        return first if within == 0 else self.b.op(f"add i32 {first}, {within}", "sz")

    def convert(self, tile: TileRegs, layout: Layout, role: str = "conversion") -> TileRegs:
        """The same tile in another layout (a conversion `assign_layouts` asked for); `role`: of its
        scratch, as `alloc_buffer`."""
        buf, lty = self._to_shared([tile], role)
        n = tile.type.num_elements
        out = [self._from_shared(buf, lty, tile.type.element, self.elem_index(n, k, layout))
               for k in range(layout.slots(n))]
        return TileRegs(tile.type, out, layout)

    def linear(self, idx: list[str], shape: tuple[int, ...]) -> str:
        """Row-major linear i32 index of a multi-index into `shape`."""
        acc = "0"
        for i, stride in zip(idx, row_major_strides(shape)):
            if i == "0":
                continue
            term = i if stride == 1 else self.b.op(f"mul i32 {i}, {stride}", "l")
            acc = term if acc == "0" else self.b.op(f"add i32 {acc}, {term}", "l")
        return acc

    # -- walking -----------------------------------------------------------------------
    def lower_block(self, block: Block) -> None:
        from .registry import LOWERINGS

        for op in block.operations:
            if op in self.lowered_ahead:
                continue
            if self.subprogram is not None:
                loc = self.debug.location(op.location, self.subprogram, self.sub_file)
                self.b.dbg = f", !dbg !{loc}" if loc is not None else ""
            handler = LOWERINGS.get(op.name)
            if handler is None:
                raise op_error(op, f"cannot be lowered for {self.gpu} yet")
            outer, self.current_op = self.current_op, op
            handler(self, op)
            self.current_op = outer


def storage_type(elem: Type) -> str:
    """How an element is stored in memory (i1 is a byte)."""
    lty = llvm_type(elem)
    return "i8" if lty in SUB_BYTE else lty


# Integer types narrower than a byte are kept in registers at their width and stored as a byte.
SUB_BYTE = ("i1", "i4")


def to_storage(k: KernelLowering, v: str, elem: Type) -> str:
    lty = llvm_type(elem)
    return k.b.op(f"zext {lty} {v} to i8", "z") if lty in SUB_BYTE else v


def from_storage(k: KernelLowering, v: str, elem: Type) -> str:
    lty = llvm_type(elem)
    return k.b.op(f"trunc i8 {v} to {lty}", "t") if lty in SUB_BYTE else v


def resolve_dims(static: tuple[int, ...], dynamic: list[str]) -> list[Optional[int]]:
    """Static dims stay ints; DYNAMIC ones are None (their value comes from an operand)."""
    return [None if d == DYNAMIC else d for d in static]
