"""Module globals (`cuda_tile.global`) and `get_global`."""

from __future__ import annotations

from ..ir.core import Operation
from ..ir.types import TileType, storage_bytes
from .kernel import KernelLowering, storage_type
from .llvm_text import float_bits_literal, llvm_type


def global_symbol(name: str) -> str:
    """`@name`, quoted with LLVM's \\XX escapes unless it is a plain identifier (NVPTX renames the rest)."""
    if name.isascii() and name.replace("_", "a").isalnum() and not name[0].isdigit():
        return f"@{name}"
    return '@"' + "".join(chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else f"\\{b:02X}" for b in name.encode()) + '"'


def define_global(op: Operation) -> str:
    """The LLVM definition of one `cuda_tile.global` (device memory, per module)."""
    name = str(op.attributes["sym_name"])
    value = op.attributes["value"]
    elem = value.type.element
    lty = storage_type(elem)
    size = storage_bytes(elem)
    raw = value.raw
    count = value.type.num_elements
    if len(raw) == size and count > 1:
        raw = raw * count  # a splat
    if llvm_type(elem) in ("half", "bfloat", "float", "double"):
        items = [float_bits_literal(int.from_bytes(raw[i * size:(i + 1) * size], "little"), lty) for i in range(count)]
    else:
        items = [str(int.from_bytes(raw[i * size:(i + 1) * size], "little", signed=True)) for i in range(count)]
    align = int(op.attributes.get("alignment", 0) or size)
    kind = "constant" if op.attributes.get("constant") else "global"
    linkage = "internal " if str(op.attributes.get("symbol_visibility", "public")) == "private" else ""
    body = ", ".join(f"{lty} {v}" for v in items)
    return f"{global_symbol(name)} = {linkage}addrspace(1) {kind} [{count} x {lty}] [{body}], align {align}"


def _get_global(k: KernelLowering, op: Operation) -> None:
    name = str(op.attributes["name"]).lstrip("@")
    rtype = op.results[0].type
    assert isinstance(rtype, TileType)
    generic = f"addrspacecast (ptr addrspace(1) {global_symbol(name)} to ptr)"  # a constant expression
    k.set(op.results[0], k.splat(rtype, generic))


LOWERINGS = {"cuda_tile.get_global": _get_global}
