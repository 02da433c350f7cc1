"""`tileirdisasm FILE`: print TileIR bytecode as text, like NVIDIA's tool.

Options, messages and exit codes follow NVIDIA's `tileirdisasm` (an LLVM
command line): `-g`/`--print-debug-info[=bool]`, `--preview=simt`, the
`--help*` family and `--version`; 0 on success, 1 for a bad command line,
2 for a missing or unreadable input, 3 for input that is not valid TileIR
bytecode (including modules that fail verification).
"""

from __future__ import annotations

import gc
import os
import sys

from .fast_exit import exit_now

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotation-only names; typing is not imported at run time
    from typing import Optional

TOOL = "tileirdisasm"
PREVIEW_FEATURES = ("simt",)

_HELP_HEAD = (f"OVERVIEW: {TOOL}: NVIDIA (R) Cuda Tile IR disassembler\n\n"
              f"USAGE: {TOOL} [options] <tile bytecode file>\n\nOPTIONS:\n")
_OPT = {
    "-g": "Alias for --print-debug-info",
    "-h": "Alias for --help",
    "--help": "Display available options (--help-hidden for more)",
    "--help-hidden": "Display all available options",
    "--help-list": "Display list of available options (--help-list-hidden for more)",
    "--help-list-hidden": "Display list of all available options",
    "--preview=<feature[,feature...]>": "Enable one or more named preview features",
    "--print-all-options": "Print all option values after command line parsing",
    "--print-debug-info": "Annotate disassembly with debugging information, if present.",
    "--print-options": "Print non-default options after command line parsing",
    "--version": "Display the version of this program",
}


def _line(opt: str) -> str:
    return f"  {opt.ljust(32)} - {_OPT[opt]}\n"


def help_text(hidden: bool = False, listed: bool = False) -> str:
    if listed:
        opts = ["-g", "--help", "--preview=<feature[,feature...]>", "--print-debug-info", "--version"]
        if hidden:
            opts = ["-g", "-h", "--help", "--help-hidden", "--help-list", "--help-list-hidden",
                    "--preview=<feature[,feature...]>", "--print-all-options", "--print-debug-info",
                    "--print-options", "--version"]
        return _HELP_HEAD + "".join(_line(o) for o in opts)
    generic = ["--help", "--help-list", "--version"]
    if hidden:
        generic = ["-h", "--help", "--help-hidden", "--help-list", "--help-list-hidden", "--print-all-options",
                   "--print-options", "--version"]
    own = ["-g", "--preview=<feature[,feature...]>", "--print-debug-info"]
    return (_HELP_HEAD + "\nGeneric Options:\n\n" + "".join(_line(o) for o in generic)
            + "\nTileIR Disassembler Options:\n\n" + "".join(_line(o) for o in own))


def version_text() -> str:
    from .. import __version__ as ver  # type: ignore[attr-defined]

    return (f"{TOOL}: Cuda Tile IR disassembler (tileiras {ver})\n"
            "Reads TileIR bytecode versions 13.1 - 13.5\n")


_BOOL = {"": True, "true": True, "TRUE": True, "True": True, "1": True,
         "false": False, "FALSE": False, "False": False, "0": False}
_KNOWN = ("g", "h", "help", "help-hidden", "help-list", "help-list-hidden", "print-all-options",
          "print-debug-info", "print-options", "preview", "version")


def _suggest(name: str) -> Optional[str]:
    def dist(a: str, b: str) -> int:
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]

    best = min(_KNOWN, key=lambda k: dist(name, k))
    return best if dist(name, best) <= 2 else None


