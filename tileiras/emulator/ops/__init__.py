"""Instruction decoders, one module per family; `HANDLERS` maps a base opcode to its decoder."""

from __future__ import annotations

from typing import Any, Callable

from . import async_ops, cluster, control, convert, floats, integer, memory, tcgen05, tensor, tma, warp, wgmma

HANDLERS: dict[str, Callable[..., Any]] = {}
for _module in (integer, floats, convert, memory, control, warp, tensor, async_ops, tma, wgmma, tcgen05, cluster):
    for _name, _handler in _module.HANDLERS.items():
        if _name in HANDLERS and _module is floats and _name in integer.HANDLERS:
            continue   # integer decoders dispatch float types to floats.FLOAT_HANDLERS
        HANDLERS[_name] = _handler
