"""Lowering of one `cuda_tile.entry` to one LLVM kernel function.

`KernelLowering` walks the entry's body in order and dispatches each op to
the lowering registered for its name in `registry.LOWERINGS`. It owns the
per-kernel state the op lowerings share: the value map, the thread index,
the element-index arithmetic of the layout, shared-memory scratch and
barriers.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from ..driver.errors import CompileError
from ..ir.core import Block, Operation, Value
from ..ir.types import DYNAMIC, PointerType, ScalarType, TileType, Type
from .layout import BlockedLayout, row_major_strides
from .llvm_text import FunctionBuilder, llvm_type
from .values import LoopContext, TileRegs


def op_error(op: Operation, message: str) -> CompileError:
    loc = f"{op.location}: " if getattr(op, "location", None) else ""
    return CompileError(f"{loc}error: '{op.name}' op {message}")


class KernelLowering:
    def __init__(self, entry: Operation, gpu: str, threads: int, debug: Any = None) -> None:
        self.entry = entry
        self.gpu = gpu
        self.sm = int(gpu.split("_")[1])
        self.layout = BlockedLayout(threads)
        self.threads = threads
        self.b = FunctionBuilder()
        self.values: dict[Value, Any] = {}
        self.smem_bytes = 0
        self.globals: list[str] = []        # module-level definitions this kernel needs
        self.loops: list[LoopContext] = []
        self._index_cache: dict[tuple[Any, ...], str] = {}
        self.debug = debug                  # DebugInfo when line info is on
        self.subprogram: Optional[int] = None
        self.sub_file = ""
        self.tid = self.b.pre("call i32 @llvm.nvvm.read.ptx.sreg.tid.x()", "tid")
        self.b.declare("declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()")

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
        self.values[value] = lowered

    # -- layout arithmetic (all of it depends only on the thread id: prologue) ----
    def slots(self, t: TileType) -> int:
        return self.layout.slots(t.num_elements)

    def elem_index(self, num_elements: int, slot: int) -> str:
        """i32 row-major element index held by this thread in `slot`."""
        key = ("e", num_elements, slot)
        if key not in self._index_cache:
            T = self.threads
            if num_elements == 1:
                name = "0"
            elif num_elements >= T and num_elements % T == 0:
                name = self.tid if slot == 0 else self.b.pre(f"add i32 {self.tid}, {slot * T}", "e")
            else:
                raw = self.tid if slot == 0 else self.b.pre(f"add i32 {self.tid}, {slot * T}", "e")
                name = self.b.pre(f"urem i32 {raw}, {num_elements}", "e")
            self._index_cache[key] = name
        return self._index_cache[key]

    def slot_valid(self, num_elements: int, slot: int) -> Optional[str]:
        """i1 'this slot is the first copy of its element', or None when always true.

        Replicated or padded slots repeat elements; stores and atomics must
        happen once per element, so they are guarded by this predicate.
        """
        if self.layout.owns_all(num_elements) and num_elements >= self.threads:
            return None
        key = ("valid", num_elements, slot)
        if key not in self._index_cache:
            raw = self.tid if slot == 0 else self.b.pre(f"add i32 {self.tid}, {slot * self.threads}", "e")
            self._index_cache[key] = self.b.pre(f"icmp ult i32 {raw}, {num_elements}", "ok")
        return self._index_cache[key]

    def multi_index(self, shape: tuple[int, ...], slot: int) -> list[str]:
        """i32 index per dimension of the element this thread holds in `slot`."""
        key = ("m", shape, slot)
        if key not in self._index_cache:
            n = 1
            for d in shape:
                n *= d
            e = self.elem_index(n, slot)
            out = []
            for dim, stride in zip(shape, row_major_strides(shape)):
                if dim == 1:
                    out.append("0")
                    continue
                q = e if stride == 1 else self.b.pre(f"udiv i32 {e}, {stride}", "q")
                out.append(q if stride * dim == n else self.b.pre(f"urem i32 {q}, {dim}", "i"))
            self._index_cache[key] = out  # type: ignore[assignment]
        return self._index_cache[key]  # type: ignore[return-value]

    def splat(self, t: TileType, scalar: str) -> TileRegs:
        return TileRegs(t, [scalar] * self.slots(t))

    # -- synchronization and shared memory -----------------------------------------
    def barrier(self) -> None:
        self.b.declare("declare void @llvm.nvvm.barrier0()")
        self.b.emit("call void @llvm.nvvm.barrier0()")

    def scratch(self, nbytes: int) -> str:
        """The kernel's shared scratch buffer (sized to the largest request)."""
        self.smem_bytes = max(self.smem_bytes, nbytes)
        return "@__tileir_scratch"

    def exchange(self, src: TileRegs | list[TileRegs], dst_type: TileType,
                 src_index: Callable[[list[str]], str]) -> TileRegs:
        """Move elements between threads: dst[i] = src[src_index(i)] via shared memory.

        `src_index` maps the i32 multi-index of a destination element to the
        i32 row-major index of the source element that it takes. Several
        sources are laid end to end (for `cat`).
        """
        sources = src if isinstance(src, list) else [src]
        elem = sources[0].type.element
        lty = storage_type(elem)
        total = sum(s.type.num_elements for s in sources)
        buf = self.scratch(total * storage_bytes(elem))
        self.barrier()  # earlier readers of the scratch are done
        base = 0
        for tile in sources:
            for k, v in enumerate(tile.slots):
                e = self.elem_index(tile.type.num_elements, k)
                at = e if base == 0 else self.b.op(f"add i32 {e}, {base}", "sx")
                p = self.b.op(f"getelementptr {lty}, ptr addrspace(3) {buf}, i32 {at}", "sp")
                self.b.emit(f"store {lty} {to_storage(self, v, elem)}, ptr addrspace(3) {p}")
            base += tile.type.num_elements
        self.barrier()
        out = []
        for k in range(self.slots(dst_type)):
            idx = src_index(self.multi_index(dst_type.shape, k))
            p = self.b.op(f"getelementptr {lty}, ptr addrspace(3) {buf}, i32 {idx}", "sp")
            loaded = self.b.op(f"load {lty}, ptr addrspace(3) {p}", "sv")
            out.append(from_storage(self, loaded, elem))
        return TileRegs(dst_type, out)

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
            if self.subprogram is not None:
                loc = self.debug.location(op.location, self.subprogram, self.sub_file)
                self.b.dbg = f", !dbg !{loc}" if loc is not None else ""
            handler = LOWERINGS.get(op.name)
            if handler is None:
                raise op_error(op, f"cannot be lowered for {self.gpu} yet")
            handler(self, op)


def storage_type(elem: Type) -> str:
    """How an element is stored in memory (i1 is a byte)."""
    lty = llvm_type(elem)
    return "i8" if lty in SUB_BYTE else lty


def storage_bytes(elem: Type) -> int:
    if isinstance(elem, PointerType):
        return 8
    assert isinstance(elem, ScalarType)
    return max(1, elem.bitwidth // 8)


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
