"""`tileir run`: run a kernel on numpy arrays with the interpreter, the PTX emulator or a GPU.

    tileir run KERNEL.tileirbc --kernel NAME --grid X[,Y[,Z]] --args in.npz --out out.npz
               [--backend interpreter|emulator|gpu] [--gpu-name sm_XX]
               [--ptx FILE] [--no-race-check]

The emulator checks for data races unless --no-race-check (or TILEIRAS_EMULATOR_CHECK_RACES=0)
says not to; --ptx FILE runs that PTX (ours edited, or another compiler's) instead of what we
compile, with the kernel's calling convention, launch shape and tensor maps.

Keys "0", "1", ... of in.npz are the kernel's arguments in order: an array
with ndim >= 1 is passed as cuTile passes it (ptr, shape..., strides...), a
0-d array as a scalar; keys "N.0", "N.1", ... are the arrays of a list
argument N. After the run every argument is written to out.npz under the
same keys. Exit codes: 2 bad options or arguments that do not fit
the kernel's signature, 3 not TileIR, 4 unreadable input, 5 the run failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from ..errors import ExitCode, TileirasError

# argparse adds "usage: " itself; the error message adds it by hand
USAGE = ("tileir run KERNEL.tileirbc --kernel NAME --grid X[,Y[,Z]] [--args in.npz] [--out out.npz]\n"
         "                  [--backend interpreter|emulator|gpu] [--gpu-name sm_XX] [--ptx FILE] [--no-race-check]")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise TileirasError(f"tileir run: error: {message}\nusage: {USAGE}", ExitCode.INVALID_OPTIONS)


def _parser() -> _Parser:
    p = _Parser(prog="tileir run", usage=USAGE, add_help=True,
                description="Run a TileIR kernel on numpy arrays.")
    p.add_argument("input", help="TileIR bytecode (or text) module")
    p.add_argument("--kernel", required=True, help="entry to run")
    p.add_argument("--grid", required=True, help="number of tile blocks: X[,Y[,Z]]")
    p.add_argument("--args", dest="args_path", help=".npz with the arguments under keys 0, 1, ... (N.0, N.1, ...: a list argument)")
    p.add_argument("--out", help=".npz to write every argument to after the run")
    p.add_argument("--backend", default="interpreter", choices=("interpreter", "emulator", "gpu"))
    p.add_argument("--gpu-name", help="target of the emulator (default sm_80) or GPU (default: the device's)")
    p.add_argument("--ptx", help="emulator: run this PTX file instead of the PTX compiled from the module")
    p.add_argument("--no-race-check", action="store_true", help="emulator: do not check for data races (faster)")
    return p


def parse_grid(text: str) -> tuple[int, int, int]:
    try:
        dims = [int(p) for p in text.split(",")]
    except ValueError:
        dims = []
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise TileirasError(f"tileir run: error: --grid expects X[,Y[,Z]] with positive integers, got '{text}'",
                            ExitCode.INVALID_OPTIONS)
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def _gpu_name(text: Optional[str]) -> Optional[str]:
    import re

    if text is not None and not re.fullmatch(r"sm_[0-9]{2,3}[af]?", text):
        raise TileirasError(f"tileir run: error: invalid --gpu-name '{text}' (expected sm_XX)",
                            ExitCode.INVALID_OPTIONS)
    return text


def run(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        _parser().print_help()
        return 0
    opts = _parser().parse_args(argv)
    grid = parse_grid(opts.grid)
    gpu = _gpu_name(opts.gpu_name)
    if not os.path.exists(opts.input):
        raise TileirasError(f"error: unable to read input file '{opts.input}': No such file or directory",
                            ExitCode.NO_INPUT)
    if (opts.ptx or opts.no_race_check) and opts.backend != "emulator":
        flag = "--ptx" if opts.ptx else "--no-race-check"
        raise TileirasError(f"tileir run: error: {flag} needs --backend emulator\nusage: {USAGE}",
                            ExitCode.INVALID_OPTIONS)
    ptx = None
    if opts.ptx:
        try:
            with open(opts.ptx, encoding="utf-8", errors="replace") as handle:
                ptx = handle.read()
        except OSError as err:
            raise TileirasError(f"error: unable to read PTX file '{opts.ptx}': {err.strerror}",
                                ExitCode.UNREADABLE) from None

    from ..frontend import load_module, read_input
    from ..ir.types import FunctionType
    from .backends import BACKENDS, RunRequest
    from .marshal import bind
    from .npz import load_args, save_args

    if opts.out:
        from ..output import output_target

        output_target(opts.out, [opts.input])  # before the run: never the kernel file, a device or a FIFO
    source = read_input(opts.input)
    module = load_module(source, opts.input)
    entries = {op.attributes.get("sym_name"): op for op in module.regions[0].block.operations
               if op.name == "cuda_tile.entry"} if module.regions and module.regions[0].blocks else {}
    if opts.kernel not in entries:
        names = ", ".join(str(n) for n in entries) or "none"
        raise TileirasError(f"error: no kernel named '{opts.kernel}' in '{opts.input}' (kernels: {names})",
                            ExitCode.INVALID_OPTIONS)
    ftype = entries[opts.kernel].attributes["function_type"]
    assert isinstance(ftype, FunctionType)
    arrays = load_args(opts.args_path) if opts.args_path else []
    binding = bind(opts.kernel, list(ftype.inputs), arrays)
    request = RunRequest(module, source, opts.input, opts.kernel, grid, binding, gpu, sys.stdout,
                         check_races=False if opts.no_race_check else None, ptx=ptx)
    results = BACKENDS[opts.backend](request)
    sys.stdout.flush()
    if opts.out:
        save_args(opts.out, results)
    return 0


def main(argv: list[str]) -> int:
    from ..driver.failures import one_line_failures

    # a closed stdout is re-raised: tileir ends quietly
    return one_line_failures(lambda: run(list(argv)), "the kernel nests too deeply to run", "internal error")
