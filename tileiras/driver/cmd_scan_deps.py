"""`tileir scan-deps INPUT [-l LIB]... [-o OUT.json]`: the files a compile of INPUT reads, as JSON.

The same list `tileiras -MD` writes as a depfile: the input, the tile libraries
given with `-l`, and for a PTX input the launch metadata beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import ExitCode, TileirasError


def scan(input_path: str, libraries: list[str]) -> dict[str, object]:
    if not os.path.isfile(input_path):
        raise TileirasError(f"error: unable to read input file '{input_path}': No such file or directory",
                            ExitCode.NO_INPUT)
    deps = [input_path, *libraries]
    if input_path.endswith(".ptx") and os.path.isfile(input_path + ".json"):
        deps.append(input_path + ".json")
    missing = [d for d in libraries if not os.path.isfile(d)]
    if missing:
        raise TileirasError(f"error: unable to read tile library '{missing[0]}'", ExitCode.UNREADABLE)
    return {"input": input_path, "dependencies": deps, "format": 1}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tileir scan-deps", description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("-l", dest="libraries", action="append", default=[], metavar="LIB")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the JSON here instead of stdout")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) and int(ExitCode.INVALID_OPTIONS)
    try:
        text = json.dumps(scan(args.input, args.libraries), indent=2, sort_keys=True) + "\n"
        if args.output:
            from .output import write_atomic

            write_atomic(args.output, text, [args.input, *args.libraries])
        else:
            sys.stdout.write(text)
    except TileirasError as exc:
        print(exc.message, file=sys.stderr)
        return int(exc.code)
    return 0
