"""`tileiras [options] <input>`: NVIDIA-compatible compiler driver.

Reads TileIR bytecode (or its text form, or PTX to assemble), runs the
stages in `compile.py`, and writes exactly one output file atomically (plus
the depfile, header and metadata it was asked for). Every failure is a
message on stderr and an exit code from `errors.ExitCode`; no output file is
left behind.
"""

from __future__ import annotations

import os
import sys

from ..errors import BytecodeError, ExitCode, TileirasError
from .options import (BYTECODE_VERSIONS, STDOUT, Options, check_libraries, help_text, parse_args,
                      print_option_values, validate)

VERSION_TEXT = """tileiras: CUDA Tile IR optimizing assembler (Python implementation)
tileiras {version}
Accepts TileIR bytecode 13.1 - 13.5; targets sm_80 - sm_121"""


def _read_input(opts: Options) -> bytes:
    if opts.input is None:
        raise TileirasError("error: no input file provided", ExitCode.NO_INPUT)
    from ..input_file import read_regular  # not frontend.read_input: a cache hit must not import the front end

    return read_regular(opts.input)  # a regular file of bounded size: never a FIFO's wait or /dev/zero's end


MLIR_BYTECODE_MAGIC = b"ML\xefR"


def check_magic(data: bytes, path: str) -> None:
    from .compile import TILEIR_MAGIC

    if data.startswith(TILEIR_MAGIC):
        return
    hint = " (it looks like MLIR bytecode instead)" if data.startswith(MLIR_BYTECODE_MAGIC) else ""
    raise TileirasError(f"error: input '{path}' does not correspond to Tile IR bytecode{hint}", ExitCode.NOT_TILEIR)


def run(argv: list[str]) -> int:
    opts = parse_args(argv)
    if opts.help or opts.help_hidden or opts.help_list or opts.help_list_hidden:
        print(help_text(hidden=opts.help_hidden or opts.help_list_hidden,
                        as_list=opts.help_list or opts.help_list_hidden))
        return 0
    if opts.print_options or opts.print_all_options:
        print(print_option_values(opts, every=opts.print_all_options), file=sys.stderr)
    if opts.version:
        from .. import __version__

        print(VERSION_TEXT.format(version=__version__))
        return 0
    if opts.list_versions:
        print("\n".join(BYTECODE_VERSIONS))
        return 0
    if opts.input is None:
        print(help_text())  # as NVIDIA's: the usage on stdout, the error on stderr
    data = _read_input(opts)
    from .compile import StageTimer, compile_input, input_kind, render_output

    path = opts.input or ""
    if input_kind(data, path) == "bytecode":
        check_magic(data, path)  # exit 3 comes before option validation, as in NVIDIA's driver
    validate(opts)
    check_libraries(opts)
    from ..output import check_outputs

    remarks = [opts.remarks_output_file] if opts.remarks_enabled and opts.remark_format == "yaml" else []
    check_outputs(_output_paths(opts), _inputs(opts), remarks)  # before any work: refuse what writing would harm
    timer = StageTimer(opts.time_passes)
    try:
        arts = compile_input(data, path, opts, timer)
    except BytecodeError as exc:  # name the file: a build compiles many
        raise BytecodeError(f"{path}: {exc.message}", exc.code) from None
    except TileirasError as exc:  # name the file too: a build's log shows only the failing command's stderr
        raise TileirasError(failed_compile(exc.message, path), exc.code) from None
    payload = render_output(arts, opts)
    _write_outputs(opts, arts, payload)
    if arts.cache is not None:
        arts.cache.flush()  # type: ignore[attr-defined]  # cache entries after the output: off the critical path
    timer.report()
    return 0


def failed_compile(message: str, path: str) -> str:
    """`message` and a line naming the input, as NVIDIA's "failed to compile Tile IR program" (which
    names none): cuTile shows both lines, a CMake build's log shows which .tileirbc failed."""
    return f"{message}\nerror: failed to compile Tile IR program '{path}'"


def _inputs(opts: Options) -> list[str]:
    return [opts.input or "", *opts.libraries]


def _output_paths(opts: Options) -> list[str]:
    """Every file this run writes, the main output first."""
    from ..output import side_file

    out = opts.output_path
    paths = [out]
    if opts.emit_metadata:
        paths.append(side_file(out, ".json"))
    if opts.header:
        paths.append(opts.header)
    if opts.depfile_md or opts.depfile:
        paths.append(opts.depfile or side_file(out, ".d"))
    # (the remarks file is checked when written: NVIDIA reports it in its own words, exit 3)
    return [p for p in paths if p != STDOUT]


