"""`tileir asm IN.mlir -o OUT.tileirbc [--bytecode-version 13.x]`: text to bytecode.

The input is parsed (tileirdisasm output or the full `cuda_tile.module`
form), verified, and written atomically; nothing is written on failure.
Exit codes (those of `tileiras`): 0 ok, 1 no or missing input or a command-line
error, 2 a bad option value, 3 not TileIR, 4 unreadable input, 5 parse/verify/encode failure.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from ..errors import BytecodeError, ExitCode, TileirasError
from ..bytecode.encoding import SUPPORTED_VERSIONS

VERSIONS = [f"{a}.{b}" for a, b in SUPPORTED_VERSIONS]
DEFAULT_VERSION = "13.4"


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise TileirasError(f"tileir asm: error: {message}", ExitCode.NO_INPUT)  # a command-line error


def _parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog="tileir asm", description="Assemble TileIR text into TileIR bytecode.")
    p.add_argument("input", nargs="?", help="TileIR text file ('-' for stdin)")
    p.add_argument("-o", "--output", help="output bytecode file")
    p.add_argument("--bytecode-version", default=DEFAULT_VERSION, metavar="VERSION",
                   help=f"bytecode version to write: {', '.join(VERSIONS)} (default {DEFAULT_VERSION})")
    p.add_argument("--no-verify", action="store_true", help="skip the verifier")
    return p


def main(argv: Optional[list[str]] = None) -> int:
    args_list = sys.argv[1:] if argv is None else list(argv)
    try:
        if any(a in ("-h", "--help") for a in args_list):
            _parser().print_help()
            return 0
        args = _parser().parse_args(args_list)
        if args.input is None:
            raise TileirasError("tileir asm: error: no input file provided", ExitCode.NO_INPUT)
        version = args.bytecode_version
        if version.endswith(".0"):
            version = version[:-2]
        if version not in VERSIONS:
            raise TileirasError(f"tileir asm: error: unsupported bytecode version '{args.bytecode_version}' "
                                f"(supported: {', '.join(VERSIONS)})", ExitCode.INVALID_OPTIONS)
        output = args.output or _default_output(args.input)
        from ..frontend import load_module
        from ..bytecode.writer import write_module
        from ..output import output_target, write_atomic

        output_target(output, [args.input])  # refused before reading: never the input, a device or a FIFO

        try:
            module = load_module(args.input, verify=not args.no_verify)
        except BytecodeError as exc:  # name the file
            raise BytecodeError(f"{args.input}: {exc.message}", exc.code) from None
        data = write_module(module, version)
        write_atomic(output, data, [args.input])
        return 0
    except TileirasError as exc:
        sys.stderr.write(exc.message + "\n")
        return int(exc.code)


def _default_output(path: str) -> str:
    if path == "-":
        return "out.tileirbc"
    base = path[:-5] if path.endswith(".mlir") else path
    return base + ".tileirbc"


if __name__ == "__main__":
    sys.exit(main())
