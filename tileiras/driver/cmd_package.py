"""`tileir package`: bundle cubins (and PTX) into a fatbin and a host object with launchers.

    tileir package --metadata K.sm_90.json [--metadata ...] --cubin sm_90=K.sm_90.cubin [...]
                   [--ptx sm_90=K.sm_90.ptx] -o K.o [--host-arch x86_64] [--host-os linux]
                   [--fatbin-out K.fatbin] [--header K.h]
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ExitCode, TileirasError
from ..output import check_outputs, write_atomic


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit code is 2 already; keep its format
        self.print_usage(sys.stderr)
        raise TileirasError(f"{self.prog}: error: {message}", ExitCode.INVALID_OPTIONS)


def _pair(text: str) -> tuple[str, str]:
    gpu, sep, path = text.partition("=")
    if not sep or not gpu or not path:
        raise argparse.ArgumentTypeError(f"expected GPU=FILE (e.g. sm_90=kernel.cubin), got '{text}'")
    return gpu, path


def build_parser() -> argparse.ArgumentParser:
    from ..codegen.host_object import HOSTS

    parser = _Parser(prog="tileir package", description=__doc__.split("\n\n")[0])
    parser.add_argument("--metadata", action="append", required=True, metavar="FILE",
                        help="launch metadata JSON of one target (repeat for each target)")
    parser.add_argument("--cubin", action="append", default=[], type=_pair, metavar="GPU=FILE",
                        help="a cubin and the target it was built for")
    parser.add_argument("--ptx", action="append", default=[], type=_pair, metavar="GPU=FILE",
                        help="PTX to embed for JIT compilation on newer GPUs")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the host object to write")
    parser.add_argument("--host-arch", default="x86_64", choices=sorted({a for a, _ in HOSTS}))
    parser.add_argument("--host-os", default="linux", choices=sorted({o for _, o in HOSTS}))
    parser.add_argument("--fatbin-out", metavar="FILE", help="also write the fatbin")
    parser.add_argument("--header", metavar="FILE", help="also write the C header of the launchers")
    parser.add_argument("--cache-dir", metavar="DIR", help="compile cache directory (default: $TILEIRAS_CACHE_DIR "
                        "or the user cache directory)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the compile cache")
    return parser


def _read(path: str, what: str) -> bytes:
    from ..input_file import read_regular

    try:
        return read_regular(path, what)  # a regular file of bounded size, judged before reading
    except TileirasError as exc:
        raise TileirasError(f"error: cannot read {what} '{path}': {exc.message.rsplit(': ', 1)[-1]}",
                            ExitCode.UNREADABLE) from None


def _mapping(pairs: list[tuple[str, str]], what: str) -> dict[str, bytes]:
    result: dict[str, bytes] = {}
    for gpu, path in pairs:
        if gpu in result:
            raise TileirasError(f"error: {what} for {gpu} given twice", ExitCode.INVALID_OPTIONS)
        result[gpu] = _read(path, what)
    return result


def read_metadata(paths: list[str]) -> list:
    from ..codegen.metadata import ModuleMetadata

    metas = []
    for path in paths:
        try:
            metas.append(ModuleMetadata.from_json(_read(path, "metadata")))
        except TileirasError as exc:
            if exc.code == ExitCode.UNREADABLE:
                raise
            raise TileirasError(f"{exc.message} (in '{path}')", exc.code) from None
    return metas


def run(args: argparse.Namespace) -> None:
    from ..codegen.header import guard_from_path, make_header

    inputs = [*args.metadata, *(path for _, path in args.cubin + args.ptx)]
    check_outputs([o for o in (args.fatbin_out, args.header, args.output) if o], inputs)
    metas = read_metadata(args.metadata)
    cubins = _mapping(args.cubin, "cubin")
    ptx_bytes = _mapping(args.ptx, "PTX")
    try:
        ptx = {gpu: data.decode("utf-8") for gpu, data in ptx_bytes.items()}
    except UnicodeDecodeError:
        raise TileirasError("error: a PTX file is not UTF-8 text", ExitCode.UNREADABLE) from None
    if not cubins and not ptx:
        raise TileirasError("error: give at least one --cubin or --ptx", ExitCode.INVALID_OPTIONS)
    from ..cache.store import open_cache
    from .package import package_object

    cache = open_cache(args.cache_dir, disabled=args.no_cache)
    fatbin, obj = package_object(cubins, ptx, metas, args.host_arch, args.host_os, cache)
    header = make_header(metas, guard_from_path(args.header)) if args.header else None
    if args.fatbin_out:
        write_atomic(args.fatbin_out, fatbin, inputs)
    if header is not None:
        write_atomic(args.header, header, inputs)
    write_atomic(args.output, obj, inputs)


def main(argv: list[str]) -> int:
    try:
        run(build_parser().parse_args(argv))
    except TileirasError as exc:
        print(exc.message, file=sys.stderr)
        return int(exc.code)
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    return 0
