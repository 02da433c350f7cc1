"""`tileir header`: write the C/C++ header declaring the launchers of a host object.

    tileir header --metadata K.sm_90.json [--metadata ...] -o K.h [--guard NAME]
"""

from __future__ import annotations

import argparse
import sys

from .cmd_package import _Parser, read_metadata
from ..errors import TileirasError
from ..output import output_target, write_atomic


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tileir header", description=__doc__.split("\n\n")[0])
    parser.add_argument("--metadata", action="append", required=True, metavar="FILE",
                        help="launch metadata JSON of one target (repeat for each target)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the header to write")
    parser.add_argument("--guard", metavar="NAME", help="include guard (default: from the output name)")
    return parser


def _current_text(path: str) -> str | None:
    from ..input_file import read_regular

    try:
        return read_regular(path, "header").decode("utf-8")  # checked as an output already: a regular file
    except (TileirasError, UnicodeDecodeError):
        return None


def main(argv: list[str]) -> int:
    from ..codegen.header import guard_from_path, make_header

    try:
        args = build_parser().parse_args(argv)
        metas = read_metadata(args.metadata)
        text = make_header(metas, args.guard or guard_from_path(args.output))
        output_target(args.output, args.metadata)  # before reading it: a FIFO there would block
        if _current_text(args.output) != text:  # an untouched header recompiles nothing that includes it
            write_atomic(args.output, text, args.metadata)
    except TileirasError as exc:
        print(exc.message, file=sys.stderr)
        return int(exc.code)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    return 0
