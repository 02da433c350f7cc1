"""`tileir`: the umbrella command. Each subcommand lives in its own module.

A subcommand module exposes `main(argv: list[str]) -> int`. The table maps
the subcommand name to that module, so adding one is a one-line change and
`tileir --help` lists them all without importing any of them.
"""

from __future__ import annotations

import importlib
import sys

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    # name: (module, one-line help)
    "asm": ("tileiras.driver.cmd_asm", "assemble TileIR text into bytecode"),
    "disasm": ("tileiras.driver.disasm_main", "print TileIR bytecode as text (like tileirdisasm)"),
    "package": ("tileiras.driver.cmd_package", "bundle cubins/PTX into a fatbin and a host object with launchers"),
    "header": ("tileiras.driver.cmd_header", "write the C header of the launchers"),
    "cache": ("tileiras.driver.cmd_cache", "inspect or clean the compile cache: stats|clear|trim"),
    "scan-deps": ("tileiras.driver.cmd_scan_deps", "print the files a compile reads, as JSON"),
    "cmake-dir": ("tileiras.driver.cmd_cmake_dir", "print the directory holding TileIRConfig.cmake"),
    "run": ("tileiras.runtime.cmd_run", "run a kernel on the interpreter, emulator or a GPU"),
    "opt": ("tileiras.driver.cmd_opt", "run canonical-form passes on a module and print it (tests, reductions)"),
}


def _usage() -> str:
    lines = ["usage: tileir <command> [options]", "       tileir --version", "", "commands:"]
    width = max(len(name) for name in SUBCOMMANDS)
    for name, (_, text) in SUBCOMMANDS.items():
        lines.append(f"  {name.ljust(width)}  {text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run on `argv`; with None (the console script, `python -m`) the process ends here."""
    if argv is None:
        from .fast_exit import exit_now

        exit_now(_main(sys.argv[1:]))
    return _main(list(argv))


def _main(args: list[str]) -> int:
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 5
    except Exception as exc:  # a bug of ours in any subcommand: one line and exit 5, never a traceback
        from .fast_exit import closed_stdout, stdout_closed

        if closed_stdout(exc):
            return stdout_closed()  # `tileir ... | head -1`: end quietly, as NVIDIA's tools do
        import os

        if os.environ.get("TILEIRAS_DEBUG"):
            raise
        print(f"error: internal compiler error: {type(exc).__name__}: {exc} (set TILEIRAS_DEBUG=1 for a "
              "traceback)", file=sys.stderr)
        return 5


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help"):
        print(_usage())
        return 0 if args else 1  # no command: a command-line error, as tileiras's codes say
    if args[0] in ("--version", "-V"):  # as `tileiras --version`
        from .. import __version__

        print(f"tileir (tileiras {__version__}): CUDA Tile IR tools (Python implementation)")
        return 0
    name, rest = args[0], args[1:]
    entry = SUBCOMMANDS.get(name)
    if entry is None:
        print(f"tileir: error: unknown command '{name}'\n{_usage()}", file=sys.stderr)
        return 1
    try:
        module = importlib.import_module(entry[0])
    except ModuleNotFoundError:
        print(f"tileir: error: command '{name}' is not available in this build", file=sys.stderr)
        return 2
    return int(module.main(rest))


if __name__ == "__main__":
    sys.exit(main())
