"""Tensor maps the kernel makes itself, for views whose base or shape it computes (a grouped GEMM's
arrays, read from a list of arrays): no hidden parameter can hold them, as the launch fills those
from the kernel's own arguments (tma_copy.py).

The middle level decides it (tileas/tma_boxes.plan with `built`, for a pipelined loop's copies:
`TmaParam.built`); here it is translated. The thread that will issue the copies writes each map's 64
bytes (codegen/tensormap_ir.words, from the view's LLVM values) to global memory, releases them to
the tensor-map proxy and acquires them there (`fence.proxy.tensormap::generic`): where the view is
made, for a loop not warp-specialized and for an epilogue's TMA store (`at_view`: once a grouped
GEMM's problem), else before the loop's first copy (`build`: the producer's thread), which also
prefetches it. The map's home, as NVIDIA's kernels have it:

* where the driver gives each CTA its own memory (`%perctamemoryoffset`, non-zero; the kernel asks
  128 bytes a map with `.minperctamemory`, codegen/hidden_params.py): map i at that address + 128 i;
* else in the workspace whose address the launch passes after the tensor maps (codegen/nv_host.py:
  `WORKSPACE_PER_MAP` bytes a map on each SM): map i at workspace + (%smid + i %nsmid) 8192 +
  %warpid 128, a slot no other resident warp has.

The loop's own copies have completed (its readers waited for every stage) before the thread writes
the map again, so no copy reads a map being written. The pointer lives in an
entry-block alloca, which the issuing thread reads where it copies.
"""

from __future__ import annotations

from ..codegen.metadata import WORKSPACE_PER_MAP
from ..codegen.tensormap_ir import I64, Value, words
from ..ir.core import Operation
from ..ir.types import PointerType, element_of
from ..tileaa.views import cut_from
from ..tileas.tma_boxes import TmaCopy
from .kernel import KernelLowering
from .llvm_text import llvm_type

MAP_BYTES = 128
WORKSPACE_PARAM = "%kmap_workspace"


def slot(k: KernelLowering, load: Operation, spec: object) -> int:
    """The index of the map `load`'s copies go through among the kernel's own (one per view and box)."""
    key = (_made_by(load), spec)
    if key not in k.kernel_maps:
        k.kernel_maps.append(key)
        k.b.prologue.append(f"  {_home(len(k.kernel_maps) - 1)} = alloca i64, align 8")
    return k.kernel_maps.index(key)


def operand(k: KernelLowering, t: TmaCopy) -> str:
    """The map's address as an inline-asm operand ("i64 %v"), in the thread that built it."""
    loaded = k.b.op(f"load i64, ptr {_home(t.slot)}, align 8", "kmap")
    return f"i64 {loaded}"


def signature(k: KernelLowering) -> list[str]:
    """The workspace's address, the kernel's last parameter where it makes maps."""
    return [f"i64 {WORKSPACE_PARAM}"] if k.kernel_maps else []


def at_view(k: KernelLowering, view_op: Operation) -> None:
    """Make here, where the tensor view `view_op` is made, the maps of it that loops not warp-specialized copy
    through and epilogues store through (thread 0, which issues their copies): once a view (a grouped
    GEMM's problem), not once each run of the loop (each output tile). Every load through the map the view
    had before has completed by then (such a loop waits for each of its stages before it ends); stores are
    waited for (`_write`)."""
    from ..tileas.plan import plan_of

    decided = plan_of(k.assignment).ring_copies if k.assignment is not None else None
    specialized = k.warp_split.loop if k.warp_split is not None else None
    stores = _stores(k, view_op)
    copies = [(load, t) for loop, ring in (decided or {}).items() if loop is not specialized
              for load, t in (ring.tma or {}).items()] + stores
    # (a map the producer's thread copies through too it makes itself, before its loop: `build`)
    producers = {t.spec for load, t in (decided.get(specialized).tma or {}).items()
                 if _made_by(load) is view_op} if decided and specialized in decided else set()
    made = []
    for op, t in copies:
        if t.spec.built and _made_by(op) is view_op and t.spec not in producers:
            i = slot(k, op, t.spec)
            if i not in k.kernel_maps_at_view:
                k.kernel_maps_at_view.add(i)
                made.append(i)
    if made:
        k.guarded(k.b.op(f"icmp eq i32 {k.tid}, 0", "km"), lambda: _write(k, made, stores=bool(stores)))


