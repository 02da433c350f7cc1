"""C names of a kernel's parameters, as the kernel names and uses them.

cuTile passes an array argument as its device pointer, then one integer per dimension for its
shape, then one per dimension for its strides (in elements). The kernel shows that expansion: it
makes a tensor view of rank r from the pointer parameter %argN, with shape and strides from the
2r integer parameters after it. Those parameters are then named `argN`, `argN_shape0`..,
`argN_stride0`..; every other parameter keeps the kernel's own name (`argN`, as tileirdisasm
prints it), so a launcher declaration reads as the kernel's signature does.
"""

from __future__ import annotations

from ..ir.record import replace
from .metadata import KernelInfo, KernelParam, ModuleMetadata

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only; typing is not imported at run time
    from typing import Any, Optional


def _source(value: Any) -> Any:
    """`value` with the assumptions on it peeled off (cuTile wraps each shape and stride in one)."""
    owner = getattr(value, "owner", None)
    while getattr(owner, "name", None) == "cuda_tile.assume" and owner.operands:
        value = owner.operands[0]
        owner = getattr(value, "owner", None)
    return value


def _is_int_param(param: KernelParam) -> bool:
    return param.type in ("i8", "i16", "i32", "i64")


def _array_at(view: Any, args: list[Any], params: tuple[KernelParam, ...]) -> Optional[tuple[int, int]]:
    """(pointer index, rank) when `view` is made from parameter i and parameters i+1..i+2r are the
    array's shape and strides (each dynamic one read from its own parameter, or from none)."""
    base = _source(view.operands[0]) if view.operands else None
    if base not in args:
        return None
    index = args.index(base)
    rank = len(getattr(view.results[0].type, "shape", ()))
    if not rank or index + 2 * rank >= len(params) or not params[index].type.startswith("ptr<"):
        return None
    if not all(_is_int_param(p) for p in params[index + 1:index + 1 + 2 * rank]):
        return None
    sizes = getattr(view, "segment_sizes", None) or (1, 0, 0)
    shape_ops = view.operands[1:1 + sizes[1]]
    stride_ops = view.operands[1 + sizes[1]:1 + sizes[1] + sizes[2]]
    expected = set(range(index + 1, index + 1 + 2 * rank))
    for value in (*shape_ops, *stride_ops):  # a dynamic extent from another parameter: not this layout
        source = _source(value)
        if source in args and args.index(source) not in expected:
            return None
    return index, rank


def entry_param_names(entry: Any, params: tuple[KernelParam, ...]) -> list[str]:
    """The names of `entry`'s parameters (`params`: the metadata's, in order)."""
    names = [p.name for p in params]
    block = entry.regions[0].blocks[0] if entry.regions and entry.regions[0].blocks else None
    args = list(block.arguments) if block is not None else []
    if len(args) != len(params):
        return names
    named: set[int] = set()
    for op in entry.walk():
        if op.name != "cuda_tile.make_tensor_view":
            continue
        found = _array_at(op, args, params)
        if found is None:
            continue
        index, rank = found
        span = range(index, index + 1 + 2 * rank)
        if named.intersection(span):
            continue
        base = names[index]
        for d in range(rank):
            names[index + 1 + d] = f"{base}_shape{d}"
            names[index + 1 + rank + d] = f"{base}_stride{d}"
        named.update(span)
    return names


def name_params(meta: ModuleMetadata, module: Any) -> ModuleMetadata:
    """`meta` with each kernel's parameters named as `entry_param_names` says."""
    body = module.regions[0].blocks[0].operations if module.regions and module.regions[0].blocks else []
    entries = {str(op.attributes.get("sym_name")): op for op in body if op.name == "cuda_tile.entry"}
    kernels: list[KernelInfo] = []
    for kernel in meta.kernels:
        entry = entries.get(kernel.name)
        if entry is None:
            kernels.append(kernel)
            continue
        names = entry_param_names(entry, kernel.params)
        params = tuple(KernelParam(name, p.type) for name, p in zip(names, kernel.params))
        kernels.append(replace(kernel, params=params))
    return ModuleMetadata(tuple(kernels), meta.gpu)
