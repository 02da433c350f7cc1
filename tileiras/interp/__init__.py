"""Reference interpreter of cuda_tile: the semantic ground truth.

    from tileiras.interp import run
    memory = run(module, "kernel", grid=(4, 1, 1), args=[...])

`run` executes an entry over a grid of tile blocks, one block after the
other, each block running the entry body in program order on numpy tiles
(see `machine`). `args` are the raw entry parameters: integers for integer
and pointer parameters (pointers are byte addresses in `memory`), numbers
for float parameters; `tileiras.runtime` builds them from numpy arrays the
way cuTile passes arrays (`ptr, shape..., strides...`).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, TextIO

from .errors import InterpError, KernelAssertion, MemoryFault


def run(module: Any, kernel: str, grid: Sequence[int], args: Sequence[Any], memory: Optional[Any] = None,
        stdout: Optional[TextIO] = None) -> Any:
    """Run `kernel` of `module` on `grid`; returns the `Memory` it ran in (pass one to pre-fill it)."""
    from .machine import Machine

    machine = Machine(module, memory, stdout)
    machine.launch(kernel, grid, list(args))
    return machine.memory


def __getattr__(name: str) -> Any:
    if name == "Memory":              # numpy-backed: imported on first use
        from .memory import Memory

        return Memory
    raise AttributeError(name)


__all__ = ["run", "Memory", "InterpError", "KernelAssertion", "MemoryFault"]