def _remarks_text(opts: Options, arts: object) -> str:
    """The remarks `--remarks*` asked for, in `--remark-format`, targets in command-line order."""
    from .. import remarks

    filters = {kind: opts.remark_filter(kind) for kind in remarks.KINDS}
    gpus = list(dict.fromkeys(opts.gpu_names))
    found = [remarks.for_target(r, gpu) if len(gpus) > 1 else r for gpu in gpus
             for r in remarks.select(arts.remarks.get(gpu, []), filters)]  # type: ignore[attr-defined]
    return remarks.to_yaml(found) if opts.remark_format == "yaml" else remarks.to_text(found)


def _write_outputs(opts: Options, arts: object, payload: bytes | str) -> None:
    """Write the output and its side files; on any failure remove what was written."""
    from ..output import side_file, write_atomic

    inputs = [*_inputs(opts), *arts.inputs_read]  # type: ignore[attr-defined]
    written: list[str | None] = []
    try:
        out = opts.output_path
        if opts.remarks_enabled and opts.remark_format == "yaml":
            try:
                written.append(write_atomic(opts.remarks_output_file, _remarks_text(opts, arts), inputs))
            except TileirasError as exc:  # NVIDIA's words and code for a remarks file it cannot open
                raise TileirasError(f"Error opening remark output file '{opts.remarks_output_file}': "
                                    f"{exc.message.rsplit(': ', 1)[-1]}\nerror: failed to enable optimization remarks",
                                    ExitCode.NOT_TILEIR) from None
        elif opts.remarks_enabled:
            sys.stdout.write(_remarks_text(opts, arts))
        if out == STDOUT:
            _write_stdout(payload)
        else:
            written.append(write_atomic(out, payload, inputs))
        gpus = list(dict.fromkeys(opts.gpu_names))
        if opts.emit_metadata and arts.metadata:  # type: ignore[attr-defined]
            from .compile import newest_gpu

            meta = arts.metadata[newest_gpu(gpus)]  # type: ignore[attr-defined]
            written.append(write_atomic(side_file(out, ".json"), meta.to_json(), inputs))
        if opts.header:
            from ..codegen.header import make_header

            from ..codegen.header import guard_from_path

            metas = [arts.metadata[g] for g in gpus]  # type: ignore[attr-defined]
            written.append(write_atomic(opts.header, make_header(metas, guard_from_path(opts.header)), inputs))
        if opts.depfile_md or opts.depfile:
            from .depfile import write_depfile

            depfile = opts.depfile or side_file(out, ".d")
            written.append(write_depfile(depfile, opts.depfile_target or out, arts.inputs_read,  # type: ignore
                                         inputs))
    except BaseException:
        for path in written:
            if path is None:  # discarded into the null device: nothing to remove
                continue
            try:
                os.unlink(path)
            except OSError:
                pass
        raise


def _write_stdout(payload: bytes | str) -> None:
    """`-o -`: the output on stdout, as NVIDIA's writes it."""
    data = payload.encode() if isinstance(payload, str) else payload
    sys.stdout.flush()
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except OSError as exc:
        from .fast_exit import closed_stdout

        if closed_stdout(exc):
            raise  # the reader went away: the run ends quietly (and removes its other outputs)
        raise TileirasError(f"error: cannot write to stdout: {exc.strerror}", ExitCode.COMPILE_FAILED) from None


def main(argv: list[str] | None = None) -> int:
    """Run on `argv`; with None (the console script, `python -m`) the process ends here."""
    if argv is None:
        import gc

        from .fast_exit import exit_now

        # a short-lived process whose IR lives to the end: collections every 700 allocations buy
        # nothing (softmax sm_90: driver CPU 166 -> 158 ms; peak memory unchanged on the largest
        # TileGym kernels), but unlike disasm's gc.disable() a pathological input still gets collected
        gc.set_threshold(100_000, 50, 100)
        exit_now(_main(sys.argv[1:]))
    return _main(list(argv))


def _main(args: list[str]) -> int:
    from .failures import one_line_failures

    return one_line_failures(lambda: run(args), "input nests too deeply to compile", "internal compiler error",
                             closed=_stdout_closed)


def _stdout_closed() -> int:
    """`tileiras --help | head -1`: end quietly, as NVIDIA's does."""
    from .fast_exit import stdout_closed

    return stdout_closed()

if __name__ == "__main__":
    sys.exit(main())
