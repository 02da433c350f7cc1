"""Running kernels: argument marshalling shared by every backend, and the backends.

* `marshal`: numpy arrays <-> entry parameters, cuTile's convention
  (`ptr, shape..., strides...` per array, a 0-d array is a scalar), checked
  against the entry signature;
* `npz`: the `.npz` files of `tileir run` (keys "0", "1", ... in order);
* `backends`: the interpreter, the PTX emulator and a CUDA GPU, each
  `run(request) -> arrays after the run`.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, TextIO


def run_arrays(module: Any, kernel: str, grid: Sequence[int], arrays: Sequence[Any], backend: str = "interpreter",
               gpu_name: Optional[str] = None, stdout: Optional[TextIO] = None,
               source: Optional[bytes] = None, filename: str = "<module>",
               check_races: Optional[bool] = None, per_cta_memory: bool = False) -> list:
    """`tileir run` as a function: every argument array after running `kernel` on `grid`.

    `module` is a module op; `source` (its file bytes) is needed by the
    compiling backends (emulator, gpu) and written from the module when absent.
    `check_races` makes the emulator report data races between the threads of
    a CTA (None: the TILEIRAS_EMULATOR_CHECK_RACES environment variable).
    `per_cta_memory`: the emulator gives each CTA the global memory its `.minperctamemory` asks, as newer
    drivers do (else a kernel that makes tensor maps keeps them in the launch's workspace).
    """
    import sys

    from ..ir.types import FunctionType
    from .backends import BACKENDS, RunRequest
    from .marshal import bind

    entries = [op for op in module.regions[0].block.operations
               if op.name == "cuda_tile.entry" and op.attributes.get("sym_name") == kernel]
    if not entries:
        from ..interp.errors import InterpError

        raise InterpError(f"error: no kernel named '{kernel}' in the module")
    ftype = entries[0].attributes["function_type"]
    assert isinstance(ftype, FunctionType)
    binding = bind(kernel, list(ftype.inputs), list(arrays))
    if source is None and backend != "interpreter":
        from ..bytecode.writer import write_module

        source = write_module(module)
    grid3 = tuple((list(grid) + [1, 1, 1])[:3])
    request = RunRequest(module, source or b"", filename, kernel, grid3, binding, gpu_name,  # type: ignore[arg-type]
                         stdout if stdout is not None else sys.stdout, check_races, per_cta_memory=per_cta_memory)
    return BACKENDS[backend](request)