class _Usage(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def _parse(argv: list[str], prog: str) -> dict:
    opts = {"debug": False, "inputs": [], "action": None}
    only_positional = False
    for arg in argv:
        if only_positional or not arg.startswith("-") or arg == "-":
            opts["inputs"].append(arg)
            continue
        if arg == "--":
            only_positional = True
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if name in ("g", "print-debug-info"):
            if value not in _BOOL:
                raise _Usage(f"{TOOL}: for the -{name} option: '{value}' is invalid value for boolean argument! "
                             "Try 0 or 1")
            opts["debug"] = _BOOL[value]
        elif name == "preview":
            for feat in value.split(","):
                if feat not in PREVIEW_FEATURES:
                    raise _Usage(f"{TOOL}: for the --preview option: unknown preview feature '{feat}'; "
                                 f"supported features: {', '.join(PREVIEW_FEATURES)}")
        elif name in ("help", "h", "help-hidden", "help-list", "help-list-hidden", "version") and not eq:
            opts["action"] = opts["action"] or name
        elif name in ("print-options", "print-all-options") and not eq:
            pass
        else:
            hint = _suggest(name)
            msg = f"{TOOL}: Unknown command line argument '{arg}'.  Try: '{prog} --help'"
            if hint:
                msg += f"\n{TOOL}: Did you mean '{'-' if len(hint) == 1 else '--'}{hint}'?"
            raise _Usage(msg)
    return opts


def main(argv: Optional[list[str]] = None) -> int:
    """Run on `argv`; with None (the console script, `python -m`) the process ends here."""
    if argv is None:
        gc.disable()  # a short-lived process: collections during import and reading buy nothing
        return exit_now(_run(sys.argv[1:]))
    return _run(list(argv))


def _run(args: list[str]) -> int:
    prog = sys.argv[0] if sys.argv and sys.argv[0] else TOOL
    try:
        opts = _parse(args, prog)
    except _Usage as exc:
        sys.stderr.write(exc.message + "\n")
        return exc.code
    action = opts["action"]
    if action in ("help", "h", "help-hidden", "help-list", "help-list-hidden"):
        sys.stdout.write(help_text(hidden=action.endswith("hidden"), listed="list" in action))
        return 0
    if action == "version":
        sys.stdout.write(version_text())
        return 0
    inputs = opts["inputs"]
    if len(inputs) > 1:
        sys.stderr.write(f"{TOOL}: Too many positional arguments specified!\n"
                         f"Can specify at most 1 positional arguments: See: {prog} --help\n")
        return 1
    if not inputs:
        sys.stdout.write(help_text(listed=True))
        sys.stderr.write("error: no input file provided\n\n")
        return 2
    path = inputs[0]
    from ..errors import TileirasError
    from ..input_file import read_regular

    try:
        data = read_regular(path)  # a regular file of bounded size: never a FIFO's wait or /dev/zero's end
    except TileirasError as exc:
        sys.stderr.write(f"error: error: unable to read input file '{path}': {exc.message.rsplit(': ', 1)[-1]}\n\n")
        return 2
    return _disassemble(data, path, opts["debug"])


def _disassemble(data: bytes, path: str, debug: bool) -> int:
    from ..errors import TileirasError
    from ..frontend import MLIR_HINT, MLIR_MAGIC, NOT_TILEIR, TILEIR_MAGIC

    if not data.startswith(TILEIR_MAGIC):
        hint = MLIR_HINT if data.startswith(MLIR_MAGIC) else ""
        sys.stderr.write(NOT_TILEIR + hint + "\n")
        return 3
    try:
        from ..bytecode.reader import read_module
        from ..dialects.verifier import verify_module
        from ..text.printer import print_module

        module = read_module(data, path)
        try:
            verify_module(module)
        except TileirasError as exc:
            raise TileirasError(exc.message + "\nerror: verification failed for deserialized cuda_tile::ModuleOp"
                                "\nerror: failed to read provided Tile IR bytecode", 3) from None
        text = print_module(module, debug_info=debug)
    except TileirasError as exc:
        sys.stderr.write(exc.message + "\n")
        return 3 if int(exc.code) in (3, 5) else int(exc.code)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `tileirdisasm k.tileirbc | head`: end quietly, as NVIDIA's does
        from .fast_exit import stdout_closed

        return stdout_closed()
    return 0


if __name__ == "__main__":
    sys.exit(main())