def _stores(k: KernelLowering, view_op: Operation) -> list:
    """(store, TmaCopy) of the epilogues that store by TMA into the view `view_op` makes (thread 0 issues
    them: lowering/epilogue.tma_store, tmem_epilogue)."""
    out = []
    for part in view_op.results[0].uses:
        for store in part.results[0].uses if part.results else ():
            if store.name != "cuda_tile.store_view_tko" or store.operand("view") is not part.results[0]:
                continue
            epilogue = k.planned.get("epilogues", store)
            staged = k.planned.get("tma_stages", store)
            t = epilogue.copy if epilogue is not None and epilogue.role == "tma-store" else \
                staged[0] if staged is not None else None
            if t is not None:
                out.append((store, t))
    return out


def build(k: KernelLowering, copies: dict) -> None:
    """Write, fence and prefetch the maps the copies (load -> TmaCopy) of a loop go through that the
    kernel makes itself, but those made where their view is (`at_view`) (one thread: the one that issues
    them)."""
    _write(k, sorted({t.slot for t in copies.values() if t.spec.built} - k.kernel_maps_at_view))


def _write(k: KernelLowering, made: list, stores: bool = False) -> None:
    """Write maps `made` (slots), release and acquire them. `stores`: TMA stores went through the view's
    maps before: they have completed (their writes too) before a map changes under them."""
    if stores:
        k.b.emit('call void asm sideeffect "cp.async.bulk.wait_group 0;", "~{memory}"()')
    homes = []
    for i in made:
        view_op, spec = k.kernel_maps[i]
        home = _address(k, i)
        ir = I64(lambda: k.b.fresh("km"), k.b.emit)
        dims = [_i64(k, view_op, f.param) if f.param >= 0 else f.const for f in spec.dims]
        strides = [_i64(k, view_op, f.param) if f.param >= 0 else f.const for f in spec.strides]
        out = words(ir, spec, _i64(k, view_op, spec.address), dims, strides, str(k.entry.attributes.get("sym_name", "")))
        for w in range(0, len(out), 2):
            at = k.b.op(f"add i64 {home}, {8 * w}", "km") if w else home
            k.b.emit(f'call void asm sideeffect "st.global.v2.b64 [$0], {{$1, $2}};", "l,l,l,~{{memory}}"(i64 {at}, '
                     f"i64 {ir.lit(out[w])}, i64 {ir.lit(out[w + 1])})")
        k.b.emit(f"store i64 {home}, ptr {_home(i)}, align 8")
        homes.append(home)
    if homes:   # the maps' generic writes released to the tensor-map proxy, then acquired there
        k.b.emit('call void asm sideeffect "fence.proxy.tensormap::generic.release.gpu;", "~{memory}"()')
    for home in homes:
        k.b.emit(f'call void asm sideeffect "fence.proxy.tensormap::generic.acquire.gpu [$0], {MAP_BYTES};", '
                 f'"l,~{{memory}}"(i64 {home})')

def _made_by(load: Operation) -> Operation:
    return cut_from(load).owner  # type: ignore[return-value]


def _home(i: int) -> str:
    """The entry-block alloca holding map i's address (made with its slot)."""
    return f"%kmap_home{i}"


def _address(k: KernelLowering, i: int) -> str:
    """Map i's global address: in the CTA's own memory where the driver gives it, else in the workspace."""
    def sreg(name: str) -> str:
        k.b.declare(f"declare i32 @llvm.nvvm.read.ptx.sreg.{name}()")
        return k.b.op(f"zext i32 {k.b.op(f'call i32 @llvm.nvvm.read.ptx.sreg.{name}()', 'km')} to i64", "km")

    def mul(a: str, b: int) -> str:
        return k.b.op(f"mul i64 {a}, {b}", "km")

    own = k.b.op('call i64 asm sideeffect "mov.u64 $0, %perctamemoryoffset;", "=l"()', "km")
    given = k.b.op(f"icmp ne i64 {own}, 0", "km")
    in_own = k.b.op(f"add i64 {own}, {MAP_BYTES * i}", "km")
    sm = sreg("smid")
    row = k.b.op(f"add i64 {sm}, {mul(sreg('nsmid'), i)}", "km") if i else sm
    at = k.b.op(f"add i64 {mul(row, WORKSPACE_PER_MAP)}, {mul(sreg('warpid'), MAP_BYTES)}", "km")
    in_workspace = k.b.op(f"add i64 {WORKSPACE_PARAM}, {at}", "km")
    return k.b.op(f"select i1 {given}, i64 {in_own}, i64 {in_workspace}", "km")


def _i64(k: KernelLowering, view_op: Operation, index: int) -> Value:
    """Operand `index` of the view's make_tensor_view as an i64 (a pointer's address; integers zero-extended)."""
    value = view_op.operands[index]
    v = k.tile(value).slots[0]
    elem = element_of(value.type)
    ty = llvm_type(elem)
    if isinstance(elem, PointerType):
        return k.b.op(f"ptrtoint {ty} {v} to i64", "km")
    return v if ty == "i64" else k.b.op(f"zext {ty} {v} to i64", "km")
