"""`tileir cache stats|clear|trim [--cache-dir DIR] [--max-size SIZE]`: inspect or clean the compile cache."""

from __future__ import annotations

import argparse
import sys

from .cmd_package import _Parser
from ..errors import ExitCode, TileirasError


def _size(text: str) -> int:
    from ..cache.store import parse_size

    try:
        return parse_size(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: '{text}' (examples: 1048576, 500M, 2G)") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tileir cache", description=__doc__)
    parser.add_argument("action", choices=("stats", "clear", "trim"))
    parser.add_argument("--cache-dir", metavar="DIR", help="cache directory (default: $TILEIRAS_CACHE_DIR or "
                                                           "the user cache directory)")
    parser.add_argument("--max-size", type=_size, metavar="SIZE",
                        help="size limit for trim (default: $TILEIRAS_CACHE_MAX_SIZE or 1G)")
    return parser


def main(argv: list[str]) -> int:
    from ..cache.store import Cache, default_cache_dir

    try:
        args = build_parser().parse_args(argv)
        cache = Cache(args.cache_dir or default_cache_dir(), args.max_size)
        if args.action == "stats":
            sys.stdout.write(cache.stats().render())
        elif args.action == "clear":
            print(f"removed {cache.clear()} entries from {cache.root}")
        else:
            removed = cache.trim()
            stats = cache.stats()
            print(f"removed {removed} entries; {stats.entries} entries, {stats.bytes} bytes left in {cache.root}")
        if cache.problems:  # what could not be removed (another user's files, a read-only mount)
            print(f"tileir cache: {cache.problems[0]}" + (f" (and {len(cache.problems) - 1} more)"
                                                          if len(cache.problems) > 1 else ""), file=sys.stderr)
            return int(ExitCode.COMPILE_FAILED)
    except TileirasError as exc:
        print(exc.message, file=sys.stderr)
        return int(exc.code)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except OSError as exc:
        from .fast_exit import closed_stdout

        if closed_stdout(exc):
            raise  # `tileir cache stats | head -1`: tileir ends quietly
        print(f"error: {exc}", file=sys.stderr)
        return int(ExitCode.COMPILE_FAILED)
    return 0
