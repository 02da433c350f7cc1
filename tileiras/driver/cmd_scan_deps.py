"""`tileir scan-deps INPUT [-l LIB]... [-o OUT.json]`: the files a compile of INPUT reads, as JSON.

The same list `tileiras -MD` writes as a depfile: the input, the tile libraries
given with `-l`, and for a PTX input the launch metadata beside it. The input
is checked as `tileiras` checks it, with the same messages and exit codes
(1 missing, 3 not TileIR, 4 unreadable, 5 a tile library that cannot be opened).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from ..errors import ExitCode, TileirasError


def scan(input_path: str, libraries: list[str]) -> dict[str, object]:
    from ..frontend import read_input
    from .compile import input_kind
    from .tileiras_main import check_magic

    data = read_input(input_path)
    if input_kind(data, input_path) == "bytecode":
        check_magic(data, input_path)
    deps = [input_path, *libraries]
    if input_path.endswith(".ptx") and os.path.isfile(input_path + ".json"):
        deps.append(input_path + ".json")
    for path in libraries:
        if not os.path.isfile(path):
            reason = "Is a directory" if os.path.isdir(path) else "No such file or directory"
            raise TileirasError(f"error: failed to open tile library: {reason}", ExitCode.COMPILE_FAILED)
    return {"input": input_path, "dependencies": deps, "format": 1}


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise TileirasError(f"tileir scan-deps: error: {message}", ExitCode.NO_INPUT)  # a command-line error


def main(argv: list[str]) -> int:
    parser = _ArgParser(prog="tileir scan-deps", description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("-l", dest="libraries", action="append", default=[], metavar="LIB")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the JSON here instead of stdout")
    try:
        args = parser.parse_args(argv)
        text = json.dumps(scan(args.input, args.libraries), indent=2, sort_keys=True) + "\n"
        if args.output:
            from ..output import write_atomic

            write_atomic(args.output, text, [args.input, *args.libraries])
        else:
            sys.stdout.write(text)
    except TileirasError as exc:
        print(exc.message, file=sys.stderr)
        return int(exc.code)
    return 0
