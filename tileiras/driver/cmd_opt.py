"""`tileir opt IN [--passes P,P,...] [--gpu-name sm_XX]`: run passes on a module and print its text.

For tests and for cutting a problem down to one pass (as `mlir-opt`): IN is TileIR text or bytecode
('-' for stdin), nv_tileas text included (tile types with their layouts, as this prints them); the
passes run in the order given, each once over every kernel, then the module is verified and printed.
The canonical form's passes, `nv_tileaa` (the alias-aware level's passes) and `nv_tileas` (down to
nv_tileas for --gpu-name: warps, layouts, conversions, the plans; each tile's layout printed on its
type). Exit codes (those of `tileiras`): 0 ok, 1 no input or a command-line error, 2 an unknown pass
or GPU, 3/4/5 as for reading and verifying.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Optional

from ..errors import ExitCode, TileirasError


def _passes(gpu: str) -> dict[str, Callable[[Any], object]]:
    from ..tileaa.canonicalize import canonicalize_tileaa
    from ..tileaa.passes import to_tileaa
    from ..tileas.passes import to_tileas
    from ..transforms.passes import CANONICAL_PASSES, to_canonical

    def tileas(entry: Any) -> None:
        if any(v.layout is not None for op in entry.walk() for v in op.results):
            raise TileirasError("tileir opt: error: the nv_tileas pass reads cuda_tile or nv_tileaa IR; this "
                                "kernel is at nv_tileas already (its tiles have layouts)", ExitCode.INVALID_OPTIONS)
        to_tileaa(entry)
        to_tileas([entry], gpu)

    table: dict[str, Callable[[Any], object]] = dict(CANONICAL_PASSES)
    table["canonical-form"] = to_canonical           # the whole group, to a fixed point
    table["canonicalize-nv_tileaa"] = canonicalize_tileaa
    table["nv_tileaa"] = to_tileaa
    table["nv_tileas"] = tileas
    return table


def _load(path: str) -> Any:
    """The module at `path` ('-': stdin): bytecode, or text read as nv_tileas text (layouts on the types)."""
    from ..frontend import classify, load_module, read_input

    data = sys.stdin.buffer.read() if path == "-" else read_input(path)
    name = "<stdin>" if path == "-" else path
    if classify(data) != "text":
        return load_module(data, filename=name)
    from ..tileas.text import parse_tileas, verify_tileas

    module = parse_tileas(data.decode("utf-8", "replace"), name)
    verify_tileas(module)
    return module


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise TileirasError(f"tileir opt: error: {message}", ExitCode.NO_INPUT)


def _parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog="tileir opt", description="Run canonical-form passes on a TileIR module, print the text.")
    p.add_argument("input", nargs="?", help="TileIR text or bytecode ('-' for stdin)")
    p.add_argument("--passes", default="canonical-form", help="comma-separated passes (default canonical-form); "
                   "known: canonicalize, simplify-tokens, licm, cse, dce, canonical-form, canonicalize-nv_tileaa, "
                   "canonical-order, nv_tileaa, nv_tileas")
    p.add_argument("--gpu-name", default="sm_90", help="the target of the nv_tileas pass (default sm_90)")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args_list = sys.argv[1:] if argv is None else list(argv)
    try:
        if any(a in ("-h", "--help") for a in args_list):
            _parser().print_help()
            return 0
        args = _parser().parse_args(args_list)
        if args.input is None:
            raise TileirasError("tileir opt: error: no input file provided", ExitCode.NO_INPUT)
        from ..target import caps

        caps(args.gpu_name)   # an unknown GPU: its error, exit 2
        table = _passes(args.gpu_name)
        names = [n.strip() for n in args.passes.split(",") if n.strip()]
        unknown = [n for n in names if n not in table]
        if unknown:
            raise TileirasError(f"tileir opt: error: unknown pass '{unknown[0]}' (known: {', '.join(table)})",
                                ExitCode.INVALID_OPTIONS)
        from ..dialects.verifier import verify_module
        from ..text.printer import Printer

        module = _load(args.input)
        entries = [op for op in module.regions[0].blocks[0].operations if op.name == "cuda_tile.entry"]
        for name in names:
            for entry in entries:
                table[name](entry)
            verify_module(module)
        sys.stdout.write(Printer(layouts=True).print_module(module))
        return 0
    except TileirasError as exc:
        sys.stderr.write(exc.message + "\n")
        return int(exc.code)


if __name__ == "__main__":
    sys.exit(main())
