"""`tileir opt IN [--passes P,P,...]`: run canonical-form passes on a module and print its text.

For tests and for cutting a problem down to one pass (as `mlir-opt`): IN is TileIR text or bytecode
('-' for stdin); the passes run in the order given, each once over every kernel, then the module is
verified and printed. Exit codes (those of `tileiras`): 0 ok, 1 no input or a command-line error,
2 an unknown pass, 3/4/5 as for reading and verifying.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Optional

from ..errors import ExitCode, TileirasError


def _passes() -> dict[str, Callable[[object], object]]:
    from ..tileaa.canonicalize import canonicalize_tileaa
    from ..transforms.passes import CANONICAL_PASSES, to_canonical

    table: dict[str, Callable[[object], object]] = dict(CANONICAL_PASSES)
    table["canonical-form"] = to_canonical           # the whole group, to a fixed point
    table["canonicalize-nv_tileaa"] = canonicalize_tileaa
    return table


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise TileirasError(f"tileir opt: error: {message}", ExitCode.NO_INPUT)


def _parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog="tileir opt", description="Run canonical-form passes on a TileIR module, print the text.")
    p.add_argument("input", nargs="?", help="TileIR text or bytecode ('-' for stdin)")
    p.add_argument("--passes", default="canonical-form", help="comma-separated passes (default canonical-form); "
                   "known: canonicalize, simplify-tokens, licm, cse, dce, canonical-form, canonicalize-nv_tileaa, canonical-order")
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
        table = _passes()
        names = [n.strip() for n in args.passes.split(",") if n.strip()]
        unknown = [n for n in names if n not in table]
        if unknown:
            raise TileirasError(f"tileir opt: error: unknown pass '{unknown[0]}' (known: {', '.join(table)})",
                                ExitCode.INVALID_OPTIONS)
        from ..dialects.verifier import verify_module
        from ..frontend import load_module
        from ..text.printer import print_module

        module = load_module(sys.stdin.buffer.read() if args.input == "-" else args.input,
                             filename="<stdin>" if args.input == "-" else None)
        entries = [op for op in module.regions[0].blocks[0].operations if op.name == "cuda_tile.entry"]
        for name in names:
            for entry in entries:
                table[name](entry)
            verify_module(module)
        sys.stdout.write(print_module(module))
        return 0
    except TileirasError as exc:
        sys.stderr.write(exc.message + "\n")
        return int(exc.code)


if __name__ == "__main__":
    sys.exit(main())
